/* test_torch_ops.c - every graph op against PyTorch through the public API,
 * the OP_TORCH rows of tests/op_cases.def: tests/data/torch_ops.safetensors
 * (made from the same rows by make_torch_ops.py) holds, per case, a batch, the parameters, PyTorch's output in evaluation mode, its
 * training-mode loss and the parameters after one SGD step. Each case
 * builds h = x + p, z = OP(h) and mse(z, t) (or OP itself for a loss) with
 * nncl's builders, sets the parameters by name, predicts, steps, and
 * compares on every device. The op tests check the arithmetic against
 * double references; this checks that the semantics are PyTorch's: padding,
 * default constants, reductions, running-statistic momentum, bias shapes. */
#include "op_torch_rows.h"
#include <stdlib.h>

#define TTO_MAX 4096 /* largest tensor of the file, floats */

/* An input of CASE.what's per-sample shape, with a parameter pWHAT (a vector
 * over its last dimension) added when the file has one. In half storage
 * pWHAT is added on the host into fold instead: the op sees the same
 * values, and pWHAT's update is not checked (add_vector and add_positions
 * check a parameter trained through add). *data: what to feed. */
static nncl_node *tto_input(nncl_graph *g, const nncl_safetensors *st, const tto_case *c, const char *what,
                            const char *pname, float *fold, nncl_node **in, const float **data) {
    nncl_safetensors_entry e, pe;
    char key[64];
    int ndim, shape[8];
    size_t i;
    *in = NULL;
    if (!tto_get(st, c->name, what, &e, &ndim, shape)) return NULL;
    *in = nncl_input(g, what, ndim, shape);
    *data = e.data;
    snprintf(key, sizeof key, "param.%s", pname);
    if (!tto_get(st, c->name, key, &pe, NULL, NULL)) return *in;
    if (!fold) return nncl_op_add(g, *in, nncl_param(g, pname, 1, &shape[ndim - 1], NNCL_INIT_ZEROS, 0));
    for (i = 0; i < e.numel && i < TTO_MAX; i++) fold[i] = e.data[i] + pe.data[i % pe.numel];
    *data = fold;
    return *in;
}

/* Whether CASE.KIND.NAME (KIND "param" or "after") names a parameter of the
 * graph: the folded p and p2 are none in half storage. */
static int tto_is_param(const char *rest, int prec) {
    return !prec || (strcmp(rest, "p") && strcmp(rest, "p2"));
}

/* Tolerances of the normalised squared error: float32 arithmetic against
 * PyTorch's float64 (relative error near 1e-6), and half storage, whose
 * rounding of every stored activation (2^-11 relative in fp16, 2^-8 in
 * bf16) adds up over an op's few stored values. */
static const double tto_tol[3] = {1e-10, 1e-5, 1e-3};
static const char *const tto_precision[3] = {"fp32", "fp16", "bf16"};

static int tto_compare(const char *name, const char *what, const float *got, const float *want, size_t n,
                       double tol, double *worst) {
    double w[TTO_MAX], e;
    char full[420];
    size_t i;
    for (i = 0; i < n; i++) w[i] = want[i];
    snprintf(full, sizeof full, "%s: %s", name, what);
    if ((e = th_nse(got, w, n)) > *worst) *worst = e;
    return th_close(full, got, w, n, tol);
}

static int tto_is_depthwise(const tto_case *c) { return !strncmp(c->name, "conv2d_depthwise", 16); }
/* A batch norm case; fused 1: one with its activation (and residual) fused in. */
static int tto_is_bn(const tto_case *c, int fused) {
    return fused ? !strncmp(c->name, "batchnorm_act", 13) : !strncmp(c->name, "batchnorm", 9);
}

