/* test_tune.c - run-time GEMM tuning on every device: a damaged, foreign or
 * invalid stored tuning is ignored (CLBlast's own parameters stay, GEMMs
 * stay right); a short tuning stores a file that a fresh context applies,
 * with GEMM results still right against a double reference for several
 * shapes and transposes (NNCL_GEMM=clblast); NNCL_TUNE=0 and
 * config.gemm_tune -1 ignore it. */
#include "harness.h"
#include "gemm/gemm.h"
#include "ops/reference.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tt_applied, tt_ignored;

static void tt_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    if (strstr(msg, "GEMM tuning applied from")) tt_applied++;
    if (strstr(msg, "ignored")) tt_ignored++;
}

static nncl_status tt_open(int d, int gemm_tune, nncl_context **ctx) {
    nncl_config cfg = nncl_config_default();
    char sel[16];
    snprintf(sel, sizeof sel, "%d", d);
    cfg.devices = sel;
    cfg.gemm_tune = gemm_tune;
    cfg.log = tt_log;
    cfg.log_level = NNCL_LOG_DEBUG;
    tt_applied = tt_ignored = 0;
    return nncl_init(&cfg, ctx);
}

/* GEMMs of several shapes and all transposes, against a double reference. */
static int tt_gemms(const char *name, nncl_context *ctx) {
    static const int dims[][3] = {{33, 47, 65}, {100, 128, 784}, {128, 784, 100}, {32, 2352, 144}, {64, 64, 64}};
    int i, t;
    unsigned seed = 7;
    for (i = 0; i < (int)(sizeof dims / sizeof dims[0]); i++)
        for (t = 0; t < 4; t++) {
            int m = dims[i][0], n = dims[i][1], k = dims[i][2], ta = t & 1, tb = t >> 1;
            int sa[2], sb[2], sc[2];
            size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n, j;
            float *h = (float *)malloc((na + nb + 2 * nc) * sizeof(float));
            double *hd = (double *)malloc((na + nb + 2 * nc) * sizeof(double));
            nncl_tensor *a = NULL, *b = NULL, *c = NULL;
            int bad;
            TH_CHECK(name, h && hd);
            th_fill_uniform(h, na + nb + nc, -1, 1, &seed);
            for (j = 0; j < na + nb + nc; j++) hd[j] = h[j];
            sa[0] = ta ? k : m, sa[1] = ta ? m : k;
            sb[0] = tb ? n : k, sb[1] = tb ? k : n;
            sc[0] = m, sc[1] = n;
            TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 2, sa, &a));
            TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 2, sb, &b));
            TH_OK(name, ctx, nncl_tensor_create(ctx, 0, 2, sc, &c));
            TH_OK(name, ctx, nncl_tensor_write(a, h, na));
            TH_OK(name, ctx, nncl_tensor_write(b, h + na, nb));
            TH_OK(name, ctx, nncl_tensor_write(c, h + na + nb, nc));
            TH_OK(name, ctx, nncl_gemm(ctx, ta, tb, 0.75f, a, b, 0.5f, c));
            TH_OK(name, ctx, nncl_tensor_read(c, h + na + nb + nc, nc));
            nncl__ref_gemm(ta, tb, (size_t)m, (size_t)n, (size_t)k, 0.75, hd, hd + na, 0.5, hd + na + nb,
                           hd + na + nb + nc);
            bad = !th_close(name, h + na + nb + nc, hd + na + nb + nc, nc, 1e-9);
            nncl_tensor_free(a);
            nncl_tensor_free(b);
            nncl_tensor_free(c);
            free(h);
            free(hd);
            if (bad) {
                printf("    (GEMM %dx%dx%d, trans %d %d)\n", m, n, k, ta, tb);
                return 1;
            }
        }
    return 0;
}

static int tt_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

