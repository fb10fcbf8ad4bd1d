/* conv_dw.cl - depthwise convolution (src/ops/conv_dw.c): groups == C,
 * M = O / C outputs per channel (output o reads channel o / M), any kernel,
 * stride along W of 1 or 2 (any along H), dilation and padding per axis,
 * NCHW (1-D as H = 1). x [B,C,H,W], w [O,1,kh,kw], y [B,O,OH,OW]. A tap
 * reads one input per output: memory-bound, so each work-item computes a
 * segment of 8 (the input gradient at stride 2: 16) consecutive outputs of
 * one row as float8 vectors, reading the rows in place with one vector
 * load per tap (nncl_dw_ld8). Every kernel takes
 * the geometry arguments of cl/conv_ex.cl (C, H, W, O, OH, OW, kh, kw, sh,
 * sw, ph, pw, dh, dw, G). */

/* x[s + t st] for t < 8 where the 8 lie inside the tensor (stride 1 or 2). */
float8 nncl_dw_in8(__global const act_t *row, int st) {
    if (st == 1) return NNCL_LD8(row);
    {
        float8 a = NNCL_LD8(row), b = NNCL_LD8(row + 7);
        return (float8)(a.even, b.odd);
    }
}

/* row[s + t st] for t < 8, zero outside [0, W), where row = base + r in a
 * tensor of n elements: one vector load inside the row; one across its
 * ends where the tensor goes on (stride 1 or 2; the neighbours' lanes are
 * set to zero: rows of small images are mostly edges); else 8 loads at
 * indices clamped into the row. */
float8 nncl_dw_ld8(__global const act_t *base, int r, int s, int st, int W, int n) {
    __global const act_t *row = base + r;
    int8 i = (int8)s + (int8)(0, 1, 2, 3, 4, 5, 6, 7) * st, c = clamp(i, 0, W - 1);
    float8 v;
    if (st <= 2 && r + s >= 0 && r + s + 7 * st < n) {
        v = nncl_dw_in8(row + s, st);
        return s >= 0 && s + 7 * st < W ? v : select((float8)0.0f, v, i == c);
    }
    v = (float8)(NNCL_LDG(row, c.s0), NNCL_LDG(row, c.s1), NNCL_LDG(row, c.s2), NNCL_LDG(row, c.s3),
                 NNCL_LDG(row, c.s4), NNCL_LDG(row, c.s5), NNCL_LDG(row, c.s6), NNCL_LDG(row, c.s7));
    return select((float8)0.0f, v, i == c);
}

/* The first n < 8 lanes of v to row[0..n), added to what is there with
 * acc; stored as 4, 2 and 1 lanes. */
void nncl_dw_st_part(float8 v, __global act_t *row, int n, int acc) {
#if defined(NNCL_STORE) && NNCL_STORE
    ushort8 h;
#else
    float8 h;
#endif
    if (acc) {
        float s[8];
        int t;
        vstore8(v, 0, s);
        for (t = 0; t < n; t++) NNCL_ST(s[t] + NNCL_LD(row, t), row, t);
        return;
    }
#if defined(NNCL_STORE) && NNCL_STORE
    h = NNCL_RNE8(v);
#else
    h = v;
#endif
    if (n & 4) vstore4(h.lo, 0, row), h.lo = h.hi, row += 4;
    if (n & 2) vstore2(h.s01, 0, row), h.s01 = h.s23, row += 2;
    if (n & 1) row[0] = h.s0;
}

/* 8 lanes of v to row[0..8) (fewer where the row ends at n). */
void nncl_dw_st8(float8 v, __global act_t *row, int n, int acc) {
    if (n >= 8) {
        if (acc) v += NNCL_LD8(row);
        NNCL_ST8(v, row);
    } else {
        nncl_dw_st_part(v, row, n, acc);
    }
}

/* y = act(conv(x) + b): one work-item per 8 outputs (global id 0) of rb
 * rows from rb id 1 of plane b O + o (id 2). Where all of a kernel row's
 * taps fall inside the input row, their loads go unchecked. */
