/* profile.c - kernel time accounting from OpenCL profiling events: launches
 * record their event and kernel name while a device is being profiled; stop
 * sums the execution times, in all and per kernel, and judges whether the
 * driver's timestamps are usable (some drivers return zeros or fixed
 * values). */
#include "runtime/internal.h"
#include <stdlib.h>

#define PROFILE_MAX_EVENTS 65536 /* beyond this, launches go untimed (counted as dropped) */

cl_event *nncl__profile_slot_named(nncl_device *dev, const char *name) {
    if (!dev->profiling) return NULL;
    if (dev->prof_n == dev->prof_cap) {
        int cap = dev->prof_cap ? dev->prof_cap * 2 : 1024;
        cl_event *ev;
        char(*names)[NNCL_PROFILE_NAME];
        if (cap > PROFILE_MAX_EVENTS) {
            dev->prof_dropped++;
            return NULL;
        }
        ev = (cl_event *)nncl__calloc((size_t)cap, sizeof *ev);
        names = (char(*)[NNCL_PROFILE_NAME])nncl__calloc((size_t)cap, sizeof *names);
        if (!ev || !names) {
            NNCL_FREE(ev);
            NNCL_FREE(names);
            dev->prof_dropped++;
            return NULL;
        }
        if (dev->prof_events) memcpy(ev, dev->prof_events, (size_t)dev->prof_n * sizeof *ev);
        if (dev->prof_names) memcpy(names, dev->prof_names, (size_t)dev->prof_n * sizeof *names);
        NNCL_FREE(dev->prof_events);
        NNCL_FREE(dev->prof_names);
        dev->prof_events = ev;
        dev->prof_names = names;
        dev->prof_cap = cap;
    }
    dev->prof_names[dev->prof_n][0] = 0;
    if (name) {
        strncpy(dev->prof_names[dev->prof_n], name, NNCL_PROFILE_NAME - 1);
        dev->prof_names[dev->prof_n][NNCL_PROFILE_NAME - 1] = 0;
    }
    return &dev->prof_events[dev->prof_n++];
}

static void profile_release_events(nncl_device *dev) {
    int i;
    for (i = 0; i < dev->prof_n; i++)
        if (dev->prof_events[i]) clReleaseEvent(dev->prof_events[i]);
    NNCL_FREE(dev->prof_events);
    NNCL_FREE(dev->prof_names);
    dev->prof_events = NULL;
    dev->prof_names = NULL;
    dev->prof_n = dev->prof_cap = dev->prof_dropped = 0;
    dev->profiling = 0;
}

void nncl__profile_release(nncl_device *dev) {
    profile_release_events(dev);
    NNCL_FREE(dev->prof_table);
    dev->prof_table = NULL;
    dev->prof_table_n = 0;
}

/* Adds one timed launch of the kernel called name to the device's table
 * (room for prof_n entries was made by the caller). */
static void profile_tally(nncl_device *dev, const char *name, double seconds) {
    nncl_profile_kernel *e = NULL;
    int i;
    for (i = 0; i < dev->prof_table_n && !e; i++)
        if (!strcmp(dev->prof_table[i].name, name)) e = &dev->prof_table[i];
    if (!e) {
        e = &dev->prof_table[dev->prof_table_n++];
        memset(e, 0, sizeof *e);
        strcpy(e->name, name);
    }
    e->launches++;
    e->seconds += seconds;
}

static int profile_by_time(const void *a, const void *b) {
    double x = ((const nncl_profile_kernel *)a)->seconds, y = ((const nncl_profile_kernel *)b)->seconds;
    return x > y ? -1 : x < y;
}

int nncl_profile_kernels(const nncl_context *ctx, int device, nncl_profile_kernel *out, int max) {
    nncl_device *dev = nncl__device((nncl_context *)ctx, device);
    int i;
    if (!dev) return 0;
    nncl__enter((nncl_context *)ctx);
    for (i = 0; out && i < max && i < dev->prof_table_n; i++) out[i] = dev->prof_table[i];
    i = dev->prof_table_n;
    nncl__leave((nncl_context *)ctx);
    return i;
}

nncl_status nncl_profile_start(nncl_context *ctx, int device) {
    nncl_device *dev = nncl__device(ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!ctx->config.profiling)
        return nncl__fail(ctx, NNCL_ERR_STATE, "nncl_profile_start: the context was created without config.profiling");
    nncl__enter(ctx); /* the event list other threads' launches append to */
    nncl__profile_release(dev);
    dev->profiling = 1;
    nncl__leave(ctx);
    return NNCL_OK;
}

static nncl_status profile_stop(nncl_context *ctx, nncl_device *dev, nncl_profile_report *out) {
    cl_ulong first = 0, last = 0, sum_ns = 0;
    double sum = 0;
    int i, timed = 0, bad = 0;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_profile_stop: out is NULL");
    memset(out, 0, sizeof *out);
    if (!dev->profiling) return nncl__fail(ctx, NNCL_ERR_STATE, "nncl_profile_stop: profiling was not started");
    NNCL_CL(ctx, clFinish(dev->queue));
    NNCL_FREE(dev->prof_table);
    dev->prof_table_n = 0;
    dev->prof_table = (nncl_profile_kernel *)nncl__calloc((size_t)dev->prof_n + 1, sizeof *dev->prof_table);
    for (i = 0; i < dev->prof_n; i++) {
        cl_ulong s = 0, e = 0;
        const char *name = dev->prof_names[i][0] ? dev->prof_names[i] : "(unnamed)";
        if (!dev->prof_events[i]) continue;
        if (clGetEventProfilingInfo(dev->prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) != CL_SUCCESS ||
            clGetEventProfilingInfo(dev->prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) != CL_SUCCESS ||
            e < s || s == 0) {
            bad++;
            if (dev->prof_table) profile_tally(dev, name, 0); /* launched, not timed */
            continue;
        }
        if (!timed || s < first) first = s;
        if (!timed || e > last) last = e;
        sum += (double)(e - s) * 1e-9;
        sum_ns += e - s;
        if (dev->prof_table) profile_tally(dev, name, (double)(e - s) * 1e-9);
        timed++;
    }
    out->launches = timed + bad;
    out->kernel_seconds = sum;
    out->span_seconds = timed ? (double)(last - first) * 1e-9 : 0;
    /* One in-order queue runs one kernel at a time: busy time beyond the
     * span, or no time at all for real work, means invented timestamps.
     * Compared in whole nanoseconds, without slack: kernels that do not
     * overlap can never add up to more than first start to last end, and a
     * slack hides drivers (rusticl) that stamp every kernel 1 ns long. */
    out->plausible = timed > 0 && bad == 0 && sum_ns > 0 && sum_ns <= last - first;
    if (dev->prof_table) qsort(dev->prof_table, (size_t)dev->prof_table_n, sizeof *dev->prof_table, profile_by_time);
    profile_release_events(dev);
    return NNCL_OK;
}

nncl_status nncl_profile_stop(nncl_context *ctx, int device, nncl_profile_report *out) {
    nncl_device *dev = nncl__device(ctx, device);
    nncl_status st;
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    NNCL_LOCKED(ctx, st, profile_stop(ctx, dev, out));
    return st;
}

#undef PROFILE_MAX_EVENTS
