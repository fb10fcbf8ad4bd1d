/* test_binary_cache.c - the disk cache of built kernels: a first build
 * stores the program, a second context loads it instead of compiling, and
 * a damaged entry is ignored and rebuilt; results stay correct throughout.
 * Runs on every device with the cache forced on. */
#include "harness.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bc_stored, bc_loaded;

static void bc_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    if (strstr(msg, "kernel program cached at")) bc_stored++;
    if (strstr(msg, "kernel program loaded from")) bc_loaded++;
}

/* A context on device d with the cache on; runs a relu and checks it. */
static int bc_run(const char *name, int d) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_tensor *x = NULL, *y = NULL;
    char sel[16];
    float in[5] = {-2, -0.5f, 0, 1.5f, 3}, out[5];
    int shape[1] = {5}, i;
    snprintf(sel, sizeof sel, "%d", d);
    cfg.devices = sel;
    cfg.binary_cache = 1;
    cfg.log = bc_log;
    cfg.log_level = NNCL_LOG_DEBUG;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 1, shape, &x));
    TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 1, shape, &y));
    TH_OK(name, ctx, nncl_tensor_write(x, in, 5));
    TH_OK(name, ctx, nncl_relu(ctx, x, y));
    TH_OK(name, ctx, nncl_tensor_read(y, out, 5));
    for (i = 0; i < 5; i++) TH_CHECK(name, out[i] == (in[i] > 0 ? in[i] : 0));
    nncl_tensor_free(x);
    nncl_tensor_free(y);
    nncl_free(ctx);
    return 0;
}

int main(void) {
    char dir[] = "/tmp/nncl-bcache-XXXXXX", cmd[256];
    nncl_device_info all[16];
    int n = 0, d;
    if (!mkdtemp(dir)) {
        th_fail("binary cache", "mkdtemp failed");
        return th_exit_code();
    }
    setenv("NNCL_CACHE_DIR", dir, 1);
    if (nncl_devices_list(all, 16, &n) != NNCL_OK || n == 0) {
        th_skip("binary cache", "no OpenCL device");
        return 0;
    }
    for (d = 0; d < n && d < 16; d++) {
        char name[200];
        FILE *f;
        snprintf(name, sizeof name, "binary cache on d%d[%.24s]", d, all[d].platform);
        snprintf(cmd, sizeof cmd, "rm -f %s/*.bin", dir);
        if (system(cmd) != 0) continue;
        bc_stored = bc_loaded = 0;
        if (bc_run(name, d)) continue;
        if (bc_stored != 1 || bc_loaded != 0) {
            th_fail(name, "first build: %d stored, %d loaded (want 1, 0)", bc_stored, bc_loaded);
            continue;
        }
        if (bc_run(name, d)) continue;
        if (bc_loaded != 1) {
            th_fail(name, "second context compiled again instead of loading the cache");
            continue;
        }
        /* damage the entry: it must be ignored and replaced */
        snprintf(cmd, sizeof cmd, "for f in %s/*.bin; do printf 'garbage' > $f; done", dir);
        if (system(cmd) != 0 || bc_run(name, d)) continue;
        if (bc_stored != 2) {
            th_fail(name, "a damaged entry was not rebuilt (%d stores)", bc_stored);
            continue;
        }
        th_pass("%s", name);
        (void)f;
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) th_fail("binary cache", "cleanup failed");
    return th_exit_code();
}
