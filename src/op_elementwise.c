/* op_elementwise.c - graph ops applied element by element or per row: add,
 * sub and mul (b of a's shape, or a vector over a's last dimension), scale,
 * the activations and softmax / log-softmax over the last dimension. The
 * kernels are those of the eager ops (cl/elementwise.cl, cl/softmax.cl,
 * cl/reduce.cl); the rules below add shapes, backward and references. */
#include "graph.h"
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

/* b broadcast over rows when it is a vector of a's last dimension. */
static int ew_broadcast(const nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    return !(b->batched == a->batched && b->sample_numel == a->sample_numel);
}

static nncl_status ew_binary_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    char s1[64], s2[64];
    int cols = a->shape[a->ndim - 1];
    if (!(b->batched == a->batched && b->sample_numel == a->sample_numel) &&
        !(!b->batched && b->ndim == 1 && b->shape[0] == cols))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": b %s is neither a's shape %s nor a vector [%d]",
                                 nncl__opdef_get(n->op)->name, n->name, nncl__shape_str(b, s1, sizeof s1),
                                 nncl__shape_str(a, s2, sizeof s2), cols);
    ew_copy_shape(n, a);
    return NNCL_OK;
}

static int ew_cols(const nncl_node *n) { return n->shape[n->ndim - 1]; }

/* ------------------------------------------------------------- binary */

static nncl_status ew_binary_forward(nncl__exec *x, nncl_node *n) {
    static const char *k[3] = {"nncl_add_f32", "nncl_sub_f32", "nncl_mul_f32"};
    nncl__args a;
    size_t count = nncl__numel(n, x->batch);
    NNCL_TRY(nncl__kbegin(x, "elementwise", k[n->op - NNCL_OP_ADD], &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__val(x, n->in[1]));
    nncl__arg_int(&a, (int)nncl__numel(n->in[1], x->batch));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_int(&a, (int)count);
    return nncl__launch_1d(&a, x->dev, count);
}

/* dst (+)= alpha * dy, the gradient of a sum's operand of the same shape. */
static nncl_status ew_axpy(nncl__exec *x, nncl__view dy, nncl__view dst, size_t count, float alpha, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(x, "elementwise", "nncl_axpy_f32", &a));
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, dst);
    nncl__arg_int(&a, (int)count);
    nncl__arg_float(&a, alpha);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, x->dev, count);
}

/* db[c] (+)= alpha * sum over rows of dy[r, c]. */
static nncl_status ew_colsum(nncl__exec *x, nncl__view dy, nncl__view db, int rows, int cols, float alpha, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(x, "reduce", "nncl_sum_f32_axis0", &a));
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, db);
    nncl__arg_int(&a, rows);
    nncl__arg_int(&a, cols);
    nncl__arg_float(&a, alpha);
    nncl__arg_int(&a, acc);
    return nncl__launch_cols(&a, x->dev, (size_t)rows, (size_t)cols);
}

static nncl_status ew_mul_grad(nncl__exec *x, nncl__view dy, nncl__view other, size_t on, nncl__view dst,
                               size_t count, int acc) {
    nncl__args a;
    NNCL_TRY(nncl__kbegin(x, "elementwise", "nncl_mul_backward_f32", &a));
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, other);
    nncl__arg_int(&a, (int)on);
    nncl__arg_view(&a, dst);
    nncl__arg_int(&a, (int)count);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, x->dev, count);
}

