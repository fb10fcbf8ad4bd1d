/* checkpoint.c - the checkpoint section: gradient checkpointing on the
 * bench CNN, a 16-layer MLP, the CIFAR-shaped ResNet (the training
 * section's, batch 64) and the GPT (the char_gpt example's), each
 * without and with automatic checkpointing (nncl_train_config.checkpoint),
 * on each device alone: the peak device memory of the training plan on a
 * fresh context, its activation memory (nncl_batch_fit.activation_bytes:
 * the activations live at once, as distinct from the whole plan's peak),
 * samples/s, and the largest batch nncl_train_max_batch finds under a
 * 256 MiB memory cap. One row per model and setting: {item, checkpoint
 * 0|1, peak_mib, activation_mib, samples_s, max_batch}, the checkpointed
 * rows with their ratios to the rows without. Peak, activations and the
 * largest batch are planned memory, the same under any load; samples/s
 * is a time. --quick leaves
 * the ResNet out: its steps take minutes on a device that compiles each
 * kernel at each launch (Mesa rusticl). */
#include "train.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CK_CNN, CK_MLP16, CK_RESNET, CK_GPT, CK_MODELS };
static const char *const ck_items[CK_MODELS][2] = {
    {"cnn", "cnn_checkpoint"}, {"mlp16", "mlp16_checkpoint"}, {"resnet", "resnet_checkpoint"}, {"gpt", "gpt_checkpoint"}};
#define CK_CAP (256ull << 20)
#define CK_WIDTH 256 /* the MLP's hidden layers */

static int ck_build(nncl_context *ctx, const bench_opts *o, int kind, train_model *m) {
    int shape[1] = {784}, i;
    nncl_node *h;
    char name[16];
    if (kind == CK_CNN) return train_build(ctx, o, TRAIN_CNN, m);
    if (kind == CK_RESNET) return train_build(ctx, o, TRAIN_RESNET, m);
    if (kind == CK_GPT) return train_gpt_build(ctx, 0, m);
    memset(m, 0, sizeof *m);
    m->batch = o->batch;
    m->optim = nncl_optim_default(NNCL_OPT_ADAM);
    if (!(m->g = nncl_graph_create(ctx, 1))) return 1;
    m->x = nncl_input(m->g, "x", 1, shape);
    m->y = nncl_input(m->g, "y", 0, NULL);
    for (h = m->x, i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        h = nncl_linear(m->g, h, CK_WIDTH, 1, NNCL_ACT_RELU, name);
    }
    m->logits = nncl_linear(m->g, h, 10, 1, NNCL_ACT_NONE, "out");
    m->loss = nncl_softmax_cross_entropy(m->g, m->logits, m->y);
    return m->loss == NULL;
}

/* Synthetic data of the model's shapes: 784 pixels (the ResNet's 3x32x32)
 * and a label per sample, or the GPT's token windows. */
static int ck_data(const bench_opts *o, int kind, int batch, train_data *td) {
    size_t i, xs = kind == CK_RESNET ? 3 * 32 * 32 : 784;
    unsigned s = 777u;
    if (kind == CK_GPT) return train_gpt_data(0, o->quick, td);
    memset(td, 0, sizeof *td);
    td->n = (size_t)batch * 2;
    td->xs = xs;
    td->ys = 1;
    td->x = (float *)malloc(td->n * xs * sizeof(float));
    td->y = (float *)malloc(td->n * sizeof(float));
    if (!td->x || !td->y) {
        free(td->x), free(td->y);
        memset(td, 0, sizeof *td);
        return 1;
    }
    for (i = 0; i < td->n * xs; i++) {
        s = s * 1664525u + 1013904223u;
        td->x[i] = (float)(s >> 8) / 16777216.0f;
    }
    for (i = 0; i < td->n; i++) td->y[i] = (float)(i * 3 % 10);
    return 0;
}

