/* tune.c - run-time tuning of CLBlast's SGEMM for devices its database does
 * not know (PoCL and Mesa CPUs, new or embedded GPUs): the parameter sets'
 * validity for a device, their application through
 * CLBlastOverrideParameters, and the tuning file in the cache folder that
 * nncl_init applies later. The search that finds a set: tune_search.c. */
#include "runtime/internal.h"
#include "gemm/tune_data.h"
#include <clblast_c.h>
#include <stdio.h>

/* ------------------------------------------------------------- validity */

static int tune_vw_ok(size_t v) { return v == 1 || v == 2 || v == 4 || v == 8 || v == 16; }

/* The constraints of CLBlast's own tuner (src/tuning/kernels/xgemm.hpp):
 * a set breaking one does not compile, or computes garbage. */
int nncl__tune_x_ok(const size_t *v, const tune_limits *L) {
    size_t gemmk = v[0], kreg = v[1], kwg = v[2], kwi = v[3], mdima = v[4], mdimc = v[5], mwg = v[6];
    size_t ndimb = v[7], ndimc = v[8], nwg = v[9], sa = v[10], sb = v[11], vwm = v[14], vwn = v[15];
    int i;
    for (i = 0; i < TUNE_NX; i++)
        if (v[i] > 1024) return 0;
    /* GEMMK=1 is refused, also from a stored file: see the candidates */
    if (gemmk != 0 || sa > 1 || sb > 1 || v[12] > 1 || v[13] > 1) return 0;
    if (!kwg || !kwi || !mdima || !mdimc || !mwg || !ndimb || !ndimc || !nwg || !kreg) return 0;
    if (!tune_vw_ok(vwm) || !tune_vw_ok(vwn)) return 0;
    if (kwg % kwi || mwg % (mdimc * vwm) || nwg % (ndimc * vwn) || mwg % (mdima * vwm) || nwg % (ndimb * vwn))
        return 0;
    if ((mdimc * ndimc) % mdima || (mdimc * ndimc) % ndimb) return 0;
    if (kwg % ((mdimc * ndimc) / mdima) || kwg % ((mdimc * ndimc) / ndimb) || kreg != 1) return 0;
    if (mdimc * ndimc > L->max_wg || mdimc > L->max_item[0] || ndimc > L->max_item[1]) return 0;
    return (uint64_t)4 * (sa * kwg * mwg + sb * kwg * nwg) <= L->local_mem;
}

/* The same for XgemmDirect (src/tuning/kernels/xgemm_direct.hpp). */
int nncl__tune_d_ok(const size_t *v, const tune_limits *L) {
    size_t kwid = v[0], mdimad = v[1], mdimcd = v[2], ndimbd = v[3], ndimcd = v[4], pada = v[5], padb = v[6];
    size_t vwmd = v[7], vwnd = v[8], wgd = v[9];
    int i;
    for (i = 0; i < TUNE_ND; i++)
        if (v[i] > 1024) return 0;
    if (!kwid || !mdimad || !mdimcd || !ndimbd || !ndimcd || !wgd || pada > 1 || padb > 1) return 0;
    if (!tune_vw_ok(vwmd) || !tune_vw_ok(vwnd)) return 0;
    if (wgd % kwid || wgd % (mdimcd * vwmd) || wgd % (ndimcd * vwnd) || wgd % (mdimad * vwmd) ||
        wgd % (ndimbd * vwnd))
        return 0;
    if ((mdimcd * ndimcd) % mdimad || (mdimcd * ndimcd) % ndimbd) return 0;
    if (wgd % ((mdimcd * ndimcd) / mdimad) || wgd % ((mdimcd * ndimcd) / ndimbd)) return 0;
    if (mdimcd * ndimcd > L->max_wg || mdimcd > L->max_item[0] || ndimcd > L->max_item[1]) return 0;
    return (uint64_t)4 * (wgd * (wgd + pada) + wgd * (wgd + padb)) <= L->local_mem;
}

void nncl__tune_limits(nncl_device *dev, tune_limits *L) {
    memset(L, 0, sizeof *L);
    L->max_wg = dev->max_work_group;
    if (clGetDeviceInfo(dev->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof L->max_item, L->max_item, NULL) !=
        CL_SUCCESS)
        L->max_item[0] = L->max_item[1] = L->max_item[2] = L->max_wg;
    L->local_mem = dev->info.local_mem;
}

/* ------------------------------------------------------------- applying */

