/* plan_exchange.c - the host's exchange with a plan's device buffers: the
 * training buffers a trainer adds (optimizer state and scratch, the shadow
 * of the running statistics), reads, writes and copies of any flat buffer
 * with their ranges checked, the per-step settings of the exec, and the
 * second queue that reads gradients back while backward still runs. The
 * trainer, its overlap and synchronised batch norm go through here, so the
 * plan alone knows where its memory is. */
#include "train/plan.h"

/* Buffer b and its length in floats (0 and NULL where the plan has none). */
static cl_mem pex_buffer(const nncl__plan *p, nncl__pbuf b, size_t *floats) {
    const nncl_graph *g = p->graph;
    switch (b) {
    case NNCL__PB_PARAMS: *floats = g->n_params; return p->ex.params;
    case NNCL__PB_GRADS: *floats = g->n_trainable; return p->ex.grads;
    case NNCL__PB_STATE: *floats = g->n_state; return p->ex.state;
    case NNCL__PB_SHADOW: *floats = p->shadow ? g->n_state : 0; return p->shadow;
    case NNCL__PB_OPT: *floats = p->opt_floats; return p->opt;
    case NNCL__PB_SCRATCH: *floats = p->scratch_floats; return p->scratch;
    }
    *floats = 0;
    return NULL;
}

/* Buffer b when [off, off + count) lies inside it, else NULL (an error set). */
static cl_mem pex_range(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, const char *what) {
    size_t floats;
    cl_mem m = pex_buffer(p, b, &floats);
    if (!m || off > floats || count > floats - off) {
        nncl__fail(p->ctx, NNCL_ERR_STATE, "plan %s: floats %zu..%zu outside buffer %d of %zu floats", what, off,
                   off + count, (int)b, floats);
        return NULL;
    }
    return m;
}

/* Zeroes n floats of m from a block of zeros, one write per block. */
static nncl_status pex_zero(nncl__plan *p, cl_mem m, size_t n) {
    static const float zeros[4096] = {0};
    size_t k;
    for (k = 0; k < n; k += 4096) {
        size_t c = n - k < 4096 ? n - k : 4096;
        NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->ex.dev->queue, m, CL_TRUE, k * 4, c * 4, zeros, 0, NULL, NULL));
    }
    return NNCL_OK;
}

nncl_status nncl__plan_train(nncl__plan *p, size_t opt_floats, size_t scratch_floats) {
    nncl_device *dev = p->ex.dev;
    NNCL_TRY(nncl__buffer_create(p->ctx, dev, opt_floats * 4, &p->opt));
    p->opt_floats = opt_floats;
    NNCL_TRY(nncl__buffer_create(p->ctx, dev, scratch_floats * 4, &p->scratch));
    p->scratch_floats = scratch_floats;
    if (p->graph->n_state) NNCL_TRY(nncl__buffer_create(p->ctx, dev, p->graph->n_state * 4, &p->shadow));
    NNCL_TRY(pex_zero(p, p->opt, opt_floats));
    return pex_zero(p, p->ex.grads, p->graph->n_trainable);
}

nncl_status nncl__plan_get(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, float *dst, int wait) {
    cl_mem m;
    if (!count) return NNCL_OK;
    if (!(m = pex_range(p, b, off, count, "read"))) return NNCL_ERR_STATE;
    NNCL_CL(p->ctx, clEnqueueReadBuffer(p->ex.dev->queue, m, wait ? CL_TRUE : CL_FALSE, off * 4, count * 4, dst, 0, NULL,
                                        NULL));
    return NNCL_OK;
}

nncl_status nncl__plan_put(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, const float *src, int wait) {
    cl_mem m;
    if (!count) return NNCL_OK;
    if (!(m = pex_range(p, b, off, count, "write"))) return NNCL_ERR_STATE;
    NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->ex.dev->queue, m, wait ? CL_TRUE : CL_FALSE, off * 4, count * 4, src, 0,
                                         NULL, NULL));
    return b == NNCL__PB_PARAMS ? nncl__plan_sync_params(p) : NNCL_OK; /* half storage: the weights' working copy */
}

nncl_status nncl__plan_copy(nncl__plan *p, nncl__pbuf from, nncl__pbuf to) {
    size_t n_from, n_to;
    cl_mem a = pex_buffer(p, from, &n_from), b = pex_buffer(p, to, &n_to);
    if (!n_from && !n_to) return NNCL_OK;
    if (!a || !b || n_from != n_to)
        return nncl__fail(p->ctx, NNCL_ERR_STATE, "plan copy: buffers %d and %d differ (%zu and %zu floats)", (int)from,
                          (int)to, n_from, n_to);
    NNCL_CL(p->ctx, clEnqueueCopyBuffer(p->ex.dev->queue, a, b, 0, 0, n_from * 4, 0, NULL, NULL));
    return NNCL_OK;
}

nncl_status nncl__plan_finish(nncl__plan *p) {
    NNCL_CL(p->ctx, clFinish(p->ex.dev->queue));
    return NNCL_OK;
}

nncl__view nncl__plan_view(const nncl__plan *p, nncl__pbuf b) {
    nncl__view v;
    size_t floats;
    v.mem = pex_buffer(p, b, &floats);
    v.off = 0;
    return v;
}

nncl_device *nncl__plan_device(const nncl__plan *p) { return p->ex.dev; }

void nncl__plan_set_step(nncl__plan *p, int batch_offset, int global_batch, uint64_t step_seed) {
    p->ex.batch_offset = batch_offset;
    p->ex.global_batch = global_batch;
    p->ex.step_seed = step_seed;
}

void nncl__plan_set_sync(nncl__plan *p, nncl_status (*sync)(nncl__exec *ex, const nncl_node *n, int phase, void *user),
                         void *user) {
    p->ex.sync = sync;
    p->ex.sync_user = user;
}

nncl_status nncl__plan_xfer_open(nncl__plan *p) {
    cl_int err;
    if (p->xfer) return NNCL_OK;
    p->xfer = clCreateCommandQueue(p->ex.dev->cl_ctx, p->ex.dev->id, 0, &err);
    if (err != CL_SUCCESS) p->xfer = NULL;
    NNCL_CL_CHECK(p->ctx, err, "clCreateCommandQueue (transfer queue)");
    return NNCL_OK;
}

int nncl__plan_has_xfer(const nncl__plan *p) { return p->xfer != NULL; }

nncl_status nncl__plan_xfer_read(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, float *dst) {
    cl_event done;
    cl_int err;
    cl_mem m;
    if (!p->xfer) return nncl__fail(p->ctx, NNCL_ERR_STATE, "plan: no transfer queue");
    if (!(m = pex_range(p, b, off, count, "transfer"))) return NNCL_ERR_STATE;
    NNCL_CL(p->ctx, clEnqueueBarrierWithWaitList(p->ex.dev->queue, 0, NULL, &done));
    err = clEnqueueReadBuffer(p->xfer, m, CL_FALSE, off * 4, count * 4, dst, 1, &done, NULL);
    clReleaseEvent(done);
    NNCL_CL_CHECK(p->ctx, err, "clEnqueueReadBuffer (transfer queue)");
    NNCL_CL(p->ctx, clFlush(p->xfer));
    return NNCL_OK;
}

nncl_status nncl__plan_xfer_wait(nncl__plan *p) {
    if (p->xfer) NNCL_CL(p->ctx, clFinish(p->xfer));
    return NNCL_OK;
}
