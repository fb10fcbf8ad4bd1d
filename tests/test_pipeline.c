/* test_pipeline.c - pipeline parallelism (nncl_train_config.pipeline): with
 * M micro-batches over 1, 2 and 3 stages, both schedules, the loss of every
 * step and the parameters and optimizer state after 5 steps equal one
 * device on the whole batch (MLP, CNN, an attention block, a GPT), and the values
 * held at each cut as the schedule allows; with batch norm equal to one
 * stage running the micro-batches as separate passes; checkpoints load
 * into a one-device trainer; the cut under a memory limit; an injected
 * failure in a stage's forward and backward changes nothing; bad
 * configurations are refused at creation; the arrangement measured at
 * creation (one device, data parallel, the pipeline) trains as one device
 * does, and a forced one is kept. The 3-stage checks run with "three" as
 * the argument (tests/test_pipeline3.sh, on three devices). */
#include "harness.h"
#include "train/pipeline.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP_N 96
#define TP_B 24
#define TP_C 3

#define TP_T 8  /* the GPT's tokens per sample */
#define TP_V 16 /* and its vocabulary */

static float tp_x[TP_N * 64], tp_y[TP_N], tp_tok[TP_N * TP_T], tp_next[TP_N * TP_T];

static void tp_data(void) {
    unsigned seed = 7;
    int i, k;
    for (i = 0; i < TP_N; i++) {
        tp_y[i] = (float)(i % TP_C);
        for (k = 0; k < 64; k++) tp_x[i * 64 + k] = (k % TP_C == i % TP_C ? 1.0f : 0.0f) + th_uniform(&seed) - 0.5f;
        for (k = 0; k < TP_T; k++) { /* a sequence to continue: each token mostly the last plus one */
            tp_tok[i * TP_T + k] = (float)((i + k) % TP_V);
            tp_next[i * TP_T + k] = (float)((i + k + 1 + (th_uniform(&seed) < 0.2f)) % TP_V);
        }
    }
}

enum { TP_MLP, TP_CNN, TP_BN, TP_ATTN, TP_RESIDUAL, TP_NO_LAYERS, TP_WIDE, TP_GPT };
static const char *const tp_names[] = {"MLP", "CNN", "CNN with batch norm", "attention block", "residual", "", "wide",
                                       "GPT (dropout 0)"};

typedef struct tp_model {
    nncl_graph *g;
    nncl_node *x, *y, *loss;
    const float *xd, *yd;      /* the data its inputs take */
} tp_model;

/* nanoGPT's GPT, small: token and position embeddings, 2 blocks of pre-norm
 * attention and MLP with residuals, a final norm and a head of its own (a
 * head tied to the token embedding would hold one parameter on the first
 * and the last stage, which a pipeline refuses). No bias on c_attn, as
 * nanoGPT's bias=False: the keys' bias has a gradient of exactly 0 (the
 * softmax ignores a shift of a row), so fp32 leaves rounding noise there,
 * which Adam scales up to full steps of either sign. */
static nncl_node *tp_gpt(tp_model *m) {
    int T = TP_T, C = 16, pshape[2] = {TP_T, 16}, l;
    nncl_node *x, *h, *q, *k, *v;
    char n[64];
    m->x = nncl_input(m->g, "idx", 1, &T);
    m->y = nncl_input(m->g, "targets", 1, &T);
    x = nncl_embedding(m->g, m->x, TP_V, C, "wte");
    x = nncl_op_add(m->g, x, nncl_param(m->g, "wpe.weight", 2, pshape, NNCL_INIT_NORMAL, 0.02f));
    for (l = 0; l < 2; l++) {
        snprintf(n, sizeof n, "h%d.ln_1", l);
        h = nncl_layernorm(m->g, x, 1e-5f, n);
        snprintf(n, sizeof n, "h%d.c_attn", l);
        h = nncl_linear(m->g, h, 3 * C, 0, NNCL_ACT_NONE, n);
        q = nncl_slice(m->g, h, 1, 0, C);
        k = nncl_slice(m->g, h, 1, C, C);
        v = nncl_slice(m->g, h, 1, 2 * C, C);
        h = nncl_causal_attention(m->g, q, k, v, 2, 0.0f);
        snprintf(n, sizeof n, "h%d.c_proj", l);
        x = nncl_op_add(m->g, x, nncl_linear(m->g, h, C, 1, NNCL_ACT_NONE, n));
        snprintf(n, sizeof n, "h%d.ln_2", l);
        h = nncl_layernorm(m->g, x, 1e-5f, n);
        snprintf(n, sizeof n, "h%d.c_fc", l);
        h = nncl_op_gelu_tanh(m->g, nncl_linear(m->g, h, 4 * C, 1, NNCL_ACT_NONE, n));
        snprintf(n, sizeof n, "h%d.mlp_proj", l);
        x = nncl_op_add(m->g, x, nncl_linear(m->g, h, C, 1, NNCL_ACT_NONE, n));
    }
    x = nncl_layernorm(m->g, x, 1e-5f, "ln_f");
    return nncl_linear(m->g, x, TP_V, 0, NNCL_ACT_NONE, "lm_head");
}

