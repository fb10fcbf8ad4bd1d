/* conv_ex.h - what the convolutions of any geometry (src/ops/op_conv_ex.c)
 * share with their depthwise kernels (src/ops/conv_dw.c): the conv-space
 * geometry of a node and the kernel slots of its row. */
#ifndef NNCL_CONV_EX_H
#define NNCL_CONV_EX_H
#include "ops/ops.h"

/* Conv space: x [B,C,H,W] -> y [B,O,OH,OW] through w [O,C/G,kh,kw] (a
 * transposed convolution reads it backwards: its input is y, its output x). */
typedef struct nncl__cx_dims {
    int B, C, H, W, O, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, G, act;
    int transposed;
} nncl__cx_dims;

enum {
    NNCL_CX_K_FORWARD = NNCL_K_DENSE_END, NNCL_CX_K_BACKWARD_INPUT, NNCL_CX_K_BACKWARD_WEIGHT,
    NNCL_CX_K_DW_FORWARD, NNCL_CX_K_DW_INPUT, NNCL_CX_K_DW_WEIGHT, NNCL_CX_K_DW_WEIGHT3, NNCL_CX_K_DW_WEIGHT5,
    NNCL_CX_K_DW_WEIGHT_SUM, NNCL_CX_K_DW_FORWARD3, NNCL_CX_K_DW_FORWARD5, NNCL_CX_K_DW_INPUT3, NNCL_CX_K_DW_INPUT5,
    NNCL_CX_K_DW_INPUT3_S2, NNCL_CX_K_DW_INPUT5_S2, NNCL_CX_K_DW_FORWARD3_FLAT, NNCL_CX_K_DW_FORWARD5_FLAT,
    NNCL_CX_K_DW_INPUT3_FLAT, NNCL_CX_K_DW_INPUT5_FLAT, NNCL_CX_K_DW_WEIGHT3_FLAT, NNCL_CX_K_DW_WEIGHT5_FLAT
};

/* C, H, W, O, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, G: every conv_ex and
 * conv_dw kernel's geometry arguments, in this order after its buffers. */
void nncl__cx_args_geometry(nncl__args *a, const nncl__cx_dims *d);
/* The first arguments of the kernels that map one tensor to another
 * through node n's weight: from, the weight, to, then the geometry. */
void nncl__cx_args_map(nncl__args *a, nncl__exec *ex, const nncl_node *n, nncl__view from, nncl__view to,
                       const nncl__cx_dims *d);

/* Whether geometry d fits the depthwise kernels: a convolution (not
 * transposed) with groups == C and stride 1 or 2 along W; nncl__dw_on:
 * and runs on them, unless NNCL_CONV_DEPTHWISE=0 sends it to the general
 * ones. */
int nncl__dw_fits(const nncl__cx_dims *d);
int nncl__dw_on(const nncl__cx_dims *d);
/* Floats of the plan's workspace the weight gradient takes (0: none). */
size_t nncl__dw_workspace(const nncl__cx_dims *d);
/* y = act(conv(x) + b) (bias NULL: none). */
nncl_status nncl__dw_forward(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv, nncl__view y,
                             const nncl_node *bias);
/* dx (+)= conv^T(dy) (acc: add). */
nncl_status nncl__dw_backward_input(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view dy,
                                    nncl__view dx, int acc);
/* dw (+)= the adjoint in w of conv(xv) against dy, into n->in[1]'s gradient. */
nncl_status nncl__dw_backward_weight(nncl__exec *ex, const nncl_node *n, const nncl__cx_dims *d, nncl__view xv,
                                     nncl__view dy);

#endif