static int tto_run(nncl_context *ctx, int d, const nncl_safetensors *st, const tto_case *c, float lr, int prec) {
    char name[200], key[200];
    nncl_graph *g = nncl_graph_create(ctx, 1);
    nncl_node *x, *x2 = NULL, *t = NULL, *h, *h2, *z, *loss;
    nncl_safetensors_entry ex, et, eo, el, e;
    const float *xdata = NULL, *x2data = NULL;
    static float fold[2][TTO_MAX];
    nncl_train_config cfg = nncl_train_default();
    nncl_trainer *tr = NULL;
    nncl_feed f[3];
    nncl_step_info info;
    float got[TTO_MAX];
    int i, nf = 0, ndim, shape[8], batch, ok = 1;
    double tol = tto_tol[prec], worst = 0;
    nncl_status st_create;
    const char *bn = getenv("NNCL_BN"), *fuse = getenv("NNCL_BN_FUSE"), *dwk = getenv("NNCL_CONV_DEPTHWISE");
    int is_bn = tto_is_bn(c, 0);
    snprintf(name, sizeof name, "%s as in PyTorch (%s%s%s%s) on %s", c->name, tto_precision[prec],
             is_bn && bn && !strcmp(bn, "groups") ? ", per-channel groups" : "",
             tto_is_bn(c, 1) && fuse && !strcmp(fuse, "0") ? ", separate passes" : "",
             tto_is_depthwise(c) && dwk && !strcmp(dwk, "0") ? ", general direct kernels" : "",
             th_device_label(ctx, d));
    TH_CHECK(name, g && tto_get(st, c->name, "x", &ex, NULL, NULL) && tto_get(st, c->name, "t", &et, &ndim, shape));
    batch = (int)ex.shape[0];
    h = tto_input(g, st, c, "x", "p", prec ? fold[0] : NULL, &x, &xdata);
    h2 = tto_input(g, st, c, "x2", "p2", prec ? fold[1] : NULL, &x2, &x2data);
    if (c->loss != 1 || !x2) t = nncl_input(g, "t", c->loss == 2 ? 0 : ndim, shape);
    z = c->build(g, h, h2, t);
    loss = c->loss ? z : nncl_mse(g, z, t);
    TH_CHECK(name, loss != NULL);
    cfg.max_batch = batch;
    cfg.optim = nncl_optim_default(NNCL_OPT_SGD);
    cfg.optim.lr = lr;
    cfg.optim.weight_decay = c->wd;
    for (i = 0; c->wd != 0 && i < nncl_safetensors_count(st); i++) {
        size_t len = strlen(c->name);
        nncl_node *pn;
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (strncmp(e.name, c->name, len) || strncmp(e.name + len, ".param.", 7)) continue;
        if ((pn = nncl_graph_find(g, e.name + len + 7)) && nncl_node_shape(pn, shape) < 2)
            TH_OK(name, ctx, nncl_param_decay(g, pn, 0));
    }
    cfg.devices = &d;
    cfg.n_devices = 1;
    cfg.precision = (nncl_precision)prec;
    cfg.loss_scaling = -1; /* one step: no scale to find */
    st_create = nncl_trainer_create(ctx, g, loss, &cfg, &tr);
    if (st_create == NNCL_ERR_UNSUPPORTED && prec) { /* a parameter fed straight into add or mul: refused, named */
        TH_CHECK(name, strstr(nncl_last_error(ctx), "trains parameter \"v\" directly") != NULL);
        nncl_graph_free(g);
        th_pass("%s: refused (%.120s)", name, nncl_last_error(ctx));
        return 0;
    }
    TH_OK(name, ctx, st_create);
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        size_t len = strlen(c->name);
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK);
        if (strncmp(e.name, c->name, len) || strncmp(e.name + len, ".param.", 7) || !tto_is_param(e.name + len + 7, prec))
            continue;
        TH_OK(name, ctx, nncl_trainer_param_set(tr, e.name + len + 7, e.data, e.numel));
    }
    f[nf].node = x; f[nf++].data = xdata;
    if (x2) { f[nf].node = x2; f[nf++].data = x2data; }
    if (!c->loss) {
        TH_CHECK(name, tto_get(st, c->name, "out", &eo, NULL, NULL) && eo.numel <= TTO_MAX);
        th_poison(got, eo.numel);
        TH_OK(name, ctx, nncl_trainer_predict(tr, f, nf, batch, z, got));
        ok &= tto_compare(name, "evaluation output", got, eo.data, eo.numel, tol, &worst);
    }
    if (t) { f[nf].node = t; f[nf++].data = et.data; }
    TH_OK(name, ctx, nncl_trainer_step(tr, f, nf, batch, &info));
    TH_CHECK(name, tto_get(st, c->name, "loss", &el, NULL, NULL));
    ok &= tto_compare(name, "training loss", &info.loss, el.data, 1, tol, &worst);
    for (i = 0; i < nncl_safetensors_count(st); i++) {
        size_t len = strlen(c->name);
        TH_CHECK(name, nncl_safetensors_get(st, i, &e) == NNCL_OK && e.numel <= TTO_MAX);
        if (strncmp(e.name, c->name, len) || strncmp(e.name + len, ".after.", 7) || !tto_is_param(e.name + len + 7, prec))
            continue;
        th_poison(got, e.numel);
        TH_OK(name, ctx, nncl_trainer_param_get(tr, e.name + len + 7, got, e.numel));
        snprintf(key, sizeof key, "%s after one SGD step", e.name + len + 7);
        ok &= tto_compare(name, key, got, e.data, e.numel, tol, &worst);
    }
    nncl_trainer_free(tr);
    nncl_graph_free(g);
    if (ok) th_pass("%s (worst normalised squared error %.2g)", name, worst);
    return !ok;
}

