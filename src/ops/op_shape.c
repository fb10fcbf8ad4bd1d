/* op_shape.c - moving a sample's elements without arithmetic: transposing
 * two per-sample axes (the node viewed as [outer, d0, mid, d1, inner]
 * becomes [outer, d1, mid, d0, inner]) and slicing one per-sample axis
 * ([outer, D, inner] -> [outer, length, inner] from `start`: q, k and v out
 * of one projection). One work-item per output element; the backward of a
 * transpose is the opposite transpose, that of a slice writes the whole
 * input gradient (zeros outside the slice) or adds into the slice's part
 * alone, so that T slices of one node (the steps of a sequence) cost the
 * node's size once, not T times. Kernels: cl/shape.cl. */
#include "ops/ops.h"

enum { SHAPE_K_FORWARD, SHAPE_K_BACKWARD };

/* The product of n's input dimensions [from, to). */
static size_t shape_prod(const nncl_node *x, int from, int to, int batch) {
    size_t p = 1;
    int i;
    for (i = from; i < to; i++) p *= (size_t)(i == 0 && x->batched ? batch : x->shape[i]);
    return p;
}

static void shape_copy(nncl_node *n, const nncl_node *from) {
    int i;
    n->batched = from->batched;
    n->ndim = from->ndim;
    for (i = 0; i < from->ndim; i++) n->shape[i] = from->shape[i];
}

/* An axis of x's sample (negative counts from the end) as an index into
 * its shape, or -1 when out of range. */
static int shape_axis(const nncl_node *x, int axis) {
    int base = x->batched ? 1 : 0, per = x->ndim - base;
    if (axis < -per || axis >= per) return -1;
    return (axis < 0 ? axis + per : axis) + base;
}

/* ------------------------------------------------------------- transpose */

/* iattr: [0] < [1], the two axes as indices into the shape (batch
 * included). */

static nncl_status tr_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *x = n->in[0];
    char s1[64];
    int a0 = n->iattr[0], a1 = n->iattr[1], base = x->batched ? 1 : 0, t;
    if (a0 < base || a1 < base || a0 >= x->ndim || a1 >= x->ndim || a0 == a1)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "transpose \"%s\": axes %d and %d of %s are not two per-sample axes", n->name,
                                 a0 - base, a1 - base, nncl__shape_str(x, s1, sizeof s1));
    shape_copy(n, x);
    t = n->shape[a0];
    n->shape[a0] = n->shape[a1];
    n->shape[a1] = t;
    return NNCL_OK;
}

/* src [outer, d0, mid, d1, inner] -> dst [outer, d1, mid, d0, inner]. */
static nncl_status tr_run(nncl__exec *ex, const nncl_node *n, int slot, nncl__view src, nncl__view dst, int swap,
                          int acc) {
    nncl__args a;
    const nncl_node *in = n->in[0];
    int a0 = n->iattr[0] < n->iattr[1] ? n->iattr[0] : n->iattr[1], a1 = n->iattr[0] ^ n->iattr[1] ^ a0;
    size_t count = nncl__numel(n, ex->batch);
    int d0 = in->shape[a0], d1 = in->shape[a1];
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__arg_view(&a, src);
    nncl__arg_view(&a, dst);
    nncl__arg_int(&a, (int)count);
    nncl__arg_int(&a, swap ? d1 : d0);
    nncl__arg_int(&a, (int)shape_prod(in, a0 + 1, a1, ex->batch));
    nncl__arg_int(&a, swap ? d0 : d1);
    nncl__arg_int(&a, (int)shape_prod(in, a1 + 1, in->ndim, ex->batch));
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, count);
}

static nncl_status tr_forward(nncl__exec *ex, nncl_node *n) {
    return tr_run(ex, n, SHAPE_K_FORWARD, nncl__val(ex, n->in[0]), nncl__val(ex, n), 0, 0);
}

static nncl_status tr_backward(nncl__exec *ex, nncl_node *n) {
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    return tr_run(ex, n, SHAPE_K_FORWARD, nncl__grd(ex, n), nncl__grd(ex, n->in[0]), 1, nncl__grad_accumulate(ex, n, 0));
}

/* For element i of the input, its place in the output. */
static size_t tr_ref_index(const nncl_node *n, int batch, size_t i) {
    const nncl_node *in = n->in[0];
    int a0 = n->iattr[0] < n->iattr[1] ? n->iattr[0] : n->iattr[1], a1 = n->iattr[0] ^ n->iattr[1] ^ a0;
    size_t d0 = (size_t)in->shape[a0], d1 = (size_t)in->shape[a1];
    size_t mid = shape_prod(in, a0 + 1, a1, batch), inner = shape_prod(in, a1 + 1, in->ndim, batch);
    size_t e = i % inner, t = i / inner, j1 = t % d1, m, j0, o;
    t /= d1;
    m = t % mid;
    t /= mid;
    j0 = t % d0;
    o = t / d0;
    return (((o * d1 + j1) * mid + m) * d0 + j0) * inner + e;
}

static void tr_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) out[tr_ref_index(n, r->batch, i)] = in[0][i];
}

static void tr_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)in; (void)out; (void)aux;
    if (gin[0])
        for (i = 0; i < count; i++) gin[0][i] += gout[tr_ref_index(n, r->batch, i)];
}

const nncl__opdef nncl__opdef_transpose = {
    .name = "transpose", NNCL_KERNELS({"shape", "nncl_transpose_f32"}), .shape = tr_shape, .forward = tr_forward,
    .backward = tr_backward, .ref_forward = tr_ref_forward, .ref_backward = tr_ref_backward, .half = 1};

