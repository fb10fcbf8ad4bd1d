/* test_mixed.c - mixed precision: dynamic loss scaling against PyTorch's
 * GradScaler (the scale of every step and the skipped steps of recorded
 * runs with injected overflows, tests/data/gradscaler_ref.txt), scaled
 * fp32 training equal bit for bit to unscaled (the scale is a power of two),
 * also clipped and over several devices, the scale resumed exactly from a
 * checkpoint, and the precision settings checked at creation. */
#include "opcheck.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TM_N 64
#define TM_D 6
#define TM_C 3

static float tm_x[TM_N * TM_D], tm_y[TM_N];

typedef struct tm_model {
    nncl_graph *g;
    nncl_node *x, *y, *loss;
} tm_model;

static void tm_data(void) {
    unsigned seed = 7;
    int i, k;
    for (i = 0; i < TM_N; i++) {
        tm_y[i] = (float)(i % TM_C);
        for (k = 0; k < TM_D; k++) tm_x[i * TM_D + k] = (k % TM_C == i % TM_C ? 2.0f : 0.0f) + th_uniform(&seed) - 0.5f;
    }
}

static int tm_spatial; /* tm_build adds batch norm and max pooling on a [3,2,2] view */

static int tm_build(nncl_context *ctx, tm_model *m) {
    int xs[1] = {TM_D}, vs[3] = {3, 2, 2};
    nncl_node *h;
    m->g = nncl_graph_create(ctx, 11);
    m->x = nncl_input(m->g, "x", 1, xs);
    m->y = nncl_input(m->g, "y", 0, NULL);
    if (tm_spatial) {
        h = nncl_reshape(m->g, nncl_linear(m->g, m->x, 12, 1, NNCL_ACT_NONE, "fc0"), 3, vs);
        h = nncl_flatten(m->g, nncl_maxpool2d(m->g, nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn"), 2, 2, 0));
        m->loss = nncl_softmax_cross_entropy(m->g, nncl_linear(m->g, h, TM_C, 1, NNCL_ACT_NONE, "fc2"), m->y);
        return m->loss != NULL;
    }
    h = nncl_linear(m->g, m->x, 8, 1, NNCL_ACT_RELU, "fc1");
    h = nncl_linear(m->g, h, TM_C, 1, NNCL_ACT_NONE, "fc2");
    m->loss = nncl_softmax_cross_entropy(m->g, h, m->y);
    return m->loss != NULL;
}

/* A trainer of m on devices devs[0..nd) (NULL: device 0), Adam, with loss
 * scaling `scaling` from init, growth interval `interval`. */
static nncl_trainer *tm_trainer(nncl_context *ctx, tm_model *m, const int *devs, int nd, int scaling, float init,
                                int interval, float clip) {
    static const int zero = 0;
    static const float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    c.max_batch = 16;
    c.optim.lr = 0.01f;
    c.optim.clip_norm = clip;
    c.devices = devs ? devs : &zero;
    c.n_devices = devs ? nd : 1;
    c.shares = nd > 1 ? even : NULL;
    c.loss_scaling = scaling;
    c.loss_scale_init = init;
    c.loss_scale_growth_interval = interval;
    if (nncl_trainer_create(ctx, m->g, m->loss, &c, &t) != NNCL_OK) return NULL;
    return t;
}

/* Step s on batch s mod 4 of 16 samples; a NaN in it when bad. */
static nncl_status tm_step(nncl_trainer *t, tm_model *m, int s, int bad, nncl_step_info *info) {
    float x[16 * TM_D];
    nncl_feed f[2];
    int start = (s % 4) * 16;
    memcpy(x, tm_x + start * TM_D, sizeof x);
    if (bad) x[3] = NAN;
    f[0].node = m->x;
    f[0].data = x;
    f[1].node = m->y;
    f[1].data = tm_y + start;
    return nncl_trainer_step(t, f, 2, 16, info);
}

static FILE *tm_open_ref(void) {
    static const char *const dirs[3] = {"tests/data", "../tests/data", "../../tests/data"};
    char path[256];
    int i;
    for (i = 0; i < 3; i++) {
        FILE *f;
        snprintf(path, sizeof path, "%s/gradscaler_ref.txt", dirs[i]);
        if ((f = fopen(path, "r")) != NULL) return f;
    }
    return NULL;
}

/* One recorded run: the same overflows injected, the scale of every step
 * and every skip compared with GradScaler's. */
static int tm_run_ref(nncl_context *ctx, FILE *f, const char *run, float init, int interval, int steps,
                      const char *bad_list) {
    char name[200];
    tm_model m;
    nncl_trainer *t;
    unsigned char *bad = (unsigned char *)calloc((size_t)steps + 1, 1);
    const char *p = bad_list;
    int s, n_bad = 0;
    snprintf(name, sizeof name, "loss scale of every step equals GradScaler's: run %s (%d steps, growth interval %d)",
             run, steps, interval);
    TH_CHECK(name, bad != NULL);
    while (*p) {
        int k = atoi(p);
        if (k >= 0 && k < steps) bad[k] = 1;
        while (*p && *p != ',') p++;
        if (*p) p++;
    }
    TH_CHECK(name, tm_build(ctx, &m));
    TH_CHECK(name, (t = tm_trainer(ctx, &m, NULL, 1, 1, init, interval, 0)) != NULL);
    for (s = 0; s < steps; s++) {
        nncl_step_info info;
        double want_scale;
        int want_skip;
        TH_CHECK(name, fscanf(f, "%lf %d", &want_scale, &want_skip) == 2);
        TH_OK(name, ctx, tm_step(t, &m, s, bad[s], &info));
        if ((double)info.loss_scale != want_scale || info.skipped != want_skip || info.overflow != want_skip) {
            th_fail(name, "step %d: scale %.9g skipped %d overflow %d, GradScaler %.9g skipped %d", s,
                    (double)info.loss_scale, info.skipped, info.overflow, want_scale, want_skip);
            return 1;
        }
        n_bad += want_skip;
    }
    TH_CHECK(name, nncl_trainer_step_count(t) == steps - n_bad);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    free(bad);
    th_pass("%s, %d overflows", name, n_bad);
    return 0;
}

static int test_gradscaler(nncl_context *ctx) {
    const char *name = "GradScaler reference file";
    FILE *f = tm_open_ref();
    char line[512];
    int runs = 0;
    if (!f) {
        th_fail(name, "tests/data/gradscaler_ref.txt not found (run from the source folder)");
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        char run[64], list[400];
        double init;
        int interval, steps;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "run %63s %lf %d %d %399s", run, &init, &interval, &steps, list) != 5) {
            th_fail(name, "malformed line: %s", line);
            fclose(f);
            return 1;
        }
        if (tm_run_ref(ctx, f, run, (float)init, interval, steps, list)) {
            fclose(f);
            return 1;
        }
        if (!fgets(line, sizeof line, f)) break; /* the end of the last step's line */
        runs++;
    }
    fclose(f);
    TH_CHECK(name, runs == 2);
    return 0;
}

