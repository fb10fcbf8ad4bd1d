/* bnact.cl - batch norm's fused activation and residual add
 * (src/ops/op_batchnorm.c): y = act(xhat w + b + r) in the pass that
 * normalises, and in backward the activation's derivative folded into the
 * gradient sums and the input gradient (with the residual's gradient
 * written beside it), so that neither the normalised value nor the
 * activation's gradient is a tensor of its own; and the separate passes
 * the unfused path takes instead (NNCL_BN_FUSE=0). act: 0 none, 1 ReLU,
 * 2 ReLU6, 3 hard-swish (nncl_bn_act), with the elementwise ops' values
 * at the kinks and NaN kept. The derivative is taken at the
 * pre-activation, recomputed from x and the saved statistics: hard-swish's
 * output does not give it. The streaming kernels' layout is
 * cl/norm.cl's: work-item r nch + q takes values [q chunk, (q + 1) chunk)
 * of row r = b C + c; r (has_r 0: a dummy) is laid out as x. */

float nncl_bnact(float v, int act) {
    if (act == 1) return v < 0.0f ? 0.0f : v;
    if (act == 2) return v <= 0.0f ? 0.0f : v >= 6.0f ? 6.0f : v;
    if (act == 3) return v <= -3.0f ? 0.0f * v : v >= 3.0f ? v : v * (v + 3.0f) / 6.0f;
    return v;
}

float8 nncl_bnact8(float8 v, int act) {
    if (act == 1) return select(v, (float8)0.0f, v < 0.0f);
    if (act == 2) return select(select(v, (float8)6.0f, v >= 6.0f), (float8)0.0f, v <= 0.0f);
    if (act == 3) return select(select(v * (v + 3.0f) / 6.0f, v, v >= 3.0f), 0.0f * v, v <= -3.0f);
    return v;
}

/* g act'(v). */
float nncl_bnact_grad(float v, float g, int act) {
    if (act == 1) return v > 0.0f ? g : 0.0f;
    if (act == 2) return v <= 0.0f || v >= 6.0f ? 0.0f : g;
    if (act == 3) return v < -3.0f ? 0.0f : v <= 3.0f ? g * (v / 3.0f + 0.5f) : g;
    return g;
}

float8 nncl_bnact_grad8(float8 v, float8 g, int act) {
    if (act == 1) return select((float8)0.0f, g, v > 0.0f);
    if (act == 2) return select(g, (float8)0.0f, v <= 0.0f || v >= 6.0f);
    if (act == 3) return select(select(g, g * (v / 3.0f + 0.5f), v <= 3.0f), (float8)0.0f, v < -3.0f);
    return g;
}

/* y = act(x a + s + r), a = invstd w, s = b - mean a. */
__kernel void nncl_batchnorm_apply_f32_act(__global const act_t *x, int x_off, __global const float *aux, int aux_off,
                                           __global const act_t *w, int w_off, __global const act_t *b, int b_off,
                                           __global const act_t *res, int res_off, int has_r, int act,
                                           __global act_t *y, int y_off, int C, int inner, int rows, int nch,
                                           int chunk) {
    int gid = (int)get_global_id(0), r, q, c, k, hi;
    float a, sh;
    size_t o;
    __global const act_t *xr, *rr;
    __global act_t *yr;
    if (gid >= rows * nch) return;
    r = gid / nch;
    q = gid - r * nch;
    c = r % C;
    a = aux[aux_off + C + c] * NNCL_LD(w, w_off + c);
    sh = NNCL_LD(b, b_off + c) - aux[aux_off + c] * a;
    o = (size_t)r * inner;
    xr = x + x_off + o;
    rr = res + res_off + o;
    yr = y + y_off + o;
    hi = min(inner, (q + 1) * chunk);
    for (k = q * chunk; k + 8 <= hi; k += 8) {
        float8 v = NNCL_LD8(xr + k) * a + sh;
        if (has_r) v += NNCL_LD8(rr + k);
        NNCL_ST8(nncl_bnact8(v, act), yr + k);
    }
    for (; k < hi; k++) {
        float v = NNCL_LD(xr, k) * a + sh;
        if (has_r) v += NNCL_LD(rr, k);
        NNCL_ST(nncl_bnact(v, act), yr, k);
    }
}

