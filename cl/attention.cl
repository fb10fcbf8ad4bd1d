/* attention.cl - fused causal self-attention, flash-attention style: one
 * work-item per query row (forward, dq) or key row (dk, dv) of one
 * (sample, head), the weights recomputed from q, k and the row's
 * log-sum-exp instead of being stored (O(B H T) saved, not O(B H T^2)).
 * q, k, v, y and their gradients [B, T, C] in the storage type (act_t),
 * head h in columns [h D, h D + D); lse and delta [B, H, T] fp32; every
 * sum fp32. Two forms of each kernel: per row, where work-items never
 * share memory or wait at a barrier (CPU drivers run a group's items as
 * SIMD lanes), and tiled (the end of the file), where a work-group shares
 * the rows it reads through local memory (GPUs). Dropout on the weights
 * uses nncl_drop_keep (cl/common.cl) on element (h T + i) T + j of
 * global sample sample0 + b, as src/ops/op_attention.c does on the host. */

/* Longest head the per-item accumulators hold (NNCL_ATT_DMAX in
 * src/ops/op_attention.c, which refuses longer heads at build time). */
#define NNCL_ATT_DMAX 128

/* The row operations, on 8 columns at a time as vectors (CPU drivers run
 * them as SIMD instructions; a scalar sum is one dependent add a column)
 * and the D % 8 last ones alone. a . b over D values: */
float nncl_att_dot(__global const act_t *a, __global const act_t *b, int D) {
    float8 s8 = (float8)0.0f;
    float s = 0.0f;
    int d = 0;
    for (; d + 8 <= D; d += 8) s8 += NNCL_LD8(a + d) * NNCL_LD8(b + d);
    for (; d < D; d++) s += NNCL_LDG(a, d) * NNCL_LDG(b, d);
    return s + ((s8.s0 + s8.s1) + (s8.s2 + s8.s3)) + ((s8.s4 + s8.s5) + (s8.s6 + s8.s7));
}

/* acc[0..D) += w x */
void nncl_att_axpy(float *acc, float w, __global const act_t *x, int D) {
    int d = 0;
    for (; d + 8 <= D; d += 8) vstore8(vload8(0, acc + d) + w * NNCL_LD8(x + d), 0, acc + d);
    for (; d < D; d++) acc[d] += w * NNCL_LDG(x, d);
}

/* dst[0..D) (+)= c acc in the storage type */
void nncl_att_store(const float *acc, float c, __global act_t *dst, int D, int add) {
    int d = 0;
    for (; d + 8 <= D; d += 8) {
        float8 v = vload8(0, acc + d) * c;
        NNCL_ST8(add ? NNCL_LD8(dst + d) + v : v, dst + d);
    }
    for (; d < D; d++) NNCL_ST(add ? NNCL_LDG(dst, d) + acc[d] * c : acc[d] * c, dst, d);
}

/* The weight multiplier of element (i, j) of head h in sample b: 1 when
 * no dropout runs, else 0 or 1 / (1 - p). */
float nncl_att_drop(int drop, uint k0, uint k1, uint thr, float dscale, int sample, int h, int T, int i, int j) {
    uint elem = ((uint)h * (uint)T + (uint)i) * (uint)T + (uint)j; /* uint: wraps past 2^32, never overflows */
    if (!drop) return 1.0f;
    return nncl_drop_keep(k0, k1, (uint)sample, elem, thr) ? dscale : 0.0f;
}

/* The per-row kernels take the rows they read 8 at a time: 8 scores (or
 * weights) as one vector, so that exp runs on 8 lanes and the online
 * softmax rescales once per block. Rows past the mask or T get a score of -inf
 * (a weight of 0) and a dy . v of 0. */
#define NNCL_ATT_BLK 8

