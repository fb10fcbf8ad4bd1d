/* op_norm.c - batch normalisation (per channel over the batch and spatial
 * positions, with PyTorch's running statistics in the graph's state buffer)
 * and layer normalisation (per row over the last dimension), each with a
 * learnable NAME.weight (ones) and NAME.bias (zeros; layer norm may go
 * without), and RMS normalisation (per row, NAME.weight alone). Kernels:
 * cl/norm.cl. */
#include "graph/graph.h"
#include <math.h>
#include <stdio.h>

/* fattr of both: [0] eps, [1] momentum (batch norm). */

/* Kernel slots (cl/norm.cl), in the order of the rows' kernel lists. */
enum { BN_K_STATS, BN_K_EVAL_STATS, BN_K_APPLY, BN_K_GRAD_STATS, BN_K_DX };
enum { LN_K_FORWARD, LN_K_DX, LN_K_DWDB };
enum { RMS_K_FORWARD, RMS_K_DX, RMS_K_DW };

/* Whether input i of n is there and needs a gradient. */
static int norm_want(nncl__exec *x, const nncl_node *n, int i) { return i < n->n_in && nncl__need_grad(x, n, i); }

/* Begins the kernel in slot that sums the weight and bias gradients of a
 * norm node (nncl_batchnorm_backward_f32_params, nncl_layernorm_backward_f32_params), with their shared
 * leading arguments: x, dy, aux, then dw, want_w, acc_w, db, want_b, acc_b
 * (aux stands in for a gradient not wanted). */
static nncl_status norm_begin_param_grads(nncl__exec *x, nncl_node *n, int slot, nncl__args *a) {
    int want_w = norm_want(x, n, 1), want_b = norm_want(x, n, 2);
    NNCL_TRY(nncl__kbegin(x, n, slot, a));
    nncl__arg_view(a, nncl__val(x, n->in[0]));
    nncl__arg_view(a, nncl__grd(x, n));
    nncl__arg_view(a, nncl__auxv(x, n));
    nncl__arg_view(a, want_w ? nncl__grd(x, n->in[1]) : nncl__auxv(x, n));
    nncl__arg_int(a, want_w);
    nncl__arg_int(a, want_w ? nncl__grad_accumulate(x, n, 1) : 0);
    nncl__arg_view(a, want_b ? nncl__grd(x, n->in[2]) : nncl__auxv(x, n));
    nncl__arg_int(a, want_b);
    nncl__arg_int(a, want_b ? nncl__grad_accumulate(x, n, 2) : 0);
    return NNCL_OK;
}

/* A norm layer's node over `features` with its weight and (bias 1) bias,
 * NAME.weight ones and NAME.bias zeros, as PyTorch initialises them (in[1],
 * in[2]); a refused node takes them back. */
static nncl_node *norm_node(nncl_graph *g, nncl__op op, const char *name, int features, int bias, nncl_node **in,
                            const float *fattr, int n_fattr) {
    char wn[NNCL_NAME_MAX + 16], bn[NNCL_NAME_MAX + 16];
    int keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    in[1] = nncl_param(g, wn, 1, &features, NNCL_INIT_ONES, 0);
    in[2] = in[1] && bias ? nncl_param(g, bn, 1, &features, NNCL_INIT_ZEROS, 0) : NULL;
    return nncl__layer_add(g, keep, op, name, bias ? 3 : 2, in, NULL, 0, fattr, n_fattr);
}

/* ------------------------------------------------------------- batch norm */

/* x [B, C, ...]: C = shape[1], inner = the product of the rest. */
static int bn_channels(const nncl_node *n) { return n->in[0]->shape[1]; }

static int bn_inner(const nncl_node *n) {
    const nncl_node *xin = n->in[0];
    int i, inner = 1;
    for (i = 2; i < xin->ndim; i++) inner *= xin->shape[i];
    return inner;
}

