/* op_loss.c - losses, each a scalar mean over the batch: softmax
 * cross-entropy from logits with class-index labels (softmax fused in, the
 * probabilities kept for backward), binary cross-entropy with logits, and
 * mean squared error; and the cross-entropy of a sequence, the mean over
 * the tokens whose label is not ignored (softmax fused in, the row's
 * log-sum-exp kept for backward). Terms go to aux space, one work-group
 * sums them. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>

/* Kernel slots of every loss: its terms (forward), its gradient, the sum. */
enum { LOSS_K_TERMS, LOSS_K_BACKWARD, LOSS_K_SUM };
#define LOSS_KERNELS(TERMS, BACKWARD) NNCL_KERNELS({"loss", TERMS}, {"loss", BACKWARD}, {"loss", "nncl_sum_scalar_f32"})

static nncl_status loss_sum(nncl__exec *ex, const nncl_node *n, nncl__view terms, size_t count, double scale,
                            nncl__view out) {
    return nncl__k_sum_scalar(nncl__kl_of(ex, n, LOSS_K_SUM), terms, count, (float)scale, out);
}

static void loss_scalar(nncl_node *n) {
    n->batched = 0;
    n->ndim = 1;
    n->shape[0] = 1;
}

static nncl_status loss_same_shape(nncl_graph *g, nncl_node *n) {
    char s1[64], s2[64];
    if (!nncl__same_shape(n->in[0], n->in[1]))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": prediction %s and target %s differ",
                                 nncl__opdef_get(n->op)->name, n->name, nncl__shape_str(n->in[0], s1, sizeof s1),
                                 nncl__shape_str(n->in[1], s2, sizeof s2));
    loss_scalar(n);
    return NNCL_OK;
}

/* ------------------------------------------------------------- softmax CE */

static nncl_status ce_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *z = n->in[0], *y = n->in[1];
    char s1[64], s2[64];
    if (!z->batched || z->ndim != 2 || !y->batched || y->sample_numel != 1)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "softmax_cross_entropy \"%s\": logits must be [B,C] and labels [B], got %s and %s",
                                 n->name, nncl__shape_str(z, s1, sizeof s1), nncl__shape_str(y, s2, sizeof s2));
    loss_scalar(n);
    return NNCL_OK;
}

/* probabilities [B, C] then per-row terms [B] */
static size_t ce_aux(const nncl_node *n, int batch) { return (n->in[0]->sample_numel + 1) * (size_t)batch; }

static nncl_status ce_forward(nncl__exec *ex, nncl_node *n) {
    int C = n->in[0]->shape[1], B = ex->batch;
    nncl__view probs = nncl__auxv(ex, n), terms = probs;
    terms.off += (size_t)B * (size_t)C;
    NNCL_TRY(nncl__k_ce_rows(nncl__kl_of(ex, n, LOSS_K_TERMS), nncl__val(ex, n->in[0]), nncl__val(ex, n->in[1]), probs,
                             terms, (size_t)B, (size_t)C));
    return loss_sum(ex, n, terms, (size_t)B, 1.0 / B, nncl__val(ex, n));
}

static nncl_status ce_backward(nncl__exec *ex, nncl_node *n) {
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    return nncl__k_ce_backward(nncl__kl_of(ex, n, LOSS_K_BACKWARD), nncl__auxv(ex, n), nncl__val(ex, n->in[1]),
                               nncl__grd(ex, n), nncl__grd(ex, n->in[0]), (size_t)ex->batch,
                               (size_t)n->in[0]->shape[1], nncl__grad_accumulate(ex, n, 0));
}

static void ce_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out, double *aux) {
    int C = n->in[0]->shape[1], b, c;
    double total = 0;
    for (b = 0; b < r->batch; b++) {
        const double *z = in[0] + (size_t)b * C;
        double m = z[0], s = 0;
        int y = (int)in[1][b];
        for (c = 1; c < C; c++) m = z[c] > m ? z[c] : m;
        for (c = 0; c < C; c++) s += exp(z[c] - m);
        for (c = 0; c < C; c++) aux[(size_t)b * C + c] = exp(z[c] - m) / s;
        total += (y >= 0 && y < C) ? log(s) + m - z[y] : NAN;
    }
    out[0] = total / r->batch;
}

