/* pool.cl - pooling over NCHW planes (src/op_pool.c): max pooling with the
 * argmax (index h*W + w within the plane, as a float) kept for backward,
 * average pooling with the padding counted in the divisor, and the backward
 * of global average pooling. Backward kernels gather per input element over
 * the windows that cover it: no atomics, and acc adds instead of writing. */

/* The output rows (or columns) whose window [o*st - pad, o*st - pad + k)
 * covers input position h: lo..hi inclusive (empty when lo > hi). */
void nncl_pool_range(int h, int k, int st, int pad, int OH, int *lo, int *hi) {
    int t = h + pad - k + 1;
    *lo = t <= 0 ? 0 : (t + st - 1) / st;
    *hi = (h + pad) / st;
    if (*hi > OH - 1) *hi = OH - 1;
}

/* a / st for a >= 0: a shift for the usual stride 2 (integer division is
 * a loop of scalar divisions on CPU drivers, which run work-items as SIMD
 * lanes). */
int nncl_pool_div(int a, int st) { return st == 2 ? a >> 1 : a / st; }

/* n = planes * OH * OW outputs, NDRange (OW, OH, planes): coordinates
 * without divisions. Padding never wins (-inf); the first maximum in scan
 * order wins ties and a NaN propagates, as in PyTorch. */
__kernel void nncl_maxpool2d_f32(__global const float *x, int x_off, __global float *y, int y_off,
                                 __global float *idx, int idx_off, int n, int H, int W, int OH, int OW, int k, int st,
                                 int pad) {
    int ow = get_global_id(0), oh = get_global_id(1), plane = get_global_id(2), i;
    int h0, w0, ki, kj, best_i = -1;
    float best = -INFINITY;
    __global const float *xp;
    i = (plane * OH + oh) * OW + ow;
    if (ow >= OW || oh >= OH || i >= n) return;
    h0 = oh * st - pad;
    w0 = ow * st - pad;
    xp = x + x_off + plane * H * W;
    for (ki = 0; ki < k; ki++) {
        int h = h0 + ki;
        if (h < 0 || h >= H) continue;
        for (kj = 0; kj < k; kj++) {
            int w = w0 + kj;
            float v;
            if (w < 0 || w >= W) continue;
            v = xp[h * W + w];
            if (v > best || isnan(v) || best_i < 0) {
                best = v;
                best_i = h * W + w;
            }
        }
    }
    y[y_off + i] = best;
    idx[idx_off + i] = (float)best_i;
}

/* n = planes * H * W inputs, NDRange (W, H, planes): dx gets dy of every
 * window whose argmax it is; windows that neither overlap nor pad (k ==
 * st, pad 0, the usual 2x2) hold each input at most once. */
__kernel void nncl_maxpool2d_backward_f32(__global const float *dy, int dy_off, __global const float *idx, int idx_off,
                                          __global float *dx, int dx_off, int n, int H, int W, int OH, int OW, int k,
                                          int st, int pad, int acc) {
    int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2), i;
    int lo_h, hi_h, lo_w, hi_w, oh, ow;
    float me, sum = 0.0f;
    i = (plane * H + h) * W + w;
    if (w >= W || h >= H || i >= n) return;
    me = (float)(h * W + w);
    if (k == st && pad == 0) {
        oh = nncl_pool_div(h, st);
        ow = nncl_pool_div(w, st);
        if (oh < OH && ow < OW) {
            int o = (plane * OH + oh) * OW + ow;
            if (idx[idx_off + o] == me) sum = dy[dy_off + o];
        }
        dx[dx_off + i] = acc ? dx[dx_off + i] + sum : sum;
        return;
    }
    nncl_pool_range(h, k, st, pad, OH, &lo_h, &hi_h);
    nncl_pool_range(w, k, st, pad, OW, &lo_w, &hi_w);
    for (oh = lo_h; oh <= hi_h; oh++)
        for (ow = lo_w; ow <= hi_w; ow++) {
            int o = (plane * OH + oh) * OW + ow;
            if (idx[idx_off + o] == me) sum += dy[dy_off + o];
        }
    dx[dx_off + i] = acc ? dx[dx_off + i] + sum : sum;
}

/* Mean over the k*k window, padding included as zeros. */
__kernel void nncl_avgpool2d_f32(__global const float *x, int x_off, __global float *y, int y_off, int n, int H,
                                 int W, int OH, int OW, int k, int st, int pad) {
    int i = get_global_id(0);
    int ow, oh, plane, h0, w0, ki, kj;
    float sum = 0.0f;
    __global const float *xp;
    if (i >= n) return;
    ow = i % OW;
    oh = (i / OW) % OH;
    plane = i / (OW * OH);
    h0 = oh * st - pad;
    w0 = ow * st - pad;
    xp = x + x_off + plane * H * W;
    for (ki = 0; ki < k; ki++) {
        int h = h0 + ki;
        if (h < 0 || h >= H) continue;
        for (kj = 0; kj < k; kj++) {
            int w = w0 + kj;
            if (w >= 0 && w < W) sum += xp[h * W + w];
        }
    }
    y[y_off + i] = sum / (float)(k * k);
}

__kernel void nncl_avgpool2d_backward_f32(__global const float *dy, int dy_off, __global float *dx, int dx_off, int n,
                                          int H, int W, int OH, int OW, int k, int st, int pad, int acc) {
    int i = get_global_id(0);
    int w, h, plane, lo_h, hi_h, lo_w, hi_w, oh, ow;
    float sum = 0.0f;
    if (i >= n) return;
    w = i % W;
    h = (i / W) % H;
    plane = i / (W * H);
    nncl_pool_range(h, k, st, pad, OH, &lo_h, &hi_h);
    nncl_pool_range(w, k, st, pad, OW, &lo_w, &hi_w);
    for (oh = lo_h; oh <= hi_h; oh++)
        for (ow = lo_w; ow <= hi_w; ow++) sum += dy[dy_off + (plane * OH + oh) * OW + ow];
    sum /= (float)(k * k);
    dx[dx_off + i] = acc ? dx[dx_off + i] + sum : sum;
}

/* dx[p, j] (+)= dy[p] * scale for n = planes * hw inputs (scale 1/hw). */
__kernel void nncl_global_avgpool_backward_f32(__global const float *dy, int dy_off, __global float *dx, int dx_off,
                                               int n, int hw, float scale, int acc) {
    int i = get_global_id(0);
    float g;
    if (i >= n) return;
    g = dy[dy_off + i / hw] * scale;
    dx[dx_off + i] = acc ? dx[dx_off + i] + g : g;
}
