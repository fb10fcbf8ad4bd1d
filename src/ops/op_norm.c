/* op_norm.c - layer normalisation (per row over the last dimension, a
 * learnable NAME.weight of ones and, unless left out, NAME.bias of zeros)
 * and RMS normalisation (per row, NAME.weight alone), and the helpers the
 * norm layers share with batch norm (op_batchnorm.c). Kernels: cl/norm.cl. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernel slots of layer and RMS norm (cl/norm.cl), in the order of the
 * rows' kernel lists; LN_K_DW sums layer norm's bias gradient too. */
enum { LN_K_FORWARD, LN_K_DX, LN_K_DW, LN_K_ROWS, LN_K_DW_MERGE = 2 * LN_K_ROWS };

/* Layer norm's per-row weight and bias gradient sums over blocks of rows:
 * at most LN_PARTS blocks, each of at least LN_PART_ROWS rows; their
 * partial sums (2 D floats a block) follow the per-row statistics in aux. */
#define LN_PARTS 64
#define LN_PART_ROWS 16
static size_t ln_parts(size_t rows) {
    size_t p = rows / LN_PART_ROWS;
    return p < 1 ? 1 : p > LN_PARTS ? LN_PARTS : p;
}

int nncl__row_kernels(const nncl__exec *ex) {
    const char *env = getenv("NNCL_REDUCE");
    if (env && !strcmp(env, "rows")) return 1;
    if (env && !strcmp(env, "groups")) return 0;
    return ex->dev->info.type == NNCL_DEVICE_CPU;
}

/* A per-row weight-gradient kernel: one work-item per 8 columns, each its
 * own group, so that every core takes some. */
static nncl_status norm_launch_cols8(nncl__args *a, nncl__exec *ex, int D) {
    size_t global = ((size_t)D + 7) / 8, local = 1;
    return nncl__launch(a, ex->dev, 1, &global, &local);
}

/* Whether input i of n is there and needs a gradient. */
static int norm_want(nncl__exec *ex, const nncl_node *n, int i) { return i < n->n_in && nncl__need_grad(ex, n, i); }

/* Begins the kernel in slot that sums the weight and bias gradients of a
 * norm node (nncl_batchnorm_backward_f32_params, nncl_batchnorm_grad_merge_f32,
 * nncl_layernorm_backward_f32_params), with their shared
 * leading arguments: x, dy, aux, then dw, want_w, acc_w, db, want_b, acc_b
 * (aux stands in for a gradient not wanted). */
static nncl_status norm_param_args(nncl__exec *ex, nncl_node *n, int slot, nncl__args *a, int acc_w, int acc_b) {
    int want_w = norm_want(ex, n, 1), want_b = norm_want(ex, n, 2);
    NNCL_TRY(nncl__kbegin(ex, n, slot, a));
    nncl__arg_view(a, nncl__val(ex, n->in[0]));
    nncl__arg_view(a, nncl__grd(ex, n));
    nncl__arg_view(a, nncl__auxv(ex, n));
    nncl__arg_view(a, want_w ? nncl__grd(ex, n->in[1]) : nncl__auxv(ex, n));
    nncl__arg_int(a, want_w);
    nncl__arg_int(a, acc_w);
    nncl__arg_view(a, want_b ? nncl__grd(ex, n->in[2]) : nncl__auxv(ex, n));
    nncl__arg_int(a, want_b);
    nncl__arg_int(a, acc_b);
    return NNCL_OK;
}

nncl_status nncl__norm_param_grads(nncl__exec *ex, nncl_node *n, int slot, nncl__args *a) {
    int acc_w = norm_want(ex, n, 1) ? nncl__grad_accumulate(ex, n, 1) : 0;
    return norm_param_args(ex, n, slot, a, acc_w, norm_want(ex, n, 2) ? nncl__grad_accumulate(ex, n, 2) : 0);
}

