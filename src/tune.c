/* tune.c - run-time tuning of CLBlast's SGEMM for devices its database does
 * not know (PoCL and Mesa CPUs, new or embedded GPUs): times a curated list
 * of kernel parameter sets on the GEMM shapes nncl issues, keeps the fastest
 * whose results are right, applies it with CLBlastOverrideParameters and
 * stores it in the cache folder, so that nncl_init applies it later. */
#include "internal.h"
#include "tune_data.h"
#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

/* A tuning: for each family its parameters, or (has_* 0) CLBlast's own. */
typedef struct tune_set {
    int has_x, has_d;
    size_t x[TUNE_NX], d[TUNE_ND];
    size_t min_indirect;
} tune_set;

typedef struct tune_limits {
    size_t max_wg, max_item[3];
    uint64_t local_mem;
} tune_limits;

static double tune_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t tune_fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

/* ------------------------------------------------------------- validity */

static int tune_vw_ok(size_t v) { return v == 1 || v == 2 || v == 4 || v == 8 || v == 16; }

/* The constraints of CLBlast's own tuner (src/tuning/kernels/xgemm.hpp):
 * a set breaking one does not compile, or computes garbage. */
static int tune_x_ok(const size_t *v, const tune_limits *L) {
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
static int tune_d_ok(const size_t *v, const tune_limits *L) {
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

static void tune_get_limits(nncl_device *dev, tune_limits *L) {
    memset(L, 0, sizeof *L);
    L->max_wg = dev->max_work_group;
    if (clGetDeviceInfo(dev->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof L->max_item, L->max_item, NULL) !=
        CL_SUCCESS)
        L->max_item[0] = L->max_item[1] = L->max_item[2] = L->max_wg;
    L->local_mem = dev->info.local_mem;
}

/* ------------------------------------------------------------- applying */

static int tune_override(nncl_device *dev, const char *kernel, const char *const *names, const size_t *values,
                         size_t n) {
    return (int)CLBlastOverrideParameters(dev->id, kernel, CLBlastPrecisionSingle, n, (const char **)names, values);
}

/* Overrides every family the set names; 0 or the first CLBlast code. */
static int tune_apply(nncl_device *dev, const tune_set *s) {
    int rc = 0;
    if (s->has_x) rc = tune_override(dev, "Xgemm", tune_xnames, s->x, TUNE_NX);
    if (!rc && s->has_d) rc = tune_override(dev, "XgemmDirect", tune_dnames, s->d, TUNE_ND);
    if (!rc) rc = tune_override(dev, "GemmRoutine", tune_tname, &s->min_indirect, 1);
    return rc;
}

/* ------------------------------------------------------------- the file */

/* The cache folder ($NNCL_CACHE_DIR, else $XDG_CACHE_HOME/nncl, else
 * ~/.cache/nncl, as the kernel cache), created when missing; 0 when none. */
static int tune_dir(char *path, size_t size) {
    const char *dir = getenv("NNCL_CACHE_DIR"), *base;
    if (dir && *dir) {
        snprintf(path, size, "%s", dir);
    } else if ((base = getenv("XDG_CACHE_HOME")) && *base) {
        snprintf(path, size, "%s/nncl", base);
    } else if ((base = getenv("HOME")) && *base) {
        snprintf(path, size, "%s/.cache", base);
        mkdir(path, 0755);
        snprintf(path, size, "%s/.cache/nncl", base);
    } else {
        return 0;
    }
    mkdir(path, 0755); /* best effort: a missing folder only means nothing is stored */
    return 1;
}

#define TUNE_STR(x) #x
#define TUNE_XSTR(x) TUNE_STR(x)
#define TUNE_CLBLAST_VERSION \
    TUNE_XSTR(CLBLAST_VERSION_MAJOR) "." TUNE_XSTR(CLBLAST_VERSION_MINOR) "." TUNE_XSTR(CLBLAST_VERSION_PATCH)

/* The identity lines of dev: what a stored tuning must match exactly. */
static void tune_identity(const nncl_device *dev, char *out, size_t size) {
    const char *fields[5];
    const char *keys[5] = {"platform", "device", "vendor", "driver", "version"};
    size_t len = 0;
    int i;
    fields[0] = dev->info.platform;
    fields[1] = dev->info.name;
    fields[2] = dev->info.vendor;
    fields[3] = dev->info.driver;
    fields[4] = dev->info.cl_version;
    out[0] = 0;
    for (i = 0; i < 5 && len + 1 < size; i++) {
        const char *p = fields[i];
        int w = snprintf(out + len, size - len, "%s ", keys[i]);
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
        for (; *p && len + 2 < size; p++) out[len++] = (*p < 32 || *p == 127) ? '?' : *p; /* one line each */
        out[len++] = '\n';
        out[len] = 0;
    }
    snprintf(out + len, size - len, "clblast %s\n", TUNE_CLBLAST_VERSION);
}

int nncl__device_cache_path(const nncl_device *dev, const char *prefix, const char *ext, char *path, size_t size) {
    char id[1024];
    uint64_t h;
    size_t n;
    tune_identity(dev, id, sizeof id);
    h = tune_fnv(0xCBF29CE484222325ull, id, strlen(id));
    if (!tune_dir(path, size)) return 0;
    n = strlen(path);
    snprintf(path + n, size - n, "/%s-%016llx.%s", prefix, (unsigned long long)h, ext);
    return 1;
}

void nncl__device_identity(const nncl_device *dev, char *out, size_t size) { tune_identity(dev, out, size); }

static int tune_path(const nncl_device *dev, char *path, size_t size) {
    return nncl__device_cache_path(dev, "gemm", "tune", path, size);
}

static void tune_format_family(char *out, size_t size, const char *family, int has, const char *const *names,
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
    tune_identity(dev, out + len, size - len);
    len = strlen(out);
    tune_format_family(line, sizeof line, "Xgemm", s->has_x, tune_xnames, s->x, TUNE_NX);
    snprintf(out + len, size - len, "%s\n", line);
    len = strlen(out);
    tune_format_family(line, sizeof line, "XgemmDirect", s->has_d, tune_dnames, s->d, TUNE_ND);
    snprintf(out + len, size - len, "%s\n", line);
    len = strlen(out);
    tune_format_family(line, sizeof line, "GemmRoutine", 1, tune_tname, &s->min_indirect, 1);
    snprintf(out + len, size - len, "%s\n", line);
    len = strlen(out);
    snprintf(out + len, size - len, "check %016llx\n",
             (unsigned long long)tune_fnv(0xCBF29CE484222325ull, out, len));
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
    char buf[TUNE_FILE_MAX + 1], id[1024], *line, *check, *next;
    size_t n, hl;
    FILE *f = fopen(path, "rb");
    unsigned long long sum = 0;
    tune_limits L;
    int has_t = 0, lineno = 0;
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    *why = "damaged";
    if (n == 0 || n > TUNE_FILE_MAX || memchr(buf, 0, n)) return -1;
    buf[n] = 0;
    /* the checksum line covers everything before it */
    check = strstr(buf, "\ncheck ");
    if (!check || sscanf(check + 7, "%16llx", &sum) != 1 ||
        tune_fnv(0xCBF29CE484222325ull, buf, (size_t)(check + 1 - buf)) != (uint64_t)sum)
        return -1;
    check[1] = 0;
    hl = strlen(TUNE_MAGIC);
    if (strncmp(buf, TUNE_MAGIC, hl) != 0 || buf[hl] != '\n') return -1;
    tune_identity(dev, id, sizeof id);
    if (strncmp(buf + hl + 1, id, strlen(id)) != 0) {
        *why = "stored for another device, driver or CLBlast";
        return -1;
    }
    memset(s, 0, sizeof *s);
    for (line = buf + hl + 1 + strlen(id); *line; line = next) {
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
    tune_get_limits((nncl_device *)dev, &L);
    *why = "invalid parameters";
    if ((s->has_x && !tune_x_ok(s->x, &L)) || (s->has_d && !tune_d_ok(s->d, &L)) || s->min_indirect < 1 ||
        s->min_indirect > TUNE_ALL_DIRECT)
        return -1;
    return 1;
}

static nncl_status tune_store(nncl_context *ctx, const nncl_device *dev, const tune_set *s, char *path,
                              size_t size) {
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

/* ------------------------------------------------------------- timing */

typedef struct tune_bench {
    nncl_device *dev;
    int n_shapes;
    cl_mem a, b, c;
    float *ha, *hb, *hc0, *hout; /* hout: C with its guards */
    double *ref[TUNE_NS];
    double ref_time[TUNE_NS]; /* the weight of each shape in a score */
    double first;             /* seconds of the last first call (builds included) */
} tune_bench;

static size_t tune_a_size(const tune_shape *s) { return s->a_off + s->m * s->k; }
static size_t tune_b_size(const tune_shape *s) { return s->b_off + s->k * s->n; }

/* c = op(a) op(b) + beta c0 in double, row-major, loops in cache order. */
static int tune_reference(const tune_bench *b, const tune_shape *s, double *out) {
    double *oa = (double *)nncl__calloc(s->m * s->k + s->k * s->n, sizeof(double)), *ob;
    const float *a = b->ha + s->a_off, *bb = b->hb + s->b_off;
    size_t i, j, p;
    if (!oa) return 0;
    ob = oa + s->m * s->k;
    for (i = 0; i < s->m; i++)
        for (p = 0; p < s->k; p++) oa[i * s->k + p] = s->ta ? a[p * s->m + i] : a[i * s->k + p];
    for (p = 0; p < s->k; p++)
        for (j = 0; j < s->n; j++) ob[p * s->n + j] = s->tb ? bb[j * s->k + p] : bb[p * s->n + j];
    for (i = 0; i < s->m; i++) {
        double *row = out + i * s->n;
        for (j = 0; j < s->n; j++) row[j] = (double)s->beta * b->hc0[i * s->n + j];
        for (p = 0; p < s->k; p++) {
            double x = oa[i * s->k + p];
            const double *brow = ob + p * s->n;
            for (j = 0; j < s->n; j++) row[j] += x * brow[j];
        }
    }
    NNCL_FREE(oa);
    return 1;
}

static void tune_bench_free(tune_bench *b) {
    int i;
    if (b->a) clReleaseMemObject(b->a);
    if (b->b) clReleaseMemObject(b->b);
    if (b->c) clReleaseMemObject(b->c);
    NNCL_FREE(b->ha);
    NNCL_FREE(b->hb);
    NNCL_FREE(b->hc0);
    NNCL_FREE(b->hout);
    for (i = 0; i < TUNE_NS; i++) NNCL_FREE(b->ref[i]);
    memset(b, 0, sizeof *b);
}

static nncl_status tune_bench_init(nncl_context *ctx, nncl_device *dev, int n_shapes, tune_bench *b) {
    size_t na = 0, nb = 0, nc = 0, i;
    unsigned seed = 12345u;
    cl_int err;
    int s;
    memset(b, 0, sizeof *b);
    b->dev = dev;
    b->n_shapes = n_shapes;
    for (s = 0; s < n_shapes; s++) {
        const tune_shape *t = &tune_shapes[s];
        if (tune_a_size(t) > na) na = tune_a_size(t);
        if (tune_b_size(t) > nb) nb = tune_b_size(t);
        if (t->m * t->n > nc) nc = t->m * t->n;
    }
    b->ha = (float *)nncl__calloc(na, sizeof(float));
    b->hb = (float *)nncl__calloc(nb, sizeof(float));
    b->hc0 = (float *)nncl__calloc(nc, sizeof(float));
    b->hout = (float *)nncl__calloc(nc + 2 * TUNE_GUARD, sizeof(float));
    if (!b->ha || !b->hb || !b->hc0 || !b->hout) goto oom;
    for (i = 0; i < na + nb + nc; i++) {
        float *x = i < na ? &b->ha[i] : i < na + nb ? &b->hb[i - na] : &b->hc0[i - na - nb];
        seed = seed * 1664525u + 1013904223u;
        *x = (float)((seed >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    for (s = 0; s < n_shapes; s++) {
        const tune_shape *t = &tune_shapes[s];
        b->ref[s] = (double *)nncl__calloc(t->m * t->n, sizeof(double));
        if (!b->ref[s] || !tune_reference(b, t, b->ref[s])) goto oom;
    }
    b->a = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, na * sizeof(float), b->ha, &err);
    if (err != CL_SUCCESS) goto cl_fail;
    b->b = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nb * sizeof(float), b->hb, &err);
    if (err != CL_SUCCESS) goto cl_fail;
    b->c = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE, (nc + 2 * TUNE_GUARD) * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) goto cl_fail;
    return NNCL_OK;
cl_fail:
    tune_bench_free(b);
    return nncl__cl_fail(ctx, err, "clCreateBuffer (GEMM tuning)", __FILE__, __LINE__);
oom:
    tune_bench_free(b);
    return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_tune_gemm: out of host memory");
}

/* One GEMM of shape s, waited for; 0 or the CLBlast/OpenCL code. */
static int tune_call(tune_bench *b, const tune_shape *s) {
    CLBlastStatusCode st = CLBlastSgemm(
        CLBlastLayoutRowMajor, s->ta ? CLBlastTransposeYes : CLBlastTransposeNo,
        s->tb ? CLBlastTransposeYes : CLBlastTransposeNo, s->m, s->n, s->k, 1.0f, b->a, s->a_off, s->ta ? s->m : s->k,
        b->b, s->b_off, s->tb ? s->k : s->n, s->beta, b->c, TUNE_GUARD, s->n, &b->dev->queue, NULL);
    if (st != CLBlastSuccess) return (int)st;
    return (int)clFinish(b->dev->queue);
}

/* Normalised squared error of got against want; NaN and Inf fail. */
static double tune_nse(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        if (got[i] != got[i] || got[i] - got[i] != 0) return 1e30;
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

/* Runs shape s with the parameters in force: checks the result and that
 * nothing was written around C, then times the fastest of a few runs into
 * *t. 0 ok, else a CLBlast/OpenCL code, or 1 for a wrong result (the error
 * in *bad_nse). A CPU driver runs kernels in the process's memory: a stray
 * write beyond a buffer is caught here before it can do worse. */
static int tune_time_shape(tune_bench *b, int si, double *t, double *bad_nse) {
    const tune_shape *s = &tune_shapes[si];
    size_t nc = s->m * s->n, i, all = nc + 2 * TUNE_GUARD;
    double best = 1e30, total = 0, nse;
    int rc, r;
    for (i = 0; i < TUNE_GUARD; i++) b->hout[i] = b->hout[TUNE_GUARD + nc + i] = TUNE_SENTINEL;
    memcpy(b->hout + TUNE_GUARD, b->hc0, nc * sizeof(float));
    if (clEnqueueWriteBuffer(b->dev->queue, b->c, CL_TRUE, 0, all * sizeof(float), b->hout, 0, NULL, NULL) !=
        CL_SUCCESS)
        return -5;
    b->first = tune_now();
    if ((rc = tune_call(b, s)) != 0) return rc;
    b->first = tune_now() - b->first;
    if (clEnqueueReadBuffer(b->dev->queue, b->c, CL_TRUE, 0, all * sizeof(float), b->hout, 0, NULL, NULL) !=
        CL_SUCCESS)
        return -5;
    nse = tune_nse(b->hout + TUNE_GUARD, b->ref[si], nc);
    for (i = 0; i < TUNE_GUARD; i++)
        if (b->hout[i] != TUNE_SENTINEL || b->hout[TUNE_GUARD + nc + i] != TUNE_SENTINEL) nse = 1e30;
    if (!(nse < TUNE_MAX_NSE)) {
        *bad_nse = nse;
        return 1;
    }
    /* at least 3 runs and 30 ms, at most 20 runs: the minimum resists other load */
    for (r = 0; r < 20 && (r < 3 || total < 0.03); r++) {
        double t0 = tune_now(), dt;
        if ((rc = tune_call(b, s)) != 0) return rc;
        dt = tune_now() - t0;
        total += dt;
        if (dt < best) best = dt;
    }
    *t = best;
    return 0;
}

/* Times every shape with the parameters in force into times[]. Stops early
 * (returning 0) when the candidate is clearly slower than the family's best
 * so far (best_times, NULL when none). 1: all shapes measured and right. */
static int tune_measure(nncl_context *ctx, tune_bench *b, const char *what, double *times, const double *best_times) {
    double score = 0, best = 0, bad = 0;
    int s, rc;
    for (s = 0; s < b->n_shapes; s++) {
        rc = tune_time_shape(b, s, &times[s], &bad);
        if (rc == 1) {
            nncl__log(ctx, NNCL_LOG_INFO, "GEMM tuning: %s gives wrong results (error %.3g on %lux%lux%lu): skipped",
                      what, bad, (unsigned long)tune_shapes[s].m, (unsigned long)tune_shapes[s].n,
                      (unsigned long)tune_shapes[s].k);
            return 0;
        }
        if (rc) {
            nncl__log(ctx, NNCL_LOG_DEBUG, "GEMM tuning: %s fails (CLBlast/OpenCL code %d): skipped", what, rc);
            return 0;
        }
        nncl__log(ctx, NNCL_LOG_DEBUG, "GEMM tuning: %s on %lux%lux%lu: first call %.3f s, then %.3f ms", what,
                  (unsigned long)tune_shapes[s].m, (unsigned long)tune_shapes[s].n, (unsigned long)tune_shapes[s].k,
                  b->first, times[s] * 1e3);
        score += times[s] / b->ref_time[s];
        if (best_times) {
            best += best_times[s] / b->ref_time[s];
            /* not on the first shapes alone: the smallest GEMMs are noisy */
            if (2 * (s + 1) >= b->n_shapes && s + 1 < b->n_shapes && score > TUNE_PRUNE * best) {
                nncl__log(ctx, NNCL_LOG_DEBUG, "GEMM tuning: %s dropped after %d shapes (%.2fx the best)", what,
                          s + 1, score / best);
                return 0;
            }
        }
    }
    nncl__log(ctx, NNCL_LOG_DEBUG, "GEMM tuning: %s scores %.3f", what, score);
    return 1;
}

static double tune_score(const tune_bench *b, const double *t) {
    double s = 0;
    int i;
    for (i = 0; i < b->n_shapes; i++) s += t[i] / b->ref_time[i];
    return s;
}

static double tune_gflops(const tune_shape *s, double t) { return 2.0 * s->m * s->n * s->k / t * 1e-9; }

/* ------------------------------------------------------------- the search */

/* What the search measured: times[shape] for each family member tried
 * (row 0: CLBlast's own parameters), ok 1 for complete and right ones. */
typedef struct tune_family {
    int n;
    double *times;
    int *ok;
    int best; /* -1: none yet */
} tune_family;

/* Routing threshold: XGEMM_MIN_INDIRECT_SIZE t sends a GEMM to XgemmDirect
 * when m n k < t^3. Returns the best t for the direct times td and the
 * indirect times ti, and the score it gives. */
static size_t tune_pick_threshold(const tune_bench *b, const double *td, const double *ti, double *score) {
    size_t best_t = 1;
    double best = 1e300;
    int c, s;
    /* the candidates: all indirect (1), or direct up to each shape */
    for (c = -1; c < b->n_shapes; c++) {
        double mnk = c < 0 ? 0 : (double)tune_shapes[c].m * tune_shapes[c].n * tune_shapes[c].k, sc = 0, lo = 0;
        double hi = 1e300;
        size_t t;
        for (s = 0; s < b->n_shapes; s++) {
            double x = (double)tune_shapes[s].m * tune_shapes[s].n * tune_shapes[s].k;
            int direct = x <= mnk;
            sc += (direct ? td[s] : ti[s]) / b->ref_time[s];
            if (direct && x > lo) lo = x;
            if (!direct && x < hi) hi = x;
        }
        if (!(sc < best)) continue;
        best = sc;
        /* between the largest direct and smallest indirect GEMM, geometrically */
        if (c < 0) t = 1;
        else if (hi >= 1e299) t = TUNE_ALL_DIRECT;
        else t = (size_t)ceil(cbrt(sqrt(lo * hi)));
        if (c >= 0 && (double)t * t * t <= lo) t++;
        best_t = t;
    }
    *score = best;
    return best_t;
}

typedef struct tune_state {
    nncl_context *ctx;
    nncl_device *dev;
    tune_bench bench;
    tune_family fx, fd;     /* indirect and direct */
    size_t generic_x[TUNE_NX]; /* CLBlast's generic default */
    size_t generic_d[TUNE_ND];
    double t0, budget, last_cost;
} tune_state;

static int tune_time_left(tune_state *st) {
    double el = tune_now() - st->t0;
    return el + st->last_cost <= st->budget;
}

/* Measures family member idx (0: CLBlast's own, else candidate idx-1). */
static void tune_try(tune_state *st, int direct, int idx) {
    tune_family *f = direct ? &st->fd : &st->fx;
    double *row = f->times + (size_t)idx * TUNE_NS, t0 = tune_now();
    size_t route = direct ? TUNE_ALL_DIRECT : 1, v[TUNE_NX];
    char what[64];
    int i, n = direct ? TUNE_ND : TUNE_NX, rc;
    for (i = 0; idx > 0 && i < n; i++) v[i] = direct ? tune_dcand[idx - 1].v[i] : tune_xcand[idx - 1].v[i];
    if (idx) snprintf(what, sizeof what, "%s candidate %d", direct ? "XgemmDirect" : "Xgemm", idx);
    else snprintf(what, sizeof what, "CLBlast's own %s", direct ? "XgemmDirect" : "Xgemm");
    rc = tune_override(st->dev, "GemmRoutine", tune_tname, &route, 1);
    /* Both families build into one program, and PoCL compiles every kernel
     * of it: the family not measured gets CLBlast's generic default, which
     * builds quickly (a wide direct kernel takes a minute) and the same
     * every time, so that the driver's own cache hits on the next tuning. */
    if (!rc && idx > 0) {
        rc = direct ? tune_override(st->dev, "Xgemm", tune_xnames, st->generic_x, TUNE_NX)
                    : tune_override(st->dev, "XgemmDirect", tune_dnames, st->generic_d, TUNE_ND);
        if (!rc)
            rc = tune_override(st->dev, direct ? "XgemmDirect" : "Xgemm", direct ? tune_dnames : tune_xnames, v,
                               (size_t)n);
    }
    f->ok[idx] = !rc && tune_measure(st->ctx, &st->bench, what, row,
                                     f->best >= 0 ? f->times + (size_t)f->best * TUNE_NS : NULL);
    if (f->ok[idx] && (f->best < 0 || tune_score(&st->bench, row) <
                                          tune_score(&st->bench, f->times + (size_t)f->best * TUNE_NS)))
        f->best = idx;
    st->last_cost = tune_now() - t0;
}

/* The fastest candidate of f that works (CLBlast's own not counted), or 0. */
static int tune_best_candidate(const tune_bench *b, const tune_family *f, int n) {
    int i, best = 0;
    for (i = 1; i <= n; i++)
        if (f->ok[i] && (!best || tune_score(b, f->times + (size_t)i * TUNE_NS) <
                                      tune_score(b, f->times + (size_t)best * TUNE_NS)))
            best = i;
    return best;
}

/* The candidates dev can run at all, as family members (candidate row + 1):
 * on a CPU the CPU rows first, on anything else the GPU rows first; at most
 * max of each family when max > 0. */
static void tune_candidates(const nncl_device *dev, const tune_limits *L, int max, int *xidx, int *nx, int *didx,
                            int *nd) {
    int cpu = dev->info.type == NNCL_DEVICE_CPU, pass, i, j;
    *nx = *nd = 0;
    for (pass = 0; pass < 2; pass++) {
        int want = pass == 0 ? cpu : !cpu;
        for (i = 0; i < TUNE_NXC; i++) {
            size_t v[TUNE_NX];
            for (j = 0; j < TUNE_NX; j++) v[j] = tune_xcand[i].v[j];
            if (tune_xcand[i].cpu == want && tune_x_ok(v, L) && (max <= 0 || *nx < max)) xidx[(*nx)++] = i + 1;
        }
        for (i = 0; i < TUNE_NDC; i++) {
            size_t v[TUNE_ND];
            for (j = 0; j < TUNE_ND; j++) v[j] = tune_dcand[i].v[j];
            if (tune_dcand[i].cpu == want && tune_d_ok(v, L) && (max <= 0 || *nd < max)) didx[(*nd)++] = i + 1;
        }
    }
}

/* CLBlast's own parameters first, both kernels (they weigh the shapes),
 * then the candidates while time is left, a third of it for XgemmDirect:
 * Xgemm carries the larger products, and direct kernels build slowly on
 * some drivers (a minute each on PoCL). */
static void tune_search(tune_state *st, int n_shapes, const int *xidx, int nx, const int *didx, int nd) {
    double spent_x = 0, spent_d = 0;
    int i, xi, di;
    for (i = 0; i < TUNE_NS; i++) st->bench.ref_time[i] = 1;
    tune_try(st, 1, 0);
    tune_try(st, 0, 0);
    for (i = 0; i < n_shapes; i++) {
        double d = st->fd.ok[0] ? st->fd.times[i] : 1e30, x = st->fx.ok[0] ? st->fx.times[i] : 1e30;
        st->bench.ref_time[i] = d < x ? d : x < 1e30 ? x : 1;
    }
    for (xi = di = 0; (xi < nx || di < nd) && tune_time_left(st);) {
        double t0 = tune_now();
        int direct = di < nd && (2 * spent_d <= spent_x || xi >= nx);
        if (direct) tune_try(st, 1, didx[di++]);
        else tune_try(st, 0, xidx[xi++]);
        if (direct) spent_d += tune_now() - t0;
        else spent_x += tune_now() - t0;
    }
    nncl__log(st->ctx, NNCL_LOG_INFO,
              "GEMM tuning on %s: %d of %d XgemmDirect and %d of %d Xgemm candidates tried in %.1f s",
              st->dev->info.name, di, nd, xi, nx, tune_now() - st->t0);
}

/* The best pair of family members that work and the routing threshold
 * between them, measured together as a score; 0 when no pair works. */
static int tune_best_pair(const tune_state *st, int *best_x, int *best_d, size_t *best_t) {
    double best = 1e300, sc;
    int i, j;
    *best_x = *best_d = -1;
    *best_t = 1;
    for (i = 0; i <= TUNE_NDC; i++) {
        if (!st->fd.ok[i]) continue;
        for (j = 0; j <= TUNE_NXC; j++) {
            size_t t;
            if (!st->fx.ok[j]) continue;
            t = tune_pick_threshold(&st->bench, st->fd.times + (size_t)i * TUNE_NS, st->fx.times + (size_t)j * TUNE_NS,
                                    &sc);
            if (sc < best) best = sc, *best_d = i, *best_x = j, *best_t = t;
        }
    }
    return *best_d >= 0 && *best_x >= 0;
}

/* Applies the chosen tuning in this process and checks the pair (measured
 * apart) once together. A family whose winner is CLBlast's own keeps the
 * best candidate that works here (CLBlast has no call to restore its
 * parameters); the file says "default", so later processes get CLBlast's
 * own. Logs the GFLOP/s before and after per shape. */
static nncl_status tune_confirm(tune_state *st, const tune_set *chosen, int best_x, int best_d, int n_shapes) {
    tune_set now = *chosen;
    double after[TUNE_NS], sc;
    int i, rc, bx = tune_best_candidate(&st->bench, &st->fx, TUNE_NXC);
    int bd = tune_best_candidate(&st->bench, &st->fd, TUNE_NDC);
    now.has_x = now.has_d = 1;
    if (!chosen->has_x && bx > 0)
        for (i = 0; i < TUNE_NX; i++) now.x[i] = tune_xcand[bx - 1].v[i];
    if (!chosen->has_d && bd > 0)
        for (i = 0; i < TUNE_ND; i++) now.d[i] = tune_dcand[bd - 1].v[i];
    /* and the routing that suits what this process gets */
    if ((!chosen->has_x && bx > 0) || (!chosen->has_d && bd > 0)) {
        const double *td = st->fd.times + (size_t)(chosen->has_d ? best_d : bd) * TUNE_NS;
        const double *tx = st->fx.times + (size_t)(chosen->has_x ? best_x : bx) * TUNE_NS;
        now.min_indirect = tune_pick_threshold(&st->bench, td, tx, &sc);
    }
    rc = tune_apply(st->dev, &now);
    for (i = 0; !rc && i < n_shapes; i++) {
        double bad = 0;
        rc = tune_time_shape(&st->bench, i, &after[i], &bad);
    }
    if (rc)
        return nncl__fail(st->ctx, NNCL_ERR_BLAS, "nncl_tune_gemm: the chosen GEMM parameters fail together (%d)", rc);
    for (i = 0; i < n_shapes; i++) {
        const tune_shape *s = &tune_shapes[i];
        nncl__log(st->ctx, NNCL_LOG_INFO,
                  "GEMM tuning: %c%c %lux%lux%lu: CLBlast's own %.2f (direct) / %.2f (indirect) GFLOP/s, tuned %.2f",
                  s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', (unsigned long)s->m, (unsigned long)s->n, (unsigned long)s->k,
                  st->fd.ok[0] ? tune_gflops(s, st->fd.times[i]) : 0.0,
                  st->fx.ok[0] ? tune_gflops(s, st->fx.times[i]) : 0.0, tune_gflops(s, after[i]));
    }
    return NNCL_OK;
}

static void tune_log_stored(nncl_context *ctx, const tune_set *chosen, const char *path) {
    char line[512];
    tune_format_family(line, sizeof line, "Xgemm", chosen->has_x, tune_xnames, chosen->x, TUNE_NX);
    nncl__log(ctx, NNCL_LOG_INFO, "GEMM tuning: %s", line);
    tune_format_family(line, sizeof line, "XgemmDirect", chosen->has_d, tune_dnames, chosen->d, TUNE_ND);
    nncl__log(ctx, NNCL_LOG_INFO, "GEMM tuning: %s", line);
    nncl__log(ctx, NNCL_LOG_INFO, "GEMM tuning: XGEMM_MIN_INDIRECT_SIZE=%lu; stored at %s",
              (unsigned long)chosen->min_indirect, path);
}

nncl_status nncl__tune_gemm_run(nncl_context *ctx, int device, double seconds, int max_candidates, int n_shapes) {
    tune_state st;
    tune_limits L;
    tune_set chosen;
    nncl_status status = NNCL_OK;
    nncl_device *dev = nncl__device(ctx, device);
    int i, nx, nd, best_x, best_d;
    int xidx[TUNE_NXC + 1], didx[TUNE_NDC + 1];
    size_t best_t;
    char path[1200];
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (n_shapes <= 0 || n_shapes > TUNE_NS) n_shapes = TUNE_NS;
    if (!(seconds > 0)) seconds = TUNE_DEFAULT_SECONDS;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    st.dev = dev;
    st.t0 = tune_now();
    st.budget = seconds;
    tune_get_limits(dev, &L);
    for (i = 0; i < TUNE_NX; i++) st.generic_x[i] = tune_xcand[TUNE_X_GENERIC].v[i];
    for (i = 0; i < TUNE_ND; i++) st.generic_d[i] = tune_dcand[TUNE_D_GENERIC].v[i];
    tune_candidates(dev, &L, max_candidates, xidx, &nx, didx, &nd);
    NNCL_TRY(tune_bench_init(ctx, dev, n_shapes, &st.bench));
    st.fx.times = (double *)nncl__calloc((size_t)(TUNE_NXC + 1) * TUNE_NS, sizeof(double));
    st.fd.times = (double *)nncl__calloc((size_t)(TUNE_NDC + 1) * TUNE_NS, sizeof(double));
    st.fx.ok = (int *)nncl__calloc(TUNE_NXC + 1, sizeof(int));
    st.fd.ok = (int *)nncl__calloc(TUNE_NDC + 1, sizeof(int));
    st.fx.best = st.fd.best = -1;
    if (!st.fx.times || !st.fd.times || !st.fx.ok || !st.fd.ok)
        status = nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_tune_gemm: out of host memory");
    if (status == NNCL_OK) tune_search(&st, n_shapes, xidx, nx, didx, nd);
    if (status == NNCL_OK && !tune_best_pair(&st, &best_x, &best_d, &best_t))
        status = nncl__fail(ctx, NNCL_ERR_BLAS,
                            "nncl_tune_gemm: no parameter set of CLBlast's GEMM works on device %d (%s)", device,
                            dev->info.name);
    if (status == NNCL_OK) {
        memset(&chosen, 0, sizeof chosen);
        chosen.has_x = best_x > 0;
        chosen.has_d = best_d > 0;
        for (i = 0; i < TUNE_NX; i++) chosen.x[i] = best_x > 0 ? tune_xcand[best_x - 1].v[i] : st.generic_x[i];
        for (i = 0; i < TUNE_ND; i++) chosen.d[i] = best_d > 0 ? tune_dcand[best_d - 1].v[i] : st.generic_d[i];
        chosen.min_indirect = best_t;
        status = tune_confirm(&st, &chosen, best_x, best_d, n_shapes);
    }
    if (status == NNCL_OK) status = tune_store(ctx, dev, &chosen, path, sizeof path);
    if (status == NNCL_OK) tune_log_stored(ctx, &chosen, path);
    NNCL_FREE(st.fx.times);
    NNCL_FREE(st.fd.times);
    NNCL_FREE(st.fx.ok);
    NNCL_FREE(st.fd.ok);
    tune_bench_free(&st.bench);
    return status;
}

nncl_status nncl_tune_gemm(nncl_context *ctx, int device, double seconds_budget) {
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_tune_gemm: ctx is NULL");
    return nncl__tune_gemm_run(ctx, device, seconds_budget, 0, 0);
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
        rc = tune_apply(dev, &s);
        if (rc)
            nncl__log(ctx, NNCL_LOG_WARN, "device %d: CLBlast refused the GEMM tuning of %s (%d)", device, path, rc);
        else
            nncl__log(ctx, NNCL_LOG_INFO, "device %d: GEMM tuning applied from %s", device, path);
        return;
    }
    if (got < 0) nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM tuning %s ignored: %s", device, path, why);
    if (mode > 0) {
        double secs = (env = getenv("NNCL_TUNE_SECONDS")) && atof(env) > 0 ? atof(env) : TUNE_DEFAULT_SECONDS;
        nncl_status st;
        nncl__log(ctx, NNCL_LOG_INFO, "device %d: tuning GEMM for about %.0f s (NNCL_TUNE=1)", device, secs);
        st = nncl_tune_gemm(ctx, device, secs);
        if (st != NNCL_OK)
            nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM tuning failed: %s", device, ctx->message);
    }
}

#undef TUNE_NX
#undef TUNE_ND
#undef TUNE_ALL_DIRECT
#undef TUNE_FILE_MAX
#undef TUNE_MAX_NSE
#undef TUNE_PRUNE
#undef TUNE_DEFAULT_SECONDS
#undef TUNE_GUARD
#undef TUNE_SENTINEL
#undef TUNE_MAGIC
#undef TUNE_NXC
#undef TUNE_X_GENERIC
#undef TUNE_D_GENERIC
#undef TUNE_NDC
#undef TUNE_NS
#undef TUNE_STR
#undef TUNE_XSTR
#undef TUNE_CLBLAST_VERSION
