/* optimizer.cl - one launch updates every trainable parameter of a plan's
 * flat buffers: SGD, Adam/AdamW and RMSprop with PyTorch's semantics, and the
 * two-stage sum of squares that gradient clipping by global L2 norm reads
 * without a trip to the host. Arguments: buffers, each followed by its int
 * element offset; then n; then float hyperparameters; then int flags.
 * State layout (src/train/optim.h): slot k of parameter i at s[s_off + k*n + i].
 * unscale: 1 / the loss scale (1 without loss scaling), applied to the
 * gradient before clipping as GradScaler's unscale_ is; a power of two, so
 * the product is exact and 1 leaves every bit as it was.
 * Weight decay applies to the first n_decay parameters (nncl_param_decay
 * lays the decayed ones out first), 0 to the rest.
 * h: where the plan stores activations in half (built with NNCL_STORE,
 * cl/common.cl), the working copy of the parameters in that type, written
 * from the updated value in the same pass (one launch and one pass over
 * the parameters fewer per step); in the fp32 build not touched. */

/* PyTorch's clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to at
 * most 1. clip_norm <= 0: off, sumsq is not read. A NaN norm gives a NaN
 * coefficient, as in PyTorch, so a broken gradient is never hidden. */
float nncl_opt_clip_scale(__global const float *sumsq, int sumsq_off, float clip_norm) {
    float c;
    if (clip_norm <= 0.0f) return 1.0f;
    c = clip_norm / (sqrt(sumsq[sumsq_off]) + 1e-6f);
    return c >= 1.0f ? 1.0f : c;
}

/* Stage 1: work-item k writes to part[part_off + k] the sum of x[i]^2 over
 * the blocks of 8 floats k, k + items, k + 2*items, ... (the last partial
 * block by item 0): eight Kahan sums side by side in a float8, so the
 * additions of one item do not wait on each other, and neighbouring items
 * read neighbouring blocks. No local memory and no barrier: a group tree
 * cost CPU drivers, which run a group's items as loops between barriers,
 * more than the Adam update. */
__kernel void nncl_sumsq_f32_partial(__global const float *x, int x_off, __global float *part, int part_off,
                                     int n) {
    size_t k = get_global_id(0), items = get_global_size(0), b, blocks = (size_t)n / 8;
    __global const float *xs = x + x_off;
    float8 s = (float8)(0.0f), comp = (float8)(0.0f);
    float r = 0.0f, rc = 0.0f;
    for (b = k; b < blocks; b += items) {
        float8 v = vload8(b, xs), yk, t;
        yk = v * v - comp;
        t = s + yk;
        comp = (t - s) - yk;
        s = t;
    }
    if (k == 0)
        for (b = blocks * 8; b < (size_t)n; b++) nncl_kahan_add(&r, &rc, xs[b] * xs[b]);
    nncl_kahan_add(&r, &rc, ((s.s0 + s.s1) + (s.s2 + s.s3)) + ((s.s4 + s.s5) + (s.s6 + s.s7)));
    part[part_off + k] = r;
}

/* Stage 2, one work-item: s[s_off + total] = sum of s[s_off .. s_off + count). */
__kernel void nncl_sumsq_f32_final(__global float *s, int s_off, int count, int total) {
    float acc = 0.0f, comp = 0.0f;
    int k;
    if (get_global_id(0) != 0) return;
    for (k = 0; k < count; k++) nncl_kahan_add(&acc, &comp, s[s_off + k]);
    s[s_off + total] = acc;
}

#define NNCL_OPT_VW 8 /* parameters per work-item of the Adam update */
#if defined(NNCL_STORE) && NNCL_STORE
#define NNCL_OPT_HALF(v, h, i) NNCL_ST(v, h, i)
#define NNCL_OPT_HALF8(v, h, i) NNCL_ST8(v, h + (i))
#else
#define NNCL_OPT_HALF(v, h, i) ((void)(h))
#define NNCL_OPT_HALF8(v, h, i) ((void)(h))
#endif

/* torch.optim.SGD. State (momentum != 0): the momentum buffer b.
 *   g = clip*grad + wd*p
 *   b = first ? g : momentum*b + (1-dampening)*g
 *   g = nesterov ? g + momentum*b : b
 *   p = p - lr*g */
__kernel void nncl_sgd_f32(__global float *p, int p_off, __global act_t *h, int h_off, __global const float *g,
                           int g_off, __global float *s, int s_off, __global const float *sumsq, int sumsq_off, int n,
                           int n_decay, float lr, float momentum, float dampening, float wd_decay, float clip_norm,
                           float unscale, int nesterov, int first) {
    size_t i = get_global_id(0);
    float pi, gi, wd = i < (size_t)n_decay ? wd_decay : 0.0f;
    if (i >= (size_t)n) return;
    pi = p[p_off + i];
    gi = g[g_off + i] * unscale * nncl_opt_clip_scale(sumsq, sumsq_off, clip_norm);
    if (wd != 0.0f) gi += wd * pi;
    if (momentum != 0.0f) {
        float b = first ? gi : momentum * s[s_off + i] + (1.0f - dampening) * gi;
        s[s_off + i] = b;
        gi = nesterov ? gi + momentum * b : b;
    }
    pi -= lr * gi;
    p[p_off + i] = pi;
    NNCL_OPT_HALF(pi, h, h_off + i);
}

