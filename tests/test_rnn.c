/* test_rnn.c - nncl_lstm and nncl_gru against PyTorch's nn.LSTM / nn.GRU
 * (tests/data/torch_rnn.safetensors, made by make_torch_rnn.py): two layers
 * over 7 steps, h = x + p (p [T, F] shared by the samples, so its gradient
 * is the input gradient summed over the batch), seq = RNN(h), loss
 * mse(seq, t). On every device and in each storage precision: the output of
 * every step and the last, the loss, and the gradient of p and of every
 * parameter (read back from one SGD step); PyTorch's state dict loads by
 * name and gives its outputs; a model file rebuilds the layers; the
 * summary shows them as one row; two devices give one device's step.
 * Each on both paths: the fused recurrence (rnn_scan, the default) and the
 * layers built from graph ops (NNCL_RNN=graph); the fused graph has one
 * rnn_scan node per layer, the other none. */
#include "harness.h"
#include "graph/graph.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TR_FILE "tests/data/torch_rnn.safetensors"
#define TR_STATE "tests/data/torch_rnn_state.safetensors"
#define TR_MAX 1024
/* SGD's lr: large, so that (before - after) / lr keeps the gradient's bits */
#define TR_LR 1024.0f

static const char *const tr_precision[3] = {"fp32", "fp16", "bf16"};
/* normalised squared error: fp32 against PyTorch's float64, and half
 * storage, whose rounding of every stored activation adds up over 14 steps */
static const double tr_tol[3] = {1e-10, 1e-4, 3e-3};
/* the path under test: "fused" or "graph" (NNCL_RNN) */
static const char *tr_path = "fused";

typedef struct tr_model {
    nncl_graph *g;
    nncl_node *x, *t, *seq, *last, *loss;
} tr_model;

static const nncl_safetensors_entry *tr_get(const nncl_safetensors *st, const char *kind, const char *what,
                                            nncl_safetensors_entry *e) {
    char key[320];
    int i;
    snprintf(key, sizeof key, "%s.%s", kind, what);
    if ((i = nncl_safetensors_find(st, key)) < 0 || nncl_safetensors_get(st, i, e) != NNCL_OK) return NULL;
    return e;
}

/* with_p: h = x + p, else h = x */
static int tr_build(nncl_context *ctx, const nncl_safetensors *st, const char *kind, int with_p, tr_model *m) {
    nncl_safetensors_entry ex, et;
    int xs[2], ts[2], hidden, ok;
    nncl_node *h;
    if (!tr_get(st, kind, "x", &ex) || !tr_get(st, kind, "t", &et)) return 0;
    xs[0] = (int)ex.shape[1]; xs[1] = (int)ex.shape[2];
    ts[0] = (int)et.shape[1]; ts[1] = hidden = (int)et.shape[2];
    m->g = nncl_graph_create(ctx, 3);
    m->x = nncl_input(m->g, "x", 2, xs);
    m->t = nncl_input(m->g, "t", 2, ts);
    h = with_p ? nncl_op_add(m->g, m->x, nncl_param(m->g, "p", 2, xs, NNCL_INIT_ZEROS, 0)) : m->x;
    m->seq = strcmp(kind, "lstm") ? nncl_gru(m->g, h, hidden, 2, "rnn") : nncl_lstm(m->g, h, hidden, 2, "rnn");
    m->last = nncl_rnn_last(m->g, m->seq);
    m->loss = nncl_mse(m->g, m->seq, m->t);
    ok = m->last && m->loss;
    if (ok) { /* the path is the one asked for: one fused node per layer, or none */
        int i, scans = 0;
        for (i = 0; i < m->g->n_nodes; i++) scans += m->g->nodes[i]->op == NNCL_OP_RNN_SCAN;
        ok = scans == (strcmp(tr_path, "fused") ? 0 : 2);
    }
    if (!ok) nncl_graph_free(m->g);
    return ok;
}

static nncl_trainer *tr_trainer(nncl_context *ctx, tr_model *m, const int *devs, int nd, int prec, int batch,
                                float lr) {
    nncl_train_config cfg = nncl_train_default();
    nncl_trainer *tr = NULL;
    cfg.max_batch = batch;
    cfg.optim = nncl_optim_default(NNCL_OPT_SGD);
    cfg.optim.lr = lr;
    cfg.devices = devs;
    cfg.n_devices = nd;
    cfg.precision = (nncl_precision)prec;
    cfg.loss_scaling = -1;
    return nncl_trainer_create(ctx, m->g, m->loss, &cfg, &tr) == NNCL_OK ? tr : NULL;
}

