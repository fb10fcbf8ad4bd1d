/* train_profile.c - the training section's per-device detail (bench/train.c
 * runs it): on a fresh profiling context the host-overhead share of a step,
 * the kernel-busy fraction, the time of each kernel in a step, and the peak
 * device memory of the training plan against what the model needs at the
 * least; and the fp16 and bf16 rows, run in turn with fp32. */
#include "train.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRAIN_QUICK_STEP_S 1.0 /* --quick: fp16 and bf16 where an fp32 step takes less */

/* Which kernels take a profiled step's time: the most expensive kernels
 * of the last profile on pc, per step, as section "kernels" rows "mlp:
 * nncl_adam_f32". Kernels below 1% of the time are summed into one row. */
#define TRAIN_TOP 12
static void train_breakdown(int d, const char *model, nncl_context *pc, int steps, double total) {
    nncl_profile_kernel k[64];
    int n = nncl_profile_kernels(pc, 0, k, 64), i, rest_n = 0;
    double rest = 0;
    char row[64], why[200];
    if (n > 64) n = 64;
    for (i = 0; i < n; i++) {
        if (i >= TRAIN_TOP || k[i].seconds < 0.01 * total) {
            rest += k[i].seconds;
            rest_n += k[i].launches;
            continue;
        }
        snprintf(row, sizeof row, "%.14s: %.32s", model, k[i].name);
        snprintf(why, sizeof why, "kernel time per training step, from profiling events over %d steps", steps);
        bench_put_num("kernels", d, row, "ms_per_step", k[i].seconds / steps * 1e3, "ms", why);
        bench_put_num("kernels", d, row, "launches_per_step", (double)k[i].launches / steps, "", "");
        bench_put_num("kernels", d, row, "share", k[i].seconds / total, "", "of the step's kernel time");
    }
    if (rest_n) {
        snprintf(row, sizeof row, "%s: (the others)", model);
        bench_put_num("kernels", d, row, "ms_per_step", rest / steps * 1e3, "ms", "kernels below 1% each, together");
        bench_put_num("kernels", d, row, "launches_per_step", (double)rest_n / steps, "", "");
        bench_put_num("kernels", d, row, "share", rest / total, "", "");
    }
    snprintf(row, sizeof row, "%s: (all kernels)", model);
    bench_put_num("kernels", d, row, "ms_per_step", total / steps * 1e3, "ms", "");
}
#undef TRAIN_TOP

/* Peak device memory (MiB) of the training plan of model kind in prec on a
 * fresh context of device d alone; negative when it cannot be made (why
 * in why). */
static double train_peak_mib(const bench_opts *o, nncl_context *ctx, int d, int kind, nncl_precision prec, char *why,
                             size_t len) {
    char sel[16];
    nncl_config cfg = nncl_config_default();
    nncl_context *pc = NULL;
    nncl_train_config tc;
    nncl_trainer *t = NULL;
    train_model m;
    uint64_t in_use = 0, peak = 0;
    int li = bench_list_index(ctx, d);
    memset(&m, 0, sizeof m);
    if (li < 0) return -1;
    snprintf(sel, sizeof sel, "%d", li);
    cfg.devices = sel;
    if (nncl_init(&cfg, &pc) != NNCL_OK) {
        snprintf(why, len, "n/a: %s", nncl_last_error(NULL));
        return -1;
    }
    if (train_build(pc, o, kind, &m) ||
        (tc = train_options(&m, m.batch, NULL, 0, prec), nncl_trainer_create(pc, m.g, m.loss, &tc, &t)) != NNCL_OK) {
        snprintf(why, len, "n/a: %s", nncl_last_error(pc));
        nncl_graph_free(m.g);
        nncl_free(pc);
        return -1;
    }
    nncl_device_memory(pc, 0, &in_use, &peak);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(pc);
    return peak / 1048576.0;
}

