/* pipeline.c - the pipeline section: a deep MLP (784, six hidden layers,
 * 10) on synthetic data trained by pipeline parallelism over the first 2
 * (and, with three or more devices, 3) devices with 8 micro-batches (quick:
 * 4), 1F1B, beside GPipe, an even cut (equal shares: the layers' arithmetic
 * split evenly, whatever the devices' speeds), the fastest of those devices
 * alone, data parallelism over the same devices and the arrangement the
 * trainer measures and keeps by itself: samples/s of each, every stage's
 * seconds of work and of waiting (the bubble's share), the seconds copied
 * at the cuts, and the cut the planner chose. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pipe_model {
    nncl_graph *g;
    nncl_node *x, *y, *loss;
} pipe_model;

static int pipe_build(nncl_context *ctx, int width, pipe_model *m) {
    int xs[1] = {784}, i;
    char name[16];
    nncl_node *h;
    m->g = nncl_graph_create(ctx, 5);
    m->x = nncl_input(m->g, "x", 1, xs);
    m->y = nncl_input(m->g, "y", 0, NULL);
    h = m->x;
    for (i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        h = nncl_linear(m->g, h, width, 1, NNCL_ACT_RELU, name);
    }
    h = nncl_linear(m->g, h, 10, 1, NNCL_ACT_NONE, "out");
    m->loss = nncl_softmax_cross_entropy(m->g, h, m->y);
    return m->loss == NULL;
}

typedef struct pipe_run {
    double samples_s;
    nncl_stage_info st[8];
    int n_st;
    double xfer;
    char why[128];             /* the last step's arrangement_why */
} pipe_run;

/* Trains on devs[0..n) (pipeline or not) for a few repeats; 0 when done. */
static int pipe_measure(const bench_opts *o, nncl_context *ctx, const int *devs, int n, int pipeline, int micro,
                        int sched, const float *shares, const float *x, const float *y, int batch, pipe_run *r,
                        char *why, size_t len) {
    pipe_model m;
    nncl_train_config tc = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    int i, rep, steps = o->quick ? 2 : 10, reps = o->repeats < 1 ? 1 : o->repeats > 16 ? 16 : o->repeats;
    double best = 0;
    memset(r, 0, sizeof *r);
    if (pipe_build(ctx, o->quick ? 128 : 512, &m)) {
        snprintf(why, len, "n/a: the model does not build: %s", nncl_last_error(ctx));
        nncl_graph_free(m.g);
        return 1;
    }
    tc.max_batch = batch;
    tc.devices = devs;
    tc.n_devices = n;
    tc.pipeline = pipeline;
    tc.micro_batches = micro;
    tc.pipe_schedule = sched;
    tc.shares = shares;
    f[0].node = m.x;
    f[0].data = x;
    f[1].node = m.y;
    f[1].data = y;
    if (nncl_trainer_create(ctx, m.g, m.loss, &tc, &t) != NNCL_OK ||
        nncl_trainer_step(t, f, 2, batch, &info) != NNCL_OK) {
        snprintf(why, len, "n/a: %s", nncl_last_error(ctx));
        nncl_trainer_free(t);
        nncl_graph_free(m.g);
        return 1;
    }
    for (rep = 0; rep < reps; rep++) {
        double t0 = bench_now(), rate;
        for (i = 0; i < steps; i++)
            if (nncl_trainer_step(t, f, 2, batch, &info) != NNCL_OK) {
                snprintf(why, len, "n/a: %s", nncl_last_error(ctx));
                nncl_trainer_free(t);
                nncl_graph_free(m.g);
                return 1;
            }
        rate = steps * (double)batch / (bench_now() - t0);
        if (rate > best) best = rate;
        bench_progress("pipeline: %d device%s %s: %.0f samples/s", n, n > 1 ? "s" : "",
                       pipeline > 0   ? "pipelined"
                       : pipeline < 0 ? "as measured at creation"
                       : n > 1        ? "data parallel"
                                      : "alone",
                       rate);
    }
    r->samples_s = best;
    snprintf(r->why, sizeof r->why, "%s", info.arrangement_why);
    r->n_st = nncl_trainer_stages(t, r->st, 8);
    r->xfer = info.exchange_seconds;
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    return 0;
}

