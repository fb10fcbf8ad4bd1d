/* test_gemm.c - nncl's own GEMM kernels on every device: every variant
 * (packed, local-memory, direct; the dot kernel on A times B transposed,
 * the only product it runs, and refusing the others) against a double host
 * reference on sizes that are multiples of no tile (1, 7, 13, 1000 among
 * them), all four transposes, alpha and beta, element offsets and padded
 * leading dimensions, poisoned C (beta 0 never reads it) with guards around
 * it that must stay untouched, and every epilogue on whole and partial
 * tiles; the batched packed launch
 * with a shared A; CLBlast with the epilogue; and the stored choice: kept
 * and reused, ignored when damaged, written for another driver, or naming
 * a kernel for a product it is never timed on (the dot kernel for other
 * transposes, a local tile larger than the product). */
#include "harness.h"
#include "gemm/gemm.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TG_GUARD 37
#define TG_SENT 4242.5f

static int tg_warned;
static char tg_timed[1024]; /* the last choice's debug line: every candidate's time */
static void tg_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    if (strstr(msg, "GEMM choices") && strstr(msg, "ignored")) tg_warned++;
    if (strstr(msg, "ms per run:")) snprintf(tg_timed, sizeof tg_timed, "%s", msg);
}

/* Whether the choice's debug line times CLBlast (or, want_clblast 0, does
 * not) and at least one own kernel (two without CLBlast), and the state's
 * choice c is the one with the least time (as printed: a tie in the last
 * digit is one). */
static int tg_timed_fastest(const nncl__gemm_state *s, const nncl__gemm_choice *c, int want_clblast) {
    char name[64], val[64], *p = strstr(tg_timed, "ms per run:"), *end;
    double t, best = HUGE_VAL, mine = HUGE_VAL;
    int used, n = 0, clblast = 0, ok;
    const char *chosen = c->best < 0 ? "clblast" : s->all[c->best].name;
    if (!p) return 0;
    /* "NAME TIME" pairs, "NAME -" for one that failed, up to "), chosen in" */
    for (p += strlen("ms per run:"); sscanf(p, " %63s %63s%n", name, val, &used) == 2; p += used, n++) {
        t = strcmp(val, "-") ? strtod(val, &end) : HUGE_VAL;
        if (t != HUGE_VAL && end == val) break;
        clblast |= !strcmp(name, "clblast");
        if (t < best) best = t;
        if (!strcmp(name, chosen)) mine = t;
    }
    ok = clblast == want_clblast && n >= 2 && mine == best && best < HUGE_VAL;
    if (!ok) printf("    (choice: %s, timed: %s)\n", chosen, tg_timed);
    return ok;
}

static double tg_act(double v, int act) {
    if (act == 1) return v < 0 ? 0 : v;
    if (act == 2) return 1 / (1 + exp(-v));
    if (act == 3) return tanh(v);
    return v;
}

/* One product through variant v (NULL: CLBlast; -1 in kind: nncl__sgemm's
 * choice) against the reference. */
