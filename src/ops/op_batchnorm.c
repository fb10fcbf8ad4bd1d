/* op_batchnorm.c - batch normalisation: per channel over the batch and
 * spatial positions, PyTorch's running statistics in the graph's state
 * buffer, a learnable NAME.weight (ones) and NAME.bias (zeros); fattr [0]
 * eps, [1] momentum. Kernels: cl/norm.cl. It streams by default: its
 * statistics and gradient sums in one pass over the data (partial sums,
 * then one work-item per channel merges them), apply and the input gradient
 * one pass each; NNCL_BN=groups takes a work-group per channel instead.
 * nncl_batchnorm_act's nodes end in an activation (iattr[0], nncl_bn_act)
 * of the normalised value plus an optional residual in[3], taken in the
 * streaming passes (cl/bnact.cl): forward writes act(xhat w + b + r) as it
 * normalises, backward folds act' (at the pre-activation, recomputed from
 * x) into the gradient sums and the input gradient and writes the
 * residual's gradient in the same pass, so that neither the normalised
 * value, the sum nor their gradients are tensors of their own: forward
 * reads and writes activation-sized tensors 3 times instead of the
 * separate ops' 5 (4 instead of 8 with a residual), backward 5 times
 * instead of 8 (8 instead of about 12). NNCL_BN_FUSE=0 runs them as passes
 * of their own instead. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernel slots (cl/norm.cl), in the order of the row's kernel list. */
enum {
    BN_K_STATS, BN_K_EVAL_STATS, BN_K_APPLY, BN_K_GRAD_STATS, BN_K_DX,
    BN_K_PARTIAL, BN_K_MERGE, BN_K_GRAD_PARTIAL, BN_K_GRAD_MERGE, BN_K_APPLY_VEC, BN_K_DX_VEC,
    BN_K_APPLY_ACT, BN_K_GRAD_PARTIAL_ACT, BN_K_DX_ACT, BN_K_ACTPASS, BN_K_ACTPASS_BW
};

/* x [B, C, ...]: C = shape[1], inner = the product of the rest. */
static int bn_channels(const nncl_node *n) { return n->in[0]->shape[1]; }

static int bn_inner(const nncl_node *n) {
    const nncl_node *xin = n->in[0];
    int i, inner = 1;
    for (i = 2; i < xin->ndim; i++) inner *= xin->shape[i];
    return inner;
}

/* fattr: [0] eps, finite and > 0; [1] momentum, in [0, 1]; iattr[0] the
 * activation, an nncl_bn_act. */
static nncl_status bn_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] < NNCL_BN_ACT_NONE || n->iattr[0] > NNCL_BN_ACT_HARDSWISH)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "batchnorm \"%s\": activation %d is not an nncl_bn_act",
                                 n->name, n->iattr[0]);
    if (!(n->fattr[1] >= 0 && n->fattr[1] <= 1) || !(n->fattr[0] > 0 && isfinite(n->fattr[0])))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "batchnorm \"%s\": momentum %g must be in [0, 1] and eps %g finite and > 0", n->name,
                                 (double)n->fattr[1], (double)n->fattr[0]);
    return NNCL_OK;
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
    if (n->n_in == 4 && !nncl__same_shape(n->in[3], xin))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "batchnorm \"%s\": residual %s must have the input's shape %s",
                                 n->name, nncl__shape_str(n->in[3], s2, sizeof s2), nncl__shape_str(xin, s1, sizeof s1));
    n->batched = 1;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    n->state_size = 2 * (size_t)xin->shape[1]; /* running mean [C], running var [C] */
    return NNCL_OK;
}

/* The streaming kernels' partial sums per channel: BN_PARTS work-items in
 * all (enough for the cores, few enough to merge in one work-item per
 * channel), at most one per image. Grows with B, so that the aux of the
 * largest batch holds every smaller one's. */
#define BN_PARTS 1024
static int bn_parts(int C, int B) {
    int p = (BN_PARTS + C - 1) / C;
    return p < B ? p : (B > 0 ? B : 1);
}

/* aux: mean [C], invstd [C] (from forward), sum dy [C], sum dy*xhat [C]
 * (backward scratch), then 2 floats per partial of the streaming kernels. */
