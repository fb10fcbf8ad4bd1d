/* safetensors_dtype.c - the little-endian bytes of safetensors files:
 * 64-bit lengths, the conversion of every supported element type to float
 * on reading, and float32 on writing, on hosts of either byte order. */
#include "io/safetensors.h"
#include <math.h>

int nncl__st_host_le(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

uint64_t nncl__st_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void nncl__st_put_u64(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Little-endian integer element i of a dtype of size bytes, signed or not,
 * as a 64-bit value (an unsigned one above INT64_MAX is marked in *huge). */
static int64_t stv_int_at(const unsigned char *src, size_t i, int size, int is_signed, int *huge) {
    uint64_t u = 0;
    int k;
    for (k = size - 1; k >= 0; k--) u = u << 8 | src[(size_t)size * i + (size_t)k];
    *huge = 0;
    if (is_signed && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~(uint64_t)0 << (8 * size); /* sign-extend */
    if (!is_signed && u > (uint64_t)INT64_MAX) {
        *huge = 1;
        return 0;
    }
    return (int64_t)u; /* two's complement: the implementation-defined conversion every target does */
}

/* Converts a tensor's little-endian bytes to float. Floating dtypes always
 * convert; integers (PyTorch stores num_batches_tracked as I64, masks as
 * BOOL) only where the float holds the value exactly: a count above 2^24
 * that float would round is refused rather than changed. */
nncl_status nncl__st_convert(const char *source, const nncl__st_tensor *t, const unsigned char *src, float *dst) {
    const char *dtype = t->dtype;
    size_t i, n = t->numel;
    if (!strcmp(dtype, "F32")) {
        if (nncl__st_host_le()) {
            if (n) memcpy(dst, src, n * 4);
        } else {
            for (i = 0; i < n; i++) {
                const unsigned char *p = src + 4 * i;
                uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(dst + i, &u, 4);
            }
        }
    } else if (!strcmp(dtype, "F16")) {
        for (i = 0; i < n; i++) dst[i] = nncl__f16_to_f32((unsigned)src[2 * i] | (unsigned)src[2 * i + 1] << 8);
    } else if (!strcmp(dtype, "BF16")) {
        for (i = 0; i < n; i++) {
            uint32_t u = ((uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8) << 16;
            memcpy(dst + i, &u, 4);
        }
    } else if (!strcmp(dtype, "F64")) {
        for (i = 0; i < n; i++) {
            uint64_t u = nncl__st_get_u64(src + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            /* Out-of-range double to float conversion is undefined in C. */
            if (d > 3.4028234663852886e38) dst[i] = (float)HUGE_VAL;
            else if (d < -3.4028234663852886e38) dst[i] = -(float)HUGE_VAL;
            else dst[i] = (float)d;
        }
    } else if (!strcmp(dtype, "BOOL")) {
        for (i = 0; i < n; i++) {
            if (src[i] > 1)
                return nncl__st_fail(source, NNCL_ERR_FORMAT, "tensor '%.200s' (BOOL) element %zu is %u, not 0 or 1",
                                     t->name, i, (unsigned)src[i]);
            dst[i] = (float)src[i];
        }
    } else { /* I8..I64, U8..U64 */
        int is_signed = dtype[0] == 'I', huge;
        for (i = 0; i < n; i++) {
            int64_t v = stv_int_at(src, i, t->dsize, is_signed, &huge);
            float f = (float)v;
            /* exact when converting back gives v: |f| < 2^63 keeps the cast defined */
            if (huge || f >= 9.2233720368547758e18f || f < -9.2233720368547758e18f || (int64_t)f != v) {
                char text[32];
                if (huge) snprintf(text, sizeof text, "above 2^63");
                else snprintf(text, sizeof text, "%lld", (long long)v);
                return nncl__st_fail(source, NNCL_ERR_UNSUPPORTED,
                                     "tensor '%.200s' (%s) element %zu is %s, which float cannot hold exactly", t->name,
                                     dtype, i, text);
            }
            dst[i] = f;
        }
    }
    return NNCL_OK;
}

/* n floats as little-endian float32. */
void nncl__st_write_floats(FILE *f, const float *x, size_t n) {
    unsigned char chunk[4096];
    size_t i, k;
    if (nncl__st_host_le()) {
        if (n) fwrite(x, 4, n, f);
        return;
    }
    for (i = 0; i < n; i += k) {
        for (k = 0; k < sizeof chunk / 4 && i + k < n; k++) {
            uint32_t u;
            memcpy(&u, x + i + k, 4);
            chunk[4 * k] = (unsigned char)u;
            chunk[4 * k + 1] = (unsigned char)(u >> 8);
            chunk[4 * k + 2] = (unsigned char)(u >> 16);
            chunk[4 * k + 3] = (unsigned char)(u >> 24);
        }
        fwrite(chunk, 4, k, f);
    }
}
