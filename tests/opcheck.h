/* opcheck.h - the generic op check, in the manner of a backend-ops test:
 * runs a small graph through the double-precision host reference, checks
 * every reference gradient against central finite differences, then runs
 * the graph on every device and compares each node's value (read right after
 * its forward), each gradient (read before its backward), the parameter
 * gradients and the loss. The arena is poisoned first so that an element an
 * op forgot to write fails. Include once per test program. */
#ifndef NNCL_OPCHECK_H
#define NNCL_OPCHECK_H
#include "harness.h"
#include "train/plan.h"
#include "train/ref.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct oc_feed {
    nncl_node *node;
    const float *data;
} oc_feed;

/* Reference gradients against central differences of the reference loss,
 * for up to 24 elements of every parameter and every input needing a
 * gradient. */
static int oc_fd(const char *name, nncl__ref *r, const nncl_node *loss) {
    const nncl_graph *g = r->graph;
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        size_t count = nncl__numel(n, r->r.batch), k, stride;
        if (!n->needs_grad || (n->op != NNCL_OP_PARAM && n->op != NNCL_OP_INPUT)) continue;
        stride = count > 24 ? count / 24 : 1;
        for (k = 0; k < count; k += stride) {
            double keep = r->val[i][k], h = 1e-6 * (fabs(keep) > 1 ? fabs(keep) : 1), lp, lm, num, ana;
            r->val[i][k] = keep + h;
            nncl__ref_forward(r, 1);
            lp = r->val[loss->id][0];
            r->val[i][k] = keep - h;
            nncl__ref_forward(r, 1);
            lm = r->val[loss->id][0];
            r->val[i][k] = keep;
            num = (lp - lm) / (2 * h);
            ana = r->grad[i][k];
            if (!(fabs(num - ana) <= 1e-6 + 1e-5 * fabs(ana))) {
                th_fail(name, "finite difference of %s[%zu]: %.10g, backward rule: %.10g", n->name, k, num, ana);
                return 1;
            }
        }
    }
    nncl__ref_forward(r, 1); /* restore the values of the unperturbed point */
    nncl__ref_backward(r, loss);
    return 0;
}

/* Storage of the devices' activations: 0 fp32, else nncl_precision's fp16
 * (1) or bf16 (2), with the caller's tolerance set from that format. */
static int oc_store;

/* fp16 runs backward from the loss's gradient OC_SCALE, as training runs
 * it from its loss scale, and the gradients read are divided by it: from
 * 1, the 1/N of a mean puts a large row's gradients among fp16's
 * subnormals (below 2^-14), where few bits are left. */
#define OC_SCALE 1024.0f

static void oc_unscale(float *v, size_t count) {
    size_t k;
    for (k = 0; oc_store == 1 && k < count; k++) v[k] /= OC_SCALE;
}

static int oc_read(nncl__plan *p, nncl__view v, float *dst, size_t count) {
    return nncl__plan_read_view(p, v, dst, count) != NNCL_OK;
}

/* Half storage: besides the normalised squared error over a node (the
 * caller's tolerance, an aggregate that one badly wrong element among
 * thousands passes), every element within OC_ELEM_U unit roundoffs u of the
 * format (fp16 2^-11, bf16 2^-8) of its value, relative to its own size
 * plus the node's root mean square (an element near 0 carries the rounding
 * of the larger terms it was summed from). Over the op table's and
 * test_mixed's half-storage checks on PoCL the worst element came to 5.7 u
 * (median of the per-node worst 0.5 u); 16 u leaves room for another
 * order of summation and still fails an element of the node's typical size
 * (|want| = rms) that is 13% off in bf16, 1.6% in fp16. */
#define OC_ELEM_U 16.0
static int oc_elements(const char *label, const float *got, const double *want, size_t count) {
    double u = oc_store == 1 ? 1.0 / 2048 : 1.0 / 256, rms = 0, worst = 0, r;
    size_t k, at = 0;
    for (k = 0; k < count; k++) rms += want[k] * want[k];
    rms = count ? sqrt(rms / (double)count) : 0;
    for (k = 0; k < count; k++) {
        double d = fabs((double)got[k] - want[k]);
        r = d == 0 ? 0 : d / (u * (fabs(want[k]) + rms));
        if (!(r <= worst)) worst = r, at = k; /* NaN counts */
    }
    if (worst <= OC_ELEM_U) return 1;
    th_fail(label, "element [%zu] got %.9g want %.9g: %.3g units of %s roundoff times (|want| + rms %.3g), more than %g",
            at, (double)got[at], want[at], worst, oc_store == 1 ? "fp16" : "bf16", rms, OC_ELEM_U);
    return 0;
}