static int tp_build(nncl_context *ctx, tp_model *m, int kind) {
    nncl_node *h;
    m->g = nncl_graph_create(ctx, 11);
    m->xd = tp_x;
    m->yd = tp_y;
    if (kind == TP_GPT) {
        m->xd = tp_tok;
        m->yd = tp_next;
        h = tp_gpt(m);
        m->loss = nncl_sequence_cross_entropy(m->g, h, m->y, -1);
        return m->loss != NULL;
    }
    m->y = nncl_input(m->g, "y", 0, NULL);
    if (kind == TP_CNN || kind == TP_BN) {
        int is[3] = {1, 8, 8};
        m->x = nncl_input(m->g, "x", 3, is);
        h = nncl_conv2d(m->g, m->x, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "conv1");
        if (kind == TP_BN) h = nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn1");
        h = nncl_maxpool2d(m->g, h, 2, 2, 0);
        h = nncl_conv2d(m->g, h, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "conv2");
        h = nncl_flatten(m->g, h);
        h = nncl_linear(m->g, h, TP_C, 1, NNCL_ACT_NONE, "fc");
    } else if (kind == TP_ATTN) { /* one pre-norm attention block over 8 tokens of 8, dropout 0 */
        int is[2] = {8, 8};
        nncl_node *q, *k, *v, *a;
        m->x = nncl_input(m->g, "x", 2, is);
        h = nncl_linear(m->g, m->x, 8, 1, NNCL_ACT_NONE, "embed");
        a = nncl_layernorm(m->g, h, 1e-5f, "ln1");
        q = nncl_linear(m->g, a, 8, 0, NNCL_ACT_NONE, "q");
        k = nncl_linear(m->g, a, 8, 0, NNCL_ACT_NONE, "k");
        v = nncl_linear(m->g, a, 8, 0, NNCL_ACT_NONE, "v");
        a = nncl_causal_attention(m->g, q, k, v, 2, 0.0f);
        h = nncl_op_add(m->g, h, nncl_linear(m->g, a, 8, 1, NNCL_ACT_NONE, "proj"));
        h = nncl_linear(m->g, nncl_flatten(m->g, h), 16, 1, NNCL_ACT_TANH, "fc1");
        h = nncl_linear(m->g, h, TP_C, 1, NNCL_ACT_NONE, "head");
    } else if (kind == TP_NO_LAYERS) {
        int xs[1] = {TP_C};
        m->x = nncl_input(m->g, "x", 1, xs);
        h = m->x;
    } else {
        int xs[1] = {64};
        m->x = nncl_input(m->g, "x", 1, xs);
        h = nncl_linear(m->g, m->x, kind == TP_WIDE ? 1024 : 16, 1, NNCL_ACT_RELU, "fc1");
        if (kind == TP_RESIDUAL) h = nncl_op_add(m->g, h, nncl_linear(m->g, h, 16, 1, NNCL_ACT_NONE, "fc2"));
        else h = nncl_linear(m->g, h, kind == TP_WIDE ? 64 : 16, 1, NNCL_ACT_TANH, "fc2");
        h = nncl_linear(m->g, h, 16, 1, NNCL_ACT_RELU, "fc3");
        h = nncl_linear(m->g, h, TP_C, 1, NNCL_ACT_NONE, "fc4");
    }
    m->loss = nncl_softmax_cross_entropy(m->g, h, m->y);
    return m->loss != NULL;
}

static nncl_train_config tp_config(const int *devs, int nd, int pipeline, int micro) {
    nncl_train_config c = nncl_train_default();
    c.max_batch = TP_B;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    c.optim.lr = 0.01f;
    c.optim.clip_norm = 0.5f; /* the global norm spans the stages */
    c.devices = devs;
    c.n_devices = nd;
    c.pipeline = pipeline;
    c.micro_batches = micro;
    return c;
}

static nncl_status tp_step(nncl_trainer *t, const tp_model *m, int s, float *loss) {
    nncl_feed f[2];
    nncl_step_info info;
    nncl_status st;
    int start = (s * TP_B) % (TP_N - TP_B + 1);
    f[0].node = m->x;
    f[0].data = m->xd + (size_t)start * m->x->sample_numel;
    f[1].node = m->y;
    f[1].data = m->yd + (size_t)start * m->y->sample_numel;
    st = nncl_trainer_step(t, f, 2, TP_B, &info);
    if (loss) *loss = info.loss;
    return st;
}

/* Parameters, running statistics and optimizer state in the graph's layout. */
static int tp_dump(nncl_trainer *t, float **out) {
    nncl_graph *g = t->graph;
    size_t n = g->n_params + g->n_state + t->opt_floats;
    float *v = (float *)calloc(n + 1, sizeof(float));
    *out = v;
    if (!v || nncl__trainer_download(t, v, v + g->n_params) != NNCL_OK) return 1;
    if (!t->opt_floats) return 0;
    if (t->pipe) return nncl__pipe_opt(t, v + g->n_params + g->n_state, 0) != NNCL_OK;
    return nncl__plan_get(t->plan[nncl__trainer_first_alive(t)], NNCL__PB_OPT, 0, t->opt_floats,
                          v + g->n_params + g->n_state, 1) != NNCL_OK;
}

static int tp_close(const float *a, const float *b, size_t n, double tol) {
    size_t i;
    for (i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i])))) {
            fprintf(stderr, "  float %zu of %zu: %.9g, one device %.9g\n", i, n, a[i], b[i]);
            return 0;
        }
    return 1;
}

/* Trainer a (pipelined) against b for 5 steps: the loss of every step, then
 * everything a step changes. */
