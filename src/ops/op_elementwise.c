/* op_elementwise.c - graph ops applied element by element or per row: add,
 * sub and mul (b of a's shape, an unbatched b of a's per-sample shape
 * broadcast over the batch, or a vector over a's last dimension), scale,
 * the activations and softmax / log-softmax over the last dimension. The
 * kernels are those of the eager ops (cl/elementwise.cl, cl/softmax.cl,
 * cl/reduce.cl), launched through the same wrappers (launch.h); the rules
 * below add shapes, backward and references. */
#include "ops/ops.h"
#include <math.h>

/* ------------------------------------------------------------- shapes */

static void ew_copy_shape(nncl_node *n, const nncl_node *from) {
    int i;
    n->batched = from->batched;
    n->ndim = from->ndim;
    for (i = 0; i < from->ndim; i++) n->shape[i] = from->shape[i];
}

static nncl_status ew_unary_shape(nncl_graph *g, nncl_node *n) {
    (void)g;
    ew_copy_shape(n, n->in[0]);
    return NNCL_OK;
}

/* b broadcast over rows when it is a vector of a's last dimension, or
 * over the batch when it is unbatched of a's per-sample shape. */
static int ew_broadcast(const nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    return !(b->batched == a->batched && b->sample_numel == a->sample_numel);
}

/* Whether b, unbatched, has the per-sample shape of a, batched. */
static int ew_sample_shaped(const nncl_node *a, const nncl_node *b) {
    int i;
    if (!a->batched || b->batched || b->ndim != a->ndim - 1) return 0;
    for (i = 0; i < b->ndim; i++)
        if (b->shape[i] != a->shape[i + 1]) return 0;
    return 1;
}

static nncl_status ew_binary_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    char s1[64], s2[64];
    int cols = a->shape[a->ndim - 1];
    if (!nncl__same_shape(a, b) && !ew_sample_shaped(a, b) &&
        !(!b->batched && b->ndim == 1 && b->shape[0] == cols))
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "%s \"%s\": b %s is neither a's shape %s, nor its per-sample shape, nor a vector [%d]",
                                 nncl__opdef_get(n->op)->name, n->name, nncl__shape_str(b, s1, sizeof s1),
                                 nncl__shape_str(a, s2, sizeof s2), cols);
    ew_copy_shape(n, a);
    return NNCL_OK;
}

static int ew_cols(const nncl_node *n) { return n->shape[n->ndim - 1]; }

/* Kernel slots of the rows below: the op's forward and backward kernels,
 * then the shared gradient kernels an op lists when it needs them. */
enum {
    EW_K_FORWARD, EW_K_BACKWARD, EW_K_AXPY, EW_K_COLSUM, EW_K_MUL_BCAST, EW_K_COLSUM_PARAM, EW_K_COLSUM_PARAM_COLS,
    EW_K_FORWARD8, EW_K_AXPY8
};
#define EW_KERNEL(NAME) {"elementwise", NAME}
#define EW_AXPY_COLSUM EW_KERNEL("nncl_axpy_f32"), {"reduce", "nncl_sum_f32_axis0"}

/* Whether binary ops and the gradients passed on by axpy take
 * 8 elements a work-item (their _v8 kernels) rather than one;
 * NNCL_EW_VEC=0 or 1 decides (tests run both). */
static int ew_vec(void) {
    const char *env = getenv("NNCL_EW_VEC");
    return !(env && !strcmp(env, "0"));
}

/* ------------------------------------------------------------- binary */

static nncl_status ew_binary_forward(nncl__exec *ex, nncl_node *n) {
    if (ew_vec())
        return nncl__k_binary8(nncl__kl_of(ex, n, EW_K_FORWARD8), nncl__val(ex, n->in[0]), nncl__val(ex, n->in[1]),
                               nncl__numel(n->in[1], ex->batch), nncl__val(ex, n), nncl__numel(n, ex->batch));
    return nncl__k_binary(nncl__kl_of(ex, n, EW_K_FORWARD), nncl__val(ex, n->in[0]), nncl__val(ex, n->in[1]),
                          nncl__numel(n->in[1], ex->batch), nncl__val(ex, n), nncl__numel(n, ex->batch));
}

