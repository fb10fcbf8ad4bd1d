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

/* y [outer, len, inner] = x [outer, D, inner] at [start, start + len):
 * work-item (j, o) copies element j of the run of len * inner values of
 * outer index o (2-D, so neither index needs an integer division). */
__kernel void nncl_slice_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int run, int D, int len,
                             int start, int inner) {
    int j = (int)get_global_id(0), o = (int)get_global_id(1);
    if (j < run) NNCL_ST(NNCL_LD(x, x_off + (o * D + start) * inner + j), y, y_off + o * run + j);
}

/* dx [outer, D, inner] (+)= dy [outer, len, inner] placed at start. acc:
 * work-item (j, o) adds element j of the slice's run (run = len * inner)
 * and leaves the rest of dx alone; else it writes element j of dx's run
 * (run = D * inner), zero outside the slice. */
__kernel void nncl_slice_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dx, int dx_off, int run,
                                      int D, int len, int start, int inner, int acc) {
    int j = (int)get_global_id(0), o = (int)get_global_id(1);
    if (j < run) {
        if (acc) {
            int i = dx_off + (o * D + start) * inner + j;
            NNCL_ST(NNCL_LD(dx, i) + NNCL_LD(dy, dy_off + o * len * inner + j), dx, i);
        } else {
            int k = j - start * inner;
            float v = k >= 0 && k < len * inner ? NNCL_LD(dy, dy_off + o * len * inner + k) : 0.0f;
            NNCL_ST(v, dx, dx_off + o * D * inner + j);
        }
    }
}
