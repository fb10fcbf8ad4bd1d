/* elementwise.cl - binary ops with an optional row-vector broadcast, unary
 * activations, scaling and fill, the activations' backward rules and a
 * generic accumulate (axpy).
 * Argument order everywhere: buffers (each followed by its int element
 * offset, so the kernels also run on slices of a plan's arena), inputs before
 * the output; then sizes; then float parameters; then `acc` where present
 * (1: add to the destination, 0: overwrite it without reading it). Global
 * sizes are rounded up to the work-group size, so every kernel checks its
 * bound (as size_t, so the padding never wraps to a negative index).
 * Every buffer but fill's holds activations or their gradients in the
 * storage type (act_t, cl/common.cl); arithmetic is fp32. */

#define NNCL_SQRT1_2 0.70710678118654752f      /* 1/sqrt(2) */
#define NNCL_INV_SQRT_2PI 0.39894228040143268f /* 1/sqrt(2 pi) */

/* erfc(z) within a few 1e-6 relative (Numerical Recipes' erfcc, a
 * Chebyshev fit of erfc(z) exp(z^2) in t = 1 / (1 + z/2), fractional error
 * 1.2e-7; z^2's rounding error e = fma(a, a, -a^2) enters as exp(-e) ~ 1 -
 * e). Plain arithmetic and exp, so CPU drivers run work-items as SIMD
 * lanes; PoCL's erfc is a scalar library call. nncl_erfc8: on 8 lanes. */
