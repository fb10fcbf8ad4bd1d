/* op_conv.c - 2-D convolution, NCHW, square kernel, as im2col + CLBlast GEMM
 * over chunks of samples, bias and activation by the dense helpers; or where
 * timing the layer found it faster (or forced; src/ops/conv_pick.c) as the
 * implicit GEMM of src/ops/conv_own.c or, for a first 3x3 layer, on the 3x3
 * path (src/ops/conv3.c). Nothing is kept from forward to backward: backward
 * recomputes the column matrix: no memory beyond x, y and dy.
 *
 * Node: in[0] x [B,C,H,W], in[1] NAME.weight [O,C,k,k], optional in[2]
 * NAME.bias [O]. iattr: [0] kernel k, [1] stride, [2] padding, [3] nncl_act.
 * y [B,O,OH,OW], OH = (H + 2 pad - k) / stride + 1 (floor, as PyTorch).
 *
 * Algorithm, per chunk of S samples (N = S*OH*OW columns, ckk = C*k*k):
 *   forward   col[ckk,N] = im2col(x);  Y'[O,N] = W col;  y = reorder(Y')
 *             then y = act(y + b) over the whole batch;
 *   backward  dy *= act'(y) in place; db = sums of dy; dY' = reorder(dy);
 *             dW (+)= dY' col^T (col recomputed); col = W^T dY';
 *             dx (+)= col2im(col).
 * With S == 1 the GEMM layout is NCHW already: the GEMMs read and write y,
 * dy and (for a 1x1, stride 1, unpadded kernel) x in place, without Y' or
 * the reorders, and a pointwise kernel needs no im2col at all.
 *
 * Workspace: col and Y' live at the END of the plan's CLBlast temporary
 * buffer (ex->gemm_temp), whose start CLBlast uses for its own padded copies
 * during each GEMM; prepare reports CLBlast's bound plus ours. S is chosen
 * so that both together, (ckk + O)*OH*OW floats per sample plus CLBlast's
 * share, fit in 1/8 of the plan's activation arena (at least 64 Ki floats):
 * the workspace stays a small fraction of the activations however large
 * the batch, and the batch still goes through a few large GEMMs. */
#include "ops/conv.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

#define CONV_WS_DIV 8         /* the workspace may take 1/8 of the arena... */
#define CONV_WS_FLOOR 65536   /* ...or this many floats, whichever is more */
#define CONV_ALIGN 16         /* floats: where the workspace starts */

void nncl__conv_dims_of(const nncl_node *n, int batch, nncl__conv_dims *d) {
    const nncl_node *xin = n->in[0];
    d->C = xin->shape[1];
    d->H = xin->shape[2];
    d->W = xin->shape[3];
    d->O = n->shape[1];
    d->OH = n->shape[2];
    d->OW = n->shape[3];
    d->k = n->iattr[0];
    d->st = n->iattr[1];
    d->pad = n->iattr[2];
    d->act = n->iattr[3];
    d->ckk = (size_t)d->C * (size_t)d->k * (size_t)d->k;
    d->ohw = (size_t)d->OH * (size_t)d->OW;
    d->pointwise = d->k == 1 && d->st == 1 && d->pad == 0;
    d->dxg = 0;
    d->B = (int)(nncl__numel(xin, batch) / ((size_t)d->C * (size_t)d->H * (size_t)d->W));
}

/* ------------------------------------------------------------- shape */

static int conv_out_size(int in, int k, int st, int pad) { return (in + 2 * pad - k) / st + 1; }

/* What the builder can check before creating parameters, and the shape rule
 * again: a 4-D input, sane attributes, a kernel within the padded input. */
