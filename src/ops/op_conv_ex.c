/* op_conv_ex.c - convolutions of any geometry, PyTorch's Conv2d, Conv1d and
 * ConvTranspose2d: groups (depthwise: groups == channels), dilation, kernel,
 * stride and padding per axis, on kernels of no GEMM (cl/conv_ex.cl) with the
 * bias and activation of the dense helpers; depthwise layers on kernels of
 * their own (src/ops/conv_dw.c). A conv2d_ex of plain geometry
 * (groups 1, dilation 1, square kernel, one stride and padding) is built as
 * conv2d instead, whose GEMM paths are timed per layer (op_conv.c).
 *
 * Nodes: in[0] x, in[1] NAME.weight, optional in[2] NAME.bias.
 *   conv2d_ex         x [B,C,H,W], weight [O,C/G,kh,kw], bias [O] -> [B,O,OH,OW],
 *                     OH = (H + 2 ph - dh (kh - 1) - 1) / sh + 1 (floor)
 *   conv1d            x [B,C,L], weight [O,C/G,k]: the same with H = 1
 *   conv_transpose2d  x [B,C,H,W], weight [C,O/G,kh,kw], bias [O] -> [B,O,OH,OW],
 *                     OH = (H - 1) sh - 2 ph + kh + oph
 * iattr: [0] sh, [1] sw, [2] ph, [3] pw, [4] dh (transposed: oph), [5] dw
 * (opw), [6] groups G, [7] nncl_act; kernel sizes from the weight.
 *
 * Algorithm, in "conv space" (x [B,C,H,W] -> y [B,O,OH,OW] through w
 * [O,C/G,kh,kw]): forward y = conv(x), then y = act(y + b); backward
 * dy *= act'(y), db = sums of dy, dx = conv^T(dy), dw = the adjoint in w.
 * A transposed convolution is conv space read backwards: its input is the
 * y of conv space, its output the x, so its forward is conv^T, its input
 * gradient conv, and its weight gradient the same adjoint with x and dy
 * exchanged. Nothing is kept from forward to backward. */
#include "ops/conv_ex.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

enum { CX_K_FORWARD = NNCL_CX_K_FORWARD, CX_K_BACKWARD_INPUT, CX_K_BACKWARD_WEIGHT };

typedef nncl__cx_dims cx_dims;

static int cx_is_1d(const nncl_node *n) { return n->op == NNCL_OP_CONV1D; }
static int cx_is_t(const nncl_node *n) { return n->op == NNCL_OP_CONV_TRANSPOSE2D; }

/* Conv-space geometry of node n for a batch. */
static void cx_dims_of(const nncl_node *n, int batch, cx_dims *d) {
    const nncl_node *xin = n->in[0], *w = n->in[1];
    const nncl_node *big = cx_is_t(n) ? n : xin, *small = cx_is_t(n) ? xin : n; /* conv space's x and y */
    int one = cx_is_1d(n);
    d->transposed = cx_is_t(n);
    d->C = big->shape[1];
    d->H = one ? 1 : big->shape[2];
    d->W = big->shape[one ? 2 : 3];
    d->O = small->shape[1];
    d->OH = one ? 1 : small->shape[2];
    d->OW = small->shape[one ? 2 : 3];
    d->kh = one ? 1 : w->shape[2];
    d->kw = w->shape[one ? 2 : 3];
    d->sh = n->iattr[0];
    d->sw = n->iattr[1];
    d->ph = n->iattr[2];
    d->pw = n->iattr[3];
    d->dh = d->transposed ? 1 : n->iattr[4];
    d->dw = d->transposed ? 1 : n->iattr[5];
    d->G = n->iattr[6];
    d->act = n->iattr[7];
    d->B = (int)(nncl__numel(xin, batch) / (xin->sample_numel ? xin->sample_numel : 1));
}

/* ------------------------------------------------------------- shape */

