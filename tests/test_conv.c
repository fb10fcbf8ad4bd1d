/* test_conv.c - what the op table (test_op_table.c, which checks conv2d and
 * the pools alone over odd sizes and every attribute) cannot see of the
 * spatial ops: conv2d and a pool adding into one input's gradient, a small
 * LeNet-like chain, conv2d beside CLBlast's indirect GEMM, the shape errors
 * caught at build time, the path NNCL_GEMM asks for, the bound on conv2d's
 * workspace, a small CNN that learns, and 2x2 max pooling of NaN, infinities
 * and signed zeros in every storage format. */
#include "opcheck.h"
#include <clblast_c.h>

/* op(x) against a random target through mse, so that every output element
 * gets a gradient of its own (a mean over planes would hide layout bugs). */
static void tc_run(nncl_context *ctx, nncl_graph *g, nncl_node *x, nncl_node *h, const char *name, int batch) {
    int shape[NNCL_MAX_DIMS], nd;
    nncl_node *t, *loss;
    oc_feed f[2];
    float *xd, *td;
    if (!h) {
        th_fail(name, "building the graph failed: %s", nncl_last_error(ctx));
        nncl_graph_free(g);
        return;
    }
    nd = nncl_node_shape(h, shape);
    t = nncl_input(g, "target", nd, shape);
    loss = nncl_mse(g, h, t);
    xd = th_random(nncl__numel(x, batch), -1, 1, 3);
    td = th_random(nncl__numel(h, batch), -1, 1, 7);
    f[0].node = x; f[0].data = xd;
    f[1].node = t; f[1].data = td;
    oc_check(name, ctx, g, loss, f, 2, batch, 1e-9);
    free(xd);
    free(td);
    nncl_graph_free(g);
}

static nncl_node *tc_input(nncl_graph *g, int C, int H, int W) {
    int xs[3];
    nncl_node *x;
    xs[0] = C; xs[1] = H; xs[2] = W;
    x = nncl_input(g, "x", 3, xs);
    if (x) x->needs_grad = 1; /* check the input gradient too */
    return x;
}

static void check_conv(nncl_context *ctx, int batch, int C, int H, int W, int O, int k, int st, int pad, int bias,
                       nncl_act act) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 42);
    nncl_node *x = tc_input(g, C, H, W);
    snprintf(name, sizeof name, "conv2d b%d c%d %dx%d o%d k%d s%d p%d bias%d act%d", batch, C, H, W, O, k, st, pad, bias,
             (int)act);
    tc_run(ctx, g, x, nncl_conv2d(g, x, O, k, st, pad, bias, act, "conv"), name, batch);
}

/* conv2d with its weight frozen: the input gradient (and the bias's)
 * through dy * act'(y) made apart, then the gather alone. */
static void check_conv_frozen(nncl_context *ctx, int batch, int bias, nncl_act act) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 43);
    nncl_node *x = tc_input(g, 3, 9, 7), *h = nncl_conv2d(g, x, 5, 3, 1, 1, bias, act, "conv");
    snprintf(name, sizeof name, "conv2d b%d bias%d act%d, weight frozen", batch, bias, (int)act);
    if (h && nncl_param_freeze(g, nncl_graph_find(g, "conv.weight"), 1) != NNCL_OK) h = NULL;
    tc_run(ctx, g, x, h, name, batch);
}

/* x feeds a conv2d and a pool whose outputs meet in mse(a, b), so that the
 * op running backward second adds to x's gradient (acc) instead of writing
 * it; conv_first builds the conv first, so that it runs backward last. With
 * k 2, both take 2x2 windows at stride 2 (the max pool's _2x2 kernels). */