static int tm_params(nncl_trainer *t, float *out) { return nncl__trainer_download(t, out, NULL) != NNCL_OK; }

/* Scaled fp32 training changes no bit of the parameters: the gradients are
 * multiplied by a power of two and divided by it exactly. */
static int test_scaled_equals_unscaled(nncl_context *ctx, const int *devs, int nd, float clip, const char *what) {
    char name[200];
    tm_model a, b;
    nncl_trainer *ta, *tb;
    float *pa, *pb;
    int s;
    snprintf(name, sizeof name, "fp32 training with loss scale 2^10 equals unscaled bit for bit (%s)", what);
    TH_CHECK(name, tm_build(ctx, &a) && tm_build(ctx, &b));
    TH_CHECK(name, (ta = tm_trainer(ctx, &a, devs, nd, -1, 0, 0, clip)) != NULL);
    TH_CHECK(name, (tb = tm_trainer(ctx, &b, devs, nd, 1, 1024.0f, 4, clip)) != NULL);
    for (s = 0; s < 12; s++) {
        nncl_step_info ia, ib;
        TH_OK(name, ctx, tm_step(ta, &a, s, 0, &ia));
        TH_OK(name, ctx, tm_step(tb, &b, s, 0, &ib));
        TH_CHECK(name, ia.loss_scale == 1.0f && ib.loss_scale == (s < 4 ? 1024.0f : s < 8 ? 2048.0f : 4096.0f));
        TH_CHECK(name, !ib.skipped && !ib.overflow);
        TH_CHECK(name, ia.loss == ib.loss);
    }
    pa = (float *)calloc(a.g->n_params, sizeof(float));
    pb = (float *)calloc(b.g->n_params, sizeof(float));
    TH_CHECK(name, pa && pb && !tm_params(ta, pa) && !tm_params(tb, pb));
    if (memcmp(pa, pb, a.g->n_params * sizeof(float)) != 0) {
        th_fail(name, "parameters differ: [0] %.9g vs %.9g", pa[0], pb[0]);
        return 1;
    }
    free(pa); free(pb);
    nncl_trainer_free(ta); nncl_trainer_free(tb);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    th_pass("%s", name);
    return 0;
}

/* The scale and its count of clean steps come back from a checkpoint: the
 * resumed trainer's scales and parameters follow the uninterrupted one's. */
