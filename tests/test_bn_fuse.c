/* test_bn_fuse.c - batch norm with its activation and residual add in one
 * node (nncl_batchnorm_act) trains as the separate nodes do: a small
 * residual CNN (ReLU, hard-swish, ReLU6 and a plain residual sum; 3, 5 and
 * 17 channels at 13x13 and 7x7) built both ways, its parameters, running
 * statistics, optimizer state, losses and evaluation-mode outputs compared
 * in fp32 and half storage, on the fused kernels and on the separate
 * passes (NNCL_BN_FUSE=0); checkpointing's recompute bit-identical; two
 * devices as one; a NaN step skipped with nothing moved; a model file
 * read back; a bad activation or residual refused. The plan's rewrite of
 * the separate nodes into the fused node: bit for bit as the fused
 * builders, with checkpointing and on two devices; chains whose
 * intermediate has a second reader or is a marked boundary left apart;
 * a prediction of a fused-away node. The op itself
 * (double reference, finite differences, poisoned outputs, both paths) is
 * in tests/test_op_table.c. */
#include "harness.h"
#include "io/io.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BF_N 32
#define BF_B 8
#define BF_IN (3 * 13 * 13)
#define BF_CLASSES 4
#define BF_STEPS 6

static float bf_x[BF_N * BF_IN], bf_y[BF_N];

/* How bf_build builds the blocks: as one fused node each, or as separate
 * nodes (which the plan fuses); BF_SHARED gives bn2's sum and bn5's batch
 * norm a second consumer, BF_MARKED marks bn2's batch norm a checkpoint
 * boundary, so that the plan leaves those chains (partly) apart. */
enum { BF_SEPARATE, BF_FUSED, BF_SHARED, BF_MARKED };

typedef struct bf_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    nncl_node *bn2, *sum2; /* separate: bn2's batch norm and its sum with the residual */
} bf_model;

/* act(bn(h) + res) as one node (fused) or as batchnorm, add and the
 * activation's op; *bn and *sum (where not NULL) get the separate nodes. */
static nncl_node *bf_bn(nncl_graph *g, nncl_node *h, nncl_node *res, nncl_bn_act act, int fused, const char *name,
                        nncl_node **bn, nncl_node **sum) {
    if (fused == BF_FUSED)
        return res ? nncl_batchnorm_add_act(g, h, res, act, 0.1f, 1e-5f, name)
                   : nncl_batchnorm_act(g, h, act, 0.1f, 1e-5f, name);
    h = nncl_batchnorm(g, h, 0.1f, 1e-5f, name);
    if (bn) *bn = h;
    if (res) h = nncl_op_add(g, h, res);
    if (sum) *sum = h;
    if (act == NNCL_BN_ACT_RELU) h = nncl_op_relu(g, h);
    if (act == NNCL_BN_ACT_RELU6) h = nncl_op_relu6(g, h);
    if (act == NNCL_BN_ACT_HARDSWISH) h = nncl_op_hardswish(g, h);
    return h;
}

