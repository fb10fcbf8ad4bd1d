/* gemm.cl - nncl's own single-precision GEMM family, row-major:
 * C = epilogue(alpha op(A) op(B) + beta C), op(A) [m,k], op(B) [k,n].
 *
 * Packed panels (the packing kernels absorb transposes, offsets and edges):
 *   Ap[p][k][r] = A(p*MR + r, k), Bp[q][k][c] = B(k, q*NR + c), zero past m
 *   and n, K-major, panels contiguous. The micro-kernels then compute whole
 *   tiles from zero-padded panels and mask only their stores.
 * Variants (build options): NNCL_MR x NNCL_NR tile, NNCL_VW the float vector
 * width (NR a multiple of it), NNCL_FMA to accumulate with fma() (devices
 * with a fused multiply-add in hardware: PoCL compiles mad() to a multiply
 * and an add, half the peak of AVX2/AVX-512).
 *   nncl_gemm_f32_packed  (default): one work-item per MR x NR tile, the tile
 *       in MR*NR/VW vector accumulators, no local memory and no barriers: CPU
 *       drivers (PoCL) keep it in registers, where values living across a
 *       barrier would be spilled.
 *   nncl_gemm_f32_local  (-DNNCL_WG=w): one w x w work-group per MR x NR
 *       tile, K slices of both panels staged in local memory (GPUs).
 *   nncl_gemm_f32_direct (-DNNCL_DIRECT): no packing, for small products
 *       where a packing pass costs more than it saves.
 *   nncl_gemm_f32_dot (-DNNCL_DOT): A times B transposed (a dense layer's
 *       forward, x W^T) without packing: both operands run along k in
 *       memory, so one work-item keeps MR x NR dot products as VW-wide
 *       vectors along k and adds each one's lanes at the end.
 * Epilogue: epi = bias_mode | act << 2; bias_mode 1 adds bias[j] (per column,
 * linear), 2 adds bias[i] (per row, convolution's [O, pixels]); act as
 * nncl_act, NaN-propagating like PyTorch. beta == 0 never reads C.
 * A third NDRange dimension runs a batch of products (strides in elements;
 * an A stride of 0 shares A). The packed kernels take k, the depth to sum
 * over, and kp, the length of the panels (k <= kp: a K block of panels that
 * start at the offsets given).
 * Half storage (NNCL_STORE, cl/common.cl): the packing kernels read A and B
 * in the storage type into fp32 panels, and the packed and local kernels
 * store C (and read the bias) in it; the product itself is fp32. A product
 * whose C is fp32 (a weight gradient) takes the fp32 build's kernel.
 * Instances (src/runtime/program.c, nncl__program_instances): one program
 * may hold several variants, each this text after its options as #defines
 * and NNCL_SFX, a suffix NNCL_GK appends to every function's name; the
 * text #undefs its macros at its end, for the next instance. */

#ifdef NNCL_SFX
#define NNCL_GK(name) NNCL_CAT(name, NNCL_SFX)
#else
#define NNCL_GK(name) name
#endif

#ifndef NNCL_MR
#define NNCL_MR 6
#endif
#ifndef NNCL_NR
#define NNCL_NR 16
#endif
#ifndef NNCL_VW
#define NNCL_VW 8
#endif
#define NNCL_NV (NNCL_NR / NNCL_VW)
#ifdef NNCL_FMA
#define NNCL_MADD(a, b, c) fma(a, b, c)
#else
#define NNCL_MADD(a, b, c) mad(a, b, c)
#endif

#if NNCL_VW == 1
#define vfloat float
#define NNCL_VLOAD(i, p) ((p)[i])
#define NNCL_VSTORE(v, i, p) ((p)[i] = (v))
#else
#define vfloat NNCL_CAT(float, NNCL_VW)
#define NNCL_VLOAD(i, p) NNCL_CAT(vload, NNCL_VW)(i, p)
#define NNCL_VSTORE(v, i, p) NNCL_CAT(vstore, NNCL_VW)(v, i, p)
#endif

/* ------------------------------------------------------------- packing */

