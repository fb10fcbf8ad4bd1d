/* conv_dw_flat.cl - depthwise kernels (src/ops/conv_dw.c, after
 * cl/conv_dw.cl) for square 3x3 and 5x5 kernels at stride 1, dilation 1
 * and padding K / 2 on both axes (MobileNet's "same" layers): an output
 * plane is as large as its input plane, so output q of a plane of W-wide
 * rows reads input q + (ki - K/2) W + kj - K/2, and a plane is one flat
 * run of vectors whatever its width: a 7-px row wastes no lanes. Each
 * lane keeps its row and column (int vectors stepped with the chunk), and
 * masks a tap whose input row or column falls outside the plane; a chunk
 * whose taps all fall inside the plane's rows goes without row masks
 * (column masks are applied once per tap column, to its sum over the
 * kernel's rows). */

/* 16 elements of the tensor base from i, at indices clamped into [0, n):
 * for the vectors that would leave it at its ends. */
float16 nncl_dwf_gather16(__global const act_t *base, int i, int n) {
    float t[16];
    int j;
    for (j = 0; j < 16; j++) t[j] = NNCL_LDG(base, clamp(i + j, 0, n - 1));
    return vload16(0, t);
}

/* Tap column kj's sum over the K rows into a: wk[ki K + kj] times the
 * plane's element q + (ki - P) W + kj - P; mode 0 unmasked, 1 rows
 * masked, 2 gathered (and masked). */
#define NNCL_DWF_COL(K, kj, a)                                                                                        \
    {                                                                                                                 \
        int ki_;                                                                                                      \
        _Pragma("unroll") for (ki_ = 0; ki_ < K; ki_++) {                                                             \
            int i_ = q + (ki_ - P) * W + (kj) - P;                                                                    \
            float16 v_;                                                                                               \
            if (mode == 0) {                                                                                          \
                v_ = nncl_dw_ld16(src + i_);                                                                          \
            } else {                                                                                                  \
                int16 r_ = row + (ki_ - P);                                                                           \
                v_ = mode == 1 ? nncl_dw_ld16(src + i_) : nncl_dwf_gather16(base, sp + i_, n);                        \
                v_ = select((float16)0.0f, v_, r_ >= 0 && r_ < H);                                                    \
            }                                                                                                         \
            a += wk[ki_ * K + (kj)] * v_;                                                                             \
        }                                                                                                             \
    }
/* a with the lanes whose column + kj - P falls outside the row zeroed */
#define NNCL_DWF_CMASK(a, kj) select((float16)0.0f, a, col + ((kj) - P) >= 0 && col + ((kj) - P) < W)

/* The mode of chunk q of L lanes in the plane at off of a tensor of n
 * elements: 2 (gathered) where its taps could leave the tensor, else 1. */
#define NNCL_DWF_MODE(off, L, n) ((off) + q - P * W - P < 0 || (off) + q + (L) - 1 + P * W + P >= (n) ? 2 : 1)

/* The next chunk's lanes: col and row (vectors of type T) advanced by
 * dc columns and dr rows, wrapping at the row's end. */
#define NNCL_DWF_NEXT(T)                                                                                              \
    {                                                                                                                 \
        T wrap;                                                                                                       \
        col += dc, row += dr;                                                                                         \
        wrap = col >= W;                                                                                              \
        col -= wrap & (T)W, row -= wrap;                                                                              \
    }

/* Chunks q0, q0 + 16 .. < q1 of the plane at sp of tensor base (n
 * elements; H rows of W) under the taps wk, + b, act, (+)= dst: those
 * whose taps all fall inside the plane's rows and the tensor (from qa to
 * qb) in a loop of their own, where the mode is a constant and the loads
 * go unchecked; the chunks before and after it with their masks. */
