/* conv.cl - the data movement around convolution GEMMs (src/ops/op_conv.c,
 * src/ops/conv_own.c). Through CLBlast: im2col of a chunk of S samples into a
 * [C*k*k, S*OH*OW] column matrix, col2im (a gather per input element: no
 * atomics, so the result is the same on every device), and the reorder
 * between NCHW [S, O, OH*OW] and the GEMM's [O, S*OH*OW]; one work-item per
 * element. Through nncl's own GEMM: packing x and dy straight into GEMM
 * panels, and the input gradient as a direct gather. Sizes need not divide.
 * Half storage (NNCL_STORE, cl/common.cl): x, y, their gradients, the
 * column matrix and the weights' working copy in the storage type (act_t);
 * GEMM panels, the gather's reordered weights, the parameter gradients and
 * the copies of x (and the 3x3 path's weights) that the packing and
 * 3x3 kernels read fp32 (nncl_conv_to_f32), and so is all arithmetic. */

/* col[(c*k + ki)*k + kj, s*OH*OW + oh*OW + ow] = x[s, c, oh*st - pad + ki,
 * ow*st - pad + kj], zero outside the input. */
__kernel void nncl_im2col_f32(__global const act_t *x, int x_off, __global act_t *col, int col_off, int C, int H,
                              int W, int k, int st, int pad, int OH, int OW, int S) {
    int i = get_global_id(0);
    int ohw = OH * OW, ncols = S * ohw, kk = k * k;
    int r, j, s, p, c, ki, kj, ih, iw;
    float v = 0.0f;
    if (i >= C * kk * ncols) return;
    r = i / ncols;
    j = i - r * ncols;
    s = j / ohw;
    p = j - s * ohw;
    c = r / kk;
    ki = (r - c * kk) / k;
    kj = r - c * kk - ki * k;
    ih = (p / OW) * st - pad + ki;
    iw = (p % OW) * st - pad + kj;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = NNCL_LD(x, x_off + ((s * C + c) * H + ih) * W + iw);
    NNCL_ST(v, col, col_off + i);
}

/* dx[s, c, h, w] (+)= sum of col[(c*k + ki)*k + kj, s*OH*OW + oh*OW + ow]
 * over the windows (oh, ow) that cover (h, w). */
__kernel void nncl_col2im_f32(__global const act_t *col, int col_off, __global act_t *dx, int dx_off, int C, int H,
                              int W, int k, int st, int pad, int OH, int OW, int S, int acc) {
    int i = get_global_id(0);
    int ohw = OH * OW, ncols = S * ohw;
    int w, h, c, s, ki, kj;
    float sum = 0.0f;
    if (i >= S * C * H * W) return;
    w = i % W;
    h = (i / W) % H;
    c = (i / (W * H)) % C;
    s = i / (W * H * C);
    for (ki = 0; ki < k; ki++) {
        int th = h + pad - ki, oh;
        if (th < 0 || th % st) continue;
        oh = th / st;
        if (oh >= OH) continue;
        for (kj = 0; kj < k; kj++) {
            int tw = w + pad - kj, ow;
            if (tw < 0 || tw % st) continue;
            ow = tw / st;
            if (ow >= OW) continue;
            sum += NNCL_LD(col, col_off + ((c * k + ki) * k + kj) * ncols + s * ohw + oh * OW + ow);
        }
    }
    NNCL_ST(acc ? NNCL_LD(dx, dx_off + i) + sum : sum, dx, dx_off + i);
}

/* Between NCHW a[s, o, p] (S samples) and the GEMM layout g[o, s*ohw + p]:
 * to_nchw 1 copies g into a, 0 copies a into g. */
__kernel void nncl_conv_reorder_f32(__global act_t *a, int a_off, __global act_t *g, int g_off, int O, int ohw, int S,
                                    int to_nchw) {
    int i = get_global_id(0);
    int per = O * ohw, s, o, p, j;
    if (i >= S * per) return;
    s = i / per;
    o = (i - s * per) / ohw;
    p = i - s * per - o * ohw;
    j = (o * S + s) * ohw + p;
    if (to_nchw) NNCL_ST(NNCL_LD(g, g_off + j), a, a_off + i); /* exact: any stored value converts back */
    else NNCL_ST(NNCL_LD(a, a_off + i), g, g_off + j);
}