/* The attributes alone (the builders' and the model reader's check). */
static nncl_status cx_check(nncl_graph *g, const nncl_node *n) {
    const char *op = nncl__opdef_get(n->op)->name;
    const int *a = n->iattr;
    if (a[0] < 1 || a[1] < 1 || a[2] < 0 || a[3] < 0 || a[6] < 1 || a[7] < (int)NNCL_ACT_NONE ||
        a[7] > (int)NNCL_ACT_TANH)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "%s \"%s\": needs strides >= 1, paddings >= 0, groups >= 1 and a known act; got "
                                 "stride %dx%d, padding %dx%d, groups %d, act %d",
                                 op, n->name, a[0], a[1], a[2], a[3], a[6], a[7]);
    if (cx_is_t(n) && (a[4] < 0 || a[5] < 0 || a[4] >= a[0] || a[5] >= a[1]))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "%s \"%s\": output padding %dx%d must be >= 0 and below the stride %dx%d", op, n->name,
                                 a[4], a[5], a[0], a[1]);
    if (!cx_is_t(n) && (a[4] < 1 || a[5] < 1))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": dilation %dx%d must be >= 1", op, n->name,
                                 a[4], a[5]);
    if (cx_is_1d(n) && (a[0] != 1 || a[2] != 0 || a[4] != 1))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "%s \"%s\": a 1-D convolution has stride 1, padding 0 and dilation 1 along H", op,
                                 n->name);
    return NNCL_OK;
}

/* Output size along one axis, or 0 where the kernel does not fit. */
static long long cx_out(const nncl_node *n, int in, int k, int st, int pad, int dil_or_op) {
    if (cx_is_t(n)) return ((long long)in - 1) * st - 2LL * pad + k + dil_or_op;
    /* the kernels' tap coordinates stay within int */
    if ((long long)in + 2LL * pad + (long long)dil_or_op * (k - 1) > INT_MAX / 2) return 0;
    if ((long long)in + 2LL * pad < (long long)dil_or_op * (k - 1) + 1) return 0;
    return ((long long)in + 2LL * pad - (long long)dil_or_op * (k - 1) - 1) / st + 1;
}

/* x's rank and channels against the groups, before any weight exists:
 * what the builders check before creating parameters, and the shape rule. */
static nncl_status cx_check_input(nncl_graph *g, const char *op, const char *name, const nncl_node *xin, int rank,
                                  int groups, int out_ch) {
    char s1[64];
    if (xin->ndim != rank)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s must be %d-D [B,C,%s]", op, name,
                                 nncl__shape_str(xin, s1, sizeof s1), rank, rank == 3 ? "L" : "H,W");
    if (groups < 1 || out_ch < 1 || xin->shape[1] % groups || out_ch % groups)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "%s \"%s\": channels of input %s and %d outputs must both be multiples of groups %d",
                                 op, name, nncl__shape_str(xin, s1, sizeof s1), out_ch, groups);
    return NNCL_OK;
}

