/* test_trainer.c - training end to end: a separable problem learnt to 100%,
 * bitwise-repeatable runs, exact resume from a checkpoint in a fresh
 * process, N devices equal to one device with the same global batch (even
 * and uneven splits; a device given no shard while its queue lags), a NaN
 * batch skipped, and an injected device failure survived without losing a
 * batch. */
#include "harness.h"
#include "train/trainer.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TT_N 240
#define TT_D 6
#define TT_C 3

static float tt_x[TT_N * TT_D], tt_y[TT_N];
static float tt_img[TT_N * 36]; /* [N,1,6,6] for the CNN */

/* Three Gaussian blobs, well apart: linearly separable. */
static void tt_data(void) {
    unsigned seed = 99;
    int i, k;
    for (i = 0; i < TT_N; i++) {
        int c = i % TT_C;
        tt_y[i] = (float)c;
        for (k = 0; k < TT_D; k++)
            tt_x[i * TT_D + k] = (k % TT_C == c ? 3.0f : 0.0f) + (th_uniform(&seed) - 0.5f);
        for (k = 0; k < 36; k++) tt_img[i * 36 + k] = (k / 6 == 2 * c ? 1.0f : 0.0f) + th_uniform(&seed);
    }
}

typedef struct tt_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    const float *data; /* features of x */
} tt_model;

static int tt_cnn; /* tt_build makes a CNN with batch norm instead of the MLP */

