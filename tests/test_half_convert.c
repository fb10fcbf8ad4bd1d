/* test_half_convert.c - the devices' fp16 and bf16 conversions
 * (cl/common.cl NNCL_LD / NNCL_ST, and the 8-wide NNCL_LD8 / NNCL_ST8)
 * against the host's (src/runtime/half.c), bit for bit, on every device: stores of
 * every 16-bit value, of the midpoints between neighbours (ties, rounded to
 * even) and of the floats either side of them, of values around the
 * overflow threshold and far below the smallest subnormal; loads through y
 * = p * x for every 16-bit pattern, with p = 1 (a load and a store give the
 * value back) and p = 0.75 (a rounded product), and every pattern loaded
 * to fp32 as it is. The 8-wide forms take another path where their 16
 * bytes are aligned: each runs at offset 0 (aligned) and 3 (not). NaN
 * only has to stay NaN. */
#include "harness.h"
#include "runtime/launch.h"
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
 * through its launch wrapper: nncl_store_f32 (nncl__k_store, its output
 * at element `off`), nncl_conv_to_f32 (fp32 out, its input at `off`) or a
 * unary kernel (nncl__k_unary, with its float parameter p when with_p). */
static int hc_run(nncl_context *ctx, int d, int store, const char *family, const char *name, const void *src,
                  size_t src_bytes, void *out, size_t n, size_t off, int with_p, float p) {
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
    int to_f32 = !strcmp(name, "nncl_conv_to_f32"), st = !strcmp(name, "nncl_store_f32");
    size_t out_bytes = n * (to_f32 ? 4 : 2), in_off = to_f32 ? off * 2 : 0, out_off = st ? off * 2 : 0;
    char *staged = (char *)calloc(1, src_bytes + in_off);
    if (!staged) return 1;
    memcpy(staged + in_off, src, src_bytes); /* the input at element `off` */
    s = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, src_bytes + in_off, staged, &err);
    if (err == CL_SUCCESS) o = clCreateBuffer(dev->cl_ctx, CL_MEM_WRITE_ONLY, out_bytes + out_off, NULL, &err);
    if (err == CL_SUCCESS) {
        nncl_status r;
        sv.mem = s;
        ov.mem = o;
        sv.off = ov.off = 0;
        if (to_f32) {
            nncl__args a;
            nncl__args_begin_slot(&a, ctx, &k.slot);
            sv.off = off;
            nncl__arg_view(&a, sv);
            nncl__arg_mem(&a, o);
            nncl__arg_int(&a, 0);
            nncl__arg_int(&a, (int)n);
            r = nncl__launch_1d(&a, dev, (n + 7) / 8);
        } else if (st) {
            ov.off = off;
            r = nncl__k_store(k, ov, sv, n);
        } else {
            r = nncl__k_unary(k, sv, ov, n, with_p ? &p : NULL);
        }
        bad = r != NNCL_OK ||
              clEnqueueReadBuffer(dev->queue, o, CL_TRUE, out_off, out_bytes, out, 0, NULL, NULL) != CL_SUCCESS;
    }
    free(staged);
    if (s) clReleaseMemObject(s);
    if (o) clReleaseMemObject(o);
    return bad;
}

static void hc_check(nncl_context *ctx, int d, int store) {
    const char *fmt = store == 1 ? "fp16" : "bf16";
    char name[200];
    size_t n = 0, i, wrong = 0, first = 0;
    float *in = hc_inputs(store, &n), p[2] = {1.0f, 0.75f}, *f = (float *)malloc(65536 * sizeof(float));
    unsigned short *out = (unsigned short *)malloc((n > 65536 ? n : 65536) * 2), bits[65536];
    int j, off;
    if (!in || !out || !f) {
        th_fail("half conversions", "out of host memory");
        free(in);
        free(out);
        free(f);
        return;
    }
    for (off = 0; off <= 3; off += 3) {
        snprintf(name, sizeof name, "%s stores at element %d equal the host's rounding, bit for bit, on %s", fmt, off,
                 th_device_label(ctx, d));
        if (hc_run(ctx, d, store, "half", "nncl_store_f32", in, n * 4, out, n, (size_t)off, 0, 0)) {
            th_fail(name, "could not run: %s", nncl_last_error(ctx));
            continue;
        }
        for (wrong = 0, i = 0; i < n; i++) {
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
    }
    for (i = 0; i < 65536; i++) bits[i] = (unsigned short)i;
    for (off = 0; off <= 3; off += 3) {
        snprintf(name, sizeof name, "%s loads to fp32 of all 65536 patterns at element %d equal the host's on %s", fmt,
                 off, th_device_label(ctx, d));
        if (hc_run(ctx, d, store, "conv", "nncl_conv_to_f32", bits, sizeof bits, f, 65536, (size_t)off, 0, 0)) {
            th_fail(name, "could not run: %s", nncl_last_error(ctx));
            continue;
        }
        for (wrong = 0, i = 0; i < 65536; i++) {
            float want = hc_to_f32(store, (unsigned)i);
            if (want != want ? f[i] == f[i] : memcmp(&f[i], &want, 4) != 0) {
                if (!wrong++) first = i;
            }
        }
        if (wrong)
            th_fail(name, "%zu differ, first 0x%04zx: device %.9g, host %.9g", wrong, first, (double)f[first],
                    (double)hc_to_f32(store, (unsigned)first));
        else
            th_pass("%s", name);
    }
    for (j = 0; j < 2; j++) {
        snprintf(name, sizeof name, "%s loads: %g * x for all 65536 patterns equals the host's on %s", fmt, (double)p[j],
                 th_device_label(ctx, d));
        if (hc_run(ctx, d, store, "elementwise", "nncl_scale_f32", bits, sizeof bits, out, 65536, 0, 1, p[j])) {
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
    free(f);
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
