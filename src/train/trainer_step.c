/* trainer_step.c - one training step (nncl_trainer_step): the feeds checked
 * before any device works, every device's forward and backward on its shard
 * at once (crew.c), the gradients and running statistics averaged on the
 * host weighted by shard size (and across MPI ranks), the same update on
 * every device; a step with a NaN or Inf is skipped and a failed device
 * leaves, its step redone on the others. */
#include "train/trainer.h"
#include "train/optim.h"
#include "train/pipeline.h"
#include <float.h>
#include <math.h>
#ifdef NNCL_HAVE_MPI
#include <mpi.h>
#endif

static int trainer_n_alive(const nncl_trainer *t) {
    int i, n = 0;
    for (i = 0; i < t->nd; i++) n += t->alive[i] != 0;
    return n;
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
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "%s: feed %d: node \"%.*s\" is not a node of the trainer's graph", fn, k,
                              NNCL_NAME_MAX - 1, n->name);
        if (n->op != NNCL_OP_INPUT || !n->batched)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "%s: feed %d: node \"%s\" is not an input (only inputs are fed)", fn, k, n->name);
        if (!feeds[k].data)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: input \"%s\": data is NULL", fn, n->name);
        for (j = 0; j < k; j++)
            if (feeds[j].node == n)
                return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: input \"%s\" is fed twice", fn, n->name);
    }
    for (k = 0; k < n_feeds; k++) NNCL_TRY(nncl__check_feed(t->ctx, g, feeds[k].node, feeds[k].data, batch));
    return NNCL_OK;
}

/* Checks every feed (nncl__trainer_check_feeds) and that the feeds cover
 * the graph's inputs, so a bad batch is refused before any device work. */
static nncl_status trainer_check_feeds(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch) {
    nncl_graph *g = t->graph;
    int i, k;
    NNCL_TRY(nncl__trainer_check_feeds(t, feeds, n_feeds, batch, "nncl_trainer_step"));
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        if (n->op != NNCL_OP_INPUT || n->n_consumers == 0) continue;
        for (k = 0; k < n_feeds; k++)
            if (feeds[k].node == n) break;
        if (k == n_feeds)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_step: input \"%s\" is not fed", n->name);
    }
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
    double t0 = nncl__seconds();
    t->waited[i] = 0;
    if (t->step == t->fail_step && (i == t->fail_device || t->fail_device == -2) && !t->fail_in_update)
        return nncl__fail(t->ctx, t->fail_status ? t->fail_status : NNCL_ERR_DEVICE, "injected failure on device %d",
                          t->device[i]);
    nncl__plan_set_step(p, offset, batch, g->seed * 0x9E3779B97F4A7C15ull + (uint64_t)t->tracked);
    NNCL_TRY(trainer_feed(t, i, feeds, n_feeds, offset));
    NNCL_TRY(nncl__plan_forward(p, t->shard[i], 1));
    if (t->watch && t->watch_dst) { /* before backward reuses its memory; the loss read below waits for it */
        float *dst = t->watch_dst + (size_t)offset * t->watch->sample_numel;
        NNCL_TRY(nncl__plan_read(p, t->watch, dst, t->shard[i], NULL));
    }
    NNCL_TRY(nncl__plan_backward(p));
    /* solo: no host average to see a NaN in, so the device sums the squares
     * (clipping reuses them) */
    if (solo && g->n_trainable) {
        NNCL_TRY(nncl__optim_sumsq(t->ctx, nncl__plan_device(p), nncl__plan_view(p, NNCL__PB_GRADS),
                                   nncl__plan_view(p, NNCL__PB_SCRATCH).mem, g->n_trainable));
        NNCL_TRY(nncl__plan_get(p, NNCL__PB_SCRATCH, NNCL_OPTIM_TOTAL, 1, &t->sumsq[i], 0));
    }
    NNCL_TRY(nncl__plan_read(p, t->loss, &t->lossv[i], 1, NULL)); /* waits: the step's one sync */
    t->busy[i] = nncl__seconds() - t0 - t->waited[i]; /* its own work, not its wait for others */
    if (solo) return NNCL_OK;
    if (nncl__plan_has_xfer(p)) /* the gradients are on their way already */
        NNCL_TRY(nncl__plan_xfer_wait(p));
    else
        NNCL_TRY(nncl__plan_get(p, NNCL__PB_GRADS, 0, g->n_trainable, t->gbuf[i], 0));
    NNCL_TRY(nncl__plan_get(p, NNCL__PB_STATE, 0, g->n_state, t->sbuf[i], 0));
    return nncl__plan_finish(p);
}

