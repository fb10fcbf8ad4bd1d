/* ops.h - what the op families (src/ops/) share among themselves and give
 * the layers above besides their rows of the op table: the dense helpers
 * of linear and conv2d, the double maths of the elementwise ops, batch
 * norm's statistics for synchronised batch norm, and the labels check. */
#ifndef NNCL_OPS_H
#define NNCL_OPS_H
#include "gemm/gemm.h"
#include "graph/graph.h"

/* Whether the row reductions (layer and RMS norm, the sequence
 * cross-entropy, a parameter's sum over rows in add and sub) run their
 * per-row kernels, one work-item a row (or column): on CPU
 * devices, whose drivers run a group's work-items as SIMD lanes and split
 * a kernel at every barrier; else one work-group a row. NNCL_REDUCE=rows
 * or groups decides instead (the tests run both on any device). */
int nncl__row_kernels(const nncl__exec *ex);

/* Class labels y[0..n) of a C-class classifier: whole numbers in 0..C-1
 * (the cross-entropy's contract, and evaluation's). */
nncl_status nncl__check_labels(nncl_context *ctx, const nncl_node *labels, int C, const float *y, int n);

/* Launch helpers of op_dense.c that linear and conv2d share (cl/dense.cl),
 * run as node n's NNCL_DENSE_KERNELS slots.
 * y viewed as [rows, cols, inner] (inner 1 for linear, H*W for NCHW):
 * y = act(y + b[col]) in place over n elements (bias may be NULL). */
nncl_status nncl__bias_act(nncl__exec *ex, const nncl_node *n, nncl__view y, const nncl_node *bias, int cols, int inner,
                           size_t count, int act);
/* dy *= act'(y) in place over count elements, from the activation's output y. */
nncl_status nncl__act_backward_inplace(nncl__exec *ex, const nncl_node *n, nncl__view dy, nncl__view y, size_t count,
                                       int act);
/* db[c] (+)= sum over rows and inner of dy[rows, cols, inner]; acc adds. */
nncl_status nncl__bias_grad(nncl__exec *ex, const nncl_node *n, nncl__view dy, int rows, int cols, int inner,
                            nncl__view db, int acc);
/* A node's GEMM arguments begun: zeros, alpha 1, beta, and the executor's
 * temporary buffer and store (the ops' GEMMs, op_dense.c). */
void nncl__gemm_args_begin(const nncl__exec *ex, float beta, nncl__gemm_args *g);
/* The double maths of the elementwise ops (op_elementwise.c's rows), which
 * their graph references apply and the eager ops' tests use as theirs:
 * out[i] = a[i] op b[i % bn] (add, sub, mul; bn n, or cols for a row
 * vector); y = f(x, p) and dy/dx from x and y (p: the op's float
 * parameter); the row softmaxes (dx overwritten, or added to with acc). */
void nncl__binary_ref(nncl__op op, const double *a, size_t n, const double *b, size_t bn, double *out);
double nncl__unary_ref(nncl__op op, double x, double p);
double nncl__unary_ref_grad(nncl__op op, double x, double y, double p);
void nncl__softmax_ref(const double *x, size_t rows, size_t cols, int log_out, double *y);
void nncl__softmax_ref_backward(const double *dy, const double *y, size_t rows, size_t cols, int log_in, double *dx,
                                int acc);

/* Batch norm's statistics as synchronised batch norm exchanges them
 * (op_norm.c owns their layout): the 2C floats of node n's aux for phase 0
 * ([mean, invstd] of the shard) or phase 1 ([sum dy, sum dy xhat]), read
 * into host (write 0) or written from it (write 1); blocking. */
nncl_status nncl__batchnorm_stats_io(nncl__exec *ex, const nncl_node *n, int phase, float *host, int write);
/* Node n's running mean and variance (C floats each) in a host copy of the
 * graph's state buffer. */
void nncl__batchnorm_running(const nncl_node *n, float *state, float **mean, float **var);
/* Whether batch norm takes its activation and residual in its own passes
 * (NNCL_BN_FUSE unset or not 0/off), and so whether a plan fuses them. */
int nncl__batchnorm_fuse_on(void);

/* The fused activations (nncl_act) and their derivative from the output, in
 * double, for the host references of linear and conv2d. */
double nncl__act_ref(double v, int act);
double nncl__act_grad_ref(double y, int act);

/* Dropout's counter-based mask (op_misc.c), which attention's weights
 * share: the step's keys from node n (the graph seed in iattr[0], [1]),
 * its id and the step seed; whether element elem of global sample sample
 * survives against threshold round(p 2^24); the survivors' scale. */
void nncl__dropout_keys(const nncl_node *n, uint64_t step_seed, uint32_t *k0, uint32_t *k1);
int nncl__dropout_keep(uint32_t k0, uint32_t k1, uint32_t sample, uint32_t elem, uint32_t thr);
uint32_t nncl__dropout_threshold(float p);
double nncl__dropout_scale(float p);

/* The norm layers' shared pieces (op_norm.c): begins the kernel in slot
 * that sums node n's weight and bias gradients, with its leading arguments
 * x, dy, aux, dw, want_w, acc_w, db, want_b, acc_b; and a norm node over
 * `features` with NAME.weight (ones) and, with bias, NAME.bias (zeros) as
 * in[1], in[2], taken back when the node is refused. */
nncl_status nncl__norm_param_grads(nncl__exec *ex, nncl_node *n, int slot, nncl__args *a);
nncl_node *nncl__norm_node(nncl_graph *g, nncl__op op, const char *name, int features, int bias, nncl_node **in,
                           const float *fattr, int n_fattr);

/* The recurrence of an LSTM (gru 0) or GRU (gru 1) layer as one rnn_scan
 * node (op_rnn.c): gi [B, T, G H] the input products x W_ih^T of every
 * step, w_hh [G H, H], b_ih and b_hh [G H]; returns h [B, T, H]. */
nncl_node *nncl__rnn_scan(nncl_graph *g, int gru, nncl_node *gi, nncl_node *w_hh, nncl_node *b_ih,
                          nncl_node *b_hh);

#endif /* NNCL_OPS_H */