/* sv[jj] = scale q . k of rows r0 + jj < end (else fill), jj < 8. */
float8 nncl_att_scores(__global const act_t *qrow, __global const act_t *k0row, int C, int r0, int end, int D,
                       float scale, float fill) {
    float sv[NNCL_ATT_BLK];
    int jj;
    for (jj = 0; jj < NNCL_ATT_BLK; jj++)
        sv[jj] = r0 + jj < end ? nncl_att_dot(qrow, k0row + (size_t)(r0 + jj) * C, D) * scale : fill;
    return vload8(0, sv);
}

/* The dropout multipliers of weights (i, j0 + jj) (query side, keys vary)
 * or (i0 + jj, j) (key side, queries vary). */
float8 nncl_att_drop8(int drop, uint k0, uint k1, uint thr, float dscale, int sample, int h, int T, int i, int j,
                      int key_side) {
    float mv[NNCL_ATT_BLK];
    int jj;
    if (!drop) return (float8)1.0f;
    for (jj = 0; jj < NNCL_ATT_BLK; jj++)
        mv[jj] = key_side ? nncl_att_drop(1, k0, k1, thr, dscale, sample, h, T, i + jj, j)
                          : nncl_att_drop(1, k0, k1, thr, dscale, sample, h, T, i, j + jj);
    return vload8(0, mv);
}

float nncl_att_max8(float8 v) {
    float4 m = fmax(v.lo, v.hi);
    return fmax(fmax(m.x, m.y), fmax(m.z, m.w));
}

float nncl_att_sum8(float8 v) { return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7)); }

/* y_i = sum_{j <= i} drop(softmax_j(scale q_i . k_j)) v_j; lse_i = the
 * log-sum-exp of the row's scores, by the online softmax (running maximum
 * m, sum l rescaled when m grows). rows = B H T. */
__kernel void nncl_attention_f32(__global const act_t *q, int q_off, __global const act_t *k, int k_off,
                                 __global const act_t *v, int v_off, __global act_t *y, int y_off,
                                 __global float *lse, int lse_off, int rows, int T, int C, int H, int D, float scale,
                                 int sample0, int drop, uint k0, uint k1, uint thr, float dscale) {
    int r = (int)get_global_id(0), i, bh, h, b, j0, jj, d;
    float acc[NNCL_ATT_DMAX], wv[NNCL_ATT_BLK], m = -INFINITY, l = 0.0f;
    __global const act_t *qi, *kb, *vb;
    size_t base;
    if (r >= rows) return;
    i = r % T;
    bh = r / T;
    h = bh % H;
    b = bh / H;
    base = (size_t)b * T * C + (size_t)h * D;
    qi = q + q_off + base + (size_t)i * C;
    kb = k + k_off + base;
    vb = v + v_off + base;
    for (d = 0; d < D; d++) acc[d] = 0.0f;
    for (j0 = 0; j0 <= i; j0 += NNCL_ATT_BLK) {
        float8 s = nncl_att_scores(qi, kb, C, j0, i + 1, D, scale, -INFINITY), e;
        float mb = fmax(m, nncl_att_max8(s));
        if (mb > m) { /* a new maximum: what was summed shrinks by exp(m - mb) */
            float corr = exp(m - mb);
            l *= corr;
            for (d = 0; d < D; d++) acc[d] *= corr;
            m = mb;
        }
        e = exp(s - m);
        l += nncl_att_sum8(e);
        vstore8(e * nncl_att_drop8(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j0, 0), 0, wv);
        for (jj = 0; jj < NNCL_ATT_BLK && j0 + jj <= i; jj++) nncl_att_axpy(acc, wv[jj], vb + (size_t)(j0 + jj) * C, D);
    }
    nncl_att_store(acc, 1.0f / l, y + y_off + base + (size_t)i * C, D, 0);
    lse[lse_off + r] = m + log(l);
}

