/* gemm_pick.c - which kernel runs a product: CLBlast (with its stored
 * tuning, if any) or one of nncl's own variants, chosen per device and
 * shape (transposes, m, n, k, epilogue) by timing each on the shape and
 * checking their results against each other. A choice is kept in memory and
 * in a file of the cache folder named after the device's identity (driver
 * and CLBlast versions included), so a second run measures nothing; a
 * damaged file, or one written for another identity or other kernel text
 * (pick_identity), is ignored. The same
 * file keeps each conv2d layer's measured path ("conv" lines, written by
 * src/ops/conv_own.c's timing of the whole layer both ways). Plans
 * choose at prepare time (nncl__sgemm_prepare); a product nobody prepared
 * (eager nncl_gemm) chooses on its first call. $NNCL_GEMM=clblast|own|auto
 * forces a side. */
#include "gemm/gemm.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

#define PICK_MAGIC "nncl-gemm-choice 7" /* 3: the direct conv path; 4: the dot kernel; 5: direct 4 x 4 vectors; 6: dot groups of 8; 7: close contenders timed longer */
#define PICK_FILE_MAX (1u << 20) /* a larger file is not one of ours */
#define PICK_TOL 1e-3            /* max-norm disagreement, relative to the largest |C| */
#define PICK_ROUNDS 3             /* timed rounds after the one that sizes the batches */
#define PICK_BATCH_SECONDS 0.0005 /* runs of a candidate per round: about this long */
#define PICK_SLOWER 3.0           /* slower than the fastest by this: no more rounds */
#define PICK_SURE 0.01            /* seconds: a single run this long decides PICK_SLOWER */
#define PICK_LONG 0.2             /* seconds: a run this long is timed twice, not in batches */
#define PICK_CLOSE 1.25           /* within this of the fastest after the rounds: a close contender */
#define PICK_CLOSE_SECONDS 0.02   /* close contenders' more rounds: about this long each */
#define PICK_CLOSE_ROUNDS 16      /* at most this many */

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
    return idx < 0 || s->kernels[idx][NNCL__GEMM_K_PRODUCT].kernel != NULL;
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

static int pick_add(nncl__gemm_state *s, const nncl__gemm_choice *c) {
    if (nncl__grow_int((void **)&s->choices, &s->cap_choices, s->n_choices + 1, sizeof *c, 16)) return 0;
    s->choices[s->n_choices++] = *c;
    return 1;
}

static int pick_add_conv(nncl__gemm_state *s, const nncl__conv_choice *c) {
    if (nncl__grow_int((void **)&s->convs, &s->cap_convs, s->n_convs + 1, sizeof *c, 8)) return 0;
    s->convs[s->n_convs++] = *c;
    return 1;
}

/* ------------------------------------------------------------- the file */

static uint64_t pick_fnv(const char *p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001B3ull;
    return h;
}

static const char *pick_name(const nncl__gemm_state *s, int idx) { return idx < 0 ? "clblast" : s->all[idx].name; }

static int pick_index(const nncl__gemm_state *s, const char *name) {
    int i;
    if (!strcmp(name, "clblast")) return -1;
    for (i = 0; i < s->n_all; i++)
        if (!strcmp(name, s->all[i].name)) return i;
    return -2;
}

/* Whether variant i is timed for a product of these transposes and [m,n]
 * shape (what a choice may name, measured or read from a file). */
static int pick_candidate(const nncl__gemm_state *s, int i, int ta, int tb, size_t m, size_t n) {
    return nncl__gemm_takes(&s->all[i], ta, tb) && nncl__gemm_worth(s->all, i, m, n);
}

/* What a choice file is written for: the device's identity (driver and
 * CLBlast versions included) and the text of the kernels timed (the GEMM
 * and convolution families: gemm, conv, conv3), so that choices measured
 * with other kernels (another version of nncl, NNCL_KERNEL_DIR) are
 * measured again, not trusted. */
