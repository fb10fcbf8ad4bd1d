/* conv3.cl - the 3x3 convolution path (src/ops/conv3.c): 3x3 kernels,
 * stride 1, padding 1 (OH = H, OW = W), no GEMM, no panels, no workspace but
 * the weight gradient's partial sums. A work-item holds 8 neighbouring
 * pixels of a plane (p0 .. p0+7 of H*W, crossing rows) as one vector: with a
 * padding of 1, tap (ki, kj) of pixel p reads x at p + (ki-1)*W + kj-1, one
 * shift for all 8, so a row's three taps are two vector loads and shuffles,
 * masked where they fall into the padding. Loops run inside a work-item on
 * explicit vectors (what PoCL runs near peak; it does not vectorise across
 * work-items that loop). x and the weights are read as fp32: in half storage
 * src/ops/conv3.c converts them into the workspace first
 * (nncl_conv_to_f32), once per step rather than in every work-item that
 * reads them (the weight gradient rereads each tap for every output pair,
 * and converting each time costs more than the arithmetic). */

/* Which of the 8 pixels from p0 keep tap row ki (r[ki]) and tap column kj
 * (c[kj]) inside the plane: all-ones lanes where they do. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_c3_masks(int p0, int H, int W, int8 *r, int8 *c) {
    int8 p = (int8)(p0) + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    int8 h = convert_int8((convert_float8(p) + 0.5f) * (1.0f / (float)W)), w = p - h * W; /* nncl_quot per lane */
    r[0] = h >= 1; r[1] = (int8)(-1); r[2] = h < H - 1;
    c[0] = w >= 1; c[1] = (int8)(-1); c[2] = w < W - 1;
}

/* Row at's three taps for 8 pixels, x[at-1 ..], x[at ..] and x[at+1 ..]
 * (8 values each), in v[0..2]: two vector loads, [at-4, at+4) and [at+4,
 * at+12), and shuffles (in half storage two vector conversions rather
 * than three). Values outside the tensor [lo, hi) (the first and last
 * rows' taps) are never read: zero. safe: the caller knows all are inside
 * (a constant where inlined: the loops then have no branch, which kept
 * their accumulators out of registers). */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_c3_row(__global const float *x, int lo, int hi, int at, int safe, float8 *v) {
    float8 a, b;
    if (safe || (at - 4 >= lo && at + 12 <= hi)) {
        a = vload8(0, x + at - 4);
        b = vload8(0, x + at + 4);
    } else {
        float t[16];
        int e;
        for (e = 0; e < 16; e++) t[e] = at - 4 + e >= lo && at - 4 + e < hi ? x[at - 4 + e] : 0.0f;
        a = vload8(0, t);
        b = vload8(1, t);
    }
    v[0] = (float8)(a.s3, a.s4, a.s5, a.s6, a.s7, b.s0, b.s1, b.s2);
    v[1] = (float8)(a.s4, a.s5, a.s6, a.s7, b.s0, b.s1, b.s2, b.s3);
    v[2] = (float8)(a.s5, a.s6, a.s7, b.s0, b.s1, b.s2, b.s3, b.s4);
}

/* The 9 taps of 8 pixels from x[at] (tap ki*3 + kj), zero where the
 * masks r[ki] & c[kj] put them in the padding. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_c3_taps(__global const float *x, int lo, int hi, int at, int W, const int8 *r, const int8 *cm, int safe,
                  float8 *v) {
    int ki, kj;
#pragma unroll
    for (ki = 0; ki < 3; ki++) {
        nncl_c3_row(x, lo, hi, at + (ki - 1) * W, safe, v + ki * 3);
#pragma unroll
        for (kj = 0; kj < 3; kj++) v[ki * 3 + kj] = select((float8)0.0f, v[ki * 3 + kj], r[ki] & cm[kj]);
    }
}

/* n (< 8) values from at, the rest zero (a plane's last pixels). */
#ifdef __clang__
__attribute__((always_inline))
#endif
float8 nncl_c3_ld_part(__global const act_t *p, int at, int n) {
    float t[8];
    int e;
    for (e = 0; e < 8; e++) t[e] = e < n ? NNCL_LD(p, at + e) : 0.0f;
    return vload8(0, t);
}

