/* test_gpt_ops.c - the GPT's graph ops beyond their op-table rows: a small
 * GPT block built from them (tied embedding head, learned positions, layer
 * norm without bias, RMS norm, q/k/v slices, heads by reshape and
 * transpose, batched products, the sequence cross-entropy) trained a few
 * AdamW steps with decay on 2-D weights only, saved, and rebuilt from the
 * file (the description the same, the tied weight stored once, the same
 * logits through a trainer and through nncl_model_load; its steps look
 * no kernel up and build nothing); shape errors at
 * build time naming the node and both shapes; nncl_param_decay's layout
 * and its argument errors; the block in fp16 and bf16 storage, and on two
 * devices equal to one. */
#include "harness.h"
#include "train/plan.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TG_T 5
#define TG_V 7
#define TG_C 8
#define TG_H 2
#define TG_B 3

static const char *tg_tmp(void) {
    const char *d = getenv("TMPDIR");
    return d && *d && strlen(d) < 100 ? d : "/tmp";
}

/* [B, T, C] split into heads: [B, H, T, C/H]. */
static nncl_node *tg_heads(nncl_graph *g, nncl_node *x) {
    int s[3] = {TG_T, TG_H, TG_C / TG_H};
    return nncl_transpose(g, nncl_reshape(g, x, 3, s), 0, 1);
}

/* One transformer block (non-causal attention written from parts) and a
 * tied head; *logits gets the head. NULL when a builder failed. */
static nncl_node *tg_build(nncl_graph *g, nncl_node **logits) {
    int pos[2] = {TG_T, TG_C}, tc[2] = {TG_T, TG_C}, i;
    nncl_node *idx = nncl_input(g, "idx", 1, pos), *y = nncl_input(g, "y", 1, pos);
    nncl_node *h, *a, *qkv, *att, *o, *m, *wte;
    h = nncl_embedding(g, idx, TG_V, TG_C, "transformer.wte");
    wte = nncl_graph_find(g, "transformer.wte.weight");
    h = nncl_op_add(g, h, nncl_param(g, "transformer.wpe.weight", 2, pos, NNCL_INIT_NORMAL, 0.02f));
    a = nncl_layernorm_ex(g, h, 1e-5f, 0, "transformer.h.0.ln_1");
    qkv = nncl_linear(g, a, 3 * TG_C, 0, NNCL_ACT_NONE, "transformer.h.0.attn.c_attn");
    att = nncl_matmul(g, tg_heads(g, nncl_slice(g, qkv, 1, 0, TG_C)), tg_heads(g, nncl_slice(g, qkv, -1, TG_C, TG_C)),
                      0, 1);
    att = nncl_op_softmax(g, nncl_op_scale(g, att, 1.0f / sqrtf((float)(TG_C / TG_H))));
    o = nncl_matmul(g, att, tg_heads(g, nncl_slice(g, qkv, 1, 2 * TG_C, TG_C)), 0, 0);
    o = nncl_reshape(g, nncl_transpose(g, o, 0, 1), 2, tc);
    h = nncl_op_add(g, h, nncl_linear(g, o, TG_C, 0, NNCL_ACT_NONE, "transformer.h.0.attn.c_proj"));
    m = nncl_rmsnorm(g, h, 1e-5f, "transformer.h.0.ln_2");
    m = nncl_op_gelu_tanh(g, nncl_linear(g, m, 2 * TG_C, 0, NNCL_ACT_NONE, "transformer.h.0.mlp.c_fc"));
    h = nncl_op_add(g, h, nncl_linear(g, m, TG_C, 0, NNCL_ACT_NONE, "transformer.h.0.mlp.c_proj"));
    h = nncl_layernorm_ex(g, h, 1e-5f, 0, "transformer.ln_f");
    *logits = nncl_matmul(g, h, wte, 0, 1);
    for (i = 0; i < g->n_nodes; i++) /* nanoGPT: decay 2-D weights only */
        if (g->nodes[i]->op == NNCL_OP_PARAM && g->nodes[i]->ndim < 2 && nncl_param_decay(g, g->nodes[i], 0))
            return NULL;
    return nncl_sequence_cross_entropy(g, *logits, y, -100);
}

