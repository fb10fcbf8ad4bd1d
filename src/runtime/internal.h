/* internal.h - what the implementation files share and the user never sees:
 * allocation overrides, error recording, the OpenCL check macro, and the
 * context, device and tensor structures. */
#ifndef NNCL_INTERNAL_H
#define NNCL_INTERNAL_H

#ifndef NNCL_BUILD
#define NNCL_BUILD
#endif
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif

#include "nncl.h"
#include <CL/cl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* All or none: define both to route every host allocation elsewhere. */
#if defined(NNCL_MALLOC) != defined(NNCL_FREE)
#error "define both NNCL_MALLOC and NNCL_FREE, or neither"
#endif
#ifndef NNCL_MALLOC
#define NNCL_MALLOC(n) malloc(n)
#define NNCL_FREE(p) free(p)
#endif

/* C99's restrict, under the name C++ compilers know (the single header
 * also builds as C++). */
#if defined(__cplusplus)
#define NNCL_RESTRICT __restrict
#else
#define NNCL_RESTRICT restrict
#endif

#if defined(__GNUC__)
#define NNCL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define NNCL_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define NNCL_PRINTF(f, a)
#define NNCL_THREAD_LOCAL __declspec(thread)
#else
#define NNCL_PRINTF(f, a)
#define NNCL_THREAD_LOCAL _Thread_local
#endif

#define NNCL_MSG_MAX 8192
/* A macro's value as a string literal (version numbers, build options). */
#define NNCL_STR_(x) #x
#define NNCL_XSTR(x) NNCL_STR_(x)

/* OpenMP pragmas that vanish, without a warning, in builds without it. */
#ifdef _OPENMP
#define NNCL_OMP(directive) _Pragma(#directive)
#else
#define NNCL_OMP(directive)
#endif

/* Whether one host allocation of bytes may be tried: not beyond the
 * machine's physical memory where the system tells it (an overcommitting
 * allocator promises more, and zeroing or filling it then kills the
 * process; sanitizers abort on absurd sizes). */
int nncl__host_fits(size_t bytes);
/* Zeroed allocation of n elements of size sz; NULL on overflow, beyond
 * nncl__host_fits or on failure. */
void *nncl__calloc(size_t n, size_t sz);
/* Room for need elements of elem bytes in the growing array *p of *cap
 * elements (doubled, from first; the new room zeroed): 0, or nonzero with
 * nothing changed when memory or the size ran out. _int: int counts. */
int nncl__grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);
int nncl__grow_int(void **p, int *cap, int need, size_t elem, int first);
char *nncl__strdup(const char *s);
/* Seconds on a monotonic clock, for durations. */
double nncl__seconds(void);

/* A pool of worker threads (crew.c): run calls job(arg, i) for every
 * member i in 0..n-1 at once, member 0 on the calling thread, and returns
 * when all are done. start takes 1..64 members. */
typedef struct nncl__crew nncl__crew;
typedef void (*nncl__crew_job)(void *arg, int member);
nncl_status nncl__crew_start(nncl_context *ctx, int n, nncl__crew **out);
void nncl__crew_run(nncl__crew *c, nncl__crew_job job, void *arg);
void nncl__crew_stop(nncl__crew *c);

/* fp16 and bf16 bit patterns (in the low 16 bits) to and from float,
 * rounding to nearest even (half.c). */
float nncl__f16_to_f32(unsigned h);
unsigned nncl__f32_to_f16(float f);
float nncl__bf16_to_f32(unsigned h);
unsigned nncl__f32_to_bf16(float f);
/* a * b and a + b into *out; nonzero when they overflow size_t. */
int nncl__mul_overflow(size_t a, size_t b, size_t *out);
int nncl__add_overflow(size_t a, size_t b, size_t *out);

/* Records status and a formatted message on ctx (or, with ctx NULL, on this
 * thread), sends it to the log callback, and returns status. */
nncl_status nncl__fail(nncl_context *ctx, nncl_status status, const char *fmt, ...) NNCL_PRINTF(3, 4);
nncl_status nncl__vfail(nncl_context *ctx, nncl_status status, const char *fmt, va_list ap);
void nncl__log(nncl_context *ctx, int level, const char *fmt, ...) NNCL_PRINTF(3, 4);
/* Sets the last-error message (of ctx, or of this thread) without logging
 * it again: for a message recorded earlier, on another thread. */
void nncl__set_error(nncl_context *ctx, const char *msg);
/* The last message this thread recorded with nncl__fail, on any context:
 * a device thread's own words, untouched by the other threads. */
