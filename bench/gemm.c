/* gemm.c - SGEMM throughput per device: square sizes, the GEMMs of the
 * MLP (batch 100, both layers, forward and both backward products) and of
 * the CNN, each through nncl_gemm (the kernel chosen for the shape: named in
 * the note; timed alone, as the own kernels and torch.mm are) and through a
 * raw CLBlastSgemm on the same queue and buffers (with the stored tuning
 * when there is one; their ratio from runs in alternation with nncl_gemm's,
 * each repeat as many calls of both), and through each of nncl's own GEMM
 * variants (packing included), and in fp16 and bf16 storage as training
 * runs it (the own packed kernels converting as they pack and store), beside
 * an OpenMP loop and a BLAS on the host CPU (OpenBLAS when installed).
 * bench/pytorch_compare.py --gemm puts torch.mm beside these. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gemm_shape {
    int m, n, k, ta, tb;
    const char *what;
} gemm_shape;

/* The MLP 784-128-10 at batch 100: per layer the forward y = x W^T, the
 * input gradient dx = dy W and the weight gradient dW = dy^T x. The CNN:
 * the second conv layer's im2col GEMM for a batch of 100, W [32, 16*3*3]
 * times col [144, 100*14*14], and its first dense layer forward. */
static const gemm_shape gemm_model_shapes[] = {
    {100, 128, 784, 0, 1, "mlp fc1 forward x W^T"},
    {100, 784, 128, 0, 0, "mlp fc1 input grad dy W"},
    {128, 784, 100, 1, 0, "mlp fc1 weight grad dy^T x"},
    {100, 10, 128, 0, 1, "mlp fc2 forward x W^T"},
    {100, 128, 10, 0, 0, "mlp fc2 input grad dy W"},
    {10, 128, 100, 1, 0, "mlp fc2 weight grad dy^T x"},
    {32, 19600, 144, 0, 0, "cnn conv2 im2col W col"},
    {100, 128, 1568, 0, 1, "cnn fc1 forward x W^T"},
};
#define GEMM_N_MODEL ((int)(sizeof gemm_model_shapes / sizeof gemm_model_shapes[0]))

static int gemm_shapes(const bench_opts *o, gemm_shape *out, int max) {
    int i, n = 0;
    for (i = 0; i < o->n_sizes && n < max; i++) {
        gemm_shape s;
        s.m = s.n = s.k = o->sizes[i];
        s.ta = s.tb = 0;
        s.what = "square";
        out[n++] = s;
    }
    for (i = 0; i < GEMM_N_MODEL && n < max; i++) out[n++] = gemm_model_shapes[i];
    return n;
}

int bench_gemm_steps(const bench_opts *o, int n_devices) { return (o->n_sizes + GEMM_N_MODEL) * (n_devices + 1); }

/* Keys of the figures of own variant i: "own0_gflops" ... (the note names it). */
#define GEMM_MAX_OWN 8
/* --quick: per-kernel and half-storage rows only where a call takes less
 * (Mesa rusticl builds each launch: its large products' per-kernel rows
 * would be most of the quick run) */
#define GEMM_QUICK_CALL_S 0.2

static void gemm_item(const gemm_shape *s, char *buf, size_t len) {
    snprintf(buf, len, "%dx%dx%d %s%s", s->m, s->n, s->k, s->ta ? "T" : "N", s->tb ? "T" : "N");
}

/* ------------------------------------------------------------- actions */

typedef struct gemm_job {
    nncl_context *ctx;
    int device;
    const gemm_shape *s;
    nncl_tensor *a, *b, *c;
    const float *ha, *hb; /* host copies for the CPU side */
    float *hc;
} gemm_job;

static int gemm_nncl(void *arg, int iters) {
    gemm_job *j = (gemm_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_gemm(j->ctx, j->s->ta, j->s->tb, 1.0f, j->a, j->b, 0.0f, j->c) != NNCL_OK) return 1;
    return nncl_finish(j->ctx, j->device) != NNCL_OK;
}

