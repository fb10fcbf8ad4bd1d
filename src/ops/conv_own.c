/* conv_own.c - 2-D convolution (the node of src/ops/op_conv.c) as an implicit
 * GEMM on nncl's own packed kernels (src/gemm/gemm.h), run instead of im2col +
 * CLBlast where timing the whole layer both ways at prepare found it faster
 * (src/ops/conv_pick.c), or with NNCL_GEMM=own.
 *
 * No column matrix: the packing kernels read x (and dy) and write the GEMM
 * panels directly. Per chunk of S samples (S fixed per node and device at
 * prepare, so the workspace sized then holds every later step), panels in
 * the plan's GEMM workspace (ex->gemm_temp):
 *   forward   Wp = pack_a(W [O, C*k*k]), once per step for every chunk;
 *             Bp_s = sample s's column matrix [C*k*k, OH*OW] packed from x
 *             (nncl_conv_pack_b; same-size convolutions on a CPU's kernel
 *             set nncl_conv_pack_bs, by flat plane shifts); y_s [O, OH*OW]
 *             = act(Wp Bp_s + b) for all s of the chunk in one batched
 *             launch sharing Wp, bias (per row) and activation in the
 *             GEMM's epilogue: y is written once, in NCHW, with no reorder.
 *   backward  per chunk, G = dy * act'(y) packed as A panels
 *             (nncl_conv_pack_dy); dW (+)= G col^T as one product over the
 *             chunk, K = S*OH*OW, B from x (nncl_conv_pack_colt; on a
 *             CPU's kernel set nncl_conv_pack_colt8, 8 x 8 per item, or
 *             for same-size convolutions nncl_conv_pack_colts) with a
 *             column of ones whose product is the bias gradient (split from
 *             dW by nncl_conv_dw_split at the end); the chunk's dx (+)= the
 *             direct gather of W and the same G panels
 *             (nncl_conv_backward_f32_input: 16 channels of two pixels per
 *             work-item as float16; in fp32 on a CPU's kernel set of 2 x 2
 *             pixels, nncl_conv_backward_f32_input2x2), from weights
 *             reordered once per step channel-minor by nncl_conv_wt in
 *             front of the panels; no atomics, no barriers, so the same
 *             result on every device).
 * On the path NNCL__CONV_OWN_DXG (stride 1) the input gradient is instead
 * the forward's machinery run on G: dx = G convolved with W turned 180
 * degrees, its channels swapped (wf [C, O*k*k], nncl_conv_wflip_f32, packed
 * once per step at the start of the workspace), padding k-1-pad: per
 * chunk, G's panels as the forward packs x (nncl_conv_pack_bs or _b, over
 * the panels of the weight gradient, done by then) and one batched packed
 * product into dx in NCHW, its beta the accumulation. With an activation G
 * is then made in place first (nncl__conv_act_bias_backward, the bias
 * gradient on the way, so no column of ones). NNCL__CONV_OWN_DX3 runs
 * the same convolution (3x3, padding 1) on the 3x3 path's kernel
 * (nncl_conv3_f32, cl/conv3.cl), which reads G in place: no panels.
 * A 1x1 convolution is the same with k = 1: its packing copies x into
 * panels and its products are plain GEMMs. In half storage the packing
 * kernels read x, dy and W in the storage type into fp32 panels (so the
 * gather converts nothing), the forward product stores y in it, and dW, db
 * and the workspace stay fp32. */
#include "ops/conv_own.h"
#include <limits.h>

#define COWN_ALIGN 64    /* floats: panels start on a cache line */
#define COWN_GROUP 1024  /* work-items per group of the packing kernels, at most */
#define COWN_QUOT (1 << 20) /* dim 0 of the packing kernels stays below (exact float quotients) */

size_t nncl__cown_round(size_t f) { return (f + COWN_ALIGN - 1) / COWN_ALIGN * COWN_ALIGN; }
                        
/* Work-items per group of the packing kernels: enough for whole rows of
 * panels, few enough to spread over the device's cores. */
static size_t cown_group_cap(nncl__exec *ex) {
    return ex->dev->max_work_group < COWN_GROUP ? ex->dev->max_work_group : COWN_GROUP;
}

