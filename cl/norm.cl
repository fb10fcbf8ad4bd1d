/* norm.cl - batch normalisation (statistics per channel over the batch and
 * the spatial positions of an [B, C, inner] layout), layer and RMS
 * normalisation (statistics per row over the last dimension), forward and
 * backward.
 * Reductions run in one work-group per channel or row (nncl__launch_rows),
 * Kahan-compensated per work-item, then a local-memory tree. Buffers are
 * followed by their int element offsets; `acc` 1 means add into the output.
 * The reduction kernels never return before a barrier: PoCL 3.1 (LLVM 15)
 * ran away in such kernels even with a uniform early return, so a group
 * past the end works on nothing instead, and the host (nncl__launch_rows,
 * nncl__launch_cols) never makes a group larger than NNCL_RED_WG.
 * Both take activations and their weights in the storage type (act_t,
 * cl/common.cl); their statistics, running statistics and weight
 * gradients stay fp32. */


/* Element k of channel c in an [B, C, inner] tensor, k in [0, B*inner). */
int nncl_bn_index(int k, int c, int C, int inner) {
    int b = k / inner;
    return (b * C + c) * inner + (k - b * inner);
}

/* ------------------------------------------------------------- batch norm */

/* Training, one work-group per channel c. aux: [mean C][invstd C][sum dy
 * C][sum dy*xhat C]. The batch mean and biased variance normalise; the
 * running statistics (st: [mean C][var C]) move by momentum towards the
 * batch mean and the unbiased variance (left alone when a channel has one
 * value, where that is undefined). */
__kernel void nncl_batchnorm_stats_f32(__global const act_t *x, int x_off, __global float *aux, int aux_off,
                                       __global float *st, int st_off, int B, int C, int inner, float momentum,
                                       float eps) {
    __local float buf[NNCL_RED_WG];
    int c = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0);
    int count = c < C ? B * inner : 0, k;
    float s = 0.0f, comp = 0.0f, mean, var;
    for (k = lid; k < count; k += step) nncl_kahan_add(&s, &comp, NNCL_LD(x, x_off + nncl_bn_index(k, c, C, inner)));
    mean = nncl_group_sum(buf, s) / (float)count;
    s = 0.0f;
    comp = 0.0f;
    for (k = lid; k < count; k += step) {
        float d = NNCL_LD(x, x_off + nncl_bn_index(k, c, C, inner)) - mean;
        nncl_kahan_add(&s, &comp, d * d);
    }
    var = nncl_group_sum(buf, s) / (float)count;
    if (lid == 0 && c < C) {
        aux[aux_off + c] = mean;
        aux[aux_off + C + c] = 1.0f / sqrt(var + eps);
        st[st_off + c] = (1.0f - momentum) * st[st_off + c] + momentum * mean;
        if (count > 1)
            st[st_off + C + c] = (1.0f - momentum) * st[st_off + C + c] +
                                 momentum * (var * ((float)count / (float)(count - 1)));
    }
}

/* Evaluation, one work-item per channel: the running statistics normalise. */
__kernel void nncl_batchnorm_eval_stats_f32(__global float *aux, int aux_off, __global const float *st, int st_off,
                                            int C, float eps) {
    int c = (int)get_global_id(0);
    if (c < C) {
        aux[aux_off + c] = st[st_off + c];
        aux[aux_off + C + c] = 1.0f / sqrt(st[st_off + C + c] + eps);
    }
}

/* y = (x - mean[c]) * invstd[c] * w[c] + b[c], one work-item per element. */
__kernel void nncl_batchnorm_apply_f32(__global const act_t *x, int x_off, __global const float *aux, int aux_off,
                                       __global const act_t *w, int w_off, __global const act_t *b, int b_off,
                                       __global act_t *y, int y_off, int C, int inner, int n) {
    int i = (int)get_global_id(0);
    if (i < n) {
        int c = (i / inner) % C;
        NNCL_ST((NNCL_LD(x, x_off + i) - aux[aux_off + c]) * aux[aux_off + C + c] * NNCL_LD(w, w_off + c) +
                    NNCL_LD(b, b_off + c),
                y, y_off + i);
    }
}

/* One work-group per channel: sum dy and sum dy*xhat into aux (for dx), and
 * db[c] (+)= sum dy, dw[c] (+)= sum dy*xhat where wanted. */
