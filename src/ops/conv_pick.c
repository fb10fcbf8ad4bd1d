/* conv_pick.c - which path a conv2d layer takes among conv2d's
 * implementations, nncl__conv_impls: im2col + CLBlast (src/ops/op_conv.c),
 * the implicit GEMM on nncl's own kernels (src/ops/conv_own.c) or, where it
 * fits, the 3x3 kernels (src/ops/conv3.c). The faster GEMM for the
 * forward product alone does not say which layer is faster (the own path's
 * backward gather, or CLBlast's column matrix, may weigh more on one device
 * than on another), so at a plan's prepare the layer's whole training work (forward, and the
 * weight and input gradients the plan needs) is timed each way on scratch
 * buffers of one chunk of the im2col path (its GEMMs then have the plan's
 * shapes, measured once for all), in the rounds of the harness every
 * choice shares (src/gemm/choose.c).
 * Each way must agree with the im2col path (else it is not taken); the
 * fastest is kept, in memory and in the device's GEMM choice file
 * (src/gemm/gemm_pick.c), so that a later plan or run times nothing.
 * NNCL_GEMM=own|clblast forces the own or the im2col path,
 * NNCL_CONV_3X3=1 the 3x3 one where it fits (=0: never; NNCL_CONV_DIRECT,
 * its former name, is read where it is unset). A step only looks the
 * choice up. A new path: its NNCL__CONV_* value (src/ops/conv.h), its
 * functions and its row of nncl__conv_impls below. */
#include "ops/conv.h"
#include "gemm/gemm.h"
#include <math.h>

/* ------------------------------------------------------------- the paths */

/* Each path's functions on node n's geometry at the exec's batch. */
#define CPICK_PATH(P, FITS, BACKWARD)                                                                          \
    static int cpick_##P##_fits(nncl__exec *ex, const nncl_node *n) {                                          \
        nncl__conv_dims d;                                                                                     \
        nncl__conv_dims_of(n, ex->batch, &d);                                                                  \
        return FITS;                                                                                           \
    }                                                                                                          \
    static nncl_status cpick_##P##_prepare(nncl__exec *ex, const nncl_node *n, size_t *bytes) {                \
        nncl__conv_dims d;                                                                                     \
        nncl__conv_dims_of(n, ex->batch, &d);                                                                  \
        return nncl__conv_##P##_prepare(ex, n, &d, bytes);                                                     \
    }                                                                                                          \
    static nncl_status cpick_##P##_forward(nncl__exec *ex, const nncl_node *n) {                               \
        nncl__conv_dims d;                                                                                     \
        nncl__conv_dims_of(n, ex->batch, &d);                                                                  \
        return nncl__conv_##P##_forward(ex, n, &d);                                                            \
    }                                                                                                          \
    static nncl_status cpick_##P##_backward(nncl__exec *ex, const nncl_node *n, nncl__view dy) {               \
        nncl__conv_dims d;                                                                                     \
        nncl__conv_dims_of(n, ex->batch, &d);                                                                  \
        return BACKWARD(ex, n, &d, dy);                                                                        \
    }
/* the own path without dx and dW: the bias gradient alone, im2col's too */
static nncl_status cpick_own_bwd(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy) {
    if (!nncl__need_grad(ex, n, 0) && !nncl__need_grad(ex, n, 1)) return nncl__conv_col_backward(ex, n, d, dy);
    return nncl__conv_own_backward(ex, n, d, dy);
}
CPICK_PATH(col, 1, nncl__conv_col_backward)
CPICK_PATH(own, nncl__conv_own_fits(&d), cpick_own_bwd)
CPICK_PATH(3x3, nncl__conv_3x3_fits(ex, n, &d), nncl__conv_3x3_backward)
#undef CPICK_PATH

/* conv2d's implementations, indexed by NNCL__CONV_*: the first is the one
 * the others must agree with, and takes every layer. */
#define CPICK_ROW(P, NAME) {NAME, cpick_##P##_fits, cpick_##P##_prepare, cpick_##P##_forward, cpick_##P##_backward}
const nncl__impl nncl__conv_impls[NNCL__CONV_PATHS] = {
    CPICK_ROW(col, "im2col + CLBlast"), CPICK_ROW(own, "own"), CPICK_ROW(3x3, "3x3")};
#undef CPICK_ROW
/* The choice file stores every path's index (src/gemm/choice_file.c). */
typedef char cpick_paths_stored[NNCL__CONV_PATHS - 1 == NNCL__CONV_PATH_MAX ? 1 : -1];