static size_t bn_aux(const nncl_node *n, int batch) {
    size_t C = (size_t)bn_channels(n);
    return 4 * C + 2 * C * (size_t)bn_parts((int)C, batch);
}

/* Whether the streaming kernels run (statistics in one pass, 8 values at a
 * time) rather than one work-group per channel; NNCL_BN=groups or stream
 * decides (tests run both). */
static int bn_stream(void) {
    const char *env = getenv("NNCL_BN");
    return !(env && !strcmp(env, "groups"));
}

/* Streaming kernels: a work-item per BN_CHUNK values of a row b C + c. */
#define BN_CHUNK 256
static size_t bn_chunks(int inner) { return ((size_t)inner + BN_CHUNK - 1) / BN_CHUNK; }

/* aux's partial sums (after the 4C per-channel values). */
static nncl__view bn_partv(nncl__exec *ex, const nncl_node *n) {
    nncl__view v = nncl__auxv(ex, n);
    v.off += 4 * (size_t)bn_channels(n);
    return v;
}

/* B, C and inner: the shape arguments of the per-channel kernels. */
static void bn_arg_dims(nncl__args *a, nncl__exec *ex, const nncl_node *n) {
    nncl__arg_int(a, ex->batch);
    nncl__arg_int(a, bn_channels(n));
    nncl__arg_int(a, bn_inner(n));
}

/* The statistics kernels' momentum and eps. */
static void bn_arg_momentum_eps(nncl__args *a, nncl__exec *ex, const nncl_node *n) {
    /* synchronised: the running statistics move on the host, from the global batch */
    nncl__arg_float(a, ex->sync ? 0.0f : n->fattr[1]);
    nncl__arg_float(a, n->fattr[0]);
}

/* Training statistics in one pass: partial sums, then their merge. */
static nncl_status bn_stats_stream(nncl__exec *ex, nncl_node *n, nncl__view st) {
    nncl__args a;
    int C = bn_channels(n), inner = bn_inner(n), B = ex->batch, P = bn_parts(C, B);
    NNCL_TRY(nncl__kbegin(ex, n, BN_K_PARTIAL, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, bn_partv(ex, n));
    bn_arg_dims(&a, ex, n);
    nncl__arg_int(&a, P);
    NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)C * (size_t)P));
    NNCL_TRY(nncl__kbegin(ex, n, BN_K_MERGE, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, bn_partv(ex, n));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_view(&a, st);
    nncl__arg_int(&a, C);
    nncl__arg_int(&a, inner);
    nncl__arg_int(&a, P);
    nncl__arg_int(&a, B * inner);
    bn_arg_momentum_eps(&a, ex, n);
    return nncl__launch_1d(&a, ex->dev, (size_t)C);
}

/* Whether a node with an activation or a residual takes them in batch
 * norm's own passes (the streaming kernels) rather than in passes of their
 * own; NNCL_BN_FUSE=0 or 1 decides (tests run both). */
int nncl__batchnorm_fuse_on(void) {
    const char *env = getenv("NNCL_BN_FUSE");
    return !(env && (!strcmp(env, "0") || !strcmp(env, "off")));
}

/* The streaming kernels' trailing arguments (rows, chunks per row, chunk)
 * and their launch: a work-item per BN_CHUNK values of each row. */
static nncl_status bn_launch_rows(nncl__args *a, nncl__exec *ex, const nncl_node *n) {
    int rows = ex->batch * bn_channels(n);
    size_t nch = bn_chunks(bn_inner(n));
    nncl__arg_int(a, rows);
    nncl__arg_int(a, (int)nch);
    nncl__arg_int(a, BN_CHUNK);
    return nncl__launch_1d(a, ex->dev, (size_t)rows * nch);
}

/* The residual input (or x, a dummy the kernels do not read) and its flag. */
static void bn_arg_residual(nncl__args *a, nncl__exec *ex, const nncl_node *n) {
    nncl__arg_view(a, nncl__val(ex, n->in[n->n_in == 4 ? 3 : 0]));
    nncl__arg_int(a, n->n_in == 4);
    nncl__arg_int(a, n->iattr[0]);
}

