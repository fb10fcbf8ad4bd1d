/* test_norm.c - what the op table (test_op_table.c) cannot see of batch
 * norm, layer norm, dropout, embedding, reshape/flatten and concat: running
 * statistics, evaluation mode, dropout masks (statistics, bit equality with
 * the host, shards), invalid embedding indices, initial values and shape
 * errors. */
#include "harness.h"
#include "train/plan.h"
#include "train/ref.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* mse(out, t) against a random target t of out's per-sample shape: a scalar
 * loss whose gradient reaches every element. */
static nncl_node *nt_mse_loss(nncl_graph *g, nncl_node *out, nncl_node **t) {
    int shape[NNCL_MAX_DIMS], nd;
    if (!out) return NULL;
    nd = nncl_node_shape(out, shape);
    *t = nncl_input(g, "target", nd, shape);
    return nncl_mse(g, out, *t);
}

/* ------------------------------------------------------------- plan-level checks */

/* A plan on device d with the graph's initial parameters and running
 * statistics, the inputs fed and the step seed of the reference. */
static int nt_plan(const char *name, nncl_context *ctx, int d, nncl_graph *g, nncl_node *loss, const nncl_feed *f,
                   int nf, int batch, nncl__plan **out) {
    nncl__plan *p = NULL;
    float *pbuf, *sbuf;
    int i;
    *out = NULL;
    TH_OK(name, ctx, nncl__plan_create(ctx, g, loss, d, batch, &p));
    pbuf = (float *)malloc((g->n_params + 1) * sizeof(float));
    sbuf = (float *)malloc((g->n_state + 1) * sizeof(float));
    nncl__graph_init_values(g, pbuf, sbuf);
    if (g->n_params)
        clEnqueueWriteBuffer(p->ex.dev->queue, p->ex.params, CL_TRUE, 0, g->n_params * 4, pbuf, 0, NULL, NULL);
    if (g->n_state) clEnqueueWriteBuffer(p->ex.dev->queue, p->ex.state, CL_TRUE, 0, g->n_state * 4, sbuf, 0, NULL, NULL);
    free(pbuf);
    free(sbuf);
    for (i = 0; i < nf; i++)
        if (nncl__plan_feed(p, f[i].node, f[i].data, batch) != NNCL_OK) {
            th_fail(name, "feed: %s", nncl_last_error(ctx));
            nncl__plan_free(p);
            return 1;
        }
    p->ex.step_seed = 12345;
    *out = p;
    return 0;
}

static int nt_read(nncl__plan *p, nncl__view v, float *dst, size_t count) {
    return clEnqueueReadBuffer(p->ex.dev->queue, v.mem, CL_TRUE, v.off * 4, count * 4, dst, 0, NULL, NULL) != CL_SUCCESS;
}

/* Running statistics after two training steps equal the reference's and a
 * hand computation (momentum towards the batch mean and the UNBIASED
 * variance); evaluation then normalises with them, forward and backward. */
