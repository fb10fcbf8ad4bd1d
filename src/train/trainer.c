/* trainer.c - training one model on one device or several by data
 * parallelism: the global batch is split into shards sized by each device's
 * measured throughput (trainer_shard.c); every device runs forward and
 * backward on its shard at once (one host thread each, crew.c); the host
 * averages the gradients weighted by shard size (g = sum b_i/B g_i, fixed
 * device order, OpenMP over the buffer) and writes them back; every device
 * applies the same update (trainer_step.c). A device that fails leaves, and
 * its step is redone on the others. This file creates and frees a trainer,
 * one plan and optimizer state per device. */
#include "train/trainer.h"
#include <float.h>
#include "train/optim.h"
#include "train/pipeline.h"

nncl_train_config nncl_train_default(void) {
    nncl_train_config c;
    memset(&c, 0, sizeof c);
    c.max_batch = 100;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    c.rebalance_every = 1;
    return c;
}

int nncl__trainer_first_alive(const nncl_trainer *t) {
    int i;
    for (i = 0; i < t->nd; i++)
        if (t->alive[i]) return i;
    return -1;
}

/* ------------------------------------------------------------- creation */

static void trainer_free(nncl_trainer *t) {
    int i;
    if (!t) return;
    nncl__crew_stop(t->crew);
    nncl__overlap_free(t);
    nncl__syncbn_free(t);
    for (i = 0; i < t->nd; i++) {
        if (t->plan) nncl__plan_free(t->plan[i]);
        if (t->gbuf) NNCL_FREE(t->gbuf[i]);
        if (t->sbuf) NNCL_FREE(t->sbuf[i]);
    }
    nncl__pipe_free(t); /* after the plans of its subgraphs */
    NNCL_FREE(t->plan);
    NNCL_FREE(t->device); NNCL_FREE(t->alive); NNCL_FREE(t->fixed); NNCL_FREE(t->per_sample); NNCL_FREE(t->shard);
    NNCL_FREE(t->gbuf); NNCL_FREE(t->sbuf); NNCL_FREE(t->gavg); NNCL_FREE(t->savg); NNCL_FREE(t->chunk_ss);
    NNCL_FREE(t->lossv); NNCL_FREE(t->busy); NNCL_FREE(t->waited); NNCL_FREE(t->dev_status); NNCL_FREE(t->peer_failed);
    NNCL_FREE(t->dev_msg); NNCL_FREE(t->sumsq);
    NNCL_FREE(t);
}

static nncl_status trainer_refuse(nncl_trainer *t, const char *fn) {
    return nncl__fail(t->ctx, NNCL_ERR_STATE, "%s: the trainer is being freed by another thread", fn);
}

nncl_status nncl__trainer_hold(nncl_trainer *t, const char *fn) {
    int closing;
    pthread_mutex_lock(&t->ctx->lock);
    closing = t->closing;
    if (!closing) t->users++;
    pthread_mutex_unlock(&t->ctx->lock);
    return closing ? trainer_refuse(t, fn) : NNCL_OK;
}

nncl_status nncl__trainer_still(nncl_trainer *t, const char *fn) {
    int closing;
    pthread_mutex_lock(&t->ctx->lock);
    closing = t->closing;
    pthread_mutex_unlock(&t->ctx->lock);
    return closing ? trainer_refuse(t, fn) : NNCL_OK;
}

void nncl__trainer_release(nncl_trainer *t) {
    pthread_mutex_lock(&t->ctx->lock);
    if (--t->users == 0 && t->closing) pthread_cond_broadcast(&t->ctx->idle);
    pthread_mutex_unlock(&t->ctx->lock);
}

/* Waits for the calls on t already begun (each then sees the free begun
 * once it has its turn, and stops), so that none of them is left with
 * freed memory. */
void nncl_trainer_free(nncl_trainer *t) {
    nncl_context *ctx = t ? t->ctx : NULL;
    if (!t) return;
    pthread_mutex_lock(&ctx->lock);
    t->closing = 1;
    while (t->users > 0) pthread_cond_wait(&ctx->idle, &ctx->lock);
    pthread_mutex_unlock(&ctx->lock);
    nncl__enter(ctx);
    trainer_free(t);
    nncl__leave(ctx);
}

