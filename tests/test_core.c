/* test_core.c - devices, selection, tensors and transfers on every device
 * present, and the GEMM through CLBlast against a double reference. */
#include "harness.h"
#include "ops/reference.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_list(void) {
    nncl_device_info infos[64];
    int n = 0, i;
    TH_OK("devices_list", NULL, nncl_devices_list(infos, 64, &n));
    TH_CHECK("devices_list", n >= 1);
    for (i = 0; i < n && i < 64; i++) {
        TH_CHECK("devices_list", infos[i].name[0] && infos[i].platform[0]);
        TH_CHECK("devices_list", infos[i].compute_units > 0 && infos[i].max_alloc > 0);
        TH_CHECK("devices_list", infos[i].index == i);
    }
    th_pass("devices_list");
    return 0;
}

static int test_select(void) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_device_info all[64];
    int n = 0;
    TH_OK("select", NULL, nncl_devices_list(all, 64, &n));
    cfg.devices = "0";
    TH_OK("select", NULL, nncl_init(&cfg, &ctx));
    TH_CHECK("select", nncl_device_count(ctx) == 1);
    nncl_free(ctx);
    ctx = NULL;
    cfg.devices = "no-such-device-anywhere";
    TH_CHECK("select", nncl_init(&cfg, &ctx) == NNCL_ERR_NO_DEVICE && ctx == NULL);
    TH_CHECK("select", strstr(nncl_last_error(NULL), "no-such-device-anywhere") != NULL);
    cfg.devices = "999";
    TH_CHECK("select", nncl_init(&cfg, &ctx) == NNCL_ERR_NO_DEVICE);
    cfg.devices = "pocl"; /* the platform is "Portable Computing Language" */
    if (strstr(all[0].platform, "Portable Computing Language")) {
        TH_OK("select", NULL, nncl_init(&cfg, &ctx));
        nncl_free(ctx);
    }
    cfg.devices = "all";
    TH_OK("select", NULL, nncl_init(&cfg, &ctx));
    TH_CHECK("select", nncl_device_count(ctx) == n);
    nncl_free(ctx);
    cfg.devices = NULL; /* the default: all GPUs, else one CPU device */
    TH_OK("select", NULL, nncl_init(&cfg, &ctx));
    TH_CHECK("select", nncl_device_count(ctx) >= 1);
    nncl_free(ctx);
    th_pass("select");
    return 0;
}

static int test_transfer(nncl_context *ctx, int d) {
    const char *name = th_device_label(ctx, d);
    int shape[3] = {3, 5, 7};
    size_t n = 105, i;
    float src[105], dst[105];
    nncl_tensor *t = NULL, *u = NULL;
    nncl_event *ev = NULL;
    unsigned seed = 1;
    th_fill_uniform(src, n, -1, 1, &seed);
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 3, shape, &t));
    TH_CHECK(name, nncl_tensor_numel(t) == n && nncl_tensor_dim(t, 2) == 7);
    TH_OK(name, ctx, nncl_tensor_write(t, src, n));
    th_poison(dst, n);
    TH_OK(name, ctx, nncl_tensor_read(t, dst, n));
    TH_CHECK(name, memcmp(src, dst, sizeof src) == 0);
    th_poison(dst, n);
    TH_OK(name, ctx, nncl_tensor_read_async(t, dst, n, &ev));
    TH_OK(name, ctx, nncl_event_wait(ev));
    nncl_event_free(ev);
    TH_CHECK(name, memcmp(src, dst, sizeof src) == 0);
    /* copy to every device, itself included */
    for (i = 0; i < (size_t)nncl_device_count(ctx); i++) {
        TH_OK(name, ctx, nncl_tensor_create(ctx, (int)i, 3, shape, &u));
        TH_OK(name, ctx, nncl_tensor_copy(u, t));
        th_poison(dst, n);
        TH_OK(name, ctx, nncl_tensor_read(u, dst, n));
        TH_CHECK(name, memcmp(src, dst, sizeof src) == 0);
        nncl_tensor_free(u);
    }
    /* onto itself: nothing to do (OpenCL refuses overlapping copies) */
    TH_OK(name, ctx, nncl_tensor_copy(t, t));
    th_poison(dst, n);
    TH_OK(name, ctx, nncl_tensor_read(t, dst, n));
    TH_CHECK(name, memcmp(src, dst, sizeof src) == 0);
    nncl_tensor_free(t);
    th_pass("transfer %s", name);
    return 0;
}