/* Every KIND.param.NAME of the file set by name. */
static int tr_set_params(nncl_trainer *tr, const nncl_safetensors *st, const char *kind) {
    char pre[64];
    int i;
    snprintf(pre, sizeof pre, "%s.param.", kind);
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        nncl_safetensors_entry e;
        if (nncl_safetensors_get(st, i, &e) != NNCL_OK) return 0;
        if (strncmp(e.name, pre, strlen(pre))) continue;
        if (nncl_trainer_param_set(tr, e.name + strlen(pre), e.data, e.numel) != NNCL_OK) return 0;
    }
    return 1;
}

static int tr_compare(const char *name, const char *what, const float *got, const float *want, size_t n, double tol,
                      double *worst) {
    double w[TR_MAX], e;
    char full[300];
    size_t i;
    for (i = 0; i < n; i++) w[i] = want[i];
    snprintf(full, sizeof full, "%s: %s", name, what);
    if ((e = th_nse(got, w, n)) > *worst) *worst = e;
    return th_close(full, got, w, n, tol);
}

/* Outputs, loss and every gradient against PyTorch on device d. */
static int tr_torch(nncl_context *ctx, int d, const nncl_safetensors *st, const char *kind, int prec) {
    char name[200], pre[64];
    nncl_safetensors_entry ex, et, e, eg;
    tr_model m;
    nncl_trainer *tr;
    nncl_feed f[2];
    nncl_step_info info;
    float got[TR_MAX], before[TR_MAX];
    double tol = tr_tol[prec], worst = 0;
    int i, batch, ok = 1;
    snprintf(name, sizeof name, "%s (%s) as in PyTorch (%s) on %s", kind, tr_path, tr_precision[prec],
             th_device_label(ctx, d));
    TH_CHECK(name, tr_build(ctx, st, kind, 1, &m));
    TH_CHECK(name, tr_get(st, kind, "x", &ex) && tr_get(st, kind, "t", &et));
    batch = (int)ex.shape[0];
    TH_CHECK(name, (tr = tr_trainer(ctx, &m, &d, 1, prec, batch, TR_LR)) != NULL);
    TH_CHECK(name, tr_set_params(tr, st, kind));
    f[0].node = m.x; f[0].data = ex.data;
    f[1].node = m.t; f[1].data = et.data;
    TH_CHECK(name, tr_get(st, kind, "out", &e) && e.numel <= TR_MAX);
    th_poison(got, e.numel);
    TH_OK(name, ctx, nncl_trainer_predict(tr, f, 1, batch, m.seq, got));
    ok &= tr_compare(name, "output of every step", got, e.data, e.numel, tol, &worst);
    TH_CHECK(name, tr_get(st, kind, "last", &e) && e.numel <= TR_MAX);
    th_poison(got, e.numel);
    TH_OK(name, ctx, nncl_trainer_predict(tr, f, 1, batch, m.last, got));
    ok &= tr_compare(name, "output of the last step", got, e.data, e.numel, tol, &worst);
    TH_OK(name, ctx, nncl_trainer_step(tr, f, 2, batch, &info));
    TH_CHECK(name, tr_get(st, kind, "loss", &e));
    ok &= tr_compare(name, "loss", &info.loss, e.data, 1, tol, &worst);
    snprintf(pre, sizeof pre, "%s.param.", kind);
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        char what[160];
        size_t k;
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (strncmp(e.name, pre, strlen(pre))) continue;
        snprintf(what, sizeof what, "grad.%s", e.name + strlen(pre));
        TH_CHECK(name, tr_get(st, kind, what, &eg) && eg.numel == e.numel && e.numel <= TR_MAX);
        th_poison(got, e.numel);
        TH_OK(name, ctx, nncl_trainer_param_get(tr, e.name + strlen(pre), got, e.numel));
        for (k = 0; k < e.numel; k++) before[k] = (e.data[k] - got[k]) / TR_LR;
        snprintf(what, sizeof what, "gradient of %s", e.name + strlen(pre));
        ok &= tr_compare(name, what, before, eg.data, e.numel, tol, &worst);
    }
    nncl_trainer_free(tr);
    nncl_graph_free(m.g);
    if (ok) th_pass("%s (worst normalised squared error %.2g)", name, worst);
    return !ok;
}

/* PyTorch's state dict file loads into h = x by PyTorch's names; then the
 * model file nncl writes rebuilds the graph and predicts the same. */