nncl_status nncl__trainer_upload(nncl_trainer *t, const float *params, const float *state) {
    int i;
    nncl_graph *g = t->graph;
    if (t->pipe) return nncl__pipe_params(t, (float *)params, (float *)state, 1);
    for (i = 0; i < t->nd; i++) {
        if (!t->alive[i]) continue;
        if (params) NNCL_TRY(nncl__plan_put(t->plan[i], NNCL__PB_PARAMS, 0, g->n_params, params, 1));
        if (state) NNCL_TRY(nncl__plan_put(t->plan[i], NNCL__PB_STATE, 0, g->n_state, state, 1));
    }
    return NNCL_OK;
}

nncl_status nncl__trainer_download(nncl_trainer *t, float *params, float *state) {
    int i = nncl__trainer_first_alive(t);
    nncl_graph *g = t->graph;
    if (i < 0) return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "no device of the trainer is left");
    if (t->pipe) return nncl__pipe_params(t, params, state, 0);
    if (params) NNCL_TRY(nncl__plan_get(t->plan[i], NNCL__PB_PARAMS, 0, g->n_params, params, 1));
    if (state) NNCL_TRY(nncl__plan_get(t->plan[i], NNCL__PB_STATE, 0, g->n_state, state, 1));
    return NNCL_OK;
}

static nncl_status trainer_alloc(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    size_t nd = (size_t)t->nd;
    int i;
    t->alive = (int *)nncl__calloc(nd, sizeof(int));
    t->plan = (nncl__plan **)nncl__calloc(nd, sizeof(nncl__plan *));
    t->fixed = (double *)nncl__calloc(nd, sizeof(double));
    t->per_sample = (double *)nncl__calloc(nd, sizeof(double));
    t->shard = (int *)nncl__calloc(nd, sizeof(int));
    t->gbuf = (float **)nncl__calloc(nd, sizeof(float *));
    t->sbuf = (float **)nncl__calloc(nd, sizeof(float *));
    t->lossv = (float *)nncl__calloc(nd, sizeof(float));
    t->busy = (double *)nncl__calloc(nd, sizeof(double));
    t->waited = (double *)nncl__calloc(nd, sizeof(double));
    t->dev_status = (nncl_status *)nncl__calloc(nd, sizeof(nncl_status));
    t->peer_failed = (int *)nncl__calloc(nd, sizeof(int));
    t->dev_msg = (char *)nncl__calloc(nd, NNCL_MSG_MAX);
    t->sumsq = (float *)nncl__calloc(nd, sizeof(float));
    t->chunk_ss = (double *)nncl__calloc(
        nncl__trainer_chunks(g->n_trainable > g->n_state ? g->n_trainable : g->n_state), sizeof(double));
    t->gavg = (float *)nncl__calloc(nncl__trainer_chunks(g->n_trainable), NNCL__TRAINER_CHUNK * sizeof(float));
    t->savg = (float *)nncl__calloc(nncl__trainer_chunks(g->n_state), NNCL__TRAINER_CHUNK * sizeof(float));
    if (!t->alive || !t->plan || !t->fixed || !t->per_sample || !t->shard || !t->gbuf || !t->sbuf || !t->lossv ||
        !t->busy || !t->waited || !t->dev_status || !t->peer_failed || !t->dev_msg || !t->sumsq || !t->chunk_ss ||
        !t->gavg || !t->savg)
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    for (i = 0; i < t->nd; i++) {
        t->alive[i] = 1;
        t->per_sample[i] = 1; /* an even split until measured */
        t->gbuf[i] = (float *)nncl__calloc(nncl__trainer_chunks(g->n_trainable), NNCL__TRAINER_CHUNK * sizeof(float));
        t->sbuf[i] = (float *)nncl__calloc(nncl__trainer_chunks(g->n_state), NNCL__TRAINER_CHUNK * sizeof(float));
        if (!t->gbuf[i] || !t->sbuf[i])
            return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    }
    return NNCL_OK;
}

nncl_status nncl__trainer_plan_opts(nncl_graph *g, const nncl_train_config *cfg, nncl__plan_opts *o) {
    memset(o, 0, sizeof *o);
    NNCL_TRY(nncl__graph_layout(g)); /* sizes the optimizer state */
    o->max_batch = cfg->max_batch;
    o->store = (int)cfg->precision;
    o->checkpoint = (int)cfg->checkpoint;
    o->train_floats =
        nncl__optim_state_floats(&cfg->optim) * g->n_trainable + nncl__optim_scratch_floats() + g->n_state;
    return NNCL_OK;
}

