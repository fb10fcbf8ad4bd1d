/* devices.c - lists every OpenCL device nncl can see, then checks a GEMM on
 * the default devices (or the ones chosen by --devices or $NNCL_DEVICES)
 * against a plain C product: the quickest way to see that a machine is
 * ready for nncl. */
#include "nncl.h"
#include "options.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int dv_check(nncl_status st, nncl_context *ctx, const char *what) {
    if (st == NNCL_OK) return 0;
    fprintf(stderr, "devices: %s: %s: %s\n", what, nncl_status_str(st), nncl_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    nncl_device_info infos[32];
    nncl_context *ctx = NULL;
    nncl_tensor *a = NULL, *b = NULL, *c = NULL;
    float *ha, *hb, *hc;
    int n_dev = 0, i, j, k, d, sa[2], sb[2], sc[2], bad = 0;
    int m = 256, n = 192, kk = 320;
    double err = 0, ref = 0;
    nncl_config cfg = nncl_config_default();
    const char *size = "256x192x320";
    const ex_option opts[] = {
        {"--devices", OPT_STR, &cfg.devices, "SEL", "devices to check: all, gpu, cpu, an index, a name part (pocl), ..."},
        {"--size", OPT_STR, &size, "MxNxK", "the GEMM's shape (256x192x320)"},
        {NULL, 0, NULL, NULL, NULL}};

    setvbuf(stdout, NULL, _IOLBF, 0);
    ex_parse(argc, argv, "devices [options]", opts, NULL, 0);
    if (sscanf(size, "%dx%dx%d", &m, &n, &kk) != 3 || m < 1 || n < 1 || kk < 1 || m > 8192 || n > 8192 || kk > 8192) {
        fprintf(stderr, "error: --size %s: three positive numbers up to 8192 are needed, as MxNxK\n\n", size);
        ex_usage(stderr, "devices [options]", opts);
        return 2;
    }
    if (dv_check(nncl_devices_list(infos, 32, &n_dev), NULL, "listing the devices")) return 1;
    printf("%d OpenCL device%s:\n", n_dev, n_dev == 1 ? "" : "s");
    for (i = 0; i < n_dev && i < 32; i++)
        printf("  %d: %s | %s | %s | %d CUs, %d MHz, %.1f GiB%s%s\n", i, infos[i].platform, infos[i].name,
               infos[i].cl_version, infos[i].compute_units, infos[i].clock_mhz,
               (double)infos[i].global_mem / (1 << 30), infos[i].fp16 ? ", fp16" : "",
               infos[i].fp64 ? ", fp64" : "");
    if (dv_check(nncl_init(&cfg, &ctx), NULL, cfg.devices ? "opening the chosen devices" : "opening the default devices"))
        return 1;

    ha = (float *)malloc(sizeof(float) * (size_t)m * kk);
    hb = (float *)malloc(sizeof(float) * (size_t)kk * n);
    hc = (float *)malloc(sizeof(float) * (size_t)m * n);
    if (!ha || !hb || !hc) {
        fprintf(stderr, "devices: out of memory\n");
        return 1;
    }
    for (i = 0; i < m * kk; i++) ha[i] = (float)((i * 7 % 23) - 11) / 11.0f;
    for (i = 0; i < kk * n; i++) hb[i] = (float)((i * 5 % 19) - 9) / 9.0f;
    sa[0] = m, sa[1] = kk, sb[0] = kk, sb[1] = n, sc[0] = m, sc[1] = n;

    for (d = 0; d < nncl_device_count(ctx); d++) {
        nncl_device_info info;
        nncl_device_info_get(ctx, d, &info);
        err = ref = 0;
        if (dv_check(nncl_tensor_create(ctx, d, 2, sa, &a), ctx, "tensor a") ||
            dv_check(nncl_tensor_create(ctx, d, 2, sb, &b), ctx, "tensor b") ||
            dv_check(nncl_tensor_create(ctx, d, 2, sc, &c), ctx, "tensor c") ||
            dv_check(nncl_tensor_write(a, ha, (size_t)m * kk), ctx, "writing a") ||
            dv_check(nncl_tensor_write(b, hb, (size_t)kk * n), ctx, "writing b") ||
            dv_check(nncl_gemm(ctx, 0, 0, 1.0f, a, b, 0.0f, c), ctx, "gemm") ||
            dv_check(nncl_tensor_read(c, hc, (size_t)m * n), ctx, "reading c")) {
            bad = 1;
        } else {
            for (i = 0; i < m; i++)
                for (j = 0; j < n; j++) {
                    double s = 0;
                    for (k = 0; k < kk; k++) s += (double)ha[i * kk + k] * hb[k * n + j];
                    err += (hc[i * n + j] - s) * (hc[i * n + j] - s);
                    ref += s * s;
                }
            err = ref > 0 ? err / ref : err;
            printf("GEMM %dx%dx%d on %s (%s): normalised squared error %.2e: %s\n", m, n, kk, info.name,
                   info.platform, err, err < 1e-8 ? "ok" : "WRONG");
            if (!(err < 1e-8)) bad = 1;
        }
        nncl_tensor_free(a);
        nncl_tensor_free(b);
        nncl_tensor_free(c);
        a = b = c = NULL;
    }
    free(ha);
    free(hb);
    free(hc);
    nncl_free(ctx);
    return bad;
}
