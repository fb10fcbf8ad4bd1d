/* test_gpt.c - a whole GPT against PyTorch: tests/data/torch_gpt.safetensors
 * (made by make_torch_gpt.py) holds a 2-layer GPT in nanoGPT's structure
 * (tied head, no biases, c_attn split into q, k, v), its initial weights,
 * 20 batches and the loss of each of PyTorch's 20 AdamW steps (weight decay
 * on the 2-D weights only, clipping, warm-up and cosine) and the weights
 * after them. The same model built through nncl's public API from the
 * same weights trains on the same batches: on every device the loss of
 * every step within 1e-4 relative and the final weights within fp32
 * rounding; on two devices data-parallel what one device gives (also with
 * dropout on the attention weights, whose masks follow the samples); in
 * fp16 and bf16 storage within those formats' tolerances. */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_FILE "tests/data/torch_gpt.safetensors"

typedef struct tg_cfg {
    int V, T, C, H, L, B, steps, warmup;
    float lr, min_lr, wd, clip, beta1, beta2, eps;
    float dropout; /* on the attention weights: 0 as PyTorch's run */
} tg_cfg;

typedef struct tg_model {
    nncl_graph *g;
    nncl_node *idx, *targets, *logits, *loss;
} tg_model;

static double tg_meta(const nncl_safetensors *st, const char *key, int *ok) {
    const char *v = nncl_safetensors_meta(st, key);
    if (!v) *ok = 0;
    return v ? atof(v) : 0;
}

static int tg_read_cfg(const nncl_safetensors *st, tg_cfg *c) {
    int ok = 1;
    c->V = (int)tg_meta(st, "vocab", &ok);
    c->T = (int)tg_meta(st, "block", &ok);
    c->C = (int)tg_meta(st, "embd", &ok);
    c->H = (int)tg_meta(st, "heads", &ok);
    c->L = (int)tg_meta(st, "layers", &ok);
    c->B = (int)tg_meta(st, "batch", &ok);
    c->steps = (int)tg_meta(st, "steps", &ok);
    c->warmup = (int)tg_meta(st, "warmup", &ok);
    c->lr = (float)tg_meta(st, "lr", &ok);
    c->min_lr = (float)tg_meta(st, "min_lr", &ok);
    c->wd = (float)tg_meta(st, "weight_decay", &ok);
    c->clip = (float)tg_meta(st, "clip", &ok);
    c->beta1 = (float)tg_meta(st, "beta1", &ok);
    c->beta2 = (float)tg_meta(st, "beta2", &ok);
    c->eps = (float)tg_meta(st, "eps", &ok);
    c->dropout = 0;
    return ok && c->V > 0 && c->T > 0 && c->C > 0 && c->H > 0 && c->L > 0 && c->B > 0 && c->steps > 0;
}

/* The tensor NAME of the file, or NULL. */
static const nncl_safetensors_entry *tg_get(const nncl_safetensors *st, const char *name, nncl_safetensors_entry *e) {
    int i = nncl_safetensors_find(st, name);
    return i >= 0 && nncl_safetensors_get(st, i, e) == NNCL_OK ? e : NULL;
}

/* NAME.weight under prefix p ("transformer.h.0.") as nanoGPT names it. */
static const char *tg_name(char *buf, size_t len, const char *p, const char *name) {
    snprintf(buf, len, "%s%s", p, name);
    return buf;
}

/* nanoGPT's GPT: token and position embeddings, L blocks of pre-norm
 * attention and MLP with residuals, a final norm, the head tied to wte. */
