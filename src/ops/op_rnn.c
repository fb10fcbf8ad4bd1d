/* op_rnn.c - rnn_scan, the recurrence of an LSTM or GRU layer as one node
 * (nncl_lstm / nncl_gru build it, src/ops/rnn.c). Node: in[0] gi
 * [B, T, G H], the input products of every step (x W_ih^T), in[1] W_hh
 * [G H, H], in[2] b_ih, in[3] b_hh [G H], added in the cell; iattr[0]
 * the cell (0 LSTM, G 4, gates i f g o; 1 GRU, G 3, gates r z n, PyTorch's
 * n = tanh(gi_n + r (W_hn h + b_hn))). Output h [B, T, H], zero initial
 * state. Per step one product hh = h_{t-1} W_hh^T (none at t = 0) and one
 * fused cell kernel (cl/rnn.cl); the backward runs the steps in reverse,
 * one cell-backward kernel (gate gradients, dc carried) and one product
 * dh_{t-1} = dgates_t W_hh per step, then dW_hh = sum_t dgates_t^T h_{t-1}
 * as ONE product over all steps, and the biases' gradients as column sums
 * over all steps, which the time-major aux makes possible:
 * aux holds gates [T, B, 4H] (GRU: r, z, n, W_hn h + b_hn), h [T, B, H],
 * c [T, B, H], then scratch hh [B, G H], dh and dc [B, H], and W_hh^T
 * [H, G H] (the forward's products read it as stored); the backward
 * overwrites each step's gates with its gate gradients (GRU: those of r,
 * z, W_hn h + b_hn and n). */
#include "ops/ops.h"
#include <limits.h>
#include <math.h>

enum { RS_K_LSTM, RS_K_LSTM_BW, RS_K_GRU, RS_K_GRU_BW, RS_K_COLSUM, RS_K_TRANSPOSE };

typedef struct rs_dims {
    size_t B, T, H, G;
    size_t hs, cs, hh, dh, dc, wt; /* aux offsets after the gates (at 0) */
} rs_dims;

static rs_dims rs_dims_of(const nncl_node *n, int batch) {
    rs_dims d;
    d.B = (size_t)batch;
    d.T = (size_t)n->shape[1];
    d.H = (size_t)n->shape[2];
    d.G = n->iattr[0] ? 3 : 4;
    d.hs = d.T * d.B * 4 * d.H;
    d.cs = d.hs + d.T * d.B * d.H;
    d.hh = d.cs + d.T * d.B * d.H;
    d.dh = d.hh + d.B * d.G * d.H;
    d.dc = d.dh + d.B * d.H;
    d.wt = d.dc + d.B * d.H;
    return d;
}

static nncl_status rs_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] != 0 && n->iattr[0] != 1)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "rnn_scan \"%s\": cell %d is not 0 (LSTM) or 1 (GRU)",
                                 n->name, n->iattr[0]);
    return NNCL_OK;
}

static nncl_status rs_shape(nncl_graph *g, nncl_node *n) {
    const nncl_node *gi = n->in[0], *w = n->in[1], *bi = n->in[2], *bh = n->in[3];
    char s1[64], s2[64], s3[64], s4[64];
    int G = n->iattr[0] ? 3 : 4, H = w->ndim == 2 ? w->shape[1] : 0;
    if (!gi->batched || gi->ndim != 3 || w->batched || w->ndim != 2 || H <= 0 || w->shape[0] != G * H ||
        gi->shape[2] != G * H || bi->batched || bi->ndim != 1 || bi->shape[0] != G * H || bh->batched ||
        bh->ndim != 1 || bh->shape[0] != G * H)
        return nncl__graph_error(g, NNCL_ERR_SHAPE,
                                 "rnn_scan \"%s\": gates %s, W_hh %s, b_ih %s, b_hh %s do not fit (gates [B, T, %d H], "
                                 "W_hh [%d H, H], biases [%d H])",
                                 n->name, nncl__shape_str(gi, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2),
                                 nncl__shape_str(bi, s3, sizeof s3), nncl__shape_str(bh, s4, sizeof s4), G, G, G);
    n->batched = 1;
    n->ndim = 3;
    n->shape[0] = gi->shape[0];
    n->shape[1] = gi->shape[1];
    n->shape[2] = H;
    return NNCL_OK;
}

