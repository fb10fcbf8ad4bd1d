/* op_groupnorm.c - PyTorch's GroupNorm over x [B, C, *] (any trailing
 * dimensions, S elements per channel), and InstanceNorm as its case of
 * one channel per group (PyTorch's InstanceNorm without running
 * statistics: the same in training and evaluation). Each sample's C/G
 * channels of a group are normalised together by their mean and biased
 * variance, then scaled and shifted per channel when affine.
 *
 * Node: in[0] x, optional in[1] NAME.weight [C] (ones) and in[2]
 * NAME.bias [C] (zeros); iattr[0] groups G (C a multiple of it); fattr[0]
 * eps. aux: (mean, invstd) per (sample, group), fp32. Kernels
 * cl/groupnorm.cl: a work-group per (sample, group) row of D = (C/G) S
 * contiguous elements forward and for dx, one per channel for dw and db:
 *   y = xhat w[c] + b[c],  xhat = (x - mean) invstd,
 *   dx = invstd (g - mean_row(g) - xhat mean_row(g xhat)),  g = dy w[c]. */
#include "ops/ops.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

enum { GN_K_FORWARD, GN_K_DX, GN_K_DWDB };

typedef struct gn_dims {
    int B, C, S, G, D, affine;
} gn_dims;

static void gn_dims_of(const nncl_node *n, int batch, gn_dims *d) {
    const nncl_node *xin = n->in[0];
    d->C = xin->shape[1];
    d->S = (int)(xin->sample_numel / (size_t)d->C);
    d->B = (int)(nncl__numel(xin, batch) / xin->sample_numel);
    d->G = n->iattr[0];
    d->D = d->C / d->G * d->S;
    d->affine = n->n_in == 3;
}

/* iattr[0] groups >= 1; fattr[0] eps finite and > 0. */
static nncl_status gn_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] < 1 || !(n->fattr[0] > 0 && isfinite(n->fattr[0])))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "groupnorm \"%s\": needs groups >= 1 and eps finite and > 0; got %d and %g", n->name,
                                 n->iattr[0], (double)n->fattr[0]);
    return NNCL_OK;
}

/* x batched [B, C, ...] with C a multiple of groups: the builders' check
 * before they make parameters, and the shape rule's. */
static nncl_status gn_check_input(nncl_graph *g, const char *name, const nncl_node *xin, int groups) {
    char s1[64];
    if (!xin->batched || xin->ndim < 2 || groups < 1 || xin->shape[1] % groups)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "groupnorm \"%s\": input %s must be [B,C,...] with C a multiple of "
                                 "groups %d",
                                 name, nncl__shape_str(xin, s1, sizeof s1), groups);
    return NNCL_OK;
}

static nncl_status gn_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    char s1[64], s2[64];
    int i;
    NNCL_TRY(gn_check_input(g, n->name, xin, n->iattr[0]));
    if (n->n_in == 2)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "groupnorm \"%s\": takes a weight and a bias, or neither", n->name);
    for (i = 1; i < n->n_in; i++)
        if (n->in[i]->batched || n->in[i]->ndim != 1 || n->in[i]->shape[0] != xin->shape[1])
            return nncl__graph_error(g, NNCL_ERR_SHAPE, "groupnorm \"%s\": input %s does not fit %s %s (want [%d])",
                                     n->name, nncl__shape_str(xin, s1, sizeof s1), i == 1 ? "weight" : "bias",
                                     nncl__shape_str(n->in[i], s2, sizeof s2), xin->shape[1]);
    n->batched = 1;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    return NNCL_OK;
}

static size_t gn_aux(const nncl_node *n, int batch) {
    return 2 * (nncl__numel(n->in[0], batch) / n->in[0]->sample_numel) * (size_t)n->iattr[0];
}

static nncl_status gn_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    gn_dims d;
    nncl__view none = nncl__val(ex, n->in[0]);
    size_t rows;
    gn_dims_of(n, ex->batch, &d);
    rows = (size_t)d.B * (size_t)d.G;
    NNCL_TRY(nncl__kbegin(ex, n, GN_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, d.affine ? nncl__val(ex, n->in[1]) : none);
    nncl__arg_view(&a, d.affine ? nncl__val(ex, n->in[2]) : none);
    nncl__arg_int(&a, d.affine);
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_count(&a, rows);
    nncl__arg_int(&a, d.D);
    nncl__arg_int(&a, d.S);
    nncl__arg_int(&a, d.G);
    nncl__arg_float(&a, n->fattr[0]);
    return nncl__launch_rows(&a, ex->dev, rows, (size_t)d.D);
}