static int tg_case(const char *name, nncl_context *ctx, int d, const nncl__gemm_variant *v, int ta, int tb, int m,
                   int n, int k, float alpha, float beta, int bias, int act) {
    nncl_device *dev = &ctx->devices[d];
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
    size_t aoff = 3, boff = 5, coff = TG_GUARD;
    size_t na = aoff + (size_t)(ta ? k : m) * lda, nb = boff + (size_t)(tb ? n : k) * ldb;
    size_t nc = coff + (size_t)m * ldc + TG_GUARD, nbias = 2 + (size_t)(bias == 2 ? m : n), i, j, l;
    float *ha = (float *)malloc(na * sizeof(float)), *hb = (float *)malloc(nb * sizeof(float));
    float *hc = (float *)malloc(nc * sizeof(float)), *out = (float *)malloc(nc * sizeof(float));
    float *hbias = (float *)malloc(nbias * sizeof(float));
    double *want = (double *)malloc((size_t)m * n * sizeof(double));
    float *got = (float *)malloc((size_t)m * n * sizeof(float));
    nncl_tensor *ta_ = NULL, *tb_ = NULL, *tc = NULL, *tbias = NULL;
    int shp[1], bad = 0;
    unsigned seed = (unsigned)(m * 131 + n * 17 + k + ta * 2 + tb);
    nncl__gemm_args g;
    nncl_status st;
    TH_CHECK(name, ha && hb && hc && out && hbias && want && got);
    th_fill_uniform(ha, na, -1, 1, &seed);
    th_fill_uniform(hb, nb, -1, 1, &seed);
    th_fill_uniform(hbias, nbias, -1, 1, &seed);
    if (beta == 0) th_poison(hc, nc);
    else th_fill_uniform(hc, nc, -1, 1, &seed);
    for (i = 0; i < coff; i++) hc[i] = TG_SENT;
    for (i = 0; i < (size_t)m; i++)
        for (j = (size_t)n; j < (size_t)ldc; j++) hc[coff + i * ldc + j] = TG_SENT;
    for (i = coff + (size_t)m * ldc; i < nc; i++) hc[i] = TG_SENT;
    for (i = 0; i < (size_t)m; i++)
        for (j = 0; j < (size_t)n; j++) {
            double s = 0, v0;
            for (l = 0; l < (size_t)k; l++)
                s += (double)ha[aoff + (ta ? l * lda + i : i * lda + l)] * hb[boff + (tb ? j * ldb + l : l * ldb + j)];
            v0 = alpha * s + (beta != 0 ? beta * (double)hc[coff + i * ldc + j] : 0);
            if (bias == 1) v0 += hbias[2 + j];
            if (bias == 2) v0 += hbias[2 + i];
            want[i * n + j] = tg_act(v0, act);
        }
    shp[0] = (int)na;
    st = nncl_tensor_create(ctx, d, 1, shp, &ta_);
    shp[0] = (int)nb;
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shp, &tb_);
    shp[0] = (int)nc;
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shp, &tc);
    shp[0] = (int)nbias;
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shp, &tbias);
    if (st == NNCL_OK) st = nncl_tensor_write(ta_, ha, na);
    if (st == NNCL_OK) st = nncl_tensor_write(tb_, hb, nb);
    if (st == NNCL_OK) st = nncl_tensor_write(tc, hc, nc);
    if (st == NNCL_OK) st = nncl_tensor_write(tbias, hbias, nbias);
    if (st == NNCL_OK) {
        memset(&g, 0, sizeof g);
        g.trans_a = ta;
        g.trans_b = tb;
        g.m = (size_t)m;
        g.n = (size_t)n;
        g.k = (size_t)k;
        g.alpha = alpha;
        g.beta = beta;
        g.a = ta_->mem, g.a_off = aoff, g.lda = (size_t)lda;
        g.b = tb_->mem, g.b_off = boff, g.ldb = (size_t)ldb;
        g.c = tc->mem, g.c_off = coff, g.ldc = (size_t)ldc;
        g.epi.bias = bias;
        g.epi.bias_mem = tbias->mem;
        g.epi.bias_off = 2;
        g.epi.act = act;
        if (!v) st = nncl__sgemm_clblast(ctx, dev, &g);
        else if (v->kind < 0) st = nncl__sgemm(ctx, dev, &g);
        else st = nncl__gemm_own(ctx, dev, v, &g);
    }
    if (st == NNCL_OK) st = nncl_tensor_read(tc, out, nc);
    if (st != NNCL_OK) {
        th_fail(name, "%s: %s", nncl_status_str(st), nncl_last_error(ctx));
        bad = 1;
    }
    for (i = 0; !bad && i < nc; i++) {
        size_t r = (i - coff) / (size_t)ldc, c = (i - coff) % (size_t)ldc;
        if (i < coff || i >= coff + (size_t)m * ldc || c >= (size_t)n) {
            if (out[i] != TG_SENT) {
                th_fail(name, "element %zu outside C written", i);
                bad = 1;
            }
        } else {
            got[r * n + c] = out[i];
        }
    }
    if (!bad && !th_close(name, got, want, (size_t)m * n, 1e-9)) bad = 1;
    if (bad)
        printf("    (%s, %dx%dx%d, trans %d %d, alpha %g beta %g, bias %d act %d)\n", v ? v->name : "clblast", m, n, k,
               ta, tb, alpha, beta, bias, act);
    nncl_tensor_free(ta_);
    nncl_tensor_free(tb_);
    nncl_tensor_free(tc);
    nncl_tensor_free(tbias);
    free(ha), free(hb), free(hc), free(out), free(hbias), free(want), free(got);
    return bad;
}