static nncl_status ew_binary_backward(nncl__exec *x, nncl_node *n) {
    nncl__view dy = nncl__grd(x, n);
    size_t count = nncl__numel(n, x->batch), bn = nncl__numel(n->in[1], x->batch);
    int cols = ew_cols(n), rows = (int)(count / (size_t)cols), bc = ew_broadcast(n);
    float sign = n->op == NNCL_OP_SUB ? -1.0f : 1.0f;
    if (nncl__need_grad(x, n, 0)) {
        int acc = nncl__grad_accumulate(x, n, 0);
        if (n->op == NNCL_OP_MUL)
            NNCL_TRY(ew_mul_grad(x, dy, nncl__val(x, n->in[1]), bn, nncl__grd(x, n->in[0]), count, acc));
        else
            NNCL_TRY(ew_axpy(x, dy, nncl__grd(x, n->in[0]), count, 1.0f, acc));
    }
    if (nncl__need_grad(x, n, 1)) {
        int acc = nncl__grad_accumulate(x, n, 1);
        nncl__view db = nncl__grd(x, n->in[1]);
        if (n->op != NNCL_OP_MUL)
            return bc ? ew_colsum(x, dy, db, rows, cols, sign, acc) : ew_axpy(x, dy, db, count, sign, acc);
        if (!bc) return ew_mul_grad(x, dy, nncl__val(x, n->in[0]), count, db, count, acc);
        {
            nncl__args a;
            NNCL_TRY(nncl__kbegin(x, "elementwise", "nncl_mul_bcast_grad_f32", &a));
            nncl__arg_view(&a, dy);
            nncl__arg_view(&a, nncl__val(x, n->in[0]));
            nncl__arg_view(&a, db);
            nncl__arg_int(&a, rows);
            nncl__arg_int(&a, cols);
            nncl__arg_int(&a, acc);
            return nncl__launch_1d(&a, x->dev, (size_t)cols);
        }
    }
    return NNCL_OK;
}

static void ew_binary_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                  double *aux) {
    size_t count = nncl__numel(n, r->batch), bn = nncl__numel(n->in[1], r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) {
        double a = in[0][i], b = in[1][i % bn];
        out[i] = n->op == NNCL_OP_ADD ? a + b : n->op == NNCL_OP_SUB ? a - b : a * b;
    }
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

static const char *ew_forward_kernel(nncl__op op) {
    switch (op) {
    case NNCL_OP_SCALE: return "nncl_scale_f32";
    case NNCL_OP_RELU: return "nncl_relu_f32";
    case NNCL_OP_LEAKY_RELU: return "nncl_leaky_relu_f32";
    case NNCL_OP_SIGMOID: return "nncl_sigmoid_f32";
    case NNCL_OP_TANH: return "nncl_tanh_f32";
    default: return "nncl_gelu_f32";
    }
}

static int ew_has_param(nncl__op op) { return op == NNCL_OP_SCALE || op == NNCL_OP_LEAKY_RELU; }

static nncl_status ew_unary_forward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    size_t count = nncl__numel(n, x->batch);
    NNCL_TRY(nncl__kbegin(x, "elementwise", ew_forward_kernel(n->op), &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_int(&a, (int)count);
    if (ew_has_param(n->op)) nncl__arg_float(&a, n->fattr[0]);
    return nncl__launch_1d(&a, x->dev, count);
}

static nncl_status ew_unary_backward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    size_t count = nncl__numel(n, x->batch);
    int acc;
    const char *k;
    nncl__view v;
    if (!nncl__need_grad(x, n, 0)) return NNCL_OK;
    acc = nncl__grad_accumulate(x, n, 0);
    if (n->op == NNCL_OP_SCALE) return ew_axpy(x, nncl__grd(x, n), nncl__grd(x, n->in[0]), count, n->fattr[0], acc);
    switch (n->op) {
    case NNCL_OP_RELU: k = "nncl_relu_backward_f32"; v = nncl__val(x, n); break;
    case NNCL_OP_SIGMOID: k = "nncl_sigmoid_backward_f32"; v = nncl__val(x, n); break;
    case NNCL_OP_TANH: k = "nncl_tanh_backward_f32"; v = nncl__val(x, n); break;
    case NNCL_OP_LEAKY_RELU: k = "nncl_leaky_relu_backward_f32"; v = nncl__val(x, n->in[0]); break;
    default: k = "nncl_gelu_backward_f32"; v = nncl__val(x, n->in[0]); break;
    }
    NNCL_TRY(nncl__kbegin(x, "elementwise", k, &a));
    nncl__arg_view(&a, nncl__grd(x, n));
    nncl__arg_view(&a, v);
    nncl__arg_view(&a, nncl__grd(x, n->in[0]));
    nncl__arg_int(&a, (int)count);
    if (n->op == NNCL_OP_LEAKY_RELU) nncl__arg_float(&a, n->fattr[0]);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, x->dev, count);
}