/* Rows <model>_fp16 and <model>_bf16 on device d: samples/s and the plan's
 * peak memory, each beside fp32's. The three trainers run their repeats in
 * turn (fp32 fp16 bf16, fp32 fp16 bf16, ...), the same number of steps
 * each, so that a machine's drift hits the three alike; vs_fp32 is the
 * median of the per-round ratios (the peaks: fresh contexts one after the
 * other). */
static void train_precisions(const bench_opts *o, nncl_context *ctx, int d, int kind, const train_data *td) {
    char why[300];
    double peak32 = train_peak_mib(o, ctx, d, kind, NNCL_PRECISION_FP32, why, sizeof why), rate[3][64], ratio[64], t0;
    double min_s = o->quick ? o->seconds * 2 : o->seconds * 5, one;
    train_model m[3];
    nncl_trainer *t[3] = {NULL, NULL, NULL};
    nncl_step_info info;
    int prec, r, i, steps = 1, reps = o->repeats > 64 ? 64 : o->repeats, ok = 1;
    memset(m, 0, sizeof m);
    bench_progress("train %s d%d: fp32, fp16 and bf16 in turn", train_items[kind][0], d);
    for (prec = 0; prec < 3 && ok; prec++) {
        nncl_train_config tc;
        t0 = bench_now();
        ok = !train_build(ctx, o, kind, &m[prec]) &&
             (tc = train_options(&m[prec], m[prec].batch, &d, 1, (nncl_precision)prec),
              nncl_trainer_create(ctx, m[prec].g, m[prec].loss, &tc, &t[prec])) == NNCL_OK;
        if (ok && prec)
            bench_put_num("training", d, train_items[kind][prec], "create_s", bench_now() - t0, "s",
                          "nncl_trainer_create: plans, kernel builds, calibration");
        for (i = 0; ok && i < (o->quick ? 2 : 10); i++) ok = train_step(o, t[prec], &m[prec], td, &info) == NNCL_OK;
    }
    if (ok) { /* steps per repeat from fp32's step */
        t0 = bench_now();
        ok = train_step(o, t[0], &m[0], td, &info) == NNCL_OK;
        one = bench_now() - t0;
        steps = (int)ceil(min_s / (one > 0 ? one : 1e-3));
        if (steps < (o->quick ? 1 : 2)) steps = o->quick ? 1 : 2;
        if (steps > 2000) steps = 2000;
    }
    for (r = 0; r < reps && ok; r++)
        for (prec = 0; prec < 3 && ok; prec++) {
            t0 = bench_now();
            for (i = 0; i < steps && ok; i++) ok = train_step(o, t[prec], &m[prec], td, &info) == NNCL_OK;
            rate[prec][r] = steps * (double)m[prec].batch / (bench_now() - t0);
            bench_progress("train %s d%d: %.0f samples/s (round %d/%d)", train_items[kind][prec], d, rate[prec][r], r + 1,
                           reps);
        }
    for (prec = 1; prec < 3; prec++) {
        const char *item = train_items[kind][prec];
        double peak;
        if (!ok) {
            snprintf(why, sizeof why, "n/a: %s", nncl_last_error(ctx));
            bench_put("training", d, item, "samples_s", bench_stat_na(), "samples/s", why);
            continue;
        }
        snprintf(why, sizeof why, "%d repeats of %d steps, in turn with fp32 and the other format, batch %d, %s",
                 reps, steps, m[prec].batch, m[prec].tokens ? "AdamW" : "Adam");
        bench_put("training", d, item, "samples_s", bench_stat_of(rate[prec], reps), "samples/s", why);
        if (m[prec].tokens)
            bench_put("training", d, item, "tokens_s", bench_stat_scale(bench_stat_of(rate[prec], reps), m[prec].tokens),
                      "tokens/s", "samples/s x the context (tokens per window)");
        for (r = 0; r < reps; r++) ratio[r] = rate[prec][r] / rate[0][r];
        bench_put("training", d, item, "vs_fp32", bench_stat_of(ratio, reps), "x",
                  "median of the per-round ratios to fp32 (rounds interleaved fp32, fp16, bf16)");
        peak = train_peak_mib(o, ctx, d, kind, (nncl_precision)prec, why, sizeof why);
        if (peak < 0) continue;
        bench_put_num("training", d, item, "peak_mib", peak, "MiB",
                      "nncl_device_memory peak after nncl_trainer_create on a fresh context");
        if (peak32 > 0)
            bench_put_num("training", d, item, "mem_vs_fp32", peak / peak32, "x", "peak / fp32's peak; CNN target <= 0.6");
    }
    for (prec = 0; prec < 3; prec++) {
        nncl_trainer_free(t[prec]);
        nncl_graph_free(m[prec].g);
    }
}

