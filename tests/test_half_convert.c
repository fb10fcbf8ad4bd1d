/* test_half_convert.c - the devices' fp16 and bf16 conversions
 * (cl/common.cl NNCL_LD / NNCL_ST) against the host's (src/half.c), bit
 * for bit, on every device: stores of every 16-bit value, of the midpoints
 * between neighbours (ties, rounded to even) and of the floats either side
 * of them, of values around the overflow threshold and far below the
 * smallest subnormal; loads through y = p * x for every 16-bit pattern,
 * with p = 1 (a load and a store give the value back) and p = 0.75 (a
 * rounded product). NaN only has to stay NaN. */
#include "harness.h"
#include "launch.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float hc_to_f32(int store, unsigned h) { return store == 1 ? nncl__f16_to_f32(h) : nncl__bf16_to_f32(h); }
static unsigned hc_from_f32(int store, float f) { return store == 1 ? nncl__f32_to_f16(f) : nncl__f32_to_bf16(f); }
static int hc_nan(int store, unsigned h) { return isnan(hc_to_f32(store, h)); }

/* Floats to store: each value, the midpoint to the next and the floats
 * either side of it, and fixed extremes; *n of them. */
static float *hc_inputs(int store, size_t *n) {
    static const float extra[] = {65504.0f, 65519.996f, 65520.0f, 65535.0f, 65536.0f, 1e30f, -1e30f, 1e-30f,
                                  -1e-30f, 1e-45f, 2.9802322e-08f, 2.9802326e-08f, 3e-38f, 3.4e38f};
    float *v = (float *)malloc((65536 * 4 + sizeof extra / sizeof extra[0]) * sizeof(float));
    size_t k = 0, i;
    unsigned h;
    if (!v) return NULL;
    for (h = 0; h < 65536; h++) {
        float a = hc_to_f32(store, h), b = hc_to_f32(store, (h & 0x7fffu) == 0x7fffu ? h : h + 1), m;
        v[k++] = a;
        if (isnan(a) || isnan(b) || isinf(a) || isinf(b) || (h & 0x7fffu) == 0x7fffu) continue;
        m = (float)(((double)a + b) / 2);
        v[k++] = m;
        v[k++] = nextafterf(m, -INFINITY);
        v[k++] = nextafterf(m, INFINITY);
    }
    for (i = 0; i < sizeof extra / sizeof extra[0]; i++) v[k++] = extra[i];
    *n = k;
    return v;
}

/* Runs kernel `name` of family on dev in storage `store` over n elements,
 * through its launch wrapper: nncl_store_f32 (nncl__k_store) or a unary
 * kernel (nncl__k_unary, with its float parameter p when with_p). */
static int hc_run(nncl_context *ctx, int d, int store, const char *family, const char *name, const void *src,
                  size_t src_bytes, unsigned short *out, size_t n, int with_p, float p) {
    nncl_device *dev = nncl__device(ctx, d);
    nncl__kl k;
    nncl__view sv, ov;
    cl_mem s = NULL, o = NULL;
    cl_int err;
    int bad = 1;
    k.ctx = ctx;
    k.dev = dev;
    if (nncl__kslot_resolve_opts(ctx, dev, family, store == 1 ? "-DNNCL_STORE=1" : "-DNNCL_STORE=2", name, &k.slot) !=
        NNCL_OK)
        return 1;
    s = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, src_bytes, (void *)src, &err);
    if (err == CL_SUCCESS) o = clCreateBuffer(dev->cl_ctx, CL_MEM_WRITE_ONLY, n * 2, NULL, &err);
    if (err == CL_SUCCESS) {
        sv.mem = s;
        ov.mem = o;
        sv.off = ov.off = 0;
        bad = (!strcmp(name, "nncl_store_f32") ? nncl__k_store(k, ov, sv, n)
                                                : nncl__k_unary(k, sv, ov, n, with_p ? &p : NULL)) != NNCL_OK ||
              clEnqueueReadBuffer(dev->queue, o, CL_TRUE, 0, n * 2, out, 0, NULL, NULL) != CL_SUCCESS;
    }
    if (s) clReleaseMemObject(s);
    if (o) clReleaseMemObject(o);
    return bad;
}

static void hc_check(nncl_context *ctx, int d, int store) {
    const char *fmt = store == 1 ? "fp16" : "bf16";
    char name[200];
    size_t n = 0, i, wrong = 0, first = 0;
    float *in = hc_inputs(store, &n), p[2] = {1.0f, 0.75f};
    unsigned short *out = (unsigned short *)malloc((n > 65536 ? n : 65536) * 2), bits[65536];
    int j;
    snprintf(name, sizeof name, "%s stores equal the host's rounding, bit for bit, on %s", fmt, th_device_label(ctx, d));
    if (!in || !out || hc_run(ctx, d, store, "half", "nncl_store_f32", in, n * 4, out, n, 0, 0)) {
        th_fail(name, "could not run: %s", nncl_last_error(ctx));
        free(in);
        free(out);
        return;
    }
    for (i = 0; i < n; i++) {
        unsigned want = hc_from_f32(store, in[i]);
        if (hc_nan(store, want) ? !hc_nan(store, out[i]) : out[i] != want) {
            if (!wrong++) first = i;
        }
    }
    if (wrong)
        th_fail(name, "%zu of %zu differ, first %.9g: device 0x%04x, host 0x%04x", wrong, n, (double)in[first],
                out[first], hc_from_f32(store, in[first]));
    else
        th_pass("%s (%zu values)", name, n);
    for (i = 0; i < 65536; i++) bits[i] = (unsigned short)i;
    for (j = 0; j < 2; j++) {
        snprintf(name, sizeof name, "%s loads: %g * x for all 65536 patterns equals the host's on %s", fmt, (double)p[j],
                 th_device_label(ctx, d));
        if (hc_run(ctx, d, store, "elementwise", "nncl_scale_f32", bits, sizeof bits, out, 65536, 1, p[j])) {
            th_fail(name, "could not run: %s", nncl_last_error(ctx));
            continue;
        }
        for (wrong = 0, i = 0; i < 65536; i++) {
            unsigned want = hc_from_f32(store, p[j] * hc_to_f32(store, (unsigned)i));
            if (hc_nan(store, want) ? !hc_nan(store, out[i]) : out[i] != want) {
                if (!wrong++) first = i;
            }
        }
        if (wrong)
            th_fail(name, "%zu differ, first 0x%04zx: device 0x%04x, host 0x%04x", wrong, first, out[first],
                    hc_from_f32(store, p[j] * hc_to_f32(store, (unsigned)first)));
        else
            th_pass("%s", name);
    }
    free(in);
    free(out);
}

int main(void) {
    nncl_context *ctx = th_context();
    int d, store;
    if (!ctx) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx); d++)
        for (store = 1; store <= 2; store++) hc_check(ctx, d, store);
    nncl_free(ctx);
    return th_exit_code();
}
