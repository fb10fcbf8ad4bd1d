/* tune_search.c - the search of nncl_tune_gemm: times a curated list of
 * CLBlast kernel parameter sets (tune_data.h) on the GEMM shapes nncl
 * issues, with the harness and the agreement test of every other choice
 * (src/gemm/choose.c; the reference a double product), keeps the fastest
 * set whose results agree, confirms it and stores it (tune.c). */
#include "runtime/internal.h"
#include "gemm/tune_data.h"
#include <clblast_c.h>
#include <math.h>
#include <stdio.h>

/* ------------------------------------------------------------- timing */

typedef struct tune_bench {
    nncl_context *ctx;
    nncl_device *dev;
    int n_shapes;
    const tune_shape *shape; /* the one nncl__choose_time runs */
    cl_mem a, b, c;
    float *ha, *hb, *hc0, *hout; /* hout: C with its guards */
    float *ref[TUNE_NS];         /* the double product, rounded */
    double ref_time[TUNE_NS];    /* the weight of each shape in a score */
    double first;                /* seconds of the last first call (builds included) */
} tune_bench;

static size_t tune_a_size(const tune_shape *s) { return s->a_off + s->m * s->k; }
static size_t tune_b_size(const tune_shape *s) { return s->b_off + s->k * s->n; }

/* c = op(a) op(b) + beta c0 in double, row-major, loops in cache order,
 * rounded into out. */