/* dst (+)= alpha * dy, the gradient of a sum's operand of the same shape. */
static nncl_status ew_axpy(nncl__exec *ex, const nncl_node *n, nncl__view dy, nncl__view dst, size_t count, float alpha,
                           int acc) {
    if (ew_vec()) return nncl__k_axpy8(nncl__kl_of(ex, n, EW_K_AXPY8), dy, dst, count, alpha, acc);
    return nncl__k_axpy(nncl__kl_of(ex, n, EW_K_AXPY), dy, dst, count, alpha, acc);
}

/* out (+)= alpha times the sum over rows of dy [rows, cols]: a parameter's
 * gradient, fp32 whatever the storage. */
static nncl_status ew_param_sum(nncl__exec *ex, nncl_node *n, nncl__view dy, nncl__view out, size_t rows, size_t cols,
                                float alpha, int acc) {
    if (!nncl__row_kernels(ex))
        return nncl__k_sum(nncl__kl_of(ex, n, EW_K_COLSUM_PARAM), 0, dy, out, rows, cols, alpha, acc);
    return nncl__k_sum_cols(nncl__kl_of(ex, n, EW_K_COLSUM_PARAM_COLS), dy, out, rows, cols, alpha, acc);
}

static nncl_status ew_binary_backward(nncl__exec *ex, nncl_node *n) {
    nncl__view dy = nncl__grd(ex, n);
    size_t count = nncl__numel(n, ex->batch), bn = nncl__numel(n->in[1], ex->batch);
    size_t cols = bn, rows = count / cols; /* b's gradient sums dy [rows, bn] over its rows */
    int bc = ew_broadcast(n);
    float sign = n->op == NNCL_OP_SUB ? -1.0f : 1.0f;
    if (nncl__need_grad(ex, n, 0)) {
        int acc = nncl__grad_accumulate(ex, n, 0);
        if (n->op == NNCL_OP_MUL)
            NNCL_TRY(nncl__k_mul_backward(nncl__kl_of(ex, n, EW_K_BACKWARD), dy, nncl__val(ex, n->in[1]), bn,
                                          nncl__grd(ex, n->in[0]), count, acc));
        else if (n->in[0]->op == NNCL_OP_PARAM) /* a parameter's gradient: fp32 in half storage too */
            NNCL_TRY(ew_param_sum(ex, n, dy, nncl__grd(ex, n->in[0]), 1, count, 1.0f, acc));
        else
            NNCL_TRY(ew_axpy(ex, n, dy, nncl__grd(ex, n->in[0]), count, 1.0f, acc));
    }
    if (nncl__need_grad(ex, n, 1)) {
        int acc = nncl__grad_accumulate(ex, n, 1);
        nncl__view db = nncl__grd(ex, n->in[1]);
        if (n->op != NNCL_OP_MUL) {
            if (n->in[1]->op == NNCL_OP_PARAM)
                return ew_param_sum(ex, n, dy, db, rows, cols, sign, acc);
            return bc ? nncl__k_sum(nncl__kl_of(ex, n, EW_K_COLSUM), 0, dy, db, rows, cols, sign, acc)
                      : ew_axpy(ex, n, dy, db, count, sign, acc);
        }
        if (!bc)
            return nncl__k_mul_backward(nncl__kl_of(ex, n, EW_K_BACKWARD), dy, nncl__val(ex, n->in[0]), count, db,
                                        count, acc);
        return nncl__k_mul_backward_bcast(nncl__kl_of(ex, n, EW_K_MUL_BCAST), dy, nncl__val(ex, n->in[0]), db, rows,
                                          cols, acc);
    }
    return NNCL_OK;
}

void nncl__binary_ref(nncl__op op, const double *a, size_t n, const double *b, size_t bn, double *out) {
    size_t i;
    for (i = 0; i < n; i++) {
        double u = a[i], v = b[i % bn];
        out[i] = op == NNCL_OP_ADD ? u + v : op == NNCL_OP_SUB ? u - v : u * v;
    }
}

static void ew_binary_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                  double *aux) {
    (void)aux;
    nncl__binary_ref(n->op, in[0], nncl__numel(n, r->batch), in[1], nncl__numel(n->in[1], r->batch), out);
}

static void ew_binary_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                   const double *out, const double *gout, double *const *gin, double *aux) {
    size_t count = nncl__numel(n, r->batch), bn = nncl__numel(n->in[1], r->batch), i;
    (void)out; (void)aux;
    for (i = 0; i < count; i++) {
        double da = n->op == NNCL_OP_MUL ? in[1][i % bn] : 1;
        double db = n->op == NNCL_OP_MUL ? in[0][i] : n->op == NNCL_OP_SUB ? -1 : 1;
        if (gin[0]) gin[0][i] += gout[i] * da;
        if (gin[1]) gin[1][i % bn] += gout[i] * db;
    }
}