static int test_resume_scale(nncl_context *ctx) {
    const char *name = "loss scale and growth count resume exactly from a checkpoint";
    char path[64];
    tm_model a, b;
    nncl_trainer *ta, *tb;
    float *pa, *pb;
    int s;
    snprintf(path, sizeof path, "/tmp/nncl-mixed-%ld.ckpt", (long)rand());
    TH_CHECK(name, tm_build(ctx, &a) && tm_build(ctx, &b));
    TH_CHECK(name, (ta = tm_trainer(ctx, &a, NULL, 1, 1, 256.0f, 3, 0)) != NULL);
    TH_CHECK(name, (tb = tm_trainer(ctx, &b, NULL, 1, 1, 256.0f, 3, 0)) != NULL);
    for (s = 0; s < 4; s++) TH_OK(name, ctx, tm_step(ta, &a, s, s == 1, NULL)); /* scale 128, 2 clean steps since */
    TH_OK(name, ctx, nncl_trainer_save_checkpoint(ta, path));
    TH_OK(name, ctx, nncl_trainer_load_checkpoint(tb, path));
    remove(path);
    for (s = 4; s < 12; s++) {
        nncl_step_info ia, ib;
        TH_OK(name, ctx, tm_step(ta, &a, s, s == 9, &ia));
        TH_OK(name, ctx, tm_step(tb, &b, s, s == 9, &ib));
        if (ia.loss_scale != ib.loss_scale || ia.skipped != ib.skipped) {
            th_fail(name, "step %d: scale %g resumed, %g uninterrupted", s, (double)ib.loss_scale, (double)ia.loss_scale);
            return 1;
        }
        if (s == 4 || s == 5) /* the third clean step after the backoff doubles it */
            TH_CHECK(name, ib.loss_scale == (s == 4 ? 128.0f : 256.0f));
    }
    pa = (float *)calloc(a.g->n_params, sizeof(float));
    pb = (float *)calloc(b.g->n_params, sizeof(float));
    TH_CHECK(name, pa && pb && !tm_params(ta, pa) && !tm_params(tb, pb));
    TH_CHECK(name, memcmp(pa, pb, a.g->n_params * sizeof(float)) == 0);
    free(pa); free(pb);
    nncl_trainer_free(ta); nncl_trainer_free(tb);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    th_pass("%s", name);
    return 0;
}

/* The MLP trained in fp16 and bf16 storage follows fp32: the same steps
 * give parameters within the storage format's rounding (relative to their
 * size), a loss close to fp32's, and every device learns the problem. */
static int test_half_training(nncl_context *ctx, int d, nncl_precision prec) {
    char name[200];
    tm_model a, b;
    nncl_trainer *ta = NULL, *tb = NULL;
    nncl_train_config c = nncl_train_default();
    float *pa, *pb, la = 0, lb = 0;
    double num = 0, den = 0, tol = prec == NNCL_PRECISION_FP16 ? 1e-4 : 3e-3;
    size_t k;
    int s, skipped = 0;
    snprintf(name, sizeof name, "MLP trained with %s storage follows fp32 on %s", prec == NNCL_PRECISION_FP16 ? "fp16" : "bf16",
             th_device_label(ctx, d));
    TH_CHECK(name, tm_build(ctx, &a) && tm_build(ctx, &b));
    c.max_batch = 16;
    c.optim.lr = 0.01f;
    c.devices = &d;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, a.g, a.loss, &c, &ta));
    c.precision = prec;
    TH_OK(name, ctx, nncl_trainer_create(ctx, b.g, b.loss, &c, &tb));
    for (s = 0; s < 40; s++) {
        nncl_step_info ia, ib;
        TH_OK(name, ctx, tm_step(ta, &a, s, 0, &ia));
        TH_OK(name, ctx, tm_step(tb, &b, s, 0, &ib));
        TH_CHECK(name, ib.loss_scale == (prec == NNCL_PRECISION_FP16 ? 65536.0f : 1.0f) || ib.overflow || skipped);
        skipped += ib.skipped;
        la = ia.loss;
        lb = ib.loss;
    }
    TH_CHECK(name, skipped == 0);
    pa = (float *)calloc(a.g->n_params, sizeof(float));
    pb = (float *)calloc(b.g->n_params, sizeof(float));
    TH_CHECK(name, pa && pb && !tm_params(ta, pa) && !tm_params(tb, pb));
    for (k = 0; k < a.g->n_params; k++) {
        num += ((double)pa[k] - pb[k]) * ((double)pa[k] - pb[k]);
        den += (double)pa[k] * pa[k];
    }
    if (!(num / den < tol) || !(fabsf(la - lb) < 0.02f) || !(la < 0.5f)) {
        th_fail(name, "parameters' normalised squared difference %.3g (tolerance %.0e), loss %.5f vs fp32 %.5f", num / den,
                tol, (double)lb, (double)la);
        return 1;
    }
    free(pa); free(pb);
    nncl_trainer_free(ta); nncl_trainer_free(tb);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    th_pass("%s (parameters' normalised squared difference %.2g, loss %.4f vs %.4f)", name, num / den, (double)lb,
            (double)la);
    return 0;
}