static void check_shared(nncl_context *ctx, int batch, int kind, int conv_first, int k) {
    static const char *const kinds[3] = {"maxpool2d", "avgpool2d", "global_avgpool"};
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 11);
    nncl_node *x = tc_input(g, 2, 5, 7), *a = NULL, *b = NULL, *loss;
    oc_feed f[1];
    float *xd = th_random((size_t)batch * 70, -1, 1, 13);
    int step;
    for (step = 0; step < 2; step++) {
        if ((step == 0) == (conv_first != 0)) {
            a = nncl_conv2d(g, x, 2, k, k == 2 ? 2 : 1, k == 2 ? 0 : k / 2, 1, NNCL_ACT_NONE, "conv");
            if (kind == 2) a = nncl_global_avgpool(g, a);
        } else if (kind == 0) b = k == 2 ? nncl_maxpool2d(g, x, 2, 2, 0) : nncl_maxpool2d(g, x, 3, 1, 1);
        else if (kind == 1) b = nncl_avgpool2d(g, x, 3, 1, 1);
        else b = nncl_global_avgpool(g, x);
    }
    loss = nncl_mse(g, a, b);
    f[0].node = x; f[0].data = xd;
    snprintf(name, sizeof name, "conv2d k%d and %s sharing their input, b%d, conv %s", k, kinds[kind], batch,
             conv_first ? "first" : "second");
    oc_check(name, ctx, g, loss, f, 1, batch, 1e-9);
    free(xd);
    nncl_graph_free(g);
}

