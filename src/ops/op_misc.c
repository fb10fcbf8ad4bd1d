/* op_misc.c - dropout (a counter-based mask recomputed in backward, the same
 * for a sample on any device or shard), embedding lookup with an atomics-free
 * gradient, reshape/flatten (alias ops that share their input's memory) and
 * concatenation along a per-sample axis. Kernels: cl/misc.cl. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>

/* Kernel slots of the ops below: forward, backward, and embedding's zero
 * fill for its indices' gradient. */
enum { MISC_K_FORWARD, MISC_K_BACKWARD, MISC_K_ZERO };

/* The bits of u as an int and back, without implementation-defined casts. */
static int misc_u2i(uint32_t u) {
    int v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static uint32_t misc_i2u(int v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* ------------------------------------------------------------- dropout */

/* iattr: [0], [1] the graph seed's low and high 32 bits; fattr[0] = p. The
 * mask of element e of global sample s in step t is a pure function of
 * (graph seed, node id, t, s, e): host C and cl/misc.cl compute it with the
 * same uint32 arithmetic, so they agree bit for bit. */

static uint64_t drop_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The step's two 32-bit keys, from the graph seed, the node and the step
 * seed (64-bit mixing on the host only). */
static void drop_keys(const nncl_node *n, uint64_t step_seed, uint32_t *k0, uint32_t *k1) {
    uint64_t z = ((uint64_t)misc_i2u(n->iattr[1]) << 32) | misc_i2u(n->iattr[0]);
    z = drop_mix64(z + 0x9E3779B97F4A7C15ull * (uint64_t)(n->id + 1));
    z = drop_mix64(z ^ step_seed);
    *k0 = (uint32_t)z;
    *k1 = (uint32_t)(z >> 32);
}

/* The same as nncl_drop_mix in cl/misc.cl. */
static uint32_t drop_mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

static int drop_keep(uint32_t k0, uint32_t k1, uint32_t sample, uint32_t elem, uint32_t thr) {
    uint32_t h = drop_mix32(drop_mix32(drop_mix32(sample ^ k0) + elem) ^ k1);
    return (h >> 8) >= thr;
}

/* Elements dropped when their 24 random bits fall below round(p * 2^24). */
static uint32_t drop_threshold(float p) {
    return p >= 1 ? 1u << 24 : (uint32_t)((double)p * 16777216.0 + 0.5);
}

static double drop_scale(float p) { return p < 1 ? 1.0 / (1.0 - (double)p) : 0.0; }

/* fattr[0]: the probability p, in [0, 1]; iattr[0..1]: the seed, any. */
static nncl_status drop_check(nncl_graph *g, const nncl_node *n) {
    if (!(n->fattr[0] >= 0 && n->fattr[0] <= 1))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "dropout \"%s\": probability %g is not in [0, 1]",
                                 n->name, (double)n->fattr[0]);
    return NNCL_OK;
}
void nncl__dropout_keys(const nncl_node *n, uint64_t step_seed, uint32_t *k0, uint32_t *k1) {
    drop_keys(n, step_seed, k0, k1);
}
int nncl__dropout_keep(uint32_t k0, uint32_t k1, uint32_t sample, uint32_t elem, uint32_t thr) {
    return drop_keep(k0, k1, sample, elem, thr);
}
uint32_t nncl__dropout_threshold(float p) { return drop_threshold(p); }
double nncl__dropout_scale(float p) { return drop_scale(p); }

static nncl_status drop_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    int i;
    (void)g;
    n->batched = xin->batched;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    return NNCL_OK;
}

/* dst (+)= dropout(src): the forward (acc 0) and the backward. */
static nncl_status drop_run(nncl__exec *ex, const nncl_node *n, nncl__view src, nncl__view dst, int acc) {
    nncl__args a;
    uint32_t k0, k1;
    size_t total = nncl__numel(n, ex->batch);
    drop_keys(n, ex->step_seed, &k0, &k1);
    NNCL_TRY(nncl__kbegin(ex, n, MISC_K_FORWARD, &a));
    nncl__arg_view(&a, src);
    nncl__arg_view(&a, dst);
    nncl__arg_int(&a, (int)total);
    nncl__arg_int(&a, n->batched ? (int)n->sample_numel : 0);
    nncl__arg_int(&a, n->batched ? ex->batch_offset : 0);
    nncl__arg_int(&a, misc_u2i(k0));
    nncl__arg_int(&a, misc_u2i(k1));
    nncl__arg_int(&a, misc_u2i(drop_threshold(n->fattr[0])));
    nncl__arg_float(&a, (float)drop_scale(n->fattr[0]));
    nncl__arg_int(&a, ex->training);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, ex->dev, total);
}

