/* fashion_mnist_mlp.c - the classic first GPU-training example: a 784-128-10
 * ReLU network trained with Adam (lr 1e-3, batch 100) on Fashion-MNIST,
 * on the default device or any chosen ones. Copy it and adapt.
 *
 *   fashion_mnist_mlp [--devices SEL] [--data DIR] [--epochs N] [--out FILE]
 *
 * SEL as NNCL_DEVICES: "0", "0,1", "pocl", "gpu", "all", ... */
#include "nncl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *arg(int argc, char **argv, const char *name, const char *fallback) {
    int i;
    for (i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return fallback;
}

static int fail(nncl_context *ctx, const char *what, nncl_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, nncl_status_str(st), nncl_last_error(ctx));
    return 1;
}

static nncl_status load(const char *dir, const char *part, nncl_dataset **out) {
    char images[1024], labels[1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, part);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, part);
    return nncl_dataset_load_idx(images, labels, out);
}

int main(int argc, char **argv) {
    const char *dir = arg(argc, argv, "--data", "/usr/share/datasets/fashion-mnist");
    const char *out = arg(argc, argv, "--out", "fashion_mnist_mlp.safetensors");
    nncl_config cfg = nncl_config_default();
    nncl_train_config tc = nncl_train_default();
    nncl_fit_config fit = nncl_fit_default();
    nncl_context *ctx = NULL;
    nncl_dataset *train = NULL, *test = NULL;
    nncl_graph *g;
    nncl_node *x, *y, *h, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_progress *progress = NULL;
    nncl_curve *curve = NULL;
    nncl_status st;
    float test_loss, test_acc;
    int shape[1] = {784}, i, n;

    cfg.devices = arg(argc, argv, "--devices", NULL);
    if ((st = nncl_init(&cfg, &ctx)) != NNCL_OK) return fail(NULL, "devices", st);
    if ((st = load(dir, "train", &train)) != NNCL_OK || (st = load(dir, "t10k", &test)) != NNCL_OK)
        return fail(NULL, "data (install dataset-fashion-mnist or pass --data DIR)", st);
    for (i = 0, n = nncl_device_count(ctx); i < n; i++) {
        nncl_device_info info;
        nncl_device_info_get(ctx, i, &info);
        printf("device %d: %s (%s)\n", i, info.name, info.platform);
    }

    /* The model: 784 -> 128 (ReLU) -> 10 logits, cross-entropy loss. */
    g = nncl_graph_create(ctx, 1);
    x = nncl_input(g, "x", 1, shape);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_linear(g, x, 128, 1, NNCL_ACT_RELU, "fc1");
    logits = nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    if (!loss) return fail(ctx, "model", NNCL_ERR_INVALID_ARGUMENT);

    tc.max_batch = 100;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM); /* lr 1e-3 */
    if ((st = nncl_trainer_create(ctx, g, loss, &tc, &t)) != NNCL_OK) return fail(ctx, "trainer", st);

    fit.epochs = atoi(arg(argc, argv, "--epochs", "10"));
    fit.batch = 100;
    fit.x = x;
    fit.labels = y;
    fit.logits = logits;
    fit.val = test;
    if (nncl_progress_create(stderr, fit.epochs, (int)(nncl_dataset_size(train) / 100), &progress) != NNCL_OK ||
        nncl_curve_create(&curve) != NNCL_OK)
        return fail(NULL, "progress", NNCL_ERR_OUT_OF_MEMORY);
    fit.progress = progress;
    fit.curve = curve;
    if ((st = nncl_trainer_fit(t, train, &fit)) != NNCL_OK) return fail(ctx, "training", st);

    if ((st = nncl_trainer_evaluate_dataset(t, &fit, test, &test_loss, &test_acc)) != NNCL_OK)
        return fail(ctx, "evaluation", st);
    printf("test accuracy %.4f (loss %.4f) on %zu images\n", test_acc, test_loss, nncl_dataset_size(test));
    if ((st = nncl_trainer_save(t, out)) != NNCL_OK) return fail(ctx, "saving", st);
    nncl_curve_write_csv(curve, "fashion_mnist_mlp.csv");
    nncl_curve_write_svg(curve, "fashion_mnist_mlp.svg", "Fashion-MNIST MLP 784-128-10");
    printf("model saved to %s; curve in fashion_mnist_mlp.csv and .svg\n", out);

    nncl_progress_free(progress);
    nncl_curve_free(curve);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_dataset_free(train);
    nncl_dataset_free(test);
    nncl_free(ctx);
    return 0;
}
