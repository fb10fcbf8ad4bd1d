/* pipeline_step.c - a step of a pipelined trainer: every stage on its
 * device's thread runs the forwards and backwards of the micro-batches in
 * the schedule's order (GPipe: every forward, then every backward from the
 * last; 1F1B: K-1-s forwards, then one backward and one forward in turn,
 * then the backwards left), handing the value at its cut to the next stage
 * through host staging slots (micro-batch m in slot m mod the cut's slots:
 * 1F1B needs K-s of them, since a stage's forward of m waits for its
 * backward of m-(K-s), which waited for the next stage's use of that
 * slot), taking the cut's gradient back the same way. A stage keeps each
 * micro-batch it holds in an activation arena of its own where memory
 * allows; one whose arena another micro-batch has taken since first
 * recomputes its forward (its running statistics kept as they were). The
 * copies at the cuts do not block: a stage enqueues its read into the
 * (pinned) slot and goes on computing; the stage that takes the slot waits
 * for that read's event. The slot is not refilled too soon, because each
 * handover (a flag and its read's event) completes only after everything
 * its stage's in-order queue held before it, the writes from the slots it
 * was given included. The gradients are summed in each stage's plan, a
 * micro-batch's weight (its share of the batch) in the loss's gradient it
 * starts from; the norm, the NaN/Inf verdict and the loss scale are decided
 * over all stages; each stage then steps its optimizer once. Also the
 * slots at the cuts, and the gathering and scattering of parameters and
 * optimizer state between the stages and the graph's layout. */
#include "train/pipeline.h"
#include "train/optim.h"
#include <float.h>
#include <math.h>

/* Waits for flag (under the pipe's lock) or an abort: NNCL_ERR_DEVICE
 * then, the other stage's failure (marked peer_failed). */
static nncl_status pipe_wait(nncl_trainer *t, int s, const unsigned char *flag) {
    nncl__pipe *pp = t->pipe;
    double t0 = nncl__seconds();
    int ab;
    pthread_mutex_lock(&pp->lock);
    while (!*flag && !pp->abort) pthread_cond_wait(&pp->cond, &pp->lock);
    ab = !*flag && pp->abort;
    pthread_mutex_unlock(&pp->lock);
    pp->st[s].idle += nncl__seconds() - t0;
    if (!ab) return NNCL_OK;
    t->peer_failed[s] = 1;
    return nncl__fail(t->ctx, NNCL_ERR_DEVICE, "stopped: another stage failed");
}

/* Waits for the read that filled a slot (*ev, then released): stage s
 * idles while the neighbour's queue computes up to that read and runs it. */
static nncl_status pipe_wait_read(nncl_trainer *t, int s, cl_event *ev) {
    double t0 = nncl__seconds();
    cl_int err, done = CL_COMPLETE;
    if (!*ev) return NNCL_OK;
    err = clWaitForEvents(1, ev);
    if (err == CL_SUCCESS)
        err = clGetEventInfo(*ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof done, &done, NULL);
    clReleaseEvent(*ev);
    *ev = NULL;
    t->pipe->st[s].idle += nncl__seconds() - t0;
    if (err == CL_SUCCESS && done < 0) err = done;
    NNCL_CL_CHECK(t->ctx, err, "clWaitForEvents (the copy at a pipeline cut)");
    return NNCL_OK;
}

void nncl__pipe_events_release(nncl__pipe *pp) {
    size_t i;
    for (i = 0; pp->act_ev && pp->grad_ev && i < (size_t)pp->k * (size_t)pp->m; i++) {
        if (pp->act_ev[i]) clReleaseEvent(pp->act_ev[i]);
        if (pp->grad_ev[i]) clReleaseEvent(pp->grad_ev[i]);
        pp->act_ev[i] = pp->grad_ev[i] = NULL;
    }
}

static void pipe_post(nncl__pipe *pp, unsigned char *flag, int abort) {
    pthread_mutex_lock(&pp->lock);
    if (flag) *flag = 1;
    if (abort) pp->abort = 1;
    pthread_cond_broadcast(&pp->cond);
    pthread_mutex_unlock(&pp->lock);
}

/* Micro-batch m's slot of cut c in bufs (pp->act or pp->grad). */
static float *pipe_slot(const nncl__pipe *pp, float **bufs, int c, int m) {
    return bufs[c] + (size_t)(m % pp->slots[c]) * nncl__numel(pp->st[c].out, pp->mb);
}

/* Feeds micro-batch m to stage s: the graph's inputs it reads, and the
 * previous stage's output. */