/* The work-group of a packing kernel whose dim 0 runs over a panel's nr
 * columns: a panel's row (or its half, quarter...) per group row, at most
 * 32 wide, and rows up to 8 or the group cap. PoCL runs nncl_conv_pack_colt
 * far slower with 64 items along dim 0 than with 32 (the 4x64 tile's panels,
 * chosen by timing the product alone, cost more to pack than they saved). */
static void cown_local(nncl__exec *ex, int nr, size_t local[3]) {
    size_t cap = cown_group_cap(ex), l = (size_t)nr <= cap ? (size_t)nr : 1;
    while (l > 32 && l % 2 == 0) l /= 2;
    local[0] = l;
    local[1] = cap / l < 8 ? cap / l : 8;
    local[2] = 1;
}

/* Whether variant v's panels are packed 8 values per work-item as vectors
 * (nncl_conv_pack_colt8): on a CPU's kernel set (a GPU's starts with the
 * local kernel), nr a multiple of 8. */
static int cown_vec8(const nncl__gemm_state *gs, const nncl__gemm_variant *v) {
    return gs->all[0].kind != NNCL__GEMM_LOCAL && v->nr % 8 == 0;
}

/* Same-size convolutions (stride 1, output planes the input's): with
 * cown_vec8, packed by flat plane shifts (nncl_conv_pack_bs, _colts). */
static int cown_same(const nncl__conv_dims *d) { return d->st == 1 && d->OH == d->H && d->OW == d->W; }

static void cown_gemm_fwd(const nncl__conv_dims *d, nncl__gemm_args *g) {
    memset(g, 0, sizeof *g);
    g->m = (size_t)d->O;
    g->n = d->ohw;
    g->k = d->ckk;
}

int nncl__conv_own_fits(const nncl__conv_dims *d) {
    /* the packing kernels' quotients: pixels of a plane, rows of the column
     * matrix (tiles of up to 256 included); a chunk's pixels (cown_chunk) */
    return d->ohw + 256 <= COWN_QUOT && d->ckk + 256 <= COWN_QUOT;
}

/* Whether the device's variant i may pack a product of d's layer: a
 * packing one worth timing on the layer's O rows (every product's A has
 * them; nncl__gemm_worth). */
static int cown_packs(const nncl__gemm_variant *v, int i, const nncl__conv_dims *d) {
    return nncl__gemm_packs(&v[i]) && nncl__gemm_worth(v, i, (size_t)d->O, (size_t)-1);
}

/* The most floats panels of `rows` x k take over the variants that may
 * pack a product of d's layer (cown_packs; the first is the fallback), as
 * A panels (tile rows mr) or, with b, as B panels (nr): panels sized so
 * fit whichever it gets. A maximum over the variants, not
 * the largest tile's padding: a larger tile does not always pad more (13
 * rows take 14 with mr 14, 16 with mr 4). */
static nncl_status cown_panels(nncl__exec *ex, const nncl__conv_dims *d, size_t rows, size_t k, int b, size_t *floats) {
    const nncl__gemm_variant *v;
    int n = 0, i;
    NNCL_TRY(nncl__gemm_variants(ex->ctx, ex->dev, 0, &v, &n));
    *floats = 0;
    for (i = 0; i < n; i++)
        if (cown_packs(v, i, d)) {
            size_t f = nncl__gemm_pack_floats(b ? v[i].nr : v[i].mr, rows, k);
            if (f > *floats) *floats = f;
        }
    return NNCL_OK;
}

/* Floats of the weights reordered for the input gradient's gather
 * (nncl_conv_wt: channels padded to 16). */
size_t nncl__cown_wt_floats(const nncl__conv_dims *d) {
    return (size_t)d->O * (size_t)d->k * (size_t)d->k * (((size_t)d->C + 15) / 16 * 16);
}

/* The input gradient of a stride-1 layer d as a forward convolution: G's
 * O channels of OH x OW in, d's C channels of H x W out, kernel k,
 * padding k-1-pad. */
