/* op_pool.c - pooling over the planes of NCHW input: max pooling (padding
 * as -inf, the argmax of every window kept in aux as a float for backward),
 * average pooling (padding counted in the divisor: PyTorch's
 * count_include_pad=True) and global average pooling [B,C,H,W] -> [B,C].
 * iattr (max, avg): [0] kernel k, [1] stride, [2] padding; OH =
 * floor((H + 2 pad - k) / stride) + 1 as PyTorch; padding <= k/2 (PyTorch's
 * rule, so that every window holds an input element). */
#include "graph/graph.h"
#include "ops/reference.h"
#include <math.h>
#include <stdio.h>

typedef struct pool_dims {
    int planes, H, W, OH, OW, k, st, pad;
} pool_dims;

static void pool_dims_of(const nncl_node *n, int batch, pool_dims *d) {
    const nncl_node *xin = n->in[0];
    d->H = xin->shape[2];
    d->W = xin->shape[3];
    d->planes = (int)(nncl__numel(xin, batch) / ((size_t)d->H * (size_t)d->W));
    d->OH = n->ndim == 4 ? n->shape[2] : 1;
    d->OW = n->ndim == 4 ? n->shape[3] : 1;
    d->k = n->iattr[0];
    d->st = n->iattr[1];
    d->pad = n->iattr[2];
}

static nncl_status pool_need_4d(nncl_graph *g, const nncl_node *n) {
    char s1[64];
    if (n->n_in != 1 || n->in[0]->ndim != 4)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s must be 4-D [B,C,H,W]",
                                 nncl__opdef_get(n->op)->name, n->name,
                                 n->n_in ? nncl__shape_str(n->in[0], s1, sizeof s1) : "(none)");
    return NNCL_OK;
}

static nncl_status pool_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    const char *op = nncl__opdef_get(n->op)->name;
    char s1[64];
    int k = n->iattr[0], st = n->iattr[1], pad = n->iattr[2];
    NNCL_TRY(pool_need_4d(g, n));
    if (k <= 0 || st <= 0 || pad < 0 || pad > k / 2)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "%s \"%s\": needs kernel > 0, stride > 0, 0 <= padding <= kernel/2; got kernel %d, "
                                 "stride %d, padding %d",
                                 op, n->name, k, st, pad);
    if ((long long)xin->shape[2] + 2LL * pad < k || (long long)xin->shape[3] + 2LL * pad < k)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": kernel %d is larger than input %s padded by %d", op,
                                 n->name, k, nncl__shape_str(xin, s1, sizeof s1), pad);
    if ((size_t)xin->shape[2] * (size_t)xin->shape[3] > ((size_t)1 << 24))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "%s \"%s\": planes of input %s exceed 2^24 elements", op, n->name,
                                 nncl__shape_str(xin, s1, sizeof s1)); /* argmax indices travel as floats */
    n->batched = xin->batched;
    n->ndim = 4;
    n->shape[0] = xin->shape[0];
    n->shape[1] = xin->shape[1];
    n->shape[2] = (int)(((long long)xin->shape[2] + 2LL * pad - k) / st + 1); /* <= H + 1 */
    n->shape[3] = (int)(((long long)xin->shape[3] + 2LL * pad - k) / st + 1);
    return NNCL_OK;
}

/* The kernels of cl/pool.cl share their geometry arguments: H, W, OH, OW
 * and (without tiles) k, stride, padding. */
static void pool_args_geometry(nncl__args *a, const pool_dims *d, int tiles) {
    nncl__arg_int(a, d->H);
    nncl__arg_int(a, d->W);
    nncl__arg_int(a, d->OH);
    nncl__arg_int(a, d->OW);
    if (tiles) return;
    nncl__arg_int(a, d->k);
    nncl__arg_int(a, d->st);
    nncl__arg_int(a, d->pad);
}

#define POOL_GROUP_MAX (1 << 20) /* elements of dim 0 of the _2x2 kernels (exact float quotients below) */
#define POOL_LOCAL 256           /* their work-items per group: whole SIMD vectors on CPU drivers */