/* dst[d_off + i] = src[s_off + i] as fp32, i < n: 8 values per work-item,
 * NDRange ceil(n / 8) (NNCL_LD8: converted as a vector). */
__kernel void nncl_conv_to_f32(__global const act_t *src, int s_off, __global float *dst, int d_off, int n) {
    int i = get_global_id(0) * 8, e;
    if (i + 8 <= n) {
        vstore8(NNCL_LD8(src + s_off + i), 0, dst + d_off + i);
    } else {
        for (e = i; e < n; e++) dst[d_off + e] = NNCL_LD(src, s_off + e);
    }
}

/* ------------------------------------------------------------- packed implicit GEMM
 * Panels for nncl's own GEMM (src/gemm/gemm.h: Bp[q][kk][c] = B(kk, q*nr + c),
 * Ap[p][kk][r] = A(p*mr + r, kk), K-major, zero past the matrix): the
 * column matrix col_s(r, j) = x[s, ci, oh*st - pad + ki, ow*st - pad + kj]
 * (r = (ci*k + ki)*k + kj, j = oh*OW + ow, zero in the padding) is never
 * stored as such, the packing kernels read x (and dy) directly.
 * Neighbouring work-items read or write neighbouring floats, CPU drivers
 * run them as SIMD lanes; coordinates that vary along dim 0 come from
 * float quotients (nncl_quot: exact as dim 0 stays below 2^20,
 * src/ops/conv_own.c), the others are the same along a row of dim 0. x is
 * read as fp32: in half storage the host converts each chunk of samples
 * into the workspace first (nncl_conv_to_f32): the panels read each
 * element k*k times, and 16-bit gathers cost more than fp32 loads. */

/* Forward B of each of S samples: B(r, j) = col_z(r, j), [C*k*k, OH*OW];
 * sample z's panels at bp_off + z * ceil(OH*OW / nr) * nr * C*k*k.
 * NDRange (nr, C*k*k, S * panels): the nr items of a row of dim 0 write
 * one contiguous run of a panel, the loads are clamped into x and the
 * padding selected to zero. No loop and no branch but the bounds check:
 * CPU drivers run it as SIMD lanes (a loop over the samples inside would
 * run one work-item at a time, converting element by element in half
 * storage). */
__kernel void nncl_conv_pack_b_f32(__global const float *x, int x_off, __global float *bp, int bp_off, int C, int H,
                                   int W, int k, int st, int pad, int OH, int OW, int nr) {
    int c = get_global_id(0), r = get_global_id(1), zq = get_global_id(2);
    int kk = k * k, ckk = C * kk, ohw = OH * OW, panels = (ohw + nr - 1) / nr, z, q, j, oh, ci, ki, kj, ih, iw, in;
    float v;
    if (r >= ckk) return;
    z = zq / panels;
    q = zq - z * panels;
    j = q * nr + c;
    oh = nncl_quot(j, 1.0f / (float)OW);
    ci = r / kk;
    ki = (r - ci * kk) / k;
    kj = r - ci * kk - ki * k;
    ih = oh * st - pad + ki;
    iw = (j - oh * OW) * st - pad + kj;
    in = j < ohw && ih >= 0 && ih < H && iw >= 0 && iw < W;
    v = x[x_off + ((z * C + ci) * H + (in ? ih : 0)) * W + (in ? iw : 0)];
    bp[bp_off + (zq * ckk + r) * nr + c] = in ? v : 0.0f;
}

