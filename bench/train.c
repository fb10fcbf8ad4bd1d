/* train.c - training throughput of the Fashion-MNIST MLP (784-128-10), a
 * small CNN and an LSTM (28 steps of 28 pixels), Adam, batch 100 (--batch),
 * of two CIFAR-shaped networks (3x32x32, batch 64, Adam): a VGG-style one
 * and a residual one with batch norm after every convolution, of
 * examples/fashion_mnist_mobilenet's depthwise-separable CNN, and of two
 * GPTs (train_gpt.c, their
 * tokens/s too): each device alone and all together
 * (shard split, scaling efficiency, share of a step spent in the gradient
 * exchange, and the ceiling: every device training alone on its shard at
 * the same time); per device, its detail on a fresh profiling context and
 * the fp16 and bf16 rows (bench/train_profile.c). */
#include "train.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- models */

/* CNN: conv 1->16 3x3 pad 1 ReLU, maxpool 2; conv 16->32 3x3 pad 1 ReLU,
 * maxpool 2; flatten 32*7*7; dense 128 ReLU; dense 10. */
#define TRAIN_C1 16
#define TRAIN_C2 32
#define TRAIN_FC 128
/* LSTM: 28 steps of 28 pixels, hidden 128, dense 10 on the last step. */
#define TRAIN_T 28
#define TRAIN_H 128

const char *const train_items[TRAIN_MODELS][3] = {{"mlp", "mlp_fp16", "mlp_bf16"},
                                                  {"cnn", "cnn_fp16", "cnn_bf16"},
                                                  {"lstm", "lstm_fp16", "lstm_bf16"},
                                                  {"vgg", "vgg_fp16", "vgg_bf16"},
                                                  {"resnet", "resnet_fp16", "resnet_bf16"},
                                                  {"mobilenet", "mobilenet_fp16", "mobilenet_bf16"},
                                                  {"gpt", "gpt_fp16", "gpt_bf16"},
                                                  {"gpt_large", "gpt_large_fp16", "gpt_large_bf16"}};

int train_wanted(const bench_opts *o, int kind) {
    const char *p = o->models, *name = train_items[kind][0];
    size_t n = strlen(name);
    if (!p)
        return !o->quick ||
               (kind != TRAIN_GPT_LARGE && kind != TRAIN_VGG && kind != TRAIN_RESNET && kind != TRAIN_MOBILENET);
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* conv 3x3 pad 1 at stride without bias, then batch norm and ReLU of it
 * plus res when given in one node (NNCL_BN_FUSE=0: in passes of their
 * own). */
static nncl_node *train_conv_bn(nncl_graph *g, nncl_node *h, int ch, int stride, nncl_node *res, const char *name) {
    char bn[32];
    snprintf(bn, sizeof bn, "%s.bn", name);
    h = nncl_conv2d(g, h, ch, 3, stride, 1, 0, NNCL_ACT_NONE, name);
    return res ? nncl_batchnorm_add_act(g, h, res, NNCL_BN_ACT_RELU, 0.1f, 1e-5f, bn)
               : nncl_batchnorm_act(g, h, NNCL_BN_ACT_RELU, 0.1f, 1e-5f, bn);
}

/* A basic residual block at ch channels: relu(x + bn(conv(relu(bn(conv x))))). */
static nncl_node *train_res_block(nncl_graph *g, nncl_node *x, int ch, const char *name) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%s.conv1", name);
    snprintf(b, sizeof b, "%s.conv2", name);
    return train_conv_bn(g, train_conv_bn(g, x, ch, 1, NULL, a), ch, 1, x, b);
}

/* conv k x k (padding k/2, groups, no bias) -> batch norm and ReLU6 in one
 * node, as the example builds it. */
static nncl_node *train_conv_bn6(nncl_graph *g, nncl_node *h, int ch, int k, int stride, int groups, const char *name) {
    nncl_conv2d_options co = nncl_conv2d_default();
    char cn[32], bn[32];
    snprintf(cn, sizeof cn, "%s.conv", name);
    snprintf(bn, sizeof bn, "%s.bn", name);
    co.kernel_h = co.kernel_w = k;
    co.stride_h = co.stride_w = stride;
    co.padding_h = co.padding_w = k / 2;
    co.groups = groups;
    co.bias = 0;
    return nncl_batchnorm_act(g, nncl_conv2d_ex(g, h, ch, &co, cn), NNCL_BN_ACT_RELU6, 0.1f, 1e-5f, bn);
}