#define NNCL_DWF_PLANE(K, COLS)                                                                                       \
    {                                                                                                                 \
        const int P = K / 2;                                                                                          \
        int lo = P * W, hi = (H - P) * W, total = H * W, q = q0, dc = 16 % W, dr = 16 / W;                            \
        int qa = max(lo, P * W + P - sp), qb = min(min(hi, n - sp - P * W - P), q1);                                  \
        int16 col = ((int16)q0 + NNCL_DW_IOTA16) % W, row = ((int16)q0 + NNCL_DW_IOTA16) / W;                         \
        __global const act_t *src = base + sp;                                                                        \
        for (; q < q1 && (q < qa || q + 16 > qb); q += 16) {                                                          \
            int mode = NNCL_DWF_MODE(sp, 16, n);                                                                      \
            COLS NNCL_DWF_NEXT(int16)                                                                                 \
        }                                                                                                             \
        for (; q + 16 <= qb; q += 16) {                                                                               \
            const int mode = 0;                                                                                       \
            COLS NNCL_DWF_NEXT(int16)                                                                                 \
        }                                                                                                             \
        for (; q < q1; q += 16) {                                                                                     \
            int mode = NNCL_DWF_MODE(sp, 16, n);                                                                      \
            COLS NNCL_DWF_NEXT(int16)                                                                                 \
        }                                                                                                             \
    }

/* The output chunk of the three (five) column sums, through bias, act and the store. */
#define NNCL_DWF_STORE(v)                                                                                             \
    {                                                                                                                 \
        float16 o_ = (v) + bv;                                                                                        \
        __global act_t *d_ = dst + q;                                                                                 \
        nncl_dw_st8(nncl_act8(o_.lo, act), d_, total - q, accv);                                                      \
        if (total - q > 8) nncl_dw_st8(nncl_act8(o_.hi, act), d_ + 8, total - q - 8, accv);                           \
    }
#define NNCL_DWF_COLS3                                                                                                \
    {                                                                                                                 \
        float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f;                                                                      \
        NNCL_DWF_COL(3, 0, a0) NNCL_DWF_COL(3, 1, a1) NNCL_DWF_COL(3, 2, a2)                                          \
        NNCL_DWF_STORE(NNCL_DWF_CMASK(a0, 0) + a1 + NNCL_DWF_CMASK(a2, 2))                                           \
    }
#define NNCL_DWF_COLS5                                                                                                \
    {                                                                                                                 \
        float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f;                                                \
        NNCL_DWF_COL(5, 0, a0) NNCL_DWF_COL(5, 1, a1) NNCL_DWF_COL(5, 2, a2) NNCL_DWF_COL(5, 3, a3)                   \
        NNCL_DWF_COL(5, 4, a4)                                                                                        \
        NNCL_DWF_STORE(NNCL_DWF_CMASK(a0, 0) + NNCL_DWF_CMASK(a1, 1) + a2 + NNCL_DWF_CMASK(a3, 3) +                  \
                       NNCL_DWF_CMASK(a4, 4))                                                                         \
    }

/* y = act(conv(x) + b): one work-item per rb chunks of 16 outputs (global
 * id 0) of plane b O + o (id 2). */
#define NNCL_DWF_FORWARD_K(K)                                                                                         \
    __kernel void nncl_conv_dw_f32_flat_k##K(NNCL_DW_FORWARD_ARGS) {                                                  \
        int q0 = (int)get_global_id(0) * rb * 16, z = get_global_id(2), o = z % O, t, accv = 0;                      \
        int q1 = min(q0 + rb * 16, H * W), sp = z / (O / C) * H * W, n = xn;                                          \
        float wk[K * K], bv = has_bias ? NNCL_LDG(bias, b_off + o) : 0.0f;                                            \
        __global const act_t *base = x + x_off;                                                                       \
        __global act_t *dst = y + y_off + z * H * W;                                                                  \
        if (q0 >= H * W) return; /* the launch rounded up */                                                          \
        for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + t);                                       \
        NNCL_DWF_PLANE(K, NNCL_DWF_COLS##K)                                                                           \
    }
NNCL_DWF_FORWARD_K(3)
NNCL_DWF_FORWARD_K(5)

/* dx (+)= conv^T(dy): the forward over dy with the taps reversed (the
 * padding K - 1 - K/2 is K/2 again), summed over the M outputs of channel
 * c (the first stores, the others add); one work-item per rb chunks of 16
 * inputs (global id 0) of plane b C + c (id 2). */