/* Fresh context with profiling on device ctx-device d: the plan's peak
 * memory against the model's need, then the host-overhead share and the
 * kernel-busy fraction of timed steps, and which kernels take the time;
 * in half storage (prec) the host-overhead share and the kernels alone.
 * 1 when the driver's profiling timestamps were found implausible. */
static int train_profile(const bench_opts *o, nncl_context *ctx, int d, int kind, const train_data *td,
                         nncl_precision prec) {
    const char *item = train_items[kind][prec];
    char sel[16], why[300], formula[160], mitem[32];
    nncl_config cfg = nncl_config_default();
    nncl_context *pc = NULL;
    nncl_train_config tc;
    nncl_trainer *t = NULL;
    train_model m;
    nncl_step_info info;
    nncl_profile_report rep;
    uint64_t in_use = 0, peak = 0;
    double need, wall, t0;
    int li = bench_list_index(ctx, d), i, steps, implausible = 0;
    snprintf(mitem, sizeof mitem, "%s training", item);
    memset(&m, 0, sizeof m);
    if (li < 0) return 0;
    snprintf(sel, sizeof sel, "%d", li);
    cfg.devices = sel;
    cfg.profiling = 1;
    bench_progress("train %s d%d: memory and host overhead on a fresh profiling context", item, d);
    if (nncl_init(&cfg, &pc) != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(NULL));
        bench_put("training", d, item, "host_overhead", bench_stat_na(), "", why);
        return 0;
    }
    if (train_build(pc, o, kind, &m) ||
        (tc = train_options(&m, m.batch, NULL, 0, prec), nncl_trainer_create(pc, m.g, m.loss, &tc, &t)) != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(pc));
        bench_put("training", d, item, "host_overhead", bench_stat_na(), "", why);
        nncl_graph_free(m.g);
        nncl_free(pc);
        return 0;
    }
    if (prec == NNCL_PRECISION_FP32) { /* train_precisions gives the half plans' memory */
        nncl_device_memory(pc, 0, &in_use, &peak);
        need = train_need_floats(kind, m.batch, formula, sizeof formula) * 4;
        bench_put_num("training", d, item, "peak_mib", peak / 1048576.0, "MiB",
                      "nncl_device_memory peak after nncl_trainer_create on a fresh context");
        if (need > 0) {
            bench_put_num("training", d, item, "need_mib", need / 1048576.0, "MiB", formula);
            bench_put_num("training", d, item, "mem_ratio", peak / need, "x", "peak / need; target <= 1.25");
        }
    }

    /* warm-up, then profiled steps */
    t0 = bench_now();
    for (i = 0; i < (o->quick ? 1 : 3); i++)
        if (train_step(o, t, &m, td, &info) != NNCL_OK) break;
    /* about a second of steps (quick: two), at least 2, at most 20 */
    steps = o->quick ? 2 : (int)ceil(1.0 / ((bench_now() - t0) / 3 + 1e-9));
    if (steps < 2) steps = 2;
    if (steps > 20) steps = 20;
    nncl_finish(pc, 0);
    nncl_profile_start(pc, 0);
    t0 = bench_now();
    for (i = 0; i < steps; i++)
        if (train_step(o, t, &m, td, &info) != NNCL_OK) break;
    nncl_finish(pc, 0);
    wall = bench_now() - t0;
    if (nncl_profile_stop(pc, 0, &rep) != NNCL_OK || i < steps) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(pc));
        bench_put("training", d, item, "host_overhead", bench_stat_na(), "", why);
    } else if (!rep.plausible || rep.kernel_seconds < 1e-6 * rep.launches) {
        /* the library's check, and the bench's own: no real kernel, let
         * alone a training step's average, runs in under a microsecond */
        snprintf(why, sizeof why,
                 "n/a: the driver's profiling timestamps are implausible (%d kernels, %.3f s kernel time in %.3f s "
                 "span, %.3f s wall)",
                 rep.launches, rep.kernel_seconds, rep.span_seconds, wall);
        bench_put("training", d, item, "host_overhead", bench_stat_na(), "", why);
        bench_put("monitor", d, mitem, "busy", bench_stat_na(), "", why);
        bench_put_num("monitor", d, mitem, "plausible", 0, "", "profiling timestamps rejected");
        implausible = 1;
    } else {
        snprintf(why, sizeof why, "1 - kernel time / step wall time over %d steps (%d kernels, %.1f ms kernel, %.1f ms wall)",
                 steps, rep.launches, rep.kernel_seconds * 1e3, wall * 1e3);
        bench_put_num("training", d, item, "host_overhead", 1 - rep.kernel_seconds / wall, "", why);
        bench_put_num("monitor", d, mitem, "busy", rep.kernel_seconds / wall, "",
                      "kernel time from profiling events / wall time while training on this device alone");
        bench_put_num("monitor", d, mitem, "plausible", 1, "", "profiling timestamps accepted");
        train_breakdown(d, item, pc, steps, rep.kernel_seconds);
    }
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    nncl_free(pc);
    return implausible;
}