const char *nncl__thread_error(void);
/* A new context's serial number (1, 2, ...). */
uint64_t nncl__context_serial(void);
/* Whether a status says the device itself failed (OpenCL, CLBlast, device
 * memory, kernel build), as opposed to an argument, shape or data error:
 * only those retire a device from a trainer. */
int nncl__device_fault(nncl_status st);

/* Maps an OpenCL error code to a status and records "call failed: NAME (code)
 * at file:line". Allocation failures and CL_OUT_OF_RESOURCES become
 * NNCL_ERR_OUT_OF_MEMORY. */
nncl_status nncl__cl_fail(nncl_context *ctx, cl_int err, const char *call, const char *file, int line);
const char *nncl__cl_error_name(cl_int err);

/* Every OpenCL call goes through this: on failure it records the call,
 * file:line and code on ctx and returns the status from the function. */
#define NNCL_CL(ctx, call)                                                      \
    do {                                                                        \
        cl_int nncl_err_ = (call);                                              \
        if (nncl_err_ != CL_SUCCESS)                                            \
            return nncl__cl_fail((ctx), nncl_err_, #call, __FILE__, __LINE__);  \
    } while (0)

/* The same, for calls that hand back the code through their last argument. */
#define NNCL_CL_CHECK(ctx, err, what)                                           \
    do {                                                                        \
        if ((err) != CL_SUCCESS)                                                \
            return nncl__cl_fail((ctx), (err), (what), __FILE__, __LINE__);     \
    } while (0)

/* Propagates a non-OK status. */
#define NNCL_TRY(expr)                                                          \
    do {                                                                        \
        nncl_status nncl_st_ = (expr);                                          \
        if (nncl_st_ != NNCL_OK) return nncl_st_;                               \
    } while (0)

/* ------------------------------------------------------------- devices */

typedef struct nncl_program nncl_program;

/* A place in a device buffer: the buffer and an element offset. */
typedef struct nncl__view {
    cl_mem mem;
    size_t off;
} nncl__view;

/* A kernel resolved once (at plan or optimizer creation) for launches that
 * then only index: the kernel and the largest work-group it may run on its
 * device (CL_KERNEL_WORK_GROUP_SIZE). */
typedef struct nncl__kslot {
    cl_kernel kernel;
    size_t wg;
} nncl__kslot;

#define NNCL_DEVICE_ON_FREE 4

typedef struct nncl_device {
    nncl_device_info info;
    cl_platform_id platform;
    cl_device_id id;
    cl_context cl_ctx;
    cl_command_queue queue;
    size_t max_work_group;
    unsigned mem_base_align;  /* bytes a sub-buffer origin must be a multiple of */
    nncl_program *programs;   /* built programs, one per kernel family */
    unsigned long lookups;    /* kernels looked up by name and programs built (nncl__kernel_lookups) */
    int clblast_tuned;        /* CLBlast runs a GEMM tuning made for this device (src/gemm/tune.c) */
    /* PoCL CPU devices before this one in the context. PoCL 3.1 keeps one
     * process-wide table of loaded kernel binaries, keyed by the program's
     * build hash and the kernel, and, when a launch ends, lowers the count of
     * the first entry of that kernel and local size, not of the one the
     * launch used: the same kernel running at once on two such devices at
     * different global sizes fails an assertion in
     * pocl_release_dlhandle_cache or runs a binary already unloaded.
     * Programs built for the second and later such device carry a define of
     * this number, so that every device has build hashes of its own
     * (CLBlast's programs cannot: nncl runs them on PoCL's CPU devices only
     * when NNCL_GEMM or NNCL_TIME_CLBLAST asks). */
    int pocl_twin;
    nncl__kslot optim_kernels[3][5]; /* the optimizer's per storage type, resolved on first use (optim.c) */
    struct nncl__gemm_state *gemm; /* own GEMM variants, choices, scratch (gemm_own.c) */
    /* Releases what the layers above keep on the device (GEMM state),
     * run by nncl_free, last registered first, before the device's programs
     * and queue go: a layer registers one (nncl__device_on_free) when it
     * first creates its state, so that the runtime never calls up. */
    void (*on_free[NNCL_DEVICE_ON_FREE])(struct nncl_device *dev);
    int n_on_free;
    uint64_t mem_in_use, mem_peak;
    /* Kernel timing between nncl_profile_start and _stop (profiling queues). */
    int profiling;
    cl_event *prof_events;
    char (*prof_names)[NNCL_PROFILE_NAME]; /* the kernel of each event; "" unnamed */
    int prof_n, prof_cap, prof_dropped;
    nncl_profile_kernel *prof_table; /* the last stop's time per kernel, most first */
    int prof_table_n;
} nncl_device;

/* Adds fn to what nncl_free runs for dev (once, however often it is
 * registered); NNCL_ERR_STATE when NNCL_DEVICE_ON_FREE are registered. */
nncl_status nncl__device_on_free(nncl_context *ctx, nncl_device *dev, void (*fn)(nncl_device *dev));

/* Where the next launch on dev stores its event: NULL unless profiling;
 * name (the kernel) goes into the per-kernel table. */
cl_event *nncl__profile_slot_named(nncl_device *dev, const char *name);
void nncl__profile_release(nncl_device *dev);

struct nncl_context {
    nncl_device *devices;
    int n_devices;
    nncl_config config;
    char *kernel_dir;         /* owned copy of the folder to load kernels from */
    /* message and the log callback are used under lock: the trainer's
     * device threads fail and log at once */
    pthread_mutex_t lock;
    /* Held by the public calls that launch kernels or change what the
     * devices hold (kernel objects take their arguments one launch at a
     * time; programs, GEMM choices and scratch, memory counts and a
     * trainer's buffers are shared): two threads on one context take
     * turns, call by call. Recursive, as such calls make others; a
     * trainer's device threads work inside the call that holds it and
     * never take it. */
    pthread_mutex_t use;
    pthread_cond_t idle;      /* with lock: a trainer being freed has no call in flight left */
    int lock_ready;
    uint64_t serial;          /* this context's number, never reused: keys the threads' messages */
    char message[NNCL_MSG_MAX]; /* the latest message of any thread */
};

/* nncl_init's work in this layer: the devices chosen, opened and logged.
 * nncl_init (src/gemm/tune.c) adds what the layers above do at opening. */
nncl_status nncl__context_open(const nncl_config *config, nncl_context **out);

/* Take and release ctx->use (nothing for a NULL context): around the body
 * of every public call that launches kernels or changes device state. */
void nncl__enter(nncl_context *ctx);
void nncl__leave(nncl_context *ctx);
/* st = call, under ctx's use lock (ctx evaluated once). */
#define NNCL_LOCKED(ctx, st, call)                                              \
    do {                                                                        \
        nncl_context *nncl_lc_ = (ctx);                                         \
        nncl__enter(nncl_lc_);                                                  \
        st = (call);                                                            \
        nncl__leave(nncl_lc_);                                                  \
    } while (0)

/* Device d of ctx, or NULL after recording an error (device.c, like
 * everything to the end of this section). */
nncl_device *nncl__device(nncl_context *ctx, int d);

/* Device buffers are allocated through these, so that memory use is known. */
nncl_status nncl__buffer_create(nncl_context *ctx, nncl_device *dev, size_t bytes, cl_mem *out);
/* The memory dev is taken to have: its own, or the context's cap where
 * that is lower (nncl_config.memory_cap). */
uint64_t nncl__device_memory_limit(const nncl_context *ctx, const nncl_device *dev);
/* "12.3 MiB" style text of a byte count for messages. */
const char *nncl__bytes_str(uint64_t bytes, char *buf, size_t len);
void nncl__buffer_release(nncl_device *dev, cl_mem mem, size_t bytes);

/* FNV-1a over n bytes, continuing from h (start: 0xCBF29CE484222325). */
uint64_t nncl__fnv1a(uint64_t h, const void *data, size_t n);
/* The cache folder ($NNCL_CACHE_DIR, else $XDG_CACHE_HOME/nncl, else
 * ~/.cache/nncl) into path, created when missing; 0 when there is none. */
int nncl__cache_dir(char *path, size_t size);
/* A file of dev's in the cache folder, named after a hash of dev's identity
 * (platform, device, vendor, driver, OpenCL and CLBlast versions), with the
 * given name prefix and extension; 0 when there is no folder. The identity
 * text itself, one field a line, for files that must check it. */
int nncl__device_cache_path(const nncl_device *dev, const char *prefix, const char *ext, char *path, size_t size);
void nncl__device_identity(const nncl_device *dev, char *out, size_t size);

/* ------------------------------------------------------------- tensors */

struct nncl_tensor {
    nncl_context *ctx;
    int device;
    int ndim;
    int shape[NNCL_MAX_DIMS];
    size_t numel;
    cl_mem mem;
};

struct nncl_event {
    nncl_context *ctx;
    cl_event ev;
};

/* Checks that t is a tensor of ctx; names the argument in the message. */
nncl_status nncl__check_tensor(nncl_context *ctx, const nncl_tensor *t, const char *arg);

/* ------------------------------------------------------------- kernels */

/* The program of cl/<family>.cl on dev, built on first use. */
nncl_status nncl__program(nncl_context *ctx, nncl_device *dev, const char *family, nncl_program **out);
/* Kernel `name` of cl/<family>.cl on dev, created once and cached on the
 * device: a device's kernels are used by one thread at a time. */
nncl_status nncl__kernel(nncl_context *ctx, nncl_device *dev, const char *family, const char *name, cl_kernel *out);
/* The same for a variant of the family built with extra options ("-DX=1"):
 * each distinct options string is its own program. */
nncl_status nncl__program_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                               nncl_program **out);
nncl_status nncl__kernel_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                              const char *name, cl_kernel *out);
/* One program of the families (comma-separated) not yet built on dev
 * with options, for a plan that will use them all: a program's build has
 * a cost of its own beside its source's (PoCL links its kernel library
 * into each), and so does every load of a cached one. Builds nothing when
 * fewer than two are missing (the first use builds one alone). */
