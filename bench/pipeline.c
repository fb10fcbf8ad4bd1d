/* pipeline.c - the pipeline section: a deep MLP (784, six hidden layers,
 * 10) on synthetic data trained by pipeline parallelism over the first 2
 * (and, with three or more devices, 3) devices with 8 micro-batches (quick:
 * 4), 1F1B, beside GPipe, an even cut (equal shares: the layers' arithmetic
 * split evenly, whatever the devices' speeds), each of those devices
 * alone, data parallelism over the same devices and the arrangement the
 * trainer measures and keeps by itself, every trainer open at once and
 * their timed rounds interleaved: samples/s of each, every stage's seconds
 * of work and of waiting (the bubble's share), the seconds copied at the
 * cuts, the forwards recomputed, and the cut the planner chose. */
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

/* One arrangement measured: its trainer, kept open so that the
 * arrangements' timed rounds interleave (a load that comes and goes then
 * falls on all of them alike). */
typedef struct pipe_run {
    pipe_model m;
    nncl_trainer *t;
    nncl_step_info info;
    double samples_s;          /* the best round */
    nncl_stage_info st[8];
    int n_st;
    char why[300];             /* the last step's arrangement_why, or why there is no figure */
} pipe_run;

/* A trainer on devs[0..n) (pipeline or not) after one untimed step; 0 when
 * it runs, else r->why says why not. */
static int pipe_open(const bench_opts *o, nncl_context *ctx, const int *devs, int n, int pipeline, int micro,
                     int sched, const float *shares, const float *x, const float *y, int batch, pipe_run *r) {
    nncl_train_config tc = nncl_train_default();
    nncl_feed f[2];
    memset(r, 0, sizeof *r);
    if (pipe_build(ctx, o->quick ? 128 : 512, &r->m)) {
        snprintf(r->why, sizeof r->why, "n/a: the model does not build: %s", nncl_last_error(ctx));
        return 1;
    }
    tc.max_batch = batch;
    tc.devices = devs;
    tc.n_devices = n;
    tc.pipeline = pipeline;
    tc.micro_batches = micro;
    tc.pipe_schedule = sched;
    tc.shares = shares;
    f[0].node = r->m.x;
    f[0].data = x;
    f[1].node = r->m.y;
    f[1].data = y;
    if (nncl_trainer_create(ctx, r->m.g, r->m.loss, &tc, &r->t) != NNCL_OK ||
        nncl_trainer_step(r->t, f, 2, batch, &r->info) != NNCL_OK) {
        snprintf(r->why, sizeof r->why, "n/a: %s", nncl_last_error(ctx));
        nncl_trainer_free(r->t);
        r->t = NULL;
        return 1;
    }
    return 0;
}

/* One timed round of steps; a failure closes the trainer, saying why. */
static void pipe_round(const bench_opts *o, nncl_context *ctx, const char *what, const float *x, const float *y,
                       int batch, pipe_run *r) {
    nncl_feed f[2];
    int i, steps = o->quick ? 2 : 10;
    double t0 = bench_now(), rate;
    if (!r->t) return;
    f[0].node = r->m.x;
    f[0].data = x;
    f[1].node = r->m.y;
    f[1].data = y;
    for (i = 0; i < steps; i++)
        if (nncl_trainer_step(r->t, f, 2, batch, &r->info) != NNCL_OK) {
            snprintf(r->why, sizeof r->why, "n/a: %s", nncl_last_error(ctx));
            nncl_trainer_free(r->t);
            r->t = NULL;
            r->samples_s = 0;
            return;
        }
    rate = steps * (double)batch / (bench_now() - t0);
    if (rate > r->samples_s) r->samples_s = rate;
    bench_progress("pipeline: %s: %.0f samples/s", what, rate);
}

