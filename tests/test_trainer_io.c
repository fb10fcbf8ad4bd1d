/* test_trainer_io.c - models across frameworks and parameters by name: a
 * model saved by PyTorch (tests/data/torch_mlp.safetensors, made by
 * make_torch_model.py) loads into nncl and gives PyTorch's logits on every
 * device; a saved model loads back bit for bit; a file of another shape is
 * refused and changes nothing; frozen parameters stay as they were; a
 * checkpoint's metadata (step, batches tracked, optimizer) is checked; a
 * PyTorch CNN with batch norm (tests/data/torch_bn.safetensors) loads; a
 * parameter named like its counter loads as a parameter; a
 * sequence model's file (logits [B, T, V], a vocabulary) predicts per
 * position. */
#include "harness.h"
#include "io/io.h"
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct tio_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    nncl_trainer *t;
} tio_model;

static nncl_optim_config tio_optim; /* kind 0 (SGD) with lr 0: the default, Adam */

static int tio_build(nncl_context *ctx, int d, int hidden, tio_model *m, int freeze_fc1) {
    int in[1] = {6};
    nncl_train_config c = nncl_train_default();
    if (tio_optim.lr > 0) c.optim = tio_optim;
    m->g = nncl_graph_create(ctx, 3);
    m->x = nncl_input(m->g, "x", 1, in);
    m->y = nncl_input(m->g, "y", 0, NULL);
    m->logits = nncl_linear(m->g, nncl_linear(m->g, m->x, hidden, 1, NNCL_ACT_TANH, "fc1"), 3, 1, NNCL_ACT_NONE, "fc2");
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    if (!m->loss) return 1;
    if (freeze_fc1 && (nncl_param_freeze(m->g, nncl_graph_find(m->g, "fc1.weight"), 1) != NNCL_OK ||
                       nncl_param_freeze(m->g, nncl_graph_find(m->g, "fc1.bias"), 1) != NNCL_OK))
        return 1;
    c.max_batch = 8;
    c.devices = &d;
    c.n_devices = 1;
    return nncl_trainer_create(ctx, m->g, m->loss, &c, &m->t) != NNCL_OK;
}

static void tio_free(tio_model *m) {
    nncl_trainer_free(m->t);
    nncl_graph_free(m->g);
}

static int test_from_pytorch(nncl_context *ctx, int d) {
    char name[160];
    tio_model m;
    nncl_safetensors *st = NULL;
    const float *in, *want;
    int64_t is[2] = {5, 6}, ls[2] = {5, 3};
    float got[15];
    nncl_feed f;
    double num = 0, den = 0;
    int k;
    snprintf(name, sizeof name, "a PyTorch model loads and gives PyTorch's logits on %s", th_device_label(ctx, d));
    TH_CHECK(name, tio_build(ctx, d, 8, &m, 0) == 0);
    TH_OK(name, ctx, nncl_trainer_load(m.t, "tests/data/torch_mlp.safetensors"));
    TH_OK(name, NULL, nncl_safetensors_load("tests/data/torch_mlp.safetensors", &st));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "check.input", 2, is, &in));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "check.logits", 2, ls, &want));
    f.node = m.x;
    f.data = in;
    TH_OK(name, ctx, nncl_trainer_predict(m.t, &f, 1, 5, m.logits, got));
    for (k = 0; k < 15; k++) {
        num += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
        den += (double)want[k] * want[k];
    }
    TH_CHECK(name, num / den < 1e-10);
    nncl_safetensors_free(st);
    tio_free(&m);
    th_pass("%s (normalised squared error %.2g)", name, num / den);
    return 0;
}

