/* dense.cl - what a linear or convolution layer adds around its GEMM: bias
 * plus a fused activation in place, the activation's backward in place on
 * the incoming gradient, and the bias gradient as column sums. act: 0 none,
 * 1 relu, 2 sigmoid, 3 tanh (nncl_act). Activations, their gradients and
 * the bias in the storage type (act_t, cl/common.cl); the bias gradient,
 * a parameter gradient, in fp32. */

float nncl_dense_act(float v, int act) {
    if (act == 1) return v < 0.0f ? 0.0f : v; /* NaN stays NaN, as in PyTorch */
    if (act == 2) return 1.0f / (1.0f + exp(-v));
    if (act == 3) return tanh(v);
    return v;
}

/* y[r, c] = act(y[r, c] + b[c]) for a [rows, cols] block; with inner > 1 the
 * layout is [rows, cols, inner] (NCHW: bias per channel). */
__kernel void nncl_bias_act_f32(__global act_t *y, int y_off, __global const act_t *b, int b_off, int has_bias,
                                int cols, int inner, int n, int act) {
    int i = get_global_id(0);
    if (i < n) {
        float v = NNCL_LD(y, y_off + i);
        if (has_bias) v += NNCL_LD(b, b_off + (i / inner) % cols);
        NNCL_ST(nncl_dense_act(v, act), y, y_off + i);
    }
}

/* dy[i] *= act'(y[i]), in place: the layer's gradient is not read again. */
__kernel void nncl_act_backward_f32_inplace(__global act_t *dy, int dy_off, __global const act_t *y, int y_off, int n,
                                            int act) {
    int i = get_global_id(0);
    if (i < n) NNCL_ST(NNCL_LD(dy, dy_off + i) * nncl_act_grad(NNCL_LD(y, y_off + i), act), dy, dy_off + i);
}

/* db[c] (+)= sum over r and inner of dy[r, c, inner]: one work-group per
 * column, a tree in local memory. */
__kernel void nncl_bias_backward_f32(__global const act_t *dy, int dy_off, int rows, int cols, int inner,
                                 __global float *db, int db_off, int acc, __local float *part) {
    int c = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    int r, j;
    float sum = 0.0f;
    /* no division per element: CPU drivers run it as a scalar loop per lane */
    if (inner == 1)
        for (r = lid; r < rows; r += ls) sum += NNCL_LD(dy, dy_off + r * cols + c);
    else
        for (r = 0; r < rows; r++)
            for (j = lid; j < inner; j += ls) sum += NNCL_LD(dy, dy_off + (r * cols + c) * inner + j);
    sum = nncl_group_sum(part, sum);
    if (lid == 0) db[db_off + c] = (acc ? db[db_off + c] : 0.0f) + sum;
}

/* The linear layer's backward start in one pass: dy[r, c] *= act'(y[r, c])
 * in place (act > 0) and db[c] (+)= the sum of column c. A work-item per 8
 * columns (NDRange ceil(cols / 8)) loops over the rows with them as one
 * vector, converted from half storage 8 at a time, the last item's tail
 * one column at a time by the same sums in the same order. No barrier:
 * CPU drivers run it as vector code where the tree of
 * nncl_bias_backward_f32 would spill at every barrier, and one column per
 * item would leave the vector units idle. For the few rows of a batch (many
 * rows take the tree). */
__kernel void nncl_bias_backward_f32_act(__global act_t *dy, int dy_off, __global const act_t *y, int y_off, int rows,
                                         int cols, __global float *db, int db_off, int acc, int act) {
    int c0 = get_global_id(0) * 8, c, r, e;
    if (c0 >= cols) return;
    if (c0 + 8 <= cols) {
        float8 sum = (float8)(0.0f);
        float t[8];
        for (r = 0; r < rows; r++) {
            __global act_t *d = dy + dy_off + r * cols + c0;
            float8 g = NNCL_LD8(d);
            if (act) {
                g *= nncl_act_grad8(NNCL_LD8(y + y_off + r * cols + c0), act);
                NNCL_ST8(g, d);
            }
            sum += g;
        }
        vstore8(sum, 0, t);
        for (e = 0; e < 8; e++) db[db_off + c0 + e] = (acc ? db[db_off + c0 + e] : 0.0f) + t[e];
        return;
    }
    for (c = c0; c < cols; c++) {
        float sum = 0.0f;
        for (r = 0; r < rows; r++) {
            int i = r * cols + c;
            float g = NNCL_LD(dy, dy_off + i);
            if (act) {
                g *= nncl_act_grad(NNCL_LD(y, y_off + i), act);
                NNCL_ST(g, dy, dy_off + i);
            }
            sum += g;
        }
        db[db_off + c] = (acc ? db[db_off + c] : 0.0f) + sum;
    }
}