static void pick_identity(nncl_context *ctx, const nncl_device *dev, char *id, size_t size) {
    size_t n;
    nncl__device_identity(dev, id, size);
    n = strlen(id);
    snprintf(id + n, size - n, "kernels %016llx %016llx %016llx\n", (unsigned long long)nncl__program_hash(ctx, "gemm"),
             (unsigned long long)nncl__program_hash(ctx, "conv"), (unsigned long long)nncl__program_hash(ctx, "conv3"));
}

/* Parses the stored choices of dev into s; a file that is damaged, foreign
 * or names variants this build lacks is ignored whole (why in *why). */
static int pick_parse(nncl__gemm_state *s, const char *id, char *buf, size_t n, const char **why) {
    char *line, *next, *check;
    size_t hl = strlen(PICK_MAGIC);
    unsigned long long sum;
    *why = "damaged";
    if (n == 0 || memchr(buf, 0, n)) return 0;
    buf[n] = 0;
    if (!strncmp(buf, "nncl-gemm-choice ", 17) && (strncmp(buf, PICK_MAGIC, hl) != 0 || buf[hl] != '\n')) {
        *why = "written by another version of nncl";
        return 0;
    }
    check = strstr(buf, "\ncheck ");
    if (!check || sscanf(check + 7, "%16llx", &sum) != 1 || pick_fnv(buf, (size_t)(check + 1 - buf)) != sum) return 0;
    check[1] = 0;
    if (strncmp(buf, PICK_MAGIC, hl) != 0 || buf[hl] != '\n') return 0;
    if (strncmp(buf + hl + 1, id, strlen(id)) != 0) {
        *why = "written for another device, driver, CLBlast or kernel text";
        return 0;
    }
    for (line = buf + hl + 1 + strlen(id); *line; line = next) {
        nncl__gemm_choice c;
        char best[32], own[32];
        unsigned long m, nn, k;
        char *nl = strchr(line, '\n');
        if (!nl) return 0;
        *nl = 0;
        next = nl + 1;
        memset(&c, 0, sizeof c);
        if (!strncmp(line, "conv ", 5)) {
            nncl__conv_choice cc;
            int *q = cc.key;
            if (sscanf(line + 5, "%d %d %d %d %d %d %d %d %d %d %d %d", &q[0], &q[1], &q[2], &q[3], &q[4], &q[5], &q[6],
                       &q[7], &q[8], &q[9], &q[10], &cc.path) != NNCL__CONV_KEY + 1 ||
                cc.path < 0 || cc.path > 2 || !pick_add_conv(s, &cc))
                return 0;
            continue;
        }
        if (sscanf(line, "choice %d %d %lu %lu %lu %d %31s %31s", &c.ta, &c.tb, &m, &nn, &k, &c.epi, best, own) != 8)
            return 0;
        c.m = m;
        c.n = nn;
        c.k = k;
        c.best = pick_index(s, best);
        c.best_own = pick_index(s, own);
        if (c.best < -1 || c.best_own < 0 || (c.ta | c.tb) & ~1) {
            *why = "names kernels this build lacks";
            return 0;
        }
        if ((c.best >= 0 && !pick_candidate(s, c.best, c.ta, c.tb, c.m, c.n)) ||
            !pick_candidate(s, c.best_own, c.ta, c.tb, c.m, c.n)) {
            *why = "names a kernel for products it does not run";
            return 0;
        }
        if (!pick_add(s, &c)) return 0;
    }
    return 1;
}

static void pick_load(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s) {
    char path[1200];
    unsigned char *data = NULL;
    size_t size = 0;
    const char *why;
    s->loaded = 1;
    pick_identity(ctx, dev, s->id, sizeof s->id);
    if (!nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path)) return;
    if (nncl__read_file(path, &data, &size) != NNCL_OK) return; /* none stored yet */
    if (size < PICK_FILE_MAX) {
        char *buf = (char *)NNCL_MALLOC(size + 1);
        if (buf) {
            memcpy(buf, data, size);
            if (pick_parse(s, s->id, buf, size, &why))
                nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: %d GEMM choices from %s", dev->info.index, s->n_choices,
                          path);
            else {
                s->n_choices = s->n_convs = 0;
                nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM choices %s ignored: %s", dev->info.index, path, why);
            }
            NNCL_FREE(buf);
        }
    }
    NNCL_FREE(data);
}