static nncl_status pipe_feed(nncl_trainer *t, int s, int m) {
    nncl__pipe *pp = t->pipe;
    nncl__stage *st = &pp->st[s];
    nncl__plan *p = t->plan[s];
    int i, k;
    nncl__plan_set_step(p, pp->off[m], pp->batch, t->graph->seed * 0x9E3779B97F4A7C15ull + (uint64_t)t->tracked);
    for (i = 0; i < st->n_inputs; i++) {
        const nncl_node *full = st->inputs[2 * i];
        for (k = 0; k < pp->n_feeds && pp->feeds[k].node != full; k++) {}
        if (k == pp->n_feeds) continue; /* unfed: refused before the step if anything reads it */
        NNCL_TRY(nncl__plan_feed(p, st->inputs[2 * i + 1], pp->feeds[k].data + (size_t)pp->off[m] * full->sample_numel,
                                 pp->len[m]));
    }
    if (st->in) NNCL_TRY(nncl__plan_feed(p, st->in, pipe_slot(pp, pp->act, s - 1, m), pp->len[m]));
    return NNCL_OK;
}

static nncl_status pipe_inject(nncl_trainer *t, int s, int backward) {
    if (t->step != t->fail_step || s != t->fail_device || t->fail_in_update || t->fail_in_backward != backward)
        return NNCL_OK;
    return nncl__fail(t->ctx, t->fail_status ? t->fail_status : NNCL_ERR_DEVICE,
                      "injected failure in the %s on device %d", backward ? "backward" : "forward", t->device[s]);
}

static nncl_status pipe_forward(nncl_trainer *t, int s, int m) {
    nncl__pipe *pp = t->pipe;
    nncl__stage *st = &pp->st[s];
    nncl__plan *p = t->plan[s];
    double t0;
    if (st->in) NNCL_TRY(pipe_wait(t, s, &pp->act_ready[(s - 1) * pp->m + m]));
    if (st->in) NNCL_TRY(pipe_wait_read(t, s, &pp->act_ev[(s - 1) * pp->m + m]));
    NNCL_TRY(pipe_inject(t, s, 0));
    nncl__plan_use_arena(p, m % st->n_arenas);
    st->holds[m % st->n_arenas] = m;
    NNCL_TRY(pipe_feed(t, s, m));
    NNCL_TRY(nncl__plan_forward(p, pp->len[m], 1));
    if (s + 1 == pp->k) { /* waited for by the stage's last read of the step, its queue being in order */
        cl_event ev;
        NNCL_TRY(nncl__plan_read(p, st->out, &pp->lossv[m], 1, &ev));
        if (ev) clReleaseEvent(ev);
        return NNCL_OK;
    }
    /* The forward under way first (a driver that runs commands in the
     * flushing thread runs it here), so that the time below is the copy's. */
    NNCL_CL(t->ctx, clFlush(nncl__plan_device(p)->queue));
    t0 = nncl__seconds();
    NNCL_TRY(nncl__plan_read(p, st->out, pipe_slot(pp, pp->act, s, m), pp->len[m], &pp->act_ev[s * pp->m + m]));
    NNCL_CL(t->ctx, clFlush(nncl__plan_device(p)->queue)); /* under way while the stage goes on */
    pipe_post(pp, &pp->act_ready[s * pp->m + m], 0);
    st->xfer += nncl__seconds() - t0;
    return NNCL_OK;
}

/* The forward of micro-batch m again, its running statistics put back. */
static nncl_status pipe_recompute(nncl_trainer *t, int s, int m) {
    nncl__plan *p = t->plan[s];
    nncl_graph *g = t->pipe->st[s].g;
    if (g->n_state) NNCL_TRY(nncl__plan_get(p, NNCL__PB_STATE, 0, g->n_state, t->pipe->st[s].saved, 1));
    NNCL_TRY(pipe_feed(t, s, m));
    NNCL_TRY(nncl__plan_forward(p, t->pipe->len[m], 1));
    if (g->n_state) NNCL_TRY(nncl__plan_put(p, NNCL__PB_STATE, 0, g->n_state, t->pipe->st[s].saved, 1));
    return NNCL_OK;
}

/* The backward of micro-batch m on stage s, its gradient added to the
 * plan's (the first, accumulate 0: put there); its forward again first
 * when its arena now holds another's. */