static const int tg_shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {13, 7, 1000}, {1000, 13, 7}, {67, 131, 45}, {1, 29, 3}};
#define TG_NSHAPES ((int)(sizeof tg_shapes / sizeof tg_shapes[0]))

/* Every shape and transpose through v, then alpha/beta/epilogue cases. */
static int tg_variant(nncl_context *ctx, int d, const nncl__gemm_variant *v, const char *label) {
    char name[256];
    int s, t, e;
    snprintf(name, sizeof name, "gemm %s on %s", v ? v->name : "clblast", label);
    for (s = 0; s < TG_NSHAPES; s++)
        for (t = 0; t < 4; t++)
            if ((!v || nncl__gemm_takes(v, t & 1, t >> 1)) &&
                tg_case(name, ctx, d, v, t & 1, t >> 1, tg_shapes[s][0], tg_shapes[s][1], tg_shapes[s][2],
                        s % 2 ? 0.75f : 1.0f, s % 3 ? 0.0f : 0.5f, 0, 0))
                return 1;
    th_pass("%s: %d shapes x %s, offsets, poisoned C", name, TG_NSHAPES,
            v && v->kind == NNCL__GEMM_DOT ? "A times B transposed" : "4 transposes");
    /* 19 x 133: whole tiles of every variant (stored by the unrolled path)
     * and partial ones; each transpose gets both bias modes */
    for (e = 0; e < 8; e++)
        if ((!v || nncl__gemm_takes(v, e & 1, (e >> 1) & 1)) &&
            tg_case(name, ctx, d, v, e & 1, (e >> 1) & 1, 19, 133, 23, -1.5f, e & 4 ? 0.25f : 0.0f,
                    1 + ((e ^ (e >> 2)) & 1), 1 + e % 3))
            return 1;
    th_pass("%s: bias per row and column, relu, sigmoid, tanh, alpha, beta", name);
    return 0;
}

/* The dot kernel refuses the transposes it does not run (an argument
 * error, C untouched), rather than computing the wrong product. */
static void tg_dot_refuses(nncl_context *ctx, int d, const nncl__gemm_variant *v, const char *label) {
    char name[256];
    float hc[4] = {1, 2, 3, 4}, out[4];
    nncl_tensor *t = NULL;
    int shp[1] = {4}, tr;
    nncl__gemm_args g;
    snprintf(name, sizeof name, "gemm %s on %s", v->name, label);
    if (nncl_tensor_create(ctx, d, 1, shp, &t) != NNCL_OK || nncl_tensor_write(t, hc, 4) != NNCL_OK) {
        th_fail(name, "tensor: %s", nncl_last_error(ctx));
        nncl_tensor_free(t);
        return;
    }
    for (tr = 0; tr < 4; tr++) {
        nncl_status st;
        if (nncl__gemm_takes(v, tr & 1, tr >> 1)) continue;
        memset(&g, 0, sizeof g);
        g.trans_a = tr & 1;
        g.trans_b = tr >> 1;
        g.m = g.n = g.k = 2;
        g.alpha = 1;
        g.a = g.b = g.c = t->mem;
        g.lda = g.ldb = g.ldc = 2;
        st = nncl__gemm_own(ctx, &ctx->devices[d], v, &g);
        if (st != NNCL_ERR_INVALID_ARGUMENT || nncl_tensor_read(t, out, 4) != NNCL_OK || memcmp(out, hc, sizeof hc)) {
            th_fail(name, "transposes %d %d: %s, C %s", g.trans_a, g.trans_b, nncl_status_str(st),
                    memcmp(out, hc, sizeof hc) ? "changed" : "kept");
            nncl_tensor_free(t);
            return;
        }
    }
    th_pass("%s: refuses the transposes it does not run, C kept", name);
    nncl_tensor_free(t);
}

