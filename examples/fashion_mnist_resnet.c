/* fashion_mnist_resnet.c - a small residual network for Fashion-MNIST,
 * ResNet-8-like: a 3x3 convolution, three residual blocks of two 3x3
 * convolutions with batch normalisation (32, 64 and 128 channels, the last
 * two halving the planes, with a 1x1 strided projection on their
 * shortcut), global average pooling and one dense layer. Adam 1e-3
 * annealed to 0 (cosine), batch 100, training images shifted by up to 1
 * pixel and mirrored at random; the usual options (--help). The model file carries its
 * architecture, preprocessing and class names, so build/examples/predict
 * can use it. Copy it (with options.h) and adapt. */
#include "nncl.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                        "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

static int fail(nncl_context *ctx, const char *what, nncl_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, nncl_status_str(st), nncl_last_error(ctx));
    return 1;
}

/* DIR/PART-images-idx3-ubyte[.gz] and its labels, the first limit samples (0: all). */
static nncl_status load(const char *dir, const char *part, int limit, nncl_dataset **out) {
    char images[1024], labels[1024];
    nncl_status st = nncl_dataset_load_idx(ex_idx_path(dir, part, "images", images, sizeof images),
                                           ex_idx_path(dir, part, "labels", labels, sizeof labels), out);
    if (st == NNCL_OK && limit > 0 && (size_t)limit < nncl_dataset_size(*out)) {
        nncl_dataset *all = *out;
        size_t *idx = (size_t *)malloc(sizeof(size_t) * (size_t)limit), i;
        if (!idx) return NNCL_ERR_OUT_OF_MEMORY;
        for (i = 0; i < (size_t)limit; i++) idx[i] = i;
        st = nncl_dataset_subset(all, idx, (size_t)limit, out);
        nncl_dataset_free(all);
        free(idx);
    }
    return st;
}

/* k x k conv (no bias: the batch norm shifts) -> batch norm, plus res when
 * given, through act: one node after the conv */
static nncl_node *conv_bn(nncl_graph *g, nncl_node *x, int out, int k, int stride, nncl_node *res, nncl_bn_act act,
                          const char *name) {
    char cn[64], bn[64];
    nncl_node *c;
    snprintf(cn, sizeof cn, "%s.conv", name);
    snprintf(bn, sizeof bn, "%s.bn", name);
    c = nncl_conv2d(g, x, out, k, stride, k / 2, 0, NNCL_ACT_NONE, cn);
    return res ? nncl_batchnorm_add_act(g, c, res, act, 0.1f, 1e-5f, bn) : nncl_batchnorm_act(g, c, act, 0.1f, 1e-5f, bn);
}

/* relu(bn(conv(relu(bn(conv(x))))) + shortcut(x)), the shortcut a strided
 * 1x1 projection where the shape changes; a shortcut whose builder failed
 * (NULL) stops here instead of becoming "no residual" */