/* Begins the kernel in slot with the leading arguments: x, dy (with_dy),
 * aux, then weight and bias (with_wb), then the residual and the
 * activation (act: the bnact.cl kernels that recompute the pre-activation,
 * which take the weight and bias too). */
static nncl_status bn_begin(nncl__exec *ex, nncl_node *n, int slot, nncl__args *a, int with_dy, int act, int with_wb) {
    NNCL_TRY(nncl__kbegin(ex, n, slot, a));
    nncl__arg_view(a, nncl__val(ex, n->in[0]));
    if (with_dy) nncl__arg_view(a, nncl__grd(ex, n));
    nncl__arg_view(a, nncl__auxv(ex, n));
    if (!act && !with_wb) return NNCL_OK;
    nncl__arg_view(a, nncl__val(ex, n->in[1]));
    nncl__arg_view(a, nncl__val(ex, n->in[2]));
    if (act) bn_arg_residual(a, ex, n);
    return NNCL_OK;
}

/* The gradient sums in one pass over x and dy (with act, fused, through
 * the recomputed pre-activation): partial sums, then their merge into aux
 * and the weight and bias gradients. */
static nncl_status bn_grad_stream(nncl__exec *ex, nncl_node *n, int fused) {
    nncl__args a;
    int C = bn_channels(n), B = ex->batch, P = bn_parts(C, B);
    NNCL_TRY(bn_begin(ex, n, fused ? BN_K_GRAD_PARTIAL_ACT : BN_K_GRAD_PARTIAL, &a, 1, fused, 0));
    nncl__arg_view(&a, bn_partv(ex, n));
    bn_arg_dims(&a, ex, n);
    nncl__arg_int(&a, P);
    NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)C * (size_t)P));
    NNCL_TRY(nncl__norm_param_grads(ex, n, BN_K_GRAD_MERGE, &a));
    nncl__arg_view(&a, bn_partv(ex, n));
    nncl__arg_int(&a, C);
    nncl__arg_int(&a, P);
    return nncl__launch_1d(&a, ex->dev, (size_t)C);
}

/* The trailing arguments and launch of apply and the input gradient: a
 * work-item per value, or the streaming kernels' rows. */
static nncl_status bn_launch_apply(nncl__args *a, nncl__exec *ex, const nncl_node *n, int stream) {
    size_t total = nncl__numel(n, ex->batch);
    nncl__arg_int(a, bn_channels(n));
    nncl__arg_int(a, bn_inner(n));
    if (stream) return bn_launch_rows(a, ex, n);
    nncl__arg_int(a, (int)total);
    return nncl__launch_1d(a, ex->dev, total);
}

/* The gradient, with act and residual, where wanted (want_r) into the
 * residual's: dr (+)= g, acc from nncl__grad_accumulate. */
static void bn_arg_dres(nncl__args *a, nncl__exec *ex, nncl_node *n, int want_r) {
    nncl__arg_view(a, want_r ? nncl__grd(ex, n->in[3]) : nncl__grd(ex, n));
    nncl__arg_int(a, want_r);
    nncl__arg_int(a, want_r ? nncl__grad_accumulate(ex, n, 3) : 0);
}