/* Rewrites the file with every choice (best effort: logs on failure); s
 * was loaded first, which made its id. */
static void pick_store(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s) {
    char path[1200], line[256];
    nncl__afile af;
    char *text;
    size_t cap = 2048 + (size_t)(s->n_choices + s->n_convs) * 160, len;
    int i;
    if (!nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path)) return;
    if (!(text = (char *)NNCL_MALLOC(cap))) return;
    len = (size_t)snprintf(text, cap, "%s\n%s", PICK_MAGIC, s->id);
    for (i = 0; i < s->n_choices && len < cap; i++) {
        const nncl__gemm_choice *c = &s->choices[i];
        snprintf(line, sizeof line, "choice %d %d %lu %lu %lu %d %s %s\n", c->ta, c->tb, (unsigned long)c->m,
                 (unsigned long)c->n, (unsigned long)c->k, c->epi, pick_name(s, c->best), pick_name(s, c->best_own));
        len += (size_t)snprintf(text + len, cap - len, "%s", line);
    }
    for (i = 0; i < s->n_convs && len < cap; i++) {
        const int *q = s->convs[i].key;
        len += (size_t)snprintf(text + len, cap - len, "conv %d %d %d %d %d %d %d %d %d %d %d %d\n", q[0], q[1], q[2], q[3],
                                q[4], q[5], q[6], q[7], q[8], q[9], q[10], s->convs[i].path);
    }
    if (len + 32 < cap) {
        snprintf(text + len, cap - len, "check %016llx\n", (unsigned long long)pick_fnv(text, len));
        if (nncl__afile_open(&af, path, "GEMM choices") == NNCL_OK) {
            if (fputs(text, af.f) == EOF) nncl__afile_abort(&af);
            else if (nncl__afile_commit(&af, "GEMM choices") != NNCL_OK)
                nncl__log(ctx, NNCL_LOG_WARN, "device %d: cannot store GEMM choices in %s", dev->info.index, path);
        }
    }
    NNCL_FREE(text);
}

/* ------------------------------------------------------------- timing */

typedef struct pick_bench {
    nncl__gemm_args g;  /* g's shape on the bench's own buffers */
    size_t na, nb, nc;
    float *hc0, *out, *ref;
    int have_ref;
    double ref_max;
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
    size_t i;
    *ok = 0;
    NNCL_CL(ctx, clEnqueueWriteBuffer(dev->queue, b->g.c, CL_TRUE, 0, b->nc * sizeof(float), b->hc0, 0, NULL, NULL));
    if (pick_run(ctx, dev, s, idx, &b->g) != NNCL_OK || clFinish(dev->queue) != CL_SUCCESS) {
        nncl__log(ctx, NNCL_LOG_WARN, "GEMM choice: %s fails on %lux%lux%lu: %s", pick_name(s, idx),
                  (unsigned long)b->g.m, (unsigned long)b->g.n, (unsigned long)b->g.k, nncl__thread_error());
        return NNCL_OK;
    }
    NNCL_CL(ctx, clEnqueueReadBuffer(dev->queue, b->g.c, CL_TRUE, 0, b->nc * sizeof(float), b->out, 0, NULL, NULL));
    if (!b->have_ref) {
        memcpy(b->ref, b->out, b->nc * sizeof(float));
        for (i = 0; i < b->nc; i++)
            if (fabs(b->ref[i]) > b->ref_max) b->ref_max = fabs(b->ref[i]);
        b->have_ref = 1;
    } else {
        for (i = 0; i < b->nc; i++) {
            double d = fabs((double)b->out[i] - b->ref[i]);
            if (!(d <= worst)) worst = d; /* NaN too */
        }
        if (!(worst <= PICK_TOL * (b->ref_max + 1))) {
            nncl__log(ctx, NNCL_LOG_WARN, "GEMM choice: %s disagrees with %s on %lux%lux%lu (%.3g): not used",
                      pick_name(s, idx), "the first kernel", (unsigned long)b->g.m, (unsigned long)b->g.n,
                      (unsigned long)b->g.k, worst);
            return NNCL_OK;
        }
    }
    *ok = 1;
    return NNCL_OK;
}

