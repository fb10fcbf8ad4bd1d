/* loss.cl - losses as per-row or per-element terms written to scratch, then
 * one work-group summing them into the scalar mean; and the backward rules,
 * scaled by the loss's incoming gradient g[0] read on the device (no host
 * round trip). Half storage (cl/common.cl): the predictions and their
 * gradients in the storage type (act_t); labels, targets, the per-row
 * terms, the softmax and the loss in fp32. */

/* Softmax cross-entropy over rows of C logits with class-index labels:
 * probs[r, :] = softmax(x[r, :]); term[r] = logsumexp - x[r, label]. */
__kernel void nncl_softmax_ce_rows_f32(__global const act_t *x, int x_off, __global const float *lab, int lab_off,
                                       __global float *probs, int p_off, __global float *term, int t_off,
                                       int rows, int C) {
    int r = get_global_id(0), c, y;
    float m, s = 0.0f;
    if (r >= rows) return;
    x += x_off + r * C;
    probs += p_off + r * C;
    m = NNCL_LD(x, 0);
    for (c = 1; c < C; c++) m = fmax(m, NNCL_LD(x, c));
    for (c = 0; c < C; c++) {
        float e = exp(NNCL_LD(x, c) - m);
        probs[c] = e;
        s += e;
    }
    for (c = 0; c < C; c++) probs[c] /= s;
    y = (int)lab[lab_off + r];
    term[t_off + r] = (y >= 0 && y < C) ? log(s) + m - NNCL_LD(x, y) : NAN;
}