/* ------------------------------------------------------------- ops in half storage */

/* Tolerances (normalised squared error against the double reference) from
 * the formats' unit roundoff u, 2^-11 for fp16 and 2^-8 for bf16: every
 * stored activation, gradient and working weight is within u of its value
 * (relative), so one rounding gives a normalised squared error near u^2/3;
 * a value checked here went through at most a few dozen such roundings on
 * its way (inputs, two layers forward and back), so the bound is 40 u^2:
 * 1e-5 for fp16, 6e-4 for bf16. Sums (the GEMM's K, the bias gradient, the
 * softmax) accumulate in fp32 and add nothing comparable. The same bound
 * serves every op below:
 *   linear (own GEMM: half A, B and bias, fp32 panels and product; C in the
 *     storage type, the weight gradient in fp32), its bias gradient and the
 *     activations' backward in place;
 *   softmax cross-entropy (half logits and their gradient; labels, softmax,
 *     terms and the loss in fp32);
 *   reshape/flatten (an alias: no kernel);
 *   the unary activations (relu, leaky relu, sigmoid, tanh, gelu, gelu_tanh,
 *     silu, elu, softplus, scale) and dropout: fp32 arithmetic on each
 *     element between a half load and a half store;
 *   batch norm (statistics, running statistics and weight gradients in
 *     fp32), max and average pooling (the argmax kept in fp32), mse and binary
 *     cross-entropy (targets, terms and the loss in fp32): checked through
 *     the op table's rows (tests/test_op_table.c).
 * tests/opcheck.h adds a bound on every element, in units of the format's
 * unit roundoff (OC_ELEM_U), which the aggregate cannot give. */
static double tm_half_tol(int store) { return store == 1 ? 1e-5 : 6e-4; }

static void tm_check_linear_ce(nncl_context *ctx, int store, int batch, int in_f, int out_f, int bias, nncl_act act) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 42);
    int xs[1], i;
    unsigned seed = 3;
    nncl_node *x, *y, *h, *loss;
    oc_feed f[2];
    float *xd = (float *)malloc((size_t)batch * in_f * sizeof(float)), *yd = (float *)malloc((size_t)batch * sizeof(float));
    xs[0] = in_f;
    th_fill_uniform(xd, (size_t)batch * in_f, -1, 1, &seed);
    for (i = 0; i < batch; i++) yd[i] = (float)((i * 7 + 3) % out_f);
    x = nncl_input(g, "x", 1, xs);
    y = nncl_input(g, "y", 0, NULL);
    x->needs_grad = 1; /* the input gradient too: a half C of the dx product */
    h = nncl_linear(g, x, 9, 1, NNCL_ACT_TANH, "fc1");
    h = nncl_flatten(g, nncl_reshape(g, h, 2, (int[2]){3, 3}));
    h = nncl_linear(g, h, out_f, bias, act, "fc2");
    loss = nncl_softmax_cross_entropy(g, h, y);
    f[0].node = x; f[0].data = xd;
    f[1].node = y; f[1].data = yd;
    snprintf(name, sizeof name, "%s storage: linear+reshape+ce b%d in%d out%d bias%d act%d", store == 1 ? "fp16" : "bf16",
             batch, in_f, out_f, bias, (int)act);
    oc_store = store;
    oc_check(name, ctx, g, loss, f, 2, batch, tm_half_tol(store));
    oc_store = 0;
    free(xd); free(yd);
    nncl_graph_free(g);
}

/* One unary op (or dropout, op -1) between two linear layers. */
static void tm_check_unary(nncl_context *ctx, int store, int op) {
    static const char *const names[12] = {"relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "silu", "elu",
                                          "softplus", "scale", "dropout", "?"};
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 9);
    int xs[1] = {7}, i, batch = 6;
    unsigned seed = 11;
    nncl_node *x, *y, *h, *loss;
    oc_feed f[2];
    float xd[6 * 7], yd[6];
    th_fill_uniform(xd, 6 * 7, -2, 2, &seed);
    for (i = 0; i < batch; i++) yd[i] = (float)(i % 4);
    x = nncl_input(g, "x", 1, xs);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_linear(g, x, 10, 1, NNCL_ACT_NONE, "fc1");
    switch (op) {
    case 0: h = nncl_op_relu(g, h); break;
    case 1: h = nncl_op_leaky_relu(g, h, 0.1f); break;
    case 2: h = nncl_op_sigmoid(g, h); break;
    case 3: h = nncl_op_tanh(g, h); break;
    case 4: h = nncl_op_gelu(g, h); break;
    case 5: h = nncl_op_gelu_tanh(g, h); break;
    case 6: h = nncl_op_silu(g, h); break;
    case 7: h = nncl_op_elu(g, h, 1.0f); break;
    case 8: h = nncl_op_softplus(g, h); break;
    case 9: h = nncl_op_scale(g, h, -1.75f); break;
    default: h = nncl_dropout(g, h, 0.3f); break;
    }
    h = nncl_linear(g, h, 4, 1, NNCL_ACT_NONE, "fc2");
    loss = nncl_softmax_cross_entropy(g, h, y);
    f[0].node = x; f[0].data = xd;
    f[1].node = y; f[1].data = yd;
    snprintf(name, sizeof name, "%s storage: linear+%s+linear+ce", store == 1 ? "fp16" : "bf16", names[op]);
    oc_store = store;
    oc_check(name, ctx, g, loss, f, 2, batch, tm_half_tol(store));
    oc_store = 0;
    nncl_graph_free(g);
}