static void pipe_close(pipe_run *r) {
    if (r->t) {
        snprintf(r->why, sizeof r->why, "%s", r->info.arrangement_why);
        r->n_st = nncl_trainer_stages(r->t, r->st, 8);
    }
    nncl_trainer_free(r->t);
    r->t = NULL;
    nncl_graph_free(r->m.g);
    r->m.g = NULL;
}

/* The arrangements of a row, in the order of their rounds. */
enum { PR_PIPE, PR_DP, PR_GPIPE, PR_EVEN, PR_MEASURED, PR_ONE, PR_N = PR_ONE + 8 };

static void pipe_row(const bench_opts *o, nncl_context *ctx, int k, const float *x, const float *y, int batch) {
    static const char *const what[PR_ONE] = {"pipelined (1F1B)", "data parallel", "pipelined (GPipe)",
                                             "pipelined, even cut", "as measured at creation"};
    char item[48], why[300], key[40], cut[160], label[64];
    int devs[8], i, rep, micro = o->quick ? 4 : 8, best_dev = 0, reps = o->repeats < 1 ? 1 : o->repeats > 16 ? 16 : o->repeats;
    float even[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    pipe_run *r = (pipe_run *)calloc(PR_N, sizeof(pipe_run));
    pipe_run *pr;
    double alone = 0, idle = 0, all = 0, xfer = 0;
    int recomputed = 0;
    snprintf(item, sizeof item, "deep mlp, %d stages", k);
    if (!r) {
        bench_put("pipeline", -1, item, "samples_s", bench_stat_na(), "samples/s", "n/a: out of memory");
        return;
    }
    pr = &r[PR_PIPE];
    for (i = 0; i < k; i++) devs[i] = i;
    pipe_open(o, ctx, devs, k, 1, micro, NNCL_PIPE_1F1B, NULL, x, y, batch, &r[PR_PIPE]);
    pipe_open(o, ctx, devs, k, 0, 0, 0, NULL, x, y, batch, &r[PR_DP]);
    pipe_open(o, ctx, devs, k, 1, micro, NNCL_PIPE_GPIPE, NULL, x, y, batch, &r[PR_GPIPE]);
    pipe_open(o, ctx, devs, k, 1, micro, NNCL_PIPE_1F1B, even, x, y, batch, &r[PR_EVEN]);
    /* what a user asking for every device gets: the arrangement measured at creation */
    pipe_open(o, ctx, devs, k, -1, micro, NNCL_PIPE_1F1B, NULL, x, y, batch, &r[PR_MEASURED]);
    for (i = 0; i < k; i++) pipe_open(o, ctx, &devs[i], 1, 0, 0, 0, NULL, x, y, batch, &r[PR_ONE + i]);
    for (rep = 0; rep < reps; rep++)
        for (i = 0; i < PR_ONE + k; i++) {
            if (i < PR_ONE) snprintf(label, sizeof label, "%d devices %s", k, what[i]);
            else snprintf(label, sizeof label, "device %d alone", i - PR_ONE);
            pipe_round(o, ctx, label, x, y, batch, &r[i]);
        }
    for (i = 0; i < PR_ONE + k; i++) pipe_close(&r[i]);
    if (pr->samples_s <= 0) {
        bench_put("pipeline", -1, item, "samples_s", bench_stat_na(), "samples/s", pr->why);
        free(r);
        return;
    }
    for (i = 0; i < k; i++) /* the fastest of the devices alone */
        if (r[PR_ONE + i].samples_s > alone) alone = r[PR_ONE + i].samples_s, best_dev = i;
    bench_put_num("pipeline", -1, item, "stages", k, "", "one stage per device");
    bench_put_num("pipeline", -1, item, "micro_batches", micro, "", "1F1B");
    snprintf(why, sizeof why, "best of %d rounds interleaved with the others', batch %d, Adam, synthetic data", reps,
             batch);
    bench_put_num("pipeline", -1, item, "samples_s", pr->samples_s, "samples/s", why);
    if (alone > 0) {
        snprintf(why, sizeof why, "device %d, the fastest of the %d alone", best_dev, k);
        bench_put_num("pipeline", -1, item, "one_device_samples_s", alone, "samples/s", why);
        bench_put_num("pipeline", -1, item, "over_one_device", pr->samples_s / alone, "x", "");
    } else bench_put("pipeline", -1, item, "one_device_samples_s", bench_stat_na(), "samples/s", r[PR_ONE].why);
    if (r[PR_DP].samples_s > 0) {
        bench_put_num("pipeline", -1, item, "dp_samples_s", r[PR_DP].samples_s, "samples/s", r[PR_DP].why);
        bench_put_num("pipeline", -1, item, "over_data_parallel", pr->samples_s / r[PR_DP].samples_s, "x", "");
    } else bench_put("pipeline", -1, item, "dp_samples_s", bench_stat_na(), "samples/s", r[PR_DP].why);
    if (r[PR_GPIPE].samples_s > 0) {
        bench_put_num("pipeline", -1, item, "gpipe_samples_s", r[PR_GPIPE].samples_s, "samples/s", "GPipe, the same cut");
        bench_put_num("pipeline", -1, item, "over_gpipe", pr->samples_s / r[PR_GPIPE].samples_s, "x", "1F1B over GPipe");
    } else bench_put("pipeline", -1, item, "gpipe_samples_s", bench_stat_na(), "samples/s", r[PR_GPIPE].why);
    if (r[PR_EVEN].samples_s > 0) {
        bench_put_num("pipeline", -1, item, "even_cut_samples_s", r[PR_EVEN].samples_s, "samples/s",
                      "equal shares: the arithmetic cut evenly");
        bench_put_num("pipeline", -1, item, "over_even_cut", pr->samples_s / r[PR_EVEN].samples_s, "x",
                      "the cut by measured speed over the even one");
    } else bench_put("pipeline", -1, item, "even_cut_samples_s", bench_stat_na(), "samples/s", r[PR_EVEN].why);
    if (r[PR_MEASURED].samples_s > 0) {
        bench_put_num("pipeline", -1, item, "measured_samples_s", r[PR_MEASURED].samples_s, "samples/s",
                      r[PR_MEASURED].why);
        if (alone > 0)
            bench_put_num("pipeline", -1, item, "measured_over_one_device", r[PR_MEASURED].samples_s / alone, "x",
                          "never below 1 is the aim");
    } else bench_put("pipeline", -1, item, "measured_samples_s", bench_stat_na(), "samples/s", r[PR_MEASURED].why);
    cut[0] = 0;
    for (i = 0; i < pr->n_st && i < 8; i++) {
        size_t u = strlen(cut);
        snprintf(key, sizeof key, "stage%d_s", i);
        bench_put_num("pipeline", -1, item, key, pr->st[i].busy_seconds, "s", "its work in the last step, copies included");
        snprintf(key, sizeof key, "stage%d_idle_s", i);
        bench_put_num("pipeline", -1, item, key, pr->st[i].idle_seconds, "s",
                      "waiting for the other stages in the last step");
        idle += pr->st[i].idle_seconds;
        all += pr->st[i].idle_seconds + pr->st[i].busy_seconds;
        xfer += pr->st[i].transfer_seconds;
        recomputed += pr->st[i].recomputed;
        snprintf(cut + u, sizeof cut - u, "%sd%d:%s-%s", i ? " " : "", pr->st[i].device, pr->st[i].first,
                 pr->st[i].last);
    }
    bench_put_num("pipeline", -1, item, "bubble", all > 0 ? idle / all : 0, "",
                  "share of the stages' time spent waiting, last step");
    bench_put_num("pipeline", -1, item, "transfer_s", xfer, "s", "copies at the cuts, all stages, last step");
    bench_put_num("pipeline", -1, item, "recomputed", recomputed, "",
                  "forwards run again in the last step (a stage short of activation arenas)");
    bench_put_text("pipeline", -1, item, "cut", cut);
    free(r);
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