static int test_round_trip_and_refusal(nncl_context *ctx) {
    const char *name = "save/load round trip; a model of another shape is refused and changes nothing";
    tio_model a, b, wide;
    char path[64];
    float pa[256], pb[256], before[256];
    snprintf(path, sizeof path, "/tmp/nncl-tio-%ld.safetensors", (long)getpid());
    TH_CHECK(name, tio_build(ctx, 0, 8, &a, 0) == 0 && tio_build(ctx, 0, 8, &b, 0) == 0);
    TH_CHECK(name, tio_build(ctx, 0, 9, &wide, 0) == 0);
    TH_OK(name, ctx, nncl_trainer_load(a.t, "tests/data/torch_mlp.safetensors"));
    TH_OK(name, ctx, nncl_trainer_save(a.t, path));
    TH_OK(name, ctx, nncl_trainer_load(b.t, path));
    TH_CHECK(name, a.g->n_params < 256 && !nncl__trainer_download(a.t, pa, NULL) && !nncl__trainer_download(b.t, pb, NULL));
    TH_CHECK(name, memcmp(pa, pb, a.g->n_params * sizeof(float)) == 0);
    TH_CHECK(name, !nncl__trainer_download(wide.t, before, NULL));
    TH_CHECK(name, nncl_trainer_load(wide.t, path) == NNCL_ERR_SHAPE);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "fc1.weight") != NULL);
    TH_CHECK(name, !nncl__trainer_download(wide.t, pb, NULL));
    TH_CHECK(name, memcmp(before, pb, wide.g->n_params * sizeof(float)) == 0);
    TH_CHECK(name, nncl_trainer_load(a.t, "/nonexistent/model.safetensors") == NNCL_ERR_IO);
    remove(path);
    tio_free(&a);
    tio_free(&b);
    tio_free(&wide);
    th_pass("%s", name);
    return 0;
}

/* A model file in F16 or BF16 holds every weight rounded to nearest even
 * (the rounding test_safetensors checks against PyTorch's) and loads back
 * as those values; a checkpoint keeps fp32. */
static int test_half_files(nncl_context *ctx) {
    const char *name = "save_model in F16 and BF16: each weight rounded, loads back; checkpoints stay F32";
    tio_model a, b;
    char path[64];
    float pa[256], pb[256];
    nncl_model_meta meta = nncl_model_meta_default();
    int k, i;
    snprintf(path, sizeof path, "/tmp/nncl-tio-half-%ld.safetensors", (long)getpid());
    TH_CHECK(name, tio_build(ctx, 0, 8, &a, 0) == 0 && tio_build(ctx, 0, 8, &b, 0) == 0);
    TH_OK(name, ctx, nncl_trainer_load(a.t, "tests/data/torch_mlp.safetensors"));
    TH_CHECK(name, a.g->n_params < 256 && !nncl__trainer_download(a.t, pa, NULL));
    for (k = 0; k < 3; k++) {
        nncl_safetensors *st = NULL;
        nncl_safetensors_entry e;
        meta.dtype = k == 0 ? NNCL_PRECISION_FP16 : NNCL_PRECISION_BF16;
        if (k < 2) TH_OK(name, ctx, nncl_trainer_save_model(a.t, path, &meta));
        else TH_OK(name, ctx, nncl_trainer_save_checkpoint(a.t, path));
        TH_OK(name, NULL, nncl_safetensors_load(path, &st));
        for (i = 0; i < nncl_safetensors_count(st); i++) {
            TH_OK(name, NULL, nncl_safetensors_get(st, i, &e));
            TH_CHECK(name, strcmp(e.dtype, k == 0 ? "F16" : k == 1 ? "BF16" : "F32") == 0);
        }
        nncl_safetensors_free(st);
        TH_OK(name, ctx, k < 2 ? nncl_trainer_load(b.t, path) : nncl_trainer_load_checkpoint(b.t, path));
        TH_CHECK(name, !nncl__trainer_download(b.t, pb, NULL));
        for (i = 0; i < (int)a.g->n_params; i++) {
            float want = k == 0 ? nncl__f16_to_f32(nncl__f32_to_f16(pa[i]))
                         : k == 1 ? nncl__bf16_to_f32(nncl__f32_to_bf16(pa[i])) : pa[i];
            TH_CHECK(name, memcmp(&want, &pb[i], 4) == 0);
            TH_CHECK(name, k == 2 || fabsf(pb[i] - pa[i]) <= fabsf(pa[i]) * (k == 0 ? 1.0f / 2048 : 1.0f / 256) + 1e-7f);
        }
    }
    meta.dtype = (nncl_precision)5;
    TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT);
    remove(path);
    {
        /* metadata that nncl_model_load() would refuse, or with which the
         * model could not predict, is refused before anything is written */
        static const char *const names[5] = {"a", "b", "c", "d", "e"};
        float mean[6] = {0, 0, 0, 0, 0, 0}, sd[6] = {1, 0, 1, 1, 1, 1};
        FILE *f;
        meta = nncl_model_meta_default();
        meta.class_names = names;
        meta.n_classes = 5; /* fc2 has 3 */
        TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT &&
                           strstr(nncl_last_error(ctx), "5 class names"));
        meta = nncl_model_meta_default();
        meta.mean = mean;
        meta.std = sd;
        TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT &&
                           strstr(nncl_last_error(ctx), "std[1]"));
        meta = nncl_model_meta_default();
        meta.input = a.y; /* the labels: fc2 is computed from x */
        TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT &&
                           strstr(nncl_last_error(ctx), "needs input \"x\""));
        meta.input = b.x; /* of another graph */
        TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT);
        meta = nncl_model_meta_default();
        meta.output = nncl_graph_find(a.g, "fc1"); /* [B,8]: fine, 8 classes */
        TH_OK(name, ctx, nncl_trainer_save_model(a.t, path, &meta));
        remove(path);
        meta.output = a.loss; /* a scalar */
        TH_CHECK(name, nncl_trainer_save_model(a.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT);
        TH_CHECK(name, (f = fopen(path, "rb")) == NULL);
        if (f) fclose(f);
    }
    tio_free(&a);
    tio_free(&b);
    th_pass("%s", name);
    return 0;
}