static double ew_gelu(double v) { return 0.5 * v * erfc(-v / sqrt(2.0)); }

static void ew_unary_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                 double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    for (i = 0; i < count; i++) {
        double v = in[0][i];
        switch (n->op) {
        case NNCL_OP_SCALE: out[i] = n->fattr[0] * v; break;
        case NNCL_OP_RELU: out[i] = v < 0 ? 0 : v; break;
        case NNCL_OP_LEAKY_RELU: out[i] = v < 0 ? n->fattr[0] * v : v; break;
        case NNCL_OP_SIGMOID: out[i] = 1 / (1 + exp(-v)); break;
        case NNCL_OP_TANH: out[i] = tanh(v); break;
        default: out[i] = ew_gelu(v); break;
        }
    }
}

static void ew_unary_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                  const double *out, const double *gout, double *const *gin, double *aux) {
    size_t count = nncl__numel(n, r->batch), i;
    (void)aux;
    if (!gin[0]) return;
    for (i = 0; i < count; i++) {
        double v = in[0][i], y = out[i], d;
        switch (n->op) {
        case NNCL_OP_SCALE: d = n->fattr[0]; break;
        case NNCL_OP_RELU: d = y > 0; break;
        case NNCL_OP_LEAKY_RELU: d = v > 0 ? 1 : n->fattr[0]; break;
        case NNCL_OP_SIGMOID: d = y * (1 - y); break;
        case NNCL_OP_TANH: d = 1 - y * y; break;
        default: d = 0.5 * erfc(-v / sqrt(2.0)) + v * exp(-0.5 * v * v) / sqrt(2 * 3.14159265358979323846); break;
        }
        gin[0][i] += gout[i] * d;
    }
}

/* ------------------------------------------------------------- softmax */

static nncl_status ew_softmax_forward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int cols = ew_cols(n), rows = (int)(nncl__numel(n, x->batch) / (size_t)cols);
    NNCL_TRY(nncl__kbegin(x, "softmax", n->op == NNCL_OP_SOFTMAX ? "nncl_softmax_f32" : "nncl_log_softmax_f32", &a));
    nncl__arg_view(&a, nncl__val(x, n->in[0]));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_int(&a, rows);
    nncl__arg_int(&a, cols);
    return nncl__launch_rows(&a, x->dev, (size_t)rows, (size_t)cols);
}

static nncl_status ew_softmax_backward(nncl__exec *x, nncl_node *n) {
    nncl__args a;
    int cols = ew_cols(n), rows = (int)(nncl__numel(n, x->batch) / (size_t)cols);
    if (!nncl__need_grad(x, n, 0)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(x, "softmax",
                          n->op == NNCL_OP_SOFTMAX ? "nncl_softmax_backward_f32" : "nncl_log_softmax_backward_f32", &a));
    nncl__arg_view(&a, nncl__grd(x, n));
    nncl__arg_view(&a, nncl__val(x, n));
    nncl__arg_view(&a, nncl__grd(x, n->in[0]));
    nncl__arg_int(&a, rows);
    nncl__arg_int(&a, cols);
    nncl__arg_int(&a, nncl__grad_accumulate(x, n, 0));
    return nncl__launch_rows(&a, x->dev, (size_t)rows, (size_t)cols);
}

