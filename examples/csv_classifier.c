/* csv_classifier.c - a classifier for any CSV table with a header row,
 * numeric feature columns and a label column (numbers or class names):
 * standardised features, a random validation split, a small MLP.
 *
 *   csv_classifier [FILE.csv] [--label COLUMN] [--devices SEL] [--epochs N] [--out FILE]
 *
 * Without a file it learns the iris table in examples/data/. */
#include "nncl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(nncl_context *ctx, const char *what) {
    fprintf(stderr, "%s: %s\n", what, nncl_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    const char *path = "examples/data/iris.csv", *out = "csv_classifier.safetensors";
    nncl_csv_options opt = nncl_csv_options_default();
    nncl_config cfg = nncl_config_default();
    nncl_train_config tc = nncl_train_default();
    nncl_fit_config fit = nncl_fit_default();
    nncl_context *ctx = NULL;
    nncl_dataset *all = NULL, *train = NULL, *val = NULL;
    nncl_graph *g;
    nncl_node *x, *y, *h, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_progress *progress = NULL;
    float *mean, *std, acc, vloss;
    int d, classes, i;

    for (i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--label") == 0) opt.label = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--devices") == 0) cfg.devices = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--epochs") == 0) fit.epochs = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--out") == 0) out = argv[++i];
        else path = argv[i];
    }
    if (nncl_init(&cfg, &ctx) != NNCL_OK) return fail(NULL, "devices");
    if (nncl_dataset_load_csv(path, &opt, &all) != NNCL_OK) return fail(NULL, "data");
    d = (int)nncl_dataset_features(all);
    classes = nncl_dataset_classes(all);
    if (classes < 2) {
        fprintf(stderr, "%s: the label column must hold at least two classes\n", path);
        return 1;
    }
    /* 20% for validation; features standardised with the training part's statistics. */
    if (nncl_dataset_split(all, 0.2, 7, &train, &val) != NNCL_OK) return fail(NULL, "split");
    mean = (float *)malloc(sizeof(float) * (size_t)d);
    std = (float *)malloc(sizeof(float) * (size_t)d);
    if (!mean || !std || nncl_dataset_stats(train, mean, std) != NNCL_OK ||
        nncl_dataset_standardize(train, mean, std) != NNCL_OK || nncl_dataset_standardize(val, mean, std) != NNCL_OK)
        return fail(NULL, "standardising");
    printf("%s: %zu rows, %d features, %d classes (%zu for training, %zu for validation)\n", path,
           nncl_dataset_size(all), d, classes, nncl_dataset_size(train), nncl_dataset_size(val));

    g = nncl_graph_create(ctx, 1);
    x = nncl_input(g, "x", 1, &d);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_linear(g, x, 32, 1, NNCL_ACT_RELU, "fc1");
    logits = nncl_linear(g, h, classes, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    tc.max_batch = 16;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    tc.optim.lr = 0.01f;
    if (!loss || nncl_trainer_create(ctx, g, loss, &tc, &t) != NNCL_OK) return fail(ctx, "model");

    if (fit.epochs == nncl_fit_default().epochs) fit.epochs = 60;
    fit.batch = 16;
    fit.x = x;
    fit.labels = y;
    fit.logits = logits;
    fit.val = val;
    if (nncl_progress_create(stderr, fit.epochs, 0, &progress) != NNCL_OK) return fail(NULL, "progress");
    nncl_progress_set_interval(progress, 1e9); /* epoch lines only */
    fit.progress = progress;
    if (nncl_trainer_fit(t, train, &fit) != NNCL_OK) return fail(ctx, "training");
    if (nncl_trainer_evaluate_dataset(t, &fit, val, &vloss, &acc) != NNCL_OK) return fail(ctx, "evaluation");
    printf("validation accuracy %.4f (loss %.4f)\n", acc, vloss);
    if (nncl_trainer_save(t, out) != NNCL_OK) return fail(ctx, "saving");
    printf("model saved to %s\n", out);

    nncl_progress_free(progress);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    free(mean);
    free(std);
    nncl_dataset_free(train);
    nncl_dataset_free(val);
    nncl_dataset_free(all);
    nncl_free(ctx);
    return 0;
}
