/* op_attention.c - fused causal self-attention. Node: inputs q, k, v
 * [B, T, C] (batched, one shape), C = H heads of D = C / H columns; iattr
 * [0], [1] the graph seed's low and high bits (the dropout keys, as
 * nncl_dropout's), [2] H; fattr[0] the dropout probability p on the
 * weights. Output [B, T, C], head h in columns [h D, h D + D) as PyTorch's
 * view/transpose gives it. Per (sample, head):
 *   S = q k^T / sqrt(D) masked to j <= i,  P = softmax_j(S),
 *   Pd = P with dropout (training, p > 0),  y = Pd v.
 * Flash-attention style (cl/attention.cl, per-row kernels on CPUs, tiled
 * ones sharing rows through local memory on GPUs): the forward keeps only the
 * log-sum-exp of each row's scores (aux [B, H, T], fp32) and the backward
 * recomputes P from q, k and it; delta_i = dy_i . y_i (the second half of
 * aux, written by the query-side backward kernel) stands in for the row
 * sums of dPd Pd, so no T x T array is ever stored. The dropout mask of
 * weight (i, j) is nncl_dropout's hash of element (h T + i) T + j of the
 * global sample: the same on any device and shard, and the same in the
 * forward and backward. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Longest head: each work-item keeps up to four rows of D floats
 * (NNCL_ATT_DMAX in cl/attention.cl). */
#define ATT_DMAX 128
/* The tiled kernels' rows per work-group and local memory (NNCL_ATT_TQ,
 * NNCL_ATT_TK in cl/attention.cl). */
#define ATT_TQ 64
#define ATT_LOCAL_BYTES ((2 * 16 * ATT_DMAX + 32) * 4)

/* Slots: the per-row kernels, then their tiled forms (ATT_K_TILES later). */
enum { ATT_K_FORWARD, ATT_K_DQ, ATT_K_DKV, ATT_K_TILES };

typedef struct att_dims {
    int T, C, H, D;
    float scale;
} att_dims;

static att_dims att_dims_of(const nncl_node *n) {
    att_dims a;
    a.T = n->shape[1];
    a.C = n->shape[2];
    a.H = n->iattr[2];
    a.D = a.C / a.H;
    a.scale = (float)(1.0 / sqrt((double)a.D));
    return a;
}

static nncl_status att_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *q = n->in[0], *k = n->in[1], *v = n->in[2];
    char s1[64], s2[64], s3[64];
    int H = n->iattr[2], i;
    float p = n->fattr[0];
    if (!q->batched || q->ndim != 3 || !nncl__same_shape(q, k) || !nncl__same_shape(q, v))
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "causal_attention \"%s\": q %s, k %s and v %s must be one batched shape [B,T,C]",
                                 n->name, nncl__shape_str(q, s1, sizeof s1), nncl__shape_str(k, s2, sizeof s2),
                                 nncl__shape_str(v, s3, sizeof s3));
    if (H <= 0 || q->shape[2] % H || q->shape[2] / H > ATT_DMAX)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "causal_attention \"%s\": %d heads for q %s (C = %d must be a multiple of the heads, "
                                 "at most %d columns each)",
                                 n->name, H, nncl__shape_str(q, s1, sizeof s1), q->shape[2], ATT_DMAX);
    if (!(p >= 0 && p <= 1))
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "causal_attention \"%s\": dropout %g is not in [0, 1]",
                                 n->name, (double)p);
    n->batched = 1;
    n->ndim = 3;
    for (i = 0; i < 3; i++) n->shape[i] = q->shape[i];
    return NNCL_OK;
}

/* Two fp32 rows of B H T: the log-sum-exp, then delta. */
static size_t att_aux(const nncl_node *n, int batch) {
    return 2 * (size_t)batch * (size_t)n->iattr[2] * (size_t)n->shape[1];
}