static nncl_status conv_check_input(nncl_graph *g, const char *name, const nncl_node *xin, int out_ch, int k, int st,
                                    int pad, int act) {
    char s1[64];
    size_t ckk, ohw, per;
    if (xin->ndim != 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": input %s must be 4-D [B,C,H,W]", name,
                                 nncl__shape_str(xin, s1, sizeof s1));
    if (out_ch <= 0 || k <= 0 || st <= 0 || pad < 0 || act < (int)NNCL_ACT_NONE || act > (int)NNCL_ACT_TANH)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "conv2d \"%s\": needs out_channels, kernel, stride > 0, padding >= 0 and a known act; "
                                 "got %d, %d, %d, %d, act %d",
                                 name, out_ch, k, st, pad, act);
    if ((long long)xin->shape[2] + 2LL * pad > INT_MAX || (long long)xin->shape[3] + 2LL * pad > INT_MAX)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": input %s padded by %d is too large", name,
                                 nncl__shape_str(xin, s1, sizeof s1), pad);
    if (xin->shape[2] + 2 * pad < k || xin->shape[3] + 2 * pad < k)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": kernel %d is larger than input %s padded by %d",
                                 name, k, nncl__shape_str(xin, s1, sizeof s1), pad);
    /* the kernels index a chunk's columns with int */
    ohw = (size_t)conv_out_size(xin->shape[2], k, st, pad) * (size_t)conv_out_size(xin->shape[3], k, st, pad);
    if (nncl__mul_overflow((size_t)xin->shape[1], (size_t)k * (size_t)k, &ckk) || nncl__add_overflow(ckk, (size_t)out_ch, &per) ||
        nncl__mul_overflow(per, ohw, &per) || per > (size_t)INT_MAX)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": input %s with kernel %d and %d outputs is too large",
                                 name, nncl__shape_str(xin, s1, sizeof s1), k, out_ch);
    return NNCL_OK;
}

static nncl_status conv_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0], *w = n->n_in > 1 ? n->in[1] : NULL, *b = n->n_in > 2 ? n->in[2] : NULL;
    char s1[64], s2[64], s3[64];
    int k = n->iattr[0], O;
    if (!w || n->n_in > 3)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "conv2d \"%s\": needs x, weight and an optional bias",
                                 n->name);
    O = w->ndim >= 1 ? w->shape[0] : 0;
    NNCL_TRY(conv_check_input(g, n->name, xin, O, k, n->iattr[1], n->iattr[2], n->iattr[3]));
    if (w->batched || w->ndim != 4 || w->shape[1] != xin->shape[1] || w->shape[2] != k || w->shape[3] != k)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": input %s does not fit weight %s (want [O,%d,%d,%d])",
                                 n->name, nncl__shape_str(xin, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2),
                                 xin->shape[1], k, k);
    if (b && (b->batched || b->ndim != 1 || b->shape[0] != O))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "conv2d \"%s\": bias %s does not fit weight %s (want [%d])", n->name,
                                 nncl__shape_str(b, s3, sizeof s3), nncl__shape_str(w, s2, sizeof s2), O);
    n->batched = xin->batched;
    n->ndim = 4;
    n->shape[0] = xin->shape[0];
    n->shape[1] = O;
    n->shape[2] = conv_out_size(xin->shape[2], k, n->iattr[1], n->iattr[2]);
    n->shape[3] = conv_out_size(xin->shape[3], k, n->iattr[1], n->iattr[2]);
    return NNCL_OK;
}

/* ------------------------------------------------------------- workspace */

/* A product of the im2col path; in half storage (store) every operand is in
 * the storage type, but for C of a weight gradient (c_f32), a parameter
 * gradient and so fp32. */
static void conv_gemm_set(nncl__gemm_args *g, int ta, int tb, size_t m, size_t nn, size_t k, nncl__view a, size_t lda,
                          nncl__view b, size_t ldb, nncl__view c, size_t ldc, float beta, cl_mem temp, int store,
                          int c_f32) {
    memset(g, 0, sizeof *g);
    g->store = store;
    g->c_f32 = store && c_f32;
    g->trans_a = ta;
    g->trans_b = tb;
    g->m = m; g->n = nn; g->k = k;
    g->alpha = 1.0f;
    g->beta = beta;
    g->a = a.mem; g->a_off = a.off; g->lda = lda;
    g->b = b.mem; g->b_off = b.off; g->ldb = ldb;
    g->c = c.mem; g->c_off = c.off; g->ldc = ldc;
    g->temp = temp;
}

/* CLBlast's temporary floats for the GEMMs of chunks of S samples, with
 * offsets of 1 so that every matrix counts as needing a padded copy: a
 * bound for any offsets, and never smaller for a larger S. */