static nncl_status pipe_backward(nncl_trainer *t, int s, int m, int accumulate) {
    nncl__pipe *pp = t->pipe;
    nncl__stage *st = &pp->st[s];
    nncl__plan *p = t->plan[s];
    int a = m % st->n_arenas;
    double t0;
    if (s + 1 < pp->k) NNCL_TRY(pipe_wait(t, s, &pp->grad_ready[s * pp->m + m]));
    if (s + 1 < pp->k) NNCL_TRY(pipe_wait_read(t, s, &pp->grad_ev[s * pp->m + m]));
    NNCL_TRY(pipe_inject(t, s, 1));
    nncl__plan_use_arena(p, a);
    if (st->holds[a] != m) {
        NNCL_TRY(pipe_recompute(t, s, m));
        st->recomputed++;
    }
    st->holds[a] = m;
    p->accumulate = accumulate;
    if (s + 1 == pp->k) NNCL_TRY(nncl__plan_backward_scaled(p, &pp->dloss[m]));
    else NNCL_TRY(nncl__plan_backward_from(p, pipe_slot(pp, pp->grad, s, m), pp->len[m]));
    if (st->in) NNCL_CL(t->ctx, clFlush(nncl__plan_device(p)->queue)); /* as in pipe_forward */
    t0 = nncl__seconds();
    if (st->in && st->in->needs_grad) {
        nncl__view v = p->ex.grad[st->in->id];
        if (v.mem) { /* fp32: a pipeline's storage */
            NNCL_CL(t->ctx, clEnqueueReadBuffer(nncl__plan_device(p)->queue, v.mem, CL_FALSE, v.off * 4,
                                                nncl__numel(st->in, pp->len[m]) * 4, pipe_slot(pp, pp->grad, s - 1, m),
                                                0, NULL, &pp->grad_ev[(s - 1) * pp->m + m]));
            NNCL_CL(t->ctx, clFlush(nncl__plan_device(p)->queue));
        } else memset(pipe_slot(pp, pp->grad, s - 1, m), 0, nncl__numel(st->in, pp->len[m]) * 4);
    }
    /* The slot's writes to the device are done before the previous stage may refill it. */
    if (st->in && !(st->in->needs_grad && p->ex.grad[st->in->id].mem)) NNCL_TRY(nncl__plan_finish(p));
    if (st->in) pipe_post(pp, &pp->grad_ready[(s - 1) * pp->m + m], 0);
    st->xfer += nncl__seconds() - t0;
    return NNCL_OK;
}

/* Stage s's part of a step, ending with the sum of squares of its
 * accumulated gradient read back (the step's one wait for its queue). */
static nncl_status pipe_stage_run(nncl_trainer *t, int s) {
    nncl__pipe *pp = t->pipe;
    nncl__stage *st = &pp->st[s];
    nncl__plan *p = t->plan[s];
    int f = 0, b, m, P = pp->parts;
    int warm = t->cfg.pipe_schedule == NNCL_PIPE_GPIPE ? P : pp->k - 1 - s < P ? pp->k - 1 - s : P;
    for (m = 0; m < st->n_arenas; m++) st->holds[m] = -1;
    if (st->g->n_state) NNCL_TRY(nncl__plan_copy(p, NNCL__PB_STATE, NNCL__PB_SHADOW));
    for (; f < warm; f++) NNCL_TRY(pipe_forward(t, s, f));
    for (b = 0; b < P; b++) {
        if (f < P) NNCL_TRY(pipe_forward(t, s, f++));
        m = t->cfg.pipe_schedule == NNCL_PIPE_GPIPE ? P - 1 - b : b;
        NNCL_TRY(pipe_backward(t, s, m, b > 0));
    }
    st->sumsq_dev = 0;
    if (!st->g->n_trainable) return nncl__plan_finish(p);
    NNCL_TRY(nncl__optim_sumsq(t->ctx, nncl__plan_device(p), nncl__plan_view(p, NNCL__PB_GRADS),
                               nncl__plan_view(p, NNCL__PB_SCRATCH).mem, st->g->n_trainable));
    return nncl__plan_get(p, NNCL__PB_SCRATCH, NNCL_OPTIM_TOTAL, 1, &st->sumsq_dev, 1);
}

static nncl_status pipe_stage_job(nncl_trainer *t, int s, void *arg) {
    double t0 = nncl__seconds();
    nncl_status st;
    (void)arg;
    t->pipe->st[s].idle = t->pipe->st[s].xfer = 0;
    t->pipe->st[s].recomputed = 0;
    st = pipe_stage_run(t, s);
    if (st != NNCL_OK) pipe_post(t->pipe, NULL, 1); /* release the stages waiting for this one */
    t->pipe->st[s].busy = nncl__seconds() - t0 - t->pipe->st[s].idle;
    t->busy[s] = t->pipe->st[s].busy;
    t->waited[s] = t->pipe->st[s].idle;
    return st;
}