static nncl_status drop_forward(nncl__exec *ex, nncl_node *n) {
    return drop_run(ex, n, nncl__val(ex, n->in[0]), nncl__val(ex, n), 0);
}

static nncl_status drop_backward(nncl__exec *ex, nncl_node *n) {
    if (!nncl__need_grad(ex, n, 0)) return NNCL_OK;
    return drop_run(ex, n, nncl__grd(ex, n), nncl__grd(ex, n->in[0]), nncl__grad_accumulate(ex, n, 0));
}

/* out (+)= dropout(in) on the host: the same mask as the device. */
static void drop_ref_run(const nncl_node *n, const nncl__refctx *r, const double *in, double *out, int acc) {
    size_t total = nncl__numel(n, r->batch), per = n->batched ? n->sample_numel : 0, i;
    uint32_t k0, k1, thr = drop_threshold(n->fattr[0]);
    double scale = drop_scale(n->fattr[0]);
    drop_keys(n, r->step_seed, &k0, &k1);
    for (i = 0; i < total; i++) {
        double v = in[i];
        if (r->training) {
            uint32_t sample = per ? (uint32_t)r->batch_offset + (uint32_t)(i / per) : 0;
            uint32_t elem = (uint32_t)(per ? i % per : i);
            v = drop_keep(k0, k1, sample, elem, thr) ? v * scale : 0;
        }
        out[i] = acc ? out[i] + v : v;
    }
}

static void drop_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                             double *aux) {
    (void)aux;
    drop_ref_run(n, r, in[0], out, 0);
}

static void drop_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                              const double *gout, double *const *gin, double *aux) {
    (void)in; (void)out; (void)aux;
    if (gin[0]) drop_ref_run(n, r, gout, gin[0], 1);
}

const nncl__opdef nncl__opdef_dropout = {
    .name = "dropout", NNCL_KERNELS({"misc", "nncl_dropout_f32"}), .shape = drop_shape, .check = drop_check,
    .forward = drop_forward,
    .backward = drop_backward, .ref_forward = drop_ref_forward, .ref_backward = drop_ref_backward, .half = 1};

nncl_node *nncl_dropout(nncl_graph *g, nncl_node *x, float p) {
    int iattr[2];
    float fattr[1];
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_dropout: graph or input is NULL");
    iattr[0] = misc_u2i((uint32_t)g->seed);
    iattr[1] = misc_u2i((uint32_t)(g->seed >> 32));
    fattr[0] = p;
    return nncl__node_add(g, NNCL_OP_DROPOUT, NULL, 1, &x, iattr, 2, fattr, 1);
}

/* ------------------------------------------------------------- embedding */

/* iattr: [0] num, [1] dim. Inputs: indices, NAME.weight [num, dim]. */

/* num in 1..2^24 (indices travel as floats), dim > 0. */
static nncl_status emb_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] <= 0 || n->iattr[0] > (1 << 24) || n->iattr[1] <= 0)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT,
                                 "embedding \"%s\": needs 0 < num <= 2^24 (indices are floats) and dim > 0, got num %d "
                                 "dim %d", n->name, n->iattr[0], n->iattr[1]);
    return NNCL_OK;
}

static nncl_status emb_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *ind = n->in[0], *w = n->in[1];
    char s1[64], s2[64];
    int i;
    if (ind->ndim + 1 > NNCL_MAX_DIMS || w->ndim != 2 || w->shape[0] != n->iattr[0] || w->shape[1] != n->iattr[1])
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "embedding \"%s\": indices %s (at most %d dimensions) with weight %s for [%d,%d]",
                                 n->name, nncl__shape_str(ind, s1, sizeof s1), NNCL_MAX_DIMS - 1,
                                 nncl__shape_str(w, s2, sizeof s2), n->iattr[0], n->iattr[1]);
    n->batched = ind->batched;
    n->ndim = ind->ndim + 1;
    for (i = 0; i < ind->ndim; i++) n->shape[i] = ind->shape[i];
    n->shape[ind->ndim] = n->iattr[1];
    return NNCL_OK;
}

static nncl_status emb_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t rows = nncl__numel(n->in[0], ex->batch);
    NNCL_TRY(nncl__kbegin(ex, n, MISC_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, n->iattr[0]);
    nncl__arg_int(&a, n->iattr[1]);
    return nncl__launch_1d(&a, ex->dev, rows * (size_t)n->iattr[1]);
}