nncl_status nncl__program_bundle(nncl_context *ctx, nncl_device *dev, const char *families, const char *options);
/* One program of cl/<family>.cl n times over, built with options (one
 * build, one load when cached, where n programs would each cost their own
 * in a CPU driver): instance i is the family's text after the -D options
 * of defines[i] as #defines and NNCL_SFX as _suffixes[i], which the family
 * (cl/gemm.cl) appends to its kernels' names. Found by no name: kernels
 * come from it through nncl__kslot_resolve_in. */
nncl_status nncl__program_instances(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                                    int n, const char *const *defines, const char *const *suffixes,
                                    nncl_program **out);
/* FNV-1a of family's program text, cl/common.cl included, as the device
 * would build it (NNCL_KERNEL_DIR honoured); 0 when it cannot be read. */
uint64_t nncl__program_hash(nncl_context *ctx, const char *family);
/* Releases every program and kernel of dev (nncl_free). */
void nncl__programs_release(nncl_device *dev);

/* The disk cache of built programs (binary_cache.c), used for drivers that
 * keep none of their own (config.binary_cache 0), always (1) or never (-1);
 * $NNCL_BINARY_CACHE overrides. load returns NULL on any miss or mismatch. */
int nncl__bcache_enabled(const nncl_context *ctx, const nncl_device *dev);
cl_program nncl__bcache_load(nncl_context *ctx, nncl_device *dev, const char *src, size_t len, const char *options);
void nncl__bcache_store(nncl_context *ctx, nncl_device *dev, const char *src, size_t len, const char *options,
                        cl_program prog);

