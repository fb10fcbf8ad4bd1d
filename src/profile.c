/* profile.c - kernel time accounting from OpenCL profiling events: launches
 * record their event while a device is being profiled; stop sums the
 * execution times and judges whether the driver's timestamps are usable
 * (some drivers return zeros or fixed values). */
#include "internal.h"

#define PROFILE_MAX_EVENTS 65536 /* beyond this, launches go untimed (counted as dropped) */

cl_event *nncl__profile_slot(nncl_device *dev) {
    if (!dev->profiling) return NULL;
    if (dev->prof_n == dev->prof_cap) {
        int cap = dev->prof_cap ? dev->prof_cap * 2 : 1024;
        cl_event *ev;
        if (cap > PROFILE_MAX_EVENTS) {
            dev->prof_dropped++;
            return NULL;
        }
        ev = (cl_event *)nncl__calloc((size_t)cap, sizeof *ev);
        if (!ev) {
            dev->prof_dropped++;
            return NULL;
        }
        if (dev->prof_events) memcpy(ev, dev->prof_events, (size_t)dev->prof_n * sizeof *ev);
        NNCL_FREE(dev->prof_events);
        dev->prof_events = ev;
        dev->prof_cap = cap;
    }
    return &dev->prof_events[dev->prof_n++];
}

void nncl__profile_release(nncl_device *dev) {
    int i;
    for (i = 0; i < dev->prof_n; i++)
        if (dev->prof_events[i]) clReleaseEvent(dev->prof_events[i]);
    NNCL_FREE(dev->prof_events);
    dev->prof_events = NULL;
    dev->prof_n = dev->prof_cap = dev->prof_dropped = 0;
    dev->profiling = 0;
}

nncl_status nncl_profile_start(nncl_context *ctx, int device) {
    nncl_device *dev = nncl__device(ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!ctx->config.profiling)
        return nncl__fail(ctx, NNCL_ERR_STATE, "nncl_profile_start: the context was created without config.profiling");
    nncl__profile_release(dev);
    dev->profiling = 1;
    return NNCL_OK;
}

nncl_status nncl_profile_stop(nncl_context *ctx, int device, nncl_profile_report *out) {
    nncl_device *dev = nncl__device(ctx, device);
    cl_ulong first = 0, last = 0, sum_ns = 0;
    double sum = 0;
    int i, timed = 0, bad = 0;
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_profile_stop: out is NULL");
    memset(out, 0, sizeof *out);
    if (!dev->profiling) return nncl__fail(ctx, NNCL_ERR_STATE, "nncl_profile_stop: profiling was not started");
    NNCL_CL(ctx, clFinish(dev->queue));
    for (i = 0; i < dev->prof_n; i++) {
        cl_ulong s = 0, e = 0;
        if (!dev->prof_events[i]) continue;
        if (clGetEventProfilingInfo(dev->prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) != CL_SUCCESS ||
            clGetEventProfilingInfo(dev->prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) != CL_SUCCESS ||
            e < s || s == 0) {
            bad++;
            continue;
        }
        if (!timed || s < first) first = s;
        if (!timed || e > last) last = e;
        sum += (double)(e - s) * 1e-9;
        sum_ns += e - s;
        timed++;
    }
    out->launches = timed;
    out->kernel_seconds = sum;
    out->span_seconds = timed ? (double)(last - first) * 1e-9 : 0;
    /* One in-order queue runs one kernel at a time: busy time beyond the
     * span, or no time at all for real work, means invented timestamps.
     * Compared in whole nanoseconds, without slack: kernels that do not
     * overlap can never add up to more than first start to last end, and a
     * slack hides drivers (rusticl) that stamp every kernel 1 ns long. */
    out->plausible = timed > 0 && bad == 0 && sum_ns > 0 && sum_ns <= last - first;
    nncl__profile_release(dev);
    return NNCL_OK;
}

#undef PROFILE_MAX_EVENTS