static nncl_status trainer_devices(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    nncl__plan_opts o;
    float *init = NULL, *state = NULL;
    nncl_status st = NNCL_OK;
    int i;
    t->opt_floats = nncl__optim_state_floats(&t->cfg.optim) * g->n_trainable;
    if (t->opt_floats > (size_t)INT_MAX) /* kernels index with int: a limit of the library, as memory is */
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY,
                          "nncl_trainer_create: %zu trainable parameters need %zu floats of optimizer state, more than "
                          "the 2^31-1 a kernel can address", g->n_trainable, t->opt_floats);
    NNCL_TRY(nncl__trainer_plan_opts(t->graph, &t->cfg, &o));
    for (i = 0; st == NNCL_OK && i < t->nd; i++) {
        st = nncl__plan_create_opts(t->ctx, g, t->loss, t->device[i], &o, &t->plan[i]);
        if (st == NNCL_OK) st = nncl__plan_train(t->plan[i], t->opt_floats, nncl__optim_scratch_floats());
        if (st == NNCL_OK)
            st = nncl__optim_prepare_store(t->ctx, nncl__plan_device(t->plan[i]), &t->cfg.optim, t->plan[i]->ex.store);
    }
    if (st != NNCL_OK) return st;
    init = (float *)nncl__calloc(g->n_params + 1, sizeof(float));
    state = (float *)nncl__calloc(g->n_state + 1, sizeof(float));
    if (!init || !state) st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    if (st == NNCL_OK) {
        nncl__graph_init_values(g, init, state);
        st = nncl__trainer_upload(t, init, state);
    }
    /* Calibration runs batch norm in training mode: restore the statistics. */
    if (st == NNCL_OK && t->nd > 1 && !t->fixed_shares) st = nncl__trainer_calibrate(t);
    if (st == NNCL_OK && g->n_state) st = nncl__trainer_upload(t, NULL, state);
    NNCL_FREE(init);
    NNCL_FREE(state);
    return st;
}

/* The precision and loss-scaling fields, and that every op the training
 * runs has storage in the precision asked for. */
static nncl_status trainer_check_precision(nncl_context *ctx, nncl_graph *g, nncl_node *loss,
                                           const nncl_train_config *cfg) {
    if ((int)cfg->precision < (int)NNCL_PRECISION_FP32 || (int)cfg->precision > (int)NNCL_PRECISION_BF16)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: precision = %d is not NNCL_PRECISION_FP32, _FP16 or _BF16",
                          (int)cfg->precision);
    if (cfg->loss_scaling < -1 || cfg->loss_scaling > 1)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: loss_scaling = %d must be -1 (off), 0 (on with fp16) or 1 (on)",
                          cfg->loss_scaling);
    if (cfg->loss_scale_init != 0 &&
        !(cfg->loss_scale_init >= NNCL_LOSS_SCALE_MIN && cfg->loss_scale_init <= NNCL_LOSS_SCALE_MAX))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: loss_scale_init = %g must be in [2^-64, 2^64] (0: 65536)",
                          (double)cfg->loss_scale_init);
    if (cfg->loss_scale_growth_interval < 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: loss_scale_growth_interval = %d must be >= 1 (0: 2000)",
                          cfg->loss_scale_growth_interval);
    if (loss->id >= g->n_nodes || g->nodes[loss->id] != loss) return NNCL_OK; /* the plan says so */
    return nncl__plan_check_store(ctx, g, loss, (int)cfg->precision);
}

/* pipeline -1: the model does not fit a device whole, so the devices'
 * plans go and a pipeline over them is made instead, saying why. */
static nncl_status trainer_pipeline_instead(nncl_trainer *t) {
    char why[NNCL_MSG_MAX];
    int i;
    nncl_status st;
    snprintf(why, sizeof why, "%s", nncl__thread_error());
    for (i = 0; i < t->nd; i++) {
        nncl__plan_free(t->plan[i]);
        t->plan[i] = NULL;
    }
    st = nncl__pipe_create(t);
    if (st != NNCL_OK) return st;
    nncl__log(t->ctx, NNCL_LOG_INFO, "the model does not fit one device (%s): pipelined over %d devices", why, t->nd);
    return NNCL_OK;
}

/* pipeline -1, arrangement 0, a model that fits every device: the pipeline
 * is made beside the data-parallel plans, timed on passes of the full
 * batch as trainer_choose timed those, and kept when it is faster; else
 * (or when it cannot be made: memory, tied weights, too few layers) it goes
 * again and the data-parallel arrangement stays as it was measured. */