int nncl__tune_override(nncl_device *dev, const char *kernel, const char *const *names, const size_t *values,
                        size_t n) {
    return (int)CLBlastOverrideParameters(dev->id, kernel, CLBlastPrecisionSingle, n, (const char **)names, values);
}

/* Overrides every family the set names; 0 or the first CLBlast code. */
int nncl__tune_apply(nncl_device *dev, const tune_set *s) {
    int rc = 0;
    if (s->has_x) rc = nncl__tune_override(dev, "Xgemm", tune_xnames, s->x, TUNE_NX);
    if (!rc && s->has_d) rc = nncl__tune_override(dev, "XgemmDirect", tune_dnames, s->d, TUNE_ND);
    if (!rc) rc = nncl__tune_override(dev, "GemmRoutine", tune_tname, &s->min_indirect, 1);
    return rc;
}

/* ------------------------------------------------------------- the file */


static int tune_path(const nncl_device *dev, char *path, size_t size) {
    return nncl__device_cache_path(dev, "gemm", "tune", path, size);
}

void nncl__tune_format_family(char *out, size_t size, const char *family, int has, const char *const *names,
                              const size_t *v, int n) {
    size_t len;
    int i;
    snprintf(out, size, "%s", family);
    if (!has) {
        len = strlen(out);
        snprintf(out + len, size - len, " default");
        return;
    }
    for (i = 0; i < n; i++) {
        len = strlen(out);
        snprintf(out + len, size - len, " %s=%lu", names[i], (unsigned long)v[i]);
    }
}

/* The text of a stored tuning, checksum line included. */
static void tune_format(const nncl_device *dev, const tune_set *s, char *out, size_t size) {
    char line[512];
    size_t len;
    snprintf(out, size, "%s\n", TUNE_MAGIC);
    len = strlen(out);
    nncl__device_identity(dev, out + len, size - len);
    len = strlen(out);
    nncl__tune_format_family(line, sizeof line, "Xgemm", s->has_x, tune_xnames, s->x, TUNE_NX);
    snprintf(out + len, size - len, "%s\n", line);
    len = strlen(out);
    nncl__tune_format_family(line, sizeof line, "XgemmDirect", s->has_d, tune_dnames, s->d, TUNE_ND);
    snprintf(out + len, size - len, "%s\n", line);
    len = strlen(out);
    nncl__tune_format_family(line, sizeof line, "GemmRoutine", 1, tune_tname, &s->min_indirect, 1);
    snprintf(out + len, size - len, "%s\n", line);
    nncl__sealed_seal(out, strlen(out), size);
}

/* Parses "FAMILY default" or "FAMILY N1=v1 N2=v2 ..." (names in order). */
static int tune_parse_family(const char *line, const char *family, const char *const *names, int n, int *has,
                             size_t *v) {
    size_t fl = strlen(family);
    const char *p = line;
    int i;
    if (strncmp(p, family, fl) != 0 || p[fl] != ' ') return 0;
    p += fl + 1;
    if (!strcmp(p, "default")) {
        *has = 0;
        return 1;
    }
    for (i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        unsigned long x = 0;
        int digits = 0;
        if (strncmp(p, names[i], nl) != 0 || p[nl] != '=') return 0;
        p += nl + 1;
        while (*p >= '0' && *p <= '9' && digits < 7) x = x * 10 + (unsigned long)(*p++ - '0'), digits++;
        if (!digits || (*p != ' ' && *p != 0) || (*p == 0) != (i == n - 1)) return 0;
        if (*p == ' ') p++;
        v[i] = (size_t)x;
    }
    *has = 1;
    return 1;
}

/* Reads the tuning stored for dev. 1: *s holds it; 0: none stored; -1: a
 * file that is damaged, foreign or invalid for dev (why in *why). */