static void ce_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    int C = n->in[0]->shape[1], b, c;
    (void)out;
    if (!gin[0]) return;
    for (b = 0; b < r->batch; b++)
        for (c = 0; c < C; c++)
            gin[0][(size_t)b * C + c] += gout[0] * (aux[(size_t)b * C + c] - (c == (int)in[1][b])) / r->batch;
}

nncl_status nncl__check_labels(nncl_context *ctx, const nncl_node *labels, int C, const float *y, int n) {
    int b;
    for (b = 0; b < n; b++)
        if (!(y[b] >= 0 && y[b] < C && y[b] == floorf(y[b])))
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "labels \"%s\"[%d] = %g is not a class index in 0..%d",
                              labels->name, b, (double)y[b], C - 1);
    return NNCL_OK;
}

/* The labels (input 1) must be class indices of the logits' C classes: an
 * index out of range would read past a row on the device. */
static nncl_status ce_check_feed(nncl_context *ctx, const nncl_node *n, int in, const float *data, int batch) {
    return in == 1 ? nncl__check_labels(ctx, n->in[1], n->in[0]->shape[1], data, batch) : NNCL_OK;
}

const nncl__opdef nncl__opdef_softmax_ce = {
    .name = "softmax_cross_entropy",
    LOSS_KERNELS("nncl_softmax_ce_rows_f32", "nncl_softmax_ce_backward_f32"), .shape = ce_shape,
    .aux_size = ce_aux, .forward = ce_forward, .backward = ce_backward, .bw_reads = NNCL_BW_INPUTS,
    .ref_forward = ce_ref_forward, .ref_backward = ce_ref_backward, .check_feed = ce_check_feed,
    .half = 1, .f32_in = 2, .f32_out = 1};

/* ------------------------------------------------------------- sequence CE */

/* logits [B, .., V], labels [B, ..] (the logits' shape without V); iattr[0]
 * the ignored label. aux: log-sum-exp [rows], terms [rows], 1 where the
 * label counts [rows], then the count. The loss is the mean of the counted
 * terms, 0 when no label counts (and so are the gradients). */
enum { SEQ_K_ROWS, SEQ_K_SUM, SEQ_K_BACKWARD, SEQ_K_ROWS_ITEM };

static size_t seq_rows(const nncl_node *n, int batch) { return nncl__numel(n->in[1], batch); }

static nncl_status seq_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *z = n->in[0], *y = n->in[1];
    char s1[64], s2[64];
    int i, ok = z->batched && y->batched && z->ndim >= 2 && y->ndim == z->ndim - 1;
    for (i = 1; ok && i < y->ndim; i++) ok = y->shape[i] == z->shape[i];
    if (!ok)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "sequence_cross_entropy \"%s\": logits %s and labels %s are not [B,..,V] and [B,..]",
                                 n->name, nncl__shape_str(z, s1, sizeof s1), nncl__shape_str(y, s2, sizeof s2));
    loss_scalar(n);
    return NNCL_OK;
}

static size_t seq_aux(const nncl_node *n, int batch) { return 3 * seq_rows(n, batch) + 1; }

static nncl_status seq_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t rows = seq_rows(n, ex->batch);
    int V = n->in[0]->shape[n->in[0]->ndim - 1];
    int per_row = nncl__row_kernels(ex);
    NNCL_TRY(nncl__kbegin(ex, n, per_row ? SEQ_K_ROWS_ITEM : SEQ_K_ROWS, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, V);
    nncl__arg_int(&a, n->iattr[0]);
    NNCL_TRY(per_row ? nncl__launch_1d(&a, ex->dev, rows) : nncl__launch_rows(&a, ex->dev, rows, (size_t)V));
    NNCL_TRY(nncl__kbegin(ex, n, SEQ_K_SUM, &a));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_view(&a, nncl__val(ex, n));
    return nncl__launch_rows(&a, ex->dev, 1, rows);
}

static nncl_status seq_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t rows = seq_rows(n, ex->batch);
    int V = n->in[0]->shape[n->in[0]->ndim - 1];
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, SEQ_K_BACKWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, V);
    nncl__arg_int(&a, n->iattr[0]);
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    return nncl__launch_1d(&a, ex->dev, rows * (size_t)V);
}

