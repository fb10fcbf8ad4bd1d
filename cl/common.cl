/* common.cl - what every kernel family shares; src/runtime/program.c puts this file
 * in front of each cl/<family>.cl it builds, and passes NNCL_RED_WG (the
 * largest work-group the reductions are launched with, src/runtime/internal.h) as
 * -D, so that local arrays and the host's launches agree on one number. */

#ifndef NNCL_RED_WG
#error "NNCL_RED_WG is passed by the host (src/runtime/program.c)"
#endif

/* NNCL_CAT(float, 8): float8, the vector types of a width set by a macro. */
#define NNCL_CAT_(a, b) a##b
#define NNCL_CAT(a, b) NNCL_CAT_(a, b)

/* Kahan-compensated *sum += v: a work-item's running sum over thousands of
 * elements loses no more than a few float roundings. */
void nncl_kahan_add(float *sum, float *comp, float v) {
    float yk = v - *comp, t = *sum + yk;
    *comp = (t - *sum) - yk;
    *sum = t;
}

/* Sum (or, with is_max, maximum) of v over the ny lanes of each of the nx
 * columns of a work-group, laid out buf[lane * nx + col]; returns the
 * column's result to every work-item. Every work-item must call it. The tree
 * pairs lane k with k + ceil(s/2), so ny need not be a power of two, and
 * summing in a tree keeps the rounding error at log2(ny) steps. Ends with a
 * barrier: buf may be reused by the next call. */
float nncl_group_reduce(__local float *buf, float v, int col, int lane, int nx, int ny, int is_max) {
    int s = ny;
    buf[lane * nx + col] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    while (s > 1) {
        int h = (s + 1) >> 1;
        if (lane < s - h) {
            float a = buf[lane * nx + col], b = buf[(lane + h) * nx + col];
            buf[lane * nx + col] = is_max ? fmax(a, b) : a + b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        s = h;
    }
    v = buf[col];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

/* The sum of v over a 1-D work-group, returned to every work-item. */
float nncl_group_sum(__local float *buf, float v) {
    return nncl_group_reduce(buf, v, 0, (int)get_local_id(0), 1, (int)get_local_size(0), 0);
}

/* The maximum of v over a 1-D work-group, returned to every work-item. */
float nncl_group_max(__local float *buf, float v) {
    return nncl_group_reduce(buf, v, 0, (int)get_local_id(0), 1, (int)get_local_size(0), 1);
}

/* The sum of v's 8 lanes, pairwise. */
float nncl_sum8(float8 v) { return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7)); }

/* Dropout's counter-based mask (dropout in cl/misc.cl, attention in
 * cl/attention.cl; src/ops/op_misc.c computes the same on the host): a
 * 32-bit avalanche mix (lowbias32), uint arithmetic only. */