static nncl_status cx_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0], *w = n->n_in > 1 ? n->in[1] : NULL, *b = n->n_in > 2 ? n->in[2] : NULL;
    const char *op = nncl__opdef_get(n->op)->name;
    char s1[64], s2[64];
    int one = cx_is_1d(n), t = cx_is_t(n), rank = one ? 3 : 4, G = n->iattr[6], O, k;
    long long oh, ow, per;
    if (!w || w->batched || w->ndim != rank)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": weight %s must be %d-D", op, n->name,
                                 w ? nncl__shape_str(w, s2, sizeof s2) : "(none)", rank);
    if ((long long)w->shape[1] * G > INT_MAX)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": weight %s with groups %d is too large", op, n->name,
                                 nncl__shape_str(w, s2, sizeof s2), G);
    O = t ? w->shape[1] * G : w->shape[0];
    NNCL_TRY(cx_check_input(g, op, n->name, xin, rank, G, O));
    if ((t ? w->shape[0] != xin->shape[1] : w->shape[1] * G != xin->shape[1]))
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "%s \"%s\": input %s does not fit weight %s (want [%s%d,...] for "
                                 "groups %d)",
                                 op, n->name, nncl__shape_str(xin, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2),
                                 t ? "" : "O,", t ? xin->shape[1] : xin->shape[1] / G, G);
    if (b && (b->batched || b->ndim != 1 || b->shape[0] != O))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": bias %s does not fit weight %s (want [%d])", op,
                                 n->name, nncl__shape_str(b, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2), O);
    oh = one ? 1 : cx_out(n, xin->shape[2], w->shape[2], n->iattr[0], n->iattr[2], n->iattr[4]);
    ow = cx_out(n, xin->shape[rank - 1], w->shape[rank - 1], n->iattr[1], n->iattr[3], n->iattr[5]);
    if (oh < 1 || ow < 1)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "%s \"%s\": kernel of weight %s does not fit input %s with its "
                                 "padding, stride and dilation (or they pass 2^30)",
                                 op, n->name, nncl__shape_str(w, s2, sizeof s2), nncl__shape_str(xin, s1, sizeof s1));
    /* the kernels index a sample's elements with int, and so do the weight's taps */
    k = one ? 1 : w->shape[2];
    per = (long long)O * oh * ow;
    if (oh > INT_MAX || ow > INT_MAX || per > INT_MAX / 4 || (long long)xin->sample_numel > INT_MAX / 4 ||
        (long long)w->shape[0] * w->shape[1] * k * w->shape[rank - 1] > INT_MAX / 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s with weight %s is too large", op, n->name,
                                 nncl__shape_str(xin, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2));
    n->batched = xin->batched;
    n->ndim = rank;
    n->shape[0] = xin->shape[0];
    n->shape[1] = O;
    if (!one) n->shape[2] = (int)oh;
    n->shape[rank - 1] = (int)ow;
    return NNCL_OK;
}

/* ------------------------------------------------------------- device */

void nncl__cx_args_geometry(nncl__args *a, const cx_dims *d) {
    nncl__arg_int(a, d->C);
    nncl__arg_int(a, d->H);
    nncl__arg_int(a, d->W);
    nncl__arg_int(a, d->O);
    nncl__arg_int(a, d->OH);
    nncl__arg_int(a, d->OW);
    nncl__arg_int(a, d->kh);
    nncl__arg_int(a, d->kw);
    nncl__arg_int(a, d->sh);
    nncl__arg_int(a, d->sw);
    nncl__arg_int(a, d->ph);
    nncl__arg_int(a, d->pw);
    nncl__arg_int(a, d->dh);
    nncl__arg_int(a, d->dw);
    nncl__arg_int(a, d->G);
}

void nncl__cx_args_map(nncl__args *a, nncl__exec *ex, const nncl_node *n, nncl__view from, nncl__view to,
                       const cx_dims *d) {
    nncl__arg_view(a, from);
    nncl__arg_view(a, nncl__val(ex, n->in[1]));
    nncl__arg_view(a, to);
    nncl__cx_args_geometry(a, d);
}

static size_t cx_xn(const cx_dims *d) { return (size_t)d->B * d->C * d->H * d->W; }
static size_t cx_yn(const cx_dims *d) { return (size_t)d->B * d->O * d->OH * d->OW; }

/* Conv space: yv (+)= conv(xv) (slot FORWARD, over y's elements) or
 * xv (+)= conv^T(yv) (slot BACKWARD_INPUT, over x's). */
static nncl_status cx_launch_map(nncl__exec *ex, const nncl_node *n, const cx_dims *d, int slot, nncl__view from,
                                 nncl__view to, int acc) {
    nncl__args a;
    size_t count = slot == CX_K_FORWARD ? cx_yn(d) : cx_xn(d);
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__cx_args_map(&a, ex, n, from, to, d);
    nncl__arg_count(&a, count);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, count);
}

/* Conv space: dw (+)= the adjoint in w of conv(xs) against ys. */
static nncl_status cx_launch_dw(nncl__exec *ex, const nncl_node *n, const cx_dims *d, nncl__view xs, nncl__view ys) {
    nncl__args a;
    size_t local = 64, global, rows = (size_t)d->B * d->OH; /* the lanes share the rows of y */
    size_t nw = (size_t)d->O * (size_t)(d->C / d->G) * d->kh * d->kw;
    if (local > ex->dev->max_work_group) local = ex->dev->max_work_group;
    while (local > 1 && local / 2 >= rows) local /= 2;
    global = nw * local;
    NNCL_TRY(nncl__kbegin(ex, n, CX_K_BACKWARD_WEIGHT, &a));
    nncl__arg_view(&a, xs);
    nncl__arg_view(&a, ys);
    nncl__arg_view(&a, nncl__grd(ex, n->in[1]));
    nncl__cx_args_geometry(&a, d);
    nncl__arg_count(&a, (size_t)d->B);
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 1));
    nncl__arg_local(&a, local * sizeof(float));
    return nncl__launch(&a, ex->dev, 1, &global, &local);
}