#define NNCL_DW_FORWARD_ARGS                                                                                          \
    __global const act_t *x, int x_off, __global const act_t *w, int w_off, __global act_t *y, int y_off, int C,      \
        int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int G,   \
        __global const act_t *bias, int b_off, int has_bias, int act, int xn, int rb
__kernel void nncl_conv_dw_f32(NNCL_DW_FORWARD_ARGS) {
    int ow0 = get_global_id(0) << 3, oh = get_global_id(1) * rb, z = get_global_id(2), M = O / C, o = z % O, ki, kj;
    int s0 = ow0 * sw - pw, inside = s0 >= 0 && s0 + (kw - 1) * dw + 7 * sw < W, oh1 = min(oh + rb, OH);
    int xp = (M == 1 ? z : z / M) * H * W;
    __global const act_t *xc = x + x_off + xp, *wo = w + w_off + o * kh * kw;
    if (ow0 >= OW) return; /* the launch rounded up */
    for (; oh < oh1; oh++) {
    float8 s = (float8)0.0f;
    for (ki = 0; ki < kh; ki++) {
        int ih = oh * sh - ph + ki * dh;
        __global const act_t *row = xc + ih * W + s0;
        if (ih < 0 || ih >= H) continue;
        if (inside)
            for (kj = 0; kj < kw; kj++) s += NNCL_LDG(wo, ki * kw + kj) * nncl_dw_in8(row + kj * dw, sw);
        else
            for (kj = 0; kj < kw; kj++)
                s += NNCL_LDG(wo, ki * kw + kj) * nncl_dw_ld8(x + x_off, xp + ih * W, s0 + kj * dw, sw, W, xn);
    }
    if (has_bias) s += NNCL_LDG(bias, b_off + o);
    nncl_dw_st8(nncl_act8(s, act), y + y_off + (z * OH + oh) * OW + ow0, OW - ow0, 0);
    }
}

/* dx (+)= conv^T(dy): one work-item per 8 inputs (global id 0; 16 at
 * stride 2) of rb rows from rb id 1 of plane b C + c (id 2). Output (oh, ow) takes input (oh sh - ph + ki
 * dh, ow sw - pw + kj dw); at stride 2 along W, the inputs of a segment a
 * tap reaches are every other one, from consecutive outputs: 8 of dy,
 * spread over 16 lanes. */
#define NNCL_DW_INPUT_ARGS                                                                                            \
    __global const act_t *dy, int dy_off, __global const act_t *w, int w_off, __global act_t *dx, int dx_off, int C,  \
        int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int G,   \
        int acc, int dyn, int rb
__kernel void nncl_conv_dw_backward_f32_input(NNCL_DW_INPUT_ARGS) {
    int L = sw == 2 ? 16 : 8, iw0 = get_global_id(0) * L, ih = get_global_id(1) * rb, z = get_global_id(2);
    int M = O / C, c = z % C, m, ki, kj, ih1 = min(ih + rb, H);
    __global act_t *row;
    if (iw0 >= W) return; /* the launch rounded up */
    for (; ih < ih1; ih++) {
    float8 s0 = (float8)0.0f, s1 = (float8)0.0f;
    for (m = 0; m < M; m++) {
        int o = c * M + m;
        int yp = (z * M + m) * OH * OW;
        __global const act_t *wo = w + w_off + o * kh * kw;
        for (ki = 0; ki < kh; ki++) {
            int th = ih + ph - ki * dh, oh;
            if (th < 0) break; /* th falls with ki */
            oh = th / sh;
            if (oh * sh != th || oh >= OH) continue;
            for (kj = 0; kj < kw; kj++) {
                float wv = NNCL_LDG(wo, ki * kw + kj);
                int tw = iw0 + pw - kj * dw;
                if (sw == 1) {
                    s0 += wv * nncl_dw_ld8(dy + dy_off, yp + oh * OW, tw, 1, OW, dyn);
                } else {
                    /* lanes t of the segment with tw + t even, from ow = (tw + t) / 2 */
                    int p = tw & 1;
                    float8 d = wv * nncl_dw_ld8(dy + dy_off, yp + oh * OW, (tw + p) >> 1, 1, OW, dyn);
                    if (p) {
                        s0 += (float8)(0.0f, d.s0, 0.0f, d.s1, 0.0f, d.s2, 0.0f, d.s3);
                        s1 += (float8)(0.0f, d.s4, 0.0f, d.s5, 0.0f, d.s6, 0.0f, d.s7);
                    } else {
                        s0 += (float8)(d.s0, 0.0f, d.s1, 0.0f, d.s2, 0.0f, d.s3, 0.0f);
                        s1 += (float8)(d.s4, 0.0f, d.s5, 0.0f, d.s6, 0.0f, d.s7, 0.0f);
                    }
                }
            }
        }
    }
    row = dx + dx_off + (z * H + ih) * W + iw0;
    nncl_dw_st8(s0, row, W - iw0, acc);
    if (L == 16 && W - iw0 > 8) nncl_dw_st8(s1, row + 8, W - iw0 - 8, acc);
    }
}