/* The batched packed launch: shared A (weights), 3 B panels and C blocks. */
static int tg_batched(nncl_context *ctx, int d, const nncl__gemm_variant *v, const char *label) {
    char name[256];
    const int m = 11, n = 21, k = 9, batch = 3, cstride = m * n + 4;
    size_t pa = nncl__gemm_pack_floats(v->mr, m, k), pb = nncl__gemm_pack_floats(v->nr, n, k), i, j, l, z;
    float ha[11 * 9], hb[3 * 9 * 21], hbias[11], out[3 * (11 * 21 + 4)];
    nncl_tensor *a = NULL, *b = NULL, *c = NULL, *ws = NULL, *bias = NULL;
    int shp[1];
    unsigned seed = 99;
    nncl__gemm_packed_args p;
    nncl_device *dev = &ctx->devices[d];
    snprintf(name, sizeof name, "gemm %s batched on %s", v->name, label);
    th_fill_uniform(ha, sizeof ha / sizeof ha[0], -1, 1, &seed);
    th_fill_uniform(hb, sizeof hb / sizeof hb[0], -1, 1, &seed);
    th_fill_uniform(hbias, m, -1, 1, &seed);
    th_poison(out, sizeof out / sizeof out[0]);
    shp[0] = m * k;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, shp, &a));
    shp[0] = batch * k * n;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, shp, &b));
    shp[0] = batch * cstride;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, shp, &c));
    shp[0] = (int)(pa + batch * pb);
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, shp, &ws));
    shp[0] = m;
    TH_OK(name, ctx, nncl_tensor_create(ctx, d, 1, shp, &bias));
    TH_OK(name, ctx, nncl_tensor_write(a, ha, (size_t)m * k));
    TH_OK(name, ctx, nncl_tensor_write(b, hb, (size_t)batch * k * n));
    TH_OK(name, ctx, nncl_tensor_write(c, out, (size_t)batch * cstride));
    TH_OK(name, ctx, nncl_tensor_write(bias, hbias, (size_t)m));
    TH_OK(name, ctx, nncl__gemm_pack_a(ctx, dev, v, 0, m, k, a->mem, 0, k, 0, 1, ws->mem, 0));
    TH_OK(name, ctx, nncl__gemm_pack_b(ctx, dev, v, 0, k, n, b->mem, 0, n, (size_t)k * n, batch, ws->mem, pa));
    memset(&p, 0, sizeof p);
    p.m = m, p.n = n, p.k = k, p.batch = batch;
    p.ap = ws->mem, p.ap_off = 0, p.ap_stride = 0;
    p.bp = ws->mem, p.bp_off = pa, p.bp_stride = pb;
    p.c = c->mem, p.c_off = 0, p.c_stride = cstride, p.ldc = n;
    p.alpha = 1, p.beta = 0;
    p.epi.bias = 2, p.epi.bias_mem = bias->mem, p.epi.act = 1;
    TH_OK(name, ctx, nncl__gemm_packed(ctx, dev, v, &p));
    TH_OK(name, ctx, nncl_tensor_read(c, out, (size_t)batch * cstride));
    nncl_tensor_free(a), nncl_tensor_free(b), nncl_tensor_free(c), nncl_tensor_free(ws), nncl_tensor_free(bias);
    for (z = 0; z < (size_t)batch; z++) {
        double want[11 * 21];
        for (i = 0; i < (size_t)m; i++)
            for (j = 0; j < (size_t)n; j++) {
                double s = hbias[i];
                for (l = 0; l < (size_t)k; l++) s += (double)ha[i * k + l] * hb[z * k * n + l * n + j];
                want[i * n + j] = s < 0 ? 0 : s;
            }
        if (!th_close(name, out + z * cstride, want, (size_t)m * n, 1e-9)) return 1;
    }
    th_pass("%s: shared A, 3 items, per-row bias + relu", name);
    return 0;
}