static nncl_status conv_temp(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t S, int choose,
                             size_t *floats) {
    /* at prepare (choose), the GEMMs of chunks of S are also given their
     * kernels, so that a step measures nothing */
    nncl_status (*size)(nncl_context *, nncl_device *, const nncl__gemm_args *, size_t *) =
        choose ? nncl__sgemm_prepare : nncl__sgemm_temp_size;
    nncl__gemm_args g;
    nncl__view one;
    size_t N = S * d->ohw, t = 0, most = 0;
    one.mem = NULL;
    one.off = 1;
    conv_gemm_set(&g, 0, 0, (size_t)d->O, N, d->ckk, one, d->ckk, one, N, one, N, 0, NULL, ex->store, 0);
    NNCL_TRY(size(ex->ctx, ex->dev, &g, &most));
    if (nncl__need_grad(ex, n, 1)) {
        conv_gemm_set(&g, 0, 1, (size_t)d->O, d->ckk, N, one, N, one, N, one, d->ckk, 0, NULL, ex->store, 1);
        NNCL_TRY(size(ex->ctx, ex->dev, &g, &t));
        if (t > most) most = t;
    }
    if (nncl__need_grad(ex, n, 0)) {
        conv_gemm_set(&g, 1, 0, d->ckk, N, (size_t)d->O, one, d->ckk, one, N, one, N, 0, NULL, ex->store, 0);
        NNCL_TRY(size(ex->ctx, ex->dev, &g, &t));
        if (t > most) most = t;
    }
    *floats = (most + sizeof(float) - 1) / sizeof(float);
    return NNCL_OK;
}

/* Floats of workspace for chunks of S samples: col and Y' (only col, or
 * nothing for a pointwise kernel, when S is 1), half as many in half
 * storage (store). */
static size_t conv_ws_floats(const nncl__conv_dims *d, int S, int store) {
    size_t e = S > 1 ? (size_t)S * (d->ckk + (size_t)d->O) * d->ohw : d->pointwise ? 0 : d->ckk * d->ohw;
    return store ? (e + 1) / 2 : e;
}

/* Samples per GEMM (S) for the exec's batch: as many as the budget holds
 * with the column matrix, Y' and the temp of the GEMMs that run (their
 * share per sample taken at the largest S the budget could hold, then
 * checked at S, which shrinks by quarters until it fits). A step looks up
 * the kernels chosen at prepare and so comes to the same S; a smaller
 * batch gives a smaller S, whose CLBlast temp (a bound for any offsets,
 * growing with S) fits the workspace sized at prepare, and whose GEMMs get
 * only the workspace before the column matrix (conv_temp_view: nncl's own
 * kernels take scratch of their own where that is too small). The budget
 * depends on the node, the device and the arena, not on the batch. */
nncl_status nncl__conv_budget(nncl__exec *ex, const nncl_node *n, size_t *floats) {
    size_t arena = 0, budget;
    cl_mem m = nncl__val(ex, n).mem;
    if (ex->conv_budget) {
        *floats = ex->conv_budget;
        return NNCL_OK;
    }
    if (m) NNCL_CL(ex->ctx, clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof arena, &arena, NULL));
    budget = arena / sizeof(float) / CONV_WS_DIV;
    if (budget < CONV_WS_FLOOR) budget = CONV_WS_FLOOR;
    if (budget > (size_t)INT_MAX) budget = (size_t)INT_MAX;
    *floats = budget;
    return NNCL_OK;
}

/* Every path's workspace: within the budget (1.5 times it in half storage:
 * the own path's fp32 panels), or one sample's operands twice over where
 * that is more (panels beside panels, CLBlast's padded copies, tile
 * rounding), or the 3x3 path's weight-gradient partial sums (at most 4096:
 * a first layer's, whose input needs no gradient). */
static uint64_t conv_workspace(const nncl_node *n, int batch, uint64_t arena_bytes, int store) {
    nncl__conv_dims d;
    uint64_t budget = arena_bytes / sizeof(float) / CONV_WS_DIV, one, k3, most;
    nncl__conv_dims_of(n, batch, &d);
    if (budget < CONV_WS_FLOOR) budget = CONV_WS_FLOOR;
    if (store) budget += budget / 2;
    one = ((uint64_t)d.ckk * d.ohw + (uint64_t)d.O * d.ohw + (uint64_t)d.O * d.ckk + (uint64_t)d.C * d.H * d.W) * 5 / 2;
    k3 = (uint64_t)d.B * ((d.ohw + 7) / 8); /* its parts: at most one per block of 8 pixels */
    k3 = (k3 < 4096 ? k3 : 4096) * (uint64_t)d.O * (d.ckk + 1) + (uint64_t)d.O * d.ckk;
    most = budget > one ? budget : one;
    if (d.k == 3 && d.st == 1 && d.pad == 1 && !n->in[0]->needs_grad && k3 > most) most = k3;
    return (most + 64 * CONV_ALIGN) * sizeof(float);
}

