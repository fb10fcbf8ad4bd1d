/* attention.cl - fused causal self-attention, flash-attention style: one
 * work-item per query row (forward, dq) or key row (dk, dv) of one
 * (sample, head), the weights recomputed from q, k and the row's
 * log-sum-exp instead of being stored (O(B H T) saved, not O(B H T^2)).
 * q, k, v, y and their gradients [B, T, C] in the storage type (act_t),
 * head h in columns [h D, h D + D); lse and delta [B, H, T] fp32; every
 * sum fp32. Work-items never share memory and never wait at a barrier:
 * CPU drivers run a group's items as SIMD lanes. Dropout on the weights
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
    if (!drop) return 1.0f;
    return nncl_drop_keep(k0, k1, (uint)sample, (uint)((h * T + i) * T + j), thr) ? dscale : 0.0f;
}

/* y_i = sum_{j <= i} drop(softmax_j(scale q_i . k_j)) v_j; lse_i = the
 * log-sum-exp of the row's scores, by the online softmax (running maximum
 * m, sum l rescaled when m grows). rows = B H T. */
__kernel void nncl_attention_f32(__global const act_t *q, int q_off, __global const act_t *k, int k_off,
                                 __global const act_t *v, int v_off, __global act_t *y, int y_off,
                                 __global float *lse, int lse_off, int rows, int T, int C, int H, int D, float scale,
                                 int sample0, int drop, uint k0, uint k1, uint thr, float dscale) {
    int r = (int)get_global_id(0), i, bh, h, b, j, d;
    float acc[NNCL_ATT_DMAX], m = -INFINITY, l = 0.0f;
    __global const act_t *qi;
    size_t base;
    if (r >= rows) return;
    i = r % T;
    bh = r / T;
    h = bh % H;
    b = bh / H;
    base = (size_t)b * T * C + (size_t)h * D;
    qi = q + q_off + base + (size_t)i * C;
    for (d = 0; d < D; d++) acc[d] = 0.0f;
    for (j = 0; j <= i; j++) {
        __global const act_t *vj = v + v_off + base + (size_t)j * C;
        float s = nncl_att_dot(qi, k + k_off + base + (size_t)j * C, D) * scale, e, w;
        if (s > m) { /* a new maximum: what was summed shrinks by exp(m - s) */
            float corr = exp(m - s);
            l *= corr;
            for (d = 0; d < D; d++) acc[d] *= corr;
            m = s;
        }
        e = exp(s - m);
        l += e;
        w = e * nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j);
        nncl_att_axpy(acc, w, vj, D);
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
    int r = (int)get_global_id(0), i, bh, h, b, j, d;
    float g[NNCL_ATT_DMAX], dl, li;
    __global const act_t *qi, *dyi;
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
    dl = nncl_att_dot(dyi, y + y_off + row, D);
    delta[delta_off + r] = dl;
    if (!want_dq) return;
    li = lse[lse_off + r];
    for (d = 0; d < D; d++) g[d] = 0.0f;
    for (j = 0; j <= i; j++) {
        __global const act_t *kj = k + k_off + base + (size_t)j * C;
        float p = exp(nncl_att_dot(qi, kj, D) * scale - li);
        float dp = nncl_att_dot(dyi, v + v_off + base + (size_t)j * C, D);
        float ds = p * (dp * nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j) - dl);
        nncl_att_axpy(g, ds, kj, D);
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
    int r = (int)get_global_id(0), i, bh, h, b, j, d;
    float gk[NNCL_ATT_DMAX], gv[NNCL_ATT_DMAX];
    __global const act_t *kj, *vj;
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
    for (d = 0; d < D; d++) gk[d] = gv[d] = 0.0f;
    for (i = j; i < T; i++) {
        __global const act_t *qi = q + q_off + base + (size_t)i * C, *dyi = dy + dy_off + base + (size_t)i * C;
        int ri = bh * T + i;
        float p = exp(nncl_att_dot(qi, kj, D) * scale - lse[lse_off + ri]);
        float md = nncl_att_drop(drop, k0, k1, thr, dscale, sample0 + b, h, T, i, j);
        float ds = p * (nncl_att_dot(dyi, vj, D) * md - delta[delta_off + ri]), w = p * md;
        nncl_att_axpy(gv, w, dyi, D);
        nncl_att_axpy(gk, ds, qi, D);
    }
    if (want_dk) nncl_att_store(gk, scale, dk + dk_off + row, D, acc_k);
    if (want_dv) nncl_att_store(gv, 1.0f, dv + dv_off + row, D, acc_v);
}
