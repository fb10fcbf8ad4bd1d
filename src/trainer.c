/* trainer.c - training one model on one device or several by data
 * parallelism: the global batch is split into shards sized by each device's
 * measured throughput; every device runs forward and backward on its shard
 * at once (one host thread each, crew.c); the host averages the gradients weighted
 * by shard size (g = sum b_i/B g_i, fixed device order, OpenMP over the
 * buffer) and writes them back; every device applies the same update. A
 * device that fails leaves, and its step is redone on the others. */
#include "trainer.h"
#include "optim.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#ifdef NNCL_HAVE_MPI
#include <mpi.h>
#endif

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

static int trainer_n_alive(const nncl_trainer *t) {
    int i, n = 0;
    for (i = 0; i < t->nd; i++) n += t->alive[i] != 0;
    return n;
}

/* ------------------------------------------------------------- shards */

/* Seconds device i is expected to take for a shard of s samples. */
static double trainer_cost(const nncl_trainer *t, int i, double s) {
    return s > 0 ? t->fixed[i] + t->per_sample[i] * s : 0;
}

/* Whole samples adding up to batch that make the slowest device as quick as
 * possible under the cost model fixed + per_sample * shard: the continuous
 * optimum fills every device up to one finishing time T (a device whose
 * fixed cost alone exceeds T gets nothing), found by bisection; then the
 * remainder goes, sample by sample, where it finishes soonest. So a device
 * seven times slower gets about an eighth, and one whose launches cost more
 * than it can add gets none. */
static void trainer_split(nncl_trainer *t, int batch) {
    double lo = 0, hi = 0, T;
    int i, it, given = 0;
    for (i = 0; i < t->nd; i++)
        if (t->alive[i] && trainer_cost(t, i, batch) > hi) hi = trainer_cost(t, i, batch);
    for (it = 0; it < 60; it++) {
        double n = 0;
        T = (lo + hi) / 2;
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] && T > t->fixed[i]) n += (T - t->fixed[i]) / t->per_sample[i];
        if (n < batch) lo = T;
        else hi = T;
    }
    for (i = 0; i < t->nd; i++) {
        double s = t->alive[i] && lo > t->fixed[i] ? (lo - t->fixed[i]) / t->per_sample[i] : 0;
        t->shard[i] = (int)floor(s);
        given += t->shard[i];
    }
    while (given < batch) {
        int best = -1;
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] && (best < 0 || trainer_cost(t, i, t->shard[i] + 1) < trainer_cost(t, best, t->shard[best] + 1)))
                best = i;
        t->shard[best]++;
        given++;
    }
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

static nncl_status trainer_calibrate(nncl_trainer *t);

/* Host buffers of the exchange are allocated in whole chunks of
 * TRAINER_CHUNK floats (at least one float more than n), zeros past n. */
#define TRAINER_CHUNK 4096
static size_t trainer_chunks(size_t n) { return n / TRAINER_CHUNK + 1; }

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
    t->chunk_ss = (double *)nncl__calloc(trainer_chunks(g->n_trainable > g->n_state ? g->n_trainable : g->n_state),
                                         sizeof(double));
    t->gavg = (float *)nncl__calloc(trainer_chunks(g->n_trainable), TRAINER_CHUNK * sizeof(float));
    t->savg = (float *)nncl__calloc(trainer_chunks(g->n_state), TRAINER_CHUNK * sizeof(float));
    if (!t->alive || !t->plan || !t->opt_state || !t->scratch || !t->fixed || !t->per_sample || !t->shard || !t->gbuf || !t->sbuf ||
        !t->lossv || !t->busy || !t->waited || !t->dev_status || !t->peer_failed || !t->dev_msg ||
        !t->sumsq || !t->chunk_ss || !t->state_shadow || !t->gavg || !t->savg)
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_create: out of host memory");
    for (i = 0; i < t->nd; i++) {
        t->alive[i] = 1;
        t->per_sample[i] = 1; /* an even split until measured */
        t->gbuf[i] = (float *)nncl__calloc(trainer_chunks(g->n_trainable), TRAINER_CHUNK * sizeof(float));
        t->sbuf[i] = (float *)nncl__calloc(trainer_chunks(g->n_state), TRAINER_CHUNK * sizeof(float));
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
        st = nncl__plan_create(t->ctx, g, t->loss, t->device[i], t->cfg.max_batch, &t->plan[i]);
        if (st != NNCL_OK) break;
        p = t->plan[i];
        st = nncl__buffer_create(t->ctx, p->x.dev, t->opt_floats * 4, &t->opt_state[i]);
        if (st == NNCL_OK) st = nncl__buffer_create(t->ctx, p->x.dev, nncl__optim_scratch_floats() * 4, &t->scratch[i]);
        if (st == NNCL_OK && g->n_state) st = nncl__buffer_create(t->ctx, p->x.dev, g->n_state * 4, &t->state_shadow[i]);
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
    if (st == NNCL_OK && t->nd > 1 && !t->fixed_shares) st = trainer_calibrate(t);
    if (st == NNCL_OK && g->n_state) st = nncl__trainer_upload(t, NULL, state);
    NNCL_FREE(init);
    NNCL_FREE(state);
    return st;
}

