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

/* The same on CPU-like devices (nncl__row_kernels): one work-item per row,
 * 8 values at a time, no barrier (a work-group of PoCL runs its
 * work-items one after the other on one core, and values kept across a
 * barrier spill). Arguments as above. */
float nncl_sm_hsum8(float8 v) { return (v.s0 + v.s1) + (v.s2 + v.s3) + ((v.s4 + v.s5) + (v.s6 + v.s7)); }

void nncl_sm_forward_row(__global const act_t *x, __global act_t *y, int cols, int log_out) {
    float8 m8 = -INFINITY, m8b = -INFINITY, s8 = 0.0f, s8b = 0.0f;
    float m = -INFINITY, s = 0.0f, ls;
    int c;
    /* two accumulators a reduction: one would wait on its own latency */
    for (c = 0; c + 16 <= cols; c += 16) {
        m8 = fmax(m8, NNCL_LD8(x + c));
        m8b = fmax(m8b, NNCL_LD8(x + c + 8));
    }
    m8 = fmax(m8, m8b);
    for (; c + 8 <= cols; c += 8) m8 = fmax(m8, NNCL_LD8(x + c));
    for (; c < cols; c++) m = fmax(m, NNCL_LD(x, c));
    m = fmax(fmax(fmax(m8.s0, m8.s1), fmax(m8.s2, m8.s3)), fmax(fmax(m8.s4, m8.s5), fmax(fmax(m8.s6, m8.s7), m)));
#if !(defined(NNCL_STORE) && NNCL_STORE)
    if (!log_out) {
        /* fp32: exp once a value, kept in y and divided by the sum after
         * (the exponentials bound this kernel, not memory; a 16-bit y would
         * round them before the division) */
        for (c = 0; c + 16 <= cols; c += 16) {
            float8 e = exp(NNCL_LD8(x + c) - m), f = exp(NNCL_LD8(x + c + 8) - m);
            NNCL_ST8(e, y + c);
            NNCL_ST8(f, y + c + 8);
            s8 += e;
            s8b += f;
        }
        s8 += s8b;
        for (; c + 8 <= cols; c += 8) {
            float8 e = exp(NNCL_LD8(x + c) - m);
            NNCL_ST8(e, y + c);
            s8 += e;
        }
        for (; c < cols; c++) {
            float e = exp(NNCL_LD(x, c) - m);
            NNCL_ST(e, y, c);
            s += e;
        }
        s += nncl_sm_hsum8(s8);
        for (c = 0; c + 8 <= cols; c += 8) NNCL_ST8(NNCL_LD8(y + c) / s, y + c);
        for (; c < cols; c++) NNCL_ST(NNCL_LD(y, c) / s, y, c);
        return;
    }
#endif
    for (c = 0; c + 16 <= cols; c += 16) {
        s8 += exp(NNCL_LD8(x + c) - m);
        s8b += exp(NNCL_LD8(x + c + 8) - m);
    }
    s8 += s8b;
    for (; c + 8 <= cols; c += 8) s8 += exp(NNCL_LD8(x + c) - m);
    for (; c < cols; c++) s += exp(NNCL_LD(x, c) - m);
    s += nncl_sm_hsum8(s8);
    if (log_out) {
        ls = log(s);
        for (c = 0; c + 8 <= cols; c += 8) NNCL_ST8((NNCL_LD8(x + c) - m) - ls, y + c);
        for (; c < cols; c++) NNCL_ST((NNCL_LD(x, c) - m) - ls, y, c);
    } else {
        for (c = 0; c + 8 <= cols; c += 8) NNCL_ST8(exp(NNCL_LD8(x + c) - m) / s, y + c);
        for (; c < cols; c++) NNCL_ST(exp(NNCL_LD(x, c) - m) / s, y, c);
    }
}

__kernel void nncl_softmax_f32_rows(__global const act_t *x, int x_off, __global act_t *y, int y_off, int rows,
                                    int cols) {
    size_t r = get_global_id(0);
    if (r < (size_t)rows) nncl_sm_forward_row(x + x_off + r * cols, y + y_off + r * cols, cols, 0);
}

__kernel void nncl_log_softmax_f32_rows(__global const act_t *x, int x_off, __global act_t *y, int y_off, int rows,
                                        int cols) {
    size_t r = get_global_id(0);
    if (r < (size_t)rows) nncl_sm_forward_row(x + x_off + r * cols, y + y_off + r * cols, cols, 1);
}

/* EXPR of the row's sum s and of one value's dy, y (g, v) and dx (o). */
#define NNCL_SM_ROW_LOOP(EXPR)                                                                               \
    for (c = 0; c + 8 <= cols; c += 8) {                                                                     \
        float8 g = NNCL_LD8(dy + c), v = NNCL_LD8(y + c), o = acc ? NNCL_LD8(dx + c) : (float8)0.0f;          \
        NNCL_ST8(EXPR, dx + c);                                                                              \
    }                                                                                                        \
    for (; c < cols; c++) {                                                                                  \
        float g = NNCL_LD(dy, c), v = NNCL_LD(y, c), o = acc ? NNCL_LD(dx, c) : 0.0f;                         \
        NNCL_ST(EXPR, dx, c);                                                                                \
    }
void nncl_sm_backward_row(__global const act_t *dy, __global const act_t *y, __global act_t *dx, int cols,
                          int log_in, int acc) {
    float8 s8 = 0.0f, s8b = 0.0f;
    float s = 0.0f;
    int c;
    if (log_in) {
        for (c = 0; c + 16 <= cols; c += 16) {
            s8 += NNCL_LD8(dy + c);
            s8b += NNCL_LD8(dy + c + 8);
        }
        s8 += s8b;
        for (; c + 8 <= cols; c += 8) s8 += NNCL_LD8(dy + c);
        for (; c < cols; c++) s += NNCL_LD(dy, c);
    } else {
        for (c = 0; c + 16 <= cols; c += 16) {
            s8 += NNCL_LD8(dy + c) * NNCL_LD8(y + c);
            s8b += NNCL_LD8(dy + c + 8) * NNCL_LD8(y + c + 8);
        }
        s8 += s8b;
        for (; c + 8 <= cols; c += 8) s8 += NNCL_LD8(dy + c) * NNCL_LD8(y + c);
        for (; c < cols; c++) s += NNCL_LD(dy, c) * NNCL_LD(y, c);
    }
    s += nncl_sm_hsum8(s8);
    if (log_in) {
        NNCL_SM_ROW_LOOP(o + (g - exp(v) * s))
    } else {
        NNCL_SM_ROW_LOOP(o + v * (g - s))
    }
}

#define NNCL_SM_BACKWARD_ROWS(NAME, LOG_IN)                                                                  \
    __kernel void NAME(__global const act_t *dy, int dy_off, __global const act_t *y, int y_off,             \
                       __global act_t *dx, int dx_off, int rows, int cols, int acc) {                         \
        size_t r = get_global_id(0);                                                                         \
        if (r < (size_t)rows)                                                                                \
            nncl_sm_backward_row(dy + dy_off + r * cols, y + y_off + r * cols, dx + dx_off + r * cols, cols,  \
                                 LOG_IN, acc);                                                               \
    }
NNCL_SM_BACKWARD_ROWS(nncl_softmax_backward_f32_rows, 0)
NNCL_SM_BACKWARD_ROWS(nncl_log_softmax_backward_f32_rows, 1)