static size_t rs_aux(const nncl_node *n, int batch) {
    rs_dims d = rs_dims_of(n, batch);
    return d.wt + d.G * d.H * d.H;
}

/* The products: forward hh = h_{t-1} W_hh^T, backward dh = dgates_t W_hh
 * (+ dh with GRU's direct part), and dW_hh (+)= dgates[1..T)^T h[0..T-1). */
enum { RS_G_HH, RS_G_DH, RS_G_DW };

static void rs_gemm_args(nncl__exec *ex, const nncl_node *n, const rs_dims *d, int which, size_t t, float beta,
                         nncl__gemm_args *g) {
    nncl__view aux = nncl__auxv(ex, n), w = nncl__val(ex, n->in[1]);
    size_t GH = d->G * d->H;
    nncl__gemm_args_begin(ex, beta, g);
    g->a = aux.mem;
    if (which == RS_G_HH) { /* W_hh^T from aux */
        g->m = d->B; g->n = GH; g->k = d->H;
        g->a_off = aux.off + d->hs + (t - 1) * d->B * d->H; g->lda = d->H;
        g->b = aux.mem; g->b_off = aux.off + d->wt; g->ldb = GH;
        g->c = aux.mem; g->c_off = aux.off + d->hh; g->ldc = GH;
    } else if (which == RS_G_DH) {
        g->m = d->B; g->n = d->H; g->k = GH;
        g->a_off = aux.off + t * d->B * 4 * d->H; g->lda = 4 * d->H;
        g->b = w.mem; g->b_off = w.off; g->ldb = d->H;
        g->c = aux.mem; g->c_off = aux.off + d->dh; g->ldc = d->H;
    } else {
        nncl__view dw = nncl__grd(ex, n->in[1]);
        g->trans_a = 1;
        g->c_f32 = n->in[1]->op == NNCL_OP_PARAM;
        g->m = GH; g->n = d->H; g->k = (d->T - 1) * d->B;
        g->a_off = aux.off + d->B * 4 * d->H; g->lda = 4 * d->H;
        g->b = aux.mem; g->b_off = aux.off + d->hs; g->ldb = d->H;
        g->c = dw.mem; g->c_off = dw.off; g->ldc = d->H;
    }
}

static nncl_status rs_prepare(nncl__exec *ex, nncl_node *n, size_t *temp) {
    rs_dims d = rs_dims_of(n, ex->batch);
    nncl__gemm_args g;
    size_t b = 0;
    int which;
    *temp = 0;
    if (d.T < 2) return NNCL_OK;
    for (which = RS_G_HH; which <= RS_G_DW; which++) {
        if (which == RS_G_DW && !nncl__need_grad(ex, n, 1)) continue;
        rs_gemm_args(ex, n, &d, which, 1, 0, &g);
        NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &b));
        if (b > *temp) *temp = b;
    }
    return NNCL_OK;
}

/* A cell kernel over [H, B]: groups of up to 64 units of one sample. */
static nncl_status rs_launch(nncl__args *a, nncl__exec *ex, const rs_dims *d) {
    size_t global[2], local[2];
    local[0] = 64;
    while (local[0] > 8 && local[0] / 2 >= d->H) local[0] /= 2;
    if (ex->dev->max_work_group < local[0]) local[0] = ex->dev->max_work_group;
    local[1] = 1;
    global[0] = d->H;
    global[1] = d->B;
    return nncl__launch(a, ex->dev, 2, global, local);
}