#define NNCL_ERFC_POLY(t)                                                                                              \
    (-1.26551223f +                                                                                                    \
     t * (1.00002368f +                                                                                                \
          t * (0.37409196f +                                                                                           \
               t * (0.09678418f +                                                                                      \
                    t * (-0.18628806f +                                                                                \
                         t * (0.27886807f +                                                                            \
                              t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))))
float nncl_erfc(float z) {
    float a = fabs(z), t = 1.0f / (1.0f + 0.5f * a), aa = a * a;
    float r = t * exp(NNCL_ERFC_POLY(t) - aa) * (1.0f - fma(a, a, -aa));
    return z < 0.0f ? 2.0f - r : r;
}
float8 nncl_erfc8(float8 z) {
    float8 a = fabs(z), t = 1.0f / (1.0f + 0.5f * a), aa = a * a;
    float8 r = t * exp(NNCL_ERFC_POLY(t) - aa) * (1.0f - fma(a, a, -aa));
    return select(r, 2.0f - r, z < 0.0f);
}

/* gelu through erfc rather than 1 + erf: no cancellation for negative x. */
float nncl_gelu_fwd(float v) { return 0.5f * v * nncl_erfc(-v * NNCL_SQRT1_2); }
/* d gelu / dx = Phi(x) + x phi(x) */
float nncl_gelu_grad(float v) {
    return 0.5f * nncl_erfc(-v * NNCL_SQRT1_2) + v * NNCL_INV_SQRT_2PI * exp(-0.5f * v * v);
}
float8 nncl_gelu_grad8(float8 v) {
    return 0.5f * nncl_erfc8(-v * NNCL_SQRT1_2) + v * NNCL_INV_SQRT_2PI * exp(-0.5f * v * v);
}

/* gelu, tanh form (PyTorch's approximate='tanh'), and its derivative */
#define NNCL_SQRT_2_PI 0.79788456080286536f /* sqrt(2/pi) */
float nncl_gelu_tanh_fwd(float v) {
    return 0.5f * v * (1.0f + tanh(NNCL_SQRT_2_PI * (v + 0.044715f * v * v * v)));
}
float nncl_gelu_tanh_grad(float v) {
    float t = tanh(NNCL_SQRT_2_PI * (v + 0.044715f * v * v * v));
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * NNCL_SQRT_2_PI * (1.0f + 3.0f * 0.044715f * v * v);
}
/* silu' = s (1 + x (1 - s)), s = sigmoid(x) */
float nncl_silu_grad(float v) {
    float s = 1.0f / (1.0f + exp(-v));
    return s * (1.0f + v * (1.0f - s));
}

/* out[i] = a[i] op b[i % bn]: bn == n for same-shape operands, bn == cols
 * for a row vector broadcast over rows. Work-item (j, r) takes element
 * r bn + j (a 2-D launch of n / bn rows, so no lane divides). */
#define NNCL_BINARY(NAME, EXPR)                                              \
__kernel void NAME(__global const act_t *a, int a_off,                       \
                   __global const act_t *b, int b_off, int bn,                \
                   __global act_t *out, int out_off, int n) {                 \
    size_t j = get_global_id(0), i = get_global_id(1) * (size_t)bn + j;      \
    if (j < (size_t)bn && i < (size_t)n) {                                   \
        float x = NNCL_LD(a, a_off + i), y = NNCL_LD(b, b_off + j);          \
        NNCL_ST(EXPR, out, out_off + i);                                     \
    }                                                                        \
}
NNCL_BINARY(nncl_add_f32, x + y)
NNCL_BINARY(nncl_sub_f32, x - y)
NNCL_BINARY(nncl_mul_f32, x * y)

/* The same on 8 elements a work-item (the graph ops'; eager ops take the
 * form above): work-item (j, r) takes elements r bn + [8j, 8j + 8), the
 * last j of a row the bn % 8 left alone. One element a work-item is bound
 * by the work-item loop, not by memory, on CPU drivers. */
#define NNCL_BINARY8(NAME, EXPR)                                                                                       \
__kernel void NAME(__global const act_t *a, int a_off, __global const act_t *b, int b_off, int bn,                    \
                   __global act_t *out, int out_off, int n) {                                                          \
    int j = (int)get_global_id(0) * 8, r = (int)get_global_id(1), i = r * bn + j, k;                                   \
    if (j >= bn || i >= n) return;                                                                                     \
    if (j + 8 <= bn) {                                                                                                 \
        float8 x = NNCL_LD8(a + a_off + i), y = NNCL_LD8(b + b_off + j);                                               \
        NNCL_ST8(EXPR, out + out_off + i);                                                                             \
    } else                                                                                                             \
        for (k = 0; k < bn - j; k++) {                                                                                 \
            float x = NNCL_LD(a, a_off + i + k), y = NNCL_LD(b, b_off + j + k);                                        \
            NNCL_ST(EXPR, out, out_off + i + k);                                                                       \
        }                                                                                                              \
}
NNCL_BINARY8(nncl_add_f32_v8, x + y)
NNCL_BINARY8(nncl_sub_f32_v8, x - y)
NNCL_BINARY8(nncl_mul_f32_v8, x * y)

/* y[i] = f(x[i]): (x, x_off, y, y_off, n). x and y may be the same. */
#define NNCL_UNARY(NAME, EXPR)                                               \
__kernel void NAME(__global const act_t *x, int x_off,                       \
                   __global act_t *y, int y_off, int n) {                     \
    size_t i = get_global_id(0);                                             \
    if (i < (size_t)n) {                                                     \
        float v = NNCL_LD(x, x_off + i);                                     \
        NNCL_ST(EXPR, y, y_off + i);                                         \
    }                                                                        \
}
/* The same with one float parameter p: (x, x_off, y, y_off, n, p). */
#define NNCL_UNARY_P(NAME, EXPR)                                             \
__kernel void NAME(__global const act_t *x, int x_off,                       \
                   __global act_t *y, int y_off, int n, float p) {            \
    size_t i = get_global_id(0);                                             \
    if (i < (size_t)n) {                                                     \
        float v = NNCL_LD(x, x_off + i);                                     \
        NNCL_ST(EXPR, y, y_off + i);                                         \
    }                                                                        \
}
/* v < 0 rather than max(v, 0): a NaN stays a NaN, as in PyTorch. */
#define NNCL_RELU_EXPR(v) ((v) < 0.0f ? 0.0f : (v))
#define NNCL_RELU6_EXPR(v) ((v) <= 0.0f ? 0.0f : (v) >= 6.0f ? 6.0f : (v))
#define NNCL_HARDSWISH_EXPR(v) ((v) <= -3.0f ? 0.0f * (v) : (v) >= 3.0f ? (v) : (v) * ((v) + 3.0f) / 6.0f)
NNCL_UNARY(nncl_relu_f32, NNCL_RELU_EXPR(v))
NNCL_UNARY(nncl_sigmoid_f32, 1.0f / (1.0f + exp(-v)))
NNCL_UNARY(nncl_tanh_f32, tanh(v))
NNCL_UNARY(nncl_gelu_f32, nncl_gelu_fwd(v))
NNCL_UNARY_P(nncl_scale_f32, p * v)          /* p: alpha */
NNCL_UNARY_P(nncl_leaky_relu_f32, v < 0.0f ? p * v : v) /* p: slope */
NNCL_UNARY(nncl_gelu_tanh_f32, nncl_gelu_tanh_fwd(v))
NNCL_UNARY(nncl_silu_f32, v / (1.0f + exp(-v)))
/* softplus with PyTorch's defaults beta 1, threshold 20 */
NNCL_UNARY(nncl_softplus_f32, v > 20.0f ? v : log1p(exp(v)))
NNCL_UNARY_P(nncl_elu_f32, v > 0.0f ? v : p * expm1(v)) /* p: alpha */
/* MobileNet's activations (comparisons that keep a NaN a NaN) */
NNCL_UNARY(nncl_relu6_f32, NNCL_RELU6_EXPR(v))
NNCL_UNARY(nncl_hardswish_f32, NNCL_HARDSWISH_EXPR(v))
NNCL_UNARY(nncl_hardsigmoid_f32, v <= -3.0f ? 0.0f : v >= 3.0f ? 1.0f : v / 6.0f + 0.5f)

/* The cheap activations on 8 elements a work-item, ceil(n / 8) of them,
 * the last taking the n % 8 left alone (the graph ops'; eager ops take the
 * forms above): one element a work-item is bound by the work-item loop,
 * not by memory, on CPU drivers. EXPR is written once for float and
 * float8 (a vector condition selects per lane, NaN comparing false as in
 * the scalar form). Forward (x, x_off, y, y_off, n), backward as
 * NNCL_BACKWARD's. */
#define NNCL_UNARY8(NAME, EXPR)                                                                                        \
__kernel void NAME(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n) {                         \
    int i = (int)get_global_id(0) * 8, k;                                                                              \
    if (i + 8 <= n) {                                                                                                  \
        float8 v = NNCL_LD8(x + x_off + i);                                                                            \
        NNCL_ST8(EXPR, y + y_off + i);                                                                                 \
    } else                                                                                                             \
        for (k = i; k < n; k++) {                                                                                      \
            float v = NNCL_LD(x, x_off + k);                                                                           \
            NNCL_ST(EXPR, y, y_off + k);                                                                               \
        }                                                                                                              \
}
#define NNCL_BACKWARD8(NAME, EXPR)                                                                                     \
__kernel void NAME(__global const act_t *dy, int dy_off, __global const act_t *vbuf, int v_off, __global act_t *dx,   \
                   int dx_off, int n, int acc) {                                                                       \
    int i = (int)get_global_id(0) * 8, k;                                                                              \
    if (i + 8 <= n) {                                                                                                  \
        float8 g = NNCL_LD8(dy + dy_off + i), v = NNCL_LD8(vbuf + v_off + i), d = EXPR;                                \
        NNCL_ST8(acc ? NNCL_LD8(dx + dx_off + i) + d : d, dx + dx_off + i);                                            \
    } else                                                                                                             \
        for (k = i; k < n; k++) {                                                                                      \
            float g = NNCL_LD(dy, dy_off + k), v = NNCL_LD(vbuf, v_off + k), d = EXPR;                                 \
            NNCL_ST(acc ? NNCL_LD(dx, dx_off + k) + d : d, dx, dx_off + k);                                            \
        }                                                                                                              \
}
NNCL_UNARY8(nncl_relu_f32_v8, NNCL_RELU_EXPR(v))
NNCL_UNARY8(nncl_relu6_f32_v8, NNCL_RELU6_EXPR(v))
NNCL_UNARY8(nncl_hardswish_f32_v8, NNCL_HARDSWISH_EXPR(v))

/* y = min(max(x, lo), hi): (x, x_off, y, y_off, n, lo, hi) */
__kernel void nncl_clamp_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n, float lo,
                             float hi) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float v = NNCL_LD(x, x_off + i);
        v = v < lo ? lo : v;
        NNCL_ST(v > hi ? hi : v, y, y_off + i);
    }
}

