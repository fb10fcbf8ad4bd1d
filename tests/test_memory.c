/* test_memory.c - plans against device memory: the memory cap (config and
 * NNCL_MEMORY_CAP), a plan that does not fit refused at creation with what
 * it needs and what to try, the largest batch that fits, and gradient
 * checkpointing: boundaries marked where none can be refused, and training
 * with checkpointing bit-identical to training without (fp32), close in
 * half storage, on two devices as on one, and under a cap a model that
 * fits only with it. */
#include "harness.h"
#include "train/trainer.h"
#include <stdlib.h>
#include <string.h>

#define TM_N 64     /* samples of data */
#define TM_IN 12    /* features of the MLP; the CNN takes [2, 8, 8] */
#define TM_CLASSES 4

#define TM_T 8      /* the GPT's context */
#define TM_VOCAB 11

static float tm_x[TM_N * 128], tm_y[TM_N], tm_tok[TM_N * TM_T], tm_next[TM_N * TM_T];

static void tm_data(void) {
    unsigned seed = 7;
    int i;
    th_fill_uniform(tm_x, sizeof tm_x / sizeof tm_x[0], -1, 1, &seed);
    for (i = 0; i < TM_N; i++) tm_y[i] = (float)(i % TM_CLASSES);
    for (i = 0; i < TM_N * TM_T; i++) {
        tm_tok[i] = (float)((i * 7 + i / 5) % TM_VOCAB);
        tm_next[i] = (float)((i * 3 + 1) % TM_VOCAB);
    }
}

typedef struct tm_model {
    nncl_graph *g;
    nncl_node *x, *y, *loss, *mid; /* mid: an activation halfway through */
    int gpt;
} tm_model;

/* A small GPT as examples/char_gpt.c builds it (2 blocks of 2 heads, 16
 * channels, tied head), with dropout in the attention and after it. */
static int tm_build_gpt(nncl_context *ctx, tm_model *m) {
    int T = TM_T, C = 16, tc[2] = {TM_T, 16}, l;
    nncl_node *x, *wpe;
    char nm[48];
    memset(m, 0, sizeof *m);
    m->gpt = 1;
    m->g = nncl_graph_create(ctx, 5);
    m->x = nncl_input(m->g, "idx", 1, &T);
    m->y = nncl_input(m->g, "targets", 1, &T);
    x = nncl_embedding(m->g, m->x, TM_VOCAB, C, "wte");
    wpe = nncl_param(m->g, "wpe.weight", 2, tc, NNCL_INIT_NORMAL, 0.02f);
    x = nncl_op_add(m->g, x, wpe);
    for (l = 0; l < 2; l++) {
        nncl_node *h, *qkv, *a;
        snprintf(nm, sizeof nm, "h%d.ln_1", l);
        h = nncl_layernorm_ex(m->g, x, 1e-5f, 0, nm);
        snprintf(nm, sizeof nm, "h%d.attn.c_attn", l);
        qkv = nncl_linear(m->g, h, 3 * C, 0, NNCL_ACT_NONE, nm);
        a = nncl_causal_attention(m->g, nncl_slice(m->g, qkv, 1, 0, C), nncl_slice(m->g, qkv, 1, C, C),
                                  nncl_slice(m->g, qkv, 1, 2 * C, C), 2, 0.1f);
        snprintf(nm, sizeof nm, "h%d.attn.c_proj", l);
        x = nncl_op_add(m->g, x, nncl_dropout(m->g, nncl_linear(m->g, a, C, 0, NNCL_ACT_NONE, nm), 0.1f));
        if (l == 0) m->mid = x;
        snprintf(nm, sizeof nm, "h%d.ln_2", l);
        h = nncl_layernorm_ex(m->g, x, 1e-5f, 0, nm);
        snprintf(nm, sizeof nm, "h%d.mlp.c_fc", l);
        h = nncl_op_gelu(m->g, nncl_linear(m->g, h, 4 * C, 0, NNCL_ACT_NONE, nm));
        snprintf(nm, sizeof nm, "h%d.mlp.c_proj", l);
        x = nncl_op_add(m->g, x, nncl_linear(m->g, h, C, 0, NNCL_ACT_NONE, nm));
    }
    x = nncl_layernorm_ex(m->g, x, 1e-5f, 0, "ln_f");
    x = nncl_matmul(m->g, x, nncl_graph_find(m->g, "wte.weight"), 0, 1);
    m->loss = nncl_sequence_cross_entropy(m->g, x, m->y, -1);
    return m->loss != NULL;
}