/* dw (+)= the adjoint in w of conv(x) against dy, in two passes without
 * barriers or atomics: the rows (b, oh) of y are cut into P chunks, and
 * one work-item per chunk (global id 0) and kernel row (o, ki) (id 1) sums
 * the products of its rows for each tap of the row into part[tap P +
 * chunk]; then nncl_conv_dw_backward_f32_weight_sum adds each tap's P
 * partial sums in order. The kernels of kw 3 and 5 (_k3, _k5) read each
 * row of dy once against kw shifted reads of x, summed in registers; the
 * others a tap at a time. */
#define NNCL_DW_PART_ARGS                                                                                             \
    __global const act_t *x, int x_off, __global const act_t *dy, int dy_off, __global float *part, int C, int H,     \
        int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int G, int B,   \
        int P, int xn, int dyn
/* The rows of chunk p of P over B OH rows; the row's pointers into dy and
 * x (kernel row ki of output channel o), or skipped outside x. */
#define NNCL_DW_ROWS(...)                                                                                            \
    {                                                                                                                 \
        int p = get_global_id(0), e = get_global_id(1), ki = e % kh, o = e / kh, c = o / (O / C), R = B * OH, j;     \
        int j0 = (int)(((long)R * p) / P), j1 = (int)(((long)R * (p + 1)) / P), b = j0 / OH, oh = j0 - b * OH;       \
        for (j = j0; j < j1; j++) {                                                                                   \
            int ih = oh * sh - ph + ki * dh;                                                                          \
            int yr = ((b * O + o) * OH + oh) * OW, xr = ((b * C + c) * H + ih) * W;                                   \
            __global const act_t *dyr = dy + dy_off + yr;                                                             \
            if (ih >= 0 && ih < H) __VA_ARGS__                                                                        \
            if (++oh == OH) oh = 0, b++;                                                                              \
        }                                                                                                             \
    }

/* Sum over the row of dy[ow] x[ow sw - pw + kj dw] into the float8 S, 8
 * outputs at a time; lanes past OW add nothing. */
#define NNCL_DW_ROW_TAP(S, kj)                                                                                        \
    {                                                                                                                 \
        int ow0, sj = (kj) * dw - pw;                                                                                 \
        for (ow0 = 0; ow0 + 8 <= OW; ow0 += 8)                                                                        \
            S += NNCL_LD8(dyr + ow0) * nncl_dw_ld8(x + x_off, xr, ow0 * sw + sj, sw, W, xn);                          \
        if (ow0 < OW)                                                                                                 \
            S += select((float8)0.0f,                                                                                 \
                        nncl_dw_ld8(dy + dy_off, yr, ow0, 1, OW, dyn) *                                               \
                            nncl_dw_ld8(x + x_off, xr, ow0 * sw + sj, sw, W, xn),                                     \
                        (int8)(0, 1, 2, 3, 4, 5, 6, 7) < (int8)(OW - ow0));                                           \
    }