/* conv -> maxpool -> conv -> avgpool -> global_avgpool -> linear -> CE */
static nncl_node *tc_lenet(nncl_graph *g, nncl_node *x, nncl_node *y) {
    nncl_node *h = nncl_conv2d(g, x, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
    h = nncl_maxpool2d(g, h, 2, 2, 0);
    h = nncl_conv2d(g, h, 6, 3, 1, 0, 1, NNCL_ACT_TANH, "conv2");
    h = nncl_avgpool2d(g, h, 2, 2, 0);
    h = nncl_global_avgpool(g, h);
    h = nncl_linear(g, h, 3, 1, NNCL_ACT_NONE, "fc");
    return nncl_softmax_cross_entropy(g, h, y);
}

static void check_lenet(nncl_context *ctx, int batch) {
    char name[64];
    nncl_graph *g = nncl_graph_create(ctx, 9);
    nncl_node *x = tc_input(g, 1, 12, 12), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *loss = tc_lenet(g, x, y);
    oc_feed f[2];
    float *xd = th_random((size_t)batch * 144, -1, 1, 5), *yd = (float *)malloc((size_t)batch * sizeof(float));
    int i;
    for (i = 0; i < batch; i++) yd[i] = (float)(i % 3);
    f[0].node = x; f[0].data = xd;
    f[1].node = y; f[1].data = yd;
    snprintf(name, sizeof name, "lenet-like chain b%d", batch);
    oc_check(name, ctx, g, loss, f, 2, batch, 1e-9);
    free(xd);
    free(yd);
    nncl_graph_free(g);
}

/* A wrong shape fails at build time with the node and the shapes named, and
 * a failed conv2d leaves no parameters behind. */
static int check_errors(nncl_context *ctx) {
    const char *name = "spatial shape errors";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int flat[1] = {5}, ws[4] = {2, 4, 3, 3}, bs[1] = {3};
    nncl_node *v = nncl_input(g, "v", 1, flat), *x = tc_input(g, 3, 4, 5), *in[3];
    const char *msg;
    TH_CHECK(name, v && x);
    /* wrong ndim */
    TH_CHECK(name, nncl_conv2d(g, v, 2, 3, 1, 0, 1, NNCL_ACT_NONE, "c2d") == NULL);
    msg = nncl_last_error(ctx);
    TH_CHECK(name, strstr(msg, "c2d") && strstr(msg, "[B,5]"));
    TH_CHECK(name, nncl_graph_find(g, "c2d.weight") == NULL);
    TH_CHECK(name, nncl_maxpool2d(g, v, 2, 2, 0) == NULL && strstr(nncl_last_error(ctx), "[B,5]"));
    TH_CHECK(name, nncl_avgpool2d(g, v, 2, 2, 0) == NULL && strstr(nncl_last_error(ctx), "avgpool2d"));
    TH_CHECK(name, nncl_global_avgpool(g, v) == NULL && strstr(nncl_last_error(ctx), "global_avgpool"));
    /* kernel bigger than the padded input (4x5 padded by 0 vs 5; by 1 fits) */
    TH_CHECK(name, nncl_conv2d(g, x, 2, 5, 1, 0, 1, NNCL_ACT_NONE, "big") == NULL);
    msg = nncl_last_error(ctx);
    TH_CHECK(name, strstr(msg, "big") && strstr(msg, "[B,3,4,5]") && strstr(msg, "kernel 5"));
    TH_CHECK(name, nncl_graph_find(g, "big.weight") == NULL && nncl_graph_find(g, "big.bias") == NULL);
    TH_CHECK(name, nncl_maxpool2d(g, x, 6, 1, 0) == NULL && strstr(nncl_last_error(ctx), "[B,3,4,5]"));
    TH_CHECK(name, nncl_avgpool2d(g, x, 7, 1, 1) == NULL && strstr(nncl_last_error(ctx), "larger"));
    /* bad attributes */
    TH_CHECK(name, nncl_maxpool2d(g, x, 2, 2, 2) == NULL && strstr(nncl_last_error(ctx), "padding 2"));
    TH_CHECK(name, nncl_avgpool2d(g, x, 2, 0, 0) == NULL && strstr(nncl_last_error(ctx), "stride 0"));
    TH_CHECK(name, nncl_conv2d(g, x, 0, 3, 1, 0, 1, NNCL_ACT_NONE, "zero") == NULL);
    TH_CHECK(name, nncl_conv2d(g, x, 2, 3, 1, -1, 1, NNCL_ACT_NONE, "neg") == NULL);
    TH_CHECK(name, nncl_conv2d(g, x, 2, 3, 1, 0, 1, NNCL_ACT_NONE, NULL) == NULL);
    /* padding whose padded size overflows int */
    TH_CHECK(name, nncl_conv2d(g, x, 2, 3, 1, 2147483647, 1, NNCL_ACT_NONE, "pad") == NULL &&
                       strstr(nncl_last_error(ctx), "too large") && nncl_graph_find(g, "pad.weight") == NULL);
    /* an input of another graph: refused, its parameters taken back */
    {
        nncl_graph *g2 = nncl_graph_create(ctx, 1);
        nncl_node *x2 = tc_input(g2, 3, 4, 5);
        TH_CHECK(name, nncl_conv2d(g, x2, 2, 3, 1, 0, 1, NNCL_ACT_NONE, "far") == NULL &&
                           strstr(nncl_last_error(ctx), "another graph") && nncl_graph_find(g, "far.weight") == NULL);
        nncl_graph_free(g2);
    }
    /* a weight whose channels do not fit the input (3 channels, weight wants 4) */
    in[0] = x;
    in[1] = nncl_param(g, "w_bad", 4, ws, NNCL_INIT_ZEROS, 0);
    {
        int iattr[4] = {3, 1, 1, 0};
        TH_CHECK(name, nncl__node_add(g, NNCL_OP_CONV2D, "mismatch", 2, in, iattr, 4, NULL, 0) == NULL);
        msg = nncl_last_error(ctx);
        TH_CHECK(name, strstr(msg, "mismatch") && strstr(msg, "[B,3,4,5]") && strstr(msg, "[2,4,3,3]"));
        /* a bias of the wrong length */
        ws[1] = 3;
        in[1] = nncl_param(g, "w_ok", 4, ws, NNCL_INIT_ZEROS, 0);
        in[2] = nncl_param(g, "b_bad", 1, bs, NNCL_INIT_ZEROS, 0);
        TH_CHECK(name, nncl__node_add(g, NNCL_OP_CONV2D, "badbias", 3, in, iattr, 4, NULL, 0) == NULL);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "badbias") && strstr(nncl_last_error(ctx), "[3]"));
        TH_CHECK(name, nncl__node_add(g, NNCL_OP_CONV2D, "fits", 2, in, iattr, 4, NULL, 0) != NULL);
    }
    /* NULL inputs propagate, and taken names are refused before creating anything */
    TH_CHECK(name, nncl_conv2d(g, NULL, 2, 3, 1, 0, 1, NNCL_ACT_NONE, "n") == NULL);
    TH_CHECK(name, nncl_maxpool2d(g, NULL, 2, 2, 0) == NULL && nncl_global_avgpool(g, NULL) == NULL);
    TH_CHECK(name, nncl_conv2d(g, x, 2, 3, 1, 1, 1, NNCL_ACT_RELU, "ok") != NULL);
    TH_CHECK(name, nncl_conv2d(g, x, 2, 3, 1, 1, 1, NNCL_ACT_RELU, "ok") == NULL &&
                       strstr(nncl_last_error(ctx), "taken"));
    /* output sizes as PyTorch: floor((H + 2p - k) / s) + 1 */
    {
        int s[4];
        nncl_node *c = nncl_conv2d(g, x, 7, 3, 2, 1, 0, NNCL_ACT_NONE, "sz");
        nncl_node *m = nncl_maxpool2d(g, x, 3, 2, 1), *a = nncl_avgpool2d(g, x, 2, 3, 0), *p = nncl_global_avgpool(g, x);
        TH_CHECK(name, c && nncl_node_shape(c, s) == 3 && s[0] == 7 && s[1] == 2 && s[2] == 3);
        TH_CHECK(name, m && nncl_node_shape(m, s) == 3 && s[0] == 3 && s[1] == 2 && s[2] == 3);
        TH_CHECK(name, a && nncl_node_shape(a, s) == 3 && s[0] == 3 && s[1] == 1 && s[2] == 2);
        TH_CHECK(name, p && nncl_node_shape(p, s) == 1 && s[0] == 3);
    }
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* The im2col workspace of a bigger batch stays a fraction of the arena, and
 * conv2d keeps nothing (no aux) from forward to backward. */