static nncl_status bn_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    int C = bn_channels(n), inner = bn_inner(n), B = ex->batch, stream = bn_stream();
    int epi = n->iattr[0] || n->n_in == 4, fused = epi && stream && nncl__batchnorm_fuse_on();
    nncl__view st;
    st.mem = ex->state;
    st.off = n->state_off;
    if (ex->recompute) {
        /* checkpointing: the batch statistics the forward saved in aux (the
         * global batch's, synchronised), the running ones not moved again */
    } else if (ex->training) {
        if (stream) {
            NNCL_TRY(bn_stats_stream(ex, n, st));
        } else {
            NNCL_TRY(bn_begin(ex, n, BN_K_STATS, &a, 0, 0, 0));
            nncl__arg_view(&a, st);
            bn_arg_dims(&a, ex, n);
            bn_arg_momentum_eps(&a, ex, n);
            NNCL_TRY(nncl__launch_rows(&a, ex->dev, (size_t)C, (size_t)B * (size_t)inner));
        }
        if (ex->sync) NNCL_TRY(ex->sync(ex, n, 0, ex->sync_user));
    } else {
        NNCL_TRY(nncl__kbegin(ex, n, BN_K_EVAL_STATS, &a));
        nncl__arg_view(&a, nncl__auxv(ex, n));
        nncl__arg_view(&a, st);
        nncl__arg_int(&a, C);
        nncl__arg_float(&a, n->fattr[0]);
        NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)C));
    }
    NNCL_TRY(bn_begin(ex, n, fused ? BN_K_APPLY_ACT : stream ? BN_K_APPLY_VEC : BN_K_APPLY, &a, 0, fused, 1));
    nncl__arg_view(&a, nncl__val(ex, n));
    NNCL_TRY(bn_launch_apply(&a, ex, n, stream));
    if (!epi || fused) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, BN_K_ACTPASS, &a));
    nncl__arg_view(&a, nncl__val(ex, n));
    bn_arg_residual(&a, ex, n);
    nncl__arg_int(&a, inner);
    return bn_launch_rows(&a, ex, n);
}

static nncl_status bn_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    int C = bn_channels(n), inner = bn_inner(n), B = ex->batch, stream = bn_stream();
    int want_x = nncl__need_grad(ex, n, 0), want_w = nncl__need_grad(ex, n, 1), want_b = nncl__need_grad(ex, n, 2);
    int epi = n->iattr[0] || n->n_in == 4, fused = epi && stream && nncl__batchnorm_fuse_on();
    int want_r = n->n_in == 4 && nncl__need_grad(ex, n, 3);
    size_t total = nncl__numel(n, B);
    if (epi && !fused) {
        /* the activation's gradient (and the residual's) in a pass of its own */
        NNCL_TRY(bn_begin(ex, n, BN_K_ACTPASS_BW, &a, 1, 1, 1));
        bn_arg_dres(&a, ex, n, want_r);
        nncl__arg_int(&a, C);
        nncl__arg_int(&a, inner);
        NNCL_TRY(bn_launch_rows(&a, ex, n));
    }
    if (want_w || want_b || (want_x && ex->training)) {
        if (stream) {
            NNCL_TRY(bn_grad_stream(ex, n, fused));
        } else {
            NNCL_TRY(nncl__norm_param_grads(ex, n, BN_K_GRAD_STATS, &a));
            bn_arg_dims(&a, ex, n);
            NNCL_TRY(nncl__launch_rows(&a, ex->dev, (size_t)C, (size_t)B * (size_t)inner));
        }
        if (ex->sync && ex->training) NNCL_TRY(ex->sync(ex, n, 1, ex->sync_user));
    }
    if (fused) {
        if (!want_x && !want_r) return NNCL_OK;
        NNCL_TRY(bn_begin(ex, n, BN_K_DX_ACT, &a, 1, 1, 1));
        nncl__arg_view(&a, want_x ? nncl__grd(ex, n->in[0]) : nncl__grd(ex, n));
        nncl__arg_int(&a, want_x);
        nncl__arg_int(&a, want_x ? nncl__grad_accumulate(ex, n, 0) : 0);
        bn_arg_dres(&a, ex, n, want_r);
    } else {
        if (!want_x) return NNCL_OK;
        NNCL_TRY(nncl__kbegin(ex, n, stream ? BN_K_DX_VEC : BN_K_DX, &a));
        nncl__arg_view(&a, nncl__val(ex, n->in[0]));
        nncl__arg_view(&a, nncl__grd(ex, n));
        nncl__arg_view(&a, nncl__auxv(ex, n));
        nncl__arg_view(&a, nncl__val(ex, n->in[1]));
        nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
        nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    }
    nncl__arg_int(&a, C);
    nncl__arg_int(&a, inner);
    if (stream) {
        nncl__arg_int(&a, B * C);
        nncl__arg_int(&a, (int)bn_chunks(inner));
        nncl__arg_int(&a, BN_CHUNK);
    } else {
        nncl__arg_int(&a, (int)total);
    }
    nncl__arg_int(&a, (ex->sync ? ex->global_batch : B) * inner); /* synchronised: the global sums */
    nncl__arg_int(&a, ex->training);
    return nncl__launch_1d(&a, ex->dev, stream ? (size_t)B * (size_t)C * bn_chunks(inner) : total);
}

