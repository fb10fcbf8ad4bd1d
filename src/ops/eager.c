/* eager.c - the public eager ops on tensors: argument and shape checks, then
 * one kernel launch on the tensors' device, without waiting, through the
 * typed wrappers the graph ops use (launch.h; offsets are 0: a tensor owns
 * its buffer), under the context's use lock (a kernel object takes one
 * launch's arguments at a time). */
#include "runtime/launch.h"

static nncl_status eager_tensor(nncl_context *ctx, const char *fn, const nncl_tensor *t, const char *arg) {
    if (!t) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: tensor argument %s is NULL", fn, arg);
    if (t->ctx != ctx)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: tensor %s belongs to another context", fn, arg);
    return NNCL_OK;
}

/* ctx given; x (named xname), b (when has_b) and out given, of ctx and on one
 * device. */
static nncl_status eager_check(nncl_context *ctx, const char *fn, const nncl_tensor *x, const char *xname,
                               const nncl_tensor *b, int has_b, const nncl_tensor *out) {
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    NNCL_TRY(eager_tensor(ctx, fn, x, xname));
    if (has_b) NNCL_TRY(eager_tensor(ctx, fn, b, "b"));
    NNCL_TRY(eager_tensor(ctx, fn, out, "out"));
    if (has_b && b->device != x->device)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: tensors are on different devices (%s on %d, b on %d)",
                          fn, xname, x->device, b->device);
    if (out->device != x->device)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: tensors are on different devices (%s on %d, out on %d)",
                          fn, xname, x->device, out->device);
    return NNCL_OK;
}

/* Kernel `name` of cl/<family>.cl on x's device. After the checks, so bad
 * input builds nothing. */
static nncl_status eager_kernel(nncl_context *ctx, const nncl_tensor *x, const char *family, const char *name,
                                nncl__kl *k) {
    return nncl__kl_find(ctx, &ctx->devices[x->device], family, name, k);
}

static nncl__view eager_view(const nncl_tensor *t) {
    nncl__view v;
    v.mem = t->mem;
    v.off = 0;
    return v;
}

/* "[2,3]" into buf. */
static const char *eager_shape_str(const nncl_tensor *t, char *buf, size_t len) {
    size_t used = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < t->ndim && used + 16 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "[", t->shape[i]);
    if (used + 2 < len) snprintf(buf + used, len - used, t->ndim ? "]" : "[]");
    return buf;
}

static int eager_shape_eq(const nncl_tensor *a, const nncl_tensor *b) {
    int i;
    if (a->ndim != b->ndim) return 0;
    for (i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* out must have x's shape (not merely as many elements), as the header says. */
static nncl_status eager_same_shape(nncl_context *ctx, const char *fn, const nncl_tensor *x, const char *xname,
                                    const nncl_tensor *out) {
    char s1[64], s2[64];
    if (!eager_shape_eq(out, x))
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: out is %s, %s is %s", fn, eager_shape_str(out, s1, sizeof s1),
                          xname, eager_shape_str(x, s2, sizeof s2));
    return NNCL_OK;
}

static nncl_status eager_binary(nncl_context *ctx, const char *fn, const char *kernel, const nncl_tensor *a,
                                const nncl_tensor *b, nncl_tensor *out) {
    nncl__kl k;
    nncl_status st;
    int cols;
    NNCL_TRY(eager_check(ctx, fn, a, "a", b, 1, out));
    NNCL_TRY(eager_same_shape(ctx, fn, a, "a", out));
    cols = a->shape[a->ndim - 1];
    if (!eager_shape_eq(a, b) && !(b->ndim == 1 && b->shape[0] == cols)) {
        char s1[64], s2[64];
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: b is %s; it must have a's shape %s or be a row vector [%d]", fn,
                          eager_shape_str(b, s1, sizeof s1), eager_shape_str(a, s2, sizeof s2), cols);
    }
    nncl__enter(ctx);
    if ((st = eager_kernel(ctx, a, "elementwise", kernel, &k)) == NNCL_OK)
        st = nncl__k_binary(k, eager_view(a), eager_view(b), b->numel, eager_view(out), a->numel);
    nncl__leave(ctx);
    return st;
}

