/* op_matmul.c - the batched matrix product c = op(a) op(b): a [.., M, K]
 * ([.., K, M] with transpose_a), b [.., K, N] ([.., N, K] with
 * transpose_b), c [.., M, N], batched over the leading dimensions of a
 * (the batch included). b is either batched like a, or unbatched (a
 * parameter) with leading dimensions that end a's (none for a matrix
 * [K, N]), item z of a using item z mod (b's items) of b: one weight
 * shared by every sample. Everything goes through nncl's GEMM
 * (nncl__sgemm: the own kernels or CLBlast, chosen per shape): a shared
 * matrix b with op(a) = a is one product over all rows of a (and its
 * gradient one product over them); otherwise one product per item, the
 * shared b's gradient accumulated over the items that use it. */
#include "ops/ops.h"

/* iattr: [0] transpose_a, [1] transpose_b. */

typedef struct mm_dims {
    size_t items, b_items, M, K, N;
} mm_dims;

static void mm_layout(const nncl_node *n, int batch, mm_dims *d) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    int ta = n->iattr[0], tb = n->iattr[1];
    d->M = (size_t)a->shape[a->ndim - (ta ? 1 : 2)];
    d->K = (size_t)a->shape[a->ndim - (ta ? 2 : 1)];
    d->N = (size_t)b->shape[b->ndim - (tb ? 2 : 1)];
    d->items = nncl__numel(a, batch) / (d->M * d->K);
    d->b_items = nncl__numel(b, batch) / (d->K * d->N);
}

/* Whether the products fold into one over all rows of a. */
static int mm_flat(const nncl_node *n, const mm_dims *d) { return d->b_items == 1 && !n->iattr[0]; }

static nncl_status mm_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *a = n->in[0], *b = n->in[1];
    char s1[64], s2[64];
    int ta = n->iattr[0], tb = n->iattr[1], i, ka, kb, lead_a, lead_b, ok = 1;
    if (a->ndim - a->batched < 2 || b->ndim - b->batched < 2)
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "matmul \"%s\": a %s and b %s need two matrix dimensions each%s",
                                 n->name, nncl__shape_str(a, s1, sizeof s1), nncl__shape_str(b, s2, sizeof s2),
                                 a->ndim - a->batched < 2 ? " (a [B,K] times a weight: nncl_linear)" : "");
    ka = a->shape[a->ndim - (ta ? 2 : 1)];
    kb = b->shape[b->ndim - (tb ? 1 : 2)];
    lead_a = a->ndim - 2;
    lead_b = b->ndim - 2;
    if (b->batched) {
        ok = a->batched && lead_a == lead_b;
        for (i = 1; ok && i < lead_a; i++) ok = a->shape[i] == b->shape[i];
    } else { /* b's leading dimensions end a's per-sample ones */
        ok = lead_b <= lead_a - a->batched;
        for (i = 0; ok && i < lead_b; i++) ok = b->shape[i] == a->shape[lead_a - lead_b + i];
    }
    if (!ok || ka != kb)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "matmul \"%s\": a %s%s does not fit b %s%s (%s)", n->name,
                                 nncl__shape_str(a, s1, sizeof s1), ta ? " transposed" : "",
                                 nncl__shape_str(b, s2, sizeof s2), tb ? " transposed" : "",
                                 ka != kb ? "inner dimensions differ" : "leading dimensions differ");
    n->batched = a->batched;
    n->ndim = a->ndim;
    for (i = 0; i < lead_a; i++) n->shape[i] = a->shape[i];
    n->shape[lead_a] = a->shape[a->ndim - (ta ? 1 : 2)];
    n->shape[lead_a + 1] = b->shape[b->ndim - (tb ? 2 : 1)];
    return NNCL_OK;
}

enum { MM_FORWARD, MM_DA, MM_DB };

/* The product of `which` for item z (the whole of a when flat): forward
 * c_z = op(a_z) op(b_z'); dA: da_z = dc_z op(b)^T (stored transposed with
 * transpose_a: op(b) dc_z^T); dB: db = op(a_z)^T dc_z (with transpose_b:
 * dc_z^T op(a_z)); beta 1 adds. */