static int tp_compare(const char *name, nncl_context *ctx, nncl_trainer *a, const tp_model *ma, nncl_trainer *b,
                      const tp_model *mb) {
    float la, lb, *va, *vb;
    int s, ok;
    size_t n = ma->g->n_params + ma->g->n_state + a->opt_floats;
    for (s = 0; s < 5; s++) {
        TH_OK(name, ctx, tp_step(a, ma, s, &la));
        TH_OK(name, ctx, tp_step(b, mb, s, &lb));
        if (!(fabs(la - lb) <= 1e-4 * (1 + fabs(lb)))) {
            th_fail(name, "step %d: loss %.7g, one device %.7g", s, la, lb);
            return 1;
        }
    }
    TH_CHECK(name, a->opt_floats == b->opt_floats);
    TH_CHECK(name, !tp_dump(a, &va) && !tp_dump(b, &vb));
    ok = tp_close(va, vb, n, 2e-4);
    free(va);
    free(vb);
    TH_CHECK(name, ok);
    return 0;
}

/* 1: test_equal's stages keep one activation arena each, so every
 * micro-batch but the latest has its forward run again before its
 * backward (what a stage short of memory does). */
static int tp_one_arena;

/* stages devices (0..stages-1), micro micro-batches, against a trainer
 * without pipeline on device 0 (ref_micro 0) or one stage with ref_micro
 * micro-batches. */
static int test_equal(nncl_context *ctx, int kind, int stages, int micro, int ref_micro, int sched) {
    char name[200];
    int devs[3] = {0, 1, 2}, r, s;
    tp_model ma, mb;
    nncl_trainer *a = NULL, *b = NULL;
    nncl_train_config ca = tp_config(devs, stages, 1, micro), cb = tp_config(devs, 1, ref_micro > 0, ref_micro);
    nncl_stage_info si[3];
    ca.pipe_schedule = sched;
    snprintf(name, sizeof name, "%s over %d stage%s, %d micro-batches, %s, equals %s", tp_names[kind], stages,
             stages > 1 ? "s" : "", micro, sched == NNCL_PIPE_GPIPE ? "GPipe" : "1F1B",
             ref_micro ? "one stage running the micro-batches apart" : "one device on the whole batch");
    if (tp_one_arena) snprintf(name + strlen(name), sizeof name - strlen(name), ", one arena per stage (recomputed)");
    if (stages == 2 && th_devices_lack(ctx, 2, name)) return 0;
    if (stages == 3 && nncl_device_count(ctx) < 3) {
        th_skip(name, "needs three devices (POCL_DEVICES=\"pthread pthread pthread\")");
        return 0;
    }
    TH_CHECK(name, tp_build(ctx, &ma, kind) && tp_build(ctx, &mb, kind));
    TH_OK(name, ctx, nncl_trainer_create(ctx, ma.g, ma.loss, &ca, &a));
    TH_OK(name, ctx, nncl_trainer_create(ctx, mb.g, mb.loss, &cb, &b));
    /* the values held at each cut: every micro-batch (GPipe), at most K-s (1F1B) */
    TH_CHECK(name, nncl_trainer_stages(a, si, 3) == stages);
    for (s = 0; s < stages; s++) {
        int want = s + 1 == stages ? 0 : sched == NNCL_PIPE_GPIPE || stages - s > micro ? micro : stages - s;
        if (si[s].held_micro_batches != want || (want > 0) != (si[s].held_bytes > 0)) {
            th_fail(name, "stage %d holds %d micro-batches (%zu bytes) at its cut, want %d", s,
                    si[s].held_micro_batches, si[s].held_bytes, want);
            r = 1;
            goto done;
        }
        if (tp_one_arena) a->pipe->st[s].n_arenas = 1;
    }
    r = tp_compare(name, ctx, a, &ma, b, &mb);
    /* An arena per micro-batch a stage holds (memory is ample here), and no
     * forward run again; with one arena, 1F1B recomputes every backward's
     * forward where a stage holds several, GPipe all but the latest. */
    for (s = 0; !r && s < stages && nncl_trainer_stages(a, si, 3) == stages; s++) {
        int held = sched == NNCL_PIPE_GPIPE || stages - s > micro ? micro : stages - s;
        int want = !tp_one_arena || held == 1 ? 0 : sched == NNCL_PIPE_GPIPE ? micro - 1 : micro;
        if (si[s].arenas != (tp_one_arena ? 1 : held) || si[s].recomputed != want) {
            th_fail(name, "stage %d: %d arenas, %d forwards recomputed in the last step, want %d and %d", s,
                    si[s].arenas, si[s].recomputed, tp_one_arena ? 1 : held, want);
            r = 1;
        }
    }
done:
    nncl_trainer_free(a);
    nncl_trainer_free(b);
    nncl_graph_free(ma.g);
    nncl_graph_free(mb.g);
    if (!r) th_pass("%s", name);
    return r;
}

/* Gradient checkpointing inside the stages changes nothing: a pipeline
 * with it equals one device without. */
