/* test_fit.c - the training workflow on every device: a model file rebuilt
 * into a graph and used for prediction from raw rows (its preprocessing and
 * class names with it; a NaN or Inf row or weight predicts no class;
 * metadata the saver refuses is refused by the loader), the model summary,
 * the validation split with training accuracy, early stopping, keep-best,
 * and a run interrupted and resumed from its checkpoint that ends bit for
 * bit as the uninterrupted run. */
#include "harness.h"
#include "train/trainer.h" /* the failure injection of two-device runs */
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TF_N 240
#define TF_D 4
#define TF_C 3

/* Files go to $TMPDIR (else /tmp), never into the source folder. */
static const char *tf_tmp(void) {
    const char *d = getenv("TMPDIR");
    return d && *d && strlen(d) < 100 ? d : "/tmp";
}

typedef struct tf_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    nncl_trainer *t;
} tf_model;

/* Three blobs in 4-D, raw values around 50 (so that standardising matters). */
static nncl_dataset *tf_data(void) {
    static float x[TF_N * TF_D], y[TF_N];
    nncl_dataset *ds = NULL;
    unsigned seed = 11;
    int i, j, shape[1] = {TF_D};
    for (i = 0; i < TF_N; i++) {
        y[i] = (float)(i % TF_C);
        for (j = 0; j < TF_D; j++) x[i * TF_D + j] = 50 + 10 * (float)((i % TF_C) == j) + 4 * (th_uniform(&seed) - 0.5f);
    }
    if (nncl_dataset_create(TF_N, 1, shape, x, y, TF_C, &ds) != NNCL_OK) return NULL;
    return ds;
}

static float tf_scale; /* nonzero: tf_build_ex's trainers scale the loss, from this scale */