/* kind 0: an MLP of `depth` residual blocks (linear, batch norm, relu,
 * dropout, add); kind 1: a small CNN with batch norm, pooling, dropout and
 * a residual add; kind 2: a plain deep MLP of `depth` layers of `width`;
 * kind 3: the GPT above; kind 4: an LSTM. */
static int tm_build(nncl_context *ctx, tm_model *m, int kind, int depth, int width) {
    nncl_node *h;
    char nm[32];
    int i;
    if (kind == 3) return tm_build_gpt(ctx, m);
    if (kind == 4) { /* an LSTM of 2 layers over 6 steps of 2 features (the data's first 12), its last step */
        int in[2] = {6, 2};
        memset(m, 0, sizeof *m);
        m->g = nncl_graph_create(ctx, 3);
        m->x = nncl_input(m->g, "x", 2, in);
        h = nncl_lstm(m->g, m->x, 8, 2, "lstm");
        m->mid = h;
        h = nncl_linear(m->g, nncl_rnn_last(m->g, h), TM_CLASSES, 1, NNCL_ACT_NONE, "fc");
        m->y = nncl_input(m->g, "y", 0, NULL);
        m->loss = nncl_softmax_cross_entropy(m->g, h, m->y);
        return m->loss != NULL;
    }
    memset(m, 0, sizeof *m);
    m->g = nncl_graph_create(ctx, 11);
    if (kind == 5) { /* the bench's ResNet in small: conv-bn-relu, then residual blocks (bn's fused add) and downs */
        int in[3] = {2, 8, 8}, st;
        char bn[40];
        m->x = nncl_input(m->g, "x", 3, in);
        h = m->x;
        for (st = 0, i = 4; i <= 16; i *= 2, st++) {
            nncl_node *a;
            snprintf(nm, sizeof nm, "c%d", 3 * st);
            snprintf(bn, sizeof bn, "%s.bn", nm);
            h = nncl_batchnorm_act(m->g, nncl_conv2d(m->g, h, i, 3, st ? 2 : 1, 1, 0, NNCL_ACT_NONE, nm),
                                   NNCL_BN_ACT_RELU, 0.1f, 1e-5f, bn);
            snprintf(nm, sizeof nm, "c%d", 3 * st + 1);
            snprintf(bn, sizeof bn, "%s.bn", nm);
            a = nncl_batchnorm_act(m->g, nncl_conv2d(m->g, h, i, 3, 1, 1, 0, NNCL_ACT_NONE, nm), NNCL_BN_ACT_RELU,
                                   0.1f, 1e-5f, bn);
            snprintf(nm, sizeof nm, "c%d", 3 * st + 2);
            snprintf(bn, sizeof bn, "%s.bn", nm);
            h = nncl_batchnorm_add_act(m->g, nncl_conv2d(m->g, a, i, 3, 1, 1, 0, NNCL_ACT_NONE, nm), h,
                                       NNCL_BN_ACT_RELU, 0.1f, 1e-5f, bn);
            if (st == 1) m->mid = h;
        }
        h = nncl_linear(m->g, nncl_global_avgpool(m->g, h), TM_CLASSES, 1, NNCL_ACT_NONE, "fc");
    } else if (kind == 1) {
        int in[3] = {2, 8, 8};
        nncl_node *a;
        m->x = nncl_input(m->g, "x", 3, in);
        h = nncl_conv2d(m->g, m->x, 4, 3, 1, 1, 1, NNCL_ACT_NONE, "c1");
        h = nncl_op_relu(m->g, nncl_batchnorm(m->g, h, 0.1f, 1e-5f, "bn1"));
        a = nncl_conv2d(m->g, h, 4, 3, 1, 1, 1, NNCL_ACT_RELU, "c2");
        a = nncl_batchnorm(m->g, a, 0.1f, 1e-5f, "bn2");
        h = nncl_op_add(m->g, h, a);
        m->mid = h;
        h = nncl_maxpool2d(m->g, h, 2, 2, 0);
        h = nncl_dropout(m->g, nncl_flatten(m->g, h), 0.25f);
        h = nncl_linear(m->g, h, 16, 1, NNCL_ACT_RELU, "fc1");
        h = nncl_linear(m->g, h, TM_CLASSES, 1, NNCL_ACT_NONE, "fc2");
    } else {
        int in[1] = {TM_IN};
        m->x = nncl_input(m->g, "x", 1, in);
        h = nncl_linear(m->g, m->x, width, 1, NNCL_ACT_RELU, "fc0");
        for (i = 0; i < depth; i++) {
            nncl_node *a;
            snprintf(nm, sizeof nm, "fc%d", i + 1);
            if (kind == 2) {
                h = nncl_linear(m->g, h, width, 1, NNCL_ACT_RELU, nm);
            } else {
                a = nncl_linear(m->g, h, width, 1, NNCL_ACT_NONE, nm);
                snprintf(nm, sizeof nm, "bn%d", i + 1);
                a = nncl_op_relu(m->g, nncl_batchnorm(m->g, a, 0.1f, 1e-5f, nm));
                a = nncl_dropout(m->g, a, 0.2f);
                h = nncl_op_add(m->g, h, a);
            }
            if (i == depth / 2) m->mid = h;
        }
        h = nncl_linear(m->g, h, TM_CLASSES, 1, NNCL_ACT_NONE, "out");
    }
    m->y = nncl_input(m->g, "y", 0, NULL);
    m->loss = nncl_softmax_cross_entropy(m->g, h, m->y);
    return m->loss != NULL;
}