/* The precision and loss-scaling fields, and that every op the training
 * runs has storage in the precision asked for. */
static nncl_status trainer_check_precision(nncl_context *ctx, nncl_graph *g, nncl_node *loss,
                                           const nncl_train_config *cfg) {
    static const char *const names[3] = {"fp32", "fp16", "bf16"};
    int i;
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
    if (cfg->precision == NNCL_PRECISION_FP32) return NNCL_OK;
    for (i = 0; i <= loss->id && i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM) continue;
        return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED,
                          "nncl_trainer_create: precision %s: op %s (node \"%s\") has no %s storage yet; train it in fp32",
                          names[cfg->precision], nncl__opdef_get(n->op)->name, n->name, names[cfg->precision]);
    }
    return NNCL_OK;
}

nncl_status nncl_trainer_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *cfg,
                                nncl_trainer **out) {
    nncl_trainer *t;
    nncl_status st;
    int i, j;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: out is NULL");
    *out = NULL;
    if (!ctx || !g || !loss || !cfg)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: context, graph, loss and config are needed");
    if (cfg->max_batch <= 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: max_batch %d must be > 0", cfg->max_batch);
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
    trainer_split(t, t->cfg.max_batch);
    *out = t;
    return NNCL_OK;
}

/* ------------------------------------------------------------- a step */

nncl_status nncl__trainer_check_feeds(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, const char *fn) {
    nncl_graph *g = t->graph;
    int k, j;
    if (batch <= 0 || batch > t->cfg.max_batch)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: batch %d is not in 1..%d (max_batch)", fn, batch,
                          t->cfg.max_batch);
    if (n_feeds < 0 || (n_feeds > 0 && !feeds))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: feeds are NULL or n_feeds %d < 0", fn, n_feeds);
    for (k = 0; k < n_feeds; k++) {
        const nncl_node *n = feeds[k].node;
        if (!n) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: feed %d names no node", fn, k);
        /* a node of another graph is never dereferenced beyond its id and name */
        if (n->id < 0 || n->id >= g->n_nodes || g->nodes[n->id] != n)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: feed %d: node \"%.*s\" is not a node of the trainer's graph",
                              fn, k, NNCL_NAME_MAX - 1, n->name);
        if (n->op != NNCL_OP_INPUT || !n->batched)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: feed %d: node \"%s\" is not an input (only inputs are fed)",
                              fn, k, n->name);
        if (!feeds[k].data)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: input \"%s\": data is NULL", fn, n->name);
        for (j = 0; j < k; j++)
            if (feeds[j].node == n)
                return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: input \"%s\" is fed twice", fn, n->name);
    }
    return NNCL_OK;
}

/* Checks every feed (nncl__trainer_check_feeds), that the feeds cover the
 * graph's inputs and that each op reading a feed accepts its data (class
 * labels in range: the ops' check_feed), so a bad batch is refused before
 * any device work. */
static nncl_status trainer_check_feeds(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch) {
    nncl_graph *g = t->graph;
    int i, k;
    NNCL_TRY(nncl__trainer_check_feeds(t, feeds, n_feeds, batch, "nncl_trainer_step"));
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        if (n->op != NNCL_OP_INPUT || n->n_consumers == 0) continue;
        for (k = 0; k < n_feeds; k++)
            if (feeds[k].node == n) break;
        if (k == n_feeds) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_step: input \"%s\" is not fed", n->name);
    }
    for (k = 0; k < n_feeds; k++) NNCL_TRY(nncl__check_feed(t->ctx, g, feeds[k].node, feeds[k].data, batch));
    return NNCL_OK;
}

