/* harness.c - result reporting, reference comparison and device set-up for
 * the test programs. */
#include "harness.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int n_failed;

static void th_log(void *user, int level, const char *msg) {
    (void)user;
    if (level == NNCL_LOG_WARN) printf("# nncl warning: %s\n", msg); /* errors are checked by status */
}

nncl_context *th_context(void) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_status st;
    const char *sel = getenv("NNCL_TEST_DEVICES");
    cfg.devices = sel && *sel ? sel : "all";
    cfg.log = th_log;
    cfg.log_level = NNCL_LOG_WARN;
    st = nncl_init(&cfg, &ctx);
    if (st != NNCL_OK) {
        printf("SKIP devices: no OpenCL device (%s: %s)\n", nncl_status_str(st), nncl_last_error(NULL));
        return NULL;
    }
    return ctx;
}

void th_pass(const char *fmt, ...) {
    va_list ap;
    printf("PASS ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void th_fail(const char *name, const char *fmt, ...) {
    va_list ap;
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    n_failed++;
}

void th_skip(const char *name, const char *why) {
    printf("SKIP %s: %s\n", name, why);
    fflush(stdout);
}

int th_devices_lack(nncl_context *ctx, int nd, const char *name) {
    if (nncl_device_count(ctx) >= nd) return 0;
    th_skip(name, "needs two devices (POCL_DEVICES=\"pthread pthread\" or RUSTICL_ENABLE=llvmpipe)");
    return 1;
}

int th_exit_code(void) { return n_failed ? 1 : 0; }

double th_nse(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d;
        if (!isfinite(got[i])) return 1e30;
        d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

int th_close(const char *name, const float *got, const double *want, size_t n, double tol) {
    double e = th_nse(got, want, n);
    size_t i, worst = 0;
    double wd = -1;
    if (e <= tol) return 1;
    for (i = 0; i < n; i++) {
        double d = isfinite(got[i]) ? fabs((double)got[i] - want[i]) : INFINITY;
        if (d > wd) {
            wd = d;
            worst = i;
        }
    }
    th_fail(name, "normalised squared error %.3g > %.3g (n=%zu; worst [%zu] got %.9g want %.9g)", e, tol,
            n, worst, (double)got[worst], want[worst]);
    return 0;
}

void th_poison(float *x, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = NAN;
}

float th_uniform(unsigned *seed) {
    *seed = *seed * 1664525u + 1013904223u;
    return (float)((*seed >> 8) * (1.0 / 16777216.0));
}

void th_fill_uniform(float *x, size_t n, float lo, float hi, unsigned *seed) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = lo + (hi - lo) * th_uniform(seed);
}

float *th_random(size_t n, float lo, float hi, unsigned seed) {
    float *x = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!x) {
        fprintf(stderr, "th_random: out of memory for %zu floats\n", n);
        exit(2);
    }
    th_fill_uniform(x, n, lo, hi, &seed);
    return x;
}

const char *th_device_label(nncl_context *ctx, int d) {
    static char buf[4][160];
    static int k;
    nncl_device_info info;
    char *b = buf[k++ & 3];
    if (nncl_device_info_get(ctx, d, &info) != NNCL_OK) {
        snprintf(b, 160, "d%d", d);
        return b;
    }
    snprintf(b, 160, "d%d[%.24s]", d, info.platform);
    return b;
}