/* The _2x2 kernels' NDRange (cl/pool.cl) for elements of planes of rows x
 * cols: groups of G whole planes, G * rows * cols <= 2^20, as few groups
 * as that allows and of about equal size. Sets the kernel's last arguments:
 * G, and acc unless negative. */
static nncl_status pool_launch_groups(nncl__args *a, nncl__exec *ex, int rows, int cols, int planes, int acc) {
    size_t size = (size_t)rows * (size_t)cols, most = POOL_GROUP_MAX / size;
    size_t groups = ((size_t)planes + most - 1) / most, G = ((size_t)planes + groups - 1) / groups;
    size_t global[2], local[2] = {POOL_LOCAL, 1};
    nncl__arg_int(a, (int)G);
    if (acc >= 0) nncl__arg_int(a, acc);
    global[0] = G * size;
    global[1] = ((size_t)planes + G - 1) / G;
    if (local[0] > ex->dev->max_work_group) local[0] = ex->dev->max_work_group;
    return nncl__launch(a, ex->dev, 2, global, local);
}

/* Kernel slots of the pooling rows: forward, backward (and the max pool's
 * 2x2 kernels: by elements, the backward's also by pairs of inputs, by
 * 32-bit words in half storage, by rows of outputs on CPU devices). */
enum { POOL_K_FORWARD, POOL_K_BACKWARD, POOL_K_FORWARD_2X2, POOL_K_BACKWARD_2X2, POOL_K_BACKWARD_2X2P,
       POOL_K_FORWARD_2X2W, POOL_K_BACKWARD_2X2W, POOL_K_FORWARD_2X2R, POOL_K_BACKWARD_2X2R };

/* ------------------------------------------------------------- max */

/* argmax per output element */
static size_t maxpool_aux(const nncl_node *n, int batch) { return nncl__numel(n, batch); }

/* Forward and backward of both pools, kernels pool.cl's nncl_<op>_f32
 * (x, y[, argmax], geometry) and nncl_<op>_backward_f32 (dy[, argmax], dx,
 * geometry, acc), one work-item per output (or input) element on NDRange
 * (cols, rows, planes); the max pool keeps its argmax in aux, and its 2x2
 * windows at stride 2 take the _2x2 kernels (planes before the geometry,
 * the group size G after; the _2x2r kernels by rows have no G). */
