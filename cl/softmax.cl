/* softmax.cl - row-wise softmax and log-softmax over the last dimension and
 * their backward rules. One work-group per row (nncl__launch_rows): the
 * work-items stride over the row and combine through a local-memory tree, so
 * a row of any width (1 or 100000) is right. Buffers are followed by their
 * int element offsets; then rows, cols; then `acc` (1: add into dx).
 * Values and gradients in the storage type (act_t, cl/common.cl), the
 * row's maximum and sums fp32. */

/* y = softmax(x) or log_softmax(x) of one row, with the row maximum
 * subtracted first so that exp never overflows. */
void nncl_sm_forward(__global const act_t *x, __global act_t *y, int cols, int log_out, __local float *buf) {
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float m = -INFINITY, s = 0.0f, comp = 0.0f;
    for (c = lid; c < cols; c += step) m = fmax(m, NNCL_LD(x, c));
    m = nncl_group_max(buf, m);
    for (c = lid; c < cols; c += step) nncl_kahan_add(&s, &comp, exp(NNCL_LD(x, c) - m));
    s = nncl_group_sum(buf, s);
    if (log_out) {
        float ls = log(s);
        for (c = lid; c < cols; c += step) NNCL_ST((NNCL_LD(x, c) - m) - ls, y, c);
    } else {
        for (c = lid; c < cols; c += step) NNCL_ST(exp(NNCL_LD(x, c) - m) / s, y, c);
    }
}

/* (x, x_off, y, y_off, rows, cols); y may be x. */
__kernel void nncl_softmax_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int rows, int cols) {
    __local float buf[NNCL_RED_WG];
    size_t r = get_group_id(0);
    if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return; /* uniform over the group */
    nncl_sm_forward(x + x_off + r * cols, y + y_off + r * cols, cols, 0, buf);
}

__kernel void nncl_log_softmax_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int rows,
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
void nncl_sm_backward(__global const act_t *dy, __global const act_t *y, __global act_t *dx, int cols, int log_in,
                      int acc, __local float *buf) {
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    float s = 0.0f, comp = 0.0f;
    if (log_in)
        for (c = lid; c < cols; c += step) nncl_kahan_add(&s, &comp, NNCL_LD(dy, c));
    else
        for (c = lid; c < cols; c += step) nncl_kahan_add(&s, &comp, NNCL_LD(dy, c) * NNCL_LD(y, c));
    s = nncl_group_sum(buf, s);
    if (log_in && acc)
        for (c = lid; c < cols; c += step) NNCL_ST(NNCL_LD(dx, c) + NNCL_LD(dy, c) - exp(NNCL_LD(y, c)) * s, dx, c);
    else if (log_in)
        for (c = lid; c < cols; c += step) NNCL_ST(NNCL_LD(dy, c) - exp(NNCL_LD(y, c)) * s, dx, c);
    else if (acc)
        for (c = lid; c < cols; c += step) NNCL_ST(NNCL_LD(dx, c) + NNCL_LD(y, c) * (NNCL_LD(dy, c) - s), dx, c);
    else
        for (c = lid; c < cols; c += step) NNCL_ST(NNCL_LD(y, c) * (NNCL_LD(dy, c) - s), dx, c);
}

/* (dy, dy_off, y, y_off, dx, dx_off, rows, cols, acc) */
#define NNCL_SM_BACKWARD(NAME, LOG_IN)                                                                       \
    __kernel void NAME(__global const act_t *dy, int dy_off, __global const act_t *y, int y_off,             \
                       __global act_t *dx, int dx_off, int rows, int cols, int acc) {                         \
        __local float buf[NNCL_RED_WG];                                                                      \
        size_t r = get_group_id(0);                                                                          \
        if (r >= (size_t)rows || get_local_size(0) > NNCL_RED_WG) return;                                    \
        nncl_sm_backward(dy + dy_off + r * cols, y + y_off + r * cols, dx + dx_off + r * cols, cols, LOG_IN, acc, \
                         buf);                                                                               \
    }
NNCL_SM_BACKWARD(nncl_softmax_backward_f32, 0)
NNCL_SM_BACKWARD(nncl_log_softmax_backward_f32, 1)