/* One work-item per panel (dimension 0) and block of NNCL_PACK_KB values
 * of k (dimension 1) of batch item get_global_id(2): the source is read
 * along whichever direction is contiguous in memory. Source element (i, kk)
 * of the rows x k matrix being packed is at src[kk*ld + i] when kmajor,
 * else src[i*ld + kk]. Whole blocks go as 8-wide vectors (NNCL_LD8: half
 * storage converts as it loads): kmajor, each k's TILE values in runs of
 * 8; transposing, each of the TILE rows' 8 values of k as one vector, and
 * the block's 8 * TILE panel values, contiguous, stored as TILE vectors of
 * 8 picked from them by constant indices (also where TILE is no multiple of
 * 8: whole panel rows of 8 would leave a 6-row tile's 48 values to scalar
 * stores). Written element by element, the block would be vectorised by
 * PoCL across the group's work-items, whose addresses lie 8 apart: gathers.
 * Partial blocks and panels go element by element. */
#define NNCL_PACK_KB 8 /* the vector width */
#define NNCL_PACK_T(t, i, TILE) t[(i) % (TILE) * 8 + (i) / (TILE)] /* panel value i of a block of t's rows */
#define NNCL_PACK_FN(NAME, TILE)                                                                                       \
    void NAME(const __global act_t *s, int ld, int kmajor, int rows, int k, __global float *dst, int p) {             \
        int k0 = get_global_id(1) * NNCL_PACK_KB, i0 = p * (TILE), r, kk;                                              \
        int k1 = min(k0 + NNCL_PACK_KB, k), live = min((TILE), rows - i0);                                             \
        __global float *d = dst + p * k * (TILE);                                                                      \
        if (i0 >= rows || k0 >= k) return;                                                                             \
        if (kmajor && live == (TILE)) {                                                                                \
            for (kk = k0; kk < k1; kk++) {                                                                             \
                for (r = 0; r + 8 <= (TILE); r += 8) vstore8(NNCL_LD8(s + kk * ld + i0 + r), 0, d + kk * (TILE) + r);  \
                for (; r < (TILE); r++) d[kk * (TILE) + r] = NNCL_LD(s, kk * ld + i0 + r);                             \
            }                                                                                                          \
        } else if (kmajor) {                                                                                           \
            for (kk = k0; kk < k1; kk++)                                                                               \
                for (r = 0; r < (TILE); r++) d[kk * (TILE) + r] = r < live ? NNCL_LD(s, kk * ld + i0 + r) : 0.0f;      \
        } else if (live == (TILE) && k1 - k0 == NNCL_PACK_KB) {                                                        \
            float t[(TILE) * 8];                                                                                       \
            _Pragma("unroll") for (r = 0; r < (TILE); r++) vstore8(NNCL_LD8(s + (i0 + r) * ld + k0), r, t);           \
            _Pragma("unroll") for (kk = 0; kk < (TILE) * 8; kk += 8) vstore8(                                          \
                (float8)(NNCL_PACK_T(t, kk, TILE), NNCL_PACK_T(t, kk + 1, TILE), NNCL_PACK_T(t, kk + 2, TILE),         \
                         NNCL_PACK_T(t, kk + 3, TILE), NNCL_PACK_T(t, kk + 4, TILE), NNCL_PACK_T(t, kk + 5, TILE),     \
                         NNCL_PACK_T(t, kk + 6, TILE), NNCL_PACK_T(t, kk + 7, TILE)),                                  \
                0, d + k0 * (TILE) + kk);                                                                              \
        } else {                                                                                                       \
            for (r = 0; r < (TILE); r++) {                                                                             \
                if (r < live)                                                                                          \
                    for (kk = k0; kk < k1; kk++) d[kk * (TILE) + r] = NNCL_LD(s, (i0 + r) * ld + kk);                  \
                else                                                                                                   \
                    for (kk = k0; kk < k1; kk++) d[kk * (TILE) + r] = 0.0f;                                            \
            }                                                                                                          \
        }                                                                                                              \
    }