__kernel void nncl_batchnorm_backward_f32_params(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                            __global float *aux, int aux_off, __global float *dw, int dw_off,
                                            int want_w, int acc_w, __global float *db, int db_off, int want_b,
                                            int acc_b, int B, int C, int inner) {
    __local float buf[NNCL_RED_WG];
    int c = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0);
    int count = c < C ? B * inner : 0, k;
    float s1 = 0.0f, c1 = 0.0f, s2 = 0.0f, c2 = 0.0f, mean, inv;
    mean = aux[aux_off + min(c, C - 1)];
    inv = aux[aux_off + C + min(c, C - 1)];
    for (k = lid; k < count; k += step) {
        int i = nncl_bn_index(k, c, C, inner);
        float g = NNCL_LD(dy, dy_off + i);
        nncl_kahan_add(&s1, &c1, g);
        nncl_kahan_add(&s2, &c2, g * (NNCL_LD(x, x_off + i) - mean) * inv);
    }
    s1 = nncl_group_sum(buf, s1);
    s2 = nncl_group_sum(buf, s2);
    if (lid == 0 && c < C) {
        aux[aux_off + 2 * C + c] = s1;
        aux[aux_off + 3 * C + c] = s2;
        if (want_w) dw[dw_off + c] = (acc_w ? dw[dw_off + c] : 0.0f) + s2;
        if (want_b) db[db_off + c] = (acc_b ? db[db_off + c] : 0.0f) + s1;
    }
}

/* Training: dx = w invstd (dy - (sum dy + xhat sum dy*xhat) / count), the
 * gradient through the batch statistics; evaluation: dx = w invstd dy. */
__kernel void nncl_batchnorm_backward_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                    __global const float *aux, int aux_off, __global const act_t *w, int w_off,
                                    __global act_t *dx, int dx_off, int acc, int C, int inner, int n, int count,
                                    int training) {
    int i = (int)get_global_id(0);
    if (i < n) {
        int c = (i / inner) % C;
        float inv = aux[aux_off + C + c], g = NNCL_LD(dy, dy_off + i), d;
        if (training) {
            float xhat = (NNCL_LD(x, x_off + i) - aux[aux_off + c]) * inv;
            g -= (aux[aux_off + 2 * C + c] + xhat * aux[aux_off + 3 * C + c]) / (float)count;
        }
        d = NNCL_LD(w, w_off + c) * inv * g;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* ------------------------------------------------------------- layer norm */

/* One work-group per row of D: y = (x - mean) invstd w + b (b when has_b);
 * aux[2r] = mean, aux[2r+1] = invstd (biased variance, as PyTorch). */
__kernel void nncl_layernorm_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                                     __global const act_t *b, int b_off, int has_b, __global act_t *y, int y_off,
                                     __global float *aux, int aux_off, int rows, int D, float eps) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0; /* a group past the end works on nothing */
    float s = 0.0f, comp = 0.0f, mean, inv;
    __global const act_t *xr = x + x_off + (size_t)min(r, rows - 1) * D;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, NNCL_LD(xr, d));
    mean = nncl_group_sum(buf, s) / (float)D;
    s = 0.0f;
    comp = 0.0f;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, (NNCL_LD(xr, d) - mean) * (NNCL_LD(xr, d) - mean));
    inv = 1.0f / sqrt(nncl_group_sum(buf, s) / (float)D + eps);
    for (d = lid; d < n; d += step)
        NNCL_ST((NNCL_LD(xr, d) - mean) * inv * NNCL_LD(w, w_off + d) + (has_b ? NNCL_LD(b, b_off + d) : 0.0f), y,
                y_off + (size_t)r * D + d);
    if (lid == 0 && n) {
        aux[aux_off + 2 * r] = mean;
        aux[aux_off + 2 * r + 1] = inv;
    }
}

/* One work-group per row: with g = dy w,
 * dx = invstd (g - (sum g + xhat sum g*xhat) / D). */
__kernel void nncl_layernorm_backward_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                    __global const act_t *w, int w_off, __global const float *aux, int aux_off,
                                    __global act_t *dx, int dx_off, int acc, int rows, int D) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0, rr = min(r, rows - 1); /* a group past the end works on nothing */
    float s1 = 0.0f, c1 = 0.0f, s2 = 0.0f, c2 = 0.0f;
    __global const act_t *xr = x + x_off + (size_t)rr * D, *gr = dy + dy_off + (size_t)rr * D;
    float mean = aux[aux_off + 2 * rr], inv = aux[aux_off + 2 * rr + 1];
    for (d = lid; d < n; d += step) {
        float g = NNCL_LD(gr, d) * NNCL_LD(w, w_off + d);
        nncl_kahan_add(&s1, &c1, g);
        nncl_kahan_add(&s2, &c2, g * (NNCL_LD(xr, d) - mean) * inv);
    }
    s1 = nncl_group_sum(buf, s1) / (float)D;
    s2 = nncl_group_sum(buf, s2) / (float)D;
    for (d = lid; d < n; d += step) {
        float xhat = (NNCL_LD(xr, d) - mean) * inv;
        float v = inv * (NNCL_LD(gr, d) * NNCL_LD(w, w_off + d) - s1 - xhat * s2);
        size_t i = (size_t)dx_off + (size_t)r * D + d;
        NNCL_ST(acc ? NNCL_LD(dx, i) + v : v, dx, i);
    }
}

/* dw[d] (+)= sum over rows of dy xhat, db[d] (+)= sum of dy: 2-D groups
 * (nncl__launch_cols), columns along dimension 0, row lanes along 1. */