static int test_freeze(nncl_context *ctx) {
    const char *name = "frozen parameters get no update and no gradient buffer";
    tio_model m;
    float w0[48], w1[48], v0[24], v1[24], x[8 * 6], y[8];
    nncl_feed f[2];
    int i;
    unsigned seed = 3;
    TH_CHECK(name, tio_build(ctx, 0, 8, &m, 1) == 0);
    TH_CHECK(name, m.g->n_trainable == 27 && m.g->n_params == 83); /* fc2 only: 8*3 + 3 */
    TH_CHECK(name, m.t->plan[0]->ex.grad[nncl_graph_find(m.g, "fc1.weight")->id].mem == NULL);
    th_fill_uniform(x, 48, -1, 1, &seed);
    for (i = 0; i < 8; i++) y[i] = (float)(i % 3);
    f[0].node = m.x; f[0].data = x;
    f[1].node = m.y; f[1].data = y;
    TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc1.weight", w0, 48));
    TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc2.weight", v0, 24));
    for (i = 0; i < 5; i++) TH_OK(name, ctx, nncl_trainer_step(m.t, f, 2, 8, NULL));
    TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc1.weight", w1, 48));
    TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc2.weight", v1, 24));
    TH_CHECK(name, memcmp(w0, w1, sizeof w0) == 0);
    TH_CHECK(name, memcmp(v0, v1, sizeof v0) != 0);
    tio_free(&m);
    th_pass("%s", name);
    return 0;
}

/* A PyTorch CNN with batch norm (tests/data/torch_bn.safetensors, made by
 * make_torch_bn.py): its state dict holds num_batches_tracked as I64. It
 * loads, gives PyTorch's evaluation logits, and its batch count survives a
 * save and a load. */