/* Whole-batch element counts the kernels index with int. */
static nncl_status cx_fits(nncl__exec *ex, const nncl_node *n, const cx_dims *d) {
    if (cx_xn(d) > (size_t)INT_MAX || cx_yn(d) > (size_t)INT_MAX)
        return nncl__fail(ex->ctx, NNCL_ERR_UNSUPPORTED, "%s \"%s\": a batch of %d has more than 2^31 elements",
                          nncl__opdef_get(n->op)->name, n->name, d->B);
    return NNCL_OK;
}

/* The depthwise weight gradient's workspace, at the largest batch. */
static nncl_status cx_prepare(nncl__exec *ex, nncl_node *n, size_t *bytes) {
    cx_dims d;
    cx_dims_of(n, ex->batch, &d);
    *bytes = nncl__dw_workspace(&d) * sizeof(float);
    return NNCL_OK;
}

static nncl_status cx_forward(nncl__exec *ex, nncl_node *n) {
    cx_dims d;
    nncl__view y = nncl__val(ex, n);
    cx_dims_of(n, ex->batch, &d);
    NNCL_TRY(cx_fits(ex, n, &d));
    if (nncl__dw_on(&d)) return nncl__dw_forward(ex, n, &d, nncl__val(ex, n->in[0]), y, n->n_in == 3 ? n->in[2] : NULL);
    if (d.transposed)
        NNCL_TRY(cx_launch_map(ex, n, &d, CX_K_BACKWARD_INPUT, nncl__val(ex, n->in[0]), y, 0));
    else
        NNCL_TRY(cx_launch_map(ex, n, &d, CX_K_FORWARD, nncl__val(ex, n->in[0]), y, 0));
    return nncl__bias_act(ex, n, y, n->n_in == 3 ? n->in[2] : NULL, n->shape[1],
                          (int)(nncl__numel(n, 1) / (size_t)n->shape[1]), nncl__numel(n, ex->batch), d.act);
}

static nncl_status cx_backward(nncl__exec *ex, nncl_node *n) {
    cx_dims d;
    nncl__view dy = nncl__grd(ex, n), xv = nncl__val(ex, n->in[0]);
    int inner = (int)(nncl__numel(n, 1) / (size_t)n->shape[1]);
    cx_dims_of(n, ex->batch, &d);
    NNCL_TRY(cx_fits(ex, n, &d));
    NNCL_TRY(nncl__act_backward_inplace(ex, n, dy, nncl__val(ex, n), nncl__numel(n, ex->batch), d.act));
    if (n->n_in == 3 && nncl__need_grad(ex, n, 2))
        NNCL_TRY(
            nncl__bias_grad(ex, n, dy, d.B, n->shape[1], inner, nncl__grd(ex, n->in[2]), nncl__grad_accumulate(ex, n, 2)));
    if (nncl__need_grad(ex, n, 1))
        NNCL_TRY(nncl__dw_on(&d)   ? nncl__dw_backward_weight(ex, n, &d, xv, dy)
                 : d.transposed ? cx_launch_dw(ex, n, &d, dy, xv)
                                : cx_launch_dw(ex, n, &d, xv, dy));
    if (nncl__need_grad(ex, n, 0)) {
        int acc = nncl__grad_accumulate(ex, n, 0);
        nncl__view dx = nncl__grd(ex, n->in[0]);
        NNCL_TRY(nncl__dw_on(&d)   ? nncl__dw_backward_input(ex, n, &d, dy, dx, acc)
                 : d.transposed ? cx_launch_map(ex, n, &d, CX_K_FORWARD, dy, dx, acc)
                                : cx_launch_map(ex, n, &d, CX_K_BACKWARD_INPUT, dy, dx, acc));
    }
    return NNCL_OK;
}