static nncl_status pipe_update_job(nncl_trainer *t, int s, void *arg) {
    nncl__plan *p = t->plan[s];
    nncl_graph *g = t->pipe->st[s].g;
    float *sumsq = (float *)arg;
    nncl__view none;
    if (!g->n_trainable) return NNCL_OK;
    none.mem = NULL;
    none.off = 0;
    NNCL_TRY(nncl__plan_put(p, NNCL__PB_SCRATCH, NNCL_OPTIM_TOTAL, 1, sumsq, 0));
    NNCL_TRY(nncl__optim_update_store(t->ctx, nncl__plan_device(p), &t->cfg.optim, t->step + 1,
                                      nncl__plan_view(p, NNCL__PB_PARAMS), nncl__plan_view(p, NNCL__PB_GRADS),
                                      nncl__plan_view(p, NNCL__PB_OPT), nncl__plan_view(p, NNCL__PB_SCRATCH).mem,
                                      g->n_trainable, t->scaling ? (float)(1.0 / t->scale) : 1.0f, none, 0,
                                      g->n_decay));
    return nncl__plan_finish(p);
}

/* Every stage's running statistics back to the step's start. */
static void pipe_restore(nncl_trainer *t) {
    int s;
    for (s = 0; s < t->pipe->k; s++)
        if (t->pipe->st[s].g->n_state && nncl__plan_copy(t->plan[s], NNCL__PB_SHADOW, NNCL__PB_STATE) == NNCL_OK)
            nncl__plan_finish(t->plan[s]);
}

/* The first failed stage (its own failure, not a wait released by
 * another's), or -1. */
static int pipe_failed(const nncl_trainer *t) {
    int s;
    for (s = 0; s < t->pipe->k; s++)
        if (t->dev_status[s] != NNCL_OK && !t->peer_failed[s]) return s;
    return -1;
}

static void pipe_scale(nncl_trainer *t, nncl_step_info *info, int overflow) {
    if (overflow) {
        info->overflow = 1;
        if (t->scale * 0.5f >= NNCL_LOSS_SCALE_MIN) t->scale *= 0.5f;
        t->growth = 0;
    } else if (++t->growth == t->cfg.loss_scale_growth_interval) {
        if (t->scale * 2.0f <= NNCL_LOSS_SCALE_MAX) t->scale *= 2.0f;
        t->growth = 0;
    }
}

/* The step's batch in micro-batches, every flag down: then every stage runs. */
static void pipe_run(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch) {
    nncl__pipe *pp = t->pipe;
    int m;
    pp->feeds = feeds;
    pp->n_feeds = n_feeds;
    pp->batch = batch;
    pp->parts = pp->m < batch ? pp->m : batch;
    for (m = 0; m < pp->parts; m++) {
        pp->len[m] = batch / pp->parts + (m < batch % pp->parts);
        pp->off[m] = m ? pp->off[m - 1] + pp->len[m - 1] : 0;
        pp->dloss[m] = t->plan[pp->k - 1]->dloss * (float)((double)pp->len[m] / batch);
    }
    memset(pp->act_ready, 0, (size_t)pp->k * (size_t)pp->m);
    memset(pp->grad_ready, 0, (size_t)pp->k * (size_t)pp->m);
    memset(t->peer_failed, 0, (size_t)t->nd * sizeof(int));
    pp->abort = 0;
    nncl__trainer_each_device(t, pipe_stage_job, NULL);
    nncl__pipe_events_release(pp); /* after a failure, reads no stage waited for */
}

