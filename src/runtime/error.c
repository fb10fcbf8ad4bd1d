/* error.c - status names, the last-error messages, the log callback,
 * OpenCL error names, and the small helpers every file uses: checked
 * arithmetic, allocation, a monotonic clock. Messages are kept per thread:
 * each thread holds its last message without a context and its last on
 * each of the few contexts it failed on most recently (slots keyed by the
 * context's serial number, so a context freed and another made at the same
 * address never inherits a message), and nncl_last_error(ctx) reads the
 * calling thread's own. A context also keeps its latest message of any
 * thread, for a thread that has recorded none there. That message and the
 * log callback are used under the context's lock, so the callback is never
 * entered by two threads at once. The trainer collects each device thread's
 * last message (nncl__thread_error) so that one device's failure is
 * reported with its own words whatever the others wrote. */
#include "runtime/internal.h"
#include <stdio.h>
#include <time.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <unistd.h>
#endif

/* Slot 0: without a context (serial 0); the others: contexts, the least
 * recently written one reused for a context not among them. */
#define ERR_SLOTS 5
typedef struct err_slot {
    uint64_t serial;
    uint64_t written; /* this thread's count of records when last written */
    char msg[NNCL_MSG_MAX];
} err_slot;
static NNCL_THREAD_LOCAL err_slot thread_slots[ERR_SLOTS];
static NNCL_THREAD_LOCAL uint64_t thread_records;
/* the last message this thread recorded, with a context or without */
static NNCL_THREAD_LOCAL const char *thread_last;

uint64_t nncl__context_serial(void) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t last;
    uint64_t s;
    pthread_mutex_lock(&lock);
    s = ++last;
    pthread_mutex_unlock(&lock);
    return s;
}

/* This thread's slot for serial; with claim, one is taken when there is
 * none (else NULL). */
static err_slot *error_slot(uint64_t serial, int claim) {
    int i, oldest = 1;
    if (serial == 0) return &thread_slots[0];
    for (i = 1; i < ERR_SLOTS; i++) {
        if (thread_slots[i].serial == serial) return &thread_slots[i];
        if (thread_slots[i].written < thread_slots[oldest].written) oldest = i;
    }
    if (!claim) return NULL;
    thread_slots[oldest].serial = serial;
    return &thread_slots[oldest];
}