/* ------------------------------------------------------------- reference */

/* Every tap of conv space: mode 0 ys += conv(xs); 1 xs += conv^T(ys); 2
 * dw += the adjoint in w of xs against ys. */
static void cx_ref_taps(const cx_dims *d, int mode, double *xs, const double *w, double *ys, double *dw) {
    int Cg = d->C / d->G, Og = d->O / d->G, b, o, oh, ow, cg, ki, kj;
    for (b = 0; b < d->B; b++)
        for (o = 0; o < d->O; o++)
            for (oh = 0; oh < d->OH; oh++)
                for (ow = 0; ow < d->OW; ow++) {
                    size_t yi = (((size_t)b * d->O + o) * d->OH + oh) * d->OW + ow;
                    for (cg = 0; cg < Cg; cg++)
                        for (ki = 0; ki < d->kh; ki++)
                            for (kj = 0; kj < d->kw; kj++) {
                                int ih = oh * d->sh - d->ph + ki * d->dh, iw = ow * d->sw - d->pw + kj * d->dw;
                                size_t xi, wi = (((size_t)o * Cg + cg) * d->kh + ki) * d->kw + kj;
                                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                                xi = (((size_t)b * d->C + (size_t)(o / Og) * Cg + cg) * d->H + ih) * d->W + iw;
                                if (mode == 0)
                                    ys[yi] += xs[xi] * w[wi];
                                else if (mode == 1)
                                    xs[xi] += ys[yi] * w[wi];
                                else
                                    dw[wi] += xs[xi] * ys[yi];
                            }
                }
}

static void cx_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    cx_dims d;
    size_t i, count = nncl__numel(n, r->batch), inner = nncl__numel(n, 1) / (size_t)n->shape[1];
    (void)aux;
    cx_dims_of(n, r->batch, &d);
    memset(out, 0, count * sizeof *out);
    if (d.transposed)
        cx_ref_taps(&d, 1, out, in[1], (double *)in[0], NULL);
    else
        cx_ref_taps(&d, 0, (double *)in[0], in[1], out, NULL);
    for (i = 0; i < count; i++)
        out[i] = nncl__act_ref(out[i] + (n->n_in == 3 ? in[2][(i / inner) % (size_t)n->shape[1]] : 0), d.act);
}

static void cx_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    cx_dims d;
    size_t i, count = nncl__numel(n, r->batch), inner = nncl__numel(n, 1) / (size_t)n->shape[1];
    double *gy = (double *)malloc(count * sizeof *gy);
    (void)aux;
    if (!gy) return; /* the comparison then fails on the missing gradients */
    cx_dims_of(n, r->batch, &d);
    for (i = 0; i < count; i++) {
        gy[i] = gout[i] * nncl__act_grad_ref(out[i], d.act);
        if (n->n_in == 3 && gin[2]) gin[2][(i / inner) % (size_t)n->shape[1]] += gy[i];
    }
    if (d.transposed) {
        if (gin[0]) cx_ref_taps(&d, 0, gy, in[1], gin[0], NULL);
        if (gin[1]) cx_ref_taps(&d, 2, gy, NULL, (double *)in[0], gin[1]);
    } else {
        if (gin[0]) cx_ref_taps(&d, 1, gin[0], in[1], gy, NULL);
        if (gin[1]) cx_ref_taps(&d, 2, (double *)in[0], NULL, gy, gin[1]);
    }
    free(gy);
}

