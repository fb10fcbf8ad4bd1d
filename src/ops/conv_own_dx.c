/* conv_own_dx.c - the input gradient of conv2d's own path (src/ops/conv_own.c,
 * whose header states the algorithm): the weights reordered for the
 * gather or flipped for a product, once per step, and per chunk dx by the
 * gather of G's panels, by the product of the flipped weights and G packed
 * as the forward packs x, or by the 3x3 kernel reading G in place. */
#include "ops/conv_own.h"

/* Once per step, what the input gradient reads at the start of the
 * workspace: the weights reordered for the gather, or with d->dxg the
 * flipped weights (nncl_conv_wflip) packed as A panels of *vx, the
 * variant of its product; *g0 where the chunks' panels start (0 without
 * an input gradient). */
nncl_status nncl__cown_wt(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int need_x,
                          nncl__gemm_variant *vx, size_t *g0) {
    nncl__view w = nncl__val(ex, n->in[1]);
    nncl__args a;
    size_t count = nncl__cown_wt_floats(d);
    *g0 = 0;
    if (!need_x) return NNCL_OK;
    if (d->dxg) {
        nncl__conv_dims t;
        size_t flip_at;
        nncl__cown_dx_dims(d, &t);
        NNCL_TRY(nncl__cown_front(ex, d, g0, &flip_at));
        if (d->dxg == 1) NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, (size_t)t.O, t.ohw, t.ckk, vx));
        vx->store = 0;
        NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_WFLIP, &a));
        nncl__arg_view(&a, w);
        nncl__arg_mem(&a, ex->gemm_temp);
        nncl__arg_int(&a, (int)flip_at);
        nncl__arg_int(&a, d->O); nncl__arg_int(&a, d->C); nncl__arg_int(&a, d->k);
        NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)t.O * t.ckk));
        if (d->dxg == 2) return NNCL_OK;
        return nncl__gemm_pack_a(ex->ctx, ex->dev, vx, 0, (size_t)t.O, t.ckk, ex->gemm_temp, flip_at, t.ckk, 0, 1,
                                 ex->gemm_temp, 0);
    }
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_WT, &a));
    nncl__arg_view(&a, w);
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, d->O); nncl__arg_int(&a, d->C); nncl__arg_int(&a, d->k);
    nncl__arg_int(&a, (int)(((size_t)d->C + 15) / 16 * 16));
    NNCL_TRY(nncl__launch_1d(&a, ex->dev, count));
    *g0 = nncl__cown_round(count);
    return NNCL_OK;
}

/* dx (+)= the gather of the chunk's G panels (at g0) and the reordered
 * weights (at 0), for samples s0 .. s0+ns-1; with quad, 2 x 2 pixels per
 * work-item (nncl_conv_backward_f32_input2x2). */
nncl_status nncl__cown_dx(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t g0, int mr, int s0,
                          int ns, int acc, int quad) {
    nncl__view dx = nncl__grd(ex, n->in[0]);
    nncl__args a;
    size_t global[3], local[3] = {1, 1, 1}, cb = ((size_t)d->C + 15) / 16;
    size_t xs_n = (size_t)d->C * (size_t)d->H * (size_t)d->W;
    NNCL_TRY(nncl__kbegin(ex, n, quad ? NNCL_CONV_K_DX2X2 : NNCL_CONV_K_DX, &a));
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, (int)g0);
    nncl__arg_int(&a, (int)((size_t)ns * d->ohw));
    nncl__arg_int(&a, mr);
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, 0);
    nncl__arg_view(&a, nncl__conv_at(dx, (size_t)s0 * xs_n));
    nncl__arg_int(&a, d->C); nncl__arg_int(&a, d->H); nncl__arg_int(&a, d->W);
    nncl__arg_int(&a, d->O); nncl__arg_int(&a, d->k); nncl__arg_int(&a, d->st); nncl__arg_int(&a, d->pad);
    nncl__arg_int(&a, d->OH); nncl__arg_int(&a, d->OW); nncl__arg_int(&a, acc);
    /* pairs of pixels of one phase (nncl_conv_dx_pair) */
    global[0] = ((size_t)d->W + 2 * (size_t)d->st - 1) / (2 * (size_t)d->st) * (size_t)d->st;
    global[1] = quad ? ((size_t)d->H + 2 * (size_t)d->st - 1) / (2 * (size_t)d->st) * (size_t)d->st : (size_t)d->H;
    global[2] = (size_t)ns * cb;
    /* A CPU device runs a group on one thread, and these work-items are
     * vector code already: groups of one, which its threads share evenly
     * (PoCL's own choice, a sample's rows per group, leaves a handful of
     * groups per launch). GPUs choose their groups. */
    return nncl__launch(&a, ex->dev, 3, global, ex->dev->info.type == NNCL_DEVICE_CPU ? local : NULL);
}