NNCL_PACK_FN(NNCL_GK(nncl_gemm_pack_mr), NNCL_MR)
NNCL_PACK_FN(NNCL_GK(nncl_gemm_pack_nr), NNCL_NR)

/* A [rows = m, k]: kmajor when A is stored transposed ([k, m]). */
__kernel void NNCL_GK(nncl_gemm_pack_a_f32)(__global const act_t *src, int src_off, int src_stride, int ld, int kmajor,
                                   int rows, int k, __global float *dst, int dst_off, int dst_stride) {
    int z = get_global_id(2);
    NNCL_GK(nncl_gemm_pack_mr)(src + src_off + z * src_stride, ld, kmajor, rows, k, dst + dst_off + z * dst_stride,
                      get_global_id(0));
}

/* B [k, n] packed as its transpose (rows = n): kmajor when B is NOT
 * transposed (stored [k, n]). */
__kernel void NNCL_GK(nncl_gemm_pack_b_f32)(__global const act_t *src, int src_off, int src_stride, int ld, int kmajor,
                                   int rows, int k, __global float *dst, int dst_off, int dst_stride) {
    int z = get_global_id(2);
    NNCL_GK(nncl_gemm_pack_nr)(src + src_off + z * src_stride, ld, kmajor, rows, k, dst + dst_off + z * dst_stride,
                      get_global_id(0));
}

/* Both operands of one product in one launch (a launch costs as much as a
 * small product's packing): panels 0 .. ceil(m/MR)-1 of dimension 0 are
 * A's, the rest B's. */
__kernel void NNCL_GK(nncl_gemm_pack_ab_f32)(__global const act_t *a, int a_off, int lda, int a_kmajor, int m,
                                    __global const act_t *b, int b_off, int ldb, int b_kmajor, int n, int k,
                                    __global float *dst, int ap_off, int bp_off) {
    int p = get_global_id(0), pa = (m + NNCL_MR - 1) / NNCL_MR;
    if (p < pa) NNCL_GK(nncl_gemm_pack_mr)(a + a_off, lda, a_kmajor, m, k, dst + ap_off, p);
    else NNCL_GK(nncl_gemm_pack_nr)(b + b_off, ldb, b_kmajor, n, k, dst + bp_off, p - pa);
}

/* ------------------------------------------------------------- epilogue */

vfloat NNCL_GK(nncl_gemm_act)(vfloat v, int act) {
    if (act == 1) return select(v, (vfloat)0.0f, v < (vfloat)0.0f); /* NaN stays NaN */
    if (act == 2) return (vfloat)1.0f / ((vfloat)1.0f + exp(-v));
    if (act == 3) return tanh(v);
    return v;
}

float NNCL_GK(nncl_gemm_act1)(float v, int act) {
    if (act == 1) return v < 0.0f ? 0.0f : v;
    if (act == 2) return 1.0f / (1.0f + exp(-v));
    if (act == 3) return tanh(v);
    return v;
}

/* C and the bias in the storage type (cl/common.cl): VW consecutive
 * elements at a time, through fp32. */
#if defined(NNCL_STORE) && NNCL_STORE
vfloat NNCL_GK(nncl_gemm_cload)(__global const act_t *p) {
    float t[NNCL_VW];
    int e;
    for (e = 0; e < NNCL_VW; e++) t[e] = NNCL_LD(p, e);
    return NNCL_VLOAD(0, t);
}
void NNCL_GK(nncl_gemm_cstore)(vfloat v, __global act_t *p) {
    float t[NNCL_VW];
    int e;
    NNCL_VSTORE(v, 0, t);
    for (e = 0; e < NNCL_VW; e++) NNCL_ST(t[e], p, e);
}
#define NNCL_CLOAD(p) NNCL_GK(nncl_gemm_cload)(p)
#define NNCL_CSTORE(v, p) NNCL_GK(nncl_gemm_cstore)(v, p)
#else
#define NNCL_CLOAD(p) NNCL_VLOAD(0, p)
#define NNCL_CSTORE(v, p) NNCL_VSTORE(v, 0, p)
#endif