static int test_gemm(nncl_context *ctx, int d, int m, int n, int k, int ta, int tb) {
    char name[200];
    int sa[2], sb[2], sc[2];
    float *a, *b, *c0, *c;
    double *want;
    nncl_tensor *ta_t = NULL, *tb_t = NULL, *tc_t = NULL;
    unsigned seed = 7;
    int ok;
    snprintf(name, sizeof name, "gemm %s m%d n%d k%d ta%d tb%d", th_device_label(ctx, d), m, n, k, ta, tb);
    a = (float *)malloc(sizeof(float) * m * k);
    b = (float *)malloc(sizeof(float) * k * n);
    c0 = (float *)malloc(sizeof(float) * m * n);
    c = (float *)malloc(sizeof(float) * m * n);
    want = (double *)malloc(sizeof(double) * m * n);
    th_fill_uniform(a, (size_t)m * k, -1, 1, &seed);
    th_fill_uniform(b, (size_t)k * n, -1, 1, &seed);
    th_fill_uniform(c0, (size_t)m * n, -1, 1, &seed);
    {
        size_t i, na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
        double *ad = (double *)malloc(sizeof(double) * (na + nb + nc));
        for (i = 0; i < na; i++) ad[i] = a[i];
        for (i = 0; i < nb; i++) ad[na + i] = b[i];
        for (i = 0; i < nc; i++) ad[na + nb + i] = c0[i];
        nncl__ref_gemm(ta, tb, (size_t)m, (size_t)n, (size_t)k, 0.75, ad, ad + na, 0.5, ad + na + nb, want);
        free(ad);
    }
    sa[0] = ta ? k : m; sa[1] = ta ? m : k;
    sb[0] = tb ? n : k; sb[1] = tb ? k : n;
    sc[0] = m; sc[1] = n;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 2, sa, &ta_t));
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 2, sb, &tb_t));
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 2, sc, &tc_t));
    TH_OK(name, ctx, nncl_tensor_write(ta_t, a, (size_t)m * k));
    TH_OK(name, ctx, nncl_tensor_write(tb_t, b, (size_t)k * n));
    TH_OK(name, ctx, nncl_tensor_write(tc_t, c0, (size_t)m * n));
    TH_OK(name, ctx, nncl_gemm(ctx, ta, tb, 0.75f, ta_t, tb_t, 0.5f, tc_t));
    th_poison(c, (size_t)m * n);
    TH_OK(name, ctx, nncl_tensor_read(tc_t, c, (size_t)m * n));
    ok = th_close(name, c, want, (size_t)m * n, 1e-10);
    nncl_tensor_free(ta_t);
    nncl_tensor_free(tb_t);
    nncl_tensor_free(tc_t);
    free(a); free(b); free(c0); free(c); free(want);
    if (ok) th_pass("%s", name);
    return !ok;
}

/* Kernels from a folder (NNCL_KERNEL_DIR): a missing file is an I/O error
 * naming it; a kernel that does not compile gives the build log. */
