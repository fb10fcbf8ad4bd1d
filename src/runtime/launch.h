/* launch.h - each kernel's argument order, written once: typed launch
 * wrappers for the kernel families that graph ops, eager ops and tests all
 * launch (cl/elementwise.cl, cl/softmax.cl, cl/reduce.cl) and for the
 * losses (cl/loss.cl). A wrapper takes a resolved kernel (nncl__kl) and
 * views (buffer and element offset): the graph ops pass their node's slot
 * (nncl__kl_of, graph.h), the eager ops and tests a kernel found by name
 * (nncl__kl_find). Every wrapper queues one launch and waits for nothing.
 * acc 1 adds to the destination, 0 overwrites it without reading it. */
#ifndef NNCL_LAUNCH_H
#define NNCL_LAUNCH_H
#include "runtime/internal.h"

/* A kernel ready to launch on a device; slot.kernel NULL when it could not
 * be had (the reason is recorded on ctx, and a wrapper given it fails with
 * NNCL_ERR_STATE). */
typedef struct nncl__kl {
    nncl_context *ctx;
    nncl_device *dev;
    nncl__kslot slot;
} nncl__kl;

/* Kernel `name` of cl/<family>.cl on dev, looked up by name (building the
 * family when needed): for eager ops and tests, never in a step. */
nncl_status nncl__kl_find(nncl_context *ctx, nncl_device *dev, const char *family, const char *name, nncl__kl *out);

/* cl/elementwise.cl */
/* out[i] = a[i] op b[i % bn] over n elements (nncl_add/sub/mul_f32). */
nncl_status nncl__k_binary(nncl__kl k, nncl__view a, nncl__view b, size_t bn, nncl__view out, size_t n);
/* The same, 8 elements a work-item (nncl_add/sub/mul_f32_v8). */
nncl_status nncl__k_binary8(nncl__kl k, nncl__view a, nncl__view b, size_t bn, nncl__view out, size_t n);
/* y = f(x) over n elements (nncl_<op>_f32); p: the kernel's float
 * parameter, NULL for the kernels that take none. y may be x. */
nncl_status nncl__k_unary(nncl__kl k, nncl__view x, nncl__view y, size_t n, const float *p);
/* dx (+)= dy f'(v) (nncl_<op>_backward_f32), v the forward output or input
 * as the kernel reads it; p as for nncl__k_unary. dx may be dy. */
nncl_status nncl__k_unary_backward(nncl__kl k, nncl__view dy, nncl__view v, nncl__view dx, size_t n, const float *p,
                                   int acc);
/* y = value over n elements (nncl_fill_f32). */
nncl_status nncl__k_fill(nncl__kl k, nncl__view y, size_t n, float value);
/* y (+)= alpha x over n elements (nncl_axpy_f32). */
nncl_status nncl__k_axpy(nncl__kl k, nncl__view x, nncl__view y, size_t n, float alpha, int acc);
/* The same, 8 elements a work-item (nncl_axpy_f32_v8). */
nncl_status nncl__k_axpy8(nncl__kl k, nncl__view x, nncl__view y, size_t n, float alpha, int acc);
/* dx[i] (+)= dy[i] other[i % on] (nncl_mul_backward_f32). */
nncl_status nncl__k_mul_backward(nncl__kl k, nncl__view dy, nncl__view other, size_t on, nncl__view dx, size_t n,
                                 int acc);
/* db[c] (+)= sum over rows of dy[r, c] a[r, c] (nncl_mul_backward_f32_bcast). */
nncl_status nncl__k_mul_backward_bcast(nncl__kl k, nncl__view dy, nncl__view a, nncl__view db, size_t rows,
                                       size_t cols, int acc);

/* cl/half.cl, built for half storage: dst (the storage type) = src
 * (float) over n elements, rounded to nearest even (nncl_store_f32). */
nncl_status nncl__k_store(nncl__kl k, nncl__view dst, nncl__view src, size_t n);

/* cl/dense.cl: dy [rows, cols] *= act'(y) in place (act > 0) and db (+)=
 * its column sums, one work-item per 8 columns (nncl_bias_backward_f32_act). */
nncl_status nncl__k_bias_backward_act(nncl__kl k, nncl__view dy, nncl__view y, size_t rows, size_t cols, nncl__view db,
                                      int acc, int act);
/* db [cols] (+)= the sums of dy [rows, cols, inner] over rows and inner, a
 * work-group per column (nncl_bias_backward_f32). */
nncl_status nncl__k_bias_backward(nncl__kl k, nncl__view dy, int rows, int cols, int inner, nncl__view db, int acc);

/* cl/softmax.cl: per row of [rows, cols]. y may be x; dx may be dy. */
nncl_status nncl__k_softmax(nncl__kl k, nncl__view x, nncl__view y, size_t rows, size_t cols);
nncl_status nncl__k_softmax_backward(nncl__kl k, nncl__view dy, nncl__view y, nncl__view dx, size_t rows, size_t cols,
                                     int acc);

/* cl/reduce.cl: out (+)= alpha * the sums of x [rows, cols] over its rows
 * (axis 0, nncl_sum_f32_axis0: cols sums) or its columns (axis 1,
 * nncl_sum_f32_axis1: rows sums). out must not overlap x. */
nncl_status nncl__k_sum(nncl__kl k, int axis, nncl__view x, nncl__view out, size_t rows, size_t cols, float alpha,
                        int acc);
/* The sums over rows again, a work-item per 16 columns
 * (nncl_sum_f32_axis0_param_cols). */
nncl_status nncl__k_sum_cols(nncl__kl k, nncl__view x, nncl__view out, size_t rows, size_t cols, float alpha, int acc);

/* cl/rnn.cl: db (+)= the column sums of rows of m (leading dimension ld),
 * columns from `from` on taken `shift` further; rows 0: zeros
 * (nncl_rnn_colsum_f32). */
nncl_status nncl__k_rnn_colsum(nncl__kl k, nncl__view m, size_t rows, size_t cols, size_t ld, size_t from, size_t shift,
                               nncl__view db, int acc);

/* cl/loss.cl. Softmax cross-entropy over rows of C logits x with class
 * labels: probabilities into probs [rows, C], per-row terms into terms. */
nncl_status nncl__k_ce_rows(nncl__kl k, nncl__view x, nncl__view labels, nncl__view probs, nncl__view terms,
                            size_t rows, size_t C);
/* dx (+)= g[0] (probs - onehot(labels)) / rows. */
nncl_status nncl__k_ce_backward(nncl__kl k, nncl__view probs, nncl__view labels, nncl__view g, nncl__view dx,
                                size_t rows, size_t C, int acc);
/* A pair loss of prediction p and target t (nncl_bce/mse_terms_f32): the
 * elementwise terms of n elements. */
nncl_status nncl__k_pair_terms(nncl__kl k, nncl__view p, nncl__view t, nncl__view terms, size_t n);
/* Its gradients, scaled by g[0]: into dp where want_p, into dt where
 * want_t (nncl_bce/mse_backward_f32). */
nncl_status nncl__k_pair_backward(nncl__kl k, nncl__view p, nncl__view t, nncl__view g, nncl__view dp, int acc_p,
                                  nncl__view dt, int acc_t, int want_p, int want_t, size_t n);
/* out[0] = scale * the sum of n terms, in one work-group (nncl_sum_scalar_f32). */
nncl_status nncl__k_sum_scalar(nncl__kl k, nncl__view terms, size_t n, float scale, nncl__view out);
#endif
