/* pool.cl - pooling over NCHW planes (src/ops/op_pool.c): max pooling with the
 * argmax (index h*W + w within the plane, as a float) kept for backward,
 * average pooling with the padding counted in the divisor, and global
 * average pooling (streaming, at the end). Backward kernels gather per input element over
 * the windows that cover it: no atomics, and acc adds instead of writing.
 *
 * The usual 2x2 window at stride 2 without padding has kernels of its own
 * (_2x2) on NDRange (G * plane, ceil(planes / G)): dim 0 one element (a
 * window forward, an input backward) of a group of G whole planes, G *
 * plane <= 2^20 (src/ops/op_pool.c), dim 1 the group, and no loop inside. That
 * is what CPU drivers run as full SIMD lanes (one long regular dimension;
 * a loop inside the kernel, or rows of 7 or 14 pixels along dim 0, leave
 * them running one work-item at a time), with coordinates from float
 * quotients (nncl_quot) rather than integer divisions. On CPU devices
 * the _2x2r kernels take their place: one work-item per output row with
 * explicit vectors, no lanes (below).
 * The other kernels run on NDRange (cols, rows, planes).
 * Max and average pooling take activations in the storage type (act_t,
 * cl/common.cl). In half storage max pooling keeps no argmax: an fp32
 * index per output would take twice the output's memory, so the backward
 * finds each window's argmax again in x (passed where the fp32 build takes
 * the index, by the same rules, so the same element), and the forward
 * writes none (its idx is NULL). */
#if defined(NNCL_STORE) && NNCL_STORE
#define NNCL_POOL_HALF 1
#define idx_t act_t
#else
#define NNCL_POOL_HALF 0
#define idx_t float
#endif

/* The _2x2 kernels' comparisons: v takes a window's maximum from best
 * when larger, or NaN (a NaN then stays, as in PyTorch). Half storage
 * compares the 16-bit patterns as integers (sign and magnitude made an
 * ordered key; the same order as the values, NaN apart) and copies the
 * winner's bits: two conversions side by side were merged by LLVM's SLP
 * pass into a 2-lane vector, after which PoCL's loop vectorizer runs those
 * kernels one work-item at a time. */
#if NNCL_POOL_HALF
#define pval_t uint
#define NNCL_POOL_LD(p, i) nncl_ld16(p, i)
#define NNCL_POOL_ST(v, p, i) ((p)[i] = (ushort)(v))
#if NNCL_STORE == 1
#define NNCL_POOL_NAN 0x7c00u /* magnitudes above: NaN */
#else
#define NNCL_POOL_NAN 0x7f80u
#endif
int nncl_pool_key(uint h) { return (h & 0x8000u) ? -(int)(h & 0x7fffu) : (int)(h & 0x7fffu); }
int nncl_pool_wins(uint v, uint best) {
    return ((v & 0x7fffu) > NNCL_POOL_NAN) | (((best & 0x7fffu) <= NNCL_POOL_NAN) & (nncl_pool_key(v) > nncl_pool_key(best)));
}
/* Where x and W are even, a 2x2 window is two 32-bit words, its rows a
 * and b: the maximum's bits into *best and its place (0..3 in scan order)
 * by the same rules. */
#ifdef __ENDIAN_LITTLE__
#define NNCL_POOL_E0(w) ((w) & 0xffffu) /* a word's first element */
#define NNCL_POOL_E1(w) ((w) >> 16)
#define NNCL_POOL_WORD(e0, e1) ((e0) | (e1) << 16)
#else
#define NNCL_POOL_E0(w) ((w) >> 16)
#define NNCL_POOL_E1(w) ((w) & 0xffffu)
#define NNCL_POOL_WORD(e0, e1) ((e0) << 16 | (e1))
#endif
#ifdef __clang__
__attribute__((always_inline))
#endif
int nncl_pool_words_max(uint a, uint b, uint *best) {
    uint m = NNCL_POOL_E0(a), v = NNCL_POOL_E1(a);
    int win = nncl_pool_wins(v, m), arg = win ? 1 : 0;
    m = win ? v : m;
    v = NNCL_POOL_E0(b);
    win = nncl_pool_wins(v, m);
    arg = win ? 2 : arg;
    m = win ? v : m;
    v = NNCL_POOL_E1(b);
    win = nncl_pool_wins(v, m);
    *best = win ? v : m;
    return win ? 3 : arg;
}
#else
#define pval_t float
#define NNCL_POOL_LD(p, i) ((p)[i])
#define NNCL_POOL_ST(v, p, i) ((p)[i] = (v))
int nncl_pool_wins(float v, float best) { return v > best || isnan(v); }
#endif