static int test_pytorch_batchnorm(nncl_context *ctx) {
    const char *name = "a PyTorch state dict with batch norm (num_batches_tracked I64) loads and round-trips";
    nncl_safetensors *st = NULL;
    nncl_graph *g[2];
    nncl_node *x[2], *logits[2], *loss[2];
    nncl_trainer *t[2] = {NULL, NULL};
    nncl_train_config c = nncl_train_default();
    const float *in, *want, *tracked;
    int64_t is[4] = {5, 1, 6, 6}, ls[2] = {5, 3}, none[1] = {0};
    int xs[3] = {1, 6, 6}, k, d = 0;
    float got[15], p0[600], p1[600], s0[8], s1[8];
    char path[64];
    double num = 0, den = 0;
    snprintf(path, sizeof path, "/tmp/nncl-tio-bn-%ld.safetensors", (long)getpid());
    c.max_batch = 5;
    c.devices = &d;
    c.n_devices = 1;
    for (k = 0; k < 2; k++) {
        nncl_node *h, *y;
        g[k] = nncl_graph_create(ctx, 5);
        x[k] = nncl_input(g[k], "x", 3, xs);
        y = nncl_input(g[k], "y", 0, NULL);
        h = nncl_conv2d(g[k], x[k], 4, 3, 1, 1, 1, NNCL_ACT_NONE, "conv1");
        h = nncl_flatten(g[k], nncl_op_relu(g[k], nncl_batchnorm(g[k], h, 0.1f, 1e-5f, "bn1")));
        logits[k] = nncl_linear(g[k], h, 3, 1, NNCL_ACT_NONE, "fc");
        loss[k] = nncl_softmax_cross_entropy(g[k], logits[k], y);
        TH_CHECK(name, loss[k] != NULL);
        TH_OK(name, ctx, nncl_trainer_create(ctx, g[k], loss[k], &c, &t[k]));
    }
    TH_OK(name, ctx, nncl_trainer_load(t[0], "tests/data/torch_bn.safetensors"));
    TH_CHECK(name, t[0]->tracked == 5);
    TH_OK(name, NULL, nncl_safetensors_load("tests/data/torch_bn.safetensors", &st));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "check.input", 4, is, &in));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "check.logits", 2, ls, &want));
    {
        nncl_feed f;
        f.node = x[0];
        f.data = in;
        TH_OK(name, ctx, nncl_trainer_predict(t[0], &f, 1, 5, logits[0], got));
    }
    for (k = 0; k < 15; k++) {
        num += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
        den += (double)want[k] * want[k];
    }
    TH_CHECK(name, num / den < 1e-10);
    nncl_safetensors_free(st);
    /* nncl's own file: the count and every value come back */
    TH_OK(name, ctx, nncl_trainer_save(t[0], path));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "bn1.num_batches_tracked", 0, none, &tracked));
    TH_CHECK(name, tracked[0] == 5.0f);
    nncl_safetensors_free(st);
    TH_OK(name, ctx, nncl_trainer_load(t[1], path));
    TH_CHECK(name, t[1]->tracked == 5 && g[0]->n_params <= 600 && g[0]->n_state <= 8);
    TH_CHECK(name, !nncl__trainer_download(t[0], p0, s0) && !nncl__trainer_download(t[1], p1, s1));
    TH_CHECK(name, memcmp(p0, p1, g[0]->n_params * 4) == 0 && memcmp(s0, s1, g[0]->n_state * 4) == 0);
    remove(path);
    for (k = 0; k < 2; k++) {
        nncl_trainer_free(t[k]);
        nncl_graph_free(g[k]);
    }
    th_pass("%s (normalised squared error %.2g)", name, num / den);
    return 0;
}

/* Copies checkpoint src to dst with metadata key set to value. */
static int tio_rewrite(const char *src, const char *dst, const char *key, const char *value) {
    nncl_safetensors *st = NULL;
    nncl_safetensors_entry e[16];
    const char *meta[33];
    int i, n, k = 0;
    if (nncl_safetensors_load(src, &st) != NNCL_OK) return 1;
    n = nncl_safetensors_count(st);
    for (i = 0; i < n && i < 16; i++) nncl_safetensors_get(st, i, &e[i]);
    for (i = 0; i < nncl_safetensors_meta_count(st) && k < 30; i++) {
        nncl_safetensors_meta_at(st, i, &meta[k], &meta[k + 1]);
        if (strcmp(meta[k], key) == 0) meta[k + 1] = value;
        k += 2;
    }
    meta[k] = NULL;
    i = nncl_safetensors_save(dst, e, n, meta) != NNCL_OK;
    nncl_safetensors_free(st);
    return i;
}