/* The activation and its derivative (nncl_bn_act) at the pre-activation
 * v, as the elementwise ops take them. */
static const nncl__op bn_act_op[] = {NNCL_OP_INPUT, NNCL_OP_RELU, NNCL_OP_RELU6, NNCL_OP_HARDSWISH};
static double bn_act_ref(double v, int act) { return act ? nncl__unary_ref(bn_act_op[act], v, 0) : v; }
static double bn_act_grad_ref(double v, int act) {
    return act ? nncl__unary_ref_grad(bn_act_op[act], v, bn_act_ref(v, act), 0) : 1;
}

/* out = act(xhat w + b (+ r)); aux [mean, invstd]. */
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
                double v = (in[0][i] - mean) * inv * in[1][c] + in[2][c];
                out[i] = bn_act_ref(n->n_in == 4 ? v + in[3][i] : v, n->iattr[0]);
            }
    }
}

/* g = gout act'(pre), the residual's gradient; then batch norm's on g. */
static void bn_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    int C = bn_channels(n), inner = bn_inner(n), B = r->batch, b, c, j;
    double count = (double)B * inner;
    size_t total = (size_t)B * C * inner, i;
    double *g = (double *)malloc(total * sizeof *g);
    (void)out;
    if (!g) return; /* the comparison then fails */
    for (i = 0; i < total; i++) {
        int ch = (int)(i / (size_t)inner % (size_t)C);
        double v = (in[0][i] - aux[ch]) * aux[C + ch] * in[1][ch] + in[2][ch];
        g[i] = gout[i] * bn_act_grad_ref(n->n_in == 4 ? v + in[3][i] : v, n->iattr[0]);
        if (n->n_in == 4 && gin[3]) gin[3][i] += g[i];
    }
    for (c = 0; c < C; c++) {
        double mean = aux[c], inv = aux[C + c], sdy = 0, sdyx = 0;
        for (b = 0; b < B; b++)
            for (j = 0; j < inner; j++) {
                i = ((size_t)b * C + c) * inner + j;
                sdy += g[i];
                sdyx += g[i] * (in[0][i] - mean) * inv;
            }
        if (gin[1]) gin[1][c] += sdyx;
        if (gin[2]) gin[2][c] += sdy;
        if (!gin[0]) continue;
        for (b = 0; b < B; b++)
            for (j = 0; j < inner; j++) {
                double d;
                i = ((size_t)b * C + c) * inner + j;
                d = g[i];
                if (r->training) d -= (sdy + (in[0][i] - mean) * inv * sdyx) / count;
                gin[0][i] += in[1][c] * inv * d;
            }
    }
    free(g);
}

const nncl__opdef nncl__opdef_batchnorm = {
    .name = "batchnorm",
    NNCL_KERNELS({"norm", "nncl_batchnorm_stats_f32"}, {"norm", "nncl_batchnorm_eval_stats_f32"},
                {"norm", "nncl_batchnorm_apply_f32"}, {"norm", "nncl_batchnorm_backward_f32_params"},
                {"norm", "nncl_batchnorm_backward_f32"}, {"norm", "nncl_batchnorm_partial_f32"},
                {"norm", "nncl_batchnorm_merge_f32"}, {"norm", "nncl_batchnorm_grad_partial_f32"},
                {"norm", "nncl_batchnorm_grad_merge_f32"}, {"norm", "nncl_batchnorm_apply_f32_vec"},
                {"norm", "nncl_batchnorm_backward_f32_vec"}, {"bnact", "nncl_batchnorm_apply_f32_act"},
                {"bnact", "nncl_batchnorm_backward_f32_actpartial"}, {"bnact", "nncl_batchnorm_backward_f32_act"},
                {"bnact", "nncl_batchnorm_f32_actpass"}, {"bnact", "nncl_batchnorm_backward_f32_actpass"}),
    .shape = bn_shape, .check = bn_check, .aux_size = bn_aux, .forward = bn_forward, .backward = bn_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = bn_ref_forward, .ref_backward = bn_ref_backward, .half = 2,
    .f32_aux = 1, .bw_inplace = 1, /* every dx kernel: dy[i] read, then dx[i] written */
    .keep_aux = 1};