/* One chunk: a = w x (acc 0) or a += w x (acc 1); and the sum of squares
 * of a. Restrict and the fixed length let the compiler vectorise. */
static void trainer_axpy(float *NNCL_RESTRICT a, const float *NNCL_RESTRICT x, float w, int acc) {
    int k;
    if (acc)
        for (k = 0; k < NNCL__TRAINER_CHUNK; k++) a[k] += w * x[k];
    else
        for (k = 0; k < NNCL__TRAINER_CHUNK; k++) a[k] = w * x[k];
}
static double trainer_sumsq(const float *a) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* double: no square of a float overflows */
    int k, j;
    for (k = 0; k < NNCL__TRAINER_CHUNK; k += 8)
        for (j = 0; j < 8; j++) s[j] += (double)a[k + j] * a[k + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* avg = sum over devices with a shard of (b_i / B) buf_i, in device order,
 * a chunk at a time so that it stays in cache while every device's part is
 * added; returns nonzero when the result holds a NaN or Inf. Its sum of
 * squares, taken in the same pass, goes to *sumsq (NULL: not wanted); the
 * chunks' sums are added in order, so threads do not change it. The
 * buffers are whole chunks long (zeros past n, see nncl__trainer_chunks). */
static int trainer_average(nncl_trainer *t, float **bufs, float *avg, size_t n, int batch, double *sumsq) {
    const float *src[64];
    float w[64];
    long c, n_chunks = (long)((n + NNCL__TRAINER_CHUNK - 1) / NNCL__TRAINER_CHUNK);
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
        size_t lo = (size_t)c * NNCL__TRAINER_CHUNK;
        int j;
        trainer_axpy(avg + lo, src[0] + lo, w[0], 0);
        for (j = 1; j < m; j++) trainer_axpy(avg + lo, src[j] + lo, w[j], 1);
        t->chunk_ss[c] = trainer_sumsq(avg + lo);
    }
    for (c = 0; c < n_chunks; c++) ss += t->chunk_ss[c];
    if (sumsq) *sumsq = ss;
    return !isfinite(ss);
}

nncl_status nncl__trainer_exchange_time(nncl_trainer *t, int batch, double *sec) {
    nncl_graph *g = t->graph;
    int i;
    double t0 = nncl__seconds();
    trainer_average(t, t->gbuf, t->gavg, g->n_trainable, batch, NULL);
    if (g->n_state) trainer_average(t, t->sbuf, t->savg, g->n_state, batch, NULL);
    for (i = 0; i < t->nd && !(t->alive[i] && t->shard[i]); i++) {}
    if (i < t->nd) { /* the devices take theirs at once: one device's copy */
        NNCL_TRY(nncl__plan_put(t->plan[i], NNCL__PB_GRADS, 0, g->n_trainable, t->gavg, 1));
        NNCL_TRY(nncl__plan_put(t->plan[i], NNCL__PB_STATE, 0, g->n_state, t->savg, 1));
    }
    *sec = nncl__seconds() - t0;
    return NNCL_OK;
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
    for (k = 0; k < (long)nncl__trainer_chunks(g->n_trainable); k++)
        ss += trainer_sumsq(t->gavg + (size_t)k * NNCL__TRAINER_CHUNK);
    for (k = 0; k < t->nd; k++) t->sumsq[k] = (float)ss;
    return !isfinite(ss);
}
#endif