static int test_kernel_dir(void) {
    const char *name = "kernel folder and build errors";
    char dir[] = "/tmp/nncl-kdir-XXXXXX", path[64];
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_tensor *x = NULL;
    int shape[1] = {4};
    FILE *f;
    TH_CHECK(name, mkdtemp(dir) != NULL);
    cfg.devices = "0";
    cfg.kernel_dir = dir;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 1, shape, &x));
    TH_CHECK(name, nncl_relu(ctx, x, x) == NNCL_ERR_IO);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "elementwise.cl") != NULL);
    snprintf(path, sizeof path, "%s/elementwise.cl", dir);
    TH_CHECK(name, (f = fopen(path, "w")) != NULL);
    fputs("__kernel void nncl_relu_f32(__global float *x) { this is not OpenCL }\n", f);
    fclose(f);
    TH_CHECK(name, nncl_relu(ctx, x, x) == NNCL_ERR_BUILD);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "build log") != NULL);
    remove(path);
    rmdir(dir);
    nncl_tensor_free(x);
    nncl_free(ctx);
    th_pass("%s", name);
    return 0;
}

/* Per-kernel profile: every launch counted under its kernel's name, the
 * table adding up to the report, most time first. */
static int test_profile(int d) {
    char name[200];
    const char *sel = getenv("NNCL_TEST_DEVICES"); /* the devices of th_context() */
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_tensor *x = NULL, *c = NULL;
    nncl_profile_report rep;
    nncl_profile_kernel k[16];
    int shape[2] = {8, 8}, n, i, relu = -1, gemm = -1, launches = 0;
    double seconds = 0;
    float ones[64];
    for (i = 0; i < 64; i++) ones[i] = 1;
    snprintf(name, sizeof name, "per-kernel profile d%d", d);
    cfg.devices = sel && *sel ? sel : "all";
    cfg.profiling = 1;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    TH_CHECK(name, nncl_profile_kernels(ctx, d, k, 16) == 0); /* no report yet */
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 2, shape, &x));
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 2, shape, &c));
    TH_OK(name, ctx, nncl_tensor_write(x, ones, 64));
    TH_OK(name, ctx, nncl_relu(ctx, x, x)); /* builds outside the profile */
    TH_OK(name, ctx, nncl_profile_start(ctx, d));
    for (i = 0; i < 3; i++) TH_OK(name, ctx, nncl_relu(ctx, x, x));
    TH_OK(name, ctx, nncl_gemm(ctx, 0, 0, 1.0f, x, x, 0.0f, c));
    TH_OK(name, ctx, nncl_profile_stop(ctx, d, &rep));
    n = nncl_profile_kernels(ctx, d, k, 16);
    TH_CHECK(name, n >= 2 && n <= 16 && nncl_profile_kernels(ctx, d, NULL, 0) == n);
    for (i = 0; i < n; i++) {
        launches += k[i].launches;
        seconds += k[i].seconds;
        if (!strcmp(k[i].name, "nncl_relu_f32")) relu = i;
        if (strstr(k[i].name, "gemm")) gemm = i;
        TH_CHECK(name, i == 0 || k[i].seconds <= k[i - 1].seconds);
    }
    TH_CHECK(name, launches == rep.launches && fabs(seconds - rep.kernel_seconds) <= 1e-9 + 1e-9 * seconds);
    TH_CHECK(name, relu >= 0 && k[relu].launches == 3 && gemm >= 0); /* counts need no timestamps */
    nncl_tensor_free(x);
    nncl_tensor_free(c);
    nncl_free(ctx);
    th_pass("%s (%d kernels%s)", name, n, rep.plausible ? "" : ", timestamps implausible");
    return 0;
}

int main(void) {
    nncl_context *ctx;
    int d, nd;
    test_list();
    test_select();
    test_kernel_dir();
    if (!(ctx = th_context())) return th_exit_code();
    nd = nncl_device_count(ctx);
    for (d = 0; d < nd; d++) {
        static const int sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {128, 128, 784}, {100, 10, 128}};
        size_t s;
        test_transfer(ctx, d);
        test_profile(d);
        for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int t;
            for (t = 0; t < 4; t++) test_gemm(ctx, d, sizes[s][0], sizes[s][1], sizes[s][2], t & 1, t >> 1);
        }
    }
    nncl_free(ctx);
    return th_exit_code();
}