uint nncl_drop_mix(uint h) {
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

/* 1 when element `elem` of sample `sample` survives: 24 uniform bits
 * against the threshold thr = round(p * 2^24). */
int nncl_drop_keep(uint k0, uint k1, uint sample, uint elem, uint thr) {
    uint h = nncl_drop_mix(nncl_drop_mix(nncl_drop_mix(sample ^ k0) + elem) ^ k1);
    return (h >> 8) >= thr;
}

/* Storage of activations, their gradients and the working copy of the
 * weights: NNCL_STORE 1 fp16 (IEEE binary16), 2 bf16 (the upper 16 bits of
 * a float), both rounded to nearest even, else fp32. Kernels name such
 * memory `__global act_t *` and go through NNCL_LD / NNCL_ST; arithmetic
 * stays fp32 (the _f32 in kernel names), and so do master weights,
 * optimizer state, parameter gradients, labels and losses. With
 * NNCL_STORE unset the macros are plain loads and stores: the fp32 build is
 * unchanged. Both 16-bit formats convert by integer and float operations
 * without branches, which CPU drivers vectorise (no cl_khr_fp16 needed):
 * PoCL's vstore_half_rte is a scalar call per work-item. */
#if defined(NNCL_STORE) && NNCL_STORE
/* p[i] of 16-bit storage, read as half of the aligned 32-bit word holding
 * it: NNCL_LDG, for loads whose address neighbouring work-items cannot be
 * shown to step by one. CPU drivers vectorise a 32-bit gather, while
 * 16-bit gathers (no such instruction) are split into one load per lane;
 * where the addresses do step by one,
 * a plain load (NNCL_LD) is one vector load. Buffers are whole words
 * (src/runtime/device.c), so the word never leaves the allocation. */
uint nncl_ld16(__global const ushort *p, int i) {
    int t = i + (int)(((uint)(uintptr_t)p >> 1) & 1u);
    uint w = ((__global const uint *)((uintptr_t)p & ~(uintptr_t)3))[t >> 1];
#ifdef __ENDIAN_LITTLE__
    return t & 1 ? w >> 16 : w & 0xffffu;
#else
    return t & 1 ? w & 0xffffu : w >> 16;
#endif
}
#endif
#if defined(NNCL_STORE) && NNCL_STORE == 1
#define act_t ushort
#define NNCL_LD(p, i) nncl_f16_load((p)[i])
#define NNCL_LDG(p, i) nncl_f16_load(nncl_ld16(p, i))
#define NNCL_LD8(p) nncl_f16_ld8(p)
#define NNCL_ST8(v, p) nncl_f16_st8(v, p)
#define NNCL_CVT(h) nncl_f16_load(h) /* a value loaded as act_t, to fp32 */
#define NNCL_ST(v, p, i) ((p)[i] = nncl_f16_rne(v))
/* Exponent and mantissa moved into a float's fields and rebiased; Inf and
 * NaN keep an all-ones exponent; zero and subnormals are renormalised by
 * one exact subtraction of 2^-14. */
float nncl_f16_load(ushort h) {
    uint u = (uint)(h & 0x7fffu) << 13, e = u & 0x0f800000u;
    u += e == 0x0f800000u ? 0x70000000u : 0x38000000u;
    /* chosen as bits: PoCL's loop vectorizer rejected a float select here */
    u = e == 0u ? as_uint(as_float(u + 0x00800000u) - 6.103515625e-05f) : u;
    return as_float(u | (uint)(h & 0x8000u) << 16);
}
/* Normal results: rebiased, rounded half to even on the 13 bits dropped;
 * below 2^-14 the float addition of 0.5 rounds at fp16's spacing 2^-24
 * (to nearest even) and leaves the result in the low bits; from 65536 up
 * Inf (65520 to 65536 round to it by the normal path), NaN stays NaN. */
ushort nncl_f16_rne(float f) {
    uint x = as_uint(f), a = x & 0x7fffffffu, s = (x >> 16) & 0x8000u;
    uint n = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint d = as_uint(as_float(a) + 0.5f) - 0x3f000000u;
    uint r = a < 0x38800000u ? d : n;
    r = a >= 0x47800000u ? (a > 0x7f800000u ? 0x7e00u : 0x7c00u) : r;
    return (ushort)(r | s);
}
/* The same on 8 consecutive values (NNCL_LD8 / NNCL_ST8: kernels that
 * hold 8 columns per work-item as vectors; one conversion at a time is
 * slow in a loop). Where the 8 values are 16 bytes aligned, the core
 * functions vload_half8 / vstore_half8_rte instead: CPU drivers give them
 * the hardware's conversion (x86 F16C), but PoCL 3.1's vload_half8 crashes
 * on addresses the standard allows (2-byte aligned). */
float8 nncl_f16_ld8(__global const ushort *p) {
    uint8 h, u, e;
    if (((uint)(uintptr_t)p & 15u) == 0u) return vload_half8(0, (__global const half *)p);
    h = convert_uint8(vload8(0, p));
    u = (h & 0x7fffu) << 13;
    e = u & 0x0f800000u;
    u += select((uint8)0x38000000u, (uint8)0x70000000u, e == 0x0f800000u);
    u = select(u, as_uint8(as_float8(u + 0x00800000u) - 6.103515625e-05f), e == 0u);
    return as_float8(u | (h & 0x8000u) << 16);
}
/* NNCL_RNE8: 8 values' bits in the storage type, for kernels that store
 * them apart. */
#define NNCL_RNE8(v) nncl_f16_rne8(v)
ushort8 nncl_f16_rne8(float8 f) {
    uint8 x = as_uint8(f), a = x & 0x7fffffffu, r;
    uint8 n = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13, d = as_uint8(as_float8(a) + 0.5f) - 0x3f000000u;
    r = select(n, d, a < 0x38800000u);
    r = select(r, select((uint8)0x7c00u, (uint8)0x7e00u, a > 0x7f800000u), a >= 0x47800000u);
    return convert_ushort8(r | ((x >> 16) & 0x8000u));
}
void nncl_f16_st8(float8 f, __global ushort *p) {
    if (((uint)(uintptr_t)p & 15u) == 0u)
        vstore_half8_rte(f, 0, (__global half *)p);
    else
        vstore8(nncl_f16_rne8(f), 0, p);
}
#elif defined(NNCL_STORE) && NNCL_STORE == 2
#define act_t ushort
#define NNCL_LD(p, i) as_float((uint)(p)[i] << 16)
#define NNCL_LDG(p, i) as_float(nncl_ld16(p, i) << 16)
#define NNCL_LD8(p) as_float8(convert_uint8(vload8(0, p)) << 16)
#define NNCL_ST8(v, p) nncl_bf16_st8(v, p)
#define NNCL_CVT(h) as_float((uint)(h) << 16)
#define NNCL_ST(v, p, i) ((p)[i] = nncl_bf16_rne(v))
ushort nncl_bf16_rne(float v) {
    uint x = as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u); /* NaN stays NaN */
    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
#define NNCL_RNE8(v) nncl_bf16_rne8(v)
ushort8 nncl_bf16_rne8(float8 v) {
    uint8 x = as_uint8(v), r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return convert_ushort8(select(r, (x >> 16) | 0x40u, (x & 0x7fffffffu) > 0x7f800000u)); /* NaN stays NaN */
}
void nncl_bf16_st8(float8 v, __global ushort *p) { vstore8(nncl_bf16_rne8(v), 0, p); }
#else
#define act_t float
#define NNCL_LD(p, i) ((p)[i])
#define NNCL_LDG(p, i) ((p)[i])
#define NNCL_LD8(p) vload8(0, p)
#define NNCL_ST8(v, p) vstore8(v, 0, p)
#define NNCL_CVT(h) (h)
#define NNCL_ST(v, p, i) ((p)[i] = (v))
#endif

/* a / b for 0 <= a < 2^20 and 1 <= b <= 2^20, from inv = 1.0f / b (within
 * 2.5 ulp): (a + 1/2) / b is at least 1/(2b) from an integer, and the
 * product errs there by less than 4 (a + 1/2) 2^-23 / b < 1/(2b). CPU
 * drivers, which run work-items as SIMD lanes, divide integers one lane at
 * a time. */
int nncl_quot(int a, float inv) { return (int)(((float)a + 0.5f) * inv); }

/* The derivative of activation act (nncl_act: 0 none, 1 relu, 2 sigmoid,
 * 3 tanh) from its output y. */
float nncl_act_grad(float y, int act) {
    if (act == 1) return y > 0.0f ? 1.0f : 0.0f;
    if (act == 2) return y * (1.0f - y);
    if (act == 3) return 1.0f - y * y;
    return 1.0f;
}

/* Activation act of 8 values (NaN stays NaN through ReLU), inlined by
 * force where the compiler is clang: PoCL left such a helper a call in
 * fp16 and spilled the caller's vectors around it. */
#ifdef __clang__
__attribute__((always_inline))
#endif
float8 nncl_act8(float8 v, int act) {
    if (act == 1) return select(v, (float8)0.0f, v < 0.0f);
    if (act == 2) return 1.0f / (1.0f + exp(-v));
    if (act == 3) return tanh(v);
    return v;
}

/* nncl_act_grad of 8 outputs. */
float8 nncl_act_grad8(float8 y, int act) {
    if (act == 1) return select((float8)0.0f, (float8)1.0f, y > 0.0f);
    if (act == 2) return y * (1.0f - y);
    if (act == 3) return 1.0f - y * y;
    return (float8)1.0f;
}

/* Batch norm's streaming layout (cl/norm.cl, cl/bnact.cl): work-item gid
 * takes values [*lo, *hi) of row *r = gid / nch (image b, channel r % C)
 * of an [B, C, inner] tensor, chunk values each; 0 past the last row. */
int nncl_bn_chunk(int gid, int rows, int nch, int chunk, int inner, int *r, int *lo, int *hi) {
    int q;
    if (gid >= rows * nch) return 0;
    *r = gid / nch;
    q = gid - *r * nch;
    *lo = q * chunk;
    *hi = min(inner, (q + 1) * chunk);
    return 1;
}

/* Channel c's normalisation as y = x a + sh: a = invstd w, sh = b - mean
 * a (aux: mean [C], invstd [C]). */
void nncl_bn_affine(__global const float *aux, int aux_off, __global const act_t *w, int w_off,
                    __global const act_t *b, int b_off, int C, int c, float *a, float *sh) {
    *a = aux[aux_off + C + c] * NNCL_LD(w, w_off + c);
    *sh = NNCL_LD(b, b_off + c) - aux[aux_off + c] * *a;
}