#define NNCL_DWF_INPUT_K(K)                                                                                           \
    __kernel void nncl_conv_dw_backward_f32_input_flat_k##K(NNCL_DW_INPUT_ARGS) {                                     \
        int q0 = (int)get_global_id(0) * rb * 16, z = get_global_id(2), M = O / C, m, t, n = dyn, act = 0;           \
        int q1 = min(q0 + rb * 16, H * W);                                                                            \
        float wk[K * K], bv = 0.0f;                                                                                   \
        __global const act_t *base = dy + dy_off;                                                                     \
        __global act_t *dst = dx + dx_off + z * H * W;                                                                \
        if (q0 >= H * W) return; /* the launch rounded up */                                                          \
        for (m = 0; m < M; m++) {                                                                                     \
            int o = z % C * M + m, sp = (z * M + m) * H * W, accv = acc || m;                                         \
            for (t = 0; t < K * K; t++) wk[t] = NNCL_LDG(w + w_off, o * K * K + K * K - 1 - t);                       \
            NNCL_DWF_PLANE(K, NNCL_DWF_COLS##K)                                                                       \
        }                                                                                                             \
    }
NNCL_DWF_INPUT_K(3)
NNCL_DWF_INPUT_K(5)

/* The weight gradient's first pass (as nncl_conv_dw_backward_f32_weight_k3
 * in cl/conv_dw.cl: chunk p of P over the B H rows of y, global id 0;
 * output o, id 1) over flat chunks of 8: each tap's products in a float8
 * of its own, dy masked per tap column, x per tap row where a chunk's taps
 * leave the plane's rows. 3x3 takes the 9 taps in one pass; 5x5 three tap
 * rows, then two (25 sums would not stay in registers). The part's sums are
 * named variables: PoCL keeps a private array written in a loop in memory. */
#define NNCL_DWF_W(ki, kj, a)                                                                                         \
    {                                                                                                                 \
        int i_ = q + ((ki) - P) * W + (kj) - P;                                                                       \
        float8 v_;                                                                                                    \
        if (mode == 0) {                                                                                              \
            v_ = NNCL_LD8(xs + i_);                                                                                   \
        } else {                                                                                                      \
            int8 r_ = row + ((ki) - P);                                                                               \
            if (mode == 1) {                                                                                          \
                v_ = NNCL_LD8(xs + i_);                                                                               \
            } else {                                                                                                  \
                int8 g_ = clamp((int8)(xp + i_) + (int8)(0, 1, 2, 3, 4, 5, 6, 7), 0, xn - 1);                         \
                v_ = (float8)(NNCL_LDG(x + x_off, g_.s0), NNCL_LDG(x + x_off, g_.s1), NNCL_LDG(x + x_off, g_.s2),     \
                              NNCL_LDG(x + x_off, g_.s3), NNCL_LDG(x + x_off, g_.s4), NNCL_LDG(x + x_off, g_.s5),     \
                              NNCL_LDG(x + x_off, g_.s6), NNCL_LDG(x + x_off, g_.s7));                                \
            }                                                                                                         \
            v_ = select((float8)0.0f, v_, r_ >= 0 && r_ < H);                                                         \
        }                                                                                                             \
        a += d##kj * v_;                                                                                              \
    }
#define NNCL_DWF_DCOL(kj) float8 d##kj = select((float8)0.0f, d, col + ((kj) - P) >= 0 && col + ((kj) - P) < W)
/* The loops of the first pass around BODY over chunk q of plane b's dy
 * (d, its lanes past the chunk's rows zero) and x (xs). */
#define NNCL_DWF_WLOOPS(K, BODY)                                                                                      \
    const int P = K / 2;                                                                                              \
    int p = get_global_id(0), o = get_global_id(1), c = o / (O / C), R = B * H, HW = H * W, b;                        \
    int j0 = (int)(((long)R * p) / P_), j1 = (int)(((long)R * (p + 1)) / P_);                                         \
    int lo = P * W, hi = (H - P) * W, dc = 8 % W, dr = 8 / W;                                                         \
    for (b = j0 / H; b * H < j1; b++) {                                                                               \
        int q0 = max(j0 - b * H, 0) * W, q1 = min(j1 - b * H, H) * W, q, yp = (b * O + o) * HW, xp = (b * C + c) * HW; \
        int8 col = ((int8)q0 + (int8)(0, 1, 2, 3, 4, 5, 6, 7)) % W;                                                   \
        int8 row = ((int8)q0 + (int8)(0, 1, 2, 3, 4, 5, 6, 7)) / W;                                                   \
        __global const act_t *xs = x + x_off + xp;                                                                    \
        int qa = max(lo, P * W + P - xp), qb = min(min(hi, xn - xp - P * W - P), q1);                                 \
        for (q = q0; q < q1 && (q < qa || q + 8 > qb); q += 8) {                                                      \
            int mode = NNCL_DWF_MODE(xp, 8, xn);                                                                      \
            float8 d = nncl_dw_ld8e(dy + dy_off, yp, q, q1, dyn, q + 8 <= q1 ? 0 : 2);                                \
            BODY NNCL_DWF_NEXT(int8)                                                                                  \
        }                                                                                                             \
        for (; q + 8 <= qb; q += 8) {                                                                                 \
            const int mode = 0;                                                                                       \
            float8 d = NNCL_LD8(dy + dy_off + yp + q);                                                                \
            BODY NNCL_DWF_NEXT(int8)                                                                                  \
        }                                                                                                             \
        for (; q < q1; q += 8) {                                                                                      \
            int mode = NNCL_DWF_MODE(xp, 8, xn);                                                                      \
            float8 d = nncl_dw_ld8e(dy + dy_off, yp, q, q1, dyn, q + 8 <= q1 ? 0 : 2);                                \
            BODY NNCL_DWF_NEXT(int8)                                                                                  \
        }                                                                                                             \
    }