/* The arguments every kernel takes after its buffers. */
static void att_args_tail(nncl__args *a, const nncl__exec *ex, const nncl_node *n, const att_dims *d, size_t rows) {
    uint32_t k0, k1;
    int drop = ex->training && n->fattr[0] > 0;
    int32_t i0, i1, thr;
    uint32_t t = nncl__dropout_threshold(n->fattr[0]);
    nncl__dropout_keys(n, ex->step_seed, &k0, &k1);
    memcpy(&i0, &k0, 4);
    memcpy(&i1, &k1, 4);
    memcpy(&thr, &t, 4);
    nncl__arg_count(a, rows);
    nncl__arg_int(a, d->T);
    nncl__arg_int(a, d->C);
    nncl__arg_int(a, d->H);
    nncl__arg_int(a, d->D);
    nncl__arg_float(a, d->scale);
    nncl__arg_int(a, ex->batch_offset);
    nncl__arg_int(a, drop);
    nncl__arg_int(a, i0);
    nncl__arg_int(a, i1);
    nncl__arg_int(a, thr);
    nncl__arg_float(a, (float)nncl__dropout_scale(n->fattr[0]));
}

/* Whether kernel `slot` runs tiled: on GPUs (the per-row kernels suit CPU
 * drivers, which run a group's work-items as SIMD lanes), where the device
 * has the local memory and the kernel its group size; NNCL_ATTENTION=tiles
 * or rows decides instead (tests run both on any device). */
static int att_tiled(nncl__exec *ex, const nncl_node *n, int slot) {
    const char *env = getenv("NNCL_ATTENTION");
    const nncl__kslot *k = nncl__kslot_of(ex, n, ATT_K_TILES + slot);
    size_t wg = k ? k->wg : 0;
    if ((wg && wg < ATT_TQ) || ex->dev->info.local_mem < ATT_LOCAL_BYTES || ex->dev->max_work_group < ATT_TQ) return 0;
    if (env && !strcmp(env, "tiles")) return 1;
    if (env && !strcmp(env, "rows")) return 0;
    return ex->dev->info.type == NNCL_DEVICE_GPU;
}

/* Begins kernel `slot` in the form att_tiled chooses. */
static nncl_status att_begin(nncl__exec *ex, const nncl_node *n, int slot, int *tiled, nncl__args *a) {
    *tiled = att_tiled(ex, n, slot);
    return nncl__kbegin(ex, n, *tiled ? ATT_K_TILES + slot : slot, a);
}

/* One work-item a row, or groups of ATT_TQ rows of one (sample, head). */
static nncl_status att_launch(nncl__args *a, nncl__exec *ex, const att_dims *d, int tiled) {
    size_t rows = (size_t)ex->batch * (size_t)d->H * (size_t)d->T, local = ATT_TQ, global;
    if (!tiled) return nncl__launch_1d(a, ex->dev, rows);
    global = (size_t)ex->batch * (size_t)d->H * (((size_t)d->T + ATT_TQ - 1) / ATT_TQ) * ATT_TQ;
    return nncl__launch(a, ex->dev, 1, &global, &local);
}

static nncl_status att_forward(nncl__exec *ex, nncl_node *n) {
    att_dims d = att_dims_of(n);
    size_t rows = (size_t)ex->batch * (size_t)d.H * (size_t)d.T;
    nncl__args a;
    int i, tiled;
    NNCL_TRY(att_begin(ex, n, ATT_K_FORWARD, &tiled, &a));
    for (i = 0; i < 3; i++) nncl__arg_view(&a, nncl__val(ex, n->in[i]));
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_view(&a, nncl__auxv(ex, n));
    att_args_tail(&a, ex, n, &d, rows);
    return att_launch(&a, ex, &d, tiled);
}