static nncl_train_config tm_config(int checkpoint, int batch, nncl_precision prec) {
    nncl_train_config c = nncl_train_default();
    c.max_batch = batch;
    c.checkpoint = (nncl_checkpoint)checkpoint;
    c.precision = prec;
    /* what fits is the question here, not which arrangement is fastest:
     * data parallel over the devices given, without timing the others */
    c.arrangement = NNCL_ARRANGE_DATA;
    return c;
}

static nncl_status tm_train(nncl_trainer *t, const tm_model *m, int steps, int batch, float *losses) {
    int i;
    for (i = 0; i < steps; i++) {
        nncl_step_info info;
        nncl_feed f[2];
        int start = (i * 7) % (TM_N - batch + 1);
        f[0].node = m->x; f[0].data = (m->gpt ? tm_tok : tm_x) + (size_t)start * m->x->sample_numel;
        f[1].node = m->y; f[1].data = m->gpt ? tm_next + (size_t)start * TM_T : tm_y + start;
        NNCL_TRY(nncl_trainer_step(t, f, 2, batch, &info));
        if (losses) losses[i] = info.loss;
    }
    return NNCL_OK;
}

/* Everything a trainer holds that training changes: parameters, running
 * statistics and optimizer state of its first device, into a new array. */
static float *tm_state(nncl_trainer *t, size_t *n) {
    nncl_graph *g = t->graph;
    size_t np = g->n_params, ns = g->n_state, no = t->opt_floats;
    float *s = (float *)calloc(np + ns + no + 1, sizeof(float));
    *n = np + ns + no;
    if (!s) return NULL;
    if (nncl__trainer_download(t, s, s + np) != NNCL_OK ||
        nncl__plan_get(t->plan[0], NNCL__PB_OPT, 0, no, s + np + ns, 1) != NNCL_OK) {
        free(s);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------- the cap */

static int test_cap_env(void) {
    const char *name = "NNCL_MEMORY_CAP: a byte count with K, M or G, a malformed one refused";
    nncl_context *c = NULL;
    nncl_tensor *tn = NULL;
    int shape[1] = {1 << 20}; /* 4 MiB */
    setenv("NNCL_MEMORY_CAP", "12X", 1);
    TH_CHECK(name, nncl_init(NULL, &c) == NNCL_ERR_INVALID_ARGUMENT && c == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "NNCL_MEMORY_CAP") != NULL);
    setenv("NNCL_MEMORY_CAP", "3M", 1);
    TH_OK(name, NULL, nncl_init(NULL, &c));
    unsetenv("NNCL_MEMORY_CAP");
    /* a buffer past the cap is refused, one within it made */
    TH_CHECK(name, nncl_tensor_create(c, 0, 1, shape, &tn) == NNCL_ERR_OUT_OF_MEMORY && tn == NULL);
    shape[0] = 1 << 18; /* 1 MiB */
    TH_OK(name, c, nncl_tensor_create(c, 0, 1, shape, &tn));
    nncl_tensor_free(tn);
    nncl_free(c);
    th_pass("%s", name);
    return 0;
}

static nncl_context *tm_capped(uint64_t cap) {
    nncl_config cfg = nncl_config_default();
    nncl_context *c = NULL;
    cfg.memory_cap = cap;
    cfg.devices = getenv("NNCL_TEST_DEVICES") ? getenv("NNCL_TEST_DEVICES") : "all";
    return nncl_init(&cfg, &c) == NNCL_OK ? c : NULL;
}

/* A plan over the cap is refused at creation, with what it needs, what
 * there is and what to try, and holds nothing afterwards. */
static int test_refused(void) {
    const char *name = "a plan over the memory cap is refused at creation with what it needs and what to try";
    nncl_context *c = tm_capped(4u << 20);
    tm_model m;
    nncl_train_config tc = tm_config(0, 4096, NNCL_PRECISION_FP32);
    nncl_trainer *t = NULL;
    uint64_t before = 0, after = 0;
    const char *msg;
    TH_CHECK(name, c != NULL);
    TH_CHECK(name, tm_build(c, &m, 2, 6, 128));
    TH_OK(name, c, nncl_device_memory(c, 0, &before, NULL));
    TH_CHECK(name, nncl_trainer_create(c, m.g, m.loss, &tc, &t) == NNCL_ERR_OUT_OF_MEMORY && t == NULL);
    msg = nncl_last_error(c);
    TH_CHECK(name, strstr(msg, "needs") && strstr(msg, "memory cap") && strstr(msg, "checkpointing") &&
                       strstr(msg, "smaller max_batch") && strstr(msg, "half storage") && strstr(msg, "more devices"));
    TH_OK(name, c, nncl_device_memory(c, 0, &after, NULL));
    TH_CHECK(name, after == before);
    nncl_graph_free(m.g);
    nncl_free(c);
    th_pass("%s (%s)", name, msg);
    return 0;
}

/* The largest batch under the cap: a trainer of it is made; one of twice
 * as many (and more) is refused; checkpointing finds a larger one (by
 * less than the activations shrink: parameters, optimizer state and the
 * GEMM workspace's bound stay). */
static int test_max_batch(void) {
    const char *name = "nncl_train_max_batch under a 24 MiB cap: that batch is made, twice it is refused";
    nncl_context *c = tm_capped(24u << 20);
    tm_model m;
    nncl_train_config tc = tm_config(0, 1, NNCL_PRECISION_FP32);
    nncl_trainer *t = NULL;
    nncl_batch_fit f, fc;
    TH_CHECK(name, c != NULL);
    TH_CHECK(name, tm_build(c, &m, 2, 16, 256));
    tc.devices = NULL;
    TH_OK(name, c, nncl_train_max_batch(c, m.g, m.loss, &tc, 0, &f));
    TH_CHECK(name, f.batch > 8 && f.need_bytes <= f.have_bytes && f.segments == 1);
    TH_CHECK(name, f.have_bytes <= (uint64_t)((24u << 20) * (1 - NNCL_FIT_MARGIN)));
    tc.checkpoint = NNCL_CHECKPOINT_AUTO;
    TH_OK(name, c, nncl_train_max_batch(c, m.g, m.loss, &tc, 0, &fc));
    TH_CHECK(name, fc.batch * 10 >= f.batch * 14 && fc.segments > 1); /* plan: 17 values kept against about 8 */
    tc.checkpoint = NNCL_CHECKPOINT_NONE;
    tc.max_batch = 2 * f.batch + 2;
    TH_CHECK(name, nncl_trainer_create(c, m.g, m.loss, &tc, &t) == NNCL_ERR_OUT_OF_MEMORY);
    tc.max_batch = f.batch;
    TH_OK(name, c, nncl_trainer_create(c, m.g, m.loss, &tc, &t));
    nncl_trainer_free(t);
    tc.checkpoint = NNCL_CHECKPOINT_AUTO;
    tc.max_batch = fc.batch;
    TH_OK(name, c, nncl_trainer_create(c, m.g, m.loss, &tc, &t));
    nncl_trainer_free(t);
    th_pass("%s (batch %d, %d with checkpointing in %d segments)", name, f.batch, fc.batch, fc.segments);
    TH_OK(name, c, nncl_train_max_batch(c, m.g, m.loss, &tc, 5, &fc));
    TH_CHECK(name, fc.batch == 5);
    nncl_graph_free(m.g);
    nncl_free(c);
    return 0;
}

/* ------------------------------------------------------------- checkpointing */

static int test_marks(nncl_context *ctx) {
    const char *name = "checkpoint boundaries on a parameter, an input, the loss, another graph's node are refused";
    tm_model m, o;
    nncl_train_config tc = tm_config(NNCL_CHECKPOINT_MARKED, 8, NNCL_PRECISION_FP32);
    nncl_trainer *t = NULL;
    nncl_node *w, *after;
    TH_CHECK(name, tm_build(ctx, &m, 0, 3, 16) && tm_build(ctx, &o, 0, 3, 16));
    w = nncl_graph_find(m.g, "fc1.weight");
    TH_CHECK(name, w != NULL);
    TH_CHECK(name, nncl_checkpoint_mark(m.g, w) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "\"fc1.weight\" is a parameter"));
    TH_CHECK(name, nncl_checkpoint_mark(m.g, m.x) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "\"x\" is an input"));
    TH_CHECK(name, nncl_checkpoint_mark(m.g, m.loss) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "is a loss") && strstr(nncl_last_error(ctx), m.loss->name));
    TH_CHECK(name, nncl_checkpoint_mark(m.g, o.mid) == NNCL_ERR_INVALID_ARGUMENT &&
                       strstr(nncl_last_error(ctx), "another graph"));
    /* a node the loss does not need: refused when the trainer is made */
    after = nncl_op_relu(m.g, m.mid);
    TH_OK(name, ctx, nncl_checkpoint_mark(m.g, after));
    TH_CHECK(name, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t) == NNCL_ERR_INVALID_ARGUMENT && t == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), after->name) && strstr(nncl_last_error(ctx), "before the loss"));
    nncl_graph_free(m.g);
    nncl_graph_free(o.g);
    th_pass("%s", name);
    return 0;
}