/* torch.optim.Adam (decoupled 0) and AdamW (decoupled 1). State: m at slot
 * 0, v at slot 1. bc1 = 1 - beta1^step, bc2 = 1 - beta2^step (step 1-based);
 * the host passes step_size = lr/bc1 and bc2_sqrt = sqrt(bc2), computed in
 * double as PyTorch does (and one division and one square root fewer per
 * element).
 *   AdamW: p = p*(1 - lr*wd);  Adam: g = g + wd*p
 *   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
 *   p = p - step_size * m / (sqrt(v)/bc2_sqrt + eps)
 * NNCL_OPT_VW (8) parameters per work-item as one vector, the last item's
 * tail one by one through the same expressions (bit for bit the same
 * values: the division and square root are correctly rounded either way). */
#define NNCL_ADAM(T, pi, gi, m, v)                                                                                     \
    {                                                                                                                  \
        if (wd != 0.0f) {                                                                                              \
            if (decoupled)                                                                                             \
                pi *= 1.0f - lr * wd;                                                                                  \
            else                                                                                                       \
                gi += wd * pi;                                                                                         \
        }                                                                                                              \
        m = beta1 * m + (1.0f - beta1) * gi;                                                                           \
        v = beta2 * v + (1.0f - beta2) * gi * gi;                                                                      \
        pi = pi - step_size * m / (sqrt(v) / bc2_sqrt + eps);                                                          \
    }
__kernel void nncl_adam_f32(__global float *p, int p_off, __global act_t *h, int h_off, __global const float *g,
                            int g_off, __global float *s, int s_off, __global const float *sumsq, int sumsq_off, int n,
                            int n_decay, float lr, float beta1, float beta2, float eps, float wd_decay,
                            float step_size, float bc2_sqrt, float clip_norm, float unscale, int decoupled) {
    size_t i = get_global_id(0) * NNCL_OPT_VW, e;
    float c, wd = i < (size_t)n_decay ? wd_decay : 0.0f;
    __global float *m0 = s + s_off, *v0 = s + s_off + (size_t)n;
    if (i >= (size_t)n) return;
    c = nncl_opt_clip_scale(sumsq, sumsq_off, clip_norm);
    p += p_off;
    g += g_off;
    /* a vector of parameters all decayed or all not; one that straddles n_decay goes one by one */
    if (i + NNCL_OPT_VW <= (size_t)n && (i + NNCL_OPT_VW <= (size_t)n_decay || i >= (size_t)n_decay)) {
        float8 pi = vload8(0, p + i), gi = vload8(0, g + i) * unscale * c, m = vload8(0, m0 + i), v = vload8(0, v0 + i);
        NNCL_ADAM(float8, pi, gi, m, v)
        vstore8(m, 0, m0 + i);
        vstore8(v, 0, v0 + i);
        vstore8(pi, 0, p + i);
        NNCL_OPT_HALF8(pi, h, h_off + i);
    } else
        for (e = i; e < (size_t)n && e < i + NNCL_OPT_VW; e++) {
            float pi = p[e], gi = g[e] * unscale * c, m = m0[e], v = v0[e];
            wd = e < (size_t)n_decay ? wd_decay : 0.0f;
            NNCL_ADAM(float, pi, gi, m, v)
            m0[e] = m;
            v0[e] = v;
            p[e] = pi;
            NNCL_OPT_HALF(pi, h, h_off + e);
        }
}

/* torch.optim.RMSprop, centered=False. State: the square average a at slot
 * 0 and, with momentum > 0, the buffer b at slot 1.
 *   g = clip*grad + wd*p;  a = alpha*a + (1-alpha)*g*g;  d = g/(sqrt(a) + eps)
 *   momentum > 0: b = momentum*b + d, p = p - lr*b;  else p = p - lr*d */
__kernel void nncl_rmsprop_f32(__global float *p, int p_off, __global act_t *h, int h_off, __global const float *g,
                               int g_off, __global float *s, int s_off, __global const float *sumsq, int sumsq_off,
                               int n, int n_decay, float lr, float alpha, float eps, float momentum, float wd_decay,
                               float clip_norm, float unscale) {
    size_t i = get_global_id(0);
    float pi, gi, a, d, wd = i < (size_t)n_decay ? wd_decay : 0.0f;
    if (i >= (size_t)n) return;
    pi = p[p_off + i];
    gi = g[g_off + i] * unscale * nncl_opt_clip_scale(sumsq, sumsq_off, clip_norm);
    if (wd != 0.0f) gi += wd * pi;
    a = alpha * s[s_off + i] + (1.0f - alpha) * gi * gi;
    s[s_off + i] = a;
    d = gi / (sqrt(a) + eps);
    if (momentum > 0.0f) {
        float b = momentum * s[s_off + (size_t)n + i] + d;
        s[s_off + (size_t)n + i] = b;
        d = b;
    }
    pi -= lr * d;
    p[p_off + i] = pi;
    NNCL_OPT_HALF(pi, h, h_off + i);
}