/* Times the candidates that passed (t[i] 0 on entry; HUGE_VAL: left out)
 * in rounds, a batch of back-to-back runs of each per round and one wait
 * at its end (as a step queues its kernels: a wait per run would add the
 * driver's wake-up to every run, as much as a small product's whole time
 * on PoCL), keeping each one's fastest time per run. Rounds, not one
 * candidate's runs after another's: a machine that slows down for a while
 * slows every candidate of those rounds alike, and rounds in alternating
 * order: a device that speeds up while it is measured (a GPU raising its
 * clocks from idle) favours no candidate. Round 0 runs each once and sizes
 * its batch (PICK_BATCH_SECONDS, at most 16 runs), then PICK_ROUNDS rounds;
 * a candidate PICK_SLOWER times slower than the fastest is timed no more
 * (on CPUs CLBlast is often many times slower than the own kernels, and
 * its rounds would be most of the choosing time), judged by round 1's
 * batches, or by round 0's single run where that took over PICK_SURE (a
 * GPU leaving idle runs its first short runs slowly, so judging by a short
 * round-0 run could drop the fastest candidate), and one whose run took
 * over PICK_LONG by the faster of that run and one more (a single run each
 * can keep a slower kernel). Then the close contenders, those within
 * PICK_CLOSE of the fastest, run more rounds among themselves, about
 * PICK_CLOSE_SECONDS each: a mid-sized product on a CPU is a batch of one,
 * and a busy machine's noise is as large as the difference between them,
 * while a choice stays for every later run. */
static nncl_status pick_rounds(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s, pick_bench *b, int n,
                               const int *idx, double *t) {
    double t0, dt, fastest, spent[NNCL__GEMM_MAX_VARIANTS + 1];
    int batch[NNCL__GEMM_MAX_VARIANTS + 1], r, q, i, j, close;
    for (r = 0; r <= PICK_ROUNDS + PICK_CLOSE_ROUNDS; r++) {
        for (fastest = HUGE_VAL, i = 0; i < n; i++)
            if (t[i] < fastest) fastest = t[i];
        if (r == 1 || r == 2) /* out of the running: time saved */
            for (i = 0; i < n; i++)
                if (t[i] > PICK_SLOWER * fastest && (r == 2 || t[i] > PICK_SURE)) batch[i] = 0;
        if (r > PICK_ROUNDS) { /* close contenders alone, while two have run less than PICK_CLOSE_SECONDS */
            for (close = 0, i = 0; i < n; i++) {
                if (t[i] > PICK_CLOSE * fastest || t[i] > PICK_LONG || spent[i] >= PICK_CLOSE_SECONDS) batch[i] = 0;
                close += batch[i] != 0;
            }
            if (close < 2) break;
        }
        for (q = 0; q < n; q++) {
            i = r % 2 ? n - 1 - q : q;
            if (t[i] == HUGE_VAL || (r && batch[i] == 0) || (r > 1 && t[i] > PICK_LONG)) continue;
            t0 = nncl__seconds();
            for (j = 0; j < (r ? batch[i] : 1); j++) NNCL_TRY(pick_run(ctx, dev, s, idx[i], &b->g));
            NNCL_CL(ctx, clFinish(dev->queue));
            dt = nncl__seconds() - t0;
            if (r == 0) {
                t[i] = dt;
                spent[i] = 0;
                batch[i] = dt > PICK_LONG ? 1 : dt * 16 < PICK_BATCH_SECONDS ? 16 : (int)(PICK_BATCH_SECONDS / dt) + 1;
            } else if ((r == 1 && t[i] <= PICK_LONG) || dt / batch[i] < t[i]) {
                t[i] = dt / batch[i]; /* round 0's single run replaced: it paid a wait a batch shares */
            }
            if (r) spent[i] += dt;
        }
    }
    return NNCL_OK;
}

