/* trainer.c - training one model on one device or several by data
 * parallelism: the global batch is split into shards sized by each device's
 * measured throughput (trainer_shard.c); every device runs forward and
 * backward on its shard at once (one host thread each, crew.c); the host
 * averages the gradients weighted by shard size (g = sum b_i/B g_i, fixed
 * device order, OpenMP over the buffer) and writes them back; every device
 * applies the same update (trainer_step.c). A device that fails leaves, and
 * its step is redone on the others. This file creates and frees a trainer,
 * one plan and optimizer state per device. */
#include "trainer.h"
#include <float.h>
#include "optim.h"

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

void nncl_trainer_free(nncl_trainer *t) {
    int i;
    if (!t) return;
    nncl__crew_stop(t);
    nncl__overlap_free(t);
    nncl__syncbn_free(t);
    for (i = 0; i < t->nd; i++) {
        nncl__plan *p = t->plan ? t->plan[i] : NULL;
        if (p) {
            nncl__buffer_release(p->x.dev, t->opt_state[i], t->opt_floats * 4);
            nncl__buffer_release(p->x.dev, t->scratch[i], nncl__optim_scratch_floats() * 4);
            if (t->state_shadow) nncl__buffer_release(p->x.dev, t->state_shadow[i], t->graph->n_state * 4);
        }
        nncl__plan_free(p);
        if (t->gbuf) NNCL_FREE(t->gbuf[i]);
        if (t->sbuf) NNCL_FREE(t->sbuf[i]);
    }
    NNCL_FREE(t->plan); NNCL_FREE(t->opt_state); NNCL_FREE(t->scratch);
    NNCL_FREE(t->device); NNCL_FREE(t->alive); NNCL_FREE(t->fixed); NNCL_FREE(t->per_sample); NNCL_FREE(t->shard);
    NNCL_FREE(t->gbuf); NNCL_FREE(t->sbuf); NNCL_FREE(t->gavg); NNCL_FREE(t->savg); NNCL_FREE(t->chunk_ss);
    NNCL_FREE(t->lossv); NNCL_FREE(t->busy); NNCL_FREE(t->waited); NNCL_FREE(t->dev_status); NNCL_FREE(t->peer_failed);
    NNCL_FREE(t->dev_msg); NNCL_FREE(t->sumsq); NNCL_FREE(t->state_shadow);
    NNCL_FREE(t);
}

nncl_status nncl__trainer_upload(nncl_trainer *t, const float *params, const float *state) {
    int i;
    nncl_graph *g = t->graph;
    for (i = 0; i < t->nd; i++) {
        nncl__plan *p = t->plan[i];
        cl_command_queue q = p->x.dev->queue;
        if (!t->alive[i]) continue;
        if (params && g->n_params)
            NNCL_CL(t->ctx, clEnqueueWriteBuffer(q, p->x.params, CL_TRUE, 0, g->n_params * 4, params, 0, NULL, NULL));
        if (state && g->n_state)
            NNCL_CL(t->ctx, clEnqueueWriteBuffer(q, p->x.state, CL_TRUE, 0, g->n_state * 4, state, 0, NULL, NULL));
        if (params) NNCL_TRY(nncl__plan_sync_params(p));
    }
    return NNCL_OK;
}

nncl_status nncl__trainer_download(nncl_trainer *t, float *params, float *state) {
    int i = nncl__trainer_first_alive(t);
    nncl_graph *g = t->graph;
    nncl__plan *p;
    if (i < 0) return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "no device of the trainer is left");
    p = t->plan[i];
    if (params && g->n_params)
        NNCL_CL(t->ctx, clEnqueueReadBuffer(p->x.dev->queue, p->x.params, CL_TRUE, 0, g->n_params * 4, params, 0, NULL,
                                            NULL));
    if (state && g->n_state)
        NNCL_CL(t->ctx, clEnqueueReadBuffer(p->x.dev->queue, p->x.state, CL_TRUE, 0, g->n_state * 4, state, 0, NULL,
                                            NULL));
    return NNCL_OK;
}

/* Zeroes a device buffer of n floats from a host array of zeros. */
static nncl_status trainer_zero(nncl_trainer *t, nncl_device *dev, cl_mem m, size_t n, const float *zeros, size_t nz) {
    size_t k;
    for (k = 0; k < n; k += nz) {
        size_t c = n - k < nz ? n - k : nz;
        NNCL_CL(t->ctx, clEnqueueWriteBuffer(dev->queue, m, CL_TRUE, k * 4, c * 4, zeros, 0, NULL, NULL));
    }
    return NNCL_OK;
}