/* The query side of the backward, with P = softmax(S), S = scale q k^T,
 * Pd = drop(P), y = Pd v:
 *   delta_i = dy_i . y_i  (= sum_j dPd_ij Pd_ij, also with dropout)
 *   dS_ij   = P_ij (drop(dy_i . v_j) - delta_i)
 *   dq_i   (+)= scale sum_j dS_ij k_j
 * delta goes to aux for the key side. want_dq 0: delta only. */
__kernel void nncl_attention_backward_f32_dq(__global const act_t *q, int q_off, __global const act_t *k, int k_off,
                                             __global const act_t *v, int v_off, __global const act_t *y, int y_off,
                                             __global const act_t *dy, int dy_off, __global const float *lse,
                                             int lse_off, __global float *delta, int delta_off, __global act_t *dq,
                                             int dq_off, int rows, int T, int C, int H, int D, float scale,
                                             int sample0, int drop, uint k0, uint k1, uint thr, float dscale,
                                             int want_dq, int acc) {
    int r = (int)get_global_id(0), i, bh, h, b, j0, jj;
    float g[NNCL_ATT_DMAX], dsv[NNCL_ATT_BLK], dl, li;
    __global const act_t *qi, *dyi, *kb, *vb;
    size_t base, row;
    if (r >= rows) return;
    i = r % T;
    bh = r / T;
    h = bh % H;
    b = bh / H;
    base = (size_t)b * T * C + (size_t)h * D;
    row = base + (size_t)i * C;
    qi = q + q_off + row;
    dyi = dy + dy_off + row;
    kb = k + k_off + base;
    vb = v + v_off + base;
    dl = nncl_att_dot(dyi, y + y_off + row, D);
    delta[delta_off + r] = dl;
    if (!want_dq) return;
    li = lse[lse_off + r];
    for (jj = 0; jj < D; jj++) g[jj] = 0.0f;
    for (j0 = 0; j0 <= i; j0 += NNCL_ATT_BLK) {
        float8 p = exp(nncl_att_scores(qi, kb, C, j0, i + 1, D, scale, -INFINITY) - li);
        float8 dp = nncl_att_scores(dyi, vb, C, j0, i + 1, D, 1.0f, 0.0f);
        vstore8(p * (dp * nncl_att_drop8(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j0, 0) - dl), 0, dsv);
        for (jj = 0; jj < NNCL_ATT_BLK && j0 + jj <= i; jj++) nncl_att_axpy(g, dsv[jj], kb + (size_t)(j0 + jj) * C, D);
    }
    nncl_att_store(g, scale, dq + dq_off + row, D, acc);
}

/* The key side, one work-item per key row j (rows = B H T):
 *   dv_j (+)= sum_{i >= j} Pd_ij dy_i
 *   dk_j (+)= scale sum_{i >= j} dS_ij q_i
 * dk is stored before dv reads its destination, so k and v may be one
 * node (acc_v then adds to what dk stored). */
