/* conv_ex.cl - convolution of any geometry, no GEMM (src/ops/op_conv_ex.c):
 * groups, dilation, kernel, stride and padding per axis, NCHW (1-D as
 * H = 1). x [B,C,H,W], w [O,C/G,kh,kw], y [B,O,OH,OW]; group g takes
 * channels g*C/G.. and outputs g*O/G... Three kernels, each the adjoint of
 * the others' index map, so that a transposed convolution is the same three
 * with the roles of x and y exchanged: y (+)= conv(x, w); dx (+)= the
 * adjoint in x; dw (+)= the adjoint in w (fp32, a parameter gradient).
 * Depthwise layers (C/G = 1) read kh*kw inputs per output: memory-bound,
 * no GEMM to gain. Every kernel takes the same geometry arguments (C, H,
 * W, O, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, G). */

/* One work-item per element of y: b, o, oh, ow from its index. */
__kernel void nncl_conv_ex_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                               __global act_t *y, int y_off, int C, int H, int W, int O, int OH, int OW, int kh, int kw,
                               int sh, int sw, int ph, int pw, int dh, int dw, int G, int n, int acc) {
    int i = get_global_id(0), ow, oh, o, b, Cg, g, cg, ki, kj;
    float s = 0.0f;
    if (i >= n) return;
    ow = i % OW;
    oh = (i / OW) % OH;
    o = (i / (OW * OH)) % O;
    b = i / (OW * OH * O);
    Cg = C / G;
    g = o / (O / G);
    for (cg = 0; cg < Cg; cg++) {
        int xb = x_off + ((b * C + g * Cg + cg) * H) * W, wb = w_off + ((o * Cg + cg) * kh) * kw;
        for (ki = 0; ki < kh; ki++) {
            int ih = oh * sh - ph + ki * dh;
            if (ih < 0 || ih >= H) continue;
            for (kj = 0; kj < kw; kj++) {
                int iw = ow * sw - pw + kj * dw;
                if (iw < 0 || iw >= W) continue;
                s += NNCL_LDG(x, xb + ih * W + iw) * NNCL_LDG(w, wb + ki * kw + kj);
            }
        }
    }
    if (acc) s += NNCL_LD(y, y_off + i);
    NNCL_ST(s, y, y_off + i);
}

/* One work-item per element of dx: the taps (ki, kj) whose output row and
 * column are whole (a multiple of the stride away) and inside y. */
__kernel void nncl_conv_ex_backward_f32_input(__global const act_t *dy, int dy_off, __global const act_t *w, int w_off,
                                              __global act_t *dx, int dx_off, int C, int H, int W, int O, int OH,
                                              int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                              int G, int n, int acc) {
    int i = get_global_id(0), iw, ih, c, b, Cg, Og, g, og, ki, kj;
    float s = 0.0f;
    if (i >= n) return;
    iw = i % W;
    ih = (i / W) % H;
    c = (i / (W * H)) % C;
    b = i / (W * H * C);
    Cg = C / G;
    Og = O / G;
    g = c / Cg;
    /* Without the integer division and remainder per tap, which cost CPU
     * devices most of the kernel's time: at stride 1 every tap, and with
     * dilation 1 every stride-th tap from the first whose distance is a
     * multiple of the stride (ki0, kj0), one division each. */
    int ki0 = sh > 1 && dh == 1 ? (ih + ph) % sh : 0, kj0 = sw > 1 && dw == 1 ? (iw + pw) % sw : 0;
    int kis = sh > 1 && dh == 1 ? sh : 1, kjs = sw > 1 && dw == 1 ? sw : 1;
    for (ki = ki0; ki < kh; ki += kis) {
        int th = ih + ph - ki * dh, oh;
        if (th < 0) break; /* th falls with ki */
        if (sh > 1) {
            if (kis == 1 && th % sh) continue;
            oh = th / sh;
        } else {
            oh = th;
        }
        if (oh >= OH) continue;
        for (kj = kj0; kj < kw; kj += kjs) {
            int tw = iw + pw - kj * dw, ow;
            if (tw < 0) break;
            if (sw > 1) {
                if (kjs == 1 && tw % sw) continue;
                ow = tw / sw;
            } else {
                ow = tw;
            }
            if (ow >= OW) continue;
            for (og = 0; og < Og; og++) {
                int o = g * Og + og;
                s += NNCL_LDG(dy, dy_off + ((b * O + o) * OH + oh) * OW + ow) *
                     NNCL_LDG(w, w_off + ((o * Cg + c - g * Cg) * kh + ki) * kw + kj);
            }
        }
    }
    if (acc) s += NNCL_LD(dx, dx_off + i);
    NNCL_ST(s, dx, dx_off + i);
}

/* One work-group per element of dw [O,C/G,kh,kw]: its lanes share the
 * B*OH*OW products, summed in a tree. */
__kernel void nncl_conv_ex_backward_f32_weight(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                               __global float *dwt, int dw_off, int C, int H, int W, int O, int OH,
                                               int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                               int G, int B, int acc, __local float *part) {
    int e = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    int Cg = C / G, kj = e % kw, ki = (e / kw) % kh, cg = (e / (kw * kh)) % Cg, o = e / (kw * kh * Cg);
    int c = (o / (O / G)) * Cg + cg, j;
    float s = 0.0f;
    /* lanes over rows (b, oh) of y, each along its row: one division per
     * row rather than two per product */
    for (j = lid; j < B * OH; j += ls) {
        int b = j / OH, oh = j - b * OH, ih = oh * sh - ph + ki * dh, ow;
        __global const act_t *dyr = dy + dy_off + ((b * O + o) * OH + oh) * OW;
        int xr = x_off + ((b * C + c) * H + ih) * W;
        if (ih < 0 || ih >= H) continue;
        for (ow = 0; ow < OW; ow++) {
            int iw = ow * sw - pw + kj * dw;
            if (iw >= 0 && iw < W) s += NNCL_LD(dyr, ow) * NNCL_LDG(x, xr + iw);
        }
    }
    s = nncl_group_sum(part, s);
    if (lid == 0) dwt[dw_off + e] = (acc ? dwt[dw_off + e] : 0.0f) + s;
}