/* 10 steps with checkpointing against 10 without: parameters, optimizer
 * state, running statistics and losses bit for bit (fp32), or within tol
 * (half storage). devs: the devices (NULL: device 0). */
static int tm_compare(nncl_context *ctx, const char *name, int kind, int checkpoint, nncl_precision prec, double tol,
                      const int *devs, int nd, int overlap, const char *what) {
    tm_model a, b;
    nncl_train_config ta = tm_config(0, 16, prec), tb = tm_config(checkpoint, 16, prec);
    nncl_trainer *t0 = NULL, *t1 = NULL;
    float la[10], lb[10], *sa, *sb;
    static const float even[2] = {1, 1};
    size_t na, nb, i, again;
    double num = 0, den = 0;
    int d0 = 0;
    TH_CHECK(name, tm_build(ctx, &a, kind, 4, 24) && tm_build(ctx, &b, kind, 4, 24));
    if (checkpoint == NNCL_CHECKPOINT_MARKED) TH_OK(name, ctx, nncl_checkpoint_mark(b.g, b.mid));
    ta.devices = tb.devices = devs ? devs : &d0;
    ta.n_devices = tb.n_devices = devs ? nd : 1;
    ta.shares = tb.shares = nd > 1 ? even : NULL;
    ta.overlap = tb.overlap = overlap;
    if (kind == 3) { /* nanoGPT's: AdamW, clipping */
        ta.optim = tb.optim = nncl_optim_default(NNCL_OPT_ADAMW);
        ta.optim.clip_norm = tb.optim.clip_norm = 1.0f;
    }
    ta.optim.weight_decay = tb.optim.weight_decay = 0.01f;
    TH_OK(name, ctx, nncl_trainer_create(ctx, a.g, a.loss, &ta, &t0));
    TH_OK(name, ctx, nncl_trainer_create(ctx, b.g, b.loss, &tb, &t1));
    TH_CHECK(name, t1->plan[0]->n_segments > 1 && t1->plan[0]->n_rec > 0 && t0->plan[0]->n_rec == 0);
    TH_OK(name, ctx, tm_train(t0, &a, 10, 16, la));
    TH_OK(name, ctx, tm_train(t1, &b, 10, 16, lb));
    TH_CHECK(name, (sa = tm_state(t0, &na)) != NULL && (sb = tm_state(t1, &nb)) != NULL && na == nb);
    for (i = 0; i < na; i++) {
        num += ((double)sa[i] - sb[i]) * ((double)sa[i] - sb[i]);
        den += (double)sa[i] * sa[i];
    }
    for (i = 0; i < 10; i++) {
        num += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]);
        den += (double)la[i] * la[i];
    }
    if (tol == 0 ? (memcmp(sa, sb, na * sizeof *sa) != 0 || memcmp(la, lb, sizeof la) != 0) : !(num / den <= tol)) {
        th_fail(name, "normalised squared difference %.3g (segments %d, %d recomputed)", num / den,
                t1->plan[0]->n_segments, t1->plan[0]->n_rec);
        return 1;
    }
    for (i = again = 0; i < (size_t)t1->plan[0]->n_rec; i++) again += t1->plan[0]->rec_again[i];
    if (kind == 5 && !again) { /* the ResNet's plan is chosen with a value recomputed twice */
        th_fail(name, "no value recomputed twice (%d recomputed)", t1->plan[0]->n_rec);
        return 1;
    }
    th_pass("%s (%s; %d segments, %d ops recomputed, %d of them again; activations %.1f KiB against %.1f KiB, arena "
            "%.1f KiB against %.1f KiB; difference %.2g)", name, what, t1->plan[0]->n_segments, t1->plan[0]->n_rec,
            (int)again, t1->plan[0]->act_bytes / 1024.0, t0->plan[0]->act_bytes / 1024.0,
            nncl__plan_arena_bytes(t1->plan[0]) / 1024.0, nncl__plan_arena_bytes(t0->plan[0]) / 1024.0, num / den);
    free(sa); free(sb);
    nncl_trainer_free(t0); nncl_trainer_free(t1);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    return 0;
}