#define NNCL_DWF_WPART(t, a) part[(o * K * K + (t)) * P_ + p] = nncl_sum8(a)

__kernel void nncl_conv_dw_backward_f32_weight_flat_k3(NNCL_DW_PART_ARGS) {
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f, a8 = 0.0f;
    const int K = 3, P_ = P;
    {
        NNCL_DWF_WLOOPS(3, NNCL_DWF_DCOL(0); NNCL_DWF_DCOL(1); NNCL_DWF_DCOL(2);
                        NNCL_DWF_W(0, 0, a0) NNCL_DWF_W(0, 1, a1) NNCL_DWF_W(0, 2, a2) NNCL_DWF_W(1, 0, a3)
                            NNCL_DWF_W(1, 1, a4) NNCL_DWF_W(1, 2, a5) NNCL_DWF_W(2, 0, a6) NNCL_DWF_W(2, 1, a7)
                                NNCL_DWF_W(2, 2, a8))
        NNCL_DWF_WPART(0, a0), NNCL_DWF_WPART(1, a1), NNCL_DWF_WPART(2, a2), NNCL_DWF_WPART(3, a3);
        NNCL_DWF_WPART(4, a4), NNCL_DWF_WPART(5, a5), NNCL_DWF_WPART(6, a6), NNCL_DWF_WPART(7, a7);
        NNCL_DWF_WPART(8, a8);
    }
}

#define NNCL_DWF_W5(ki, r)                                                                                            \
    NNCL_DWF_W(ki, 0, r##0) NNCL_DWF_W(ki, 1, r##1) NNCL_DWF_W(ki, 2, r##2) NNCL_DWF_W(ki, 3, r##3)                   \
        NNCL_DWF_W(ki, 4, r##4)
#define NNCL_DWF_WPART5(ki, r)                                                                                        \
    NNCL_DWF_WPART((ki) * 5 + 0, r##0), NNCL_DWF_WPART((ki) * 5 + 1, r##1), NNCL_DWF_WPART((ki) * 5 + 2, r##2),       \
        NNCL_DWF_WPART((ki) * 5 + 3, r##3), NNCL_DWF_WPART((ki) * 5 + 4, r##4)
#define NNCL_DWF_DCOL5 NNCL_DWF_DCOL(0); NNCL_DWF_DCOL(1); NNCL_DWF_DCOL(2); NNCL_DWF_DCOL(3); NNCL_DWF_DCOL(4);

__kernel void nncl_conv_dw_backward_f32_weight_flat_k5(NNCL_DW_PART_ARGS) {
    const int K = 5, P_ = P;
    {
        float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
        float8 b4 = 0.0f, c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f;
        NNCL_DWF_WLOOPS(5, NNCL_DWF_DCOL5 NNCL_DWF_W5(0, a) NNCL_DWF_W5(1, b) NNCL_DWF_W5(2, c))
        NNCL_DWF_WPART5(0, a), NNCL_DWF_WPART5(1, b), NNCL_DWF_WPART5(2, c);
    }
    {
        float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
        float8 b4 = 0.0f;
        NNCL_DWF_WLOOPS(5, NNCL_DWF_DCOL5 NNCL_DWF_W5(3, a) NNCL_DWF_W5(4, b))
        NNCL_DWF_WPART5(3, a), NNCL_DWF_WPART5(4, b);
    }
}