/* Data parallelism in half storage: all devices (even split) against one
 * device with the same global batch, to fp16's tolerance (the shards'
 * activations round differently from the whole batch's only through the
 * GEMM's order of summation, which the storage then rounds). */
static int test_half_parallel(nncl_context *ctx, const int *devs, int nd) {
    const char *name = tm_spatial ? "fp16 storage: all devices equal one device (synchronised batch norm, max pool)"
                                  : "fp16 storage: all devices equal one device with the same global batch";
    tm_model a, b;
    nncl_trainer *ta = NULL, *tb = NULL;
    nncl_train_config c = nncl_train_default();
    static const float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float *pa, *pb;
    double num = 0, den = 0;
    size_t k;
    int s, zero = 0;
    TH_CHECK(name, tm_build(ctx, &a) && tm_build(ctx, &b));
    c.max_batch = 16;
    c.optim.lr = 0.01f;
    c.precision = NNCL_PRECISION_FP16;
    c.devices = &zero;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, a.g, a.loss, &c, &ta));
    c.devices = devs;
    c.n_devices = nd;
    c.shares = even;
    TH_OK(name, ctx, nncl_trainer_create(ctx, b.g, b.loss, &c, &tb));
    for (s = 0; s < 20; s++) {
        nncl_step_info ia, ib;
        TH_OK(name, ctx, tm_step(ta, &a, s, 0, &ia));
        TH_OK(name, ctx, tm_step(tb, &b, s, 0, &ib));
        TH_CHECK(name, ib.n_devices == nd && ia.loss_scale == ib.loss_scale && ia.skipped == ib.skipped);
    }
    pa = (float *)calloc(a.g->n_params, sizeof(float));
    pb = (float *)calloc(b.g->n_params, sizeof(float));
    TH_CHECK(name, pa && pb && !tm_params(ta, pa) && !tm_params(tb, pb));
    for (k = 0; k < a.g->n_params; k++) {
        num += ((double)pa[k] - pb[k]) * ((double)pa[k] - pb[k]);
        den += (double)pa[k] * pa[k];
    }
    if (!(num / den < tm_half_tol(1))) {
        th_fail(name, "parameters' normalised squared difference %.3g > %.0e", num / den, tm_half_tol(1));
        return 1;
    }
    free(pa); free(pb);
    nncl_trainer_free(ta); nncl_trainer_free(tb);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    th_pass("%s (%d devices, parameters' normalised squared difference %.2g)", name, nd, num / den);
    return 0;
}

/* The rest of training in fp16: dropout, a frozen layer and clipping
 * together; the loss falls, the frozen weights keep every bit and the
 * clipped steps are taken (no overflow at the default scale). */
static int test_half_features(nncl_context *ctx) {
    const char *name = "fp16 storage with dropout, a frozen layer and clipping trains";
    nncl_graph *g = nncl_graph_create(ctx, 5);
    int xs[1] = {TM_D}, zero = 0, s;
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *h;
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    tm_model m;
    float w0[8 * TM_D], w1[8 * TM_D], first = 0, last = 0;
    h = nncl_dropout(g, nncl_linear(g, x, 8, 1, NNCL_ACT_RELU, "fc1"), 0.2f);
    m.g = g;
    m.x = x;
    m.y = y;
    m.loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, TM_C, 1, NNCL_ACT_NONE, "fc2"), y);
    TH_CHECK(name, m.loss != NULL);
    TH_OK(name, ctx, nncl_param_freeze(g, nncl_graph_find(g, "fc1.weight"), 1));
    c.max_batch = 16;
    c.optim.lr = 0.02f;
    c.optim.clip_norm = 0.5f;
    c.precision = NNCL_PRECISION_FP16;
    c.devices = &zero;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, m.loss, &c, &t));
    TH_OK(name, ctx, nncl_trainer_param_get(t, "fc1.weight", w0, 8 * TM_D));
    for (s = 0; s < 60; s++) {
        nncl_step_info info;
        TH_OK(name, ctx, tm_step(t, &m, s, 0, &info));
        TH_CHECK(name, !info.skipped && info.loss_scale == 65536.0f);
        if (s < 4) first += info.loss / 4;
        if (s >= 56) last += info.loss / 4;
    }
    TH_OK(name, ctx, nncl_trainer_param_get(t, "fc1.weight", w1, 8 * TM_D));
    TH_CHECK(name, memcmp(w0, w1, sizeof w0) == 0);
    if (!(last < 0.7f * first)) {
        th_fail(name, "mean loss of the first 4 steps %.4f, of the last 4 %.4f", (double)first, (double)last);
        return 1;
    }
    nncl_trainer_free(t);
    nncl_graph_free(g);
    th_pass("%s (loss %.3f -> %.3f)", name, (double)first, (double)last);
    return 0;
}