void nncl__cown_dx_dims(const nncl__conv_dims *d, nncl__conv_dims *t) {
    *t = *d;
    t->C = d->O;
    t->H = d->OH;
    t->W = d->OW;
    t->O = d->C;
    t->OH = d->H;
    t->OW = d->W;
    t->st = 1;
    t->pad = d->k - 1 - d->pad;
    t->act = 0;
    t->ckk = (size_t)t->C * (size_t)d->k * (size_t)d->k;
    t->ohw = (size_t)t->OH * (size_t)t->OW;
    t->pointwise = d->k == 1 && t->pad == 0;
    t->dxg = 0;
}

int nncl__conv_dxg_fits(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    nncl__conv_dims t;
    nncl__cown_dx_dims(d, &t);
    return !ex->store && d->st == 1 && d->pad <= d->k - 1 && nncl__need_grad(ex, n, 0) && nncl__conv_own_fits(d) &&
           nncl__conv_own_fits(&t);
}

int nncl__conv_dx3_fits(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    size_t xs = (size_t)d->B * (size_t)d->C * (size_t)d->H * (size_t)d->W, ys = (size_t)d->B * (size_t)d->O * d->ohw;
    return nncl__conv_dxg_fits(ex, n, d) && d->k == 3 && d->pad == 1 && d->OH == d->H && d->OW == d->W &&
           xs < (size_t)INT_MAX - 64 && ys < (size_t)INT_MAX - 64;
}

/* Whether the weight gradient's product also sums dy into the bias
 * gradient: an extra column of ones in its B panels (its C then goes
 * through the workspace, nncl_conv_dw_split); not where the product path
 * of the input gradient makes G in place first. */
static int cown_ones(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    return n->n_in == 3 && nncl__need_grad(ex, n, 1) && nncl__need_grad(ex, n, 2) && !(d->dxg && d->act);
}

/* What the backward keeps at the start of the workspace, in floats, where
 * its chunks' panels start (*g0): the gather's reordered weights, or with
 * d->dxg the flipped weights' A panels (at 0; none for the 3x3 kernel)
 * and the flipped weights themselves (at *flip_at). */
nncl_status nncl__cown_front(nncl__exec *ex, const nncl__conv_dims *d, size_t *g0, size_t *flip_at) {
    nncl__conv_dims t;
    size_t ap;
    *flip_at = 0;
    if (!d->dxg) {
        *g0 = nncl__cown_round(nncl__cown_wt_floats(d));
        return NNCL_OK;
    }
    nncl__cown_dx_dims(d, &t);
    ap = 0;
    if (d->dxg == 1) NNCL_TRY(cown_panels(ex, &t, (size_t)t.O, t.ckk, 0, &ap));
    *flip_at = nncl__cown_round(ap);
    *g0 = *flip_at + nncl__cown_round((size_t)t.O * t.ckk);
    return NNCL_OK;
}

/* Floats of S samples of x as fp32 (half storage; 0 in fp32, read in
 * place). */
static size_t cown_xs(nncl__exec *ex, const nncl__conv_dims *d, size_t S) {
    return ex->store ? S * (size_t)d->C * (size_t)d->H * (size_t)d->W : 0;
}

/* Samples per chunk and the workspace floats the chunks need. Forward: Wp,
 * then S samples' B panels, and at the end (half storage) their x as fp32;
 * weight gradient: S samples' A and B panels (in half storage their x as
 * fp32 first where the A panels go: packing B reads it, then the A panels
 * overwrite it), and at the end the product [O, C*k*k + 1] when it carries
 * the bias gradient; with d->dxg the input gradient's panels of G too.
 * Bounded by nncl__conv_budget (never by the batch, so S
 * only shrinks with it), by the kernels' int offsets and by their
 * quotients (S*OH*OW < 2^20). */
