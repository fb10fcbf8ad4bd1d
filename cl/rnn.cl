/* rnn.cl - the fused cells of the recurrence op rnn_scan
 * (src/ops/op_rnn.c): one work-item per (sample b, unit j) of one step t,
 * n = B H of them. gi [B, T, G H] holds the input gates of every step
 * (batch first), hh [B, G H] the step's hidden product h_{t-1} W_hh^T; the
 * node's aux keeps, time major, the gates after their nonlinearities
 * (row stride 4H: LSTM i, f, g, o; GRU r, z, n and W_hn h + b_hn), every
 * h_t and (LSTM) every c_t. The backward kernels overwrite a step's gates
 * with its gate gradients (what the hidden product's gradients read) and
 * carry dh (and dc) across steps in aux. */

float nncl_rnn_sigmoid(float v) { return 1.0f / (1.0f + exp(-v)); }

/* i, f, g, o = sigma, sigma, tanh, sigma of gi_t + hh (hh 0 at t = 0);
 * c_t = f c_{t-1} + i g; h_t = o tanh(c_t), into y and aux. */
__kernel void nncl_lstm_cell_f32(__global const act_t *gi, int gi_off, __global const act_t *hh, int hh_off,
                                 __global act_t *aux, int gates_off, int hs_off, int cs_off, __global act_t *y,
                                 int y_off, int n, int B, int T, int H, int t) {
    int idx = (int)get_global_id(0), b, j, k;
    float v[4], c;
    if (idx >= n) return;
    b = idx / H;
    j = idx - b * H;
    for (k = 0; k < 4; k++) {
        v[k] = NNCL_LD(gi, gi_off + ((size_t)b * T + t) * 4 * H + k * H + j);
        if (t > 0) v[k] += NNCL_LD(hh, hh_off + (size_t)b * 4 * H + k * H + j);
        v[k] = k == 2 ? tanh(v[k]) : nncl_rnn_sigmoid(v[k]);
        NNCL_ST(v[k], aux, gates_off + ((size_t)t * B + b) * 4 * H + k * H + j);
    }
    c = v[0] * v[2];
    if (t > 0) c += v[1] * NNCL_LD(aux, cs_off + (size_t)(t - 1) * n + idx);
    NNCL_ST(c, aux, cs_off + (size_t)t * n + idx);
    c = v[3] * tanh(NNCL_LD(aux, cs_off + (size_t)t * n + idx));
    NNCL_ST(c, aux, hs_off + (size_t)t * n + idx);
    NNCL_ST(c, y, y_off + ((size_t)b * T + t) * H + j);
}

/* With dh = dy_t + the carry (after the last step dy_t alone):
 * do = dh tanh c, dc = dc carry + dh o (1 - tanh^2 c), di = dc g,
 * df = dc c_{t-1}, dg = dc i, each through its nonlinearity's derivative;
 * into dgi (acc adds; want 0: none) and over the step's gates, and
 * dc carry = dc f. The host adds dh carry = dgates W_hh after. */
__kernel void nncl_lstm_cell_backward_f32(__global act_t *aux, int gates_off, int cs_off, int dh_off, int dc_off,
                                          __global const act_t *dy, int dy_off, __global act_t *dgi, int dgi_off,
                                          int want, int acc, int n, int B, int T, int H, int t, int carry) {
    int idx = (int)get_global_id(0), b, j, k;
    float v[4], d[4], c, tc, dh, dc;
    size_t gb;
    if (idx >= n) return;
    b = idx / H;
    j = idx - b * H;
    gb = gates_off + ((size_t)t * B + b) * 4 * H + j;
    for (k = 0; k < 4; k++) v[k] = NNCL_LD(aux, gb + k * H);
    c = NNCL_LD(aux, cs_off + (size_t)t * n + idx);
    tc = tanh(c);
    dh = NNCL_LD(dy, dy_off + ((size_t)b * T + t) * H + j);
    dc = 0.0f;
    if (carry) {
        dh += NNCL_LD(aux, dh_off + idx);
        dc = NNCL_LD(aux, dc_off + idx);
    }
    dc += dh * v[3] * (1.0f - tc * tc);
    d[0] = dc * v[2] * v[0] * (1.0f - v[0]);
    d[1] = t > 0 ? dc * NNCL_LD(aux, cs_off + (size_t)(t - 1) * n + idx) * v[1] * (1.0f - v[1]) : 0.0f;
    d[2] = dc * v[0] * (1.0f - v[2] * v[2]);
    d[3] = dh * tc * v[3] * (1.0f - v[3]);
    for (k = 0; k < 4; k++) {
        size_t i = dgi_off + ((size_t)b * T + t) * 4 * H + k * H + j;
        if (want) NNCL_ST(acc ? NNCL_LD(dgi, i) + d[k] : d[k], dgi, i);
        NNCL_ST(d[k], aux, gb + k * H);
    }
    NNCL_ST(dc * v[1], aux, dc_off + idx);
}