/* A parameter trained through an op whose half kernels write its gradient
 * in the storage type is refused when the trainer is made, naming both. */
static int test_half_refused(nncl_context *ctx) {
    const char *name = "a parameter trained through an op without fp32 parameter gradients is refused, named";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int xs[1] = {4}, zero = 0;
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *h, *loss;
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    /* (add and sub sum a parameter's gradient into fp32; mul does not) */
    h = nncl_op_mul(g, nncl_linear(g, x, 4, 1, NNCL_ACT_NONE, "fc"), nncl_param(g, "shift", 1, xs, NNCL_INIT_ONES, 0));
    loss = nncl_softmax_cross_entropy(g, h, y);
    TH_CHECK(name, loss != NULL);
    c.devices = &zero;
    c.n_devices = 1;
    c.precision = NNCL_PRECISION_BF16;
    TH_CHECK(name, nncl_trainer_create(ctx, g, loss, &c, &t) == NNCL_ERR_UNSUPPORTED && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "mul") && strstr(nncl_last_error(ctx), "\"shift\"") &&
                       strstr(nncl_last_error(ctx), "bf16"));
    nncl_graph_free(g);
    g = nncl_graph_create(ctx, 1); /* a parameter trained by an op other than linear: its gradient would be half */
    x = nncl_input(g, "x", 1, xs);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_op_relu(g, nncl_param(g, "p", 1, xs, NNCL_INIT_ONES, 0));
    loss = nncl_softmax_cross_entropy(g, nncl_op_add(g, x, h), y);
    TH_CHECK(name, loss != NULL);
    c.precision = NNCL_PRECISION_FP16;
    TH_CHECK(name, nncl_trainer_create(ctx, g, loss, &c, &t) == NNCL_ERR_UNSUPPORTED && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "\"p\""));
    nncl_graph_free(g);
    th_pass("%s: %s", name, nncl_last_error(ctx));
    return 0;
}

/* A long run of overflowing batches takes the scale down to its floor and
 * no further; the clean batches after it are taken and leave every weight
 * finite (a scale of 0 made 1/scale Inf and every weight NaN with status
 * OK), in the given precision, on devs[0..nd). */
static int test_scale_floor(nncl_context *ctx, const int *devs, int nd, nncl_precision prec, const char *what) {
    char name[200];
    tm_model m;
    nncl_trainer *t;
    nncl_train_config c = nncl_train_default();
    static const int zero = 0;
    static const float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    nncl_step_info info;
    float *p;
    size_t k, n, n_bad = 0;
    int s;
    snprintf(name, sizeof name, "%s, %s: 200 overflows in a row stop the loss scale at 2^-64; later steps keep the "
             "weights finite", prec == NNCL_PRECISION_FP16 ? "fp16 storage" : "fp32", what);
    TH_CHECK(name, tm_build(ctx, &m));
    c.max_batch = 16;
    c.optim.lr = 0.01f;
    c.precision = prec;
    c.loss_scaling = 1;
    c.devices = devs ? devs : &zero;
    c.n_devices = devs ? nd : 1;
    c.shares = nd > 1 ? even : NULL;
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    for (s = 0; s < 200; s++) {
        TH_OK(name, ctx, tm_step(t, &m, s, 1, &info));
        TH_CHECK(name, info.skipped && info.loss_scale >= NNCL_LOSS_SCALE_MIN);
    }
    for (s = 0; s < 3; s++) {
        TH_OK(name, ctx, tm_step(t, &m, s, 0, &info));
        TH_CHECK(name, info.loss_scale == NNCL_LOSS_SCALE_MIN && !info.skipped);
    }
    n = m.g->n_params;
    TH_CHECK(name, (p = (float *)malloc(n * sizeof(float))) != NULL && !tm_params(t, p));
    for (k = 0; k < n; k++) n_bad += !isfinite(p[k]);
    free(p);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    if (n_bad) {
        th_fail(name, "%zu of %zu weights are not finite", n_bad, n);
        return 1;
    }
    th_pass("%s", name);
    return 0;
}