static int tr_state(nncl_context *ctx, const nncl_safetensors *st, const char *kind) {
    char name[200], path[96];
    nncl_safetensors *sd = NULL;
    nncl_safetensors_entry ex, e;
    tr_model m;
    nncl_trainer *tr;
    nncl_model *mf = NULL;
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_graph *g2 = NULL;
    nncl_feed f;
    float got[TR_MAX];
    double worst = 0;
    int d = 0, batch, ok = 1, i;
    snprintf(name, sizeof name, "%s (%s): PyTorch's state dict loads, a model file rebuilds it, one summary row", kind,
             tr_path);
    TH_CHECK(name, tr_build(ctx, st, kind, 0, &m));
    TH_CHECK(name, tr_get(st, kind, "x", &ex) && tr_get(st, kind, "out0", &e) && e.numel <= TR_MAX);
    batch = (int)ex.shape[0];
    TH_CHECK(name, (tr = tr_trainer(ctx, &m, &d, 1, 0, batch, TR_LR)) != NULL);
    /* the file's KIND.NAME (a member KIND of a PyTorch model) is this graph's rnn.NAME */
    TH_OK(name, NULL, nncl_safetensors_load(TR_STATE, &sd));
    for (i = 0; i < nncl_safetensors_count(sd); i++) {
        nncl_safetensors_entry s;
        char pn[128];
        TH_CHECK(name, nncl_safetensors_get(sd, i, &s) == NNCL_OK);
        if (strncmp(s.name, kind, strlen(kind)) || s.name[strlen(kind)] != '.') continue;
        snprintf(pn, sizeof pn, "rnn%s", s.name + strlen(kind));
        TH_OK(name, ctx, nncl_trainer_param_set(tr, pn, s.data, s.numel));
    }
    /* nncl's own file of those parameters loads back by name too */
    snprintf(path, sizeof path, "/tmp/nncl-rnn-%s-%ld.model", kind, (long)getpid());
    meta.output = m.last;
    TH_OK(name, ctx, nncl_trainer_save_model(tr, path, &meta));
    { /* the summary gives the layers one row */
        FILE *sf = tmpfile();
        char row[200];
        int rows = 0;
        TH_CHECK(name, sf != NULL);
        TH_OK(name, ctx, nncl_trainer_summary(tr, sf));
        rewind(sf);
        while (fgets(row, sizeof row, sf)) rows += !strncmp(row, "rnn ", 4) && strstr(row, " ops)") && strstr(row, kind);
        fclose(sf);
        TH_CHECK(name, rows == 1);
    }
    f.node = m.x; f.data = ex.data;
    th_poison(got, e.numel);
    TH_OK(name, ctx, nncl_trainer_predict(tr, &f, 1, batch, m.seq, got));
    ok &= tr_compare(name, "output", got, e.data, e.numel, tr_tol[0], &worst);
    TH_OK(name, ctx, nncl_model_load(ctx, path, batch, &mf));
    g2 = nncl_model_graph(mf);
    TH_CHECK(name, nncl_graph_find(g2, m.seq->name) && nncl_graph_find(g2, "x"));
    f.node = nncl_graph_find(g2, "x");
    th_poison(got, e.numel);
    TH_OK(name, ctx, nncl_trainer_predict(nncl_model_trainer(mf), &f, 1, batch, nncl_graph_find(g2, m.seq->name), got));
    ok &= tr_compare(name, "output from the model file", got, e.data, e.numel, tr_tol[0], &worst);
    nncl_model_free(mf);
    remove(path);
    nncl_safetensors_free(sd);
    nncl_trainer_free(tr);
    nncl_graph_free(m.g);
    if (ok) th_pass("%s (worst normalised squared error %.2g)", name, worst);
    return !ok;
}