static int bf_build(nncl_context *ctx, bf_model *m, int fused) {
    int in[3] = {3, 13, 13};
    nncl_node *h, *a;
    memset(m, 0, sizeof *m);
    m->g = nncl_graph_create(ctx, 9);
    m->x = nncl_input(m->g, "x", 3, in);
    h = nncl_conv2d(m->g, m->x, 5, 3, 1, 1, 0, NNCL_ACT_NONE, "c1");
    nncl_node *bn5 = NULL;
    h = bf_bn(m->g, h, NULL, NNCL_BN_ACT_RELU, fused, "bn1", NULL, NULL);
    a = nncl_conv2d(m->g, h, 5, 3, 1, 1, 0, NNCL_ACT_NONE, "c2");
    h = bf_bn(m->g, a, h, NNCL_BN_ACT_RELU, fused, "bn2", &m->bn2, &m->sum2);
    if (fused == BF_SHARED) h = nncl_op_add(m->g, h, m->sum2);
    if (fused == BF_MARKED && nncl_checkpoint_mark(m->g, m->bn2) != NNCL_OK) return 0;
    a = nncl_conv2d(m->g, h, 17, 3, 2, 1, 0, NNCL_ACT_NONE, "c3"); /* 7x7 */
    h = bf_bn(m->g, a, NULL, NNCL_BN_ACT_HARDSWISH, fused, "bn3", NULL, NULL);
    a = nncl_conv2d(m->g, h, 17, 3, 1, 1, 0, NNCL_ACT_NONE, "c4");
    h = bf_bn(m->g, a, h, NNCL_BN_ACT_RELU6, fused, "bn4", NULL, NULL);
    a = nncl_conv2d(m->g, h, 17, 1, 1, 0, 0, NNCL_ACT_NONE, "c5");
    h = bf_bn(m->g, a, h, NNCL_BN_ACT_NONE, fused, "bn5", &bn5, NULL);
    if (fused == BF_SHARED) h = nncl_op_add(m->g, h, bn5);
    m->logits = nncl_linear(m->g, nncl_global_avgpool(m->g, h), BF_CLASSES, 1, NNCL_ACT_NONE, "fc");
    m->y = nncl_input(m->g, "y", 0, NULL);
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    return m->loss != NULL;
}

static nncl_train_config bf_config(nncl_precision prec, int checkpoint, const int *devs, int nd) {
    static const float even[2] = {1, 1};
    nncl_train_config c = nncl_train_default();
    c.max_batch = BF_B;
    c.precision = prec;
    c.checkpoint = (nncl_checkpoint)checkpoint;
    c.devices = devs;
    c.n_devices = nd;
    c.shares = nd > 1 ? even : NULL;
    /* SGD: Adam's normalisation would magnify rounding in the comparisons */
    c.optim = nncl_optim_default(NNCL_OPT_SGD);
    c.optim.momentum = 0.9f;
    return c;
}

static void bf_feeds(const bf_model *m, nncl_feed *f, int step) {
    int start = (step * 5) % (BF_N - BF_B + 1);
    f[0].node = m->x;
    f[0].data = bf_x + (size_t)start * BF_IN;
    f[1].node = m->y;
    f[1].data = bf_y + start;
}

/* Every parameter from its name (the two graphs number their nodes, and so
 * seed their initial values, differently): batch norm's weights about 1. */
static nncl_status bf_params(nncl_trainer *t, const nncl_graph *g) {
    float v[17 * 17 * 9];
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        unsigned seed = 1;
        const char *c;
        size_t k, count;
        if (n->op != NNCL_OP_PARAM) continue;
        for (c = n->name; *c; c++) seed = seed * 31u + (unsigned char)*c;
        count = n->sample_numel;
        if (count > sizeof v / sizeof v[0]) return NNCL_ERR_INVALID_ARGUMENT;
        th_fill_uniform(v, count, -0.4f, 0.4f, &seed);
        if (!strncmp(n->name, "bn", 2) && strstr(n->name, ".weight"))
            for (k = 0; k < count; k++) v[k] += 1.0f;
        NNCL_TRY(nncl_trainer_param_set(t, n->name, v, count));
    }
    return NNCL_OK;
}

/* Parameters, running statistics and optimizer state of device 0, then
 * the losses of BF_STEPS steps and the evaluation-mode logits of the
 * first batch: into a new array of *n floats. */