/* A conv layer's key among the stored paths: its geometry and gradients. */
static void cpick_key(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int *key) {
    key[0] = d->C; key[1] = d->H; key[2] = d->W; key[3] = d->O; key[4] = d->k; key[5] = d->st;
    key[6] = d->pad; key[7] = d->act; key[8] = n->n_in == 3;
    key[9] = nncl__need_grad(ex, n, 0); key[10] = nncl__need_grad(ex, n, 1);
}

/* $NNCL_CONV_3X3 (or its former name NNCL_CONV_DIRECT): 1 forced where
 * it fits, 0 never, -1 unset (timed). */
static int cpick_3x3_mode(void) {
    const char *env = getenv("NNCL_CONV_3X3");
    if (!env || !*env) env = getenv("NNCL_CONV_DIRECT");
    return env && *env ? (strcmp(env, "0") ? 1 : 0) : -1;
}

/* Whether path p is a candidate for node n: it fits, and NNCL_CONV_3X3
 * does not leave the 3x3 path out. */
static int cpick_on(nncl__exec *ex, const nncl_node *n, int p) {
    return (p != NNCL__CONV_3X3 || cpick_3x3_mode() != 0) && nncl__conv_impls[p].fits(ex, n);
}

/* The path forced by the environment or half storage (see
 * nncl__conv_pick), or -1: the timed choice decides. */
static int cpick_forced(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    int mode = nncl__gemm_mode(), own = nncl__conv_own_fits(d), c3 = cpick_on(ex, n, NNCL__CONV_3X3);
    if (c3 && cpick_3x3_mode() == 1) return NNCL__CONV_3X3;
    if (mode == 1) return NNCL__CONV_COL;
    if (mode == 2) return own ? NNCL__CONV_OWN : NNCL__CONV_COL;
    if (ex->store) return c3 ? NNCL__CONV_3X3 : own ? NNCL__CONV_OWN : NNCL__CONV_COL;
    return c3 || own ? -1 : NNCL__CONV_COL;
}

int nncl__conv_path(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d) {
    int key[NNCL__CONV_KEY], path = cpick_forced(ex, n, d);
    if (path >= 0) return path;
    cpick_key(ex, n, d, key);
    path = nncl__conv_choice_find(ex->ctx, ex->dev, key);
    return path < 0 || path >= NNCL__CONV_PATHS || !nncl__conv_impls[path].fits(ex, n) ? NNCL__CONV_COL : path;
}

/* The scratch side of a timing: an exec whose views of n's inputs, output
 * and gradients are buffers of its own (mem[], filled with seeded values). */
enum { CPICK_X, CPICK_W, CPICK_B, CPICK_DY0, CPICK_DY, CPICK_Y, CPICK_DX, CPICK_DW, CPICK_DB, CPICK_TEMP, CPICK_N };
typedef struct cpick_scratch {
    nncl__exec t;
    cl_mem mem[CPICK_N];
    size_t floats[CPICK_N];
    float *out[NNCL__CONV_PATHS]; /* y, dx, dw, db of each path's first pass, one after another */
    size_t n_out;
} cpick_scratch;