static nncl_status pool_run(nncl__exec *ex, nncl_node *n, int backward) {
    nncl__args a;
    pool_dims d;
    int max = n->op == NNCL_OP_MAXPOOL2D, tiles, acc, pairs, windows, rows, slot;
    size_t global[3];
    if (backward && !nncl__need_grad(ex, n, 0)) return NNCL_OK;
    pool_dims_of(n, ex->batch, &d);
    tiles = max && d.k == 2 && d.st == 2 && d.pad == 0 && (size_t)d.H * (size_t)d.W <= POOL_GROUP_MAX;
    acc = backward ? nncl__grad_accumulate(ex, n, 0) : 0;
    /* the 2x2 backward takes pairs of inputs (in half storage a 32-bit
     * word) where they start on an even element (W even, dx at one) and
     * nothing is added: in fp32 too */
    pairs = tiles && backward && !(d.W & 1) && !(nncl__grd(ex, n->in[0]).off & 1) && !acc;
    /* in half storage, with x at an even element too, windows as two
     * 32-bit words, the backward by windows: each searched once */
    windows = tiles && ex->store && !(d.W & 1) && !(nncl__val(ex, n->in[0]).off & 1) && d.OH > 0 &&
              (!backward || pairs);
    /* CPU devices, rows of at least 4 outputs: by rows of outputs, vectors
     * in each work-item (cl/pool.cl); the backward where it writes every
     * input once (H and W even, nothing to add to). In half storage too:
     * on PoCL for AVX2 rows are many times faster than windows */
    rows = tiles && ex->dev->info.type == NNCL_DEVICE_CPU && d.OW >= 4 &&
           (!backward || (!acc && !(d.H & 1) && !(d.W & 1)));
    slot = rows      ? (backward ? POOL_K_BACKWARD_2X2R : POOL_K_FORWARD_2X2R)
           : windows ? (backward ? POOL_K_BACKWARD_2X2W : POOL_K_FORWARD_2X2W)
           : pairs ? POOL_K_BACKWARD_2X2P
                   : (backward ? POOL_K_BACKWARD : POOL_K_FORWARD) + (tiles ? 2 : 0);
    NNCL_TRY(nncl__kbegin(ex, n, slot, &a));
    nncl__arg_view(&a, backward ? nncl__grd(ex, n) : nncl__val(ex, n->in[0]));
    if (backward && max) nncl__arg_view(&a, ex->store ? nncl__val(ex, n->in[0]) : nncl__auxv(ex, n)); /* cl/pool.cl */
    nncl__arg_view(&a, backward ? nncl__grd(ex, n->in[0]) : nncl__val(ex, n));
    if (!backward && max) nncl__arg_view(&a, nncl__auxv(ex, n));
    if (tiles) nncl__arg_int(&a, d.planes);
    pool_args_geometry(&a, &d, tiles);
    if (rows) return nncl__launch_1d(&a, ex->dev, (size_t)d.planes * (size_t)d.OH);
    /* 2x2: forward one work-item per window, backward per input or per
     * pair of inputs (cl/pool.cl) */
    if (tiles && !backward) return pool_launch_groups(&a, ex, d.OH, d.OW, d.planes, -1);
    if (windows && backward) return pool_launch_groups(&a, ex, (d.H + 1) / 2, d.W / 2, d.planes, -1);
    if (tiles) return pool_launch_groups(&a, ex, d.H, pairs ? d.W / 2 : d.W, d.planes, pairs ? -1 : acc);
    if (backward) nncl__arg_int(&a, acc);
    global[0] = (size_t)(backward ? d.W : d.OW);
    global[1] = (size_t)(backward ? d.H : d.OH);
    global[2] = (size_t)d.planes;
    return nncl__launch_exact(&a, ex->dev, 3, global);
}

static nncl_status pool_forward(nncl__exec *ex, nncl_node *n) { return pool_run(ex, n, 0); }
static nncl_status pool_backward(nncl__exec *ex, nncl_node *n) { return pool_run(ex, n, 1); }

/* The taps ki of output row (or column) o whose input row lies in 0..size-1:
 * pool_from .. pool_to - 1 (the window's overlap with the plane). */
static int pool_from(int o, const pool_dims *d) {
    return d->pad - o * d->st > 0 ? d->pad - o * d->st : 0;
}
static int pool_to(int o, const pool_dims *d, int size) {
    int end = size + d->pad - o * d->st;
    return end < d->k ? end : d->k;
}

static void maxpool_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                double *aux) {
    pool_dims d;
    int p, oh, ow, ki, kj;
    size_t o = 0;
    pool_dims_of(n, r->batch, &d);
    for (p = 0; p < d.planes; p++)
        for (oh = 0; oh < d.OH; oh++)
            for (ow = 0; ow < d.OW; ow++, o++) {
                const double *xp = in[0] + (size_t)p * d.H * d.W;
                double best = -HUGE_VAL;
                int best_i = -1;
                for (ki = pool_from(oh, &d); ki < pool_to(oh, &d, d.H); ki++)
                    for (kj = pool_from(ow, &d); kj < pool_to(ow, &d, d.W); kj++) {
                        int h = oh * d.st - d.pad + ki, w = ow * d.st - d.pad + kj;
                        if (xp[h * d.W + w] > best || xp[h * d.W + w] != xp[h * d.W + w] || best_i < 0) {
                            best = xp[h * d.W + w];
                            best_i = h * d.W + w;
                        }
                    }
                out[o] = best;
                aux[o] = best_i;
            }
}

