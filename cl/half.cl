/* half.cl - conversions between fp32 and the storage type (NNCL_STORE,
 * cl/common.cl): the working copy of the weights from the fp32 masters
 * after every update, and the samples fed to an input from their fp32
 * upload. */

/* dst[d_off + i] = src[s_off + i] in the storage type, i < n: 8 values per
 * work-item, NDRange ceil(n / 8) (NNCL_ST8: converted as a vector). */
__kernel void nncl_store_f32(__global act_t *dst, int d_off, __global const float *src, int s_off, int n) {
    int i = get_global_id(0) * 8, e;
    if (i + 8 <= n) {
        NNCL_ST8(vload8(0, src + s_off + i), dst + d_off + i);
    } else {
        for (e = i; e < n; e++) NNCL_ST(src[s_off + e], dst, d_off + e);
    }
}
