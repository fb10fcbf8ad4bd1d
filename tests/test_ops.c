/* test_ops.c - every eager op, and every elementwise, softmax and reduce
 * kernel the training plans use (forward and backward, at arena offsets, with
 * acc 0 and 1, launched through the wrappers of src/runtime/launch.h), on every
 * device, against the ops' double host references (graph.h,
 * src/ops/reference.c) and central finite differences of the double forward. */
#include "ops/ops.h"
#include "harness.h"
#include "ops/reference.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tolerances (normalised squared error). Results are one float rounding (or a
 * few ulp of exp/tanh/erfc, which OpenCL bounds at 3-16 ulp, ~1e-6 relative,
 * 1e-12 squared) from the reference, so 1e-10 holds for every elementwise and
 * softmax op (measured: below 2e-13). Sums are held to 1e-12: a naive float
 * loop over 200000 rows misses that (1e-11 to 1e-10 measured), Kahan plus a
 * tree does not (~1e-14). Finite differences carry O(h^2) truncation error
 * (h = 1e-4) and the float rounding of the kernel's input: 1e-8 (measured:
 * below 1e-12). */
#define OPS_TOL 1e-10
#define OPS_TOL_SUM 1e-12
#define OPS_TOL_FD 1e-8
#define OPS_H 1e-4
#define OPS_GUARD 5
#define OPS_GUARD_VALUE 777.0f

