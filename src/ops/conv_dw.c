/* conv_dw.c - depthwise convolution (groups == channels, any channel
 * multiplier) on kernels of its own (cl/conv_dw.cl): each work-item a
 * segment of one row in vectors, read in place (square 3x3 and 5x5
 * kernels at stride 1 or 2 and dilation 1: 16 positions with the weights
 * in registers; any other geometry: 8 outputs). The layer reads
 * kh*kw inputs per output, so it is memory-bound, not a GEMM; these kernels
 * are faster than the general direct ones (cl/conv_ex.cl) on every layer
 * measured (bench/membound_dw.c), so they take every layer they fit;
 * NNCL_CONV_DEPTHWISE=0 leaves them out. The forward applies bias and
 * activation as it stores; the weight gradient sums chunks of rows apart
 * into the plan's workspace (ex->gemm_temp), then each tap's chunks in
 * order: no barriers, no atomics. */
#include "ops/conv_ex.h"
#include "ops/conv.h"

#define DW_CHUNKS 32 /* the most chunks of rows the weight gradient sums apart */

/* Work-group of a 3-D launch: all of dimension 0 (a row's segments, or
 * the weight gradient's chunks), then as much of the others as divides
 * them, up to 64 work-items (a work-group each would cost CPU devices
 * more than the work). */
static void dw_local(const nncl__exec *ex, const size_t *global, size_t *local) {
    size_t cap = ex->dev->max_work_group < 64 ? ex->dev->max_work_group : 64, i;
    local[0] = global[0] < cap ? global[0] : cap;
    for (i = 1; i < 3; i++) {
        size_t l = cap / (i == 1 ? local[0] : local[0] * local[1]);
        while (l > 1 && global[i] % l) l--;
        local[i] = l;
    }
}

/* Rows of a plane per work-item: all of them on a CPU device, which runs
 * a work-item's loop faster than as many work-items; one on others. */
static int dw_rows(const nncl__exec *ex, int rows) { return ex->dev->info.type == NNCL_DEVICE_CPU ? rows : 1; }

/* The launch of the forward and input gradient: segs work-items along
 * each row, a plane's rows in runs of rb, planes planes. */
static nncl_status dw_launch_planes(nncl__args *a, const nncl__exec *ex, size_t segs, int rows, int rb, size_t planes) {
    size_t global[3], local[3], shape[3];
    global[0] = segs;
    global[1] = (size_t)((rows + rb - 1) / rb);
    global[2] = planes;
    /* on a CPU, groups of planes only, not of a row's segments: layers of
     * other widths then share a group size, and PoCL builds a kernel once
     * per group size */
    shape[0] = ex->dev->info.type == NNCL_DEVICE_CPU ? 1 : segs;
    shape[1] = global[1];
    shape[2] = planes;
    dw_local(ex, shape, local);
    return nncl__launch(a, ex->dev, 3, global, local);
}

int nncl__dw_fits(const nncl__cx_dims *d) { return !d->transposed && d->G == d->C && d->sw <= 2; }

int nncl__dw_on(const nncl__cx_dims *d) {
    const char *env = getenv("NNCL_CONV_DEPTHWISE");
    return !(env && !strcmp(env, "0")) && nncl__dw_fits(d);
}

/* The kernel size of the square-kernel variants (_k3, _k5: stride 1 or 2
 * along both axes, dilation 1) that fit d, else 0. */
static int dw_k(const nncl__cx_dims *d) {
    return d->kh == d->kw && (d->kw == 3 || d->kw == 5) && d->sh == d->sw && d->dh == 1 && d->dw == 1 ? d->kw : 0;
}

/* Whether d takes the flat kernels (cl/conv_dw_flat.cl: stride 1 and
 * padding K / 2 on both axes, so that output and input planes match):
 * NNCL_CONV_DW_FLAT=0 leaves them out. */
static int dw_flat(const nncl__cx_dims *d) {
    const char *env = getenv("NNCL_CONV_DW_FLAT");
    int k = dw_k(d);
    return k && d->sw == 1 && d->ph == k / 2 && d->pw == k / 2 && !(env && !strcmp(env, "0"));
}

/* Chunks of 16 of a plane per work-item of the flat kernels: all of them
 * on a CPU device, as dw_rows. */
static int dw_flat_chunks(const nncl__exec *ex, int plane) {
    int chunks = (plane + 15) / 16;
    return ex->dev->info.type == NNCL_DEVICE_CPU ? chunks : 1;
}

/* The flat forward (fwd) or input gradient: a plane's chunks in runs of
 * cb, planes planes. */
static nncl_status dw_flat_launch(nncl__args *a, const nncl__exec *ex, int plane, int cb, size_t planes) {
    return dw_launch_planes(a, ex, (size_t)(((plane + 15) / 16 + cb - 1) / cb), 1, 1, planes);
}

