/* train10.c - the C side of test_train_c.py: builds the model the test builds from Python,
 * trains it for 10 Adam steps on the data file's batches and saves the weights and the losses.
 * usage: train10 DATA.safetensors WEIGHTS.safetensors LOSSES.safetensors */
#include "nncl.h"
#include <stdio.h>

static int fail(nncl_context *ctx, const char *what) {
    fprintf(stderr, "train10: %s: %s\n", what, nncl_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    nncl_context *ctx = NULL;
    nncl_safetensors *st = NULL;
    nncl_graph *g;
    nncl_node *x, *y, *h, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_train_config tc = nncl_train_default();
    nncl_safetensors_entry e = {0};
    const float *xd, *yd;
    float losses[10];
    int64_t xs[2] = {64, 6}, ys[1] = {64};
    int i, shape[1] = {6}, dev[1] = {0};
    if (argc != 4) return 2;
    if (nncl_safetensors_load(argv[1], &st) || nncl_safetensors_expect(st, "x", 2, xs, &xd) ||
        nncl_safetensors_expect(st, "y", 1, ys, &yd))
        return fail(NULL, "data");
    if (nncl_init(NULL, &ctx)) return fail(NULL, "init");
    g = nncl_graph_create(ctx, 7);
    x = nncl_input(g, "x", 1, shape);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_linear(g, x, 16, 1, NNCL_ACT_RELU, "fc1");
    h = nncl_layernorm(g, h, 1e-5f, "ln");
    h = nncl_dropout(g, h, 0.25f);
    logits = nncl_linear(g, h, 3, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    if (!loss) return fail(ctx, "model");
    tc.max_batch = 16;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    tc.optim.lr = 0.01f;
    tc.devices = dev;
    tc.n_devices = 1;
    if (nncl_trainer_create(ctx, g, loss, &tc, &t)) return fail(ctx, "trainer");
    for (i = 0; i < 10; i++) {
        nncl_feed f[2];
        nncl_step_info info;
        f[0].node = x;
        f[0].data = xd + (size_t)(i % 4) * 16 * 6;
        f[1].node = y;
        f[1].data = yd + (size_t)(i % 4) * 16;
        if (nncl_trainer_step(t, f, 2, 16, &info)) return fail(ctx, "step");
        losses[i] = info.loss;
    }
    if (nncl_trainer_save(t, argv[2])) return fail(ctx, "save");
    e.name = "loss";
    e.ndim = 1;
    e.shape[0] = 10;
    e.data = losses;
    if (nncl_safetensors_save(argv[3], &e, 1, NULL)) return fail(NULL, "losses");
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_safetensors_free(st);
    nncl_free(ctx);
    return 0;
}