/* Flat plane shifts (same-size convolutions on CPU devices): the row and
 * column of flat pixels j0..j0+7 of a plane W wide (nncl_quot's float
 * quotient: j < 2^20), and plane xp, H x W, shifted by (dh, dw) at them:
 * x[(oh+dh)*W + ow+dw] where that pixel lies in the plane, else 0 (lanes
 * past the plane too). One vector load where the run stays inside the
 * plane, else clamped loads element by element. Both inlined by force
 * where the compiler is clang: PoCL otherwise leaves calls. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_conv_flat8(int j0, int W, int8 *oh, int8 *ow) {
    int8 j = j0 + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    *oh = convert_int8((convert_float8(j) + 0.5f) * (1.0f / (float)W));
    *ow = j - *oh * W;
}
#ifdef __clang__
__attribute__((always_inline))
#endif
float8 nncl_conv_shift8(const __global float *xp, int j0, int8 oh, int8 ow, int dh, int dw, int H, int W) {
    int hw = H * W, at = j0 + dh * W + dw, l;
    int8 ih = oh + dh, iw = ow + dw;
    float t[8];
    float8 v;
    if (at >= 0 && at + 8 <= hw) {
        v = vload8(0, xp + at);
    } else {
        for (l = 0; l < 8; l++) t[l] = xp[clamp(at + l, 0, hw - 1)];
        v = vload8(0, t);
    }
    return select((float8)(0.0f), v, oh < H & ih >= 0 & ih < H & iw >= 0 & iw < W);
}

/* nncl_conv_pack_b's B for same-size convolutions (stride 1, OH = H, OW =
 * W, so pad = (k-1)/2) on CPU devices, nr a multiple of 8, with its
 * arguments. Row r = (ci, ki, kj) of B is sample z's plane ci shifted by
 * (ki - pad, kj - pad), read flat (nncl_conv_shift8): each run of 8
 * columns one vector load with rows and padding crossed by lane masks, and
 * one vector store. NDRange (C*k*k, panels, S), an item per row of a
 * panel. nncl_conv_pack_b's loads PoCL makes lane by lane. */
__kernel void nncl_conv_pack_bs_f32(__global const float *x, int x_off, __global float *bp, int bp_off, int C, int H,
                                    int W, int k, int st, int pad, int OH, int OW, int nr) {
    int r = get_global_id(0), q = get_global_id(1), z = get_global_id(2), kk = k * k, ckk = C * kk, hw = H * W;
    int panels = (hw + nr - 1) / nr, ci, ki, dh, dw, e;
    int8 oh, ow;
    __global const float *xp;
    __global float *d;
    (void)st; /* 1, and OH, OW the plane's (src/ops/conv_own.c) */
    (void)OH;
    (void)OW;
    if (r >= ckk) return;
    ci = r / kk;
    ki = (r - ci * kk) / k;
    dh = ki - pad;
    dw = r - ci * kk - ki * k - pad;
    xp = x + x_off + (z * C + ci) * hw;
    d = bp + bp_off + ((z * panels + q) * ckk + r) * nr;
    for (e = 0; e < nr; e += 8) {
        nncl_conv_flat8(q * nr + e, W, &oh, &ow);
        vstore8(nncl_conv_shift8(xp, q * nr + e, oh, ow, dh, dw, H, W), 0, d + e);
    }
}

/* Weight gradient A over S samples: A(o, kk) = g[s, o, p] with kk = s*OH*OW
 * + p, [O, S*OH*OW], g = dy * act'(y); the input gradient's gather reads
 * these panels too. NDRange (S*OH*OW, panels of mr rows): neighbouring
 * items read neighbouring dy (coalesced on GPUs). */
__kernel void nncl_conv_pack_dy_f32(__global const act_t *dy, int dy_off, __global const act_t *y, int y_off,
                                    __global float *ap, int ap_off, int O, int ohw, int S, int mr, int act) {
    int kk = get_global_id(0), p = get_global_id(1), K = S * ohw, s, px, r, o, in;
    __global float *d;
    __global const act_t *src, *ys;
    float g;
    if (p * mr >= O || kk >= K) return;
    s = nncl_quot(kk, 1.0f / (float)ohw);
    px = kk - s * ohw;
    d = ap + ap_off + (p * K + kk) * mr;
    src = dy + dy_off + (s * O + p * mr) * ohw + px;
    ys = y + y_off + (s * O + p * mr) * ohw + px;
    for (r = 0; r < mr; r++) {
        o = p * mr + r;
        in = o < O;
        g = in ? NNCL_LD(src, r * ohw) : 0.0f;
        if (act) g *= nncl_act_grad(in ? NNCL_LD(ys, r * ohw) : 0.0f, act);
        d[r] = g;
    }
}