nncl_status nncl__dw_forward(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv, nncl__view y,
                             const nncl_node *bias) {
    nncl__args a;
    int rb = dw_rows(ex, d->OH), k = dw_k(d), per = k ? 16 / d->sw : 8, flat = dw_flat(d);
    if (flat) rb = dw_flat_chunks(ex, d->H * d->W);
    NNCL_TRY(nncl__kbegin(ex, n,
                          flat     ? (k == 3 ? NNCL_CX_K_DW_FORWARD3_FLAT : NNCL_CX_K_DW_FORWARD5_FLAT)
                          : k == 3 ? NNCL_CX_K_DW_FORWARD3
                          : k == 5 ? NNCL_CX_K_DW_FORWARD5
                                   : NNCL_CX_K_DW_FORWARD,
                          &a));
    nncl__cx_args_map(&a, ex, n, xv, y, d);
    nncl__arg_view(&a, bias ? nncl__val(ex, bias) : y);
    nncl__arg_int(&a, bias != NULL);
    nncl__arg_int(&a, d->act);
    nncl__arg_int(&a, (int)((size_t)d->B * d->C * d->H * d->W));
    nncl__arg_int(&a, rb);
    if (flat) return dw_flat_launch(&a, ex, d->H * d->W, rb, (size_t)d->B * d->O);
    return dw_launch_planes(&a, ex, (size_t)((d->OW + per - 1) / per), d->OH, rb, (size_t)d->B * d->O);
}

nncl_status nncl__dw_backward_input(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view dy,
                                    nncl__view dx, int acc) {
    nncl__args a;
    int k = dw_k(d), L = k || d->sw == 2 ? 16 : 8, rb = dw_rows(ex, d->H), slot = NNCL_CX_K_DW_INPUT;
    if (dw_flat(d)) {
        rb = dw_flat_chunks(ex, d->H * d->W);
        NNCL_TRY(nncl__kbegin(ex, n, k == 3 ? NNCL_CX_K_DW_INPUT3_FLAT : NNCL_CX_K_DW_INPUT5_FLAT, &a));
        nncl__cx_args_map(&a, ex, n, dy, dx, d);
        nncl__arg_int(&a, acc);
        nncl__arg_int(&a, (int)((size_t)d->B * d->O * d->OH * d->OW));
        nncl__arg_int(&a, rb);
        return dw_flat_launch(&a, ex, d->H * d->W, rb, (size_t)d->B * d->C);
    }
    if (k)
        slot = d->sw == 2 ? (k == 3 ? NNCL_CX_K_DW_INPUT3_S2 : NNCL_CX_K_DW_INPUT5_S2)
                          : (k == 3 ? NNCL_CX_K_DW_INPUT3 : NNCL_CX_K_DW_INPUT5);
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__cx_args_map(&a, ex, n, dy, dx, d);
    nncl__arg_int(&a, acc);
    nncl__arg_int(&a, (int)((size_t)d->B * d->O * d->OH * d->OW));
    nncl__arg_int(&a, rb);
    return dw_launch_planes(&a, ex, (size_t)((d->W + L - 1) / L), d->H, rb, (size_t)d->B * d->C);
}

/* Chunks of the rows of y the weight gradient sums apart (fixed for a
 * batch: the order of the sums does not depend on the device). */
static int dw_chunks(const nncl__cx_dims *d) {
    int rows = d->B * d->OH;
    return rows < DW_CHUNKS ? rows : DW_CHUNKS;
}

size_t nncl__dw_workspace(const nncl__cx_dims *d) {
    return nncl__dw_fits(d) ? (size_t)d->O * d->kh * d->kw * (size_t)dw_chunks(d) : 0;
}

nncl_status nncl__dw_backward_weight(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv,
                                     nncl__view dy) {
    nncl__args a;
    int P = dw_chunks(d), taps = d->O * d->kh * d->kw, k = dw_k(d);
    size_t global[3], local[3], have;
    NNCL_TRY(nncl__conv_ws(ex, n, nncl__dw_workspace(d), &have));
    global[0] = (size_t)P;
    global[1] = (size_t)d->O * (k ? 1 : d->kh);
    global[2] = 1;
    NNCL_TRY(nncl__kbegin(ex, n,
                          dw_flat(d) ? (k == 3 ? NNCL_CX_K_DW_WEIGHT3_FLAT : NNCL_CX_K_DW_WEIGHT5_FLAT)
                          : k == 3   ? NNCL_CX_K_DW_WEIGHT3
                          : k == 5   ? NNCL_CX_K_DW_WEIGHT5
                                     : NNCL_CX_K_DW_WEIGHT,
                          &a));
    nncl__arg_view(&a, xv);
    nncl__arg_view(&a, dy);
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__cx_args_geometry(&a, d);
    nncl__arg_int(&a, d->B);
    nncl__arg_int(&a, P);
    nncl__arg_int(&a, (int)((size_t)d->B * d->C * d->H * d->W));
    nncl__arg_int(&a, (int)((size_t)d->B * d->O * d->OH * d->OW));
    dw_local(ex, global, local);
    NNCL_TRY(nncl__launch(&a, ex->dev, 2, global, local));
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CX_K_DW_WEIGHT_SUM, &a));
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_view(&a, nncl__grd(ex, n->in[1]));
    nncl__arg_int(&a, taps);
    nncl__arg_int(&a, P);
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 1));
    return nncl__launch_1d(&a, ex->dev, (size_t)taps);
}

#undef DW_CHUNKS