__kernel void nncl_conv_dw_backward_f32_weight(NNCL_DW_PART_ARGS) {
    int t;
    for (t = 0; t < kw; t++) {
        float8 s = (float8)0.0f;
        NNCL_DW_ROWS(NNCL_DW_ROW_TAP(s, t))
        part[((int)get_global_id(1) * kw + t) * P + (int)get_global_id(0)] = nncl_sum8(s);
    }
}


/* dw[i] (+)= the P partial sums of tap i, in order. */
__kernel void nncl_conv_dw_backward_f32_weight_sum(__global const float *part, __global float *dwt, int dw_off, int n,
                                                   int P, int acc) {
    int i = get_global_id(0), p;
    float s = 0.0f;
    if (i >= n) return;
    for (p = 0; p < P; p++) s += part[i * P + p];
    dwt[dw_off + i] = (acc ? dwt[dw_off + i] : 0.0f) + s;
}

/* ---- square kernels of 3 or 5 taps, stride 1 or 2, dilation 1 (the
 * layers of MobileNet-style nets). A work-item holds 16 consecutive
 * positions of its row at stride 1 as one float16 per tap, the taps' weights
 * in registers: a tap is one vector load and one multiply-add; at stride 2
 * the even lanes are the outputs (computing the odd ones costs less than
 * gathering the even inputs). Masks zero the lanes outside the row; a
 * work-item whose lanes all lie inside its rows (the same for every row)
 * goes without them. */
#define NNCL_DW_IOTA16 (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

float16 nncl_dw_ld16(__global const act_t *p) { return (float16)(NNCL_LD8(p), NNCL_LD8(p + 8)); }

/* row[s + t] for t < 16 at indices clamped into [0, W) (zero outside),
 * for rows whose vector would leave the tensor at its ends. */
float16 nncl_dw_gather16(__global const act_t *row, int s, int W) {
    float t[16];
    int j;
    for (j = 0; j < 16; j++) t[j] = NNCL_LDG(row, clamp(s + j, 0, W - 1));
    return select((float16)0.0f, vload16(0, t), (int16)s + NNCL_DW_IOTA16 >= 0 && (int16)s + NNCL_DW_IOTA16 < W);
}

/* The K taps of a row, wk[kj] * row[s + kj + t] into v: unmasked (edge 0),
 * masked to [0, W) (1), or gathered (2: the vectors would leave the
 * tensor). Unrolled, the masks do not depend on the row. */
#define NNCL_DW_TAPS16(K, v, wk, row, s, W, edge)                                                                     \
    {                                                                                                                 \
        int kj_;                                                                                                      \
        if ((edge) == 0) {                                                                                            \
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) v += (wk)[kj_] * nncl_dw_ld16((row) + (s) + kj_);        \
        } else if ((edge) == 1) {                                                                                     \
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) {                                                         \
                int16 i_ = (int16)((s) + kj_) + NNCL_DW_IOTA16;                                                       \
                v += (wk)[kj_] * select((float16)0.0f, nncl_dw_ld16((row) + (s) + kj_), i_ >= 0 && i_ < (W));         \
            }                                                                                                         \
        } else {                                                                                                      \
            for (kj_ = 0; kj_ < K; kj_++) v += (wk)[kj_] * nncl_dw_gather16(row, (s) + kj_, W);                      \
        }                                                                                                             \
    }

/* The 8 outputs of v (at stride 2 its even lanes, else its low or high
 * half) to row[0..n), through act, added to what is there with acc. */
__attribute__((always_inline)) void nncl_dw_st16(float16 v, int S, float b, int act, __global act_t *row, int n,
                                                 int acc) {
    v += b;
    if (S == 2) {
        nncl_dw_st8(nncl_act8(v.even, act), row, n, acc);
    } else {
        nncl_dw_st8(nncl_act8(v.lo, act), row, n, acc);
        if (n > 8) nncl_dw_st8(nncl_act8(v.hi, act), row + 8, n - 8, acc);
    }
}