static int check_bn_running(nncl_context *ctx, int d, int ndim, const int *shape, int batch) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 11);
    nncl_node *x = nncl_input(g, "x", ndim, shape), *h, *t = NULL, *loss, *w;
    nncl__plan *p = NULL;
    nncl__ref *r = NULL;
    nncl_feed f[2];
    size_t nx, nt, k, j;
    float *xd, *td, *got;
    int C = shape[0], inner = 1, bad = 0, i;
    double mean0 = 0, var0 = 0, cnt, want;
    const char *path = getenv("NNCL_BN");
    snprintf(name, sizeof name, "batchnorm running statistics and eval, %d-D input, batch %d, %s, on %s", ndim + 1,
             batch, path && !strcmp(path, "groups") ? "per-channel groups" : "streaming", th_device_label(ctx, d));
    for (i = 1; i < ndim; i++) inner *= shape[i];
    x->needs_grad = 1;
    h = nncl_batchnorm(g, x, 0.25f, 1e-5f, "bn");
    loss = nt_mse_loss(g, h, &t);
    TH_CHECK(name, loss != NULL);
    w = nncl_graph_find(g, "bn.weight");
    TH_CHECK(name, w != NULL && nncl_graph_find(g, "bn.bias") != NULL);
    nx = nncl__numel(x, batch);
    nt = nncl__numel(t, batch);
    xd = th_random(nx, -1, 3, 5); /* mean 1, variance 4/3: both far from the start (0, 1) */
    td = th_random(nt, -1, 1, 7);
    got = (float *)malloc((nx + 2 * (size_t)C + 8) * sizeof(float));
    f[0].node = x; f[0].data = xd;
    f[1].node = t; f[1].data = td;
    if (nt_plan(name, ctx, d, g, loss, f, 2, batch, &p)) { bad = 1; goto done; }
    if (nncl__ref_create(g, batch, &r) != NNCL_OK) {
        th_fail(name, "ref: %s", nncl_last_error(ctx));
        bad = 1;
        goto done;
    }
    for (k = 0; k < nx; k++) r->val[x->id][k] = xd[k];
    for (k = 0; k < nt; k++) r->val[t->id][k] = td[k];
    r->r.step_seed = 12345;
    for (i = 0; i < 2 && !bad; i++) {
        nncl__ref_forward(r, 1);
        bad |= nncl__plan_forward(p, batch, 1) != NNCL_OK;
    }
    bad |= clEnqueueReadBuffer(p->ex.dev->queue, p->ex.state, CL_TRUE, 0, g->n_state * 4, got, 0, NULL, NULL) !=
           CL_SUCCESS;
    if (bad) { th_fail(name, "running two training steps: %s", nncl_last_error(ctx)); goto done; }
    if (!th_close(name, got, r->state, g->n_state, 1e-11)) { bad = 1; goto done; }
    /* by hand, channel 0: running = (1-m)^2 start + (1 - (1-m)^2) batch stat for two equal steps */
    cnt = (double)batch * inner;
    for (k = 0; k < (size_t)batch; k++)
        for (j = 0; j < (size_t)inner; j++) mean0 += xd[k * C * inner + j];
    mean0 /= cnt;
    for (k = 0; k < (size_t)batch; k++)
        for (j = 0; j < (size_t)inner; j++) var0 += (xd[k * C * inner + j] - mean0) * (xd[k * C * inner + j] - mean0);
    var0 = cnt > 1 ? var0 / (cnt - 1) : 1; /* one value per channel: running_var is left alone */
    want = (1 - 0.75 * 0.75) * mean0;
    if (fabs(got[0] - want) > 1e-5 * (1 + fabs(want))) {
        th_fail(name, "running_mean[0] %.7g, by hand %.7g", (double)got[0], want);
        bad = 1;
        goto done;
    }
    want = 0.75 * 0.75 + (1 - 0.75 * 0.75) * var0;
    if (fabs(got[C] - want) > 1e-5 * (1 + fabs(want))) {
        th_fail(name, "running_var[0] %.7g, by hand (unbiased variance) %.7g", (double)got[C], want);
        bad = 1;
        goto done;
    }
    /* evaluation: output from the running statistics, then backward */
    nncl__ref_forward(r, 0);
    nncl__ref_backward(r, loss);
    bad |= nncl__plan_forward(p, batch, 0) != NNCL_OK;
    bad |= nt_read(p, nncl__val(&p->ex, h), got, nx); /* before backward reuses its memory */
    if (bad) { th_fail(name, "evaluation step: %s", nncl_last_error(ctx)); goto done; }
    if (!th_close(name, got, r->val[h->id], nx, 1e-11)) { bad = 1; goto done; }
    /* by hand: element 0 (channel 0) from the running statistics of the reference */
    want = (xd[0] - r->state[0]) / sqrt(r->state[C] + 1e-5);
    if (fabs(got[0] - want) > 1e-5 * (1 + fabs(want))) {
        th_fail(name, "eval output[0] %.7g, from the running statistics %.7g", (double)got[0], want);
        bad = 1;
        goto done;
    }
    if (nncl__plan_backward(p) != NNCL_OK) {
        th_fail(name, "evaluation backward: %s", nncl_last_error(ctx));
        bad = 1;
        goto done;
    }
    bad |= nt_read(p, nncl__grd(&p->ex, x), got, nx);
    if (bad || !th_close(name, got, r->grad[x->id], nx, 1e-10)) { bad = 1; goto done; }
    bad |= nt_read(p, nncl__grd(&p->ex, w), got, (size_t)C);
    if (bad || !th_close(name, got, r->grad[w->id], (size_t)C, 1e-10)) { bad = 1; goto done; }
    /* the state is unchanged by evaluation */
    clEnqueueReadBuffer(p->ex.dev->queue, p->ex.state, CL_TRUE, 0, g->n_state * 4, got, 0, NULL, NULL);
    if (!th_close(name, got, r->state, g->n_state, 1e-11)) { bad = 1; goto done; }
    th_pass("%s", name);
