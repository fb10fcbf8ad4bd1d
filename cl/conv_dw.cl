/* conv_dw.cl - depthwise convolution (src/ops/conv_dw.c): groups == C,
 * M = O / C outputs per channel (output o reads channel o / M), any kernel,
 * stride along W of 1 or 2 (any along H), dilation and padding per axis,
 * NCHW (1-D as H = 1). x [B,C,H,W], w [O,1,kh,kw], y [B,O,OH,OW]. A tap
 * reads one input per output: memory-bound, so each work-item computes a
 * segment of consecutive outputs of one row as vectors, reading the rows
 * in place with one vector load per tap. The general kernels (any
 * geometry above) take 8 outputs as float8 (the input gradient at stride
 * 2: 16); square 3x3 and 5x5 kernels at stride 1 or 2 and dilation 1
 * (the _k3, _k5 variants, second half of the file) 16 positions as one
 * float16 with the taps' weights in registers. Every kernel takes the
 * geometry arguments of cl/conv_ex.cl (C, H, W, O, OH, OW, kh, kw, sh,
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
 * partial sums in order. This kernel takes a tap at a time; the square
 * kernels' variants below all taps at once. */
#define NNCL_DW_PART_ARGS                                                                                             \
    __global const act_t *x, int x_off, __global const act_t *dy, int dy_off, __global float *part, int C, int H,     \
        int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int G, int B,   \
        int P, int xn, int dyn
/* The rows of chunk p of P over B OH rows; the row's pointers into dy and
 * x (kernel row ki of output channel o), or skipped outside x. */
#define NNCL_DW_ROWS(...)                                                                                             \
    {                                                                                                                 \
        int p = get_global_id(0), e = get_global_id(1), ki = e % kh, o = e / kh, c = o / (O / C), R = B * OH, j;      \
        int j0 = (int)(((long)R * p) / P), j1 = (int)(((long)R * (p + 1)) / P), b = j0 / OH, oh = j0 - b * OH;        \
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
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) v += (wk)[kj_] * nncl_dw_ld16((row) + (s) + kj_);         \
        } else if ((edge) == 1) {                                                                                     \
            _Pragma("unroll") for (kj_ = 0; kj_ < K; kj_++) {                                                         \
                int16 i_ = (int16)((s) + kj_) + NNCL_DW_IOTA16;                                                       \
                v += (wk)[kj_] * select((float16)0.0f, nncl_dw_ld16((row) + (s) + kj_), i_ >= 0 && i_ < (W));         \
            }                                                                                                         \
        } else {                                                                                                      \
            for (kj_ = 0; kj_ < K; kj_++) v += (wk)[kj_] * nncl_dw_gather16(row, (s) + kj_, W);                       \
        }                                                                                                             \
    }

/* The outputs of v (at stride 2 its 8 even lanes, else all 16) + b to
 * row[0..n), through act, added to what is there with acc. */
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
 * first and last planes), is the same for every row: each case has a
 * loop of its own (EDGE a constant), whose masks the compiler takes out
 * of the loop. */
static __attribute__((always_inline)) void nncl_dw_rows_e(const int K, const int EDGE, __global const act_t *x,
                                                          int xp, const float *wk, int H, int W, int S, int ph,
                                                          int s, float b, int act, __global act_t *y, int OW,
                                                          int ow0, int oh0, int oh1, int acc) {
    int oh, ki;
    for (oh = oh0; oh < oh1; oh++) {
        float16 v = (float16)0.0f;
        _Pragma("unroll") for (ki = 0; ki < K; ki++) {
            int ih = oh * S - ph + ki;
            if (ih < 0 || ih >= H) continue;
            NNCL_DW_TAPS16(K, v, wk + ki * K, x + xp + ih * W, s, W, EDGE)
        }
        nncl_dw_st16(v, S, b, act, y + oh * OW + ow0, OW - ow0, acc);
    }
}
static __attribute__((always_inline)) void nncl_dw_rows_k(const int K, __global const act_t *x, int xp, int n,
                                                          const float *wk, int H, int W, int S, int ph, int pw,
                                                          float b, int act, __global act_t *y, int OW, int ow0,
                                                          int oh0, int oh1, int acc) {
    int s = ow0 * S - pw, edge = s < 0 || s + 16 + K - 1 > W;
    if (edge && (xp + s < 0 || xp + (H - 1) * W + s + 15 + K > n)) edge = 2;
    if (edge == 0) nncl_dw_rows_e(K, 0, x, xp, wk, H, W, S, ph, s, b, act, y, OW, ow0, oh0, oh1, acc);
    else if (edge == 1) nncl_dw_rows_e(K, 1, x, xp, wk, H, W, S, ph, s, b, act, y, OW, ow0, oh0, oh1, acc);
    else nncl_dw_rows_e(K, 2, x, xp, wk, H, W, S, ph, s, b, act, y, OW, ow0, oh0, oh1, acc);
}