static int test_grad_checkpoint(nncl_context *ctx) {
    const char *name = "CNN over 2 stages with gradient checkpointing in the stages equals one device without";
    int devs[2] = {0, 1}, r;
    tp_model ma, mb;
    nncl_trainer *a = NULL, *b = NULL;
    nncl_train_config ca = tp_config(devs, 2, 1, 3), cb = tp_config(devs, 1, 0, 0);
    if (th_devices_lack(ctx, 2, name)) return 0;
    ca.checkpoint = NNCL_CHECKPOINT_AUTO;
    TH_CHECK(name, tp_build(ctx, &ma, TP_CNN) && tp_build(ctx, &mb, TP_CNN));
    TH_OK(name, ctx, nncl_trainer_create(ctx, ma.g, ma.loss, &ca, &a));
    TH_OK(name, ctx, nncl_trainer_create(ctx, mb.g, mb.loss, &cb, &b));
    r = tp_compare(name, ctx, a, &ma, b, &mb);
    nncl_trainer_free(a);
    nncl_trainer_free(b);
    nncl_graph_free(ma.g);
    nncl_graph_free(mb.g);
    if (!r) th_pass("%s", name);
    return r;
}

/* A checkpoint of a pipelined trainer resumes in a one-device trainer:
 * the same values, and the next step the same on both. */
static int test_checkpoint(nncl_context *ctx) {
    const char *name = "pipelined checkpoint loads into a one-device trainer and resumes the same";
    char path[64];
    int devs[2] = {0, 1}, r;
    tp_model ma, mb;
    nncl_trainer *a = NULL, *b = NULL;
    nncl_train_config ca = tp_config(devs, 2, 1, 3), cb = tp_config(devs, 1, 0, 0);
    float *va, *vb, la, lb;
    if (th_devices_lack(ctx, 2, name)) return 0;
    snprintf(path, sizeof path, "/tmp/nncl-pipeline-ckpt-%ld.safetensors", (long)getpid());
    TH_CHECK(name, tp_build(ctx, &ma, TP_MLP) && tp_build(ctx, &mb, TP_MLP));
    TH_OK(name, ctx, nncl_trainer_create(ctx, ma.g, ma.loss, &ca, &a));
    TH_OK(name, ctx, nncl_trainer_create(ctx, mb.g, mb.loss, &cb, &b));
    TH_OK(name, ctx, tp_step(a, &ma, 0, NULL));
    TH_OK(name, ctx, tp_step(a, &ma, 1, NULL));
    TH_OK(name, ctx, nncl_trainer_save_checkpoint(a, path));
    TH_OK(name, ctx, nncl_trainer_load_checkpoint(b, path));
    TH_CHECK(name, nncl_trainer_step_count(b) == 2);
    TH_CHECK(name, !tp_dump(a, &va) && !tp_dump(b, &vb));
    r = memcmp(va, vb, (ma.g->n_params + a->opt_floats) * sizeof(float)) == 0;
    free(va);
    free(vb);
    TH_CHECK(name, r);
    TH_OK(name, ctx, tp_step(a, &ma, 2, &la));
    TH_OK(name, ctx, tp_step(b, &mb, 2, &lb));
    TH_CHECK(name, fabs(la - lb) <= 1e-5 * (1 + fabs(lb)));
    TH_OK(name, ctx, nncl_trainer_load_checkpoint(a, path)); /* and back into the stages */
    TH_CHECK(name, !tp_dump(a, &va) && nncl_trainer_load_checkpoint(b, path) == NNCL_OK && !tp_dump(b, &vb));
    r = memcmp(va, vb, (ma.g->n_params + a->opt_floats) * sizeof(float)) == 0;
    free(va);
    free(vb);
    TH_CHECK(name, r);
    nncl_trainer_free(a);
    nncl_trainer_free(b);
    nncl_graph_free(ma.g);
    nncl_graph_free(mb.g);
    remove(path);
    th_pass("%s", name);
    return 0;
}

/* A failure injected in stage 1's forward or backward: an error naming the
 * device, and parameters, statistics, optimizer state and step as before. */
static int test_failure(nncl_context *ctx, int backward, int sched) {
    char name[160], want[64];
    int devs[2] = {0, 1}, r, left;
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_train_config c = tp_config(devs, 2, 1, 3);
    float *v0, *v1;
    nncl_status st;
    char path[64];
    snprintf(name, sizeof name, "a device failing in a stage's %s (%s): an error naming it, nothing lost, resumed "
             "on the other", backward ? "backward" : "forward", sched == NNCL_PIPE_GPIPE ? "GPipe" : "1F1B");
    c.pipe_schedule = sched;
    if (th_devices_lack(ctx, 2, name)) return 0;
    snprintf(path, sizeof path, "/tmp/nncl-pipeline-fail-%ld.safetensors", (long)getpid());
    TH_CHECK(name, tp_build(ctx, &m, TP_BN));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    TH_OK(name, ctx, tp_step(t, &m, 0, NULL));
    TH_CHECK(name, !tp_dump(t, &v0));
    t->fail_device = 1;
    t->fail_step = 1;
    t->fail_in_backward = backward;
    st = tp_step(t, &m, 1, NULL);
    snprintf(want, sizeof want, "device %d", t->device[1]);
    TH_CHECK(name, st == NNCL_ERR_DEVICE && strstr(nncl_last_error(ctx), want) != NULL);
    TH_CHECK(name, nncl_trainer_step_count(t) == 1);
    TH_CHECK(name, !tp_dump(t, &v1));
    r = memcmp(v0, v1, (m.g->n_params + m.g->n_state + t->opt_floats) * sizeof(float)) == 0;
    free(v1);
    TH_CHECK(name, r);
    TH_CHECK(name, tp_step(t, &m, 2, NULL) == NNCL_ERR_STATE); /* refused until created again */
    TH_OK(name, ctx, nncl_trainer_save_checkpoint(t, path));
    left = t->device[0]; /* stage 1's device failed */
    nncl_trainer_free(t);
    t = NULL;
    { /* created again from that checkpoint on the device that is left: the same state, and it trains */
        nncl_train_config c1 = tp_config(&left, 1, 0, 0);
        float *v2;
        TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c1, &t));
        TH_OK(name, ctx, nncl_trainer_load_checkpoint(t, path));
        TH_CHECK(name, !tp_dump(t, &v2));
        r = memcmp(v0, v2, (m.g->n_params + m.g->n_state + t->opt_floats) * sizeof(float)) == 0;
        free(v2);
        TH_CHECK(name, r);
        TH_OK(name, ctx, tp_step(t, &m, 1, NULL));
        TH_CHECK(name, nncl_trainer_step_count(t) == 2);
    }
    free(v0);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    remove(path);
    th_pass("%s", name);
    return 0;
}