static int tt_build(nncl_context *ctx, tt_model *m, int dropout) {
    int xs[1] = {TT_D};
    nncl_node *h;
    m->g = nncl_graph_create(ctx, 2024);
    m->data = tt_x;
    if (tt_cnn) {
        int is[3] = {1, 6, 6};
        m->data = tt_img;
        m->x = nncl_input(m->g, "x", 3, is);
        m->y = nncl_input(m->g, "y", 0, NULL);
        h = nncl_conv2d(m->g, m->x, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
        h = nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn1");
        h = nncl_flatten(m->g, nncl_maxpool2d(m->g, h, 2, 2, 0));
        m->logits = nncl_linear(m->g, h, TT_C, 1, NNCL_ACT_NONE, "fc");
        m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
        return m->loss != NULL;
    }
    m->x = nncl_input(m->g, "x", 1, xs);
    m->y = nncl_input(m->g, "y", 0, NULL);
    h = nncl_linear(m->g, m->x, 16, 1, NNCL_ACT_RELU, "fc1");
    if (dropout) h = nncl_dropout(m->g, h, 0.1f);
    m->logits = nncl_linear(m->g, h, TT_C, 1, NNCL_ACT_NONE, "fc2");
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    return m->loss != NULL;
}

static nncl_status tt_train(nncl_trainer *t, tt_model *m, int from, int steps, int batch) {
    int s;
    for (s = from; s < from + steps; s++) {
        nncl_feed f[2];
        int start = (s * batch) % (TT_N - batch + 1);
        nncl_status st;
        f[0].node = m->x;
        f[0].data = m->data + (size_t)start * m->x->sample_numel;
        f[1].node = m->y;
        f[1].data = tt_y + start;
        if ((st = nncl_trainer_step(t, f, 2, batch, NULL)) != NNCL_OK) return st;
    }
    return NNCL_OK;
}

static int tt_overlap; /* trainers created with overlapped read-back */
static float tt_clip;  /* their clip_norm */

static nncl_trainer *tt_trainer(nncl_context *ctx, tt_model *m, const int *devs, int nd, const float *shares,
                                nncl_optimizer opt) {
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    c.max_batch = 40;
    c.optim = nncl_optim_default(opt);
    c.optim.lr = opt == NNCL_OPT_SGD ? 0.1f : 0.01f;
    c.devices = devs;
    c.n_devices = nd;
    c.shares = shares;
    c.overlap = tt_overlap;
    c.optim.clip_norm = tt_clip;
    if (nncl_trainer_create(ctx, m->g, m->loss, &c, &t) != NNCL_OK) return NULL;
    return t;
}

static int tt_params(nncl_trainer *t, float *out) {
    return nncl__trainer_download(t, out, NULL) != NNCL_OK;
}

static int test_learns(nncl_context *ctx, int d) {
    char name[128];
    tt_model m;
    nncl_trainer *t;
    float loss, acc;
    snprintf(name, sizeof name, "separable problem learnt to 100%% on %s", th_device_label(ctx, d));
    TH_CHECK(name, tt_build(ctx, &m, 0));
    TH_CHECK(name, (t = tt_trainer(ctx, &m, &d, 1, NULL, NNCL_OPT_ADAM)) != NULL);
    TH_OK(name, ctx, tt_train(t, &m, 0, 150, 40));
    TH_OK(name, ctx, nncl_trainer_evaluate(t, m.x, m.y, m.logits, tt_x, tt_y, TT_N, &loss, &acc));
    TH_CHECK(name, acc == 1.0f && loss < 0.05f);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s (loss %.4f)", name, loss);
    return 0;
}

static int test_repeatable(nncl_context *ctx) {
    const char *name = "same seed, same device: bitwise identical parameters";
    tt_model m1, m2;
    nncl_trainer *t1, *t2;
    float *p1, *p2;
    int d = 0;
    TH_CHECK(name, tt_build(ctx, &m1, 1) && tt_build(ctx, &m2, 1));
    TH_CHECK(name, (t1 = tt_trainer(ctx, &m1, &d, 1, NULL, NNCL_OPT_ADAM)) != NULL);
    TH_CHECK(name, (t2 = tt_trainer(ctx, &m2, &d, 1, NULL, NNCL_OPT_ADAM)) != NULL);
    TH_OK(name, ctx, tt_train(t1, &m1, 0, 20, 40));
    TH_OK(name, ctx, tt_train(t2, &m2, 0, 20, 40));
    p1 = (float *)calloc(m1.g->n_params, sizeof(float));
    p2 = (float *)calloc(m1.g->n_params, sizeof(float));
    TH_CHECK(name, !tt_params(t1, p1) && !tt_params(t2, p2));
    TH_CHECK(name, memcmp(p1, p2, m1.g->n_params * sizeof(float)) == 0);
    free(p1); free(p2);
    nncl_trainer_free(t1); nncl_trainer_free(t2);
    nncl_graph_free(m1.g); nncl_graph_free(m2.g);
    th_pass("%s", name);
    return 0;
}

/* Child process of the resume test: loads the checkpoint, trains the rest,
 * saves the parameters. */
static int tt_resume_child(const char *ckpt, const char *out) {
    nncl_context *ctx = th_context();
    tt_model m;
    nncl_trainer *t;
    int d = 0;
    if (!ctx || !tt_build(ctx, &m, 1) || !(t = tt_trainer(ctx, &m, &d, 1, NULL, NNCL_OPT_ADAM))) return 2;
    if (nncl_trainer_load_checkpoint(t, ckpt) != NNCL_OK) return 3;
    if (nncl_trainer_step_count(t) != 10) return 4;
    if (tt_train(t, &m, 10, 10, 40) != NNCL_OK) return 5;
    if (nncl_trainer_save(t, out) != NNCL_OK) return 6;
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(ctx);
    return 0;
}

static int test_resume(nncl_context *ctx, const char *self) {
    const char *name = "resume from checkpoint in a fresh process equals an uninterrupted run";
    tt_model m;
    nncl_trainer *t;
    nncl_safetensors *st = NULL;
    float *want;
    char cmd[1024];
    int d = 0, i, rc;
    char ckpt[64], out[64];
    snprintf(ckpt, sizeof ckpt, "/tmp/nncl-resume-%ld.ckpt", (long)getpid());
    snprintf(out, sizeof out, "/tmp/nncl-resume-%ld.safetensors", (long)getpid());
    TH_CHECK(name, tt_build(ctx, &m, 1));
    TH_CHECK(name, (t = tt_trainer(ctx, &m, &d, 1, NULL, NNCL_OPT_ADAM)) != NULL);
    TH_OK(name, ctx, tt_train(t, &m, 0, 10, 40));
    TH_OK(name, ctx, nncl_trainer_save_checkpoint(t, ckpt));
    TH_OK(name, ctx, tt_train(t, &m, 10, 10, 40));
    want = (float *)calloc(m.g->n_params, sizeof(float));
    TH_CHECK(name, !tt_params(t, want));
    snprintf(cmd, sizeof cmd, "NNCL_TEST_DEVICES=0 '%s' --resume-child %s %s", self, ckpt, out);
    rc = system(cmd);
    TH_CHECK(name, rc == 0);
    TH_OK(name, NULL, nncl_safetensors_load(out, &st));
    for (i = 0; i < m.g->n_nodes; i++) {
        nncl_node *n = m.g->nodes[i];
        nncl_safetensors_entry e;
        int k = nncl_safetensors_find(st, n->name);
        if (n->op != NNCL_OP_PARAM) continue;
        TH_CHECK(name, k >= 0 && nncl_safetensors_get(st, k, &e) == NNCL_OK);
        TH_CHECK(name, e.numel == n->sample_numel);
        if (memcmp(e.data, want + n->param_off, e.numel * 4) != 0) {
            th_fail(name, "%s differs: [0] resumed %.9g, uninterrupted %.9g", n->name, e.data[0], want[n->param_off]);
            return 1;
        }
    }
    nncl_safetensors_free(st);
    free(want);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    remove(ckpt);
    remove(out);
    th_pass("%s", name);
    return 0;
}

/* The normalised squared difference of a's and b's parameters and running
 * statistics (b's read from its first live device) into *diff; nonzero
 * when they could not be read. */
static int tt_diff(nncl_trainer *a, nncl_trainer *b, const nncl_graph *g, double *diff) {
    float *pa = (float *)calloc(g->n_params + g->n_state + 1, sizeof(float));
    float *pb = (float *)calloc(g->n_params + g->n_state + 1, sizeof(float));
    double num = 0, den = 0;
    size_t k, n = g->n_params + g->n_state;
    int bad = !pa || !pb || nncl__trainer_download(a, pa, pa + g->n_params) != NNCL_OK ||
              nncl__trainer_download(b, pb, pb + g->n_params) != NNCL_OK;
    for (k = 0; !bad && k < n; k++) {
        num += ((double)pa[k] - pb[k]) * ((double)pa[k] - pb[k]);
        den += (double)pa[k] * pa[k];
    }
    free(pa);
    free(pb);
    *diff = num / den;
    return bad;
}

/* All devices (optionally with fixed shares) against device 0 alone. */
static int test_parallel(nncl_context *ctx, const float *shares, const char *what, int fail_at) {
    char name[200];
    tt_model m1, mn;
    nncl_trainer *t1, *tn;
    double diff;
    int d0 = 0, nd = nncl_device_count(ctx), i;
    snprintf(name, sizeof name, "%d devices (%s%s) equal one device with the same global batch", nd < 2 ? 2 : nd,
             tt_cnn ? "CNN with batch norm, " : "", what);
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tt_build(ctx, &m1, 1) && tt_build(ctx, &mn, 1));
    TH_CHECK(name, (t1 = tt_trainer(ctx, &m1, &d0, 1, NULL, NNCL_OPT_SGD)) != NULL);
    TH_CHECK(name, (tn = tt_trainer(ctx, &mn, NULL, nd, shares, NNCL_OPT_SGD)) != NULL);
    if (fail_at >= 0) {
        tn->fail_device = 1;
        tn->fail_step = fail_at;
    }
    for (i = 0; i < 12; i++) {
        nncl_step_info info;
        nncl_feed f[2];
        int start = (i * 40) % (TT_N - 40 + 1);
        f[0].node = mn.x; f[0].data = mn.data + (size_t)start * mn.x->sample_numel;
        f[1].node = mn.y; f[1].data = tt_y + start;
        TH_OK(name, ctx, nncl_trainer_step(tn, f, 2, 40, &info));
        if (i == fail_at) TH_CHECK(name, info.failed_device == 1 && info.n_devices == nd - 1);
        else TH_CHECK(name, info.failed_device == -1);
    }
    TH_OK(name, ctx, tt_train(t1, &m1, 0, 12, 40));
    TH_CHECK(name, nncl_trainer_step_count(tn) == 12 && nncl_trainer_step_count(t1) == 12);
    TH_CHECK(name, !tt_diff(t1, tn, m1.g, &diff)); /* running statistics too */
    if (!(diff < 1e-10)) {
        th_fail(name, "normalised squared difference %.3g", diff);
        return 1;
    }
    nncl_trainer_free(t1); nncl_trainer_free(tn);
    nncl_graph_free(m1.g); nncl_graph_free(mn.g);
    th_pass("%s (normalised squared difference %.2g)", name, diff);
    return 0;
}