static nncl_status trainer_try_pipeline(nncl_trainer *t) {
    nncl__plan **dp = t->plan;
    int dev[64], alive[64], left_out = t->left_out, i;
    char why[sizeof t->why], b[2 * sizeof t->why];
    double sec = 0;
    nncl_status st;
    t->plan = (nncl__plan **)nncl__calloc((size_t)t->nd, sizeof(nncl__plan *));
    if (!t->plan) {
        t->plan = dp;
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    }
    memcpy(why, t->why, sizeof why);
    for (i = 0; i < t->nd; i++) {
        dev[i] = t->device[i];
        alive[i] = t->alive[i];
        t->alive[i] = 1;
    }
    t->left_out = 0;
    st = nncl__pipe_create(t);
    if (st == NNCL_OK) st = nncl__pipe_time(t, 2, &sec);
    if (st == NNCL_OK && sec < t->pass_seconds) {
        for (i = 0; i < t->nd; i++) nncl__plan_free(dp[i]);
        NNCL_FREE(dp);
        snprintf(b, sizeof b, "a pipeline of %d stages is fastest: %.3g s a pass of %d; %s", t->nd, sec,
                 t->cfg.max_batch, why);
        b[sizeof t->why - 1] = 0;
        memcpy(t->why, b, sizeof t->why);
        nncl__log(t->ctx, NNCL_LOG_INFO, "%s", t->why);
        return NNCL_OK;
    }
    if (st != NNCL_OK)
        nncl__log(t->ctx, NNCL_LOG_INFO, "no pipeline to measure against data parallelism: %s", nncl__thread_error());
    for (i = 0; i < t->nd; i++) nncl__plan_free(t->plan[i]);
    nncl__pipe_free(t); /* on the stages' devices: before their order goes back */
    for (i = 0; i < t->nd; i++) {
        t->device[i] = dev[i];
        t->alive[i] = alive[i];
    }
    NNCL_FREE(t->plan);
    t->plan = dp;
    t->left_out = left_out;
    memcpy(t->why, why, sizeof why);
    if (st == NNCL_OK) {
        size_t u = strlen(t->why);
        if (u + 20 < sizeof t->why) snprintf(t->why + u, sizeof t->why - u, " pipeline %.3g", sec);
    }
    return NNCL_OK;
}