nncl_node *nncl_transpose(nncl_graph *g, nncl_node *x, int axis0, int axis1) {
    int iattr[2];
    char s1[64];
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_transpose: graph or input is NULL");
    iattr[0] = shape_axis(x, axis0);
    iattr[1] = shape_axis(x, axis1);
    if (iattr[0] < 0 || iattr[1] < 0 || iattr[0] == iattr[1])
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "nncl_transpose: axes %d and %d are not two per-sample axes of %s",
                                axis0, axis1, nncl__shape_str(x, s1, sizeof s1));
    if (iattr[0] > iattr[1]) {
        int t = iattr[0];
        iattr[0] = iattr[1];
        iattr[1] = t;
    }
    return nncl__node_add(g, NNCL_OP_TRANSPOSE, NULL, 1, &x, iattr, 2, NULL, 0);
}

/* ------------------------------------------------------------- slice */

/* iattr: [0] the axis as an index into the shape, [1] start, [2] length. */

static nncl_status sl_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *x = n->in[0];
    char s1[64];
    int ax = n->iattr[0], start = n->iattr[1], len = n->iattr[2], base = x->batched ? 1 : 0;
    if (ax < base || ax >= x->ndim || start < 0 || len < 1 || start > x->shape[ax] - len)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "slice \"%s\": [%d, %d) of per-sample axis %d is not within %s",
                                 n->name, start, start + len, ax - base, nncl__shape_str(x, s1, sizeof s1));
    shape_copy(n, x);
    n->shape[ax] = len;
    return NNCL_OK;
}

/* Begins a slice kernel: the two views, then run (the values a work-item
 * row covers per outer index: len * inner, or D * inner for the backward
 * that writes all of dx), D, length, start, inner; *outer gets the rows. */
static nncl_status sl_begin(nncl__exec *ex, const nncl_node *n, int slot, nncl__view src, nncl__view dst, int whole,
                            nncl__args *a, size_t *run, size_t *outer) {
    const nncl_node *in = n->in[0];
    int ax = n->iattr[0];
    size_t inner = shape_prod(in, ax + 1, in->ndim, ex->batch);
    *run = (size_t)(whole ? in->shape[ax] : n->iattr[2]) * inner;
    *outer = shape_prod(in, 0, ax, ex->batch);
    NNCL_TRY(nncl__kbegin(ex, n, slot, a));
    nncl__arg_view(a, src);
    nncl__arg_view(a, dst);
    nncl__arg_count(a, *run);
    nncl__arg_int(a, in->shape[ax]);
    nncl__arg_int(a, n->iattr[2]);
    nncl__arg_int(a, n->iattr[1]);
    nncl__arg_count(a, inner);
    return NNCL_OK;
}

/* Rows of run work-items (a power of two up to 64 wide), outer of them. */
static nncl_status sl_launch(nncl__args *a, nncl__exec *ex, size_t run, size_t outer) {
    size_t global[2], local[2] = {1, 1};
    while (local[0] < run && local[0] < 64 && local[0] * 2 <= ex->dev->max_work_group) local[0] *= 2;
    global[0] = run;
    global[1] = outer;
    return nncl__launch(a, ex->dev, 2, global, local);
}

static nncl_status sl_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t run, outer;
    NNCL_TRY(sl_begin(ex, n, SHAPE_K_FORWARD, nncl__val(ex, n->in[0]), nncl__val(ex, n), 0, &a, &run, &outer));
    return sl_launch(&a, ex, run, outer);
}

/* Adding: the slice's part of dx alone; else all of dx, zeros outside. */
static nncl_status sl_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t run, outer;
    int acc;
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    acc = nncl__grad_accumulate(ex, n, 0);
    NNCL_TRY(sl_begin(ex, n, SHAPE_K_BACKWARD, nncl__grd(ex, n), nncl__grd(ex, n->in[0]), !acc, &a, &run, &outer));
    nncl__arg_int(&a, acc);
    return sl_launch(&a, ex, run, outer);
}

/* For element i of the output, its place in the input. */
static size_t sl_ref_index(const nncl_node *n, int batch, size_t i) {
    const nncl_node *in = n->in[0];
    int ax = n->iattr[0];
    size_t D = (size_t)in->shape[ax], L = (size_t)n->iattr[2], inner = shape_prod(in, ax + 1, in->ndim, batch);
    size_t e = i % inner, t = i / inner;
    return ((t / L) * D + (size_t)n->iattr[1] + t % L) * inner + e;
}

static void sl_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) out[i] = in[0][sl_ref_index(n, r->batch, i)];
}

static void sl_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)in; (void)out; (void)aux;
    if (gin[0])
        for (i = 0; i < count; i++) gin[0][sl_ref_index(n, r->batch, i)] += gout[i];
}

const nncl__opdef nncl__opdef_slice = {
    .name = "slice", NNCL_KERNELS({"shape", "nncl_slice_f32"}, {"shape", "nncl_slice_backward_f32"}),
    .shape = sl_shape, .forward = sl_forward, .backward = sl_backward, .ref_forward = sl_ref_forward,
    .ref_backward = sl_ref_backward, .half = 1};

nncl_node *nncl_slice(nncl_graph *g, nncl_node *x, int axis, int start, int length) {
    int iattr[3];
    char s1[64];
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_slice: graph or input is NULL");
    iattr[0] = shape_axis(x, axis);
    if (iattr[0] < 0)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "nncl_slice: axis %d is not a per-sample axis of %s", axis,
                                nncl__shape_str(x, s1, sizeof s1));
    iattr[1] = start;
    iattr[2] = length;
    return nncl__node_add(g, NNCL_OP_SLICE, NULL, 1, &x, iattr, 3, NULL, 0);
}