static nncl_status trainer_feed(nncl_trainer *t, int i, const nncl_feed *feeds, int n_feeds, int offset) {
    int k;
    for (k = 0; k < n_feeds; k++) {
        const nncl_node *n = feeds[k].node;
        NNCL_TRY(nncl__plan_feed(t->plan[i], n, feeds[k].data + (size_t)offset * n->sample_numel, t->shard[i]));
    }
    return NNCL_OK;
}

/* Device i's part of a step: forward and backward on its shard, then the
 * read-back of its gradients, statistics and loss (several devices) or of
 * its loss alone (one). */
static nncl_status trainer_device_pass(nncl_trainer *t, int i, const nncl_feed *feeds, int n_feeds, int offset,
                                       int batch, int solo) {
    nncl__plan *p = t->plan[i];
    nncl_graph *g = t->graph;
    cl_command_queue q = p->x.dev->queue;
    double t0 = nncl__seconds();
    t->waited[i] = 0;
    if (t->step == t->fail_step && (i == t->fail_device || t->fail_device == -2) && !t->fail_in_update)
        return nncl__fail(t->ctx, t->fail_status ? t->fail_status : NNCL_ERR_DEVICE, "injected failure on device %d",
                          t->device[i]);
    p->x.batch_offset = offset;
    p->x.global_batch = batch;
    p->x.step_seed = g->seed * 0x9E3779B97F4A7C15ull + (uint64_t)t->tracked;
    NNCL_TRY(trainer_feed(t, i, feeds, n_feeds, offset));
    NNCL_TRY(nncl__plan_forward(p, t->shard[i], 1));
    if (t->watch && t->watch_dst) /* before backward reuses its memory; the loss read below waits for it */
        NNCL_TRY(nncl__plan_read(p, t->watch, t->watch_dst + (size_t)offset * t->watch->sample_numel, t->shard[i], NULL));
    NNCL_TRY(nncl__plan_backward(p));
    if (solo && g->n_trainable) { /* no host average to see a NaN in: the device sums the squares (clipping reuses them) */
        nncl__view gv;
        gv.mem = p->x.grads;
        gv.off = 0;
        NNCL_TRY(nncl__optim_sumsq(t->ctx, p->x.dev, gv, t->scratch[i], g->n_trainable));
        NNCL_CL(t->ctx, clEnqueueReadBuffer(q, t->scratch[i], CL_FALSE, NNCL_OPTIM_TOTAL * 4, 4, &t->sumsq[i], 0, NULL,
                                            NULL));
    }
    NNCL_TRY(nncl__plan_read(p, t->loss, &t->lossv[i], 1, NULL)); /* waits: the step's one sync */
    t->busy[i] = nncl__seconds() - t0 - t->waited[i]; /* its own work, not its wait for others */
    if (solo) return NNCL_OK;
    if (t->xfer && t->xfer[i]) /* the gradients are on their way already */
        NNCL_CL(t->ctx, clFinish(t->xfer[i]));
    else if (g->n_trainable)
        NNCL_CL(t->ctx, clEnqueueReadBuffer(q, p->x.grads, CL_FALSE, 0, g->n_trainable * 4, t->gbuf[i], 0, NULL, NULL));
    if (g->n_state)
        NNCL_CL(t->ctx, clEnqueueReadBuffer(q, p->x.state, CL_FALSE, 0, g->n_state * 4, t->sbuf[i], 0, NULL, NULL));
    NNCL_CL(t->ctx, clFinish(q));
    return NNCL_OK;
}

/* One chunk: a = w x (acc 0) or a += w x (acc 1); and the sum of squares
 * of a. Restrict and the fixed length let the compiler vectorise. */