static int tg_build(nncl_context *ctx, const tg_cfg *c, tg_model *m) {
    int pshape[2] = {c->T, c->C}, l;
    nncl_node *x, *h, *q, *k, *v;
    char p[64], n1[128];
    memset(m, 0, sizeof *m);
    m->g = nncl_graph_create(ctx, 1);
    m->idx = nncl_input(m->g, "idx", 1, &c->T);
    m->targets = nncl_input(m->g, "targets", 1, &c->T);
    x = nncl_embedding(m->g, m->idx, c->V, c->C, "transformer.wte");
    x = nncl_op_add(m->g, x, nncl_param(m->g, "transformer.wpe.weight", 2, pshape, NNCL_INIT_NORMAL, 0.02f));
    for (l = 0; l < c->L; l++) {
        snprintf(p, sizeof p, "transformer.h.%d.", l);
        h = nncl_layernorm_ex(m->g, x, 1e-5f, 0, tg_name(n1, sizeof n1, p, "ln_1"));
        h = nncl_linear(m->g, h, 3 * c->C, 0, NNCL_ACT_NONE, tg_name(n1, sizeof n1, p, "attn.c_attn"));
        q = nncl_slice(m->g, h, 1, 0, c->C);
        k = nncl_slice(m->g, h, 1, c->C, c->C);
        v = nncl_slice(m->g, h, 1, 2 * c->C, c->C);
        h = nncl_causal_attention(m->g, q, k, v, c->H, c->dropout);
        h = nncl_linear(m->g, h, c->C, 0, NNCL_ACT_NONE, tg_name(n1, sizeof n1, p, "attn.c_proj"));
        x = nncl_op_add(m->g, x, h);
        h = nncl_layernorm_ex(m->g, x, 1e-5f, 0, tg_name(n1, sizeof n1, p, "ln_2"));
        h = nncl_linear(m->g, h, 4 * c->C, 0, NNCL_ACT_NONE, tg_name(n1, sizeof n1, p, "mlp.c_fc"));
        h = nncl_op_gelu_tanh(m->g, h);
        h = nncl_linear(m->g, h, c->C, 0, NNCL_ACT_NONE, tg_name(n1, sizeof n1, p, "mlp.c_proj"));
        x = nncl_op_add(m->g, x, h);
    }
    x = nncl_layernorm_ex(m->g, x, 1e-5f, 0, "transformer.ln_f");
    m->logits = nncl_matmul(m->g, x, nncl_graph_find(m->g, "transformer.wte.weight"), 0, 1);
    m->loss = nncl_sequence_cross_entropy(m->g, m->logits, m->targets, -1);
    return m->loss != NULL;
}

/* AdamW as nanoGPT configures it, decay on the 2-D weights only. */
static nncl_train_config tg_train_config(const tg_cfg *c, const int *devs, int n_devs, int prec) {
    static const float shares[2] = {1, 1};
    nncl_train_config cfg = nncl_train_default();
    cfg.max_batch = c->B;
    cfg.optim = nncl_optim_default(NNCL_OPT_ADAMW);
    cfg.optim.lr = c->lr;
    cfg.optim.beta1 = c->beta1;
    cfg.optim.beta2 = c->beta2;
    cfg.optim.eps = c->eps;
    cfg.optim.weight_decay = c->wd;
    cfg.optim.schedule = NNCL_SCHED_WARMUP_COSINE;
    cfg.optim.total_steps = c->steps;
    cfg.optim.min_lr = c->min_lr;
    cfg.optim.warmup_steps = c->warmup;
    cfg.optim.clip_norm = c->clip;
    cfg.devices = devs;
    cfg.n_devices = n_devs;
    cfg.shares = n_devs == 2 ? shares : NULL; /* 2 + 2 samples */
    cfg.rebalance_every = 0;
    cfg.precision = (nncl_precision)prec;
    if (prec == NNCL_PRECISION_FP16) { /* a scale that no step of this model overflows */
        cfg.loss_scaling = 1;
        cfg.loss_scale_init = 1024;
    }
    return cfg;
}

/* One trajectory: the losses of every step into loss[steps], the final
 * weights into params (the file's final.* order). */
typedef struct tg_run {
    float *loss, *params;
    size_t n_params;
} tg_run;

