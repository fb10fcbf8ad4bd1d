/* conv_own.h - what conv2d's own path (src/ops/conv_own.c) shares with its
 * input gradient (src/ops/conv_own_dx.c). */
#ifndef NNCL_CONV_OWN_H
#define NNCL_CONV_OWN_H
#include "ops/conv.h"
#include "gemm/gemm.h"
#include <limits.h>
#include <string.h>

/* f floats rounded up to a cache line: where panels start. */
size_t nncl__cown_round(size_t f);
/* Floats of the weights reordered for the gather (channels padded to 16). */
size_t nncl__cown_wt_floats(const nncl__conv_dims *d);
/* The input gradient of stride-1 layer d as a forward convolution of G. */
void nncl__cown_dx_dims(const nncl__conv_dims *d, nncl__conv_dims *t);
/* Where the backward's chunk panels start (*g0) behind what it keeps at the
 * start of the workspace, and the flipped weights' place (*flip_at). */
nncl_status nncl__cown_front(nncl__exec *ex, const nncl__conv_dims *d, size_t *g0, size_t *flip_at);
/* The forward's B panels of ns samples of xv for variant v at bp_off. */
nncl_status nncl__cown_pack_fwd_b(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d,
                                  const nncl__gemm_variant *v, nncl__view xv, size_t bp_off, int ns);

/* The input gradient's pieces (src/ops/conv_own_dx.c): once per step the
 * weights it reads; per chunk dx by the gather, the product or the 3x3
 * kernel. */
nncl_status nncl__cown_wt(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, int need_x,
                          nncl__gemm_variant *vx, size_t *g0);
nncl_status nncl__cown_dx(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, size_t g0, int mr, int s0,
                          int ns, int acc, int quad);
nncl_status nncl__cown_dx_gemm(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d,
                               const nncl__gemm_variant *vx, nncl__view dy, size_t g0, int s0, int ns, int acc);
nncl_status nncl__cown_dx3(nncl__exec *ex, const nncl_node *n, const nncl__conv_dims *d, nncl__view dy, int s0,
                           int ns, int acc);
#endif
