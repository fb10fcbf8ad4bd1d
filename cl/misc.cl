/* misc.cl - dropout with a counter-based mask (nncl_drop_keep of
 * cl/common.cl, the same hash as src/ops/op_misc.c, so host and device
 * masks agree bit for bit), embedding
 * lookup and its atomics-free gradient, concatenation and its split, and a
 * zero fill. Buffers are followed by their int element offsets; `acc` 1
 * means add into the output. Activations, their gradients and the
 * embedding table's working copy are in the storage type (act_t,
 * cl/common.cl); indices, the table's gradient and the zero fill (an
 * index input's gradient) are fp32. */

/* dst (+)= mask * scale * src over n elements, per elements per sample
 * (per 0: not batched, one sample of index 0). Forward (acc 0) and backward
 * use the same mask; with training 0 it is the identity. */
__kernel void nncl_dropout_f32(__global const act_t *src, int src_off, __global act_t *dst, int dst_off, int n,
                               int per, int sample0, uint k0, uint k1, uint thr, float scale, int training, int acc) {
    int i = (int)get_global_id(0);
    if (i < n) {
        float v = NNCL_LD(src, src_off + i);
        if (training) {
            uint sample = per ? (uint)(sample0 + i / per) : 0u, elem = per ? (uint)(i % per) : (uint)i;
            v = nncl_drop_keep(k0, k1, sample, elem, thr) ? v * scale : 0.0f;
        }
        NNCL_ST(acc ? NNCL_LD(dst, dst_off + i) + v : v, dst, dst_off + i);
    }
}

/* y[r, d] = w[idx[r], d]; an index that is not a whole number in [0, num)
 * gives a row of NaN (the trainer skips such steps) and reads nothing. */
__kernel void nncl_embedding_f32(__global const float *ind, int ind_off, __global const act_t *w, int w_off,
                                     __global act_t *y, int y_off, int rows, int num, int dim) {
    int i = (int)get_global_id(0);
    if (i < rows * dim) {
        int r = i / dim, d = i - r * dim;
        float v = ind[ind_off + r];
        NNCL_ST((v >= 0.0f && v < (float)num && v == floor(v)) ? NNCL_LD(w, w_off + (size_t)(int)v * dim + d) : NAN, y,
                y_off + i);
    }
}

/* dw[j, d] (+)= sum of dy[r, d] over the rows r with idx[r] == j. Work-item
 * t owns row j = t / nblk, columns [32 (t % nblk), +32): no two work-items
 * write the same element, so no atomics, and the rows are added in order,
 * so the result is the same every run. Invalid indices match no row. */
__kernel void nncl_embedding_backward_f32(__global const float *ind, int ind_off, __global const act_t *dy, int dy_off,
                                     __global float *dw, int dw_off, int rows, int num, int dim, int nblk, int acc) {
    int t = (int)get_global_id(0), j, d0, d1, d, r;
    float fj;
    if (t >= num * nblk) return;
    j = t / nblk;
    d0 = (t - j * nblk) * 32;
    d1 = min(dim, d0 + 32);
    fj = (float)j;
    dw += dw_off + (size_t)j * dim;
    if (!acc)
        for (d = d0; d < d1; d++) dw[d] = 0.0f;
    for (r = 0; r < rows; r++)
        if (ind[ind_off + r] == fj)
            for (d = d0; d < d1; d++) dw[d] += NNCL_LD(dy, dy_off + (size_t)r * dim + d);
}

/* y [rows, ca + cb] from a [rows, ca] and b [rows, cb]. */
__kernel void nncl_concat_f32(__global const act_t *a, int a_off, __global const act_t *b, int b_off,
                              __global act_t *y, int y_off, int rows, int ca, int cb) {
    int i = (int)get_global_id(0), w = ca + cb;
    if (i < rows * w) {
        int r = i / w, k = i - r * w;
        NNCL_ST(k < ca ? NNCL_LD(a, a_off + r * ca + k) : NNCL_LD(b, b_off + r * cb + (k - ca)), y, y_off + i);
    }
}

/* The part of dy [rows, ca + cb] that came from input `second` (0: a, 1: b)
 * into dst [rows, ca or cb]. */
__kernel void nncl_concat_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dst, int dst_off, int rows,
                                   int ca, int cb, int second, int acc) {
    int i = (int)get_global_id(0), c = second ? cb : ca;
    if (i < rows * c) {
        int r = i / c, k = i - r * c;
        float v = NNCL_LD(dy, dy_off + r * (ca + cb) + (second ? ca : 0) + k);
        NNCL_ST(acc ? NNCL_LD(dst, dst_off + i) + v : v, dst, dst_off + i);
    }
}

__kernel void nncl_misc_zero_f32(__global float *dst, int dst_off, int n) {
    int i = (int)get_global_id(0);
    if (i < n) dst[dst_off + i] = 0.0f;
}