float nncl_hsum8(float8 v) {
    float4 a = v.lo + v.hi;
    return a.x + a.y + a.z + a.w;
}

/* acc[o] += the taps of 8 pixels from x[at] over C planes, times output
 * o's weights (row wr[o] of w). */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_c3_fwd_taps(__global const float *x, int lo, int hi, int at, int hw, int C, int W, __global const float *w,
                      const int *wr, const int8 *r, const int8 *cm, float8 *acc, int safe) {
    int c, t, o;
    float8 v[9];
    for (c = 0; c < C; c++, at += hw) {
        nncl_c3_taps(x, lo, hi, at, W, r, cm, safe, v);
        /* an output's 9 weights as 8 + 1 */
#pragma unroll
        for (o = 0; o < 8; o++) {
            float8 k8 = vload8(0, w + wr[o] + c * 9);
            float k9 = w[wr[o] + c * 9 + 8];
            acc[o] = fma((float8)k8.s0, v[0], acc[o]);
            acc[o] = fma((float8)k8.s1, v[1], acc[o]);
            acc[o] = fma((float8)k8.s2, v[2], acc[o]);
            acc[o] = fma((float8)k8.s3, v[3], acc[o]);
            acc[o] = fma((float8)k8.s4, v[4], acc[o]);
            acc[o] = fma((float8)k8.s5, v[5], acc[o]);
            acc[o] = fma((float8)k8.s6, v[6], acc[o]);
            acc[o] = fma((float8)k8.s7, v[7], acc[o]);
            acc[o] = fma((float8)k9, v[8], acc[o]);
        }
    }
}

/* y[n, o, p] = act(b[o] + sum over c, ki, kj of w[o, c, ki, kj] x[n, c, p
 * shifted by the tap]). NDRange (ceil(H*W / 8), ceil(O / 8), B): 8 pixels
 * of 8 outputs per work-item, 64 accumulators in 8 vectors; a tap's vector
 * serves all 8 outputs. */
__kernel void nncl_conv3_f32(__global const float *x, int x_off, __global const float *w, int w_off,
                             __global const act_t *b, int b_off, __global act_t *y, int y_off, int C, int H, int W,
                             int O, int B, int has_b, int act) {
    int p0 = get_global_id(0) * 8, og = get_global_id(1) * 8, n = get_global_id(2), hw = H * W, o, on;
    int lo = x_off, hi = x_off + B * C * hw, wr[8];
    float8 acc[8];
    int8 r[3], cm[3];
    if (p0 >= hw || og >= O || n >= B) return;
    on = O - og < 8 ? O - og : 8;
    nncl_c3_masks(p0, H, W, r, cm);
    /* outputs past O repeat the last one's weights: computed, not stored */
#pragma unroll
    for (o = 0; o < 8; o++) {
        wr[o] = w_off + (og + min(o, on - 1)) * C * 9;
        acc[o] = (float8)(has_b ? NNCL_LD(b, b_off + og + min(o, on - 1)) : 0.0f);
    }
    /* the taps of all C planes inside the tensor: no check per tap */
    if (x_off + n * C * hw + p0 - W - 4 >= lo && x_off + (n * C + C - 1) * hw + p0 + W + 12 <= hi)
        nncl_c3_fwd_taps(x, lo, hi, x_off + n * C * hw + p0, hw, C, W, w, wr, r, cm, acc, 1);
    else
        nncl_c3_fwd_taps(x, lo, hi, x_off + n * C * hw + p0, hw, C, W, w, wr, r, cm, acc, 0);
#pragma unroll
    for (o = 0; o < 8; o++) { /* a constant count: acc stays in registers */
        float8 v = nncl_act8(acc[o], act);
        int at = y_off + (n * O + og + o) * hw + p0, e;
        if (o < on) {
            if (p0 + 8 <= hw) {
                NNCL_ST8(v, y + at);
            } else {
                float t[8];
                vstore8(v, 0, t);
                for (e = 0; e < hw - p0; e++) NNCL_ST(t[e], y, at + e);
            }
        }
    }
}

/* G = dy * act'(y) for 8 pixels of output o of sample n, zero past the
 * plane's end. */
