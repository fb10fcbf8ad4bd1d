/* test_trainer_guard.c - a trainer under misuse and bad data, on one device
 * and on every device present: a wrong feed, a dataset of the wrong sample
 * size and out-of-range labels are the caller's errors, refused before any
 * device works and retiring none; a NaN step leaves parameters, optimizer
 * state, batch-norm running statistics and counts as they were on every
 * device; an argument error from inside a device thread keeps its status and
 * words; step_info.n_devices counts the devices that did work this step;
 * two devices failing at once never enter the log callback together; the
 * plan's exchange with its buffers refuses ranges outside them; device
 * lists and shares it cannot use are refused at creation. */
#include "harness.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TG_N 80
#define TG_D 6
#define TG_C 3
#define TG_B 40

static float tg_x[TG_N * TG_D], tg_img[TG_N * 36], tg_y[TG_N];

static void tg_data(void) {
    unsigned seed = 7;
    int i, k;
    for (i = 0; i < TG_N; i++) {
        tg_y[i] = (float)(i % TG_C);
        for (k = 0; k < TG_D; k++) tg_x[i * TG_D + k] = (k % TG_C == i % TG_C ? 2.0f : 0.0f) + th_uniform(&seed);
        for (k = 0; k < 36; k++) tg_img[i * 36 + k] = th_uniform(&seed);
    }
}

typedef struct tg_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    const float *data;
} tg_model;

/* An MLP, or (cnn) a convolution with batch norm. */
static int tg_build(nncl_context *ctx, tg_model *m, int cnn) {
    nncl_node *h;
    m->g = nncl_graph_create(ctx, 11);
    m->y = NULL;
    if (cnn) {
        int is[3] = {1, 6, 6};
        m->data = tg_img;
        m->x = nncl_input(m->g, "x", 3, is);
        h = nncl_conv2d(m->g, m->x, 4, 3, 1, 1, 1, NNCL_ACT_NONE, "conv1");
        h = nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn1");
        h = nncl_flatten(m->g, nncl_op_relu(m->g, h));
    } else {
        int xs[1] = {TG_D};
        m->data = tg_x;
        m->x = nncl_input(m->g, "x", 1, xs);
        h = nncl_linear(m->g, m->x, 8, 1, NNCL_ACT_RELU, "fc1");
    }
    m->y = nncl_input(m->g, "y", 0, NULL);
    m->logits = nncl_linear(m->g, h, TG_C, 1, NNCL_ACT_NONE, "fc2");
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    return m->loss != NULL;
}

static nncl_trainer *tg_trainer(nncl_context *ctx, tg_model *m, int nd, const float *shares) {
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    int devs[8], i;
    for (i = 0; i < nd && i < 8; i++) devs[i] = i;
    c.max_batch = TG_B;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    c.optim.lr = 0.01f;
    c.devices = devs;
    c.n_devices = nd;
    c.shares = shares;
    return nncl_trainer_create(ctx, m->g, m->loss, &c, &t) == NNCL_OK ? t : NULL;
}

static void tg_feeds(const tg_model *m, nncl_feed *f, const float *x, const float *y) {
    f[0].node = m->x;
    f[0].data = x;
    f[1].node = m->y;
    f[1].data = y;
}

/* Everything a step may change, of device i: parameters, running
 * statistics, optimizer state; n floats in *out (malloc'd). */
static int tg_snapshot(nncl_trainer *t, int i, float **out, size_t *n) {
    nncl__plan *p = t->plan[i];
    nncl_graph *g = t->graph;
    float *s;
    *n = g->n_params + g->n_state + t->opt_floats;
    s = (float *)calloc(*n + 1, sizeof(float));
    *out = s;
    if (!s) return 1;
    return nncl__plan_get(p, NNCL__PB_PARAMS, 0, g->n_params, s, 1) != NNCL_OK ||
           nncl__plan_get(p, NNCL__PB_STATE, 0, g->n_state, s + g->n_params, 1) != NNCL_OK ||
           nncl__plan_get(p, NNCL__PB_OPT, 0, t->opt_floats, s + g->n_params + g->n_state, 1) != NNCL_OK;
}