#define CX_KERNELS                                                                                                     \
    NNCL_KERNELS(                                                                                                      \
        NNCL_DENSE_KERNELS, {"conv_ex", "nncl_conv_ex_f32"}, {"conv_ex", "nncl_conv_ex_backward_f32_input"},           \
            {"conv_ex", "nncl_conv_ex_backward_f32_weight"}, {"conv_dw", "nncl_conv_dw_f32"},                          \
            {"conv_dw", "nncl_conv_dw_backward_f32_input"}, {"conv_dw", "nncl_conv_dw_backward_f32_weight"},           \
            {"conv_dw", "nncl_conv_dw_backward_f32_weight_k3"}, {"conv_dw", "nncl_conv_dw_backward_f32_weight_k5"},    \
            {"conv_dw", "nncl_conv_dw_backward_f32_weight_sum"}, {"conv_dw", "nncl_conv_dw_f32_k3"},                   \
            {"conv_dw", "nncl_conv_dw_f32_k5"}, {"conv_dw", "nncl_conv_dw_backward_f32_input_k3"},                     \
            {"conv_dw", "nncl_conv_dw_backward_f32_input_k5"}, {"conv_dw", "nncl_conv_dw_backward_f32_input_s2_k3"},   \
            {"conv_dw", "nncl_conv_dw_backward_f32_input_s2_k5"},   \
            {"conv_dw_flat", "nncl_conv_dw_f32_flat_k3"}, {"conv_dw_flat", "nncl_conv_dw_f32_flat_k5"}, \
            {"conv_dw_flat", "nncl_conv_dw_backward_f32_input_flat_k3"},                                     \
            {"conv_dw_flat", "nncl_conv_dw_backward_f32_input_flat_k5"},                                     \
            {"conv_dw_flat", "nncl_conv_dw_backward_f32_weight_flat_k3"},                                    \
            {"conv_dw_flat", "nncl_conv_dw_backward_f32_weight_flat_k5"})
#define CX_ROW(nm)                                                                                                     \
    .name = nm, CX_KERNELS, .shape = cx_shape, .check = cx_check, .prepare = cx_prepare,                    \
    .forward = cx_forward, .backward = cx_backward, .bw_reads = NNCL_BW_INPUTS | NNCL_BW_OUTPUT,                       \
    .ref_forward = cx_ref_forward, .ref_backward = cx_ref_backward, .half = 2

const nncl__opdef nncl__opdef_conv2d_ex = {CX_ROW("conv2d_ex")};
const nncl__opdef nncl__opdef_conv1d = {CX_ROW("conv1d")};
const nncl__opdef nncl__opdef_conv_transpose2d = {CX_ROW("conv_transpose2d")};

/* ------------------------------------------------------------- builders */

/* iattr in the layout above: a4, a5 the dilation (transposed: the output
 * padding). */
static void cx_attrs(int *iattr, int sh, int sw, int ph, int pw, int a4, int a5, int groups, nncl_act act) {
    iattr[0] = sh;
    iattr[1] = sw;
    iattr[2] = ph;
    iattr[3] = pw;
    iattr[4] = a4;
    iattr[5] = a5;
    iattr[6] = groups;
    iattr[7] = (int)act;
}

static nncl_node *cx_no_options(nncl_graph *g, const char *fn, const char *name) {
    return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": options are NULL", fn, name ? name : "");
}

/* NAME.weight (and NAME.bias [O]) with PyTorch's initialisation,
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for fan_in = the weight's shape[1]
 * times the kernel's taps, then the node; a refused node takes its
 * parameters back. The weight is [O, C/G, kh, kw] ([O, C/G, kw] for rank 3,
 * where kh is 1), transposed [C, O/G, kh, kw]. */