/* Sets kernel arguments in order; the first failure is reported by launch. */
/* Looks kernel `name` of cl/<family>.cl up on dev (building the family when
 * it is not yet built) and asks its work-group limit. Not for a step. */
nncl_status nncl__kslot_resolve(nncl_context *ctx, nncl_device *dev, const char *family, const char *name,
                                nncl__kslot *out);
/* The same in the family's program built with extra options (variants). */
nncl_status nncl__kslot_resolve_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                                     const char *name, nncl__kslot *out);
/* The same for kernel `name` of program p (nncl__program_instances). */
nncl_status nncl__kslot_resolve_in(nncl_context *ctx, nncl_device *dev, nncl_program *p, const char *name,
                                   nncl__kslot *out);
/* Kernel look-ups by name and program builds on dev so far: a training
 * step must add none (tests read it). */
unsigned long nncl__kernel_lookups(const nncl_device *dev);

typedef struct nncl__args {
    nncl_context *ctx;
    cl_kernel kernel;
    size_t wg;                /* the kernel's work-group limit; 0: ask at launch */
    cl_uint index, bad_index;
    cl_int err;
    size_t too_big;           /* an offset or count past INT_MAX given (0: none): launch refuses */
    cl_uint too_big_index;
} nncl__args;
void nncl__args_begin(nncl__args *a, nncl_context *ctx, cl_kernel k);
/* The same from a resolved kernel (no query at launch). */
void nncl__args_begin_slot(nncl__args *a, nncl_context *ctx, const nncl__kslot *k);
void nncl__arg_mem(nncl__args *a, cl_mem m);
void nncl__arg_int(nncl__args *a, int v);
void nncl__arg_float(nncl__args *a, float v);
void nncl__arg_local(nncl__args *a, size_t bytes);
/* An element offset or count: kernels take them as int, so one past INT_MAX
 * is not passed but makes the launch fail with NNCL_ERR_INVALID_ARGUMENT
 * (never wrapped). nncl__arg_view passes its offset through this check. */
