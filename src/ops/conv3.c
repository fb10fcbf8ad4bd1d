/* conv3.c - the 3x3 path of 2-D convolution (the node of src/ops/op_conv.c):
 * with no GEMM, for the layers products serve worst: a 3x3
 * kernel at stride 1 with padding 1 whose input needs no gradient, which is
 * how most networks start (on the data, with 1 or 3 channels). There the
 * other paths' products have k = C*9 (9 or 27) and their time goes to
 * packing and padding panels, out of all proportion to the arithmetic.
 *
 *   forward   nncl_conv3_f32: 8 neighbouring pixels of 8 output channels
 *             per work-item, a row of taps two vector loads of x (and
 *             shuffles) shared by the 8 channels; bias and activation
 *             applied as y is stored.
 *   backward  nncl_conv3_dw_f32: the weight and bias gradients' partial
 *             sums over runs of pixels, G = dy * act'(y) formed as it is
 *             read (dy is left as it is) and x read in place; then
 *             nncl_conv_dw_split_f32 adds the runs in order into dW and db
 *             (written, or added to where the plan accumulates). No
 *             atomics: the same result on every run.
 * Workspace: the partial sums, parts x O x (C*9 + 1) floats per chunk of
 * samples, parts fixed per device (CDIR_ITEMS work-items per compute unit)
 * and never more than a chunk's blocks of 8 pixels. The kernels read x and
 * the weights as fp32: in half storage nncl_conv_to_f32 converts a chunk
 * of x (as many samples as the conv budget holds; all of them in fp32,
 * where x is read in place) and the weights into the workspace first, so
 * each element is converted once rather than in every work-item reading
 * it. A smaller batch takes no more chunks than prepare sized for. Taken
 * where timing the layer against the other two paths found it fastest
 * (src/ops/conv_pick.c), or forced by NNCL_CONV_3X3. */
#include "ops/conv.h"
#include <limits.h>

#define CDIR_ITEMS 32 /* weight-gradient work-items per compute unit */
#define CDIR_QUOT (1 << 20) /* a plane's pixels stay below (the kernels' float quotients) */

int nncl__conv_3x3_fits(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    size_t xs = (size_t)d->B * (size_t)d->C * (size_t)d->H * (size_t)d->W, ys = (size_t)d->B * (size_t)d->O * d->ohw;
    return d->k == 3 && d->st == 1 && d->pad == 1 && d->OH == d->H && d->OW == d->W && !nncl__need_grad(ex, n, 0) &&
           d->ohw + 8 < CDIR_QUOT && xs < (size_t)INT_MAX - 64 && ys < (size_t)INT_MAX - 64;
}

/* The weight gradient's runs of pixels: enough work-items, (O+1)/2 x C x
 * parts, to fill the device, at most one per block of 8 pixels. */
static int cdir_parts(nncl__exec *ex, const nncl__conv_dims *d) {
    size_t items = (size_t)CDIR_ITEMS * (size_t)(ex->dev->info.compute_units > 0 ? ex->dev->info.compute_units : 1);
    size_t per = (size_t)(d->O + 1) / 2 * (size_t)d->C, blocks = (size_t)d->B * ((d->ohw + 7) / 8);
    size_t parts = (items + per - 1) / per;
    if (parts > blocks) parts = blocks;
    if (parts > 4096) parts = 4096;
    return parts < 1 ? 1 : (int)parts;
}

/* The layout of the workspace for a batch of d->B: samples per chunk (S),
 * the weight gradient's parts per chunk and their floats (all chunks', at
 * 0), in half storage where the chunk's x as fp32 starts (x_at; the
 * forward's weights as fp32 at 0, where the backward keeps its partial
 * sums), and the floats of it all. */
typedef struct cdir_layout {
    int S, chunks, parts;
    size_t part_floats, x_at, floats;
} cdir_layout;

static size_t cdir_round(size_t f) { return (f + 15) / 16 * 16; }

static nncl_status cdir_layout_of(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, cdir_layout *l) {
    size_t xs = (size_t)d->C * (size_t)d->H * (size_t)d->W, budget, grads, each;
    nncl__conv_dims c = *d;
    l->S = d->B;
    if (ex->store) {
        NNCL_TRY(nncl__conv_budget(ex, n, &budget));
        if (budget / xs < (size_t)d->B) l->S = budget / xs > 0 ? (int)(budget / xs) : 1;
    }
    l->chunks = (d->B + l->S - 1) / l->S;
    c.B = l->S;
    l->parts = cdir_parts(ex, &c);
    /* every chunk's partial sums stay addressable by the kernels' ints (x
     * is in the arena, so the budget holds 1/16 of the batch's x and there
     * are at most ~17 chunks) */
    each = (size_t)l->chunks * (size_t)d->O * (d->ckk + 1);
    if (each > (size_t)INT_MAX / 2)
        return nncl__fail(ex->ctx, NNCL_ERR_UNSUPPORTED, "conv2d \"%s\": %d outputs of %zu weights in %d chunks are too "
                          "many partial sums for the 3x3 path", n->name, d->O, d->ckk, l->chunks);
    if ((size_t)l->parts > (size_t)INT_MAX / 2 / each) l->parts = (int)((size_t)INT_MAX / 2 / each);
    grads = nncl__need_grad(ex, n, 1) || (n->n_in == 3 && nncl__need_grad(ex, n, 2));
    l->part_floats = grads ? (size_t)l->chunks * (size_t)l->parts * (size_t)d->O * (d->ckk + 1) : 0;
    l->x_at = ex->store ? cdir_round(l->part_floats > (size_t)d->O * d->ckk ? l->part_floats : (size_t)d->O * d->ckk)
                       : l->part_floats;
    l->floats = l->x_at + (ex->store ? (size_t)l->S * xs : 0);
    return NNCL_OK;
}