nncl_status nncl__conv_col_chunk(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int choose, int *chunk) {
    size_t budget, per = (d->ckk + (size_t)d->O) * d->ohw, probe, tp, cap, S;
    NNCL_TRY(nncl__conv_budget(ex, n, &budget));
    probe = budget / per;
    if (probe < 1) probe = 1;
    NNCL_TRY(conv_temp(ex, n, d, probe, choose, &tp));
    cap = budget / (per + (tp + probe - 1) / probe);
    S = cap < (size_t)d->B ? cap : (size_t)d->B;
    /* the GEMMs chosen for S may take a larger share than the probe's */
    while (S > 1) {
        NNCL_TRY(conv_temp(ex, n, d, S, choose, &tp));
        if (conv_ws_floats(d, (int)S, ex->store) + tp + CONV_ALIGN <= budget) break;
        S = S * 3 / 4 < S - 1 ? S * 3 / 4 : S - 1;
    }
    *chunk = S < 1 ? 1 : (int)S;
    return NNCL_OK;
}

nncl_status nncl__conv_ws(nncl__exec *ex, const nncl_node *n, size_t need, size_t *have) {
    size_t bytes = 0;
    if (ex->gemm_temp) NNCL_CL(ex->ctx, clGetMemObjectInfo(ex->gemm_temp, CL_MEM_SIZE, sizeof bytes, &bytes, NULL));
    *have = bytes / sizeof(float);
    if (*have < need)
        return nncl__fail(ex->ctx, NNCL_ERR_STATE, "conv2d \"%s\": workspace of %zu floats, %zu needed (not prepared?)",
                          n->name, *have, need);
    return NNCL_OK;
}

nncl__view nncl__conv_at(nncl__view v, size_t off) {
    v.off += off;
    return v;
}

nncl_status nncl__conv_to_f32(nncl__exec *ex, const nncl_node *n, nncl__view src, size_t at, size_t count) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_TO_F32, &a));
    nncl__arg_view(&a, src);
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, (int)at);
    nncl__arg_int(&a, (int)count);
    return nncl__launch_1d(&a, ex->dev, (count + 7) / 8); /* 8 per work-item */
}

nncl_status nncl__conv_x_f32(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t at, int s0, int ns,
                             nncl__view *out) {
    size_t xs = (size_t)d->C * (size_t)d->H * (size_t)d->W;
    *out = nncl__conv_at(nncl__val(ex, n->in[0]), (size_t)s0 * xs);
    if (!ex->store) return NNCL_OK;
    NNCL_TRY(nncl__conv_to_f32(ex, n, *out, at, (size_t)ns * xs));
    out->mem = ex->gemm_temp;
    out->off = at;
    return NNCL_OK;
}

/* col at the end of the workspace buffer, Y' after its S*ckk*ohw elements;
 * in half storage both are in the storage type, their offsets counted in
 * its 2-byte elements (the GEMMs' temp before them stays in floats). */
static nncl_status conv_ws(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int S, nncl__view *col,
                           nncl__view *gout) {
    size_t floats = conv_ws_floats(d, S, ex->store), total;
    col->mem = gout->mem = ex->gemm_temp;
    col->off = gout->off = 0;
    if (!floats) return NNCL_OK;
    NNCL_TRY(nncl__conv_ws(ex, n, floats + CONV_ALIGN, &total));
    col->off = (total - floats) / CONV_ALIGN * CONV_ALIGN;
    if (ex->store) col->off *= 2;
    gout->off = col->off + (size_t)S * d->ckk * d->ohw;
    return NNCL_OK;
}

/* ------------------------------------------------------------- launches */

static nncl_status conv_gemm(nncl__exec *ex, cl_mem temp, int ta, int tb, size_t m, size_t nn, size_t k, nncl__view a,
                             size_t lda, nncl__view b, size_t ldb, nncl__view c, size_t ldc, float beta, int c_f32) {
    nncl__gemm_args g;
    conv_gemm_set(&g, ta, tb, m, nn, k, a, lda, b, ldb, c, ldc, beta, temp, ex->store, c_f32);
    return nncl__sgemm(ex->ctx, ex->dev, &g);
}