done:
    nncl__ref_free(r);
    nncl__plan_free(p);
    free(xd); free(td); free(got);
    nncl_graph_free(g);
    return bad;
}

/* Masks: the device's equals the host reference's bit for bit; about p of
 * the elements are dropped; a shard starting at sample 3 gets the masks
 * those samples get in the whole batch; another step seed gives another
 * mask; evaluation, p = 0 and p = 1 behave as documented. */
static int check_dropout_masks(nncl_context *ctx, int d) {
    char name[160];
    enum { N = 1000, B = 8 };
    const float p = 0.3f;
    const float scale = (float)(1.0 / (1.0 - (double)p));
    nncl_graph *g = nncl_graph_create(ctx, 77);
    int feat = N, bad = 0, differ = 0, same_as_first = 1;
    nncl_node *x = nncl_input(g, "x", 1, &feat), *h, *h0, *h1, *h2;
    nncl__plan *p0 = NULL;
    nncl__ref *r = NULL;
    nncl_feed f[1];
    float *ones = (float *)malloc(B * N * sizeof(float)), *out = (float *)malloc(B * N * sizeof(float));
    float *out2 = (float *)malloc(B * N * sizeof(float)), *rnd = th_random(B * N, -3, 3, 123);
    size_t k, zeros = 0;
    snprintf(name, sizeof name, "dropout masks on %s", th_device_label(ctx, d));
    for (k = 0; k < B * N; k++) ones[k] = 1.0f;
    h = nncl_dropout(g, x, p);
    h0 = nncl_dropout(g, x, 0.0f);
    h1 = nncl_dropout(g, x, 1.0f);
    h2 = nncl_dropout(g, x, p); /* same p, another node: another mask */
    TH_CHECK(name, h && h0 && h1 && h2);
    f[0].node = x; f[0].data = ones;
    if (nt_plan(name, ctx, d, g, NULL, f, 1, B, &p0)) { bad = 1; goto done; }
    TH_CHECK(name, nncl__ref_create(g, B, &r) == NNCL_OK);
    for (k = 0; k < B * N; k++) r->val[x->id][k] = 1.0;
    r->r.step_seed = 12345;
    nncl__ref_forward(r, 1);
    bad |= nncl__plan_forward(p0, B, 1) != NNCL_OK;
    bad |= nncl__plan_read(p0, h, out, B, NULL) != NNCL_OK;
    if (bad) { th_fail(name, "training step: %s", nncl_last_error(ctx)); goto done; }
    for (k = 0; k < B * N; k++) {
        int dz = out[k] == 0.0f, rz = r->val[h->id][k] == 0.0;
        if (dz != rz || (!dz && out[k] != scale)) {
            th_fail(name, "element %zu: device %.9g, reference %.9g (kept ones become %.9g)", k, (double)out[k],
                    r->val[h->id][k], (double)scale);
            bad = 1;
            goto done;
        }
        zeros += dz;
        if (k >= N && (out[k] == 0.0f) != (out[k - N] == 0.0f)) same_as_first = 0;
    }
    if (fabs((double)zeros / (B * N) - p) > 0.02) {
        th_fail(name, "%zu of %d dropped, p = %.2f", zeros, B * N, (double)p);
        bad = 1;
        goto done;
    }
    TH_CHECK(name, !same_as_first); /* samples differ */
    /* the second node draws another mask */
    bad |= nncl__plan_read(p0, h2, out2, B, NULL) != NNCL_OK;
    for (k = 0; k < B * N; k++) differ += (out[k] == 0.0f) != (out2[k] == 0.0f);
    TH_CHECK(name, !bad && differ > B * N / 5);
    /* p = 0 keeps everything unscaled, p = 1 drops everything */
    bad |= nncl__plan_read(p0, h0, out2, B, NULL) != NNCL_OK;
    for (k = 0; k < B * N; k++) bad |= out2[k] != 1.0f;
    bad |= nncl__plan_read(p0, h1, out2, B, NULL) != NNCL_OK;
    for (k = 0; k < B * N; k++) bad |= out2[k] != 0.0f;
    TH_CHECK(name, !bad);
    /* a shard of samples 3..7: the same masks as in the whole batch */
    TH_OK(name, ctx, nncl__plan_feed(p0, x, ones + 3 * N, B - 3));
    p0->ex.batch_offset = 3;
    TH_OK(name, ctx, nncl__plan_forward(p0, B - 3, 1));
    TH_OK(name, ctx, nncl__plan_read(p0, h, out2, B - 3, NULL));
    TH_CHECK(name, memcmp(out2, out + 3 * N, (size_t)(B - 3) * N * sizeof(float)) == 0);
    p0->ex.batch_offset = 0;
    /* another step: another mask */
    p0->ex.step_seed = 12346;
    TH_OK(name, ctx, nncl__plan_feed(p0, x, ones, B));
    TH_OK(name, ctx, nncl__plan_forward(p0, B, 1));
    TH_OK(name, ctx, nncl__plan_read(p0, h, out2, B, NULL));
    differ = 0;
    for (k = 0; k < B * N; k++) differ += (out[k] == 0.0f) != (out2[k] == 0.0f);
    TH_CHECK(name, differ > B * N / 5);
    /* evaluation: the identity */
    TH_OK(name, ctx, nncl__plan_feed(p0, x, rnd, B));
    TH_OK(name, ctx, nncl__plan_forward(p0, B, 0));
    TH_OK(name, ctx, nncl__plan_read(p0, h, out2, B, NULL));
    TH_CHECK(name, memcmp(out2, rnd, B * N * sizeof(float)) == 0);
    th_pass("%s (%zu of %d dropped at p = %.2f)", name, zeros, B * N, (double)p);
done:
    nncl__ref_free(r);
    nncl__plan_free(p0);
    free(ones); free(out); free(out2); free(rnd);
    nncl_graph_free(g);
    return bad;
}