/* Three stages: a failure injected in the middle stage's forward or
 * backward (the others wait on it both ways) ends the step with an error
 * naming its device, everything as before, and the trainer refusing steps. */
static int test_failure3(nncl_context *ctx, int backward, int sched) {
    char name[160], want[64];
    int devs[3] = {0, 1, 2}, r;
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_train_config c = tp_config(devs, 3, 1, 4);
    float *v0, *v1;
    nncl_status st;
    snprintf(name, sizeof name, "3 stages, the middle one failing in its %s (%s): an error naming it, nothing lost",
             backward ? "backward" : "forward", sched == NNCL_PIPE_GPIPE ? "GPipe" : "1F1B");
    if (nncl_device_count(ctx) < 3) {
        th_skip(name, "needs three devices (POCL_DEVICES=\"pthread pthread pthread\")");
        return 0;
    }
    c.pipe_schedule = sched;
    TH_CHECK(name, tp_build(ctx, &m, TP_MLP));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    TH_OK(name, ctx, tp_step(t, &m, 0, NULL));
    TH_CHECK(name, !tp_dump(t, &v0));
    t->fail_device = 1;
    t->fail_step = 1;
    t->fail_in_backward = backward;
    st = tp_step(t, &m, 1, NULL);
    snprintf(want, sizeof want, "device %d", t->device[1]);
    TH_CHECK(name, st == NNCL_ERR_DEVICE && strstr(nncl_last_error(ctx), want) != NULL);
    TH_CHECK(name, nncl_trainer_step_count(t) == 1 && !tp_dump(t, &v1));
    r = memcmp(v0, v1, (m.g->n_params + m.g->n_state + t->opt_floats) * sizeof(float)) == 0;
    free(v0);
    free(v1);
    TH_CHECK(name, r);
    TH_CHECK(name, tp_step(t, &m, 2, NULL) == NNCL_ERR_STATE);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

static int tp_refused(nncl_context *ctx, int kind, nncl_train_config *c, nncl_status want, const char *words) {
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_status st;
    int ok;
    if (!tp_build(ctx, &m, kind)) return 0;
    st = nncl_trainer_create(ctx, m.g, m.loss, c, &t);
    ok = st == want && t == NULL && strstr(nncl_last_error(ctx), words) != NULL;
    if (!ok) fprintf(stderr, "  got %s: %s\n", nncl_status_str(st), nncl_last_error(ctx));
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    return ok;
}

static int test_refusals(nncl_context *ctx) {
    const char *name = "bad pipeline configurations refused at creation with a message";
    int devs[2] = {0, 1};
    const char *inside[1] = {"fc2"}, *absent[1] = {"nope"}, *fine[1] = {"fc2"};
    nncl_train_config c = tp_config(devs, 2, 1, 2);
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tp_refused(ctx, TP_NO_LAYERS, &c, NNCL_ERR_INVALID_ARGUMENT, "layers"));
    c.cuts = inside; /* fc2's sum with fc1 reads fc1 after the cut */
    TH_CHECK(name, tp_refused(ctx, TP_RESIDUAL, &c, NNCL_ERR_INVALID_ARGUMENT, "is not a cut"));
    c.cuts = absent;
    TH_CHECK(name, tp_refused(ctx, TP_MLP, &c, NNCL_ERR_INVALID_ARGUMENT, "nope"));
    c.cuts = fine;
    c.precision = NNCL_PRECISION_FP16;
    TH_CHECK(name, tp_refused(ctx, TP_MLP, &c, NNCL_ERR_UNSUPPORTED, "fp32"));
    c = tp_config(devs, 2, 1, 2);
    c.pipe_schedule = 2;
    TH_CHECK(name, tp_refused(ctx, TP_MLP, &c, NNCL_ERR_INVALID_ARGUMENT, "pipe_schedule 2"));
    c.pipe_schedule = NNCL_PIPE_GPIPE;
    c.arrangement = NNCL_ARRANGE_DATA; /* with pipeline 1 */
    TH_CHECK(name, tp_refused(ctx, TP_MLP, &c, NNCL_ERR_INVALID_ARGUMENT, "contradicts pipeline 1"));
    c.arrangement = 7;
    TH_CHECK(name, tp_refused(ctx, TP_MLP, &c, NNCL_ERR_INVALID_ARGUMENT, "arrangement 7"));
    th_pass("%s", name);
    return 0;
}