static nncl_status att_backward(nncl__exec *ex, nncl_node *n) {
    att_dims d = att_dims_of(n);
    size_t rows = (size_t)ex->batch * (size_t)d.H * (size_t)d.T;
    nncl__view lse = nncl__auxv(ex, n), delta = lse;
    nncl__args a;
    int i, want[3], acc[3], tiled;
    delta.off += rows;
    for (i = 0; i < 3; i++) {
        want[i] = nncl__need_grad(ex, n, i);
        acc[i] = want[i] ? nncl__grad_accumulate(ex, n, i) : 0;
    }
    NNCL_TRY(att_begin(ex, n, ATT_K_DQ, &tiled, &a));
    for (i = 0; i < 3; i++) nncl__arg_view(&a, nncl__val(ex, n->in[i]));
    nncl__arg_view(&a, nncl__val(ex, n));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, lse);
    nncl__arg_view(&a, delta);
    nncl__arg_view(&a, want[0] ? nncl__grd(ex, n->in[0]) : lse);
    att_args_tail(&a, ex, n, &d, rows);
    nncl__arg_int(&a, want[0]);
    nncl__arg_int(&a, acc[0]);
    NNCL_TRY(att_launch(&a, ex, &d, tiled));
    if (!want[1] && !want[2]) return NNCL_OK;
    NNCL_TRY(att_begin(ex, n, ATT_K_DKV, &tiled, &a));
    for (i = 0; i < 3; i++) nncl__arg_view(&a, nncl__val(ex, n->in[i]));
    nncl__arg_view(&a, nncl__grd(ex, n));
    nncl__arg_view(&a, lse);
    nncl__arg_view(&a, delta);
    nncl__arg_view(&a, want[1] ? nncl__grd(ex, n->in[1]) : lse);
    nncl__arg_view(&a, want[2] ? nncl__grd(ex, n->in[2]) : lse);
    att_args_tail(&a, ex, n, &d, rows);
    nncl__arg_int(&a, want[1]);
    nncl__arg_int(&a, acc[1]);
    nncl__arg_int(&a, want[2]);
    nncl__arg_int(&a, acc[2]);
    return att_launch(&a, ex, &d, tiled);
}

/* ------------------------------------------------------------- reference */

/* The dropout multiplier of weight (i, j) of head h in batch row b. */
static double att_ref_drop(const nncl_node *n, const nncl__refctx *r, const att_dims *d, int b, int h, int i, int j,
                           uint32_t k0, uint32_t k1) {
    uint32_t elem = ((uint32_t)h * (uint32_t)d->T + (uint32_t)i) * (uint32_t)d->T + (uint32_t)j; /* wraps as the kernels' */
    if (!r->training || !(n->fattr[0] > 0)) return 1;
    return nncl__dropout_keep(k0, k1, (uint32_t)(r->batch_offset + b), elem, nncl__dropout_threshold(n->fattr[0]))
               ? nncl__dropout_scale(n->fattr[0])
               : 0;
}

/* p[0..i] = row i's softmax weights (before dropout) of head h of sample b. */
static void att_ref_row(const att_dims *d, const double *q, const double *k, size_t base, int i, double *p) {
    double m = -INFINITY, s = 0;
    int j, e;
    for (j = 0; j <= i; j++) {
        double dot = 0;
        for (e = 0; e < d->D; e++) dot += q[base + (size_t)i * d->C + e] * k[base + (size_t)j * d->C + e];
        p[j] = dot / sqrt((double)d->D);
        if (p[j] > m) m = p[j];
    }
    for (j = 0; j <= i; j++) s += (p[j] = exp(p[j] - m));
    for (j = 0; j <= i; j++) p[j] /= s;
}

static void att_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                            double *aux) {
    att_dims d = att_dims_of(n);
    double *p = aux; /* B H T floats: room for one row of weights */
    uint32_t k0, k1;
    int b, h, i, j, e;
    nncl__dropout_keys(n, r->step_seed, &k0, &k1);
    for (b = 0; b < r->batch; b++)
        for (h = 0; h < d.H; h++) {
            size_t base = (size_t)b * d.T * d.C + (size_t)h * d.D;
            for (i = 0; i < d.T; i++) {
                double *y = out + base + (size_t)i * d.C;
                att_ref_row(&d, in[0], in[1], base, i, p);
                for (e = 0; e < d.D; e++) y[e] = 0;
                for (j = 0; j <= i; j++) {
                    double w = p[j] * att_ref_drop(n, r, &d, b, h, i, j, k0, k1);
                    for (e = 0; e < d.D; e++) y[e] += w * in[2][base + (size_t)j * d.C + e];
                }
            }
        }
}

/* dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij') with dP_ij = drop_ij dy_i . v_j
 * (the textbook softmax backward, not the kernels' delta = dy . y). */
static void att_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                             const double *gout, double *const *gin, double *aux) {
    att_dims d = att_dims_of(n);
    double *p = aux, *dp = aux + d.T;
    uint32_t k0, k1;
    int b, h, i, j, e;
    (void)out;
    nncl__dropout_keys(n, r->step_seed, &k0, &k1);
    for (b = 0; b < r->batch; b++)
        for (h = 0; h < d.H; h++) {
            size_t base = (size_t)b * d.T * d.C + (size_t)h * d.D;
            for (i = 0; i < d.T; i++) {
                const double *dy = gout + base + (size_t)i * d.C;
                double sum = 0;
                att_ref_row(&d, in[0], in[1], base, i, p);
                for (j = 0; j <= i; j++) {
                    double m = att_ref_drop(n, r, &d, b, h, i, j, k0, k1), dot = 0;
                    for (e = 0; e < d.D; e++) dot += dy[e] * in[2][base + (size_t)j * d.C + e];
                    dp[j] = dot * m;
                    sum += p[j] * dp[j];
                    if (gin[2])
                        for (e = 0; e < d.D; e++) gin[2][base + (size_t)j * d.C + e] += p[j] * m * dy[e];
                }
                for (j = 0; j <= i; j++) {
                    double ds = p[j] * (dp[j] - sum) / sqrt((double)d.D);
                    for (e = 0; e < d.D; e++) {
                        if (gin[0]) gin[0][base + (size_t)i * d.C + e] += ds * in[1][base + (size_t)j * d.C + e];
                        if (gin[1]) gin[1][base + (size_t)j * d.C + e] += ds * in[0][base + (size_t)i * d.C + e];
                    }
                }
            }
        }
}

const nncl__opdef nncl__opdef_causal_attention = {
    .name = "causal_attention",
    NNCL_KERNELS({"attention", "nncl_attention_f32"}, {"attention", "nncl_attention_backward_f32_dq"},
                {"attention", "nncl_attention_backward_f32_dkv"}, {"attention", "nncl_attention_f32_tiles"},
                {"attention", "nncl_attention_backward_f32_dq_tiles"},
                {"attention", "nncl_attention_backward_f32_dkv_tiles"}),
    .shape = att_shape, .aux_size = att_aux, .forward = att_forward, .backward = att_backward,
    .bw_reads = NNCL_BW_INPUTS | NNCL_BW_OUTPUT, .ref_forward = att_ref_forward, .ref_backward = att_ref_backward,
    .half = 1, .f32_aux = 1};

nncl_node *nncl_causal_attention(nncl_graph *g, nncl_node *q, nncl_node *k, nncl_node *v, int n_heads,
                                 float dropout) {
    nncl_node *in[3];
    int iattr[3];
    float fattr[1];
    uint32_t lo, hi;
    if (!g || !q || !k || !v)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_causal_attention: graph, q, k or v is NULL");
    if (n_heads <= 0)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_causal_attention: n_heads %d is not positive",
                                n_heads);
    if (!(dropout >= 0 && dropout <= 1))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_causal_attention: dropout %g is not in [0, 1]",
                                (double)dropout);
    lo = (uint32_t)g->seed;
    hi = (uint32_t)(g->seed >> 32);
    memcpy(&iattr[0], &lo, 4);
    memcpy(&iattr[1], &hi, 4);
    iattr[2] = n_heads;
    fattr[0] = dropout;
    in[0] = q;
    in[1] = k;
    in[2] = v;
    return nncl__node_add(g, NNCL_OP_CAUSAL_ATTENTION, NULL, 3, in, iattr, 3, fattr, 1);
}