/* dx[r, c] (+)= g * (probs[r, c] - [c == label]) / rows */
__kernel void nncl_softmax_ce_backward_f32(__global const float *probs, int p_off, __global const float *lab,
                                           int lab_off, __global const float *g, int g_off, __global act_t *dx,
                                           int dx_off, int rows, int C, int acc) {
    int i = get_global_id(0);
    if (i < rows * C) {
        int r = i / C, c = i % C;
        float d = (probs[p_off + i] - (c == (int)lab[lab_off + r] ? 1.0f : 0.0f)) * g[g_off] / rows;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}

/* Binary cross-entropy with logits, elementwise terms. */
__kernel void nncl_bce_terms_f32(__global const act_t *x, int x_off, __global const float *t, int t_off,
                                 __global float *term, int term_off, int n) {
    int i = get_global_id(0);
    if (i < n) {
        float v = NNCL_LD(x, x_off + i);
        term[term_off + i] = fmax(v, 0.0f) - v * t[t_off + i] + log1p(exp(-fabs(v)));
    }
}

/* dx (+)= g (sigmoid(x) - t) / n; dt (+)= -g x / n */
__kernel void nncl_bce_backward_f32(__global const act_t *x, int x_off, __global const float *t, int t_off,
                                    __global const float *g, int g_off, __global act_t *dx, int dx_off, int acc_x,
                                    __global float *dt, int dt_off, int acc_t, int want_x, int want_t, int n) {
    int i = get_global_id(0);
    if (i < n) {
        float v = NNCL_LD(x, x_off + i), s = g[g_off] / n;
        if (want_x) {
            float d = (1.0f / (1.0f + exp(-v)) - t[t_off + i]) * s;
            NNCL_ST(acc_x ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
        }
        if (want_t) {
            float d = -v * s;
            dt[dt_off + i] = acc_t ? dt[dt_off + i] + d : d;
        }
    }
}

__kernel void nncl_mse_terms_f32(__global const act_t *p, int p_off, __global const float *t, int t_off,
                                 __global float *term, int term_off, int n) {
    int i = get_global_id(0);
    if (i < n) {
        float d = NNCL_LD(p, p_off + i) - t[t_off + i];
        term[term_off + i] = d * d;
    }
}

/* dp (+)= 2 g (p - t) / n; dt (+)= -2 g (p - t) / n */
__kernel void nncl_mse_backward_f32(__global const act_t *p, int p_off, __global const float *t, int t_off,
                                    __global const float *g, int g_off, __global act_t *dp, int dp_off, int acc_p,
                                    __global float *dt, int dt_off, int acc_t, int want_p, int want_t, int n) {
    int i = get_global_id(0);
    if (i < n) {
        float d = 2.0f * (NNCL_LD(p, p_off + i) - t[t_off + i]) * g[g_off] / n;
        if (want_p) NNCL_ST(acc_p ? NNCL_LD(dp, dp_off + i) + d : d, dp, dp_off + i);
        if (want_t) dt[dt_off + i] = acc_t ? dt[dt_off + i] - d : -d;
    }
}

/* out[0] = scale * sum(term[0..n)), one work-group; pairwise in local memory. */
__kernel void nncl_sum_scalar_f32(__global const float *term, int t_off, int n, float scale, __global float *out,
                                  int out_off, __local float *part) {
    int lid = get_local_id(0), ls = get_local_size(0), k;
    float sum = 0.0f;
    for (k = lid; k < n; k += ls) sum += term[t_off + k];
    sum = nncl_group_sum(part, sum);
    if (lid == 0) out[out_off] = sum * scale;
}

/* Cross-entropy over the tokens of a sequence, one work-group per row of V
 * logits (nncl__launch_rows). aux: lse [rows], term [rows], counted
 * [rows], count: lse = logsumexp(x[r, :]); a row whose label is `ignore`
 * gets term 0 and counted 0, any other term lse - x[r, label] (NaN for a
 * label out of range) and counted 1. */
__kernel void nncl_seq_ce_rows_f32(__global const act_t *x, int x_off, __global const float *lab, int lab_off,
                                   __global float *aux, int aux_off, int rows, int V, int ignore) {
    __local float buf[NNCL_RED_WG];
    int r = (int)get_group_id(0), lid = (int)get_local_id(0), step = (int)get_local_size(0), c;
    int n = r < rows ? V : 0, rr = min(r, rows - 1); /* a group past the end works on nothing */
    __global const act_t *xr = x + x_off + (size_t)rr * V;
    float m = -INFINITY, s = 0.0f, y = lab[lab_off + rr], lse;
    for (c = lid; c < n; c += step) m = fmax(m, NNCL_LD(xr, c));
    m = nncl_group_max(buf, m);
    for (c = lid; c < n; c += step) s += exp(NNCL_LD(xr, c) - m);
    lse = m + log(nncl_group_sum(buf, s));
    if (lid == 0 && n) {
        int counted = y != (float)ignore;
        aux[aux_off + r] = lse;
        aux[aux_off + rows + r] = !counted ? 0.0f : (y >= 0.0f && y < (float)V) ? lse - NNCL_LD(xr, (int)y) : NAN;
        aux[aux_off + 2 * rows + r] = counted ? 1.0f : 0.0f;
    }
}

/* One work-group: count = the counted rows, out = sum(term) / count (0
 * when none counts). */
__kernel void nncl_seq_ce_sum_f32(__global float *aux, int aux_off, int rows, __global float *out, int out_off) {
    __local float buf[NNCL_RED_WG];
    int lid = (int)get_local_id(0), step = (int)get_local_size(0), k;
    float s = 0.0f, comp = 0.0f, cnt = 0.0f;
    for (k = lid; k < rows; k += step) {
        nncl_kahan_add(&s, &comp, aux[aux_off + rows + k]);
        cnt += aux[aux_off + 2 * rows + k];
    }
    s = nncl_group_sum(buf, s);
    cnt = nncl_group_sum(buf, cnt);
    if (lid == 0) {
        aux[aux_off + 3 * rows] = cnt;
        out[out_off] = cnt > 0.0f ? s / cnt : 0.0f;
    }
}

/* dx[r, c] (+)= g (exp(x[r, c] - lse[r]) - [c == label]) / count for the
 * counted rows, 0 for the others. */
__kernel void nncl_seq_ce_backward_f32(__global const act_t *x, int x_off, __global const float *lab, int lab_off,
                                       __global const float *aux, int aux_off, __global const float *g, int g_off,
                                       __global act_t *dx, int dx_off, int rows, int V, int ignore, int acc) {
    int i = (int)get_global_id(0);
    if (i < rows * V) {
        int r = i / V, c = i - r * V;
        float y = lab[lab_off + r], cnt = aux[aux_off + 3 * rows], d = 0.0f;
        if (y != (float)ignore && cnt > 0.0f)
            d = (exp(NNCL_LD(x, x_off + i) - aux[aux_off + r]) - (c == (int)y ? 1.0f : 0.0f)) * g[g_off] / cnt;
        NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + d : d, dx, dx_off + i);
    }
}