static void trainer_axpy(float *NNCL_RESTRICT a, const float *NNCL_RESTRICT x, float w, int acc) {
    int k;
    if (acc)
        for (k = 0; k < TRAINER_CHUNK; k++) a[k] += w * x[k];
    else
        for (k = 0; k < TRAINER_CHUNK; k++) a[k] = w * x[k];
}
static double trainer_sumsq(const float *a) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* double: no square of a float overflows */
    int k, j;
    for (k = 0; k < TRAINER_CHUNK; k += 8)
        for (j = 0; j < 8; j++) s[j] += (double)a[k + j] * a[k + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* avg = sum over devices with a shard of (b_i / B) buf_i, in device order,
 * a chunk at a time so that it stays in cache while every device's part is
 * added; returns nonzero when the result holds a NaN or Inf. Its sum of
 * squares, taken in the same pass, goes to *sumsq (NULL: not wanted); the
 * chunks' sums are added in order, so threads do not change it. The
 * buffers are whole chunks long (zeros past n, see trainer_chunks). */
static int trainer_average(nncl_trainer *t, float **bufs, float *avg, size_t n, int batch, double *sumsq) {
    const float *src[64];
    float w[64];
    long c, n_chunks = (long)((n + TRAINER_CHUNK - 1) / TRAINER_CHUNK);
    int i, m = 0;
    double ss = 0;
    for (i = 0; i < t->nd && m < 64; i++)
        if (t->alive[i] && t->shard[i]) {
            w[m] = (float)((double)t->shard[i] / batch);
            src[m++] = bufs[i];
        }
/* Threads only for large buffers: below that one core is quicker, and idle
 * OpenMP threads spinning on the cores that CPU devices compute on would
 * cost more than they save. */
NNCL_OMP(omp parallel for schedule(static) if (n >= ((size_t)1 << 20)))
    for (c = 0; c < n_chunks; c++) {
        size_t lo = (size_t)c * TRAINER_CHUNK;
        int j;
        trainer_axpy(avg + lo, src[0] + lo, w[0], 0);
        for (j = 1; j < m; j++) trainer_axpy(avg + lo, src[j] + lo, w[j], 1);
        t->chunk_ss[c] = trainer_sumsq(avg + lo);
    }
    for (c = 0; c < n_chunks; c++) ss += t->chunk_ss[c];
    if (sumsq) *sumsq = ss;
    return !isfinite(ss);
}

/* Processes training together: the MPI ranks when MPI is in use, else 1. */
static int trainer_ranks(void) {
    int size = 1;
#ifdef NNCL_HAVE_MPI
    int init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_size(MPI_COMM_WORLD, &size);
#endif
    return size;
}

#ifdef NNCL_HAVE_MPI
/* Across ranks: every rank's average weighted by its batch; all ranks agree
 * on the total and on whether to skip. */
static int trainer_allreduce(nncl_trainer *t, int batch, int bad) {
    int init = 0, size = 1, any_bad = bad;
    long k;
    double local = batch, total = batch, ss;
    nncl_graph *g = t->graph;
    MPI_Initialized(&init);
    if (!init) return bad;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 1) return bad;
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) return 1;
    for (k = 0; k < (long)g->n_trainable; k++) t->gavg[k] *= (float)(local / total);
    MPI_Allreduce(MPI_IN_PLACE, t->gavg, (int)g->n_trainable, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (k = 0; k < (long)g->n_state; k++) t->savg[k] *= (float)(local / total);
    if (g->n_state) MPI_Allreduce(MPI_IN_PLACE, t->savg, (int)g->n_state, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    ss = 0; /* clipping needs the norm of the global gradient; the same on every rank */
    for (k = 0; k < (long)trainer_chunks(g->n_trainable); k++) ss += trainer_sumsq(t->gavg + (size_t)k * TRAINER_CHUNK);
    for (k = 0; k < t->nd; k++) t->sumsq[k] = (float)ss;
    return !isfinite(ss);
}
#endif

static nncl_status trainer_update(nncl_trainer *t, int i, int solo) {
    nncl__plan *p = t->plan[i];
    nncl_graph *g = t->graph;
    cl_command_queue q = p->x.dev->queue;
    nncl__view pv, gv, sv;
    if (t->step == t->fail_step && i == t->fail_device && t->fail_in_update)
        return nncl__fail(t->ctx, t->fail_status ? t->fail_status : NNCL_ERR_DEVICE,
                          "injected failure in the update on device %d", t->device[i]);
    if (!solo) { /* the averaged gradient and its sum of squares (for clipping) */
        if (g->n_trainable)
            NNCL_CL(t->ctx, clEnqueueWriteBuffer(q, p->x.grads, CL_FALSE, 0, g->n_trainable * 4, t->gavg, 0, NULL, NULL));
        if (g->n_state)
            NNCL_CL(t->ctx, clEnqueueWriteBuffer(q, p->x.state, CL_FALSE, 0, g->n_state * 4, t->savg, 0, NULL, NULL));
    }
    if (!g->n_trainable) return NNCL_OK;
    if (!solo || t->scaling) /* the host's sum of squares, or the device's unscaled */
        NNCL_CL(t->ctx, clEnqueueWriteBuffer(q, t->scratch[i], CL_FALSE, NNCL_OPTIM_TOTAL * 4, 4, &t->sumsq[i], 0, NULL,
                                             NULL));
    pv.mem = p->x.params; pv.off = 0;
    gv.mem = p->x.grads; gv.off = 0;
    sv.mem = t->opt_state[i]; sv.off = 0;
    return nncl__optim_update_scaled(t->ctx, p->x.dev, &t->cfg.optim, t->step + 1, pv, gv, sv, t->scratch[i],
                                     g->n_trainable, t->scaling ? (float)(1.0 / t->scale) : 1.0f);
}

static void trainer_lose(nncl_trainer *t, int i, nncl_step_info *info) {
    t->alive[i] = 0;
    nncl__log(t->ctx, NNCL_LOG_WARN, "device %d (%s) failed and left the training: %s", t->device[i],
              t->plan[i]->x.dev->info.name, nncl__trainer_dev_msg(t, i));
    if (info) info->failed_device = t->device[i];
}

int nncl__trainer_caller_error(const nncl_trainer *t) {
    int i;
    for (i = 0; i < t->nd; i++)
        if (t->dev_status[i] != NNCL_OK && !t->peer_failed[i] && !nncl__device_fault(t->dev_status[i])) return i;
    return -1;
}

/* Device i's running statistics into its shadow (save 1), or back (0):
 * taken before a step, put back when the step is skipped or abandoned, so
 * that only a step known good moves them. */
static nncl_status trainer_shadow(nncl_trainer *t, int i, int save) {
    cl_command_queue q = t->plan[i]->x.dev->queue;
    cl_mem state = t->plan[i]->x.state, shadow = t->state_shadow[i];
    size_t bytes = t->graph->n_state * 4;
    if (!bytes) return NNCL_OK;
    NNCL_CL(t->ctx, clEnqueueCopyBuffer(q, save ? state : shadow, save ? shadow : state, 0, 0, bytes, 0, NULL, NULL));
    if (!save) NNCL_CL(t->ctx, clFinish(q));
    return NNCL_OK;
}

/* Puts back every live device's running statistics; a device that cannot
 * leaves. */
static void trainer_restore(nncl_trainer *t, nncl_step_info *info) {
    int i;
    for (i = 0; i < t->nd; i++)
        if (t->alive[i] && trainer_shadow(t, i, 0) != NNCL_OK) {
            memcpy(nncl__trainer_dev_msg(t, i), nncl__thread_error(), NNCL_MSG_MAX);
            trainer_lose(t, i, info);
        }
}

/* Devices that computed a shard of this step and are still training. */
static int trainer_n_working(const nncl_trainer *t) {
    int i, n = 0;
    for (i = 0; i < t->nd; i++) n += t->alive[i] && t->shard[i] > 0;
    return n;
}

/* Scales each device's cost model towards what its last pass took: a
 * device slower than predicted gets less, and one whose fixed cost alone
 * outgrows the others' whole pass gets nothing. */
static void trainer_rebalance(nncl_trainer *t) {
    int i;
    for (i = 0; i < t->nd; i++) {
        double predicted, f;
        if (!t->alive[i] || !t->shard[i] || t->busy[i] <= 0) continue;
        predicted = trainer_cost(t, i, t->shard[i]);
        if (predicted <= 0) continue;
        f = 1 + 0.3 * (t->busy[i] / predicted - 1);
        t->fixed[i] *= f;
        t->per_sample[i] *= f;
    }
}

/* What the threads of a pass share. */
typedef struct trainer_pass {
    const nncl_feed *feeds;
    int n_feeds, batch, solo, calibrating;
    int snapshot; /* save the running statistics first (a step's first pass) */
} trainer_pass;

static nncl_status trainer_pass_job(nncl_trainer *t, int i, void *arg) {
    const trainer_pass *job = (const trainer_pass *)arg;
    int k, off = 0;
    nncl_status st;
    if (job->calibrating == 1) return trainer_device_pass(t, i, job->feeds, job->n_feeds, 0, job->batch, 1);
    if (job->calibrating == 2) /* a timed pass of the shards as split */
        return t->shard[i] ? trainer_device_pass(t, i, job->feeds, job->n_feeds, 0, job->batch, 1) : NNCL_OK;
    if (!t->alive[i]) return NNCL_OK;
    if (job->snapshot) NNCL_TRY(trainer_shadow(t, i, 1));
    if (!t->shard[i]) return NNCL_OK;
    for (k = 0; k < i; k++) off += t->shard[k];
    st = trainer_device_pass(t, i, job->feeds, job->n_feeds, off, job->batch, job->solo);
    if (st != NNCL_OK) nncl__syncbn_abort(t); /* release the others waiting at a batch norm */
    return st;
}

/* GradScaler.update with growth factor 2 and backoff 0.5: an overflow
 * halves the scale and restarts the count of clean steps; the
 * growth_interval-th clean step in a row doubles it (unless that would be
 * Inf) and restarts the count. Every replica decides from the same
 * exchanged verdict, so the scale is the same everywhere. */
static void trainer_scale_update(nncl_trainer *t, nncl_step_info *info, int overflow) {
    if (overflow) {
        info->overflow = 1;
        nncl__log(t->ctx, NNCL_LOG_INFO, "step %lld skipped: Inf or NaN in the gradient at loss scale %g; now %g",
                  (long long)t->step, (double)t->scale, (double)t->scale * 0.5);
        t->scale *= 0.5f;
        t->growth = 0;
    } else if (++t->growth == t->cfg.loss_scale_growth_interval) {
        float grown = t->scale * 2.0f;
        if (isfinite(grown)) t->scale = grown;
        t->growth = 0;
    }
}

static nncl_status trainer_update_job(nncl_trainer *t, int i, void *arg) {
    return t->alive[i] ? trainer_update(t, i, *(const int *)arg) : NNCL_OK;
}

nncl_status nncl_trainer_step(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_step_info *info) {
    nncl_graph *g;
    double t0 = nncl__seconds(), tx;
    int i, bad, solo, caller;
    nncl_step_info local;
    trainer_pass job;
    if (!info) info = &local;
    memset(&job, 0, sizeof job);
    memset(info, 0, sizeof *info);
    info->failed_device = -1;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_step: trainer is NULL");
    g = t->graph;
    NNCL_TRY(trainer_check_feeds(t, feeds, n_feeds, batch));
    info->loss_scale = t->scaling ? t->scale : 1.0f;
    for (i = 0; i < t->nd; i++) t->plan[i]->seed = info->loss_scale;
    job.snapshot = 1;
    for (;;) { /* until a pass succeeds on every device that is left */
        int failed = 0;
        if (trainer_n_alive(t) == 0) return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "no device of the trainer is left");
        trainer_split(t, batch);
        solo = trainer_n_alive(t) == 1 && trainer_ranks() == 1; /* nothing to exchange */
        nncl__overlap_enable(t, !solo);
        nncl__syncbn_enable(t, !solo);
        nncl__syncbn_begin(t);
        memset(t->peer_failed, 0, (size_t)t->nd * sizeof(int));
        job.feeds = feeds;
        job.n_feeds = n_feeds;
        job.batch = batch;
        job.solo = solo;
        nncl__trainer_each_device(t, trainer_pass_job, &job);
        if ((caller = nncl__trainer_caller_error(t)) >= 0) { /* the caller's error: every device stays */
            trainer_restore(t, info);
            nncl__set_error(t->ctx, nncl__trainer_dev_msg(t, caller));
            return t->dev_status[caller];
        }
        for (i = 0; i < t->nd; i++)
            if (t->dev_status[i] != NNCL_OK) {
                if (!t->peer_failed[i]) trainer_lose(t, i, info);
                failed = 1;
            }
        if (!failed) break;
        trainer_restore(t, info); /* the pass is redone from the statistics saved */
        job.snapshot = 0;
    }
    tx = nncl__seconds();
    info->loss = 0;
    for (i = 0; i < t->nd; i++)
        if (t->alive[i] && t->shard[i]) info->loss += (float)((double)t->shard[i] / batch * t->lossv[i]);
    if (solo) {
        bad = !isfinite(info->loss);
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] && t->shard[i] && g->n_trainable) bad |= !isfinite(t->sumsq[i]);
    } else {
        double ss = 0;
        bad = trainer_average(t, t->gbuf, t->gavg, g->n_trainable, batch, &ss);
        for (i = 0; i < t->nd; i++) t->sumsq[i] = (float)ss; /* what every device's clipping reads */
        if (g->n_state) bad |= trainer_average(t, t->sbuf, t->savg, g->n_state, batch, NULL);
        nncl__syncbn_running(t, t->savg, batch);
#ifdef NNCL_HAVE_MPI
        bad = trainer_allreduce(t, batch, bad);
#endif
    }
    info->n_devices = trainer_n_working(t);
    if (bad) { /* parameters, optimizer state, statistics and counts stay as they were */
        info->skipped = 1;
        trainer_restore(t, info);
        if (t->scaling) trainer_scale_update(t, info, 1);
        else
            nncl__log(t->ctx, NNCL_LOG_WARN, "step %lld skipped on every device: NaN or Inf in the gradient",
                      (long long)t->step);
    } else {
        if (t->scaling) /* clipping reads the norm of the unscaled gradient (exact: the scale is a power of two) */
            for (i = 0; i < t->nd; i++) t->sumsq[i] = (float)((double)t->sumsq[i] / ((double)t->scale * t->scale));
        nncl__trainer_each_device(t, trainer_update_job, &solo);
        if ((caller = nncl__trainer_caller_error(t)) >= 0) {
            nncl__set_error(t->ctx, nncl__trainer_dev_msg(t, caller));
            return t->dev_status[caller];
        }
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] && t->dev_status[i] != NNCL_OK) trainer_lose(t, i, info);
        if (trainer_n_alive(t) == 0) return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "no device of the trainer is left");
        t->step++;
        t->tracked++;
        if (t->scaling) trainer_scale_update(t, info, 0);
    }
    info->n_devices = trainer_n_working(t);
    info->exchange_seconds = solo ? 0 : nncl__seconds() - tx;
    if (t->cfg.rebalance_every > 0 && !t->fixed_shares && !solo && ++t->steps_since_balance >= t->cfg.rebalance_every) {
        trainer_rebalance(t);
        t->steps_since_balance = 0;
    }
    info->seconds = nncl__seconds() - t0;
    return NNCL_OK;
}