/* examples/fashion_mnist_mobilenet.c's model at half its pointwise widths
 * (the figures of bench/RESULTS.md are this one's): conv 3x3 1->16; then three
 * depthwise-separable blocks (depthwise 3x3, groups == channels, then
 * pointwise 1x1, each with batch norm and ReLU6): 16->32 stride 2, 32->64
 * stride 2, 64->128; global average pool; dense 10. */
static void train_build_mobilenet(nncl_graph *g, train_model *m) {
    static const struct { int in, out, stride; const char *dw, *pw; } blocks[3] = {
        {16, 32, 2, "block1.dw", "block1.pw"}, {32, 64, 2, "block2.dw", "block2.pw"},
        {64, 128, 1, "block3.dw", "block3.pw"}};
    int shape[3] = {1, 28, 28}, i;
    nncl_node *h;
    m->x = nncl_input(g, "x", 3, shape);
    h = train_conv_bn6(g, m->x, 16, 3, 1, 1, "stem");
    for (i = 0; i < 3; i++) {
        h = train_conv_bn6(g, h, blocks[i].in, 3, blocks[i].stride, blocks[i].in, blocks[i].dw);
        h = train_conv_bn6(g, h, blocks[i].out, 1, 1, 1, blocks[i].pw);
    }
    m->logits = nncl_linear(g, nncl_global_avgpool(g, h), 10, 1, NNCL_ACT_NONE, "fc");
}

/* VGG: conv 3->32, 32->32, pool; 32->64, 64->64, pool; 64->128, pool
 * (3x3 pad 1, ReLU); flatten 128*4*4; dense 256 ReLU; dense 10.
 * ResNet: conv-bn-relu 3->32; residual block 32; conv-bn-relu 32->64
 * stride 2; residual block 64; conv-bn-relu 64->128 stride 2; residual
 * block 128; global average pool; dense 10. */