static int tg_all_finite(const float *a, size_t n) {
    size_t k;
    for (k = 0; k < n; k++)
        if (!isfinite(a[k])) return 0;
    return 1;
}

/* A feed of another graph, a feed of a node that is not an input, NULL
 * data, a node fed twice: each refused naming the node, and the trainer
 * then steps on every device as before. */
static int test_wrong_feeds(nncl_context *ctx, int nd) {
    char name[160];
    tg_model m, other;
    nncl_trainer *t;
    nncl_feed f[3];
    nncl_step_info info;
    float out[TG_B * TG_C];
    static const float even[2] = {1, 1};
    snprintf(name, sizeof name, "a wrong feed is an argument error and retires no device (%d device%s)", nd,
             nd > 1 ? "s" : "");
    if (th_devices_lack(ctx, nd, name)) return 0;
    TH_CHECK(name, tg_build(ctx, &m, 0) && tg_build(ctx, &other, 0));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, nd, nd == 2 ? even : NULL)) != NULL);
    tg_feeds(&m, f, tg_x, tg_y);
    f[2].node = other.x; /* of another graph */
    f[2].data = tg_x;
    TH_CHECK(name, nncl_trainer_step(t, f, 3, TG_B, &info) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "\"x\" is not a node of the trainer's graph") != NULL);
    TH_CHECK(name, info.failed_device == -1);
    f[2].node = m.logits; /* not an input */
    TH_CHECK(name, nncl_trainer_step(t, f, 3, TG_B, &info) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "\"fc2\" is not an input") != NULL);
    f[2].node = m.x; /* twice */
    TH_CHECK(name, nncl_trainer_step(t, f, 3, TG_B, &info) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "\"x\" is fed twice") != NULL);
    f[1].data = NULL;
    TH_CHECK(name, nncl_trainer_step(t, f, 2, TG_B, &info) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "\"y\": data is NULL") != NULL);
    f[1] = f[2];
    f[1].node = other.y;
    TH_CHECK(name, nncl_trainer_predict(t, f, 2, TG_B, m.logits, out) == NNCL_ERR_INVALID_ARGUMENT);
    /* the logits depend on x: predicting without it would read a stale buffer */
    tg_feeds(&m, f, tg_x, tg_y);
    TH_CHECK(name, nncl_trainer_predict(t, f + 1, 1, TG_B, m.logits, out) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "input \"x\", which \"fc2\" depends on, is not fed") != NULL);
    TH_CHECK(name, nncl_trainer_predict(t, NULL, 0, TG_B, m.logits, out) == NNCL_ERR_INVALID_ARGUMENT);
    TH_OK(name, ctx, nncl_trainer_predict(t, f, 1, TG_B, m.logits, out)); /* the labels are not needed */
    /* still whole: good steps on every device */
    tg_feeds(&m, f, tg_x, tg_y);
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.failed_device == -1 && info.n_devices == nd && nncl_trainer_step_count(t) == 2);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_graph_free(other.g);
    th_pass("%s", name);
    return 0;
}

/* An argument error raised inside a device thread (injected): its own
 * status and message come back, and no device leaves. */