/* The plane (of the whole tensor), row and column of this work-item's
 * element in planes of rows x cols on the _2x2 kernels' NDRange; 0 past the
 * last plane. */
int nncl_pool_at(int G, int planes, int rows, int cols, int *plane, int *r, int *c) {
    int j = get_global_id(0), size = rows * cols, pl = nncl_quot(j, 1.0f / (float)size), at = j - pl * size;
    *r = nncl_quot(at, 1.0f / (float)cols);
    *c = at - *r * cols;
    *plane = (int)get_global_id(1) * G + pl;
    return pl < G && *plane < planes;
}

/* The index of this work-item's output in the whole tensor, (plane * OH +
 * oh) * OW + ow, as the NDRange gives it: written so that CPU drivers see
 * neighbouring work-items touch neighbouring outputs (one vector load or
 * store rather than a gather or scatter). */
int nncl_pool_out(int G, int size) { return (int)get_global_id(1) * G * size + (int)get_global_id(0); }

/* The output rows (or columns) whose window [o*st - pad, o*st - pad + k)
 * covers input position h: lo..hi inclusive (empty when lo > hi). */
void nncl_pool_range(int h, int k, int st, int pad, int OH, int *lo, int *hi) {
    int t = h + pad - k + 1;
    *lo = t <= 0 ? 0 : (t + st - 1) / st;
    *hi = (h + pad) / st;
    if (*hi > OH - 1) *hi = OH - 1;
}

/* Output (oh, ow) of its plane: the maximum of its window with the first
 * argmax in scan order (padding never wins; a NaN propagates, as in
 * PyTorch), and the window's sum (padding as zeros). */
void nncl_pool_window(__global const act_t *xp, int oh, int ow, int H, int W, int k, int st, int pad, float *best,
                      int *best_i, float *sum) {
    int h0 = oh * st - pad, w0 = ow * st - pad, ki, kj;
    /* the window's taps inside the plane only: a kernel far larger than
     * the plane costs what its overlap with the plane does */
    int ka = max(0, -h0), kb = min(k, H - h0), ja = max(0, -w0), jb = min(k, W - w0);
    *best = -INFINITY;
    *best_i = -1;
    *sum = 0.0f;
    for (ki = ka; ki < kb; ki++)
        for (kj = ja; kj < jb; kj++) {
            int h = h0 + ki, w = w0 + kj;
            float v = NNCL_LD(xp, h * W + w);
            *sum += v;
            if (v > *best || isnan(v) || *best_i < 0) {
                *best = v;
                *best_i = h * W + w;
            }
        }
}

__kernel void nncl_maxpool2d_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off,
                                 __global float *idx, int idx_off, int H, int W, int OH, int OW, int k, int st,
                                 int pad) {
    int ow = get_global_id(0), oh = get_global_id(1), plane = get_global_id(2), best_i, i;
    float best, sum;
    if (ow >= OW || oh >= OH) return;
    nncl_pool_window(x + x_off + plane * H * W, oh, ow, H, W, k, st, pad, &best, &best_i, &sum);
    i = (plane * OH + oh) * OW + ow;
    NNCL_ST(best, y, y_off + i);
    if (!NNCL_POOL_HALF) idx[idx_off + i] = (float)best_i;
}