static nncl_status trainer_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                                  nncl_trainer **out) {
    nncl_trainer *t;
    nncl_status st;
    int i, j;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: out is NULL");
    *out = NULL;
    if (!ctx || !g || !loss || !cfg)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: context, graph, loss and config are needed");
    if (cfg->max_batch <= 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: max_batch %d must be > 0",
                          cfg->max_batch);
    if (cfg->devices && cfg->n_devices <= 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: n_devices %d with a device list",
                          cfg->n_devices);
    if (cfg->pipeline < -1 || cfg->pipeline > 1)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: pipeline %d must be -1, 0 or 1",
                          cfg->pipeline);
    if (cfg->arrangement < 0 || cfg->arrangement > NNCL_ARRANGE_PIPELINE)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: arrangement %d must be 0 (measured), NNCL_ARRANGE_ONE, _DATA or "
                          "_PIPELINE", cfg->arrangement);
    if ((cfg->arrangement == NNCL_ARRANGE_ONE || cfg->arrangement == NNCL_ARRANGE_DATA) && cfg->pipeline > 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: arrangement %s contradicts pipeline 1",
                          cfg->arrangement == NNCL_ARRANGE_ONE ? "NNCL_ARRANGE_ONE" : "NNCL_ARRANGE_DATA");
    if (cfg->pipe_schedule != NNCL_PIPE_1F1B && cfg->pipe_schedule != NNCL_PIPE_GPIPE)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: pipe_schedule %d must be NNCL_PIPE_1F1B or NNCL_PIPE_GPIPE",
                          cfg->pipe_schedule);
    NNCL_TRY(nncl__optim_check(ctx, &cfg->optim));
    NNCL_TRY(trainer_check_precision(ctx, g, loss, cfg));
    t = (nncl_trainer *)nncl__calloc(1, sizeof *t);
    if (!t) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    t->ctx = ctx;
    t->graph = g;
    t->loss = loss;
    t->cfg = *cfg;
    t->cfg.devices = NULL;
    t->cfg.shares = NULL; /* not kept: the caller's arrays (cuts once the stages are made) */
    t->fixed_shares = cfg->shares != NULL;
    t->fail_device = t->fail_step = -1;
    t->scaling = cfg->loss_scaling > 0 || (cfg->loss_scaling == 0 && cfg->precision == NNCL_PRECISION_FP16);
    t->scale = cfg->loss_scale_init > 0 ? cfg->loss_scale_init : 65536.0f;
    if (t->cfg.loss_scale_growth_interval == 0) t->cfg.loss_scale_growth_interval = 2000;
    t->nd = cfg->devices ? cfg->n_devices : nncl_device_count(ctx);
    t->device = (int *)nncl__calloc((size_t)t->nd, sizeof(int));
    if (!t->device) {
        trainer_free(t);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    }
    for (i = 0; i < t->nd; i++) {
        t->device[i] = cfg->devices ? cfg->devices[i] : i;
        for (j = 0; j < i; j++)
            if (t->device[j] == t->device[i]) break;
        if (t->device[i] < 0 || t->device[i] >= nncl_device_count(ctx) || j < i) {
            trainer_free(t);
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: device %d is absent or given twice",
                              cfg->devices[i]);
        }
        if (cfg->shares && !(cfg->shares[i] > 0 && cfg->shares[i] <= FLT_MAX)) {
            trainer_free(t);
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_trainer_create: share %d is %g; shares must be finite and > 0", i,
                              (double)cfg->shares[i]);
        }
    }
    if (cfg->arrangement == NNCL_ARRANGE_PIPELINE) t->cfg.pipeline = 1;
    if (cfg->arrangement == NNCL_ARRANGE_ONE || cfg->arrangement == NNCL_ARRANGE_DATA) t->cfg.pipeline = 0;
    if (cfg->arrangement == NNCL_ARRANGE_ONE) t->nd = 1; /* the first listed */
    st = nncl__graph_layout(g); /* sizes the flat buffers */
    if (st == NNCL_OK) st = trainer_alloc(t);
    if (st == NNCL_OK && t->nd > 64)
        st = nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "a trainer takes at most 64 devices, got %d", t->nd);
    if (st == NNCL_OK) st = nncl__crew_start(ctx, t->nd, &t->crew);
    if (st == NNCL_OK && cfg->shares) /* fixed shares: cost inversely proportional */
        for (i = 0; i < t->nd; i++) t->per_sample[i] = 1.0 / cfg->shares[i];
    snprintf(t->why, sizeof t->why, "%s",
             cfg->arrangement == NNCL_ARRANGE_ONE ? "the first device listed alone, as asked for (the only one used)"
             : t->nd == 1                         ? "the only device asked for"
                                                  : "shares given");
    if (st == NNCL_OK) st = t->cfg.pipeline > 0 ? nncl__pipe_create(t) : trainer_devices(t);
    if (st == NNCL_ERR_OUT_OF_MEMORY && t->cfg.pipeline < 0 && t->nd > 1) st = trainer_pipeline_instead(t);
    else if (st == NNCL_OK && t->cfg.pipeline < 0 && t->nd > 1 && !cfg->arrangement && !t->fixed_shares &&
             cfg->precision == NNCL_PRECISION_FP32)
        st = trainer_try_pipeline(t);
    if (st == NNCL_OK && cfg->overlap && !t->pipe) st = nncl__overlap_setup(t);
    if (st == NNCL_OK && !t->pipe) st = nncl__syncbn_setup(t);
    if (st != NNCL_OK) {
        trainer_free(t);
        return st;
    }
    if (!t->pipe) nncl__trainer_split(t, t->cfg.max_batch);
    t->cfg.cuts = NULL;
    *out = t;
    return NNCL_OK;
}

nncl_status nncl_trainer_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                                nncl_trainer **out) {
    nncl_status st;
    NNCL_LOCKED(ctx, st, trainer_create(ctx, g, loss, cfg, out));
    return st;
}

/* ------------------------------------------------------------- the largest batch */

/* Whether a plan of batch fits every device of the list: 1 yes, 0 no (*worst
 * the device of least room to spare), or an error. */