static nncl_status rs_forward(nncl__exec *ex, nncl_node *n) {
    rs_dims d = rs_dims_of(n, ex->batch);
    nncl__view aux = nncl__auxv(ex, n);
    int gru = n->iattr[0];
    size_t t;
    /* the kernels index in int */
    if (nncl__numel(n->in[0], ex->batch) > (size_t)INT_MAX || rs_aux(n, ex->batch) > (size_t)INT_MAX)
        return nncl__fail(ex->ctx, NNCL_ERR_UNSUPPORTED, "rnn_scan \"%s\": a batch of %d has more than 2^31 elements",
                          n->name, ex->batch);
    if (d.T > 1) {
        nncl__args a;
        size_t global[2];
        NNCL_TRY(nncl__kbegin(ex, n, RS_K_TRANSPOSE, &a));
        nncl__arg_view(&a, nncl__val(ex, n->in[1]));
        nncl__arg_mem(&a, aux.mem);
        nncl__arg_count(&a, aux.off + d.wt);
        nncl__arg_count(&a, d.G * d.H);
        nncl__arg_count(&a, d.H);
        global[0] = d.G * d.H;
        global[1] = d.H;
        NNCL_TRY(nncl__launch_exact(&a, ex->dev, 2, global));
    }
    for (t = 0; t < d.T; t++) {
        nncl__gemm_args g;
        nncl__args a;
        if (t > 0) {
            rs_gemm_args(ex, n, &d, RS_G_HH, t, 0, &g);
            NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
        }
        NNCL_TRY(nncl__kbegin(ex, n, gru ? RS_K_GRU : RS_K_LSTM, &a));
        nncl__arg_view(&a, nncl__val(ex, n->in[0]));
        nncl__arg_mem(&a, aux.mem);
        nncl__arg_count(&a, aux.off + d.hh);
        nncl__arg_view(&a, nncl__val(ex, n->in[2]));
        nncl__arg_view(&a, nncl__val(ex, n->in[3]));
        nncl__arg_mem(&a, aux.mem);
        nncl__arg_count(&a, aux.off + (gru ? d.hs : d.cs) + (t ? t - 1 : 0) * d.B * d.H);
        nncl__arg_view(&a, aux);
        nncl__arg_count(&a, aux.off + d.hs);
        if (!gru) nncl__arg_count(&a, aux.off + d.cs);
        nncl__arg_view(&a, nncl__val(ex, n));
        nncl__arg_count(&a, d.B);
        nncl__arg_count(&a, d.T);
        nncl__arg_count(&a, d.H);
        nncl__arg_count(&a, t);
        NNCL_TRY(rs_launch(&a, ex, &d));
    }
    return NNCL_OK;
}

/* db (+)= the column sums of rows of m (leading dimension ld), columns
 * from `from` on taken `shift` further; rows 0: zeros. */
static nncl_status rs_colsum(nncl__exec *ex, const nncl_node *n, nncl__view m, size_t rows, size_t cols, size_t ld,
                             size_t from, size_t shift, nncl__view db, int acc) {
    return nncl__k_rnn_colsum(nncl__kl_of(ex, n, RS_K_COLSUM), m, rows, cols, ld, from, shift, db, acc);
}

static nncl_status rs_backward(nncl__exec *ex, nncl_node *n) {
    rs_dims d = rs_dims_of(n, ex->batch);
    nncl__view aux = nncl__auxv(ex, n), dgi = nncl__grd(ex, n->in[0]);
    int gru = n->iattr[0], want = nncl__need_grad(ex, n, 0), acc = want ? nncl__grad_accumulate(ex, n, 0) : 0;
    size_t t;
    if (!want) dgi = aux;
    for (t = d.T; t-- > 0;) {
        nncl__gemm_args g;
        nncl__args a;
        NNCL_TRY(nncl__kbegin(ex, n, gru ? RS_K_GRU_BW : RS_K_LSTM_BW, &a));
        nncl__arg_view(&a, aux);
        nncl__arg_count(&a, aux.off + (gru ? d.hs : d.cs));
        nncl__arg_count(&a, aux.off + d.dh);
        if (!gru) nncl__arg_count(&a, aux.off + d.dc);
        nncl__arg_view(&a, nncl__grd(ex, n));
        nncl__arg_view(&a, dgi);
        nncl__arg_int(&a, want);
        nncl__arg_int(&a, acc);
        nncl__arg_count(&a, d.B);
        nncl__arg_count(&a, d.T);
        nncl__arg_count(&a, d.H);
        nncl__arg_count(&a, t);
        nncl__arg_int(&a, t + 1 < d.T);
        NNCL_TRY(rs_launch(&a, ex, &d));
        if (t > 0) {
            rs_gemm_args(ex, n, &d, RS_G_DH, t, gru ? 1.0f : 0.0f, &g);
            NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
        }
    }
    if (nncl__need_grad(ex, n, 1)) {
        int acc_w = nncl__grad_accumulate(ex, n, 1);
        if (d.T > 1) {
            nncl__gemm_args g;
            rs_gemm_args(ex, n, &d, RS_G_DW, 0, acc_w ? 1.0f : 0.0f, &g);
            NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
        } else if (!acc_w) { /* one step: W_hh met only zero states */
            NNCL_TRY(rs_colsum(ex, n, aux, 0, d.G * d.H * d.H, 0, 0, 0, nncl__grd(ex, n->in[1]), 0));
        }
    }
    /* b_ih's: the input side's gate gradients (the GRU's dn in the 4th
     * slot), b_hh's: the hidden side's (the LSTM's are the same) */
    if (nncl__need_grad(ex, n, 2)) {
        int acc_b = nncl__grad_accumulate(ex, n, 2);
        NNCL_TRY(rs_colsum(ex, n, aux, d.T * d.B, d.G * d.H, 4 * d.H, 2 * d.H, gru ? d.H : 0, nncl__grd(ex, n->in[2]),
                           acc_b));
    }
    if (nncl__need_grad(ex, n, 3)) {
        int acc_b = nncl__grad_accumulate(ex, n, 3);
        NNCL_TRY(rs_colsum(ex, n, aux, d.T * d.B, d.G * d.H, 4 * d.H, 0, 0, nncl__grd(ex, n->in[3]), acc_b));
    }
    return NNCL_OK;
}