#undef BN_CHUNK
#undef BN_PARTS

/* Running statistics live in the graph's state buffer at n->state_off:
 * running_mean [C] then running_var [C] (the plan starts them at 0 and 1).
 * A channel with a single value per step (batch 1 of [B,C]) normalises to
 * the bias and leaves running_var unchanged: its unbiased variance is
 * undefined (PyTorch refuses that case). The node of the three builders
 * below: iattr[0] the activation and, given a residual, in[3]. */
static nncl_node *bn_build(nncl_graph *g, nncl_node *x, nncl_node *residual, nncl_bn_act act, float momentum,
                           float eps, const char *name) {
    char wn[NNCL_NAME_MAX + 16], bn[NNCL_NAME_MAX + 16], s1[64];
    nncl_node *in[4];
    float fattr[2];
    int iattr = (int)act, keep, C;
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_batchnorm: graph or input is NULL");
    if (!name || !*name || strlen(name) + sizeof ".running_mean" > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_batchnorm: needs a name of 1 to %d characters (NAME.running_mean must fit)",
                                (int)(NNCL_NAME_MAX - sizeof ".running_mean"));
    if (!x->batched || x->ndim < 2 || x->ndim > 4)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "batchnorm \"%s\": input %s must be [B,C], [B,C,L] or [B,C,H,W]",
                                name, nncl__shape_str(x, s1, sizeof s1));
    C = x->shape[1];
    keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    in[0] = x;
    in[1] = nncl_param(g, wn, 1, &C, NNCL_INIT_ONES, 0);
    in[2] = in[1] ? nncl_param(g, bn, 1, &C, NNCL_INIT_ZEROS, 0) : NULL;
    in[3] = residual;
    fattr[0] = eps;
    fattr[1] = momentum;
    return nncl__layer_add(g, keep, NNCL_OP_BATCHNORM, name, residual ? 4 : 3, in, &iattr, 1, fattr, 2);
}

nncl_node *nncl_batchnorm(nncl_graph *g, nncl_node *x, float momentum, float eps, const char *name) {
    return bn_build(g, x, NULL, NNCL_BN_ACT_NONE, momentum, eps, name);
}

nncl_node *nncl_batchnorm_act(nncl_graph *g, nncl_node *x, nncl_bn_act act, float momentum, float eps,
                              const char *name) {
    return bn_build(g, x, NULL, act, momentum, eps, name);
}

nncl_node *nncl_batchnorm_add_act(nncl_graph *g, nncl_node *x, nncl_node *residual, nncl_bn_act act,
                                  float momentum, float eps, const char *name) {
    if (!residual)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "batchnorm \"%s\": residual is NULL (an earlier builder failed?)", name ? name : "");
    return bn_build(g, x, residual, act, momentum, eps, name);
}

/* Synchronised batch norm (syncbn.c) exchanges these; aux is
 * [mean, invstd, sum dy, sum dy xhat] per channel (bn_aux). */
nncl_status nncl__batchnorm_stats_io(nncl__exec *ex, const nncl_node *n, int phase, float *host, int write) {
    nncl__view aux = nncl__auxv(ex, n);
    size_t C = (size_t)bn_channels(n), off = (aux.off + (size_t)phase * 2 * C) * sizeof(float);
    if (write)
        NNCL_CL(ex->ctx, clEnqueueWriteBuffer(ex->dev->queue, aux.mem, CL_TRUE, off, 2 * C * sizeof(float), host, 0, NULL,
                                             NULL));
    else
        NNCL_CL(ex->ctx, clEnqueueReadBuffer(ex->dev->queue, aux.mem, CL_TRUE, off, 2 * C * sizeof(float), host, 0, NULL,
                                            NULL));
    return NNCL_OK;
}

void nncl__batchnorm_running(const nncl_node *n, float *state, float **mean, float **var) {
    *mean = state + n->state_off;
    *var = *mean + bn_channels(n);
}