/* The GEMMs' temp: the workspace before the column matrix col (the whole
 * workspace without one), as a buffer of its own (*t, released by the
 * caller when *own) so that no kernel reaches into col. */
static nncl_status conv_temp_view(nncl__exec *ex, const nncl__conv_dims *d, int S, nncl__view col, cl_mem *t, int *own) {
    cl_buffer_region r;
    cl_int err;
    *t = ex->gemm_temp;
    *own = 0;
    if (!conv_ws_floats(d, S, ex->store) || !col.off) return NNCL_OK;
    r.origin = 0;
    r.size = (ex->store ? col.off / 2 : col.off) * sizeof(float);
    *t = clCreateSubBuffer(ex->gemm_temp, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    NNCL_CL_CHECK(ex->ctx, err, "clCreateSubBuffer (conv2d GEMM temp)");
    *own = 1;
    return NNCL_OK;
}

void nncl__conv_arg_geometry(nncl__args *a, const nncl__conv_dims *d) {
    nncl__arg_int(a, d->C); nncl__arg_int(a, d->H); nncl__arg_int(a, d->W);
    nncl__arg_int(a, d->k); nncl__arg_int(a, d->st); nncl__arg_int(a, d->pad);
    nncl__arg_int(a, d->OH); nncl__arg_int(a, d->OW);
}

/* im2col (acc < 0: x chunk into col, one item per column element) and its
 * adjoint col2im (col into dx, one item per input element): the same index
 * map read in the two directions, so the same arguments. */
static nncl_status conv_colmap(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view from,
                               nncl__view to, int S, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(ex, n, acc < 0 ? NNCL_CONV_K_IM2COL : NNCL_CONV_K_COL2IM, &a));
    nncl__arg_view(&a, from);
    nncl__arg_view(&a, to);
    nncl__conv_arg_geometry(&a, d);
    nncl__arg_int(&a, S);
    if (acc < 0) return nncl__launch_1d(&a, ex->dev, d->ckk * (size_t)S * d->ohw);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, (size_t)S * (size_t)d->C * (size_t)d->H * (size_t)d->W);
}

static nncl_status conv_reorder(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view nchw,
                                nncl__view gl, int S, int to_nchw) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_REORDER, &a));
    nncl__arg_view(&a, nchw);
    nncl__arg_view(&a, gl);
    nncl__arg_int(&a, d->O);
    nncl__arg_int(&a, (int)d->ohw);
    nncl__arg_int(&a, S);
    nncl__arg_int(&a, to_nchw);
    return nncl__launch_1d(&a, ex->dev, (size_t)S * (size_t)d->O * d->ohw);
}

/* ------------------------------------------------------------- device */

nncl_status nncl__conv_col_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes) {
    size_t temp, ws;
    int S;
    NNCL_TRY(nncl__conv_col_chunk(ex, n, d, 1, &S));
    NNCL_TRY(conv_temp(ex, n, d, (size_t)S, 1, &temp));
    ws = conv_ws_floats(d, S, ex->store);
    *bytes = (temp + (ws ? ws + CONV_ALIGN : 0)) * sizeof(float);
    return NNCL_OK;
}

static nncl_status conv_prepare(nncl__exec *ex, nncl_node *n, size_t *bytes) {
    nncl__conv_dims d;
    nncl__conv_dims_of(n, ex->batch, &d);
    return nncl__conv_pick(ex, n, &d, bytes);
}

static nncl_status conv_forward(nncl__exec *ex, nncl_node *n) {
    nncl__conv_dims d;
    nncl__conv_dims_of(n, ex->batch, &d);
    return nncl__conv_impls[nncl__conv_path(ex, n, &d)].forward(ex, n);
}