/* Given cuts are kept, and the plan says which layers went where. */
static int test_given_cut(nncl_context *ctx) {
    const char *name = "given cut: the stages hold the layers asked for";
    int devs[2] = {1, 0};
    const char *cuts[1] = {"fc1"};
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_train_config c = tp_config(devs, 2, 1, 2);
    if (th_devices_lack(ctx, 2, name)) return 0;
    c.cuts = cuts;
    TH_CHECK(name, tp_build(ctx, &m, TP_MLP));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    TH_CHECK(name, nncl_trainer_stage_device(t, "fc1") == 1 && nncl_trainer_stage_device(t, "fc2") == 0 &&
                       nncl_trainer_stage_device(t, "fc4") == 0 && nncl_trainer_stage_device(t, "x") == -1);
    TH_CHECK(name, t->pipe->st[0].g->n_params == 64 * 16 + 16);
    {
        nncl_stage_info si[2];
        TH_CHECK(name, nncl_trainer_stages(t, si, 2) == 2);
        TH_CHECK(name, si[0].device == 1 && !strcmp(si[0].first, "fc1") && !strcmp(si[0].last, "fc1"));
        TH_CHECK(name, si[1].device == 0 && !strcmp(si[1].first, "fc2") &&
                           si[1].params == 16 * 16 * 2 + 32 + 16 * 3 + 3);
    }
    { /* the summary names each stage's layers */
        FILE *f = tmpfile();
        char text[4096];
        size_t n;
        TH_CHECK(name, f != NULL);
        TH_OK(name, ctx, nncl_trainer_summary(t, f));
        rewind(f);
        n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
        TH_CHECK(name, strstr(text, "pipeline stage 0 of 2: nodes fc1 to fc1") != NULL &&
                           strstr(text, "pipeline stage 1 of 2: nodes fc2 to") != NULL);
    }
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* Shares given: the cut weighs each layer's arithmetic by them, and the
 * order of the devices is the planner's: a device a million times faster takes
 * every layer but the loss, which the other takes. */
static int test_shares_cut(nncl_context *ctx) {
    const char *name = "shares given: the fast device takes the costly layers, in the order that suits it";
    int devs[2] = {0, 1};
    float shares[2] = {1, 1e6f};
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_train_config c = tp_config(devs, 2, 1, 2);
    if (th_devices_lack(ctx, 2, name)) return 0;
    c.shares = shares;
    TH_CHECK(name, tp_build(ctx, &m, TP_WIDE));
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
    TH_CHECK(name, nncl_trainer_stage_device(t, "fc1") == 1 && nncl_trainer_stage_device(t, "fc4") == 1 &&
                       nncl_trainer_stage_device(t, m.loss->name) == 0);
    TH_OK(name, ctx, tp_step(t, &m, 0, NULL));
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* What the trainers of config c take of every device's memory, created
 * in a context of their own (so that nothing another made is counted). */
static int tp_footprint(int kind, const nncl_train_config *c, uint64_t *used) {
    nncl_config cfg = nncl_config_default();
    nncl_context *x = NULL;
    tp_model m;
    nncl_trainer *t = NULL;
    uint64_t before[2], after[2];
    int d, ok;
    cfg.devices = getenv("NNCL_TEST_DEVICES") ? getenv("NNCL_TEST_DEVICES") : "all";
    if (nncl_init(&cfg, &x) != NNCL_OK) return 0;
    ok = tp_build(x, &m, kind);
    for (d = 0; ok && d < 2; d++) ok = nncl_device_memory(x, d, &before[d], NULL) == NNCL_OK;
    ok = ok && nncl_trainer_create(x, m.g, m.loss, c, &t) == NNCL_OK;
    for (d = 0; ok && d < 2; d++) {
        ok = nncl_device_memory(x, d, &after[d], NULL) == NNCL_OK;
        used[d] = after[d] - before[d];
    }
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(x);
    return ok;
}

/* Under a memory cap between what one device needs for the model (two
 * wide layers) and what each of two stages needs: one device is refused,
 * two train it, and the stages say where the wide layers went. */
static int test_memory_cap(nncl_context *ctx) {
    const char *name = "under a memory cap one device cannot train the model, two stages can (asked for or "
                       "as data parallelism's fallback)";
    const char *cut[1] = {"fc1"};
    int devs[2] = {0, 1}, ok, k;
    nncl_train_config one = tp_config(devs, 1, 0, 0), two = tp_config(devs, 2, 1, 2);
    nncl_config cfg = nncl_config_default();
    nncl_context *c = NULL;
    uint64_t u1[2], u2[2], most;
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_status st;
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tp_footprint(TP_WIDE, &one, u1));
    two.cuts = cut; /* the even split by memory; under the cap the planner must find one like it */
    TH_CHECK(name, tp_footprint(TP_WIDE, &two, u2));
    two.cuts = NULL;
    most = u2[0] > u2[1] ? u2[0] : u2[1];
    if (!(most < u1[0])) {
        th_fail(name, "stages take %llu and %llu bytes, one device %llu", (unsigned long long)u2[0],
                (unsigned long long)u2[1], (unsigned long long)u1[0]);
        return 1;
    }
    cfg.devices = getenv("NNCL_TEST_DEVICES") ? getenv("NNCL_TEST_DEVICES") : "all";
    cfg.memory_cap = (most + u1[0]) / 2;
    TH_OK(name, NULL, nncl_init(&cfg, &c));
    TH_CHECK(name, tp_build(c, &m, TP_WIDE));
    st = nncl_trainer_create(c, m.g, m.loss, &one, &t);
    ok = st == NNCL_ERR_OUT_OF_MEMORY && t == NULL;
    for (k = 0; k < 2 && ok; k++) { /* asked for, then as the fallback of data parallelism */
        nncl_step_info info;
        nncl_feed f[2];
        two.pipeline = k ? -1 : 1;
        ok = nncl_trainer_create(c, m.g, m.loss, &two, &t) == NNCL_OK;
        if (ok) {
            int s1 = nncl_trainer_stage_device(t, "fc1"), s2 = nncl_trainer_stage_device(t, "fc2");
            f[0].node = m.x;
            f[0].data = tp_x;
            f[1].node = m.y;
            f[1].data = tp_y;
            ok = s1 >= 0 && s2 >= 0 && s1 != s2 && nncl_trainer_step(t, f, 2, TP_B, &info) == NNCL_OK &&
                 info.arrangement == NNCL_ARRANGE_PIPELINE &&
                 strstr(info.arrangement_why, k ? "fits no device whole" : "asked for") != NULL;
            if (!ok)
                fprintf(stderr, "  pipeline %d: fc1 on %d, fc2 on %d, arrangement %d (%s)\n", two.pipeline, s1, s2,
                        info.arrangement, info.arrangement_why);
        }
        nncl_trainer_free(t);
        t = NULL;
    }
    if (!ok) fprintf(stderr, "  cap %llu: %s\n", (unsigned long long)cfg.memory_cap, nncl_last_error(c));
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(c);
    TH_CHECK(name, ok);
    th_pass("%s (cap %.2f MiB; one device %.2f MiB, stages %.2f and %.2f)", name, cfg.memory_cap / 1048576.0,
            u1[0] / 1048576.0, u2[0] / 1048576.0, u2[1] / 1048576.0);
    return 0;
}

/* Devices too small for any cut: refused at creation, saying so. */
static int test_fits_nowhere(nncl_context *ctx) {
    const char *name = "a model that fits nowhere even split is refused at creation";
    int devs[2] = {0, 1}, ok;
    nncl_train_config two = tp_config(devs, 2, 1, 2);
    nncl_config cfg = nncl_config_default();
    nncl_context *c = NULL;
    if (th_devices_lack(ctx, 2, name)) return 0;
    cfg.devices = getenv("NNCL_TEST_DEVICES") ? getenv("NNCL_TEST_DEVICES") : "all";
    cfg.memory_cap = 256 * 1024; /* less than fc1 alone, with its Adam state */
    TH_OK(name, NULL, nncl_init(&cfg, &c));
    ok = tp_refused(c, TP_WIDE, &two, NNCL_ERR_OUT_OF_MEMORY, "fits on none");
    nncl_free(c);
    TH_CHECK(name, ok);
    th_pass("%s", name);
    return 0;
}

/* The step info names the arrangement and why: one device alone (devices
 * 1); with two, as measured (data parallel or one device alone, with the
 * pipeline also timed under pipeline -1) with the seconds each took; the
 * pipeline asked for; and each forced arrangement. */
static int test_arrangement(nncl_context *ctx, int kind) {
    const char *name = kind == 1 ? "step info: one device, the only one asked for"
                                 : "step info: the arrangement measured or forced, and why";
    int devs[2] = {0, 1}, k;
    tp_model m;
    nncl_trainer *t = NULL;
    nncl_train_config c;
    nncl_step_info info;
    nncl_feed f[2];
    if (kind == 2 && th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tp_build(ctx, &m, TP_MLP));
    f[0].node = m.x;
    f[0].data = tp_x;
    f[1].node = m.y;
    f[1].data = tp_y;
    for (k = kind == 1 ? 0 : 1; k < (kind == 1 ? 1 : 7); k++) {
        const char *w;
        c = tp_config(devs, k ? 2 : 1, k == 2, 2);
        if (k == 1) c.pipeline = 0;
        if (k == 3) c.pipeline = -1; /* the model fits: the pipeline is timed beside the others */
        if (k >= 4) c.pipeline = 0;
        c.arrangement = k == 4 ? NNCL_ARRANGE_ONE : k == 5 ? NNCL_ARRANGE_DATA : k == 6 ? NNCL_ARRANGE_PIPELINE : 0;
        TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &c, &t));
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TP_B, &info));
        w = info.arrangement_why;
        fprintf(stderr, "  case %d: arrangement %d on %d devices: %s\n", k, info.arrangement, info.n_devices, w);
        if (k == 0) TH_CHECK(name, info.arrangement == NNCL_ARRANGE_ONE && strstr(w, "only"));
        if (k == 1 || k == 3) /* which wins is measured; either way it says so with the seconds */
            TH_CHECK(name, ((info.arrangement == NNCL_ARRANGE_ONE && info.n_devices == 1 &&
                             strstr(w, "alone is fastest")) ||
                            (info.arrangement == NNCL_ARRANGE_DATA && info.n_devices == 2 &&
                             strstr(w, "together are fastest")) ||
                            (k == 3 && info.arrangement == NNCL_ARRANGE_PIPELINE &&
                             strstr(w, "a pipeline of 2 stages is fastest"))) &&
                               strstr(w, " s a pass of 24"));
        if (k == 3) TH_CHECK(name, strstr(w, "pipeline") != NULL); /* the pipeline was timed too */
        if (k == 2 || k == 6)
            TH_CHECK(name, info.arrangement == NNCL_ARRANGE_PIPELINE && strstr(w, "2 stages") && strstr(w, "1F1B"));
        if (k == 4)
            TH_CHECK(name, info.arrangement == NNCL_ARRANGE_ONE && info.n_devices == 1 && strstr(w, "asked for") &&
                               t->nd == 1 && t->device[0] == devs[0]);
        if (k == 5)
            TH_CHECK(name, info.arrangement == NNCL_ARRANGE_DATA && info.n_devices == 2 &&
                               strstr(w, "all 2 devices asked for"));
        nncl_trainer_free(t);
    }
    nncl_graph_free(m.g);
    th_pass("%s", name);
    return 0;
}