static int tune_load(const nncl_device *dev, const char *path, tune_set *s, const char **why) {
    char buf[TUNE_FILE_MAX + 1], id[1024], *line, *next;
    size_t n;
    FILE *f = fopen(path, "rb");
    tune_limits L;
    int has_t = 0, lineno = 0;
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    *why = "damaged";
    if (n > TUNE_FILE_MAX) return -1;
    nncl__device_identity(dev, id, sizeof id);
    line = nncl__sealed_body(buf, n, TUNE_MAGIC, id, "stored for another device, driver or CLBlast", why);
    if (!line) return -1;
    memset(s, 0, sizeof *s);
    for (; *line; line = next) {
        char *nl = strchr(line, '\n');
        if (!nl) return -1;
        *nl = 0;
        next = nl + 1;
        lineno++;
        if (lineno == 1 && tune_parse_family(line, "Xgemm", tune_xnames, TUNE_NX, &s->has_x, s->x)) continue;
        if (lineno == 2 && tune_parse_family(line, "XgemmDirect", tune_dnames, TUNE_ND, &s->has_d, s->d)) continue;
        if (lineno == 3 && tune_parse_family(line, "GemmRoutine", tune_tname, 1, &has_t, &s->min_indirect) && has_t)
            continue;
        return -1;
    }
    if (lineno != 3) return -1;
    /* the checksum says the file is whole, not that it was written for this
     * device's limits: never hand CLBlast a set that cannot run */
    nncl__tune_limits((nncl_device *)dev, &L);
    *why = "invalid parameters";
    if ((s->has_x && !nncl__tune_x_ok(s->x, &L)) || (s->has_d && !nncl__tune_d_ok(s->d, &L)) || s->min_indirect < 1 ||
        s->min_indirect > TUNE_ALL_DIRECT)
        return -1;
    return 1;
}

nncl_status nncl__tune_store(nncl_context *ctx, const nncl_device *dev, const tune_set *s, char *path, size_t size) {
    char text[TUNE_FILE_MAX];
    nncl__afile af;
    nncl_status st;
    if (!tune_path(dev, path, size))
        return nncl__fail(ctx, NNCL_ERR_IO, "nncl_tune_gemm: no cache folder (set NNCL_CACHE_DIR or HOME)");
    tune_format(dev, s, text, sizeof text);
    st = nncl__afile_open(&af, path, "GEMM tuning");
    if (st != NNCL_OK) return nncl__fail(ctx, st, "%s", nncl_last_error(NULL));
    if (fputs(text, af.f) == EOF) {
        nncl__afile_abort(&af);
        return nncl__fail(ctx, NNCL_ERR_IO, "nncl_tune_gemm: cannot write %s", path);
    }
    st = nncl__afile_commit(&af, "GEMM tuning");
    return st == NNCL_OK ? NNCL_OK : nncl__fail(ctx, st, "%s", nncl_last_error(NULL));
}

int nncl__tune_file(nncl_context *ctx, int device, char *path, size_t size) {
    nncl_device *dev = nncl__device(ctx, device);
    return dev && tune_path(dev, path, size);
}

/* ------------------------------------------------------------- at init */

int nncl__tune_mode(const nncl_context *ctx) {
    const char *env = getenv("NNCL_TUNE");
    if (env && !strcmp(env, "0")) return -1;
    if (env && !strcmp(env, "1")) return 1;
    return ctx->config.gemm_tune;
}

void nncl__tune_on_open(nncl_context *ctx, int device) {
    nncl_device *dev = &ctx->devices[device];
    int mode = nncl__tune_mode(ctx), got, rc;
    tune_set s;
    char path[1200];
    const char *why = "", *env;
    if (mode < 0) {
        nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: stored GEMM tunings ignored (NNCL_TUNE=0 or config)", device);
        return;
    }
    if (!tune_path(dev, path, sizeof path)) return;
    got = tune_load(dev, path, &s, &why);
    if (got > 0) {
        rc = nncl__tune_apply(dev, &s);
        if (rc)
            nncl__log(ctx, NNCL_LOG_WARN, "device %d: CLBlast refused the GEMM tuning of %s (%d)", device, path, rc);
        else
            nncl__log(ctx, NNCL_LOG_INFO, "device %d: GEMM tuning applied from %s", device, path);
        dev->clblast_tuned = !rc;
        return;
    }
    if (got < 0) nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM tuning %s ignored: %s", device, path, why);
    if (mode > 0) {
        double secs = (env = getenv("NNCL_TUNE_SECONDS")) && atof(env) > 0 ? atof(env) : TUNE_DEFAULT_SECONDS;
        nncl_status st;
        nncl__log(ctx, NNCL_LOG_INFO, "device %d: tuning GEMM for about %.0f s (NNCL_TUNE=1)", device, secs);
        st = nncl_tune_gemm(ctx, device, secs);
        if (st != NNCL_OK)
            nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM tuning failed: %s", device, nncl__thread_error());
    }
}

/* nncl_init: the runtime opens the devices, then each gets its stored GEMM
 * tuning. Defined here, above both, so that the runtime never calls into
 * the GEMM layer. */
nncl_status nncl_init(const nncl_config *config, nncl_context **out) {
    int i;
    NNCL_TRY(nncl__context_open(config, out));
    for (i = 0; i < (*out)->n_devices; i++) nncl__tune_on_open(*out, i);
    return NNCL_OK;
}