static int oc_compare(const char *name, const char *what, const nncl_node *n, const float *got, const double *want,
                      size_t count, double tol) {
    char label[512];
    snprintf(label, sizeof label, "%s: %s of %s", name, what, n->name);
    if (!th_close(label, got, want, count, tol)) return 1;
    return oc_store && !oc_elements(label, got, want, count);
}

/* A blocking write into a device buffer; its failure fails the check (a
 * poisoning write lost would let what the arena held before pass for what
 * the ops wrote). */
static int oc_write(const char *name, nncl_device *dev, cl_mem mem, size_t off, size_t bytes, const void *src) {
    cl_int err = clEnqueueWriteBuffer(dev->queue, mem, CL_TRUE, off, bytes, src, 0, NULL, NULL);
    if (err != CL_SUCCESS) th_fail(name, "clEnqueueWriteBuffer of %zu bytes at %zu: OpenCL error %d", bytes, off, (int)err);
    return err != CL_SUCCESS;
}

static int oc_device(const char *name, nncl_context *ctx, int d, nncl_graph *g, nncl_node *loss, const oc_feed *feeds,
                     int nf, int batch, nncl__ref *r, double tol) {
    nncl__plan *p = NULL;
    float *host = NULL, *pbuf, *sbuf;
    size_t most = g->n_params + g->n_state + 1, k;
    int i, bad = 0;
    nncl_device *dev;
    for (i = 0; i < g->n_nodes; i++)
        if (nncl__numel(g->nodes[i], batch) > most) most = nncl__numel(g->nodes[i], batch);
    TH_OK(name, ctx, nncl__plan_create_store(ctx, g, loss, d, batch, oc_store, &p));
    dev = p->ex.dev;
    host = (float *)malloc((most + p->arena_floats + g->n_params + g->n_state + 2) * sizeof(float));
    pbuf = host + most;
    sbuf = pbuf + g->n_params + 1;
    th_poison(host, most);
    if (oc_store) memset(host, 0xff, most * sizeof(float)); /* 0xffff: a NaN in fp16 and bf16 */
    for (k = 0; k < p->arena_floats && !bad; k += most < p->arena_floats - k ? most : p->arena_floats - k) {
        size_t c = most < p->arena_floats - k ? most : p->arena_floats - k, e = oc_store ? 2 : 4;
        bad |= oc_write(name, dev, p->arena, k * e, c * e, host);
    }
    th_poison(host, most);
    for (k = 0; k < p->arena32_floats && oc_store && !bad; k += most < p->arena32_floats - k ? most : p->arena32_floats - k)
        bad |= oc_write(name, dev, p->arena32, k * 4, (most < p->arena32_floats - k ? most : p->arena32_floats - k) * 4, host);
    if (g->n_trainable && !bad) bad |= oc_write(name, dev, p->ex.grads, 0, g->n_trainable * 4, host);
    nncl__graph_init_values(g, pbuf, sbuf);
    if (g->n_params && !bad) bad |= oc_write(name, dev, p->ex.params, 0, g->n_params * 4, pbuf);
    if (!bad) TH_OK(name, ctx, nncl__plan_sync_params(p));
    if (g->n_state && !bad) bad |= oc_write(name, dev, p->ex.state, 0, g->n_state * 4, sbuf);
    for (i = 0; i < nf && !bad; i++) TH_OK(name, ctx, nncl__plan_feed(p, feeds[i].node, feeds[i].data, batch));
    p->ex.batch = batch;
    p->ex.training = 1;
    p->ex.step_seed = r->r.step_seed;
    for (i = 0; i < p->n_fwd && !bad; i++) {
        nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        const nncl__opdef *def = nncl__opdef_get(n->op);
        size_t count = nncl__numel(n, batch);
        if (def->forward) TH_OK(name, ctx, def->forward(&p->ex, n));
        th_poison(host, count);
        bad |= oc_read(p, nncl__val(&p->ex, n), host, count);
        bad |= oc_compare(name, "value", n, host, r->val[n->id], count, tol);
    }
    if (!bad && loss) {
        const float one = oc_store == 1 ? OC_SCALE : 1.0f;
        nncl__view seed = nncl__grd(&p->ex, loss);
        memset(p->ex.grad_acc, 0, (size_t)g->n_nodes);
        if (seed.mem) bad |= oc_write(name, dev, seed.mem, seed.off * 4, 4, &one);
        for (i = 0; i < p->n_bwd && !bad; i++) {
            nncl_node *n = nncl__plan_node(p, p->bwd[i]);
            const nncl__opdef *def = nncl__opdef_get(n->op);
            size_t count = nncl__numel(n, batch);
            if (!def->alias) {
                th_poison(host, count);
                bad |= oc_read(p, nncl__grd(&p->ex, n), host, count);
                oc_unscale(host, count);
                bad |= oc_compare(name, "gradient", n, host, r->grad[n->id], count, tol);
            }
            if (!bad && def->backward) TH_OK(name, ctx, def->backward(&p->ex, n));
        }
        for (i = 0; i < g->n_nodes && !bad; i++) { /* parameters and inputs */
            nncl_node *n = g->nodes[i];
            size_t count = nncl__numel(n, batch);
            if (!n->needs_grad || (n->op != NNCL_OP_PARAM && n->op != NNCL_OP_INPUT)) continue;
            th_poison(host, count);
            bad |= oc_read(p, nncl__grd(&p->ex, n), host, count);
            oc_unscale(host, count);
            bad |= oc_compare(name, "gradient", n, host, r->grad[i], count, tol);
        }
    }
    free(host);
    nncl__plan_free(p);
    return bad;
}