/* Stores element (i, j) of C from its sum acc, with the epilogue. */
void NNCL_GK(nncl_gemm_store1)(__global act_t *c, int ldc, int i, int j, float acc, float alpha, float beta,
                      __global const act_t *bias, int epi) {
    int mode = epi & 3;
    float v = alpha * acc;
    if (beta != 0.0f) v += beta * NNCL_LD(c, i * ldc + j);
    if (mode == 1) v += NNCL_LD(bias, j);
    else if (mode == 2) v += NNCL_LD(bias, i);
    NNCL_ST(NNCL_GK(nncl_gemm_act1)(v, epi >> 2), c, i * ldc + j);
}

/* Stores row i of a tile, columns j .. j+VW-1 (those below n). */
void NNCL_GK(nncl_gemm_store)(__global act_t *c, int ldc, int i, int j, int n, vfloat acc, float alpha, float beta,
                     __global const act_t *bias, int epi) {
    __global act_t *row = c + i * ldc;
    int mode = epi & 3, e;
    if (j + NNCL_VW <= n) {
        vfloat v = alpha * acc;
        if (beta != 0.0f) v += beta * NNCL_CLOAD(row + j);
        if (mode == 1) v += NNCL_CLOAD(bias + j);
        else if (mode == 2) v += NNCL_LD(bias, i);
        NNCL_CSTORE(NNCL_GK(nncl_gemm_act)(v, epi >> 2), row + j);
    } else {
        float t[NNCL_VW];
        NNCL_VSTORE(acc, 0, t);
        for (e = 0; e < NNCL_VW && j + e < n; e++)
            NNCL_GK(nncl_gemm_store1)(c, ldc, i, j + e, t[e], alpha, beta, bias, epi);
    }
}

/* The MR x NR tile at row i0, column j0 (rows below m, columns below n).
 * A whole tile is stored unrolled, so that the accumulators stay in
 * registers (the row-by-row loop indexes acc at run time, which sends its
 * vectors to the stack, a large cost when k is small); partial tiles and
 * the activations with exp or tanh
 * (inlined 28 times they only grow the program) take the loop. */
__attribute__((always_inline)) void NNCL_GK(nncl_gemm_store_tile)(__global act_t *c, int ldc, int i0, int j0, int m,
                                                                  int n,
                                                         const vfloat *acc, float alpha, float beta,
                                                         __global const act_t *bias, int epi) {
    int mode = epi & 3, relu = (epi >> 2) == 1, r, v;
    if (i0 + NNCL_MR > m || j0 + NNCL_NR > n || (epi >> 2) > 1) {
        for (r = 0; r < NNCL_MR && i0 + r < m; r++)
            for (v = 0; v < NNCL_NV; v++)
                NNCL_GK(nncl_gemm_store)(c, ldc, i0 + r, j0 + v * NNCL_VW, n, acc[r * NNCL_NV + v], alpha, beta, bias,
                                         epi);
        return;
    }
#pragma unroll
    for (r = 0; r < NNCL_MR; r++) {
        __global act_t *row = c + (i0 + r) * ldc + j0;
#pragma unroll
        for (v = 0; v < NNCL_NV; v++) {
            vfloat x = alpha * acc[r * NNCL_NV + v];
            if (beta != 0.0f) x += beta * NNCL_CLOAD(row + v * NNCL_VW);
            if (mode == 1) x += NNCL_CLOAD(bias + j0 + v * NNCL_VW);
            else if (mode == 2) x += (vfloat)NNCL_LD(bias, i0 + r);
            if (relu) x = select(x, (vfloat)0.0f, x < (vfloat)0.0f);
            NNCL_CSTORE(x, row + v * NNCL_VW);
        }
    }
}

/* Epilogue alone, after a product that had none (CLBlast): C[i, j] =
 * act(C[i, j] + bias). One work-item per element of the [m, n] block. */
__kernel void NNCL_GK(nncl_gemm_epilogue_f32)(__global float *c, int c_off, int ldc, int m, int n,
                                              __global const float *bias,
                                     int bias_off, int epi) {
    int j = get_global_id(0), i = get_global_id(1), mode = epi & 3;
    if (i < m && j < n) {
        float v = c[c_off + i * ldc + j];
        if (mode == 1) v += bias[bias_off + j];
        else if (mode == 2) v += bias[bias_off + i];
        c[c_off + i * ldc + j] = NNCL_GK(nncl_gemm_act1)(v, epi >> 2);
    }
}

