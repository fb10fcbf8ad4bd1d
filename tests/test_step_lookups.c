/* test_step_lookups.c - a plan resolves every kernel its ops list when it is
 * made: after nncl_trainer_create, training steps and evaluation-mode
 * forwards build no program and look no kernel up by name on any device
 * (the library counts both per device), on a model that runs most op
 * families, with gradient clipping on; and the plan built those families
 * as one program on each device (cl/ files it names share it). */
#include "harness.h"
#include "train/trainer.h"
#include <stdlib.h>

#define SL_B 8

static unsigned long sl_lookups(nncl_context *ctx) {
    unsigned long sum = 0;
    int d;
    for (d = 0; d < ctx->n_devices; d++) sum += nncl__kernel_lookups(&ctx->devices[d]);
    return sum;
}

int main(void) {
    const char *name = "a step builds nothing and looks nothing up";
    nncl_context *ctx;
    nncl_graph *g;
    nncl_trainer *t = NULL;
    nncl_train_config cfg;
    nncl_feed feeds[2];
    nncl_step_info info;
    nncl_tensor *probe = NULL;
    int xs[3] = {2, 6, 6}, ps[1] = {16}, i, probe_shape[1] = {4};
    nncl_node *x, *y, *h, *a, *b, *logits, *loss;
    float xd[SL_B * 72], yd[SL_B], out[SL_B * 3];
    unsigned long before, after;
    unsigned seed = 5;
    setenv("NNCL_BUNDLE", "1", 1); /* the bundle is checked below; tests/run.sh sets 0 for the others */
    ctx = th_context();
    if (!ctx) return th_exit_code();
    th_fill_uniform(xd, SL_B * 72, -1, 1, &seed);
    for (i = 0; i < SL_B; i++) yd[i] = (float)(i % 3);
    g = nncl_graph_create(ctx, 7);
    x = nncl_input(g, "x", 3, xs);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_conv2d(g, x, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "conv");
    h = nncl_batchnorm(g, h, 0.1f, 1e-5f, "bn");
    a = nncl_flatten(g, nncl_maxpool2d(g, h, 2, 2, 0));
    b = nncl_flatten(g, nncl_avgpool2d(g, h, 2, 2, 0));
    h = nncl_concat(g, nncl_concat(g, a, b, 0), nncl_global_avgpool(g, h), 0);
    h = nncl_dropout(g, h, 0.2f);
    h = nncl_linear(g, h, 16, 1, NNCL_ACT_TANH, "fc1");
    h = nncl_layernorm(g, h, 1e-5f, "ln");
    h = nncl_op_add(g, nncl_op_silu(g, nncl_op_gelu_tanh(g, h)), nncl_param(g, "shift", 1, ps, NNCL_INIT_ZEROS, 0));
    logits = nncl_linear(g, nncl_op_scale(g, h, 0.5f), 3, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    TH_CHECK(name, loss != NULL);
    cfg = nncl_train_default();
    cfg.max_batch = SL_B;
    cfg.optim = nncl_optim_default(NNCL_OPT_ADAM);
    cfg.optim.clip_norm = 1.0f;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &cfg, &t));
    feeds[0].node = x;
    feeds[0].data = xd;
    feeds[1].node = y;
    feeds[1].data = yd;
    before = sl_lookups(ctx);
    TH_CHECK(name, before > 0); /* creation did look kernels up: the counter counts */
    for (i = 0; i < 3; i++) TH_OK(name, ctx, nncl_trainer_step(t, feeds, 2, SL_B - i, &info));
    TH_OK(name, ctx, nncl_trainer_predict(t, feeds, 2, SL_B, logits, out));
    after = sl_lookups(ctx);
    if (after != before) {
        th_fail(name, "%lu kernel look-ups or program builds during the steps", after - before);
        return th_exit_code();
    }
    /* the counter sees an eager call, which looks its kernel up by name */
    TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 1, probe_shape, &probe));
    TH_OK(name, ctx, nncl_relu(ctx, probe, probe));
    TH_CHECK(name, sl_lookups(ctx) > after);
    nncl_tensor_free(probe);
    for (i = 0; i < ctx->n_devices; i++) {
        static const char *const fams[4] = {"conv", "pool", "loss", "optimizer"};
        void *first = NULL, *p = NULL;
        int f, same = 1;
        for (f = 0; f < 4; f++) {
            TH_OK("a plan builds its kernel families as one program", ctx, nncl_kernel_program(ctx, i, fams[f], &p));
            if (f == 0) first = p;
            same = same && p == first && p != NULL;
        }
        TH_CHECK("a plan builds its kernel families as one program", same);
    }
    th_pass("a plan builds its kernel families as one program");
    nncl_trainer_free(t);
    nncl_graph_free(g);
    th_pass("%s (%lu look-ups at creation, none in 3 steps and a prediction)", name, before);
    nncl_free(ctx);
    return th_exit_code();
}