static nncl_status cpick_buf(nncl_context *ctx, nncl_device *dev, cpick_scratch *s, int i, size_t n, unsigned *seed) {
    float *h = (float *)NNCL_MALLOC(n * sizeof(float));
    size_t j;
    cl_int err;
    if (!h) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (j = 0; j < n; j++) {
        *seed = *seed * 1664525u + 1013904223u;
        h[j] = (float)((*seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
    s->mem[i] = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), h, &err);
    NNCL_FREE(h);
    NNCL_CL_CHECK(ctx, err, "clCreateBuffer (conv2d path timing)");
    s->floats[i] = n;
    return NNCL_OK;
}

static nncl__view cpick_view(const cpick_scratch *s, int i) {
    nncl__view v;
    v.mem = s->mem[i];
    v.off = 0;
    return v;
}

static void cpick_free(cpick_scratch *s) {
    int i;
    for (i = 0; i < CPICK_N; i++)
        if (s->mem[i]) clReleaseMemObject(s->mem[i]);
    NNCL_FREE(s->t.value);
    NNCL_FREE(s->t.grad);
    NNCL_FREE(s->t.grad_acc);
    for (i = 0; i < NNCL__CONV_PATHS; i++) NNCL_FREE(s->out[i]);
}

static nncl_status cpick_init(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, cpick_scratch *s) {
    size_t nodes = (size_t)ex->graph->n_nodes, xs = (size_t)d->C * (size_t)d->H * (size_t)d->W;
    unsigned seed = 7u;
    int i;
    nncl__exec *t = &s->t;
    *t = *ex;
    t->batch = d->B;
    t->value = (nncl__view *)nncl__calloc(nodes, sizeof(nncl__view));
    t->grad = (nncl__view *)nncl__calloc(nodes, sizeof(nncl__view));
    t->grad_acc = (unsigned char *)nncl__calloc(nodes, 1);
    if (!t->value || !t->grad || !t->grad_acc) return nncl__fail(ex->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    memcpy(t->value, ex->value, nodes * sizeof(nncl__view));
    memcpy(t->grad, ex->grad, nodes * sizeof(nncl__view));
    NNCL_TRY(nncl__conv_budget(ex, n, &t->conv_budget)); /* the plan's, so the chunks are the plan's */
    NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_X, (size_t)d->B * xs, &seed));
    NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_W, (size_t)d->O * d->ckk, &seed));
    NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_Y, (size_t)d->B * (size_t)d->O * d->ohw, &seed));
    NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_DY0, (size_t)d->B * (size_t)d->O * d->ohw, &seed));
    NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_DY, (size_t)d->B * (size_t)d->O * d->ohw, &seed));
    t->value[n->in[0]->id] = cpick_view(s, CPICK_X);
    t->value[n->in[1]->id] = cpick_view(s, CPICK_W);
    t->value[n->id] = cpick_view(s, CPICK_Y);
    t->grad[n->id] = cpick_view(s, CPICK_DY);
    if (n->n_in == 3) {
        NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_B, (size_t)d->O, &seed));
        t->value[n->in[2]->id] = cpick_view(s, CPICK_B);
    }
    if (nncl__need_grad(ex, n, 0)) {
        NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_DX, (size_t)d->B * xs, &seed));
        t->grad[n->in[0]->id] = cpick_view(s, CPICK_DX);
    }
    if (nncl__need_grad(ex, n, 1)) {
        NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_DW, (size_t)d->O * d->ckk, &seed));
        t->grad[n->in[1]->id] = cpick_view(s, CPICK_DW);
    }
    if (n->n_in == 3 && nncl__need_grad(ex, n, 2)) {
        NNCL_TRY(cpick_buf(ex->ctx, ex->dev, s, CPICK_DB, (size_t)d->O, &seed));
        t->grad[n->in[2]->id] = cpick_view(s, CPICK_DB);
    }
    s->n_out = s->floats[CPICK_Y] + s->floats[CPICK_DX] + s->floats[CPICK_DW] + s->floats[CPICK_DB];
    for (i = 0; i < NNCL__CONV_PATHS; i++)
        if (!(s->out[i] = (float *)NNCL_MALLOC(s->n_out * sizeof(float))))
            return nncl__fail(ex->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    return NNCL_OK;
}

/* One pass of the layer's training work on one path, finished; dy afresh
 * from its copy (backward may multiply it by act'(y) in place). */
static nncl_status cpick_pass(cpick_scratch *s, const nncl_node *n, int path) {
    nncl__exec *t = &s->t;
    memset(t->grad_acc, 0, (size_t)t->graph->n_nodes);
    NNCL_TRY(nncl__conv_impls[path].forward(t, n));
    NNCL_CL(t->ctx, clEnqueueCopyBuffer(t->dev->queue, s->mem[CPICK_DY0], s->mem[CPICK_DY], 0, 0,
                                        s->floats[CPICK_DY] * sizeof(float), 0, NULL, NULL));
    if (s->mem[CPICK_DX] || s->mem[CPICK_DW] || s->mem[CPICK_DB])
        NNCL_TRY(nncl__conv_impls[path].backward(t, n, cpick_view(s, CPICK_DY)));
    NNCL_CL(t->ctx, clFinish(t->dev->queue));
    return NNCL_OK;
}

/* Path's first pass, untimed (it builds and fills what a first run does),
 * its results kept in out[path]. */
static nncl_status cpick_first(cpick_scratch *s, const nncl_node *n, int path) {
    nncl__exec *t = &s->t;
    size_t at = 0;
    int i;
    NNCL_TRY(cpick_pass(s, n, path));
    for (i = CPICK_Y; i <= CPICK_DB; i++) /* y, dx, dw, db */
        if (s->mem[i]) {
            NNCL_CL(t->ctx, clEnqueueReadBuffer(t->dev->queue, s->mem[i], CL_TRUE, 0, s->floats[i] * sizeof(float),
                                                s->out[path] + at, 0, NULL, NULL));
            at += s->floats[i];
        }
    return NNCL_OK;
}

/* One timed pass of path i (nncl__choose_time). */
typedef struct cpick_runs {
    cpick_scratch *s;
    const nncl_node *n;
} cpick_runs;

static nncl_status cpick_run_one(void *user, int i) {
    cpick_runs *r = (cpick_runs *)user;
    return cpick_pass(r->s, r->n, i);
}