static nncl_status gn_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    gn_dims d;
    nncl__view none = nncl__auxv(ex, n);
    size_t rows;
    gn_dims_of(n, ex->batch, &d);
    rows = (size_t)d.B * (size_t)d.G;
    if (d.affine && (nncl__need_grad(ex, n, 1) || nncl__need_grad(ex, n, 2))) {
        int want_w = nncl__need_grad(ex, n, 1), want_b = nncl__need_grad(ex, n, 2);
        NNCL_TRY(nncl__kbegin(ex, n, GN_K_DWDB, &a));
        nncl__arg_view(&a, nncl__val(ex, n->in[0]));
        nncl__arg_view(&a, nncl__grd(ex, n));
        nncl__arg_view(&a, nncl__auxv(ex, n));
        nncl__arg_view(&a, want_w ? nncl__grd(ex, n->in[1]) : none);
        nncl__arg_int(&a, want_w);
        nncl__arg_int(&a, want_w ? nncl__grad_accumulate(ex, n, 1) : 0);
        nncl__arg_view(&a, want_b ? nncl__grd(ex, n->in[2]) : none);
        nncl__arg_int(&a, want_b);
        nncl__arg_int(&a, want_b ? nncl__grad_accumulate(ex, n, 2) : 0);
        nncl__arg_int(&a, d.B);
        nncl__arg_int(&a, d.C);
        nncl__arg_int(&a, d.S);
        nncl__arg_int(&a, d.G);
        NNCL_TRY(nncl__launch_rows(&a, ex->dev, (size_t)d.C, (size_t)d.B * (size_t)d.S));
    }
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, GN_K_DX, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, d.affine ? nncl__val(ex, n->in[1]) : nncl__val(ex, n->in[0]));
    nncl__arg_int(&a, d.affine);
    nncl__arg_view(&a, nncl__auxv(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    nncl__arg_count(&a, rows);
    nncl__arg_int(&a, d.D);
    nncl__arg_int(&a, d.S);
    nncl__arg_int(&a, d.G);
    return nncl__launch_rows(&a, ex->dev, rows, (size_t)d.D);
}

/* ------------------------------------------------------------- reference */

static void gn_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    gn_dims d;
    size_t row, k;
    gn_dims_of(n, r->batch, &d);
    for (row = 0; row < (size_t)d.B * d.G; row++) {
        const double *xr = in[0] + row * d.D;
        double s = 0, q = 0, mean, inv;
        size_t c0 = (row % (size_t)d.G) * (size_t)(d.C / d.G);
        for (k = 0; k < (size_t)d.D; k++) s += xr[k];
        mean = s / d.D;
        for (k = 0; k < (size_t)d.D; k++) q += (xr[k] - mean) * (xr[k] - mean);
        inv = 1 / sqrt(q / d.D + n->fattr[0]);
        for (k = 0; k < (size_t)d.D; k++) {
            double v = (xr[k] - mean) * inv;
            out[row * d.D + k] = d.affine ? v * in[1][c0 + k / d.S] + in[2][c0 + k / d.S] : v;
        }
        aux[2 * row] = mean;
        aux[2 * row + 1] = inv;
    }
}

static void gn_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    gn_dims d;
    size_t row, k;
    (void)out;
    gn_dims_of(n, r->batch, &d);
    for (row = 0; row < (size_t)d.B * d.G; row++) {
        const double *xr = in[0] + row * d.D, *gr = gout + row * d.D;
        double mean = aux[2 * row], inv = aux[2 * row + 1], sg = 0, sgx = 0;
        size_t c0 = (row % (size_t)d.G) * (size_t)(d.C / d.G);
        for (k = 0; k < (size_t)d.D; k++) {
            double xhat = (xr[k] - mean) * inv, g = gr[k] * (d.affine ? in[1][c0 + k / d.S] : 1);
            sg += g;
            sgx += g * xhat;
            if (d.affine && gin[1]) gin[1][c0 + k / d.S] += gr[k] * xhat;
            if (d.affine && gin[2]) gin[2][c0 + k / d.S] += gr[k];
        }
        if (!gin[0]) continue;
        for (k = 0; k < (size_t)d.D; k++) {
            double xhat = (xr[k] - mean) * inv, g = gr[k] * (d.affine ? in[1][c0 + k / d.S] : 1);
            gin[0][row * d.D + k] += inv * (g - (sg + xhat * sgx) / d.D);
        }
    }
}

const nncl__opdef nncl__opdef_groupnorm = {
    .name = "groupnorm",
    NNCL_KERNELS({"groupnorm", "nncl_groupnorm_f32"}, {"groupnorm", "nncl_groupnorm_backward_f32"},
                {"groupnorm", "nncl_groupnorm_backward_f32_params"}),
    .shape = gn_shape, .check = gn_check, .aux_size = gn_aux, .forward = gn_forward, .backward = gn_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = gn_ref_forward, .ref_backward = gn_ref_backward, .half = 2,
    .f32_aux = 1};

/* ------------------------------------------------------------- builders */

nncl_node *nncl_groupnorm(nncl_graph *g, nncl_node *x, int groups, float eps, int affine, const char *name) {
    char wn[NNCL_NAME_MAX + 16], bn[NNCL_NAME_MAX + 16];
    nncl_node *in[3];
    int keep, C, iattr[1];
    float fattr[1];
    if (!g) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_groupnorm: graph is NULL");
    if (!x)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_groupnorm \"%s\": input is NULL (an earlier "
                                "builder failed?)",
                                name ? name : "");
    if (affine && (!name || !*name || strlen(name) + 8 > NNCL_NAME_MAX))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_groupnorm: affine needs a name of 1 to %d characters", NNCL_NAME_MAX - 8);
    if (gn_check_input(g, name ? name : "", x, groups) != NNCL_OK) return NULL;
    C = x->shape[1];
    in[0] = x;
    iattr[0] = groups;
    fattr[0] = eps;
    if (!affine) return nncl__node_add(g, NNCL_OP_GROUPNORM, name, 1, in, iattr, 1, fattr, 1);
    keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    in[1] = nncl_param(g, wn, 1, &C, NNCL_INIT_ONES, 0);
    in[2] = in[1] ? nncl_param(g, bn, 1, &C, NNCL_INIT_ZEROS, 0) : NULL;
    return nncl__layer_add(g, keep, NNCL_OP_GROUPNORM, name, 3, in, iattr, 1, fattr, 1);
}

nncl_node *nncl_instancenorm(nncl_graph *g, nncl_node *x, float eps, int affine, const char *name) {
    if (!g || !x) return nncl_groupnorm(g, x, 1, eps, affine, name); /* its message */
    if (x->ndim < 2) return nncl_groupnorm(g, x, 1, eps, affine, name);
    return nncl_groupnorm(g, x, x->shape[1], eps, affine, name);
}