/* At the floor scale 2^-64 a gradient can be finite scaled and overflow
 * unscaled; the step is skipped then (the check GradScaler makes after
 * unscaling) rather than the optimizer writing Inf into the weights. The
 * model makes one: logits = 10^30 (W x), W = 10^-3, x = 4 10^9, so that the
 * scaled weight gradient is near 10^20 and the unscaled one past FLT_MAX.
 * On several devices: one alone finds it already in the float sum of
 * squares it takes of the scaled gradient. */
static int test_unscaled_overflow(nncl_context *ctx, const int *devs, int nd) {
    const char *name = "a gradient that overflows only once unscaled is skipped, the weights kept (all devices)";
    static const float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int xs[1] = {2}, k;
    nncl_graph *g = nncl_graph_create(ctx, 3);
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *loss;
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_step_info info;
    nncl_feed f[2];
    float w[6], xv[2 * 8], yv[8] = {0}, after[6];
    loss = nncl_softmax_cross_entropy(g, nncl_op_scale(g, nncl_linear(g, x, 3, 0, NNCL_ACT_NONE, "fc"), 1e30f), y);
    TH_CHECK(name, loss != NULL);
    c.max_batch = 8;
    c.optim = nncl_optim_default(NNCL_OPT_SGD);
    c.optim.lr = 1;
    c.devices = devs;
    c.n_devices = nd;
    c.shares = even;
    c.loss_scaling = 1;
    c.loss_scale_init = NNCL_LOSS_SCALE_MIN;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    for (k = 0; k < 6; k++) w[k] = 1e-3f;
    for (k = 0; k < 2 * nd; k++) xv[k] = 4e9f;
    TH_OK(name, ctx, nncl_trainer_param_set(t, "fc.weight", w, 6));
    f[0].node = x; f[0].data = xv;
    f[1].node = y; f[1].data = yv;
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, nd, &info));
    TH_OK(name, ctx, nncl_trainer_param_get(t, "fc.weight", after, 6));
    TH_CHECK(name, isfinite(info.loss));
    if (!info.skipped || !info.overflow || memcmp(w, after, sizeof w) != 0) {
        th_fail(name, "skipped %d overflow %d, weight[0] %g after the step", info.skipped, info.overflow,
                (double)after[0]);
        return 1;
    }
    TH_CHECK(name, info.loss_scale == NNCL_LOSS_SCALE_MIN);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* Bad precision and loss-scaling fields are argument errors naming the
 * field; the step info says scale 1 without scaling. */
static int test_config(nncl_context *ctx) {
    const char *name = "precision and loss-scaling fields are checked at creation";
    static const int zero = 0;
    tm_model m;
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    TH_CHECK(name, c.precision == NNCL_PRECISION_FP32 && c.loss_scaling == 0);
    TH_CHECK(name, tm_build(ctx, &m));
    c.max_batch = 16;
    c.devices = &zero;
    c.n_devices = 1;
    c.precision = (nncl_precision)7;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "precision = 7") != NULL);
    c.precision = NNCL_PRECISION_FP32;
    c.loss_scaling = 2;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "loss_scaling = 2") != NULL);
    c.loss_scaling = 1;
    c.loss_scale_init = -1.0f;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "loss_scale_init") != NULL);
    c.loss_scale_init = INFINITY;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    c.loss_scale_init = 1e-40f; /* a denormal: 1/scale is Inf */
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "loss_scale_init") != NULL);
    c.loss_scale_init = NNCL_LOSS_SCALE_MAX * 2.0f;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    c.loss_scale_init = NNCL_LOSS_SCALE_MIN; /* the ends of the range are accepted */
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    nncl_trainer_free(t);
    c.loss_scale_init = NNCL_LOSS_SCALE_MAX;
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    nncl_trainer_free(t);
    t = NULL;
    c.loss_scale_init = 0;
    c.loss_scale_growth_interval = -3;
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &c, &t) == NNCL_ERR_INVALID_ARGUMENT && !t);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "loss_scale_growth_interval") != NULL);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* Half storage's working copy of the weights after training steps equals
 * the fp32 masters rounded to the format (bit for bit), with each
 * optimizer, and a frozen parameter's copy stays its master's. */