static nncl_status bn_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0], *w = n->in[1], *b = n->in[2];
    char s1[64], s2[64];
    int i;
    if (!xin->batched || xin->ndim < 2 || xin->ndim > 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "batchnorm \"%s\": input %s must be [B,C], [B,C,L] or [B,C,H,W]",
                                 n->name, nncl__shape_str(xin, s1, sizeof s1));
    if (w->ndim != 1 || b->ndim != 1 || w->shape[0] != xin->shape[1] || b->shape[0] != xin->shape[1])
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "batchnorm \"%s\": input %s has %d channels, weight is %s",
                                 n->name, nncl__shape_str(xin, s1, sizeof s1), xin->shape[1],
                                 nncl__shape_str(w, s2, sizeof s2));
    n->batched = 1;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    n->state_size = 2 * (size_t)xin->shape[1]; /* running mean [C], running var [C] */
    return NNCL_OK;
}

/* aux: mean [C], invstd [C] (from forward), sum dy [C], sum dy*xhat [C]
 * (backward scratch). */
static size_t bn_aux(const nncl_node *n, int batch) {
    (void)batch;
    return 4 * (size_t)bn_channels(n);
}

static nncl_status bn_forward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int C = bn_channels(n), inner = bn_inner(n), B = x->batch;
    size_t total = nncl__numel(n, B);
    nncl__view st;
    st.mem = x->state;
    st.off = n->state_off;
    if (x->training) {
        NNCL_TRY(nncl__kbegin(x, n, BN_K_STATS, &a));
        nncl__arg_view(&a, nncl__val(x, n->in[0]));
        nncl__arg_view(&a, nncl__auxv(x, n));
        nncl__arg_view(&a, st);
        nncl__arg_int(&a, B);
        nncl__arg_int(&a, C);
        nncl__arg_int(&a, inner);
        /* synchronised: the running statistics move on the host, from the global batch */
        nncl__arg_float(&a, x->sync ? 0.0f : n->fattr[1]);
        nncl__arg_float(&a, n->fattr[0]);
        NNCL_TRY(nncl__launch_rows(&a, x->dev, (size_t)C, (size_t)B * (size_t)inner));
        if (x->sync) NNCL_TRY(x->sync(x, n, 0, x->sync_user));
    } else {
        NNCL_TRY(nncl__kbegin(x, n, BN_K_EVAL_STATS, &a));
        nncl__arg_view(&a, nncl__auxv(x, n));
        nncl__arg_view(&a, st);
        nncl__arg_int(&a, C);
        nncl__arg_float(&a, n->fattr[0]);
        NNCL_TRY(nncl__launch_1d(&a, x->dev, (size_t)C));
    }
    NNCL_TRY(nncl__kbegin(x, n, BN_K_APPLY, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__val(x, n->in[2]));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_int(&a, C);
    nncl__arg_int(&a, inner);
    nncl__arg_int(&a, (int)total);
    return nncl__launch_1d(&a, x->dev, total);
}

static nncl_status bn_backward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int C = bn_channels(n), inner = bn_inner(n), B = x->batch;
    int want_x = nncl__need_grad(x, n, 0), want_w = nncl__need_grad(x, n, 1), want_b = nncl__need_grad(x, n, 2);
    size_t total = nncl__numel(n, B);
    if (want_w || want_b || (want_x && x->training)) {
        NNCL_TRY(norm_begin_param_grads(x, n, BN_K_GRAD_STATS, &a));
        nncl__arg_int(&a, B);
        nncl__arg_int(&a, C);
        nncl__arg_int(&a, inner);
        NNCL_TRY(nncl__launch_rows(&a, x->dev, (size_t)C, (size_t)B * (size_t)inner));
        if (x->sync && x->training) NNCL_TRY(x->sync(x, n, 1, x->sync_user));
    }
    if (!want_x) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(x, n, BN_K_DX, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__grd(x, n));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__grd(x, n->in[0]));
    nncl__arg_int(&a, nncl__grad_accumulate(x, n, 0));
    nncl__arg_int(&a, C);
    nncl__arg_int(&a, inner);
    nncl__arg_int(&a, (int)total);
    nncl__arg_int(&a, (x->sync ? x->global_batch : B) * inner); /* synchronised: the global sums */
    nncl__arg_int(&a, x->training);
    return nncl__launch_1d(&a, x->dev, total);
}