static int test_thread_argument_error(nncl_context *ctx, int nd) {
    char name[160];
    tg_model m;
    nncl_trainer *t;
    nncl_feed f[2];
    nncl_step_info info;
    static const float even[2] = {1, 1};
    snprintf(name, sizeof name, "a shape error in device %d's thread keeps its status and words, retires nothing",
             nd - 1);
    if (th_devices_lack(ctx, nd, name)) return 0;
    TH_CHECK(name, tg_build(ctx, &m, 0));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, nd, nd == 2 ? even : NULL)) != NULL);
    t->fail_device = nd - 1;
    t->fail_step = 0;
    t->fail_status = NNCL_ERR_SHAPE;
    tg_feeds(&m, f, tg_x, tg_y);
    TH_CHECK(name, nncl_trainer_step(t, f, 2, TG_B, &info) == NNCL_ERR_SHAPE);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "injected failure on device") != NULL);
    TH_CHECK(name, info.failed_device == -1 && t->alive[nd - 1] && nncl_trainer_step_count(t) == 0);
    t->fail_step = -1;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.n_devices == nd && nncl_trainer_step_count(t) == 1);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* A dataset whose samples are not the input's size is refused before any
 * batch is read (it was read past the loader's buffer). */
static int test_dataset_shape(nncl_context *ctx) {
    const char *name = "fit and evaluate_dataset refuse a dataset of another sample size";
    tg_model m;
    nncl_trainer *t;
    nncl_dataset *ds = NULL;
    nncl_fit_config fc = nncl_fit_default();
    int four[1] = {4};
    float loss, acc;
    TH_CHECK(name, tg_build(ctx, &m, 0));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, 1, NULL)) != NULL);
    TH_OK(name, NULL, nncl_dataset_create(TG_N, 1, four, tg_x, tg_y, TG_C, &ds));
    fc.epochs = 1;
    fc.batch = TG_B;
    fc.x = m.x;
    fc.labels = m.y;
    fc.logits = m.logits;
    TH_CHECK(name, nncl_trainer_fit(t, ds, &fc) == NNCL_ERR_SHAPE);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "[N,4]") && strstr(nncl_last_error(ctx), "[B,6]"));
    TH_CHECK(name, nncl_trainer_evaluate_dataset(t, &fc, ds, &loss, &acc) == NNCL_ERR_SHAPE);
    TH_CHECK(name, nncl_trainer_step_count(t) == 0);
    nncl_dataset_free(ds);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* Labels out of range: evaluation refuses them as the step does. */
static int test_evaluate_labels(nncl_context *ctx) {
    const char *name = "evaluate refuses a label out of range, as the training step does";
    tg_model m;
    nncl_trainer *t;
    float y[TG_N], loss = 0, acc = 0;
    TH_CHECK(name, tg_build(ctx, &m, 0));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, 1, NULL)) != NULL);
    memcpy(y, tg_y, sizeof y);
    y[TG_N - 1] = 7;
    TH_CHECK(name, nncl_trainer_evaluate(t, m.x, m.y, m.logits, tg_x, y, TG_N, &loss, &acc) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "= 7 is not a class index in 0..2") != NULL);
    y[TG_N - 1] = 0.5f;
    TH_CHECK(name, nncl_trainer_evaluate(t, m.x, m.y, m.logits, tg_x, y, TG_N, &loss, &acc) == NNCL_ERR_INVALID_ARGUMENT);
    /* x and labels swapped: the labels node must hold one class per sample
     * (fed as x, the labels' array would be read TG_D times too far) */
    TH_CHECK(name, nncl_trainer_evaluate(t, m.y, m.x, m.logits, tg_y, tg_y, TG_N, &loss, &acc) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "labels \"x\" must be an input of one class index per sample") != NULL);
    TH_OK(name, ctx, nncl_trainer_evaluate(t, m.x, m.y, m.logits, tg_x, tg_y, TG_N, &loss, &acc));
    TH_CHECK(name, isfinite(loss));
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* Embedding indices fed out of range or not whole: the step and predict
 * refuse them before any device works, and the table stays as it was
 * (on the device such an index gives a row of NaN, which the step would
 * carry into every weight). */