/* Indices that are not whole numbers in [0, num) give rows of NaN and
 * touch no memory; valid ones give their weight rows exactly. */
static int check_embedding_invalid(nncl_context *ctx, int d) {
    char name[160];
    static const float idx[12] = {0, 4, -1, 2.5f, 5, 0 /* NaN */, 1e9f, 3, 4, 0, -0.0f, 1};
    enum { L = 6, NUM = 5, DIM = 3 };
    float ind[12], out[12 * DIM], *wv;
    int len = L, bad = 0, i, k;
    nncl_graph *g = nncl_graph_create(ctx, 21);
    nncl_node *x = nncl_input(g, "ind", 1, &len), *e = nncl_embedding(g, x, NUM, DIM, "emb"), *w;
    nncl__plan *p = NULL;
    nncl_feed f[1];
    snprintf(name, sizeof name, "embedding invalid indices on %s", th_device_label(ctx, d));
    TH_CHECK(name, e != NULL && (w = nncl_graph_find(g, "emb.weight")) != NULL);
    memcpy(ind, idx, sizeof ind);
    ind[5] = NAN;
    f[0].node = x; f[0].data = ind;
    if (nt_plan(name, ctx, d, g, NULL, f, 1, 2, &p)) { nncl_graph_free(g); return 1; }
    wv = (float *)malloc((g->n_params + 1) * sizeof(float));
    {
        float *sb = (float *)malloc((g->n_state + 1) * sizeof(float));
        nncl__graph_init_values(g, wv, sb);
        free(sb);
    }
    bad |= nncl__plan_forward(p, 2, 1) != NNCL_OK;
    bad |= nncl__plan_read(p, e, out, 2, NULL) != NNCL_OK;
    for (i = 0; i < 12 && !bad; i++) {
        int valid = i != 5 && ind[i] >= 0 && ind[i] < NUM && ind[i] == floorf(ind[i]);
        for (k = 0; k < DIM; k++) {
            float want = valid ? wv[w->param_off + (size_t)ind[i] * DIM + k] : NAN;
            if (valid ? out[i * DIM + k] != want : !isnan(out[i * DIM + k])) {
                th_fail(name, "index %g, column %d: got %g, want %g", (double)ind[i], k, (double)out[i * DIM + k],
                        (double)want);
                bad = 1;
                break;
            }
        }
    }
    if (!bad) th_pass("%s", name);
    free(wv);
    nncl__plan_free(p);
    nncl_graph_free(g);
    return bad;
}