static int test_half_copy(nncl_context *ctx) {
    static const nncl_optimizer kinds[3] = {NNCL_OPT_ADAM, NNCL_OPT_ADAMW, NNCL_OPT_SGD};
    int prec, k;
    for (prec = 1; prec <= 2; prec++)
        for (k = 0; k < 3; k++) {
            char name[160];
            tm_model m;
            nncl_train_config c = nncl_train_default();
            nncl_trainer *t = NULL;
            nncl_step_info info;
            float *master = NULL;
            unsigned short *half = NULL;
            size_t n, i, bad = 0;
            int s;
            snprintf(name, sizeof name, "%s storage, %s: the weights' working copy is the masters rounded",
                     prec == 1 ? "fp16" : "bf16", k == 0 ? "Adam" : k == 1 ? "AdamW" : "SGD");
            TH_CHECK(name, tm_build(ctx, &m));
            TH_OK(name, ctx, nncl_param_freeze(m.g, nncl_graph_find(m.g, "fc1.bias"), 1));
            c.max_batch = 16;
            c.precision = (nncl_precision)prec;
            c.optim = nncl_optim_default(kinds[k]);
            c.optim.lr = 0.01f;
            c.optim.weight_decay = k == 1 ? 0.01f : 0.0f;
            TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
            for (s = 0; s < 5; s++) TH_OK(name, ctx, tm_step(t, &m, s, 0, &info));
            n = m.g->n_params;
            master = (float *)malloc(n * sizeof(float));
            half = (unsigned short *)malloc(n * sizeof(unsigned short));
            TH_CHECK(name, master && half && m.g->n_trainable < n);
            TH_OK(name, ctx, nncl__plan_get(t->plan[0], NNCL__PB_PARAMS, 0, n, master, 1));
            TH_CHECK(name, clEnqueueReadBuffer(nncl__plan_device(t->plan[0])->queue, t->plan[0]->ex.params_h, CL_TRUE, 0,
                                               n * sizeof(unsigned short), half, 0, NULL, NULL) == CL_SUCCESS);
            for (i = 0; i < n; i++)
                bad += half[i] != (prec == 1 ? nncl__f32_to_f16(master[i]) : nncl__f32_to_bf16(master[i]));
            free(master);
            free(half);
            nncl_trainer_free(t);
            nncl_graph_free(m.g);
            if (bad) th_fail(name, "%zu of %zu differ", bad, n);
            else th_pass("%s", name);
        }
    return 0;
}

int main(void) {
    nncl_context *ctx;
    int devs[8], nd, i, k;
    tm_data();
    if (!(ctx = th_context())) return th_exit_code();
    nd = nncl_device_count(ctx) < 8 ? nncl_device_count(ctx) : 8;
    for (i = 0; i < nd; i++) devs[i] = i;
    test_config(ctx);
    test_gradscaler(ctx);
    test_scale_floor(ctx, NULL, 1, NNCL_PRECISION_FP32, "one device");
    test_scale_floor(ctx, NULL, 1, NNCL_PRECISION_FP16, "one device");
    if (nd > 1) {
        test_scale_floor(ctx, devs, nd, NNCL_PRECISION_FP16, "all devices");
        test_unscaled_overflow(ctx, devs, nd);
    } else {
        th_skip("fp16 storage, all devices: 200 overflows in a row stop the loss scale at 2^-64; later steps keep the "
                "weights finite", "needs two devices");
        th_skip("a gradient that overflows only once unscaled is skipped, the weights kept (all devices)",
                "needs two devices");
    }
    test_scaled_equals_unscaled(ctx, NULL, 1, 0, "one device");
    test_scaled_equals_unscaled(ctx, NULL, 1, 0.05f, "one device, gradients clipped");
    if (nd > 1) {
        test_scaled_equals_unscaled(ctx, devs, nd, 0, "all devices, even split");
        test_scaled_equals_unscaled(ctx, devs, nd, 0.05f, "all devices, gradients clipped");
        test_half_parallel(ctx, devs, nd);
        tm_spatial = 1;
        test_half_parallel(ctx, devs, nd);
        tm_spatial = 0;
    } else {
        th_devices_lack(ctx, 2, "fp32 training with loss scale 2^10 equals unscaled bit for bit (all devices, even split)");
        th_devices_lack(ctx, 2, "fp32 training with loss scale 2^10 equals unscaled bit for bit (all devices, gradients "
                                "clipped)");
        th_devices_lack(ctx, 2, "fp16 storage: all devices equal one device with the same global batch");
        th_devices_lack(ctx, 2, "fp16 storage: all devices equal one device (synchronised batch norm, max pool)");
    }
    test_resume_scale(ctx);
    test_half_refused(ctx);
    test_half_features(ctx);
    test_half_copy(ctx);
    for (i = 1; i <= 2; i++) {
        tm_check_linear_ce(ctx, i, 1, 1, 2, 1, NNCL_ACT_NONE);
        tm_check_linear_ce(ctx, i, 7, 13, 10, 1, NNCL_ACT_RELU);
        tm_check_linear_ce(ctx, i, 33, 5, 3, 0, NNCL_ACT_NONE);
        tm_check_linear_ce(ctx, i, 5, 6, 4, 1, NNCL_ACT_SIGMOID);
        tm_check_linear_ce(ctx, i, 40, 70, 21, 1, NNCL_ACT_TANH);
        for (k = 0; k <= 10; k++) tm_check_unary(ctx, i, k);
    }
    for (i = 0; i < nncl_device_count(ctx); i++) {
        test_half_training(ctx, i, NNCL_PRECISION_FP16);
        test_half_training(ctx, i, NNCL_PRECISION_BF16);
    }
    nncl_free(ctx);
    return th_exit_code();
}
