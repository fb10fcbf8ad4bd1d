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

/* The first n < 8 lanes of v to row[0..n), added to what is there with acc. */
void nncl_dw_st_part(float8 v, __global act_t *row, int n, int acc) {
    float s[8];
    int t;
    vstore8(v, 0, s);
    for (t = 0; t < n; t++) NNCL_ST(s[t] + (acc ? NNCL_LD(row, t) : 0.0f), row, t);
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
__kernel void nncl_conv_dw_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                               __global act_t *y, int y_off, __global const act_t *bias, int b_off, int has_bias,
                               int C, int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph,
                               int pw, int dh, int dw, int G, int act, int xn, int rb) {
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
__kernel void nncl_conv_dw_backward_f32_input(__global const act_t *dy, int dy_off, __global const act_t *w,
                                              int w_off, __global act_t *dx, int dx_off, int C, int H, int W, int O,
                                              int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                              int dw, int G, int acc, int dyn, int rb) {
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

#define NNCL_DW_WEIGHT_K(KW)                                                                                          \
    __kernel void nncl_conv_dw_backward_f32_weight_k##KW(NNCL_DW_PART_ARGS) {                                         \
        float8 s[KW];                                                                                                 \
        int t;                                                                                                        \
        for (t = 0; t < KW; t++) s[t] = (float8)0.0f;                                                                 \
        NNCL_DW_ROWS({                                                                                                \
            int ow0, s0;                                                                                              \
            for (ow0 = 0; ow0 + 8 <= OW; ow0 += 8) {                                                                  \
                float8 dv = NNCL_LD8(dyr + ow0);                                                                      \
                s0 = ow0 * sw - pw;                                                                                   \
                if (s0 >= 0 && s0 + (KW - 1) * dw + 7 * sw < W)                                                       \
                    for (t = 0; t < KW; t++) s[t] += dv * nncl_dw_in8(x + x_off + xr + s0 + t * dw, sw);            \
                else                                                                                                  \
                    for (t = 0; t < KW; t++) s[t] += dv * nncl_dw_ld8(x + x_off, xr, s0 + t * dw, sw, W, xn);       \
            }                                                                                                         \
            if (ow0 < OW) {                                                                                           \
                int8 live = (int8)(0, 1, 2, 3, 4, 5, 6, 7) < (int8)(OW - ow0);                                        \
                float8 dv = select((float8)0.0f, nncl_dw_ld8(dy + dy_off, yr, ow0, 1, OW, dyn), live);                \
                s0 = ow0 * sw - pw;                                                                                   \
                for (t = 0; t < KW; t++)                                                                              \
                    s[t] += select((float8)0.0f, dv * nncl_dw_ld8(x + x_off, xr, s0 + t * dw, sw, W, xn), live);    \
            }                                                                                                         \
        })                                                                                                            \
        for (t = 0; t < KW; t++) part[((int)get_global_id(1) * KW + t) * P + (int)get_global_id(0)] = nncl_sum8(s[t]); \
    }
NNCL_DW_WEIGHT_K(3)
NNCL_DW_WEIGHT_K(5)

/* dw[i] (+)= the P partial sums of tap i, in order. */
__kernel void nncl_conv_dw_backward_f32_weight_sum(__global const float *part, __global float *dwt, int dw_off, int n,
                                                   int P, int acc) {
    int i = get_global_id(0), p;
    float s = 0.0f;
    if (i >= n) return;
    for (p = 0; p < P; p++) s += part[i * P + p];
    dwt[dw_off + i] = (acc ? dwt[dw_off + i] : 0.0f) + s;
}