/* With plain set: no batch norm or dropout, so that lr 0 changes nothing. */
static int tf_build_ex(nncl_context *ctx, int d, tf_model *m, nncl_optimizer opt, float lr, int plain) {
    int in[1] = {TF_D};
    nncl_train_config c = nncl_train_default();
    nncl_node *h;
    memset(m, 0, sizeof *m);
    m->g = nncl_graph_create(ctx, 5);
    m->x = nncl_input(m->g, "x", 1, in);
    m->y = nncl_input(m->g, "y", 0, NULL);
    h = nncl_linear(m->g, m->x, 16, 1, NNCL_ACT_RELU, "fc1");
    if (!plain) h = nncl_dropout(m->g, nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn1"), 0.2f);
    m->logits = nncl_linear(m->g, h, TF_C, 1, NNCL_ACT_NONE, "fc2");
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    if (!m->loss) return 1;
    c.max_batch = 16;
    c.devices = &d;
    c.n_devices = 1;
    c.optim = nncl_optim_default(opt);
    c.optim.lr = lr;
    c.loss_scaling = tf_scale > 0 ? 1 : 0;
    c.loss_scale_init = tf_scale;
    return nncl_trainer_create(ctx, m->g, m->loss, &c, &m->t) != NNCL_OK;
}

static int tf_build(nncl_context *ctx, int d, tf_model *m, nncl_optimizer opt, float lr) {
    return tf_build_ex(ctx, d, m, opt, lr, 0);
}

static void tf_free(tf_model *m) {
    nncl_trainer_free(m->t);
    nncl_graph_free(m->g);
}

static nncl_fit_config tf_fit(tf_model *m, int epochs) {
    nncl_fit_config f = nncl_fit_default();
    f.epochs = epochs;
    f.batch = 16;
    f.seed = 3;
    f.x = m->x;
    f.labels = m->y;
    f.logits = m->logits;
    f.val_fraction = 0.25;
    return f;
}

/* All parameters and running statistics, in graph order. */
static int tf_params(tf_model *m, float *out, size_t cap, size_t *n) {
    static const char *names[] = {"fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                  "bn1.running_var", "fc2.weight", "fc2.bias"};
    static const size_t sizes[] = {64, 16, 16, 16, 16, 16, 48, 3};
    size_t k, used = 0;
    for (k = 0; k < 8; k++) {
        if (used + sizes[k] > cap || nncl_trainer_param_get(m->t, names[k], out + used, sizes[k]) != NNCL_OK) return 1;
        used += sizes[k];
    }
    *n = used;
    return 0;
}

static int test_model_file(nncl_context *ctx, int d, nncl_dataset *raw) {
    char name[200], path[160];
    static const char *classes[TF_C] = {"setosa", "vers,\"icolor\"", "virgin\xc3\xa9"};
    tf_model m;
    nncl_fit_config f;
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_model *model = NULL;
    nncl_dataset *ds = NULL;
    float mean[TF_D], std[TF_D], probs[TF_N * TF_C], logits[16 * TF_C];
    int cls[TF_N], i, c, agree = 0, shape[3];
    snprintf(name, sizeof name, "a saved model is rebuilt from its file and predicts raw rows on %s", th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_model_%d.safetensors", tf_tmp(), (int)getpid());
    TH_CHECK(name, tf_build(ctx, d, &m, NNCL_OPT_ADAM, 0.01f) == 0);
    TH_OK(name, NULL, nncl_dataset_stats(raw, mean, std));
    {
        size_t idx[TF_N];
        for (i = 0; i < TF_N; i++) idx[i] = (size_t)i;
        TH_OK(name, NULL, nncl_dataset_subset(raw, idx, TF_N, &ds));
    }
    TH_OK(name, NULL, nncl_dataset_standardize(ds, mean, std));
    f = tf_fit(&m, 3);
    TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
    meta.mean = mean;
    meta.std = std;
    meta.class_names = classes;
    meta.n_classes = TF_C;
    meta.label_name = "kind";
    TH_OK(name, ctx, nncl_trainer_save_model(m.t, path, &meta));
    TH_OK(name, ctx, nncl_model_load(ctx, path, 16, &model));
    TH_CHECK(name, nncl_model_features(model) == TF_D && nncl_model_classes(model) == TF_C);
    TH_CHECK(name, nncl_model_input_shape(model, shape) == 1 && shape[0] == TF_D);
    for (c = 0; c < TF_C; c++) TH_CHECK(name, strcmp(nncl_model_class_name(model, c), classes[c]) == 0);
    TH_CHECK(name, strcmp(nncl_model_label_name(model), "kind") == 0);
    TH_OK(name, ctx, nncl_model_predict(model, nncl_dataset_x(raw), TF_N, probs, cls));
    /* The trainer's own logits on the standardised rows, 16 at a time. */
    for (i = 0; i < TF_N; i += 16) {
        nncl_feed fd;
        int r;
        fd.node = m.x;
        fd.data = nncl_dataset_x(ds) + (size_t)i * TF_D;
        TH_OK(name, ctx, nncl_trainer_predict(m.t, &fd, 1, 16, m.logits, logits));
        for (r = 0; r < 16; r++) {
            const float *z = logits + r * TF_C;
            double s = 0, mx = z[0], sum = 0;
            int arg = 0;
            for (c = 1; c < TF_C; c++)
                if (z[c] > z[arg]) arg = c;
            mx = z[arg];
            for (c = 0; c < TF_C; c++) s += exp(z[c] - mx);
            for (c = 0; c < TF_C; c++) {
                double p = exp(z[c] - mx) / s;
                TH_CHECK(name, fabs(probs[(i + r) * TF_C + c] - p) < 1e-5);
                sum += probs[(i + r) * TF_C + c];
            }
            TH_CHECK(name, fabs(sum - 1) < 1e-5);
            agree += cls[i + r] == arg;
        }
    }
    TH_CHECK(name, agree == TF_N);
    nncl_model_free(model);
    /* Only the description, without a context: everything is read and checked. */
    {
        nncl_safetensors *st = NULL;
        nncl_graph *g2 = NULL;
        TH_OK(name, NULL, nncl_safetensors_load(path, &st));
        TH_OK(name, NULL, nncl_model_from_safetensors(NULL, st, 0, &model));
        TH_CHECK(name, nncl_model_predict(model, nncl_dataset_x(raw), 1, probs, NULL) == NNCL_ERR_STATE);
        nncl_model_free(model);
        TH_OK(name, NULL, nncl_graph_from_safetensors(NULL, st, &g2));
        TH_CHECK(name, nncl_graph_find(g2, "bn1.running_mean") == NULL && nncl_graph_find(g2, "fc2.bias") != NULL);
        nncl_graph_free(g2);
        nncl_safetensors_free(st);
    }
    remove(path);
    /* A plain save carries the graph too; a weights-only file is refused with a reason. */
    TH_OK(name, ctx, nncl_trainer_save(m.t, path));
    TH_OK(name, ctx, nncl_model_load(ctx, path, 0, &model));
    TH_CHECK(name, nncl_model_class_name(model, 0) == NULL);
    nncl_model_free(model);
    {
        nncl_safetensors_entry e;
        float v = 1;
        memset(&e, 0, sizeof e);
        e.name = "w";
        e.ndim = 1;
        e.shape[0] = 1;
        e.data = &v;
        TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, NULL));
        TH_CHECK(name, nncl_model_load(ctx, path, 0, &model) == NNCL_ERR_FORMAT && !model);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "no model description") != NULL);
    }
    remove(path);
    nncl_dataset_free(ds);
    tf_free(&m);
    th_pass("%s", name);
    return 0;
}

/* A row of NaN or Inf, or a model with a NaN weight, predicts no class:
 * NNCL_ERR_NUMERIC naming the row, on the model's context (class 0 with
 * NaN probabilities and OK before). */
static int test_model_numeric(nncl_context *ctx, int d, nncl_dataset *raw) {
    char name[200], path[160];
    tf_model m;
    nncl_model *model = NULL;
    nncl_tensor *tmp = NULL;
    float rows[8 * TF_D], probs[8 * TF_C], w[TF_C * 16];
    int cls[8], k, neg[2] = {-1, 2};
    snprintf(name, sizeof name, "NaN or Inf rows and NaN weights predict no class, the row named, on %s",
             th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_nan_%d.safetensors", tf_tmp(), (int)getpid());
    TH_CHECK(name, tf_build_ex(ctx, d, &m, NNCL_OPT_SGD, 0.1f, 1) == 0);
    TH_OK(name, ctx, nncl_trainer_save_model(m.t, path, NULL));
    TH_OK(name, ctx, nncl_model_load(ctx, path, 4, &model));
    memcpy(rows, nncl_dataset_x(raw), sizeof rows);
    TH_OK(name, ctx, nncl_model_predict(model, rows, 8, probs, cls));
    for (k = 0; k < 2; k++) {
        rows[5 * TF_D + 1] = k ? (float)INFINITY : (float)NAN;
        TH_CHECK(name, nncl_tensor_create(ctx, 0, 2, neg, &tmp) != NNCL_OK); /* an older message on ctx */
        TH_CHECK(name, nncl_model_predict(model, rows, 8, probs, cls) == NNCL_ERR_NUMERIC);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "row 5: value 1 is") != NULL);
        TH_CHECK(name, strstr(nncl_last_error(ctx), k ? "infinite" : "NaN") != NULL);
    }
    nncl_model_free(model);
    memcpy(rows, nncl_dataset_x(raw), sizeof rows);
    TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc2.weight", w, TF_C * 16));
    w[17] = (float)NAN;
    TH_OK(name, ctx, nncl_trainer_param_set(m.t, "fc2.weight", w, TF_C * 16));
    TH_OK(name, ctx, nncl_trainer_save_model(m.t, path, NULL));
    TH_OK(name, ctx, nncl_model_load(ctx, path, 4, &model));
    remove(path);
    TH_CHECK(name, nncl_model_predict(model, rows, 8, NULL, cls) == NNCL_ERR_NUMERIC);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "row 0: output 1 is NaN") != NULL);
    nncl_model_free(model);
    tf_free(&m);
    th_pass("%s", name);
    return 0;
}