void nncl__arg_count(nncl__args *a, size_t v);
/* A view: its buffer, then its offset as a count. */
void nncl__arg_view(nncl__args *a, nncl__view v);
/* Enqueues without waiting; global sizes are rounded up to the local ones
 * (kernels check their bounds); a zero global size launches nothing. */
nncl_status nncl__launch(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global, const size_t *local);
/* n work items in groups of 64 (or the device's maximum when smaller). */
nncl_status nncl__launch_1d(nncl__args *a, nncl_device *dev, size_t n);
/* For kernels without bounds checks: groups of powers of two that divide
 * the global sizes, at most 64 work-items (or the device's maximum). Not
 * the driver's choice: PoCL builds a kernel again for each group size,
 * and its choice for a NULL local size follows each shape's divisors. */
nncl_status nncl__launch_exact(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global);
/* For kernels that check their bounds along dimension 0: groups of 64
 * work-items along it (or the kernel's maximum), the global size rounded
 * up, so one group size serves every shape and PoCL builds the kernel once. */
nncl_status nncl__launch_checked(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global);
/* Reduction kernels (cl/common.cl's group sums) work in local arrays of this
 * many floats; their work-groups never exceed it. Passed to every program
 * as -DNNCL_RED_WG (src/runtime/program.c). */
#define NNCL_RED_WG 256
/* One work-group per row of a [rows, cols] view: a power of two work-items,
 * enough for cols, at most NNCL_RED_WG and the kernel's limit on dev. */
nncl_status nncl__launch_rows(nncl__args *a, nncl_device *dev, size_t rows, size_t cols);
/* Column sums (nncl_sum_f32_axis0): 2-D groups of up to 16 columns along
 * dimension 0 and row lanes along dimension 1, one group high. */
nncl_status nncl__launch_cols(nncl__args *a, nncl_device *dev, size_t rows, size_t cols);

/* ------------------------------------------------------------- atomic files */
#include <stdio.h>

/* A file written under a temporary name in the target's folder and renamed
 * over the target only when complete, so a crash or a failed write never
 * leaves a half-written file (atomic_file.c). Open, write to f, then commit
 * (or abort); both release everything, also on failure. */
typedef struct nncl__afile {
    FILE *f;
    char *path;  /* the target */
    char *tmp;   /* the temporary name, removed unless renamed */
} nncl__afile;
nncl_status nncl__afile_open(nncl__afile *af, const char *path, const char *what);
nncl_status nncl__afile_commit(nncl__afile *af, const char *what);
void nncl__afile_abort(nncl__afile *af);
/* Reads the whole file at path into *data (freed with NNCL_FREE), its
 * length in *size; NNCL_ERR_IO naming the file when it cannot be read.
 * A pipe is read up to NNCL__STREAM_MAX bytes (stream_max for the _max
 * form), a device or other non-file is refused: nothing bounds them. */
#define NNCL__STREAM_MAX ((size_t)1 << 30)
nncl_status nncl__read_file(const char *path, unsigned char **data, size_t *size);
nncl_status nncl__read_file_max(const char *path, size_t stream_max, unsigned char **data, size_t *size);
/* The start of a parser's *_load (fn names it in messages): out (of
 * out_size bytes) checked and zeroed, path checked and read whole into
 * *data as nncl__read_file does. */
nncl_status nncl__load_file(const char *fn, const char *path, void *out, size_t out_size, unsigned char **data,
                            size_t *size);
/* Writes x with printf format fmt ("%.6g", ...) using '.' as the decimal
 * point whatever the C locale, "nan"/"inf"/"-inf" for non-finite values. */
void nncl__fmt_double(char *buf, size_t size, const char *fmt, double x);
/* strtod for text nncl wrote: '.' is the decimal point whatever the
 * locale (nncl__fmt_double's counterpart); *end as strtod sets it. */
double nncl__parse_double(const char *s, char **end);
/* A float as text that reads back as the same float (9 significant
 * digits: read as a double and rounded, as nncl__parse_float does, it is
 * the float again), '.' whatever the locale, "nan"/"inf"/"-inf". */
void nncl__fmt_float(char *buf, size_t size, float x);
/* The float nearest the number at s (nncl__parse_double rounded to float;
 * +-Inf beyond the float range); *end as strtod sets it. */
float nncl__parse_float(const char *s, char **end);

#endif /* NNCL_INTERNAL_H */