/* Work-item c P + q: sum g and sum g (x - mean) over its images, g = dy
 * act'(pre) (as nncl_batchnorm_grad_partial_f32 on dy). */
__kernel void nncl_batchnorm_backward_f32_actpartial(__global const act_t *x, int x_off, __global const act_t *dy,
                                                     int dy_off, __global const float *aux, int aux_off,
                                                     __global const act_t *w, int w_off, __global const act_t *b,
                                                     int b_off, __global const act_t *res, int res_off, int has_r,
                                                     int act, __global float *part, int part_off, int B, int C,
                                                     int inner, int P) {
    int gid = (int)get_global_id(0), c, q, bi, b1, k;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f, mean, a, sh;
    if (gid >= C * P) return;
    c = gid / P;
    q = gid - c * P;
    mean = aux[aux_off + c];
    a = aux[aux_off + C + c] * NNCL_LD(w, w_off + c);
    sh = NNCL_LD(b, b_off + c) - mean * a;
    b1 = (int)(((long)(q + 1) * B) / P);
    for (bi = (int)(((long)q * B) / P); bi < b1; bi++) {
        size_t o = ((size_t)bi * C + c) * inner;
        __global const act_t *xr = x + x_off + o, *gr = dy + dy_off + o, *rr = res + res_off + o;
        float8 v8 = 0.0f, w8 = 0.0f;
        float v = 0.0f, wv = 0.0f;
        for (k = 0; k + 8 <= inner; k += 8) {
            float8 xv = NNCL_LD8(xr + k), p = xv * a + sh, g;
            if (has_r) p += NNCL_LD8(rr + k);
            g = nncl_bnact_grad8(p, NNCL_LD8(gr + k), act);
            v8 += g;
            w8 += g * (xv - mean);
        }
        for (; k < inner; k++) {
            float xv = NNCL_LD(xr, k), p = xv * a + sh, g;
            if (has_r) p += NNCL_LD(rr, k);
            g = nncl_bnact_grad(p, NNCL_LD(gr, k), act);
            v += g;
            wv += g * (xv - mean);
        }
        v += (v8.s0 + v8.s1) + (v8.s2 + v8.s3) + ((v8.s4 + v8.s5) + (v8.s6 + v8.s7));
        wv += (w8.s0 + w8.s1) + (w8.s2 + w8.s3) + ((w8.s4 + w8.s5) + (w8.s6 + w8.s7));
        nncl_kahan_add(&s, &cs, v);
        nncl_kahan_add(&s2, &cs2, wv);
    }
    part[part_off + 2 * gid] = s;
    part[part_off + 2 * gid + 1] = s2 * aux[aux_off + C + c];
}

/* g = dy act'(pre); want_x: dx (+)= w invstd (g - (sum g + xhat sum
 * g xhat) / count) (training; w invstd g in evaluation); want_r: dr (+)= g. */