/* The forward's chunks of S samples, GEMM temp in temp. */
static nncl_status conv_col_fwd_chunks(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *dp, int S,
                                       nncl__view col, nncl__view gout, cl_mem temp) {
    nncl__conv_dims d = *dp;
    nncl__view xv = nncl__val(ex, n->in[0]), w = nncl__val(ex, n->in[1]), y = nncl__val(ex, n);
    size_t xs_n = (size_t)d.C * (size_t)d.H * (size_t)d.W, ys_n = (size_t)d.O * d.ohw;
    int s0;
    for (s0 = 0; s0 < d.B; s0 += S) {
        int ns = d.B - s0 < S ? d.B - s0 : S;
        nncl__view xs = nncl__conv_at(xv, (size_t)s0 * xs_n), ys = nncl__conv_at(y, (size_t)s0 * ys_n);
        size_t N = (size_t)ns * d.ohw;
        if (S == 1) { /* the GEMM writes the sample's NCHW planes directly */
            nncl__view b = xs;
            if (!d.pointwise) {
                NNCL_TRY(conv_colmap(ex, n, &d, xs, col, 1, -1));
                b = col;
            }
            NNCL_TRY(conv_gemm(ex, temp, 0, 0, (size_t)d.O, N, d.ckk, w, d.ckk, b, N, ys, N, 0.0f, 0));
        } else {
            NNCL_TRY(conv_colmap(ex, n, &d, xs, col, ns, -1));
            NNCL_TRY(conv_gemm(ex, temp, 0, 0, (size_t)d.O, N, d.ckk, w, d.ckk, col, N, gout, N, 0.0f, 0));
            NNCL_TRY(conv_reorder(ex, n, &d, ys, gout, ns, 1));
        }
    }
    return NNCL_OK;
}

nncl_status nncl__conv_col_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *dims) {
    nncl__conv_dims d = *dims;
    nncl__view col, gout;
    cl_mem temp;
    int S, own;
    nncl_status st;
    NNCL_TRY(nncl__conv_col_chunk(ex, n, &d, 0, &S));
    NNCL_TRY(conv_ws(ex, n, &d, S, &col, &gout));
    NNCL_TRY(conv_temp_view(ex, &d, S, col, &temp, &own));
    st = conv_col_fwd_chunks(ex, n, &d, S, col, gout, temp);
    if (own) clReleaseMemObject(temp);
    NNCL_TRY(st);
    return nncl__bias_act(ex, n, nncl__val(ex, n), n->n_in == 3 ? n->in[2] : NULL, d.O, (int)d.ohw,
                          (size_t)d.B * (size_t)d.O * d.ohw, d.act);
}

static nncl_status conv_backward(nncl__exec *ex, nncl_node *n) {
    nncl__conv_dims d;
    nncl__conv_dims_of(n, ex->batch, &d);
    return nncl__conv_impls[nncl__conv_path(ex, n, &d)].backward(ex, n, nncl__grd(ex, n));
}

/* dy *= act'(y) in place, and the bias gradient from it. */
nncl_status nncl__conv_act_bias_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy) {
    NNCL_TRY(nncl__act_backward_inplace(ex, n, dy, nncl__val(ex, n), (size_t)d->B * (size_t)d->O * d->ohw, d->act));
    if (n->n_in == 3 && nncl__need_grad(ex, n, 2))
        NNCL_TRY(nncl__bias_grad(ex, n, dy, d->B, d->O, (int)d->ohw, nncl__grd(ex, n->in[2]),
                                 nncl__grad_accumulate(ex, n, 2)));
    return NNCL_OK;
}

/* The backward's chunks of S samples (dy already times act'), GEMM temp in
 * temp. */
static nncl_status conv_col_bwd_chunks(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *dp, nncl__view dy,
                                       int S, nncl__view col, nncl__view gout, cl_mem temp) {
    nncl__conv_dims d = *dp;
    nncl__view xv = nncl__val(ex, n->in[0]), w = nncl__val(ex, n->in[1]), dx, dw;
    size_t xs_n = (size_t)d.C * (size_t)d.H * (size_t)d.W, ys_n = (size_t)d.O * d.ohw;
    int s0, need_x = nncl__need_grad(ex, n, 0), need_w = nncl__need_grad(ex, n, 1), acc_x = 0, acc_w = 0;
    dx = need_x ? nncl__grd(ex, n->in[0]) : xv;
    dw = need_w ? nncl__grd(ex, n->in[1]) : w;
    if (need_w) acc_w = nncl__grad_accumulate(ex, n, 1);
    if (need_x) acc_x = nncl__grad_accumulate(ex, n, 0);
    for (s0 = 0; s0 < d.B; s0 += S) {
        int ns = d.B - s0 < S ? d.B - s0 : S;
        nncl__view xs = nncl__conv_at(xv, (size_t)s0 * xs_n), dxs = nncl__conv_at(dx, (size_t)s0 * xs_n);
        nncl__view g = nncl__conv_at(dy, (size_t)s0 * ys_n); /* dY': the sample's dy itself when S is 1 */
        size_t N = (size_t)ns * d.ohw;
        float beta_w = (s0 == 0 && !acc_w) ? 0.0f : 1.0f;
        if (S > 1) {
            NNCL_TRY(conv_reorder(ex, n, &d, g, gout, ns, 0));
            g = gout;
        }
        if (need_w) {
            nncl__view b = xs;
            if (S > 1 || !d.pointwise) {
                NNCL_TRY(conv_colmap(ex, n, &d, xs, col, ns, -1));
                b = col;
            }
            NNCL_TRY(conv_gemm(ex, temp, 0, 1, (size_t)d.O, d.ckk, N, g, N, b, N, dw, d.ckk, beta_w, 1));
        }
        if (need_x) {
            if (S == 1 && d.pointwise) {
                NNCL_TRY(conv_gemm(ex, temp, 1, 0, d.ckk, N, (size_t)d.O, w, d.ckk, g, N, dxs, N, acc_x ? 1.0f : 0.0f, 0));
            } else {
                NNCL_TRY(conv_gemm(ex, temp, 1, 0, d.ckk, N, (size_t)d.O, w, d.ckk, g, N, col, N, 0.0f, 0));
                NNCL_TRY(conv_colmap(ex, n, &d, col, dxs, ns, acc_x));
            }
        }
    }
    return NNCL_OK;
}