/* Two devices with checkpointing against one device with it. */
static int test_two_devices(nncl_context *ctx) {
    const char *name = "checkpointing on 2 devices equals 1 device with checkpointing (batch norm, dropout, residual)";
    static const int devs[2] = {0, 1};
    static const float even[2] = {1, 1};
    tm_model a, b;
    nncl_train_config ta = tm_config(NNCL_CHECKPOINT_AUTO, 16, NNCL_PRECISION_FP32), tb = ta;
    nncl_trainer *t0 = NULL, *t1 = NULL;
    float *sa, *sb;
    size_t na, nb, i;
    double num = 0, den = 0;
    int d0 = 0;
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tm_build(ctx, &a, 0, 4, 24) && tm_build(ctx, &b, 0, 4, 24));
    ta.devices = &d0;
    ta.n_devices = 1;
    tb.devices = devs;
    tb.n_devices = 2;
    tb.shares = even;
    /* SGD, as the trainer's own test of two devices against one: Adam's
     * normalisation would magnify the rounding of the gradient average */
    ta.optim = tb.optim = nncl_optim_default(NNCL_OPT_SGD);
    TH_OK(name, ctx, nncl_trainer_create(ctx, a.g, a.loss, &ta, &t0));
    TH_OK(name, ctx, nncl_trainer_create(ctx, b.g, b.loss, &tb, &t1));
    TH_CHECK(name, t1->plan[0]->n_rec > 0 && t1->plan[1]->n_rec > 0);
    TH_OK(name, ctx, tm_train(t0, &a, 10, 16, NULL));
    TH_OK(name, ctx, tm_train(t1, &b, 10, 16, NULL));
    TH_CHECK(name, (sa = tm_state(t0, &na)) != NULL && (sb = tm_state(t1, &nb)) != NULL && na == nb);
    for (i = 0; i < na; i++) {
        num += ((double)sa[i] - sb[i]) * ((double)sa[i] - sb[i]);
        den += (double)sa[i] * sa[i];
    }
    if (!(num / den < 1e-10)) {
        th_fail(name, "normalised squared difference %.3g", num / den);
        return 1;
    }
    free(sa); free(sb);
    nncl_trainer_free(t0); nncl_trainer_free(t1);
    nncl_graph_free(a.g); nncl_graph_free(b.g);
    th_pass("%s (normalised squared difference %.2g)", name, num / den);
    return 0;
}