static int tune_reference(const tune_bench *b, const tune_shape *s, float *out) {
    double *oa = (double *)nncl__calloc(s->m * s->k + s->k * s->n + s->n, sizeof(double)), *ob, *row;
    const float *a = b->ha + s->a_off, *bb = b->hb + s->b_off;
    size_t i, j, p;
    if (!oa) return 0;
    ob = oa + s->m * s->k;
    row = ob + s->k * s->n;
    for (i = 0; i < s->m; i++)
        for (p = 0; p < s->k; p++) oa[i * s->k + p] = s->ta ? a[p * s->m + i] : a[i * s->k + p];
    for (p = 0; p < s->k; p++)
        for (j = 0; j < s->n; j++) ob[p * s->n + j] = s->tb ? bb[j * s->k + p] : bb[p * s->n + j];
    for (i = 0; i < s->m; i++) {
        for (j = 0; j < s->n; j++) row[j] = (double)s->beta * b->hc0[i * s->n + j];
        for (p = 0; p < s->k; p++) {
            double x = oa[i * s->k + p];
            const double *brow = ob + p * s->n;
            for (j = 0; j < s->n; j++) row[j] += x * brow[j];
        }
        for (j = 0; j < s->n; j++) out[i * s->n + j] = (float)row[j];
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
    b->ctx = ctx;
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
        b->ref[s] = (float *)nncl__calloc(t->m * t->n, sizeof(float));
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

/* One GEMM of b->shape queued; 0 or the CLBlast code. */
static int tune_call(tune_bench *b) {
    const tune_shape *s = b->shape;
    return (int)CLBlastSgemm(CLBlastLayoutRowMajor, s->ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                             s->tb ? CLBlastTransposeYes : CLBlastTransposeNo, s->m, s->n, s->k, 1.0f, b->a, s->a_off,
                             s->ta ? s->m : s->k, b->b, s->b_off, s->tb ? s->k : s->n, s->beta, b->c, TUNE_GUARD,
                             s->n, &b->dev->queue, NULL);
}

/* One run for nncl__choose_time. */
static nncl_status tune_run_one(void *user, int i) {
    tune_bench *b = (tune_bench *)user;
    int rc = tune_call(b);
    (void)i;
    return rc ? nncl__fail(b->ctx, NNCL_ERR_BLAS, "CLBlastSgemm fails (%d)", rc) : NNCL_OK;
}

/* Runs shape si with the parameters in force: checks that the result
 * agrees with the reference (nncl__choose_agree) and that nothing was
 * written around C, then times it with nncl__choose_time into *t. 0 ok,
 * else a CLBlast/OpenCL code, or 1 for a wrong result (the largest
 * difference in *worst). A CPU driver runs kernels in the process's
 * memory: a stray write beyond a buffer is caught here before it can do
 * worse. */
static int tune_time_shape(tune_bench *b, int si, double *t, double *worst) {
    const tune_shape *s = &tune_shapes[si];
    size_t nc = s->m * s->n, i, all = nc + 2 * TUNE_GUARD;
    int rc, ok;
    b->shape = s;
    for (i = 0; i < TUNE_GUARD; i++) b->hout[i] = b->hout[TUNE_GUARD + nc + i] = TUNE_SENTINEL;
    memcpy(b->hout + TUNE_GUARD, b->hc0, nc * sizeof(float));
    if (clEnqueueWriteBuffer(b->dev->queue, b->c, CL_TRUE, 0, all * sizeof(float), b->hout, 0, NULL, NULL) !=
        CL_SUCCESS)
        return -5;
    b->first = nncl__seconds();
    if ((rc = tune_call(b)) != 0 || (rc = (int)clFinish(b->dev->queue)) != 0) return rc;
    b->first = nncl__seconds() - b->first;
    if (clEnqueueReadBuffer(b->dev->queue, b->c, CL_TRUE, 0, all * sizeof(float), b->hout, 0, NULL, NULL) !=
        CL_SUCCESS)
        return -5;
    ok = nncl__choose_agree(b->ref[si], b->hout + TUNE_GUARD, nc, worst);
    for (i = 0; i < TUNE_GUARD; i++)
        if (b->hout[i] != TUNE_SENTINEL || b->hout[TUNE_GUARD + nc + i] != TUNE_SENTINEL) ok = 0, *worst = HUGE_VAL;
    if (!ok) return 1;
    *t = 0;
    if (nncl__choose_time(b->ctx, b->dev, 1, tune_run_one, b, t) != NNCL_OK || *t == HUGE_VAL) return -5;
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
            nncl__log(ctx, NNCL_LOG_INFO,
                      "GEMM tuning: %s gives wrong results (difference %.3g on %lux%lux%lu): skipped",
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
    double el = nncl__seconds() - st->t0;
    return el + st->last_cost <= st->budget;
}

/* Measures family member idx (0: CLBlast's own, else candidate idx-1). */
static void tune_try(tune_state *st, int direct, int idx) {
    tune_family *f = direct ? &st->fd : &st->fx;
    double *row = f->times + (size_t)idx * TUNE_NS, t0 = nncl__seconds();
    size_t route = direct ? TUNE_ALL_DIRECT : 1, v[TUNE_NX];
    char what[64];
    int i, n = direct ? TUNE_ND : TUNE_NX, rc;
    for (i = 0; idx > 0 && i < n; i++) v[i] = direct ? tune_dcand[idx - 1].v[i] : tune_xcand[idx - 1].v[i];
    if (idx) snprintf(what, sizeof what, "%s candidate %d", direct ? "XgemmDirect" : "Xgemm", idx);
    else snprintf(what, sizeof what, "CLBlast's own %s", direct ? "XgemmDirect" : "Xgemm");
    rc = nncl__tune_override(st->dev, "GemmRoutine", tune_tname, &route, 1);
    /* Both families build into one program, and PoCL compiles every kernel
     * of it: the family not measured gets CLBlast's generic default, which
     * builds quickly (a wide direct kernel takes a minute) and the same
     * every time, so that the driver's own cache hits on the next tuning. */
    if (!rc && idx > 0) {
        rc = direct ? nncl__tune_override(st->dev, "Xgemm", tune_xnames, st->generic_x, TUNE_NX)
                    : nncl__tune_override(st->dev, "XgemmDirect", tune_dnames, st->generic_d, TUNE_ND);
        if (!rc)
            rc = nncl__tune_override(st->dev, direct ? "XgemmDirect" : "Xgemm", direct ? tune_dnames : tune_xnames, v,
                                     (size_t)n);
    }
    f->ok[idx] = !rc && tune_measure(st->ctx, &st->bench, what, row,
                                     f->best >= 0 ? f->times + (size_t)f->best * TUNE_NS : NULL);
    if (f->ok[idx] && (f->best < 0 || tune_score(&st->bench, row) <
                                          tune_score(&st->bench, f->times + (size_t)f->best * TUNE_NS)))
        f->best = idx;
    st->last_cost = nncl__seconds() - t0;
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
            if (tune_xcand[i].cpu == want && nncl__tune_x_ok(v, L) && (max <= 0 || *nx < max)) xidx[(*nx)++] = i + 1;
        }
        for (i = 0; i < TUNE_NDC; i++) {
            size_t v[TUNE_ND];
            for (j = 0; j < TUNE_ND; j++) v[j] = tune_dcand[i].v[j];
            if (tune_dcand[i].cpu == want && nncl__tune_d_ok(v, L) && (max <= 0 || *nd < max)) didx[(*nd)++] = i + 1;
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
        double t0 = nncl__seconds();
        int direct = di < nd && (2 * spent_d <= spent_x || xi >= nx);
        if (direct) tune_try(st, 1, didx[di++]);
        else tune_try(st, 0, xidx[xi++]);
        if (direct) spent_d += nncl__seconds() - t0;
        else spent_x += nncl__seconds() - t0;
    }
    nncl__log(st->ctx, NNCL_LOG_INFO,
              "GEMM tuning on %s: %d of %d XgemmDirect and %d of %d Xgemm candidates tried in %.1f s",
              st->dev->info.name, di, nd, xi, nx, nncl__seconds() - st->t0);
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
    rc = nncl__tune_apply(st->dev, &now);
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
    nncl__tune_format_family(line, sizeof line, "Xgemm", chosen->has_x, tune_xnames, chosen->x, TUNE_NX);
    nncl__log(ctx, NNCL_LOG_INFO, "GEMM tuning: %s", line);
    nncl__tune_format_family(line, sizeof line, "XgemmDirect", chosen->has_d, tune_dnames, chosen->d, TUNE_ND);
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
    st.t0 = nncl__seconds();
    st.budget = seconds;
    nncl__tune_limits(dev, &L);
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
    if (status == NNCL_OK) status = nncl__tune_store(ctx, dev, &chosen, path, sizeof path);
    if (status == NNCL_OK) tune_log_stored(ctx, &chosen, path);
    if (status == NNCL_OK) dev->clblast_tuned = 1;
    NNCL_FREE(st.fx.times);
    NNCL_FREE(st.fd.times);
    NNCL_FREE(st.fx.ok);
    NNCL_FREE(st.fd.ok);
    tune_bench_free(&st.bench);
    return status;
}

nncl_status nncl_tune_gemm(nncl_context *ctx, int device, double seconds_budget) {
    nncl_status st;
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_tune_gemm: ctx is NULL");
    if (seconds_budget != seconds_budget)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tune_gemm: seconds_budget is NaN");
    /* it launches the device's kernels and sets CLBlast's parameters */
    NNCL_LOCKED(ctx, st, nncl__tune_gemm_run(ctx, device, seconds_budget, 0, 0));
    return st;
}


/* tune_data.h's macros, after the last of its two readers (tune.c, then
 * this file, in the single header's order) */
#undef TUNE_NX
#undef TUNE_ND
#undef TUNE_ALL_DIRECT
#undef TUNE_FILE_MAX
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
