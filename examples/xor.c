/* xor.c - the smallest network that needs a hidden layer: XOR of two bits,
 * learnt with binary cross-entropy, on the default device or chosen ones.
 * Exits 0 only when all four are right and the model is saved. */
#include "nncl.h"
#include "options.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    static const float inputs[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    static const float targets[4] = {0, 1, 1, 0};
    const char *out = "xor.safetensors", *devices = NULL;
    const ex_option opts[] = {
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--out", OPT_STR, &out, "FILE", "the model file (xor.safetensors)"},
        {NULL, 0, NULL, NULL, NULL}};
    nncl_train_config tc = nncl_train_default();
    nncl_context *ctx = NULL;
    nncl_graph *g;
    nncl_node *x, *t, *h, *logit, *loss;
    nncl_trainer *tr = NULL;
    nncl_feed feeds[2];
    nncl_step_info info;
    nncl_status st;
    float logits[4];
    int two = 2, one = 1, i, wrong = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    ex_parse(argc, argv, "xor [options]", opts, NULL, 0);
    if (ex_check_writable("--out", out)) return 2;
    if (ex_init("xor", devices, &ctx)) return 1;
    g = nncl_graph_create(ctx, 3);
    x = nncl_input(g, "x", 1, &two);
    t = nncl_input(g, "target", 1, &one);
    h = nncl_linear(g, x, 8, 1, NNCL_ACT_TANH, "hidden");
    logit = nncl_linear(g, h, 1, 1, NNCL_ACT_NONE, "out");
    loss = nncl_bce_with_logits(g, logit, t);
    tc.max_batch = 4;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    tc.optim.lr = 0.05f;
    if (!loss || (st = nncl_trainer_create(ctx, g, loss, &tc, &tr)) != NNCL_OK) {
        fprintf(stderr, "model: %s\n", nncl_last_error(ctx));
        return 1;
    }
    feeds[0].node = x;
    feeds[0].data = inputs;
    feeds[1].node = t;
    feeds[1].data = targets;
    for (i = 0; i < 300; i++) {
        if ((st = nncl_trainer_step(tr, feeds, 2, 4, &info)) != NNCL_OK) {
            fprintf(stderr, "step %d: %s\n", i, nncl_last_error(ctx));
            return 1;
        }
        if (i % 100 == 0) printf("step %3d  loss %.4f\n", i, info.loss);
    }
    printf("step %3d  loss %.4f\n", i, info.loss);
    if ((st = nncl_trainer_predict(tr, feeds, 1, 4, logit, logits)) != NNCL_OK) {
        fprintf(stderr, "predict: %s\n", nncl_last_error(ctx));
        return 1;
    }
    for (i = 0; i < 4; i++) {
        double p = 1 / (1 + exp(-logits[i]));
        printf("%g xor %g = %.3f (want %g)\n", inputs[2 * i], inputs[2 * i + 1], p, targets[i]);
        wrong += (p > 0.5) != (targets[i] > 0.5);
    }
    printf("accuracy %d/4\n", 4 - wrong);
    if (nncl_trainer_save(tr, out) != NNCL_OK) {
        fprintf(stderr, "saving: %s\n", nncl_last_error(ctx));
        wrong = 1;
    } else {
        printf("model saved to %s\n", out);
    }
    nncl_trainer_free(tr);
    nncl_graph_free(g);
    nncl_free(ctx);
    return wrong ? 1 : 0;
}