static int test_checkpoint_meta(nncl_context *ctx) {
    const char *name = "checkpoint metadata: step and tracked whole numbers in range, optimizer the trainer's";
    static const char *bad[][2] = {{"nncl.step", "-1"},           {"nncl.step", "9223372036854775807"},
                                   {"nncl.step", "abc"},          {"nncl.step", ""},
                                   {"nncl.step", "12 "},          {"nncl.tracked", "1e3"},
                                   {"nncl.tracked", "9007199254740993"}, {"nncl.optimizer", "3"}};
    tio_model sgd, rms;
    char ckpt[64], edited[80];
    float x[8 * 6] = {0}, y[8] = {0};
    nncl_feed f[2];
    size_t i;
    snprintf(ckpt, sizeof ckpt, "/tmp/nncl-tio-%ld.ckpt", (long)getpid());
    snprintf(edited, sizeof edited, "%s.edited", ckpt);
    tio_optim = nncl_optim_default(NNCL_OPT_SGD);
    tio_optim.lr = 0.1f;
    tio_optim.momentum = 0.9f;
    TH_CHECK(name, tio_build(ctx, 0, 8, &sgd, 0) == 0);
    tio_optim = nncl_optim_default(NNCL_OPT_RMSPROP);
    TH_CHECK(name, tio_build(ctx, 0, 8, &rms, 0) == 0);
    tio_optim.lr = 0;
    TH_CHECK(name, sgd.t->opt_floats == rms.t->opt_floats); /* same state size: only the kind tells them apart */
    f[0].node = sgd.x; f[0].data = x;
    f[1].node = sgd.y; f[1].data = y;
    TH_OK(name, ctx, nncl_trainer_step(sgd.t, f, 2, 8, NULL));
    TH_OK(name, ctx, nncl_trainer_save_checkpoint(sgd.t, ckpt));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TH_CHECK(name, tio_rewrite(ckpt, edited, bad[i][0], bad[i][1]) == 0);
        if (nncl_trainer_load_checkpoint(sgd.t, edited) != NNCL_ERR_FORMAT || !strstr(nncl_last_error(ctx), bad[i][0])) {
            th_fail(name, "%s = \"%s\" was not refused naming the field: %s", bad[i][0], bad[i][1], nncl_last_error(ctx));
            return 1;
        }
        TH_CHECK(name, nncl_trainer_step_count(sgd.t) == 1);
    }
    TH_CHECK(name, nncl_trainer_load_checkpoint(rms.t, ckpt) == NNCL_ERR_FORMAT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "nncl.optimizer") != NULL && nncl_trainer_step_count(rms.t) == 0);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "by the SGD optimizer") && strstr(nncl_last_error(ctx), "is RMSprop"));
    TH_CHECK(name, tio_rewrite(ckpt, edited, "nncl.step", "12") == 0);
    TH_OK(name, ctx, nncl_trainer_load_checkpoint(sgd.t, edited));
    TH_CHECK(name, nncl_trainer_step_count(sgd.t) == 12);
    TH_OK(name, ctx, nncl_trainer_step(sgd.t, f, 2, 8, NULL));
    remove(ckpt);
    remove(edited);
    tio_free(&sgd);
    tio_free(&rms);
    th_pass("%s", name);
    return 0;
}

/* The text of a float reads back as that float, bit for bit: every power
 * of two of the float range and its negative, denormals, the ends of the
 * range and random bit patterns. */
static int tio_float_back(float x) {
    char buf[40], *end;
    float y;
    nncl__fmt_float(buf, sizeof buf, x);
    y = nncl__parse_float(buf, &end);
    return !*end && memcmp(&x, &y, sizeof x) == 0;
}

static int test_float_text(void) {
    const char *name = "every float written as text reads back bit for bit";
    static const float ends[] = {FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, 0.1f, 1.0f / 3, 0x1p-13f, 0x1p30f, 0.0f, -0.0f};
    unsigned seed = 11, k;
    long n = 0;
    int e;
    for (e = -149; e <= 127; e++, n += 2)
        if (!tio_float_back(ldexpf(1.0f, e)) || !tio_float_back(-ldexpf(1.0f, e))) {
            th_fail(name, "2^%d does not read back", e);
            return 1;
        }
    for (k = 0; k < sizeof ends / sizeof ends[0]; k++, n++) TH_CHECK(name, tio_float_back(ends[k]));
    for (k = 0; k < 200000; k++, n++) {
        uint32_t bits;
        float x;
        seed = seed * 1103515245u + 12345u;
        bits = seed ^ (seed << 13) ^ (k * 2654435761u);
        if (k & 1) bits &= 0x807fffffu; /* a denormal */
        memcpy(&x, &bits, sizeof x);
        if (!isfinite(x)) continue;
        if (!tio_float_back(x)) {
            th_fail(name, "%a does not read back", (double)x);
            return 1;
        }
    }
    th_pass("%s (%ld values)", name, n);
    return 0;
}

/* A model file's preprocessing floats come back exactly: rows preprocessed
 * by the loaded model equal rows preprocessed with the saved floats. */