static int gemm_raw(void *arg, int iters) {
    gemm_job *j = (gemm_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (bench_raw_sgemm(j->ctx, j->device, j->s->ta, j->s->tb, j->s->m, j->s->n, j->s->k, j->a, j->b, j->c))
            return 1;
    return bench_raw_finish(j->ctx, j->device);
}

typedef struct gemm_own_job {
    gemm_job *j;
    int variant;
} gemm_own_job;

static int gemm_own(void *arg, int iters) {
    gemm_own_job *o = (gemm_own_job *)arg;
    gemm_job *j = o->j;
    int i;
    for (i = 0; i < iters; i++)
        if (bench_raw_own_sgemm(j->ctx, j->device, o->variant, j->s->ta, j->s->tb, j->s->m, j->s->n, j->s->k, j->a,
                                j->b, j->c))
            return 1;
    return bench_raw_finish(j->ctx, j->device);
}

typedef struct gemm_half_job {
    gemm_job *j;
    int store;
} gemm_half_job;

static int gemm_half(void *arg, int iters) {
    gemm_half_job *h = (gemm_half_job *)arg;
    gemm_job *j = h->j;
    int i;
    for (i = 0; i < iters; i++)
        if (bench_raw_half_sgemm(j->ctx, j->device, h->store, j->s->ta, j->s->tb, j->s->m, j->s->n, j->s->k, j->a, j->b,
                                 j->c))
            return 1;
    return bench_raw_finish(j->ctx, j->device);
}

static int gemm_omp(void *arg, int iters) {
    gemm_job *j = (gemm_job *)arg;
    int i;
    for (i = 0; i < iters; i++) bench_cpu_gemm(j->s->m, j->s->n, j->s->k, j->ha, j->hb, j->hc);
    return 0;
}

static int gemm_blas(void *arg, int iters) {
    gemm_job *j = (gemm_job *)arg;
    int i;
    for (i = 0; i < iters; i++) bench_blas_sgemm(j->s->ta, j->s->tb, j->s->m, j->s->n, j->s->k, j->ha, j->hb, j->hc);
    return 0;
}

/* ------------------------------------------------------------- helpers */

static void gemm_fill(float *v, size_t n, unsigned seed) {
    size_t i;
    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)((seed >> 9) & 0x3fff) / 16384.0f - 0.5f;
    }
}

/* op(X) as a plain row-major [rows, cols] matrix. */
static void gemm_transpose(const float *x, int rows_stored, int cols_stored, float *out) {
    int i, j;
    for (i = 0; i < rows_stored; i++)
        for (j = 0; j < cols_stored; j++) out[(size_t)j * rows_stored + i] = x[(size_t)i * cols_stored + j];
}

static double gemm_nse(const float *got, const float *want, size_t n) {
    double e = 0, r = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        e += d * d;
        r += (double)want[i] * want[i];
    }
    return r > 0 ? e / r : e;
}

/* ------------------------------------------------------------- section */

/* Rows fp16_gflops and bf16_gflops of item, and each against fp32's
 * nncl_gemm (gflops32): A and B converted into the start of j's tensors;
 * n/a with the reason skip where it is not empty. */
static void gemm_half_rows(gemm_job *j, const bench_timing *tm, const char *item, const float *ha, const float *hb,
                           double flops, double gflops32, const char *skip) {
    static const char *const keys[3][2] = {{"", ""}, {"fp16_gflops", "fp16_vs_fp32"}, {"bf16_gflops", "bf16_vs_fp32"}};
    const gemm_shape *s = j->s;
    gemm_half_job h;
    bench_stat t;
    for (h.store = 1; h.store <= 2; h.store++) {
        h.j = j;
        if (*skip) {
            bench_put("gemm", j->device, item, keys[h.store][0], bench_stat_na(), "GFLOP/s", skip);
            continue;
        }
        bench_progress("gemm d%d %s: %s storage", j->device, item, h.store == 1 ? "fp16" : "bf16");
        if (bench_raw_half_write(j->ctx, j->device, h.store, j->a, ha, (size_t)s->m * s->k) ||
            bench_raw_half_write(j->ctx, j->device, h.store, j->b, hb, (size_t)s->k * s->n) ||
            bench_time(gemm_half, &h, tm, &t) != 0) {
            char why[200];
            snprintf(why, sizeof why, "n/a: %s", nncl_last_error(j->ctx));
            bench_put("gemm", j->device, item, keys[h.store][0], bench_stat_na(), "GFLOP/s", why);
            continue;
        }
        t = bench_stat_inverse(t, flops * 1e-9);
        bench_put("gemm", j->device, item, keys[h.store][0], t, "GFLOP/s",
                  "A, B and C in the format, own packed kernels, fp32 panels and arithmetic, packing included");
        bench_put_num("gemm", j->device, item, keys[h.store][1], t.median / gflops32, "x", "/ nncl_gflops (fp32)");
    }
}

