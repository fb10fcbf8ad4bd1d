/* reference.h - host references of the eager computations that are no
 * graph op of their own (sums, means, the matrix product), in plain C on
 * double arrays; [rows, cols] arrays are row-major. The elementwise ops'
 * references are the graph ops' own (graph.h: nncl__binary_ref,
 * nncl__unary_ref, nncl__softmax_ref). */
#ifndef NNCL_REFERENCE_H
#define NNCL_REFERENCE_H
#include <stddef.h>

/* x [rows, cols]; axis 0: out[cols] sums over the rows; axis 1: out[rows]
 * sums over the columns. Mean divides by the count summed (axis 1 is also
 * global_avgpool's reference). out must not be x. */
void nncl__ref_sum(const double *x, size_t rows, size_t cols, int axis, double *out);
void nncl__ref_mean(const double *x, size_t rows, size_t cols, int axis, double *out);
/* c = alpha op(a) op(b) + beta c0, row-major: op(a) [m, k], op(b) [k, n],
 * c0 and c [m, n]; a transposed is stored [k, m], b transposed [n, k].
 * c may be c0, not a or b. */
void nncl__ref_gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, double alpha, const double *a,
                    const double *b, double beta, const double *c0, double *c);

#endif /* NNCL_REFERENCE_H */