void train_detail(const bench_opts *o, nncl_context *ctx, int d, int kind, const train_data *td, double fp32_rate) {
    int prec, batch = kind >= TRAIN_GPT ? train_gpt_batch(kind == TRAIN_GPT_LARGE) : o->batch;
    /* --quick trains the half formats only where an fp32 step is quick
     * (Mesa rusticl, which builds each kernel at each launch: 3 s per CNN
     * step, its fp16 and bf16 rows 40 s) */
    if (o->quick && fp32_rate > 0 && batch / fp32_rate > TRAIN_QUICK_STEP_S) {
        char why[120];
        snprintf(why, sizeof why, "n/a: --quick trains these where an fp32 step takes under %.0f s (%.1f here)",
                 TRAIN_QUICK_STEP_S, batch / fp32_rate);
        for (prec = 1; prec < 3; prec++)
            bench_put("training", d, train_items[kind][prec], "samples_s", bench_stat_na(), "samples/s", why);
        train_profile(o, ctx, d, kind, td, NNCL_PRECISION_FP32);
        return;
    }
    train_precisions(o, ctx, d, kind, td);
    /* where fp32's profiling timestamps were implausible (Mesa rusticl 22.3
     * makes them up), the half formats' would be too, and their fresh
     * contexts would be most of a quick run there */
    if (train_profile(o, ctx, d, kind, td, NNCL_PRECISION_FP32)) {
        for (prec = 1; prec < 3; prec++)
            bench_put("training", d, train_items[kind][prec], "host_overhead", bench_stat_na(), "",
                      "n/a: the driver's profiling timestamps are implausible (fp32's run)");
        return;
    }
    for (prec = NNCL_PRECISION_FP16; prec <= NNCL_PRECISION_BF16; prec++)
        train_profile(o, ctx, d, kind, td, (nncl_precision)prec);
}
#undef TRAIN_QUICK_STEP_S
