/* softmax.cl - row-wise softmax and log-softmax over the last dimension and
 * their backward rules. One work-group per row (nncl__launch_rows): the
 * work-items stride over the row and combine through a local-memory tree, so
 * a row of any width (1 or 100000) is right. Buffers are followed by their
 * int element offsets; then rows, cols; then `acc` (1: add into dx). */

/* Local arrays hold one float per work-item: groups never exceed this
 * (NNCL_RED_WG in src/internal.h). */
#ifndef NNCL_RED_WG
#define NNCL_RED_WG 256
#endif

/* Sum (or maximum) of v over the work-group, returned to every work-item.
 * Every work-item must call it; any group size up to NNCL_RED_WG. The tree
 * pairs element k with k + ceil(s/2), so it also works for s not a power of
 * two; summing in a tree keeps the rounding error at log2(s) steps. */
float nncl_sm_reduce(__local float *buf, float v, int is_max) {
    int lid = (int)get_local_id(0), s = (int)get_local_size(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    while (s > 1) {
        int h = (s + 1) >> 1;
        if (lid < s - h) buf[lid] = is_max ? fmax(buf[lid], buf[lid + h]) : buf[lid] + buf[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
        s = h;
    }
    v = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* buf is reused by the next call */
    return v;
}

/* Kahan-compensated running sum of one work-item's share of a row. */
void nncl_sm_kahan(float *sum, float *comp, float v) {
    float yk = v - *comp, t = *sum + yk;
    *comp = (t - *sum) - yk;
    *sum = t;
}

/* y = softmax(x) or log_softmax(x) of one row, with the row maximum
 * subtracted first so that exp never overflows. */
void nncl_sm_forward(__global const float *x, __global float *y, int cols, int log_out, __local float *buf) {
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float m = -INFINITY, s = 0.0f, comp = 0.0f;
    for (c = lid; c < cols; c += step) m = fmax(m, x[c]);
    m = nncl_sm_reduce(buf, m, 1);
    for (c = lid; c < cols; c += step) nncl_sm_kahan(&s, &comp, exp(x[c] - m));
    s = nncl_sm_reduce(buf, s, 0);
    if (log_out) {
        float ls = log(s);
        for (c = lid; c < cols; c += step) y[c] = (x[c] - m) - ls;
    } else {
        for (c = lid; c < cols; c += step) y[c] = exp(x[c] - m) / s;
    }
}

/* (x, x_off, y, y_off, rows, cols); y may be x. */
__kernel void nncl_softmax_f32(__global const float *x, int x_off, __global float *y, int y_off, int rows, int cols) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return; /* uniform over the group */
    nncl_sm_forward(x + x_off + r * cols, y + y_off + r * cols, cols, 0, buf);
}

__kernel void nncl_log_softmax_f32(__global const float *x, int x_off, __global float *y, int y_off, int rows,
                                   int cols) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return;
    nncl_sm_forward(x + x_off + r * cols, y + y_off + r * cols, cols, 1, buf);
}

/* Backward of one row from the forward output y:
 * softmax:     dx = y * (dy - sum(dy * y))
 * log-softmax: dx = dy - exp(y) * sum(dy)
 * Each work-item reads and writes the same elements, so dx may be dy. The
 * flags are tested outside the loops: PoCL 3.1's loop vectoriser crashed on
 * a select inside a loop after a barrier when cols is not a multiple of the
 * group size. */
void nncl_sm_backward(__global const float *dy, __global const float *y, __global float *dx, int cols, int log_in,
                      int acc, __local float *buf) {
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float s = 0.0f, comp = 0.0f;
    if (log_in)
        for (c = lid; c < cols; c += step) nncl_sm_kahan(&s, &comp, dy[c]);
    else
        for (c = lid; c < cols; c += step) nncl_sm_kahan(&s, &comp, dy[c] * y[c]);
    s = nncl_sm_reduce(buf, s, 0);
    if (log_in && acc)
        for (c = lid; c < cols; c += step) dx[c] += dy[c] - exp(y[c]) * s;
    else if (log_in)
        for (c = lid; c < cols; c += step) dx[c] = dy[c] - exp(y[c]) * s;
    else if (acc)
        for (c = lid; c < cols; c += step) dx[c] += y[c] * (dy[c] - s);
    else
        for (c = lid; c < cols; c += step) dx[c] = y[c] * (dy[c] - s);
}

/* (dy, dy_off, y, y_off, dx, dx_off, rows, cols, acc) */
__kernel void nncl_softmax_backward_f32(__global const float *dy, int dy_off, __global const float *y, int y_off,
                                        __global float *dx, int dx_off, int rows, int cols, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return;
    nncl_sm_backward(dy + dy_off + r * cols, y + y_off + r * cols, dx + dx_off + r * cols, cols, 0, acc, buf);
}

__kernel void nncl_log_softmax_backward_f32(__global const float *dy, int dy_off, __global const float *y, int y_off,
                                            __global float *dx, int dx_off, int rows, int cols, int acc) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return;
    nncl_sm_backward(dy + dy_off + r * cols, y + y_off + r * cols, dx + dx_off + r * cols, cols, 1, acc, buf);
}
