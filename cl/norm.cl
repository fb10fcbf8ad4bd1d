/* norm.cl - batch normalisation (statistics per channel over the batch and
 * the spatial positions of an [B, C, inner] layout), layer and RMS
 * normalisation (statistics per row over the last dimension), forward and
 * backward.
 * Batch norm's streaming kernels (the default) are described at them;
 * the other reductions run in one work-group per channel or row (nncl__launch_rows),
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

/* Streaming batch norm: the statistics in one pass over x (partial sums
 * of a channel's images per work-item, then one work-item per channel
 * merges them), apply and the input gradient one pass each, 8 values at a
 * time. No barriers: CPU drivers keep such loops in vector registers,
 * where values live across a barrier are spilled. Partials: part[(c P +
 * q) 2 + {0,1}] for channel c, q < P over images [q B / P, (q+1) B / P).
 * The statistics sum x - x[0, c, 0] and its square: shifted by a value of
 * the channel, the variance E[d^2] - E[d]^2 cancels little. The partial
 * sums keep two float8 accumulators per sum (16 values a step): one
 * would be bound by the latency of its adds, not by memory. */

/* Work-item q C + c: sum and sum of squares of x - K over its images. */
__kernel void nncl_batchnorm_partial_f32(__global const act_t *x, int x_off, __global float *part, int part_off,
                                         int B, int C, int inner, int P) {
    int gid = (int)get_global_id(0), c, q, b, b1, k;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f, K;
    if (gid >= C * P) return;
    q = gid / C; /* image-major: consecutive work-items read consecutive rows */
    c = gid - q * C;
    K = NNCL_LD(x, x_off + c * inner);
    b1 = (int)(((long)(q + 1) * B) / P);
    for (b = (int)(((long)q * B) / P); b < b1; b++) {
        __global const act_t *r = x + x_off + ((size_t)b * C + c) * inner;
        float8 v8 = 0.0f, w8 = 0.0f, v8b = 0.0f, w8b = 0.0f;
        float v = 0.0f, w = 0.0f;
        for (k = 0; k + 16 <= inner; k += 16) {
            float8 d = NNCL_LD8(r + k) - K, e = NNCL_LD8(r + k + 8) - K;
            v8 += d;
            w8 += d * d;
            v8b += e;
            w8b += e * e;
        }
        v8 += v8b;
        w8 += w8b;
        for (; k + 8 <= inner; k += 8) {
            float8 d = NNCL_LD8(r + k) - K;
            v8 += d;
            w8 += d * d;
        }
        for (; k < inner; k++) {
            float d = NNCL_LD(r, k) - K;
            v += d;
            w += d * d;
        }
        v += (v8.s0 + v8.s1) + (v8.s2 + v8.s3) + ((v8.s4 + v8.s5) + (v8.s6 + v8.s7));
        w += (w8.s0 + w8.s1) + (w8.s2 + w8.s3) + ((w8.s4 + w8.s5) + (w8.s6 + w8.s7));
        nncl_kahan_add(&s, &cs, v);
        nncl_kahan_add(&s2, &cs2, w);
    }
    part[part_off + 2 * (c * P + q)] = s;
    part[part_off + 2 * (c * P + q) + 1] = s2;
}

/* One work-item per channel: merges its P partials into aux's mean and
 * invstd and moves the running statistics (as nncl_batchnorm_stats_f32). */
__kernel void nncl_batchnorm_merge_f32(__global const act_t *x, int x_off, __global const float *part, int part_off,
                                       __global float *aux, int aux_off, __global float *st, int st_off, int C,
                                       int inner, int P, int count, float momentum, float eps) {
    int c = (int)get_global_id(0), q;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f, m, var;
    if (c >= C) return;
    for (q = 0; q < P; q++) {
        nncl_kahan_add(&s, &cs, part[part_off + 2 * (c * P + q)]);
        nncl_kahan_add(&s2, &cs2, part[part_off + 2 * (c * P + q) + 1]);
    }
    m = s / (float)count;
    var = fmax(s2 / (float)count - m * m, 0.0f);
    m += NNCL_LD(x, x_off + c * inner);
    aux[aux_off + c] = m;
    aux[aux_off + C + c] = 1.0f / sqrt(var + eps);
    st[st_off + c] = (1.0f - momentum) * st[st_off + c] + momentum * m;
    if (count > 1)
        st[st_off + C + c] = (1.0f - momentum) * st[st_off + C + c] + momentum * (var * ((float)count / (float)(count - 1)));
}