static double *ops_dup(const float *x, size_t n) {
    double *d = (double *)malloc(sizeof(double) * (n ? n : 1));
    size_t i;
    for (i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float *ops_floats(size_t n) { return (float *)malloc(sizeof(float) * (n ? n : 1)); }
static double *ops_doubles(size_t n) { return (double *)malloc(sizeof(double) * (n ? n : 1)); }

static size_t ops_numel(int ndim, const int *shape) {
    size_t n = 1;
    int i;
    for (i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
}

static const char *ops_shape_str(int ndim, const int *shape) {
    static char buf[4][64];
    static int k;
    char *b = buf[k++ & 3];
    int i, len = 0;
    b[0] = 0;
    for (i = 0; i < ndim; i++) len += snprintf(b + len, 64 - (size_t)len, i ? "x%d" : "%d", shape[i]);
    return b;
}

/* A tensor of shape holding x, or NaN everywhere when x is NULL (outputs are
 * poisoned so that an element the kernel forgot to write fails). */
static int ops_tensor(const char *name, nncl_context *ctx, int d, int ndim, const int *shape, const float *x,
                      nncl_tensor **t) {
    size_t n = ops_numel(ndim, shape);
    float *p = NULL;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, ndim, shape, t));
    if (!x) {
        p = ops_floats(n);
        th_poison(p, n);
    }
    TH_OK(name, ctx, nncl_tensor_write(*t, x ? x : p, n));
    free(p);
    return 0;
}

/* Reads t into got (poisoned first) and compares with want. 0 when close. */
static int ops_check(const char *name, nncl_context *ctx, const nncl_tensor *t, const double *want, double tol) {
    size_t n = nncl_tensor_numel(t);
    float *got = ops_floats(n);
    int ok;
    th_poison(got, n);
    TH_OK(name, ctx, nncl_tensor_read(t, got, n));
    ok = th_close(name, got, want, n, tol);
    free(got);
    return !ok;
}

static const int ops_shapes[][5] = {{1, 1},        {1, 7},      {1, 1000},    {2, 3, 1},   {2, 1, 1000},
                                    {2, 17, 33},   {2, 1000, 7}, {3, 2, 3, 5}, {4, 2, 3, 1, 9}};
#define OPS_NSHAPES (sizeof ops_shapes / sizeof ops_shapes[0])

/* ------------------------------------------------------------------ eager binary */

typedef nncl_status (*ops_binary_fn)(nncl_context *, const nncl_tensor *, const nncl_tensor *, nncl_tensor *);

static int test_binary(nncl_context *ctx, int d, const char *op, ops_binary_fn fn, nncl__op ref, int ndim,
                       const int *shape, int broadcast) {
    char name[200];
    size_t n = ops_numel(ndim, shape), bn = broadcast ? (size_t)shape[ndim - 1] : n;
    float *a = ops_floats(n), *b = ops_floats(bn);
    double *ad, *bd, *want = ops_doubles(n);
    nncl_tensor *ta = NULL, *tb = NULL, *to = NULL;
    unsigned seed = 11u + (unsigned)n;
    int bshape = shape[ndim - 1], bad;
    snprintf(name, sizeof name, "%s %s %s%s", op, th_device_label(ctx, d), ops_shape_str(ndim, shape),
             broadcast ? " row-broadcast" : "");
    th_fill_uniform(a, n, -2, 2, &seed);
    th_fill_uniform(b, bn, -2, 2, &seed);
    ad = ops_dup(a, n);
    bd = ops_dup(b, bn);
    nncl__binary_ref(ref, ad, n, bd, bn, want);
    if (ops_tensor(name, ctx, d, ndim, shape, a, &ta) ||
        ops_tensor(name, ctx, d, broadcast ? 1 : ndim, broadcast ? &bshape : shape, b, &tb) ||
        ops_tensor(name, ctx, d, ndim, shape, NULL, &to))
        return 1;
    TH_OK(name, ctx, fn(ctx, ta, tb, to));
    bad = ops_check(name, ctx, to, want, OPS_TOL);
    nncl_tensor_free(ta);
    nncl_tensor_free(tb);
    nncl_tensor_free(to);
    free(a), free(b), free(ad), free(bd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ eager unary */

static nncl_status ops_scale(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return nncl_scale(ctx, x, -1.75f, out);
}

/* out = f(x) by the op's own double maths. */
static void ops_ref_unary(nncl__op op, double p, const double *x, size_t n, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = nncl__unary_ref(op, x[i], p);
}

typedef nncl_status (*ops_unary_fn)(nncl_context *, const nncl_tensor *, nncl_tensor *);
typedef struct ops_unary {
    const char *name;
    ops_unary_fn fn;
    nncl__op op;
    double p;
} ops_unary;
static const ops_unary ops_unaries[] = {{"scale", ops_scale, NNCL_OP_SCALE, -1.75},
                                        {"relu", nncl_relu, NNCL_OP_RELU, 0},
                                        {"sigmoid", nncl_sigmoid, NNCL_OP_SIGMOID, 0},
                                        {"tanh", nncl_tanh, NNCL_OP_TANH, 0},
                                        {"gelu", nncl_gelu, NNCL_OP_GELU, 0}};

static int test_unary(nncl_context *ctx, int d, const ops_unary *u, int ndim, const int *shape) {
    char name[200];
    size_t n = ops_numel(ndim, shape);
    float *x = ops_floats(n);
    double *xd, *want = ops_doubles(n);
    nncl_tensor *tx = NULL, *to = NULL;
    unsigned seed = 5u + (unsigned)n;
    int bad;
    snprintf(name, sizeof name, "%s %s %s", u->name, th_device_label(ctx, d), ops_shape_str(ndim, shape));
    th_fill_uniform(x, n, -8, 8, &seed);
    if (n > 3) { /* saturated ends and the kink */
        x[0] = -100;
        x[1] = 100;
        x[2] = 0;
    }
    xd = ops_dup(x, n);
    ops_ref_unary(u->op, u->p, xd, n, want);
    if (ops_tensor(name, ctx, d, ndim, shape, x, &tx) || ops_tensor(name, ctx, d, ndim, shape, NULL, &to)) return 1;
    TH_OK(name, ctx, u->fn(ctx, tx, to));
    bad = ops_check(name, ctx, to, want, OPS_TOL);
    /* in place: out may be x */
    if (!bad) {
        TH_OK(name, ctx, u->fn(ctx, tx, tx));
        bad = ops_check(name, ctx, tx, want, OPS_TOL);
    }
    nncl_tensor_free(tx);
    nncl_tensor_free(to);
    free(x), free(xd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ eager softmax */

static int test_softmax(nncl_context *ctx, int d, int log_sm, int ndim, const int *shape, int range) {
    static const char *ranges[] = {"U(-5,5)", "U(-100,100)", "1000+U(-3,3)"};
    char name[200];
    size_t n = ops_numel(ndim, shape), cols = (size_t)shape[ndim - 1], i;
    float *x = ops_floats(n);
    double *xd, *want = ops_doubles(n);
    nncl_tensor *tx = NULL, *to = NULL;
    unsigned seed = 3u + (unsigned)n;
    int bad;
    snprintf(name, sizeof name, "%s %s %s %s", log_sm ? "log_softmax" : "softmax", th_device_label(ctx, d),
             ops_shape_str(ndim, shape), ranges[range]);
    {
        float half = range == 1 ? 100.0f : range == 2 ? 3.0f : 5.0f;
        th_fill_uniform(x, n, -half, half, &seed);
    }
    if (range == 2)
        for (i = 0; i < n; i++) x[i] += 1000.0f;
    xd = ops_dup(x, n);
    nncl__softmax_ref(xd, n / cols, cols, log_sm, want);
    if (ops_tensor(name, ctx, d, ndim, shape, x, &tx) || ops_tensor(name, ctx, d, ndim, shape, NULL, &to)) return 1;
    TH_OK(name, ctx, (log_sm ? nncl_log_softmax : nncl_softmax)(ctx, tx, to));
    bad = ops_check(name, ctx, to, want, OPS_TOL);
    nncl_tensor_free(tx);
    nncl_tensor_free(to);
    free(x), free(xd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ eager sum / mean */

static int test_sum(nncl_context *ctx, int d, int mean, int rows, int cols, int axis) {
    char name[200];
    int shape[2];
    size_t n = (size_t)rows * (size_t)cols, m = axis ? (size_t)rows : (size_t)cols;
    float *x = ops_floats(n);
    double *xd, *want = ops_doubles(m);
    nncl_tensor *tx = NULL, *to = NULL;
    unsigned seed = 9u + (unsigned)n;
    int mm = (int)m, bad;
    shape[0] = rows;
    shape[1] = cols;
    snprintf(name, sizeof name, "%s %s %dx%d axis %d", mean ? "mean" : "sum", th_device_label(ctx, d), rows, cols,
             axis);
    /* positive values: the sums grow with the count, so rounding accumulates */
    th_fill_uniform(x, n, 0.5f, 1.5f, &seed);
    xd = ops_dup(x, n);
    (mean ? nncl__ref_mean : nncl__ref_sum)(xd, (size_t)rows, (size_t)cols, axis, want);
    if (ops_tensor(name, ctx, d, 2, shape, x, &tx) || ops_tensor(name, ctx, d, 1, &mm, NULL, &to)) return 1;
    TH_OK(name, ctx, (mean ? nncl_mean : nncl_sum)(ctx, tx, axis, to));
    bad = ops_check(name, ctx, to, want, OPS_TOL_SUM);
    nncl_tensor_free(tx);
    nncl_tensor_free(to);
    free(x), free(xd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ kernels on arena slices */

/* n floats at element offset off of a buffer with guard values around them,
 * as the plans place values in their arena. */
typedef struct ops_slice {
    nncl_tensor *t;
    int off;
    size_t n;
} ops_slice;

/* data NULL: NaN inside the slice. */
static int ops_slice_make(const char *name, nncl_context *ctx, int d, const float *data, size_t n, int off,
                          ops_slice *s) {
    int total = (int)(n + (size_t)off + OPS_GUARD);
    float *h = ops_floats((size_t)total);
    int i;
    for (i = 0; i < total; i++) h[i] = OPS_GUARD_VALUE;
    if (data) memcpy(h + off, data, n * sizeof(float));
    else th_poison(h + off, n);
    s->off = off;
    s->n = n;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, &total, &s->t));
    TH_OK(name, ctx, nncl_tensor_write(s->t, h, (size_t)total));
    free(h);
    return 0;
}

/* The slice's values into got; fails when a guard value changed. */
static int ops_slice_get(const char *name, nncl_context *ctx, const ops_slice *s, float *got) {
    size_t total = nncl_tensor_numel(s->t), i;
    float *h = ops_floats(total);
    th_poison(h, total);
    TH_OK(name, ctx, nncl_tensor_read(s->t, h, total));
    for (i = 0; i < total; i++)
        if ((i < (size_t)s->off || i >= (size_t)s->off + s->n) && h[i] != OPS_GUARD_VALUE) {
            th_fail(name, "element %zu outside the slice [%d, %zu) was overwritten (%g)", i, s->off,
                    (size_t)s->off + s->n, (double)h[i]);
            free(h);
            return 1;
        }
    memcpy(got, h + s->off, s->n * sizeof(float));
    free(h);
    return 0;
}

static int ops_slice_check(const char *name, nncl_context *ctx, const ops_slice *s, const double *want, double tol) {
    float *got = ops_floats(s->n);
    int bad = ops_slice_get(name, ctx, s, got) || !th_close(name, got, want, s->n, tol);
    free(got);
    return bad;
}

/* Kernel slot of op's row in the op table (0 forward, 1 backward) on
 * device d, as a plan resolves it. */
static int ops_kernel(const char *name, nncl_context *ctx, int d, nncl__op op, int slot, nncl__kl *k) {
    const nncl__kdecl *kd = &nncl__opdef_get(op)->kernels[slot];
    TH_CHECK(name, kd->name != NULL);
    TH_OK(name, ctx, nncl__kl_find(ctx, &ctx->devices[d], kd->family, kd->name, k));
    return 0;
}

/* A kernel of cl/<family>.cl by name (those no op lists by itself). */
static int ops_kernel_named(const char *name, nncl_context *ctx, int d, const char *family, const char *kernel,
                            nncl__kl *k) {
    TH_OK(name, ctx, nncl__kl_find(ctx, &ctx->devices[d], family, kernel, k));
    return 0;
}

static nncl__view ops_view(const ops_slice *s) {
    nncl__view v;
    v.mem = s->t->mem;
    v.off = (size_t)s->off;
    return v;
}

/* Every unary op's forward and backward kernels, with its float parameter
 * where its kernels take one (leaky relu and elu have no eager op: only
 * here). Scale has no backward kernel (its gradient is an axpy). */
typedef struct ops_act {
    nncl__op op;
    int has_p;
    float p;
} ops_act;
static const ops_act ops_acts[] = {{NNCL_OP_RELU, 0, 0},     {NNCL_OP_SIGMOID, 0, 0},      {NNCL_OP_TANH, 0, 0},
                                   {NNCL_OP_GELU, 0, 0},     {NNCL_OP_GELU_TANH, 0, 0},    {NNCL_OP_SILU, 0, 0},
                                   {NNCL_OP_SOFTPLUS, 0, 0}, {NNCL_OP_LEAKY_RELU, 1, 0.1f}, {NNCL_OP_ELU, 1, 0.7f},
                                   {NNCL_OP_SCALE, 1, 0.375f}};

static int test_fwd_kernel(nncl_context *ctx, int d, const ops_act *k, size_t n) {
    char name[200];
    float *x = ops_floats(n);
    double *xd, *want = ops_doubles(n);
    ops_slice sx, sy;
    nncl__kl kl;
    unsigned seed = 21u + (unsigned)n;
    int bad;
    snprintf(name, sizeof name, "%s %s n=%zu at offsets", nncl__opdef_get(k->op)->kernels[0].name,
             th_device_label(ctx, d), n);
    th_fill_uniform(x, n, -6, 6, &seed);
    xd = ops_dup(x, n);
    ops_ref_unary(k->op, k->p, xd, n, want);
    if (ops_slice_make(name, ctx, d, x, n, 3, &sx) || ops_slice_make(name, ctx, d, NULL, n, 8, &sy) ||
        ops_kernel(name, ctx, d, k->op, 0, &kl))
        return 1;
    TH_OK(name, ctx, nncl__k_unary(kl, ops_view(&sx), ops_view(&sy), n, k->has_p ? &k->p : NULL));
    bad = ops_slice_check(name, ctx, &sy, want, OPS_TOL);
    nncl_tensor_free(sx.t);
    nncl_tensor_free(sy.t);
    free(x), free(xd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* Binary kernels at offsets, broadcast or not. */
static int test_binary_kernel(nncl_context *ctx, int d, size_t rows, size_t cols, int broadcast) {
    char name[200];
    size_t n = rows * cols, bn = broadcast ? cols : n;
    float *a = ops_floats(n), *b = ops_floats(bn);
    double *ad, *bd, *want = ops_doubles(n);
    ops_slice sa, sb, so;
    nncl__kl k;
    unsigned seed = 4u;
    int bad;
    snprintf(name, sizeof name, "nncl_mul_f32 %s %zux%zu%s at offsets", th_device_label(ctx, d), rows, cols,
             broadcast ? " row-broadcast" : "");
    th_fill_uniform(a, n, -2, 2, &seed);
    th_fill_uniform(b, bn, -2, 2, &seed);
    ad = ops_dup(a, n);
    bd = ops_dup(b, bn);
    nncl__binary_ref(NNCL_OP_MUL, ad, n, bd, bn, want);
    if (ops_slice_make(name, ctx, d, a, n, 1, &sa) || ops_slice_make(name, ctx, d, b, bn, 6, &sb) ||
        ops_slice_make(name, ctx, d, NULL, n, 2, &so) || ops_kernel(name, ctx, d, NNCL_OP_MUL, 0, &k))
        return 1;
    TH_OK(name, ctx, nncl__k_binary(k, ops_view(&sa), ops_view(&sb), bn, ops_view(&so), n));
    bad = ops_slice_check(name, ctx, &so, want, OPS_TOL);
    nncl_tensor_free(sa.t);
    nncl_tensor_free(sb.t);
    nncl_tensor_free(so.t);
    free(a), free(b), free(ad), free(bd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* fill and axpy (y = acc y + alpha x) */
static int test_fill_axpy(nncl_context *ctx, int d, size_t n, int acc) {
    char name[200];
    float *x = ops_floats(n), *y0 = ops_floats(n);
    double *want = ops_doubles(n);
    ops_slice sx, sy;
    nncl__kl k;
    unsigned seed = 8u;
    size_t i;
    int bad;
    snprintf(name, sizeof name, "nncl_fill_f32 %s n=%zu at offset", th_device_label(ctx, d), n);
    if (ops_slice_make(name, ctx, d, NULL, n, 4, &sy) ||
        ops_kernel_named(name, ctx, d, "elementwise", "nncl_fill_f32", &k))
        return 1;
    TH_OK(name, ctx, nncl__k_fill(k, ops_view(&sy), n, 2.5f));
    for (i = 0; i < n; i++) want[i] = 2.5;
    bad = ops_slice_check(name, ctx, &sy, want, 0);
    nncl_tensor_free(sy.t);
    if (!bad) th_pass("%s", name);

    snprintf(name, sizeof name, "nncl_axpy_f32 %s n=%zu acc=%d at offsets", th_device_label(ctx, d), n, acc);
    th_fill_uniform(x, n, -1, 1, &seed);
    th_fill_uniform(y0, n, -1, 1, &seed);
    for (i = 0; i < n; i++) want[i] = (acc ? (double)y0[i] : 0.0) - 1.25 * (double)x[i];
    if (ops_slice_make(name, ctx, d, x, n, 2, &sx) || ops_slice_make(name, ctx, d, acc ? y0 : NULL, n, 7, &sy) ||
        ops_kernel_named(name, ctx, d, "elementwise", "nncl_axpy_f32", &k))
        return 1;
    TH_OK(name, ctx, nncl__k_axpy(k, ops_view(&sx), ops_view(&sy), n, -1.25f, acc));
    bad |= ops_slice_check(name, ctx, &sy, want, OPS_TOL);
    nncl_tensor_free(sx.t);
    nncl_tensor_free(sy.t);
    free(x), free(y0), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ activation backward */

static int test_act_backward(nncl_context *ctx, int d, const ops_act *k, size_t n, int acc) {
    char name[200];
    float *x = ops_floats(n), *v = ops_floats(n), *dy = ops_floats(n), *dx0 = ops_floats(n);
    double *xd, *vd, *dyd, *y = ops_doubles(n), *want = ops_doubles(n), *fd = ops_doubles(n);
    ops_slice sdy, sv, sdx;
    nncl__kl kl;
    unsigned seed = 13u + (unsigned)n;
    size_t i;
    int bad, from_y = nncl__opdef_get(k->op)->bw_reads == NNCL_BW_OUTPUT;
    snprintf(name, sizeof name, "%s %s n=%zu acc=%d", nncl__opdef_get(k->op)->kernels[1].name, th_device_label(ctx, d),
             n, acc);
    th_fill_uniform(x, n, -4, 4, &seed);
    for (i = 0; i < n; i++) /* keep finite differences off the kinks at 0 */
        if (fabsf(x[i]) < 1e-2f) x[i] = x[i] < 0 ? -0.25f : 0.25f;
    th_fill_uniform(dy, n, -1, 1, &seed);
    th_fill_uniform(dx0, n, -1, 1, &seed);
    xd = ops_dup(x, n);
    dyd = ops_dup(dy, n);
    ops_ref_unary(k->op, k->p, xd, n, y);
    for (i = 0; i < n; i++) v[i] = from_y ? (float)y[i] : x[i];
    vd = ops_dup(v, n);
    /* analytic, from the same float value the kernel gets (the rule reads
     * only the one it names) */
    for (i = 0; i < n; i++) want[i] = dyd[i] * nncl__unary_ref_grad(k->op, vd[i], vd[i], k->p);
    /* central differences of the double forward at x */
    for (i = 0; i < n; i++)
        fd[i] = dyd[i] * (nncl__unary_ref(k->op, xd[i] + OPS_H, k->p) - nncl__unary_ref(k->op, xd[i] - OPS_H, k->p)) /
                (2 * OPS_H);
    if (acc)
        for (i = 0; i < n; i++) {
            want[i] += dx0[i];
            fd[i] += dx0[i];
        }
    if (ops_slice_make(name, ctx, d, dy, n, 1, &sdy) || ops_slice_make(name, ctx, d, v, n, 6, &sv) ||
        ops_slice_make(name, ctx, d, acc ? dx0 : NULL, n, 3, &sdx) || ops_kernel(name, ctx, d, k->op, 1, &kl))
        return 1;
    TH_OK(name, ctx,
          nncl__k_unary_backward(kl, ops_view(&sdy), ops_view(&sv), ops_view(&sdx), n, k->has_p ? &k->p : NULL, acc));
    bad = ops_slice_check(name, ctx, &sdx, want, OPS_TOL);
    if (!bad) { /* the same result against finite differences */
        char fdname[240];
        snprintf(fdname, sizeof fdname, "%s vs finite differences", name);
        bad = ops_slice_check(fdname, ctx, &sdx, fd, OPS_TOL_FD);
    }
    nncl_tensor_free(sdy.t);
    nncl_tensor_free(sv.t);
    nncl_tensor_free(sdx.t);
    free(x), free(v), free(dy), free(dx0), free(xd), free(vd), free(dyd), free(y), free(want), free(fd);
    if (!bad) th_pass("%s (analytic and finite differences)", name);
    return bad;
}

/* ------------------------------------------------------------------ softmax kernels */

/* Forward kernel at offsets, then its backward from the device's y, against
 * the analytic rule and central differences of the double forward. */
static int test_softmax_backward(nncl_context *ctx, int d, int log_sm, size_t rows, size_t cols, int acc) {
    char name[200], fdname[240];
    size_t n = rows * cols, r, i, j;
    float *x = ops_floats(n), *y = ops_floats(n), *dy = ops_floats(n), *dx0 = ops_floats(n);
    double *xd, *yd, *dyd, *want = ops_doubles(n), *fd = ops_doubles(n), *row = ops_doubles(cols),
                          *yp = ops_doubles(cols), *ym = ops_doubles(cols);
    nncl__op op = log_sm ? NNCL_OP_LOG_SOFTMAX : NNCL_OP_SOFTMAX;
    ops_slice sx, sy, sdy, sdx;
    nncl__kl k;
    unsigned seed = 17u + (unsigned)n;
    int bad;
    snprintf(name, sizeof name, "%s %s %zux%zu acc=%d", log_sm ? "log_softmax kernels" : "softmax kernels",
             th_device_label(ctx, d), rows, cols, acc);
    th_fill_uniform(x, n, -3, 3, &seed);
    th_fill_uniform(dy, n, -1, 1, &seed);
    th_fill_uniform(dx0, n, -1, 1, &seed);
    xd = ops_dup(x, n);
    dyd = ops_dup(dy, n);
    nncl__softmax_ref(xd, rows, cols, log_sm, want);
    if (ops_slice_make(name, ctx, d, x, n, 2, &sx) || ops_slice_make(name, ctx, d, NULL, n, 9, &sy) ||
        ops_kernel(name, ctx, d, op, 0, &k))
        return 1;
    TH_OK(name, ctx, nncl__k_softmax(k, ops_view(&sx), ops_view(&sy), rows, cols));
    if (ops_slice_check(name, ctx, &sy, want, OPS_TOL) || ops_slice_get(name, ctx, &sy, y)) return 1;
    yd = ops_dup(y, n);
    nncl__softmax_ref_backward(dyd, yd, rows, cols, log_sm, want, 0);
    for (r = 0; r < rows; r++)
        for (j = 0; j < cols; j++) {
            double s = 0;
            memcpy(row, xd + r * cols, cols * sizeof(double));
            row[j] += OPS_H;
            nncl__softmax_ref(row, 1, cols, log_sm, yp);
            row[j] -= 2 * OPS_H;
            nncl__softmax_ref(row, 1, cols, log_sm, ym);
            for (i = 0; i < cols; i++) s += dyd[r * cols + i] * (yp[i] - ym[i]) / (2 * OPS_H);
            fd[r * cols + j] = s;
        }
    if (acc)
        for (i = 0; i < n; i++) {
            want[i] += dx0[i];
            fd[i] += dx0[i];
        }
    if (ops_slice_make(name, ctx, d, dy, n, 5, &sdy) || ops_slice_make(name, ctx, d, acc ? dx0 : NULL, n, 1, &sdx) ||
        ops_kernel(name, ctx, d, op, 1, &k))
        return 1;
    TH_OK(name, ctx, nncl__k_softmax_backward(k, ops_view(&sdy), ops_view(&sy), ops_view(&sdx), rows, cols, acc));
    snprintf(fdname, sizeof fdname, "%s backward vs finite differences", name);
    bad = ops_slice_check(name, ctx, &sdx, want, OPS_TOL) || ops_slice_check(fdname, ctx, &sdx, fd, OPS_TOL_FD);
    nncl_tensor_free(sx.t);
    nncl_tensor_free(sy.t);
    nncl_tensor_free(sdy.t);
    nncl_tensor_free(sdx.t);
    free(x), free(y), free(dy), free(dx0), free(xd), free(yd), free(dyd), free(want), free(fd), free(row), free(yp),
        free(ym);
    if (!bad) th_pass("%s (forward at offsets, backward analytic and finite differences)", name);
    return bad;
}

/* ------------------------------------------------------------------ sum kernels */

/* out = acc out + alpha sum: with axis 0, alpha 1 or -1 and acc this is the
 * backward of a broadcast row-vector add or sub (db[c] += sum_r dy[r,c]). */
static int test_sum_kernel(nncl_context *ctx, int d, size_t rows, size_t cols, int axis, float alpha, int acc) {
    char name[200];
    size_t n = rows * cols, m = axis ? rows : cols, i;
    float *x = ops_floats(n), *o0 = ops_floats(m);
    double *xd, *want = ops_doubles(m);
    ops_slice sx, so;
    nncl__kl k;
    unsigned seed = 19u;
    int bad;
    snprintf(name, sizeof name, "nncl_sum_f32_axis%d %s %zux%zu alpha=%g acc=%d at offsets", axis,
             th_device_label(ctx, d), rows, cols, (double)alpha, acc);
    th_fill_uniform(x, n, -1, 1, &seed);
    th_fill_uniform(o0, m, -1, 1, &seed);
    xd = ops_dup(x, n);
    nncl__ref_sum(xd, rows, cols, axis, want);
    for (i = 0; i < m; i++) want[i] = (acc ? o0[i] : 0.0) + alpha * want[i];
    if (ops_slice_make(name, ctx, d, x, n, 3, &sx) || ops_slice_make(name, ctx, d, acc ? o0 : NULL, m, 2, &so) ||
        ops_kernel_named(name, ctx, d, "reduce", axis ? "nncl_sum_f32_axis1" : "nncl_sum_f32_axis0", &k))
        return 1;
    TH_OK(name, ctx, nncl__k_sum(k, axis, ops_view(&sx), ops_view(&so), rows, cols, alpha, acc));
    bad = ops_slice_check(name, ctx, &so, want, OPS_TOL);
    nncl_tensor_free(sx.t);
    nncl_tensor_free(so.t);
    free(x), free(o0), free(xd), free(want);
    if (!bad) th_pass("%s", name);
    return bad;
}

/* ------------------------------------------------------------------ main */

static void run_device(nncl_context *ctx, int d) {
    static const struct {
        const char *name;
        ops_binary_fn fn;
        nncl__op ref;
    } binaries[] = {{"add", nncl_add, NNCL_OP_ADD}, {"sub", nncl_sub, NNCL_OP_SUB}, {"mul", nncl_mul, NNCL_OP_MUL}};
    static const int sums[][2] = {{1, 1}, {3, 1}, {1, 1000}, {17, 33}, {1000, 7}, {7, 1000}, {4000, 33}, {200000, 3},
                                  {3, 200000}};
    static const size_t sizes[] = {1, 7, 1000, 17 * 33};
    static const size_t sm[][2] = {{1, 1}, {1, 7}, {3, 1}, {17, 33}, {1, 1000}, {1000, 7}};
    size_t s, k;
    int acc, axis;
    for (s = 0; s < OPS_NSHAPES; s++) {
        int ndim = ops_shapes[s][0];
        const int *shape = ops_shapes[s] + 1;
        for (k = 0; k < sizeof binaries / sizeof binaries[0]; k++) {
            test_binary(ctx, d, binaries[k].name, binaries[k].fn, binaries[k].ref, ndim, shape, 0);
            test_binary(ctx, d, binaries[k].name, binaries[k].fn, binaries[k].ref, ndim, shape, 1);
        }
        for (k = 0; k < sizeof ops_unaries / sizeof ops_unaries[0]; k++)
            test_unary(ctx, d, &ops_unaries[k], ndim, shape);
        for (k = 0; k < 3; k++) {
            test_softmax(ctx, d, 0, ndim, shape, (int)k);
            test_softmax(ctx, d, 1, ndim, shape, (int)k);
        }
    }
    for (s = 0; s < sizeof sums / sizeof sums[0]; s++)
        for (axis = 0; axis < 2; axis++) {
            test_sum(ctx, d, 0, sums[s][0], sums[s][1], axis);
            test_sum(ctx, d, 1, sums[s][0], sums[s][1], axis);
        }
    for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (k = 0; k < sizeof ops_acts / sizeof ops_acts[0]; k++)
            test_fwd_kernel(ctx, d, &ops_acts[k], sizes[s]);
        for (acc = 0; acc < 2; acc++) {
            test_fill_axpy(ctx, d, sizes[s], acc);
            for (k = 0; k < sizeof ops_acts / sizeof ops_acts[0]; k++)
                if (ops_acts[k].op != NNCL_OP_SCALE) test_act_backward(ctx, d, &ops_acts[k], sizes[s], acc);
        }
    }
    test_binary_kernel(ctx, d, 17, 33, 0);
    test_binary_kernel(ctx, d, 17, 33, 1);
    for (s = 0; s < sizeof sm / sizeof sm[0]; s++)
        for (acc = 0; acc < 2; acc++) {
            test_softmax_backward(ctx, d, 0, sm[s][0], sm[s][1], acc);
            test_softmax_backward(ctx, d, 1, sm[s][0], sm[s][1], acc);
            test_sum_kernel(ctx, d, sm[s][0], sm[s][1], 0, acc ? -1.0f : 1.0f, acc);
            test_sum_kernel(ctx, d, sm[s][0], sm[s][1], 1, 0.5f, acc);
        }
}

int main(void) {
    nncl_context *ctx = th_context();
    int d;
    if (!ctx) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx); d++) run_device(ctx, d);
    nncl_free(ctx);
    return th_exit_code();
}