int main(void) {
    nncl_context *ctx = th_context();
    nncl_safetensors *st = NULL;
    const char *lr;
    int d, i, p, n = (int)(sizeof tto_cases / sizeof tto_cases[0]), used = 0;
    if (!ctx) return th_exit_code();
    TH_OK("torch ops file", NULL, nncl_safetensors_load(TTO_FILE, &st));
    TH_CHECK("torch ops file", (lr = nncl_safetensors_meta(st, "lr")) != NULL);
    for (i = 0; i < nncl_safetensors_count(st); i++) { /* every case of the file has a row here */
        nncl_safetensors_entry e;
        char c[128];
        int k, known = 0;
        nncl_safetensors_get(st, i, &e);
        if (!strstr(e.name, ".x") || strcmp(strstr(e.name, ".x"), ".x")) continue;
        snprintf(c, sizeof c, "%.*s", (int)(strstr(e.name, ".x") - e.name), e.name);
        for (k = 0; k < n; k++) known |= !strcmp(tto_cases[k].name, c);
        if (!known) th_fail("torch ops file", "case %s has no row", c);
        used++;
    }
    TH_CHECK("torch ops file", used == n);
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (p = 0; p < 3; p++)
            for (i = 0; i < n; i++) tto_run(ctx, d, st, &tto_cases[i], (float)atof(lr), p);
    /* batch norm's other path (NNCL_BN, src/ops/op_batchnorm.c) */
    setenv("NNCL_BN", "groups", 1);
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (p = 0; p < 3; p++)
            for (i = 0; i < n; i++)
                if (tto_is_bn(&tto_cases[i], 0))
                    tto_run(ctx, d, st, &tto_cases[i], (float)atof(lr), p);
    unsetenv("NNCL_BN");
    /* depthwise layers on the general direct kernels (NNCL_CONV_DEPTHWISE, src/ops/conv_dw.c) */
    setenv("NNCL_CONV_DEPTHWISE", "0", 1);
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (p = 0; p < 3; p++)
            for (i = 0; i < n; i++)
                if (tto_is_depthwise(&tto_cases[i])) tto_run(ctx, d, st, &tto_cases[i], (float)atof(lr), p);
    unsetenv("NNCL_CONV_DEPTHWISE");
    /* batch norm's activation and residual in passes of their own (NNCL_BN_FUSE=0) */
    setenv("NNCL_BN_FUSE", "0", 1);
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (p = 0; p < 3; p++)
            for (i = 0; i < n; i++)
                if (tto_is_bn(&tto_cases[i], 1))
                    tto_run(ctx, d, st, &tto_cases[i], (float)atof(lr), p);
    unsetenv("NNCL_BN_FUSE");
    nncl_safetensors_free(st);
    nncl_free(ctx);
    return th_exit_code();
}