/* fp16 on CPU devices: NDRange (ceil(S*OH*OW / 8), panels of mr rows), a
 * work-item takes 8 neighbouring columns of its panel's rows as vectors,
 * converted 8 at a time (PoCL converts one at a time slowly), element by
 * element where they cross a sample. In fp32 and bf16 (a shift to
 * convert) one column per item is faster, and so it is for fp16 on GPUs
 * (NVIDIA's OpenCL): those take the kernel above. */
__kernel void nncl_conv_pack_dy8_f32(__global const act_t *dy, int dy_off, __global const act_t *y, int y_off,
                                     __global float *ap, int ap_off, int O, int ohw, int S, int mr, int act) {
    int kk0 = get_global_id(0) * 8, p = get_global_id(1), K = S * ohw, s, px, r, o, e, n;
    float t[8];
    __global float *d;
    if (p * mr >= O || kk0 >= K) return;
    s = nncl_quot(kk0, 1.0f / (float)ohw);
    px = kk0 - s * ohw;
    n = K - kk0 < 8 ? K - kk0 : 8;
    d = ap + ap_off + (p * K + kk0) * mr;
    for (r = 0; r < mr; r++) {
        o = p * mr + r;
        if (o >= O) {
            for (e = 0; e < n; e++) d[e * mr + r] = 0.0f;
        } else if (n == 8 && px + 8 <= ohw) {
            int src = (s * O + o) * ohw + px;
            float8 g = NNCL_LD8(dy + dy_off + src);
            if (act) g *= nncl_act_grad8(NNCL_LD8(y + y_off + src), act);
            vstore8(g, 0, t);
            for (e = 0; e < 8; e++) d[e * mr + r] = t[e];
        } else {
            for (e = 0; e < n; e++) {
                int se = nncl_quot(kk0 + e, 1.0f / (float)ohw), src = (se * O + o) * ohw + kk0 + e - se * ohw;
                float g = NNCL_LD(dy, dy_off + src);
                if (act) g *= nncl_act_grad(NNCL_LD(y, y_off + src), act);
                d[e * mr + r] = g;
            }
        }
    }
}

/* Weight gradient B over S samples: B(kk, r) = col_s(r, p) with kk = s*OH*OW
 * + p, [S*OH*OW, C*k*k], and with ones, one more column of ones (r ==
 * C*k*k: the product's extra column is the bias gradient). NDRange (nr, OH*OW,
 * S*panels): items c of pixel p of panel q of sample s write one run of nr
 * floats. */
__kernel void nncl_conv_pack_colt_f32(__global const float *x, int x_off, __global float *bp, int bp_off, int C,
                                      int H, int W, int k, int st, int pad, int OH, int OW, int S, int nr, int ones) {
    int c = get_global_id(0), px = get_global_id(1), z = get_global_id(2), kk = k * k, ckk = C * kk, ohw = OH * OW;
    int panels = (ckk + ones + nr - 1) / nr, s = z / panels, q = z - s * panels, oh = px / OW, ow = px - oh * OW;
    int r = q * nr + c, ci = nncl_quot(r, 1.0f / (float)kk), t = r - ci * kk, ki = nncl_quot(t, 1.0f / (float)k);
    int ih = oh * st - pad + ki, iw = ow * st - pad + t - ki * k, in;
    float v;
    if (px >= ohw || s >= S) return;
    in = r < ckk && ih >= 0 && ih < H && iw >= 0 && iw < W;
    v = in ? x[x_off + ((s * C + ci) * H + ih) * W + iw] : 0.0f;
    bp[bp_off + (q * S * ohw + s * ohw + px) * nr + c] = ones && r == ckk ? 1.0f : v;
}

/* Column r of the weight gradient's B to the next: (ci, ki, kj) stepped
 * without a division. This and the store below inlined by force where the
 * compiler is clang: PoCL left calls, which slowed the kernels. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_conv_next_r(int k, int *ci, int *ki, int *kj) {
    if (++*kj == k) {
        *kj = 0;
        if (++*ki == k) {
            *ki = 0;
            ++*ci;
        }
    }
}

/* The 8 columns (rows of t, 8 pixels each) stored as n pixels' runs of 8
 * columns nr apart. */
