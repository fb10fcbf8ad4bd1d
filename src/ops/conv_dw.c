/* conv_dw.c - depthwise convolution (groups == channels, any channel
 * multiplier) on kernels of its own (cl/conv_dw.cl): each work-item a
 * segment of one row in float8 vectors, read in place. The layer reads
 * kh*kw inputs per output, so it is memory-bound, not a GEMM; these kernels
 * are faster than the general direct ones (cl/conv_ex.cl) on every layer
 * measured (bench/membound.c), so they take every layer they fit;
 * NNCL_CONV_DEPTHWISE=0 leaves them out. The forward applies bias and
 * activation as it stores; the weight gradient sums per tap in a
 * work-group's tree, in a fixed order. */
#include "ops/conv_ex.h"

int nncl__dw_on(const nncl__cx_dims *d) {
    const char *env = getenv("NNCL_CONV_DEPTHWISE");
    if (env && !strcmp(env, "0")) return 0;
    return !d->transposed && d->G == d->C && d->sw <= 2;
}

nncl_status nncl__dw_forward(nncl__exec *x, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv, nncl__view y,
                             const nncl_node *bias) {
    nncl__args a;
    size_t global[3];
    global[0] = (size_t)(d->OW + 7) / 8;
    global[1] = (size_t)d->OH;
    global[2] = (size_t)d->B * d->O;
    NNCL_TRY(nncl__kbegin(x, n, NNCL_CX_K_DW_FORWARD, &a));
    nncl__arg_view(&a, xv);
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, y);
    nncl__arg_view(&a, bias ? nncl__val(x, bias) : y);
    nncl__arg_int(&a, bias != NULL);
    nncl__cx_args_geometry(&a, d);
    nncl__arg_int(&a, d->act);
    return nncl__launch(&a, x->dev, 3, global, NULL);
}

nncl_status nncl__dw_backward_input(nncl__exec *x, const nncl_node *n, const nncl__cx_dims *d, nncl__view dy,
                                    nncl__view dx, int acc) {
    nncl__args a;
    int L = d->sw == 2 ? 16 : 8;
    size_t global[3];
    global[0] = (size_t)(d->W + L - 1) / (size_t)L;
    global[1] = (size_t)d->H;
    global[2] = (size_t)d->B * d->C;
    NNCL_TRY(nncl__kbegin(x, n, NNCL_CX_K_DW_INPUT, &a));
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_view(&a, dx);
    nncl__cx_args_geometry(&a, d);
    nncl__arg_int(&a, acc);
    return nncl__launch(&a, x->dev, 3, global, NULL);
}

nncl_status nncl__dw_backward_weight(nncl__exec *x, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv,
                                     nncl__view dy) {
    nncl__args a;
    size_t local = 64, global, rows = (size_t)d->B * d->OH; /* the lanes share the rows of y */
    int row = d->kw == 3 || d->kw == 5; /* a kernel row per work-group (the _k3, _k5 kernels) */
    if (local > x->dev->max_work_group) local = x->dev->max_work_group;
    while (local > 1 && local / 2 >= rows) local /= 2;
    global = (size_t)d->O * d->kh * (size_t)(row ? 1 : d->kw) * local;
    NNCL_TRY(nncl__kbegin(x, n, d->kw == 3 ? NNCL_CX_K_DW_WEIGHT3 : d->kw == 5 ? NNCL_CX_K_DW_WEIGHT5 : NNCL_CX_K_DW_WEIGHT,
                          &a));
    nncl__arg_view(&a, xv);
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, nncl__grd(x, n->in[1]));
    nncl__cx_args_geometry(&a, d);
    nncl__arg_count(&a, (size_t)d->B);
    nncl__arg_int(&a, nncl__grad_accumulate(x, n, 1));
    nncl__arg_local(&a, local * (size_t)(row ? d->kw : 1) * sizeof(float));
    return nncl__launch(&a, x->dev, 1, &global, &local);
}