__kernel void nncl_attention_backward_f32_dkv(__global const act_t *q, int q_off, __global const act_t *k, int k_off,
                                              __global const act_t *v, int v_off, __global const act_t *dy, int dy_off,
                                              __global const float *lse, int lse_off, __global const float *delta,
                                              int delta_off, __global act_t *dk, int dk_off, __global act_t *dv,
                                              int dv_off, int rows, int T, int C, int H, int D, float scale,
                                              int sample0, int drop, uint k0, uint k1, uint thr, float dscale,
                                              int want_dk, int acc_k, int want_dv, int acc_v) {
    int r = (int)get_global_id(0), i0, ii, bh, h, b, j, d;
    float gk[NNCL_ATT_DMAX], gv[NNCL_ATT_DMAX], lv[NNCL_ATT_BLK], dlv[NNCL_ATT_BLK], wv[NNCL_ATT_BLK], dsv[NNCL_ATT_BLK];
    __global const act_t *kj, *vj, *qb, *dyb;
    size_t base, row;
    if (r >= rows) return;
    j = r % T;
    bh = r / T;
    h = bh % H;
    b = bh / H;
    base = (size_t)b * T * C + (size_t)h * D;
    row = base + (size_t)j * C;
    kj = k + k_off + row;
    vj = v + v_off + row;
    qb = q + q_off + base;
    dyb = dy + dy_off + base;
    for (d = 0; d < D; d++) gk[d] = gv[d] = 0.0f;
    for (i0 = j; i0 < T; i0 += NNCL_ATT_BLK) {
        float8 p, dp, md;
        for (ii = 0; ii < NNCL_ATT_BLK; ii++) {
            lv[ii] = i0 + ii < T ? lse[lse_off + bh * T + i0 + ii] : 0.0f;
            dlv[ii] = i0 + ii < T ? delta[delta_off + bh * T + i0 + ii] : 0.0f;
        }
        p = exp(nncl_att_scores(kj, qb, C, i0, T, D, scale, -INFINITY) - vload8(0, lv));
        dp = nncl_att_scores(vj, dyb, C, i0, T, D, 1.0f, 0.0f);
        md = nncl_att_drop8(drop, k0, k1, thr, dscale, sample0 + b, h, T, i0, j, 1);
        vstore8(p * md, 0, wv);
        vstore8(p * (dp * md - vload8(0, dlv)), 0, dsv);
        for (ii = 0; ii < NNCL_ATT_BLK && i0 + ii < T; ii++) {
            nncl_att_axpy(gv, wv[ii], dyb + (size_t)(i0 + ii) * C, D);
            nncl_att_axpy(gk, dsv[ii], qb + (size_t)(i0 + ii) * C, D);
        }
    }
    if (want_dk) nncl_att_store(gk, scale, dk + dk_off + row, D, acc_k);
    if (want_dv) nncl_att_store(gv, 1.0f, dv + dv_off + row, D, acc_v);
}

/* ------------------------------------------------------------- tiles */

/* The same three kernels for GPUs: a work-group of NNCL_ATT_TQ work-items
 * owns that many consecutive rows of one (sample, head) (groups = B H
 * ceil(T / TQ)), and the rows it reads from every other row (keys and
 * values, or queries and their output gradients) come through local memory
 * NNCL_ATT_TK rows at a time, each loaded once by the whole group with
 * neighbouring work-items reading neighbouring columns; a work-item's own
 * row stays in private memory. 2 TK D floats of local memory, 16 KiB at
 * D = 128: every OpenCL 1.2 device has 32. */
#define NNCL_ATT_TQ 64
#define NNCL_ATT_TK 16