nncl_status nncl__conv_col_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *dims, nncl__view dy) {
    nncl__conv_dims d = *dims;
    nncl__view col, gout;
    cl_mem temp;
    int S, own;
    nncl_status st;
    NNCL_TRY(nncl__conv_act_bias_backward(ex, n, &d, dy));
    if (!nncl__need_grad(ex, n, 0) && !nncl__need_grad(ex, n, 1)) return NNCL_OK;
    NNCL_TRY(nncl__conv_col_chunk(ex, n, &d, 0, &S));
    NNCL_TRY(conv_ws(ex, n, &d, S, &col, &gout));
    NNCL_TRY(conv_temp_view(ex, &d, S, col, &temp, &own));
    st = conv_col_bwd_chunks(ex, n, &d, dy, S, col, gout, temp);
    if (own) clReleaseMemObject(temp);
    return st;
}

/* ------------------------------------------------------------- reference */

/* Index of x[b, c, ih, iw] under output (oh, ow) and kernel tap (ki, kj),
 * or -1 where the tap falls into the padding. */
static ptrdiff_t conv_ref_xi(const nncl__conv_dims *d, int b, int c, int oh, int ow, int ki, int kj) {
    int ih = oh * d->st - d->pad + ki, iw = ow * d->st - d->pad + kj;
    if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) return -1;
    return (((ptrdiff_t)b * d->C + c) * d->H + ih) * d->W + iw;
}

/* One loop nest for both directions: without gout, y = act(conv(x) + b);
 * with it (and the output y_in), the gradients of the inputs with a gin. */
static void conv_ref(const nncl_node *n, int batch, const double *const *in, double *y, const double *y_in,
                     const double *gout, double *const *gin) {
    nncl__conv_dims d;
    int b, o, oh, ow, c, ki, kj;
    size_t yi = 0;
    nncl__conv_dims_of(n, batch, &d);
    for (b = 0; b < d.B; b++)
        for (o = 0; o < d.O; o++)
            for (oh = 0; oh < d.OH; oh++)
                for (ow = 0; ow < d.OW; ow++, yi++) {
                    double s = n->n_in == 3 && !gout ? in[2][o] : 0, g = 0;
                    if (gout) g = gout[yi] * nncl__act_grad_ref(y_in[yi], d.act);
                    if (gout && n->n_in == 3 && gin[2]) gin[2][o] += g;
                    for (c = 0; c < d.C; c++)
                        for (ki = 0; ki < d.k; ki++)
                            for (kj = 0; kj < d.k; kj++) {
                                ptrdiff_t xi = conv_ref_xi(&d, b, c, oh, ow, ki, kj);
                                int wi = ((o * d.C + c) * d.k + ki) * d.k + kj;
                                if (xi < 0) continue;
                                if (!gout) s += in[0][xi] * in[1][wi];
                                if (gout && gin[0]) gin[0][xi] += g * in[1][wi];
                                if (gout && gin[1]) gin[1][wi] += g * in[0][xi];
                            }
                    if (!gout) y[yi] = nncl__act_ref(s, d.act);
                }
}