/* y = act(conv(x) + b): one work-item per 16 / sw outputs (global id 0)
 * of rb rows from rb id 1 of plane b O + o (id 2), as nncl_conv_dw_f32. */
#define NNCL_DW_FORWARD_K(K)                                                                                          \
    __kernel void nncl_conv_dw_f32_k##K(NNCL_DW_FORWARD_ARGS) {                                                       \
        int ow0 = get_global_id(0) * (16 / sw), oh = get_global_id(1) * rb, z = get_global_id(2), o = z % O, t;       \
        float wk[K * K];                                                                                              \
        if (ow0 >= OW) return; /* the launch rounded up */                                                            \
        for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + t);                                       \
        nncl_dw_rows_k(K, x + x_off, z / (O / C) * H * W, xn, wk, H, W, sw, ph, pw,                                   \
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
    __kernel void nncl_conv_dw_backward_f32_input_k##K(NNCL_DW_INPUT_ARGS) {                                          \
        int iw0 = get_global_id(0) * 16, ih = get_global_id(1) * rb, z = get_global_id(2), M = O / C, m, t;           \
        float wk[K * K];                                                                                              \
        if (iw0 >= W) return; /* the launch rounded up */                                                             \
        for (m = 0; m < M; m++) {                                                                                     \
            int o = z % C * M + m;                                                                                    \
            for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + K * K - 1 - t);                       \
            nncl_dw_rows_k(K, dy + dy_off, (z * M + m) * OH * OW, dyn, wk, OH, OW, 1, K - 1 - ph, K - 1 - pw, 0.0f,   \
                           0, dx + dx_off + z * H * W, W, iw0, ih, min(ih + rb, H), acc || m);                        \
        }                                                                                                             \
    }
NNCL_DW_INPUT_K(3)
NNCL_DW_INPUT_K(5)

/* row[s + t] for t < 8 (16), zero outside [0, W), row at r of a tensor of
 * n elements: unmasked (mode 0), masked (1), or gathered where the
 * vector would leave the tensor (2, else as 1). */
__attribute__((always_inline)) float8 nncl_dw_ld8e(__global const act_t *base, int r, int s, int W, int n,
                                                   int mode) {
    int8 i = (int8)s + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    float8 v;
    if (mode == 0) return NNCL_LD8(base + r + s);
    if (mode == 1 || (r + s >= 0 && r + s + 8 <= n))
        return select((float8)0.0f, NNCL_LD8(base + r + s), i >= 0 && i < W);
    v = (float8)(NNCL_LDG(base + r, clamp(i.s0, 0, W - 1)), NNCL_LDG(base + r, clamp(i.s1, 0, W - 1)),
                 NNCL_LDG(base + r, clamp(i.s2, 0, W - 1)), NNCL_LDG(base + r, clamp(i.s3, 0, W - 1)),
                 NNCL_LDG(base + r, clamp(i.s4, 0, W - 1)), NNCL_LDG(base + r, clamp(i.s5, 0, W - 1)),
                 NNCL_LDG(base + r, clamp(i.s6, 0, W - 1)), NNCL_LDG(base + r, clamp(i.s7, 0, W - 1)));
    return select((float8)0.0f, v, i >= 0 && i < W);
}
__attribute__((always_inline)) float16 nncl_dw_ld16e(__global const act_t *base, int r, int s, int W, int n,
                                                     int mode) {
    int16 i = (int16)s + NNCL_DW_IOTA16;
    if (mode == 0) return nncl_dw_ld16(base + r + s);
    if (mode == 1 || (r + s >= 0 && r + s + 16 <= n))
        return select((float16)0.0f, nncl_dw_ld16(base + r + s), i >= 0 && i < W);
    return nncl_dw_gather16(base + r, s, W);
}