/* The 2x2 window in the order and by the rules of nncl_pool_window. */
__kernel void nncl_maxpool2d_f32_2x2(__global const act_t *x, int x_off, __global act_t *y, int y_off,
                                     __global float *idx, int idx_off, int planes, int H, int W, int OH, int OW,
                                     int G) {
    int plane, oh, ow, at, best_i, i, xo, w;
    pval_t best, v;
    if (!nncl_pool_at(G, planes, OH, OW, &plane, &oh, &ow)) return;
    at = 2 * oh * W + 2 * ow;
    xo = x_off + plane * H * W + at; /* x itself the base: CPU drivers vectorise nncl_ld16 off a shared pointer */
    best = NNCL_POOL_LD(x, xo);
    best_i = at;
    v = NNCL_POOL_LD(x, xo + 1);
    w = nncl_pool_wins(v, best);
    best_i = w ? at + 1 : best_i;
    best = w ? v : best;
    v = NNCL_POOL_LD(x, xo + W);
    w = nncl_pool_wins(v, best);
    best_i = w ? at + W : best_i;
    best = w ? v : best;
    v = NNCL_POOL_LD(x, xo + W + 1);
    w = nncl_pool_wins(v, best);
    best_i = w ? at + W + 1 : best_i;
    best = w ? v : best;
    i = nncl_pool_out(G, OH * OW); /* (plane * OH + oh) * OW + ow */
    NNCL_POOL_ST(best, y, y_off + i);
    if (!NNCL_POOL_HALF) idx[idx_off + i] = (float)best_i;
}

/* The 2x2 window by rows of outputs, for CPU devices, with OW >= 4
 * (src/ops/op_pool.c): one work-item per output row of a plane, NDRange
 * (planes * OH), its two input rows read as vectors of 2V values and V
 * outputs kept per step from their even and odd lanes, by the rules and in
 * the order of the kernel above (V 8, or 4 where OW < 8; a row's last step
 * starts at OW - V, overlapping the one before with the same values).
 * Explicit vectors in each work-item rather than work-items as lanes: the
 * lanes' loads two floats apart would be gathers. */
#define NNCL_POOL_ROW(V, V2, LANES)                                                                                   \
    for (s = 0; s < OW; s += V) {                                                                                      \
        const NNCL_CAT(float, V) lane = (NNCL_CAT(float, V))LANES;                                                    \
        int o = s + V <= OW ? s : OW - V;                                                                              \
        NNCL_CAT(float, V2) r0 = NNCL_CAT(vload, V2)(0, x0 + 2 * o), r1 = NNCL_CAT(vload, V2)(0, x0 + W + 2 * o);     \
        NNCL_CAT(float, V) best = r0.even, v, at = (float)(2 * oh * W + 2 * o) + 2.0f * lane, arg = at;              \
        NNCL_CAT(int, V) w;                                                                                            \
        v = r0.odd;                                                                                                    \
        w = isgreater(v, best) | isnan(v);                                                                             \
        arg = select(arg, at + 1.0f, w);                                                                               \
        best = select(best, v, w);                                                                                     \
        v = r1.even;                                                                                                   \
        w = isgreater(v, best) | isnan(v);                                                                             \
        arg = select(arg, at + (float)W, w);                                                                           \
        best = select(best, v, w);                                                                                     \
        v = r1.odd;                                                                                                    \
        w = isgreater(v, best) | isnan(v);                                                                             \
        arg = select(arg, at + (float)(W + 1), w);                                                                     \
        NNCL_CAT(vstore, V)(select(best, v, w), 0, yo + o);                                                            \
        NNCL_CAT(vstore, V)(arg, 0, io + o);                                                                           \
    }
#if NNCL_POOL_HALF
/* Half storage: the same on the 16-bit patterns as unsigned vectors, by
 * nncl_pool_wins's rules (NNCL_POOL_WINV; KEYV the order key 0x8000 +-
 * magnitude, -0 equal to +0), the maximum's bits stored and no argmax: on
 * PoCL for AVX2 the window kernels (_2x2w) run far slower than these. */
#define NNCL_POOL_KEYV(h) (0x8000u + select((h)&0x7fffu, 0u - ((h)&0x7fffu), ((h)&0x8000u) != 0u))
#define NNCL_POOL_WINV(v, b)                                                                                           \
    ((((v)&0x7fffu) > NNCL_POOL_NAN) | ((((b)&0x7fffu) <= NNCL_POOL_NAN) & (NNCL_POOL_KEYV(v) > NNCL_POOL_KEYV(b))))