static void mm_args(nncl__exec *ex, const nncl_node *n, const mm_dims *d, int which, size_t z, float beta,
                    nncl__gemm_args *g) {
    int ta = n->iattr[0], tb = n->iattr[1], flat = mm_flat(n, d);
    size_t rows = flat ? d->items * d->M : d->M, zb = flat ? 0 : z % d->b_items;
    size_t lda = ta ? d->M : d->K, ldb = tb ? d->K : d->N;
    nncl__view av = nncl__val(ex, n->in[0]), bv = nncl__val(ex, n->in[1]), cv = nncl__val(ex, n);
    size_t ao = av.off + z * d->M * d->K, bo = bv.off + zb * d->K * d->N, co = cv.off + z * d->M * d->N;
    nncl__gemm_args_begin(ex, beta, g);
    if (which == MM_FORWARD) {
        g->trans_a = ta; g->trans_b = tb;
        g->m = rows; g->n = d->N; g->k = d->K;
        g->a = av.mem; g->a_off = ao; g->lda = lda;
        g->b = bv.mem; g->b_off = bo; g->ldb = ldb;
        g->c = cv.mem; g->c_off = co; g->ldc = d->N;
    } else if (which == MM_DA) {
        nncl__view dc = nncl__grd(ex, n), da = nncl__grd(ex, n->in[0]);
        size_t dco = dc.off + z * d->M * d->N, dao = da.off + z * d->M * d->K;
        g->c_f32 = n->in[0]->op == NNCL_OP_PARAM; /* a parameter's gradient stays fp32 */
        g->c = da.mem; g->c_off = dao;
        if (!ta) { /* [rows, K] = dc [rows, N] op(b)^T */
            g->trans_b = !tb;
            g->m = rows; g->n = d->K; g->k = d->N;
            g->a = dc.mem; g->a_off = dco; g->lda = d->N;
            g->b = bv.mem; g->b_off = bo; g->ldb = ldb;
            g->ldc = d->K;
        } else { /* [K, M] = op(b) [K, N] dc^T [N, M] */
            g->trans_a = tb; g->trans_b = 1;
            g->m = d->K; g->n = d->M; g->k = d->N;
            g->a = bv.mem; g->a_off = bo; g->lda = ldb;
            g->b = dc.mem; g->b_off = dco; g->ldb = d->N;
            g->ldc = d->M;
        }
    } else {
        nncl__view dc = nncl__grd(ex, n), db = nncl__grd(ex, n->in[1]);
        size_t dco = dc.off + z * d->M * d->N, dbo = db.off + zb * d->K * d->N;
        g->c_f32 = n->in[1]->op == NNCL_OP_PARAM;
        g->c = db.mem; g->c_off = dbo;
        if (!tb) { /* [K, N] = op(a)^T [K, rows] dc [rows, N] */
            g->trans_a = !ta;
            g->m = d->K; g->n = d->N; g->k = rows;
            g->a = av.mem; g->a_off = ao; g->lda = lda;
            g->b = dc.mem; g->b_off = dco; g->ldb = d->N;
            g->ldc = d->N;
        } else { /* [N, K] = dc^T [N, rows] op(a) [rows, K] */
            g->trans_a = 1; g->trans_b = ta;
            g->m = d->N; g->n = d->K; g->k = rows;
            g->a = dc.mem; g->a_off = dco; g->lda = d->N;
            g->b = av.mem; g->b_off = ao; g->ldb = lda;
            g->ldc = d->K;
        }
    }
}

static nncl_status mm_prepare(nncl__exec *ex, nncl_node *n, size_t *temp) {
    nncl__gemm_args g;
    mm_dims d;
    size_t b = 0;
    int which;
    mm_layout(n, ex->batch, &d);
    *temp = 0;
    for (which = MM_FORWARD; which <= MM_DB; which++) {
        if (which != MM_FORWARD && !nncl__need_grad(ex, n, which - 1)) continue;
        mm_args(ex, n, &d, which, 0, 0, &g);
        NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &b));
        if (b > *temp) *temp = b;
    }
    return NNCL_OK;
}