static int check_workspace(nncl_context *ctx) {
    const char *name = "conv2d workspace within 1/4 of the activations";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    nncl_node *x = tc_input(g, 1, 28, 28), *y = nncl_input(g, "y", 0, NULL), *loss;
    nncl__plan *p = NULL;
    x->needs_grad = 0;
    loss = tc_lenet(g, x, y);
    TH_CHECK(name, loss != NULL);
    TH_CHECK(name, nncl__opdef_get(NNCL_OP_CONV2D)->aux_size == NULL);
    TH_OK(name, ctx, nncl__plan_create(ctx, g, loss, 0, 512, &p));
    TH_CHECK(name, p->gemm_temp_bytes * 4 <= p->arena_floats * sizeof(float));
    th_pass("%s (arena %zu KiB, workspace %zu KiB, batch 512)", name, p->arena_floats * 4 / 1024,
            p->gemm_temp_bytes / 1024);
    nncl__plan_free(p);
    nncl_graph_free(g);
    return 0;
}

/* A small CNN learns bars: horizontal (class 0) or vertical (class 1), three
 * pixels long, anywhere in an 8x8 image with noise; a position-invariant
 * task that conv + global pooling solve. Trains on every device of the
 * context at once (data parallel). */
static int check_training(nncl_context *ctx) {
    const char *name = "small CNN learns horizontal vs vertical bars";
    enum { TN = 128, TS = 64 };
    static float xd[TN * TS], yd[TN];
    unsigned seed = 21;
    int i, step, xs[3] = {1, 8, 8};
    nncl_graph *g = nncl_graph_create(ctx, 5);
    nncl_node *x = nncl_input(g, "x", 3, xs), *y = nncl_input(g, "y", 0, NULL), *h, *logits, *loss;
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    float first = 0, last = 0, acc = 0, eval_loss = 0;
    for (i = 0; i < TN; i++) {
        int cls = i % 2, r = (int)(th_uniform(&seed) * 6), q = (int)(th_uniform(&seed) * 6), k;
        float *img = xd + (size_t)i * TS;
        for (k = 0; k < TS; k++) img[k] = 0.1f * (th_uniform(&seed) - 0.5f);
        for (k = 0; k < 3; k++) img[cls ? (r + k) * 8 + q : r * 8 + q + k] += 1.0f;
        yd[i] = (float)cls;
    }
    h = nncl_conv2d(g, x, 6, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
    h = nncl_maxpool2d(g, h, 2, 2, 0);
    h = nncl_conv2d(g, h, 8, 3, 1, 1, 1, NNCL_ACT_RELU, "conv2");
    h = nncl_global_avgpool(g, h);
    logits = nncl_linear(g, h, 2, 1, NNCL_ACT_NONE, "fc");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    TH_CHECK(name, loss != NULL);
    c.max_batch = 32;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    c.optim.lr = 0.02f;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    for (step = 0; step < 150; step++) {
        nncl_feed f[2];
        nncl_step_info info;
        int start = (step * 32) % TN;
        f[0].node = x; f[0].data = xd + (size_t)start * TS;
        f[1].node = y; f[1].data = yd + start;
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, 32, &info));
        if (step < 4) first += info.loss / 4;
        if (step >= 146) last += info.loss / 4;
    }
    TH_OK(name, ctx, nncl_trainer_evaluate(t, x, y, logits, xd, yd, TN, &eval_loss, &acc));
    nncl_trainer_free(t);
    nncl_graph_free(g);
    if (!(last < 0.5f * first && acc >= 0.9f)) {
        th_fail(name, "loss %.4f -> %.4f, accuracy %.3f", first, last, acc);
        return 1;
    }
    th_pass("%s (loss %.3f -> %.3f, accuracy %.3f)", name, first, last, acc);
    return 0;
}