/* the window maxima m and their places arg (0..3) of row pair r0, r1 */
#define NNCL_POOL_ROW_ARG(V, r0, r1, m, arg)                                                                          \
    do {                                                                                                               \
        NNCL_CAT(uint, V) v = r0.odd;                                                                                  \
        NNCL_CAT(int, V) w = NNCL_POOL_WINV(v, m);                                                                     \
        arg = select(arg, (NNCL_CAT(int, V))1, w);                                                                     \
        m = select(m, v, w);                                                                                           \
        v = r1.even;                                                                                                   \
        w = NNCL_POOL_WINV(v, m);                                                                                      \
        arg = select(arg, (NNCL_CAT(int, V))2, w);                                                                     \
        m = select(m, v, w);                                                                                           \
        v = r1.odd;                                                                                                    \
        w = NNCL_POOL_WINV(v, m);                                                                                      \
        arg = select(arg, (NNCL_CAT(int, V))3, w);                                                                     \
        m = select(m, v, w);                                                                                           \
    } while (0)
#define NNCL_POOL_ROWH(V, V2)                                                                                          \
    for (s = 0; s < OW; s += V) {                                                                                      \
        int o = s + V <= OW ? s : OW - V;                                                                              \
        NNCL_CAT(uint, V2) r0 = NNCL_CAT(convert_uint, V2)(NNCL_CAT(vload, V2)(0, x0 + 2 * o));                       \
        NNCL_CAT(uint, V2) r1 = NNCL_CAT(convert_uint, V2)(NNCL_CAT(vload, V2)(0, x0 + W + 2 * o));                   \
        NNCL_CAT(uint, V) m = r0.even;                                                                                 \
        NNCL_CAT(int, V) arg = (NNCL_CAT(int, V))0;                                                                    \
        NNCL_POOL_ROW_ARG(V, r0, r1, m, arg);                                                                          \
        NNCL_CAT(vstore, V)(NNCL_CAT(convert_ushort, V)(m), 0, yo + o);                                               \
    }
#endif
__kernel void nncl_maxpool2d_f32_2x2r(__global const act_t *x, int x_off, __global act_t *y, int y_off,
                                      __global float *idx, int idx_off, int planes, int H, int W, int OH, int OW) {
    int row = get_global_id(0), plane = row / OH, oh = row - plane * OH, s;
    if (plane >= planes) return;
#if !NNCL_POOL_HALF
    __global const float *x0 = x + x_off + plane * H * W + 2 * oh * W;
    __global float *yo = y + y_off + row * OW, *io = idx + idx_off + row * OW;
    if (OW >= 8) NNCL_POOL_ROW(8, 16, (0, 1, 2, 3, 4, 5, 6, 7))
    else NNCL_POOL_ROW(4, 8, (0, 1, 2, 3))
#else
    __global const act_t *x0 = x + x_off + plane * H * W + 2 * oh * W;
    __global act_t *yo = y + y_off + row * OW;
    (void)idx;
    (void)idx_off;
    if (OW >= 8) NNCL_POOL_ROWH(8, 16)
    else NNCL_POOL_ROWH(4, 8)
#endif
}
#undef NNCL_POOL_ROW
#undef NNCL_POOL_ROWH

/* The same in half storage where x is at an even element and W even: the
 * window read as two 32-bit words (nncl_pool_words_max) rather than four
 * 16-bit loads. In fp32 empty (the host takes the kernel above). */
__kernel void nncl_maxpool2d_f32_2x2w(__global const act_t *x, int x_off, __global act_t *y, int y_off,
                                      __global float *idx, int idx_off, int planes, int H, int W, int OH, int OW,
                                      int G) {
#if NNCL_POOL_HALF
    __global const uint *xw = (__global const uint *)x;
    int plane, oh, ow, at;
    uint best;
    if (!nncl_pool_at(G, planes, OH, OW, &plane, &oh, &ow)) return;
    at = (x_off >> 1) + plane * ((H * W) >> 1) + oh * W + ow;
    nncl_pool_words_max(xw[at], xw[at + (W >> 1)], &best);
    NNCL_POOL_ST(best, y, y_off + nncl_pool_out(G, OH * OW));
#endif
}