/* ------------------------------------------------------------- unary */

/* A unary op, all in one row (EW_UNARY below): its kernels in
 * cl/elementwise.cl, nncl_<op>_f32 (x, y, n[, p]) and
 * nncl_<op>_backward_f32 (dy, v, dx, n[, p], acc), where v is the op's
 * output when its row reads NNCL_BW_OUTPUT and its input otherwise; and its
 * maths in double for the reference: y = f(x, p) and dy/dx = df(x, y, p).
 * p is the node's fattr[0] (scale's alpha, leaky relu's slope, elu's alpha),
 * passed to the kernels when has_p is set. An op without a backward kernel
 * (scale) adds p dy with axpy. */
typedef struct ew_unary_def {
    int has_p;
    double (*f)(double x, double p);
    double (*df)(double x, double y, double p);
    int per8; /* the kernels take 8 elements a work-item (their _v8 forms) */
} ew_unary_def;

static const ew_unary_def *ew_unary_of(const nncl_node *n) {
    return (const ew_unary_def *)nncl__opdef_get(n->op)->impl;
}

/* p (scale's alpha, leaky relu's slope, elu's alpha) must be finite. */
static nncl_status ew_unary_check(nncl_graph *g, const nncl_node *n) {
    if (ew_unary_of(n)->has_p && !isfinite(n->fattr[0]))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": parameter %g is not finite",
                                 nncl__opdef_get(n->op)->name, n->name, (double)n->fattr[0]);
    return NNCL_OK;
}

/* A _v8 kernel's launch: buffers as the one-element form's, ceil(count / 8)
 * work-items. */
static nncl_status ew_unary8(nncl__exec *ex, nncl_node *n, int slot, nncl__view a0, nncl__view a1, nncl__view *a2,
                             size_t count, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__arg_view(&a, a0);
    nncl__arg_view(&a, a1);
    if (a2) nncl__arg_view(&a, *a2);
    nncl__arg_count(&a, count);
    if (a2) nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, (count + 7) / 8);
}

static nncl_status ew_unary_forward(nncl__exec *ex, nncl_node *n) {
    if (ew_unary_of(n)->per8)
        return ew_unary8(ex, n, EW_K_FORWARD, nncl__val(ex, n->in[0]), nncl__val(ex, n), NULL, nncl__numel(n, ex->batch),
                         0);
    return nncl__k_unary(nncl__kl_of(ex, n, EW_K_FORWARD), nncl__val(ex, n->in[0]), nncl__val(ex, n),
                         nncl__numel(n, ex->batch), ew_unary_of(n)->has_p ? &n->fattr[0] : NULL);
}

static nncl_status ew_unary_backward(nncl__exec *ex, nncl_node *n) {
    const ew_unary_def *u = ew_unary_of(n);
    size_t count = nncl__numel(n, ex->batch);
    const nncl__opdef *def = nncl__opdef_get(n->op);
    int acc, from_y = def->bw_reads == NNCL_BW_OUTPUT;
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    acc = nncl__grad_accumulate(ex, n, 0);
    if (def->n_kernels <= EW_K_BACKWARD || !def->kernels[EW_K_BACKWARD].name) /* linear: dx (+)= p dy */
        return ew_axpy(ex, n, nncl__grd(ex, n), nncl__grd(ex, n->in[0]), count, n->fattr[0], acc);
    if (u->per8) {
        nncl__view dx = nncl__grd(ex, n->in[0]);
        return ew_unary8(ex, n, EW_K_BACKWARD, nncl__grd(ex, n), nncl__val(ex, from_y ? n : n->in[0]), &dx, count, acc);
    }
    return nncl__k_unary_backward(nncl__kl_of(ex, n, EW_K_BACKWARD), nncl__grd(ex, n),
                                  nncl__val(ex, from_y ? n : n->in[0]), nncl__grd(ex, n->in[0]), count,
                                  u->has_p ? &n->fattr[0] : NULL, acc);
}

double nncl__unary_ref(nncl__op op, double x, double p) {
    return ((const ew_unary_def *)nncl__opdef_get(op)->impl)->f(x, p);
}