/* A norm layer's node over `features` with its weight and (bias 1) bias,
 * NAME.weight ones and NAME.bias zeros, as PyTorch initialises them (in[1],
 * in[2]); a refused node takes them back. */
nncl_node *nncl__norm_node(nncl_graph *g, nncl__op op, const char *name, int features, int bias, nncl_node **in,
                           const float *fattr, int n_fattr) {
    char wn[NNCL_NAME_MAX + 16], bn[NNCL_NAME_MAX + 16];
    int keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    in[1] = nncl_param(g, wn, 1, &features, NNCL_INIT_ONES, 0);
    in[2] = in[1] && bias ? nncl_param(g, bn, 1, &features, NNCL_INIT_ZEROS, 0) : NULL;
    return nncl__layer_add(g, keep, op, name, bias ? 3 : 2, in, NULL, 0, fattr, n_fattr);
}

/* ------------------------------------------------------------- layer norm */

static int ln_dim(const nncl_node *n) { return n->in[0]->shape[n->in[0]->ndim - 1]; }

/* fattr[0]: eps, finite and > 0. */
static nncl_status ln_check(nncl_graph *g, const nncl_node *n) {
    if (!(n->fattr[0] > 0 && isfinite(n->fattr[0])))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": eps %g must be finite and > 0",
                                 nncl__opdef_get(n->op)->name, n->name, (double)n->fattr[0]);
    return NNCL_OK;
}

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
static size_t ln_aux(const nncl_node *n, int batch) {
    size_t rows = nncl__numel(n, batch) / (size_t)ln_dim(n), parts = ln_parts(rows);
    return 2 * rows + (n->op == NNCL_OP_LAYERNORM && parts > 1 ? 2 * parts * (size_t)ln_dim(n) : 0);
}

/* The rows and width of a row norm's input. */
static int ln_rows(const nncl__exec *ex, const nncl_node *n, size_t *rows) {
    int D = ln_dim(n);
    *rows = nncl__numel(n, ex->batch) / (size_t)D;
    return D;
}

/* A row norm's per-row launch: one work-item a row (the row kernels), a group a row
 * otherwise. */
static nncl_status ln_launch(nncl__args *a, nncl__exec *ex, int per_row, size_t rows, int D) {
    return per_row ? nncl__launch_1d(a, ex->dev, rows) : nncl__launch_rows(a, ex->dev, rows, (size_t)D);
}

/* A row norm's weight (and bias) gradient launch, over the columns. */
static nncl_status ln_launch_cols(nncl__args *a, nncl__exec *ex, int per_row, size_t rows, int D) {
    nncl__arg_int(a, (int)rows);
    nncl__arg_int(a, D);
    return per_row ? norm_launch_cols8(a, ex, D) : nncl__launch_cols(a, ex->dev, rows, (size_t)D);
}

/* The forward's arguments after the inputs, shared by layer and RMS norm:
 * y, aux, rows, D, eps; then the launch. */
static nncl_status ln_forward_rest(nncl__args *a, nncl__exec *ex, nncl_node *n, int per_row) {
    size_t rows;
    int D = ln_rows(ex, n, &rows);
    nncl__arg_view(a, nncl__val(ex, n));
    nncl__arg_view(a, nncl__auxv(ex, n));
    nncl__arg_int(a, (int)rows);
    nncl__arg_int(a, D);
    nncl__arg_float(a, n->fattr[0]);
    return ln_launch(a, ex, per_row, rows, D);
}

/* The input gradient of layer and RMS norm, whose kernels take the same
 * arguments: x, dy, w, aux, dx, acc, rows, D. */
static nncl_status ln_dx(nncl__exec *ex, nncl_node *n, int slot, int per_row) {
    nncl__args a;
    size_t rows;
    int D = ln_rows(ex, n, &rows);
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, D);
    return ln_launch(&a, ex, per_row, rows, D);
}

/* Layer norm and RMS norm, whose kernels differ in the forward's bias
 * arguments and the weight gradient's (layer norm's sums the bias's too). */