static float *bf_run(nncl_context *ctx, const char *name, int fused, const char *env, nncl_precision prec,
                     int checkpoint, int nd, size_t *n, int *rec, int *n_fused) {
    static const int devs[2] = {0, 1};
    bf_model m;
    nncl_train_config tc = bf_config(prec, checkpoint, devs, nd);
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    float *s = NULL;
    size_t np, ns, no;
    int i, ok = 1;
    char key[32] = "";
    if (env) { /* NAME=VALUE */
        snprintf(key, sizeof key, "%.*s", (int)(strchr(env, '=') - env), env);
        setenv(key, strchr(env, '=') + 1, 1);
    }
    if (!bf_build(ctx, &m, fused) || nncl_trainer_create(ctx, m.g, m.loss, &tc, &t) != NNCL_OK ||
        bf_params(t, m.g) != NNCL_OK) {
        th_fail(name, "building or planning: %s", nncl_last_error(ctx));
        nncl_graph_free(m.g);
        if (env) unsetenv(key);
        return NULL;
    }
    np = m.g->n_params;
    ns = m.g->n_state;
    no = t->opt_floats;
    *n = np + ns + no + BF_STEPS + BF_B * BF_CLASSES;
    if (rec) *rec = t->plan[0]->n_rec;
    if (n_fused) *n_fused = t->plan[0]->n_fused;
    s = (float *)calloc(*n, sizeof *s);
    for (i = 0; ok && s && i < BF_STEPS; i++) {
        bf_feeds(&m, f, i);
        ok = nncl_trainer_step(t, f, 2, BF_B, &info) == NNCL_OK && !info.skipped;
        if (ok) s[np + ns + no + i] = info.loss;
    }
    bf_feeds(&m, f, 0);
    ok = ok && s && nncl__trainer_download(t, s, s + np) == NNCL_OK &&
         nncl__plan_get(t->plan[0], NNCL__PB_OPT, 0, no, s + np + ns, 1) == NNCL_OK &&
         nncl_trainer_predict(t, f, 1, BF_B, m.logits, s + np + ns + no + BF_STEPS) == NNCL_OK;
    if (!ok) {
        th_fail(name, "training: %s", nncl_last_error(ctx));
        free(s);
        s = NULL;
    }
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    if (env) unsetenv(key);
    return s;
}

/* Normalised squared difference of a and b (n floats each). */
static double bf_nsd(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return den > 0 ? num / den : num;
}

/* Run a against run b: within tol (0: bit for bit); the plan of b fuses
 * fused_b chains (-1: any number). */
static int bf_compare(nncl_context *ctx, const char *name, int fa, const char *ea, int fb, const char *eb,
                      nncl_precision prec, int ca, int cb, int nda, int ndb, double tol, int fused_b) {
    size_t na = 0, nb = 0, i;
    int rec = 0, finite = 1, nf = 0;
    float *a, *b;
    double d;
    if (ndb > 1 && th_devices_lack(ctx, ndb, name)) return 0;
    a = bf_run(ctx, name, fa, ea, prec, ca, nda, &na, NULL, NULL);
    b = bf_run(ctx, name, fb, eb, prec, cb, ndb, &nb, &rec, &nf);
    if (!a || !b || na != nb) {
        free(a); free(b);
        if (a && b) th_fail(name, "%zu values against %zu", na, nb);
        return 1;
    }
    for (i = 0; i < na; i++) finite &= isfinite(a[i]) != 0;
    d = bf_nsd(a, b, na);
    if (!finite || (tol == 0 ? memcmp(a, b, na * sizeof *a) != 0 : !(d <= tol)) || (cb && rec == 0) ||
        (fused_b >= 0 && nf != fused_b)) {
        th_fail(name, "normalised squared difference %.3g (allowed %.3g), %s, %d ops recomputed, %d chains fused "
                "(want %d)", d, tol, finite ? "finite" : "not finite", rec, nf, fused_b);
        free(a); free(b);
        return 1;
    }
    free(a); free(b);
    th_pass("%s (normalised squared difference %.2g%s)", name, d, cb ? ", with ops recomputed" : "");
    return 0;
}

/* A NaN in the batch: the step is skipped and nothing moves, the running
 * statistics included. */