nncl_status nncl__pipe_time(nncl_trainer *t, int reps, double *sec) {
    nncl_graph *g = t->graph;
    int i, k = 0, n_feeds = 0, r, f;
    size_t most = 1;
    float *zeros;
    nncl_feed *feeds;
    nncl_status st = NNCL_OK;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            n_feeds++;
            if (g->nodes[i]->sample_numel > most) most = g->nodes[i]->sample_numel;
        }
    zeros = (float *)nncl__calloc(most * (size_t)t->cfg.max_batch, sizeof(float));
    feeds = (nncl_feed *)nncl__calloc((size_t)n_feeds + 1, sizeof *feeds);
    if (!zeros || !feeds) st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; st == NNCL_OK && i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            feeds[k].node = g->nodes[i];
            feeds[k++].data = zeros;
        }
    t->plan[t->pipe->k - 1]->dloss = 1;
    for (r = 0; st == NNCL_OK && r <= reps; r++) { /* the first untimed */
        double w = nncl__seconds();
        pipe_run(t, feeds, n_feeds, t->cfg.max_batch);
        w = nncl__seconds() - w;
        pipe_restore(t);
        if ((f = pipe_failed(t)) >= 0) st = nncl__fail(t->ctx, t->dev_status[f], "%s", nncl__trainer_dev_msg(t, f));
        else if (r == 1 || (r > 1 && w < *sec)) *sec = w;
    }
    NNCL_FREE(zeros);
    NNCL_FREE(feeds);
    return st;
}

nncl_status nncl__pipe_step(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_step_info *info) {
    nncl__pipe *pp = t->pipe;
    double t0 = nncl__seconds(), ss = 0;
    int s, m, bad, f;
    float sumsq;
    for (s = 0; s < pp->k; s++)
        if (!t->alive[s])
            return nncl__fail(t->ctx, NNCL_ERR_STATE, "nncl_trainer_step: the stage on device %d failed; create the "
                              "trainer again from the last checkpoint", t->device[s]);
    info->loss_scale = t->scaling ? t->scale : 1.0f;
    info->arrangement = NNCL_ARRANGE_PIPELINE;
    snprintf(info->arrangement_why, sizeof info->arrangement_why, "%s", t->why);
    t->plan[pp->k - 1]->dloss = info->loss_scale;
    pipe_run(t, feeds, n_feeds, batch);
    if ((f = pipe_failed(t)) >= 0) { /* nothing stepped: the statistics go back and the trainer is as it was */
        pipe_restore(t);
        if (nncl__device_fault(t->dev_status[f])) t->alive[f] = 0;
        return nncl__fail(t->ctx, t->dev_status[f],
                          "nncl_trainer_step: the pipeline stage on device %d (%s) failed: %s", t->device[f],
                          nncl__plan_device(t->plan[f])->info.name, nncl__trainer_dev_msg(t, f));
    }
    info->loss = 0;
    for (m = 0; m < pp->parts; m++) info->loss += (float)((double)pp->len[m] / batch * pp->lossv[m]);
    bad = !isfinite(info->loss);
    for (s = 0; s < pp->k; s++) ss += pp->st[s].sumsq_dev; /* in stage order: the same sum every time */
    if (t->scaling) ss /= (double)t->scale * t->scale;
    bad |= !(sqrt(ss) <= FLT_MAX);
    info->n_devices = pp->k;
    if (bad) {
        info->skipped = 1;
        pipe_restore(t);
        if (t->scaling) pipe_scale(t, info, 1);
        nncl__log(t->ctx, NNCL_LOG_WARN, "step %lld skipped on every stage: NaN or Inf in the gradient",
                  (long long)t->step);
    } else {
        sumsq = (float)ss;
        nncl__trainer_each_device(t, pipe_update_job, &sumsq);
        for (s = 0; s < pp->k; s++)
            if (t->dev_status[s] != NNCL_OK) {
                if (nncl__device_fault(t->dev_status[s])) t->alive[s] = 0;
                return nncl__fail(t->ctx, t->dev_status[s], "nncl_trainer_step: the update on device %d failed: %s",
                                  t->device[s], nncl__trainer_dev_msg(t, s));
            }
        t->step++;
        t->tracked++;
        if (t->scaling) pipe_scale(t, info, 0);
    }
    for (s = 0; s < pp->k; s++) info->exchange_seconds += pp->st[s].xfer;
    info->seconds = nncl__seconds() - t0;
    return NNCL_OK;
}

/* ------------------------------------------------------------- the slots at the cuts */

/* bytes of host memory pinned for device d's transfers (a buffer it
 * allocates in host memory, mapped once), so that its reads and writes of
 * the slots need no staging copy of the driver's. */
static nncl_status pipe_pin(nncl_trainer *t, int d, size_t bytes, cl_mem *mem, float **ptr) {
    nncl_device *dev = nncl__device(t->ctx, t->device[d]);
    cl_int err;
    *mem = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
    NNCL_CL_CHECK(t->ctx, err, "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)");
    *ptr = (float *)clEnqueueMapBuffer(dev->queue, *mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL,
                                       &err);
    if (err != CL_SUCCESS) {
        clReleaseMemObject(*mem);
        *mem = NULL;
        *ptr = NULL;
    }
    NNCL_CL_CHECK(t->ctx, err, "clEnqueueMapBuffer");
    memset(*ptr, 0, bytes);
    return NNCL_OK;
}