static int test_model_floats(nncl_context *ctx) {
    const char *name = "a model file's scale, shift, mean and std read back exactly";
    static const float mean[6] = {FLT_MAX, 0x1p-149f, 0.1f, -1.0f / 3, 0x1p-13f, 123456.789f};
    static const float std[6] = {0x1p100f, 0x1p-126f, 3.0f / 7, 1e-30f, 0x1p30f, 0.7f};
    tio_model a;
    nncl_model *m = NULL;
    nncl_model_meta meta = nncl_model_meta_default();
    char path[64];
    float rows[6], want[6];
    int j;
    snprintf(path, sizeof path, "/tmp/nncl-tio-%ld.model", (long)getpid());
    TH_CHECK(name, tio_build(ctx, 0, 8, &a, 0) == 0);
    meta.scale = 1.0f / 255;
    meta.shift = -0x1p-140f;
    meta.mean = mean;
    meta.std = std;
    TH_OK(name, ctx, nncl_trainer_save_model(a.t, path, &meta));
    TH_OK(name, ctx, nncl_model_load(ctx, path, 4, &m));
    for (j = 0; j < 6; j++) {
        rows[j] = (float)(j + 1);
        want[j] = ((float)(j + 1) * meta.scale + meta.shift - mean[j]) / std[j];
    }
    TH_OK(name, ctx, nncl_model_preprocess(m, rows, 1));
    TH_CHECK(name, memcmp(rows, want, sizeof rows) == 0);
    nncl_model_free(m);
    remove(path);
    tio_free(&a);
    th_pass("%s", name);
    return 0;
}

/* ------------------------------------------------------------- files that declare much */

/* A model file: the description of g, the tensors of g's parameters whose
 * names do not start with skip (NULL: all), each filled with its index. */
static int tio_write_model(nncl_graph *g, const char *skip, const char *path) {
    char *text = nncl__graph_describe(g);
    const char *meta[] = {"nncl.graph", text, NULL};
    nncl_safetensors_entry *e = (nncl_safetensors_entry *)calloc((size_t)g->n_nodes, sizeof *e);
    float *v;
    size_t total = 0, off = 0;
    int i, k, n = 0, bad;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_PARAM && !(skip && !strncmp(g->nodes[i]->name, skip, strlen(skip))))
            total += g->nodes[i]->sample_numel;
    v = (float *)calloc(total + 1, sizeof(float));
    for (i = 0; text && e && v && i < g->n_nodes; i++) {
        const nncl_node *p = g->nodes[i];
        if (p->op != NNCL_OP_PARAM || (skip && !strncmp(p->name, skip, strlen(skip)))) continue;
        e[n].name = p->name;
        e[n].ndim = p->ndim;
        for (k = 0; k < p->ndim; k++) e[n].shape[k] = p->shape[k];
        for (k = 0; k < (int)p->sample_numel; k++) v[off + (size_t)k] = (float)i;
        e[n++].data = v + off;
        off += p->sample_numel;
    }
    bad = !text || !e || !v || nncl_safetensors_save(path, e, n, meta) != NNCL_OK;
    NNCL_FREE(text);
    free(e);
    free(v);
    return bad;
}

/* x [4] -> fc [3], softmax cross-entropy with y, and `extra` more
 * parameters of `numel` floats each, named p0, p1, ... */
static nncl_graph *tio_wide_graph(nncl_context *ctx, int extra, int numel) {
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int xs[1] = {4}, k;
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL);
    for (k = 0; k < extra; k++) {
        char pn[32];
        snprintf(pn, sizeof pn, "p%d", k);
        if (!nncl_param(g, pn, 1, &numel, NNCL_INIT_ZEROS, 0)) break;
    }
    if (k < extra || !nncl_softmax_cross_entropy(g, nncl_linear(g, x, 3, 1, NNCL_ACT_NONE, "fc"), y)) {
        nncl_graph_free(g);
        return NULL;
    }
    return g;
}

#ifndef __SANITIZE_ADDRESS__
/* The process's address space now (VmSize), in bytes; 0 if unknown. */
static size_t tio_vm_size(void) {
    char line[256];
    size_t kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}
#endif

/* A 2-KB file whose description declares a parameter of 2^28 floats (1
 * GiB) it does not hold is refused for the missing tensor before the
 * trainer allocates and initialises them: the load runs with the address
 * space capped at 256 MiB more than it is (where AddressSanitizer, whose
 * allocator reserves memory of its own, is not in the build). */