/* y[i] = value: (y, y_off, n, value) */
__kernel void nncl_fill_f32(__global float *y, int y_off, int n, float value) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) y[y_off + i] = value;
}

/* y = acc * y + alpha * x: (x, x_off, y, y_off, n, alpha, acc). Gradient
 * accumulation (acc 1) and scaled copies (acc 0). */
__kernel void nncl_axpy_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n, float alpha,
                            int acc) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float d = alpha * NNCL_LD(x, x_off + i);
        NNCL_ST(acc ? NNCL_LD(y, y_off + i) + d : d, y, y_off + i);
    }
}

/* nncl_axpy_f32 on 8 elements a work-item, ceil(n / 8) of them, the last
 * taking the n % 8 left alone (the graph ops'). */
__kernel void nncl_axpy_f32_v8(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n, float alpha,
                               int acc) {
    int i = (int)get_global_id(0) * 8, k;
    if (i + 8 <= n) {
        float8 d = alpha * NNCL_LD8(x + x_off + i);
        NNCL_ST8(acc ? NNCL_LD8(y + y_off + i) + d : d, y + y_off + i);
    } else
        for (k = i; k < n; k++) {
            float d = alpha * NNCL_LD(x, x_off + k);
            NNCL_ST(acc ? NNCL_LD(y, y_off + k) + d : d, y, y_off + k);
        }
}