double nncl__unary_ref_grad(nncl__op op, double x, double y, double p) {
    return ((const ew_unary_def *)nncl__opdef_get(op)->impl)->df(x, y, p);
}

static void ew_unary_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                 double *aux) {
    const ew_unary_def *u = ew_unary_of(n);
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) out[i] = u->f(in[0][i], n->fattr[0]);
}

static void ew_unary_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                  const double *out, const double *gout, double *const *gin, double *aux) {
    const ew_unary_def *u = ew_unary_of(n);
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    if (!gin[0]) return;
    for (i = 0; i < count; i++) gin[0][i] += gout[i] * u->df(in[0][i], out[i], n->fattr[0]);
}

/* The maths of each unary op in double, PyTorch's definitions. Comparisons
 * are written so that a NaN input gives a NaN, as in PyTorch. */
#define EW_PI 3.14159265358979323846
static double ew_scale(double x, double p) { return p * x; }
static double ew_scale_d(double x, double y, double p) { (void)x; (void)y; return p; }
static double ew_relu(double x, double p) { (void)p; return x < 0 ? 0 : x; }
static double ew_relu_d(double x, double y, double p) { (void)x; (void)p; return y > 0; }
static double ew_leaky_relu(double x, double p) { return x < 0 ? p * x : x; }
static double ew_leaky_relu_d(double x, double y, double p) { (void)y; return x > 0 ? 1 : p; }
static double ew_sigmoid(double x, double p) { (void)p; return 1 / (1 + exp(-x)); }
static double ew_sigmoid_d(double x, double y, double p) { (void)x; (void)p; return y * (1 - y); }
static double ew_tanh(double x, double p) { (void)p; return tanh(x); }
static double ew_tanh_d(double x, double y, double p) { (void)x; (void)p; return 1 - y * y; }
/* erf form; erfc(-x/sqrt 2) rather than 1 + erf(x/sqrt 2): no cancellation */
static double ew_gelu(double x, double p) { (void)p; return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ew_gelu_d(double x, double y, double p) {
    (void)y; (void)p;
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * EW_PI);
}
/* tanh form (approximate='tanh'): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static double ew_gelu_tanh(double x, double p) {
    (void)p;
    return 0.5 * x * (1 + tanh(sqrt(2 / EW_PI) * (x + 0.044715 * x * x * x)));
}
static double ew_gelu_tanh_d(double x, double y, double p) {
    double t = tanh(sqrt(2 / EW_PI) * (x + 0.044715 * x * x * x));
    (void)y; (void)p;
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2 / EW_PI) * (1 + 3 * 0.044715 * x * x);
}
static double ew_silu(double x, double p) { (void)p; return x / (1 + exp(-x)); }
static double ew_silu_d(double x, double y, double p) {
    double s = 1 / (1 + exp(-x));
    (void)y; (void)p;
    return s * (1 + x * (1 - s));
}
/* MobileNet's activations, with PyTorch's gradients at the kinks: ReLU6 is
 * hardtanh(0, 6), whose gradient is 0 at both ends; hard-swish takes
 * x/3 + 1/2 on [-3, 3], ends included; hard-sigmoid 1/6 strictly inside. */
static double ew_relu6(double x, double p) { (void)p; return x <= 0 ? 0 : x >= 6 ? 6 : x; }
static double ew_relu6_d(double x, double y, double p) { (void)y; (void)p; return x <= 0 || x >= 6 ? 0 : 1; }
static double ew_hardswish(double x, double p) { (void)p; return x <= -3 ? 0 * x : x >= 3 ? x : x * (x + 3) / 6; }
static double ew_hardswish_d(double x, double y, double p) {
    (void)y; (void)p;
    return x < -3 ? 0 : x <= 3 ? x / 3 + 0.5 : 1;
}
static double ew_hardsigmoid(double x, double p) { (void)p; return x <= -3 ? 0 : x >= 3 ? 1 : x / 6 + 0.5; }
static double ew_hardsigmoid_d(double x, double y, double p) { (void)y; (void)p; return x > -3 && x < 3 ? 1.0 / 6 : 0; }
static double ew_elu(double x, double p) { return x > 0 ? x : p * expm1(x); }
static double ew_elu_d(double x, double y, double p) { (void)y; return x > 0 ? 1 : p * exp(x); }
/* beta 1, threshold 20 (PyTorch's defaults): linear above the threshold */
static double ew_softplus(double x, double p) { (void)p; return x > 20 ? x : log1p(exp(x)); }
static double ew_softplus_d(double x, double y, double p) { (void)y; (void)p; return x > 20 ? 1 : 1 / (1 + exp(-x)); }
#undef EW_PI

