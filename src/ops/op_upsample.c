/* op_upsample.c - upsampling of NCHW planes by whole factors, PyTorch's
 * Upsample / F.interpolate(scale_factor=(fh, fw)): nearest, or bilinear
 * with align_corners=False. Kernels cl/upsample.cl: forward one work-item
 * per output, backward one per input gathering the outputs that read it.
 *
 * Node: in[0] x [B,C,H,W] -> [B,C,H fh,W fw]; iattr [0] fh, [1] fw, [2]
 * mode (0 nearest, 1 bilinear). Along an axis, output o reads source
 *   nearest   o / f
 *   bilinear  s = max((o + 0.5) / f - 0.5, 0): rows floor(s) and
 *             min(floor(s) + 1, H - 1) with weights 1 - (s - floor s), s - floor s. */
#include "ops/ops.h"
#include <limits.h>
#include <math.h>

enum { UP_K_FORWARD, UP_K_BACKWARD };

static nncl_status up_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] < 1 || n->iattr[1] < 1 || n->iattr[2] < 0 || n->iattr[2] > 1)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "upsample2d \"%s\": needs factors >= 1 and mode 0 (nearest) or 1 (bilinear); got "
                                 "%dx%d, mode %d",
                                 n->name, n->iattr[0], n->iattr[1], n->iattr[2]);
    return NNCL_OK;
}

static nncl_status up_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    char s1[64];
    long long oh, ow;
    if (xin->ndim != 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "upsample2d \"%s\": input %s must be 4-D [B,C,H,W]", n->name,
                                 nncl__shape_str(xin, s1, sizeof s1));
    oh = (long long)xin->shape[2] * n->iattr[0];
    ow = (long long)xin->shape[3] * n->iattr[1];
    if ((long long)xin->shape[1] * oh * ow > INT_MAX / 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "upsample2d \"%s\": input %s upsampled %dx%d is too large", n->name,
                                 nncl__shape_str(xin, s1, sizeof s1), n->iattr[0], n->iattr[1]);
    n->batched = xin->batched;
    n->ndim = 4;
    n->shape[0] = xin->shape[0];
    n->shape[1] = xin->shape[1];
    n->shape[2] = (int)oh;
    n->shape[3] = (int)ow;
    return NNCL_OK;
}

static nncl_status up_run(nncl__exec *ex, nncl_node *n, int backward) {
    nncl__args a;
    const nncl_node *xin = n->in[0];
    size_t count = nncl__numel(backward ? xin : n, ex->batch);
    if (backward && !nncl__need_grad(ex, n, 0)) return NNCL_OK;
    if (nncl__numel(n, ex->batch) > (size_t)INT_MAX)
        return nncl__fail(ex->ctx, NNCL_ERR_UNSUPPORTED, "upsample2d \"%s\": a batch of %d has more than 2^31 elements",
                          n->name, ex->batch);
    NNCL_TRY(nncl__kbegin(ex, n, backward ? UP_K_BACKWARD : UP_K_FORWARD, &a));
    nncl__arg_view(&a, backward ? nncl__grd(ex, n) : nncl__val(ex, xin));
    nncl__arg_view(&a, backward ? nncl__grd(ex, xin) : nncl__val(ex, n));
    nncl__arg_int(&a, xin->shape[2]);
    nncl__arg_int(&a, xin->shape[3]);
    nncl__arg_int(&a, n->iattr[0]);
    nncl__arg_int(&a, n->iattr[1]);
    nncl__arg_int(&a, n->iattr[2]);
    nncl__arg_count(&a, count);
    if (backward) nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    return nncl__launch_1d(&a, ex->dev, count);
}

static nncl_status up_forward(nncl__exec *ex, nncl_node *n) { return up_run(ex, n, 0); }
static nncl_status up_backward(nncl__exec *ex, nncl_node *n) { return up_run(ex, n, 1); }

/* The sources of output o along an axis (the kernels' nncl_upsample_src). */
static void up_src(int o, int f, int in, int mode, int *i0, int *i1, double *l1) {
    double s;
    if (!mode) {
        *i0 = *i1 = o / f;
        *l1 = 0;
        return;
    }
    s = (o + 0.5) / f - 0.5;
    s = s < 0 ? 0 : s;
    *i0 = (int)s;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *l1 = s - *i0;
}

/* One loop for both directions: y = upsample(x), or gx += its adjoint of gy. */
static void up_ref(const nncl_node *n, int batch, const double *x, double *y, const double *gy, double *gx) {
    int H = n->in[0]->shape[2], W = n->in[0]->shape[3], OH = n->shape[2], OW = n->shape[3], oh, ow, h0, h1, w0, w1;
    size_t p, planes = nncl__numel(n, batch) / ((size_t)OH * OW);
    double lh, lw;
    for (p = 0; p < planes; p++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                size_t xb = p * H * W, o = (p * OH + oh) * OW + ow;
                double wt[4];
                up_src(oh, n->iattr[0], H, n->iattr[2], &h0, &h1, &lh);
                up_src(ow, n->iattr[1], W, n->iattr[2], &w0, &w1, &lw);
                wt[0] = (1 - lh) * (1 - lw);
                wt[1] = (1 - lh) * lw;
                wt[2] = lh * (1 - lw);
                wt[3] = lh * lw;
                if (y) {
                    y[o] = wt[0] * x[xb + h0 * W + w0] + wt[1] * x[xb + h0 * W + w1] + wt[2] * x[xb + h1 * W + w0] +
                           wt[3] * x[xb + h1 * W + w1];
                } else {
                    gx[xb + h0 * W + w0] += wt[0] * gy[o];
                    gx[xb + h0 * W + w1] += wt[1] * gy[o];
                    gx[xb + h1 * W + w0] += wt[2] * gy[o];
                    gx[xb + h1 * W + w1] += wt[3] * gy[o];
                }
            }
}

static void up_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    (void)aux;
    up_ref(n, r->batch, in[0], out, NULL, NULL);
}

static void up_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    (void)in;
    (void)out;
    (void)aux;
    if (gin[0]) up_ref(n, r->batch, NULL, NULL, gout, gin[0]);
}

const nncl__opdef nncl__opdef_upsample2d = {
    .name = "upsample2d",
    NNCL_KERNELS({"upsample", "nncl_upsample2d_f32"}, {"upsample", "nncl_upsample2d_backward_f32"}),
    .shape = up_shape, .check = up_check, .forward = up_forward, .backward = up_backward,
    .ref_forward = up_ref_forward, .ref_backward = up_ref_backward, .half = 1};

nncl_node *nncl_upsample2d(nncl_graph *g, nncl_node *x, int factor_h, int factor_w, int bilinear) {
    int iattr[3];
    iattr[0] = factor_h;
    iattr[1] = factor_w;
    iattr[2] = bilinear != 0;
    return nncl__node_add(g, NNCL_OP_UPSAMPLE2D, NULL, 1, &x, iattr, 3, NULL, 0);
}
