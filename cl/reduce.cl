/* reduce.cl - sums over the rows or the columns of a [rows, cols] view:
 * out = acc * out + alpha * sum, which serves sum (alpha 1), mean (alpha
 * 1/count) and the backward of a broadcast row-vector add (axis 0, alpha 1,
 * or -1 for sub). Each work-item sums its share with Kahan compensation, then
 * the group combines the shares in a local-memory tree, so thousands of rows
 * lose no more than a few float roundings. Arguments:
 * (x, x_off, out, out_off, rows, cols, alpha, acc). */

#ifndef NNCL_RED_WG
#define NNCL_RED_WG 256 /* NNCL_RED_WG in src/internal.h */
#endif

void nncl_red_kahan(float *sum, float *comp, float v) {
    float yk = v - *comp, t = *sum + yk;
    *comp = (t - *sum) - yk;
    *sum = t;
}

/* Sums v over the ny lanes of each of the nx columns of a group, in a tree
 * (buf[lane * nx + col]); returns the column's total. Every work-item must
 * call it; any ny, also not a power of two. */
float nncl_red_tree(__local float *buf, float v, int col, int lane, int nx, int ny) {
    int s = ny;
    buf[lane * nx + col] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    while (s > 1) {
        int h = (s + 1) >> 1;
        if (lane < s - h) buf[lane * nx + col] += buf[(lane + h) * nx + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        s = h;
    }
    return buf[col];
}

/* Axis 0, out[c] over the rows: 2-D groups (nncl__launch_cols), columns
 * along dimension 0 so that neighbouring work-items read neighbouring
 * floats, row lanes along dimension 1 striding over the rows. */
__kernel void nncl_sum_f32_axis0(__global const float *x, int x_off, __global float *out, int out_off, int rows,
                                 int cols, float alpha, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t c = get_global_id(0);
    int col = (int)get_local_id(0), lane = (int)get_local_id(1);
    int nx = (int)get_local_size(0), ny = (int)get_local_size(1), r;
    float s = 0.0f, comp = 0.0f;
    if (get_local_size(0) * get_local_size(1) > NNCL_RED_WG) return; /* uniform: the host never does this */
    if (c < (size_t)cols) /* padding work-items add zeros but still meet every barrier */
        for (r = lane; r < rows; r += ny) nncl_red_kahan(&s, &comp, x[x_off + (size_t)r * cols + c]);
    s = nncl_red_tree(buf, s, col, lane, nx, ny);
    if (lane == 0 && c < (size_t)cols) {
        float d = alpha * s;
        out[out_off + c] = acc ? out[out_off + c] + d : d;
    }
}

/* Axis 1, out[r] over the columns: one 1-D group per row
 * (nncl__launch_rows). */
__kernel void nncl_sum_f32_axis1(__global const float *x, int x_off, __global float *out, int out_off, int rows,
                                 int cols, float alpha, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float s = 0.0f, comp = 0.0f;
    __global const float *row;
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return; /* uniform over the group */
    row = x + x_off + r * cols;
    for (c = lid; c < cols; c += step) nncl_red_kahan(&s, &comp, row[c]);
    s = nncl_red_tree(buf, s, 0, lid, 1, step);
    if (lid == 0) {
        float d = alpha * s;
        out[out_off + r] = acc ? out[out_off + r] + d : d;
    }
}