static nncl_status trainer_update(nncl_trainer *t, int i, int solo) {
    nncl__plan *p = t->plan[i];
    nncl_graph *g = t->graph;
    nncl__view h;
    if (t->step == t->fail_step && i == t->fail_device && t->fail_in_update)
        return nncl__fail(t->ctx, t->fail_status ? t->fail_status : NNCL_ERR_DEVICE,
                          "injected failure in the update on device %d", t->device[i]);
    /* Not waited for here: the host rewrites gavg, savg and sumsq only after
     * the next step's passes, which wait on every live device's queue (an
     * idle one in nncl__trainer_pass_job); nncl_trainer_free finishes the
     * queues before it frees them. */
    if (!solo) { /* the averaged gradient and running statistics */
        NNCL_TRY(nncl__plan_put(p, NNCL__PB_GRADS, 0, g->n_trainable, t->gavg, 0));
        NNCL_TRY(nncl__plan_put(p, NNCL__PB_STATE, 0, g->n_state, t->savg, 0));
    }
    if (!g->n_trainable) return NNCL_OK;
    if (!solo || t->scaling) /* the host's sum of squares, or the device's unscaled */
        NNCL_TRY(nncl__plan_put(p, NNCL__PB_SCRATCH, NNCL_OPTIM_TOTAL, 1, &t->sumsq[i], 0));
    /* in half storage the update also writes the weights' working copy
     * (the frozen parameters after the trainable ones keep theirs) */
    h.mem = p->ex.params_h;
    h.off = 0;
    return nncl__optim_update_store(t->ctx, nncl__plan_device(p), &t->cfg.optim, t->step + 1,
                                    nncl__plan_view(p, NNCL__PB_PARAMS), nncl__plan_view(p, NNCL__PB_GRADS),
                                    nncl__plan_view(p, NNCL__PB_OPT), nncl__plan_view(p, NNCL__PB_SCRATCH).mem,
                                    g->n_trainable, t->scaling ? (float)(1.0 / t->scale) : 1.0f, h, p->ex.store,
                                    g->n_decay);
}