static void seq_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    size_t rows = seq_rows(n, r->batch), i;
    int V = n->in[0]->shape[n->in[0]->ndim - 1], c;
    double total = 0, count = 0;
    for (i = 0; i < rows; i++) {
        const double *z = in[0] + i * (size_t)V;
        double m = z[0], s = 0, y = in[1][i];
        for (c = 1; c < V; c++) m = z[c] > m ? z[c] : m;
        for (c = 0; c < V; c++) s += exp(z[c] - m);
        aux[i] = m + log(s);
        if (y == n->iattr[0]) continue;
        total += (y >= 0 && y < V) ? aux[i] - z[(int)y] : NAN;
        count += 1;
    }
    aux[3 * rows] = count;
    out[0] = count > 0 ? total / count : 0;
}

static void seq_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    size_t rows = seq_rows(n, r->batch), i;
    int V = n->in[0]->shape[n->in[0]->ndim - 1], c;
    double count = aux[3 * rows];
    (void)out;
    if (!gin[0]) return;
    for (i = 0; i < rows; i++) {
        if (in[1][i] == n->iattr[0]) continue;
        for (c = 0; c < V; c++)
            gin[0][i * (size_t)V + c] +=
                gout[0] * (exp(in[0][i * (size_t)V + c] - aux[i]) - (c == (int)in[1][i])) / count;
    }
}

/* Labels (input 1) are class indices of the V classes or the ignored one. */
static nncl_status seq_check_feed(nncl_context *ctx, const nncl_node *n, int in, const float *data, int batch) {
    size_t count = seq_rows(n, batch), i;
    int V = n->in[0]->shape[n->in[0]->ndim - 1];
    if (in != 1) return NNCL_OK;
    for (i = 0; i < count; i++)
        if (!(data[i] == (float)n->iattr[0] || (data[i] >= 0 && data[i] < V && data[i] == floorf(data[i]))))
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "labels \"%s\"[%zu] = %g is neither a class index in 0..%d nor the ignored %d",
                              n->in[1]->name, i, (double)data[i], V - 1, n->iattr[0]);
    return NNCL_OK;
}

const nncl__opdef nncl__opdef_sequence_ce = {
    .name = "sequence_cross_entropy",
    NNCL_KERNELS({"loss", "nncl_seq_ce_rows_f32"}, {"loss", "nncl_seq_ce_sum_f32"},
                {"loss", "nncl_seq_ce_backward_f32"}, {"loss", "nncl_seq_ce_rows_f32_rows"}),
    .shape = seq_shape, .aux_size = seq_aux, .forward = seq_forward, .backward = seq_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = seq_ref_forward, .ref_backward = seq_ref_backward,
    .check_feed = seq_check_feed, .half = 1, .f32_in = 2, .f32_out = 1};

/* ------------------------------------------------------------- BCE and MSE */

static size_t pair_aux(const nncl_node *n, int batch) { return nncl__numel(n->in[0], batch); }

static nncl_status pair_forward(nncl__exec *ex, nncl_node *n) {
    size_t count = nncl__numel(n->in[0], ex->batch);
    NNCL_TRY(nncl__k_pair_terms(nncl__kl_of(ex, n, LOSS_K_TERMS), nncl__val(ex, n->in[0]), nncl__val(ex, n->in[1]),
                                nncl__auxv(ex, n), count));
    return loss_sum(ex, n, nncl__auxv(ex, n), count, 1.0 / (double)count, nncl__val(ex, n));
}

static nncl_status pair_backward(nncl__exec *ex, nncl_node *n) {
    size_t count = nncl__numel(n->in[0], ex->batch);
    int want0 = nncl__need_grad(ex, n, 0), want1 = nncl__need_grad(ex, n, 1), acc0, acc1;
    nncl__view g0 = want0 ? nncl__grd(ex, n->in[0]) : nncl__grd(ex, n);
    nncl__view g1 = want1 ? nncl__grd(ex, n->in[1]) : nncl__grd(ex, n);
    if (!want0 && !want1) return NNCL_OK;
    acc0 = want0 ? nncl__grad_accumulate(ex, n, 0) : 0;
    acc1 = want1 ? nncl__grad_accumulate(ex, n, 1) : 0;
    return nncl__k_pair_backward(nncl__kl_of(ex, n, LOSS_K_BACKWARD), nncl__val(ex, n->in[0]), nncl__val(ex, n->in[1]),
                                 nncl__grd(ex, n), g0, acc0, g1, acc1, want0, want1, count);
}


/* A pair loss in double for the host reference: the mean over elements of
 * term(x, t), and the term's derivatives in x and t. */
typedef struct pair_impl {
    double (*term)(double x, double t);
    void (*grad)(double x, double t, double *dx, double *dt);
} pair_impl;