static nncl_node *residual(nncl_graph *g, nncl_node *x, int in, int out, int stride, const char *name) {
    char n1[64], n2[64], ns[64];
    nncl_node *h, *s = x;
    snprintf(n1, sizeof n1, "%s.1", name);
    snprintf(n2, sizeof n2, "%s.2", name);
    snprintf(ns, sizeof ns, "%s.shortcut", name);
    if (stride != 1 || in != out) s = conv_bn(g, x, out, 1, stride, NULL, NNCL_BN_ACT_NONE, ns);
    h = conv_bn(g, x, out, 3, stride, NULL, NNCL_BN_ACT_RELU, n1);
    return s ? conv_bn(g, h, out, 3, 1, s, NNCL_BN_ACT_RELU, n2) : NULL;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/share/datasets/fashion-mnist", *out = "fashion_mnist_resnet.safetensors", *devices = NULL;
    const char *checkpoint = NULL, *resume = NULL, *precision = "fp32", *save_dtype = "f32", *batch_arg = "100";
    double val = 0.1;
    int batch = 100, grad_ckpt = 0, epochs = 10, patience = 0, keep_best = 0, every = 0, limit = 0, quiet = 0;
    int no_augment = 0, shift = 1, width = 32;
    const ex_option opts[] = {
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--data", OPT_STR, &dir, "DIR", "folder of the IDX files, plain or .gz (/usr/share/datasets/fashion-mnist)"},
        {"--epochs", OPT_INT, &epochs, "N", "epochs (10)"},
        {"--val", OPT_NUM, &val, "FRACTION", "part of the training images that validates each epoch (0.1; 0: none)"},
        {"--patience", OPT_INT, &patience, "N", "stop after N epochs without a lower val_loss (0: never)"},
        {"--keep-best", OPT_FLAG, &keep_best, "", "end with the weights of the epoch of lowest val_loss"},
        {"--checkpoint", OPT_STR, &checkpoint, "FILE", "write a checkpoint at each epoch's end (and see --every)"},
        {"--every", OPT_INT, &every, "N", "also write the checkpoint every N steps"},
        {"--resume", OPT_STR, &resume, "FILE", "go on from a checkpoint of this run"},
        {"--limit", OPT_INT, &limit, "N", "train and test on the first N images of each set (a quick try)"},
        {"--out", OPT_STR, &out, "FILE", "the model file (fashion_mnist_resnet.safetensors); curve in FILE's .csv and .svg"},
        {"--precision", OPT_STR, &precision, "P", "storage of activations and working weights: fp32, fp16 (loss-scaled), bf16 (fp32)"},
        {"--save-dtype", OPT_STR, &save_dtype, "D", "dtype of the saved model's weights: f32, f16, bf16 (f32)"},
        {"--batch", OPT_STR, &batch_arg, "N|auto", "global batch (100); auto: the largest that fits the devices' memory"},
        {"--grad-checkpoint", OPT_FLAG, &grad_ckpt, "", "recompute activations in backward: less memory, a larger batch"},
        {"--width", OPT_INT, &width, "N", "channels of the first block (32); the others 2N and 4N"},
        {"--shift", OPT_INT, &shift, "N", "shift training images by up to N pixels at random (1)"},
        {"--no-augment", OPT_FLAG, &no_augment, "", "train on the images as they are (not shifted or mirrored)"},
        {"--quiet", OPT_FLAG, &quiet, "", "no progress lines"},
        {NULL, 0, NULL, NULL, NULL}};
    nncl_train_config tc = nncl_train_default();
    nncl_fit_config fit = nncl_fit_default();
    nncl_fit_result result;
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_context *ctx = NULL;
    nncl_dataset *train = NULL, *test = NULL;
    nncl_graph *g;
    nncl_node *x, *y, *h, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_progress *progress = NULL;
    nncl_curve *curve = NULL;
    nncl_status st;
    float test_loss, test_acc;
    char csv[1024], svg[1024];
    int shape[3] = {1, 28, 28};

    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with the progress on stderr, also when piped */
    ex_parse(argc, argv, "fashion_mnist_resnet [options]", opts, NULL, 0);
    ex_batch_arg("fashion_mnist_resnet [options]", opts, batch_arg, &batch);
    if (width < 1 || width > 1024 || shift < 0 || shift > 27) {
        fprintf(stderr, "error: --width must be in [1, 1024] and --shift in [0, 27]\n");
        return 2;
    }
    if (epochs < 1 || !(val >= 0 && val < 1)) {
        fprintf(stderr, "error: --epochs must be at least 1 and --val in [0, 1)\n");
        return 2;
    }
    ex_beside(out, ".csv", csv, sizeof csv);
    ex_beside(out, ".svg", svg, sizeof svg);
    if (ex_check_writable("--out", out) || (checkpoint && ex_check_writable("--checkpoint", checkpoint))) return 2;
    if (ex_precision("--precision", precision, &tc.precision) || ex_precision("--save-dtype", save_dtype, &meta.dtype))
        return 2;
    if (ex_init("fashion_mnist_resnet", devices, &ctx)) return 1;
    if ((st = load(dir, "train", limit, &train)) != NNCL_OK || (st = load(dir, "t10k", limit, &test)) != NNCL_OK)
        return fail(NULL, "data (install dataset-fashion-mnist, or pass --data DIR holding train-images-idx3-ubyte[.gz] ...)", st);

    /* [B,1,28,28] -> conv 3x3 N -> residual N -> [B,N,28,28] -> residual 2N /2
     * -> [B,2N,14,14] -> residual 4N /2 -> [B,4N,7,7] -> global average pool -> 10 */
    g = nncl_graph_create(ctx, 1);
    x = nncl_input(g, "x", 3, shape);
    y = nncl_input(g, "y", 0, NULL);
    h = conv_bn(g, x, width, 3, 1, NULL, NNCL_BN_ACT_RELU, "stem");
    h = residual(g, h, width, width, 1, "layer1");
    h = residual(g, h, width, 2 * width, 2, "layer2");
    h = residual(g, h, 2 * width, 4 * width, 2, "layer3");
    h = nncl_global_avgpool(g, h);
    logits = nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc");
    loss = nncl_softmax_cross_entropy(g, logits, y);
    if (!loss) return fail(ctx, "model", NNCL_ERR_INVALID_ARGUMENT);

    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    if (grad_ckpt) tc.checkpoint = NNCL_CHECKPOINT_AUTO;
    /* auto: at most the training samples of an epoch, and 4096 */
    if (!batch && ex_batch_auto(ctx, g, loss, &tc, ex_batch_most(train, val, 4096), &batch)) return 1;
    tc.max_batch = batch;
    /* annealed to 0 over the run (PyTorch's CosineAnnealingLR): the last
     * epochs at a small rate settle the weights and the running statistics */
    tc.optim.schedule = NNCL_SCHED_COSINE;
    tc.optim.total_steps = epochs * (int)((nncl_dataset_size(train) * (1 - val) + batch - 1) / batch);
    ex_compiling(ctx);
    if ((st = nncl_trainer_create(ctx, g, loss, &tc, &t)) != NNCL_OK) return fail(ctx, "trainer", st);
    nncl_trainer_summary(t, stdout);

    fit.epochs = epochs;
    fit.batch = batch;
    fit.x = x;
    fit.labels = y;
    fit.logits = logits;
    fit.val_fraction = val;
    fit.patience = patience;
    fit.keep_best = keep_best;
    fit.checkpoint = checkpoint;
    fit.checkpoint_every = every;
    fit.resume = resume;
    fit.result = &result;
    /* RandomCrop(28, padding=shift) and RandomHorizontalFlip: without them
     * the network learns its training images (0.975 of them right against
     * 0.92 of the test images); a shift of 2 loses more than it gains on
     * 28x28 images */
    if (!no_augment) {
        fit.augment.shift = shift;
        fit.augment.flip_horizontal = 1;
    }
    if (nncl_progress_create(stderr, epochs, (int)((nncl_dataset_size(train) * (1 - val) + batch - 1) / batch), &progress) != NNCL_OK ||
        nncl_curve_create(&curve) != NNCL_OK)
        return fail(NULL, "progress", NNCL_ERR_OUT_OF_MEMORY);
    if (quiet) nncl_progress_set_mode(progress, NNCL_PROGRESS_QUIET);
    fit.progress = progress;
    fit.curve = curve;
    if ((st = nncl_trainer_fit(t, train, &fit)) != NNCL_OK) return fail(ctx, "training", st);

    if ((st = nncl_trainer_evaluate_dataset(t, &fit, test, &test_loss, &test_acc)) != NNCL_OK)
        return fail(ctx, "evaluation", st);
    printf("test accuracy %.4f (loss %.4f) on %zu images\n", test_acc, test_loss, nncl_dataset_size(test));
    meta.scale = 1.0f / 255.0f; /* the IDX bytes as nncl_dataset_load_idx scaled them */
    meta.class_names = classes;
    meta.n_classes = 10;
    if ((st = nncl_trainer_save_model(t, out, &meta)) != NNCL_OK) return fail(ctx, "saving", st);
    if ((st = nncl_curve_write_csv(curve, csv)) != NNCL_OK || (st = nncl_curve_write_svg(curve, svg, "Fashion-MNIST ResNet")) != NNCL_OK)
        return fail(NULL, "writing the curve", st);
    printf("model saved to %s; curve in %s and %s\n", out, csv, svg);

    nncl_progress_free(progress);
    nncl_curve_free(curve);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_dataset_free(train);
    nncl_dataset_free(test);
    nncl_free(ctx);
    return 0;
}