static int test_embedding_indices(nncl_context *ctx) {
    const char *name = "a step and predict refuse embedding indices that name no row, and change nothing";
    static const float bad_values[3] = {5, 1.5f, -1};
    nncl_graph *g = nncl_graph_create(ctx, 5);
    int three[1] = {3}, k, d = 0;
    nncl_node *x = nncl_input(g, "ids", 1, three), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *logits = nncl_linear(g, nncl_flatten(g, nncl_embedding(g, x, 5, 2, "emb")), 3, 1, NNCL_ACT_NONE, "fc");
    nncl_node *loss = nncl_softmax_cross_entropy(g, logits, y);
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    float ids[6] = {0, 4, 2, 3, 1, 0}, labels[2] = {0, 2}, w0[10], w1[10], out[6];
    c.max_batch = 2;
    c.devices = &d;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f[0].node = x;
    f[0].data = ids;
    f[1].node = y;
    f[1].data = labels;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, 2, NULL));
    TH_OK(name, ctx, nncl_trainer_param_get(t, "emb.weight", w0, 10));
    for (k = 0; k < 3; k++) {
        ids[4] = bad_values[k];
        TH_CHECK(name, nncl_trainer_step(t, f, 2, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "\"ids\"[4]") && strstr(nncl_last_error(ctx), "not a row index in 0..4"));
        TH_CHECK(name, nncl_trainer_predict(t, f, 1, 2, logits, out) == NNCL_ERR_INVALID_ARGUMENT);
    }
    TH_OK(name, ctx, nncl_trainer_param_get(t, "emb.weight", w1, 10));
    TH_CHECK(name, memcmp(w0, w1, sizeof w0) == 0 && nncl_trainer_step_count(t) == 1);
    ids[4] = 4;
    TH_OK(name, ctx, nncl_trainer_predict(t, f, 1, 2, logits, out));
    TH_CHECK(name, isfinite(out[0]) && isfinite(out[5]));
    nncl_trainer_free(t);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* A batch with a NaN in the last sample (the last device's shard): the
 * step is skipped and every device keeps its parameters, optimizer state
 * and running statistics bit for bit, and the counts; the next good step
 * leaves every device finite with the same statistics. */
static int test_nan_skip_everything(nncl_context *ctx, int nd) {
    char name[200];
    tg_model m;
    nncl_trainer *t;
    nncl_feed f[2];
    nncl_step_info info;
    float bad[TG_B * 36], *before[8], *after;
    size_t n = 0;
    int i, s;
    int64_t tracked;
    static const float even[2] = {1, 1};
    snprintf(name, sizeof name,
             "a NaN step leaves parameters, optimizer state, batch-norm statistics and counts on %d device%s", nd,
             nd > 1 ? "s" : "");
    if (th_devices_lack(ctx, nd, name)) return 0;
    TH_CHECK(name, tg_build(ctx, &m, 1));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, nd, nd == 2 ? even : NULL)) != NULL && m.g->n_state > 0);
    tg_feeds(&m, f, tg_img, tg_y);
    for (s = 0; s < 2; s++) TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info)); /* optimizer state not zero */
    for (i = 0; i < nd; i++) TH_CHECK(name, !tg_snapshot(t, i, &before[i], &n));
    tracked = t->tracked;
    memcpy(bad, tg_img, sizeof bad);
    bad[(TG_B - 1) * 36 + 5] = NAN;
    f[0].data = bad;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.skipped == 1 && nncl_trainer_step_count(t) == 2 && t->tracked == tracked);
    for (i = 0; i < nd; i++) {
        TH_CHECK(name, !tg_snapshot(t, i, &after, &n));
        if (memcmp(before[i], after, n * sizeof(float)) != 0) {
            th_fail(name, "device %d's parameters, statistics or optimizer state moved", i);
            return 1;
        }
        free(after);
    }
    f[0].data = tg_img;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.skipped == 0 && nncl_trainer_step_count(t) == 3);
    for (i = 0; i < nd; i++) {
        TH_CHECK(name, !tg_snapshot(t, i, &after, &n));
        TH_CHECK(name, tg_all_finite(after, n));
        TH_CHECK(name, memcmp(before[i], after, m.g->n_params * sizeof(float)) != 0);
        /* the statistics come from the host on every device; parameters may
         * differ in the last bit between vendors, which update on their own */
        if (i > 0) TH_CHECK(name, memcmp(before[0] + m.g->n_params, after + m.g->n_params, m.g->n_state * 4) == 0);
        if (i == 0) memcpy(before[0], after, n * sizeof(float));
        free(after);
    }
    for (i = 0; i < nd; i++) free(before[i]);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* n_devices: the devices that did work in the step and are still training:
 * not one that got no samples, not one that left in the update. */