static nncl_status trainer_alloc(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    size_t nd = (size_t)t->nd;
    int i;
    t->alive = (int *)nncl__calloc(nd, sizeof(int));
    t->plan = (nncl__plan **)nncl__calloc(nd, sizeof(nncl__plan *));
    t->opt_state = (cl_mem *)nncl__calloc(nd, sizeof(cl_mem));
    t->scratch = (cl_mem *)nncl__calloc(nd, sizeof(cl_mem));
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
    t->state_shadow = (cl_mem *)nncl__calloc(nd, sizeof(cl_mem));
    t->chunk_ss = (double *)nncl__calloc(
        nncl__trainer_chunks(g->n_trainable > g->n_state ? g->n_trainable : g->n_state), sizeof(double));
    t->gavg = (float *)nncl__calloc(nncl__trainer_chunks(g->n_trainable), NNCL__TRAINER_CHUNK * sizeof(float));
    t->savg = (float *)nncl__calloc(nncl__trainer_chunks(g->n_state), NNCL__TRAINER_CHUNK * sizeof(float));
    if (!t->alive || !t->plan || !t->opt_state || !t->scratch || !t->fixed || !t->per_sample || !t->shard || !t->gbuf ||
        !t->sbuf || !t->lossv || !t->busy || !t->waited || !t->dev_status || !t->peer_failed || !t->dev_msg ||
        !t->sumsq || !t->chunk_ss || !t->state_shadow || !t->gavg || !t->savg)
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

static nncl_status trainer_devices(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    float *init = NULL, *state = NULL;
    static const float zeros[4096] = {0};
    nncl_status st = NNCL_OK;
    int i;
    t->opt_floats = nncl__optim_state_floats(&t->cfg.optim) * g->n_trainable;
    if (t->opt_floats > (size_t)INT_MAX) /* kernels index with int */
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: %zu trainable parameters need %zu floats of optimizer state, more than "
                          "the 2^31-1 a kernel can address", g->n_trainable, t->opt_floats);
    for (i = 0; st == NNCL_OK && i < t->nd; i++) {
        nncl__plan *p;
        st = nncl__plan_create_store(t->ctx, g, t->loss, t->device[i], t->cfg.max_batch, (int)t->cfg.precision,
                                     &t->plan[i]);
        if (st != NNCL_OK) break;
        p = t->plan[i];
        st = nncl__buffer_create(t->ctx, p->x.dev, t->opt_floats * 4, &t->opt_state[i]);
        if (st == NNCL_OK) st = nncl__buffer_create(t->ctx, p->x.dev, nncl__optim_scratch_floats() * 4, &t->scratch[i]);
        if (st == NNCL_OK && g->n_state)
            st = nncl__buffer_create(t->ctx, p->x.dev, g->n_state * 4, &t->state_shadow[i]);
        if (st == NNCL_OK) st = trainer_zero(t, p->x.dev, t->opt_state[i], t->opt_floats, zeros, 4096);
        if (st == NNCL_OK) st = trainer_zero(t, p->x.dev, p->x.grads, g->n_trainable, zeros, 4096);
        if (st == NNCL_OK) st = nncl__optim_prepare(t->ctx, p->x.dev, &t->cfg.optim);
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
    if (!(cfg->loss_scale_init >= 0 && cfg->loss_scale_init <= FLT_MAX))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: loss_scale_init = %g must be finite and > 0 (0: 65536)",
                          (double)cfg->loss_scale_init);
    if (cfg->loss_scale_growth_interval < 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_create: loss_scale_growth_interval = %d must be >= 1 (0: 2000)",
                          cfg->loss_scale_growth_interval);
    if (loss->id >= g->n_nodes || g->nodes[loss->id] != loss) return NNCL_OK; /* the plan says so */
    return nncl__plan_check_store(ctx, g, loss, (int)cfg->precision);
}

nncl_status nncl_trainer_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
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
    NNCL_TRY(nncl__optim_check(ctx, &cfg->optim));
    NNCL_TRY(trainer_check_precision(ctx, g, loss, cfg));
    t = (nncl_trainer *)nncl__calloc(1, sizeof *t);
    if (!t) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    t->ctx = ctx;
    t->graph = g;
    t->loss = loss;
    t->cfg = *cfg;
    t->cfg.devices = NULL;
    t->cfg.shares = NULL; /* not kept: the caller's array */
    t->fixed_shares = cfg->shares != NULL;
    t->fail_device = t->fail_step = -1;
    t->scaling = cfg->loss_scaling > 0 || (cfg->loss_scaling == 0 && cfg->precision == NNCL_PRECISION_FP16);
    t->scale = cfg->loss_scale_init > 0 ? cfg->loss_scale_init : 65536.0f;
    if (t->cfg.loss_scale_growth_interval == 0) t->cfg.loss_scale_growth_interval = 2000;
    t->nd = cfg->devices ? cfg->n_devices : nncl_device_count(ctx);
    t->device = (int *)nncl__calloc((size_t)t->nd, sizeof(int));
    if (!t->device) {
        nncl_trainer_free(t);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    }
    for (i = 0; i < t->nd; i++) {
        t->device[i] = cfg->devices ? cfg->devices[i] : i;
        for (j = 0; j < i; j++)
            if (t->device[j] == t->device[i]) break;
        if (t->device[i] < 0 || t->device[i] >= nncl_device_count(ctx) || j < i) {
            nncl_trainer_free(t);
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: device %d is absent or given twice",
                              cfg->devices[i]);
        }
        if (cfg->shares && !(cfg->shares[i] > 0)) {
            nncl_trainer_free(t);
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: share %d must be > 0", i);
        }
    }
    st = nncl__graph_layout(g); /* sizes the flat buffers */
    if (st == NNCL_OK) st = trainer_alloc(t);
    if (st == NNCL_OK) st = nncl__crew_start(t);
    if (st == NNCL_OK && cfg->shares) /* fixed shares: cost inversely proportional */
        for (i = 0; i < t->nd; i++) t->per_sample[i] = 1.0 / cfg->shares[i];
    if (st == NNCL_OK) st = trainer_devices(t);
    if (st == NNCL_OK && cfg->overlap) st = nncl__overlap_setup(t);
    if (st == NNCL_OK) st = nncl__syncbn_setup(t);
    if (st != NNCL_OK) {
        nncl_trainer_free(t);
        return st;
    }
    nncl__trainer_split(t, t->cfg.max_batch);
    *out = t;
    return NNCL_OK;
}

int nncl_trainer_shards(const nncl_trainer *t, int *sizes, int max) {
    int i;
    if (!t) return 0;
    for (i = 0; i < t->nd && i < max && sizes; i++) sizes[i] = t->shard[i];
    return t->nd;
}

int64_t nncl_trainer_step_count(const nncl_trainer *t) { return t ? t->step : 0; }
