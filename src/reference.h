/* reference.h - host references of the eager ops and of the activation
 * backward rules, in plain C on double arrays (inputs read, outputs written;
 * an output may be an input unless noted). The tests compare every device
 * with these; [rows, cols] arrays are row-major. */
#ifndef NNCL_REFERENCE_H
#define NNCL_REFERENCE_H
#include <stddef.h>

/* out[i] = a[i] op b[i % bn]: bn == n, or bn == cols for a row vector
 * broadcast over the rows of a. */
void nncl__ref_add(const double *a, size_t n, const double *b, size_t bn, double *out);
void nncl__ref_sub(const double *a, size_t n, const double *b, size_t bn, double *out);
void nncl__ref_mul(const double *a, size_t n, const double *b, size_t bn, double *out);
/* out = alpha x */
void nncl__ref_scale(const double *x, size_t n, double alpha, double *out);
void nncl__ref_relu(const double *x, size_t n, double *out);
/* x for x >= 0, slope x below */
void nncl__ref_leaky_relu(const double *x, size_t n, double slope, double *out);
void nncl__ref_sigmoid(const double *x, size_t n, double *out);
void nncl__ref_tanh(const double *x, size_t n, double *out);
/* x/2 (1 + erf(x/sqrt 2)) */
void nncl__ref_gelu(const double *x, size_t n, double *out);
/* Over each row of [rows, cols], with the row maximum subtracted. */
void nncl__ref_softmax(const double *x, size_t rows, size_t cols, double *out);
void nncl__ref_log_softmax(const double *x, size_t rows, size_t cols, double *out);
/* x [rows, cols]; axis 0: out[cols] sums over the rows; axis 1: out[rows]
 * sums over the columns. Mean divides by the count summed. out must not be x. */
void nncl__ref_sum(const double *x, size_t rows, size_t cols, int axis, double *out);
void nncl__ref_mean(const double *x, size_t rows, size_t cols, int axis, double *out);
/* c = alpha op(a) op(b) + beta c0, row-major: op(a) [m, k], op(b) [k, n],
 * c0 and c [m, n]; a transposed is stored [k, m], b transposed [n, k].
 * c may be c0, not a or b. */
void nncl__ref_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, double alpha, const double *a,
                    const double *b, double beta, const double *c0, double *c);

/* Backward rules: dx = dy * f'(.), overwriting dx, from the forward output y
 * (relu, sigmoid, tanh) or the input x (leaky relu, gelu), as the device
 * kernels take them. */
void nncl__ref_relu_backward(const double *dy, const double *y, size_t n, double *dx);
void nncl__ref_leaky_relu_backward(const double *dy, const double *x, size_t n, double slope, double *dx);
void nncl__ref_sigmoid_backward(const double *dy, const double *y, size_t n, double *dx);
void nncl__ref_tanh_backward(const double *dy, const double *y, size_t n, double *dx);
void nncl__ref_gelu_backward(const double *dy, const double *x, size_t n, double *dx);
/* Per row, from y = softmax(x): dx = y (dy - sum(dy y)); from y =
 * log_softmax(x): dx = dy - exp(y) sum(dy). dx may be dy. */
void nncl__ref_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx);
void nncl__ref_log_softmax_backward(const double *dy, const double *y, size_t rows, size_t cols, double *dx);

#endif /* NNCL_REFERENCE_H */