static char *tt_read(const char *path) {
    static char buf[8192];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return NULL;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* The file's text with its checksum line made right again, so that only the
 * change made to it (another device, bad parameters) can reject it. */
static void tt_reseal(char *text) {
    char *check = strstr(text, "\ncheck ");
    unsigned long long h = 0xCBF29CE484222325ull;
    const unsigned char *p;
    if (!check) return;
    for (p = (const unsigned char *)text; p <= (const unsigned char *)check; p++) h = (h ^ *p) * 0x100000001B3ull;
    sprintf(check + 1, "check %016llx\n", h);
}

/* A context on d: whether it applied a stored tuning, and GEMMs right. */
static int tt_context(const char *name, int d, int gemm_tune, int want_applied) {
    nncl_context *ctx = NULL;
    int bad;
    TH_OK(name, NULL, tt_open(d, gemm_tune, &ctx));
    bad = tt_gemms(name, ctx);
    nncl_free(ctx);
    if (bad) return 1;
    if (tt_applied != want_applied) {
        th_fail(name, "stored tuning applied %d times, want %d", tt_applied, want_applied);
        return 1;
    }
    return 0;
}

static int tt_device(int d, const char *label) {
    char name[256], path[1200], *text, saved[8192], *line;
    nncl_context *ctx = NULL;
    nncl_status st;
    snprintf(name, sizeof name, "tune on %s", label);
    TH_OK(name, NULL, tt_open(d, 0, &ctx));
    TH_CHECK(name, nncl__tune_file(ctx, 0, path, sizeof path));
    nncl_free(ctx);
    remove(path);

    /* before any tuning of d in this process: bad files leave CLBlast's own */
    TH_CHECK(name, tt_write(path, "nncl-gemm-tuning 1\ngarbage\n"));
    if (tt_context(name, d, 0, 0)) return 1;
    TH_CHECK(name, tt_ignored >= 1);
    th_pass("%s: damaged file ignored", name);

    /* a tiny tuning: one candidate of each family, the three smallest shapes */
    TH_OK(name, NULL, tt_open(d, 0, &ctx));
    st = nncl__tune_gemm_run(ctx, 0, 20, 1, 3);
    if (st != NNCL_OK) {
        th_fail(name, "tuning: %s: %s", nncl_status_str(st), nncl_last_error(ctx));
        nncl_free(ctx);
        return 1;
    }
    nncl_free(ctx);
    text = tt_read(path);
    TH_CHECK(name, text && strstr(text, "nncl-gemm-tuning 1\n") && strstr(text, "\nXgemm ") &&
                       strstr(text, "\nXgemmDirect ") && strstr(text, "\nGemmRoutine XGEMM_MIN_INDIRECT_SIZE="));
    strcpy(saved, text);
    th_pass("%s: tuning stored", name);

    if (tt_context(name, d, 0, 1)) return 1;
    th_pass("%s: stored tuning applied, GEMMs right", name);

    setenv("NNCL_TUNE", "0", 1);
    if (tt_context(name, d, 0, 0)) return 1;
    unsetenv("NNCL_TUNE");
    if (tt_context(name, d, -1, 0)) return 1;
    th_pass("%s: NNCL_TUNE=0 and gemm_tune -1 ignore it", name);

    /* another device's tuning under this name, resealed */
    strcpy(text, saved);
    line = strstr(text, "\ndevice ");
    TH_CHECK(name, line != NULL);
    line[8] = line[8] == 'X' ? 'Y' : 'X';
    tt_reseal(text);
    TH_CHECK(name, tt_write(path, text));
    if (tt_context(name, d, 0, 0)) return 1;
    TH_CHECK(name, tt_ignored >= 1);
    /* parameters CLBlast cannot run (MWG not a multiple of MDIMC*VWM) */
    strcpy(text, saved);
    line = strstr(text, " MWG=");
    if (line) {
        memcpy(line, " MWG=7", 6);
        while (line[6] >= '0' && line[6] <= '9') memmove(line + 6, line + 7, strlen(line + 6));
        tt_reseal(text);
        TH_CHECK(name, tt_write(path, text));
        if (tt_context(name, d, 0, 0)) return 1;
        TH_CHECK(name, tt_ignored >= 1);
    }
    /* one byte changed without resealing */
    strcpy(text, saved);
    text[strlen(text) / 2] ^= 1;
    TH_CHECK(name, tt_write(path, text));
    if (tt_context(name, d, 0, 0)) return 1;
    TH_CHECK(name, tt_ignored >= 1);
    th_pass("%s: foreign, invalid and damaged files ignored", name);
    return 0;
}

int main(void) {
    char dir[] = "/tmp/nncl-tune-XXXXXX", cmd[256];
    nncl_device_info all[16];
    int n = 0, d;
    if (!mkdtemp(dir)) {
        th_fail("tune", "mkdtemp failed");
        return th_exit_code();
    }
    setenv("NNCL_CACHE_DIR", dir, 1);
    unsetenv("NNCL_TUNE");
    /* every product through CLBlast, the library tuned: by measurement
     * (auto) most shapes take nncl's own kernels, which would leave the
     * tuned kernels unchecked, and choosing timed every variant per shape
     * in each fresh context (half of this program's time) */
    setenv("NNCL_GEMM", "clblast", 1);
    if (nncl_devices_list(all, 16, &n) != NNCL_OK || n == 0) {
        th_skip("tune", "no OpenCL device");
        return 0;
    }
    for (d = 0; d < n && d < 16; d++) {
        char label[200];
        snprintf(label, sizeof label, "d%d[%.32s]", d, all[d].name);
        tt_device(d, label);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) th_fail("tune", "cleanup failed");
    return th_exit_code();
}