static double bce_term(double v, double t) { return (v > 0 ? v : 0) - v * t + log1p(exp(-fabs(v))); }
static void bce_grad(double v, double t, double *dv, double *dt) {
    *dv = 1 / (1 + exp(-v)) - t;
    *dt = -v;
}
static double mse_term(double p, double t) { return (p - t) * (p - t); }
static void mse_grad(double p, double t, double *dp, double *dt) {
    *dp = 2 * (p - t);
    *dt = -*dp;
}
static const pair_impl bce_impl = {bce_term, bce_grad};
static const pair_impl mse_impl = {mse_term, mse_grad};

static void pair_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                             double *aux) {
    const pair_impl *f = (const pair_impl *)nncl__opdef_get(n->op)->impl;
    size_t count = nncl__numel(n->in[0], r->batch), i;
    double s = 0;
    (void)aux;
    for (i = 0; i < count; i++) s += f->term(in[0][i], in[1][i]);
    out[0] = s / (double)count;
}

static void pair_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                              const double *gout, double *const *gin, double *aux) {
    const pair_impl *f = (const pair_impl *)nncl__opdef_get(n->op)->impl;
    size_t count = nncl__numel(n->in[0], r->batch), i;
    (void)out; (void)aux;
    for (i = 0; i < count; i++) {
        double dx, dt;
        f->grad(in[0][i], in[1][i], &dx, &dt);
        if (gin[0]) gin[0][i] += gout[0] * dx / (double)count;
        if (gin[1]) gin[1][i] += gout[0] * dt / (double)count;
    }
}

const nncl__opdef nncl__opdef_bce_logits = {
    .name = "bce_with_logits", LOSS_KERNELS("nncl_bce_terms_f32", "nncl_bce_backward_f32"),
    .shape = loss_same_shape, .aux_size = pair_aux, .forward = pair_forward, .backward = pair_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = pair_ref_forward, .ref_backward = pair_ref_backward, .impl = &bce_impl,
    .half = 1, .f32_in = 2, .f32_out = 1};
const nncl__opdef nncl__opdef_mse = {
    .name = "mse", LOSS_KERNELS("nncl_mse_terms_f32", "nncl_mse_backward_f32"), .shape = loss_same_shape,
    .aux_size = pair_aux, .forward = pair_forward, .backward = pair_backward, .bw_reads = NNCL_BW_INPUTS,
    .ref_forward = pair_ref_forward, .ref_backward = pair_ref_backward, .impl = &mse_impl, .half = 1, .f32_in = 2,
    .f32_out = 1};

nncl_node *nncl_softmax_cross_entropy(nncl_graph *g, nncl_node *logits, nncl_node *labels) {
    nncl_node *in[2];
    in[0] = logits;
    in[1] = labels;
    return nncl__node_add(g, NNCL_OP_SOFTMAX_CE, NULL, 2, in, NULL, 0, NULL, 0);
}

nncl_node *nncl_bce_with_logits(nncl_graph *g, nncl_node *logits, nncl_node *targets) {
    nncl_node *in[2];
    in[0] = logits;
    in[1] = targets;
    return nncl__node_add(g, NNCL_OP_BCE_LOGITS, NULL, 2, in, NULL, 0, NULL, 0);
}

nncl_node *nncl_mse(nncl_graph *g, nncl_node *pred, nncl_node *target) {
    nncl_node *in[2];
    in[0] = pred;
    in[1] = target;
    return nncl__node_add(g, NNCL_OP_MSE, NULL, 2, in, NULL, 0, NULL, 0);
}

#undef LOSS_KERNELS

/* Labels are whole numbers in 0..V-1, or ignore_index (PyTorch's default
 * is -100). Data parallel: each device takes the mean over its shard's
 * counted tokens and the trainer weights shards by their samples, which is
 * the global mean when every sample counts as many tokens (no ignored
 * labels, or as many per sample). */
nncl_node *nncl_sequence_cross_entropy(nncl_graph *g, nncl_node *logits, nncl_node *labels, int ignore_index) {
    nncl_node *in[2];
    int iattr[1];
    if (ignore_index < -(1 << 24) || ignore_index > (1 << 24))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_sequence_cross_entropy: ignore_index %d is not within +-2^24 (labels are floats)",
                                ignore_index);
    in[0] = logits;
    in[1] = labels;
    iattr[0] = ignore_index;
    return nncl__node_add(g, NNCL_OP_SEQ_CE, NULL, 2, in, iattr, 1, NULL, 0);
}