/* Mean over the k*k window, padding included as zeros. */
__kernel void nncl_avgpool2d_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int H, int W,
                                 int OH, int OW, int k, int st, int pad) {
    int ow = get_global_id(0), oh = get_global_id(1), plane = get_global_id(2), best_i;
    float best, sum;
    if (ow >= OW || oh >= OH) return;
    nncl_pool_window(x + x_off + plane * H * W, oh, ow, H, W, k, st, pad, &best, &best_i, &sum);
    NNCL_ST(sum / (float)(k * k), y, y_off + (plane * OH + oh) * OW + ow);
}

/* Whether input (h, w) is the argmax of window (oh, ow): the index kept
 * (ip, the plane's), or in half storage the window searched again in x
 * (ip, the plane of x). */
int nncl_pool_is_max(__global const idx_t *ip, int oh, int ow, int h, int w, int H, int W, int OW, int k, int st,
                     int pad) {
#if NNCL_POOL_HALF
    float best, sum;
    int best_i;
    nncl_pool_window(ip, oh, ow, H, W, k, st, pad, &best, &best_i, &sum);
    return best_i == h * W + w;
#else
    (void)H; (void)k; (void)st; (void)pad;
    return ip[oh * OW + ow] == (float)(h * W + w);
#endif
}

/* dx gets dy of every window whose argmax it is (with avg, dy / k^2 of
 * every window covering it). idx: the argmax kept, or in half storage x. */
void nncl_pool_backward(__global const act_t *dy, __global const idx_t *idx, int is_max, __global act_t *dx, int H,
                        int W, int OH, int OW, int k, int st, int pad, int acc) {
    int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2), lo_h, hi_h, lo_w, hi_w, oh, ow;
    float sum = 0.0f;
    __global const act_t *dp;
    __global const idx_t *ip;
    if (w >= W || h >= H) return;
    dp = dy + plane * OH * OW;
    ip = idx + plane * (NNCL_POOL_HALF ? H * W : OH * OW); /* read only with is_max */
    nncl_pool_range(h, k, st, pad, OH, &lo_h, &hi_h);
    nncl_pool_range(w, k, st, pad, OW, &lo_w, &hi_w);
    for (oh = lo_h; oh <= hi_h; oh++)
        for (ow = lo_w; ow <= hi_w; ow++)
            if (!is_max || nncl_pool_is_max(ip, oh, ow, h, w, H, W, OW, k, st, pad)) sum += NNCL_LD(dp, oh * OW + ow);
    if (!is_max) sum /= (float)(k * k);
    dx += (plane * H + h) * W + w;
    NNCL_ST(acc ? NNCL_LD(dx, 0) + sum : sum, dx, 0);
}

__kernel void nncl_maxpool2d_backward_f32(__global const act_t *dy, int dy_off, __global const idx_t *idx, int idx_off,
                                          __global act_t *dx, int dx_off, int H, int W, int OH, int OW, int k, int st,
                                          int pad, int acc) {
    nncl_pool_backward(dy + dy_off, idx + idx_off, 1, dx + dx_off, H, W, OH, OW, k, st, pad, acc);
}

#if NNCL_POOL_HALF
/* Half storage's backward: the argmax of the 2x2 window at x[xo] (at: its
 * first input in the plane), found again by the forward's order and rules
 * (x itself the base, as in the forward). Inlined by force where the
 * compiler is clang: PoCL left it a call, which stops its vectorizer. */
#ifdef __clang__
__attribute__((always_inline))
#endif
int nncl_pool_argmax2(__global const act_t *x, int xo, int at, int W) {
    pval_t best = NNCL_POOL_LD(x, xo), v = NNCL_POOL_LD(x, xo + 1);
    int win = nncl_pool_wins(v, best), arg = win ? 1 : 0;
    best = win ? v : best;
    v = NNCL_POOL_LD(x, xo + W);
    win = nncl_pool_wins(v, best);
    arg = win ? W : arg;
    best = win ? v : best;
    v = NNCL_POOL_LD(x, xo + W + 1);
    return (nncl_pool_wins(v, best) ? W + 1 : arg) + at;
}
#endif