static unsigned long tg_lookups(nncl_context *ctx) {
    unsigned long sum = 0;
    int d;
    for (d = 0; d < ctx->n_devices; d++) sum += nncl__kernel_lookups(&ctx->devices[d]);
    return sum;
}

static int tg_round_trip(nncl_context *ctx) {
    const char *name = "a GPT block trains, saves and rebuilds from its file";
    char path[200], *d1 = NULL, *d2 = NULL;
    nncl_graph *g = nncl_graph_create(ctx, 3), *g2 = NULL;
    nncl_node *logits = NULL, *loss, *logits2, *loss2;
    nncl_train_config cfg = nncl_train_default();
    nncl_trainer *t = NULL, *t2 = NULL;
    nncl_safetensors *st = NULL;
    nncl_model *model = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    float idx[TG_B * TG_T], y[TG_B * TG_T], z1[TG_B * TG_T * TG_V], z2[TG_B * TG_T * TG_V], p[TG_B * TG_T * TG_V];
    int i, k, n_params = 0, step, cls[TG_B * TG_T];
    unsigned long lookups;
    unsigned seed = 5;
    TH_CHECK(name, g && (loss = tg_build(g, &logits)) != NULL);
    for (i = 0; i < TG_B * TG_T; i++) {
        idx[i] = (float)(int)(th_uniform(&seed) * TG_V);
        y[i] = i % 4 == 1 ? -100.0f : (float)(int)(th_uniform(&seed) * TG_V);
    }
    cfg.max_batch = TG_B;
    cfg.optim = nncl_optim_default(NNCL_OPT_ADAMW);
    cfg.optim.weight_decay = 0.1f;
    cfg.optim.beta2 = 0.99f;
    cfg.optim.schedule = NNCL_SCHED_WARMUP_COSINE;
    cfg.optim.warmup_steps = 1;
    cfg.optim.total_steps = 4;
    cfg.optim.min_lr = 1e-4f;
    cfg.optim.clip_norm = 1.0f;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &cfg, &t));
    f[0].node = nncl_graph_find(g, "idx");
    f[0].data = idx;
    f[1].node = nncl_graph_find(g, "y");
    f[1].data = y;
    lookups = tg_lookups(ctx);
    for (step = 0; step < 3; step++) { /* batches of 3, 2, 1: no kernel looked up or built in a step */
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B - step, &info));
        TH_CHECK(name, isfinite(info.loss) && !info.skipped);
    }
    TH_CHECK(name, tg_lookups(ctx) == lookups);
    snprintf(path, sizeof path, "%s/tg_gpt_%d.safetensors", tg_tmp(), (int)getpid());
    TH_OK(name, ctx, nncl_trainer_save_model(t, path, NULL));
    TH_OK(name, ctx, nncl_trainer_predict(t, f, 1, TG_B, logits, z1));
    /* the tied weight once: one tensor per parameter */
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    for (i = 0; i < g->n_nodes; i++) n_params += g->nodes[i]->op == NNCL_OP_PARAM;
    TH_CHECK(name, nncl_safetensors_count(st) == n_params && nncl_safetensors_find(st, "transformer.wte.weight") >= 0);
    /* the graph again from the description, the same text */
    TH_OK(name, ctx, nncl_graph_from_safetensors(ctx, st, &g2));
    d1 = nncl__graph_describe(g);
    d2 = nncl__graph_describe(g2);
    k = d1 && d2 && !strcmp(d1, d2) && strstr(d1, "no_decay") && strstr(d1, "matmul") && strstr(d1, "sequence_cross");
    free(d1);
    free(d2);
    TH_CHECK(name, k);
    loss2 = g2->nodes[g2->n_nodes - 1];
    logits2 = loss2->in[0];
    TH_CHECK(name, loss2->op == NNCL_OP_SEQ_CE && loss2->iattr[0] == -100 && logits2->op == NNCL_OP_MATMUL &&
                       logits2->in[1] == nncl_graph_find(g2, "transformer.wte.weight"));
    TH_OK(name, ctx, nncl_trainer_create(ctx, g2, loss2, &cfg, &t2));
    TH_OK(name, ctx, nncl_trainer_load(t2, path));
    f[0].node = nncl_graph_find(g2, "idx");
    th_poison(z2, TG_B * TG_T * TG_V);
    TH_OK(name, ctx, nncl_trainer_predict(t2, f, 1, TG_B, logits2, z2));
    TH_CHECK(name, memcmp(z1, z2, sizeof z1) == 0);
    /* and as an inference model: per position, softmax of those logits */
    TH_OK(name, ctx, nncl_model_load(ctx, path, 2, &model));
    TH_CHECK(name, nncl_model_classes(model) == TG_V && nncl_model_features(model) == TG_T);
    TH_OK(name, ctx, nncl_model_predict(model, idx, TG_B, p, cls));
    for (i = 0; i < TG_B * TG_T; i++) {
        double mx = z1[i * TG_V], s = 0;
        int arg = 0;
        for (k = 1; k < TG_V; k++)
            if (z1[i * TG_V + k] > z1[i * TG_V + arg]) arg = k;
        mx = z1[i * TG_V + arg];
        for (k = 0; k < TG_V; k++) s += exp(z1[i * TG_V + k] - mx);
        TH_CHECK(name, cls[i] == arg);
        for (k = 0; k < TG_V; k++) TH_CHECK(name, fabs(p[i * TG_V + k] - exp(z1[i * TG_V + k] - mx) / s) < 1e-6);
    }
    nncl_model_free(model);
    nncl_safetensors_free(st);
    remove(path);
    nncl_trainer_free(t2);
    nncl_trainer_free(t);
    nncl_graph_free(g2);
    nncl_graph_free(g);
    th_pass("%s (loss %.4f after 3 steps)", name, (double)info.loss);
    return 0;
}