#ifdef __clang__
__attribute__((always_inline))
#endif
void nncl_conv_colt_store(const float *t, __global float *d, int nr, int n) {
    int e;
#pragma unroll
    for (e = 0; e < 8; e++)
        if (e < n)
            vstore8((float8)(t[e], t[8 + e], t[16 + e], t[24 + e], t[32 + e], t[40 + e], t[48 + e], t[56 + e]), 0,
                    d + e * nr);
}

/* The same B on CPU devices, whose drivers did not make SIMD lanes of
 * nncl_conv_pack_colt for AVX2 (PoCL keeps it scalar, with two divisions
 * per float: a large share of a CNN step). NDRange
 * (OH * ceil(OW/8), S, panels * nr/8), nr a multiple of 8: a work-item
 * takes 8 neighbouring output pixels of one row and 8 columns r of a
 * panel; per column one row of x as a vector (stride 1, inside x) or
 * element by element (edges, strides), then its 8 pixels' runs of 8
 * columns stored as vectors, transposed through private memory. */
__kernel void nncl_conv_pack_colt8_f32(__global const float *x, int x_off, __global float *bp, int bp_off, int C,
                                       int H, int W, int k, int st, int pad, int OH, int OW, int S, int nr, int ones) {
    int blk = get_global_id(0), s = get_global_id(1), qc = get_global_id(2), owb = (OW + 7) / 8;
    int oh = blk / owb, ow0 = (blk - oh * owb) * 8, n = min(8, OW - ow0), kk = k * k, ckk = C * kk;
    int chunks = nr / 8, q = qc / chunks, c0 = (qc - q * chunks) * 8, r = q * nr + c0, ci, ki, kj, j, e;
    float t[64];
    __global float *d = bp + bp_off + (q * S * OH * OW + s * OH * OW + oh * OW + ow0) * nr + c0;
    if (s >= S) return; /* the group of samples rounded up */
    ci = r / kk; /* then stepped with r: no division per column */
    ki = (r - ci * kk) / k;
    kj = r - ci * kk - ki * k;
#pragma unroll
    for (j = 0; j < 8; j++, r++) {
        int ih = oh * st - pad + ki, iw0 = ow0 * st - pad + kj;
        float8 v = (float8)(ones && r == ckk ? 1.0f : 0.0f);
        if (r < ckk && ih >= 0 && ih < H) {
            const __global float *row = x + x_off + ((s * C + ci) * H + ih) * W;
            if (st == 1 && n == 8 && iw0 >= 0 && iw0 + 8 <= W) {
                v = vload8(0, row + iw0);
            } else { /* clamped loads, the padding selected to zero */
#pragma unroll
                for (e = 0; e < 8; e++) {
                    int iw = iw0 + e * st;
                    float u = row[clamp(iw, 0, W - 1)];
                    t[j * 8 + e] = e < n && iw >= 0 && iw < W ? u : 0.0f;
                }
                v = vload8(j, t);
            }
        }
        vstore8(v, j, t);
        nncl_conv_next_r(k, &ci, &ki, &kj);
    }
    nncl_conv_colt_store(t, d, nr, n);
}

/* The same for same-size convolutions (stride 1, OH = H, OW = W), by the
 * flat plane shifts of nncl_conv_pack_bs: blocks of 8 pixels of the whole
 * plane rather than of a row, so a block crosses rows and edges by lane
 * masks, not element by element (on 14 x 14 planes, rows of 8 leave 6 of
 * every 14 pixels, and every edge block, to the clamped loads above).
 * NDRange (ceil(H*W / 8), S, panels * nr/8). */
