/* gemm_pick.c - which kernel runs a product: CLBlast (with its stored
 * tuning, if any) or one of nncl's own variants, chosen per device and
 * shape (transposes, m, n, k, epilogue) by timing each on the shape with
 * the choosers' harness and checking their results against each other
 * (src/gemm/choose.c). CLBlast is left out on device classes where it was
 * measured slower at every shape, and a shape with a choice shipped for
 * the device's class is not timed (src/gemm/choice_file.c). A choice is
 * kept in memory and in the device's choice file, so a second run
 * measures nothing. Plans choose at prepare time (nncl__sgemm_prepare); a
 * product nobody prepared (eager nncl_gemm) chooses on its first call.
 * $NNCL_GEMM=clblast|own|auto forces a side. */
#include "gemm/gemm.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

int nncl__gemm_mode(void) {
    const char *env = getenv("NNCL_GEMM");
    if (env && !strcmp(env, "clblast")) return 1;
    if (env && !strcmp(env, "own")) return 2;
    return 0;
}

static int pick_epi(const nncl__gemm_epi *e) { return (e->bias & 3) | (e->act << 2); }

static int pick_same(const nncl__gemm_choice *c, int ta, int tb, size_t m, size_t n, size_t k, int epi) {
    return c->ta == ta && c->tb == tb && c->m == m && c->n == n && c->k == k && c->epi == epi;
}

const nncl__gemm_choice *nncl__gemm_choice_find(nncl__gemm_state *s, const nncl__gemm_args *g) {
    int i, epi = pick_epi(&g->epi);
    for (i = 0; i < s->n_choices; i++)
        if (pick_same(&s->choices[i], g->trans_a != 0, g->trans_b != 0, g->m, g->n, g->k, epi)) return &s->choices[i];
    return NULL;
}

/* Whether the kernels choice c runs (in the GEMM mode) are resolved on the
 * device: CLBlast's are CLBlast's own business, an own variant's are
 * resolved by a plan's prepare (nncl__sgemm_prepare) or a first run. */
static int pick_resolved(const nncl__gemm_state *s, const nncl__gemm_choice *c) {
    int idx = nncl__gemm_mode() == 2 ? c->best_own : c->best;
    /* (or to be, at the end of a plan's: nncl__gemm_defer) */
    return idx < 0 || s->kernels[idx][NNCL__GEMM_K_PRODUCT].kernel != NULL || (s->pending >> idx & 1);
}

/* The smallest product of g's kind (transposes, epilogue) with resolved
 * kernels that covers g's m, n and k: the choice a plan's smaller batch or
 * last chunk takes when its own shape has none (a weight gradient's k is
 * the batch), so that a step neither measures nor looks a kernel up. NULL
 * when there is none. */
static nncl__gemm_choice *pick_near(nncl__gemm_state *s, const nncl__gemm_args *g) {
    nncl__gemm_choice *best = NULL;
    int i, epi = pick_epi(&g->epi);
    for (i = 0; i < s->n_choices; i++) {
        nncl__gemm_choice *c = &s->choices[i];
        if (!pick_resolved(s, c) || c->ta != (g->trans_a != 0) || c->tb != (g->trans_b != 0) || c->epi != epi ||
            c->m < g->m || c->n < g->n || c->k < g->k)
            continue;
        if (!best || c->m * c->n * c->k < best->m * best->n * best->k) best = c;
    }
    return best;
}

/* ------------------------------------------------------------- timing */

typedef struct pick_bench {
    nncl__gemm_args g;  /* g's shape on the bench's own buffers */
    size_t na, nb, nc;
    float *hc0, *out, *ref;
    int have_ref;
} pick_bench;

static void pick_bench_free(nncl_device *dev, pick_bench *b, size_t temp_bytes) {
    if (b->g.a) clReleaseMemObject(b->g.a);
    if (b->g.b) clReleaseMemObject(b->g.b);
    if (b->g.c) clReleaseMemObject(b->g.c);
    if (b->g.epi.bias_mem) clReleaseMemObject(b->g.epi.bias_mem);
    if (b->g.temp) nncl__buffer_release(dev, b->g.temp, temp_bytes);
    NNCL_FREE(b->hc0);
    NNCL_FREE(b->out);
    NNCL_FREE(b->ref);
}

static nncl_status pick_buffer(nncl_context *ctx, nncl_device *dev, size_t n, unsigned *seed, cl_mem *out) {
    float *h = (float *)NNCL_MALLOC(n * sizeof(float));
    cl_int err;
    size_t i;
    if (!h) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        h[i] = (float)((*seed >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    *out = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), h, &err);
    NNCL_FREE(h);
    NNCL_CL_CHECK(ctx, err, "clCreateBuffer (GEMM choice)");
    return NNCL_OK;
}