/* Under a cap between the two plans' needs, the model trains with
 * checkpointing and is refused without. */
static int test_fits_only_with(nncl_context *ctx) {
    const char *name = "under the cap a model that fits only with checkpointing trains with it, is refused without";
    tm_model m;
    nncl_train_config tn = tm_config(0, 256, NNCL_PRECISION_FP32), tc = tm_config(NNCL_CHECKPOINT_AUTO, 256,
                                                                                   NNCL_PRECISION_FP32);
    nncl__plan_opts on, oc;
    nncl_trainer *t = NULL;
    nncl_context *c;
    uint64_t need_n, need_c, ws, base = 0;
    float loss[3];
    int d0 = 0;
    TH_CHECK(name, tm_build(ctx, &m, 2, 16, 128));
    tn.devices = tc.devices = &d0;
    tn.n_devices = tc.n_devices = 1;
    TH_OK(name, ctx, nncl__trainer_plan_opts(m.g, &tn, &on));
    TH_OK(name, ctx, nncl__trainer_plan_opts(m.g, &tc, &oc));
    TH_OK(name, ctx, nncl__plan_measure(ctx, m.g, m.loss, &on, &need_n, NULL, NULL));
    TH_OK(name, ctx, nncl__plan_measure(ctx, m.g, m.loss, &oc, &need_c, NULL, NULL));
    TH_CHECK(name, need_c < need_n);
    /* the GEMM workspace the kernels' timing sizes, from an uncapped trainer */
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t));
    ws = t->plan[0]->gemm_temp_bytes;
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    c = tm_capped(1u << 30);
    TH_CHECK(name, c != NULL);
    TH_OK(name, c, nncl_device_memory(c, 0, &base, NULL));
    nncl_free(c);
    c = tm_capped(base + ws + need_c + (need_n - need_c) / 2);
    TH_CHECK(name, c != NULL && tm_build(c, &m, 2, 16, 128));
    TH_CHECK(name, nncl_trainer_create(c, m.g, m.loss, &tn, &t) == NNCL_ERR_OUT_OF_MEMORY && t == NULL);
    TH_OK(name, c, nncl_trainer_create(c, m.g, m.loss, &tc, &t));
    TH_OK(name, c, tm_train(t, &m, 3, TM_N, loss));
    TH_CHECK(name, loss[0] > 0 && loss[2] > 0);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(c);
    th_pass("%s (plan %.2f MiB with, %.2f MiB without)", name, need_c / 1048576.0, need_n / 1048576.0);
    return 0;
}

