/* conv.h - what conv2d's paths share: the geometry of a conv2d node, the
 * paths (im2col + CLBlast in src/ops/op_conv.c, the implicit GEMM on nncl's
 * own packed kernels in src/ops/conv_own.c, the 3x3 kernels in
 * src/ops/conv3.c) and the choice between them (src/ops/conv_pick.c). */
#ifndef NNCL_CONV_H
#define NNCL_CONV_H
#include "ops/ops.h"

typedef struct nncl__conv_dims {
    int B, C, H, W, O, k, st, pad, OH, OW, act;
    size_t ckk, ohw;  /* rows of the column matrix; output pixels per plane */
    int pointwise;    /* 1x1, stride 1, no padding: x is its own column matrix */
} nncl__conv_dims;

/* Kernel slots of a conv2d node (its row's kernel list, after the dense
 * helpers'): the im2col path's, then the own path's. */
enum {
    NNCL_CONV_K_IM2COL = NNCL_K_DENSE_END, NNCL_CONV_K_COL2IM, NNCL_CONV_K_REORDER,
    NNCL_CONV_K_PACK_B, NNCL_CONV_K_PACK_DY, NNCL_CONV_K_PACK_COLT, NNCL_CONV_K_WT, NNCL_CONV_K_DX,
    NNCL_CONV_K_DW_SPLIT, NNCL_CONV_K_PACK_DY8, NNCL_CONV_K_CONV3, NNCL_CONV_K_CONV3_DW, NNCL_CONV_K_TO_F32,
    NNCL_CONV_K_PACK_COLT8, NNCL_CONV_K_PACK_BS, NNCL_CONV_K_PACK_COLTS, NNCL_CONV_K_DX2X2
};

/* The paths a layer may take: conv2d's implementations
 * (nncl__conv_impls, src/ops/conv_pick.c), the value the choice stores. A
 * new path is a value appended before NNCL__CONV_PATHS and its row there. */
enum { NNCL__CONV_COL = 0, NNCL__CONV_OWN = 1, NNCL__CONV_3X3 = 2, NNCL__CONV_PATHS };
extern const nncl__impl nncl__conv_impls[NNCL__CONV_PATHS];

void nncl__conv_dims_of(const nncl_node *n, int batch, nncl__conv_dims *d);
/* The input geometry every conv kernel takes in this order after its
 * buffers: C, H, W, k, stride, padding, OH, OW. */
void nncl__conv_arg_geometry(nncl__args *a, const nncl__conv_dims *d);
/* Floats of workspace a conv node may take: 1/8 of the plan's activation
 * arena, at least 64 Ki. */
nncl_status nncl__conv_budget(nncl__exec *ex, const nncl_node *n, size_t *floats);
/* The plan's workspace (ex->gemm_temp) in floats into *have, checked to
 * hold need: prepare sized it, so less is a state error naming node n. */
nncl_status nncl__conv_ws(nncl__exec *ex, const nncl_node *n, size_t need, size_t *have);

/* The path node n runs on (NNCL__CONV_*): the one timing the layer at
 * prepare found fastest (src/ops/conv_pick.c), or the one NNCL_CONV_3X3 or
 * NNCL_GEMM forces. Looks up only: measures and builds nothing. */
int nncl__conv_path(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d);
/* Whether the own path's kernels take d's sizes (their coordinates come
 * from float quotients, exact below 2^20); else im2col + CLBlast runs. */
int nncl__conv_own_fits(const nncl__conv_dims *d);
/* Whether the 3x3 path (src/ops/conv3.c) takes node n: a 3x3 kernel,
 * stride 1, padding 1, and no input gradient. */
int nncl__conv_3x3_fits(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d);
/* At plan creation: chooses node n's path (cached, timed or forced) and
 * prepares it: its kernels, GEMM choices and workspace bytes. */
nncl_status nncl__conv_pick(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes);
/* Each path's preparation (GEMM choices, kernels) and workspace bytes. */
nncl_status nncl__conv_own_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes);
nncl_status nncl__conv_col_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes);
nncl_status nncl__conv_3x3_prepare(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t *bytes);
/* Samples per GEMM of the im2col path at d's batch; with choose (at
 * prepare) its GEMMs' kernels are chosen on the way, so that a step, which
 * looks them up, comes to the same chunk. */
nncl_status nncl__conv_col_chunk(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int choose, int *chunk);
/* Each path's forward, and its backward from the node's incoming gradient
 * dy: the activation's derivative (applied to dy in place), the bias
 * gradient, dW and dx, as the plan needs them. */
nncl_status nncl__conv_col_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d);
nncl_status nncl__conv_col_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy);
nncl_status nncl__conv_own_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d);
nncl_status nncl__conv_own_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy);
nncl_status nncl__conv_3x3_forward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d);
nncl_status nncl__conv_3x3_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy);
/* v moved on by off elements. */
nncl__view nncl__conv_at(nncl__view v, size_t off);
/* Half storage: count values from src into the workspace at float `at`
 * as fp32 (the 3x3 and own paths' kernels read x as fp32), named for
 * node n's profile. */
nncl_status nncl__conv_to_f32(nncl__exec *ex, const nncl_node *n, nncl__view src, size_t at, size_t count);
/* x of samples s0 .. s0+ns-1 as those kernels read it: in place in fp32,
 * in half storage converted into the workspace at float `at`. */
nncl_status nncl__conv_x_f32(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t at, int s0, int ns,
                             nncl__view *out);
/* dy *= act'(y) in place and the bias gradient from it (the im2col path's
 * first step, and the own path's without a weight gradient). */
nncl_status nncl__conv_act_bias_backward(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy);
#endif