/* Work-item q C + c: sum dy and sum dy * xhat over its images. */
__kernel void nncl_batchnorm_grad_partial_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                              __global const float *aux, int aux_off, __global float *part,
                                              int part_off, int B, int C, int inner, int P) {
    int gid = (int)get_global_id(0), c, q, b, b1, k;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f, mean;
    if (gid >= C * P) return;
    q = gid / C; /* image-major: consecutive work-items read consecutive rows */
    c = gid - q * C;
    mean = aux[aux_off + c];
    b1 = (int)(((long)(q + 1) * B) / P);
    for (b = (int)(((long)q * B) / P); b < b1; b++) {
        size_t o = ((size_t)b * C + c) * inner;
        __global const act_t *xr = x + x_off + o, *gr = dy + dy_off + o;
        float8 v8 = 0.0f, w8 = 0.0f, v8b = 0.0f, w8b = 0.0f;
        float v = 0.0f, w = 0.0f;
        for (k = 0; k + 16 <= inner; k += 16) { /* as nncl_batchnorm_backward_f32_actpartial's BNA_PARTIAL_LOOP */
            float8 g = NNCL_LD8(gr + k), h = NNCL_LD8(gr + k + 8);
            v8 += g;
            w8 += g * (NNCL_LD8(xr + k) - mean);
            v8b += h;
            w8b += h * (NNCL_LD8(xr + k + 8) - mean);
        }
        v8 += v8b;
        w8 += w8b;
        for (; k + 8 <= inner; k += 8) {
            float8 g = NNCL_LD8(gr + k);
            v8 += g;
            w8 += g * (NNCL_LD8(xr + k) - mean);
        }
        for (; k < inner; k++) {
            float g = NNCL_LD(gr, k);
            v += g;
            w += g * (NNCL_LD(xr, k) - mean);
        }
        v += (v8.s0 + v8.s1) + (v8.s2 + v8.s3) + ((v8.s4 + v8.s5) + (v8.s6 + v8.s7));
        w += (w8.s0 + w8.s1) + (w8.s2 + w8.s3) + ((w8.s4 + w8.s5) + (w8.s6 + w8.s7));
        nncl_kahan_add(&s, &cs, v);
        nncl_kahan_add(&s2, &cs2, w);
    }
    part[part_off + 2 * (c * P + q)] = s;
    part[part_off + 2 * (c * P + q) + 1] = s2 * aux[aux_off + C + c];
}

/* One work-item per channel: the sums of its P partials into aux (sum dy,
 * sum dy*xhat) and the weight and bias gradients where wanted (x and dy
 * unused: the arguments of nncl_batchnorm_backward_f32_params). */
__kernel void nncl_batchnorm_grad_merge_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                            __global float *aux, int aux_off, __global float *dw, int dw_off,
                                            int want_w, int acc_w, __global float *db, int db_off, int want_b,
                                            int acc_b, __global const float *part, int part_off, int C, int P) {
    int c = (int)get_global_id(0), q;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f;
    if (c >= C) return;
    for (q = 0; q < P; q++) {
        nncl_kahan_add(&s, &cs, part[part_off + 2 * (c * P + q)]);
        nncl_kahan_add(&s2, &cs2, part[part_off + 2 * (c * P + q) + 1]);
    }
    aux[aux_off + 2 * C + c] = s;
    aux[aux_off + 3 * C + c] = s2;
    if (want_w) dw[dw_off + c] = (acc_w ? dw[dw_off + c] : 0.0f) + s2;
    if (want_b) db[db_off + c] = (acc_b ? db[db_off + c] : 0.0f) + s;
}

/* y = x a + s, a = invstd w, s = b - mean a; work-item r nch + q: values
 * [q chunk, (q + 1) chunk) of row r = b C + c (as the input gradient). */
__kernel void nncl_batchnorm_apply_f32_vec(__global const act_t *x, int x_off, __global const float *aux, int aux_off,
                                           __global const act_t *w, int w_off, __global const act_t *b, int b_off,
                                           __global act_t *y, int y_off, int C, int inner, int rows, int nch,
                                           int chunk) {
    int gid = (int)get_global_id(0), r, lo, c, k, hi;
    float a, sh;
    __global const act_t *xr;
    __global act_t *yr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    c = r % C;
    nncl_bn_affine(aux, aux_off, w, w_off, b, b_off, C, c, &a, &sh);
    xr = x + x_off + (size_t)r * inner;
    yr = y + y_off + (size_t)r * inner;
    for (k = lo; k + 8 <= hi; k += 8) NNCL_ST8(NNCL_LD8(xr + k) * a + sh, yr + k);
    for (; k < hi; k++) NNCL_ST(NNCL_LD(xr, k) * a + sh, yr, k);
}