/* dx (+)= the product of the flipped weights' panels (at 0, variant vx)
 * and G's panels for samples s0 .. s0+ns-1, packed at g0 as the forward
 * packs x (nncl__cown_dx_dims): dy is G here. */
nncl_status nncl__cown_dx_gemm(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d,
                               const nncl__gemm_variant *vx, nncl__view dy, size_t g0, int s0, int ns, int acc) {
    nncl__view dx = nncl__grd(ex, n->in[0]);
    nncl__gemm_packed_args p;
    nncl__conv_dims t;
    nncl__cown_dx_dims(d, &t);
    NNCL_TRY(nncl__cown_pack_fwd_b(ex, n, &t, vx, nncl__conv_at(dy, (size_t)s0 * (size_t)t.C * d->ohw), g0, ns));
    memset(&p, 0, sizeof p);
    p.m = (size_t)t.O;
    p.n = t.ohw;
    p.k = t.ckk;
    p.batch = (size_t)ns;
    p.ap = p.bp = ex->gemm_temp;
    p.bp_off = g0;
    p.bp_stride = nncl__gemm_pack_floats(vx->nr, t.ohw, t.ckk);
    p.c = dx.mem;
    p.c_off = dx.off + (size_t)s0 * (size_t)t.O * t.ohw;
    p.c_stride = (size_t)t.O * t.ohw;
    p.ldc = t.ohw;
    p.alpha = 1.0f;
    p.beta = acc ? 1.0f : 0.0f;
    return nncl__gemm_packed(ex->ctx, ex->dev, vx, &p);
}

/* dx (+)= the direct 3x3 convolution of G for samples s0 .. s0+ns-1 by
 * the flipped weights (at 0 of the workspace; nncl_conv3_f32, 8 pixels of
 * 8 channels per work-item, in the 3x3 path's groups). */
nncl_status nncl__cown_dx3(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy, int s0,
                           int ns, int acc) {
    nncl__view dx = nncl__grd(ex, n->in[0]);
    size_t global[3], local[3] = {8, 1, 1}, hw = (size_t)d->H * (size_t)d->W;
    nncl__args a;
    nncl__view w;
    if (local[0] > ex->dev->max_work_group) local[0] = 1;
    w.mem = ex->gemm_temp;
    w.off = 0;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_CONV3, &a));
    nncl__arg_view(&a, nncl__conv_at(dy, (size_t)s0 * (size_t)d->O * d->ohw));
    nncl__arg_view(&a, w);
    nncl__arg_view(&a, dx); /* no bias */
    nncl__arg_view(&a, nncl__conv_at(dx, (size_t)s0 * (size_t)d->C * hw));
    nncl__arg_int(&a, d->O); nncl__arg_int(&a, d->H); nncl__arg_int(&a, d->W);
    nncl__arg_int(&a, d->C); nncl__arg_int(&a, ns);
    nncl__arg_int(&a, 0); nncl__arg_int(&a, 0); nncl__arg_int(&a, acc);
    global[0] = (hw + 7) / 8;
    global[1] = ((size_t)d->C + 7) / 8;
    global[2] = (size_t)ns;
    return nncl__launch(&a, ex->dev, 3, global, local);
}
