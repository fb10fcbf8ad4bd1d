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
 * cl/norm.cl's (nncl_bn_chunk, cl/common.cl): work-item r nch + q takes
 * values [q chunk, (q + 1) chunk) of row r = b C + c; r (has_r 0: a
 * dummy) is laid out as x. Each kernel dispatches once on act and has_r
 * to a loop of its own (BNA_DISPATCH), so that no loop tests them per
 * value. */

/* The activation of v and g times its derivative at v, for float and float8. */
#define BNA_ACT1(v) ((v) < 0.0f ? 0.0f : (v))
#define BNA_ACT2(v) ((v) <= 0.0f ? 0.0f : (v) >= 6.0f ? 6.0f : (v))
#define BNA_ACT3(v) ((v) <= -3.0f ? 0.0f * (v) : (v) >= 3.0f ? (v) : (v) * ((v) + 3.0f) / 6.0f)
#define BNA_ACT0(v) (v)
#define BNA_ACT1_8(v) select(v, (float8)0.0f, (v) < 0.0f)
#define BNA_ACT2_8(v) select(select(v, (float8)6.0f, (v) >= 6.0f), (float8)0.0f, (v) <= 0.0f)
#define BNA_ACT3_8(v) select(select((v) * ((v) + 3.0f) / 6.0f, v, (v) >= 3.0f), 0.0f * (v), (v) <= -3.0f)
#define BNA_ACT0_8(v) (v)
#define BNA_GRAD1(v, g) ((v) > 0.0f ? (g) : 0.0f)
#define BNA_GRAD2(v, g) ((v) <= 0.0f || (v) >= 6.0f ? 0.0f : (g))
#define BNA_GRAD3(v, g) ((v) < -3.0f ? 0.0f : (v) <= 3.0f ? (g) * ((v) / 3.0f + 0.5f) : (g))
#define BNA_GRAD0(v, g) (g)
#define BNA_GRAD1_8(v, g) select((float8)0.0f, g, (v) > 0.0f)
#define BNA_GRAD2_8(v, g) select(g, (float8)0.0f, (v) <= 0.0f || (v) >= 6.0f)
#define BNA_GRAD3_8(v, g) select(select(g, (g) * ((v) / 3.0f + 0.5f), (v) <= 3.0f), (float8)0.0f, (v) < -3.0f)
#define BNA_GRAD0_8(v, g) (g)

/* LOOP(A, R): the kernel's loop for activation A (0-3) and residual R
 * (0 or 1), one copy per case. */
#define BNA_DISPATCH(act, has_r, LOOP)                                                                              \
    switch ((act) * 2 + ((has_r) != 0)) {                                                                            \
    case 0: LOOP(0, 0); break;                                                                                       \
    case 1: LOOP(0, 1); break;                                                                                       \
    case 2: LOOP(1, 0); break;                                                                                       \
    case 3: LOOP(1, 1); break;                                                                                       \
    case 4: LOOP(2, 0); break;                                                                                       \
    case 5: LOOP(2, 1); break;                                                                                       \
    case 6: LOOP(3, 0); break;                                                                                       \
    default: LOOP(3, 1); break;                                                                                      \
    }
/* The residual's 8 values or one at offset k (0 without one). */
#define BNA_R8(R, k) ((R) ? NNCL_LD8(rr + (k)) : (float8)0.0f)
#define BNA_R1(R, k) ((R) ? NNCL_LD(rr, k) : 0.0f)

