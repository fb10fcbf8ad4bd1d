/* rnn.cl - the fused cells of the recurrence op rnn_scan
 * (src/ops/op_rnn.c): one work-item per (unit j, sample b) of one step t,
 * a 2-D range [H, B], so that neighbouring work-items read neighbouring
 * units (CPU drivers vectorise along dimension 0). gi [B, T, G H] holds
 * the input products of every step (batch first, without biases), hh
 * [B, G H] the step's hidden product h_{t-1} W_hh^T; the node's aux keeps,
 * time major, the gates after their nonlinearities (row stride 4H: LSTM
 * i, f, g, o; GRU r, z, n and W_hn h + b_hn), every h_t and (LSTM) every
 * c_t. The backward kernels overwrite a step's gates with its gate
 * gradients (what the products and column sums of the gradients read) and
 * carry dh (and dc) across steps in aux. */

float nncl_rnn_sigmoid(float v) { return 1.0f / (1.0f + exp(-v)); }

/* v where c, else 0: the cells load what a step may not need (the hidden
 * product at t = 0, a carry not yet written) unconditionally, from memory
 * in the buffer, and drop it by a select (a NaN there dropped too): a load
 * under a branch keeps CPU drivers from vectorising the work-items. */
float nncl_rnn_if(int c, float v) { return c ? v : 0.0f; }

/* The forward cells read the previous step's state (c_{t-1}, h_{t-1}: the
 * aux rows of step t - 1) through prev, and hh, through pointers of their
 * own, all restrict (the regions they reach are disjoint): loads that
 * might alias the stores into aux would keep CPU drivers from vectorising
 * the work-items. */

/* i, f, g, o = sigma, sigma, tanh, sigma of gi_t + b_ih + b_hh + hh (hh
 * 0 at t = 0);
 * c_t = f c_{t-1} + i g; h_t = o tanh(c_t), into y and aux. */
__kernel void nncl_lstm_cell_f32(__global const act_t *restrict gi, int gi_off, __global const act_t *restrict hh, int hh_off,
                                 __global const act_t *restrict bih, int bih_off, __global const act_t *restrict bhh, int bhh_off,
                                 __global const act_t *restrict prev, int prev_off, __global act_t *restrict aux,
                                 int gates_off, int hs_off, int cs_off, __global act_t *restrict y, int y_off, int B, int T,
                                 int H, int t) {
    int j = (int)get_global_id(0), b = (int)get_global_id(1);
    int gx = gi_off + (b * T + t) * 4 * H + j, gh = hh_off + b * 4 * H + j, ga = gates_off + (t * B + b) * 4 * H + j;
    int s = (t * B + b) * H + j;
    float i, f, g, o, c;
    if (j >= H || b >= B) return;
    i = NNCL_LD(gi, gx) + NNCL_LD(bih, bih_off + j) + NNCL_LD(bhh, bhh_off + j);
    f = NNCL_LD(gi, gx + H) + NNCL_LD(bih, bih_off + H + j) + NNCL_LD(bhh, bhh_off + H + j);
    g = NNCL_LD(gi, gx + 2 * H) + NNCL_LD(bih, bih_off + 2 * H + j) + NNCL_LD(bhh, bhh_off + 2 * H + j);
    o = NNCL_LD(gi, gx + 3 * H) + NNCL_LD(bih, bih_off + 3 * H + j) + NNCL_LD(bhh, bhh_off + 3 * H + j);
    i += nncl_rnn_if(t > 0, NNCL_LD(hh, gh));
    f += nncl_rnn_if(t > 0, NNCL_LD(hh, gh + H));
    g += nncl_rnn_if(t > 0, NNCL_LD(hh, gh + 2 * H));
    o += nncl_rnn_if(t > 0, NNCL_LD(hh, gh + 3 * H));
    i = nncl_rnn_sigmoid(i);
    f = nncl_rnn_sigmoid(f);
    g = tanh(g);
    o = nncl_rnn_sigmoid(o);
    NNCL_ST(i, aux, ga);
    NNCL_ST(f, aux, ga + H);
    NNCL_ST(g, aux, ga + 2 * H);
    NNCL_ST(o, aux, ga + 3 * H);
    c = i * g;
    c += nncl_rnn_if(t > 0, f * NNCL_LD(prev, prev_off + b * H + j));
    NNCL_ST(c, aux, cs_off + s);
    c = o * tanh(c);
    NNCL_ST(c, aux, hs_off + s);
    NNCL_ST(c, y, y_off + (b * T + t) * H + j);
}

/* With dh = dy_t + the carry (after the last step dy_t alone):
 * do = dh tanh c, dc = dc carry + dh o (1 - tanh^2 c), di = dc g,
 * df = dc c_{t-1}, dg = dc i, each through its nonlinearity's derivative;
 * into dgi (acc adds; want 0: none) and over the step's gates, and
 * dc carry = dc f. The host adds dh carry = dgates W_hh after. */
