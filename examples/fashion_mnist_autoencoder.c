/* fashion_mnist_autoencoder.c - a convolutional autoencoder for
 * Fashion-MNIST: two strided 3x3 convolutions encode an image into 32
 * planes of 7x7, two transposed convolutions decode it back to 28x28, and
 * the mean squared error against the input is the loss. Adam 1e-3, batch
 * 100, a loop over nncl_trainer_step (no labels: nncl_trainer_fit is for
 * classifiers). Prints the training loss per epoch and the test images'
 * reconstruction loss, saves the model (its architecture in the file, so
 * nncl_graph_from_safetensors rebuilds it) and writes an SVG of test
 * images above their reconstructions. Copy it (with options.h) and adapt. */
#include "nncl.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 100
#define SHOWN 10 /* test images in the picture */

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

/* n images of 28x28 in [0, 1]: inputs in the top row, reconstructions below,
 * one gray square per pixel. */
static int write_svg(const char *path, const float *in, const float *out, int n) {
    FILE *f = fopen(path, "w");
    int k, row, p, s = 3, gap = 6, w = n * (28 * s + gap) + gap, h = 2 * (28 * s + gap) + gap;
    if (!f) return 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" shape-rendering=\"crispEdges\">\n",
            w, h);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
    for (row = 0; row < 2; row++)
        for (k = 0; k < n; k++) {
            const float *img = (row ? out : in) + (size_t)k * 784;
            int x0 = gap + k * (28 * s + gap), y0 = gap + row * (28 * s + gap);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#000\"/>\n", x0, y0, 28 * s, 28 * s);
            for (p = 0; p < 784; p++) {
                float v = img[p] < 0 ? 0 : img[p] > 1 ? 1 : img[p];
                int g = (int)(v * 255 + 0.5f);
                if (g < 8) continue; /* black already */
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\"/>\n",
                        x0 + (p % 28) * s, y0 + (p / 28) * s, s, s, g, g, g);
            }
        }
    fprintf(f, "</svg>\n");
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/share/datasets/fashion-mnist", *out = "fashion_mnist_autoencoder.safetensors";
    const char *devices = NULL;
    int epochs = 5, limit = 0, e;
    const ex_option opts[] = {
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--data", OPT_STR, &dir, "DIR", "folder of the IDX files, plain or .gz (/usr/share/datasets/fashion-mnist)"},
        {"--epochs", OPT_INT, &epochs, "N", "epochs (5)"},
        {"--limit", OPT_INT, &limit, "N", "train and test on the first N images of each set (a quick try)"},
        {"--out", OPT_STR, &out, "FILE", "the model file (fashion_mnist_autoencoder.safetensors); picture in FILE's .svg"},
        {NULL, 0, NULL, NULL, NULL}};
    nncl_train_config tc = nncl_train_default();
    nncl_conv_transpose2d_options up = nncl_conv_transpose2d_default();
    nncl_context *ctx = NULL;
    nncl_dataset *train = NULL, *test = NULL;
    nncl_graph *g;
    nncl_node *x, *t, *h, *recon, *loss;
    nncl_trainer *tr = NULL;
    nncl_status st;
    float *recons = NULL;
    char svg[1024];
    int shape[3] = {1, 28, 28};
    size_t n_train, n_test, i;
    double sum, test_loss = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    ex_parse(argc, argv, "fashion_mnist_autoencoder [options]", opts, NULL, 0);
    if (epochs < 1) {
        fprintf(stderr, "error: --epochs must be at least 1\n");
        return 2;
    }
    ex_beside(out, ".svg", svg, sizeof svg);
    if (ex_check_writable("--out", out)) return 2;
    if (ex_init("fashion_mnist_autoencoder", devices, &ctx)) return 1;
    if ((st = load(dir, "train", limit, &train)) != NNCL_OK || (st = load(dir, "t10k", limit, &test)) != NNCL_OK)
        return fail(NULL, "data (install dataset-fashion-mnist, or pass --data DIR holding train-images-idx3-ubyte[.gz] ...)", st);
    n_train = nncl_dataset_size(train) / BATCH * BATCH;
    n_test = nncl_dataset_size(test);
    if (n_train == 0 || n_test < SHOWN) {
        fprintf(stderr, "error: --limit leaves fewer than %d training or %d test images\n", BATCH, SHOWN);
        return 2;
    }

    /* [B,1,28,28] -> conv 3x3 /2 16 relu -> [B,16,14,14] -> conv 3x3 /2 32 relu -> [B,32,7,7]
     * -> transposed 3x3 x2 16 relu -> [B,16,14,14] -> transposed 3x3 x2 1 sigmoid -> [B,1,28,28] */
    g = nncl_graph_create(ctx, 1);
    x = nncl_input(g, "x", 3, shape);
    t = nncl_input(g, "target", 3, shape);
    h = nncl_conv2d(g, x, 16, 3, 2, 1, 1, NNCL_ACT_RELU, "enc1");
    h = nncl_conv2d(g, h, 32, 3, 2, 1, 1, NNCL_ACT_RELU, "enc2");
    up.stride_h = up.stride_w = 2;
    up.padding_h = up.padding_w = 1;
    up.output_padding_h = up.output_padding_w = 1;
    up.act = NNCL_ACT_RELU;
    h = nncl_conv_transpose2d(g, h, 16, &up, "dec1");
    up.act = NNCL_ACT_SIGMOID;
    recon = nncl_conv_transpose2d(g, h, 1, &up, "dec2");
    loss = nncl_mse(g, recon, t);
    if (!loss) return fail(ctx, "model", NNCL_ERR_INVALID_ARGUMENT);

    tc.max_batch = BATCH;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    ex_compiling(ctx);
    if ((st = nncl_trainer_create(ctx, g, loss, &tc, &tr)) != NNCL_OK) return fail(ctx, "trainer", st);
    nncl_trainer_summary(tr, stdout);

    for (e = 0; e < epochs; e++) {
        sum = 0;
        if ((st = nncl_dataset_shuffle(train, (uint64_t)e + 1)) != NNCL_OK) return fail(NULL, "shuffle", st);
        for (i = 0; i < n_train; i += BATCH) {
            const float *xb;
            nncl_feed f[2];
            nncl_step_info info;
            nncl_dataset_batch(train, i, BATCH, &xb, NULL);
            f[0].node = x;
            f[0].data = xb;
            f[1].node = t;
            f[1].data = xb;
            if ((st = nncl_trainer_step(tr, f, 2, BATCH, &info)) != NNCL_OK) return fail(ctx, "training", st);
            sum += info.loss;
        }
        printf("epoch %d/%d  reconstruction loss %.5f (training images)\n", e + 1, epochs, sum / (double)(n_train / BATCH));
    }

    if (!(recons = (float *)malloc(sizeof(float) * 784 * BATCH))) return fail(NULL, "memory", NNCL_ERR_OUT_OF_MEMORY);
    for (i = 0; i < n_test; i += BATCH) {
        int b = n_test - i < BATCH ? (int)(n_test - i) : BATCH, k;
        const float *xb;
        nncl_feed f;
        nncl_dataset_batch(test, i, (size_t)b, &xb, NULL);
        f.node = x;
        f.data = xb;
        if ((st = nncl_trainer_predict(tr, &f, 1, b, recon, recons)) != NNCL_OK) return fail(ctx, "evaluation", st);
        for (k = 0; k < b * 784; k++) test_loss += ((double)recons[k] - xb[k]) * ((double)recons[k] - xb[k]);
        if (i == 0 && write_svg(svg, xb, recons, SHOWN)) {
            fprintf(stderr, "cannot write %s\n", svg);
            return 1;
        }
    }
    printf("test reconstruction loss %.5f (mean squared error per pixel) on %zu images\n",
           test_loss / ((double)n_test * 784), n_test);
    if ((st = nncl_trainer_save(tr, out)) != NNCL_OK) return fail(ctx, "saving", st);
    printf("model saved to %s; test images over their reconstructions in %s\n", out, svg);

    free(recons);
    nncl_trainer_free(tr);
    nncl_graph_free(g);
    nncl_dataset_free(train);
    nncl_dataset_free(test);
    nncl_free(ctx);
    return 0;
}
