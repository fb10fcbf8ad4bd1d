/* reference.c - host references of the eager ops and activation backward
 * rules: plain loops over doubles, the numerically careful form of each
 * formula (max-subtracted softmax, erfc for gelu), the yardstick for every
 * device kernel. */
#include "reference.h"
#include <math.h>

#define REF_SQRT1_2 0.70710678118654752440
#define REF_INV_SQRT_2PI 0.39894228040143267794

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
    size_t i;
    for (i = 0; i < n; i++) out[i] = alpha * x[i];
}
void nncl__ref_relu(const double *x, size_t n, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = x[i] < 0 ? 0 : x[i];
}
void nncl__ref_leaky_relu(const double *x, size_t n, double slope, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = x[i] < 0 ? slope * x[i] : x[i];
}
void nncl__ref_sigmoid(const double *x, size_t n, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = 1 / (1 + exp(-x[i]));
}
void nncl__ref_tanh(const double *x, size_t n, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = tanh(x[i]);
}
/* 1 + erf(t) = erfc(-t), exact also where erf(t) is close to -1 */
void nncl__ref_gelu(const double *x, size_t n, double *out) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = 0.5 * x[i] * erfc(-x[i] * REF_SQRT1_2);
}

static void ref_softmax_rows(const double *x, size_t rows, size_t cols, int log_out, double *out) {
    size_t r, c;
    for (r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double *yr = out + r * cols, m = xr[0], s = 0;
        for (c = 1; c < cols; c++)
            if (xr[c] > m) m = xr[c];
        for (c = 0; c < cols; c++) s += exp(xr[c] - m);
        for (c = 0; c < cols; c++) yr[c] = log_out ? xr[c] - m - log(s) : exp(xr[c] - m) / s;
    }
}
void nncl__ref_softmax(const double *x, size_t rows, size_t cols, double *out) {
    ref_softmax_rows(x, rows, cols, 0, out);
}
void nncl__ref_log_softmax(const double *x, size_t rows, size_t cols, double *out) {
    ref_softmax_rows(x, rows, cols, 1, out);
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
    size_t i;
    for (i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
}
void nncl__ref_leaky_relu_backward(const double *dy, const double *x, size_t n, double slope, double *dx) {
    size_t i;
    for (i = 0; i < n; i++) dx[i] = x[i] > 0 ? dy[i] : slope * dy[i];
}
void nncl__ref_sigmoid_backward(const double *dy, const double *y, size_t n, double *dx) {
    size_t i;
    for (i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1 - y[i]);
}
void nncl__ref_tanh_backward(const double *dy, const double *y, size_t n, double *dx) {
    size_t i;
    for (i = 0; i < n; i++) dx[i] = dy[i] * (1 - y[i] * y[i]);
}
/* gelu'(x) = Phi(x) + x phi(x) */
void nncl__ref_gelu_backward(const double *dy, const double *x, size_t n, double *dx) {
    size_t i;
    for (i = 0; i < n; i++)
        dx[i] = dy[i] * (0.5 * erfc(-x[i] * REF_SQRT1_2) + x[i] * REF_INV_SQRT_2PI * exp(-0.5 * x[i] * x[i]));
}

static void ref_softmax_backward_rows(const double *dy, const double *y, size_t rows, size_t cols, int log_in,
                                      double *dx) {
    size_t r, c;
    for (r = 0; r < rows; r++) {
        const double *g = dy + r * cols, *yr = y + r * cols;
        double *d = dx + r * cols, s = 0;
        for (c = 0; c < cols; c++) s += log_in ? g[c] : g[c] * yr[c];
        for (c = 0; c < cols; c++) d[c] = log_in ? g[c] - exp(yr[c]) * s : yr[c] * (g[c] - s);
    }
}
void nncl__ref_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx) {
    ref_softmax_backward_rows(dy, y, rows, cols, 0, dx);
}
void nncl__ref_log_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx) {
    ref_softmax_backward_rows(dy, y, rows, cols, 1, dx);
}

#undef REF_SQRT1_2
#undef REF_INV_SQRT_2PI