nncl_status nncl__conv_3x3_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes) {
    cdir_layout l;
    NNCL_TRY(cdir_layout_of(ex, n, d, &l));
    *bytes = l.floats * sizeof(float);
    return NNCL_OK;
}

nncl_status nncl__conv_3x3_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    nncl__view xv, w = nncl__val(ex, n->in[1]), y = nncl__val(ex, n);
    size_t local[3] = {8, 1, 1}, global[3], have;
    cdir_layout l;
    nncl__args a;
    int s0;
    if (local[0] > ex->dev->max_work_group) local[0] = 1;
    NNCL_TRY(cdir_layout_of(ex, n, d, &l));
    NNCL_TRY(nncl__conv_ws(ex, n, l.floats, &have));
    if (ex->store) {
        NNCL_TRY(nncl__conv_to_f32(ex, n, w, 0, (size_t)d->O * d->ckk));
        w.mem = ex->gemm_temp;
        w.off = 0;
    }
    for (s0 = 0; s0 < d->B; s0 += l.S) {
        int ns = d->B - s0 < l.S ? d->B - s0 : l.S;
        NNCL_TRY(nncl__conv_x_f32(ex, n, d, l.x_at, s0, ns, &xv));
        NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_CONV3, &a));
        nncl__arg_view(&a, xv);
        nncl__arg_view(&a, w);
        nncl__arg_view(&a, n->n_in == 3 ? nncl__val(ex, n->in[2]) : y);
        nncl__arg_view(&a, nncl__conv_at(y, (size_t)s0 * (size_t)d->O * d->ohw));
        nncl__arg_int(&a, d->C); nncl__arg_int(&a, d->H); nncl__arg_int(&a, d->W);
        nncl__arg_int(&a, d->O); nncl__arg_int(&a, ns);
        nncl__arg_int(&a, n->n_in == 3); nncl__arg_int(&a, d->act);
        global[0] = (d->ohw + 7) / 8;
        global[1] = ((size_t)d->O + 7) / 8;
        global[2] = (size_t)ns;
        NNCL_TRY(nncl__launch(&a, ex->dev, 3, global, local));
    }
    return NNCL_OK;
}

nncl_status nncl__conv_3x3_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy) {
    int need_w = nncl__need_grad(ex, n, 1), need_b = n->n_in == 3 && nncl__need_grad(ex, n, 2), s0;
    nncl__view xv, y = nncl__val(ex, n), dw, db;
    size_t global[3], local[3] = {1, 1, 1}, have, ys = (size_t)d->O * d->ohw;
    cdir_layout l;
    nncl__args a;
    if (!need_w && !need_b) return NNCL_OK;
    NNCL_TRY(cdir_layout_of(ex, n, d, &l));
    NNCL_TRY(nncl__conv_ws(ex, n, l.floats, &have));
    /* a CPU device runs each group on one thread: a few long work-items */
    if (ex->dev->info.type != NNCL_DEVICE_CPU) local[0] = ex->dev->max_work_group < 32 ? ex->dev->max_work_group : 32;
    for (s0 = 0; s0 < d->B; s0 += l.S) {
        int ns = d->B - s0 < l.S ? d->B - s0 : l.S;
        NNCL_TRY(nncl__conv_x_f32(ex, n, d, l.x_at, s0, ns, &xv));
        NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_CONV3_DW, &a));
        nncl__arg_view(&a, xv);
        nncl__arg_view(&a, nncl__conv_at(dy, (size_t)s0 * ys));
        nncl__arg_view(&a, nncl__conv_at(y, (size_t)s0 * ys));
        nncl__arg_mem(&a, ex->gemm_temp);
        nncl__arg_int(&a, (int)((size_t)(s0 / l.S) * (size_t)l.parts * (size_t)d->O * (d->ckk + 1)));
        nncl__arg_int(&a, d->C); nncl__arg_int(&a, d->H); nncl__arg_int(&a, d->W);
        nncl__arg_int(&a, d->O); nncl__arg_int(&a, ns); nncl__arg_int(&a, d->act); nncl__arg_int(&a, l.parts);
        global[0] = (size_t)l.parts;
        global[1] = ((size_t)d->O + 1) / 2;
        global[2] = (size_t)d->C;
        NNCL_TRY(nncl__launch(&a, ex->dev, 3, global, local));
    }
    dw = need_w ? nncl__grd(ex, n->in[1]) : y; /* not written: acc 2 */
    db = need_b ? nncl__grd(ex, n->in[2]) : y;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_DW_SPLIT, &a));
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, 0);
    nncl__arg_view(&a, dw);
    nncl__arg_view(&a, db);
    nncl__arg_int(&a, d->O); nncl__arg_int(&a, (int)d->ckk);
    nncl__arg_int(&a, need_w ? nncl__grad_accumulate(ex, n, 1) : 2);
    nncl__arg_int(&a, need_b ? nncl__grad_accumulate(ex, n, 2) : 2);
    nncl__arg_int(&a, l.chunks * l.parts);
    return nncl__launch_1d(&a, ex->dev, (size_t)d->O * (d->ckk + 1));
}

#undef CDIR_ITEMS
#undef CDIR_QUOT