static nncl_status mm_forward(nncl__exec *ex, nncl_node *n) {
    nncl__gemm_args g;
    mm_dims d;
    size_t z;
    mm_layout(n, ex->batch, &d);
    for (z = 0; z < (mm_flat(n, &d) ? 1 : d.items); z++) {
        mm_args(ex, n, &d, MM_FORWARD, z, 0, &g);
        NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
    }
    return NNCL_OK;
}

static nncl_status mm_backward(nncl__exec *ex, nncl_node *n) {
    nncl__gemm_args g;
    mm_dims d;
    size_t z, count;
    int which;
    mm_layout(n, ex->batch, &d);
    count = mm_flat(n, &d) ? 1 : d.items;
    for (which = MM_DA; which <= MM_DB; which++) {
        int acc;
        if (!nncl__need_grad(ex, n, which - 1)) continue;
        acc = nncl__grad_accumulate(ex, n, which - 1);
        for (z = 0; z < count; z++) {
            /* a shared b: the items after its first use add to its gradient */
            int add = acc || (which == MM_DB && z >= d.b_items);
            mm_args(ex, n, &d, which, z, add ? 1.0f : 0.0f, &g);
            NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
        }
    }
    return NNCL_OK;
}

/* Element (i, j) of op(m) for item m of a [rows, cols] matrix stored
 * transposed or not. */
static double mm_at(const double *m, int trans, size_t i, size_t j, size_t rows, size_t cols) {
    return trans ? m[j * rows + i] : m[i * cols + j];
}

static void mm_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    mm_dims d;
    size_t z, i, j, k;
    int ta = n->iattr[0], tb = n->iattr[1];
    (void)aux;
    mm_layout(n, r->batch, &d);
    for (z = 0; z < d.items; z++) {
        const double *a = in[0] + z * d.M * d.K, *b = in[1] + (z % d.b_items) * d.K * d.N;
        for (i = 0; i < d.M; i++)
            for (j = 0; j < d.N; j++) {
                double s = 0;
                for (k = 0; k < d.K; k++) s += mm_at(a, ta, i, k, d.M, d.K) * mm_at(b, tb, k, j, d.K, d.N);
                out[(z * d.M + i) * d.N + j] = s;
            }
    }
}

static void mm_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    mm_dims d;
    size_t z, i, j, k;
    int ta = n->iattr[0], tb = n->iattr[1];
    (void)out; (void)aux;
    mm_layout(n, r->batch, &d);
    for (z = 0; z < d.items; z++) {
        size_t ao = z * d.M * d.K, bo = (z % d.b_items) * d.K * d.N;
        for (i = 0; i < d.M; i++)
            for (j = 0; j < d.N; j++) {
                double gc = gout[(z * d.M + i) * d.N + j];
                for (k = 0; k < d.K; k++) {
                    /* c[i,j] += op(a)[i,k] op(b)[k,j] */
                    size_t ia = ao + (ta ? k * d.M + i : i * d.K + k), ib = bo + (tb ? j * d.K + k : k * d.N + j);
                    if (gin[0]) gin[0][ia] += gc * in[1][ib];
                    if (gin[1]) gin[1][ib] += gc * in[0][ia];
                }
            }
    }
}

const nncl__opdef nncl__opdef_matmul = {
    .name = "matmul", .shape = mm_shape, .prepare = mm_prepare, .forward = mm_forward, .backward = mm_backward,
    .bw_reads = NNCL_BW_INPUTS, .ref_forward = mm_ref_forward, .ref_backward = mm_ref_backward, .half = 2};

nncl_node *nncl_matmul(nncl_graph *g, nncl_node *a, nncl_node *b, int transpose_a, int transpose_b) {
    nncl_node *in[2];
    int iattr[2];
    if (!g || !a || !b) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_matmul: graph or an input is NULL");
    if ((transpose_a != 0 && transpose_a != 1) || (transpose_b != 0 && transpose_b != 1))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT,
                                "nncl_matmul: transpose_a %d and transpose_b %d must be 0 or 1", transpose_a,
                                transpose_b);
    in[0] = a;
    in[1] = b;
    iattr[0] = transpose_a;
    iattr[1] = transpose_b;
    return nncl__node_add(g, NNCL_OP_MATMUL, NULL, 2, in, iattr, 2, NULL, 0);
}
