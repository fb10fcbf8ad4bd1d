/* groupnorm.cl - group normalisation over NCHW-like x [B, C, S...]
 * (src/ops/op_groupnorm.c): the C/G channels of a group lie side by side,
 * so group (b, g) is one row of D = (C/G) * S elements, normalised by its
 * own mean and biased variance; the optional affine weight and bias are
 * per channel c = g * C/G + d / S. Statistics (mean, invstd per row) in
 * fp32 aux; the parameter gradients in fp32. */

/* One work-group per row: y = (x - mean) invstd (w[c] + b[c] when affine). */
__kernel void nncl_groupnorm_f32(__global const act_t *x, int x_off, __global const act_t *w, int w_off,
                                 __global const act_t *b, int b_off, int affine, __global act_t *y, int y_off,
                                 __global float *aux, int aux_off, int rows, int D, int S, int G, float eps) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0, rr = min(r, rows - 1), c0 = (rr % G) * (D / S);
    float s = 0.0f, comp = 0.0f, mean, inv;
    __global const act_t *xr = x + x_off + (size_t)rr * D;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, NNCL_LD(xr, d));
    mean = nncl_group_sum(buf, s) / (float)D;
    s = 0.0f;
    comp = 0.0f;
    for (d = lid; d < n; d += step) nncl_kahan_add(&s, &comp, (NNCL_LD(xr, d) - mean) * (NNCL_LD(xr, d) - mean));
    inv = 1.0f / sqrt(nncl_group_sum(buf, s) / (float)D + eps);
    for (d = lid; d < n; d += step) {
        float v = (NNCL_LD(xr, d) - mean) * inv;
        if (affine) v = v * NNCL_LDG(w, w_off + c0 + d / S) + NNCL_LDG(b, b_off + c0 + d / S);
        NNCL_ST(v, y, y_off + (size_t)r * D + d);
    }
    if (lid == 0 && n) {
        aux[aux_off + 2 * r] = mean;
        aux[aux_off + 2 * r + 1] = inv;
    }
}

/* One work-group per row: with g = dy w[c] (dy without affine),
 * dx = invstd (g - (sum g + xhat sum g xhat) / D). */
__kernel void nncl_groupnorm_backward_f32(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                          __global const act_t *w, int w_off, int affine, __global const float *aux,
                                          int aux_off, __global act_t *dx, int dx_off, int acc, int rows, int D, int S,
                                          int G) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), d;
    int n = r < rows ? D : 0, rr = min(r, rows - 1), c0 = (rr % G) * (D / S);
    float s1 = 0.0f, k1 = 0.0f, s2 = 0.0f, k2 = 0.0f;
    __global const act_t *xr = x + x_off + (size_t)rr * D, *gr = dy + dy_off + (size_t)rr * D;
    float mean = aux[aux_off + 2 * rr], inv = aux[aux_off + 2 * rr + 1];
    for (d = lid; d < n; d += step) {
        float g = NNCL_LD(gr, d) * (affine ? NNCL_LDG(w, w_off + c0 + d / S) : 1.0f);
        nncl_kahan_add(&s1, &k1, g);
        nncl_kahan_add(&s2, &k2, g * (NNCL_LD(xr, d) - mean) * inv);
    }
    s1 = nncl_group_sum(buf, s1) / (float)D;
    s2 = nncl_group_sum(buf, s2) / (float)D;
    for (d = lid; d < n; d += step) {
        float g = NNCL_LD(gr, d) * (affine ? NNCL_LDG(w, w_off + c0 + d / S) : 1.0f);
        float v = inv * (g - s1 - (NNCL_LD(xr, d) - mean) * inv * s2);
        size_t i = (size_t)dx_off + (size_t)r * D + d;
        NNCL_ST(acc ? NNCL_LD(dx, i) + v : v, dx, i);
    }
}

/* One work-group per channel c: dw[c] (+)= sum over b and S of dy xhat,
 * db[c] (+)= sum of dy. */
__kernel void nncl_groupnorm_backward_f32_params(__global const act_t *x, int x_off, __global const act_t *dy,
                                                 int dy_off, __global const float *aux, int aux_off, __global float *dw,
                                                 int dw_off, int want_w, int acc_w, __global float *db, int db_off,
                                                 int want_b, int acc_b, int B, int C, int S, int G) {
    __local float buf[NNCL_RED_WG];
    int c = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), j;
    float sw = 0.0f, kw = 0.0f, sb = 0.0f, kb = 0.0f;
    for (j = lid; j < B * S; j += step) {
        int b = j / S, row = b * G + c / (C / G);
        size_t i = ((size_t)b * C + c) * S + (size_t)(j - b * S);
        float g = NNCL_LD(dy, dy_off + i);
        nncl_kahan_add(&sb, &kb, g);
        nncl_kahan_add(&sw, &kw, g * (NNCL_LD(x, x_off + i) - aux[aux_off + 2 * row]) * aux[aux_off + 2 * row + 1]);
    }
    sw = nncl_group_sum(buf, sw);
    sb = nncl_group_sum(buf, sb);
    if (lid == 0) {
        if (want_w) dw[dw_off + c] = (acc_w ? dw[dw_off + c] : 0.0f) + sw;
        if (want_b) db[db_off + c] = (acc_b ? db[db_off + c] : 0.0f) + sb;
    }
}
