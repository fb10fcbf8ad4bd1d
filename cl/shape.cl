/* shape.cl - transposing two axes and slicing one, one work-item per
 * element written; no arithmetic, so every storage type (act_t,
 * cl/common.cl) moves its values unchanged. Buffers are followed by their
 * int element offsets; `acc` 1 means add into the output. */

/* y [outer, d1, mid, d0, inner] from x [outer, d0, mid, d1, inner]. */
__kernel void nncl_transpose_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n, int d0,
                                 int mid, int d1, int inner, int acc) {
    int i = (int)get_global_id(0);
    if (i < n) {
        int e = i % inner, t = i / inner, j0 = t % d0, m, j1, o;
        float v;
        t /= d0;
        m = t % mid;
        t /= mid;
        j1 = t % d1;
        o = t / d1;
        v = NNCL_LD(x, x_off + (((o * d0 + j0) * mid + m) * d1 + j1) * inner + e);
        NNCL_ST(acc ? NNCL_LD(y, y_off + i) + v : v, y, y_off + i);
    }
}

/* y [outer, len, inner] = x [outer, D, inner] at [start, start + len). */
__kernel void nncl_slice_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int n, int D, int len,
                             int start, int inner) {
    int i = (int)get_global_id(0);
    if (i < n) {
        int e = i % inner, t = i / inner;
        NNCL_ST(NNCL_LD(x, x_off + ((t / len) * D + start + t % len) * inner + e), y, y_off + i);
    }
}

/* dx [outer, D, inner] (+)= dy [outer, len, inner] placed at start, zeros
 * elsewhere: one work-item per element of dx, n of them. */
__kernel void nncl_slice_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dx, int dx_off, int n,
                                      int D, int len, int start, int inner, int acc) {
    int i = (int)get_global_id(0);
    if (i < n) {
        int e = i % inner, t = i / inner, j = t % D - start;
        float v = j >= 0 && j < len ? NNCL_LD(dy, dy_off + ((t / D) * len + j) * inner + e) : 0.0f;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + v : v, dx, dx_off + i);
    }
}