static int test_nan_skip(nncl_context *ctx) {
    const char *name = "fused batch norm: a NaN step is skipped, parameters and running statistics unmoved";
    static const int d0 = 0;
    bf_model m;
    nncl_train_config tc = bf_config(NNCL_PRECISION_FP32, 0, &d0, 1);
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    float bad[BF_B * BF_IN], *before, *after;
    size_t n;
    TH_CHECK(name, bf_build(ctx, &m, 1));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t));
    n = m.g->n_params + m.g->n_state;
    before = (float *)calloc(n, sizeof(float));
    after = (float *)calloc(n, sizeof(float));
    TH_CHECK(name, before && after);
    bf_feeds(&m, f, 0);
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, BF_B, &info));
    TH_OK(name, ctx, nncl__trainer_download(t, before, before + m.g->n_params));
    memcpy(bad, f[0].data, sizeof bad);
    bad[3 * BF_IN + 100] = NAN;
    f[0].data = bad;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, BF_B, &info));
    TH_CHECK(name, info.skipped == 1);
    TH_OK(name, ctx, nncl__trainer_download(t, after, after + m.g->n_params));
    TH_CHECK(name, memcmp(before, after, n * sizeof(float)) == 0);
    free(before); free(after);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* The model file's graph text keeps the activation and the residual: the
 * graph read back describes itself the same and, with the saved weights
 * and statistics, predicts the same bit for bit; a bad activation in the
 * text or a residual of another shape is refused naming the node. */
static int test_file_and_errors(nncl_context *ctx) {
    const char *name = "fused batch norm in a model file; a bad activation or residual refused",
               *path = "/tmp/test_bn_fuse_model.safetensors";
    static const int d0 = 0;
    bf_model m;
    nncl_train_config tc = bf_config(NNCL_PRECISION_FP32, 0, &d0, 1);
    nncl_trainer *t = NULL, *t2 = NULL;
    nncl_safetensors *st = NULL;
    nncl_graph *g2 = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    char *text1 = NULL, *text2 = NULL;
    static float out1[BF_B * BF_CLASSES], out2[BF_B * BF_CLASSES];
    int other[3] = {5, 7, 7};
    TH_CHECK(name, bf_build(ctx, &m, 1));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t));
    bf_feeds(&m, f, 0);
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, BF_B, &info));
    TH_OK(name, ctx, nncl_trainer_predict(t, f, 1, BF_B, m.logits, out1));
    TH_OK(name, ctx, nncl_trainer_save(t, path));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    TH_OK(name, ctx, nncl_graph_from_safetensors(ctx, st, &g2));
    text1 = nncl__graph_describe(m.g);
    text2 = nncl__graph_describe(g2);
    TH_CHECK(name, text1 && text2 && !strcmp(text1, text2) && strstr(text1, "activation=3"));
    TH_OK(name, ctx, nncl_trainer_create(ctx, g2, g2->nodes[m.loss->id], &tc, &t2));
    TH_OK(name, ctx, nncl_trainer_load(t2, path));
    f[0].node = g2->nodes[m.x->id];
    TH_OK(name, ctx, nncl_trainer_predict(t2, f, 1, BF_B, g2->nodes[m.logits->id], out2));
    TH_CHECK(name, memcmp(out1, out2, sizeof out1) == 0);
    /* errors at build time, naming the node, adding nothing */
    {
        nncl_graph *g = nncl_graph_create(ctx, 1);
        int xs[3] = {5, 7, 9}, keep;
        nncl_node *x = nncl_input(g, "x", 3, xs), *o = nncl_input(g, "other", 3, other);
        keep = g->n_nodes;
        TH_CHECK(name, nncl_batchnorm_act(g, x, (nncl_bn_act)7, 0.1f, 1e-5f, "bad_act") == NULL &&
                           strstr(nncl_last_error(ctx), "bad_act") && strstr(nncl_last_error(ctx), "activation 7"));
        TH_CHECK(name, nncl_batchnorm_add_act(g, x, o, NNCL_BN_ACT_RELU, 0.1f, 1e-5f, "bad_res") == NULL &&
                           strstr(nncl_last_error(ctx), "bad_res") && strstr(nncl_last_error(ctx), "[B,5,7,7]") &&
                           strstr(nncl_last_error(ctx), "[B,5,7,9]"));
        TH_CHECK(name, nncl_batchnorm_add_act(g, x, NULL, NNCL_BN_ACT_RELU, 0.1f, 1e-5f, "no_res") == NULL &&
                           strstr(nncl_last_error(ctx), "no_res") && strstr(nncl_last_error(ctx), "residual is NULL"));
        TH_CHECK(name, g->n_nodes == keep && nncl_graph_find(g, "bad_res.weight") == NULL);
        nncl_graph_free(g);
    }
    NNCL_FREE(text1);
    NNCL_FREE(text2);
    nncl_safetensors_free(st);
    nncl_trainer_free(t);
    nncl_trainer_free(t2);
    nncl_graph_free(g2);
    nncl_graph_free(m.g);
    remove(path);
    th_pass("%s", name);
    return 0;
}

