/* conv_dw.cl - depthwise convolution (src/ops/conv_dw.c): groups == C,
 * M = O / C outputs per channel (output o reads channel o / M), any kernel,
 * stride along W of 1 or 2 (any along H), dilation and padding per axis,
 * NCHW (1-D as H = 1). x [B,C,H,W], w [O,1,kh,kw], y [B,O,OH,OW]. A tap
 * reads one input per output: memory-bound, so each work-item computes a
 * segment of 8 (the input gradient at stride 2: 16) consecutive outputs of
 * one row as float8 vectors, reading the rows in place with one vector
 * load per tap where the segment lies inside the row. Every kernel takes
 * the geometry arguments of cl/conv_ex.cl (C, H, W, O, OH, OW, kh, kw, sh,
 * sw, ph, pw, dh, dw, G). */

/* row[s + t st] for t < 8, zero outside [0, W). */
float8 nncl_dw_ld8(__global const act_t *row, int s, int st, int W) {
    float v[8];
    int t;
    if (s >= 0 && s + 7 * st < W) {
        if (st == 1) return NNCL_LD8(row + s);
        if (st == 2) {
            float8 a = NNCL_LD8(row + s), b = NNCL_LD8(row + s + 7);
            return (float8)(a.even, b.odd);
        }
    }
    for (t = 0; t < 8; t++) {
        int i = s + t * st;
        v[t] = i >= 0 && i < W ? NNCL_LDG(row, i) : 0.0f;
    }
    return vload8(0, v);
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

/* x[s + t st] for t < 8 where the 8 lie inside the row (stride 1 or 2). */
float8 nncl_dw_in8(__global const act_t *row, int st) {
    if (st == 1) return NNCL_LD8(row);
    {
        float8 a = NNCL_LD8(row), b = NNCL_LD8(row + 7);
        return (float8)(a.even, b.odd);
    }
}

/* y = act(conv(x) + b): one work-item per 8 outputs (global id 0) of row
 * oh (id 1) of plane b O + o (id 2). Where all of a kernel row's taps fall
 * inside the input row, their loads go unchecked. */
__kernel void nncl_conv_dw_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                               __global act_t *y, int y_off, __global const act_t *bias, int b_off, int has_bias,
                               int C, int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph,
                               int pw, int dh, int dw, int G, int act) {
    int ow0 = get_global_id(0) << 3, oh = get_global_id(1), z = get_global_id(2), M = O / C, o = z % O, ki, kj;
    int s0 = ow0 * sw - pw, inside = s0 >= 0 && s0 + (kw - 1) * dw + 7 * sw < W;
    __global const act_t *xc = x + x_off + (M == 1 ? z : z / M) * H * W, *wo = w + w_off + o * kh * kw;
    float8 s = (float8)0.0f;
    for (ki = 0; ki < kh; ki++) {
        int ih = oh * sh - ph + ki * dh;
        __global const act_t *row = xc + ih * W + s0;
        if (ih < 0 || ih >= H) continue;
        if (inside)
            for (kj = 0; kj < kw; kj++) s += NNCL_LDG(wo, ki * kw + kj) * nncl_dw_in8(row + kj * dw, sw);
        else
            for (kj = 0; kj < kw; kj++)
                s += NNCL_LDG(wo, ki * kw + kj) * nncl_dw_ld8(xc + ih * W, s0 + kj * dw, sw, W);
    }
    if (has_bias) s += NNCL_LDG(bias, b_off + o);
    nncl_dw_st8(nncl_act8(s, act), y + y_off + (z * OH + oh) * OW + ow0, OW - ow0, 0);
}

/* dx (+)= conv^T(dy): one work-item per 8 inputs (global id 0; 16 at
 * stride 2) of row ih (id 1) of plane b C + c (id 2). Output (oh, ow) takes input (oh sh - ph + ki
 * dh, ow sw - pw + kj dw); at stride 2 along W, the inputs of a segment a
 * tap reaches are every other one, from consecutive outputs: 8 of dy,
 * spread over 16 lanes. */