__kernel void nncl_batchnorm_backward_f32_act(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                              __global const float *aux, int aux_off, __global const act_t *w, int w_off,
                                              __global const act_t *b, int b_off, __global const act_t *res,
                                              int res_off, int has_r, int act, __global act_t *dx, int dx_off,
                                              int want_x, int acc, __global act_t *dres, int dres_off, int want_r,
                                              int acc_r, int C, int inner, int rows, int nch, int chunk, int count,
                                              int training) {
    int gid = (int)get_global_id(0), r, q, c, k, hi;
    float inv, k1, m, t1, t2, a, sh;
    size_t o;
    __global const act_t *xr, *gr, *rr;
    __global act_t *dxr, *drr;
    if (gid >= rows * nch) return;
    r = gid / nch;
    q = gid - r * nch;
    c = r % C;
    inv = aux[aux_off + C + c];
    k1 = NNCL_LD(w, w_off + c) * inv;
    m = aux[aux_off + c];
    a = inv * NNCL_LD(w, w_off + c);
    sh = NNCL_LD(b, b_off + c) - m * a;
    t1 = training ? aux[aux_off + 2 * C + c] / (float)count : 0.0f;
    t2 = training ? aux[aux_off + 3 * C + c] / (float)count * inv : 0.0f;
    o = (size_t)r * inner;
    xr = x + x_off + o;
    gr = dy + dy_off + o;
    rr = res + res_off + o;
    dxr = dx + dx_off + o;
    drr = dres + dres_off + o;
    hi = min(inner, (q + 1) * chunk);
    for (k = q * chunk; k + 8 <= hi; k += 8) {
        float8 xv = NNCL_LD8(xr + k), p = xv * a + sh, g;
        if (has_r) p += NNCL_LD8(rr + k);
        g = nncl_bnact_grad8(p, NNCL_LD8(gr + k), act);
        if (want_r) NNCL_ST8(acc_r ? NNCL_LD8(drr + k) + g : g, drr + k);
        if (want_x) {
            float8 d = k1 * (g - t1 - (xv - m) * t2);
            NNCL_ST8(acc ? NNCL_LD8(dxr + k) + d : d, dxr + k);
        }
    }
    for (; k < hi; k++) {
        float xv = NNCL_LD(xr, k), p = xv * a + sh, g;
        if (has_r) p += NNCL_LD(rr, k);
        g = nncl_bnact_grad(p, NNCL_LD(gr, k), act);
        if (want_r) NNCL_ST(acc_r ? NNCL_LD(drr, k) + g : g, drr, k);
        if (want_x) {
            float d = k1 * (g - t1 - (xv - m) * t2);
            NNCL_ST(acc ? NNCL_LD(dxr, k) + d : d, dxr, k);
        }
    }
}

/* The unfused path's forward pass after batch norm's own: y = act(y + r)
 * in place over n values. */
__kernel void nncl_batchnorm_f32_actpass(__global act_t *y, int y_off, __global const act_t *res, int res_off,
                                         int has_r, int act, int n) {
    int i = (int)get_global_id(0);
    float v;
    if (i >= n) return;
    v = NNCL_LD(y, y_off + i);
    if (has_r) v += NNCL_LD(res, res_off + i);
    NNCL_ST(nncl_bnact(v, act), y, y_off + i);
}

/* The unfused path's backward pass before batch norm's own: dy = dy
 * act'(pre) in place over n values (pre from x and the saved statistics);
 * want_r: dr (+)= that. */
__kernel void nncl_batchnorm_backward_f32_actpass(__global const act_t *x, int x_off, __global act_t *dy, int dy_off,
                                                  __global const float *aux, int aux_off, __global const act_t *w,
                                                  int w_off, __global const act_t *b, int b_off,
                                                  __global const act_t *res, int res_off, int has_r, int act,
                                                  __global act_t *dres, int dres_off, int want_r, int acc_r, int C,
                                                  int inner, int n) {
    int i = (int)get_global_id(0), c;
    float a, p, g;
    if (i >= n) return;
    c = (i / inner) % C;
    a = aux[aux_off + C + c] * NNCL_LD(w, w_off + c);
    p = NNCL_LD(x, x_off + i) * a + (NNCL_LD(b, b_off + c) - aux[aux_off + c] * a);
    if (has_r) p += NNCL_LD(res, res_off + i);
    g = nncl_bnact_grad(p, NNCL_LD(dy, dy_off + i), act);
    NNCL_ST(g, dy, dy_off + i);
    if (want_r) NNCL_ST(acc_r ? NNCL_LD(dres, dres_off + i) + g : g, dres, dres_off + i);
}