/* Two devices, the batch split, take one device's step. */
static int tr_two_devices(nncl_context *ctx, const nncl_safetensors *st, const char *kind) {
    char name[120];
    nncl_safetensors_entry ex, et;
    tr_model m1, m2;
    nncl_trainer *t1, *t2;
    nncl_feed f[2];
    nncl_step_info info;
    float a[TR_MAX], b[TR_MAX];
    int d0 = 0, devs[2] = {0, 1}, batch, s;
    double num = 0, den = 0;
    size_t k;
    snprintf(name, sizeof name, "%s (%s): two devices equal one", kind, tr_path);
    if (th_devices_lack(ctx, 2, name)) return 0;
    TH_CHECK(name, tr_build(ctx, st, kind, 1, &m1) && tr_build(ctx, st, kind, 1, &m2));
    TH_CHECK(name, tr_get(st, kind, "x", &ex) && tr_get(st, kind, "t", &et));
    batch = (int)ex.shape[0];
    TH_CHECK(name, (t1 = tr_trainer(ctx, &m1, &d0, 1, 0, batch, 0.1f)) &&
                       (t2 = tr_trainer(ctx, &m2, devs, 2, 0, batch, 0.1f)));
    TH_CHECK(name, tr_set_params(t1, st, kind) && tr_set_params(t2, st, kind));
    for (s = 0; s < 3; s++) {
        f[0].node = m1.x; f[0].data = ex.data; f[1].node = m1.t; f[1].data = et.data;
        TH_OK(name, ctx, nncl_trainer_step(t1, f, 2, batch, &info));
        f[0].node = m2.x; f[1].node = m2.t;
        TH_OK(name, ctx, nncl_trainer_step(t2, f, 2, batch, &info));
    }
    f[0].node = m1.x;
    TH_OK(name, ctx, nncl_trainer_predict(t1, f, 1, batch, m1.seq, a));
    f[0].node = m2.x;
    TH_OK(name, ctx, nncl_trainer_predict(t2, f, 1, batch, m2.seq, b));
    for (k = 0; k < m1.seq->sample_numel * (size_t)batch; k++) {
        num += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
        den += (double)a[k] * a[k];
    }
    nncl_trainer_free(t1); nncl_trainer_free(t2);
    nncl_graph_free(m1.g); nncl_graph_free(m2.g);
    if (!(num / den < 1e-10)) {
        th_fail(name, "normalised squared difference %.3g after 3 steps", num / den);
        return 1;
    }
    th_pass("%s (normalised squared difference %.2g after 3 steps)", name, num / den);
    return 0;
}

/* Wrong inputs are refused when the graph is built, and add nothing. */
static int tr_errors(nncl_context *ctx) {
    const char *name = "rnn builders refuse bad arguments";
    int s2[2] = {7, 5}, s1[1] = {5}, n0, used;
    nncl_graph *g = nncl_graph_create(ctx, 1);
    nncl_node *x = nncl_input(g, "x", 2, s2), *v = nncl_input(g, "v", 1, s1);
    TH_CHECK(name, g && x && v);
    n0 = g->n_nodes;
    TH_CHECK(name, !nncl_lstm(g, v, 4, 1, "r") && strstr(nncl_last_error(ctx), "is not [B, T, F]"));
    TH_CHECK(name, !nncl_gru(g, x, 0, 1, "r") && strstr(nncl_last_error(ctx), "hidden > 0"));
    TH_CHECK(name, !nncl_lstm(g, x, 4, 0, "r") && !nncl_lstm(g, x, 4, 1, "") && !nncl_lstm(g, x, 4, 1, "a b"));
    TH_CHECK(name, !nncl_rnn_last(g, v) && strstr(nncl_last_error(ctx), "is not [B, T, H]"));
    TH_CHECK(name, g->n_nodes == n0);
    /* a second layer set under the same name: its parameters clash, the graph is left as it was */
    TH_CHECK(name, nncl_lstm(g, x, 4, 2, "r") != NULL);
    n0 = g->n_nodes;
    TH_CHECK(name, !nncl_gru(g, x, 4, 2, "r") && g->n_nodes == n0);
    /* a clash in the second layer: the whole first layer is dropped again, x's consumers as they were */
    TH_CHECK(name, nncl_param(g, "q.weight_hh_l1", 1, s1, NNCL_INIT_ZEROS, 0) != NULL);
    n0 = g->n_nodes;
    used = x->n_consumers;
    TH_CHECK(name, !nncl_lstm(g, x, 4, 2, "q") && strstr(nncl_last_error(ctx), "q.weight_hh_l1"));
    TH_CHECK(name, g->n_nodes == n0 && x->n_consumers == used && nncl_graph_find(g, "q.weight_ih_l0") == NULL);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    nncl_safetensors *st = NULL;
    static const char *const kinds[2] = {"lstm", "gru"}, *const paths[2] = {"fused", "graph"};
    int d, p, k, q;
    if (!ctx) return th_exit_code();
    TH_OK("torch rnn file", NULL, nncl_safetensors_load(TR_FILE, &st));
    tr_errors(ctx);
    for (q = 0; q < 2; q++) {
        tr_path = paths[q];
        setenv("NNCL_RNN", tr_path, 1);
        for (k = 0; k < 2; k++) {
            for (d = 0; d < nncl_device_count(ctx); d++)
                for (p = 0; p < 3; p++) tr_torch(ctx, d, st, kinds[k], p);
            tr_state(ctx, st, kinds[k]);
            tr_two_devices(ctx, st, kinds[k]);
        }
    }
    nncl_safetensors_free(st);
    nncl_free(ctx);
    return th_exit_code();
}