static nncl_status pick_bench_init(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t temp_bytes,
                                   pick_bench *b) {
    unsigned seed = 2024u;
    size_t i;
    memset(b, 0, sizeof *b);
    b->g = *g;
    b->g.a = b->g.b = b->g.c = b->g.temp = b->g.epi.bias_mem = NULL;
    b->g.a_off = b->g.b_off = b->g.c_off = b->g.epi.bias_off = 0;
    b->g.lda = g->trans_a ? g->m : g->k;
    b->g.ldb = g->trans_b ? g->k : g->n;
    b->g.ldc = g->n;
    b->na = g->m * g->k;
    b->nb = g->k * g->n;
    b->nc = g->m * g->n;
    b->hc0 = (float *)NNCL_MALLOC(b->nc * sizeof(float));
    b->out = (float *)NNCL_MALLOC(b->nc * sizeof(float));
    b->ref = (float *)NNCL_MALLOC(b->nc * sizeof(float));
    if (!b->hc0 || !b->out || !b->ref) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < b->nc; i++) b->hc0[i] = (float)(i % 7) * 0.25f - 0.75f;
    NNCL_TRY(pick_buffer(ctx, dev, b->na ? b->na : 1, &seed, &b->g.a));
    NNCL_TRY(pick_buffer(ctx, dev, b->nb ? b->nb : 1, &seed, &b->g.b));
    NNCL_TRY(pick_buffer(ctx, dev, b->nc, &seed, &b->g.c));
    if (g->epi.bias) NNCL_TRY(pick_buffer(ctx, dev, g->epi.bias == 2 ? g->m : g->n, &seed, &b->g.epi.bias_mem));
    if (temp_bytes) NNCL_TRY(nncl__buffer_create(ctx, dev, temp_bytes, &b->g.temp));
    return NNCL_OK;
}

static nncl_status pick_run(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s, int idx, const nncl__gemm_args *g) {
    return idx < 0 ? nncl__sgemm_clblast(ctx, dev, g) : nncl__gemm_own(ctx, dev, &s->all[idx], g);
}

/* Runs candidate idx once on fresh C and compares with the first
 * candidate's result. *ok stays 0 when it failed or disagreed (logged, not
 * an error: the others still run). */
static nncl_status pick_check(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s, pick_bench *b, int idx,
                              int *ok) {
    double worst = 0;
    *ok = 0;
    NNCL_CL(ctx, clEnqueueWriteBuffer(dev->queue, b->g.c, CL_TRUE, 0, b->nc * sizeof(float), b->hc0, 0, NULL, NULL));
    if (pick_run(ctx, dev, s, idx, &b->g) != NNCL_OK || clFinish(dev->queue) != CL_SUCCESS) {
        nncl__log(ctx, NNCL_LOG_WARN, "GEMM choice: %s fails on %lux%lux%lu: %s", nncl__gemm_variant_name(s, idx),
                  (unsigned long)b->g.m, (unsigned long)b->g.n, (unsigned long)b->g.k, nncl__thread_error());
        return NNCL_OK;
    }
    NNCL_CL(ctx, clEnqueueReadBuffer(dev->queue, b->g.c, CL_TRUE, 0, b->nc * sizeof(float), b->out, 0, NULL, NULL));
    if (!b->have_ref) {
        memcpy(b->ref, b->out, b->nc * sizeof(float));
        b->have_ref = 1;
    } else if (!nncl__choose_agree(b->ref, b->out, b->nc, &worst)) {
        nncl__log(ctx, NNCL_LOG_WARN, "GEMM choice: %s disagrees with %s on %lux%lux%lu (%.3g): not used",
                  nncl__gemm_variant_name(s, idx), "the first kernel", (unsigned long)b->g.m, (unsigned long)b->g.n,
                  (unsigned long)b->g.k, worst);
        return NNCL_OK;
    }
    *ok = 1;
    return NNCL_OK;
}

/* One run of candidate i of a measurement (nncl__choose_time). */
typedef struct pick_runs {
    nncl_context *ctx;
    nncl_device *dev;
    nncl__gemm_state *s;
    pick_bench *b;
    const int *idx;
} pick_runs;

static nncl_status pick_run_one(void *user, int i) {
    pick_runs *r = (pick_runs *)user;
    return pick_run(r->ctx, r->dev, r->s, r->idx[i], &r->b->g);
}