__kernel void nncl_conv_pack_colts_f32(__global const float *x, int x_off, __global float *bp, int bp_off, int C,
                                       int H, int W, int k, int st, int pad, int OH, int OW, int S, int nr, int ones) {
    int blk = get_global_id(0), s = get_global_id(1), qc = get_global_id(2), hw = H * W, j0 = blk * 8;
    int n = min(8, hw - j0), kk = k * k, ckk = C * kk;
    int chunks = nr / 8, q = qc / chunks, c0 = (qc - q * chunks) * 8, r = q * nr + c0, ci, ki, kj, j;
    int8 oh, ow;
    float t[64];
    __global float *d = bp + bp_off + (q * S * hw + s * hw + j0) * nr + c0;
    (void)st; /* as nncl_conv_pack_bs */
    (void)OH;
    (void)OW;
    if (s >= S) return;
    nncl_conv_flat8(j0, W, &oh, &ow);
    ci = r / kk;
    ki = (r - ci * kk) / k;
    kj = r - ci * kk - ki * k;
#pragma unroll
    for (j = 0; j < 8; j++, r++) {
        float8 v = (float8)(ones && r == ckk ? 1.0f : 0.0f);
        if (r < ckk) v = nncl_conv_shift8(x + x_off + (s * C + ci) * hw, j0, oh, ow, ki - pad, kj - pad, H, W);
        vstore8(v, j, t);
        nncl_conv_next_r(k, &ci, &ki, &kj);
    }
    nncl_conv_colt_store(t, d, nr, n);
}

/* The weight gradient's product with its bias column, ct [O, C*k*k + 1]
 * (or the sum of `parts` such blocks, one after another, added in order),
 * into dW [O, C*k*k] and db [O], each written (acc 0), added to (1) or left
 * alone (2: not asked for). */
__kernel void nncl_conv_dw_split_f32(__global const float *ct, int ct_off, __global float *dw, int dw_off,
                                     __global float *db, int db_off, int O, int ckk, int acc_w, int acc_b, int parts) {
    int i = get_global_id(0), o, r, j;
    float v = 0.0f;
    if (i >= O * (ckk + 1)) return;
    o = i / (ckk + 1);
    r = i - o * (ckk + 1);
    for (j = 0; j < parts; j++) v += ct[ct_off + j * O * (ckk + 1) + i];
    if (r < ckk && acc_w < 2) dw[dw_off + o * ckk + r] = acc_w ? dw[dw_off + o * ckk + r] + v : v;
    if (r == ckk && acc_b < 2) db[db_off + o] = acc_b ? db[db_off + o] + v : v;
}

/* The weights for the input gradient's gather, once per step:
 * wt[((o*k + ki)*k + kj)*Cp + c] = w[o, c, ki, kj], zero for c >= C (Cp:
 * C rounded up to 16), so that 16 neighbouring channels are one vector
 * load. One work-item per element of wt. */
__kernel void nncl_conv_wt_f32(__global const act_t *w, int w_off, __global float *wt, int wt_off, int O, int C,
                               int k, int Cp) {
    int i = get_global_id(0), kk = k * k, c, t, o;
    if (i >= O * kk * Cp) return;
    c = i % Cp;
    t = (i / Cp) % kk;
    o = i / (Cp * kk);
    wt[wt_off + i] = c < C ? NNCL_LD(w, w_off + (o * C + c) * kk + t) : 0.0f;
}

/* The output column of input column w under kernel column kj, or -1 where
 * none covers it. */
int nncl_conv_dx_col(int w, int kj, int st, int pad, int OW) {
    int t = w + pad - kj;
    return t >= 0 && t % st == 0 && t / st < OW ? t / st : -1;
}

/* Input gradient by a gather: dx[s, c, h, w] (+)= sum over o, ki, kj of
 * w[o, c, ki, kj] * g(o, s, oh, ow) where oh*st = h + pad - ki and ow*st =
 * w + pad - kj fall on the output, g = dy * act'(y) from the weight
 * gradient's A panels of this chunk of samples (nncl_conv_pack_dy: fp32,
 * so half storage converts nothing in this loop; K = S*OH*OW columns,
 * panels of mr rows). One work-item per (s, h) and two neighbouring
 * columns w, w + 1 of 16 neighbouring channels, accumulated as two float16
 * from wt (nncl_conv_wt): per tap and o, one vector of weights serves two
 * scalars of g. Each dx element has one writer and one order of additions
 * (no atomics: the same result on every device), and there is no barrier.
 * NDRange (ceil(W/2), H, S*ceil(C/16)). */