__kernel void nncl_conv_dw_backward_f32_input(__global const act_t *dy, int dy_off, __global const act_t *w,
                                              int w_off, __global act_t *dx, int dx_off, int C, int H, int W, int O,
                                              int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                              int dw, int G, int acc) {
    int L = sw == 2 ? 16 : 8, iw0 = get_global_id(0) * L, ih = get_global_id(1), z = get_global_id(2);
    int M = O / C, c = z % C, m, ki, kj;
    float8 s0 = (float8)0.0f, s1 = (float8)0.0f;
    __global act_t *row;
    for (m = 0; m < M; m++) {
        int o = c * M + m;
        __global const act_t *dyc = dy + dy_off + (z * M + m) * OH * OW, *wo = w + w_off + o * kh * kw;
        for (ki = 0; ki < kh; ki++) {
            int th = ih + ph - ki * dh, oh;
            if (th < 0) break; /* th falls with ki */
            oh = th / sh;
            if (oh * sh != th || oh >= OH) continue;
            for (kj = 0; kj < kw; kj++) {
                float wv = NNCL_LDG(wo, ki * kw + kj);
                int tw = iw0 + pw - kj * dw;
                if (sw == 1) {
                    s0 += wv * nncl_dw_ld8(dyc + oh * OW, tw, 1, OW);
                } else {
                    /* lanes t of the segment with tw + t even, from ow = (tw + t) / 2 */
                    int p = tw & 1;
                    float8 d = wv * nncl_dw_ld8(dyc + oh * OW, (tw + p) >> 1, 1, OW);
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

/* dw (+)= the adjoint in w of conv(x) against dy: one work-group per tap
 * (o, ki, kj), its lanes over the rows (b, oh) of y, each row 8 outputs at
 * a time; the lanes' sums added in a tree (nncl_group_sum): a fixed order,
 * no atomics. Kernels of kw 3 and 5 (_k3, _k5) take a kernel row (o, ki)
 * per work-group instead, its kw taps from one read of each row of dy. */
__kernel void nncl_conv_dw_backward_f32_weight(__global const act_t *x, int x_off, __global const act_t *dy,
                                               int dy_off, __global float *dwt, int dw_off, int C, int H, int W,
                                               int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw,
                                               int dh, int dw, int G, int B, int acc, __local float *part) {
    int e = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    int kj = e % kw, ki = (e / kw) % kh, o = e / (kw * kh), c = o / (O / C), j;
    float8 s = (float8)0.0f;
    float sum;
    for (j = lid; j < B * OH; j += ls) {
        int b = j / OH, oh = j - b * OH, ih = oh * sh - ph + ki * dh, ow0;
        __global const act_t *dyr = dy + dy_off + ((b * O + o) * OH + oh) * OW;
        __global const act_t *xr = x + x_off + ((b * C + c) * H + ih) * W;
        if (ih < 0 || ih >= H) continue;
        for (ow0 = 0; ow0 + 8 <= OW; ow0 += 8)
            s += NNCL_LD8(dyr + ow0) * nncl_dw_ld8(xr, ow0 * sw - pw + kj * dw, sw, W);
        if (ow0 < OW) { /* the row's last outputs: lanes past OW read nothing */
            float8 xv = nncl_dw_ld8(xr, ow0 * sw - pw + kj * dw, sw, W);
            float8 dv = nncl_dw_ld8(dyr, ow0, 1, OW);
            s += select((float8)0.0f, dv * xv, (int8)(0, 1, 2, 3, 4, 5, 6, 7) < (int8)(OW - ow0));
        }
    }
    sum = nncl_group_sum(part, nncl_sum8(s));
    if (lid == 0) dwt[dw_off + e] = (acc ? dwt[dw_off + e] : 0.0f) + sum;
}

/* The kernel row (o, ki) of kw = KW taps: per row of dy, each 8 outputs
 * read once against KW shifted reads of x; part holds KW sums per lane,
 * summed over the lanes in a tree. */
#define NNCL_DW_WEIGHT_K(KW)                                                                                          \
    __kernel void nncl_conv_dw_backward_f32_weight_k##KW(                                                             \
        __global const act_t *x, int x_off, __global const act_t *dy, int dy_off, __global float *dwt, int dw_off,    \
        int C, int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,   \
        int G, int B, int acc, __local float *part) {                                                                 \
        int e = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0), ki = e % kh, o = e / kh;             \
        int c = o / (O / C), j, t, n;                                                                                 \
        float8 s[KW];                                                                                                 \
        for (t = 0; t < KW; t++) s[t] = (float8)0.0f;                                                                 \
        for (j = lid; j < B * OH; j += ls) {                                                                          \
            int b = j / OH, oh = j - b * OH, ih = oh * sh - ph + ki * dh, ow0;                                        \
            __global const act_t *dyr = dy + dy_off + ((b * O + o) * OH + oh) * OW;                                   \
            __global const act_t *xr = x + x_off + ((b * C + c) * H + ih) * W;                                        \
            if (ih < 0 || ih >= H) continue;                                                                          \
            for (ow0 = 0; ow0 + 8 <= OW; ow0 += 8) {                                                                  \
                float8 dv = NNCL_LD8(dyr + ow0);                                                                      \
                int s0 = ow0 * sw - pw;                                                                               \
                if (s0 >= 0 && s0 + (KW - 1) * dw + 7 * sw < W)                                                       \
                    for (t = 0; t < KW; t++) s[t] += dv * nncl_dw_in8(xr + s0 + t * dw, sw);                          \
                else                                                                                                  \
                    for (t = 0; t < KW; t++) s[t] += dv * nncl_dw_ld8(xr, s0 + t * dw, sw, W);                        \
            }                                                                                                         \
            if (ow0 < OW) { /* the row's last outputs: lanes past OW read nothing */                                  \
                int8 live = (int8)(0, 1, 2, 3, 4, 5, 6, 7) < (int8)(OW - ow0);                                        \
                float8 dv = nncl_dw_ld8(dyr, ow0, 1, OW);                                                             \
                for (t = 0; t < KW; t++)                                                                              \
                    s[t] += select((float8)0.0f, dv * nncl_dw_ld8(xr, ow0 * sw - pw + t * dw, sw, W), live);          \
            }                                                                                                         \
        }                                                                                                             \
        for (t = 0; t < KW; t++) part[t * ls + lid] = nncl_sum8(s[t]);                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                 \
        for (n = ls; n > 1;) {                                                                                        \
            int h = (n + 1) >> 1;                                                                                     \
            if (lid < n - h)                                                                                          \
                for (t = 0; t < KW; t++) part[t * ls + lid] += part[t * ls + lid + h];                                \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                             \
            n = h;                                                                                                    \
        }                                                                                                             \
        for (t = 0; lid == 0 && t < KW; t++) {                                                                        \
            int i = dw_off + (o * kh + ki) * KW + t;                                                                  \
            dwt[i] = (acc ? dwt[i] : 0.0f) + part[t * ls];                                                            \
        }                                                                                                             \
    }
NNCL_DW_WEIGHT_K(3)
NNCL_DW_WEIGHT_K(5)