/* dx = acc * dx + dy * f'(.) where f' is computed from v, the forward output
 * y (relu, sigmoid, tanh) or input x (gelu, leaky relu):
 * (dy, dy_off, v, v_off, dx, dx_off, n, acc). dx may be dy. */
#define NNCL_BACKWARD(NAME, EXPR)                                            \
__kernel void NAME(__global const act_t *dy, int dy_off,                     \
                   __global const act_t *vbuf, int v_off,                    \
                   __global act_t *dx, int dx_off, int n, int acc) {          \
    size_t i = get_global_id(0);                                             \
    if (i < (size_t)n) {                                                     \
        float g = NNCL_LD(dy, dy_off + i), v = NNCL_LD(vbuf, v_off + i);     \
        float d = EXPR;                                                      \
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);      \
    }                                                                        \
}
#define NNCL_RELU_GRAD(v, g) ((v) > 0.0f ? (g) : 0.0f)
#define NNCL_RELU6_GRAD(v, g) ((v) <= 0.0f || (v) >= 6.0f ? 0.0f : (g))
#define NNCL_HARDSWISH_GRAD(v, g) ((v) < -3.0f ? 0.0f : (v) <= 3.0f ? (g) * ((v) / 3.0f + 0.5f) : (g))
NNCL_BACKWARD(nncl_relu_backward_f32, NNCL_RELU_GRAD(v, g))       /* v = y */
NNCL_BACKWARD(nncl_sigmoid_backward_f32, g * v * (1.0f - v))     /* v = y */
NNCL_BACKWARD(nncl_tanh_backward_f32, g * (1.0f - v * v))        /* v = y */
NNCL_BACKWARD(nncl_gelu_backward_f32, g * nncl_gelu_grad(v))     /* v = x */
NNCL_BACKWARD(nncl_gelu_tanh_backward_f32, g * nncl_gelu_tanh_grad(v)) /* v = x */

/* gelu and its backward (the graph's; eager nncl_gelu takes the kernel
 * above) on 8 elements a work-item, ceil(n / 8) of them, the last one
 * taking the n % 8 left alone. */