/* The path a conv2d takes follows NNCL_GEMM: own packs x into GEMM panels
 * and never builds a column matrix, clblast the reverse; auto takes one of
 * the two (by measurement). Seen in the kernels a profiled step launches. */
static int check_path(void) {
    const char *name = "conv2d takes the path NNCL_GEMM asks for", *mode = getenv("NNCL_GEMM");
    const char *sel = getenv("NNCL_TEST_DEVICES");
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_profile_kernel k[64];
    nncl_profile_report rep;
    nncl_trainer *t = NULL;
    nncl_train_config c = nncl_train_default();
    nncl_feed f[2];
    int xs[3] = {3, 9, 7}, d = 0, n, i, own = 0, col = 0;
    nncl_graph *g;
    nncl_node *x, *y, *h, *loss;
    float xd[2 * 3 * 9 * 7], yd[2] = {0, 1};
    unsigned seed = 5;
    th_fill_uniform(xd, sizeof xd / sizeof xd[0], -1, 1, &seed);
    cfg.devices = sel && *sel ? sel : "all";
    cfg.profiling = 1;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    g = nncl_graph_create(ctx, 3);
    x = nncl_input(g, "x", 3, xs);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_conv2d(g, x, 5, 3, 2, 1, 1, NNCL_ACT_RELU, "conv");
    h = nncl_flatten(g, h);
    loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, 2, 1, NNCL_ACT_NONE, "fc"), y);
    c.max_batch = 2;
    c.devices = &d;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f[0].node = x; f[0].data = xd;
    f[1].node = y; f[1].data = yd;
    TH_OK(name, ctx, nncl_profile_start(ctx, 0));
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, 2, NULL));
    TH_OK(name, ctx, nncl_profile_stop(ctx, 0, &rep));
    n = nncl_profile_kernels(ctx, 0, k, 64);
    for (i = 0; i < n && i < 64; i++) {
        own |= !strcmp(k[i].name, "nncl_conv_pack_b_f32") || !strcmp(k[i].name, "nncl_conv_pack_bs_f32");
        col |= !strcmp(k[i].name, "nncl_im2col_f32");
    }
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_free(ctx);
    if (mode && !strcmp(mode, "own")) TH_CHECK(name, own && !col);
    else if (mode && !strcmp(mode, "clblast")) TH_CHECK(name, col && !own);
    else TH_CHECK(name, own != col);
    th_pass("%s (%s: %s)", name, mode ? mode : "auto", own ? "implicit GEMM on own kernels" : "im2col + CLBlast");
    return 0;
}

/* Makes CLBlast take its indirect GEMM (padded copies in the temporary
 * buffer) at every size on every device, so that the checks after it run
 * conv2d's workspace beside CLBlast's copies in the shared buffer. */
static int tc_force_indirect(nncl_context *ctx) {
    const char *names[1] = {"XGEMM_MIN_INDIRECT_SIZE"};
    size_t values[1] = {0};
    int d;
    for (d = 0; d < nncl_device_count(ctx); d++)
        if (CLBlastOverrideParameters(ctx->devices[d].id, "GemmRoutine", CLBlastPrecisionSingle, 1, names, values) !=
            CLBlastSuccess) {
            th_skip("conv2d with CLBlast's indirect GEMM", "CLBlastOverrideParameters refused");
            return 1;
        }
    return 0;
}

