/* csv_classifier.c - a classifier for any CSV table with a header row,
 * numeric feature columns and a label column (numbers or class names):
 * a seeded 20% validation split, features standardised with the training
 * part's statistics, a small MLP. The model file keeps the means, standard
 * deviations, class names and label column, so build/examples/predict can
 * classify new rows of the table with it alone.
 *
 * Without a file it learns the iris table in examples/data/. */
#include "nncl.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *path = "examples/data/iris.csv", *out = "csv_classifier.safetensors", *devices = NULL, *pos[1];
    const char *checkpoint = NULL, *resume = NULL, *precision = "fp32", *save_dtype = "f32", *batch_arg = "16";
    double val = 0.2;
    int batch = 16, grad_ckpt = 0, epochs = 60, patience = 0, keep_best = 0, quiet = 0;
    nncl_csv_options opt = nncl_csv_options_default();
    const ex_option opts[] = {
        {"--label", OPT_STR, &opt.label, "COLUMN", "the label column (default: the last one; case is ignored when unambiguous)"},
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--epochs", OPT_INT, &epochs, "N", "epochs (60)"},
        {"--val", OPT_NUM, &val, "FRACTION", "rows set apart for validation (0.2)"},
        {"--patience", OPT_INT, &patience, "N", "stop after N epochs without a lower val_loss (0: never)"},
        {"--keep-best", OPT_FLAG, &keep_best, "", "end with the weights of the epoch of lowest val_loss"},
        {"--checkpoint", OPT_STR, &checkpoint, "FILE", "write a checkpoint at each epoch's end"},
        {"--resume", OPT_STR, &resume, "FILE", "go on from a checkpoint of this run"},
        {"--out", OPT_STR, &out, "FILE", "the model file (csv_classifier.safetensors)"},
        {"--precision", OPT_STR, &precision, "P", "storage of activations and working weights: fp32, fp16 (loss-scaled), bf16 (fp32)"},
        {"--save-dtype", OPT_STR, &save_dtype, "D", "dtype of the saved model's weights: f32, f16, bf16 (f32)"},
        {"--batch", OPT_STR, &batch_arg, "N|auto", "global batch (16); auto: the largest that fits the devices' memory"},
        {"--grad-checkpoint", OPT_FLAG, &grad_ckpt, "", "recompute activations in backward: less memory, a larger batch"},
        {"--quiet", OPT_FLAG, &quiet, "", "no progress lines"},
        {NULL, 0, NULL, NULL, NULL}};
    nncl_train_config tc = nncl_train_default();
    nncl_fit_config fit = nncl_fit_default();
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_context *ctx = NULL;
    nncl_dataset *all = NULL, *train = NULL, *valset = NULL;
    nncl_graph *g = NULL;
    nncl_node *x, *y, *h, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_progress *progress = NULL;
    float *mean = NULL, *std = NULL, acc, vloss;
    const char **names = NULL;
    const char *failed = NULL;
    nncl_context *failed_ctx = NULL;
    nncl_csv table;
    int d, classes, k, rc = 1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (ex_parse(argc, argv, "csv_classifier [FILE.csv] [options]", opts, pos, 1) == 1) path = pos[0];
    ex_batch_arg("csv_classifier [FILE.csv] [options]", opts, batch_arg, &batch);
    if (epochs < 1 || !(val > 0 && val < 1)) {
        fprintf(stderr, "error: --epochs must be at least 1 and --val in (0, 1)\n");
        return 2;
    }
    if (ex_check_writable("--out", out) || (checkpoint && ex_check_writable("--checkpoint", checkpoint))) return 2;
    if (ex_precision("--precision", precision, &tc.precision) || ex_precision("--save-dtype", save_dtype, &meta.dtype))
        return 2;
    if (ex_init("csv_classifier", devices, &ctx)) return 1;
    memset(&table, 0, sizeof table);
    if (nncl_csv_load(path, &opt, &table) != NNCL_OK || nncl_dataset_from_csv(&table, &all) != NNCL_OK) {
        failed = "data";
        goto done;
    }
    d = (int)nncl_dataset_features(all);
    classes = nncl_dataset_classes(all);
    if (classes < 2) {
        fprintf(stderr, "%s: the label column must hold at least two classes\n", path);
        goto done;
    }
    /* Validation rows apart; features standardised with the training part's statistics. */
    mean = (float *)malloc(sizeof(float) * (size_t)d);
    std = (float *)malloc(sizeof(float) * (size_t)d);
    names = (const char **)malloc(sizeof(char *) * (size_t)classes);
    if (!mean || !std || !names || nncl_dataset_split(all, val, 7, &train, &valset) != NNCL_OK ||
        nncl_dataset_stats(train, mean, std) != NNCL_OK || nncl_dataset_standardize(train, mean, std) != NNCL_OK ||
        nncl_dataset_standardize(valset, mean, std) != NNCL_OK) {
        failed = "preparing the data";
        goto done;
    }
    printf("%s: %zu rows, %d features, %d classes (%zu for training, %zu for validation)\n", path,
           nncl_dataset_size(all), d, classes, nncl_dataset_size(train), nncl_dataset_size(valset));

    g = nncl_graph_create(ctx, 1);
    x = nncl_input(g, "x", 1, &d);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_linear(g, x, 32, 1, NNCL_ACT_RELU, "fc1");
    logits = nncl_linear(g, h, classes, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    tc.optim.lr = 0.01f;
    if (grad_ckpt) tc.checkpoint = NNCL_CHECKPOINT_AUTO;
    if (loss && !batch && ex_batch_auto(ctx, g, loss, &tc, ex_batch_most(train, 0, 4096), &batch)) goto done;
    tc.max_batch = batch;
    ex_compiling(ctx);
    if (!loss || nncl_trainer_create(ctx, g, loss, &tc, &t) != NNCL_OK) {
        failed = "model";
        failed_ctx = ctx;
        goto done;
    }
    nncl_trainer_summary(t, stdout);

    fit.epochs = epochs;
    fit.batch = batch;
    fit.x = x;
    fit.labels = y;
    fit.logits = logits;
    fit.val = valset;
    fit.patience = patience;
    fit.keep_best = keep_best;
    fit.checkpoint = checkpoint;
    fit.resume = resume;
    if (nncl_progress_create(stderr, epochs, 0, &progress) != NNCL_OK) {
        failed = "progress";
        goto done;
    }
    nncl_progress_set_interval(progress, 1e9); /* epoch lines only */
    if (quiet) nncl_progress_set_mode(progress, NNCL_PROGRESS_QUIET);
    fit.progress = progress;
    if (nncl_trainer_fit(t, train, &fit) != NNCL_OK || nncl_trainer_evaluate_dataset(t, &fit, valset, &vloss, &acc) != NNCL_OK) {
        failed = "training";
        failed_ctx = ctx;
        goto done;
    }
    printf("validation accuracy %.4f (loss %.4f)\n", acc, vloss);
    for (k = 0; k < classes; k++) names[k] = nncl_dataset_class_name(all, k);
    meta.mean = mean;
    meta.std = std;
    meta.class_names = names[0] ? names : NULL; /* numeric labels have no names */
    meta.n_classes = names[0] ? classes : 0;
    meta.label_name = table.label_name;
    if (nncl_trainer_save_model(t, out, &meta) != NNCL_OK) {
        failed = "saving";
        failed_ctx = ctx;
        goto done;
    }
    printf("model saved to %s\n", out);
    rc = 0;
done:
    if (failed) fprintf(stderr, "%s: %s\n", failed, nncl_last_error(failed_ctx));
    nncl_progress_free(progress);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    free(mean);
    free(std);
    free(names);
    nncl_dataset_free(train);
    nncl_dataset_free(valset);
    nncl_dataset_free(all);
    nncl_csv_free(&table);
    nncl_free(ctx);
    return rc;
}