static nncl_status cown_chunk(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int *S, size_t *floats) {
    size_t budget, fixed, wt, fwd, bwd, bwd_b, dxb = 0, per, cap, ones = (size_t)cown_ones(ex, n, d), flip_at;
    NNCL_TRY(nncl__conv_budget(ex, n, &budget));
    /* the budget is a share of the arena's bytes, the panels fp32 also in
     * half storage: half as many samples per chunk as fp32 would double the
     * launches and the packing kernels' fixed cost; 1.5x the share still
     * saves memory against fp32 */
    if (ex->store) budget += budget / 2;
    NNCL_TRY(cown_panels(ex, d, (size_t)d->O, d->ckk, 0, &fixed));
    NNCL_TRY(nncl__cown_front(ex, d, &wt, &flip_at));
    fixed = nncl__cown_round(fixed > wt ? fixed : wt) + 4 * COWN_ALIGN + (ones ? (size_t)d->O * (d->ckk + 1) : 0);
    if (d->dxg == 1) { /* the input gradient's B panels of G, where the weight gradient's were */
        nncl__conv_dims t;
        nncl__cown_dx_dims(d, &t);
        NNCL_TRY(cown_panels(ex, &t, t.ohw, t.ckk, 1, &dxb));
    }
    NNCL_TRY(cown_panels(ex, d, d->ohw, d->ckk, 1, &fwd));
    NNCL_TRY(cown_panels(ex, d, (size_t)d->O, d->ohw, 0, &bwd));
    NNCL_TRY(cown_panels(ex, d, d->ckk + ones, d->ohw, 1, &bwd_b));
    fwd += cown_xs(ex, d, 1);
    bwd = (bwd > cown_xs(ex, d, 1) ? bwd : cown_xs(ex, d, 1)) + bwd_b;
    per = fwd > bwd ? fwd : bwd;
    if (dxb > per) per = dxb;
    cap = budget > fixed ? (budget - fixed) / per : 1;
    if (cap > ((size_t)INT_MAX / 2 - fixed) / per) cap = ((size_t)INT_MAX / 2 - fixed) / per;
    if (cap > (COWN_QUOT - 1) / d->ohw) cap = (COWN_QUOT - 1) / d->ohw;
    if (cap < 1) cap = 1;
    *S = cap < (size_t)d->B ? (int)cap : d->B;
    if (*S < 1) *S = 1;
    *floats = fixed + (size_t)*S * per;
    return NNCL_OK;
}

/* The end of a workspace of `floats` (cown_chunk) for chunks of S: the
 * forward's x as fp32 at *x_at (half storage), the weight gradient's
 * product with its bias column at *ct_off (the backward's); the panels of
 * each pass end before its own. */
static void cown_tail(nncl__exec *ex, const nncl__conv_dims *d, int S, size_t floats, size_t *x_at, size_t *ct_off) {
    *x_at = (floats - cown_xs(ex, d, (size_t)S)) / COWN_ALIGN * COWN_ALIGN;
    *ct_off = (floats - (size_t)d->O * (d->ckk + 1)) / COWN_ALIGN * COWN_ALIGN;
}

/* Where the backward's B panels start for k = ns*OH*OW columns of A panels
 * of mr rows: after the A panels or ns samples of x as fp32, the larger. */
static size_t cown_bp_off(nncl__exec *ex, const nncl__conv_dims *d, size_t g0, int mr, size_t k) {
    size_t a = nncl__gemm_pack_floats(mr, (size_t)d->O, k), xs = cown_xs(ex, d, k / d->ohw);
    return g0 + nncl__cown_round(a > xs ? a : xs);
}

/* Once per plan: with every packed variant a product may get, the
 * backward's largest chunk (reordered weights, A and B panels) ends before
 * the product's columns at the end of the workspace, and the forward's
 * panels fit it. A bound too small would overwrite panels being read: a
 * wrong gradient, not an error. */