/* Initial values: embedding N(0, 1), norm weights 1 and biases 0. */
static int check_init(nncl_context *ctx) {
    const char *name = "embedding and norm initialisation";
    nncl_graph *g = nncl_graph_create(ctx, 5);
    int one = 1, feat = 6;
    nncl_node *ind = nncl_input(g, "i", 0, &one), *x = nncl_input(g, "x", 1, &feat), *w, *lw, *lb, *bw, *bb;
    float *pv, *sv;
    double s = 0, q = 0;
    size_t k, n = 2000 * 10;
    TH_CHECK(name, nncl_embedding(g, ind, 2000, 10, "emb") && nncl_layernorm(g, x, 1e-5f, "ln") &&
                       nncl_batchnorm(g, x, 0.1f, 1e-5f, "bn"));
    TH_CHECK(name, (w = nncl_graph_find(g, "emb.weight")) && (lw = nncl_graph_find(g, "ln.weight")) &&
                       (lb = nncl_graph_find(g, "ln.bias")) && (bw = nncl_graph_find(g, "bn.weight")) &&
                       (bb = nncl_graph_find(g, "bn.bias")));
    TH_OK(name, ctx, nncl__graph_layout(g));
    TH_CHECK(name, g->n_state == 12); /* running mean and var of 6 channels */
    pv = (float *)malloc((g->n_params + 1) * sizeof(float));
    sv = (float *)malloc((g->n_state + 1) * sizeof(float));
    nncl__graph_init_values(g, pv, sv);
    for (k = 0; k < n; k++) {
        s += pv[w->param_off + k];
        q += (double)pv[w->param_off + k] * pv[w->param_off + k];
    }
    s /= (double)n;
    q = q / (double)n - s * s;
    for (k = 0; k < 6; k++) {
        if (pv[lw->param_off + k] != 1 || pv[lb->param_off + k] != 0 || pv[bw->param_off + k] != 1 ||
            pv[bb->param_off + k] != 0 || sv[k] != 0 || sv[6 + k] != 1)
            s = 1e9;
    }
    free(pv);
    free(sv);
    nncl_graph_free(g);
    TH_CHECK(name, fabs(s) < 0.05 && fabs(q - 1) < 0.05);
    th_pass("%s", name);
    return 0;
}

/* Wrong shapes and arguments fail when the graph is built, with a message
 * naming the op and the shapes; the graph stays usable. */