static void bn_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    int C = bn_channels(n), inner = bn_inner(n), B = r->batch, b, c, j;
    double eps = n->fattr[0], mom = n->fattr[1], count = (double)B * inner;
    double *st = r->state + n->state_off;
    for (c = 0; c < C; c++) {
        double mean, var, inv;
        if (r->training) {
            double s = 0, q = 0;
            for (b = 0; b < B; b++)
                for (j = 0; j < inner; j++) s += in[0][((size_t)b * C + c) * inner + j];
            mean = s / count;
            for (b = 0; b < B; b++)
                for (j = 0; j < inner; j++) {
                    double d = in[0][((size_t)b * C + c) * inner + j] - mean;
                    q += d * d;
                }
            var = q / count;
            st[c] = (1 - mom) * st[c] + mom * mean;
            if (count > 1) st[C + c] = (1 - mom) * st[C + c] + mom * var * count / (count - 1);
        } else {
            mean = st[c];
            var = st[C + c];
        }
        inv = 1 / sqrt(var + eps);
        aux[c] = mean;
        aux[C + c] = inv;
        for (b = 0; b < B; b++)
            for (j = 0; j < inner; j++) {
                size_t i = ((size_t)b * C + c) * inner + j;
                out[i] = (in[0][i] - mean) * inv * in[1][c] + in[2][c];
            }
    }
}

static void bn_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    int C = bn_channels(n), inner = bn_inner(n), B = r->batch, b, c, j;
    double count = (double)B * inner;
    (void)out;
    for (c = 0; c < C; c++) {
        double mean = aux[c], inv = aux[C + c], sdy = 0, sdyx = 0;
        for (b = 0; b < B; b++)
            for (j = 0; j < inner; j++) {
                size_t i = ((size_t)b * C + c) * inner + j;
                sdy += gout[i];
                sdyx += gout[i] * (in[0][i] - mean) * inv;
            }
        if (gin[1]) gin[1][c] += sdyx;
        if (gin[2]) gin[2][c] += sdy;
        if (!gin[0]) continue;
        for (b = 0; b < B; b++)
            for (j = 0; j < inner; j++) {
                size_t i = ((size_t)b * C + c) * inner + j;
                double g = gout[i];
                if (r->training) g -= (sdy + (in[0][i] - mean) * inv * sdyx) / count;
                gin[0][i] += in[1][c] * inv * g;
            }
    }
}

const nncl__opdef nncl__opdef_batchnorm = {
    .name = "batchnorm",
    .kernels = {{"norm", "nncl_batchnorm_stats_f32"}, {"norm", "nncl_batchnorm_eval_stats_f32"},
                {"norm", "nncl_batchnorm_apply_f32"}, {"norm", "nncl_batchnorm_backward_f32_params"},
                {"norm", "nncl_batchnorm_backward_f32"}},
    .shape = bn_shape, .aux_size = bn_aux, .forward = bn_forward, .backward = bn_backward, .bw_reads = NNCL_BW_INPUTS,
    .ref_forward = bn_ref_forward, .ref_backward = bn_ref_backward, .half = 2, .f32_aux = 1};

/* Running statistics live in the graph's state buffer at n->state_off:
 * running_mean [C] then running_var [C] (the plan starts them at 0 and 1).
 * A channel with a single value per step (batch 1 of [B,C]) normalises to
 * the bias and leaves running_var unchanged: its unbiased variance is
 * undefined (PyTorch refuses that case). */