/* A value the plan fused away is still what a prediction of it returns:
 * bn2's batch norm and its sum, bit for bit as with the nodes apart, and
 * a read of it after a step (which keeps none) is refused. */
static int test_predict_inner(nncl_context *ctx) {
    const char *name = "a prediction of a node fused away equals the separate nodes' bit for bit";
    static const int d0 = 0;
    nncl_train_config tc = bf_config(NNCL_PRECISION_FP32, 0, &d0, 1);
    static float out[2][2][BF_B * 5 * 13 * 13];
    int run, k, nf = -1;
    for (run = 0; run < 2; run++) {
        bf_model m;
        nncl_trainer *t = NULL;
        nncl_feed f[2];
        nncl_step_info info;
        if (run == 0) setenv("NNCL_BN_FUSE", "0", 1);
        TH_CHECK(name, bf_build(ctx, &m, BF_SEPARATE));
        TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t));
        TH_OK(name, ctx, bf_params(t, m.g));
        bf_feeds(&m, f, 0);
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, BF_B, &info));
        if (run == 1) {
            nf = t->plan[0]->n_fused;
            /* after a step, the fused node's value is the activation's, not bn2's */
            TH_CHECK(name, nncl__plan_read(t->plan[0], m.bn2, out[1][0], BF_B, NULL) == NNCL_ERR_STATE &&
                               strstr(nncl_last_error(ctx), "fused batch norm"));
        }
        for (k = 0; k < 2; k++)
            TH_OK(name, ctx, nncl_trainer_predict(t, f, 1, BF_B, k ? m.sum2 : m.bn2, out[run][k]));
        nncl_trainer_free(t);
        nncl_graph_free(m.g);
        unsetenv("NNCL_BN_FUSE");
    }
    TH_CHECK(name, nf == 5);
    TH_CHECK(name, memcmp(out[0], out[1], sizeof out[0]) == 0);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    unsigned seed = 5;
    int i;
    if (!ctx) return 1;
    th_fill_uniform(bf_x, sizeof bf_x / sizeof bf_x[0], -1, 1, &seed);
    for (i = 0; i < BF_N; i++) bf_y[i] = (float)(i % BF_CLASSES);
    /* the separate nodes as built: NNCL_BN_FUSE=0 (the plan fuses them otherwise) */
    bf_compare(ctx, "fused batch norm + activation + residual trains as the separate nodes, fp32", BF_SEPARATE,
               "NNCL_BN_FUSE=0", BF_FUSED, NULL, NNCL_PRECISION_FP32, 0, 0, 1, 1, 1e-10, 0);
    bf_compare(ctx, "fused batch norm's separate passes (NNCL_BN_FUSE=0) train as the separate nodes, fp32",
               BF_SEPARATE, "NNCL_BN_FUSE=0", BF_FUSED, "NNCL_BN_FUSE=0", NNCL_PRECISION_FP32, 0, 0, 1, 1, 1e-10, 0);
    bf_compare(ctx, "fused batch norm with per-channel groups (NNCL_BN=groups) trains as the separate nodes, fp32",
               BF_SEPARATE, "NNCL_BN_FUSE=0", BF_FUSED, "NNCL_BN=groups", NNCL_PRECISION_FP32, 0, 0, 1, 1, 1e-10, 0);
    bf_compare(ctx, "fused batch norm trains as the separate nodes, fp16 storage", BF_SEPARATE, "NNCL_BN_FUSE=0",
               BF_FUSED, NULL, NNCL_PRECISION_FP16, 0, 0, 1, 1, 1e-4, 0);
    bf_compare(ctx, "fused batch norm trains as the separate nodes, bf16 storage", BF_SEPARATE, "NNCL_BN_FUSE=0",
               BF_FUSED, NULL, NNCL_PRECISION_BF16, 0, 0, 1, 1, 1e-3, 0);
    bf_compare(ctx, "fused batch norm: separate passes (NNCL_BN_FUSE=0) as the fused ones, fp16 storage", BF_FUSED,
               "NNCL_BN_FUSE=0", BF_FUSED, NULL, NNCL_PRECISION_FP16, 0, 0, 1, 1, 1e-4, 0);
    bf_compare(ctx, "fused batch norm with checkpointing bit-identical to without, fp32", BF_FUSED, NULL, BF_FUSED,
               NULL, NNCL_PRECISION_FP32, 0, NNCL_CHECKPOINT_AUTO, 1, 1, 0, 0);
    bf_compare(ctx, "fused batch norm with checkpointing as without, fp16 storage", BF_FUSED, NULL, BF_FUSED, NULL,
               NNCL_PRECISION_FP16, 0, NNCL_CHECKPOINT_AUTO, 1, 1, 1e-10, 0);
    bf_compare(ctx, "fused batch norm on 2 devices (synchronised) as on 1", BF_FUSED, NULL, BF_FUSED, NULL,
               NNCL_PRECISION_FP32, 0, 0, 1, 2, 1e-10, 0);
    bf_compare(ctx, "fused batch norm's separate passes on 2 devices as the fused ones on 1", BF_FUSED, NULL,
               BF_FUSED, "NNCL_BN_FUSE=0", NNCL_PRECISION_FP32, 0, 0, 1, 2, 1e-10, 0);
    /* the plan's rewrite of the separate nodes into the fused node */
    bf_compare(ctx, "separate batch norm, add and activation nodes fused by the plan (5 chains) train bit for bit "
               "as the fused builders, fp32", BF_FUSED, NULL, BF_SEPARATE, NULL, NNCL_PRECISION_FP32, 0, 0, 1, 1, 0, 5);
    bf_compare(ctx, "separate nodes fused by the plan bit for bit as the fused builders, fp16 storage", BF_FUSED,
               NULL, BF_SEPARATE, NULL, NNCL_PRECISION_FP16, 0, 0, 1, 1, 0, 5);
    bf_compare(ctx, "separate nodes fused by the plan train as left apart (NNCL_BN_FUSE=0), fp32", BF_SEPARATE,
               "NNCL_BN_FUSE=0", BF_SEPARATE, NULL, NNCL_PRECISION_FP32, 0, 0, 1, 1, 1e-10, 5);
    bf_compare(ctx, "separate nodes fused by the plan: checkpointing bit-identical to without, fp32", BF_SEPARATE,
               NULL, BF_SEPARATE, NULL, NNCL_PRECISION_FP32, 0, NNCL_CHECKPOINT_AUTO, 1, 1, 0, 5);
    bf_compare(ctx, "separate nodes fused by the plan on 2 devices (synchronised) as on 1", BF_SEPARATE, NULL,
               BF_SEPARATE, NULL, NNCL_PRECISION_FP32, 0, 0, 1, 2, 1e-10, 5);
    bf_compare(ctx, "a batch norm or sum read twice is not fused away (4 chains), trains as left apart, fp32",
               BF_SHARED, "NNCL_BN_FUSE=0", BF_SHARED, NULL, NNCL_PRECISION_FP32, 0, 0, 1, 1, 1e-10, 4);
    bf_compare(ctx, "a batch norm marked as a checkpoint boundary is not fused away (4 chains), fp32", BF_MARKED,
               "NNCL_BN_FUSE=0", BF_MARKED, NULL, NNCL_PRECISION_FP32, NNCL_CHECKPOINT_MARKED,
               NNCL_CHECKPOINT_MARKED, 1, 1, 1e-10, 4);
    test_predict_inner(ctx);
    test_nan_skip(ctx);
    test_file_and_errors(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