const char *nncl_status_str(nncl_status status) {
    switch (status) {
    case NNCL_OK: return "ok";
    case NNCL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NNCL_ERR_SHAPE: return "shape mismatch";
    case NNCL_ERR_OUT_OF_MEMORY: return "out of memory";
    case NNCL_ERR_DEVICE: return "device error";
    case NNCL_ERR_BUILD: return "kernel build failed";
    case NNCL_ERR_NO_DEVICE: return "no matching device";
    case NNCL_ERR_IO: return "input/output error";
    case NNCL_ERR_FORMAT: return "malformed input";
    case NNCL_ERR_UNSUPPORTED: return "unsupported";
    case NNCL_ERR_BLAS: return "CLBlast error";
    case NNCL_ERR_NUMERIC: return "NaN or Inf";
    case NNCL_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

/* The message is copied into a buffer of the calling thread, so the string
 * returned stays as it was whatever is recorded later (until this thread
 * asks again). */
const char *nncl_last_error(const nncl_context *ctx) {
    static NNCL_THREAD_LOCAL char copy[NNCL_MSG_MAX];
    nncl_context *c = (nncl_context *)ctx; /* the lock is not part of the context's value */
    const err_slot *own;
    if (!c) return thread_slots[0].msg;
    if ((own = error_slot(c->serial, 0)) != NULL) {
        memcpy(copy, own->msg, NNCL_MSG_MAX);
        return copy;
    }
    if (c->lock_ready) pthread_mutex_lock(&c->lock);
    memcpy(copy, c->message, NNCL_MSG_MAX);
    if (c->lock_ready) pthread_mutex_unlock(&c->lock);
    return copy;
}

const char *nncl__thread_error(void) { return thread_last ? thread_last : ""; }

int nncl__device_fault(nncl_status st) {
    return st == NNCL_ERR_DEVICE || st == NNCL_ERR_BLAS || st == NNCL_ERR_OUT_OF_MEMORY || st == NNCL_ERR_BUILD;
}

void nncl__log(nncl_context *ctx, int level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    if (!ctx || !ctx->config.log || level > ctx->config.log_level) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx->lock_ready) pthread_mutex_lock(&ctx->lock);
    ctx->config.log(ctx->config.log_user, level, buf);
    if (ctx->lock_ready) pthread_mutex_unlock(&ctx->lock);
}

/* Records msg as this thread's last message on ctx (or without one) and as
 * ctx's latest, and logs it when log is set. */
static void error_record(nncl_context *ctx, const char *msg, int log) {
    err_slot *own = error_slot(ctx ? ctx->serial : 0, 1);
    memcpy(own->msg, msg, NNCL_MSG_MAX);
    own->written = ++thread_records;
    thread_last = own->msg;
    if (!ctx) return;
    if (ctx->lock_ready) pthread_mutex_lock(&ctx->lock);
    memcpy(ctx->message, msg, NNCL_MSG_MAX);
    if (log && ctx->config.log && ctx->config.log_level >= NNCL_LOG_ERROR)
        ctx->config.log(ctx->config.log_user, NNCL_LOG_ERROR, msg);
    if (ctx->lock_ready) pthread_mutex_unlock(&ctx->lock);
}

nncl_status nncl__vfail(nncl_context *ctx, nncl_status status, const char *fmt, va_list ap) {
    char msg[NNCL_MSG_MAX];
    vsnprintf(msg, NNCL_MSG_MAX, fmt, ap);
    error_record(ctx, msg, 1);
    return status;
}

void nncl__set_error(nncl_context *ctx, const char *msg) {
    char copy[NNCL_MSG_MAX];
    snprintf(copy, sizeof copy, "%s", msg);
    error_record(ctx, copy, 0);
}

nncl_status nncl__fail(nncl_context *ctx, nncl_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    nncl__vfail(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

const char *nncl__cl_error_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
#undef E
    }
    return "unknown OpenCL error";
}

nncl_status nncl__cl_fail(nncl_context *ctx, cl_int err, const char *call, const char *file, int line) {
    nncl_status st = NNCL_ERR_DEVICE;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        st = NNCL_ERR_OUT_OF_MEMORY;
    return nncl__fail(ctx, st, "%s failed: %s (%d) at %s:%d", call, nncl__cl_error_name(err),
                      (int)err, file, line);
}

int nncl__mul_overflow(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > (size_t)-1 / a) return 1;
    *out = a * b;
    return 0;
}

int nncl__add_overflow(size_t a, size_t b, size_t *out) {
    if (b > (size_t)-1 - a) return 1;
    *out = a + b;
    return 0;
}

int nncl__host_fits(size_t bytes) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages, page;
    if (bytes < ((size_t)1 << 30)) return 1; /* asks the system only for large ones */
    pages = sysconf(_SC_PHYS_PAGES);
    page = sysconf(_SC_PAGESIZE);
    return pages <= 0 || page <= 0 || bytes / (size_t)page <= (size_t)pages;
#else
    (void)bytes;
    return 1;
#endif
}

void *nncl__calloc(size_t n, size_t sz) {
    size_t bytes;
    void *p;
    if (nncl__mul_overflow(n, sz, &bytes) || !nncl__host_fits(bytes)) return NULL;
    p = NNCL_MALLOC(bytes ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}

int nncl__grow(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    size_t ncap = *cap ? *cap : first;
    void *q;
    if (need <= *cap) return 0;
    while (ncap < need) {
        if (ncap > (size_t)-1 / 2) return 1;
        ncap *= 2;
    }
    q = nncl__calloc(ncap, elem);
    if (!q) return 1;
    if (*p) memcpy(q, *p, *cap * elem);
    NNCL_FREE(*p);
    *p = q;
    *cap = ncap;
    return 0;
}

int nncl__grow_int(void **p, int *cap, int need, size_t elem, int first) {
    size_t c = (size_t)*cap;
    if (need <= *cap) return 0;
    if (nncl__grow(p, &c, (size_t)need, elem, (size_t)first)) return 1;
    *cap = c > (size_t)INT_MAX ? INT_MAX : (int)c; /* counts stay ints: the rest is unused room */
    return 0;
}

char *nncl__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = (char *)NNCL_MALLOC(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Seconds on a monotonic clock, for durations. */
double nncl__seconds(void) {
#if defined(_WIN32)
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart / (double)f.QuadPart;
#elif defined(CLOCK_MONOTONIC)
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#else
    return (double)time(NULL);
#endif
}

#undef ERR_SLOTS