nncl_node *nncl_batchnorm(nncl_graph *g, nncl_node *x, float momentum, float eps, const char *name) {
    nncl_node *in[3];
    float fattr[2];
    char s1[64];
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_batchnorm: graph or input is NULL");
    if (!name || !*name || strlen(name) + sizeof ".running_mean" > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_batchnorm: needs a name of 1 to %d characters (NAME.running_mean must fit)",
                                (int)(NNCL_NAME_MAX - sizeof ".running_mean"));
    if (!(momentum >= 0 && momentum <= 1) || !(eps > 0))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_batchnorm \"%s\": momentum %g must be in [0, 1] and eps %g > 0", name,
                                (double)momentum, (double)eps);
    if (!x->batched || x->ndim < 2 || x->ndim > 4)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "batchnorm \"%s\": input %s must be [B,C], [B,C,L] or [B,C,H,W]",
                                name, nncl__shape_str(x, s1, sizeof s1));
    in[0] = x;
    fattr[0] = eps;
    fattr[1] = momentum;
    return norm_node(g, NNCL_OP_BATCHNORM, name, x->shape[1], 1, in, fattr, 2);
}

/* Synchronised batch norm (syncbn.c) exchanges these; aux is
 * [mean, invstd, sum dy, sum dy xhat] per channel (bn_aux). */
nncl_status nncl__batchnorm_stats_io(nncl__exec *x, const nncl_node *n, int phase, float *host, int write) {
    nncl__view aux = nncl__auxv(x, n);
    size_t C = (size_t)bn_channels(n), off = (aux.off + (size_t)phase * 2 * C) * sizeof(float);
    if (write)
        NNCL_CL(x->ctx, clEnqueueWriteBuffer(x->dev->queue, aux.mem, CL_TRUE, off, 2 * C * sizeof(float), host, 0, NULL,
                                             NULL));
    else
        NNCL_CL(x->ctx, clEnqueueReadBuffer(x->dev->queue, aux.mem, CL_TRUE, off, 2 * C * sizeof(float), host, 0, NULL,
                                            NULL));
    return NNCL_OK;
}

void nncl__batchnorm_running(const nncl_node *n, float *state, float **mean, float **var) {
    *mean = state + n->state_off;
    *var = *mean + bn_channels(n);
}

/* ------------------------------------------------------------- layer norm */

static int ln_dim(const nncl_node *n) { return n->in[0]->shape[n->in[0]->ndim - 1]; }

/* Layer norm (weight, and bias when n has 3 inputs) and RMS norm (weight). */
static nncl_status ln_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0], *w = n->in[1], *b = n->n_in == 3 ? n->in[2] : n->in[1];
    const char *op = nncl__opdef_get(n->op)->name;
    char s1[64], s2[64];
    int i;
    if (xin->ndim < (xin->batched ? 2 : 1))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s has no feature dimension", op, n->name,
                                 nncl__shape_str(xin, s1, sizeof s1));
    if (w->ndim != 1 || b->ndim != 1 || w->shape[0] != ln_dim(n) || b->shape[0] != ln_dim(n))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s does not fit weight %s%s", op, n->name,
                                 nncl__shape_str(xin, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2),
                                 b != w ? " and bias" : "");
    n->batched = xin->batched;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    return NNCL_OK;
}

/* aux: (mean, invstd) per row. */
static size_t ln_aux(const nncl_node *n, int batch) { return 2 * (nncl__numel(n, batch) / (size_t)ln_dim(n)); }

static nncl_status ln_forward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int D = ln_dim(n);
    size_t rows = nncl__numel(n, x->batch) / (size_t)D;
    NNCL_TRY(nncl__kbegin(x, n, LN_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__val(x, n->in[n->n_in - 1])); /* no bias: the weight stands in, unread */
    nncl__arg_int(&a, n->n_in == 3);
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, D);
    nncl__arg_float(&a, n->fattr[0]);
    return nncl__launch_rows(&a, x->dev, rows, (size_t)D);
}