/* What nncl_train_max_batch counts (nncl__plan_measure, the workspace by
 * the ops' declared bounds) covers what the trainer then allocates, with
 * and without checkpointing, in fp32 and bf16; checkpointing lowers the
 * activation memory it reports. */
static int test_measure_covers(nncl_context *ctx) {
    static const struct { int kind, batch; nncl_precision prec; } cases[4] = {
        {0, 64, NNCL_PRECISION_FP32}, {1, 64, NNCL_PRECISION_FP32}, {1, 48, NNCL_PRECISION_BF16},
        {3, 8, NNCL_PRECISION_FP32}};
    const char *name = "a plan's measured need covers what its trainer allocates (MLP, CNN, GPT; fp32, bf16)";
    double worst = 0;
    int c, ck, d0 = 0;
    for (c = 0; c < 4; c++) {
        uint64_t act[2] = {0, 0};
        for (ck = 0; ck < 2; ck++) {
            tm_model m;
            nncl_train_config tc = tm_config(ck ? NNCL_CHECKPOINT_AUTO : 0, cases[c].batch, cases[c].prec);
            nncl__plan_opts o;
            nncl_trainer *t = NULL;
            uint64_t need = 0, before = 0, after = 0;
            TH_CHECK(name, tm_build(ctx, &m, cases[c].kind, 4, 64));
            tc.devices = &d0;
            tc.n_devices = 1;
            TH_OK(name, ctx, nncl__trainer_plan_opts(m.g, &tc, &o));
            TH_OK(name, ctx, nncl__plan_measure(ctx, m.g, m.loss, &o, &need, &act[ck], NULL));
            TH_OK(name, ctx, nncl_device_memory(ctx, 0, &before, NULL));
            TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &tc, &t));
            TH_OK(name, ctx, nncl_device_memory(ctx, 0, &after, NULL));
            if (after - before > need) {
                th_fail(name, "kind %d, checkpoint %d: the trainer holds %llu bytes, %llu measured", cases[c].kind,
                        ck, (unsigned long long)(after - before), (unsigned long long)need);
                nncl_trainer_free(t);
                nncl_graph_free(m.g);
                return 1;
            }
            TH_CHECK(name, t->plan[0]->act_bytes == act[ck] && act[ck] <= nncl__plan_arena_bytes(t->plan[0]));
            if ((double)(after - before) / (double)need > worst) worst = (double)(after - before) / (double)need;
            nncl_trainer_free(t);
            nncl_graph_free(m.g);
        }
        TH_CHECK(name, act[1] < act[0]);
    }
    th_pass("%s (allocated at most %.2f of the measured need)", name, worst);
    return 0;
}