static nncl_status cown_check_layout(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int S,
                                     size_t floats) {
    const nncl__gemm_variant *v;
    size_t k = (size_t)S * d->ohw, ones = (size_t)cown_ones(ex, n, d), g0, x_at, ct_off, flip_at;
    nncl__conv_dims t;
    int count = 0, i;
    NNCL_TRY(nncl__gemm_variants(ex->ctx, ex->dev, 0, &v, &count));
    NNCL_TRY(nncl__cown_front(ex, d, &g0, &flip_at));
    if (!nncl__need_grad(ex, n, 0)) g0 = 0;
    cown_tail(ex, d, S, floats, &x_at, &ct_off);
    for (i = 0; i < count; i++) {
        size_t bwd, fwd;
        if (!cown_packs(v, i, d)) continue;
        bwd = cown_bp_off(ex, d, g0, v[i].mr, k) + nncl__gemm_pack_floats(v[i].nr, d->ckk + ones, k);
        fwd = nncl__cown_round(nncl__gemm_pack_floats(v[i].mr, (size_t)d->O, d->ckk)) +
              (size_t)S * nncl__gemm_pack_floats(v[i].nr, d->ohw, d->ckk);
        if (bwd > (ones ? ct_off : floats) || fwd > x_at)
            return nncl__fail(ex->ctx, NNCL_ERR_STATE,
                              "conv2d \"%s\": %s's panels need %zu (backward) and %zu (forward) floats of a %zu-float "
                              "workspace",
                              n->name, v[i].name, bwd, fwd, floats);
    }
    nncl__cown_dx_dims(d, &t);
    for (i = 0; d->dxg == 1 && i < count; i++) /* the input gradient's panels of G */
        if (cown_packs(v, i, &t) &&
            g0 + (size_t)S * nncl__gemm_pack_floats(v[i].nr, t.ohw, t.ckk) > (ones ? ct_off : floats))
            return nncl__fail(ex->ctx, NNCL_ERR_STATE,
                              "conv2d \"%s\": %s's input gradient panels overrun a %zu-float workspace", n->name,
                              v[i].name, floats);
    return NNCL_OK;
}

nncl_status nncl__conv_own_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes) {
    nncl__gemm_args g;
    nncl__gemm_variant v;
    const nncl__gemm_variant *all;
    size_t floats, ignored = 0;
    int S, count;
    *bytes = 0;
    cown_gemm_fwd(d, &g);
    NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &ignored)); /* measures: its best own variant */
    NNCL_TRY(cown_chunk(ex, n, d, &S, &floats));
    NNCL_TRY(cown_check_layout(ex, n, d, S, floats));
    if (nncl__need_grad(ex, n, 1)) { /* the weight gradient's product, for its kernel */
        g.n = d->ckk + (size_t)cown_ones(ex, n, d);
        g.k = (size_t)S * d->ohw;
        NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &ignored));
        NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, (size_t)d->O, g.n, g.k, &v));
        NNCL_TRY(nncl__gemm_own_resolve(ex->ctx, ex->dev, &v, &g));
    }
    if (d->dxg == 1) { /* the input gradient's product: C rows, a plane of columns, O*k*k deep */
        g.m = (size_t)d->C;
        g.n = (size_t)d->H * (size_t)d->W;
        g.k = (size_t)d->O * (size_t)d->k * (size_t)d->k;
        NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &ignored));
        NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, g.m, g.n, g.k, &v));
        NNCL_TRY(nncl__gemm_own_resolve(ex->ctx, ex->dev, &v, &g));
    }
    /* the packed kernels the steps launch: the forward's (in half storage
     * its build reading W and storing y in that type), and the device's
     * first, which a smaller last chunk's weight gradient falls back to */
    NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, (size_t)d->O, d->ohw, d->ckk, &v));
    v.store = ex->store;
    NNCL_TRY(nncl__gemm_own_resolve(ex->ctx, ex->dev, &v, &g));
    NNCL_TRY(nncl__gemm_variants(ex->ctx, ex->dev, 1, &all, &count));
    NNCL_TRY(nncl__gemm_own_resolve(ex->ctx, ex->dev, &all[0], &g));
    *bytes = floats * sizeof(float);
    return NNCL_OK;
}

/* The forward's B panels of ns samples of x (fp32) for variant v at
 * bp_off: nncl_conv_pack_bs for same-size layers on a CPU's kernel set,
 * else nncl_conv_pack_b. d is the layer's geometry, or (the input
 * gradient's product) nncl__cown_dx_dims's, x then G. */