/* Copies model file src to dst with metadata key set to value (added when
 * absent; value NULL drops it). */
static int tf_rewrite(const char *src, const char *dst, const char *key, const char *value) {
    nncl_safetensors *st = NULL;
    nncl_safetensors_entry e[16];
    const char *meta[34];
    int i, n, k = 0, found = 0;
    if (nncl_safetensors_load(src, &st) != NNCL_OK) return 1;
    n = nncl_safetensors_count(st);
    for (i = 0; i < n && i < 16; i++) nncl_safetensors_get(st, i, &e[i]);
    for (i = 0; i < nncl_safetensors_meta_count(st) && k < 30; i++) {
        nncl_safetensors_meta_at(st, i, &meta[k], &meta[k + 1]);
        if (strcmp(meta[k], key) == 0) {
            found = 1;
            if (!value) continue;
            meta[k + 1] = value;
        }
        k += 2;
    }
    if (!found && value) meta[k++] = key, meta[k++] = value;
    meta[k] = NULL;
    i = n > 16 || nncl_safetensors_save(dst, e, n, meta) != NNCL_OK;
    nncl_safetensors_free(st);
    return i;
}

/* The loader asks of metadata what the saver asks of it: std only with
 * mean, nncl.input and nncl.output naming nodes (never a silent default),
 * an output computed from the input alone, and names without control
 * characters (a class name is printed by predict). */
static int test_model_metadata(nncl_context *ctx, int d, nncl_dataset *raw) {
    static const struct {
        const char *key, *value, *want;
    } bad[] = {{"nncl.mean", NULL, "nncl.std without nncl.mean"},
               {"nncl.input", "nope", "nncl.input = \"nope\" names no node"},
               {"nncl.output", "fc9", "nncl.output = \"fc9\" names no node"},
               {"nncl.classes", "[\"a\",\"b\\u001b[31m\",\"c\"]", "name 1 is not UTF-8 or holds a control"},
               {"nncl.classes", "[\"a\",\"b\x1b[31m\",\"c\"]", "name 1 is not UTF-8 or holds a control"},
               {"nncl.classes", "[\"a\",\"\\u009b2J\",\"c\"]", "name 1 is not UTF-8 or holds a control"},
               {"nncl.label", "kind\a", "nncl.label is too long, not UTF-8 or holds a control"}};
    static const char *classes[TF_C] = {"a", "b", "c"}, *escape[TF_C] = {"a", "red\x1b[0m", "c"};
    char name[200], path[160], path2[160];
    tf_model m;
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_model *model = NULL;
    nncl_safetensors *st = NULL;
    float mean[TF_D], std[TF_D];
    int i, fails = 0, in[1] = {TF_D}, zs[1] = {TF_C};
    snprintf(name, sizeof name, "model metadata the saver refuses is refused by the loader, with a message, on %s",
             th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_meta_%d.safetensors", tf_tmp(), (int)getpid());
    snprintf(path2, sizeof path2, "%s/tf_meta2_%d.safetensors", tf_tmp(), (int)getpid());
    TH_CHECK(name, tf_build_ex(ctx, d, &m, NNCL_OPT_SGD, 0.1f, 1) == 0);
    TH_OK(name, NULL, nncl_dataset_stats(raw, mean, std));
    meta.mean = mean;
    meta.std = std;
    meta.class_names = escape;
    meta.n_classes = TF_C;
    meta.label_name = "kind";
    TH_CHECK(name, nncl_trainer_save_model(m.t, path, &meta) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "class name 1") && strstr(nncl_last_error(ctx), "control character"));
    meta.class_names = classes;
    TH_OK(name, ctx, nncl_trainer_save_model(m.t, path, &meta));
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        if (tf_rewrite(path, path2, bad[i].key, bad[i].value)) {
            th_fail(name, "case %d: rewriting %s: %s", i, bad[i].key, nncl_last_error(NULL));
            return 1;
        }
        TH_OK(name, NULL, nncl_safetensors_load(path2, &st));
        if (nncl_model_from_safetensors(NULL, st, 0, &model) != NNCL_ERR_FORMAT || model) {
            th_fail(name, "case %d: %s = %s loads", i, bad[i].key, bad[i].value ? "a bad value" : "nothing");
            nncl_model_free(model);
            model = NULL;
            fails++;
            nncl_safetensors_free(st);
            continue;
        }
        nncl_safetensors_free(st);
        if (!strstr(nncl_last_error(NULL), bad[i].want)) {
            th_fail(name, "case %d: \"%s\" does not say \"%s\"", i, nncl_last_error(NULL), bad[i].want);
            fails++;
        }
    }
    if (fails) return 1;
    tf_free(&m);
    /* logits = fc(x) + z: the default output needs the input z besides x */
    memset(&m, 0, sizeof m);
    m.g = nncl_graph_create(ctx, 5);
    m.x = nncl_input(m.g, "x", 1, in);
    m.y = nncl_input(m.g, "y", 0, NULL);
    m.logits = nncl_op_add(m.g, nncl_linear(m.g, m.x, TF_C, 1, NNCL_ACT_NONE, "fc"), nncl_input(m.g, "z", 1, zs));
    m.loss = nncl_softmax_cross_entropy(m.g, m.logits, m.y);
    TH_CHECK(name, m.loss != NULL);
    {
        nncl_train_config c = nncl_train_default();
        c.max_batch = 4;
        c.devices = &d;
        c.n_devices = 1;
        TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &m.t));
    }
    TH_CHECK(name, nncl_trainer_save_model(m.t, path, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_OK(name, ctx, nncl_trainer_save(m.t, path)); /* the graph, no nncl.input or nncl.output */
    TH_CHECK(name, nncl_model_load(ctx, path, 0, &model) == NNCL_ERR_FORMAT && !model);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "needs input \"z\" besides \"x\"") != NULL);
    remove(path);
    remove(path2);
    tf_free(&m);
    th_pass("%s (%d files)", name, i + 1);
    return 0;
}