/* Training: dx = w invstd (dy - (sum dy + xhat sum dy*xhat) / count);
 * evaluation: dx = w invstd dy. */
__kernel void nncl_batchnorm_backward_f32_vec(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                              __global const float *aux, int aux_off, __global const act_t *w, int w_off,
                                              __global act_t *dx, int dx_off, int acc, int C, int inner, int rows,
                                              int nch, int chunk, int count, int training) {
    int gid = (int)get_global_id(0), r, lo, c, k, hi;
    float inv, k1, m, t1, t2;
    size_t o;
    __global const act_t *xr, *gr;
    __global act_t *dr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    c = r % C;
    inv = aux[aux_off + C + c];
    k1 = NNCL_LD(w, w_off + c) * inv;
    m = aux[aux_off + c];
    t1 = training ? aux[aux_off + 2 * C + c] / (float)count : 0.0f;
    t2 = training ? aux[aux_off + 3 * C + c] / (float)count * inv : 0.0f;
    o = (size_t)r * inner;
    xr = x + x_off + o;
    gr = dy + dy_off + o;
    dr = dx + dx_off + o;
    for (k = lo; k + 8 <= hi; k += 8) {
        float8 d = k1 * (NNCL_LD8(gr + k) - t1 - (NNCL_LD8(xr + k) - m) * t2);
        NNCL_ST8(acc ? NNCL_LD8(dr + k) + d : d, dr + k);
    }
    for (; k < hi; k++) {
        float d = k1 * (NNCL_LD(gr, k) - t1 - (NNCL_LD(xr, k) - m) * t2);
        NNCL_ST(acc ? NNCL_LD(dr, k) + d : d, dr, k);
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

/* ------------------------------------------------------------- per-row forms */

/* The layer and RMS norms once more, for CPU drivers (src/ops/op_norm.c
 * picks them there): one work-item a row, or 8 columns of the weight
 * gradients, 8 values at a time as vectors and the D % 8 last ones alone;
 * no local memory and no barrier, so the driver runs a group's work-items
 * as SIMD lanes and keeps nothing live across a barrier. */

/* nncl_layernorm_f32 a row per work-item. */
__kernel void nncl_layernorm_f32_rows(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                                      __global const act_t *b, int b_off, int has_b, __global act_t *y, int y_off,
                                      __global float *aux, int aux_off, int rows, int D, float eps) {
    int r = (int)get_global_id(0), d;
    __global const act_t *xr = x + x_off + (size_t)r * D, *wr = w + w_off, *br = b + b_off;
    __global act_t *yr = y + y_off + (size_t)r * D;
    float8 s8 = (float8)0.0f, t8 = (float8)0.0f;
    float s = 0.0f, mean, inv;
    if (r >= rows) return;
    /* two accumulators a sum (here and below): one would wait on its own
     * latency */
    for (d = 0; d + 16 <= D; d += 16) {
        s8 += NNCL_LD8(xr + d);
        t8 += NNCL_LD8(xr + d + 8);
    }
    s8 += t8;
    for (; d + 8 <= D; d += 8) s8 += NNCL_LD8(xr + d);
    for (; d < D; d++) s += NNCL_LDG(xr, d);
    mean = (s + nncl_sum8(s8)) / (float)D;
    s8 = (float8)0.0f;
    t8 = (float8)0.0f;
    s = 0.0f;
    for (d = 0; d + 16 <= D; d += 16) {
        float8 c = NNCL_LD8(xr + d) - mean, e = NNCL_LD8(xr + d + 8) - mean;
        s8 += c * c;
        t8 += e * e;
    }
    s8 += t8;
    for (; d + 8 <= D; d += 8) {
        float8 c = NNCL_LD8(xr + d) - mean;
        s8 += c * c;
    }
    for (; d < D; d++) s += (NNCL_LDG(xr, d) - mean) * (NNCL_LDG(xr, d) - mean);
    inv = 1.0f / sqrt((s + nncl_sum8(s8)) / (float)D + eps);
    for (d = 0; d + 8 <= D; d += 8) {
        float8 v = (NNCL_LD8(xr + d) - mean) * inv * NNCL_LD8(wr + d);
        NNCL_ST8(has_b ? v + NNCL_LD8(br + d) : v, yr + d);
    }
    for (; d < D; d++)
        NNCL_ST((NNCL_LDG(xr, d) - mean) * inv * NNCL_LD(wr, d) + (has_b ? NNCL_LD(br, d) : 0.0f), yr, d);
    aux[aux_off + 2 * r] = mean;
    aux[aux_off + 2 * r + 1] = inv;
}

/* nncl_layernorm_backward_f32 a row per work-item. */
__kernel void nncl_layernorm_backward_f32_rows(__global const act_t *x, int x_off, __global const act_t *dy,
                                               int dy_off, __global const act_t *w, int w_off,
                                               __global const float *aux, int aux_off, __global act_t *dx, int dx_off,
                                               int acc, int rows, int D) {
    int r = (int)get_global_id(0), d;
    __global const act_t *xr = x + x_off + (size_t)r * D, *gr = dy + dy_off + (size_t)r * D, *wr = w + w_off;
    __global act_t *dr = dx + dx_off + (size_t)r * D;
    float8 a8 = (float8)0.0f, b8 = (float8)0.0f;
    float s1 = 0.0f, s2 = 0.0f, mean, inv;
    if (r >= rows) return;
    mean = aux[aux_off + 2 * r];
    inv = aux[aux_off + 2 * r + 1];
    for (d = 0; d + 8 <= D; d += 8) {
        float8 g = NNCL_LD8(gr + d) * NNCL_LD8(wr + d);
        a8 += g;
        b8 += g * (NNCL_LD8(xr + d) - mean);
    }
    for (; d < D; d++) {
        float g = NNCL_LDG(gr, d) * NNCL_LD(wr, d);
        s1 += g;
        s2 += g * (NNCL_LDG(xr, d) - mean);
    }
    s1 = (s1 + nncl_sum8(a8)) / (float)D;
    s2 = (s2 + nncl_sum8(b8)) * inv / (float)D;
    for (d = 0; d + 8 <= D; d += 8) {
        float8 v = inv * (NNCL_LD8(gr + d) * NNCL_LD8(wr + d) - s1 - (NNCL_LD8(xr + d) - mean) * inv * s2);
        NNCL_ST8(acc ? NNCL_LD8(dr + d) + v : v, dr + d);
    }
    for (; d < D; d++) {
        float v = inv * (NNCL_LDG(gr, d) * NNCL_LD(wr, d) - s1 - (NNCL_LDG(xr, d) - mean) * inv * s2);
        NNCL_ST(acc ? NNCL_LDG(dr, d) + v : v, dr, d);
    }
}

/* Kahan-compensated *s += v on 8 lanes. */
void nncl_kahan_add8(float8 *s, float8 *c, float8 v) {
    float8 yk = v - *c, t = *s + yk;
    *c = (t - *s) - yk;
    *s = t;
}

/* nncl_layernorm_backward_f32_params with work-item p n8 + j summing
 * columns [8j, 8j + 8) (n8 = ceil(D / 8)), each column in a lane, over
 * rows [p rows / P, (p + 1) rows / P): neighbouring work-items read the
 * same rows, which stay in cache, where one work-item down all the rows
 * would read the whole tensors again for every 8 columns. P 1: into dw
 * and db; else into part[2 p D + d] (weight) and part[(2 p + 1) D + d]
 * (bias), which nncl_layernorm_backward_f32_params_merge sums. */
__kernel void nncl_layernorm_backward_f32_params_rows(__global const act_t *x, int x_off, __global const act_t *dy,
                                                      int dy_off, __global const float *aux, int aux_off,
                                                      __global float *dw, int dw_off, int want_w, int acc_w,
                                                      __global float *db, int db_off, int want_b, int acc_b,
                                                      __global float *part, int part_off, int P, int rows, int D) {
    int n8 = (D + 7) / 8, p = (int)get_global_id(0) / n8, d0 = ((int)get_global_id(0) - p * n8) * 8, r, k, r0, r1;
    float8 sw = (float8)0.0f, cw = (float8)0.0f, sb = (float8)0.0f, cb = (float8)0.0f;
    float tw[8], tb[8];
    if (p >= P) return;
    r0 = (int)(((long)p * rows) / P);
    r1 = (int)(((long)(p + 1) * rows) / P);
    if (d0 + 8 <= D) {
        /* four rows summed pairwise, then one compensated addition: a
         * compensated addition a row would wait on its own latency */
        for (r = r0; r + 4 <= r1; r += 4) {
            size_t i = (size_t)r * D + d0;
            float8 g0 = NNCL_LD8(dy + dy_off + i), g1 = NNCL_LD8(dy + dy_off + i + D);
            float8 g2 = NNCL_LD8(dy + dy_off + i + 2 * D), g3 = NNCL_LD8(dy + dy_off + i + 3 * D);
            float8 h0 = g0 * (NNCL_LD8(x + x_off + i) - aux[aux_off + 2 * r]) * aux[aux_off + 2 * r + 1];
            float8 h1 = g1 * (NNCL_LD8(x + x_off + i + D) - aux[aux_off + 2 * r + 2]) * aux[aux_off + 2 * r + 3];
            float8 h2 = g2 * (NNCL_LD8(x + x_off + i + 2 * D) - aux[aux_off + 2 * r + 4]) * aux[aux_off + 2 * r + 5];
            float8 h3 = g3 * (NNCL_LD8(x + x_off + i + 3 * D) - aux[aux_off + 2 * r + 6]) * aux[aux_off + 2 * r + 7];
            nncl_kahan_add8(&sb, &cb, (g0 + g1) + (g2 + g3));
            nncl_kahan_add8(&sw, &cw, (h0 + h1) + (h2 + h3));
        }
        for (; r < r1; r++) {
            size_t i = (size_t)r * D + d0;
            float8 g = NNCL_LD8(dy + dy_off + i);
            nncl_kahan_add8(&sb, &cb, g);
            nncl_kahan_add8(&sw, &cw, g * (NNCL_LD8(x + x_off + i) - aux[aux_off + 2 * r]) * aux[aux_off + 2 * r + 1]);
        }
        vstore8(sw, 0, tw);
        vstore8(sb, 0, tb);
    } else /* the last D % 8 columns */
        for (k = 0; d0 + k < D; k++) {
            float a = 0.0f, ca = 0.0f, c = 0.0f, cc = 0.0f;
            for (r = r0; r < r1; r++) {
                size_t i = (size_t)r * D + d0 + k;
                float g = NNCL_LD(dy, dy_off + i);
                nncl_kahan_add(&c, &cc, g);
                nncl_kahan_add(&a, &ca, g * (NNCL_LD(x, x_off + i) - aux[aux_off + 2 * r]) * aux[aux_off + 2 * r + 1]);
            }
            tw[k] = a;
            tb[k] = c;
        }
    for (k = 0; k < 8 && d0 + k < D; k++) {
        if (P > 1) {
            part[part_off + 2 * p * D + d0 + k] = tw[k];
            part[part_off + (2 * p + 1) * D + d0 + k] = tb[k];
            continue;
        }
        if (want_w) dw[dw_off + d0 + k] = (acc_w ? dw[dw_off + d0 + k] : 0.0f) + tw[k];
        if (want_b) db[db_off + d0 + k] = (acc_b ? db[db_off + d0 + k] : 0.0f) + tb[k];
    }
}

/* Work-item d: column d's P partial sums into dw and db. */
__kernel void nncl_layernorm_backward_f32_params_merge(__global const act_t *x, int x_off, __global const act_t *dy,
                                                       int dy_off, __global const float *aux, int aux_off,
                                                       __global float *dw, int dw_off, int want_w, int acc_w,
                                                       __global float *db, int db_off, int want_b, int acc_b,
                                                       __global const float *part, int part_off, int P, int D) {
    int d = (int)get_global_id(0), p;
    float a = 0.0f, ca = 0.0f, c = 0.0f, cc = 0.0f;
    if (d >= D) return;
    for (p = 0; p < P; p++) {
        nncl_kahan_add(&a, &ca, part[part_off + 2 * p * D + d]);
        nncl_kahan_add(&c, &cc, part[part_off + (2 * p + 1) * D + d]);
    }
    if (want_w) dw[dw_off + d] = (acc_w ? dw[dw_off + d] : 0.0f) + a;
    if (want_b) db[db_off + d] = (acc_b ? db[db_off + d] : 0.0f) + c;
}

/* nncl_rmsnorm_f32 a row per work-item. */
__kernel void nncl_rmsnorm_f32_rows(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                                    __global act_t *y, int y_off, __global float *aux, int aux_off, int rows, int D,
                                    float eps) {
    int r = (int)get_global_id(0), d;
    __global const act_t *xr = x + x_off + (size_t)r * D, *wr = w + w_off;
    __global act_t *yr = y + y_off + (size_t)r * D;
    float8 s8 = (float8)0.0f;
    float s = 0.0f, inv;
    if (r >= rows) return;
    for (d = 0; d + 8 <= D; d += 8) s8 += NNCL_LD8(xr + d) * NNCL_LD8(xr + d);
    for (; d < D; d++) s += NNCL_LDG(xr, d) * NNCL_LDG(xr, d);
    inv = 1.0f / sqrt((s + nncl_sum8(s8)) / (float)D + eps);
    for (d = 0; d + 8 <= D; d += 8) NNCL_ST8(NNCL_LD8(xr + d) * inv * NNCL_LD8(wr + d), yr + d);
    for (; d < D; d++) NNCL_ST(NNCL_LDG(xr, d) * inv * NNCL_LD(wr, d), yr, d);
    aux[aux_off + r] = inv;
}

/* nncl_rmsnorm_backward_f32 a row per work-item. */
__kernel void nncl_rmsnorm_backward_f32_rows(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                             __global const act_t *w, int w_off, __global const float *aux,
                                             int aux_off, __global act_t *dx, int dx_off, int acc, int rows, int D) {
    int r = (int)get_global_id(0), d;
    __global const act_t *xr = x + x_off + (size_t)r * D, *gr = dy + dy_off + (size_t)r * D, *wr = w + w_off;
    __global act_t *dr = dx + dx_off + (size_t)r * D;
    float8 s8 = (float8)0.0f;
    float s = 0.0f, inv;
    if (r >= rows) return;
    inv = aux[aux_off + r];
    for (d = 0; d + 8 <= D; d += 8) s8 += NNCL_LD8(gr + d) * NNCL_LD8(wr + d) * NNCL_LD8(xr + d);
    for (; d < D; d++) s += NNCL_LDG(gr, d) * NNCL_LD(wr, d) * NNCL_LDG(xr, d);
    s = (s + nncl_sum8(s8)) * inv * inv / (float)D;
    for (d = 0; d + 8 <= D; d += 8) {
        float8 v = inv * (NNCL_LD8(gr + d) * NNCL_LD8(wr + d) - NNCL_LD8(xr + d) * s);
        NNCL_ST8(acc ? NNCL_LD8(dr + d) + v : v, dr + d);
    }
    for (; d < D; d++) {
        float v = inv * (NNCL_LDG(gr, d) * NNCL_LD(wr, d) - NNCL_LDG(xr, d) * s);
        NNCL_ST(acc ? NNCL_LDG(dr, d) + v : v, dr, d);
    }
}

/* nncl_rmsnorm_backward_f32_params with work-item j summing columns
 * [8j, 8j + 8) over every row. */
__kernel void nncl_rmsnorm_backward_f32_params_rows(__global const act_t *x, int x_off, __global const act_t *dy,
                                                    int dy_off, __global const float *aux, int aux_off,
                                                    __global float *dw, int dw_off, int acc, int rows, int D) {
    int d0 = (int)get_global_id(0) * 8, r, k;
    float8 sw = (float8)0.0f, cw = (float8)0.0f;
    float tw[8];
    if (d0 >= D) return;
    if (d0 + 8 <= D) {
        for (r = 0; r < rows; r++) {
            size_t i = (size_t)r * D + d0;
            nncl_kahan_add8(&sw, &cw, NNCL_LD8(dy + dy_off + i) * NNCL_LD8(x + x_off + i) * aux[aux_off + r]);
        }
        vstore8(sw, 0, tw);
    } else /* the last D % 8 columns */
        for (k = 0; d0 + k < D; k++) {
            float a = 0.0f, ca = 0.0f;
            for (r = 0; r < rows; r++) {
                size_t i = (size_t)r * D + d0 + k;
                nncl_kahan_add(&a, &ca, NNCL_LD(dy, dy_off + i) * NNCL_LD(x, x_off + i) * aux[aux_off + r]);
            }
            tw[k] = a;
        }
    for (k = 0; k < 8 && d0 + k < D; k++) dw[dw_off + d0 + k] = (acc ? dw[dw_off + d0 + k] : 0.0f) + tw[k];
}