nncl_status nncl__cown_pack_fwd_b(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d,
                                  const nncl__gemm_variant *v, nncl__view xv, size_t bp_off, int ns) {
    size_t global[3], local[3] = {1, 1, 1};
    nncl__gemm_state *gs = NULL;
    nncl__args a;
    int flat;
    NNCL_TRY(nncl__gemm_state_get(ex->ctx, ex->dev, &gs));
    flat = cown_vec8(gs, v) && cown_same(d);
    NNCL_TRY(nncl__kbegin(ex, n, flat ? NNCL_CONV_K_PACK_BS : NNCL_CONV_K_PACK_B, &a));
    nncl__arg_view(&a, xv);
    nncl__arg_mem(&a, ex->gemm_temp);
    nncl__arg_int(&a, (int)bp_off);
    nncl__conv_arg_geometry(&a, d);
    nncl__arg_int(&a, v->nr);
    if (flat) { /* the same group whatever C*k*k (the kernel checks its rows): one build on PoCL */
        global[0] = d->ckk;
        global[1] = (d->ohw + (size_t)v->nr - 1) / (size_t)v->nr;
        global[2] = (size_t)ns;
        return nncl__launch_checked(&a, ex->dev, 3, global);
    }
    cown_local(ex, v->nr, local);
    global[0] = (size_t)v->nr;
    global[1] = (d->ckk + local[1] - 1) / local[1] * local[1];
    global[2] = (size_t)ns * ((d->ohw + (size_t)v->nr - 1) / (size_t)v->nr);
    return nncl__launch(&a, ex->dev, 3, global, local);
}

nncl_status nncl__conv_own_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    nncl__gemm_variant v;
    nncl__gemm_packed_args p;
    nncl__view xv, w = nncl__val(ex, n->in[1]), y = nncl__val(ex, n);
    size_t floats, have, per_b, ys_n = (size_t)d->O * d->ohw, x_at, ct_off;
    int S, s0;
    NNCL_TRY(cown_chunk(ex, n, d, &S, &floats));
    NNCL_TRY(nncl__conv_ws(ex, n, floats, &have));
    cown_tail(ex, d, S, floats, &x_at, &ct_off);
    NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, (size_t)d->O, d->ohw, d->ckk, &v));
    v.store = ex->store; /* W and y (and the bias) in the storage type, the panels fp32 */
    memset(&p, 0, sizeof p);
    per_b = nncl__gemm_pack_floats(v.nr, d->ohw, d->ckk);
    p.m = (size_t)d->O;
    p.n = d->ohw;
    p.k = d->ckk;
    p.ap = p.bp = ex->gemm_temp;
    p.bp_off = nncl__cown_round(nncl__gemm_pack_floats(v.mr, p.m, p.k));
    p.bp_stride = per_b;
    p.c = y.mem;
    p.c_stride = ys_n;
    p.ldc = d->ohw;
    p.alpha = 1.0f;
    if (n->n_in == 3) {
        nncl__view b = nncl__val(ex, n->in[2]);
        p.epi.bias = 2; /* per row of y_s: per output channel */
        p.epi.bias_mem = b.mem;
        p.epi.bias_off = b.off;
    }
    p.epi.act = d->act;
    NNCL_TRY(nncl__gemm_pack_a(ex->ctx, ex->dev, &v, 0, p.m, p.k, w.mem, w.off, d->ckk, 0, 1, ex->gemm_temp, 0));
    for (s0 = 0; s0 < d->B; s0 += S) {
        int ns = d->B - s0 < S ? d->B - s0 : S;
        NNCL_TRY(nncl__conv_x_f32(ex, n, d, x_at, s0, ns, &xv));
        NNCL_TRY(nncl__cown_pack_fwd_b(ex, n, d, &v, xv, p.bp_off, ns));
        p.batch = (size_t)ns;
        p.c_off = y.off + (size_t)s0 * ys_n;
        NNCL_TRY(nncl__gemm_packed(ex->ctx, ex->dev, &v, &p));
    }
    return NNCL_OK;
}