/* Under a decimal-comma locale the metadata keeps '.', and reads back. */
static int test_locale(nncl_context *ctx) {
    const char *name = "model metadata keeps '.' under a decimal-comma locale and reads back";
    const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", NULL};
    float mean[TF_D] = {0.5f, 1.25f, 2, 3}, std[TF_D] = {0.75f, 1, 1, 1.5f};
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_safetensors *st = NULL;
    nncl_model *m = NULL;
    tf_model t;
    char path[160];
    int i, set = 0, ok;
    for (i = 0; locales[i] && !set; i++) set = setlocale(LC_NUMERIC, locales[i]) != NULL;
    if (!set) {
        th_skip(name, "no decimal-comma locale installed");
        return 0;
    }
    snprintf(path, sizeof path, "%s/tf_locale_%d.safetensors", tf_tmp(), (int)getpid());
    ok = tf_build(ctx, 0, &t, NNCL_OPT_ADAM, 0.01f) == 0;
    meta.mean = mean;
    meta.std = std;
    meta.scale = 0.5f;
    ok = ok && nncl_trainer_save_model(t.t, path, &meta) == NNCL_OK && nncl_safetensors_load(path, &st) == NNCL_OK;
    ok = ok && strcmp(nncl_safetensors_meta(st, "nncl.mean"), "[0.5,1.25,2,3]") == 0 &&
         strcmp(nncl_safetensors_meta(st, "nncl.scale"), "0.5") == 0 &&
         nncl_model_from_safetensors(NULL, st, 0, &m) == NNCL_OK;
    setlocale(LC_NUMERIC, "C");
    nncl_model_free(m);
    nncl_safetensors_free(st);
    tf_free(&t);
    remove(path);
    TH_CHECK(name, ok);
    th_pass("%s", name);
    return 0;
}

/* Hand-written descriptions that must be refused, each with a message
 * (containing want, where given). */
static int test_bad_descriptions(void) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"0 input x [4]\n1 relu r [4] (5)", "later node"},
        {"0 input x [4]\n1 relu r [5] (0)", "another shape"},
        {"0 input x [4]\n1 frobnicate r [4] (0)", "unknown op"},
        {"0 input x [0]", NULL}, /* zero dimension */
        {"1 input x [4]", NULL}, /* numbering */
        {"0 param w [4] init=sideways", NULL},
        {"0 input x [4]\n1 scale s [4] (0) alpha=nan", "finite"},
        {"0 input x [4]\n1 scale s [4] (0) i0=99999999999", "whole number"},
        {"0 input x [4]\n1 scale s [4] (0) beta=2", "unknown attribute"},
        {"0 input x [4]\n1 scale s [4] (0) f4=2", "unknown attribute"},
        {"0 input x [4]\n1 scale s [4] (0) alpha", NULL},
        {"0 input x [4]\n0 input x [4]", NULL},
        {"0 input x [4,4,4,4,4]", NULL},
        /* inputs the op does not take: refused before its shape rule reads them */
        {"0 input x [3]\n1 input y []\n2 softmax_cross_entropy l [1] (0)", "takes 2 inputs, not 1"},
        {"0 param w [4] init=zeros\n1 softmax_cross_entropy l [1] (0)", "takes 2 inputs, not 1"},
        {"0 input x [4]\n1 relu r [4] (0,0)", "takes 1 input, not 2"},
        {"0 input x [4]\n1 relu r [4] ()", "takes 1 input, not 0"},
        {"0 input x [4]\n1 param w [2,4] init=zeros\n2 linear fc [2] (0,1,1,1)", "takes 2 to 3 inputs, not 4"},
        {"", NULL}};
    const char *name = "malformed model descriptions are refused with a message";
    int i;
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        const char *meta[] = {"nncl.graph", bad[i].text, NULL};
        nncl_safetensors_entry e;
        nncl_safetensors *st = NULL;
        nncl_graph *g = NULL;
        float v = 0;
        char path[160];
        memset(&e, 0, sizeof e);
        e.name = "w";
        e.ndim = 1;
        e.shape[0] = 1;
        e.data = &v;
        snprintf(path, sizeof path, "%s/tf_bad_%d.safetensors", tf_tmp(), (int)getpid());
        TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, meta));
        TH_OK(name, NULL, nncl_safetensors_load(path, &st));
        remove(path);
        TH_CHECK(name, nncl_graph_from_safetensors(NULL, st, &g) == NNCL_ERR_FORMAT && g == NULL);
        TH_CHECK(name, nncl_last_error(NULL)[0] != 0);
        if (bad[i].want && !strstr(nncl_last_error(NULL), bad[i].want)) {
            th_fail(name, "case %d: \"%s\" does not say \"%s\"", i, nncl_last_error(NULL), bad[i].want);
            return 1;
        }
        nncl_safetensors_free(st);
    }
    th_pass("%s (%d cases)", name, i);
    return 0;
}