/* One work-item per input element (NDRange as the forward's, over the
 * input's planes): dy of its window where it is the window's argmax, else
 * 0 (also in the row or column an odd size leaves uncovered). The argmax
 * comes from the index kept, or in half storage from the window searched
 * again in x (idx) by the forward's order and rules. No branch but the
 * bounds check, loads clamped into the tensor and the value selected, and
 * each item's store beside its neighbour's: CPU drivers run it as SIMD
 * lanes (one item per window, four scattered stores each, ran one item at
 * a time). */
__kernel void nncl_maxpool2d_backward_f32_2x2(__global const act_t *dy, int dy_off, __global const idx_t *idx,
                                              int idx_off, __global act_t *dx, int dx_off, int planes, int H, int W,
                                              int OH, int OW, int G, int acc) {
    int plane, h, w, oh, ow, o, at, i, arg;
    float g, d;
    if (!nncl_pool_at(G, planes, H, W, &plane, &h, &w)) return;
    oh = h >> 1 < OH - 1 ? h >> 1 : OH - 1; /* an uncovered row or column reads the last window */
    ow = w >> 1 < OW - 1 ? w >> 1 : OW - 1;
    o = (plane * OH + oh) * OW + ow;
    at = 2 * oh * W + 2 * ow; /* the window's first input in its plane */
#if NNCL_POOL_HALF
    arg = nncl_pool_argmax2(idx, idx_off + plane * H * W + at, at, W);
#else
    arg = (int)idx[idx_off + o];
#endif
    g = NNCL_LDG(dy, dy_off + o);
    d = arg == h * W + w && (h >> 1) < OH && (w >> 1) < OW ? g : 0.0f;
    i = dx_off + nncl_pool_out(G, H * W); /* plane * H * W + h * W + w */
    NNCL_ST(acc ? NNCL_LD(dx, i) + d : d, dx, i);
}

/* The same for pairs of horizontally neighbouring inputs (W even, dx at an
 * even element, nothing to add to): one work-item per pair, which belongs
 * to one window's row, on NDRange (G * H*W/2, ceil(planes / G)): half the
 * index loads (or in half storage window searches). In half storage the
 * pair is one 32-bit word of dy's bits or zeros: no conversion, one
 * contiguous store; in fp32 two float stores (PoCL runs one vstore2
 * slower). */
__kernel void nncl_maxpool2d_backward_f32_2x2p(__global const act_t *dy, int dy_off, __global const idx_t *idx,
                                               int idx_off, __global act_t *dx, int dx_off, int planes, int H, int W,
                                               int OH, int OW, int G) {
    int plane, h, w2, w, oh, ow, o, at, i, arg, cov;
    if (!nncl_pool_at(G, planes, H, W >> 1, &plane, &h, &w2)) return;
    w = 2 * w2;
    oh = h >> 1 < OH - 1 ? h >> 1 : OH - 1;
    ow = w2 < OW - 1 ? w2 : OW - 1;
    o = (plane * OH + oh) * OW + ow;
    at = 2 * oh * W + 2 * ow;
    cov = (h >> 1) < OH && w2 < OW;
#if NNCL_POOL_HALF
    {
        uint gb, lo, hi;
        arg = nncl_pool_argmax2(idx, idx_off + plane * H * W + at, at, W);
        gb = nncl_ld16(dy, dy_off + o);
        lo = cov && arg == h * W + w ? gb : 0u;
        hi = cov && arg == h * W + w + 1 ? gb : 0u;
        i = (dx_off >> 1) + nncl_pool_out(G, H * (W >> 1));
        ((__global uint *)dx)[i] = NNCL_POOL_WORD(lo, hi);
    }
#else
    {
        float g = dy[dy_off + o];
        arg = (int)idx[idx_off + o];
        i = dx_off + 2 * nncl_pool_out(G, H * (W >> 1));
        dx[i] = cov && arg == h * W + w ? g : 0.0f;
        dx[i + 1] = cov && arg == h * W + w + 1 ? g : 0.0f;
    }
#endif
}

/* Half storage with x and dx at even elements and W even: one work-item
 * per window, covering both its rows, on NDRange (G * ceil(H/2)*W/2,
 * ceil(planes / G)): the window is two 32-bit words of x (its rows), its
 * argmax found once (the pairs kernel searched it for each of its two
 * rows, through 16-bit loads), and dx two words of dy's bits or zeros; an
 * odd H's last row, which no window covers, gets zeros. In fp32 empty
 * (the host takes the pairs kernel). */