/* Whatever the measurement at creation keeps (one device, data parallel,
 * or with pipeline -1 the pipeline), the run trains as one device on the
 * whole batch: the loss of every step, then everything a step changes. */
static int test_measured_equal(nncl_context *ctx, int kind) {
    char name[160];
    int devs[2] = {0, 1}, r;
    tp_model ma, mb;
    nncl_trainer *a = NULL, *b = NULL;
    nncl_train_config ca = tp_config(devs, 2, -1, 3), cb = tp_config(devs, 1, 0, 0);
    nncl_step_info info;
    snprintf(name, sizeof name, "%s on 2 devices, the arrangement measured at creation, equals one device on the "
             "whole batch", tp_names[kind]);
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tp_build(ctx, &ma, kind) && tp_build(ctx, &mb, kind));
    TH_OK(name, ctx, nncl_trainer_create(ctx, ma.g, ma.loss, &ca, &a));
    TH_OK(name, ctx, nncl_trainer_create(ctx, mb.g, mb.loss, &cb, &b));
    r = tp_compare(name, ctx, a, &ma, b, &mb);
    if (!r) {
        nncl_feed f[2];
        f[0].node = ma.x;
        f[0].data = tp_x;
        f[1].node = ma.y;
        f[1].data = tp_y;
        TH_OK(name, ctx, nncl_trainer_step(a, f, 2, TP_B, &info));
        th_pass("%s (%s: %s)", name,
                info.arrangement == NNCL_ARRANGE_ONE ? "one device" : info.arrangement == NNCL_ARRANGE_DATA ?
                "data parallel" : "pipeline", info.arrangement_why);
    }
    nncl_trainer_free(a);
    nncl_trainer_free(b);
    nncl_graph_free(ma.g);
    nncl_graph_free(mb.g);
    return r;
}