static nncl_status pick_measure(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s, const nncl__gemm_args *g,
                                nncl__gemm_choice *c) {
    pick_bench b;
    size_t temp = 0;
    double t[NNCL__GEMM_MAX_VARIANTS + 1], best = HUGE_VAL, best_own = HUGE_VAL, t0 = nncl__seconds();
    int idx[NNCL__GEMM_MAX_VARIANTS + 1], n = 0, i, ok, own = nncl__gemm_own_fits(g);
    unsigned set = s->shipped, some = 0;
    nncl_status st;
    /* with choices shipped for the device's class, the variants they name
     * (when one of them runs this product) */
    for (i = 0; i < s->n_timed; i++)
        if (set >> i & 1 && nncl__gemm_candidate(s, i, g->trans_a, g->trans_b, g->m, g->n)) some = 1;
    if (!some) set = ~0u;
    NNCL_TRY(nncl__sgemm_temp_size(ctx, dev, g, &temp));
    st = pick_bench_init(ctx, dev, g, temp, &b);
    /* CLBlast (-1) first, where it is timed: the first result is the one
     * the others must match */
    for (i = nncl__gemm_times_clblast(dev) || !own ? -1 : 0; st == NNCL_OK && i < (own ? s->n_timed : 0); i++) {
        if (i >= 0 && (!(set >> i & 1) || !nncl__gemm_candidate(s, i, g->trans_a, g->trans_b, g->m, g->n))) continue;
        st = pick_check(ctx, dev, s, &b, i, &ok);
        idx[n] = i;
        t[n++] = ok ? 0 : HUGE_VAL;
    }
    if (st == NNCL_OK) {
        pick_runs pr;
        pr.ctx = ctx, pr.dev = dev, pr.s = s, pr.b = &b, pr.idx = idx;
        st = nncl__choose_time(ctx, dev, n, pick_run_one, &pr, t);
    }
    for (i = 0; st == NNCL_OK && i < n; i++) {
        if (idx[i] >= 0 && t[i] < best_own) {
            best_own = t[i];
            c->best_own = idx[i];
        }
        if (t[i] < best) {
            best = t[i];
            c->best = idx[i];
        }
    }
    pick_bench_free(dev, &b, temp);
    if (st == NNCL_OK) {
        /* every candidate's figure: a choice that looks wrong beside the bench's table can be read back */
        char all[NNCL__GEMM_MAX_VARIANTS * 40 + 40];
        size_t at = 0;
        all[0] = '\0';
        for (i = 0; i < n && at < sizeof all; i++)
            at += (size_t)snprintf(all + at, sizeof all - at, t[i] == HUGE_VAL ? " %s -" : " %s %.4f", nncl__gemm_variant_name(s, idx[i]),
                                   t[i] * 1e3);
        nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: GEMM %s%s %lux%lux%lu epi %d: %s (own best %s; ms per run:%s), "
                  "chosen in %.3f s", dev->info.index, g->trans_a ? "T" : "N", g->trans_b ? "T" : "N",
                  (unsigned long)g->m, (unsigned long)g->n, (unsigned long)g->k, c->epi, nncl__gemm_variant_name(s, c->best),
                  nncl__gemm_variant_name(s, c->best_own), all, nncl__seconds() - t0);
    }
    return st;
}

/* The choice for g's shape: stored, or measured now and stored. With near
 * (a step), a stored one whose kernels are not resolved gives way to a
 * resolved one that covers g (pick_near). */
static nncl_status pick_choice(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, int near,
                               nncl__gemm_choice **out) {
    nncl__gemm_state *s = NULL;
    nncl__gemm_choice c, *exact, *cover;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!s->loaded) nncl__gemm_choices_load(ctx, dev, s);
    exact = (nncl__gemm_choice *)nncl__gemm_choice_find(s, g);
    if (exact && (!near || pick_resolved(s, exact))) {
        *out = exact;
        return NNCL_OK;
    }
    if (near && (cover = pick_near(s, g)) != NULL) {
        *out = cover;
        return NNCL_OK;
    }
    if ((*out = exact) != NULL) return NNCL_OK;
    memset(&c, 0, sizeof c);
    c.ta = g->trans_a != 0;
    c.tb = g->trans_b != 0;
    c.m = g->m;
    c.n = g->n;
    c.k = g->k;
    c.epi = pick_epi(&g->epi);
    c.best = -1;
    c.best_own = 0;
    if (g->m && g->n && g->k) NNCL_TRY(pick_measure(ctx, dev, s, g, &c));
    if (!nncl__gemm_choice_add(s, &c)) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    nncl__gemm_choices_store(ctx, dev, s);
    *out = &s->choices[s->n_choices - 1];
    return NNCL_OK;
}

/* ------------------------------------------------------------- entry points */

/* CLBlast's temp for g's shape, and beside it that of the own kernel
 * chosen for the shape, or (none chosen yet) of every own kernel: the
 * chosen kernel's bytes let a plan size its chunks by what runs (a bound
 * over all kernels made conv2d's im2col chunks small where CLBlast runs). */