__kernel void nncl_maxpool2d_backward_f32_2x2w(__global const act_t *dy, int dy_off, __global const act_t *x,
                                               int x_off, __global act_t *dx, int dx_off, int planes, int H, int W,
                                               int OH, int OW, int G) {
#if NNCL_POOL_HALF
    __global const uint *xw = (__global const uint *)x;
    __global uint *dxw = (__global uint *)dx;
    int plane, r2, w2, hw2 = (H * W) >> 1, W2 = W >> 1, oh, at, arg, out, cov;
    uint best, g;
    if (!nncl_pool_at(G, planes, (H + 1) >> 1, W2, &plane, &r2, &w2)) return;
    cov = r2 < OH;
    oh = cov ? r2 : OH - 1; /* the uncovered row reads the last window, its result unused */
    at = (x_off >> 1) + plane * hw2 + oh * W + w2;
    arg = nncl_pool_words_max(xw[at], xw[at + W2], &best);
    g = cov ? nncl_ld16(dy, dy_off + (plane * OH + oh) * OW + w2) : 0u;
    out = (dx_off >> 1) + plane * hw2 + r2 * W + w2;
    dxw[out] = NNCL_POOL_WORD(arg == 0 ? g : 0u, arg == 1 ? g : 0u);
    if (2 * r2 + 1 < H) dxw[out + W2] = NNCL_POOL_WORD(arg == 2 ? g : 0u, arg == 3 ? g : 0u);
#endif
}

/* Backward of the kernel by rows, with nothing to add to (a row's last
 * step writes its overlap twice) and H and W even (no uncovered input):
 * the two input rows under output row oh, each step's even and odd lanes
 * dy where the kept argmax is theirs, else 0. */
#define NNCL_POOL_ROWB(V, V2, LANES)                                                                                  \
    for (s = 0; s < OW; s += V) {                                                                                      \
        const NNCL_CAT(float, V) lane = (NNCL_CAT(float, V))LANES, z = (NNCL_CAT(float, V))(0.0f);                    \
        int o = s + V <= OW ? s : OW - V;                                                                              \
        NNCL_CAT(float, V) g = NNCL_CAT(vload, V)(0, dyo + o), arg = NNCL_CAT(vload, V)(0, io + o);                  \
        NNCL_CAT(float, V) at = (float)(2 * oh * W + 2 * o) + 2.0f * lane;                                            \
        NNCL_CAT(float, V2) r;                                                                                         \
        r.even = select(z, g, arg == at);                                                                              \
        r.odd = select(z, g, arg == at + 1.0f);                                                                        \
        NNCL_CAT(vstore, V2)(r, 0, d0 + 2 * o);                                                                        \
        r.even = select(z, g, arg == at + (float)W);                                                                   \
        r.odd = select(z, g, arg == at + (float)(W + 1));                                                              \
        NNCL_CAT(vstore, V2)(r, 0, d0 + W + 2 * o);                                                                    \
    }
#if NNCL_POOL_HALF
/* Half storage: each window's place found again in x (idx), as the
 * forward found it, and dy's bits or zeros stored. */
#define NNCL_POOL_ROWHB(V, V2)                                                                                         \
    for (s = 0; s < OW; s += V) {                                                                                      \
        int o = s + V <= OW ? s : OW - V;                                                                              \
        NNCL_CAT(uint, V2) r0 = NNCL_CAT(convert_uint, V2)(NNCL_CAT(vload, V2)(0, x0 + 2 * o));                       \
        NNCL_CAT(uint, V2) r1 = NNCL_CAT(convert_uint, V2)(NNCL_CAT(vload, V2)(0, x0 + W + 2 * o));                   \
        NNCL_CAT(uint, V) m = r0.even, g = NNCL_CAT(convert_uint, V)(NNCL_CAT(vload, V)(0, dyo + o)), z = 0u;        \
        NNCL_CAT(int, V) arg = (NNCL_CAT(int, V))0;                                                                    \
        NNCL_CAT(uint, V2) r;                                                                                          \
        NNCL_POOL_ROW_ARG(V, r0, r1, m, arg);                                                                          \
        r.even = select(z, g, arg == 0);                                                                               \
        r.odd = select(z, g, arg == 1);                                                                                \
        NNCL_CAT(vstore, V2)(NNCL_CAT(convert_ushort, V2)(r), 0, d0 + 2 * o);                                         \
        r.even = select(z, g, arg == 2);                                                                               \
        r.odd = select(z, g, arg == 3);                                                                                \
        NNCL_CAT(vstore, V2)(NNCL_CAT(convert_ushort, V2)(r), 0, d0 + W + 2 * o);                                     \
    }
