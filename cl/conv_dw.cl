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

/* y = act(conv(x) + b): one work-item per 8 outputs of a row (b, o, oh). */
__kernel void nncl_conv_dw_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                               __global act_t *y, int y_off, __global const act_t *bias, int b_off, int has_bias,
                               int C, int H, int W, int O, int OH, int OW, int kh, int kw, int sh, int sw, int ph,
                               int pw, int dh, int dw, int G, int n, int act) {
    int i = get_global_id(0), nseg = (OW + 7) >> 3, seg, oh, o, b, ki, kj, ow0;
    __global const act_t *xc, *wo;
    float8 s = (float8)0.0f;
    if (i >= n) return;
    seg = i % nseg;
    oh = (i / nseg) % OH;
    o = (i / (nseg * OH)) % O;
    b = i / (nseg * OH * O);
    ow0 = seg << 3;
    xc = x + x_off + (b * C + o / (O / C)) * H * W;
    wo = w + w_off + o * kh * kw;
    for (ki = 0; ki < kh; ki++) {
        int ih = oh * sh - ph + ki * dh;
        if (ih < 0 || ih >= H) continue;
        for (kj = 0; kj < kw; kj++)
            s += NNCL_LDG(wo, ki * kw + kj) * nncl_dw_ld8(xc + ih * W, ow0 * sw - pw + kj * dw, sw, W);
    }
    if (has_bias) s += NNCL_LDG(bias, b_off + o);
    nncl_dw_st8(nncl_act8(s, act), y + y_off + ((b * O + o) * OH + oh) * OW + ow0, OW - ow0, 0);
}

/* dx (+)= conv^T(dy): one work-item per 8 inputs of a row (b, c, ih) at
 * stride 1, 16 at stride 2. Output (oh, ow) takes input (oh sh - ph + ki
 * dh, ow sw - pw + kj dw); at stride 2 along W, the inputs of a segment a
 * tap reaches are every other one, from consecutive outputs: 8 of dy,
 * spread over 16 lanes. */
__kernel void nncl_conv_dw_backward_f32_input(__global const act_t *dy, int dy_off, __global const act_t *w,
                                              int w_off, __global act_t *dx, int dx_off, int C, int H, int W, int O,
                                              int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                              int dw, int G, int n, int acc) {
    int i = get_global_id(0), L = sw == 2 ? 16 : 8, nseg = (W + L - 1) / L, seg, ih, c, b, M = O / C, m, ki, kj, iw0;
    float8 s0 = (float8)0.0f, s1 = (float8)0.0f;
    __global act_t *row;
    if (i >= n) return;
    seg = i % nseg;
    ih = (i / nseg) % H;
    c = (i / (nseg * H)) % C;
    b = i / (nseg * H * C);
    iw0 = seg * L;
    for (m = 0; m < M; m++) {
        int o = c * M + m;
        __global const act_t *dyc = dy + dy_off + (b * O + o) * OH * OW, *wo = w + w_off + o * kh * kw;
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
    row = dx + dx_off + ((b * C + c) * H + ih) * W + iw0;
    nncl_dw_st8(s0, row, W - iw0, acc);
    if (L == 16 && W - iw0 > 8) nncl_dw_st8(s1, row + 8, W - iw0 - 8, acc);
}

/* dw (+)= the adjoint in w of conv(x) against dy: one work-group per tap
 * (o, ki, kj), its lanes over the rows (b, oh) of y, each row 8 outputs at
 * a time; the lanes' sums added in a tree (nncl_group_sum): a fixed order,
 * no atomics. */
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