static void maxpool_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                 const double *out, const double *gout, double *const *gin, double *aux) {
    pool_dims d;
    size_t o, count = nncl__numel(n, r->batch), plane = (size_t)n->shape[2] * (size_t)n->shape[3];
    (void)in;
    (void)out;
    if (!gin[0]) return;
    pool_dims_of(n, r->batch, &d);
    for (o = 0; o < count; o++)
        if (aux[o] >= 0) gin[0][(o / plane) * (size_t)d.H * d.W + (size_t)aux[o]] += gout[o];
}

const nncl__opdef nncl__opdef_maxpool2d = {
    .name = "maxpool2d",
    NNCL_KERNELS({"pool", "nncl_maxpool2d_f32"}, {"pool", "nncl_maxpool2d_backward_f32"}, {"pool", "nncl_maxpool2d_f32_2x2"},
                {"pool", "nncl_maxpool2d_backward_f32_2x2"}, {"pool", "nncl_maxpool2d_backward_f32_2x2p"},
                {"pool", "nncl_maxpool2d_f32_2x2w"}, {"pool", "nncl_maxpool2d_backward_f32_2x2w"},
                {"pool", "nncl_maxpool2d_f32_2x2r"}, {"pool", "nncl_maxpool2d_backward_f32_2x2r"}),
    .shape = pool_shape, .aux_size = maxpool_aux, .forward = pool_forward, .backward = pool_backward,
    .ref_forward = maxpool_ref_forward, .ref_backward = maxpool_ref_backward, .half = 1,
    .half_bw_reads = NNCL_BW_INPUTS};

/* ------------------------------------------------------------- average */

/* One loop nest for both directions: with y, y = window means of x; without,
 * gx += gy / k^2 over every window. */
static void avgpool_ref(const nncl_node *n, int batch, const double *x, double *y, const double *gy, double *gx) {
    pool_dims d;
    int p, oh, ow, ki, kj;
    size_t o = 0;
    double inv;
    pool_dims_of(n, batch, &d);
    inv = 1.0 / ((double)d.k * d.k);
    for (p = 0; p < d.planes; p++)
        for (oh = 0; oh < d.OH; oh++)
            for (ow = 0; ow < d.OW; ow++, o++) {
                size_t base = (size_t)p * d.H * d.W;
                double s = 0;
                for (ki = pool_from(oh, &d); ki < pool_to(oh, &d, d.H); ki++)
                    for (kj = pool_from(ow, &d); kj < pool_to(ow, &d, d.W); kj++) {
                        int h = oh * d.st - d.pad + ki, w = ow * d.st - d.pad + kj;
                        if (y) s += x[base + (size_t)h * d.W + w];
                        else gx[base + (size_t)h * d.W + w] += gy[o] * inv;
                    }
                if (y) y[o] = s * inv;
            }
}

static void avgpool_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                                double *aux) {
    (void)aux;
    avgpool_ref(n, r->batch, in[0], out, NULL, NULL);
}

static void avgpool_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in,
                                 const double *out, const double *gout, double *const *gin, double *aux) {
    (void)in;
    (void)out;
    (void)aux;
    if (gin[0]) avgpool_ref(n, r->batch, NULL, NULL, gout, gin[0]);
}

const nncl__opdef nncl__opdef_avgpool2d = {
    .name = "avgpool2d", NNCL_KERNELS({"pool", "nncl_avgpool2d_f32"}, {"pool", "nncl_avgpool2d_backward_f32"}),
    .shape = pool_shape, .forward = pool_forward, .backward = pool_backward, .ref_forward = avgpool_ref_forward,
    .ref_backward = avgpool_ref_backward, .half = 1};

/* ------------------------------------------------------------- global average */

static nncl_status gap_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    NNCL_TRY(pool_need_4d(g, n));
    n->batched = xin->batched;
    n->ndim = 2;
    n->shape[0] = xin->shape[0];
    n->shape[1] = xin->shape[1];
    return NNCL_OK;
}