static nncl_status fit_try(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                           const int *dev, int nd, int batch, nncl_batch_fit *worst, int *fits) {
    nncl__plan_opts o;
    uint64_t need = 0, act = 0;
    int i, seg = 1;
    nncl_train_config c = *cfg;
    c.max_batch = batch;
    NNCL_TRY(nncl__trainer_plan_opts(g, &c, &o));
    NNCL_TRY(nncl__plan_measure(ctx, g, loss, &o, &need, &act, &seg));
    *fits = 1;
    for (i = 0; i < nd; i++) {
        nncl_device *d = nncl__device(ctx, dev[i]);
        uint64_t limit = nncl__device_memory_limit(ctx, d);
        uint64_t have = (uint64_t)((double)limit * (1.0 - NNCL_FIT_MARGIN));
        have = have > d->mem_in_use ? have - d->mem_in_use : 0;
        if (i == 0 || have < worst->have_bytes) {
            worst->device = dev[i];
            worst->have_bytes = have;
        }
    }
    worst->need_bytes = need;
    worst->segments = seg;
    worst->activation_bytes = act;
    if (need > worst->have_bytes) *fits = 0;
    return NNCL_OK;
}

static nncl_status train_max_batch(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                                   int limit, nncl_batch_fit *out) {
    int all[64], nd, i, lo = 0, hi, fits = 0;
    const int *dev = cfg ? cfg->devices : NULL;
    nncl_batch_fit f;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_train_max_batch: out is NULL");
    memset(out, 0, sizeof *out);
    if (!ctx || !g || !loss || !cfg)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_train_max_batch: context, graph, loss and config are needed");
    if (!nncl__graph_owns(g, loss))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_train_max_batch: the loss is not a node of this graph");
    NNCL_TRY(nncl__optim_check(ctx, &cfg->optim));
    NNCL_TRY(trainer_check_precision(ctx, g, loss, cfg));
    nd = dev ? cfg->n_devices : nncl_device_count(ctx);
    if (nd <= 0 || nd > 64) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_train_max_batch: %d devices", nd);
    for (i = 0; !dev && i < nd; i++) all[i] = i;
    if (!dev) dev = all;
    for (i = 0; i < nd; i++)
        if (!nncl__device(ctx, dev[i])) return NNCL_ERR_INVALID_ARGUMENT;
    if (limit <= 0) limit = 65536;
    /* doubling, then halving the interval: plan memory grows with the batch */
    hi = 1;
    while (1) {
        NNCL_TRY(fit_try(ctx, g, loss, cfg, dev, nd, hi, &f, &fits));
        if (!fits) break;
        lo = hi;
        *out = f;
        out->batch = hi;
        if (hi == limit) return NNCL_OK;
        hi = hi > limit / 2 ? limit : hi * 2;
    }
    if (lo == 0) { /* not even one sample */
        *out = f;
        out->batch = 0;
        return NNCL_OK;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        NNCL_TRY(fit_try(ctx, g, loss, cfg, dev, nd, mid, &f, &fits));
        if (fits) {
            lo = mid;
            *out = f;
            out->batch = mid;
        } else {
            hi = mid;
        }
    }
    return NNCL_OK;
}

nncl_status nncl_train_max_batch(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                                 int limit, nncl_batch_fit *out) {
    nncl_status st;
    NNCL_LOCKED(ctx, st, train_max_batch(ctx, g, loss, cfg, limit, out));
    return st;
}

int nncl_trainer_shards(const nncl_trainer *t, int *sizes, int max) {
    int i;
    if (!t) return 0;
    nncl__enter(t->ctx); /* a step on another thread rebalances them */
    for (i = 0; i < t->nd && i < max && sizes; i++) sizes[i] = t->shard[i];
    nncl__leave(t->ctx);
    return t->nd;
}

int64_t nncl_trainer_step_count(const nncl_trainer *t) { return t ? t->step : 0; }

/* ------------------------------------------------------------- device threads */

typedef struct trainer_job {
    nncl_trainer *t;
    nncl__device_job job;
    void *arg;
} trainer_job;

static void trainer_job_run(void *arg, int i) {
    const trainer_job *j = (const trainer_job *)arg;
    nncl_trainer *t = j->t;
    nncl_status st = j->job(t, i, j->arg);
    if (st != NNCL_OK) /* this thread's own message, not whatever another wrote last */
        memcpy(nncl__trainer_dev_msg(t, i), nncl__thread_error(), NNCL_MSG_MAX);
    t->dev_status[i] = st;
}

void nncl__trainer_each_device(nncl_trainer *t, nncl__device_job job, void *arg) {
    trainer_job j;
    j.t = t;
    j.job = job;
    j.arg = arg;
    nncl__crew_run(t->crew, trainer_job_run, &j);
}