__kernel void nncl_conv_backward_f32_input(__global const float *gp, int gp_off, int K, int mr,
                                           __global const float *wt, int wt_off, __global act_t *dx, int dx_off, int C,
                                           int H, int W, int O, int k, int st, int pad, int OH, int OW, int acc) {
    int w = get_global_id(0) * 2, h = get_global_id(1), z = get_global_id(2), cb = (C + 15) / 16, Cp = cb * 16;
    int s = z / cb, c0 = (z - s * cb) * 16, ohw = OH * OW, ostride = k * k * Cp, o0, r, rn, ki, kj, e, two;
    float16 s0 = (float16)(0.0f), s1 = (float16)(0.0f);
    float t[32];
    __global act_t *out;
    if (w >= W || h >= H) return;
    two = w + 1 < W;
    for (ki = 0; ki < k; ki++) {
        int th = h + pad - ki, oh;
        if (th < 0 || th % st) continue;
        oh = th / st;
        if (oh >= OH) continue;
        for (kj = 0; kj < k; kj++) {
            int ow0 = nncl_conv_dx_col(w, kj, st, pad, OW), ow1 = two ? nncl_conv_dx_col(w + 1, kj, st, pad, OW) : -1;
            __global const float *g = gp + gp_off + (s * ohw + oh * OW) * mr;
            __global const float *wv = wt + wt_off + (ki * k + kj) * Cp + c0;
            if (ow0 < 0 && ow1 < 0) continue;
            for (o0 = 0; o0 < O; o0 += mr, g += K * mr) {
                rn = min(mr, O - o0);
                for (r = 0; r < rn; r++) {
                    float16 wo = vload16(0, wv + (o0 + r) * ostride);
                    s0 = mad((float16)(ow0 >= 0 ? g[ow0 * mr + r] : 0.0f), wo, s0);
                    s1 = mad((float16)(ow1 >= 0 ? g[ow1 * mr + r] : 0.0f), wo, s1);
                }
            }
        }
    }
    out = dx + dx_off + ((s * C + c0) * H + h) * W + w;
#if defined(NNCL_STORE) && NNCL_STORE
    if (!acc) { /* half storage: the 32 values converted as 4 vectors, stored apart */
        ushort8 u[4];
        u[0] = NNCL_RNE8(s0.lo);
        u[1] = NNCL_RNE8(s0.hi);
        u[2] = NNCL_RNE8(s1.lo);
        u[3] = NNCL_RNE8(s1.hi);
        for (e = 0; e < 16 && c0 + e < C; e++) {
            out[e * H * W] = ((ushort *)u)[e];
            if (two) out[e * H * W + 1] = ((ushort *)u)[16 + e];
        }
        return;
    }
#endif
    vstore16(s0, 0, t);
    vstore16(s1, 0, t + 16);
    for (e = 0; e < 16 && c0 + e < C; e++) {
        NNCL_ST(acc ? NNCL_LD(out, e * H * W) + t[e] : t[e], out, e * H * W);
        if (two) NNCL_ST(acc ? NNCL_LD(out, e * H * W + 1) + t[16 + e] : t[16 + e], out, e * H * W + 1);
    }
}

/* nncl_conv_backward_f32_input for a CPU's kernel set: one work-item per
 * 2 x 2 pixels (rows h, h+1, columns w, w+1) of 16 channels, four float16
 * sums with fma(): per weight vector loaded, eight independent
 * multiply-adds of AVX2's vectors where the two-pixel kernel has four (and
 * mad(), which PoCL compiles to a multiply and an add). Taps whose four
 * pixels all have an output run without a test per multiply-add (a
 * branch-free masked load is compiled back into branches, and slower).
 * Taken in fp32 storage only (src/ops/conv_own.c says why).
 * NDRange (ceil(W/2), ceil(H/2), S*ceil(C/16)). */
