/* build.c - program build time, cold and warm, per device. Drivers read
 * their cache location once, when the OpenCL platform is first loaded, so a
 * cold build cannot be had inside this process once it has used OpenCL:
 * the bench runs itself again as a child (--build-child INDEX) with
 * POCL_CACHE_DIR, MESA_SHADER_CACHE_DIR and NNCL_CACHE_DIR (nncl's binary
 * cache for drivers that keep none) pointing at a new, empty temporary
 * folder. The child times, on a fresh context: building every
 * kernel family of cl/ (what creating a training plan compiles) and the
 * first CLBlast SGEMM (which compiles CLBlast's kernels); then frees the
 * context, opens a second one and times the same again (warm: the driver's
 * disk cache now holds the binaries; CLBlast's own in-memory cache also
 * survives the context). The figures come back on a pipe. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "bench.h"
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------- the child */

static int build_once(nncl_context *ctx, int quick, double *kernels_ms, double *gemm_ms, int *families) {
    int shape[2] = {64, 64};
    nncl_tensor *a = NULL, *b = NULL, *c = NULL;
    char err[512];
    double t0 = bench_now();
    nncl_status st;
    *families = bench_build_all_families(ctx, 0, err, sizeof err);
    if (*families < 0) {
        fprintf(stderr, "build child: %s\n", err);
        return 1;
    }
    *kernels_ms = (bench_now() - t0) * 1e3;
    *gemm_ms = bench_nan();
    if (quick) return 0; /* CLBlast's cold compile takes ~15 s on PoCL: not in the quick run */
    st = nncl_tensor_create(ctx, 0, 2, shape, &a);
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, 0, 2, shape, &b);
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, 0, 2, shape, &c);
    if (st == NNCL_OK) st = nncl_finish(ctx, 0);
    t0 = bench_now();
    if (st == NNCL_OK) st = nncl_gemm(ctx, 0, 0, 1.0f, a, b, 0.0f, c);
    if (st == NNCL_OK) st = nncl_finish(ctx, 0);
    *gemm_ms = (bench_now() - t0) * 1e3;
    nncl_tensor_free(a);
    nncl_tensor_free(b);
    nncl_tensor_free(c);
    if (st != NNCL_OK) {
        fprintf(stderr, "build child: gemm: %s\n", nncl_last_error(ctx));
        return 1;
    }
    return 0;
}

int bench_build_child(const char *list_index, int quick) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    double kc = 0, gc = 0, kw = 0, gw = 0;
    int fam = 0, pass;
    alarm(300); /* a hung driver must not hang the bench */
    cfg.devices = list_index;
    for (pass = 0; pass < 2; pass++) {
        if (nncl_init(&cfg, &ctx) != NNCL_OK) {
            fprintf(stderr, "build child: %s\n", nncl_last_error(NULL));
            return 1;
        }
        if (build_once(ctx, quick, pass ? &kw : &kc, pass ? &gw : &gc, &fam)) {
            nncl_free(ctx);
            return 1;
        }
        nncl_free(ctx);
        ctx = NULL;
    }
    printf("nncl-bench-build families=%d kernels_cold_ms=%.3f gemm_cold_ms=%.3f kernels_warm_ms=%.3f "
           "gemm_warm_ms=%.3f\n",
           fam, kc, gc, kw, gw);
    return 0;
}

/* ------------------------------------------------------------- the parent */

static int build_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Runs the child for device list_index with empty caches; 0 and the output
 * line in out when it succeeded. */
static int build_spawn(const bench_opts *o, int list_index, char *out, size_t len, char *why, size_t wlen) {
    char tmpl[] = "/tmp/nncl-bench-cache.XXXXXX", idx[16];
    int fds[2], status = 0;
    size_t got = 0;
    pid_t pid;
    if (!mkdtemp(tmpl)) {
        snprintf(why, wlen, "n/a: no temporary folder: %s", strerror(errno));
        return 1;
    }
    if (pipe(fds) != 0) {
        snprintf(why, wlen, "n/a: pipe: %s", strerror(errno));
        rmdir(tmpl);
        return 1;
    }
    snprintf(idx, sizeof idx, "%d", list_index);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        close(fds[1]);
        setenv("POCL_CACHE_DIR", tmpl, 1);
        setenv("MESA_SHADER_CACHE_DIR", tmpl, 1);
        setenv("NNCL_CACHE_DIR", tmpl, 1); /* nncl's own binary cache, for drivers without one */
        unsetenv("NNCL_DEVICES");
        execl(o->self, o->self, "--build-child", idx, o->quick ? "--quick" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        snprintf(why, wlen, "n/a: fork: %s", strerror(errno));
        close(fds[0]);
        rmdir(tmpl);
        return 1;
    }
    for (;;) {
        ssize_t r = read(fds[0], out + got, len - 1 - got);
        if (r > 0) got += (size_t)r;
        else if (r == 0 || errno != EINTR || got >= len - 1) break;
        if (got >= len - 1) break;
    }
    out[got] = 0;
    close(fds[0]);
    waitpid(pid, &status, 0);
    nftw(tmpl, build_rm, 16, FTW_DEPTH | FTW_PHYS);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !strstr(out, "nncl-bench-build")) {
        snprintf(why, wlen, "n/a: the build child failed (status %d; see its message above)", status);
        return 1;
    }
    return 0;
}

static double build_field(const char *line, const char *key) {
    const char *p = strstr(line, key);
    if (!p) return bench_nan();
    return strtod(p + strlen(key), NULL);
}

void bench_build(const bench_opts *o, nncl_context *ctx) {
    int d, nd = nncl_device_count(ctx);
    for (d = 0; d < nd; d++) {
        char out[512], why[256];
        int li = bench_list_index(ctx, d);
        bench_progress("build d%d: cold (child process, empty driver cache) and warm", d);
        if (li < 0) {
            bench_put("build", d, "kernels", "cold_ms", bench_stat_na(), "ms", "n/a: device not found in the list");
            continue;
        }
        if (build_spawn(o, li, out, sizeof out, why, sizeof why) != 0) {
            bench_put("build", d, "kernels", "cold_ms", bench_stat_na(), "ms", why);
            bench_put("build", d, "first gemm", "cold_ms", bench_stat_na(), "ms", why);
        } else {
            double kc = build_field(out, "kernels_cold_ms="), kw = build_field(out, "kernels_warm_ms=");
            double gc = build_field(out, "gemm_cold_ms="), gw = build_field(out, "gemm_warm_ms=");
            char item[48];
            snprintf(item, sizeof item, "kernels (%d families)", (int)build_field(out, "families="));
            bench_put_num("build", d, item, "cold_ms", kc, "ms",
                          "every cl/*.cl family built through the library, fresh process, empty POCL_CACHE_DIR, "
                          "MESA_SHADER_CACHE_DIR and NNCL_CACHE_DIR");
            bench_put_num("build", d, item, "warm_ms", kw, "ms", "the same on a second context of that process");
            bench_put_num("build", d, item, "cold_over_warm", kc / kw, "x", "");
            bench_put_num("build", d, "first gemm 64^3", "cold_ms", gc, "ms",
                          o->quick ? "n/a: not measured with --quick (CLBlast's cold compile takes seconds)"
                                   : "first nncl_gemm incl. CLBlast's kernel compile, empty caches");
            bench_put_num("build", d, "first gemm 64^3", "warm_ms", gw, "ms",
                          o->quick ? "n/a: not measured with --quick" : "the same on a second context");
            bench_put_num("build", d, "first gemm 64^3", "cold_over_warm", gc / gw, "x", "");
        }
        bench_progress_step();
    }
}