/* ------------------------------------------------------------- micro-kernels */

#if defined(NNCL_WG)

/* GPU style: work-group (WG, WG) computes one MR x NR tile; work-item (x, y)
 * owns TM rows and TN columns of it, in runs of LV: rows LV*x + WG*LV*u +
 * (0..LV-1) (LV 1: x, x + WG, ...), columns likewise from y. K slices of
 * NNCL_KB rows of both panels are staged in local memory (each a
 * contiguous run of the packed panel, so the loads coalesce); with LV 4 a
 * work-item reads its values of a slice row as float4 (a quarter of the
 * local-memory loads per multiply-add). C and the bias in the storage
 * type, as the packed kernel's. */
#ifndef NNCL_KB
#define NNCL_KB 16
#endif
#ifndef NNCL_LV
#define NNCL_LV 1
#endif
#define NNCL_TM (NNCL_MR / NNCL_WG)
#define NNCL_TN (NNCL_NR / NNCL_WG)
#define NNCL_LROW(x, u) (((u) / NNCL_LV) * NNCL_WG * NNCL_LV + (x) * NNCL_LV + (u) % NNCL_LV)
__kernel __attribute__((reqd_work_group_size(NNCL_WG, NNCL_WG, 1))) void NNCL_GK(nncl_gemm_f32_local)(
    __global const float *ap, int ap_off, int ap_stride, __global const float *bp, int bp_off, int bp_stride,
    __global act_t *c, int c_off, int c_stride, int ldc, int m, int n, int k, int kp, float alpha, float beta,
    __global const act_t *bias, int bias_off, int epi) {
    __local float as[NNCL_KB * NNCL_MR], bs[NNCL_KB * NNCL_NR];
    int p = get_group_id(0), q = get_group_id(1), z = get_global_id(2);
    int x = get_local_id(0), y = get_local_id(1), lid = y * NNCL_WG + x, u, w, kk, k0, t;
    float acc[NNCL_TM][NNCL_TN];
    const __global float *a = ap + ap_off + z * ap_stride + p * kp * NNCL_MR;
    const __global float *b = bp + bp_off + z * bp_stride + q * kp * NNCL_NR;
    __global act_t *cz = c + c_off + z * c_stride;
    for (u = 0; u < NNCL_TM; u++)
        for (w = 0; w < NNCL_TN; w++) acc[u][w] = 0.0f;
    for (k0 = 0; k0 < k; k0 += NNCL_KB) {
        int rows = min(NNCL_KB, k - k0);
        for (t = lid; t < NNCL_KB * NNCL_MR; t += NNCL_WG * NNCL_WG)
            as[t] = t < rows * NNCL_MR ? a[k0 * NNCL_MR + t] : 0.0f;
        for (t = lid; t < NNCL_KB * NNCL_NR; t += NNCL_WG * NNCL_WG)
            bs[t] = t < rows * NNCL_NR ? b[k0 * NNCL_NR + t] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (kk = 0; kk < NNCL_KB; kk++) {
            float av[NNCL_TM], bv[NNCL_TN];
#if NNCL_LV == 4
            for (u = 0; u < NNCL_TM; u += 4) vstore4(vload4(0, as + kk * NNCL_MR + NNCL_LROW(x, u)), 0, av + u);
            for (w = 0; w < NNCL_TN; w += 4) vstore4(vload4(0, bs + kk * NNCL_NR + NNCL_LROW(y, w)), 0, bv + w);
#else
            for (u = 0; u < NNCL_TM; u++) av[u] = as[kk * NNCL_MR + NNCL_LROW(x, u)];
            for (w = 0; w < NNCL_TN; w++) bv[w] = bs[kk * NNCL_NR + NNCL_LROW(y, w)];
#endif
            for (u = 0; u < NNCL_TM; u++)
                for (w = 0; w < NNCL_TN; w++) acc[u][w] = NNCL_MADD(av[u], bv[w], acc[u][w]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (u = 0; u < NNCL_TM; u++) {
        int i = p * NNCL_MR + NNCL_LROW(x, u);
        if (i >= m) continue;
        for (w = 0; w < NNCL_TN; w++) {
            int j = q * NNCL_NR + NNCL_LROW(y, w);
            if (j < n) NNCL_GK(nncl_gemm_store1)(cz, ldc, i, j, acc[u][w], alpha, beta, bias + bias_off, epi);
        }
    }
}

#elif defined(NNCL_DIRECT)

/* No packing: A and B read in place. Rows past m read row m-1 and columns
 * past n read column n-1 (in bounds; their results are not stored); B rows
 * are loaded as vectors when B is not transposed and the tile is whole. */
#define NNCL_DIRECT_LOOP(AV, BLOAD)                                                                                    \
    for (kk = 0; kk < k; kk++) {                                                                                       \
        vfloat bv[NNCL_NV];                                                                                            \
        _Pragma("unroll") for (v = 0; v < NNCL_NV; v++) BLOAD;                                                         \
        _Pragma("unroll") for (r = 0; r < NNCL_MR; r++) {                                                              \
            float av = AV;                                                                                             \
            _Pragma("unroll") for (v = 0; v < NNCL_NV; v++) acc[r * NNCL_NV + v] =                                     \
                NNCL_MADD((vfloat)av, bv[v], acc[r * NNCL_NV + v]);                                                    \
        }                                                                                                              \
    }

__kernel void NNCL_GK(nncl_gemm_f32_direct)(__global const float *a, int a_off, int a_stride, int lda, int ta,
                                   __global const float *b, int b_off, int b_stride, int ldb, int tb,
                                   __global float *c, int c_off, int c_stride, int ldc, int m, int n, int k,
                                   float alpha, float beta, __global const float *bias, int bias_off, int epi) {
    int p = get_global_id(0), q = get_global_id(1), z = get_global_id(2), r, v, kk;
    int i0 = p * NNCL_MR, j0 = q * NNCL_NR;
    int ri[NNCL_MR];
    vfloat acc[NNCL_MR * NNCL_NV];
    const __global float *az = a + a_off + z * a_stride, *bz = b + b_off + z * b_stride;
    if (i0 >= m || j0 >= n) return;
    /* Unrolled, so that the accumulators start in registers; the column
     * indices only where B is gathered: a zeroing loop would keep them on
     * the stack, and indices stored for every tile are work only the
     * gathering branch needs. */
#pragma unroll
    for (r = 0; r < NNCL_MR; r++) ri[r] = min(i0 + r, m - 1);
#pragma unroll
    for (r = 0; r < NNCL_MR * NNCL_NV; r++) acc[r] = (vfloat)0.0f;
    if (!tb && j0 + NNCL_NR <= n) {
        if (ta) NNCL_DIRECT_LOOP(az[kk * lda + ri[r]], bv[v] = NNCL_VLOAD(0, bz + kk * ldb + j0 + v * NNCL_VW))
        else NNCL_DIRECT_LOOP(az[ri[r] * lda + kk], bv[v] = NNCL_VLOAD(0, bz + kk * ldb + j0 + v * NNCL_VW))
    } else {
        float g[NNCL_NR];
        int cj[NNCL_NR], e;
        for (r = 0; r < NNCL_NR; r++) cj[r] = min(j0 + r, n - 1);
#define NNCL_GATHER(IDX)                                                                                               \
    {                                                                                                                  \
        if (v == 0)                                                                                                    \
            for (e = 0; e < NNCL_NR; e++) g[e] = bz[IDX];                                                              \
        bv[v] = NNCL_VLOAD(v, g);                                                                                      \
    }
        if (ta && tb) NNCL_DIRECT_LOOP(az[kk * lda + ri[r]], NNCL_GATHER(cj[e] * ldb + kk))
        else if (ta) NNCL_DIRECT_LOOP(az[kk * lda + ri[r]], NNCL_GATHER(kk * ldb + cj[e]))
        else if (tb) NNCL_DIRECT_LOOP(az[ri[r] * lda + kk], NNCL_GATHER(cj[e] * ldb + kk))
        else NNCL_DIRECT_LOOP(az[ri[r] * lda + kk], NNCL_GATHER(kk * ldb + cj[e]))
#undef NNCL_GATHER
    }
    NNCL_GK(nncl_gemm_store_tile)(c + c_off + z * c_stride, ldc, i0, j0, m, n, acc, alpha, beta, bias + bias_off, epi);
}

#elif defined(NNCL_DOT)

/* C[i, j] = sum_k A[i, k] B[j, k], A [m,k] and B [n,k] row-major (the
 * host runs this kernel for no other transposes; ta and tb are there for
 * the direct kernel's launch, which it shares). A work-item computes MR
 * rows of NNCL_DG column tiles in turn: the next work-item (the next MR
 * rows) reads the same NR*NNCL_DG rows of B, which stay in the core's
 * cache, where a work-item per tile would read all of B per row tile (a
 * loop in the kernel does it whatever local size PoCL compiles for: its
 * work-group specialization spills the 3 x 4 tile in groups).
 * Per VW values of k: MR vector loads of A rows held while the NR rows of
 * B stream past, one vector at a time, into MR*NR fused multiply-adds:
 * MR*NR accumulators, MR A vectors and one of B in registers (3 x 4 on 16
 * registers, 4 x 6 on 32). Loading the NR B vectors first needs NR - 1
 * more: 3 x 4 spills that way, and the widest tile left, 2 x 4, is slower
 * than 3 x 4 streaming B. Rows past
 * m and n read row m-1 and n-1 (in bounds; not stored); the k % VW last
 * values are added one by one after the lanes. fp32 only: in half storage
 * its loads would convert 16-bit values in the inner loop, again for every
 * tile that reads them (the packed kernels convert once, as they pack). */
__kernel void NNCL_GK(nncl_gemm_f32_dot)(__global const float *a, int a_off, int a_stride, int lda, int ta,
                                __global const float *b, int b_off, int b_stride, int ldb, int tb,
                                __global act_t *c, int c_off, int c_stride, int ldc, int m, int n, int k,
                                float alpha, float beta, __global const act_t *bias, int bias_off, int epi) {
    int p = get_global_id(0), q = get_global_id(1), z = get_global_id(2), i0 = p * NNCL_MR, jg = q * NNCL_NR * NNCL_DG, j0;
    int kv = k / NNCL_VW * NNCL_VW, r, s, kk;
    const __global float *ar[NNCL_MR], *br[NNCL_NR];
    __global act_t *cz = c + c_off + z * c_stride;
    if (i0 >= m || jg >= n) return;
#pragma unroll
    for (r = 0; r < NNCL_MR; r++) ar[r] = a + a_off + z * a_stride + min(i0 + r, m - 1) * lda;
    for (j0 = jg; j0 < n && j0 < jg + NNCL_NR * NNCL_DG; j0 += NNCL_NR) {
        vfloat acc[NNCL_MR * NNCL_NR];
        float sum[NNCL_MR * NNCL_NR];
#pragma unroll
        for (s = 0; s < NNCL_NR; s++) br[s] = b + b_off + z * b_stride + min(j0 + s, n - 1) * ldb;
#pragma unroll
        for (r = 0; r < NNCL_MR * NNCL_NR; r++) acc[r] = (vfloat)0.0f;
        for (kk = 0; kk < kv; kk += NNCL_VW) {
            vfloat av[NNCL_MR];
#pragma unroll
            for (r = 0; r < NNCL_MR; r++) av[r] = NNCL_VLOAD(0, ar[r] + kk);
#pragma unroll
            for (s = 0; s < NNCL_NR; s++) {
                vfloat bv = NNCL_VLOAD(0, br[s] + kk);
#pragma unroll
                for (r = 0; r < NNCL_MR; r++) acc[r * NNCL_NR + s] = NNCL_MADD(av[r], bv, acc[r * NNCL_NR + s]);
            }
        }
#pragma unroll
        for (r = 0; r < NNCL_MR * NNCL_NR; r++) { /* lanes added pairwise, halving the vector */
#if NNCL_VW == 16
            float8 h8 = acc[r].lo + acc[r].hi;
            float4 h4 = h8.lo + h8.hi;
#elif NNCL_VW == 8
            float4 h4 = acc[r].lo + acc[r].hi;
#else
            float4 h4 = acc[r];
#endif
            float2 h2 = h4.lo + h4.hi;
            sum[r] = h2.x + h2.y;
        }
        for (kk = kv; kk < k; kk++)
#pragma unroll
            for (r = 0; r < NNCL_MR; r++)
#pragma unroll
                for (s = 0; s < NNCL_NR; s++) sum[r * NNCL_NR + s] = NNCL_MADD(ar[r][kk], br[s][kk], sum[r * NNCL_NR + s]);
        for (r = 0; r < NNCL_MR && i0 + r < m; r++)
            for (s = 0; s < NNCL_NR && j0 + s < n; s++)
                NNCL_GK(nncl_gemm_store1)(cz, ldc, i0 + r, j0 + s, sum[r * NNCL_NR + s], alpha, beta, bias + bias_off,
                                          epi);
    }
}

#else

/* CPU style: the MR x NR tile in MR*NV vector accumulators; per k, NV vector
 * loads of the B panel and MR broadcasts of the A panel. */
__kernel void NNCL_GK(nncl_gemm_f32_packed)(__global const float *ap, int ap_off, int ap_stride,
                                            __global const float *bp,
                                   int bp_off, int bp_stride, __global act_t *c, int c_off, int c_stride, int ldc,
                                   int m, int n, int k, int kp, float alpha, float beta, __global const act_t *bias,
                                   int bias_off, int epi) {
    int p = get_global_id(0), q = get_global_id(1), z = get_global_id(2), r, v, kk;
    vfloat acc[NNCL_MR * NNCL_NV];
    const __global float *a = ap + ap_off + z * ap_stride + p * kp * NNCL_MR;
    const __global float *b = bp + bp_off + z * bp_stride + q * kp * NNCL_NR;
    if (p * NNCL_MR >= m || q * NNCL_NR >= n) return;
#pragma unroll
    for (r = 0; r < NNCL_MR * NNCL_NV; r++) acc[r] = (vfloat)0.0f;
    for (kk = 0; kk < k; kk++) {
        vfloat bv[NNCL_NV];
#pragma unroll
        for (v = 0; v < NNCL_NV; v++) bv[v] = NNCL_VLOAD(v, b);
#pragma unroll
        for (r = 0; r < NNCL_MR; r++) {
            vfloat av = (vfloat)a[r];
#pragma unroll
            for (v = 0; v < NNCL_NV; v++) acc[r * NNCL_NV + v] = NNCL_MADD(av, bv[v], acc[r * NNCL_NV + v]);
        }
        a += NNCL_MR;
        b += NNCL_NR;
    }
    NNCL_GK(nncl_gemm_store_tile)(c + c_off + z * c_stride, ldc, p * NNCL_MR, q * NNCL_NR, m, n, acc, alpha, beta,
                         bias + bias_off, epi);
}

#endif

/* the next instance defines its own (NNCL_STORE is the program's) */
#undef NNCL_GK
#undef NNCL_MR
#undef NNCL_NR
#undef NNCL_VW
#undef NNCL_NV
#undef NNCL_FMA
#undef NNCL_MADD
#undef vfloat
#undef NNCL_VLOAD
#undef NNCL_VSTORE
#undef NNCL_PACK_KB
#undef NNCL_PACK_T
#undef NNCL_PACK_FN
#undef NNCL_CLOAD
#undef NNCL_CSTORE
#undef NNCL_WG
#undef NNCL_KB
#undef NNCL_LV
#undef NNCL_TM
#undef NNCL_TN
#undef NNCL_LROW
#undef NNCL_DIRECT
#undef NNCL_DIRECT_LOOP
#undef NNCL_DOT
#undef NNCL_DG