void bench_gemm(const bench_opts *o, nncl_context *ctx) {
    gemm_shape shapes[32];
    int ns = gemm_shapes(o, shapes, 32), si, d, nd = nncl_device_count(ctx);
    char blas_name[512] = "";
    int have_blas = bench_blas_load(blas_name, sizeof blas_name);
    double budget = o->repeats * (o->quick ? 0.5 : 1.6); /* seconds per figure, more with more repeats */
    bench_timing tm = bench_timing_of(o, budget);
    char note[200];
    snprintf(note, sizeof note, "%d threads", bench_cpu_threads());
    bench_put_text("gemm", -1, "host", "blas_library", have_blas ? blas_name : "none found (n/a)");
    bench_put_num("gemm", -1, "host", "cpu_threads", bench_cpu_threads(), "", "OpenMP threads of the host references");
    for (si = 0; si < ns; si++) {
        const gemm_shape *s = &shapes[si];
        size_t an = (size_t)s->m * s->k, bn = (size_t)s->k * s->n, cn = (size_t)s->m * s->n;
        float *ha = (float *)malloc(an * sizeof(float)), *hb = (float *)malloc(bn * sizeof(float));
        float *hc = (float *)malloc(cn * sizeof(float)), *ref = (float *)malloc(cn * sizeof(float));
        float *nna = (float *)malloc(an * sizeof(float)), *nnb = (float *)malloc(bn * sizeof(float));
        double flops = 2.0 * s->m * s->n * s->k;
        char item[48];
        gemm_job j;
        bench_stat t, omp = bench_stat_na(), blas = bench_stat_na();
        gemm_item(s, item, sizeof item);
        if (!ha || !hb || !hc || !ref || !nna || !nnb) {
            free(ha), free(hb), free(hc), free(ref), free(nna), free(nnb);
            bench_put("gemm", -1, item, "cpu_omp_gflops", bench_stat_na(), "GFLOP/s", "n/a: out of host memory");
            continue;
        }
        gemm_fill(ha, an, 1u + (unsigned)si);
        gemm_fill(hb, bn, 7u + (unsigned)si);
        /* the CPU loop runs NN: transposed operands are transposed first, untimed */
        if (s->ta) gemm_transpose(ha, s->k, s->m, nna);
        else memcpy(nna, ha, an * sizeof(float));
        if (s->tb) gemm_transpose(hb, s->n, s->k, nnb);
        else memcpy(nnb, hb, bn * sizeof(float));

        bench_progress("gemm host %s: OpenMP loop%s", item, have_blas ? " and BLAS" : "");
        memset(&j, 0, sizeof j);
        j.s = s;
        j.ha = nna;
        j.hb = nnb;
        j.hc = ref;
        if (bench_time(gemm_omp, &j, &tm, &t) == 0) omp = bench_stat_inverse(t, flops * 1e-9);
        bench_put("gemm", -1, item, "cpu_omp_gflops", omp, "GFLOP/s", note);
        if (have_blas) {
            j.ha = ha;
            j.hb = hb;
            j.hc = hc;
            if (bench_time(gemm_blas, &j, &tm, &t) == 0) blas = bench_stat_inverse(t, flops * 1e-9);
            bench_put("gemm", -1, item, "cpu_blas_gflops", blas, "GFLOP/s", blas_name);
        } else {
            bench_put("gemm", -1, item, "cpu_blas_gflops", blas, "GFLOP/s", "n/a: no BLAS library found");
        }
        bench_progress_step();

        for (d = 0; d < nd; d++) {
            int sa[2], sb[2], sc[2];
            bench_stat tn, tr, ratio;
            nncl_status st = NNCL_OK;
            j.ctx = ctx;
            j.device = d;
            j.a = j.b = j.c = NULL;
            sa[0] = s->ta ? s->k : s->m, sa[1] = s->ta ? s->m : s->k;
            sb[0] = s->tb ? s->n : s->k, sb[1] = s->tb ? s->k : s->n;
            sc[0] = s->m, sc[1] = s->n;
            bench_progress("gemm d%d %s: nncl_gemm vs raw CLBlastSgemm (the first call per shape compiles)", d, item);
            if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sa, &j.a);
            if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sb, &j.b);
            if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sc, &j.c);
            if (st == NNCL_OK) st = nncl_tensor_write(j.a, ha, an);
            if (st == NNCL_OK) st = nncl_tensor_write(j.b, hb, bn);
            /* nncl_gemm alone as well (its figure): in the pair a repeat is
             * as many calls as suit CLBlast, often 10x slower */
            if (st != NNCL_OK || bench_time_pair(gemm_nncl, &j, gemm_raw, &j, &tm, &tn, &tr, &ratio) != 0 ||
                bench_time(gemm_nncl, &j, &tm, &tn) != 0) {
                char why[200];
                snprintf(why, sizeof why, "n/a: %s", nncl_last_error(ctx));
                bench_put("gemm", d, item, "nncl_gflops", bench_stat_na(), "GFLOP/s", why);
            } else {
                bench_stat gn = bench_stat_inverse(tn, flops * 1e-9), gr = bench_stat_inverse(tr, flops * 1e-9);
                /* time(raw)/time(nncl) per repeat = throughput nncl/raw */
                bench_stat r = bench_stat_inverse(ratio, 1.0);
                char chosen[160], raw_note[160];
                int v, nv = bench_raw_own_count(ctx, d);
                char skip[120] = "";
                if (o->quick && tn.median > GEMM_QUICK_CALL_S)
                    snprintf(skip, sizeof skip, "n/a: --quick times these where a call takes under %.0f ms (%.0f here)",
                             GEMM_QUICK_CALL_S * 1e3, tn.median * 1e3);
                snprintf(chosen, sizeof chosen, "nncl_gemm, alpha 1, beta 0: %s (the kernel chosen for the shape)",
                         bench_raw_chosen(ctx, d, s->ta, s->tb, s->m, s->n, s->k));
                snprintf(raw_note, sizeof raw_note, "CLBlastSgemm on the same queue and buffers, %s",
                         bench_raw_tuned(ctx, d) ? "stored tuning applied" : "CLBlast's own parameters (no tuning stored)");
                bench_put("gemm", d, item, "nncl_gflops", gn, "GFLOP/s", chosen);
                bench_put("gemm", d, item, "raw_gflops", gr, "GFLOP/s", raw_note);
                for (v = 0; v < nv && v < GEMM_MAX_OWN; v++) {
                    gemm_own_job oj;
                    bench_stat to;
                    char key[32], vnote[96];
                    oj.j = &j;
                    oj.variant = v;
                    snprintf(key, sizeof key, "own%d_gflops", v);
                    snprintf(vnote, sizeof vnote, "own kernel %s, packing included", bench_raw_own_name(ctx, d, v));
                    bench_progress("gemm d%d %s: own kernel %s", d, item, bench_raw_own_name(ctx, d, v));
                    if (*skip)
                        bench_put("gemm", d, item, key, bench_stat_na(), "GFLOP/s", skip);
                    else if (!bench_raw_own_takes(ctx, d, v, s->ta, s->tb))
                        bench_put("gemm", d, item, key, bench_stat_na(), "GFLOP/s",
                                  "n/a: not for these transposes");
                    else if (bench_time(gemm_own, &oj, &tm, &to) == 0)
                        bench_put("gemm", d, item, key, bench_stat_inverse(to, flops * 1e-9), "GFLOP/s", vnote);
                    else
                        bench_put("gemm", d, item, key, bench_stat_na(), "GFLOP/s", "n/a: the kernel failed");
                }
                bench_put("gemm", d, item, "nncl_over_raw", r, "x",
                          "median of per-repeat throughput ratios, alternating runs; target >= 0.95");
                bench_put_num("gemm", d, item, "dev_over_omp", gn.median / omp.median, "x", "nncl_gemm / OpenMP loop");
                bench_put_num("gemm", d, item, "dev_over_blas", gn.median / blas.median, "x",
                              have_blas ? "nncl_gemm / host BLAS" : "n/a: no BLAS");
                if (nncl_tensor_read(j.c, hc, cn) == NNCL_OK) {
                    bench_put_num("gemm", d, item, "nse_vs_cpu", gemm_nse(hc, ref, cn), "",
                                  "normalised squared error of the device result against the OpenMP loop");
                }
                gemm_half_rows(&j, &tm, item, ha, hb, flops, gn.median, skip); /* last: it overwrites A and B */
            }
            nncl_tensor_free(j.a);
            nncl_tensor_free(j.b);
            nncl_tensor_free(j.c);
            bench_progress_step();
        }
        free(ha), free(hb), free(hc), free(ref), free(nna), free(nnb);
    }
}
#undef GEMM_N_MODEL
#undef GEMM_MAX_OWN
#undef GEMM_QUICK_CALL_S