/* Times node n each way that fits on one chunk with the choosers' harness
 * (src/gemm/choose.c); *path the fastest of those that agree with the
 * im2col path (im2col + CLBlast, or the own GEMM kernels where CLBlast is
 * not timed), which stays the answer should every other fail. */
static nncl_status cpick_measure(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int *path) {
    const nncl__impl *im = nncl__conv_impls;
    cpick_scratch s;
    cpick_runs runs;
    nncl__conv_dims dt = *d;
    double t[NNCL__CONV_PATHS], t0 = nncl__seconds(), worst;
    size_t b[NNCL__CONV_PATHS], bytes = 0;
    char times[64 * NNCL__CONV_PATHS];
    int p, at = 0, on[NNCL__CONV_PATHS];
    nncl_status st;
    *path = NNCL__CONV_COL;
    memset(&s, 0, sizeof s);
    st = nncl__conv_col_chunk(ex, n, d, 1, &dt.B);
    if (st == NNCL_OK) st = cpick_init(ex, n, &dt, &s);
    for (p = 0; p < NNCL__CONV_PATHS; p++) {
        t[p] = p ? HUGE_VAL : 0;
        b[p] = 0;
        on[p] = !p || cpick_on(ex, n, p);
        if (st == NNCL_OK && on[p]) st = im[p].prepare(&s.t, n, &b[p]);
        if (b[p] > bytes) bytes = b[p];
    }
    if (st == NNCL_OK && bytes > 0) {
        cl_int err;
        s.mem[CPICK_TEMP] = clCreateBuffer(ex->dev->cl_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) st = nncl__fail(ex->ctx, NNCL_ERR_OUT_OF_MEMORY, "conv2d \"%s\": no %zu bytes to time its paths",
                                               n->name, bytes);
        s.t.gemm_temp = s.mem[CPICK_TEMP];
    }
    if (st == NNCL_OK) st = cpick_first(&s, n, NNCL__CONV_COL);
    for (p = 1; p < NNCL__CONV_PATHS && st == NNCL_OK; p++) {
        if (!on[p]) continue;
        if (cpick_first(&s, n, p) != NNCL_OK) {
            nncl__log(ex->ctx, NNCL_LOG_WARN, "conv2d \"%s\": %s path fails: %s", n->name, im[p].name,
                      nncl__thread_error());
            continue;
        }
        if (!nncl__choose_agree(s.out[0], s.out[p], s.n_out, &worst)) {
            nncl__log(ex->ctx, NNCL_LOG_WARN, "conv2d \"%s\": %s path disagrees with %s (%.3g): not used", n->name,
                      im[p].name, im[0].name, worst);
            continue;
        }
        t[p] = 0;
    }
    runs.s = &s, runs.n = n;
    if (st == NNCL_OK) st = nncl__choose_time(ex->ctx, ex->dev, NNCL__CONV_PATHS, cpick_run_one, &runs, t);
    for (p = 1; p < NNCL__CONV_PATHS; p++)
        if (t[p] < t[*path]) *path = p;
    for (p = 0; p < NNCL__CONV_PATHS && at >= 0 && at < (int)sizeof times; p++)
        at += snprintf(times + at, sizeof times - (size_t)at, "%s%s %.3f ms", p ? ", " : "", im[p].name, t[p] * 1e3);
    if (st == NNCL_OK)
        nncl__log(ex->ctx, NNCL_LOG_DEBUG, "device %d: conv2d \"%s\" at batch %d: %s: %s, chosen in %.3f s",
                  ex->dev->info.index, n->name, dt.B, times, im[*path].name, nncl__seconds() - t0);
    cpick_free(&s);
    return st;
}

/* In half storage (ex->store) the 3x3 path is taken where it fits, else
 * the own path, untimed: CLBlast takes no half operands, so the im2col
 * path's GEMMs are the own kernels too, behind an extra pass over the
 * column matrix (and the timing's scratch and stored choices are fp32's);
 * the 3x3 path has no product. NNCL_GEMM=clblast still forces that
 * path. */
nncl_status nncl__conv_pick(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes) {
    int key[NNCL__CONV_KEY], path = cpick_forced(ex, n, d);
    if (path < 0) {
        cpick_key(ex, n, d, key);
        path = nncl__conv_choice_find(ex->ctx, ex->dev, key);
        if (path < 0) {
            NNCL_TRY(cpick_measure(ex, n, d, &path));
            NNCL_TRY(nncl__conv_choice_add(ex->ctx, ex->dev, key, path));
        }
    }
    return nncl__conv_impls[nncl__conv_path(ex, n, d)].prepare(ex, n, bytes); /* what a step will take */
}