static int tg_train(const char *name, nncl_context *ctx, const nncl_safetensors *st, const tg_cfg *c,
                    const int *devs, int n_devs, int prec, tg_run *out) {
    tg_model m;
    nncl_trainer *tr = NULL;
    nncl_train_config cfg = tg_train_config(c, devs, n_devs, prec);
    nncl_safetensors_entry ex, ey, e;
    nncl_step_info info;
    nncl_feed f[2];
    size_t per = (size_t)c->B * (size_t)c->T, off = 0;
    int i, t;
    TH_CHECK(name, tg_build(ctx, c, &m));
    for (i = 0; i < nncl_safetensors_count(st); i++) { /* nanoGPT decays the 2-D weights only */
        nncl_node *p;
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (strncmp(e.name, "init.", 5)) continue;
        TH_CHECK(name, (p = nncl_graph_find(m.g, e.name + 5)) != NULL);
        TH_OK(name, ctx, nncl_param_decay(m.g, p, e.ndim >= 2));
    }
    TH_OK(name, ctx, nncl_trainer_create(ctx, m.g, m.loss, &cfg, &tr));
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (!strncmp(e.name, "init.", 5)) TH_OK(name, ctx, nncl_trainer_param_set(tr, e.name + 5, e.data, e.numel));
    }
    TH_CHECK(name, tg_get(st, "x", &ex) && tg_get(st, "y", &ey) && ex.numel == per * (size_t)c->steps);
    for (t = 0; t < c->steps; t++) {
        f[0].node = m.idx;
        f[0].data = ex.data + (size_t)t * per;
        f[1].node = m.targets;
        f[1].data = ey.data + (size_t)t * per;
        TH_OK(name, ctx, nncl_trainer_step(tr, f, 2, c->B, &info));
        TH_CHECK(name, !info.skipped);
        out->loss[t] = info.loss;
    }
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (strncmp(e.name, "final.", 6)) continue;
        TH_CHECK(name, off + e.numel <= out->n_params);
        TH_OK(name, ctx, nncl_trainer_param_get(tr, e.name + 6, out->params + off, e.numel));
        off += e.numel;
    }
    nncl_trainer_free(tr);
    nncl_graph_free(m.g);
    return 0;
}

/* Largest relative difference of the losses, and the worst normalised
 * squared error of a weight tensor, of run r against `want` (PyTorch's
 * file, or another run when other is not NULL). */
static void tg_diff(const nncl_safetensors *st, const tg_cfg *c, const tg_run *r, const tg_run *other, double *dloss,
                    double *dparam, char *worst, size_t wlen) {
    nncl_safetensors_entry el, e;
    size_t off = 0, k;
    int i, t;
    *dloss = *dparam = 0;
    tg_get(st, "loss", &el);
    for (t = 0; t < c->steps; t++) {
        double want = other ? other->loss[t] : el.data[t], d = fabs((double)r->loss[t] - want) / fabs(want);
        if (!(d <= *dloss)) *dloss = d; /* NaN counts as worst */
    }
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        double *w, nse;
        nncl_safetensors_get(st, i, &e);
        if (strncmp(e.name, "final.", 6)) continue;
        w = (double *)malloc(e.numel * sizeof(double));
        for (k = 0; w && k < e.numel; k++) w[k] = other ? other->params[off + k] : e.data[k];
        nse = w ? th_nse(r->params + off, w, e.numel) : INFINITY;
        if (!(nse <= *dparam)) {
            *dparam = nse;
            snprintf(worst, wlen, "%s", e.name + 6);
        }
        free(w);
        off += e.numel;
    }
}

static int tg_check(const char *name, const nncl_safetensors *st, const tg_cfg *c, const tg_run *r,
                    const tg_run *other, double loss_tol, double param_tol) {
    double dl, dp;
    char worst[128] = "";
    tg_diff(st, c, r, other, &dl, &dp, worst, sizeof worst);
    if (!(dl <= loss_tol) || !(dp <= param_tol)) {
        th_fail(name, "loss relative difference %.3g (allowed %.3g), weights' normalised squared error %.3g in %s "
                "(allowed %.3g); last loss %.7g", dl, loss_tol, dp, worst, param_tol, (double)r->loss[c->steps - 1]);
        return 1;
    }
    th_pass("%s (loss within %.2g relative at every step, weights' normalised squared error %.2g, last loss %.5f)",
            name, dl, dp, (double)r->loss[c->steps - 1]);
    return 0;
}