static int check_errors(nncl_context *ctx) {
    const char *name = "norm/misc shape errors";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int s23[2] = {2, 3}, s24[2] = {2, 4}, s5[1] = {5}, s4m[2] = {4, -1}, smm[2] = {-1, -1}, s234[3] = {2, 3, 4};
    int s1123[4] = {1, 1, 2, 3};
    int ps[NNCL_MAX_DIMS] = {3, 4}, ok[2] = {3, 2};
    nncl_node *x = nncl_input(g, "x", 2, s23), *y = nncl_input(g, "y", 2, s24), *lab = nncl_input(g, "lab", 0, NULL);
    nncl_node *big = nncl_input(g, "big", 3, s234), *prm = nncl_param(g, "prm", 2, ps, NNCL_INIT_ZEROS, 0), *n;
    const char *m;
    TH_CHECK(name, x && y && lab && big && prm);
    /* batch norm: needs [B,C,...] */
    TH_CHECK(name, nncl_batchnorm(g, lab, 0.1f, 1e-5f, "bn_lab") == NULL);
    m = nncl_last_error(ctx);
    TH_CHECK(name, strstr(m, "batchnorm") && strstr(m, "bn_lab") && strstr(m, "[B]"));
    TH_CHECK(name, nncl_batchnorm(g, prm, 0.1f, 1e-5f, "bn_prm") == NULL && strstr(nncl_last_error(ctx), "[3,4]"));
    TH_CHECK(name, nncl_batchnorm(g, x, 1.5f, 1e-5f, "bn_m") == NULL && strstr(nncl_last_error(ctx), "momentum"));
    TH_CHECK(name, nncl_batchnorm(g, x, 0.1f, 0.0f, "bn_e") == NULL && strstr(nncl_last_error(ctx), "eps"));
    TH_CHECK(name, nncl_batchnorm(g, x, 0.1f, 1e-5f, NULL) == NULL);
    TH_CHECK(name, nncl_batchnorm(g, NULL, 0.1f, 1e-5f, "bn_null") == NULL);
    TH_CHECK(name, nncl_graph_find(g, "bn_lab.weight") == NULL); /* nothing left behind */
    {
        /* inputs of another graph: the refused nodes take their parameters back */
        nncl_graph *g2 = nncl_graph_create(ctx, 1);
        nncl_node *x2 = nncl_input(g2, "x", 2, s23), *lab2 = nncl_input(g2, "lab", 0, NULL);
        TH_CHECK(name, nncl_batchnorm(g, x2, 0.1f, 1e-5f, "bn_far") == NULL && nncl_graph_find(g, "bn_far.weight") == NULL);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "another graph") != NULL);
        TH_CHECK(name, nncl_layernorm(g, x2, 1e-5f, "ln_far") == NULL && nncl_graph_find(g, "ln_far.weight") == NULL);
        TH_CHECK(name, nncl_embedding(g, lab2, 4, 2, "e_far") == NULL && nncl_graph_find(g, "e_far.weight") == NULL);
        nncl_graph_free(g2);
    }
    /* layer norm: needs a feature dimension */
    TH_CHECK(name, nncl_layernorm(g, lab, 1e-5f, "ln_lab") == NULL && strstr(nncl_last_error(ctx), "[B]"));
    TH_CHECK(name, nncl_layernorm(g, x, -1.0f, "ln_e") == NULL && strstr(nncl_last_error(ctx), "eps"));
    /* dropout: p in [0, 1] */
    TH_CHECK(name, nncl_dropout(g, x, 1.5f) == NULL && strstr(nncl_last_error(ctx), "1.5"));
    TH_CHECK(name, nncl_dropout(g, x, -0.1f) == NULL);
    TH_CHECK(name, nncl_dropout(g, x, NAN) == NULL);
    /* embedding: sizes, and room for the output's extra dimension */
    TH_CHECK(name, nncl_embedding(g, lab, 0, 4, "e0") == NULL && strstr(nncl_last_error(ctx), "num"));
    TH_CHECK(name, nncl_embedding(g, lab, 4, -2, "e1") == NULL);
    TH_CHECK(name, nncl_embedding(g, big, 4, 2, "e2") == NULL && strstr(nncl_last_error(ctx), "[B,2,3,4]"));
    /* reshape: the element count must match, at most one -1 */
    TH_CHECK(name, nncl_reshape(g, x, 1, s5) == NULL);
    m = nncl_last_error(ctx);
    TH_CHECK(name, strstr(m, "reshape") && strstr(m, "[B,2,3]") && strstr(m, "6") && strstr(m, "5"));
    TH_CHECK(name, nncl_reshape(g, x, 2, s4m) == NULL && strstr(nncl_last_error(ctx), "[B,2,3]"));
    TH_CHECK(name, nncl_reshape(g, x, 2, smm) == NULL && strstr(nncl_last_error(ctx), "-1"));
    TH_CHECK(name, nncl_reshape(g, x, 4, s1123) == NULL && strstr(nncl_last_error(ctx), "at most 3 after the batch"));
    TH_CHECK(name, nncl_reshape(g, NULL, 1, s5) == NULL);
    /* concat: all other dimensions equal, the axis in range, both batched */
    TH_CHECK(name, nncl_concat(g, x, y, 0) == NULL);
    m = nncl_last_error(ctx);
    TH_CHECK(name, strstr(m, "concat") && strstr(m, "[B,2,3]") && strstr(m, "[B,2,4]"));
    TH_CHECK(name, nncl_concat(g, x, y, 2) == NULL && strstr(nncl_last_error(ctx), "axis 2"));
    TH_CHECK(name, nncl_concat(g, x, y, -3) == NULL);
    TH_CHECK(name, nncl_concat(g, x, prm, 1) == NULL);
    TH_CHECK(name, nncl_concat(g, x, NULL, 1) == NULL);
    /* the graph is still fine: valid builds succeed with the right shapes */
    n = nncl_concat(g, x, y, 1);
    TH_CHECK(name, n && nncl_node_shape(n, ps) == 2 && ps[0] == 2 && ps[1] == 7);
    n = nncl_concat(g, x, y, -1);
    TH_CHECK(name, n && nncl_node_shape(n, ps) == 2 && ps[1] == 7);
    n = nncl_reshape(g, big, 2, s4m);
    TH_CHECK(name, n && nncl_node_shape(n, ps) == 2 && ps[0] == 4 && ps[1] == 6);
    n = nncl_flatten(g, big);
    TH_CHECK(name, n && nncl_node_shape(n, ps) == 1 && ps[0] == 24);
    n = nncl_flatten(g, prm);
    TH_CHECK(name, n && !n->batched && nncl_node_shape(n, ps) == 1 && ps[0] == 12);
    n = nncl_reshape(g, prm, 2, ok);
    TH_CHECK(name, n == NULL); /* 12 elements into 6 */
    n = nncl_embedding(g, x, 9, 4, "emb");
    TH_CHECK(name, n && nncl_node_shape(n, ps) == 3 && ps[0] == 2 && ps[1] == 3 && ps[2] == 4);
    n = nncl_batchnorm(g, big, 0.1f, 1e-5f, "bn4");
    TH_CHECK(name, n && n->state_size == 4 && nncl_graph_find(g, "bn4.weight")->shape[0] == 2);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    static const int bn2a[1] = {3}, bn2c[1] = {5}, bn4a[3] = {3, 5, 3};
    nncl_context *ctx = th_context();
    int d;
    if (!ctx) return th_exit_code();
    check_errors(ctx);
    check_init(ctx);
    for (d = 0; d < nncl_device_count(ctx); d++) {
        int path;
        for (path = 0; path < 2; path++) { /* both of batch norm's paths (src/ops/op_norm.c) */
            setenv("NNCL_BN", path ? "groups" : "stream", 1);
            check_bn_running(ctx, d, 1, bn2a, 6);
            check_bn_running(ctx, d, 3, bn4a, 2);
            check_bn_running(ctx, d, 1, bn2c, 1);
        }
        unsetenv("NNCL_BN");
        check_dropout_masks(ctx, d);
        check_embedding_invalid(ctx, d);
    }
    nncl_free(ctx);
    return th_exit_code();
}