static nncl_status pick_measure(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s, const nncl__gemm_args *g,
                                nncl__gemm_choice *c) {
    pick_bench b;
    size_t temp = 0;
    double t[NNCL__GEMM_MAX_VARIANTS + 1], best = HUGE_VAL, best_own = HUGE_VAL, t0 = nncl__seconds();
    int idx[NNCL__GEMM_MAX_VARIANTS + 1], n = 0, i, ok, own = nncl__gemm_own_fits(g);
    nncl_status st;
    NNCL_TRY(nncl__sgemm_temp_size(ctx, dev, g, &temp));
    st = pick_bench_init(ctx, dev, g, temp, &b);
    /* CLBlast (-1) first: its result is the one the others must match */
    for (i = -1; st == NNCL_OK && i < (own ? s->n_timed : 0); i++) {
        if (i >= 0 && !pick_candidate(s, i, g->trans_a, g->trans_b, g->m, g->n)) continue;
        st = pick_check(ctx, dev, s, &b, i, &ok);
        idx[n] = i;
        t[n++] = ok ? 0 : HUGE_VAL;
    }
    if (st == NNCL_OK) st = pick_rounds(ctx, dev, s, &b, n, idx, t);
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
            at += (size_t)snprintf(all + at, sizeof all - at, t[i] == HUGE_VAL ? " %s -" : " %s %.4f", pick_name(s, idx[i]),
                                   t[i] * 1e3);
        nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: GEMM %s%s %lux%lux%lu epi %d: %s (own best %s; ms per run:%s), "
                  "chosen in %.3f s", dev->info.index, g->trans_a ? "T" : "N", g->trans_b ? "T" : "N",
                  (unsigned long)g->m, (unsigned long)g->n, (unsigned long)g->k, c->epi, pick_name(s, c->best),
                  pick_name(s, c->best_own), all, nncl__seconds() - t0);
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
    if (!s->loaded) pick_load(ctx, dev, s);
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
    if (!pick_add(s, &c)) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    pick_store(ctx, dev, s);
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
    if (!s->loaded) pick_load(ctx, dev, s);
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
    NNCL_TRY(nncl__gemm_own_resolve(ctx, dev, NULL, g));
    if (mode != 1) { /* the chosen kernels resolved now: a step only launches them */
        NNCL_TRY(pick_choice(ctx, dev, g, 0, &c));
        idx = mode == 2 ? c->best_own : c->best;
        if (idx >= 0) NNCL_TRY(nncl__gemm_own_resolve(ctx, dev, &dev->gemm->all[idx], g));
    }
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
    if (!s->loaded) pick_load(ctx, dev, s);
    for (i = 0; i < s->n_convs; i++)
        if (!memcmp(s->convs[i].key, key, sizeof s->convs[i].key)) return s->convs[i].path;
    return -1;
}

nncl_status nncl__conv_choice_add(nncl_context *ctx, nncl_device *dev, const int *key, int path) {
    nncl__gemm_state *s = NULL;
    nncl__conv_choice c;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!s->loaded) pick_load(ctx, dev, s);
    memcpy(c.key, key, sizeof c.key);
    c.path = path;
    if (!pick_add_conv(s, &c)) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    pick_store(ctx, dev, s);
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

#undef PICK_MAGIC
#undef PICK_FILE_MAX
#undef PICK_TOL
#undef PICK_ROUNDS
#undef PICK_BATCH_SECONDS
#undef PICK_SLOWER
#undef PICK_SURE
#undef PICK_LONG