int main(int argc, char **argv) {
    nncl_context *ctx = th_context();
    int k, sched, three = argc > 1 && !strcmp(argv[1], "three");
    if (!ctx) return th_exit_code();
    tp_data();
    for (sched = NNCL_PIPE_1F1B; sched <= NNCL_PIPE_GPIPE; sched++) {
        if (!three && sched == NNCL_PIPE_1F1B) { /* one device: the micro-batch machinery alone */
            test_equal(ctx, TP_MLP, 1, 4, 0, sched);
            test_equal(ctx, TP_CNN, 1, 3, 0, sched);
        }
        for (k = 0; k < 4; k++) { /* MLP, CNN, attention block, GPT over two or three stages */
            int kind = k == 0 ? TP_MLP : k == 1 ? TP_CNN : k == 2 ? TP_ATTN : TP_GPT;
            if (three) test_equal(ctx, kind, 3, 4, 0, sched);
            else test_equal(ctx, kind, 2, 3, 0, sched);
        }
        if (three) {
            test_equal(ctx, TP_MLP, 3, 2, 0, sched); /* fewer micro-batches than stages */
            test_failure3(ctx, 0, sched);
            test_failure3(ctx, 1, sched);
        }
    }
    if (three) {
        nncl_free(ctx);
        return th_exit_code();
    }
    test_equal(ctx, TP_MLP, 2, 8, 0, NNCL_PIPE_1F1B);
    tp_one_arena = 1;
    for (sched = NNCL_PIPE_1F1B; sched <= NNCL_PIPE_GPIPE; sched++) {
        test_equal(ctx, TP_CNN, 2, 3, 0, sched);
        test_equal(ctx, TP_BN, 2, 3, 3, sched);
    }
    tp_one_arena = 0;
    test_equal(ctx, TP_BN, 2, 3, 3, NNCL_PIPE_1F1B);
    test_equal(ctx, TP_BN, 2, 3, 3, NNCL_PIPE_GPIPE);
    test_grad_checkpoint(ctx);
    test_checkpoint(ctx);
    for (sched = NNCL_PIPE_1F1B; sched <= NNCL_PIPE_GPIPE; sched++) {
        test_failure(ctx, 0, sched);
        test_failure(ctx, 1, sched);
    }
    test_refusals(ctx);
    test_given_cut(ctx);
    test_shares_cut(ctx);
    test_arrangement(ctx, 1);
    test_arrangement(ctx, 2);
    test_measured_equal(ctx, TP_MLP);
    test_measured_equal(ctx, TP_CNN);
    test_memory_cap(ctx);
    test_fits_nowhere(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