static void *tt_release(void *event) {
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    clSetUserEventStatus((cl_event)event, CL_COMPLETE);
    return NULL;
}

/* A device given no shard still receives every step's averaged gradient.
 * Its queue is held back here (a marker waiting on a user event, released
 * 0.3 s later) while the other device computes the next steps: the host
 * must not overwrite the gradient it averaged while an earlier step's copy
 * of it is still waiting in that queue. */
static int test_idle_device(nncl_context *ctx) {
    const char *name = "a device with an empty shard and a slow queue ends with the one-device parameters";
    static const float shares[2] = {1, 100000}; /* 40 samples: device 0 gets none */
    static const int devs[2] = {0, 1};
    tt_model m1, mn;
    nncl_trainer *t1, *tn;
    double diff;
    int d0 = 0;
    cl_int err;
    cl_event hold;
    pthread_t th;
    nncl_device *dev;
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tt_build(ctx, &m1, 0) && tt_build(ctx, &mn, 0));
    TH_CHECK(name, (t1 = tt_trainer(ctx, &m1, &d0, 1, NULL, NNCL_OPT_SGD)) != NULL);
    TH_CHECK(name, (tn = tt_trainer(ctx, &mn, devs, 2, shares, NNCL_OPT_SGD)) != NULL);
    TH_OK(name, ctx, tt_train(tn, &mn, 0, 1, 40));
    TH_CHECK(name, tn->shard[0] == 0 && tn->shard[1] == 40);
    dev = nncl__plan_device(tn->plan[0]);
    hold = clCreateUserEvent(dev->cl_ctx, &err);
    TH_CHECK(name, err == CL_SUCCESS);
    TH_CHECK(name, clEnqueueMarkerWithWaitList(dev->queue, 1, &hold, NULL) == CL_SUCCESS);
    TH_CHECK(name, pthread_create(&th, NULL, tt_release, hold) == 0);
    TH_OK(name, ctx, tt_train(tn, &mn, 1, 3, 40));
    pthread_join(th, NULL);
    clReleaseEvent(hold);
    TH_OK(name, ctx, tt_train(t1, &m1, 0, 4, 40));
    TH_CHECK(name, !tt_diff(t1, tn, m1.g, &diff)); /* tn's from device 0, the idle one */
    nncl_trainer_free(t1); nncl_trainer_free(tn);
    nncl_graph_free(m1.g); nncl_graph_free(mn.g);
    if (!(diff < 1e-10)) {
        th_fail(name, "normalised squared difference %.3g", diff);
        return 1;
    }
    th_pass("%s (normalised squared difference %.2g)", name, diff);
    return 0;
}