/* Per chunk: G = dy * act'(y) packed as A panels (nncl_conv_pack_dy, or dy8);
 * with need_w dW (+)= G col^T over the chunk, and with ones (cown_ones) the
 * product has one more column, the bias gradient, and goes through the
 * end of the workspace, split into dW and db by nncl_conv_dw_split at the
 * end; with need_x the chunk's dx by the gather of the same panels, or
 * with d->dxg by a product (nncl__cown_dx_gemm, the G panels packed only for
 * dW). act 0: dy is G already (nncl__conv_act_bias_backward ran). */
static nncl_status cown_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy, int act,
                                 int need_w, int need_x) {
    nncl__gemm_variant v, vx;
    nncl__gemm_packed_args p;
    nncl__view xv = nncl__val(ex, n->in[0]), dw = need_w ? nncl__grd(ex, n->in[1]) : xv, y = nncl__val(ex, n);
    size_t floats, have, ys_n = (size_t)d->O * d->ohw, global[3];
    size_t local[3], ct_off, x_at, g0;
    /* nncl__grad_accumulate marks the gradient written: asked once */
    int S, s0, ones = need_w && cown_ones(ex, n, d), acc = need_w && nncl__grad_accumulate(ex, n, 1);
    int acc_x = need_x && nncl__grad_accumulate(ex, n, 0), cpu_set, dy8, colt8, flat;
    nncl__args a;
    nncl__gemm_state *gs = NULL;
    NNCL_TRY(nncl__gemm_state_get(ex->ctx, ex->dev, &gs));
    /* A CPU's kernel set (a GPU's starts with the local kernel) takes the
     * packing kernels with 8 values per work-item along a row (cl/conv.cl):
     * dy in fp16, the column panels in every storage. */
    cpu_set = gs->all[0].kind != NNCL__GEMM_LOCAL;
    dy8 = ex->store == 1 && cpu_set;
    NNCL_TRY(cown_chunk(ex, n, d, &S, &floats));
    NNCL_TRY(nncl__conv_ws(ex, n, floats, &have));
    NNCL_TRY(nncl__gemm_packed_variant(ex->ctx, ex->dev, (size_t)d->O, d->ckk + (size_t)ones, (size_t)S * d->ohw, &v));
    colt8 = cown_vec8(gs, &v);
    flat = colt8 && cown_same(d);
    NNCL_TRY(nncl__cown_wt(ex, n, d, need_x, &vx, &g0));
    cown_tail(ex, d, S, floats, &x_at, &ct_off);
    memset(&p, 0, sizeof p);
    p.m = (size_t)d->O;
    p.n = d->ckk + (size_t)ones;
    p.batch = 1;
    p.ap = p.bp = ex->gemm_temp;
    p.ap_off = g0;
    p.c = ones ? ex->gemm_temp : dw.mem;
    p.c_off = ones ? ct_off : dw.off;
    p.ldc = p.n;
    p.alpha = 1.0f;
    for (s0 = 0; s0 < d->B; s0 += S) {
        int ns = d->B - s0 < S ? d->B - s0 : S;
        p.k = (size_t)ns * d->ohw;
        p.bp_off = cown_bp_off(ex, d, g0, v.mr, p.k);
        p.beta = s0 == 0 && (ones || !acc) ? 0.0f : 1.0f;
        if (need_w) { /* B first: its x (half storage) goes where the A panels go next */
            size_t panels = (d->ckk + (size_t)ones + (size_t)v.nr - 1) / (size_t)v.nr;
            NNCL_TRY(nncl__conv_x_f32(ex, n, d, g0, s0, ns, &xv));
            NNCL_TRY(nncl__kbegin(ex, n,
                                  flat    ? NNCL_CONV_K_PACK_COLTS
                                  : colt8 ? NNCL_CONV_K_PACK_COLT8
                                          : NNCL_CONV_K_PACK_COLT,
                                  &a));
            nncl__arg_view(&a, xv);
            nncl__arg_mem(&a, ex->gemm_temp);
            nncl__arg_int(&a, (int)p.bp_off);
            nncl__conv_arg_geometry(&a, d);
            nncl__arg_int(&a, ns); nncl__arg_int(&a, v.nr);
            nncl__arg_int(&a, ones);
            if (colt8) { /* 8 pixels (of a row, or flat) by 8 columns per item; 4 samples a group,
                          * along dim 1: 4 items along dim 0 PoCL runs as SIMD lanes with 64-bit
                          * indices */
                global[0] = flat ? (d->ohw + 7) / 8 : (size_t)d->OH * (size_t)((d->OW + 7) / 8);
                global[1] = (size_t)ns;
                global[2] = panels * (size_t)(v.nr / 8);
                local[0] = local[2] = 1; /* 4 even for a last chunk of fewer samples, which the
                                          * kernel skips: one group size, one build on PoCL */
                local[1] = cown_group_cap(ex) < 4 ? cown_group_cap(ex) : 4;
            } else {
                cown_local(ex, v.nr, local);
                global[0] = (size_t)v.nr;
                global[1] = d->ohw;
                global[2] = (size_t)ns * panels;
            }
            NNCL_TRY(nncl__launch(&a, ex->dev, 3, global, local));
        }
        if (need_w || !d->dxg) {
            NNCL_TRY(nncl__kbegin(ex, n, dy8 ? NNCL_CONV_K_PACK_DY8 : NNCL_CONV_K_PACK_DY, &a));
            nncl__arg_view(&a, nncl__conv_at(dy, (size_t)s0 * ys_n));
            nncl__arg_view(&a, nncl__conv_at(y, (size_t)s0 * ys_n));
            nncl__arg_mem(&a, ex->gemm_temp);
            nncl__arg_int(&a, (int)g0);
            nncl__arg_int(&a, d->O); nncl__arg_int(&a, (int)d->ohw); nncl__arg_int(&a, ns); nncl__arg_int(&a, v.mr);
            nncl__arg_int(&a, act);
            global[0] = dy8 ? (p.k + 7) / 8 : p.k;
            global[1] = ((size_t)d->O + (size_t)v.mr - 1) / (size_t)v.mr;
            NNCL_TRY(nncl__launch_checked(&a, ex->dev, 2, global));
        }
        if (need_w) NNCL_TRY(nncl__gemm_packed(ex->ctx, ex->dev, &v, &p));
        /* the 2 x 2 gather in fp32 storage only: in half storage, Mesa
         * rusticl (which builds each launch) spends far longer building its
         * conversions than PoCL gains */
        if (need_x && d->dxg == 2) NNCL_TRY(nncl__cown_dx3(ex, n, d, dy, s0, ns, acc_x));
        else if (need_x && d->dxg) NNCL_TRY(nncl__cown_dx_gemm(ex, n, d, &vx, dy, g0, s0, ns, acc_x));
        else if (need_x) NNCL_TRY(nncl__cown_dx(ex, n, d, g0, v.mr, s0, ns, acc_x, cpu_set && !ex->store));
    }
    if (!ones) return NNCL_OK;
    {
        nncl__view db = nncl__grd(ex, n->in[2]);
        NNCL_TRY(nncl__kbegin(ex, n, NNCL_CONV_K_DW_SPLIT, &a));
        nncl__arg_mem(&a, ex->gemm_temp);
        nncl__arg_int(&a, (int)ct_off);
        nncl__arg_view(&a, dw);
        nncl__arg_view(&a, db);
        nncl__arg_int(&a, d->O); nncl__arg_int(&a, (int)d->ckk); nncl__arg_int(&a, acc);
        nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 2));
        nncl__arg_int(&a, 1);
        return nncl__launch_1d(&a, ex->dev, (size_t)d->O * (d->ckk + 1));
    }
}

nncl_status nncl__conv_own_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy) {
    int need_w = nncl__need_grad(ex, n, 1), need_x = nncl__need_grad(ex, n, 0), act = d->act;
    /* the bias gradient (if any) apart; dy becomes G in place, for the
     * input gradient's product to read */
    if (!need_w || (d->dxg && need_x && act)) {
        NNCL_TRY(nncl__conv_act_bias_backward(ex, n, d, dy));
        act = 0;
    }
    if (!need_w && !need_x) return NNCL_OK;
    return cown_backward(ex, n, d, dy, act, need_w, need_x);
}

#undef COWN_ALIGN
#undef COWN_GROUP
#undef COWN_QUOT