static nncl_status ln_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    int per_row = nncl__row_kernels(ex);
    NNCL_TRY(nncl__kbegin(ex, n, LN_K_FORWARD + (per_row ? LN_K_ROWS : 0), &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    if (n->op == NNCL_OP_LAYERNORM) {
        nncl__arg_view(&a, nncl__val(ex, n->in[n->n_in - 1])); /* no bias: the weight stands in, unread */
        nncl__arg_int(&a, n->n_in == 3);
    }
    return ln_forward_rest(&a, ex, n, per_row);
}

static nncl_status ln_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t rows;
    int D = ln_rows(ex, n, &rows);
    int per_row = nncl__row_kernels(ex), k = per_row ? LN_K_ROWS : 0;
    if (n->op == NNCL_OP_LAYERNORM && (nncl__need_grad(ex, n, 1) || norm_want(ex, n, 2)) && per_row) {
        size_t P = ln_parts(rows);
        int acc_w = norm_want(ex, n, 1) ? nncl__grad_accumulate(ex, n, 1) : 0;
        int acc_b = norm_want(ex, n, 2) ? nncl__grad_accumulate(ex, n, 2) : 0;
        nncl__view part = nncl__auxv(ex, n);
        part.off += 2 * rows; /* the partial sums, past this batch's statistics */
        NNCL_TRY(norm_param_args(ex, n, LN_K_DW + k, &a, acc_w, acc_b));
        nncl__arg_view(&a, part);
        nncl__arg_int(&a, (int)P);
        nncl__arg_int(&a, (int)rows);
        nncl__arg_int(&a, D);
        NNCL_TRY(nncl__launch_1d(&a, ex->dev, P * (((size_t)D + 7) / 8)));
        if (P > 1) {
            NNCL_TRY(norm_param_args(ex, n, LN_K_DW_MERGE, &a, acc_w, acc_b));
            nncl__arg_view(&a, part);
            nncl__arg_int(&a, (int)P);
            nncl__arg_int(&a, D);
            NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)D));
        }
    } else if (n->op == NNCL_OP_LAYERNORM && (nncl__need_grad(ex, n, 1) || norm_want(ex, n, 2))) {
        NNCL_TRY(nncl__norm_param_grads(ex, n, LN_K_DW, &a));
        NNCL_TRY(ln_launch_cols(&a, ex, per_row, rows, D));
    } else if (n->op == NNCL_OP_RMSNORM && nncl__need_grad(ex, n, 1)) {
        NNCL_TRY(nncl__kbegin(ex, n, LN_K_DW + k, &a));
        nncl__arg_view(&a, nncl__val(ex, n->in[0]));
        nncl__arg_view(&a, nncl__grd(ex, n));
        nncl__arg_view(&a, nncl__auxv(ex, n));
        nncl__arg_view(&a, nncl__grd(ex, n->in[1]));
        nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 1));
        NNCL_TRY(ln_launch_cols(&a, ex, per_row, rows, D));
    }
    return nncl__need_grad(ex, n, 0) ? ln_dx(ex, n, LN_K_DX + k, per_row) : NNCL_OK;
}

/* The double references of layer norm and RMS norm, which is layer norm
 * without the centring (mean 0) and without a bias. aux per row: layer
 * norm (mean, invstd), RMS norm invrms. */
static void ln_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    int rms = n->op == NNCL_OP_RMSNORM, bias = n->n_in == 3;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D;
        double s = 0, q = 0, mean = 0, inv;
        for (d = 0; !rms && d < D; d++) s += xr[d];
        if (!rms) mean = s / (double)D;
        for (d = 0; d < D; d++) q += (xr[d] - mean) * (xr[d] - mean);
        inv = 1 / sqrt(q / (double)D + n->fattr[0]);
        for (d = 0; d < D; d++) out[i * D + d] = (xr[d] - mean) * inv * in[1][d] + (bias ? in[2][d] : 0);
        if (rms) {
            aux[i] = inv;
        } else {
            aux[2 * i] = mean;
            aux[2 * i + 1] = inv;
        }
    }
}