/* The int-index guard: a long-k product fits, one whose A spans more than
 * an int can index does not (and stays with CLBlast). */
static void tg_fits(void) {
    const char *name = "gemm own index guard";
    nncl__gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = 100, g.n = 10, g.k = 1000000, g.lda = 1000000, g.ldb = 10, g.ldc = 10;
    if (!nncl__gemm_own_fits(&g)) {
        th_fail(name, "100x10x1e6 rejected");
        return;
    }
    g.lda = 30000000;
    if (nncl__gemm_own_fits(&g)) {
        th_fail(name, "A of 100 rows with lda 3e7 (3e9 elements) accepted");
        return;
    }
    g.lda = 1000000, g.trans_b = 1, g.ldb = 300000000;
    if (nncl__gemm_own_fits(&g)) {
        th_fail(name, "B^T of 10 rows with ldb 3e8 accepted");
        return;
    }
    th_pass("%s: long k accepted, spans past INT_MAX refused", name);
}

static nncl_context *tg_open(int d) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    char sel[16];
    snprintf(sel, sizeof sel, "%d", d);
    cfg.devices = sel;
    cfg.log = tg_log;
    cfg.log_level = NNCL_LOG_DEBUG;
    return nncl_init(&cfg, &ctx) == NNCL_OK ? ctx : NULL;
}

static char *tg_slurp(const char *path) {
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return NULL;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int tg_spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

/* Makes text's checksum line right again after an edit. */
static int tg_resum(char *text) {
    unsigned long long h = 0xCBF29CE484222325ull;
    const unsigned char *p;
    char *line = strstr(text, "\ncheck ");
    if (!line) return 0;
    for (p = (const unsigned char *)text; p <= (const unsigned char *)line; p++) h = (h ^ *p) * 0x100000001B3ull;
    sprintf(line + 1, "check %016llx\n", h);
    return 1;
}

/* Device d's choice file (text, whose line for NT 33x40x50 tg_choice
 * wrote) with that line made one for A times B, B transposed if tb, naming
 * `kernel` is ignored with a warning, and the product measured afresh
 * takes another kernel. */
static int tg_unfit(int d, const char *name, const char *path, const char *text, int tb, const char *kernel) {
    char saved[1 << 16], *at = strstr(text, "\nchoice 0 1 33 40 50 5 "), *end = at ? strchr(at + 1, '\n') : NULL;
    nncl_context *ctx;
    nncl__gemm_state *s;
    nncl__gemm_args g;
    size_t bytes = 0;
    TH_CHECK(name, at && end && strlen(text) + 64 < sizeof saved);
    strcpy(saved, text);
    sprintf(saved + (at - text), "\nchoice 0 %d 33 40 50 5 %s %s%s", tb, kernel, kernel, end);
    TH_CHECK(name, tg_resum(saved) && tg_spit(path, saved));
    tg_warned = 0;
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, &ctx->devices[0], &s));
    memset(&g, 0, sizeof g);
    g.trans_b = tb, g.m = 33, g.n = 40, g.k = 50, g.lda = 50, g.ldb = tb ? 50 : 40, g.ldc = 40;
    g.epi.bias = 1;
    g.epi.act = 1;
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, &ctx->devices[0], &g, &bytes));
    TH_CHECK(name, tg_warned == 1 && s->n_choices == 1 && strcmp(s->all[s->choices[0].best_own].name, kernel) != 0);
    nncl_free(ctx);
    th_pass("%s: a file naming %s for products it does not run ignored", name, kernel);
    return 0;
}

/* Device d's choice file (saved) with one character of the line starting
 * with key changed, at offset at, and its checksum made right: a fresh
 * context ignores it with one warning (product g prepared afresh). saved
 * is left as it was. */