/* ------------------------------------------------------------- softmax */

/* Softmax's slots: a work-group per row (forward, backward), then a
 * work-item per row, which CPU-like devices take (nncl__row_kernels). */
enum { SM_K_ROWS = 2, SM_K_ROWS_BACKWARD };

/* The per-row kernel in slot: buffers a0, a1 (a2), rows, cols (acc). */
static nncl_status ew_softmax_rows(nncl__exec *ex, nncl_node *n, int slot, nncl__view a0, nncl__view a1,
                                   const nncl__view *a2, size_t rows, size_t cols, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__arg_view(&a, a0);
    nncl__arg_view(&a, a1);
    if (a2) nncl__arg_view(&a, *a2);
    nncl__arg_count(&a, rows);
    nncl__arg_count(&a, cols);
    if (a2) nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, rows);
}

static nncl_status ew_softmax_forward(nncl__exec *ex, nncl_node *n) {
    size_t cols = (size_t)ew_cols(n);
    if (nncl__row_kernels(ex))
        return ew_softmax_rows(ex, n, SM_K_ROWS, nncl__val(ex, n->in[0]), nncl__val(ex, n), NULL,
                               nncl__numel(n, ex->batch) / cols, cols, 0);
    return nncl__k_softmax(nncl__kl_of(ex, n, EW_K_FORWARD), nncl__val(ex, n->in[0]), nncl__val(ex, n),
                           nncl__numel(n, ex->batch) / cols, cols);
}

static nncl_status ew_softmax_backward(nncl__exec *ex, nncl_node *n) {
    size_t cols = (size_t)ew_cols(n);
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    if (nncl__row_kernels(ex)) {
        nncl__view dx = nncl__grd(ex, n->in[0]);
        return ew_softmax_rows(ex, n, SM_K_ROWS_BACKWARD, nncl__grd(ex, n), nncl__val(ex, n), &dx,
                               nncl__numel(n, ex->batch) / cols, cols, nncl__grad_accumulate(ex, n, 0));
    }
    return nncl__k_softmax_backward(nncl__kl_of(ex, n, EW_K_BACKWARD), nncl__grd(ex, n), nncl__val(ex, n),
                                    nncl__grd(ex, n->in[0]), nncl__numel(n, ex->batch) / cols, cols,
                                    nncl__grad_accumulate(ex, n, 0));
}

void nncl__softmax_ref(const double *x, size_t rows, size_t cols, int log_out, double *y) {
    size_t i, j;
    for (i = 0; i < rows; i++) {
        const double *z = x + i * cols;
        double m = z[0], s = 0;
        for (j = 1; j < cols; j++) m = z[j] > m ? z[j] : m;
        for (j = 0; j < cols; j++) s += exp(z[j] - m);
        for (j = 0; j < cols; j++) y[i * cols + j] = log_out ? z[j] - m - log(s) : exp(z[j] - m) / s;
    }
}

void nncl__softmax_ref_backward(const double *dy, const double *y, size_t rows, size_t cols, int log_in, double *dx,
                                int acc) {
    size_t i, j;
    for (i = 0; i < rows; i++) {
        const double *yr = y + i * cols, *g = dy + i * cols;
        double s = 0;
        for (j = 0; j < cols; j++) s += log_in ? g[j] : g[j] * yr[j];
        for (j = 0; j < cols; j++) {
            double d = log_in ? g[j] - exp(yr[j]) * s : yr[j] * (g[j] - s);
            dx[i * cols + j] = acc ? dx[i * cols + j] + d : d;
        }
    }
}

static void ew_softmax_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                   double *aux) {
    size_t cols = (size_t)ew_cols(n);
    (void)aux;
    nncl__softmax_ref(in[0], nncl__numel(n, r->batch) / cols, cols, n->op == NNCL_OP_LOG_SOFTMAX, out);
}

static void ew_softmax_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                    const double *out, const double *gout, double *const *gin, double *aux) {
    size_t cols = (size_t)ew_cols(n);
    (void)in; (void)aux;
    if (gin[0])
        nncl__softmax_ref_backward(gout, out, nncl__numel(n, r->batch) / cols, cols, n->op == NNCL_OP_LOG_SOFTMAX,
                                   gin[0], 1);
}