/* Rows oh0..oh1 of output plane y (OW outputs a row) from ow0: the K x K
 * taps wk over input plane xp of x (H x W, n elements in the tensor) at
 * stride S, padding ph, pw, then + b, act, (+)= y. Whether the lanes need
 * masks, and whether the vectors could leave the tensor (only in its
 * first and last planes), is the same for every row. */
__attribute__((always_inline)) void nncl_dw_rows_k(const int K, __global const act_t *x, int xp, int n,
                                                   const float *wk, int H, int W, int S, int ph, int pw, float b,
                                                   int act, __global act_t *y, int OW, int ow0, int oh0, int oh1,
                                                   int acc) {
    int s = ow0 * S - pw, edge = s < 0 || s + 16 + K - 1 > W, oh, ki;
    if (edge && (xp + s < 0 || xp + (H - 1) * W + s + 15 + K > n)) edge = 2;
    for (oh = oh0; oh < oh1; oh++) {
        float16 v = (float16)0.0f;
        _Pragma("unroll") for (ki = 0; ki < K; ki++) {
            int ih = oh * S - ph + ki;
            if (ih < 0 || ih >= H) continue;
            NNCL_DW_TAPS16(K, v, wk + ki * K, x + xp + ih * W, s, W, edge)
        }
        nncl_dw_st16(v, S, b, act, y + oh * OW + ow0, OW - ow0, acc);
    }
}

/* The same with the products of d instead: acc[kj] += d * row[s + kj + t]. */
#define NNCL_DW_WTAPS16(K, acc, d, row, s, W, edge)                                                                   \
    {                                                                                                                 \
        int kj_;                                                                                                      \
        if ((edge) == 0) {                                                                                            \
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) (acc)[kj_] += (d) * nncl_dw_ld16((row) + (s) + kj_);     \
        } else if ((edge) == 1) {                                                                                     \
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) {                                                         \
                int16 i_ = (int16)((s) + kj_) + NNCL_DW_IOTA16;                                                       \
                (acc)[kj_] += (d) * select((float16)0.0f, nncl_dw_ld16((row) + (s) + kj_), i_ >= 0 && i_ < (W));      \
            }                                                                                                         \
        } else {                                                                                                      \
            for (kj_ = 0; kj_ < K; kj_++) (acc)[kj_] += (d) * nncl_dw_gather16(row, (s) + kj_, W);                   \
        }                                                                                                             \
    }

/* y = act(conv(x) + b): one work-item per 16 / sw outputs (global id 0)
 * of rb rows from rb id 1 of plane b O + o (id 2), as nncl_conv_dw_f32. */
#define NNCL_DW_FORWARD_K(K)                                                                                          \
    __kernel void nncl_conv_dw_f32_k##K(NNCL_DW_FORWARD_ARGS) {                                                    \
        int ow0 = get_global_id(0) * (16 / sw), oh = get_global_id(1) * rb, z = get_global_id(2), o = z % O, t;      \
        float wk[K * K];                                                                                              \
        if (ow0 >= OW) return; /* the launch rounded up */                                                            \
        for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + t);                                       \
        nncl_dw_rows_k(K, x + x_off, z / (O / C) * H * W, xn, wk, H, W, sw, ph, pw,                                  \
                       has_bias ? NNCL_LDG(bias, b_off + o) : 0.0f, act, y + y_off + z * OH * OW, OW, ow0, oh,        \
                       min(oh + rb, OH), 0);                                                                          \
    }
NNCL_DW_FORWARD_K(3)
NNCL_DW_FORWARD_K(5)

/* dx (+)= conv^T(dy) at stride 1: the forward's rows over dy with the taps
 * reversed and padding K - 1 - p, summed over the M outputs of channel c
 * (the first stores, the others add); one work-item per 16 inputs (global
 * id 0) of rb rows from rb id 1 of plane b C + c (id 2). */