static int tg_foreign(int d, const char *name, const char *path, char *saved, const char *key, size_t at,
                      nncl__gemm_args *g) {
    char *line = strstr(saved, key), was;
    nncl_context *ctx;
    nncl__gemm_state *s;
    size_t bytes = 0;
    TH_CHECK(name, line != NULL);
    was = line[at];
    line[at] = was == '9' ? '8' : '9';
    TH_CHECK(name, tg_resum(saved) && tg_spit(path, saved));
    line[at] = was;
    TH_CHECK(name, tg_resum(saved));
    tg_warned = 0;
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, &ctx->devices[0], &s));
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, &ctx->devices[0], g, &bytes));
    TH_CHECK(name, tg_warned == 1);
    nncl_free(ctx);
    return 0;
}

/* Device d's class: where CLBlast was measured slower at every shape
 * (PoCL's CPU devices) a choice times only the own kernels, and the
 * fastest of them runs; elsewhere CLBlast is timed too. */
static int tg_class(int d, const char *label) {
    char name[256], path[1200];
    nncl_context *ctx;
    nncl_device *dev;
    nncl__gemm_state *s;
    nncl__gemm_args g;
    nncl__gemm_variant chosen;
    size_t bytes = 0;
    int want;
    snprintf(name, sizeof name, "gemm choice by device class on %s", label);
    unsetenv("NNCL_TIME_CLBLAST");
    setenv("NNCL_KNOWN_CHOICES", "0", 1); /* a shape measured here, not shipped */
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    dev = &ctx->devices[0];
    want = nncl__gemm_times_clblast(dev);
    TH_CHECK(name, nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path));
    remove(path);
    memset(&g, 0, sizeof g);
    g.m = 31, g.n = 42, g.k = 27, g.lda = 27, g.ldb = 42, g.ldc = 42;
    tg_timed[0] = '\0';
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    TH_CHECK(name, s->n_choices == 1 && tg_timed_fastest(s, &s->choices[0], want));
    TH_CHECK(name, want || s->choices[0].best >= 0);
    memset(&chosen, 0, sizeof chosen);
    chosen.kind = -1; /* through nncl__sgemm: the choice just made */
    if (tg_case(name, ctx, 0, &chosen, 0, 0, 31, 42, 27, 1.0f, 0.0f, 0, 0)) return 1;
    nncl_free(ctx);
    unsetenv("NNCL_KNOWN_CHOICES");
    th_pass("%s: %s", name, want ? "CLBlast timed beside the own kernels" : "the own kernels alone timed, the fastest runs");
    return 0;
}

/* Choices shipped for device d's class (src/gemm/choice_known.h): on an
 * empty cache a product of a shipped shape is prepared without timing
 * anything; NNCL_KNOWN_CHOICES=0 leaves them out. */