/* A context of device d alone (list index li), capped at cap bytes (0: none). */
static nncl_context *ck_context(int li, uint64_t cap) {
    char sel[16];
    nncl_config cfg = nncl_config_default();
    nncl_context *c = NULL;
    snprintf(sel, sizeof sel, "%d", li);
    cfg.devices = sel;
    cfg.memory_cap = cap;
    return nncl_init(&cfg, &c) == NNCL_OK ? c : NULL;
}

/* Peak memory, activation memory and samples/s of model kind with
 * checkpointing ck on a fresh context: 0, or 1 with why. */
static int ck_train(const bench_opts *o, int li, int kind, int ck, double *peak_mib, double *act_mib, bench_stat *rate,
                    char *why, size_t len) {
    nncl_context *c = ck_context(li, 0);
    train_model m;
    train_data td;
    nncl_train_config tc;
    nncl_trainer *t = NULL;
    nncl_step_info info;
    nncl_batch_fit f;
    uint64_t in_use = 0, peak = 0;
    double r[64], t0, one, min_s = o->quick ? o->seconds * 2 : o->seconds * 5;
    int i, k, reps = o->repeats > 64 ? 64 : o->repeats, steps, ok = 0;
    memset(&m, 0, sizeof m);
    memset(&td, 0, sizeof td);
    if (!c) {
        snprintf(why, len, "n/a: %s", nncl_last_error(NULL));
        return 1;
    }
    if (ck_build(c, o, kind, &m) || ck_data(o, kind, m.batch, &td)) {
        snprintf(why, len, "n/a: the model or its data does not build: %s", nncl_last_error(c));
        goto done;
    }
    tc = train_options(&m, m.batch, NULL, 0, NNCL_PRECISION_FP32);
    tc.checkpoint = ck ? NNCL_CHECKPOINT_AUTO : NNCL_CHECKPOINT_NONE;
    if (nncl_trainer_create(c, m.g, m.loss, &tc, &t) != NNCL_OK) {
        snprintf(why, len, "n/a: %s", nncl_last_error(c));
        goto done;
    }
    nncl_device_memory(c, 0, &in_use, &peak);
    *peak_mib = peak / 1048576.0;
    /* the trainer's plan again on the host, at its batch (limit), for its activations */
    if (nncl_train_max_batch(c, m.g, m.loss, &tc, m.batch, &f) != NNCL_OK || f.batch != m.batch) {
        snprintf(why, len, "n/a: the plan at batch %d does not measure: %s", m.batch, nncl_last_error(c));
        goto done;
    }
    *act_mib = f.activation_bytes / 1048576.0;
    for (i = 0; i < (o->quick ? 1 : 5); i++) /* warm-up */
        if (train_step(o, t, &m, &td, &info) != NNCL_OK) goto step_failed;
    t0 = bench_now();
    if (train_step(o, t, &m, &td, &info) != NNCL_OK) goto step_failed;
    one = bench_now() - t0;
    steps = (int)ceil(min_s / (one > 0 ? one : 1e-3));
    steps = steps < 1 ? 1 : steps > 500 ? 500 : steps;
    for (k = 0; k < reps; k++) {
        t0 = bench_now();
        for (i = 0; i < steps; i++)
            if (train_step(o, t, &m, &td, &info) != NNCL_OK) goto step_failed;
        r[k] = steps * (double)m.batch / (bench_now() - t0);
        bench_progress("checkpoint %s: %.0f samples/s (repeat %d/%d)", ck_items[kind][ck], r[k], k + 1, reps);
    }
    *rate = bench_stat_of(r, reps);
    snprintf(why, len, "%d repeats of %d steps, batch %d, fresh context, peak: nncl_device_memory after creation",
             reps, steps, m.batch);
    ok = 1;
    goto done;
step_failed:
    snprintf(why, len, "n/a: a step failed: %s", nncl_last_error(c));
done:
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    free(td.x);
    free(td.y);
    nncl_free(c);
    return !ok;
}

/* Whether the section measures model kind (see the file's header). */
static int ck_measured(const bench_opts *o, int kind) { return !(o->quick && kind == CK_RESNET); }

int bench_checkpoint_steps(const bench_opts *o, int n_devices) {
    int kind, n = 0;
    for (kind = 0; kind < CK_MODELS; kind++) n += ck_measured(o, kind);
    return n * 2 * n_devices;
}