static int test_small_file_huge_param(nncl_context *ctx) {
    const char *name = "a small model file declaring 2^28 floats it lacks is refused for the missing tensor";
    const char *capped = "a small model file declaring 2^28 floats is refused within 256 MiB more address space";
    nncl_graph *g;
    nncl_model *m = NULL;
    nncl_status s;
    int have_cap = 0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/nncl-tio-%ld.huge", (long)getpid());
    TH_CHECK(name, (g = tio_wide_graph(ctx, 1, 1 << 28)) != NULL);
    TH_CHECK(name, tio_write_model(g, "p", path) == 0); /* fc's tensors alone */
    nncl_graph_free(g);
#ifndef __SANITIZE_ADDRESS__
    {
        struct rlimit old, cap;
        size_t vm = tio_vm_size();
        if (vm && getrlimit(RLIMIT_AS, &old) == 0) {
            cap = old;
            cap.rlim_cur = (rlim_t)(vm + ((size_t)256 << 20));
            have_cap = (old.rlim_cur == RLIM_INFINITY || cap.rlim_cur < old.rlim_cur) &&
                       setrlimit(RLIMIT_AS, &cap) == 0;
        }
        s = nncl_model_load(ctx, path, 4, &m);
        if (have_cap) setrlimit(RLIMIT_AS, &old);
    }
#else
    s = nncl_model_load(ctx, path, 4, &m);
#endif
    remove(path);
    TH_CHECK(name, s == NNCL_ERR_FORMAT && !m);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "'p0'") != NULL);
    th_pass("%s: %s", name, nncl_last_error(ctx));
    if (have_cap) th_pass("%s", capped);
    else th_skip(capped, "no address-space cap (AddressSanitizer, or no /proc/self/status)");
    return 0;
}

/* A file of 99990 parameters (and the graph's other nodes: the most a
 * description holds) loads, each to its value. */
static int test_many_params(nncl_context *ctx) {
    const char *name = "a model file of 99990 parameters loads, each to its own value";
    nncl_graph *g;
    nncl_model *m = NULL;
    char path[64];
    float v[1];
    int k;
    snprintf(path, sizeof path, "/tmp/nncl-tio-%ld.many", (long)getpid());
    TH_CHECK(name, (g = tio_wide_graph(ctx, 99990, 1)) != NULL);
    TH_CHECK(name, tio_write_model(g, NULL, path) == 0);
    nncl_graph_free(g);
    TH_OK(name, ctx, nncl_model_load(ctx, path, 4, &m));
    remove(path);
    for (k = 0; k < 99990; k += 33330) {
        char pn[32];
        snprintf(pn, sizeof pn, "p%d", k);
        TH_OK(name, ctx, nncl_trainer_param_get(nncl_model_trainer(m), pn, v, 1));
        TH_CHECK(name, v[0] == (float)(k + 2)); /* node k + 2: after x and y */
    }
    nncl_model_free(m);
    th_pass("%s", name);
    return 0;
}

/* Only a normalisation's own counter is num_batches_tracked: a parameter
 * whose name merely contains ".num_batches_tracked" is loaded as any other
 * (it was skipped as optional and kept its initial values). */
static int test_counter_lookalike(nncl_context *ctx) {
    const char *name = "a parameter named like a batch-norm counter is saved and loaded";
    int in[1] = {2}, d = 0, i;
    const float want[4] = {1, 2, 3, 4};
    float got[4];
    char path[64];
    nncl_trainer *t[2] = {NULL, NULL};
    nncl_graph *g[2];
    nncl_train_config c = nncl_train_default();
    c.max_batch = 4;
    c.devices = &d;
    c.n_devices = 1;
    snprintf(path, sizeof path, "/tmp/nncl-tio-nbt-%ld.safetensors", (long)getpid());
    for (i = 0; i < 2; i++) {
        nncl_node *x, *y, *loss;
        g[i] = nncl_graph_create(ctx, 5 + (uint64_t)i);
        x = nncl_input(g[i], "x", 1, in);
        y = nncl_input(g[i], "y", 0, NULL);
        loss = nncl_softmax_cross_entropy(g[i], nncl_linear(g[i], x, 2, 1, NNCL_ACT_NONE, "block.num_batches_tracked"), y);
        TH_CHECK(name, loss != NULL);
        TH_OK(name, ctx, nncl_trainer_create(ctx, g[i], loss, &c, &t[i]));
    }
    TH_OK(name, ctx, nncl_trainer_param_set(t[0], "block.num_batches_tracked.weight", want, 4));
    TH_OK(name, ctx, nncl_trainer_save(t[0], path));
    TH_OK(name, ctx, nncl_trainer_load(t[1], path));
    TH_OK(name, ctx, nncl_trainer_param_get(t[1], "block.num_batches_tracked.weight", got, 4));
    remove(path);
    TH_CHECK(name, memcmp(got, want, sizeof want) == 0);
    for (i = 0; i < 2; i++) {
        nncl_trainer_free(t[i]);
        nncl_graph_free(g[i]);
    }
    th_pass("%s", name);
    return 0;
}