/* A builder refused: NULL, and a message with each of the pieces. */
static int tg_refused(const char *name, nncl_context *ctx, nncl_node *n, const char *a, const char *b, const char *c) {
    const char *msg = nncl_last_error(ctx);
    if (!n && strstr(msg, a) && strstr(msg, b) && (!c || strstr(msg, c))) return 0;
    th_fail(name, "%s: %s (wanted \"%s\", \"%s\"%s%s)", n ? "built" : "refused", msg, a, b, c ? ", " : "", c ? c : "");
    return 1;
}

static int tg_shape_errors(nncl_context *ctx) {
    const char *name = "wrong shapes are refused at build time, naming the node and both shapes";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int s35[2] = {3, 5}, s45[2] = {4, 5}, s53[2] = {5, 3}, s235[3] = {2, 3, 5}, s3[1] = {3}, s4[1] = {4}, bad = 0;
    nncl_node *a = nncl_input(g, "a", 2, s35), *b = nncl_input(g, "b", 2, s45), *lab = nncl_input(g, "lab", 1, s4);
    nncl_node *w = nncl_param(g, "w", 2, s45, NNCL_INIT_ZEROS, 0), *w3 = nncl_param(g, "w3", 3, s235, NNCL_INIT_ZEROS, 0);
    nncl_node *p53 = nncl_param(g, "p53", 2, s53, NNCL_INIT_ZEROS, 0), *v3 = nncl_input(g, "v3", 1, s3);
    int before = g->n_nodes;
    bad |= tg_refused(name, ctx, nncl_matmul(g, a, b, 0, 0), "matmul", "[B,3,5]", "[B,4,5]");
    bad |= tg_refused(name, ctx, nncl_matmul(g, a, w, 0, 0), "matmul", "[B,3,5]", "[4,5] (inner");
    bad |= tg_refused(name, ctx, nncl_matmul(g, a, w3, 0, 1), "leading dimensions", "[B,3,5]", "[2,3,5]");
    bad |= tg_refused(name, ctx, nncl_matmul(g, w, a, 0, 0), "matmul", "[4,5]", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_matmul(g, v3, w, 0, 0), "two matrix dimensions", "[B,3]", "nncl_linear");
    bad |= tg_refused(name, ctx, nncl_matmul(g, a, b, 2, 0), "nncl_matmul", "transpose_a 2", NULL);
    bad |= tg_refused(name, ctx, nncl_transpose(g, a, 0, 2), "nncl_transpose", "axes 0 and 2", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_transpose(g, a, 1, -1), "nncl_transpose", "axes 1 and -1", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_slice(g, a, 1, 3, 3), "slice", "[3, 6)", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_slice(g, a, 0, 0, 0), "slice", "[0, 0)", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_slice(g, a, 2, 0, 1), "nncl_slice", "axis 2", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_op_add(g, a, p53), "add", "[5,3]", "[B,3,5]");
    bad |= tg_refused(name, ctx, nncl_sequence_cross_entropy(g, a, lab, -100), "sequence_cross_entropy", "[B,3,5]",
                      "[B,4]");
    bad |= tg_refused(name, ctx, nncl_layernorm_ex(g, a, 1e-5f, 2, "ln"), "nncl_layernorm_ex", "bias 2", NULL);
    bad |= tg_refused(name, ctx, nncl_rmsnorm(g, a, 0.0f, "rms"), "nncl_rmsnorm", "eps 0", NULL);
    TH_CHECK(name, !bad && g->n_nodes == before); /* a refused builder adds nothing */
    /* what is right builds: b [B,4,5] x w^T [5,4], a transposed x a */
    TH_CHECK(name, nncl_matmul(g, b, w, 0, 1) && nncl_matmul(g, a, a, 1, 0) && nncl_slice(g, a, -1, 4, 1));
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

static int tg_decay_layout(nncl_context *ctx) {
    const char *name = "nncl_param_decay: the decayed parameters first, errors named";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int s2[2] = {3, 4}, s1[1] = {5}, s6[1] = {6};
    nncl_node *w1 = nncl_param(g, "w1", 2, s2, NNCL_INIT_ZEROS, 0), *b1 = nncl_param(g, "b1", 1, s1, NNCL_INIT_ZEROS, 0);
    nncl_node *w2 = nncl_param(g, "w2", 2, s2, NNCL_INIT_ZEROS, 0), *fz = nncl_param(g, "fz", 1, s6, NNCL_INIT_ZEROS, 0);
    nncl_node *x = nncl_input(g, "x", 1, s1);
    TH_OK(name, ctx, nncl_param_decay(g, b1, 0));
    TH_OK(name, ctx, nncl_param_freeze(g, fz, 1));
    TH_CHECK(name, nncl_param_decay(g, x, 0) == NNCL_ERR_INVALID_ARGUMENT && strstr(nncl_last_error(ctx), "not a parameter"));
    TH_CHECK(name, nncl_param_decay(g, w1, 2) == NNCL_ERR_INVALID_ARGUMENT && strstr(nncl_last_error(ctx), "\"w1\""));
    TH_OK(name, ctx, nncl__graph_layout(g));
    TH_CHECK(name, w1->param_off == 0 && w2->param_off == 12 && b1->param_off == 24 && fz->param_off == 29);
    TH_CHECK(name, g->n_decay == 24 && g->n_trainable == 29 && g->n_params == 35);
    TH_CHECK(name, nncl_param_decay(g, w1, 0) == NNCL_ERR_STATE && strstr(nncl_last_error(ctx), "plan"));
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* The losses of three steps of the block in storage prec, on fixed data
 * (position 1 of every sample ignored), on devs (NULL: device 0), with
 * shard weights shares; the tied weight after them into wte. */
static int tg_losses(nncl_context *ctx, int prec, const int *devs, int nd, const float *shares, float *losses,
                     float *wte) {
    const char *name = "the GPT block, three steps";
    nncl_graph *g = nncl_graph_create(ctx, 3);
    nncl_node *logits, *loss;
    nncl_train_config cfg = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    float idx[TG_B * TG_T], y[TG_B * TG_T];
    int i;
    unsigned seed = 9;
    int zero = 0;
    TH_CHECK(name, g && (loss = tg_build(g, &logits)) != NULL);
    for (i = 0; i < TG_B * TG_T; i++) {
        idx[i] = (float)(int)(th_uniform(&seed) * TG_V);
        y[i] = i % TG_T == 1 ? -100.0f : (float)(int)(th_uniform(&seed) * TG_V);
    }
    cfg.max_batch = TG_B;
    cfg.optim = nncl_optim_default(NNCL_OPT_SGD);
    cfg.optim.lr = 0.05f;
    cfg.precision = (nncl_precision)prec;
    cfg.loss_scaling = -1;
    cfg.devices = devs ? devs : &zero;
    cfg.n_devices = devs ? nd : 1;
    cfg.shares = shares;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &cfg, &t));
    f[0].node = nncl_graph_find(g, "idx");
    f[0].data = idx;
    f[1].node = nncl_graph_find(g, "y");
    f[1].data = y;
    for (i = 0; i < 3; i++) {
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, TG_B, &info));
        losses[i] = info.loss;
    }
    if (wte) TH_OK(name, ctx, nncl_trainer_param_get(t, "transformer.wte.weight", wte, TG_V * TG_C));
    nncl_trainer_free(t);
    nncl_graph_free(g);
    return 0;
}