nncl_status nncl__pipe_slots(nncl_trainer *t, int c, int grad, size_t bytes) {
    nncl__pipe *pp = t->pipe;
    cl_mem *mem = grad ? &pp->pin_grad[c] : &pp->pin_act[c];
    float **ptr = grad ? &pp->grad[c] : &pp->act[c];
    if (pipe_pin(t, c + grad, bytes, mem, ptr) == NNCL_OK) return NNCL_OK;
    nncl__log(t->ctx, NNCL_LOG_INFO, "pipeline cut %d: no pinned host memory (%s); plain host memory instead", c,
              nncl__thread_error());
    *mem = NULL;
    *ptr = (float *)nncl__calloc(bytes, 1);
    return *ptr ? NNCL_OK : nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
}

/* Unmaps and releases a pinned buffer on device d (its queue waits for the unmap). */
static void pipe_unpin(nncl_trainer *t, int d, cl_mem mem, float *ptr) {
    nncl_device *dev = nncl__device(t->ctx, t->device[d]);
    if (clEnqueueUnmapMemObject(dev->queue, mem, ptr, 0, NULL, NULL) == CL_SUCCESS) clFinish(dev->queue);
    clReleaseMemObject(mem);
}

void nncl__pipe_slots_free(nncl_trainer *t) {
    nncl__pipe *pp = t->pipe;
    int s;
    nncl__pipe_events_release(pp);
    for (s = 0; s < pp->k; s++) {
        if (pp->act && pp->pin_act && pp->pin_act[s]) pipe_unpin(t, s, pp->pin_act[s], pp->act[s]);
        else if (pp->act) NNCL_FREE(pp->act[s]);
        if (pp->grad && pp->pin_grad && pp->pin_grad[s]) pipe_unpin(t, s + 1, pp->pin_grad[s], pp->grad[s]);
        else if (pp->grad) NNCL_FREE(pp->grad[s]);
    }
}

/* ------------------------------------------------------------- the graph's layout */

nncl_status nncl__pipe_params(nncl_trainer *t, float *params, float *state, int put) {
    nncl__pipe *pp = t->pipe;
    int s, j;
    for (s = 0; s < pp->k; s++) {
        nncl__stage *st = &pp->st[s];
        nncl__plan *p = t->plan[s];
        for (j = 0; params && j < st->n_params; j++) {
            const nncl__span *sp = &st->params[j];
            if (put) NNCL_TRY(nncl__plan_put(p, NNCL__PB_PARAMS, sp->own, sp->n, params + sp->full, 1));
            else NNCL_TRY(nncl__plan_get(p, NNCL__PB_PARAMS, sp->own, sp->n, params + sp->full, 1));
        }
        for (j = 0; state && j < st->n_state; j++) {
            const nncl__span *sp = &st->state[j];
            if (put) NNCL_TRY(nncl__plan_put(p, NNCL__PB_STATE, sp->own, sp->n, state + sp->full, 1));
            else NNCL_TRY(nncl__plan_get(p, NNCL__PB_STATE, sp->own, sp->n, state + sp->full, 1));
        }
    }
    return NNCL_OK;
}

/* Slot k of the graph's trainable parameter i lies at k * n_trainable + i,
 * of a stage's at k * (its n_trainable) + its offset. */
nncl_status nncl__pipe_opt(nncl_trainer *t, float *opt, int put) {
    nncl__pipe *pp = t->pipe;
    size_t slots = nncl__optim_state_floats(&t->cfg.optim), k, n = t->graph->n_trainable;
    int s, j;
    for (s = 0; s < pp->k; s++) {
        nncl__stage *st = &pp->st[s];
        size_t own_n = st->g->n_trainable;
        for (j = 0; j < st->n_params; j++) {
            const nncl__span *sp = &st->params[j];
            if (sp->own >= own_n) continue; /* frozen */
            for (k = 0; k < slots; k++) {
                size_t own = k * own_n + sp->own;
                float *h = opt + k * n + sp->full;
                if (put) NNCL_TRY(nncl__plan_put(t->plan[s], NNCL__PB_OPT, own, sp->n, h, 1));
                else NNCL_TRY(nncl__plan_get(t->plan[s], NNCL__PB_OPT, own, sp->n, h, 1));
            }
        }
    }
    return NNCL_OK;
}