/* dx (+)= conv^T(dy) at stride 2: one work-item per 16 inputs iw0 + t
 * (global id 0) of rb rows from rb id 1 of plane b C + c (id 2). Tap kj
 * reaches the lanes t with iw0 + t + pw - kj even, from ow = (iw0 + t + pw
 * - kj) / 2: 8 consecutive outputs of dy into the even lanes (e) or the odd
 * ones (d), interleaved at the store. */
#define NNCL_DW_INPUT2_K(K)                                                                                           \
    __kernel void nncl_conv_dw_backward_f32_input_s2_k##K(NNCL_DW_INPUT_ARGS) {                                       \
        int iw0 = get_global_id(0) * 16, ih0 = get_global_id(1) * rb, z = get_global_id(2), M = O / C, m, t, ki, kj;  \
        int ih1 = min(ih0 + rb, H), lo = (iw0 + pw - K) >> 1, hi = ((iw0 + pw + 1) >> 1) + 8;                         \
        int edge = lo < 0 || hi > OW;                                                                                 \
        float wk[K * K];                                                                                              \
        if (iw0 >= W) return; /* the launch rounded up */                                                             \
        for (m = 0; m < M; m++) {                                                                                     \
            int o = z % C * M + m, ih, yp = (z * M + m) * OH * OW;                                                    \
            int mode = edge ? 1 + (yp + lo < 0 || yp + (OH - 1) * OW + hi > dyn) : 0;                                 \
            for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + t);                                   \
            for (ih = ih0; ih < ih1; ih++) {                                                                          \
                float8 e = (float8)0.0f, d = (float8)0.0f;                                                            \
                __global act_t *row = dx + dx_off + (z * H + ih) * W + iw0;                                           \
                _Pragma("unroll") for (ki = 0; ki < K; ki++) {                                                        \
                    int th = ih + ph - ki, r = yp + (th >> 1) * OW;                                                   \
                    if (th < 0 || (th & 1) || (th >> 1) >= OH) continue;                                              \
                    _Pragma("unroll") for (kj = 0; kj < K; kj++) {                                                    \
                        int q = iw0 + pw - kj, odd = q & 1;                                                           \
                        float8 v = wk[ki * K + kj] * nncl_dw_ld8e(dy + dy_off, r, (q + odd) >> 1, OW, dyn, mode);     \
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
 * adds each tap's P sums in order. The sums are named variables, not an
 * array: PoCL keeps a private array that is written in a loop in memory. */
#define NNCL_DW_WROW3(ki, a0, a1, a2)                                                                                 \
    if (oh * S - ph + (ki) >= 0 && oh * S - ph + (ki) < H) {                                                          \
        int r_ = xp + (oh * S - ph + (ki)) * W, m_ = mode ? 1 + (r_ + s < 0 || r_ + s + 15 + K > xn) : 0;            \
        a0 += d * nncl_dw_ld16e(x + x_off, r_, s, W, xn, m_);                                                         \
        a1 += d * nncl_dw_ld16e(x + x_off, r_, s + 1, W, xn, m_);                                                     \
        a2 += d * nncl_dw_ld16e(x + x_off, r_, s + 2, W, xn, m_);                                                     \
    }
#define NNCL_DW_WROW5(ki, a0, a1, a2, a3, a4)                                                                         \
    if (oh * S - ph + (ki) >= 0 && oh * S - ph + (ki) < H) {                                                          \
        int r_ = xp + (oh * S - ph + (ki)) * W, m_ = mode ? 1 + (r_ + s < 0 || r_ + s + 15 + K > xn) : 0;            \
        a0 += d * nncl_dw_ld16e(x + x_off, r_, s, W, xn, m_);                                                         \
        a1 += d * nncl_dw_ld16e(x + x_off, r_, s + 1, W, xn, m_);                                                     \
        a2 += d * nncl_dw_ld16e(x + x_off, r_, s + 2, W, xn, m_);                                                     \
        a3 += d * nncl_dw_ld16e(x + x_off, r_, s + 3, W, xn, m_);                                                     \
        a4 += d * nncl_dw_ld16e(x + x_off, r_, s + 4, W, xn, m_);                                                     \
    }
/* The loops of the first pass around BODY, which reads d (16 lanes of dy
 * against row oh of plane xp of x from s, masked by mode). */
#define NNCL_DW_WLOOPS(K, BODY)                                                                                       \
    int p = get_global_id(0), o = get_global_id(1), c = o / (O / C), R = B * OH, S = sw, ow0;                         \
    int j0 = (int)(((long)R * p) / P), j1 = (int)(((long)R * (p + 1)) / P);                                           \
    for (ow0 = 0; ow0 < OW; ow0 += 16 / S) {                                                                          \
        int s = ow0 * S - pw, mode = s < 0 || s + 16 + K - 1 > W, dmode = ow0 + 16 / S > OW ? 2 : 0;          \
        int b = j0 / OH, oh = j0 - b * OH, j;                                                                         \
        for (j = j0; j < j1; j++) {                                                                                   \
            int yr = ((b * O + o) * OH + oh) * OW, xp = (b * C + c) * H * W;                                          \
            float16 d;                                                                                                \
            if (S == 2) {                                                                                             \
                float8 v = nncl_dw_ld8e(dy + dy_off, yr, ow0, OW, dyn, dmode);                                        \
                d = (float16)(v.s0, 0.0f, v.s1, 0.0f, v.s2, 0.0f, v.s3, 0.0f, v.s4, 0.0f, v.s5, 0.0f, v.s6, 0.0f,     \
                              v.s7, 0.0f);                                                                            \
            } else {                                                                                                  \
                d = nncl_dw_ld16e(dy + dy_off, yr, ow0, OW, dyn, dmode);                                              \
            }                                                                                                         \
            BODY                                                                                                      \
            if (++oh == OH) oh = 0, b++;                                                                              \
        }                                                                                                             \
    }
#define NNCL_DW_WPART(t, a) part[(o * K * K + (t)) * P + p] = nncl_dw_sum16(a)

__kernel void nncl_conv_dw_backward_f32_weight_k3(NNCL_DW_PART_ARGS) {
    float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f, a8 = 0.0f;
    const int K = 3;
    NNCL_DW_WLOOPS(3, NNCL_DW_WROW3(0, a0, a1, a2) NNCL_DW_WROW3(1, a3, a4, a5) NNCL_DW_WROW3(2, a6, a7, a8))
    NNCL_DW_WPART(0, a0), NNCL_DW_WPART(1, a1), NNCL_DW_WPART(2, a2), NNCL_DW_WPART(3, a3), NNCL_DW_WPART(4, a4);
    NNCL_DW_WPART(5, a5), NNCL_DW_WPART(6, a6), NNCL_DW_WPART(7, a7), NNCL_DW_WPART(8, a8);
}

__kernel void nncl_conv_dw_backward_f32_weight_k5(NNCL_DW_PART_ARGS) {
    float16 a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f, a04 = 0.0f, a05 = 0.0f, a06 = 0.0f, a07 = 0.0f, a08 = 0.0f;
    float16 a09 = 0.0f, a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f, a14 = 0.0f, a15 = 0.0f, a16 = 0.0f, a17 = 0.0f;
    float16 a18 = 0.0f, a19 = 0.0f, a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f, a24 = 0.0f;
    const int K = 5;
    NNCL_DW_WLOOPS(5, NNCL_DW_WROW5(0, a00, a01, a02, a03, a04) NNCL_DW_WROW5(1, a05, a06, a07, a08, a09)
                          NNCL_DW_WROW5(2, a10, a11, a12, a13, a14) NNCL_DW_WROW5(3, a15, a16, a17, a18, a19)
                              NNCL_DW_WROW5(4, a20, a21, a22, a23, a24))
    NNCL_DW_WPART(0, a00), NNCL_DW_WPART(1, a01), NNCL_DW_WPART(2, a02), NNCL_DW_WPART(3, a03), NNCL_DW_WPART(4, a04);
    NNCL_DW_WPART(5, a05), NNCL_DW_WPART(6, a06), NNCL_DW_WPART(7, a07), NNCL_DW_WPART(8, a08), NNCL_DW_WPART(9, a09);
    NNCL_DW_WPART(10, a10), NNCL_DW_WPART(11, a11), NNCL_DW_WPART(12, a12), NNCL_DW_WPART(13, a13);
    NNCL_DW_WPART(14, a14), NNCL_DW_WPART(15, a15), NNCL_DW_WPART(16, a16), NNCL_DW_WPART(17, a17);
    NNCL_DW_WPART(18, a18), NNCL_DW_WPART(19, a19), NNCL_DW_WPART(20, a20), NNCL_DW_WPART(21, a21);
    NNCL_DW_WPART(22, a22), NNCL_DW_WPART(23, a23), NNCL_DW_WPART(24, a24);
}