/* Every op of the block has half kernels: it trains in fp16 and bf16
 * storage, its losses near fp32's (the rounding of stored activations,
 * 2^-11 and 2^-8 relative, over a few layers). */
static int tg_half(nncl_context *ctx) {
    static const double tol[3] = {0, 3e-3, 3e-2};
    float ref[3], got[3];
    char name[80];
    int p, i;
    if (tg_losses(ctx, 0, NULL, 0, NULL, ref, NULL)) return 1;
    for (p = 1; p <= 2; p++) {
        snprintf(name, sizeof name, "the GPT block trains in %s storage", p == 1 ? "fp16" : "bf16");
        if (tg_losses(ctx, p, NULL, 0, NULL, got, NULL)) return 1;
        for (i = 0; i < 3; i++)
            if (!(fabs(got[i] - ref[i]) <= tol[p] * fabs(ref[i]))) {
                th_fail(name, "loss at step %d: %.6f, fp32 %.6f", i + 1, (double)got[i], (double)ref[i]);
                return 1;
            }
        TH_CHECK(name, ref[2] < ref[0]); /* and it learns */
        th_pass("%s (losses %.5f %.5f %.5f, fp32 %.5f %.5f %.5f)", name, (double)got[0], (double)got[1],
                (double)got[2], (double)ref[0], (double)ref[1], (double)ref[2]);
    }
    return 0;
}