static void trainer_lose(nncl_trainer *t, int i, nncl_step_info *info) {
    t->alive[i] = 0;
    nncl__log(t->ctx, NNCL_LOG_WARN, "device %d (%s) failed and left the training: %s", t->device[i],
              nncl__plan_device(t->plan[i])->info.name, nncl__trainer_dev_msg(t, i));
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
    nncl__plan *p = t->plan[i];
    if (!t->graph->n_state) return NNCL_OK;
    if (save) return nncl__plan_copy(p, NNCL__PB_STATE, NNCL__PB_SHADOW);
    NNCL_TRY(nncl__plan_copy(p, NNCL__PB_SHADOW, NNCL__PB_STATE));
    return nncl__plan_finish(p);
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

nncl_status nncl__trainer_pass_job(nncl_trainer *t, int i, void *arg) {
    const nncl__trainer_pass *job = (const nncl__trainer_pass *)arg;
    int k, off = 0;
    nncl_status st;
    if (job->mode == NNCL__PASS_CALIBRATE_EACH)
        return trainer_device_pass(t, i, job->feeds, job->n_feeds, 0, job->batch, 1);
    if (job->mode == NNCL__PASS_CALIBRATE_SPLIT)
        return t->shard[i] ? trainer_device_pass(t, i, job->feeds, job->n_feeds, 0, job->batch, job->solo) : NNCL_OK;
    if (!t->alive[i]) return NNCL_OK;
    if (job->snapshot) NNCL_TRY(trainer_shadow(t, i, 1));
    /* no shard this step: its queue may still be copying the last step's
     * gavg, savg and sumsq, which the host rewrites once the passes end
     * (a device with a shard waits on its queue as it reads its loss) */
    if (!t->shard[i]) return nncl__plan_finish(t->plan[i]);
    for (k = 0; k < i; k++) off += t->shard[k];
    st = trainer_device_pass(t, i, job->feeds, job->n_feeds, off, job->batch, job->solo);
    if (st != NNCL_OK) nncl__syncbn_abort(t); /* release the others waiting at a batch norm */
    return st;
}

/* GradScaler.update with growth factor 2 and backoff 0.5: an overflow
 * halves the scale and restarts the count of clean steps; the
 * growth_interval-th clean step in a row doubles it and restarts the count.
 * The scale stays in [NNCL_LOSS_SCALE_MIN, NNCL_LOSS_SCALE_MAX]: below, a
 * run of bad batches would take it to 0 and 1/scale to Inf. Every replica
 * decides from the same exchanged verdict, so the scale is the same
 * everywhere. */
static void trainer_scale_update(nncl_trainer *t, nncl_step_info *info, int overflow) {
    if (overflow) {
        float halved = t->scale * 0.5f < NNCL_LOSS_SCALE_MIN ? t->scale : t->scale * 0.5f;
        info->overflow = 1;
        nncl__log(t->ctx, NNCL_LOG_INFO, "step %lld skipped: Inf or NaN in the gradient at loss scale %g; now %g",
                  (long long)t->step, (double)t->scale, (double)halved);
        t->scale = halved;
        t->growth = 0;
    } else if (++t->growth == t->cfg.loss_scale_growth_interval) {
        if (t->scale * 2.0f <= NNCL_LOSS_SCALE_MAX) t->scale *= 2.0f;
        t->growth = 0;
    }
}

/* Whether the optimizer would see an Inf: the unscaled gradient's norm (from
 * the scaled one's sum of squares) is not a finite float. Checked after
 * unscaling, as GradScaler does: a finite scaled gradient can overflow once
 * divided by a small scale. */
static int trainer_unscaled_bad(const nncl_trainer *t, double sumsq) {
    double s = t->scaling ? sumsq / ((double)t->scale * t->scale) : sumsq;
    return !(sqrt(s) <= FLT_MAX);
}

static nncl_status trainer_update_job(nncl_trainer *t, int i, void *arg) {
    return t->alive[i] ? trainer_update(t, i, *(const int *)arg) : NNCL_OK;
}

static nncl_status step_run(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_step_info *info) {
    nncl_graph *g;
    double t0 = nncl__seconds(), tx;
    int i, bad, solo, caller;
    nncl_step_info local;
    nncl__trainer_pass job;
    if (!info) info = &local;
    memset(&job, 0, sizeof job);
    memset(info, 0, sizeof *info);
    info->failed_device = -1;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_step: trainer is NULL");
    g = t->graph;
    NNCL_TRY(trainer_check_feeds(t, feeds, n_feeds, batch));
    if (t->pipe) return nncl__pipe_step(t, feeds, n_feeds, batch, info);
    info->loss_scale = t->scaling ? t->scale : 1.0f;
    for (i = 0; i < t->nd; i++) t->plan[i]->dloss = info->loss_scale;
    job.snapshot = 1;
    for (;;) { /* until a pass succeeds on every device that is left */
        int failed = 0;
        if (trainer_n_alive(t) == 0) return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "no device of the trainer is left");
        nncl__trainer_split(t, batch);
        solo = trainer_n_alive(t) == 1 && trainer_ranks() == 1; /* nothing to exchange */
        nncl__overlap_enable(t, !solo);
        nncl__syncbn_enable(t, !solo);
        nncl__syncbn_begin(t);
        memset(t->peer_failed, 0, (size_t)t->nd * sizeof(int));
        job.feeds = feeds;
        job.n_feeds = n_feeds;
        job.batch = batch;
        job.solo = solo;
        nncl__trainer_each_device(t, nncl__trainer_pass_job, &job);
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
            if (t->alive[i] && t->shard[i] && g->n_trainable)
                bad |= !isfinite(t->sumsq[i]) || trainer_unscaled_bad(t, t->sumsq[i]);
    } else {
        double ss = 0;
        bad = trainer_average(t, t->gbuf, t->gavg, g->n_trainable, batch, &ss);
        bad |= trainer_unscaled_bad(t, ss);
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
    info->arrangement = info->n_devices > 1 ? NNCL_ARRANGE_DATA : NNCL_ARRANGE_ONE;
    if (trainer_n_alive(t) < t->nd - t->left_out)
        snprintf(info->arrangement_why, sizeof info->arrangement_why, "%d of %d devices failed; the others go on",
                 t->nd - t->left_out - trainer_n_alive(t), t->nd);
    else snprintf(info->arrangement_why, sizeof info->arrangement_why, "%s", t->why);
    info->exchange_seconds = solo ? 0 : nncl__seconds() - tx;
    if (t->cfg.rebalance_every > 0 && !t->fixed_shares && !solo && ++t->steps_since_balance >= t->cfg.rebalance_every) {
        nncl__trainer_rebalance(t);
        t->steps_since_balance = 0;
    }
    info->seconds = nncl__seconds() - t0;
    return NNCL_OK;
}

nncl_status nncl_trainer_step(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_step_info *info) {
    nncl_status st;
    NNCL__TRAINER_CALL(t, "nncl_trainer_step", st, step_run(t, feeds, n_feeds, batch, info));
    return st;
}