static int tg_known(int d, const char *label) {
    char name[256], path[1200];
    nncl_context *ctx;
    nncl_device *dev;
    nncl__gemm_state *s;
    nncl__gemm_args g;
    nncl__gemm_choice c;
    size_t bytes = 0;
    int shipped;
    snprintf(name, sizeof name, "gemm choices shipped for the class of %s", label);
    unsetenv("NNCL_TIME_CLBLAST");
    setenv("NNCL_KNOWN_CHOICES", "0", 1);
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    dev = &ctx->devices[0];
    TH_CHECK(name, nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path));
    remove(path);
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    nncl__gemm_choices_load(ctx, dev, s);
    TH_CHECK(name, s->n_choices == 0 && s->n_convs == 0);
    nncl_free(ctx);
    unsetenv("NNCL_KNOWN_CHOICES");
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    dev = &ctx->devices[0];
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    nncl__gemm_choices_load(ctx, dev, s);
    shipped = s->n_choices;
    if (!shipped) {
        nncl_free(ctx);
        th_skip(name, "no choices shipped for this device class");
        return 0;
    }
    c = s->choices[0];
    memset(&g, 0, sizeof g);
    g.trans_a = c.ta, g.trans_b = c.tb, g.m = c.m, g.n = c.n, g.k = c.k;
    g.lda = c.ta ? c.m : c.k, g.ldb = c.tb ? c.k : c.n, g.ldc = c.n;
    g.epi.bias = c.epi & 3, g.epi.act = c.epi >> 2;
    tg_timed[0] = '\0';
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    if (tg_timed[0] || s->n_choices != shipped) printf("    (timed: %s)\n", tg_timed);
    TH_CHECK(name, tg_timed[0] == '\0' && s->n_choices == shipped);
    /* a shape not shipped: timed on the variants the shipped choices name */
    memset(&g, 0, sizeof g);
    g.m = 29, g.n = 35, g.k = 23, g.lda = 23, g.ldb = 35, g.ldc = 35;
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    {
        const char *p = strstr(tg_timed, "ms per run:");
        int i, named = 0, other = 0;
        for (i = 0; p && i < s->n_all; i++) {
            char key[64];
            snprintf(key, sizeof key, " %s ", s->all[i].name);
            if (strstr(p, key)) named += s->shipped >> i & 1, other += !(s->shipped >> i & 1);
        }
        if (!p || !named || other) printf("    (timed: %s)\n", tg_timed);
        TH_CHECK(name, p && named && !other);
    }
    nncl_free(ctx);
    th_pass("%s: %d shapes, one of them prepared without timing, another timed on the variants they name; none "
            "with NNCL_KNOWN_CHOICES=0", name, shipped);
    return 0;
}

/* The stored choice on device d: written by a prepare, reused (no new
 * measurement) by a fresh context, ignored when damaged or foreign. */
static int tg_choice(int d, const char *label) {
    char name[256], path[1200], saved[1 << 16], *text;
    nncl_context *ctx;
    nncl_device *dev;
    nncl__gemm_state *s;
    nncl__gemm_args g;
    size_t bytes = 0;
    const nncl__gemm_variant *v;
    const char *dot = NULL, *big = NULL;
    char dot_name[sizeof v->name], big_name[sizeof v->name];
    int nv = 0, i;
    snprintf(name, sizeof name, "gemm choice on %s", label);
    tg_warned = 0;
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    dev = &ctx->devices[0];
    TH_OK(name, ctx, nncl__gemm_variants(ctx, dev, 0, &v, &nv));
    for (i = 0; i < nv; i++) {
        if (v[i].kind == NNCL__GEMM_DOT) dot = strcpy(dot_name, v[i].name);
        if (!nncl__gemm_worth(v, i, 33, 40)) big = strcpy(big_name, v[i].name);
    }
    TH_CHECK(name, nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path));
    remove(path);
    memset(&g, 0, sizeof g);
    g.trans_b = 1, g.m = 33, g.n = 40, g.k = 50, g.lda = 50, g.ldb = 50, g.ldc = 40;
    g.epi.bias = 1;
    g.epi.act = 1;
    tg_timed[0] = '\0';
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    TH_CHECK(name, s->n_choices == 1 && tg_timed_fastest(s, &s->choices[0], 1));
    { /* the temp of the kernel chosen, never less than CLBlast's */
        size_t clb = 0, again = 0;
        TH_OK(name, ctx, nncl__sgemm_clblast_temp(ctx, dev, &g, &clb));
        TH_OK(name, ctx, nncl__sgemm_temp_size(ctx, dev, &g, &again));
        TH_CHECK(name, bytes >= clb && again == bytes);
    }
    nncl_free(ctx);
    text = tg_slurp(path);
    TH_CHECK(name, text && strstr(text, "nncl-gemm-choice 7\n") && strstr(text, "\nchoice 0 1 33 40 50 5 "));
    strcpy(saved, text);
    /* a fresh context finds it without measuring: one choice, loaded */
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    dev = &ctx->devices[0];
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    if (s->n_choices != 1 || tg_warned) printf("    (%d choices, %d warnings)\n", s->n_choices, tg_warned);
    TH_CHECK(name, s->n_choices == 1 && tg_warned == 0);
    nncl_free(ctx);
    th_pass("%s: the fastest of CLBlast and the own kernels timed, stored and reused", name);
    /* damaged: one byte flipped */
    saved[strlen(saved) / 2] ^= 4;
    TH_CHECK(name, tg_spit(path, saved));
    saved[strlen(saved) / 2] ^= 4;
    TH_CHECK(name, (ctx = tg_open(d)) != NULL);
    if (tg_case(name, ctx, 0, NULL, 0, 1, 33, 40, 50, 1, 0, 1, 1)) return 1;
    dev = &ctx->devices[0];
    TH_OK(name, ctx, nncl__gemm_state_get(ctx, dev, &s));
    TH_OK(name, ctx, nncl__sgemm_prepare(ctx, dev, &g, &bytes));
    TH_CHECK(name, tg_warned == 1);
    nncl_free(ctx);
    /* another driver version; other kernel text (another version of nncl,
     * NNCL_KERNEL_DIR): a digit of the GEMM kernels' hash */
    g.a = g.b = g.c = NULL;
    if (tg_foreign(d, name, path, saved, "\ndriver ", 8, &g) || tg_foreign(d, name, path, saved, "\nkernels ", 9, &g))
        return 1;
    th_pass("%s: damaged, other-driver and other-kernel files ignored, products right", name);
    /* well-formed files naming a kernel for products the device would never
     * time it on are ignored: the dot kernel for A times B, a local tile
     * larger than the product (the GPU set's 128 x 128) */
    if (dot && tg_unfit(d, name, path, text, 0, dot)) return 1;
    if (big && tg_unfit(d, name, path, text, 1, big)) return 1;
    return 0;
}