__kernel void nncl_layernorm_backward_f32_params(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                      __global const float *aux, int aux_off, __global float *dw, int dw_off,
                                      int want_w, int acc_w, __global float *db, int db_off, int want_b, int acc_b,
                                      int rows, int D) {
    __local float buf[NNCL_RED_WG];
    int d = (int)get_global_id(0), col = (int)get_local_id(0), lane = (int)get_local_id(1);
    int nx = (int)get_local_size(0), ny = (int)get_local_size(1), r;
    float sw = 0.0f, cw = 0.0f, sb = 0.0f, cb = 0.0f;
    if (d < D) /* padding work-items add zeros but still meet every barrier */
        for (r = lane; r < rows; r += ny) {
            size_t i = (size_t)r * D + d;
            float g = NNCL_LD(dy, dy_off + i);
            nncl_kahan_add(&sb, &cb, g);
            nncl_kahan_add(&sw, &cw, g * (NNCL_LD(x, x_off + i) - aux[aux_off + 2 * r]) * aux[aux_off + 2 * r + 1]);
        }
    sw = nncl_group_reduce(buf, sw, col, lane, nx, ny, 0);
    sb = nncl_group_reduce(buf, sb, col, lane, nx, ny, 0);
    if (lane == 0 && d < D) {
        if (want_w) dw[dw_off + d] = (acc_w ? dw[dw_off + d] : 0.0f) + sw;
        if (want_b) db[db_off + d] = (acc_b ? db[db_off + d] : 0.0f) + sb;
    }
}

/* ------------------------------------------------------------- RMS norm */

/* One work-group per row of D: y = x invrms w, invrms = 1 / sqrt(mean(x^2)
 * + eps) into aux[r]. */
__kernel void nncl_rmsnorm_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                               __global act_t *y, int y_off, __global float *aux, int aux_off, int rows, int D,
                               float eps) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0; /* a group past the end works on nothing */
    float s = 0.0f, comp = 0.0f, inv;
    __global const act_t *xr = x + x_off + (size_t)min(r, rows - 1) * D;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, NNCL_LD(xr, d) * NNCL_LD(xr, d));
    inv = 1.0f / sqrt(nncl_group_sum(buf, s) / (float)D + eps);
    for (d = lid; d < n; d += step) NNCL_ST(NNCL_LD(xr, d) * inv * NNCL_LD(w, w_off + d), y, y_off + (size_t)r * D + d);
    if (lid == 0 && n) aux[aux_off + r] = inv;
}

/* One work-group per row: with g = dy w and xhat = x invrms,
 * dx = invrms (g - xhat sum(g xhat) / D). */
__kernel void nncl_rmsnorm_backward_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                        __global const act_t *w, int w_off, __global const float *aux, int aux_off,
                                        __global act_t *dx, int dx_off, int acc, int rows, int D) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0, rr = min(r, rows - 1);
    float s = 0.0f, comp = 0.0f, inv = aux[aux_off + rr];
    __global const act_t *xr = x + x_off + (size_t)rr * D, *gr = dy + dy_off + (size_t)rr * D;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, NNCL_LD(gr, d) * NNCL_LD(w, w_off + d) * NNCL_LD(xr, d));
    s = nncl_group_sum(buf, s) * inv * inv / (float)D;
    for (d = lid; d < n; d += step) {
        float v = inv * (NNCL_LD(gr, d) * NNCL_LD(w, w_off + d) - NNCL_LD(xr, d) * s);
        size_t i = (size_t)dx_off + (size_t)r * D + d;
        NNCL_ST(acc ? NNCL_LD(dx, i) + v : v, dx, i);
    }
}

/* dw[d] (+)= sum over rows of dy x invrms: 2-D groups (nncl__launch_cols)
 * as nncl_layernorm_backward_f32_params. */
__kernel void nncl_rmsnorm_backward_f32_params(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                               __global const float *aux, int aux_off, __global float *dw, int dw_off,
                                               int acc, int rows, int D) {
    __local float buf[NNCL_RED_WG];
    int d = (int)get_global_id(0), col = (int)get_local_id(0), lane = (int)get_local_id(1);
    int nx = (int)get_local_size(0), ny = (int)get_local_size(1), r;
    float sw = 0.0f, cw = 0.0f;
    if (d < D) /* padding work-items add zeros but still meet every barrier */
        for (r = lane; r < rows; r += ny) {
            size_t i = (size_t)r * D + d;
            nncl_kahan_add(&sw, &cw, NNCL_LD(dy, dy_off + i) * NNCL_LD(x, x_off + i) * aux[aux_off + r]);
        }
    sw = nncl_group_reduce(buf, sw, col, lane, nx, ny, 0);
    if (lane == 0 && d < D) dw[dw_off + d] = (acc ? dw[dw_off + d] : 0.0f) + sw;
}