static nncl_status ln_backward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int D = ln_dim(n);
    int want_x = nncl__need_grad(x, n, 0), want_w = nncl__need_grad(x, n, 1), want_b = norm_want(x, n, 2);
    size_t rows = nncl__numel(n, x->batch) / (size_t)D;
    if (want_w || want_b) {
        NNCL_TRY(norm_begin_param_grads(x, n, LN_K_DWDB, &a));
        nncl__arg_int(&a, (int)rows);
        nncl__arg_int(&a, D);
        NNCL_TRY(nncl__launch_cols(&a, x->dev, rows, (size_t)D));
    }
    if (!want_x) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(x, n, LN_K_DX, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__grd(x, n));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_view(&a, nncl__grd(x, n->in[0]));
    nncl__arg_int(&a, nncl__grad_accumulate(x, n, 0));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, D);
    return nncl__launch_rows(&a, x->dev, rows, (size_t)D);
}

static void ln_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D;
        double s = 0, q = 0, mean, inv;
        for (d = 0; d < D; d++) s += xr[d];
        mean = s / (double)D;
        for (d = 0; d < D; d++) q += (xr[d] - mean) * (xr[d] - mean);
        inv = 1 / sqrt(q / (double)D + n->fattr[0]);
        for (d = 0; d < D; d++) out[i * D + d] = (xr[d] - mean) * inv * in[1][d] + (n->n_in == 3 ? in[2][d] : 0);
        aux[2 * i] = mean;
        aux[2 * i + 1] = inv;
    }
}

static void ln_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    (void)out;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D, *gr = gout + i * D;
        double mean = aux[2 * i], inv = aux[2 * i + 1], sg = 0, sgx = 0;
        for (d = 0; d < D; d++) {
            double xhat = (xr[d] - mean) * inv;
            sg += gr[d] * in[1][d];
            sgx += gr[d] * in[1][d] * xhat;
            if (gin[1]) gin[1][d] += gr[d] * xhat;
            if (n->n_in == 3 && gin[2]) gin[2][d] += gr[d];
        }
        if (!gin[0]) continue;
        for (d = 0; d < D; d++) {
            double xhat = (xr[d] - mean) * inv;
            gin[0][i * D + d] += inv * (gr[d] * in[1][d] - (sg + xhat * sgx) / (double)D);
        }
    }
}

const nncl__opdef nncl__opdef_layernorm = {
    .name = "layernorm",
    .kernels = {{"norm", "nncl_layernorm_f32"}, {"norm", "nncl_layernorm_backward_f32"},
                {"norm", "nncl_layernorm_backward_f32_params"}},
    .shape = ln_shape, .aux_size = ln_aux, .forward = ln_forward, .backward = ln_backward, .bw_reads = NNCL_BW_INPUTS,
    .ref_forward = ln_ref_forward, .ref_backward = ln_ref_backward, .half = 2, .f32_aux = 1};

/* The layer norms' and RMS norm's builder: checks, then the node. */
static nncl_node *ln_build(nncl_graph *g, nncl__op op, const char *fn, nncl_node *x, float eps, int bias,
                           const char *name) {
    nncl_node *in[3];
    float fattr[1];
    char s1[64];
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: graph or input is NULL", fn);
    if (!name || !*name || strlen(name) + sizeof ".weight" > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: needs a name of 1 to %d characters", fn,
                                (int)(NNCL_NAME_MAX - sizeof ".weight"));
    if (!(eps > 0) || (bias != 0 && bias != 1))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": eps %g must be > 0 and bias %d 0 or 1", fn,
                                name, (double)eps, bias);
    if (x->ndim < (x->batched ? 2 : 1))
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s has no feature dimension",
                                nncl__opdef_get(op)->name, name, nncl__shape_str(x, s1, sizeof s1));
    in[0] = x;
    fattr[0] = eps;
    return norm_node(g, op, name, x->shape[x->ndim - 1], bias, in, fattr, 1);
}

nncl_node *nncl_layernorm(nncl_graph *g, nncl_node *x, float eps, const char *name) {
    return ln_build(g, NNCL_OP_LAYERNORM, "nncl_layernorm", x, eps, 1, name);
}

