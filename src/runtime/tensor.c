/* tensor.c - float32 device tensors: creation with checked shapes, blocking
 * and non-blocking transfers, copies within and across devices (through the
 * host when they are on different OpenCL contexts). Transfers and copies
 * are OpenCL queue calls, safe from any thread; creation and release take
 * the context's use lock for the device's memory count. */
#include "runtime/internal.h"

nncl_status nncl__check_tensor(nncl_context *ctx, const nncl_tensor *t, const char *arg) {
    if (!t) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "tensor argument %s is NULL", arg);
    if (t->ctx != ctx) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "tensor %s belongs to another context", arg);
    return NNCL_OK;
}

nncl_status nncl_tensor_create(nncl_context *ctx, int device, int ndim, const int *shape, nncl_tensor **out) {
    nncl_device *dev;
    nncl_tensor *t;
    size_t numel = 1, bytes;
    int i;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_create: out is NULL");
    *out = NULL;
    if (!(dev = nncl__device(ctx, device))) return NNCL_ERR_INVALID_ARGUMENT;
    if (ndim < 1 || ndim > NNCL_MAX_DIMS || !shape)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_create: ndim %d is not in 1..%d or shape is NULL",
                          ndim, NNCL_MAX_DIMS);
    for (i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_create: dimension %d is %d (must be > 0)", i,
                              shape[i]);
        if (nncl__mul_overflow(numel, (size_t)shape[i], &numel) || numel > 0x7fffffffu)
            return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY,
                              "nncl_tensor_create: more than the 2^31-1 elements a kernel can address");
    }
    bytes = numel * sizeof(float);
    t = (nncl_tensor *)nncl__calloc(1, sizeof *t);
    if (!t) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_tensor_create: out of host memory");
    t->ctx = ctx;
    t->device = device;
    t->ndim = ndim;
    for (i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    nncl__enter(ctx); /* the device's memory count */
    if (nncl__buffer_create(ctx, dev, bytes, &t->mem) != NNCL_OK) {
        nncl__leave(ctx);
        NNCL_FREE(t);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    nncl__leave(ctx);
    *out = t;
    return NNCL_OK;
}

void nncl_tensor_free(nncl_tensor *t) {
    if (!t) return;
    nncl__enter(t->ctx);
    nncl__buffer_release(&t->ctx->devices[t->device], t->mem, t->numel * sizeof(float));
    nncl__leave(t->ctx);
    NNCL_FREE(t);
}

int nncl_tensor_ndim(const nncl_tensor *t) { return t ? t->ndim : 0; }
int nncl_tensor_dim(const nncl_tensor *t, int axis) {
    return t && axis >= 0 && axis < t->ndim ? t->shape[axis] : 0;
}
size_t nncl_tensor_numel(const nncl_tensor *t) { return t ? t->numel : 0; }
int nncl_tensor_device(const nncl_tensor *t) { return t ? t->device : -1; }

static nncl_status tensor_check_io(const nncl_tensor *t, const void *host, size_t count, const char *fn) {
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    if (!host) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: host pointer is NULL", fn);
    if (count != t->numel)
        return nncl__fail(t->ctx, NNCL_ERR_SHAPE, "%s: count %zu differs from the tensor's %zu elements", fn, count,
                          t->numel);
    return NNCL_OK;
}

static nncl_status tensor_event(nncl_context *ctx, cl_event ev, nncl_event **done) {
    nncl_event *e = (nncl_event *)nncl__calloc(1, sizeof *e);
    if (!e) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    e->ctx = ctx;
    e->ev = ev;
    *done = e;
    return NNCL_OK;
}

static nncl_status tensor_transfer(const nncl_tensor *t, void *host, size_t count, int write, nncl_event **done,
                                   const char *fn) {
    nncl_device *dev;
    cl_event ev = NULL;
    cl_int err;
    cl_bool blocking = done ? CL_FALSE : CL_TRUE;
    NNCL_TRY(tensor_check_io(t, host, count, fn));
    if (done) *done = NULL;
    dev = &t->ctx->devices[t->device];
    if (write)
        err = clEnqueueWriteBuffer(dev->queue, t->mem, blocking, 0, count * sizeof(float), host, 0, NULL,
                                   done ? &ev : NULL);
    else
        err = clEnqueueReadBuffer(dev->queue, t->mem, blocking, 0, count * sizeof(float), host, 0, NULL,
                                  done ? &ev : NULL);
    if (err != CL_SUCCESS)
        return nncl__cl_fail(t->ctx, err, write ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer", __FILE__, __LINE__);
    return done ? tensor_event(t->ctx, ev, done) : NNCL_OK;
}

nncl_status nncl_tensor_write(nncl_tensor *t, const float *src, size_t count) {
    return tensor_transfer(t, (void *)src, count, 1, NULL, "nncl_tensor_write");
}
nncl_status nncl_tensor_read(const nncl_tensor *t, float *dst, size_t count) {
    return tensor_transfer(t, dst, count, 0, NULL, "nncl_tensor_read");
}
nncl_status nncl_tensor_write_async(nncl_tensor *t, const float *src, size_t count, nncl_event **done) {
    if (!done) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_write_async: done is NULL");
    *done = NULL; /* also on failure: the caller may free it unconditionally */
    return tensor_transfer(t, (void *)src, count, 1, done, "nncl_tensor_write_async");
}
nncl_status nncl_tensor_read_async(const nncl_tensor *t, float *dst, size_t count, nncl_event **done) {
    if (!done) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_read_async: done is NULL");
    *done = NULL;
    return tensor_transfer(t, dst, count, 0, done, "nncl_tensor_read_async");
}

nncl_status nncl_event_wait(nncl_event *e) {
    if (!e) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_event_wait: event is NULL");
    NNCL_CL(e->ctx, clWaitForEvents(1, &e->ev));
    return NNCL_OK;
}

void nncl_event_free(nncl_event *e) {
    if (!e) return;
    clWaitForEvents(1, &e->ev); /* the host array must not be released while in use */
    clReleaseEvent(e->ev);
    NNCL_FREE(e);
}

nncl_status nncl_tensor_copy(nncl_tensor *dst, const nncl_tensor *src) {
    nncl_device *ds, *dd;
    float *tmp;
    nncl_status st;
    if (!dst || !src) return nncl__fail(dst ? dst->ctx : src ? src->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT,
                                        "nncl_tensor_copy: %s is NULL", dst ? "src" : "dst");
    if (dst->numel != src->numel)
        return nncl__fail(dst->ctx, NNCL_ERR_SHAPE, "nncl_tensor_copy: %zu elements into %zu", src->numel, dst->numel);
    if (dst == src) return NNCL_OK; /* already equal; OpenCL refuses overlapping copies */
    ds = &src->ctx->devices[src->device];
    dd = &dst->ctx->devices[dst->device];
    if (ds->cl_ctx == dd->cl_ctx) {
        NNCL_CL(dst->ctx, clEnqueueCopyBuffer(dd->queue, src->mem, dst->mem, 0, 0, src->numel * sizeof(float), 0, NULL,
                                              NULL));
        return NNCL_OK;
    }
    /* Different OpenCL contexts share no memory: go through the host. */
    tmp = (float *)nncl__calloc(src->numel, sizeof(float));
    if (!tmp) return nncl__fail(dst->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_tensor_copy: out of host memory");
    st = nncl_tensor_read(src, tmp, src->numel);
    if (st == NNCL_OK) st = nncl_tensor_write(dst, tmp, dst->numel);
    else if (dst->ctx != src->ctx) nncl__fail(dst->ctx, st, "%s", nncl__thread_error());
    NNCL_FREE(tmp);
    return st;
}

void *nncl_tensor_opencl(const nncl_tensor *t) { return t ? (void *)t->mem : NULL; }

nncl_status nncl_tensor_write_half(nncl_tensor *t, int store, const float *src, size_t count) {
    unsigned short *bits;
    size_t i;
    cl_int err;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_write_half: tensor is NULL");
    if (store != 1 && store != 2)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_write_half: store %d is not 1 (fp16) or 2 (bf16)",
                          store);
    if (!src && count) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_tensor_write_half: src is NULL");
    if (count / 2 > t->numel)
        return nncl__fail(t->ctx, NNCL_ERR_SHAPE, "nncl_tensor_write_half: %zu half values exceed the tensor's %zu floats",
                          count, t->numel);
    if (!count) return NNCL_OK;
    if (!(bits = (unsigned short *)nncl__calloc(count, sizeof *bits)))
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_tensor_write_half: out of host memory");
    for (i = 0; i < count; i++) bits[i] = (unsigned short)(store == 1 ? nncl__f32_to_f16(src[i]) : nncl__f32_to_bf16(src[i]));
    nncl__enter(t->ctx);
    err = clEnqueueWriteBuffer(t->ctx->devices[t->device].queue, t->mem, CL_TRUE, 0, count * sizeof *bits, bits, 0,
                               NULL, NULL);
    nncl__leave(t->ctx);
    NNCL_FREE(bits);
    NNCL_CL_CHECK(t->ctx, err, "clEnqueueWriteBuffer");
    return NNCL_OK;
}