/* Runs the calibration job (every device at shard t->shard[i]) reps times
 * and keeps, per device, the least busy time in best (NULL: not kept), and
 * the least wall time of a whole pass in *wall (NULL: not kept). */
static nncl_status trainer_time_passes(nncl_trainer *t, trainer_pass *job, int reps, double *best, double *wall) {
    int r, i;
    for (r = 0; r < reps; r++) {
        double w = nncl__seconds();
        nncl__trainer_each_device(t, trainer_pass_job, job);
        w = nncl__seconds() - w;
        for (i = 0; i < t->nd; i++) {
            if (t->dev_status[i] != NNCL_OK) {
                nncl__set_error(t->ctx, nncl__trainer_dev_msg(t, i));
                return t->dev_status[i];
            }
            if (best && (r == 0 || t->busy[i] < best[i])) best[i] = t->busy[i];
        }
        if (wall && (r == 0 || w < *wall)) *wall = w;
    }
    return NNCL_OK;
}

static void trainer_set_shards(nncl_trainer *t, int s) {
    int i;
    for (i = 0; i < t->nd; i++) t->shard[i] = s;
}

/* Forward+backward passes on zeros, every device at once, timed at a small
 * and at the full shard give each device's fixed and per-sample cost. Each
 * size runs once untimed first (drivers compile kernels for the sizes they
 * first see), and every figure is the least of a few passes, so one
 * disturbed pass does not decide the split. The gradients are discarded
 * and the caller restores the running statistics. */