/* With g = dy w and xhat = (x - mean) invstd: dx = invstd (g - mean(g) -
 * xhat mean(g xhat)), RMS norm without the mean(g) term; dw = the sum over
 * rows of dy xhat, db of dy. */
static void ln_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    size_t D = (size_t)ln_dim(n), rows = nncl__numel(n, r->batch) / D, i, d;
    int rms = n->op == NNCL_OP_RMSNORM, bias = n->n_in == 3;
    (void)out;
    for (i = 0; i < rows; i++) {
        const double *xr = in[0] + i * D, *gr = gout + i * D;
        double mean = rms ? 0 : aux[2 * i], inv = rms ? aux[i] : aux[2 * i + 1], sg = 0, sgx = 0;
        for (d = 0; d < D; d++) {
            double xhat = (xr[d] - mean) * inv;
            sg += gr[d] * in[1][d];
            sgx += gr[d] * in[1][d] * xhat;
            if (gin[1]) gin[1][d] += gr[d] * xhat;
            if (bias && gin[2]) gin[2][d] += gr[d];
        }
        if (rms) sg = 0;
        if (!gin[0]) continue;
        for (d = 0; d < D; d++) {
            double xhat = (xr[d] - mean) * inv;
            gin[0][i * D + d] += inv * (gr[d] * in[1][d] - (sg + xhat * sgx) / (double)D);
        }
    }
}

/* The layer norm's and RMS norm's rows of the op table: kernels
 * nncl_<op>_f32, its backward for the input and for the parameters, and the
 * same by a work-item per row (_rows), then EXTRA (LN_NO_EXTRA, or a comma
 * and more kernels); aux, the saved statistics. */
#define LN_NO_EXTRA
#define LN_MERGE , {"norm", "nncl_layernorm_backward_f32_params_merge"}
#define LN_OPDEF(NAME, AUX, EXTRA)                                                                              \
    const nncl__opdef nncl__opdef_##NAME = {                                                                    \
        .name = #NAME,                                                                                          \
        NNCL_KERNELS({"norm", "nncl_" #NAME "_f32"}, {"norm", "nncl_" #NAME "_backward_f32"},                   \
                     {"norm", "nncl_" #NAME "_backward_f32_params"}, {"norm", "nncl_" #NAME "_f32_rows"},       \
                     {"norm", "nncl_" #NAME "_backward_f32_rows"},                                              \
                     {"norm", "nncl_" #NAME "_backward_f32_params_rows"} EXTRA),                                \
        .shape = ln_shape, .check = ln_check, .aux_size = AUX, .forward = ln_forward, .backward = ln_backward,   \
        .bw_reads = NNCL_BW_INPUTS, .ref_forward = ln_ref_forward, .ref_backward = ln_ref_backward, .half = 2,  \
        .f32_aux = 1}
LN_OPDEF(layernorm, ln_aux, LN_MERGE);

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
    if (bias != 0 && bias != 1)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": bias %d must be 0 or 1", fn, name, bias);
    if (x->ndim < (x->batched ? 2 : 1))
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s has no feature dimension",
                                nncl__opdef_get(op)->name, name, nncl__shape_str(x, s1, sizeof s1));
    in[0] = x;
    fattr[0] = eps;
    return nncl__norm_node(g, op, name, x->shape[x->ndim - 1], bias, in, fattr, 1);
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

LN_OPDEF(rmsnorm, rms_aux, LN_NO_EXTRA);
#undef LN_OPDEF
#undef LN_NO_EXTRA
#undef LN_MERGE

nncl_node *nncl_rmsnorm(nncl_graph *g, nncl_node *x, float eps, const char *name) {
    return ln_build(g, NNCL_OP_RMSNORM, "nncl_rmsnorm", x, eps, 0, name);
}
#undef LN_PARTS
#undef LN_PART_ROWS