static nncl_node *cx_build(nncl_graph *g, nncl__op op, const char *fn, nncl_node *x, int rank, int out_ch, int kh,
                           int kw, int bias, const int *iattr, const char *name) {
    char wn[NNCL_NAME_MAX + 8], bn[NNCL_NAME_MAX + 8];
    nncl_node *in[3];
    int keep, k, G = iattr[6], wshape[4];
    float fan = 1;
    if (!g) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    if (kh < 1 || kw < 1 || G < 1) {
        if (rank == 3)
            return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": kernel %d and groups %d must be >= 1", fn,
                                    name ? name : "", kw, G);
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": kernel %dx%d and groups %d must be >= 1",
                                fn, name ? name : "", kh, kw, G);
    }
    if (!x)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": input is NULL (an earlier builder failed?)",
                                fn, name ? name : "");
    if (!name || !*name || strlen(name) + 8 > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: needs a name of 1 to %d characters", fn,
                                NNCL_NAME_MAX - 8);
    if (cx_check_input(g, nncl__opdef_get(op)->name, name, x, rank, G, out_ch) != NNCL_OK) return NULL;
    wshape[0] = op == NNCL_OP_CONV_TRANSPOSE2D ? x->shape[1] : out_ch;
    wshape[1] = op == NNCL_OP_CONV_TRANSPOSE2D ? out_ch / G : x->shape[1] / G;
    if (rank == 4) wshape[2] = kh;
    wshape[rank - 1] = kw;
    for (k = 1; k < rank; k++) fan *= (float)wshape[k];
    keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    in[0] = x;
    in[1] = nncl_param(g, wn, rank, wshape, NNCL_INIT_UNIFORM, 1.0f / sqrtf(fan));
    in[2] = bias && in[1] ? nncl_param(g, bn, 1, &out_ch, NNCL_INIT_UNIFORM, 1.0f / sqrtf(fan)) : NULL;
    return nncl__layer_add(g, keep, op, name, bias ? 3 : 2, in, iattr, 8, NULL, 0);
}

nncl_conv2d_options nncl_conv2d_default(void) {
    static const nncl_conv2d_options d = {.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
                                          .dilation_h = 1, .dilation_w = 1, .groups = 1, .bias = 1,
                                          .act = NNCL_ACT_NONE};
    return d;
}

nncl_node *nncl_conv2d_ex(nncl_graph *g, nncl_node *x, int out_channels, const nncl_conv2d_options *o,
                          const char *name) {
    int iattr[8];
    if (!o) return cx_no_options(g, "nncl_conv2d_ex", name);
    if (o->groups == 1 && o->dilation_h == 1 && o->dilation_w == 1 && o->kernel_h == o->kernel_w &&
        o->stride_h == o->stride_w && o->padding_h == o->padding_w)
        return nncl_conv2d(g, x, out_channels, o->kernel_h, o->stride_h, o->padding_h, o->bias, o->act, name);
    cx_attrs(iattr, o->stride_h, o->stride_w, o->padding_h, o->padding_w, o->dilation_h, o->dilation_w, o->groups,
             o->act);
    return cx_build(g, NNCL_OP_CONV2D_EX, "nncl_conv2d_ex", x, 4, out_channels, o->kernel_h, o->kernel_w, o->bias,
                    iattr, name);
}

nncl_conv1d_options nncl_conv1d_default(void) {
    static const nncl_conv1d_options d = {.kernel = 3, .stride = 1, .dilation = 1, .groups = 1, .bias = 1,
                                          .act = NNCL_ACT_NONE};
    return d;
}

nncl_node *nncl_conv1d(nncl_graph *g, nncl_node *x, int out_channels, const nncl_conv1d_options *o, const char *name) {
    int iattr[8];
    if (!o) return cx_no_options(g, "nncl_conv1d", name);
    cx_attrs(iattr, 1, o->stride, 0, o->padding, 1, o->dilation, o->groups, o->act);
    return cx_build(g, NNCL_OP_CONV1D, "nncl_conv1d", x, 3, out_channels, 1, o->kernel, o->bias, iattr, name);
}

nncl_conv_transpose2d_options nncl_conv_transpose2d_default(void) {
    static const nncl_conv_transpose2d_options d = {.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
                                                    .groups = 1, .bias = 1, .act = NNCL_ACT_NONE};
    return d;
}

nncl_node *nncl_conv_transpose2d(nncl_graph *g, nncl_node *x, int out_channels, const nncl_conv_transpose2d_options *o,
                                 const char *name) {
    int iattr[8];
    if (!o) return cx_no_options(g, "nncl_conv_transpose2d", name);
    cx_attrs(iattr, o->stride_h, o->stride_w, o->padding_h, o->padding_w, o->output_padding_h, o->output_padding_w,
             o->groups, o->act);
    return cx_build(g, NNCL_OP_CONV_TRANSPOSE2D, "nncl_conv_transpose2d", x, 4, out_channels, o->kernel_h,
                    o->kernel_w, o->bias, iattr, name);
}

#undef CX_KERNELS
#undef CX_ROW