static int tg_alloc(tg_run *r, const tg_cfg *c, size_t n_params) {
    r->loss = (float *)calloc((size_t)c->steps, sizeof(float));
    r->params = (float *)calloc(n_params, sizeof(float));
    r->n_params = n_params;
    return r->loss && r->params;
}

int main(void) {
    /* loss and weight tolerances per storage: fp32 (against PyTorch's
     * float64), fp16 and bf16, whose activations round at 2^-11 and 2^-8 */
    static const double loss_tol[3] = {1e-4, 2e-3, 1e-2}, param_tol[3] = {1e-8, 5e-3, 1e-2};
    static const char *const prec_name[3] = {"fp32", "fp16", "bf16"};
    static const int both[2] = {0, 1};
    nncl_context *ctx = th_context();
    nncl_safetensors *st = NULL;
    nncl_safetensors_entry e;
    tg_cfg c;
    tg_run one, two;
    size_t n_params = 0;
    char name[200];
    int d, p, i;
    if (!ctx) return th_exit_code();
    TH_OK("torch gpt file", NULL, nncl_safetensors_load(TG_FILE, &st));
    TH_CHECK("torch gpt file", tg_read_cfg(st, &c));
    for (i = 0; i < nncl_safetensors_count(st); i++)
        if (nncl_safetensors_get(st, i, &e) == NNCL_OK && !strncmp(e.name, "final.", 6)) n_params += e.numel;
    TH_CHECK("torch gpt file", tg_alloc(&one, &c, n_params) && tg_alloc(&two, &c, n_params));
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "GPT %d layers, %d AdamW steps as in PyTorch (%s) on %s", c.L, c.steps,
                     prec_name[p], th_device_label(ctx, d));
            if (!tg_train(name, ctx, st, &c, &d, 1, p, &one)) tg_check(name, st, &c, &one, NULL, loss_tol[p], param_tol[p]);
        }
    snprintf(name, sizeof name, "GPT data-parallel on two devices (2 + 2 samples) equal to one");
    if (nncl_device_count(ctx) < 2) {
        th_skip(name, "needs two devices (POCL_DEVICES=\"pthread pthread\" or RUSTICL_ENABLE=llvmpipe)");
    } else {
        d = 0;
        if (!tg_train(name, ctx, st, &c, &d, 1, 0, &one) && !tg_train(name, ctx, st, &c, both, 2, 0, &two) &&
            !tg_check(name, st, &c, &two, &one, 1e-5, 1e-9)) {
            snprintf(name, sizeof name, "GPT data-parallel on two devices as in PyTorch (fp32)");
            tg_check(name, st, &c, &two, NULL, loss_tol[0], param_tol[0]);
        }
        /* attention dropout 0.1: another trajectory, the same on one and two devices */
        snprintf(name, sizeof name, "GPT with attention dropout 0.1 on two devices equal to one");
        c.dropout = 0.1f;
        if (!tg_train(name, ctx, st, &c, &d, 1, 0, &one) && !tg_train(name, ctx, st, &c, both, 2, 0, &two)) {
            double dl, dp;
            char worst[128];
            tg_diff(st, &c, &one, NULL, &dl, &dp, worst, sizeof worst);
            if (!(dl > 1e-3)) th_fail(name, "the losses differ from PyTorch's without dropout by only %.3g", dl);
            else tg_check(name, st, &c, &two, &one, 1e-5, 1e-9);
        }
        c.dropout = 0;
    }
    free(one.loss); free(one.params); free(two.loss); free(two.params);
    nncl_safetensors_free(st);
    nncl_free(ctx);
    return th_exit_code();
}