__kernel void nncl_lstm_cell_backward_f32(__global act_t *aux, int gates_off, int cs_off, int dh_off, int dc_off,
                                          __global const act_t *dy, int dy_off, __global act_t *dgi, int dgi_off,
                                          int want, int acc, int B, int T, int H, int t, int carry) {
    int j = (int)get_global_id(0), b = (int)get_global_id(1);
    int ga = gates_off + (t * B + b) * 4 * H + j, s = (t * B + b) * H + j, q = b * H + j;
    int gx = dgi_off + (b * T + t) * 4 * H + j, sp = (max(t, 1) - 1) * B * H + q;
    float i, f, g, o, c, tc, dh, dc, di, df, dg, dO;
    if (j >= H || b >= B) return;
    i = NNCL_LD(aux, ga);
    f = NNCL_LD(aux, ga + H);
    g = NNCL_LD(aux, ga + 2 * H);
    o = NNCL_LD(aux, ga + 3 * H);
    c = NNCL_LD(aux, cs_off + s);
    tc = tanh(c);
    dh = NNCL_LD(dy, dy_off + (b * T + t) * H + j) + nncl_rnn_if(carry, NNCL_LD(aux, dh_off + q));
    dc = nncl_rnn_if(carry, NNCL_LD(aux, dc_off + q)) + dh * o * (1.0f - tc * tc);
    di = dc * g * i * (1.0f - i);
    df = nncl_rnn_if(t > 0, dc * NNCL_LD(aux, cs_off + sp) * f * (1.0f - f));
    dg = dc * i * (1.0f - g * g);
    dO = dh * tc * o * (1.0f - o);
    if (want) {
        NNCL_ST(acc ? NNCL_LD(dgi, gx) + di : di, dgi, gx);
        NNCL_ST(acc ? NNCL_LD(dgi, gx + H) + df : df, dgi, gx + H);
        NNCL_ST(acc ? NNCL_LD(dgi, gx + 2 * H) + dg : dg, dgi, gx + 2 * H);
        NNCL_ST(acc ? NNCL_LD(dgi, gx + 3 * H) + dO : dO, dgi, gx + 3 * H);
    }
    NNCL_ST(di, aux, ga);
    NNCL_ST(df, aux, ga + H);
    NNCL_ST(dg, aux, ga + 2 * H);
    NNCL_ST(dO, aux, ga + 3 * H);
    NNCL_ST(dc * f, aux, dc_off + q);
}

/* r, z = sigma(gi_t + b_ih + hh + b_hh) of their gates, hn = hh_n + b_hn,
 * n = tanh(gi_n + b_in + r hn), h_t = (1 - z) n + z h_{t-1} (hh and h_{t-1} 0 at
 * t = 0), into y and aux. */
__kernel void nncl_gru_cell_f32(__global const act_t *restrict gi, int gi_off, __global const act_t *restrict hh, int hh_off,
                                __global const act_t *restrict bih, int bih_off, __global const act_t *restrict bhh, int bhh_off,
                                __global const act_t *restrict prev, int prev_off, __global act_t *restrict aux,
                                int gates_off, int hs_off, __global act_t *restrict y, int y_off, int B, int T, int H, int t) {
    int j = (int)get_global_id(0), b = (int)get_global_id(1);
    int gx = gi_off + (b * T + t) * 3 * H + j, gh = hh_off + b * 3 * H + j, ga = gates_off + (t * B + b) * 4 * H + j;
    int s = (t * B + b) * H + j;
    float r, z, n, hn, h, hp;
    if (j >= H || b >= B) return;
    r = NNCL_LD(bhh, bhh_off + j);
    z = NNCL_LD(bhh, bhh_off + H + j);
    hn = NNCL_LD(bhh, bhh_off + 2 * H + j);
    r += nncl_rnn_if(t > 0, NNCL_LD(hh, gh));
    z += nncl_rnn_if(t > 0, NNCL_LD(hh, gh + H));
    hn += nncl_rnn_if(t > 0, NNCL_LD(hh, gh + 2 * H));
    r = nncl_rnn_sigmoid(r + NNCL_LD(gi, gx) + NNCL_LD(bih, bih_off + j));
    z = nncl_rnn_sigmoid(z + NNCL_LD(gi, gx + H) + NNCL_LD(bih, bih_off + H + j));
    n = tanh(NNCL_LD(gi, gx + 2 * H) + NNCL_LD(bih, bih_off + 2 * H + j) + r * hn);
    hp = nncl_rnn_if(t > 0, NNCL_LD(prev, prev_off + b * H + j));
    h = n + z * (hp - n);
    NNCL_ST(r, aux, ga);
    NNCL_ST(z, aux, ga + H);
    NNCL_ST(n, aux, ga + 2 * H);
    NNCL_ST(hn, aux, ga + 3 * H);
    NNCL_ST(h, aux, hs_off + s);
    NNCL_ST(h, y, y_off + (b * T + t) * H + j);
}