static nncl_status emb_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    size_t rows = nncl__numel(n->in[0], ex->batch);
    int num = n->iattr[0], dim = n->iattr[1], nblk = (dim + 31) / 32;
    if (nncl__need_grad(ex, n, 0) && !nncl__grad_accumulate(ex, n, 0)) {
        /* indices are piecewise constant: their gradient is zero */
        NNCL_TRY(nncl__kbegin(ex, n, MISC_K_ZERO, &a));
        nncl__arg_view(&a, nncl__grd(ex, n->in[0]));
        nncl__arg_int(&a, (int)rows);
        NNCL_TRY(nncl__launch_1d(&a, ex->dev, rows));
    }
    if (!nncl__need_grad(ex, n, 1)) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, MISC_K_BACKWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n->in[1]));
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, num);
    nncl__arg_int(&a, dim);
    nncl__arg_int(&a, nblk);
    nncl__arg_int(&a, nncl__grad_accumulate(ex, n, 1));
    return nncl__launch_1d(&a, ex->dev, (size_t)num * (size_t)nblk);
}

/* Row of index value v, or -1 when v is not a whole number in [0, num). */
static long emb_row(double v, int num) {
    return (v >= 0 && v < num && v == floor(v)) ? (long)v : -1;
}

static void emb_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    size_t rows = nncl__numel(n->in[0], r->batch), dim = (size_t)n->iattr[1], i, d;
    (void)aux;
    for (i = 0; i < rows; i++) {
        long j = emb_row(in[0][i], n->iattr[0]);
        for (d = 0; d < dim; d++) out[i * dim + d] = j >= 0 ? in[1][(size_t)j * dim + d] : NAN;
    }
}

static void emb_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    size_t rows = nncl__numel(n->in[0], r->batch), dim = (size_t)n->iattr[1], i, d;
    (void)out; (void)aux;
    if (!gin[1]) return;
    for (i = 0; i < rows; i++) {
        long j = emb_row(in[0][i], n->iattr[0]);
        if (j >= 0)
            for (d = 0; d < dim; d++) gin[1][(size_t)j * dim + d] += gout[i * dim + d];
    }
}

/* Fed indices (input 0) must name rows: on the device another value gives
 * a row of NaN (a computed index still can), which a training step would
 * carry into the loss and, through the optimizer, into every weight. */
static nncl_status emb_check_feed(nncl_context *ctx, const nncl_node *n, int in, const float *data, int batch) {
    size_t count = nncl__numel(n->in[0], batch), i;
    if (in != 0) return NNCL_OK;
    for (i = 0; i < count; i++)
        if (emb_row(data[i], n->iattr[0]) < 0)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "embedding \"%s\": indices \"%s\"[%zu] = %g is not a row index in 0..%d", n->name,
                              n->in[0]->name, i, (double)data[i], n->iattr[0] - 1);
    return NNCL_OK;
}

const nncl__opdef nncl__opdef_embedding = {
    .name = "embedding",
    NNCL_KERNELS({"misc", "nncl_embedding_f32"}, {"misc", "nncl_embedding_backward_f32"}, {"misc", "nncl_misc_zero_f32"}),
    .shape = emb_shape, .check = emb_check, .forward = emb_forward, .backward = emb_backward,
    .bw_reads = NNCL_BW_INPUTS,
    .ref_forward = emb_ref_forward, .ref_backward = emb_ref_backward, .check_feed = emb_check_feed, .half = 2,
    .f32_in = 1};

/* NAME.weight [num, dim] ~ N(0, 1) as PyTorch. An index that is not a whole
 * number in [0, num) gives a row of NaN and no gradient. */
nncl_node *nncl_embedding(nncl_graph *g, nncl_node *indices, int num, int dim, const char *name) {
    char wn[NNCL_NAME_MAX + 16], s1[64];
    nncl_node *in[2], probe;
    int wshape[2], iattr[2], keep;
    if (!g || !indices)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_embedding: graph or indices is NULL");
    if (!name || !*name || strlen(name) >= NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_embedding: needs a name of 1 to %d characters",
                                NNCL_NAME_MAX - 1);
    memset(&probe, 0, sizeof probe); /* the node's check, before its weight is made */
    snprintf(probe.name, sizeof probe.name, "%s", name);
    probe.iattr[0] = num;
    probe.iattr[1] = dim;
    if (emb_check(g, &probe) != NNCL_OK) return NULL;
    if (indices->ndim + 1 > NNCL_MAX_DIMS)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "embedding \"%s\": indices %s have too many dimensions", name,
                                nncl__shape_str(indices, s1, sizeof s1));
    snprintf(wn, sizeof wn, "%s.weight", name);
    wshape[0] = num;
    wshape[1] = dim;
    in[0] = indices;
    keep = g->n_nodes;
    in[1] = nncl_param(g, wn, 2, wshape, NNCL_INIT_NORMAL, 1.0f);
    iattr[0] = num;
    iattr[1] = dim;
    return nncl__layer_add(g, keep, NNCL_OP_EMBEDDING, name, 2, in, iattr, 2, NULL, 0);
}

