/* elementwise.cl - binary ops with an optional row-vector broadcast, unary
 * activations and scaling. Every buffer argument comes with an element
 * offset, so the same kernels run on tensors and on slices of a plan's
 * arena. */

/* out[i] = a[i] op b[i % bn]: bn == n for same-shape operands, bn == cols
 * for a row vector broadcast over rows. */
#define NNCL_BINARY(NAME, EXPR)                                              \
__kernel void NAME(__global const float *a, int a_off,                       \
                   __global const float *b, int b_off, int bn,                \
                   __global float *out, int out_off, int n) {                 \
    int i = get_global_id(0);                                                \
    if (i < n) {                                                             \
        float x = a[a_off + i], y = b[b_off + i % bn];                       \
        out[out_off + i] = EXPR;                                             \
    }                                                                        \
}
NNCL_BINARY(nncl_add_f32, x + y)
NNCL_BINARY(nncl_sub_f32, x - y)
NNCL_BINARY(nncl_mul_f32, x * y)