__kernel void nncl_gelu_f32_v8(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n) {
    int i = (int)get_global_id(0) * 8, k;
    if (i + 8 <= n) {
        float8 v = NNCL_LD8(x + x_off + i);
        NNCL_ST8(0.5f * v * nncl_erfc8(-v * NNCL_SQRT1_2), y + y_off + i);
    } else
        for (k = i; k < n; k++) NNCL_ST(nncl_gelu_fwd(NNCL_LD(x, x_off + k)), y, y_off + k);
}
__kernel void nncl_gelu_backward_f32_v8(__global const act_t *dy, int dy_off, __global const act_t *vbuf, int v_off,
                                        __global act_t *dx, int dx_off, int n, int acc) {
    int i = (int)get_global_id(0) * 8, k;
    if (i + 8 <= n) {
        float8 d = NNCL_LD8(dy + dy_off + i) * nncl_gelu_grad8(NNCL_LD8(vbuf + v_off + i));
        NNCL_ST8(acc ? NNCL_LD8(dx + dx_off + i) + d : d, dx + dx_off + i);
    } else
        for (k = i; k < n; k++) {
            float d = NNCL_LD(dy, dy_off + k) * nncl_gelu_grad(NNCL_LD(vbuf, v_off + k));
            NNCL_ST(acc ? NNCL_LD(dx, dx_off + k) + d : d, dx, dx_off + k);
        }
}
NNCL_BACKWARD(nncl_silu_backward_f32, g * nncl_silu_grad(v))     /* v = x */
NNCL_BACKWARD(nncl_softplus_backward_f32, v > 20.0f ? g : g / (1.0f + exp(-v))) /* v = x */
/* PyTorch's gradients at the kinks (op_elementwise.c); v = x */
NNCL_BACKWARD(nncl_relu6_backward_f32, NNCL_RELU6_GRAD(v, g))
NNCL_BACKWARD(nncl_hardswish_backward_f32, NNCL_HARDSWISH_GRAD(v, g))
NNCL_BACKWARD8(nncl_relu_backward_f32_v8, NNCL_RELU_GRAD(v, g))   /* v = y */
NNCL_BACKWARD8(nncl_relu6_backward_f32_v8, NNCL_RELU6_GRAD(v, g))
NNCL_BACKWARD8(nncl_hardswish_backward_f32_v8, NNCL_HARDSWISH_GRAD(v, g))
NNCL_BACKWARD(nncl_hardsigmoid_backward_f32, v > -3.0f && v < 3.0f ? g / 6.0f : 0.0f)

/* dx (+)= dy on lo <= x <= hi, the ends included: (dy, dy_off, x, x_off,
 * dx, dx_off, n, lo, hi, acc) */
__kernel void nncl_clamp_backward_f32(__global const act_t *dy, int dy_off, __global const act_t *x, int x_off,
                                      __global act_t *dx, int dx_off, int n, float lo, float hi, int acc) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float v = NNCL_LD(x, x_off + i), d = v >= lo && v <= hi ? NNCL_LD(dy, dy_off + i) : 0.0f;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* (dy, dy_off, x, x_off, dx, dx_off, n, alpha, acc) */
__kernel void nncl_elu_backward_f32(__global const act_t *dy, int dy_off, __global const act_t *x, int x_off,
                                    __global act_t *dx, int dx_off, int n, float alpha, int acc) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float g = NNCL_LD(dy, dy_off + i), v = NNCL_LD(x, x_off + i);
        float d = v > 0.0f ? g : g * alpha * exp(v);
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* (dy, dy_off, x, x_off, dx, dx_off, n, slope, acc) */
__kernel void nncl_leaky_relu_backward_f32(__global const act_t *dy, int dy_off, __global const act_t *x, int x_off,
                                           __global act_t *dx, int dx_off, int n, float slope, int acc) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float g = NNCL_LD(dy, dy_off + i);
        float d = NNCL_LD(x, x_off + i) > 0.0f ? g : slope * g;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* Product rule for out = a * b[i % bn]: dx[i] (+)= dy[i] * other[i % on]
 * (the gradient of a: other = b, on = bn; of a same-shape b: other = a). */
__kernel void nncl_mul_backward_f32(__global const act_t *dy, int dy_off, __global const act_t *other, int o_off,
                                    int on, __global act_t *dx, int dx_off, int n, int acc) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) {
        float d = NNCL_LD(dy, dy_off + i) * NNCL_LD(other, o_off + i % (size_t)on);
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* Gradient of a broadcast row vector b[cols] in out = a * b:
 * db[c] (+)= sum over r of dy[r, c] a[r, c], one work-item per column. */
__kernel void nncl_mul_backward_f32_bcast(__global const act_t *dy, int dy_off, __global const act_t *a, int a_off,
                                      __global act_t *db, int db_off, int rows, int cols, int acc) {
    size_t c = get_global_id(0);
    if (c < (size_t)cols) {
        float s = 0.0f;
        int r;
        for (r = 0; r < rows; r++)
            s += NNCL_LD(dy, dy_off + (size_t)r * cols + c) * NNCL_LD(a, a_off + (size_t)r * cols + c);
        NNCL_ST(acc ? NNCL_LD(db, db_off + c) + s : s, db, db_off + c);
    }
}