/* ------------------------------------------------------------- table */

/* Same-shape or broadcast binary ops: forward kernel nncl_<op>_f32; add and
 * sub pass gradients on with axpy and a column sum, mul with its own. */
#define EW_BINARY(NAME, KERNELS, HALF)                                                                      \
    const nncl__opdef nncl__opdef_##NAME = {                                                                \
        .name = #NAME, KERNELS, .shape = ew_binary_shape, .forward = ew_binary_forward,          \
        .backward = ew_binary_backward, .bw_reads = NNCL_BW_INPUTS, .ref_forward = ew_binary_ref_forward,   \
        .ref_backward = ew_binary_ref_backward, .half = HALF};
/* add and sub sum a parameter's gradient into fp32 (half 2: a learned
 * position or bias trains in half storage too) */
#define EW_SUM_KERNELS(NAME)                                                                                \
    NNCL_KERNELS(EW_KERNEL("nncl_" #NAME "_f32"), {NULL, NULL}, EW_AXPY_COLSUM, {NULL, NULL},                  \
                 {"reduce", "nncl_sum_f32_axis0_param"}, {"reduce", "nncl_sum_f32_axis0_param_cols"},           \
                 EW_KERNEL("nncl_" #NAME "_f32_v8"), EW_KERNEL("nncl_axpy_f32_v8"))
EW_BINARY(add, EW_SUM_KERNELS(add), 2)
EW_BINARY(sub, EW_SUM_KERNELS(sub), 2)
#define EW_MUL_KERNELS                                                                                      \
    NNCL_KERNELS(EW_KERNEL("nncl_mul_f32"), EW_KERNEL("nncl_mul_backward_f32"), {NULL, NULL}, {NULL, NULL},    \
                 EW_KERNEL("nncl_mul_backward_f32_bcast"), {NULL, NULL}, {NULL, NULL}, EW_KERNEL("nncl_mul_f32_v8"))
EW_BINARY(mul, EW_MUL_KERNELS, 1)

/* One unary op: its row in the op table and its ew_unary_def, kernels
 * nncl_<op>_f32 and nncl_<op>_backward_f32. HAS_P: the kernels take
 * fattr[0]. */
#define EW_UNARY(NAME, READS, HAS_P)                                                                        \
    static const ew_unary_def ew_def_##NAME = {HAS_P, ew_##NAME, ew_##NAME##_d, 0};                         \
    const nncl__opdef nncl__opdef_##NAME = {                                                                \
        .name = #NAME,                                                                                      \
        NNCL_KERNELS(EW_KERNEL("nncl_" #NAME "_f32"), EW_KERNEL("nncl_" #NAME "_backward_f32")),             \
        .shape = ew_unary_shape, .check = ew_unary_check, .forward = ew_unary_forward,                      \
        .backward = ew_unary_backward, .bw_reads = READS, .ref_forward = ew_unary_ref_forward,              \
        .ref_backward = ew_unary_ref_backward, .impl = &ew_def_##NAME, .half = 1};
/* scale has no backward kernel: axpy with alpha */
static const ew_unary_def ew_def_scale = {1, ew_scale, ew_scale_d, 0};
const nncl__opdef nncl__opdef_scale = {
    .name = "scale",
    NNCL_KERNELS(EW_KERNEL("nncl_scale_f32"), {NULL, NULL}, EW_KERNEL("nncl_axpy_f32"), {NULL, NULL}, {NULL, NULL},
                 {NULL, NULL}, {NULL, NULL}, {NULL, NULL}, EW_KERNEL("nncl_axpy_f32_v8")),
    .shape = ew_unary_shape, .check = ew_unary_check, .forward = ew_unary_forward, .backward = ew_unary_backward,
    .ref_forward = ew_unary_ref_forward, .ref_backward = ew_unary_ref_backward, .impl = &ew_def_scale, .half = 1};
/* The same on 8 elements a work-item, kernels nncl_<op>_f32_v8 and
 * nncl_<op>_backward_f32_v8. */
#define EW_UNARY8(NAME, READS)                                                                              \
    static const ew_unary_def ew_def_##NAME = {0, ew_##NAME, ew_##NAME##_d, 1};                             \
    const nncl__opdef nncl__opdef_##NAME = {                                                                \
        .name = #NAME,                                                                                      \
        NNCL_KERNELS(EW_KERNEL("nncl_" #NAME "_f32_v8"), EW_KERNEL("nncl_" #NAME "_backward_f32_v8")),      \
        .shape = ew_unary_shape, .check = ew_unary_check, .forward = ew_unary_forward,                      \
        .backward = ew_unary_backward, .bw_reads = READS, .ref_forward = ew_unary_ref_forward,              \
        .ref_backward = ew_unary_ref_backward, .impl = &ew_def_##NAME, .half = 1};
EW_UNARY8(relu, NNCL_BW_OUTPUT)
EW_UNARY(leaky_relu, NNCL_BW_INPUTS, 1)
EW_UNARY(sigmoid, NNCL_BW_OUTPUT, 0)
EW_UNARY(tanh, NNCL_BW_OUTPUT, 0)
/* gelu on 8 elements a work-item */
static const ew_unary_def ew_def_gelu = {0, ew_gelu, ew_gelu_d, 1};
const nncl__opdef nncl__opdef_gelu = {
    .name = "gelu", NNCL_KERNELS(EW_KERNEL("nncl_gelu_f32_v8"), EW_KERNEL("nncl_gelu_backward_f32_v8")),
    .shape = ew_unary_shape, .check = ew_unary_check, .forward = ew_unary_forward, .backward = ew_unary_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = ew_unary_ref_forward, .ref_backward = ew_unary_ref_backward,
    .impl = &ew_def_gelu, .half = 1};
EW_UNARY(gelu_tanh, NNCL_BW_INPUTS, 0)
EW_UNARY(silu, NNCL_BW_INPUTS, 0)
EW_UNARY(elu, NNCL_BW_INPUTS, 1)
EW_UNARY(softplus, NNCL_BW_INPUTS, 0)
EW_UNARY8(relu6, NNCL_BW_INPUTS)
EW_UNARY8(hardswish, NNCL_BW_INPUTS)
EW_UNARY(hardsigmoid, NNCL_BW_INPUTS, 0)

/* clamp: fattr[0] lo, fattr[1] hi, both finite; y = min(max(x, lo), hi) (hi
 * everywhere when lo > hi, as torch.clamp), dy/dx 1 on lo <= x <= hi, the
 * ends included (PyTorch's clamp backward), else 0; a NaN stays NaN. */
static nncl_status clamp_check(nncl_graph *g, const nncl_node *n) {
    if (!isfinite(n->fattr[0]) || !isfinite(n->fattr[1]))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "clamp \"%s\": bounds %g and %g must be finite",
                                 n->name, (double)n->fattr[0], (double)n->fattr[1]);
    return NNCL_OK;
}

/* (x, y, n, lo, hi) forward; (dy, x, dx, n, lo, hi, acc) backward */
static nncl_status clamp_run(nncl__exec *ex, nncl_node *n, int backward) {
    nncl__args a;
    size_t count = nncl__numel(n, ex->batch);
    int acc;
    if (backward && !nncl__need_grad(ex, n, 0)) return NNCL_OK;
    acc = backward ? nncl__grad_accumulate(ex, n, 0) : 0;
    NNCL_TRY(nncl__kbegin(ex, n, backward ? EW_K_BACKWARD : EW_K_FORWARD, &a));
    if (backward) nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, backward ? nncl__grd(ex, n->in[0]) : nncl__val(ex, n));
    nncl__arg_count(&a, count);
    nncl__arg_float(&a, n->fattr[0]);
    nncl__arg_float(&a, n->fattr[1]);
    if (backward) nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, count);
}
static nncl_status clamp_forward(nncl__exec *ex, nncl_node *n) { return clamp_run(ex, n, 0); }
static nncl_status clamp_backward(nncl__exec *ex, nncl_node *n) { return clamp_run(ex, n, 1); }

static void clamp_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                              double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) {
        double v = in[0][i] < n->fattr[0] ? n->fattr[0] : in[0][i];
        out[i] = v > n->fattr[1] ? n->fattr[1] : v;
    }
}

static void clamp_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                               const double *gout, double *const *gin, double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    (void)out;
    if (!gin[0]) return;
    for (i = 0; i < count; i++)
        if (in[0][i] >= n->fattr[0] && in[0][i] <= n->fattr[1]) gin[0][i] += gout[i];
}

const nncl__opdef nncl__opdef_clamp = {
    .name = "clamp", NNCL_KERNELS(EW_KERNEL("nncl_clamp_f32"), EW_KERNEL("nncl_clamp_backward_f32")),
    .shape = ew_unary_shape, .check = clamp_check, .forward = clamp_forward, .backward = clamp_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = clamp_ref_forward, .ref_backward = clamp_ref_backward, .half = 1};

/* Row-wise softmaxes of cl/softmax.cl. */
#define EW_SOFTMAX(NAME)                                                                                    \
    const nncl__opdef nncl__opdef_##NAME = {                                                                \
        .name = #NAME,                                                                                      \
        NNCL_KERNELS({"softmax", "nncl_" #NAME "_f32"}, {"softmax", "nncl_" #NAME "_backward_f32"},         \
                     {"softmax", "nncl_" #NAME "_f32_rows"}, {"softmax", "nncl_" #NAME "_backward_f32_rows"}), \
        .shape = ew_unary_shape, .forward = ew_softmax_forward, .backward = ew_softmax_backward,            \
        .bw_reads = NNCL_BW_OUTPUT, .ref_forward = ew_softmax_ref_forward,                                  \
        .ref_backward = ew_softmax_ref_backward, .half = 1};
EW_SOFTMAX(softmax)
EW_SOFTMAX(log_softmax)
#undef EW_BINARY
#undef EW_UNARY
#undef EW_SOFTMAX
#undef EW_SUM_KERNELS
#undef EW_KERNEL
#undef EW_AXPY_COLSUM
#undef EW_MUL_KERNELS

/* ------------------------------------------------------------- builders */

static nncl_node *ew_binary(nncl_graph *g, nncl__op op, nncl_node *a, nncl_node *b) {
    nncl_node *in[2];
    in[0] = a;
    in[1] = b;
    return nncl__node_add(g, op, NULL, 2, in, NULL, 0, NULL, 0);
}

static nncl_node *ew_unary(nncl_graph *g, nncl__op op, nncl_node *x, float p) {
    return nncl__node_add(g, op, NULL, 1, &x, NULL, 0, &p, 1);
}

nncl_node *nncl_op_add(nncl_graph *g, nncl_node *a, nncl_node *b) { return ew_binary(g, NNCL_OP_ADD, a, b); }
nncl_node *nncl_op_sub(nncl_graph *g, nncl_node *a, nncl_node *b) { return ew_binary(g, NNCL_OP_SUB, a, b); }
nncl_node *nncl_op_mul(nncl_graph *g, nncl_node *a, nncl_node *b) { return ew_binary(g, NNCL_OP_MUL, a, b); }
nncl_node *nncl_op_scale(nncl_graph *g, nncl_node *x, float alpha) { return ew_unary(g, NNCL_OP_SCALE, x, alpha); }
nncl_node *nncl_op_relu(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_RELU, x, 0); }
nncl_node *nncl_op_leaky_relu(nncl_graph *g, nncl_node *x, float slope) {
    return ew_unary(g, NNCL_OP_LEAKY_RELU, x, slope);
}
nncl_node *nncl_op_sigmoid(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_SIGMOID, x, 0); }
nncl_node *nncl_op_tanh(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_TANH, x, 0); }
nncl_node *nncl_op_gelu(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_GELU, x, 0); }
nncl_node *nncl_op_gelu_tanh(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_GELU_TANH, x, 0); }
nncl_node *nncl_op_silu(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_SILU, x, 0); }
nncl_node *nncl_op_elu(nncl_graph *g, nncl_node *x, float alpha) { return ew_unary(g, NNCL_OP_ELU, x, alpha); }
nncl_node *nncl_op_softplus(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_SOFTPLUS, x, 0); }
nncl_node *nncl_op_relu6(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_RELU6, x, 0); }
nncl_node *nncl_op_hardswish(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_HARDSWISH, x, 0); }
nncl_node *nncl_op_hardsigmoid(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_HARDSIGMOID, x, 0); }
nncl_node *nncl_op_clamp(nncl_graph *g, nncl_node *x, float min, float max) {
    float f[2];
    f[0] = min;
    f[1] = max;
    return nncl__node_add(g, NNCL_OP_CLAMP, NULL, 1, &x, NULL, 0, f, 2);
}
nncl_node *nncl_op_softmax(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_SOFTMAX, x, 0); }
nncl_node *nncl_op_log_softmax(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_LOG_SOFTMAX, x, 0); }