/* ------------------------------------------------------------- reshape */

/* iattr: [0] ndim of the new per-sample (or, unbatched, whole) shape,
 * [1..4] its dimensions, one of which may be -1 (inferred). An alias: the
 * plan gives it its input's memory, and ref.c copies. */

static nncl_status reshape_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *xin = n->in[0];
    char s1[64];
    int nd = n->iattr[0], base = xin->batched ? 1 : 0, i, infer = -1;
    size_t known = 1;
    if (nd < 0 || nd + base > NNCL_MAX_DIMS || (!xin->batched && nd < 1))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "reshape of %s: %d dimensions (at most %d%s)",
                                 nncl__shape_str(xin, s1, sizeof s1), nd, NNCL_MAX_DIMS - base,
                                 base ? " after the batch" : ", at least 1");
    for (i = 0; i < nd; i++) {
        int d = n->iattr[1 + i];
        if (d == -1 && infer < 0) infer = i;
        else if (d <= 0 || nncl__mul_overflow(known, (size_t)d, &known))
            return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                     "reshape of %s: dimension %d is %d (positive, or one -1 to infer)",
                                     nncl__shape_str(xin, s1, sizeof s1), i, d);
    }
    n->batched = xin->batched;
    n->ndim = nd + base;
    n->shape[0] = 1;
    for (i = 0; i < nd; i++) n->shape[base + i] = n->iattr[1 + i];
    if (infer >= 0) {
        if (xin->sample_numel % known)
            return nncl__graph_error(g, NNCL_ERR_SHAPE, "reshape of %s (%zu elements%s): no size for dimension %d",
                                     nncl__shape_str(xin, s1, sizeof s1), xin->sample_numel,
                                     base ? " per sample" : "", infer);
        n->shape[base + infer] = (int)(xin->sample_numel / known);
        known = xin->sample_numel;
    }
    if (known != xin->sample_numel)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "reshape of %s (%zu elements%s) into %zu elements",
                                 nncl__shape_str(xin, s1, sizeof s1), xin->sample_numel, base ? " per sample" : "",
                                 known);
    return NNCL_OK;
}

const nncl__opdef nncl__opdef_reshape = {
    .name = "reshape", .shape = reshape_shape, .alias = 1, .half = 1};

nncl_node *nncl_reshape(nncl_graph *g, nncl_node *x, int ndim, const int *sample_shape) {
    int iattr[1 + NNCL_MAX_DIMS], i;
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_reshape: graph or input is NULL");
    if (ndim < 0 || ndim > NNCL_MAX_DIMS || (ndim > 0 && !sample_shape))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_reshape: ndim %d is not in 0..%d (or shape is NULL)", ndim, NNCL_MAX_DIMS);
    memset(iattr, 0, sizeof iattr);
    iattr[0] = ndim;
    for (i = 0; i < ndim; i++) iattr[1 + i] = sample_shape[i];
    return nncl__node_add(g, NNCL_OP_RESHAPE, NULL, 1, &x, iattr, 1 + NNCL_MAX_DIMS, NULL, 0);
}

/* [B, ...] -> [B, elements per sample]; unbatched: one dimension. */
nncl_node *nncl_flatten(nncl_graph *g, nncl_node *x) {
    int d;
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_flatten: graph or input is NULL");
    d = (int)x->sample_numel;
    return nncl_reshape(g, x, 1, &d);
}

/* ------------------------------------------------------------- concat */

/* iattr[0]: the axis as an index into the node's shape (batch included).
 * Viewed as [rows, ca + cb]: rows = the elements before the axis (batch
 * included), ca and cb = each input's axis length times the inner size. */
static void cat_layout(const nncl_node *n, int batch, int *rows, int *ca, int *cb) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    int ax = n->iattr[0], i, inner = 1;
    for (i = ax + 1; i < n->ndim; i++) inner *= n->shape[i];
    *ca = a->shape[ax] * inner;
    *cb = b->shape[ax] * inner;
    *rows = (int)(nncl__numel(n, batch) / (size_t)(*ca + *cb));
}