/* y = act(x a + s + r), a = invstd w, s = b - mean a. */
#define BNA_APPLY_LOOP(A, R)                                                                                        \
    for (k = lo; k + 8 <= hi; k += 8) {                                                                              \
        float8 v = NNCL_LD8(xr + k) * a + sh + BNA_R8(R, k);                                                         \
        NNCL_ST8(BNA_ACT##A##_8(v), yr + k);                                                                         \
    }                                                                                                                \
    for (; k < hi; k++) {                                                                                            \
        float v = NNCL_LD(xr, k) * a + sh + BNA_R1(R, k);                                                            \
        NNCL_ST(BNA_ACT##A(v), yr, k);                                                                               \
    }
__kernel void nncl_batchnorm_apply_f32_act(__global const act_t *x, int x_off, __global const float *aux, int aux_off,
                                           __global const act_t *w, int w_off, __global const act_t *b, int b_off,
                                           __global const act_t *res, int res_off, int has_r, int act,
                                           __global act_t *y, int y_off, int C, int inner, int rows, int nch,
                                           int chunk) {
    int gid = (int)get_global_id(0), r, lo, c, k, hi;
    float a, sh;
    size_t o;
    __global const act_t *xr, *rr;
    __global act_t *yr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    c = r % C;
    nncl_bn_affine(aux, aux_off, w, w_off, b, b_off, C, c, &a, &sh);
    o = (size_t)r * inner;
    xr = x + x_off + o;
    rr = res + res_off + o;
    yr = y + y_off + o;
    BNA_DISPATCH(act, has_r, BNA_APPLY_LOOP)
}

/* Work-item q C + c: sum g and sum g (x - mean) over its images, g = dy
 * act'(pre) (as nncl_batchnorm_grad_partial_f32 on dy, in its order:
 * two accumulators per sum). */
#define BNA_PARTIAL_LOOP(A, R)                                                                                      \
    for (k = 0; k + 16 <= inner; k += 16) {                                                                          \
        float8 xv = NNCL_LD8(xr + k), p = xv * a + sh + BNA_R8(R, k), gv = NNCL_LD8(gr + k);                         \
        float8 xw = NNCL_LD8(xr + k + 8), pw = xw * a + sh + BNA_R8(R, k + 8), gw = NNCL_LD8(gr + k + 8);            \
        gv = BNA_GRAD##A##_8(p, gv);                                                                                 \
        gw = BNA_GRAD##A##_8(pw, gw);                                                                                \
        v8 += gv;                                                                                                    \
        w8 += gv * (xv - mean);                                                                                      \
        v8b += gw;                                                                                                   \
        w8b += gw * (xw - mean);                                                                                     \
    }                                                                                                                \
    v8 += v8b;                                                                                                       \
    w8 += w8b;                                                                                                       \
    for (; k + 8 <= inner; k += 8) {                                                                                 \
        float8 xv = NNCL_LD8(xr + k), p = xv * a + sh + BNA_R8(R, k), gv = NNCL_LD8(gr + k);                         \
        gv = BNA_GRAD##A##_8(p, gv);                                                                                 \
        v8 += gv;                                                                                                    \
        w8 += gv * (xv - mean);                                                                                      \
    }                                                                                                                \
    for (; k < inner; k++) {                                                                                         \
        float xv = NNCL_LD(xr, k), p = xv * a + sh + BNA_R1(R, k), gv = NNCL_LD(gr, k);                              \
        gv = BNA_GRAD##A(p, gv);                                                                                     \
        v += gv;                                                                                                     \
        wv += gv * (xv - mean);                                                                                      \
    }
__kernel void nncl_batchnorm_backward_f32_actpartial(__global const act_t *x, int x_off, __global const act_t *dy,
                                                     int dy_off, __global const float *aux, int aux_off,
                                                     __global const act_t *w, int w_off, __global const act_t *b,
                                                     int b_off, __global const act_t *res, int res_off, int has_r,
                                                     int act, __global float *part, int part_off, int B, int C,
                                                     int inner, int P) {
    int gid = (int)get_global_id(0), c, q, bi, b1, k;
    float s = 0.0f, cs = 0.0f, s2 = 0.0f, cs2 = 0.0f, mean, a, sh;
    if (gid >= C * P) return;
    q = gid / C; /* image-major: consecutive work-items read consecutive rows */
    c = gid - q * C;
    mean = aux[aux_off + c];
    nncl_bn_affine(aux, aux_off, w, w_off, b, b_off, C, c, &a, &sh);
    b1 = (int)(((long)(q + 1) * B) / P);
    for (bi = (int)(((long)q * B) / P); bi < b1; bi++) {
        size_t o = ((size_t)bi * C + c) * inner;
        __global const act_t *xr = x + x_off + o, *gr = dy + dy_off + o, *rr = res + res_off + o;
        float8 v8 = 0.0f, w8 = 0.0f, v8b = 0.0f, w8b = 0.0f;
        float v = 0.0f, wv = 0.0f;
        BNA_DISPATCH(act, has_r, BNA_PARTIAL_LOOP)
        v += (v8.s0 + v8.s1) + (v8.s2 + v8.s3) + ((v8.s4 + v8.s5) + (v8.s6 + v8.s7));
        wv += (w8.s0 + w8.s1) + (w8.s2 + w8.s3) + ((w8.s4 + w8.s5) + (w8.s6 + w8.s7));
        nncl_kahan_add(&s, &cs, v);
        nncl_kahan_add(&s2, &cs2, wv);
    }
    part[part_off + 2 * (c * P + q)] = s;
    part[part_off + 2 * (c * P + q) + 1] = s2 * aux[aux_off + C + c];
}

/* g = dy act'(pre); want_x: dx (+)= w invstd (g - (sum g + xhat sum
 * g xhat) / count) (training; w invstd g in evaluation); want_r: dr (+)= g,
 * after dx: x may be its own residual, the host taking dx's acc first. */
#define BNA_DX_LOOP(A, R)                                                                                           \
    for (k = lo; k + 8 <= hi; k += 8) {                                                                              \
        float8 xv = NNCL_LD8(xr + k), p = xv * a + sh + BNA_R8(R, k), g = NNCL_LD8(gr + k);                          \
        g = BNA_GRAD##A##_8(p, g);                                                                                   \
        if (want_x) {                                                                                                \
            float8 d = k1 * (g - t1 - (xv - m) * t2);                                                                \
            NNCL_ST8(acc ? NNCL_LD8(dxr + k) + d : d, dxr + k);                                                      \
        }                                                                                                            \
        if (R && want_r) NNCL_ST8(acc_r ? NNCL_LD8(drr + k) + g : g, drr + k);                                       \
    }                                                                                                                \
    for (; k < hi; k++) {                                                                                            \
        float xv = NNCL_LD(xr, k), p = xv * a + sh + BNA_R1(R, k), g = NNCL_LD(gr, k);                               \
        g = BNA_GRAD##A(p, g);                                                                                       \
        if (want_x) {                                                                                                \
            float d = k1 * (g - t1 - (xv - m) * t2);                                                                 \
            NNCL_ST(acc ? NNCL_LD(dxr, k) + d : d, dxr, k);                                                          \
        }                                                                                                            \
        if (R && want_r) NNCL_ST(acc_r ? NNCL_LD(drr, k) + g : g, drr, k);                                           \
    }
__kernel void nncl_batchnorm_backward_f32_act(__global const act_t *x, int x_off, __global const act_t *dy, int dy_off,
                                              __global const float *aux, int aux_off, __global const act_t *w, int w_off,
                                              __global const act_t *b, int b_off, __global const act_t *res,
                                              int res_off, int has_r, int act, __global act_t *dx, int dx_off,
                                              int want_x, int acc, __global act_t *dres, int dres_off, int want_r,
                                              int acc_r, int C, int inner, int rows, int nch, int chunk, int count,
                                              int training) {
    int gid = (int)get_global_id(0), r, lo, c, k, hi;
    float inv, k1, m, t1, t2, a, sh;
    size_t o;
    __global const act_t *xr, *gr, *rr;
    __global act_t *dxr, *drr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    c = r % C;
    inv = aux[aux_off + C + c];
    m = aux[aux_off + c];
    nncl_bn_affine(aux, aux_off, w, w_off, b, b_off, C, c, &a, &sh);
    k1 = a; /* w invstd */
    t1 = training ? aux[aux_off + 2 * C + c] / (float)count : 0.0f;
    t2 = training ? aux[aux_off + 3 * C + c] / (float)count * inv : 0.0f;
    o = (size_t)r * inner;
    xr = x + x_off + o;
    gr = dy + dy_off + o;
    rr = res + res_off + o;
    dxr = dx + dx_off + o;
    drr = dres + dres_off + o;
    BNA_DISPATCH(act, has_r, BNA_DX_LOOP)
}

/* The unfused path's forward pass after batch norm's own, in the
 * streaming layout: y = act(y + r) in place. */
#define BNA_PASS_LOOP(A, R)                                                                                         \
    for (k = lo; k + 8 <= hi; k += 8) {                                                                              \
        float8 v = NNCL_LD8(yr + k) + BNA_R8(R, k);                                                                  \
        NNCL_ST8(BNA_ACT##A##_8(v), yr + k);                                                                         \
    }                                                                                                                \
    for (; k < hi; k++) {                                                                                            \
        float v = NNCL_LD(yr, k) + BNA_R1(R, k);                                                                     \
        NNCL_ST(BNA_ACT##A(v), yr, k);                                                                               \
    }
__kernel void nncl_batchnorm_f32_actpass(__global act_t *y, int y_off, __global const act_t *res, int res_off,
                                         int has_r, int act, int inner, int rows, int nch, int chunk) {
    int gid = (int)get_global_id(0), r, lo, k, hi;
    size_t o;
    __global const act_t *rr;
    __global act_t *yr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    o = (size_t)r * inner;
    rr = res + res_off + o;
    yr = y + y_off + o;
    BNA_DISPATCH(act, has_r, BNA_PASS_LOOP)
}

/* The unfused path's backward pass before batch norm's own, in the
 * streaming layout: dy = dy act'(pre) in place (pre from x and the saved
 * statistics); want_r: dr (+)= that. */
#define BNA_PASS_BW_LOOP(A, R)                                                                                      \
    for (k = lo; k + 8 <= hi; k += 8) {                                                                              \
        float8 p = NNCL_LD8(xr + k) * a + sh + BNA_R8(R, k), g = NNCL_LD8(gr + k);                                   \
        g = BNA_GRAD##A##_8(p, g);                                                                                   \
        NNCL_ST8(g, gr + k);                                                                                         \
        if (R && want_r) NNCL_ST8(acc_r ? NNCL_LD8(drr + k) + g : g, drr + k);                                       \
    }                                                                                                                \
    for (; k < hi; k++) {                                                                                            \
        float p = NNCL_LD(xr, k) * a + sh + BNA_R1(R, k), g = NNCL_LD(gr, k);                                        \
        g = BNA_GRAD##A(p, g);                                                                                       \
        NNCL_ST(g, gr, k);                                                                                           \
        if (R && want_r) NNCL_ST(acc_r ? NNCL_LD(drr, k) + g : g, drr, k);                                           \
    }
__kernel void nncl_batchnorm_backward_f32_actpass(__global const act_t *x, int x_off, __global act_t *dy, int dy_off,
                                                  __global const float *aux, int aux_off, __global const act_t *w,
                                                  int w_off, __global const act_t *b, int b_off,
                                                  __global const act_t *res, int res_off, int has_r, int act,
                                                  __global act_t *dres, int dres_off, int want_r, int acc_r, int C,
                                                  int inner, int rows, int nch, int chunk) {
    int gid = (int)get_global_id(0), r, lo, c, k, hi;
    float a, sh;
    size_t o;
    __global const act_t *xr, *rr;
    __global act_t *gr, *drr;
    if (!nncl_bn_chunk(gid, rows, nch, chunk, inner, &r, &lo, &hi)) return;
    c = r % C;
    nncl_bn_affine(aux, aux_off, w, w_off, b, b_off, C, c, &a, &sh);
    o = (size_t)r * inner;
    xr = x + x_off + o;
    rr = res + res_off + o;
    gr = dy + dy_off + o;
    drr = dres + dres_off + o;
    BNA_DISPATCH(act, has_r, BNA_PASS_BW_LOOP)
}
