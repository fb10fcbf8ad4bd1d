/* reference.c - host references of the eager computations that are no
 * graph op of their own: row and column sums and means, and the matrix
 * product, in plain loops over doubles (the yardstick for the reduce and
 * GEMM kernels). The elementwise ops' references are the graph ops' own
 * (graph.h). */
#include "ops/reference.h"

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