static int test_summary(nncl_context *ctx, int d) {
    char name[200], buf[4096];
    tf_model m;
    FILE *f = tmpfile();
    size_t n;
    snprintf(name, sizeof name, "the model summary lists layers, shapes, parameters and plan memory on %s",
             th_device_label(ctx, d));
    TH_CHECK(name, f != NULL);
    TH_CHECK(name, tf_build(ctx, d, &m, NNCL_OPT_ADAM, 0.01f) == 0);
    TH_OK(name, ctx, nncl_trainer_summary(m.t, f));
    rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    /* 4*16+16 + 16+16 (+32 running) + 16*3+3 = 163 parameters. */
    TH_CHECK(name, strstr(buf, "fc1") && strstr(buf, "linear") && strstr(buf, "[B,16]") && strstr(buf, "[B,3]"));
    TH_CHECK(name, strstr(buf, "parameters 163 ") && strstr(buf, "running statistics 32"));
    TH_CHECK(name, strstr(buf, "device ") && strstr(buf, "plan "));
    tf_free(&m);
    th_pass("%s", name);
    return 0;
}

static int test_validation(nncl_context *ctx, int d, nncl_dataset *ds) {
    char name[200];
    tf_model m;
    nncl_fit_config f;
    nncl_fit_result r;
    nncl_curve *curve = NULL;
    nncl_curve_row row;
    float vl;
    snprintf(name, sizeof name, "fit sets a seeded validation part apart and reports training accuracy on %s",
             th_device_label(ctx, d));
    TH_CHECK(name, tf_build(ctx, d, &m, NNCL_OPT_ADAM, 0.01f) == 0);
    TH_OK(name, NULL, nncl_curve_create(&curve));
    f = tf_fit(&m, 4);
    f.curve = curve;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
    TH_CHECK(name, r.train_samples == 180 && r.val_samples == 60 && r.epochs_done == 4 && !r.stopped_early);
    TH_CHECK(name, nncl_curve_count(curve) == 4);
    TH_OK(name, NULL, nncl_curve_get(curve, 3, &row));
    TH_CHECK(name, row.train_acc >= 0 && row.train_acc <= 1 && row.val_acc >= 0 && row.val_acc <= 1);
    TH_CHECK(name, row.train_acc > 0.6 && row.val_loss == row.val_loss); /* separable blobs are learnt */
    TH_CHECK(name, r.best_epoch >= 1 && r.best_epoch <= 4);
    /* val_fraction out of range, and early stopping without validation, are argument errors. */
    f.val_fraction = 1.5;
    TH_CHECK(name, nncl_trainer_fit(m.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT);
    f.val_fraction = 0;
    f.patience = 2;
    TH_CHECK(name, nncl_trainer_fit(m.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT);
    (void)vl;
    nncl_curve_free(curve);
    tf_free(&m);
    th_pass("%s", name);
    return 0;
}

/* The samples as [1, 2, 2] images: fit's augmentation takes that shape from
 * x, repeats from the seed, changes what is learnt, and is refused, before
 * anything trains, for a flat x that gives no image shape. */
static int test_augment(nncl_context *ctx, int d, nncl_dataset *ds) {
    char name[200];
    int in[3] = {1, 2, 2}, run;
    float w[3][64];
    nncl_train_config c = nncl_train_default();
    nncl_fit_config f;
    tf_model m, flat;
    snprintf(name, sizeof name, "fit augments the training images from x's shape, reproducibly, on %s",
             th_device_label(ctx, d));
    c.max_batch = 16;
    c.devices = &d;
    c.n_devices = 1;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    c.optim.lr = 0.01f;
    for (run = 0; run < 3; run++) {
        memset(&m, 0, sizeof m);
        m.g = nncl_graph_create(ctx, 5);
        m.x = nncl_input(m.g, "x", 3, in);
        m.y = nncl_input(m.g, "y", 0, NULL);
        m.logits = nncl_linear(m.g, nncl_flatten(m.g, m.x), TF_C, 1, NNCL_ACT_NONE, "fc1");
        m.loss = nncl_softmax_cross_entropy(m.g, m.logits, m.y);
        TH_CHECK(name, m.loss && nncl_trainer_create(ctx, m.g, m.loss, &c, &m.t) == NNCL_OK);
        if (!m.t) return 1;
        f = tf_fit(&m, 2);
        f.augment.shift = run < 2;
        f.augment.flip_horizontal = 1;
        TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
        TH_OK(name, ctx, nncl_trainer_param_get(m.t, "fc1.weight", w[run], 4 * TF_C));
        tf_free(&m);
    }
    TH_CHECK(name, memcmp(w[0], w[1], sizeof(float) * 4 * TF_C) == 0);
    TH_CHECK(name, memcmp(w[0], w[2], sizeof(float) * 4 * TF_C) != 0);
    TH_CHECK(name, tf_build_ex(ctx, d, &flat, NNCL_OPT_ADAM, 0.01f, 1) == 0);
    TH_OK(name, ctx, nncl_trainer_param_get(flat.t, "fc1.weight", w[0], 64));
    f = tf_fit(&flat, 1);
    f.augment.shift = 1;
    TH_CHECK(name, nncl_trainer_fit(flat.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "augment of x x") != NULL);
    TH_OK(name, ctx, nncl_trainer_param_get(flat.t, "fc1.weight", w[1], 64));
    TH_CHECK(name, memcmp(w[0], w[1], sizeof(float) * 64) == 0);
    tf_free(&flat);
    th_pass("%s", name);
    return 0;
}

static int test_early_stopping(nncl_context *ctx, int d, nncl_dataset *ds) {
    char name[200];
    tf_model m;
    nncl_fit_config f;
    nncl_fit_result r;
    float vl, va;
    snprintf(name, sizeof name, "early stopping ends a run whose val_loss stops falling; keep_best restores the best epoch on %s",
             th_device_label(ctx, d));
    /* lr 0: the validation loss never falls below epoch 1's. */
    TH_CHECK(name, tf_build_ex(ctx, d, &m, NNCL_OPT_SGD, 0.0f, 1) == 0);
    f = tf_fit(&m, 10);
    f.patience = 2;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
    TH_CHECK(name, r.stopped_early && r.epochs_done == 3 && r.best_epoch == 1);
    tf_free(&m);
    /* A learning rate far too high makes the loss jump about; whatever the
     * last epoch did, the weights at the end are those of the best one. */
    TH_CHECK(name, tf_build(ctx, d, &m, NNCL_OPT_SGD, 3.0f) == 0);
    f = tf_fit(&m, 6);
    f.keep_best = 1;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
    {
        /* The same validation part, split again with the same seed. */
        nncl_dataset *tr = NULL, *val = NULL;
        TH_OK(name, NULL, nncl_dataset_split(ds, f.val_fraction, f.seed, &tr, &val));
        TH_OK(name, ctx, nncl_trainer_evaluate_dataset(m.t, &f, val, &vl, &va));
        nncl_dataset_free(tr);
        nncl_dataset_free(val);
    }
    TH_CHECK(name, r.best_epoch >= 1 && (float)r.best_val_loss == vl);
    TH_CHECK(name, r.restored_best == (r.best_epoch != r.epochs_done));
    tf_free(&m);
    th_pass("%s (best epoch %d of %d)", name, r.best_epoch, r.epochs_done);
    return 0;
}

typedef struct tf_stop {
    int epoch, step;           /* stop after this step */
    const char *path;
    int seen_periodic;         /* the every-N checkpoint was on disk when expected */
} tf_stop;

static int tf_on_step(void *user, int epoch, int step, float loss) {
    tf_stop *s = (tf_stop *)user;
    (void)loss;
    if (epoch == 0 && step == 4) { /* 5 steps done: checkpoint_every 5 has just written */
        nncl_safetensors *st = NULL;
        if (nncl_safetensors_load(s->path, &st) == NNCL_OK) {
            const char *b = nncl_safetensors_meta(st, "nncl.fit.batch"), *e = nncl_safetensors_meta(st, "nncl.fit.epoch");
            s->seen_periodic = b && e && !strcmp(b, "5") && !strcmp(e, "0");
            nncl_safetensors_free(st);
        }
    }
    return epoch == s->epoch && step == s->step;
}

/* every: checkpoint_every of the interrupted run (5: the periodic
 * checkpoint is checked on disk too; 0: epoch ends and the stop alone). */
static int test_resume(nncl_context *ctx, int d, nncl_dataset *ds, int stop_epoch, int stop_step, int every) {
    char name[200], path[160];
    tf_model a, b;
    nncl_fit_config f;
    nncl_fit_result r;
    nncl_curve *ca = NULL, *cb = NULL;
    static float pa[256], pb[256];
    size_t na, nb, i;
    tf_stop stop;
    int k;
    snprintf(name, sizeof name,
             "a run stopped at epoch %d step %d (checkpoint every %d steps) and resumed ends bit for bit as the "
             "uninterrupted run on %s", stop_epoch + 1, stop_step + 1, every, th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_ckpt_%d.safetensors", tf_tmp(), (int)getpid());
    TH_CHECK(name, tf_build(ctx, d, &a, NNCL_OPT_ADAM, 0.01f) == 0);
    TH_OK(name, NULL, nncl_curve_create(&ca));
    TH_OK(name, NULL, nncl_curve_create(&cb));
    f = tf_fit(&a, 3);
    f.curve = ca;
    TH_OK(name, ctx, nncl_trainer_fit(a.t, ds, &f));
    TH_CHECK(name, tf_params(&a, pa, 256, &na) == 0);
    /* The interrupted run. */
    TH_CHECK(name, tf_build(ctx, d, &b, NNCL_OPT_ADAM, 0.01f) == 0);
    memset(&stop, 0, sizeof stop);
    stop.epoch = stop_epoch;
    stop.step = stop_step;
    stop.path = path;
    f = tf_fit(&b, 3);
    f.curve = cb; /* the rows so far travel in the checkpoint */
    f.checkpoint = path;
    f.checkpoint_every = every;
    f.on_step = tf_on_step;
    f.user = &stop;
    f.result = &r;
    remove(path);
    TH_OK(name, ctx, nncl_trainer_fit(b.t, ds, &f));
    TH_CHECK(name, r.interrupted && (stop.seen_periodic || every != 5));
    tf_free(&b);
    nncl_curve_free(cb);
    TH_OK(name, NULL, nncl_curve_create(&cb));
    /* A fresh process would start here: a new trainer from the file. */
    TH_CHECK(name, tf_build(ctx, d, &b, NNCL_OPT_ADAM, 0.01f) == 0);
    f = tf_fit(&b, 3);
    f.resume = path;
    f.checkpoint = path;
    f.curve = cb;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(b.t, ds, &f));
    TH_CHECK(name, r.resumed_epoch == stop_epoch + 1 && r.resumed_step == stop_step + 1 && r.epochs_done == 3 &&
                       !r.interrupted);
    TH_CHECK(name, tf_params(&b, pb, 256, &nb) == 0 && na == nb);
    for (i = 0; i < na; i++)
        if (memcmp(&pa[i], &pb[i], sizeof(float)) != 0) break;
    TH_CHECK(name, i == na);
    TH_CHECK(name, nncl_trainer_step_count(a.t) == nncl_trainer_step_count(b.t));
    TH_CHECK(name, nncl_curve_count(ca) == 3 && nncl_curve_count(cb) == 3);
    for (k = 0; k < 3; k++) {
        nncl_curve_row x, y;
        nncl_curve_get(ca, k, &x);
        nncl_curve_get(cb, k, &y);
        TH_CHECK(name, (float)x.train_loss == (float)y.train_loss && (float)x.val_loss == (float)y.val_loss &&
                           (float)x.train_acc == (float)y.train_acc);
    }
    /* A checkpoint of another run (other seed) is refused. */
    f.seed = 4;
    TH_CHECK(name, nncl_trainer_fit(b.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT);
    remove(path);
    nncl_curve_free(ca);
    nncl_curve_free(cb);
    tf_free(&a);
    tf_free(&b);
    th_pass("%s", name);
    return 0;
}

/* A checkpoint of another model (batch norm and dropout in the file, not in
 * the trainer) is refused naming the node that differs, by fit and by
 * nncl_trainer_load_checkpoint; a resume asking for fewer epochs than the
 * checkpoint has done is refused, one asking for as many trains nothing. */
static int test_resume_refusals(nncl_context *ctx, int d, nncl_dataset *ds) {
    char name[200], path[160];
    tf_model a, b;
    nncl_fit_config f;
    nncl_fit_result r;
    long long steps;
    snprintf(name, sizeof name, "resume refuses another model's checkpoint and one past the epochs asked on %s",
             th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_other_%d.safetensors", tf_tmp(), (int)getpid());
    TH_CHECK(name, tf_build(ctx, d, &a, NNCL_OPT_ADAM, 0.01f) == 0);
    TH_CHECK(name, tf_build_ex(ctx, d, &b, NNCL_OPT_ADAM, 0.01f, 1) == 0);
    f = tf_fit(&a, 2);
    f.checkpoint = path;
    TH_OK(name, ctx, nncl_trainer_fit(a.t, ds, &f)); /* 2 epochs done */
    f = tf_fit(&b, 3);
    f.resume = path;
    TH_CHECK(name, nncl_trainer_fit(b.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "another model") &&
                       strstr(nncl_last_error(ctx), "node 5 is \"5 param bn1.weight [16]\""));
    TH_CHECK(name, nncl_trainer_step_count(b.t) == 0);
    TH_CHECK(name, nncl_trainer_load_checkpoint(b.t, path) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "another model") != NULL);
    steps = nncl_trainer_step_count(a.t);
    f = tf_fit(&a, 1);
    f.resume = path;
    TH_CHECK(name, nncl_trainer_fit(a.t, ds, &f) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "2 epochs done") && strstr(nncl_last_error(ctx), "asks for 1 epochs"));
    f = tf_fit(&a, 2);
    f.resume = path;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(a.t, ds, &f));
    TH_CHECK(name, r.epochs_done == 2 && nncl_trainer_step_count(a.t) == steps);
    remove(path);
    tf_free(&a);
    tf_free(&b);
    th_pass("%s", name);
    return 0;
}

/* A run with loss scaling at a scale whose shortest text is not exact
 * (2^30, 2^-13) resumes from its own checkpoint, the scale with it. */
static int test_resume_scale(nncl_context *ctx, int d, nncl_dataset *ds, float scale) {
    char name[200], path[160];
    tf_model a, b;
    nncl_fit_config f;
    nncl_fit_result r;
    snprintf(name, sizeof name, "a run at loss scale 2^%d resumes from its checkpoint on %s", ilogbf(scale),
             th_device_label(ctx, d));
    snprintf(path, sizeof path, "%s/tf_scale_%d.safetensors", tf_tmp(), (int)getpid());
    tf_scale = scale;
    TH_CHECK(name, tf_build(ctx, d, &a, NNCL_OPT_ADAM, 0.01f) == 0 && tf_build(ctx, d, &b, NNCL_OPT_ADAM, 0.01f) == 0);
    tf_scale = 0;
    f = tf_fit(&a, 1);
    f.checkpoint = path;
    TH_OK(name, ctx, nncl_trainer_fit(a.t, ds, &f));
    TH_CHECK(name, a.t->scale == scale);
    f = tf_fit(&b, 2);
    f.resume = path;
    f.result = &r;
    TH_OK(name, ctx, nncl_trainer_fit(b.t, ds, &f));
    TH_CHECK(name, r.resumed_epoch == 2 && r.epochs_done == 2);
    TH_CHECK(name, nncl_trainer_step_count(b.t) == 2 * nncl_trainer_step_count(a.t) && b.t->scale == scale);
    remove(path);
    tf_free(&a);
    tf_free(&b);
    th_pass("%s", name);
    return 0;
}

/* Two devices with a fixed split; device 1 fails at step 3: the progress
 * says once how the devices were arranged and why, says the failure once,
 * with the split, and training goes on. */
static int test_device_messages(nncl_context *ctx, nncl_dataset *ds) {
    const char *name = "fit says when a device fails and leaves, and shows the split";
    int devs[2] = {0, 1}, in[1] = {TF_D};
    float shares[2] = {1, 1};
    nncl_train_config c = nncl_train_default();
    nncl_fit_config f;
    nncl_progress *p = NULL;
    tf_model m;
    FILE *out = tmpfile();
    char buf[8192];
    size_t n;
    if (th_devices_lack(ctx, 2, name)) {
        if (out) fclose(out);
        return 0;
    }
    TH_CHECK(name, out != NULL);
    memset(&m, 0, sizeof m);
    m.g = nncl_graph_create(ctx, 5);
    m.x = nncl_input(m.g, "x", 1, in);
    m.y = nncl_input(m.g, "y", 0, NULL);
    m.logits = nncl_linear(m.g, nncl_linear(m.g, m.x, 8, 1, NNCL_ACT_RELU, "fc1"), TF_C, 1, NNCL_ACT_NONE, "fc2");
    m.loss = nncl_softmax_cross_entropy(m.g, m.logits, m.y);
    c.max_batch = 16;
    c.devices = devs;
    c.n_devices = 2;
    c.shares = shares;
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &m.t));
    m.t->fail_device = 1;
    m.t->fail_step = 3;
    TH_OK(name, NULL, nncl_progress_create(out, 2, 0, &p));
    nncl_progress_set_interval(p, 0);
    f = tf_fit(&m, 2);
    f.progress = p;
    TH_OK(name, ctx, nncl_trainer_fit(m.t, ds, &f));
    nncl_progress_free(p);
    rewind(out);
    n = fread(buf, 1, sizeof buf - 1, out);
    buf[n] = 0;
    fclose(out);
    TH_CHECK(name, strstr(buf, "shards 8/8") != NULL);
    TH_CHECK(name, strstr(buf, "devices arranged: shares given") != NULL); /* once, how and why */
    TH_CHECK(name, strstr(strstr(buf, "devices arranged") + 1, "devices arranged") == NULL);
    TH_CHECK(name, strstr(buf, "device 1 (") && strstr(buf, ") failed and left; the others go on"));
    TH_CHECK(name, strstr(buf, "shards 16/0 (d1 failed)") != NULL);
    tf_free(&m);
    th_pass("%s", name);
    return 0;
}