static void train_build_cifar(nncl_graph *g, int kind, train_model *m) {
    int shape[3] = {3, 32, 32};
    nncl_node *h;
    m->x = nncl_input(g, "x", 3, shape);
    if (kind == TRAIN_VGG) {
        h = nncl_conv2d(g, m->x, 32, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
        h = nncl_conv2d(g, h, 32, 3, 1, 1, 1, NNCL_ACT_RELU, "conv2");
        h = nncl_maxpool2d(g, h, 2, 2, 0);
        h = nncl_conv2d(g, h, 64, 3, 1, 1, 1, NNCL_ACT_RELU, "conv3");
        h = nncl_conv2d(g, h, 64, 3, 1, 1, 1, NNCL_ACT_RELU, "conv4");
        h = nncl_maxpool2d(g, h, 2, 2, 0);
        h = nncl_conv2d(g, h, 128, 3, 1, 1, 1, NNCL_ACT_RELU, "conv5");
        h = nncl_maxpool2d(g, h, 2, 2, 0);
        h = nncl_flatten(g, h);
        h = nncl_linear(g, h, 256, 1, NNCL_ACT_RELU, "fc1");
        m->logits = nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc2");
    } else {
        h = train_conv_bn(g, m->x, 32, 1, NULL, "stem");
        h = train_res_block(g, h, 32, "block1");
        h = train_conv_bn(g, h, 64, 2, NULL, "down1");
        h = train_res_block(g, h, 64, "block2");
        h = train_conv_bn(g, h, 128, 2, NULL, "down2");
        h = train_res_block(g, h, 128, "block3");
        h = nncl_global_avgpool(g, h);
        m->logits = nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc");
    }
}

int train_build(nncl_context *ctx, const bench_opts *o, int kind, train_model *m) {
    if (kind >= TRAIN_GPT) return train_gpt_build(ctx, kind == TRAIN_GPT_LARGE, m);
    memset(m, 0, sizeof *m);
    m->batch = kind == TRAIN_VGG || kind == TRAIN_RESNET ? TRAIN_CIFAR_BATCH : o->batch;
    m->optim = nncl_optim_default(NNCL_OPT_ADAM);
    m->g = nncl_graph_create(ctx, 1);
    if (!m->g) return 1;
    m->y = nncl_input(m->g, "y", 0, NULL);
    if (kind == TRAIN_VGG || kind == TRAIN_RESNET) {
        train_build_cifar(m->g, kind, m);
    } else if (kind == TRAIN_MOBILENET) {
        train_build_mobilenet(m->g, m);
    } else if (kind == TRAIN_MLP) {
        int shape[1] = {784};
        nncl_node *h;
        m->x = nncl_input(m->g, "x", 1, shape);
        h = nncl_linear(m->g, m->x, TRAIN_FC, 1, NNCL_ACT_RELU, "fc1");
        m->logits = nncl_linear(m->g, h, 10, 1, NNCL_ACT_NONE, "fc2");
    } else if (kind == TRAIN_LSTM) {
        int shape[2] = {TRAIN_T, 784 / TRAIN_T};
        nncl_node *h;
        m->x = nncl_input(m->g, "x", 2, shape);
        h = nncl_rnn_last(m->g, nncl_lstm(m->g, m->x, TRAIN_H, 1, "lstm"));
        m->logits = nncl_linear(m->g, h, 10, 1, NNCL_ACT_NONE, "fc");
    } else {
        int shape[3] = {1, 28, 28};
        nncl_node *h;
        m->x = nncl_input(m->g, "x", 3, shape);
        h = nncl_conv2d(m->g, m->x, TRAIN_C1, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
        h = nncl_maxpool2d(m->g, h, 2, 2, 0);
        h = nncl_conv2d(m->g, h, TRAIN_C2, 3, 1, 1, 1, NNCL_ACT_RELU, "conv2");
        h = nncl_maxpool2d(m->g, h, 2, 2, 0);
        h = nncl_flatten(m->g, h);
        h = nncl_linear(m->g, h, TRAIN_FC, 1, NNCL_ACT_RELU, "fc1");
        m->logits = nncl_linear(m->g, h, 10, 1, NNCL_ACT_NONE, "fc2");
    }
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    return m->loss == NULL;
}

/* What training the model needs at the least, in floats, for batch B:
 *   4P: P parameters, P gradients, 2P Adam moments (m and v);
 *   + B * max over the backward steps l of the memory alive then:
 *       sum_{j <= l} saved_j + gout_l + gin_l
 *     saved_j: the forward values a backward rule reads (the input of each
 *     weighted layer, for its weight gradient; each ReLU output, for the
 *     derivative; each max-pool's argmax; the loss's softmax and labels),
 *     charged to the first layer (in forward order) that reads them, since
 *     they are freed once that layer's backward is done; gout_l and gin_l:
 *     the gradients of layer l's output and input, alive while its
 *     backward runs.
 * Per-sample floats. Kernels' scratch (im2col columns, CLBlast's padded
 * copies) is not counted: it is part of what the measured peak is set
 * against. */
typedef struct train_layer { double saved, gout, gin; } train_layer;

double train_need_floats(int kind, int B, char *formula, size_t len) {
    train_layer mlp[3], cn[7];
    const train_layer *L;
    double P, live = 0, peak = 0;
    int nl, l;
    if (kind > TRAIN_LSTM) return -1; /* not modelled */
    if (kind == TRAIN_LSTM) { /* per step the gates i, f, g, o, the cell, its tanh and h; the gates' gradients */
        double F = 784.0 / TRAIN_T, H = TRAIN_H, T = TRAIN_T;
        P = 4 * H * (F + H) + 8 * H + H * 10 + 10;
        peak = T * F + 7 * T * H + 4 * T * H + 10 + 1;
        snprintf(formula, len, "4P + B * (T*F + 7*T*H + 4*T*H + 11) = 4*%.0f + %d*%.0f floats", P, B, peak);
        return 4 * P + B * peak;
    }
    if (kind == TRAIN_MLP) {
        P = 784.0 * TRAIN_FC + TRAIN_FC + TRAIN_FC * 10.0 + 10;
        mlp[0].saved = 784 + TRAIN_FC, mlp[0].gout = TRAIN_FC, mlp[0].gin = 0; /* fc1+ReLU: x, h */
        mlp[1].saved = 0, mlp[1].gout = 10, mlp[1].gin = TRAIN_FC;             /* fc2 (h charged to fc1) */
        mlp[2].saved = 10 + 1, mlp[2].gout = 0, mlp[2].gin = 10;               /* loss: softmax, label */
        L = mlp, nl = 3;
    } else {
        double c1 = TRAIN_C1 * 28 * 28, p1 = TRAIN_C1 * 14 * 14, c2 = TRAIN_C2 * 14 * 14, p2 = TRAIN_C2 * 7 * 7;
        P = (TRAIN_C1 * 9.0 + TRAIN_C1) + (TRAIN_C2 * TRAIN_C1 * 9.0 + TRAIN_C2) + (p2 * TRAIN_FC + TRAIN_FC) +
            (TRAIN_FC * 10.0 + 10);
        cn[0].saved = 784 + c1, cn[0].gout = c1, cn[0].gin = 0;    /* conv1+ReLU: x, its output */
        cn[1].saved = p1, cn[1].gout = p1, cn[1].gin = c1;         /* pool1: argmax */
        cn[2].saved = p1 + c2, cn[2].gout = c2, cn[2].gin = p1;    /* conv2+ReLU: its input, output */
        cn[3].saved = p2, cn[3].gout = p2, cn[3].gin = c2;         /* pool2: argmax (flatten is a view) */
        cn[4].saved = p2 + TRAIN_FC, cn[4].gout = TRAIN_FC, cn[4].gin = p2; /* fc1+ReLU */
        cn[5].saved = 0, cn[5].gout = 10, cn[5].gin = TRAIN_FC;   /* fc2 */
        cn[6].saved = 10 + 1, cn[6].gout = 0, cn[6].gin = 10;     /* loss */
        L = cn, nl = 7;
    }
    for (l = 0; l < nl; l++) {
        live += L[l].saved;
        if (live + L[l].gout + L[l].gin > peak) peak = live + L[l].gout + L[l].gin;
    }
    snprintf(formula, len, "4P + B * max_l(sum_{j<=l} saved_j + gout_l + gin_l) = 4*%.0f + %d*%.0f floats", P, B,
             peak);
    return 4 * P + B * peak;
}

/* ------------------------------------------------------------- data */

void train_data_load(const bench_opts *o, int kind, train_data *td) {
    char images[1024], labels[1024];
    size_t i;
    unsigned s = 12345u;
    memset(td, 0, sizeof *td);
    if (kind >= TRAIN_GPT) {
        train_gpt_data(kind == TRAIN_GPT_LARGE, o->quick, td);
        return;
    }
    td->xs = kind == TRAIN_VGG || kind == TRAIN_RESNET ? 3 * 32 * 32 : 784, td->ys = 1;
    if (td->xs == 784 && !o->quick && o->data_dir) {
        snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", o->data_dir);
        snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", o->data_dir);
        if (nncl_dataset_load_idx(images, labels, &td->ds) == NNCL_OK) {
            td->x = (float *)nncl_dataset_x(td->ds);
            td->y = (float *)nncl_dataset_y(td->ds);
            td->n = nncl_dataset_size(td->ds);
            td->real = 1;
            return;
        }
    }
    /* synthetic: the same shapes, pixels in [0,1), labels 0..9 */
    td->n = o->quick ? 1000 : 5000;
    td->x = (float *)malloc(td->n * td->xs * sizeof(float));
    td->y = (float *)malloc(td->n * sizeof(float));
    if (!td->x || !td->y) {
        free(td->x), free(td->y);
        td->x = td->y = NULL;
        td->n = 0;
        return;
    }
    for (i = 0; i < td->n * td->xs; i++) {
        s = s * 1664525u + 1013904223u;
        td->x[i] = (float)(s >> 8) / 16777216.0f;
    }
    for (i = 0; i < td->n; i++) td->y[i] = (float)(i * 7 % 10);
}

void train_data_free(train_data *td) {
    if (td->ds) nncl_dataset_free(td->ds);
    else {
        free(td->x);
        free(td->y);
    }
    memset(td, 0, sizeof *td);
}

/* ------------------------------------------------------------- running */

typedef struct train_run {
    bench_stat samples_s;     /* per repeat */
    bench_stat exchange_share;
    int steps_per_repeat, repeats;
    int shards[16], n_shards;
} train_run;

static long train_cursor;

/* One step on the next batch of the data (cursor: which one). */
static nncl_status train_step_at(nncl_trainer *t, const train_model *m, const train_data *td, int batch, long *cursor,
                                 nncl_step_info *info) {
    nncl_feed f[2];
    size_t nb = td->n / (size_t)batch, b = (size_t)((*cursor)++ % (long)(nb ? nb : 1));
    f[0].node = m->x;
    f[0].data = td->x + b * (size_t)batch * td->xs;
    f[1].node = m->y;
    f[1].data = td->y + b * (size_t)batch * td->ys;
    return nncl_trainer_step(t, f, 2, batch, info);
}

nncl_status train_step(const bench_opts *o, nncl_trainer *t, const train_model *m, const train_data *td,
                       nncl_step_info *info) {
    (void)o;
    return train_step_at(t, m, td, m->batch, &train_cursor, info);
}

nncl_train_config train_options(const train_model *m, int batch, const int *devs, int n, nncl_precision prec) {
    nncl_train_config tc = nncl_train_default();
    tc.max_batch = batch;
    tc.optim = m->optim;
    tc.devices = n ? devs : NULL;
    tc.n_devices = n;
    tc.precision = prec;
    return tc;
}

/* Warm-up, then repeats of a calibrated number of steps. */
static nncl_status train_measure(const bench_opts *o, int mon_device, nncl_trainer *t, const train_model *m,
                                 const train_data *td, const char *label, train_run *out) {
    nncl_step_info info;
    double one, ex[4096], rate[64], t0;
    int warm = o->quick ? 2 : 10, i, r, n_ex = 0, reps = o->repeats > 64 ? 64 : o->repeats;
    double min_s = o->quick ? o->seconds * 2 : o->seconds * 5;
    memset(out, 0, sizeof *out);
    for (i = 0; i < warm; i++)
        if (train_step(o, t, m, td, &info) != NNCL_OK) return NNCL_ERR_DEVICE;
    t0 = bench_now();
    if (train_step(o, t, m, td, &info) != NNCL_OK) return NNCL_ERR_DEVICE;
    one = bench_now() - t0;
    out->steps_per_repeat = (int)ceil(min_s / (one > 0 ? one : 1e-3));
    if (out->steps_per_repeat < (o->quick ? 1 : 2)) out->steps_per_repeat = o->quick ? 1 : 2;
    if (out->steps_per_repeat > 2000) out->steps_per_repeat = 2000;
    for (r = 0; r < reps; r++) {
        char mon[64];
        t0 = bench_now();
        for (i = 0; i < out->steps_per_repeat; i++) {
            if (train_step(o, t, m, td, &info) != NNCL_OK) return NNCL_ERR_DEVICE;
            if (n_ex < 4096 && info.seconds > 0) ex[n_ex++] = info.exchange_seconds / info.seconds;
        }
        rate[r] = out->steps_per_repeat * (double)m->batch / (bench_now() - t0);
        bench_monitor_latest(mon_device, mon, sizeof mon);
        bench_progress("train %s: %.0f samples/s (repeat %d/%d)%s%s", label, rate[r], r + 1, reps, mon[0] ? " " : "",
                       mon);
    }
    out->repeats = reps;
    out->samples_s = bench_stat_of(rate, reps);
    out->exchange_share = bench_stat_of(ex, n_ex);
    out->n_shards = nncl_trainer_shards(t, out->shards, 16);
    if (out->n_shards > 16) out->n_shards = 16;
    return NNCL_OK;
}

static void train_shards_text(const train_run *r, char *buf, size_t len) {
    int i;
    size_t used = 0;
    buf[0] = 0;
    for (i = 0; i < r->n_shards && used + 8 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "/" : "", r->shards[i]);
}

/* One trainer on the devices listed (n 0: all of ctx), measured and stored
 * under device key dkey (-1 for all together); overlap reads gradients back
 * during backward (stored as item "mlp_overlap", "cnn_overlap", ...). */
static int train_config(const bench_opts *o, nncl_context *ctx, int kind, const int *devs, int n, int dkey,
                        const train_data *td, train_run *run, int overlap, nncl_precision prec) {
    char item[48];
    train_model m;
    nncl_train_config tc;
    nncl_trainer *t = NULL;
    nncl_status st;
    char label[64], why[300], txt[64];
    double t0;
    snprintf(item, sizeof item, "%s%s", train_items[kind][overlap ? 0 : prec], overlap ? "_overlap" : "");
    snprintf(label, sizeof label, "%s %s%d", item, dkey < 0 ? "all " : "d", dkey < 0 ? nncl_device_count(ctx) : dkey);
    bench_progress("train %s: building the model and its plan", label);
    if (train_build(ctx, o, kind, &m)) {
        snprintf(why, sizeof why, "n/a: the model does not build: %s", nncl_last_error(ctx));
        bench_put("training", dkey, item, "samples_s", bench_stat_na(), "samples/s", why);
        nncl_graph_free(m.g);
        return 1;
    }
    tc = train_options(&m, m.batch, devs, n, prec);
    tc.overlap = overlap;
    t0 = bench_now();
    st = nncl_trainer_create(ctx, m.g, m.loss, &tc, &t);
    if (st == NNCL_OK) bench_put_num("training", dkey, item, "create_s", bench_now() - t0, "s",
                                     "nncl_trainer_create: plans, kernel builds, calibration");
    if (st == NNCL_OK) st = train_measure(o, dkey < 0 ? 0 : dkey, t, &m, td, label, run);
    if (st != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(ctx));
        bench_put("training", dkey, item, "samples_s", bench_stat_na(), "samples/s", why);
        nncl_trainer_free(t);
        nncl_graph_free(m.g);
        return 1;
    }
    snprintf(why, sizeof why, "%d repeats of %d steps, batch %d, %s, %s data", run->repeats, run->steps_per_repeat,
             m.batch, m.tokens ? "AdamW" : "Adam", td->real ? "Fashion-MNIST" : m.tokens ? "random token" : "synthetic");
    bench_put("training", dkey, item, "samples_s", run->samples_s, "samples/s", why);
    if (m.tokens)
        bench_put("training", dkey, item, "tokens_s", bench_stat_scale(run->samples_s, m.tokens), "tokens/s",
                  "samples/s x the context (tokens per window)");
    train_shards_text(run, txt, sizeof txt);
    bench_put_text("training", dkey, item, "shards", txt);
    if (dkey < 0)
        bench_put("training", dkey, item, "exchange_share", run->exchange_share, "",
                  "nncl_step_info.exchange_seconds / seconds, median over the timed steps");
    bench_monitor_note_memory(ctx); /* while the trainer holds its plans */
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    return 0;
}

/* ------------------------------------------------------------- ceiling */

/* One device training a model of its own on its shard, on its own thread. */
typedef struct train_lane {
    const train_data *td;
    train_model m;
    nncl_trainer *t;
    int device, shard, steps;
    long cursor;
    double seconds;
    nncl_status st;
} train_lane;

static void *train_lane_main(void *p) {
    train_lane *l = (train_lane *)p;
    nncl_step_info info;
    double t0 = bench_now();
    int i;
    for (i = 0; i < l->steps && l->st == NNCL_OK; i++)
        l->st = train_step_at(l->t, &l->m, l->td, l->shard, &l->cursor, &info);
    l->seconds = bench_now() - t0;
    return NULL;
}

/* What the devices deliver with no exchange at all: each trains a model of
 * its own on its shard of the split the trainer chose, all at the same
 * time, as many steps as a repeat of the trainer; the sum of their
 * samples/s. Data parallelism reaches this at best, so together / ceiling
 * is what the exchange and the shared step cost, apart from what running at
 * once costs devices that share a processor or a bus. */
static void train_ceiling(const bench_opts *o, nncl_context *ctx, int kind, const train_run *together,
                          const train_data *td) {
    const char *item = train_items[kind][0];
    train_lane lanes[16];
    pthread_t th[16];
    double rate[64];
    int started[16], n = 0, d, r, i, ok = 1;
    char why[200];
    memset(lanes, 0, sizeof lanes);
    bench_progress("train %s: each device on its shard alone, all at once", item);
    for (d = 0; d < together->n_shards && ok; d++) {
        train_lane *l = &lanes[n];
        nncl_train_config tc;
        if (together->shards[d] <= 0) continue;
        l->td = td;
        l->device = d;
        l->shard = together->shards[d];
        n++;
        if (!(ok = !train_build(ctx, o, kind, &l->m))) break;
        tc = train_options(&l->m, l->shard, &l->device, 1, NNCL_PRECISION_FP32);
        ok = nncl_trainer_create(ctx, l->m.g, l->m.loss, &tc, &l->t) == NNCL_OK;
    }
    for (i = 0; i < n && ok; i++) { /* warm-up, one lane at a time */
        lanes[i].steps = o->quick ? 1 : 5;
        train_lane_main(&lanes[i]);
        ok = lanes[i].st == NNCL_OK;
    }
    for (r = 0; r < together->repeats && r < 64 && ok; r++) {
        rate[r] = 0;
        for (i = 0; i < n; i++) {
            lanes[i].steps = together->steps_per_repeat;
            started[i] = pthread_create(&th[i], NULL, train_lane_main, &lanes[i]) == 0;
            ok &= started[i];
        }
        for (i = 0; i < n; i++) {
            if (started[i]) pthread_join(th[i], NULL);
            ok &= lanes[i].st == NNCL_OK;
            if (lanes[i].seconds > 0) rate[r] += lanes[i].steps * (double)lanes[i].shard / lanes[i].seconds;
        }
    }
    if (!ok) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(ctx));
        bench_put("training", -1, item, "ceiling", bench_stat_na(), "samples/s", why);
    } else if (n > 0) {
        bench_stat c = bench_stat_of(rate, r);
        bench_put("training", -1, item, "ceiling", c, "samples/s",
                  "each device training a model of its own on its shard, all at once: no exchange");
        bench_put_num("training", -1, item, "vs_ceiling", together->samples_s.median / c.median, "",
                      "all together / ceiling: what the exchange and the shared step cost");
    }
    for (i = 0; i < 16; i++) {
        nncl_trainer_free(lanes[i].t);
        nncl_graph_free(lanes[i].m.g);
    }
}