nncl_status nncl__sgemm_temp_size(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes) {
    nncl__gemm_state *s = NULL;
    const nncl__gemm_choice *c;
    int i, mode = nncl__gemm_mode();
    if (g->store) return nncl__gemm_own_store(ctx, dev, g, 1, bytes); /* own kernels alone take half storage */
    NNCL_TRY(nncl__sgemm_clblast_temp(ctx, dev, g, bytes));
    if (mode == 1 || !nncl__gemm_own_fits(g)) return NNCL_OK;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!s->loaded) nncl__gemm_choices_load(ctx, dev, s);
    if ((c = nncl__gemm_choice_find(s, g)) != NULL) {
        i = mode == 2 ? c->best_own : c->best;
        if (i >= 0 && i < s->n_all && nncl__gemm_own_temp(&s->all[i], g) > *bytes)
            *bytes = nncl__gemm_own_temp(&s->all[i], g);
        return NNCL_OK;
    }
    for (i = 0; i < s->n_all; i++) {
        size_t t = nncl__gemm_own_temp(&s->all[i], g);
        if (t > *bytes) *bytes = t;
    }
    return NNCL_OK;
}

nncl_status nncl__sgemm_prepare(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes) {
    nncl__gemm_choice *c;
    int mode = nncl__gemm_mode(), idx;
    if (g->store) return nncl__gemm_own_store(ctx, dev, g, 1, bytes);
    idx = -1;
    if (mode != 1) { /* the chosen kernels resolved now: a step only launches them */
        NNCL_TRY(pick_choice(ctx, dev, g, 0, &c));
        idx = mode == 2 ? c->best_own : c->best;
        if (idx >= 0) NNCL_TRY(nncl__gemm_own_resolve(ctx, dev, &dev->gemm->all[idx], g));
    }
    /* CLBlast's epilogue (its program is built only where CLBlast runs) */
    if (idx < 0 || !nncl__gemm_own_fits(g)) NNCL_TRY(nncl__gemm_own_resolve(ctx, dev, NULL, g));
    return nncl__sgemm_temp_size(ctx, dev, g, bytes);
}

/* near: a step's product, which may take a covering choice (pick_choice);
 * else (the eager nncl_gemm) the shape's own, measured now if need be. */
static nncl_status pick_sgemm(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, int near) {
    nncl__gemm_choice *c;
    int mode = nncl__gemm_mode(), idx;
    if (g->m == 0 || g->n == 0) return NNCL_OK;
    if (g->store) return nncl__gemm_own_store(ctx, dev, g, 0, NULL);
    if (mode == 1) return nncl__sgemm_clblast(ctx, dev, g);
    NNCL_TRY(pick_choice(ctx, dev, g, near, &c));
    idx = mode == 2 ? c->best_own : c->best;
    if (idx < 0 || !nncl__gemm_own_fits(g)) return nncl__sgemm_clblast(ctx, dev, g);
    return nncl__gemm_own(ctx, dev, &dev->gemm->all[idx], g);
}

nncl_status nncl__sgemm(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g) {
    return pick_sgemm(ctx, dev, g, 1);
}

nncl_status nncl__sgemm_exact(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g) {
    return pick_sgemm(ctx, dev, g, 0);
}

int nncl__conv_choice_find(nncl_context *ctx, nncl_device *dev, const int *key) {
    nncl__gemm_state *s = NULL;
    int i;
    if (nncl__gemm_state_get(ctx, dev, &s) != NNCL_OK) return -1;
    if (!s->loaded) nncl__gemm_choices_load(ctx, dev, s);
    for (i = 0; i < s->n_convs; i++)
        if (!memcmp(s->convs[i].key, key, sizeof s->convs[i].key)) return s->convs[i].path;
    return -1;
}

nncl_status nncl__conv_choice_add(nncl_context *ctx, nncl_device *dev, const int *key, int path) {
    nncl__gemm_state *s = NULL;
    nncl__conv_choice c;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!s->loaded) nncl__gemm_choices_load(ctx, dev, s);
    memcpy(c.key, key, sizeof c.key);
    c.path = path;
    if (!nncl__gemm_conv_add(s, &c)) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    nncl__gemm_choices_store(ctx, dev, s);
    return NNCL_OK;
}

nncl_status nncl__gemm_packed_variant(nncl_context *ctx, nncl_device *dev, size_t m, size_t n, size_t k,
                                      nncl__gemm_variant *v) {
    nncl__gemm_state *s = NULL;
    nncl__gemm_args g;
    const nncl__gemm_choice *c;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    c = nncl__gemm_choice_find(s, &g);
    *v = s->all[0];
    /* a variant never timed for the shape is not taken from a file either:
     * the convolution's workspace holds the panels of those timed */
    if (c && nncl__gemm_packs(&s->all[c->best_own]) && nncl__gemm_worth(s->all, c->best_own, m, n))
        *v = s->all[c->best_own];
    return NNCL_OK;
}