#define NNCL_DW_INPUT_K(K)                                                                                            \
    __kernel void nncl_conv_dw_backward_f32_input_k##K(NNCL_DW_INPUT_ARGS) {                                  \
        int iw0 = get_global_id(0) * 16, ih = get_global_id(1) * rb, z = get_global_id(2), M = O / C, m, t;          \
        float wk[K * K];                                                                                              \
        if (iw0 >= W) return; /* the launch rounded up */                                                             \
        for (m = 0; m < M; m++) {                                                                                     \
            int o = z % C * M + m;                                                                                    \
            for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + K * K - 1 - t);                       \
            nncl_dw_rows_k(K, dy + dy_off, (z * M + m) * OH * OW, dyn, wk, OH, OW, 1, K - 1 - ph, K - 1 - pw, 0.0f,  \
                           0, dx + dx_off + z * H * W, W, iw0, ih, min(ih + rb, H), acc || m);                        \
        }                                                                                                             \
    }
NNCL_DW_INPUT_K(3)
NNCL_DW_INPUT_K(5)

/* dy[b, o, oh, s + u] for u < 8, zero outside [0, OW): masked where edge. */
__attribute__((always_inline)) float8 nncl_dw_ld8m(__global const act_t *base, int r, int s, int W, int n,
                                                   int edge) {
    int8 i = (int8)s + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    float8 v;
    if (!edge) return NNCL_LD8(base + r + s);
    if (r + s >= 0 && r + s + 8 <= n) {
        v = NNCL_LD8(base + r + s);
    } else {
        float t[8];
        int j;
        for (j = 0; j < 8; j++) t[j] = NNCL_LDG(base + r, clamp(s + j, 0, W - 1));
        v = vload8(0, t);
    }
    return select((float8)0.0f, v, i >= 0 && i < W);
}

/* dx (+)= conv^T(dy) at stride 2: one work-item per 16 inputs iw0 + t
 * (global id 0) of rb rows from rb id 1 of plane b C + c (id 2). Tap kj
 * reaches the lanes t with iw0 + t + pw - kj even, from ow = (iw0 + t + pw
 * - kj) / 2: 8 consecutive outputs of dy into the even lanes (e) or the odd
 * ones (d), interleaved at the store. */
#define NNCL_DW_INPUT2_K(K)                                                                                           \
    __kernel void nncl_conv_dw_backward_f32_input_s2_k##K(NNCL_DW_INPUT_ARGS) {                               \
        int iw0 = get_global_id(0) * 16, ih0 = get_global_id(1) * rb, z = get_global_id(2), M = O / C, m, t, ki, kj; \
        int ih1 = min(ih0 + rb, H), lo = (iw0 + pw - K + 1 - 1) >> 1, edge = lo < 0 || ((iw0 + pw + 1) >> 1) + 8 > OW; \
        float wk[K * K];                                                                                              \
        if (iw0 >= W) return; /* the launch rounded up */                                                             \
        for (m = 0; m < M; m++) {                                                                                     \
            int o = z % C * M + m, ih, yp = (z * M + m) * OH * OW;                                                    \
            for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + t);                                   \
            for (ih = ih0; ih < ih1; ih++) {                                                                          \
                float8 e = (float8)0.0f, d = (float8)0.0f;                                                            \
                __global act_t *row = dx + dx_off + (z * H + ih) * W + iw0;                                           \
                for (ki = 0; ki < K; ki++) {                                                                          \
                    int th = ih + ph - ki, r = yp + (th >> 1) * OW;                                                   \
                    if (th < 0 || (th & 1) || (th >> 1) >= OH) continue;                                              \
                    for (kj = 0; kj < K; kj++) {                                                                      \
                        int q = iw0 + pw - kj, odd = q & 1;                                                           \
                        float8 v = wk[ki * K + kj] * nncl_dw_ld8m(dy + dy_off, r, (q + odd) >> 1, OW, dyn, edge);     \
                        if (odd) d += v;                                                                              \
                        else e += v;                                                                                  \
                    }                                                                                                 \
                }                                                                                                     \
                nncl_dw_st8((float8)(e.s0, d.s0, e.s1, d.s1, e.s2, d.s2, e.s3, d.s3), row, W - iw0, acc || m);        \
                if (W - iw0 > 8)                                                                                      \
                    nncl_dw_st8((float8)(e.s4, d.s4, e.s5, d.s5, e.s6, d.s6, e.s7, d.s7), row + 8, W - iw0 - 8,       \
                                acc || m);                                                                            \
            }                                                                                                         \
        }                                                                                                             \
    }