static int test_n_devices(nncl_context *ctx, int nd) {
    const char *name = "step_info.n_devices counts the devices that did work this step";
    tg_model m;
    nncl_trainer *t;
    nncl_feed f[2];
    nncl_step_info info;
    int sizes[2];
    static const float lopsided[2] = {1, 1e-6f}, even[2] = {1, 1};
    if (th_devices_lack(ctx, nd, name)) return 0;
    TH_CHECK(name, tg_build(ctx, &m, 0));
    tg_feeds(&m, f, tg_x, tg_y);
    TH_CHECK(name, (t = tg_trainer(ctx, &m, nd, lopsided)) != NULL);
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, nncl_trainer_shards(t, sizes, 2) == 2 && sizes[0] == TG_B && sizes[1] == 0);
    TH_CHECK(name, info.n_devices == 1);
    nncl_trainer_free(t);
    TH_CHECK(name, (t = tg_trainer(ctx, &m, nd, even)) != NULL);
    t->fail_device = 1;
    t->fail_step = 1;
    t->fail_in_update = 1;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.n_devices == 2 && info.failed_device == -1);
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
    TH_CHECK(name, info.failed_device == 1 && info.n_devices == 1 && nncl_trainer_step_count(t) == 2);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* A log callback that notices being entered by two threads at once: it
 * stays inside a while, so that an overlap is all but certain without the
 * context's serialisation. */
static volatile int tg_inside, tg_overlap, tg_errors;
static void tg_log(void *user, int level, const char *msg) {
    struct timespec pause;
    (void)user;
    (void)msg;
    pause.tv_sec = 0;
    pause.tv_nsec = 20000000;
    if (tg_inside) tg_overlap = 1;
    tg_inside = 1;
    if (level == NNCL_LOG_ERROR) tg_errors++;
    nanosleep(&pause, NULL);
    tg_inside = 0;
}

static int test_failing_together(nncl_context *have) {
    const char *name = "two devices failing at once: each leaves with its own words, the log is never entered twice";
    nncl_config cfg = nncl_config_default();
    const char *sel = getenv("NNCL_TEST_DEVICES");
    nncl_context *ctx = NULL;
    tg_model m;
    nncl_trainer *t;
    nncl_feed f[2];
    nncl_step_info info;
    static const float even[2] = {1, 1};
    if (th_devices_lack(have, 2, name)) return 0;
    cfg.devices = sel && *sel ? sel : "all";
    cfg.log = tg_log;
    cfg.log_level = NNCL_LOG_WARN;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    TH_CHECK(name, tg_build(ctx, &m, 0));
    TH_CHECK(name, (t = tg_trainer(ctx, &m, 2, even)) != NULL);
    t->fail_device = -2; /* both */
    t->fail_step = 0;
    tg_feeds(&m, f, tg_x, tg_y);
    tg_errors = 0;
    TH_CHECK(name, nncl_trainer_step(t, f, 2, TG_B, &info) == NNCL_ERR_DEVICE);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "no device of the trainer is left") != NULL);
    TH_CHECK(name, tg_errors >= 2 && !tg_overlap);
    TH_CHECK(name, !t->alive[0] && !t->alive[1]);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(ctx);
    th_pass("%s", name);
    return 0;
}

/* Device lists and shares the trainer cannot use are refused at creation,
 * naming the value: a device twice or out of range, a list with no count,
 * a share that is zero, negative, NaN or infinite (an infinite share gave
 * every device a cost of 0 per sample, the whole batch to one of them). */
static int test_config_refused(nncl_context *ctx) {
    const char *name = "device lists and shares the trainer cannot use are refused, naming the value";
    static const int twice[2] = {0, 0}, beyond[1] = {999}, negative[1] = {-1};
    static const float bad_share[4] = {0.0f, -1.0f, NAN, INFINITY};
    static const char *said[4] = {"is 0", "is -1", "is nan", "is inf"};
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    tg_model m;
    int i, d0 = 0;
    TH_CHECK(name, tg_build(ctx, &m, 0));
    c.max_batch = TG_B;
    c.devices = twice; c.n_devices = 2;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t &&
                       strstr(nncl_last_error(ctx), "device 0 is absent or given twice"));
    c.devices = beyond; c.n_devices = 1;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "device 999"));
    c.devices = negative;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "device -1"));
    c.devices = &d0; c.n_devices = 0;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "n_devices 0"));
    c.n_devices = 1;
    for (i = 0; i < 4; i++) {
        c.shares = &bad_share[i];
        if (nncl_trainer_create(ctx, m.g, m.loss, &c, &t) != NNCL_ERR_INVALID_ARGUMENT || t ||
            !strstr(nncl_last_error(ctx), said[i])) {
            th_fail(name, "share %g: %s", (double)bad_share[i], nncl_last_error(ctx));
            return 1;
        }
    }
    c.shares = NULL;
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* The plan's exchange with its buffers (plan_exchange.c): writes read back
 * whole and in a window, the running statistics survive a trip through
 * their shadow, and a range outside a buffer or a copy between buffers of
 * different sizes is a state error that changes nothing. */