/* out = f(x) elementwise; param, when given, is the kernel's float p. */
static nncl_status eager_unary(nncl_context *ctx, const char *fn, const char *kernel, const nncl_tensor *x,
                               const float *param, nncl_tensor *out) {
    nncl__kl k;
    nncl_status st;
    NNCL_TRY(eager_check(ctx, fn, x, "x", NULL, 0, out));
    NNCL_TRY(eager_same_shape(ctx, fn, x, "x", out));
    nncl__enter(ctx);
    if ((st = eager_kernel(ctx, x, "elementwise", kernel, &k)) == NNCL_OK)
        st = nncl__k_unary(k, eager_view(x), eager_view(out), x->numel, param);
    nncl__leave(ctx);
    return st;
}

/* Row-wise over the last dimension, x viewed as [numel/cols, cols]. */
static nncl_status eager_softmax(nncl_context *ctx, const char *fn, const char *kernel, const nncl_tensor *x,
                                 nncl_tensor *out) {
    nncl__kl k;
    nncl_status st;
    size_t cols;
    NNCL_TRY(eager_check(ctx, fn, x, "x", NULL, 0, out));
    NNCL_TRY(eager_same_shape(ctx, fn, x, "x", out));
    cols = (size_t)x->shape[x->ndim - 1];
    nncl__enter(ctx);
    if ((st = eager_kernel(ctx, x, "softmax", kernel, &k)) == NNCL_OK)
        st = nncl__k_softmax(k, eager_view(x), eager_view(out), x->numel / cols, cols);
    nncl__leave(ctx);
    return st;
}

static nncl_status eager_sum(nncl_context *ctx, const char *fn, const nncl_tensor *x, int axis, int mean,
                             nncl_tensor *out) {
    nncl__kl k;
    nncl_status st;
    size_t rows, cols, want;
    NNCL_TRY(eager_check(ctx, fn, x, "x", NULL, 0, out));
    if (axis != 0 && axis != 1)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "%s: axis is %d; it must be 0 (over rows) or 1 (over columns)", fn, axis);
    if (x->ndim != 2) return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: x has %d dimensions; it must be 2-D", fn, x->ndim);
    rows = (size_t)x->shape[0];
    cols = (size_t)x->shape[1];
    want = axis ? rows : cols;
    if (out->numel != want)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: out has %zu elements; axis %d of x [%zu,%zu] needs %zu", fn,
                          out->numel, axis, rows, cols, want);
    nncl__enter(ctx);
    if ((st = eager_kernel(ctx, x, "reduce", axis ? "nncl_sum_f32_axis1" : "nncl_sum_f32_axis0", &k)) == NNCL_OK)
        st = nncl__k_sum(k, axis, eager_view(x), eager_view(out), rows, cols,
                         mean ? (float)(1.0 / (double)(axis ? cols : rows)) : 1.0f, 0);
    nncl__leave(ctx);
    return st;
}

nncl_status nncl_add(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_add", "nncl_add_f32", a, b, out);
}
nncl_status nncl_sub(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_sub", "nncl_sub_f32", a, b, out);
}
nncl_status nncl_mul(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_mul", "nncl_mul_f32", a, b, out);
}
nncl_status nncl_scale(nncl_context *ctx, const nncl_tensor *x, float alpha, nncl_tensor *out) {
    return eager_unary(ctx, "nncl_scale", "nncl_scale_f32", x, &alpha, out);
}
nncl_status nncl_relu(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_unary(ctx, "nncl_relu", "nncl_relu_f32", x, NULL, out);
}
nncl_status nncl_sigmoid(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_unary(ctx, "nncl_sigmoid", "nncl_sigmoid_f32", x, NULL, out);
}
nncl_status nncl_tanh(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_unary(ctx, "nncl_tanh", "nncl_tanh_f32", x, NULL, out);
}
nncl_status nncl_gelu(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_unary(ctx, "nncl_gelu", "nncl_gelu_f32", x, NULL, out);
}
nncl_status nncl_softmax(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_softmax(ctx, "nncl_softmax", "nncl_softmax_f32", x, out);
}
nncl_status nncl_log_softmax(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return eager_softmax(ctx, "nncl_log_softmax", "nncl_log_softmax_f32", x, out);
}
nncl_status nncl_sum(nncl_context *ctx, const nncl_tensor *x, int axis, nncl_tensor *out) {
    return eager_sum(ctx, "nncl_sum", x, axis, 0, out);
}
nncl_status nncl_mean(nncl_context *ctx, const nncl_tensor *x, int axis, nncl_tensor *out) {
    return eager_sum(ctx, "nncl_mean", x, axis, 1, out);
}