/* ------------------------------------------------------------- reference */

static double rs_sig(double v) { return 1 / (1 + exp(-v)); }

/* The forward into aux (the device's layout, in double) and out, if any. */
static void rs_ref_run(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out, double *aux) {
    rs_dims d = rs_dims_of(n, r->batch);
    size_t GH = d.G * d.H, b, t, j, k, q;
    for (t = 0; t < d.T; t++)
        for (b = 0; b < d.B; b++)
            for (j = 0; j < d.H; j++) {
                const double *gi = in[0] + (b * d.T + t) * GH;
                const double *hp = t ? aux + d.hs + ((t - 1) * d.B + b) * d.H : NULL;
                double *gt = aux + (t * d.B + b) * 4 * d.H, v[4], h;
                size_t i = (t * d.B + b) * d.H + j;
                double u[4]; /* x W_ih^T + b_ih of the gates */
                for (k = 0; k < d.G; k++) {
                    v[k] = in[3][k * d.H + j];
                    u[k] = gi[k * d.H + j] + in[2][k * d.H + j];
                    for (q = 0; hp && q < d.H; q++) v[k] += hp[q] * in[1][(k * d.H + j) * d.H + q];
                }
                if (!n->iattr[0]) {
                    for (k = 0; k < 4; k++) gt[k * d.H + j] = k == 2 ? tanh(u[k] + v[k]) : rs_sig(u[k] + v[k]);
                    aux[d.cs + i] = gt[d.H + j] * (t ? aux[d.cs + i - d.B * d.H] : 0) + gt[j] * gt[2 * d.H + j];
                    h = gt[3 * d.H + j] * tanh(aux[d.cs + i]);
                } else {
                    gt[j] = rs_sig(u[0] + v[0]);
                    gt[d.H + j] = rs_sig(u[1] + v[1]);
                    gt[3 * d.H + j] = v[2];
                    gt[2 * d.H + j] = tanh(u[2] + gt[j] * v[2]);
                    h = (1 - gt[d.H + j]) * gt[2 * d.H + j] + gt[d.H + j] * (hp ? hp[j] : 0);
                }
                aux[d.hs + i] = h;
                if (out) out[(b * d.T + t) * d.H + j] = h;
            }
}

static void rs_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                           double *aux) {
    rs_ref_run(n, r, in, out, aux);
}

/* Back through time, one sample and step at a time: the textbook BPTT in
 * double. dh carries the gradient of h_{t-1} (first the GRU's direct part
 * dh z, then the gates' dg W_hh), dc that of c_{t-1}. */