__kernel void nncl_conv_backward_f32_input2x2(__global const float *gp, int gp_off, int K, int mr,
                                              __global const float *wt, int wt_off, __global act_t *dx, int dx_off,
                                              int C, int H, int W, int O, int k, int st, int pad, int OH, int OW,
                                              int acc) {
    int w = get_global_id(0) * 2, h = get_global_id(1) * 2, z = get_global_id(2), cb = (C + 15) / 16, Cp = cb * 16;
    int s = z / cb, c0 = (z - s * cb) * 16, ostride = k * k * Cp, o0, r, rn, ki, kj, e, q, two, rows;
    float16 s00 = (float16)(0.0f), s01 = (float16)(0.0f), s10 = (float16)(0.0f), s11 = (float16)(0.0f);
    float t[64];
    __global const float *gs = gp + gp_off + s * OH * OW * mr; /* sample s's columns of G */
    __global act_t *out;
    if (w >= W || h >= H) return;
    two = w + 1 < W;
    rows = h + 1 < H ? 2 : 1;
    for (ki = 0; ki < k; ki++) {
        int oh0 = nncl_conv_dx_col(h, ki, st, pad, OH), oh1 = rows == 2 ? nncl_conv_dx_col(h + 1, ki, st, pad, OH) : -1;
        if (oh0 < 0 && oh1 < 0) continue;
        for (kj = 0; kj < k; kj++) {
            int ow0 = nncl_conv_dx_col(w, kj, st, pad, OW), ow1 = two ? nncl_conv_dx_col(w + 1, kj, st, pad, OW) : -1;
            int i00, i01, i10, i11;
            __global const float *g = gs, *wv = wt + wt_off + (ki * k + kj) * Cp + c0;
            if (ow0 < 0 && ow1 < 0) continue;
            /* each pixel's column of G, -1 where it has none */
            i00 = oh0 >= 0 && ow0 >= 0 ? (oh0 * OW + ow0) * mr : -1;
            i01 = oh0 >= 0 && ow1 >= 0 ? (oh0 * OW + ow1) * mr : -1;
            i10 = oh1 >= 0 && ow0 >= 0 ? (oh1 * OW + ow0) * mr : -1;
            i11 = oh1 >= 0 && ow1 >= 0 ? (oh1 * OW + ow1) * mr : -1;
            if (i00 >= 0 && i01 >= 0 && i10 >= 0 && i11 >= 0) {
                for (o0 = 0; o0 < O; o0 += mr, g += K * mr)
                    for (r = 0, rn = min(mr, O - o0); r < rn; r++) {
                        float16 wo = vload16(0, wv + (o0 + r) * ostride);
                        s00 = fma((float16)(g[i00 + r]), wo, s00);
                        s01 = fma((float16)(g[i01 + r]), wo, s01);
                        s10 = fma((float16)(g[i10 + r]), wo, s10);
                        s11 = fma((float16)(g[i11 + r]), wo, s11);
                    }
            } else {
                for (o0 = 0; o0 < O; o0 += mr, g += K * mr)
                    for (r = 0, rn = min(mr, O - o0); r < rn; r++) {
                        float16 wo = vload16(0, wv + (o0 + r) * ostride);
                        s00 = fma((float16)(i00 >= 0 ? g[i00 + r] : 0.0f), wo, s00);
                        s01 = fma((float16)(i01 >= 0 ? g[i01 + r] : 0.0f), wo, s01);
                        s10 = fma((float16)(i10 >= 0 ? g[i10 + r] : 0.0f), wo, s10);
                        s11 = fma((float16)(i11 >= 0 ? g[i11 + r] : 0.0f), wo, s11);
                    }
            }
        }
    }
    vstore16(s00, 0, t);
    vstore16(s01, 1, t);
    vstore16(s10, 2, t);
    vstore16(s11, 3, t);
    out = dx + dx_off + ((s * C + c0) * H + h) * W + w;
    for (q = 0; q < 4; q++) /* pixel (q / 2, q % 2) of the block, where it lies inside */
        if (q / 2 < rows && (q % 2 == 0 || two))
            for (e = 0; e < 16 && c0 + e < C; e++) {
                int at = e * H * W + q / 2 * W + q % 2;
                NNCL_ST(acc ? NNCL_LD(out, at) + t[q * 16 + e] : t[q * 16 + e], out, at);
            }
}