nncl_node *nncl_layernorm_ex(nncl_graph *g, nncl_node *x, float eps, int bias, const char *name) {
    return ln_build(g, NNCL_OP_LAYERNORM, "nncl_layernorm_ex", x, eps, bias, name);
}

/* ------------------------------------------------------------- RMS norm */

/* aux: invrms = 1 / sqrt(mean(x^2) + eps) per row. */
static size_t rms_aux(const nncl_node *n, int batch) { return nncl__numel(n, batch) / (size_t)ln_dim(n); }

static nncl_status rms_forward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int D = ln_dim(n);
    size_t rows = nncl__numel(n, x->batch) / (size_t)D;
    NNCL_TRY(nncl__kbegin(x, n, RMS_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, D);
    nncl__arg_float(&a, n->fattr[0]);
    return nncl__launch_rows(&a, x->dev, rows, (size_t)D);
}

static nncl_status rms_backward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int D = ln_dim(n);
    size_t rows = nncl__numel(n, x->batch) / (size_t)D;
    if (nncl__need_grad(x, n, 1)) {
        NNCL_TRY(nncl__kbegin(x, n, RMS_K_DW, &a));
        nncl__arg_view(&a, nncl__val(x, n->in[0]));
        nncl__arg_view(&a, nncl__grd(x, n));
        nncl__arg_view(&a, nncl__auxv(x, n));
        nncl__arg_view(&a, nncl__grd(x, n->in[1]));
        nncl__arg_int(&a, nncl__grad_accumulate(x, n, 1));
        nncl__arg_int(&a, (int)rows);
        nncl__arg_int(&a, D);
        NNCL_TRY(nncl__launch_cols(&a, x->dev, rows, (size_t)D));
    }
    if (!nncl__need_grad(x, n, 0)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(x, n, RMS_K_DX, &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__grd(x, n));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, nncl__auxv(x, n));
    nncl__arg_view(&a, nncl__grd(x, n->in[0]));
    nncl__arg_int(&a, nncl__grad_accumulate(x, n, 0));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, D);
    return nncl__launch_rows(&a, x->dev, rows, (size_t)D);
}

static void rms_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D;
        double q = 0, inv;
        for (d = 0; d < D; d++) q += xr[d] * xr[d];
        inv = 1 / sqrt(q / (double)D + n->fattr[0]);
        for (d = 0; d < D; d++) out[i * D + d] = xr[d] * inv * in[1][d];
        aux[i] = inv;
    }
}

/* With g = dy w and xhat = x invrms: dx = invrms (g - xhat mean(g xhat)),
 * dw = sum over rows of dy xhat. */
static void rms_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    (void)out;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D, *gr = gout + i * D;
        double inv = aux[i], s = 0;
        for (d = 0; d < D; d++) {
            s += gr[d] * in[1][d] * xr[d] * inv;
            if (gin[1]) gin[1][d] += gr[d] * xr[d] * inv;
        }
        if (gin[0])
            for (d = 0; d < D; d++) gin[0][i * D + d] += inv * (gr[d] * in[1][d] - xr[d] * inv * s / (double)D);
    }
}

const nncl__opdef nncl__opdef_rmsnorm = {
    .name = "rmsnorm",
    .kernels = {{"norm", "nncl_rmsnorm_f32"}, {"norm", "nncl_rmsnorm_backward_f32"},
                {"norm", "nncl_rmsnorm_backward_f32_params"}},
    .shape = ln_shape, .aux_size = rms_aux, .forward = rms_forward, .backward = rms_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = rms_ref_forward, .ref_backward = rms_ref_backward, .half = 2,
    .f32_aux = 1};

nncl_node *nncl_rmsnorm(nncl_graph *g, nncl_node *x, float eps, const char *name) {
    return ln_build(g, NNCL_OP_RMSNORM, "nncl_rmsnorm", x, eps, 0, name);
}