/* Global average pool: streaming kernels over the [B*C, H*W] planes, a
 * work-item per plane forward, per GAP_CHUNK values of a plane backward. */
#define GAP_CHUNK 256
static nncl_status gap_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t planes = nncl__numel(n, ex->batch), hw = (size_t)n->in[0]->shape[2] * (size_t)n->in[0]->shape[3];
    NNCL_TRY(nncl__kbegin(ex, n, POOL_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_int(&a, (int)planes);
    nncl__arg_int(&a, (int)hw);
    nncl__arg_float(&a, (float)(1.0 / (double)hw));
    return nncl__launch_1d(&a, ex->dev, planes);
}

static nncl_status gap_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t planes = nncl__numel(n, ex->batch), hw = (size_t)n->in[0]->shape[2] * (size_t)n->in[0]->shape[3];
    size_t nch = (hw + GAP_CHUNK - 1) / GAP_CHUNK;
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, POOL_K_BACKWARD, &a));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
    nncl__arg_int(&a, (int)planes);
    nncl__arg_int(&a, (int)hw);
    nncl__arg_int(&a, (int)nch);
    nncl__arg_int(&a, GAP_CHUNK);
    nncl__arg_float(&a, (float)(1.0 / (double)hw));
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 0));
    return nncl__launch_1d(&a, ex->dev, planes * nch);
}
#undef GAP_CHUNK

static void gap_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    (void)aux; /* the eager nncl_mean's reference over [B*C, H*W] */
    nncl__ref_mean(in[0], nncl__numel(n, r->batch), (size_t)n->in[0]->shape[2] * (size_t)n->in[0]->shape[3], 1, out);
}

static void gap_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    size_t rows = nncl__numel(n, r->batch), hw = (size_t)n->in[0]->shape[2] * (size_t)n->in[0]->shape[3], i, j;
    (void)in;
    (void)out;
    (void)aux;
    if (!gin[0]) return;
    for (i = 0; i < rows; i++)
        for (j = 0; j < hw; j++) gin[0][i * hw + j] += gout[i] / (double)hw;
}

const nncl__opdef nncl__opdef_global_avgpool = {
    .name = "global_avgpool",
    NNCL_KERNELS({"pool", "nncl_global_avgpool_f32"}, {"pool", "nncl_global_avgpool_backward_f32"}), .shape = gap_shape,
    .forward = gap_forward, .backward = gap_backward, .ref_forward = gap_ref_forward, .ref_backward = gap_ref_backward,
    .half = 1};

/* ------------------------------------------------------------- builders */

static nncl_node *pool_build(nncl_graph *g, nncl__op op, const char *fn, nncl_node *x, int kernel, int stride,
                             int padding) {
    int iattr[3];
    if (!g) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    if (!x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: input is NULL (an earlier builder failed?)", fn);
    iattr[0] = kernel;
    iattr[1] = stride;
    iattr[2] = padding;
    return nncl__node_add(g, op, NULL, 1, &x, iattr, 3, NULL, 0);
}

nncl_node *nncl_maxpool2d(nncl_graph *g, nncl_node *x, int kernel, int stride, int padding) {
    return pool_build(g, NNCL_OP_MAXPOOL2D, "nncl_maxpool2d", x, kernel, stride, padding);
}

nncl_node *nncl_avgpool2d(nncl_graph *g, nncl_node *x, int kernel, int stride, int padding) {
    return pool_build(g, NNCL_OP_AVGPOOL2D, "nncl_avgpool2d", x, kernel, stride, padding);
}

nncl_node *nncl_global_avgpool(nncl_graph *g, nncl_node *x) {
    if (!g) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_global_avgpool: graph is NULL");
    if (!x)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_global_avgpool: input is NULL (an earlier builder failed?)");
    return nncl__node_add(g, NNCL_OP_GLOBAL_AVGPOOL, NULL, 1, &x, NULL, 0, NULL, 0);
}

#undef POOL_GROUP_MAX
#undef POOL_LOCAL