static nncl_status cat_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    char s1[64], s2[64];
    int base = a->batched ? 1 : 0, ax = n->iattr[0], i, ok;
    ok = a->batched == b->batched && a->ndim == b->ndim && ax >= base && ax < a->ndim;
    for (i = base; ok && i < a->ndim; i++)
        if (i != ax && a->shape[i] != b->shape[i]) ok = 0;
    if (!ok)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "concat \"%s\": %s and %s cannot be joined along per-sample axis %d", n->name,
                                 nncl__shape_str(a, s1, sizeof s1), nncl__shape_str(b, s2, sizeof s2), ax - base);
    if (a->shape[ax] > 0x7fffffff - b->shape[ax])
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "concat \"%s\": axis too long", n->name);
    n->batched = a->batched;
    n->ndim = a->ndim;
    for (i = 0; i < a->ndim; i++) n->shape[i] = a->shape[i];
    n->shape[ax] = a->shape[ax] + b->shape[ax];
    return NNCL_OK;
}

static nncl_status cat_forward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    int rows, ca, cb;
    cat_layout(n, ex->batch, &rows, &ca, &cb);
    NNCL_TRY(nncl__kbegin(ex, n, MISC_K_FORWARD, &a));
    nncl__arg_view(&a, nncl__val(ex, n->in[0]));
    nncl__arg_view(&a, nncl__val(ex, n->in[1]));
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_int(&a, rows);
    nncl__arg_int(&a, ca);
    nncl__arg_int(&a, cb);
    return nncl__launch_1d(&a, ex->dev, (size_t)rows * (size_t)(ca + cb));
}

static nncl_status cat_backward(nncl__exec *ex, nncl_node *n) {
    nncl__args a;
    int rows, ca, cb, k;
    cat_layout(n, ex->batch, &rows, &ca, &cb);
    for (k = 0; k < 2; k++) {
        if (!nncl__need_grad(ex, n, k)) continue;
        NNCL_TRY(nncl__kbegin(ex, n, MISC_K_BACKWARD, &a));
        nncl__arg_view(&a, nncl__grd(ex, n));
        nncl__arg_view(&a, nncl__grd(ex, n->in[k]));
        nncl__arg_int(&a, rows);
        nncl__arg_int(&a, ca);
        nncl__arg_int(&a, cb);
        nncl__arg_int(&a, k);
        nncl__arg_int(&a, nncl__grad_accumulate(ex, n, k));
        NNCL_TRY(nncl__launch_1d(&a, ex->dev, (size_t)rows * (size_t)(k ? cb : ca)));
    }
    return NNCL_OK;
}

static void cat_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    int rows, ca, cb, i, k;
    (void)aux;
    cat_layout(n, r->batch, &rows, &ca, &cb);
    for (i = 0; i < rows; i++) {
        for (k = 0; k < ca; k++) out[(size_t)i * (ca + cb) + k] = in[0][(size_t)i * ca + k];
        for (k = 0; k < cb; k++) out[(size_t)i * (ca + cb) + ca + k] = in[1][(size_t)i * cb + k];
    }
}

static void cat_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    int rows, ca, cb, i, k;
    (void)in; (void)out; (void)aux;
    cat_layout(n, r->batch, &rows, &ca, &cb);
    for (i = 0; i < rows; i++) {
        if (gin[0])
            for (k = 0; k < ca; k++) gin[0][(size_t)i * ca + k] += gout[(size_t)i * (ca + cb) + k];
        if (gin[1])
            for (k = 0; k < cb; k++) gin[1][(size_t)i * cb + k] += gout[(size_t)i * (ca + cb) + ca + k];
    }
}

const nncl__opdef nncl__opdef_concat = {
    .name = "concat", NNCL_KERNELS({"misc", "nncl_concat_f32"}, {"misc", "nncl_concat_backward_f32"}), .shape = cat_shape,
    .forward = cat_forward, .backward = cat_backward, .ref_forward = cat_ref_forward, .ref_backward = cat_ref_backward,
    .half = 1};

/* axis counts per-sample dimensions (0 is the first after the batch);
 * negative counts from the end, as in PyTorch. */
nncl_node *nncl_concat(nncl_graph *g, nncl_node *a, nncl_node *b, int axis) {
    nncl_node *in[2];
    int iattr[1], base, per;
    char s1[64];
    if (!g || !a || !b) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_concat: graph or an input is NULL");
    base = a->batched ? 1 : 0;
    per = a->ndim - base;
    if (axis < -per || axis >= per)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE,
                                "nncl_concat: axis %d is out of range for %s (%d per-sample dimensions)", axis,
                                nncl__shape_str(a, s1, sizeof s1), per);
    iattr[0] = (axis < 0 ? axis + per : axis) + base;
    in[0] = a;
    in[1] = b;
    return nncl__node_add(g, NNCL_OP_CONCAT, NULL, 2, in, iattr, 1, NULL, 0);
}