/* Half storage: what the device starts from rounded to the format, in
 * the reference too: the fed activations (labels and targets, which stay
 * fp32, apart) and the parameters, whose working copy the ops read. The
 * tolerance then bounds the rounding of what the ops compute and store, and
 * a ReLU's input of either sign near 0 is the same input on both sides. */
static double oc_round(double v) {
    return oc_store == 1 ? nncl__f16_to_f32(nncl__f32_to_f16((float)v)) : nncl__bf16_to_f32(nncl__f32_to_bf16((float)v));
}

static int oc_fed_f32(const nncl_graph *g, const nncl_node *n) {
    int i, k;
    for (i = n->id + 1; i < g->n_nodes; i++)
        for (k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == n && (nncl__opdef_get(g->nodes[i]->op)->f32_in & (1 << k))) return 1;
    return 0;
}

static void oc_round_start(nncl__ref *r, const nncl_graph *g, int batch) {
    int i;
    size_t k;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        if (n->op != NNCL_OP_PARAM && (n->op != NNCL_OP_INPUT || oc_fed_f32(g, n))) continue;
        for (k = 0; k < nncl__numel(n, batch); k++) r->val[i][k] = oc_round(r->val[i][k]);
    }
}

/* Nonzero: oc_check leaves out the finite differences (a caller whose
 * smaller cases of the same op have them). */
static int oc_no_fd;

/* The whole check. tol: normalised squared error allowed on the devices.
 * Prints PASS or FAIL lines; returns nonzero on failure. */
static int oc_check(const char *name, nncl_context *ctx, nncl_graph *g, nncl_node *loss, const oc_feed *feeds, int nf,
                    int batch, double tol) {
    nncl__ref *r = NULL;
    int i, d, bad = 0;
    char label[300];
    if (!loss) {
        th_fail(name, "building the graph failed: %s", nncl_last_error(ctx));
        return 1;
    }
    TH_OK(name, ctx, nncl__ref_create(g, batch, &r));
    for (i = 0; i < nf; i++) {
        size_t k, count = nncl__numel(feeds[i].node, batch);
        for (k = 0; k < count; k++) r->val[feeds[i].node->id][k] = feeds[i].data[k];
    }
    if (oc_store) oc_round_start(r, g, batch);
    r->r.step_seed = 12345;
    nncl__ref_forward(r, 1);
    nncl__ref_backward(r, loss);
    snprintf(label, sizeof label, "%s: reference gradients vs finite differences", name);
    if (!oc_no_fd) {
        if (oc_fd(label, r, loss)) bad = 1;
        else th_pass("%s", label);
    }
    for (d = 0; ctx && d < nncl_device_count(ctx); d++) {
        snprintf(label, sizeof label, "%s on %s", name, th_device_label(ctx, d));
        if (oc_device(label, ctx, d, g, loss, feeds, nf, batch, r, tol)) bad = 1;
        else th_pass("%s", label);
    }
    nncl__ref_free(r);
    return bad;
}
#endif
