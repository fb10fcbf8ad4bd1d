/* conv.cl - the data movement around convolution GEMMs (src/op_conv.c):
 * im2col of a chunk of S samples into a [C*k*k, S*OH*OW] column matrix,
 * col2im (a gather per input element: no atomics, so the result is the
 * same on every device), and the reorder between NCHW [S, O, OH*OW] and the
 * GEMM's [O, S*OH*OW]. One work-item per element; sizes need not divide. */

/* col[(c*k + ki)*k + kj, s*OH*OW + oh*OW + ow] = x[s, c, oh*st - pad + ki,
 * ow*st - pad + kj], zero outside the input. */
__kernel void nncl_im2col_f32(__global const float *x, int x_off, __global float *col, int col_off, int C, int H,
                              int W, int k, int st, int pad, int OH, int OW, int S) {
    int i = get_global_id(0);
    int ohw = OH * OW, ncols = S * ohw, kk = k * k;
    int r, j, s, p, c, ki, kj, ih, iw;
    float v = 0.0f;
    if (i >= C * kk * ncols) return;
    r = i / ncols;
    j = i - r * ncols;
    s = j / ohw;
    p = j - s * ohw;
    c = r / kk;
    ki = (r - c * kk) / k;
    kj = r - c * kk - ki * k;
    ih = (p / OW) * st - pad + ki;
    iw = (p % OW) * st - pad + kj;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[x_off + ((s * C + c) * H + ih) * W + iw];
    col[col_off + i] = v;
}

/* dx[s, c, h, w] (+)= sum of col[(c*k + ki)*k + kj, s*OH*OW + oh*OW + ow]
 * over the windows (oh, ow) that cover (h, w). */
__kernel void nncl_col2im_f32(__global const float *col, int col_off, __global float *dx, int dx_off, int C, int H,
                              int W, int k, int st, int pad, int OH, int OW, int S, int acc) {
    int i = get_global_id(0);
    int ohw = OH * OW, ncols = S * ohw;
    int w, h, c, s, ki, kj;
    float sum = 0.0f;
    if (i >= S * C * H * W) return;
    w = i % W;
    h = (i / W) % H;
    c = (i / (W * H)) % C;
    s = i / (W * H * C);
    for (ki = 0; ki < k; ki++) {
        int th = h + pad - ki, oh;
        if (th < 0 || th % st) continue;
        oh = th / st;
        if (oh >= OH) continue;
        for (kj = 0; kj < k; kj++) {
            int tw = w + pad - kj, ow;
            if (tw < 0 || tw % st) continue;
            ow = tw / st;
            if (ow >= OW) continue;
            sum += col[col_off + ((c * k + ki) * k + kj) * ncols + s * ohw + oh * OW + ow];
        }
    }
    dx[dx_off + i] = acc ? dx[dx_off + i] + sum : sum;
}

/* Between NCHW a[s, o, p] (S samples) and the GEMM layout g[o, s*ohw + p]:
 * to_nchw 1 copies g into a, 0 copies a into g. */
__kernel void nncl_conv_reorder_f32(__global float *a, int a_off, __global float *g, int g_off, int O, int ohw, int S,
                                    int to_nchw) {
    int i = get_global_id(0);
    int per = O * ohw, s, o, p, j;
    if (i >= S * per) return;
    s = i / per;
    o = (i - s * per) / ohw;
    p = i - s * per - o * ohw;
    j = (o * S + s) * ohw + p;
    if (to_nchw) a[a_off + i] = g[g_off + j];
    else g[g_off + j] = a[a_off + i];
}