/* Data parallel over two devices, shards of 1 and 2 samples: the same
 * losses and tied weight as one device (every sample counts as many
 * tokens, so the shard-weighted mean is the global one). */
static int tg_parallel(nncl_context *ctx) {
    const char *name = "the GPT block on two devices equals one device";
    static const int devs[2] = {0, 1};
    static const float shares[2] = {1, 2};
    float l1[3], l2[3], w1[TG_V * TG_C], w2[TG_V * TG_C];
    double want[TG_V * TG_C];
    int i;
    if (nncl_device_count(ctx) < 2) {
        th_skip(name, "needs two devices (POCL_DEVICES=\"pthread pthread\")");
        return 0;
    }
    if (tg_losses(ctx, 0, NULL, 0, NULL, l1, w1) || tg_losses(ctx, 0, devs, 2, shares, l2, w2)) return 1;
    for (i = 0; i < 3; i++) TH_CHECK(name, fabs(l1[i] - l2[i]) <= 1e-5 * fabs(l1[i]));
    for (i = 0; i < TG_V * TG_C; i++) want[i] = w1[i];
    TH_CHECK(name, th_close(name, w2, want, TG_V * TG_C, 1e-10));
    th_pass("%s (losses %.6f %.6f %.6f)", name, (double)l2[0], (double)l2[1], (double)l2[2]);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    tg_shape_errors(ctx);
    tg_decay_layout(ctx);
    if (ctx) tg_round_trip(ctx);
    if (ctx) tg_half(ctx);
    if (ctx) tg_parallel(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