int bench_training_steps(const bench_opts *o, int n_devices) {
    int kind, models = 0;
    for (kind = 0; kind < TRAIN_MODELS; kind++) models += train_wanted(o, kind);
    return o->train ? models * (2 * n_devices + (n_devices > 1) * (o->quick ? 2 : 3)) : 0;
}

void bench_training(const bench_opts *o, nncl_context *ctx) {
    int nd = nncl_device_count(ctx), d, kind;
    for (kind = 0; kind < TRAIN_MODELS; kind++) {
        const char *item = train_items[kind][0];
        double sum = 0, best = 0;
        int ok = 1;
        train_data td;
        if (!train_wanted(o, kind)) continue;
        train_data_load(o, kind, &td);
        if (!td.n) continue;
        if (kind == TRAIN_MLP || (kind == TRAIN_CNN && !train_wanted(o, TRAIN_MLP)) ||
            (kind == TRAIN_LSTM && !train_wanted(o, TRAIN_MLP) && !train_wanted(o, TRAIN_CNN)))
            bench_put_text("training", -1, "data", "source", td.real ? "Fashion-MNIST train set" : "synthetic, same shapes");
        for (d = 0; d < nd; d++) {
            train_run run;
            if (train_config(o, ctx, kind, &d, 1, d, &td, &run, 0, NNCL_PRECISION_FP32) == 0) {
                sum += run.samples_s.median;
                if (run.samples_s.median > best) best = run.samples_s.median;
            } else {
                ok = 0;
                run.samples_s.median = 0;
            }
            bench_progress_step();
            train_detail(o, ctx, d, kind, &td, run.samples_s.median);
            bench_progress_step();
        }
        if (nd > 1) {
            train_run run;
            if (train_config(o, ctx, kind, NULL, 0, -1, &td, &run, 0, NNCL_PRECISION_FP32) == 0 && ok) {
                bench_put_num("training", -1, item, "sum_alone", sum, "samples/s", "sum of each device alone");
                bench_put_num("training", -1, item, "scaling_eff", run.samples_s.median / sum, "",
                              "all together / sum of each alone");
                bench_put_num("training", -1, item, "vs_fastest", run.samples_s.median / best, "x",
                              "all together / the fastest device alone");
                bench_progress_step();
                train_ceiling(o, ctx, kind, &run, &td);
            } else {
                bench_progress_step();
            }
            bench_progress_step();
            if (!o->quick) { /* what reading gradients back during backward saves */
                train_config(o, ctx, kind, NULL, 0, -1, &td, &run, 1, NNCL_PRECISION_FP32);
                bench_progress_step();
            }
        }
        train_data_free(&td);
    }
}

#undef TRAIN_C1
#undef TRAIN_C2
#undef TRAIN_FC
#undef TRAIN_T
#undef TRAIN_H