int main(void) {
    nncl_context *ctx;
    static const int devs[2] = {0, 1};
    tm_data();
    test_cap_env();
    if (!(ctx = th_context())) return th_exit_code();
    test_refused();
    test_max_batch();
    test_marks(ctx);
    tm_compare(ctx, "checkpointing (automatic) trains bit-identical to none: MLP with batch norm, dropout, residual",
               0, NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32");
    tm_compare(ctx, "checkpointing (marked) trains bit-identical to none: MLP with batch norm, dropout, residual",
               0, NNCL_CHECKPOINT_MARKED, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32");
    tm_compare(ctx, "checkpointing (automatic) trains bit-identical to none: CNN with batch norm, pooling, residual",
               1, NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32");
    tm_compare(ctx, "checkpointing (automatic) trains bit-identical to none: ResNet with batch norm's fused residual",
               5, NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32");
    tm_compare(ctx, "checkpointing (automatic) trains bit-identical to none: GPT with attention dropout, layer norm",
               3, NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32, AdamW, clipping");
    tm_compare(ctx, "checkpointing (automatic) trains bit-identical to none: a 2-layer LSTM unrolled over 6 steps",
               4, NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, NULL, 1, 0, "fp32");
    tm_compare(ctx, "checkpointing in fp16 storage with loss scaling trains as without", 0, NNCL_CHECKPOINT_AUTO,
               NNCL_PRECISION_FP16, 1e-8, NULL, 1, 0, "fp16");
    tm_compare(ctx, "checkpointing in bf16 storage (CNN) trains as without", 1, NNCL_CHECKPOINT_AUTO,
               NNCL_PRECISION_BF16, 1e-8, NULL, 1, 0, "bf16");
    if (!th_devices_lack(ctx, 2, "checkpointing on 2 devices with overlap trains bit-identical to none on 2"))
        tm_compare(ctx, "checkpointing on 2 devices with overlap trains bit-identical to none on 2", 0,
                   NNCL_CHECKPOINT_AUTO, NNCL_PRECISION_FP32, 0, devs, 2, 1, "fp32, 2 devices, overlap");
    test_two_devices(ctx);
    test_fits_only_with(ctx);
    test_measure_covers(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