/* A selection that matches nothing lists the devices; an index past the
 * matches says so. */
static int test_selection_messages(void) {
    const char *name = "a device selection that matches nothing lists the devices; :k out of range says so";
    nncl_config cfg = nncl_config_default();
    nncl_context *c = NULL;
    cfg.devices = "no-such-device-name";
    TH_CHECK(name, nncl_init(&cfg, &c) == NNCL_ERR_NO_DEVICE && c == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "nothing matches \"no-such-device-name\"; the devices are 0: ") != NULL);
    cfg.devices = "all:99";
    TH_CHECK(name, nncl_init(&cfg, &c) == NNCL_ERR_NO_DEVICE && c == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "index 99 is out of range") != NULL);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    nncl_dataset *ds = tf_data();
    int d, n;
    test_bad_descriptions();
    if (!ctx || !ds) {
        nncl_dataset_free(ds);
        nncl_free(ctx);
        return th_exit_code();
    }
    test_selection_messages();
    test_locale(ctx);
    test_device_messages(ctx, ds);
    for (d = 0, n = nncl_device_count(ctx); d < n; d++) {
        test_model_file(ctx, d, ds);
        test_model_numeric(ctx, d, ds);
        test_model_metadata(ctx, d, ds);
        test_summary(ctx, d);
        test_validation(ctx, d, ds);
        test_augment(ctx, d, ds);
        test_early_stopping(ctx, d, ds);
        test_resume(ctx, d, ds, 1, 7, 5);
        test_resume(ctx, d, ds, 0, 11, 5);
        test_resume(ctx, d, ds, 0, 11, 0); /* an epoch's last step: the stop writes the checkpoint */
        test_resume_refusals(ctx, d, ds);
        test_resume_scale(ctx, d, ds, 0x1p30f);
        test_resume_scale(ctx, d, ds, 0x1p-13f);
    }
    nncl_dataset_free(ds);
    nncl_free(ctx);
    return th_exit_code();
}