#ifdef __clang__
__attribute__((always_inline))
#endif
float8 nncl_c3_grad(__global const act_t *dy, int dy_off, __global const act_t *y, int y_off, int at, int n, int act) {
    float8 g = n >= 8 ? NNCL_LD8(dy + dy_off + at) : nncl_c3_ld_part(dy, dy_off + at, n);
    if (act) g *= nncl_act_grad8(n >= 8 ? NNCL_LD8(y + y_off + at) : nncl_c3_ld_part(y, y_off + at, n), act);
    return g;
}

/* a0[t] += g0 * tap t, a1[t] += g1 * tap t of the 8 pixels from x[at]. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_c3_dw_taps(__global const float *x, int lo, int hi, int at, int W, const int8 *r, const int8 *cm, float8 g0,
                     float8 g1, float8 *a0, float8 *a1, int safe) {
    float8 v[9];
    int t;
    nncl_c3_taps(x, lo, hi, at, W, r, cm, safe, v);
#pragma unroll
    for (t = 0; t < 9; t++) {
        a0[t] = fma(g0, v[t], a0[t]);
        a1[t] = fma(g1, v[t], a1[t]);
    }
}

/* Partial weight and bias gradients over a share of the batch's pixels:
 * work-item (j, q, c) takes outputs 2q and 2q+1 and input channel c over
 * the j-th of `parts` runs of 8-pixel blocks (blocks numbered over samples
 * and planes), 20 accumulators of 8 lanes, and writes
 * part[j][o][c*9 + ki*3 + kj] and, for c == 0, part[j][o][C*9] (the bias
 * gradient); nncl_conv_dw_split sums the parts in order (no atomics: the
 * same result on every run; the parts follow the device's compute units). */
__kernel void nncl_conv3_dw_f32(__global const float *x, int x_off, __global const act_t *dy, int dy_off,
                                __global const act_t *y, int y_off, __global float *part, int part_off, int C, int H,
                                int W, int O, int B, int act, int parts) {
    int j = get_global_id(0), q = get_global_id(1), c = get_global_id(2), hw = H * W, nb = (hw + 7) / 8;
    int o0 = 2 * q, o1 = min(o0 + 1, O - 1), ckk1 = C * 9 + 1, lo = x_off, hi = x_off + B * C * hw, b0, b1, blk, t;
    float8 a0[9], a1[9], s0 = (float8)0.0f, s1 = (float8)0.0f;
    int8 r[3], cm[3];
    __global float *d;
    if (j >= parts || o0 >= O || c >= C) return;
    b0 = (int)((long)B * nb * j / parts);
    b1 = (int)((long)B * nb * (j + 1) / parts);
#pragma unroll
    for (t = 0; t < 9; t++) a0[t] = a1[t] = (float8)0.0f;
    for (blk = b0; blk < b1; blk++) {
        int n = blk / nb, p0 = (blk - n * nb) * 8, left = hw - p0, at = x_off + (n * C + c) * hw + p0;
        float8 g0 = nncl_c3_grad(dy, dy_off, y, y_off, (n * O + o0) * hw + p0, left, act);
        float8 g1 = nncl_c3_grad(dy, dy_off, y, y_off, (n * O + o1) * hw + p0, left, act);
        nncl_c3_masks(p0, H, W, r, cm);
        if (at - W - 4 >= lo && at + W + 12 <= hi)
            nncl_c3_dw_taps(x, lo, hi, at, W, r, cm, g0, g1, a0, a1, 1);
        else
            nncl_c3_dw_taps(x, lo, hi, at, W, r, cm, g0, g1, a0, a1, 0);
        s0 += g0;
        s1 += g1;
    }
    d = part + part_off + (j * O + o0) * ckk1;
#pragma unroll
    for (t = 0; t < 9; t++) {
        d[c * 9 + t] = nncl_hsum8(a0[t]);
        if (o0 + 1 < O) d[ckk1 + c * 9 + t] = nncl_hsum8(a1[t]);
    }
    if (c == 0) {
        d[C * 9] = nncl_hsum8(s0);
        if (o0 + 1 < O) d[ckk1 + C * 9] = nncl_hsum8(s1);
    }
}