static nncl_status trainer_calibrate(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    int i, k, n_feeds = 0, reps = 1, full = t->cfg.max_batch, small = full / 4 > 0 ? full / 4 : 1;
    size_t most = 1;
    float *zeros;
    nncl_feed *feeds;
    nncl_status st;
    trainer_pass job;
    double busy_full[64], busy_small[64], first = 0;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            n_feeds++;
            if (g->nodes[i]->sample_numel > most) most = g->nodes[i]->sample_numel;
        }
    zeros = (float *)nncl__calloc(most * (size_t)full, sizeof(float));
    feeds = (nncl_feed *)nncl__calloc((size_t)n_feeds + 1, sizeof *feeds);
    if (!zeros || !feeds) {
        NNCL_FREE(zeros);
        NNCL_FREE(feeds);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (i = 0, k = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            feeds[k].node = g->nodes[i];
            feeds[k++].data = zeros;
        }
    memset(&job, 0, sizeof job);
    job.feeds = feeds;
    job.n_feeds = n_feeds;
    job.solo = 1;
    job.calibrating = 1;
    job.batch = full;
    trainer_set_shards(t, full);
    st = trainer_time_passes(t, &job, 2, NULL, &first); /* compiles, then a pass to size the repeats by */
    if (st == NNCL_OK && first < 0.05) reps = 3;        /* repeats where they are cheap */
    job.batch = small;
    trainer_set_shards(t, small);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, 1, NULL, NULL);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, reps, busy_small, NULL);
    job.batch = full;
    trainer_set_shards(t, full);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, reps, busy_full, NULL);
    for (i = 0; i < t->nd && i < 64 && st == NNCL_OK; i++) {
        double b = small < full ? (busy_full[i] - busy_small[i]) / (full - small) : 0;
        t->per_sample[i] = b > 1e-9 ? b : busy_full[i] / full + 1e-9;
        t->fixed[i] = busy_full[i] - t->per_sample[i] * full;
        if (t->fixed[i] < 0) t->fixed[i] = 0;
    }
    /* Devices that share a processor (CPU drivers) slow each other down,
     * which the model cannot see: time the planned split against the
     * fastest device alone, and keep only that one when it wins. */
    if (st == NNCL_OK) {
        int best = 0, used = 0, r;
        double together = 0, alone = 0;
        trainer_split(t, full);
        for (i = 0; i < t->nd; i++) {
            used += t->shard[i] > 0;
            if (trainer_cost(t, i, full) < trainer_cost(t, best, full)) best = i;
        }
        if (used > 1) { /* a split that uses one device: the others only cost an exchange */
            int split[64];
            for (i = 0; i < t->nd && i < 64; i++) split[i] = t->shard[i];
            job.calibrating = 2; /* the shards as split; untimed once for the new sizes */
            st = trainer_time_passes(t, &job, 1, NULL, NULL);
            for (r = 0; r < reps && st == NNCL_OK; r++) { /* interleaved, so a slow spell hits both */
                double w = 0;
                for (i = 0; i < t->nd && i < 64; i++) t->shard[i] = split[i];
                st = trainer_time_passes(t, &job, 1, NULL, &w);
                if (r == 0 || w < together) together = w;
                for (i = 0; i < t->nd; i++) t->shard[i] = i == best ? full : 0;
                if (st == NNCL_OK) st = trainer_time_passes(t, &job, 1, NULL, &w);
                if (r == 0 || w < alone) alone = w;
            }
        }
        for (i = 0; i < t->nd && st == NNCL_OK; i++)
            if (used > 1 && alone <= together && i != best) { /* it only slows the group: leave it out */
                t->alive[i] = 0;
                nncl__log(t->ctx, NNCL_LOG_INFO, "device %d (%s) left out: %s alone is faster (%.3g s vs %.3g s a pass)",
                          t->device[i], t->plan[i]->x.dev->info.name, t->plan[best]->x.dev->info.name, alone, together);
            }
    }
    NNCL_FREE(zeros);
    NNCL_FREE(feeds);
    return st;
}

int nncl_trainer_shards(const nncl_trainer *t, int *sizes, int max) {
    int i;
    if (!t) return 0;
    for (i = 0; i < t->nd && i < max && sizes; i++) sizes[i] = t->shard[i];
    return t->nd;
}

int64_t nncl_trainer_step_count(const nncl_trainer *t) { return t ? t->step : 0; }