int main(void) {
    char dir[] = "/tmp/nncl-gemm-XXXXXX", cmd[256];
    nncl_context *ctx;
    int d;
    if (!mkdtemp(dir)) {
        th_fail("gemm", "mkdtemp failed");
        return th_exit_code();
    }
    setenv("NNCL_CACHE_DIR", dir, 1);
    tg_fits();
    if (!(ctx = th_context())) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx); d++) {
        const char *label = th_device_label(ctx, d);
        const nncl__gemm_variant *v;
        nncl__gemm_variant chosen;
        int n = 0, i;
        if (nncl__gemm_variants(ctx, &ctx->devices[d], 1, &v, &n) != NNCL_OK) {
            th_fail(label, "variants: %s", nncl_last_error(ctx));
            continue;
        }
        tg_variant(ctx, d, NULL, label);
        for (i = 0; i < n; i++) {
            tg_variant(ctx, d, &v[i], label);
            if (nncl__gemm_packs(&v[i])) tg_batched(ctx, d, &v[i], label);
            if (v[i].kind == NNCL__GEMM_DOT) tg_dot_refuses(ctx, d, &v[i], label);
        }
        memset(&chosen, 0, sizeof chosen);
        chosen.kind = -1;
        snprintf(chosen.name, sizeof chosen.name, "chosen");
        tg_variant(ctx, d, &chosen, label);
    }
    nncl_free(ctx);
    {
        nncl_device_info all[16];
        int n = 0;
        const char *sel = getenv("NNCL_TEST_DEVICES");
        if (nncl_devices_list(all, 16, &n) != NNCL_OK)
            th_fail("gemm choice", "nncl_devices_list: %s", nncl_last_error(NULL));
        else if (sel && *sel && strcmp(sel, "all"))
            th_skip("gemm choice on each device", "NNCL_TEST_DEVICES is set, and the check opens every device by index");
        else
            for (d = 0; d < n && d < 16; d++) {
                setenv("NNCL_TIME_CLBLAST", "1", 1); /* CLBlast timed on every device class */
                tg_choice(d, all[d].name);
                tg_class(d, all[d].name);
                tg_known(d, all[d].name);
            }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) th_fail("gemm", "could not remove %s", dir);
    return th_exit_code();
}