NNCL_DW_INPUT2_K(3)
NNCL_DW_INPUT2_K(5)

float nncl_dw_sum16(float16 v) { return nncl_sum8(v.lo) + nncl_sum8(v.hi); }

/* The weight gradient's first pass: one work-item per chunk p of P over
 * the B OH rows of y (global id 0) and output o (id 1) sums every tap's
 * products in a float16 of its own, a segment of 16 / sw outputs of dy at
 * a time against the 16 positions of x the segment's lanes reach (at
 * stride 2 dy spread over the even lanes, the odd ones zero), into
 * part[(o K K + tap) P + p]; nncl_conv_dw_backward_f32_weight_sum then
 * adds each tap's P sums in order. */
#define NNCL_DW_WEIGHT_FAST(K)                                                                                        \
    __kernel void nncl_conv_dw_backward_f32_weight_k##K(NNCL_DW_PART_ARGS) {                                          \
        int p = get_global_id(0), o = get_global_id(1), c = o / (O / C), R = B * OH, S = sw, ow0, t, ki, kj;         \
        int j0 = (int)(((long)R * p) / P), j1 = (int)(((long)R * (p + 1)) / P);                                       \
        float16 acc[K * K];                                                                                           \
        for (t = 0; t < K * K; t++) acc[t] = (float16)0.0f;                                                           \
        for (ow0 = 0; ow0 < OW; ow0 += 16 / S) {                                                                      \
            int s = ow0 * S - pw, edge = s < 0 || s + 16 + K - 1 > W, dedge = ow0 + 16 / S > OW;                      \
            int b = j0 / OH, oh = j0 - b * OH, j;                                                                     \
            for (j = j0; j < j1; j++) {                                                                               \
                int yr = ((b * O + o) * OH + oh) * OW, xp = (b * C + c) * H * W;                                      \
                float16 d;                                                                                            \
                if (S == 2) {                                                                                         \
                    float8 v = nncl_dw_ld8m(dy + dy_off, yr, ow0, OW, dyn, dedge);                                    \
                    d = (float16)(v.s0, 0.0f, v.s1, 0.0f, v.s2, 0.0f, v.s3, 0.0f, v.s4, 0.0f, v.s5, 0.0f, v.s6, 0.0f, \
                                  v.s7, 0.0f);                                                                        \
                } else {                                                                                              \
                    d = dedge ? nncl_dw_gather16(dy + dy_off + yr, ow0, OW) : nncl_dw_ld16(dy + dy_off + yr + ow0);  \
                }                                                                                                     \
                for (ki = 0; ki < K; ki++) {                                                                          \
                    int ih = oh * S - ph + ki, r = xp + ih * W;                                                       \
                    if (ih < 0 || ih >= H) continue;                                                                  \
                    NNCL_DW_WTAPS16(K, acc + ki * K, d, x + x_off + r, s, W,                                          \
                                    edge ? 1 + (r + s < 0 || r + s + 15 + K > xn) : 0)                                \
                }                                                                                                     \
                if (++oh == OH) oh = 0, b++;                                                                          \
            }                                                                                                         \
        }                                                                                                             \
        for (t = 0; t < K * K; t++) part[(o * K * K + t) * P + p] = nncl_dw_sum16(acc[t]);                           \
    }
NNCL_DW_WEIGHT_FAST(3)
NNCL_DW_WEIGHT_FAST(5)