/* r, z = sigma(gi_t + hh + b_hh) of their gates, hn = hh_n + b_hn,
 * n = tanh(gi_n + r hn), h_t = (1 - z) n + z h_{t-1} (hh and h_{t-1} 0 at
 * t = 0), into y and aux. */
__kernel void nncl_gru_cell_f32(__global const act_t *gi, int gi_off, __global const act_t *hh, int hh_off,
                                __global const act_t *bhh, int bhh_off, __global act_t *aux, int gates_off,
                                int hs_off, __global act_t *y, int y_off, int n, int B, int T, int H, int t) {
    int idx = (int)get_global_id(0), b, j, k;
    float v[3], hn, h, hp;
    size_t gb;
    if (idx >= n) return;
    b = idx / H;
    j = idx - b * H;
    gb = gates_off + ((size_t)t * B + b) * 4 * H + j;
    for (k = 0; k < 3; k++) {
        v[k] = NNCL_LDG(bhh, bhh_off + k * H + j);
        if (t > 0) v[k] += NNCL_LD(hh, hh_off + (size_t)b * 3 * H + k * H + j);
    }
    hn = v[2];
    for (k = 0; k < 2; k++)
        v[k] = nncl_rnn_sigmoid(v[k] + NNCL_LD(gi, gi_off + ((size_t)b * T + t) * 3 * H + k * H + j));
    v[2] = tanh(NNCL_LD(gi, gi_off + ((size_t)b * T + t) * 3 * H + 2 * H + j) + v[0] * hn);
    hp = t > 0 ? NNCL_LD(aux, hs_off + (size_t)(t - 1) * n + idx) : 0.0f;
    h = v[2] + v[1] * (hp - v[2]);
    for (k = 0; k < 3; k++) NNCL_ST(v[k], aux, gb + k * H);
    NNCL_ST(hn, aux, gb + 3 * H);
    NNCL_ST(h, aux, hs_off + (size_t)t * n + idx);
    NNCL_ST(h, y, y_off + ((size_t)b * T + t) * H + j);
}

/* With dh = dy_t + the carry: dn = dh (1 - z) (1 - n^2), dz = dh (h_{t-1}
 * - n) z (1 - z), dr = dn hn r (1 - r); dgi = (dr, dz, dn) (acc adds), the
 * hidden gates' gradients (dr, dz, dn r) over the step's gates, and the
 * carry's direct part dh z (the host adds dgates W_hh to it after). */
__kernel void nncl_gru_cell_backward_f32(__global act_t *aux, int gates_off, int hs_off, int dh_off,
                                         __global const act_t *dy, int dy_off, __global act_t *dgi, int dgi_off,
                                         int want, int acc, int n, int B, int T, int H, int t, int carry) {
    int idx = (int)get_global_id(0), b, j, k;
    float r, z, nn, hn, hp, dh, d[3];
    size_t gb;
    if (idx >= n) return;
    b = idx / H;
    j = idx - b * H;
    gb = gates_off + ((size_t)t * B + b) * 4 * H + j;
    r = NNCL_LD(aux, gb);
    z = NNCL_LD(aux, gb + H);
    nn = NNCL_LD(aux, gb + 2 * H);
    hn = NNCL_LD(aux, gb + 3 * H);
    hp = t > 0 ? NNCL_LD(aux, hs_off + (size_t)(t - 1) * n + idx) : 0.0f;
    dh = NNCL_LD(dy, dy_off + ((size_t)b * T + t) * H + j);
    if (carry) dh += NNCL_LD(aux, dh_off + idx);
    d[2] = dh * (1.0f - z) * (1.0f - nn * nn);
    d[1] = dh * (hp - nn) * z * (1.0f - z);
    d[0] = d[2] * hn * r * (1.0f - r);
    for (k = 0; k < 3; k++) {
        size_t i = dgi_off + ((size_t)b * T + t) * 3 * H + k * H + j;
        if (want) NNCL_ST(acc ? NNCL_LD(dgi, i) + d[k] : d[k], dgi, i);
    }
    NNCL_ST(d[0], aux, gb);
    NNCL_ST(d[1], aux, gb + H);
    NNCL_ST(d[2] * r, aux, gb + 2 * H);
    NNCL_ST(dh * z, aux, dh_off + idx);
}

/* db[c] (+)= sum of the rows of m [rows, cols] (leading dimension ld), one
 * work-item per column, in fp32 (a parameter's gradient); rows 0 writes
 * zeros (or leaves db with acc). */
__kernel void nncl_rnn_colsum_f32(__global const act_t *m, int m_off, int rows, int cols, int ld,
                                  __global float *db, int db_off, int acc) {
    int c = (int)get_global_id(0), r;
    float s = 0.0f, comp = 0.0f;
    if (c >= cols) return;
    for (r = 0; r < rows; r++) nncl_kahan_add(&s, &comp, NNCL_LD(m, m_off + (size_t)r * ld + c));
    db[db_off + c] = acc ? db[db_off + c] + s : s;
}