static void ew_softmax_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                   double *aux) {
    size_t cols = (size_t)ew_cols(n), rows = nncl__numel(n, r->batch) / cols, i, j;
    (void)aux;
    for (i = 0; i < rows; i++) {
        const double *z = in[0] + i * cols;
        double m = z[0], s = 0;
        for (j = 1; j < cols; j++) m = z[j] > m ? z[j] : m;
        for (j = 0; j < cols; j++) s += exp(z[j] - m);
        for (j = 0; j < cols; j++)
            out[i * cols + j] = n->op == NNCL_OP_SOFTMAX ? exp(z[j] - m) / s : z[j] - m - log(s);
    }
}

static void ew_softmax_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                    const double *out, const double *gout, double *const *gin, double *aux) {
    size_t cols = (size_t)ew_cols(n), rows = nncl__numel(n, r->batch) / cols, i, j;
    (void)in; (void)aux;
    if (!gin[0]) return;
    for (i = 0; i < rows; i++) {
        const double *y = out + i * cols, *g = gout + i * cols;
        double s = 0;
        for (j = 0; j < cols; j++) s += n->op == NNCL_OP_SOFTMAX ? g[j] * y[j] : g[j];
        for (j = 0; j < cols; j++)
            gin[0][i * cols + j] += n->op == NNCL_OP_SOFTMAX ? y[j] * (g[j] - s) : g[j] - exp(y[j]) * s;
    }
}

/* ------------------------------------------------------------- table */

#define EW_BINARY(NAME)                                                                                     \
    {.name = NAME, .shape = ew_binary_shape, .forward = ew_binary_forward, .backward = ew_binary_backward,    \
     .bw_reads = NNCL_BW_INPUTS, .ref_forward = ew_binary_ref_forward, .ref_backward = ew_binary_ref_backward}
#define EW_UNARY(NAME, READS)                                                                               \
    {.name = NAME, .shape = ew_unary_shape, .forward = ew_unary_forward, .backward = ew_unary_backward,       \
     .bw_reads = READS, .ref_forward = ew_unary_ref_forward, .ref_backward = ew_unary_ref_backward}
#define EW_SOFTMAX(NAME)                                                                                    \
    {.name = NAME, .shape = ew_unary_shape, .forward = ew_softmax_forward, .backward = ew_softmax_backward,   \
     .bw_reads = NNCL_BW_OUTPUT, .ref_forward = ew_softmax_ref_forward, .ref_backward = ew_softmax_ref_backward}
const nncl__opdef nncl__opdef_add = EW_BINARY("add");
const nncl__opdef nncl__opdef_sub = EW_BINARY("sub");
const nncl__opdef nncl__opdef_mul = EW_BINARY("mul");
const nncl__opdef nncl__opdef_scale = EW_UNARY("scale", 0);
const nncl__opdef nncl__opdef_relu = EW_UNARY("relu", NNCL_BW_OUTPUT);
const nncl__opdef nncl__opdef_leaky_relu = EW_UNARY("leaky_relu", NNCL_BW_INPUTS);
const nncl__opdef nncl__opdef_sigmoid = EW_UNARY("sigmoid", NNCL_BW_OUTPUT);
const nncl__opdef nncl__opdef_tanh = EW_UNARY("tanh", NNCL_BW_OUTPUT);
const nncl__opdef nncl__opdef_gelu = EW_UNARY("gelu", NNCL_BW_INPUTS);
const nncl__opdef nncl__opdef_softmax = EW_SOFTMAX("softmax");
const nncl__opdef nncl__opdef_log_softmax = EW_SOFTMAX("log_softmax");
#undef EW_BINARY
#undef EW_UNARY
#undef EW_SOFTMAX

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
nncl_node *nncl_op_softmax(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_SOFTMAX, x, 0); }
nncl_node *nncl_op_log_softmax(nncl_graph *g, nncl_node *x) { return ew_unary(g, NNCL_OP_LOG_SOFTMAX, x, 0); }
