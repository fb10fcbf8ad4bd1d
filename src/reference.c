/* reference.c - host references of the eager ops and activation backward
 * rules: plain loops over doubles, the numerically careful form of each
 * formula (max-subtracted softmax, erfc for gelu), the yardstick for every
 * device kernel. Activations and softmaxes use the graph ops' maths. */
#include "reference.h"
#include "graph.h"

/* The activations' maths is the graph ops' (op_elementwise.c): one
 * definition of each, here applied to whole arrays. */
static void ref_unary(nncl__op op, const double *x, size_t n, double p, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = nncl__unary_ref(op, x[i], p);
}

/* dx = dy f'(.), from the input x or the output y (whichever the rule reads). */
static void ref_unary_backward(nncl__op op, const double *dy, const double *x, const double *y, size_t n, double p,
                               double *dx) {
    size_t i;
    for (i = 0; i < n; i++) dx[i] = dy[i] * nncl__unary_ref_grad(op, x ? x[i] : y[i], y ? y[i] : x[i], p);
}

void nncl__ref_add(const double *a, size_t n, const double *b, size_t bn, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = a[i] + b[i % bn];
}
void nncl__ref_sub(const double *a, size_t n, const double *b, size_t bn, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = a[i] - b[i % bn];
}
void nncl__ref_mul(const double *a, size_t n, const double *b, size_t bn, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = a[i] * b[i % bn];
}
void nncl__ref_scale(const double *x, size_t n, double alpha, double *out) {
    ref_unary(NNCL_OP_SCALE, x, n, alpha, out);
}
void nncl__ref_relu(const double *x, size_t n, double *out) { ref_unary(NNCL_OP_RELU, x, n, 0, out); }
void nncl__ref_leaky_relu(const double *x, size_t n, double slope, double *out) {
    ref_unary(NNCL_OP_LEAKY_RELU, x, n, slope, out);
}
void nncl__ref_sigmoid(const double *x, size_t n, double *out) { ref_unary(NNCL_OP_SIGMOID, x, n, 0, out); }
void nncl__ref_tanh(const double *x, size_t n, double *out) { ref_unary(NNCL_OP_TANH, x, n, 0, out); }
void nncl__ref_gelu(const double *x, size_t n, double *out) { ref_unary(NNCL_OP_GELU, x, n, 0, out); }

void nncl__ref_softmax(const double *x, size_t rows, size_t cols, double *out) {
    nncl__softmax_ref(x, rows, cols, 0, out);
}
void nncl__ref_log_softmax(const double *x, size_t rows, size_t cols, double *out) {
    nncl__softmax_ref(x, rows, cols, 1, out);
}

void nncl__ref_sum(const double *x, size_t rows, size_t cols, int axis, double *out) {
    size_t r, c;
    for (c = 0; c < (axis ? rows : cols); c++) out[c] = 0;
    for (r = 0; r < rows; r++)
        for (c = 0; c < cols; c++) out[axis ? r : c] += x[r * cols + c];
}
void nncl__ref_mean(const double *x, size_t rows, size_t cols, int axis, double *out) {
    size_t i, n = axis ? rows : cols;
    nncl__ref_sum(x, rows, cols, axis, out);
    for (i = 0; i < n; i++) out[i] /= (double)(axis ? cols : rows);
}

void nncl__ref_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, double alpha, const double *a,
                    const double *b, double beta, const double *c0, double *c) {
    size_t i, j, p;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            double s = 0;
            for (p = 0; p < k; p++)
                s += (trans_a ? a[p * m + i] : a[i * k + p]) * (trans_b ? b[j * k + p] : b[p * n + j]);
            c[i * n + j] = alpha * s + beta * c0[i * n + j];
        }
}

void nncl__ref_relu_backward(const double *dy, const double *y, size_t n, double *dx) {
    ref_unary_backward(NNCL_OP_RELU, dy, NULL, y, n, 0, dx);
}
void nncl__ref_leaky_relu_backward(const double *dy, const double *x, size_t n, double slope, double *dx) {
    ref_unary_backward(NNCL_OP_LEAKY_RELU, dy, x, NULL, n, slope, dx);
}
void nncl__ref_sigmoid_backward(const double *dy, const double *y, size_t n, double *dx) {
    ref_unary_backward(NNCL_OP_SIGMOID, dy, NULL, y, n, 0, dx);
}
void nncl__ref_tanh_backward(const double *dy, const double *y, size_t n, double *dx) {
    ref_unary_backward(NNCL_OP_TANH, dy, NULL, y, n, 0, dx);
}
void nncl__ref_gelu_backward(const double *dy, const double *x, size_t n, double *dx) {
    ref_unary_backward(NNCL_OP_GELU, dy, x, NULL, n, 0, dx);
}

void nncl__ref_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx) {
    nncl__softmax_ref_backward(dy, y, rows, cols, 0, dx, 0);
}
void nncl__ref_log_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx) {
    nncl__softmax_ref_backward(dy, y, rows, cols, 1, dx, 0);
}