/* A sequence model (logits [B, T, V], the sequence cross-entropy) saved
 * with a vocabulary as its class names: nncl_model_load rebuilds it, its
 * input and output nodes give the trainer's logits, and
 * nncl_model_predict gives the softmax and argmax of every position. */
static int test_sequence_model(nncl_context *ctx) {
    const char *name = "a sequence model file: output [B,T,V], vocabulary, per-position probabilities";
    static const char *const vocab[5] = {"a", "b", "\n", " ", "\""};
    nncl_train_config c = nncl_train_default();
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_graph *g = nncl_graph_create(ctx, 5);
    nncl_node *idx, *tgt, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_model *m = NULL;
    nncl_feed f;
    int T = 3, V = 5, shape[2], classes[6], k, r, ok = 1, argok = 1;
    char path[64];
    float rows[6] = {0, 1, 2, 4, 3, 0}, z[30], probs[30];
    snprintf(path, sizeof path, "/tmp/nncl-tio-seq-%ld.safetensors", (long)getpid());
    idx = nncl_input(g, "idx", 1, &T);
    tgt = nncl_input(g, "targets", 1, &T);
    logits = nncl_linear(g, nncl_embedding(g, idx, V, 4, "wte"), V, 1, NNCL_ACT_NONE, "head");
    loss = nncl_sequence_cross_entropy(g, logits, tgt, -1);
    TH_CHECK(name, loss != NULL);
    c.max_batch = 2;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f.node = idx;
    f.data = rows;
    TH_OK(name, ctx, nncl_trainer_predict(t, &f, 1, 2, logits, z));
    meta.input = idx;
    meta.output = logits;
    meta.class_names = vocab;
    meta.n_classes = 3; /* not the vocabulary's 5 */
    TH_CHECK(name, nncl_trainer_save_model(t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT);
    meta.n_classes = V;
    TH_OK(name, ctx, nncl_trainer_save_model(t, path, &meta));
    nncl_trainer_free(t);
    nncl_graph_free(g);
    TH_OK(name, ctx, nncl_model_load(ctx, path, 2, &m));
    remove(path);
    TH_CHECK(name, nncl_model_classes(m) == V && nncl_model_input_shape(m, shape) == 1 && shape[0] == T);
    TH_CHECK(name, nncl_node_shape(nncl_model_output(m), shape) == 2 && shape[0] == T && shape[1] == V);
    for (k = 0; k < V; k++) ok &= !strcmp(nncl_model_class_name(m, k), vocab[k]);
    TH_CHECK(name, ok);
    th_poison(probs, 30);
    if (nncl_model_predict(m, rows, 2, probs, classes) != NNCL_OK) {
        nncl_model_free(m);
        TH_CHECK(name, 0);
    }
    nncl_model_free(m);
    for (r = 0; r < 6; r++) { /* each of the 2 x 3 positions against the saved trainer's logits */
        double mx = z[r * V], sum = 0;
        int arg = 0;
        for (k = 1; k < V; k++)
            if (z[r * V + k] > z[r * V + arg]) arg = k;
        mx = z[r * V + arg];
        for (k = 0; k < V; k++) sum += exp(z[r * V + k] - mx);
        for (k = 0; k < V; k++) ok &= fabs(probs[r * V + k] - exp(z[r * V + k] - mx) / sum) < 1e-6;
        argok &= classes[r] == arg;
    }
    TH_CHECK(name, ok && argok);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    int d;
    if (!ctx) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx); d++) test_from_pytorch(ctx, d);
    test_round_trip_and_refusal(ctx);
    test_half_files(ctx);
    test_freeze(ctx);
    test_checkpoint_meta(ctx);
    test_float_text();
    test_model_floats(ctx);
    test_small_file_huge_param(ctx);
    test_many_params(ctx);
    test_pytorch_batchnorm(ctx);
    test_counter_lookalike(ctx);
    test_sequence_model(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