static void pipe_row(const bench_opts *o, nncl_context *ctx, int k, const float *x, const float *y, int batch) {
    char item[48], why[300], key[40], cut[160];
    int devs[8], i, micro = o->quick ? 4 : 8, best_dev = 0;
    float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    pipe_run pr, dp, one, other;
    double alone = 0, idle = 0, all = 0;
    snprintf(item, sizeof item, "deep mlp, %d stages", k);
    for (i = 0; i < k; i++) devs[i] = i;
    if (pipe_measure(o, ctx, devs, k, 1, micro, NNCL_PIPE_1F1B, NULL, x, y, batch, &pr, why, sizeof why)) {
        bench_put("pipeline", -1, item, "samples_s", bench_stat_na(), "samples/s", why);
        return;
    }
    for (i = 0; i < k; i++) { /* the fastest of the devices alone */
        if (pipe_measure(o, ctx, &devs[i], 1, 0, 0, 0, NULL, x, y, batch, &one, why, sizeof why)) continue;
        if (one.samples_s > alone) alone = one.samples_s, best_dev = i;
    }
    bench_put_num("pipeline", -1, item, "stages", k, "", "one stage per device");
    bench_put_num("pipeline", -1, item, "micro_batches", micro, "", "1F1B");
    snprintf(why, sizeof why, "best of %d repeats, batch %d, Adam, synthetic data", o->repeats, batch);
    bench_put_num("pipeline", -1, item, "samples_s", pr.samples_s, "samples/s", why);
    if (alone > 0) {
        snprintf(why, sizeof why, "device %d, the fastest of the %d alone", best_dev, k);
        bench_put_num("pipeline", -1, item, "one_device_samples_s", alone, "samples/s", why);
        bench_put_num("pipeline", -1, item, "over_one_device", pr.samples_s / alone, "x", "");
    } else bench_put("pipeline", -1, item, "one_device_samples_s", bench_stat_na(), "samples/s", why);
    if (!pipe_measure(o, ctx, devs, k, 0, 0, 0, NULL, x, y, batch, &dp, why, sizeof why)) {
        bench_put_num("pipeline", -1, item, "dp_samples_s", dp.samples_s, "samples/s", dp.why);
        bench_put_num("pipeline", -1, item, "over_data_parallel", pr.samples_s / dp.samples_s, "x", "");
    } else bench_put("pipeline", -1, item, "dp_samples_s", bench_stat_na(), "samples/s", why);
    if (!pipe_measure(o, ctx, devs, k, 1, micro, NNCL_PIPE_GPIPE, NULL, x, y, batch, &other, why, sizeof why)) {
        bench_put_num("pipeline", -1, item, "gpipe_samples_s", other.samples_s, "samples/s", "GPipe, the same cut");
        bench_put_num("pipeline", -1, item, "over_gpipe", pr.samples_s / other.samples_s, "x", "1F1B over GPipe");
    } else bench_put("pipeline", -1, item, "gpipe_samples_s", bench_stat_na(), "samples/s", why);
    if (!pipe_measure(o, ctx, devs, k, 1, micro, NNCL_PIPE_1F1B, even, x, y, batch, &other, why, sizeof why)) {
        bench_put_num("pipeline", -1, item, "even_cut_samples_s", other.samples_s, "samples/s",
                      "equal shares: the arithmetic cut evenly");
        bench_put_num("pipeline", -1, item, "over_even_cut", pr.samples_s / other.samples_s, "x",
                      "the cut by measured speed over the even one");
    } else bench_put("pipeline", -1, item, "even_cut_samples_s", bench_stat_na(), "samples/s", why);
    /* what a user asking for every device gets: the arrangement measured at creation */
    if (!pipe_measure(o, ctx, devs, k, -1, micro, NNCL_PIPE_1F1B, NULL, x, y, batch, &other, why, sizeof why)) {
        bench_put_num("pipeline", -1, item, "measured_samples_s", other.samples_s, "samples/s", other.why);
        if (alone > 0)
            bench_put_num("pipeline", -1, item, "measured_over_one_device", other.samples_s / alone, "x",
                          "never below 1 is the aim");
    } else bench_put("pipeline", -1, item, "measured_samples_s", bench_stat_na(), "samples/s", why);
    cut[0] = 0;
    for (i = 0; i < pr.n_st && i < 8; i++) {
        size_t u = strlen(cut);
        snprintf(key, sizeof key, "stage%d_s", i);
        bench_put_num("pipeline", -1, item, key, pr.st[i].busy_seconds, "s", "its work in the last step");
        idle += pr.st[i].idle_seconds;
        all += pr.st[i].idle_seconds + pr.st[i].busy_seconds;
        snprintf(cut + u, sizeof cut - u, "%sd%d:%s-%s", i ? " " : "", pr.st[i].device, pr.st[i].first, pr.st[i].last);
    }
    bench_put_num("pipeline", -1, item, "bubble", all > 0 ? idle / all : 0, "",
                  "share of the stages' time spent waiting, last step");
    bench_put_num("pipeline", -1, item, "transfer_s", pr.xfer, "s", "copies at the cuts, all stages, last step");
    bench_put_text("pipeline", -1, item, "cut", cut);
}

void bench_pipeline(const bench_opts *o, nncl_context *ctx) {
    int nd = nncl_device_count(ctx), batch = o->batch, k;
    size_t i;
    float *x = (float *)malloc((size_t)batch * 784 * sizeof(float));
    float *y = (float *)malloc((size_t)batch * sizeof(float));
    unsigned s = 777u;
    if (!x || !y) {
        free(x), free(y);
        bench_put("pipeline", -1, "deep mlp, 2 stages", "samples_s", bench_stat_na(), "samples/s",
                  "n/a: out of memory");
        return;
    }
    for (i = 0; i < (size_t)batch * 784; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f;
    }
    for (i = 0; i < (size_t)batch; i++) y[i] = (float)(i * 3 % 10);
    if (nd < 2)
        bench_put("pipeline", -1, "deep mlp, 2 stages", "samples_s", bench_stat_na(), "samples/s",
                  "n/a: needs two devices (POCL_DEVICES=\"pthread pthread\")");
    for (k = 2; k <= nd && k <= 3; k++) pipe_row(o, ctx, k, x, y, batch);
    free(x);
    free(y);
}
