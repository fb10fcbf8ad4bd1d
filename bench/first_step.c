/* first_step.c - `bench --first-step MODEL`: what a new model's first
 * training step waits for, in this process from a fresh context: the
 * trainer's creation (plans, kernel builds, the measured choices of GEMM
 * kernels and convolution paths) and the first two steps. The library's
 * debug log splits the wait: program builds from source and loads from the
 * binary cache, GEMM choices and convolution path choices (each with the
 * seconds it took). Run it once with empty caches and again with the same
 * ones for the cold and the warm figure:
 *   d=$(mktemp -d); NNCL_CACHE_DIR=$d POCL_CACHE_DIR=$d bench --first-step vgg   (cold)
 *   NNCL_CACHE_DIR=$d POCL_CACHE_DIR=$d bench --first-step vgg                   (warm) */
#include "train.h"
#include <stdlib.h>
#include <string.h>

typedef struct first_log {
    int builds, loads, gemms, convs;
    double build_s, gemm_s, conv_s;
    int verbose;
} first_log;

static void first_log_fn(void *user, int level, const char *msg) {
    first_log *l = (first_log *)user;
    const char *p;
    if (l->verbose) fprintf(stderr, "[%d] %s\n", level, msg);
    if ((p = strstr(msg, " built in ")) != NULL) {
        l->builds++;
        l->build_s += atof(p + 10) / 1e3;
    } else if (strstr(msg, "kernel program loaded from")) {
        l->loads++;
    } else if ((p = strstr(msg, "chosen in ")) != NULL) {
        int conv = strstr(msg, "conv2d") != NULL;
        if (conv) l->convs++, l->conv_s += atof(p + 10);
        else l->gemms++, l->gemm_s += atof(p + 10);
    }
}

int bench_first_step(const bench_opts *o, const char *model) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_trainer *t = NULL;
    nncl_train_config tc;
    nncl_step_info info;
    train_model m;
    train_data td;
    first_log l;
    double t0, t_init, t_create, t_step1, t_step2;
    float loss1 = 0;
    int kind;
    nncl_status st;
    for (kind = 0; kind < TRAIN_MODELS; kind++)
        if (!strcmp(model, train_items[kind][0])) break;
    if (kind == TRAIN_MODELS) {
        fprintf(stderr, "bench: --first-step takes one of mlp, cnn, lstm, vgg, resnet, mobilenet, gpt, gpt_large\n");
        return 2;
    }
    memset(&l, 0, sizeof l);
    memset(&info, 0, sizeof info);
    l.verbose = getenv("BENCH_FIRST_LOG") != NULL;
    cfg.devices = o->devices ? o->devices : "0";
    cfg.log = first_log_fn;
    cfg.log_user = &l;
    cfg.log_level = NNCL_LOG_DEBUG;
    t0 = bench_now();
    if ((st = nncl_init(&cfg, &ctx)) != NNCL_OK) {
        fprintf(stderr, "bench: no devices (%s): %s\n", nncl_status_str(st), nncl_last_error(NULL));
        return 1;
    }
    t_init = bench_now() - t0;
    train_data_load(o, kind, &td);
    if (train_build(ctx, o, kind, &m)) {
        fprintf(stderr, "bench: %s does not build: %s\n", model, nncl_last_error(ctx));
        return 1;
    }
    tc = train_options(&m, m.batch, NULL, 0, NNCL_PRECISION_FP32);
    t0 = bench_now();
    st = nncl_trainer_create(ctx, m.g, m.loss, &tc, &t);
    t_create = bench_now() - t0;
    t0 = bench_now();
    if (st == NNCL_OK) st = train_step(o, t, &m, &td, &info);
    t_step1 = bench_now() - t0;
    loss1 = info.loss;
    t0 = bench_now();
    if (st == NNCL_OK) st = train_step(o, t, &m, &td, &info);
    t_step2 = bench_now() - t0;
    if (st != NNCL_OK) fprintf(stderr, "bench: %s: %s\n", model, nncl_last_error(ctx));
    else
        printf("first-step %s: init %.3f s, trainer %.3f s, step 1 %.3f s, step 2 %.3f s; first step (trainer + step "
               "1) %.3f s\n  program builds %d (%.3f s), cache loads %d, GEMM choices %d (%.3f s), conv choices %d "
               "(%.3f s)\n  losses of steps 1 and 2 %.9g %.9g\n",
               model, t_init, t_create, t_step1, t_step2, t_create + t_step1, l.builds, l.build_s, l.loads, l.gemms,
               l.gemm_s, l.convs, l.conv_s, loss1, info.loss);
    nncl_trainer_free(t);
    nncl_graph_free(m.g);
    train_data_free(&td);
    nncl_free(ctx);
    return st != NNCL_OK;
}
