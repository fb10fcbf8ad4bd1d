/* reduce.cl - sums over the rows or the columns of a [rows, cols] view:
 * out = acc * out + alpha * sum, which serves sum (alpha 1), mean (alpha
 * 1/count) and the backward of a broadcast row-vector add (axis 0, alpha 1,
 * or -1 for sub). Each work-item sums its share with Kahan compensation, then
 * the group combines the shares in a local-memory tree, so thousands of rows
 * lose no more than a few float roundings. Arguments:
 * (x, x_off, out, out_off, rows, cols, alpha, acc). x and out in the
 * storage type (act_t, cl/common.cl): the graph reads and writes
 * activations with them (a broadcast operand's gradient, global average
 * pooling), the sums are fp32. */

/* Axis 0, out[c] over the rows: 2-D groups (nncl__launch_cols), columns
 * along dimension 0 so that neighbouring work-items read neighbouring
 * floats, row lanes along dimension 1 striding over the rows. */
__kernel void nncl_sum_f32_axis0(__global const act_t *x, int x_off, __global act_t *out, int out_off, int rows,
                                 int cols, float alpha, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t c = get_global_id(0);
    int col = (int)get_local_id(0), lane = (int)get_local_id(1);
    int nx = (int)get_local_size(0), ny = (int)get_local_size(1), r;
    float s = 0.0f, comp = 0.0f;
    if (get_local_size(0) * get_local_size(1) > NNCL_RED_WG) return; /* uniform: the host never does this */
    if (c < (size_t)cols) /* padding work-items add zeros but still meet every barrier */
        for (r = lane; r < rows; r += ny) nncl_kahan_add(&s, &comp, NNCL_LD(x, x_off + (size_t)r * cols + c));
    s = nncl_group_reduce(buf, s, col, lane, nx, ny, 0);
    if (lane == 0 && c < (size_t)cols) {
        float d = alpha * s;
        NNCL_ST(acc ? NNCL_LD(out, out_off + c) + d : d, out, out_off + c);
    }
}

/* The same into fp32 whatever the storage: a parameter's gradient (an
 * added bias or learned position). */
__kernel void nncl_sum_f32_axis0_param(__global const act_t *x, int x_off, __global float *out, int out_off, int rows,
                                       int cols, float alpha, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t c = get_global_id(0);
    int col = (int)get_local_id(0), lane = (int)get_local_id(1);
    int nx = (int)get_local_size(0), ny = (int)get_local_size(1), r;
    float s = 0.0f, comp = 0.0f;
    if (get_local_size(0) * get_local_size(1) > NNCL_RED_WG) return; /* uniform: the host never does this */
    if (c < (size_t)cols)
        for (r = lane; r < rows; r += ny) nncl_kahan_add(&s, &comp, NNCL_LD(x, x_off + (size_t)r * cols + c));
    s = nncl_group_reduce(buf, s, col, lane, nx, ny, 0);
    if (lane == 0 && c < (size_t)cols) out[out_off + c] = (acc ? out[out_off + c] : 0.0f) + alpha * s;
}

/* The same with no local memory or barrier (CPU devices:
 * src/ops/op_elementwise.c): work-item q takes columns [16 q, 16 q + 16),
 * a whole cache line of each row, Kahan sums down the rows per column (one
 * column at a time past the last full 16). */
__kernel void nncl_sum_f32_axis0_param_cols(__global const act_t *x, int x_off, __global float *out, int out_off,
                                            int rows, int cols, float alpha, int acc) {
    int c = (int)get_global_id(0) * 16, r, k;
    if (c >= cols) return;
    if (c + 16 <= cols) {
        float8 s0 = 0.0f, s1 = 0.0f, e0 = 0.0f, e1 = 0.0f;
        for (r = 0; r < rows; r++) {
            __global const act_t *row = x + x_off + (size_t)r * cols + c;
            float8 y0 = NNCL_LD8(row) - e0, y1 = NNCL_LD8(row + 8) - e1, t0 = s0 + y0, t1 = s1 + y1;
            e0 = (t0 - s0) - y0;
            e1 = (t1 - s1) - y1;
            s0 = t0;
            s1 = t1;
        }
        s0 = alpha * s0;
        s1 = alpha * s1;
        if (acc) {
            s0 += vload8(0, out + out_off + c);
            s1 += vload8(0, out + out_off + c + 8);
        }
        vstore8(s0, 0, out + out_off + c);
        vstore8(s1, 0, out + out_off + c + 8);
        return;
    }
    for (k = c; k < cols; k++) {
        float s = 0.0f, comp = 0.0f;
        for (r = 0; r < rows; r++) nncl_kahan_add(&s, &comp, NNCL_LD(x, x_off + (size_t)r * cols + k));
        out[out_off + k] = (acc ? out[out_off + k] : 0.0f) + alpha * s;
    }
}

/* Axis 1, out[r] over the columns: one 1-D group per row
 * (nncl__launch_rows). */
__kernel void nncl_sum_f32_axis1(__global const act_t *x, int x_off, __global act_t *out, int out_off, int rows,
                                 int cols, float alpha, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float s = 0.0f, comp = 0.0f;
    __global const act_t *row;
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return; /* uniform over the group */
    row = x + x_off + r * cols;
    for (c = lid; c < cols; c += step) nncl_kahan_add(&s, &comp, NNCL_LD(row, c));
    s = nncl_group_sum(buf, s);
    if (lid == 0) {
        float d = alpha * s;
        NNCL_ST(acc ? NNCL_LD(out, out_off + r) + d : d, out, out_off + r);
    }
}