float nncl_att_dot_pl(const float *a, __local const float *b, int D) {
    float s = 0.0f;
    int d;
    for (d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

void nncl_att_axpy_l(float *acc, float w, __local const float *x, int D) {
    int d;
    for (d = 0; d < D; d++) acc[d] += w * x[d];
}

/* rows [r0, r0 + n) of a and b ([.., C] from base, D columns) into ta, tb
 * [n, D] by the whole group; barriers before (the last tile is read) and
 * after (this one is written). */
void nncl_att_tile(__global const act_t *a, __global const act_t *b, size_t base, int C, int D, int r0, int n,
                   __local float *ta, __local float *tb) {
    int e, lid = (int)get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (e = lid; e < n * D; e += NNCL_ATT_TQ) {
        int rr = e / D, d = e - rr * D;
        size_t at = base + (size_t)(r0 + rr) * C + d;
        ta[e] = NNCL_LDG(a, at);
        tb[e] = NNCL_LDG(b, at);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* Where a group's rows lie: bh = (sample, head), i0 its first row, the
 * work-item's row i (active when i < T). */
#define NNCL_ATT_GROUP                                                                                              \
    int nblk = (T + NNCL_ATT_TQ - 1) / NNCL_ATT_TQ, grp = (int)get_group_id(0), lid = (int)get_local_id(0);       \
    int bh = grp / nblk, i0 = (grp - bh * nblk) * NNCL_ATT_TQ, i = i0 + lid, h = bh % H, b = bh / H;             \
    int active = i < T, d, j0, jj;                                                                                \
    size_t base = (size_t)b * T * C + (size_t)h * D, row = base + (size_t)(active ? i : 0) * C;                   \
    if (bh >= rows / T || get_local_size(0) != NNCL_ATT_TQ) return /* uniform over the group */

__kernel void nncl_attention_f32_tiles(__global const act_t *q, int q_off, __global const act_t *k, int k_off,
                                       __global const act_t *v, int v_off, __global act_t *y, int y_off,
                                       __global float *lse, int lse_off, int rows, int T, int C, int H, int D,
                                       float scale, int sample0, int drop, uint k0, uint k1, uint thr, float dscale) {
    __local float kt[NNCL_ATT_TK * NNCL_ATT_DMAX], vt[NNCL_ATT_TK * NNCL_ATT_DMAX];
    float qv[NNCL_ATT_DMAX], acc[NNCL_ATT_DMAX], m = -INFINITY, l = 0.0f;
    int last;
    NNCL_ATT_GROUP;
    last = min(T, i0 + NNCL_ATT_TQ) - 1;
    for (d = 0; d < D; d++) {
        qv[d] = active ? NNCL_LDG(q, q_off + row + d) : 0.0f;
        acc[d] = 0.0f;
    }
    for (j0 = 0; j0 <= last; j0 += NNCL_ATT_TK) {
        int nk = min(NNCL_ATT_TK, last + 1 - j0);
        nncl_att_tile(k + k_off, v + v_off, base, C, D, j0, nk, kt, vt);
        for (jj = 0; active && jj < nk && j0 + jj <= i; jj++) {
            float s = nncl_att_dot_pl(qv, kt + jj * D, D) * scale, e;
            if (s > m) {
                float corr = exp(m - s);
                l *= corr;
                for (d = 0; d < D; d++) acc[d] *= corr;
                m = s;
            }
            e = exp(s - m);
            l += e;
            nncl_att_axpy_l(acc, e * nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j0 + jj),
                            vt + jj * D, D);
        }
    }
    if (!active) return;
    for (d = 0; d < D; d++) NNCL_ST(acc[d] / l, y, y_off + row + d);
    lse[lse_off + bh * T + i] = m + log(l);
}

__kernel void nncl_attention_backward_f32_dq_tiles(
    __global const act_t *q, int q_off, __global const act_t *k, int k_off, __global const act_t *v, int v_off,
    __global const act_t *y, int y_off, __global const act_t *dy, int dy_off, __global const float *lse, int lse_off,
    __global float *delta, int delta_off, __global act_t *dq, int dq_off, int rows, int T, int C, int H, int D,
    float scale, int sample0, int drop, uint k0, uint k1, uint thr, float dscale, int want_dq, int acc) {
    __local float kt[NNCL_ATT_TK * NNCL_ATT_DMAX], vt[NNCL_ATT_TK * NNCL_ATT_DMAX];
    float qv[NNCL_ATT_DMAX], dyv[NNCL_ATT_DMAX], g[NNCL_ATT_DMAX], dl = 0.0f, li = 0.0f;
    int last;
    NNCL_ATT_GROUP;
    last = min(T, i0 + NNCL_ATT_TQ) - 1;
    for (d = 0; d < D; d++) {
        qv[d] = active ? NNCL_LDG(q, q_off + row + d) : 0.0f;
        dyv[d] = active ? NNCL_LDG(dy, dy_off + row + d) : 0.0f;
        dl += active ? dyv[d] * NNCL_LDG(y, y_off + row + d) : 0.0f;
        g[d] = 0.0f;
    }
    if (active) {
        delta[delta_off + bh * T + i] = dl;
        li = lse[lse_off + bh * T + i];
    }
    if (!want_dq) return; /* uniform: a kernel argument */
    for (j0 = 0; j0 <= last; j0 += NNCL_ATT_TK) {
        int nk = min(NNCL_ATT_TK, last + 1 - j0);
        nncl_att_tile(k + k_off, v + v_off, base, C, D, j0, nk, kt, vt);
        for (jj = 0; active && jj < nk && j0 + jj <= i; jj++) {
            float p = exp(nncl_att_dot_pl(qv, kt + jj * D, D) * scale - li);
            float dp = nncl_att_dot_pl(dyv, vt + jj * D, D);
            float ds = p * (dp * nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j0 + jj) - dl);
            nncl_att_axpy_l(g, ds, kt + jj * D, D);
        }
    }
    if (!active) return;
    for (d = 0; d < D; d++) {
        float val = g[d] * scale;
        NNCL_ST(acc ? NNCL_LDG(dq, dq_off + row + d) + val : val, dq, dq_off + row + d);
    }
}

/* The key side: the group's rows are keys j, the tiles queries and output
 * gradients from the group's first key on, with their lse and delta. */
__kernel void nncl_attention_backward_f32_dkv_tiles(
    __global const act_t *q, int q_off, __global const act_t *k, int k_off, __global const act_t *v, int v_off,
    __global const act_t *dy, int dy_off, __global const float *lse, int lse_off, __global const float *delta,
    int delta_off, __global act_t *dk, int dk_off, __global act_t *dv, int dv_off, int rows, int T, int C, int H,
    int D, float scale, int sample0, int drop, uint k0, uint k1, uint thr, float dscale, int want_dk, int acc_k,
    int want_dv, int acc_v) {
    __local float qt[NNCL_ATT_TK * NNCL_ATT_DMAX], dyt[NNCL_ATT_TK * NNCL_ATT_DMAX];
    __local float lt[NNCL_ATT_TK], dt[NNCL_ATT_TK];
    float kv[NNCL_ATT_DMAX], vv[NNCL_ATT_DMAX], gk[NNCL_ATT_DMAX], gv[NNCL_ATT_DMAX];
    NNCL_ATT_GROUP;
    for (d = 0; d < D; d++) {
        kv[d] = active ? NNCL_LDG(k, k_off + row + d) : 0.0f;
        vv[d] = active ? NNCL_LDG(v, v_off + row + d) : 0.0f;
        gk[d] = gv[d] = 0.0f;
    }
    for (j0 = i0; j0 < T; j0 += NNCL_ATT_TK) { /* j0: the tile's first query row */
        int nq = min(NNCL_ATT_TK, T - j0);
        nncl_att_tile(q + q_off, dy + dy_off, base, C, D, j0, nq, qt, dyt);
        if (lid < nq) {
            lt[lid] = lse[lse_off + bh * T + j0 + lid];
            dt[lid] = delta[delta_off + bh * T + j0 + lid];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (jj = 0; active && jj < nq; jj++) {
            int qi = j0 + jj;
            float p, md, ds;
            if (qi < i) continue; /* keys after the query: masked */
            p = exp(nncl_att_dot_pl(kv, qt + jj * D, D) * scale - lt[jj]);
            md = nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, qi, i);
            ds = p * (nncl_att_dot_pl(vv, dyt + jj * D, D) * md - dt[jj]);
            nncl_att_axpy_l(gv, p * md, dyt + jj * D, D);
            nncl_att_axpy_l(gk, ds, qt + jj * D, D);
        }
    }
    if (!active) return;
    if (want_dk)
        for (d = 0; d < D; d++) {
            float val = gk[d] * scale;
            NNCL_ST(acc_k ? NNCL_LDG(dk, dk_off + row + d) + val : val, dk, dk_off + row + d);
        }
    if (want_dv)
        for (d = 0; d < D; d++) NNCL_ST(acc_v ? NNCL_LDG(dv, dv_off + row + d) + gv[d] : gv[d], dv, dv_off + row + d);
}