#endif
__kernel void nncl_maxpool2d_backward_f32_2x2r(__global const act_t *dy, int dy_off, __global const idx_t *idx,
                                               int idx_off, __global act_t *dx, int dx_off, int planes, int H, int W,
                                               int OH, int OW) {
    int row = get_global_id(0), plane = row / OH, oh = row - plane * OH, s;
    if (plane >= planes) return;
#if !NNCL_POOL_HALF
    __global const float *dyo = dy + dy_off + row * OW, *io = idx + idx_off + row * OW;
    __global float *d0 = dx + dx_off + plane * H * W + 2 * oh * W;
    if (OW >= 8) NNCL_POOL_ROWB(8, 16, (0, 1, 2, 3, 4, 5, 6, 7))
    else NNCL_POOL_ROWB(4, 8, (0, 1, 2, 3))
#else
    __global const act_t *dyo = dy + dy_off + row * OW, *x0 = idx + idx_off + plane * H * W + 2 * oh * W;
    __global act_t *d0 = dx + dx_off + plane * H * W + 2 * oh * W;
    if (OW >= 8) NNCL_POOL_ROWHB(8, 16)
    else NNCL_POOL_ROWHB(4, 8)
#endif
}
#undef NNCL_POOL_ROWB
#undef NNCL_POOL_ROWHB
#if NNCL_POOL_HALF
#undef NNCL_POOL_ROW_ARG
#undef NNCL_POOL_WINV
#undef NNCL_POOL_KEYV
#endif

__kernel void nncl_avgpool2d_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dx, int dx_off, int H,
                                          int W, int OH, int OW, int k, int st, int pad, int acc) {
    nncl_pool_backward(dy + dy_off, 0, 0, dx + dx_off, H, W, OH, OW, k, st, pad, acc);
}

/* Global average pool, streaming: no barriers and no division per value
 * (CPU drivers keep these loops in vector registers, 8 values at a time).
 * Forward: one work-item per plane p of hw values, y[p] = scale sum x[p, :]. */
__kernel void nncl_global_avgpool_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int planes,
                                      int hw, float scale) {
    int p = (int)get_global_id(0), k;
    float8 s8 = 0.0f;
    float s = 0.0f;
    __global const act_t *r;
    if (p >= planes) return;
    r = x + x_off + (size_t)p * hw;
    for (k = 0; k + 8 <= hw; k += 8) s8 += NNCL_LD8(r + k);
    for (; k < hw; k++) s += NNCL_LD(r, k);
    s += (s8.s0 + s8.s1) + (s8.s2 + s8.s3) + ((s8.s4 + s8.s5) + (s8.s6 + s8.s7));
    NNCL_ST(s * scale, y, y_off + p);
}

/* Backward: dx[p, j] (+)= dy[p] scale, work-item p nch + q over values
 * [q chunk, (q + 1) chunk) of plane p. */
__kernel void nncl_global_avgpool_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dx, int dx_off,
                                               int planes, int hw, int nch, int chunk, float scale, int acc) {
    int gid = (int)get_global_id(0), p, q, k, hi;
    float g;
    __global act_t *r;
    if (gid >= planes * nch) return;
    p = gid / nch;
    q = gid - p * nch;
    g = NNCL_LD(dy, dy_off + p) * scale;
    r = dx + dx_off + (size_t)p * hw;
    hi = min(hw, (q + 1) * chunk);
    for (k = q * chunk; k + 8 <= hi; k += 8) NNCL_ST8(acc ? NNCL_LD8(r + k) + g : (float8)g, r + k);
    for (; k < hi; k++) NNCL_ST(acc ? NNCL_LD(r, k) + g : g, r, k);
}
