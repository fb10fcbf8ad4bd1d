/* tune.c - tunes the matrix products (CLBlast SGEMM) of each chosen device
 * with nncl_tune_gemm() and prints GFLOP/s before and after for the GEMM
 * shapes of dense and convolution layers. The tuning is stored, so later
 * programs on the device use it without tuning again.
 *
 *   tune [--devices SEL] [--seconds N] [--quiet]
 *
 * SEL as NNCL_DEVICES: "0", "0,1", "pocl", "gpu", "all", ... N: the time
 * budget per device (default 120). */
#include "nncl.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    int ta, tb, m, n, k;
    const char *what;
} shape;

static const shape shapes[] = {
    {0, 0, 256, 256, 256, "square"},
    {0, 0, 512, 512, 512, "square"},
    {0, 1, 100, 128, 784, "dense forward x W^T"},
    {0, 0, 100, 784, 128, "dense dx = dy W"},
    {1, 0, 128, 784, 100, "dense dW = dy^T x"},
    {0, 0, 32, 2352, 144, "conv forward"},
    {0, 1, 32, 144, 2352, "conv dW"},
    {1, 0, 144, 2352, 32, "conv dX"},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void log_line(void *user, int level, const char *message) {
    (void)user;
    if (strncmp(message, "GEMM tuning", 11) == 0 || level <= NNCL_LOG_WARN) fprintf(stderr, "  %s\n", message);
}

/* GFLOP/s of the fastest of several runs after a warm-up (which compiles). */
static nncl_status measure(nncl_context *ctx, int d, const shape *s, double *gflops) {
    nncl_tensor *a = NULL, *b = NULL, *c = NULL;
    int sa[2], sb[2], sc[2], r;
    float *host;
    size_t i, most;
    double best = 1e30, total = 0;
    nncl_status st;
    sa[0] = s->ta ? s->k : s->m, sa[1] = s->ta ? s->m : s->k;
    sb[0] = s->tb ? s->n : s->k, sb[1] = s->tb ? s->k : s->n;
    sc[0] = s->m, sc[1] = s->n;
    most = (size_t)s->m * s->k;
    if ((size_t)s->k * s->n > most) most = (size_t)s->k * s->n;
    host = (float *)malloc(most * sizeof(float));
    if (!host) return NNCL_ERR_OUT_OF_MEMORY;
    for (i = 0; i < most; i++) host[i] = (float)((i * 7919u) % 1000) / 1000.0f - 0.5f;
    if ((st = nncl_tensor_create(ctx, d, 2, sa, &a)) != NNCL_OK || (st = nncl_tensor_create(ctx, d, 2, sb, &b)) ||
        (st = nncl_tensor_create(ctx, d, 2, sc, &c)) || (st = nncl_tensor_write(a, host, nncl_tensor_numel(a))) ||
        (st = nncl_tensor_write(b, host, nncl_tensor_numel(b))) ||
        (st = nncl_gemm(ctx, s->ta, s->tb, 1.0f, a, b, 0.0f, c)) || (st = nncl_finish(ctx, d)))
        goto done;
    for (r = 0; r < 30 && (r < 3 || total < 0.3); r++) {
        double t0 = now(), dt;
        if ((st = nncl_gemm(ctx, s->ta, s->tb, 1.0f, a, b, 0.0f, c)) != NNCL_OK || (st = nncl_finish(ctx, d)))
            goto done;
        dt = now() - t0;
        total += dt;
        if (dt < best) best = dt;
    }
    *gflops = 2.0 * s->m * s->n * s->k / best * 1e-9;
done:
    nncl_tensor_free(a);
    nncl_tensor_free(b);
    nncl_tensor_free(c);
    free(host);
    return st;
}

int main(int argc, char **argv) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    double seconds = 120, before[NSHAPES], after[NSHAPES];
    int quiet = 0, d, i;
    nncl_status st;
    const ex_option opts[] = {
        {"--devices", OPT_STR, &cfg.devices, "SEL", "devices to tune: all, gpu, cpu, an index, a name part (pocl), ..."},
        {"--seconds", OPT_NUM, &seconds, "N", "time budget per device (120)"},
        {"--quiet", OPT_FLAG, &quiet, "", "no tuning messages"},
        {NULL, 0, NULL, NULL, NULL}};
    setvbuf(stdout, NULL, _IOLBF, 0);
    ex_parse(argc, argv, "tune [options]", opts, NULL, 0);
    if (!(seconds > 0)) {
        fprintf(stderr, "error: --seconds must be positive\n");
        return 2;
    }
    cfg.gemm_tune = -1; /* "before" is CLBlast's own parameters, not a stored tuning */
    cfg.log = quiet ? NULL : log_line;
    cfg.log_level = NNCL_LOG_INFO;
    unsetenv("NNCL_TUNE");
    if ((st = nncl_init(&cfg, &ctx)) != NNCL_OK) {
        fprintf(stderr, "tune: no device: %s\n(build/examples/devices lists the devices and checks each one)\n",
                nncl_last_error(NULL));
        return 1;
    }
    for (d = 0; d < nncl_device_count(ctx); d++) {
        nncl_device_info info;
        nncl_device_info_get(ctx, d, &info);
        printf("device %d: %s (%s)\n", d, info.name, info.platform);
        fflush(stdout);
        for (i = 0; i < NSHAPES; i++)
            if ((st = measure(ctx, d, &shapes[i], &before[i])) != NNCL_OK) goto fail;
        if ((st = nncl_tune_gemm(ctx, d, seconds)) != NNCL_OK) goto fail;
        for (i = 0; i < NSHAPES; i++)
            if ((st = measure(ctx, d, &shapes[i], &after[i])) != NNCL_OK) goto fail;
        printf("  %-2s %-16s %-22s %9s %9s %7s\n", "op", "M x N x K", "used by", "before", "after", "speedup");
        for (i = 0; i < NSHAPES; i++) {
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d", shapes[i].m, shapes[i].n, shapes[i].k);
            printf("  %c%c %-16s %-22s %9.2f %9.2f %6.2fx\n", shapes[i].ta ? 'T' : 'N', shapes[i].tb ? 'T' : 'N', dims,
                   shapes[i].what, before[i], after[i], after[i] / before[i]);
        }
        printf("  (GFLOP/s; the tuning is stored and applied by every later nncl_init)\n");
    }
    nncl_free(ctx);
    return 0;
fail:
    fprintf(stderr, "device %d: %s: %s\n", d, nncl_status_str(st), nncl_last_error(ctx));
    nncl_free(ctx);
    return 1;
}