static void rs_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                            const double *gout, double *const *gin, double *aux) {
    rs_dims d = rs_dims_of(n, r->batch);
    size_t GH = d.G * d.H, b, t, j, k, q;
    double *dh = aux + d.dh, *dc = aux + d.dc, *dg = aux + d.hh; /* dg: one sample's gate gradients */
    (void)out;
    rs_ref_run(n, r, in, NULL, aux);
    for (j = 0; j < 2 * d.B * d.H; j++) dh[j] = 0; /* dh and dc */
    for (t = d.T; t-- > 0;)
        for (b = 0; b < d.B; b++) {
            const double *gt = aux + (t * d.B + b) * 4 * d.H;
            const double *hp = t ? aux + d.hs + ((t - 1) * d.B + b) * d.H : NULL;
            double *dgi = gin[0] ? gin[0] + (b * d.T + t) * GH : NULL;
            for (j = 0; j < d.H; j++) {
                size_t i = (t * d.B + b) * d.H + j;
                double g = gout[(b * d.T + t) * d.H + j] + dh[b * d.H + j];
                if (!n->iattr[0]) {
                    double c = aux[d.cs + i], tc = tanh(c), cp = t ? aux[d.cs + i - d.B * d.H] : 0;
                    double ig = gt[j], fg = gt[d.H + j], gg = gt[2 * d.H + j], og = gt[3 * d.H + j];
                    double dct = dc[b * d.H + j] + g * og * (1 - tc * tc);
                    dg[j] = dct * gg * ig * (1 - ig);
                    dg[d.H + j] = dct * cp * fg * (1 - fg);
                    dg[2 * d.H + j] = dct * ig * (1 - gg * gg);
                    dg[3 * d.H + j] = g * tc * og * (1 - og);
                    dc[b * d.H + j] = dct * fg;
                    dh[b * d.H + j] = 0;
                    for (k = 0; k < 4; k++) {
                        if (dgi) dgi[k * d.H + j] += dg[k * d.H + j];
                        if (gin[2]) gin[2][k * d.H + j] += dg[k * d.H + j];
                    }
                } else {
                    double rr = gt[j], z = gt[d.H + j], nn = gt[2 * d.H + j], hn = gt[3 * d.H + j];
                    double dn = g * (1 - z) * (1 - nn * nn), dz = g * ((hp ? hp[j] : 0) - nn) * z * (1 - z);
                    double dr = dn * hn * rr * (1 - rr);
                    if (dgi) {
                        dgi[j] += dr;
                        dgi[d.H + j] += dz;
                        dgi[2 * d.H + j] += dn;
                    }
                    if (gin[2]) {
                        gin[2][j] += dr;
                        gin[2][d.H + j] += dz;
                        gin[2][2 * d.H + j] += dn;
                    }
                    dg[j] = dr;
                    dg[d.H + j] = dz;
                    dg[2 * d.H + j] = dn * rr; /* the gradient of W_hn h + b_hn */
                    dh[b * d.H + j] = g * z;
                }
            }
            for (k = 0; k < GH; k++) {
                if (gin[3]) gin[3][k] += dg[k];
                for (q = 0; hp && gin[1] && q < d.H; q++) gin[1][k * d.H + q] += dg[k] * hp[q];
            }
            for (j = 0; j < d.H; j++)
                for (k = 0; k < GH; k++) dh[b * d.H + j] += dg[k] * in[1][k * d.H + j];
        }
}

const nncl__opdef nncl__opdef_rnn_scan = {
    .name = "rnn_scan",
    NNCL_KERNELS({"rnn", "nncl_lstm_cell_f32"}, {"rnn", "nncl_lstm_cell_backward_f32"}, {"rnn", "nncl_gru_cell_f32"},
                {"rnn", "nncl_gru_cell_backward_f32"}, {"rnn", "nncl_rnn_colsum_f32"},
                {"rnn", "nncl_rnn_transpose_f32"}),
    .shape = rs_shape, .check = rs_check, .aux_size = rs_aux, .prepare = rs_prepare, .forward = rs_forward,
    .backward = rs_backward, .bw_reads = NNCL_BW_INPUTS, .ref_forward = rs_ref_forward, .ref_backward = rs_ref_backward,
    .half = 2};

nncl_node *nncl__rnn_scan(nncl_graph *g, int gru, nncl_node *gi, nncl_node *w_hh, nncl_node *b_ih,
                          nncl_node *b_hh) {
    nncl_node *in[4];
    int iattr[1];
    if (!g || !gi || !w_hh || !b_ih || !b_hh)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "rnn_scan: graph or an input is NULL");
    in[0] = gi;
    in[1] = w_hh;
    in[2] = b_ih;
    in[3] = b_hh;
    iattr[0] = gru ? 1 : 0;
    return nncl__node_add(g, NNCL_OP_RNN_SCAN, NULL, 4, in, iattr, 1, NULL, 0);
}