static int test_plan_exchange(nncl_context *ctx) {
    const char *name = "the plan's exchange round-trips its buffers and refuses ranges outside them";
    tg_model m;
    nncl_trainer *t;
    nncl__plan *p;
    size_t n, ns, i;
    float *a, *b;
    TH_CHECK(name, tg_build(ctx, &m, 1)); /* batch norm: running statistics */
    TH_CHECK(name, (t = tg_trainer(ctx, &m, 1, NULL)) != NULL);
    p = t->plan[0];
    n = t->graph->n_params;
    ns = t->graph->n_state;
    TH_CHECK(name, n > 4 && ns > 0 && t->opt_floats > 0);
    a = (float *)calloc(n + ns, sizeof(float));
    b = (float *)calloc(n + ns, sizeof(float));
    TH_CHECK(name, a && b);
    for (i = 0; i < n + ns; i++) a[i] = 0.25f * (float)i - 3.0f;
    TH_OK(name, ctx, nncl__plan_put(p, NNCL__PB_PARAMS, 0, n, a, 1));
    TH_OK(name, ctx, nncl__plan_get(p, NNCL__PB_PARAMS, 0, n, b, 1));
    TH_CHECK(name, memcmp(a, b, n * sizeof(float)) == 0);
    TH_OK(name, ctx, nncl__plan_get(p, NNCL__PB_PARAMS, 3, 2, b, 1));
    TH_CHECK(name, b[0] == a[3] && b[1] == a[4]);
    TH_OK(name, ctx, nncl__plan_put(p, NNCL__PB_STATE, 0, ns, a + n, 1));
    TH_OK(name, ctx, nncl__plan_copy(p, NNCL__PB_STATE, NNCL__PB_SHADOW));
    TH_OK(name, ctx, nncl__plan_put(p, NNCL__PB_STATE, 0, ns, a, 1));
    TH_OK(name, ctx, nncl__plan_copy(p, NNCL__PB_SHADOW, NNCL__PB_STATE));
    TH_OK(name, ctx, nncl__plan_get(p, NNCL__PB_STATE, 0, ns, b, 1));
    TH_CHECK(name, memcmp(a + n, b, ns * sizeof(float)) == 0);
    TH_CHECK(name, nncl__plan_get(p, NNCL__PB_PARAMS, n - 1, 2, b, 1) == NNCL_ERR_STATE);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "outside buffer") != NULL);
    TH_CHECK(name, nncl__plan_put(p, NNCL__PB_OPT, 1, (size_t)-1, a, 1) == NNCL_ERR_STATE);
    TH_CHECK(name, nncl__plan_copy(p, NNCL__PB_PARAMS, NNCL__PB_STATE) == NNCL_ERR_STATE);
    TH_OK(name, ctx, nncl__plan_get(p, NNCL__PB_PARAMS, 0, n, b, 1)); /* nothing changed */
    TH_CHECK(name, memcmp(a, b, n * sizeof(float)) == 0);
    free(a);
    free(b);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx;
    tg_data();
    if (!(ctx = th_context())) return th_exit_code();
    test_wrong_feeds(ctx, 1);
    test_dataset_shape(ctx);
    test_evaluate_labels(ctx);
    test_embedding_indices(ctx);
    test_thread_argument_error(ctx, 1);
    test_nan_skip_everything(ctx, 1);
    test_plan_exchange(ctx);
    test_config_refused(ctx);
    test_wrong_feeds(ctx, 2);
    test_thread_argument_error(ctx, 2);
    test_nan_skip_everything(ctx, 2);
    test_n_devices(ctx, 2);
    test_failing_together(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