static int test_nan_skip(nncl_context *ctx) {
    const char *name = "a NaN batch is skipped and leaves the parameters unchanged";
    tt_model m;
    nncl_trainer *t;
    nncl_step_info info;
    nncl_feed f[2];
    float *before, *after, bad[40 * TT_D];
    int d = 0;
    TH_CHECK(name, tt_build(ctx, &m, 0));
    TH_CHECK(name, (t = tt_trainer(ctx, &m, &d, 1, NULL, NNCL_OPT_ADAM)) != NULL);
    before = (float *)calloc(m.g->n_params, sizeof(float));
    after = (float *)calloc(m.g->n_params, sizeof(float));
    memcpy(bad, tt_x, sizeof bad);
    bad[5] = NAN;
    f[0].node = m.x; f[0].data = bad;
    f[1].node = m.y; f[1].data = tt_y;
    TH_CHECK(name, !tt_params(t, before));
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, 40, &info));
    TH_CHECK(name, info.skipped == 1 && nncl_trainer_step_count(t) == 0);
    TH_CHECK(name, !tt_params(t, after));
    TH_CHECK(name, memcmp(before, after, m.g->n_params * sizeof(float)) == 0);
    /* bad labels are refused before any device work */
    bad[0] = 7;
    f[0].data = tt_x;
    f[1].data = bad;
    TH_CHECK(name, nncl_trainer_step(t, f, 2, 40, &info) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "class index") != NULL);
    free(before); free(after);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

int main(int argc, char **argv) {
    nncl_context *ctx;
    int d;
    char cache[] = "/tmp/nncl-trainer-XXXXXX";
    int own_cache;
    static const float uneven[8] = {3, 1, 1, 1, 1, 1, 1, 1}, even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tt_data();
    if (argc == 4 && strcmp(argv[1], "--resume-child") == 0) return tt_resume_child(argv[2], argv[3]);
    /* A cache folder of its own, which the resume child inherits: another
     * process rewriting a shared choice file between the two would let the
     * child pick another kernel and round differently. */
    own_cache = mkdtemp(cache) && setenv("NNCL_CACHE_DIR", cache, 1) == 0;
    if (!(ctx = th_context())) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx); d++) test_learns(ctx, d);
    test_repeatable(ctx);
    test_resume(ctx, argv[0]);
    test_nan_skip(ctx);
    test_idle_device(ctx);
    test_parallel(ctx, NULL, "measured split", -1);
    test_parallel(ctx, uneven, "uneven split 3:1", -1);
    test_parallel(ctx, even, "device 1 fails at step 4", 4);
    tt_clip = 0.01f; /* well below the gradient's norm: the host's sum of squares against the device's */
    test_parallel(ctx, uneven, "uneven split 3:1, gradients clipped", -1);
    tt_clip = 0;
    tt_overlap = 1;
    test_parallel(ctx, uneven, "uneven split, gradients read back during backward", -1);
    test_parallel(ctx, even, "overlapped read-back, device 1 fails at step 4", 4);
    tt_overlap = 0;
    tt_cnn = 1;
    test_parallel(ctx, NULL, "measured split", -1);
    test_parallel(ctx, uneven, "uneven split 3:1", -1);
    test_parallel(ctx, even, "device 1 fails at step 4", 4);
    tt_cnn = 0;
    nncl_free(ctx);
    if (own_cache) {
        char rm[64];
        snprintf(rm, sizeof rm, "rm -rf '%s'", cache);
        if (system(rm) != 0) th_fail("trainer", "could not remove %s", cache);
    }
    return th_exit_code();
}