/* The fp16 bits of v, exact for the normal values below (no rounding). */
static unsigned short tc_f16(float v) {
    unsigned u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) == 0) return (unsigned short)(u >> 16);
    if ((u & 0x7f800000u) == 0x7f800000u) return (unsigned short)((u >> 16 & 0x8000u) | 0x7c00u | ((u & 0x7fffffu) ? 0x200u : 0));
    return (unsigned short)((u >> 16 & 0x8000u) | (((u >> 23 & 0xffu) - 112u) << 10) | (u >> 13 & 0x3ffu));
}

/* 2x2 max pooling as PyTorch takes it: the first maximum in scan order, a
 * NaN wins (the last NaN of the window), -0 and +0 tie (the first is kept), and
 * the backward routes dy to that element alone (0 elsewhere, also in the
 * row an odd height leaves uncovered). In fp32, fp16 and bf16 storage (the
 * half kernels compare the 16-bit patterns as integers), on planes of H x W
 * (rows of 3 outputs; on CPU devices 8 and 5 take the kernels by rows, of
 * one vector step and of two overlapping ones, src/ops/op_pool.c, in every
 * storage). */
static int check_pool_special_at(nncl_context *ctx, int H, int W) {
    enum { P = 2, MAX = 80 };
    static const float vals[] = {-3.0f, -0.0f, 0.0f, 1.5f, -INFINITY, INFINITY, 2.5f, -0.5f, 2.5f, -65504.0f};
    float x[P * MAX], y[P * MAX], dy[P * MAX], dx[P * MAX], want_dx[P * MAX], want_y[P * MAX];
    unsigned short bits[P * MAX];
    int store, i, d, p, oh, ow, ki, kj, xs[3] = {P, H, W}, OH = H / 2, OW = W / 2;
    for (i = 0; i < P * H * W; i++) x[i] = vals[(i * 7 + i / 5) % 10];
    x[3] = NAN;                   /* window (0, 0, 1): NaN second, after -0 */
    x[W * 2 + 1] = NAN;           /* window (0, 1, 0): NaN second ... */
    x[W * 3] = NAN;               /* ... and third: the last NaN wins */
    x[H * W + 2] = x[H * W + 3] = x[H * W + W + 2] = x[H * W + W + 3] = 0.0f;
    x[H * W + 3] = -0.0f;         /* a tie of zeros: the first */
    for (i = 0; i < P * OH * OW; i++) dy[i] = (float)(i + 1);
    memset(want_dx, 0, (size_t)P * H * W * sizeof *want_dx);
    for (p = 0; p < P; p++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                int o = (p * OH + oh) * OW + ow, best = -1;
                for (ki = 0; ki < 2; ki++)
                    for (kj = 0; kj < 2; kj++) {
                        int at = p * H * W + (2 * oh + ki) * W + 2 * ow + kj;
                        if (best < 0 || x[at] > x[best] || x[at] != x[at]) best = at;
                    }
                want_y[o] = x[best];
                want_dx[best] = dy[o];
            }
    for (store = 0; store <= 2; store++)
        for (d = 0; d < nncl_device_count(ctx); d++) {
            char name[160];
            nncl_graph *g = nncl_graph_create(ctx, 5);
            nncl_node *xn = nncl_input(g, "x", 3, xs), *pool, *t, *loss;
            nncl__plan *pl = NULL;
            nncl__view gv;
            int bad = 0;
            snprintf(name, sizeof name, "maxpool2d 2x2 of NaN, infinities and signed zeros, %dx%d, %s storage, d%d", H,
                     W, store == 0 ? "fp32" : store == 1 ? "fp16" : "bf16", d);
            xn->needs_grad = 1;
            pool = nncl_maxpool2d(g, xn, 2, 2, 0);
            t = nncl_input(g, "t", 3, (int[3]){P, OH, OW});
            loss = nncl_mse(g, pool, t);
            if (store && nncl__plan_check_store(ctx, g, loss, store) != NNCL_OK) {
                th_fail(name, "half storage refused: %s", nncl_last_error(ctx));
                nncl_graph_free(g);
                return 1;
            }
            TH_OK(name, ctx, nncl__plan_create_store(ctx, g, loss, d, 1, store, &pl));
            TH_OK(name, ctx, nncl__plan_feed(pl, xn, x, 1));
            TH_OK(name, ctx, nncl__plan_forward_to(pl, 1, 1, pool));
            TH_OK(name, ctx, nncl__plan_read(pl, pool, y, 1, NULL));
            for (i = 0; i < P * OH * OW; i++) /* NaN for NaN; otherwise the same value, zeros with their sign */
                bad |= want_y[i] != want_y[i] ? y[i] == y[i] : memcmp(&y[i], &want_y[i], 4) != 0;
            /* the pool's gradient written as it is stored, then its backward alone */
            gv = nncl__grd(&pl->ex, pool);
            for (i = 0; i < P * OH * OW; i++) {
                unsigned u;
                memcpy(&u, &dy[i], 4);
                bits[i] = store == 1 ? tc_f16(dy[i]) : (unsigned short)(u >> 16);
            }
            if (store)
                clEnqueueWriteBuffer(pl->ex.dev->queue, gv.mem, CL_TRUE, gv.off * 2, (size_t)P * OH * OW * 2, bits, 0,
                                     NULL, NULL);
            else
                clEnqueueWriteBuffer(pl->ex.dev->queue, gv.mem, CL_TRUE, gv.off * 4, (size_t)P * OH * OW * 4, dy, 0,
                                     NULL, NULL);
            memset(pl->ex.grad_acc, 0, (size_t)g->n_nodes);
            TH_OK(name, ctx, nncl__opdef_get(pool->op)->backward(&pl->ex, pool));
            TH_OK(name, ctx, nncl__plan_read_view(pl, nncl__grd(&pl->ex, xn), dx, (size_t)P * H * W));
            for (i = 0; i < P * H * W; i++) bad |= dx[i] != want_dx[i];
            nncl__plan_free(pl);
            nncl_graph_free(g);
            if (bad) th_fail(name, "values or routed gradients differ from PyTorch's rules");
            else th_pass("%s", name);
        }
    return 0;
}