static void conv_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                             double *aux) {
    (void)aux;
    conv_ref(n, r->batch, in, out, NULL, NULL, NULL);
}

static void conv_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                              const double *gout, double *const *gin, double *aux) {
    (void)aux;
    conv_ref(n, r->batch, in, NULL, out, gout, gin);
}

/* Backward reads y only for act'(y): without an activation, x alone. */
static int conv_bw_reads(const nncl_node *n, int store) {
    (void)store; /* the same in every storage */
    return NNCL_BW_INPUTS | (n->iattr[3] != NNCL_ACT_NONE ? NNCL_BW_OUTPUT : 0);
}

const nncl__opdef nncl__opdef_conv2d = {
    .name = "conv2d",
    NNCL_KERNELS(NNCL_DENSE_KERNELS, {"conv", "nncl_im2col_f32"}, {"conv", "nncl_col2im_f32"},
                {"conv", "nncl_conv_reorder_f32"}, {"conv", "nncl_conv_pack_b_f32"},
                {"conv", "nncl_conv_pack_dy_f32"}, {"conv", "nncl_conv_pack_colt_f32"}, {"conv", "nncl_conv_wt_f32"},
                {"conv", "nncl_conv_backward_f32_input"}, {"conv", "nncl_conv_dw_split_f32"},
                {"conv", "nncl_conv_pack_dy8_f32"}, {"conv3", "nncl_conv3_f32"}, {"conv3", "nncl_conv3_dw_f32"},
                {"conv", "nncl_conv_to_f32"}, {"conv", "nncl_conv_pack_colt8_f32"}, {"conv", "nncl_conv_pack_bs_f32"},
                {"conv", "nncl_conv_pack_colts_f32"}, {"conv", "nncl_conv_backward_f32_input2x2"},
                {"conv", "nncl_conv_wflip_f32"}),
    .shape = conv_shape, .prepare = conv_prepare, .workspace = conv_workspace, .forward = conv_forward,
    .backward = conv_backward, .bw_reads = NNCL_BW_INPUTS | NNCL_BW_OUTPUT, .bw_reads_of = conv_bw_reads,
    .ref_forward = conv_ref_forward, .ref_backward = conv_ref_backward, .impls = nncl__conv_impls,
    .n_impls = NNCL__CONV_PATHS, .half = 2};

/* ------------------------------------------------------------- builder */

/* Creates NAME.weight [O,C,k,k] (and NAME.bias [O]) with PyTorch's default
 * initialisation U(-1/sqrt(C k k), 1/sqrt(C k k)); checks the geometry
 * first, and a refused node takes its parameters back: a failing call
 * leaves no orphan parameters behind. */
nncl_node *nncl_conv2d(nncl_graph *g, nncl_node *x, int out_channels, int kernel, int stride, int padding, int bias,
                       nncl_act act, const char *name) {
    char wn[NNCL_NAME_MAX + 8], bn[NNCL_NAME_MAX + 8];
    nncl_node *in[3];
    int wshape[4], iattr[4], keep;
    float bound;
    if (!g) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_conv2d: graph is NULL");
    if (!x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_conv2d \"%s\": input is NULL (an earlier builder failed?)",
                                    name ? name : "");
    if (!name || !*name || strlen(name) + 8 > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_conv2d: needs a name of 1 to %d characters",
                                NNCL_NAME_MAX - 8);
    if (conv_check_input(g, name, x, out_channels, kernel, stride, padding, (int)act) != NNCL_OK) return NULL;
    keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    wshape[0] = out_channels;
    wshape[1] = x->shape[1];
    wshape[2] = wshape[3] = kernel;
    bound = 1.0f / sqrtf((float)x->shape[1] * (float)kernel * (float)kernel);
    in[0] = x;
    in[1] = nncl_param(g, wn, 4, wshape, NNCL_INIT_UNIFORM, bound);
    in[2] = bias && in[1] ? nncl_param(g, bn, 1, wshape, NNCL_INIT_UNIFORM, bound) : NULL;
    iattr[0] = kernel;
    iattr[1] = stride;
    iattr[2] = padding;
    iattr[3] = (int)act;
    return nncl__layer_add(g, keep, NNCL_OP_CONV2D, name, bias ? 3 : 2, in, iattr, 4, NULL, 0);
}

#undef CONV_WS_DIV
#undef CONV_WS_FLOOR
#undef CONV_ALIGN