void bench_checkpoint(const bench_opts *o, nncl_context *ctx) {
    int d, kind, ck;
    for (d = 0; d < nncl_device_count(ctx); d++) {
        int li = bench_list_index(ctx, d);
        nncl_context *capped = li >= 0 ? ck_context(li, CK_CAP) : NULL;
        for (kind = 0; kind < CK_MODELS; kind++) {
            double peak[2] = {0, 0}, act[2] = {0, 0};
            bench_stat rate[2];
            int maxb[2] = {0, 0}, good[2] = {0, 0};
            if (!ck_measured(o, kind)) continue;
            for (ck = 0; ck < 2; ck++) {
                const char *item = ck_items[kind][ck];
                char why[300];
                train_model m;
                nncl_batch_fit f;
                bench_progress("checkpoint %s d%d: plan, memory and steps", item, d);
                bench_put_num("checkpoint", d, item, "checkpoint", ck, "", ck ? "NNCL_CHECKPOINT_AUTO" : "none");
                good[ck] = li >= 0 && !ck_train(o, li, kind, ck, &peak[ck], &act[ck], &rate[ck], why, sizeof why);
                if (li < 0) snprintf(why, sizeof why, "n/a: device not found in the list");
                if (good[ck]) {
                    bench_put_num("checkpoint", d, item, "peak_mib", peak[ck], "MiB", why);
                    bench_put_num("checkpoint", d, item, "activation_mib", act[ck], "MiB",
                                  "nncl_batch_fit.activation_bytes of the plan at the batch above (planned on the host)");
                    bench_put("checkpoint", d, item, "samples_s", rate[ck], "samples/s", why);
                } else {
                    bench_put("checkpoint", d, item, "peak_mib", bench_stat_na(), "MiB", why);
                    bench_put("checkpoint", d, item, "activation_mib", bench_stat_na(), "MiB", why);
                    bench_put("checkpoint", d, item, "samples_s", bench_stat_na(), "samples/s", why);
                }
                memset(&m, 0, sizeof m);
                if (capped && !ck_build(capped, o, kind, &m)) {
                    nncl_train_config tc = train_options(&m, m.batch, NULL, 0, NNCL_PRECISION_FP32);
                    tc.checkpoint = ck ? NNCL_CHECKPOINT_AUTO : NNCL_CHECKPOINT_NONE;
                    if (nncl_train_max_batch(capped, m.g, m.loss, &tc, 1 << 20, &f) == NNCL_OK) maxb[ck] = f.batch;
                }
                if (maxb[ck] > 0)
                    bench_put_num("checkpoint", d, item, "max_batch", maxb[ck], "",
                                  "nncl_train_max_batch under a 256 MiB cap (fp32, planned on the host)");
                else
                    bench_put("checkpoint", d, item, "max_batch", bench_stat_na(), "",
                              capped ? "n/a: not even one sample fits 256 MiB" : "n/a: no capped context");
                nncl_graph_free(m.g);
                bench_progress_step();
            }
            if (good[0] && good[1]) {
                bench_put_num("checkpoint", d, ck_items[kind][1], "peak_vs_none", peak[1] / peak[0], "x",
                              "peak memory with checkpointing / without; target <= 0.6");
                bench_put_num("checkpoint", d, ck_items[kind][1], "activation_vs_none", act[1] / act[0], "x",
                              "activation memory with checkpointing / without; target <= 0.4");
                bench_put_num("checkpoint", d, ck_items[kind][1], "speed_vs_none",
                              rate[1].median / rate[0].median, "x",
                              "samples/s with / without (step time 1/x; target >= 1/1.35)");
            }
            if (maxb[0] > 0 && maxb[1] > 0)
                bench_put_num("checkpoint", d, ck_items[kind][1], "max_batch_vs_none", (double)maxb[1] / maxb[0], "x",
                              "largest batch under the cap with / without; target >= 2");
        }
        nncl_free(capped);
    }
}

#undef CK_CAP
#undef CK_WIDTH