/* With dh = dy_t + the carry: dn = dh (1 - z) (1 - n^2), dz = dh (h_{t-1}
 * - n) z (1 - z), dr = dn hn r (1 - r); dgi = (dr, dz, dn) (acc adds), the
 * hidden gates' gradients (dr, dz, dn r) and dn over the step's gates
 * (the biases' gradients sum them), and the carry's direct part dh z (the host adds dgates W_hh to it after). */
__kernel void nncl_gru_cell_backward_f32(__global act_t *aux, int gates_off, int hs_off, int dh_off,
                                         __global const act_t *dy, int dy_off, __global act_t *dgi, int dgi_off,
                                         int want, int acc, int B, int T, int H, int t, int carry) {
    int j = (int)get_global_id(0), b = (int)get_global_id(1);
    int ga = gates_off + (t * B + b) * 4 * H + j, s = (t * B + b) * H + j, q = b * H + j;
    int gx = dgi_off + (b * T + t) * 3 * H + j, sp = (max(t, 1) - 1) * B * H + q;
    float r, z, n, hn, hp, dh, dr, dz, dn;
    if (j >= H || b >= B) return;
    r = NNCL_LD(aux, ga);
    z = NNCL_LD(aux, ga + H);
    n = NNCL_LD(aux, ga + 2 * H);
    hn = NNCL_LD(aux, ga + 3 * H);
    hp = nncl_rnn_if(t > 0, NNCL_LD(aux, hs_off + sp));
    dh = NNCL_LD(dy, dy_off + (b * T + t) * H + j) + nncl_rnn_if(carry, NNCL_LD(aux, dh_off + q));
    dn = dh * (1.0f - z) * (1.0f - n * n);
    dz = dh * (hp - n) * z * (1.0f - z);
    dr = dn * hn * r * (1.0f - r);
    if (want) {
        NNCL_ST(acc ? NNCL_LD(dgi, gx) + dr : dr, dgi, gx);
        NNCL_ST(acc ? NNCL_LD(dgi, gx + H) + dz : dz, dgi, gx + H);
        NNCL_ST(acc ? NNCL_LD(dgi, gx + 2 * H) + dn : dn, dgi, gx + 2 * H);
    }
    NNCL_ST(dr, aux, ga);
    NNCL_ST(dz, aux, ga + H);
    NNCL_ST(dn * r, aux, ga + 2 * H);
    NNCL_ST(dn, aux, ga + 3 * H);
    NNCL_ST(dh * z, aux, dh_off + q);
}

/* wt [H, G H] = w^T for w [G H, H] (W_hh, once per forward): the step's
 * product h W_hh^T then reads both operands as stored. One work-item per
 * element of wt, a 2-D range [G H, H]. */
__kernel void nncl_rnn_transpose_f32(__global const act_t *w, int w_off, __global act_t *wt, int wt_off, int rows,
                                     int cols) {
    int c = (int)get_global_id(0), r = (int)get_global_id(1);
    if (c >= rows || r >= cols) return;
    NNCL_ST(NNCL_LDG(w, w_off + c * cols + r), wt, wt_off + r * rows + c);
}

/* db[c] (+)= sum over the rows of m (leading dimension ld) of its column
 * c, or c + shift from column `from` on (the GRU's input-side gradients,
 * dn past dn r), in fp32 (a parameter's gradient); rows 0 writes zeros
 * (or leaves db with acc). One work-item per 8 columns, summed as one
 * float8 (compensated) where they are 8 neighbours in m: a loop down the
 * rows per column would run one column at a time on CPU drivers. */
__kernel void nncl_rnn_colsum_f32(__global const act_t *m, int m_off, int rows, int cols, int ld, int from,
                                  int shift, __global float *db, int db_off, int acc) {
    int c0 = 8 * (int)get_global_id(0), r, k;
    if (c0 >= cols) return;
    if (c0 + 8 <= cols && (c0 + 8 <= from || c0 >= from)) {
        float8 s = (float8)(0.0f), comp = (float8)(0.0f), v, y, t;
        __global const act_t *p = m + m_off + (c0 < from ? c0 : c0 + shift);
        for (r = 0; r < rows; r++) {
            v = NNCL_LD8(p + (size_t)r * ld);
            y = v - comp;
            t = s + y;
            comp = (t - s) - y;
            s = t;
        }
        if (acc) s += vload8(0, db + db_off + c0);
        vstore8(s, 0, db + db_off + c0);
        return;
    }
    for (k = c0; k < min(c0 + 8, cols); k++) {
        int mc = k < from ? k : k + shift;
        float s = 0.0f, comp = 0.0f;
        for (r = 0; r < rows; r++) nncl_kahan_add(&s, &comp, NNCL_LD(m, m_off + (size_t)r * ld + mc));
        db[db_off + k] = acc ? db[db_off + k] + s : s;
    }
}