static int check_pool_special(nncl_context *ctx) {
    return check_pool_special_at(ctx, 5, 6) || check_pool_special_at(ctx, 4, 16) || check_pool_special_at(ctx, 5, 10);
}

int main(void) {
    nncl_context *ctx = th_context();
    if (!ctx) return th_exit_code();
    check_errors(ctx);
    check_path();
    {
        int kind, first, batch;
        for (kind = 0; kind < 3; kind++)
            for (first = 0; first < 2; first++)
                for (batch = 1; batch <= 3; batch += 2) check_shared(ctx, batch, kind, first, kind == 2 ? 1 : 3);
        check_shared(ctx, 3, 0, 0, 2);
        check_shared(ctx, 3, 0, 1, 2);
    }
    check_lenet(ctx, 1);
    check_lenet(ctx, 4);
    check_workspace(ctx);
    check_conv_frozen(ctx, 3, 1, NNCL_ACT_RELU);
    check_conv_frozen(ctx, 2, 0, NNCL_ACT_TANH);
    check_pool_special(ctx);
    check_training(ctx);
    if (tc_force_indirect(ctx) == 0) {
        check_conv(ctx, 3, 3, 5, 7, 4, 3, 2, 0, 0, NNCL_ACT_RELU);
        check_conv(ctx, 3, 3, 7, 5, 3, 1, 1, 0, 1, NNCL_ACT_SIGMOID);
        check_conv(ctx, 1, 3, 7, 5, 3, 1, 1, 0, 1, NNCL_ACT_NONE);
        check_conv(ctx, 3, 1, 28, 28, 4, 5, 1, 2, 1, NNCL_ACT_TANH);
        check_conv(ctx, 3, 16, 14, 14, 4, 5, 1, 2, 1, NNCL_ACT_RELU);
        check_shared(ctx, 3, 1, 1, 3);
        check_shared(ctx, 1, 2, 1, 1);
        check_lenet(ctx, 4);
        check_workspace(ctx);
    }
    nncl_free(ctx);
    return th_exit_code();
}
