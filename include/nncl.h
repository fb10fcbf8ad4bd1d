/* nncl.h - the whole public API of nncl, a tensor and neural-network library
 * that trains on any OpenCL device. Every fallible call returns nncl_status
 * (0 is OK); nncl_last_error() says what failed and where. Graph builders
 * return NULL and leave the message. MIT licence, see LICENSE. */
#ifndef NNCL_H
#define NNCL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE, for the progress output */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NNCL_STATIC)
#define NNCL_API static
#elif defined(_WIN32) && defined(NNCL_BUILD)
#define NNCL_API __declspec(dllexport)
#elif defined(__GNUC__) && defined(NNCL_BUILD)
#define NNCL_API __attribute__((visibility("default")))
#else
#define NNCL_API
#endif

#define NNCL_VERSION_MAJOR 0
#define NNCL_VERSION_MINOR 1
#define NNCL_VERSION_PATCH 0
#define NNCL_MAX_DIMS 4

/* ---------------------------------------------------------------- status */

typedef enum nncl_status {
    NNCL_OK = 0,
    NNCL_ERR_INVALID_ARGUMENT = -1, /* NULL pointer, bad size, bad option */
    NNCL_ERR_SHAPE = -2,            /* shapes do not fit together */
    NNCL_ERR_OUT_OF_MEMORY = -3,    /* host or device allocation failed, or a model or tensor
                                     * needs more than the 2^31-1 elements a kernel can address */
    NNCL_ERR_DEVICE = -4,           /* an OpenCL call failed */
    NNCL_ERR_BUILD = -5,            /* a kernel program did not build */
    NNCL_ERR_NO_DEVICE = -6,        /* no OpenCL device matches */
    NNCL_ERR_IO = -7,               /* a file could not be read or written */
    NNCL_ERR_FORMAT = -8,           /* a file or text is malformed */
    NNCL_ERR_UNSUPPORTED = -9,      /* the device or build lacks a feature */
    NNCL_ERR_BLAS = -10,            /* CLBlast reported an error */
    NNCL_ERR_NUMERIC = -11,         /* NaN or Inf where a number is needed */
    NNCL_ERR_STATE = -12            /* call not valid in the current state */
} nncl_status;

/* A short fixed name of the code ("invalid argument", ...). */
NNCL_API const char *nncl_status_str(nncl_status status);

typedef struct nncl_context nncl_context;

/* The message of the calling thread's last error on this context: what
 * failed and where (the OpenCL call and code, file:line, the build log), so
 * that threads sharing a context each read their own failure's words. A
 * thread keeps its messages of the last four contexts it failed on; on a
 * context where it has none it reads the context's latest, of any thread.
 * With ctx NULL: the last error of calls made without a context on this
 * thread. Never NULL. The string belongs to the calling thread and stays
 * unchanged until this thread calls nncl_last_error again. */
NNCL_API const char *nncl_last_error(const nncl_context *ctx);

enum { NNCL_LOG_ERROR = 0, NNCL_LOG_WARN = 1, NNCL_LOG_INFO = 2, NNCL_LOG_DEBUG = 3 };
typedef void (*nncl_log_fn)(void *user, int level, const char *message);

/* ---------------------------------------------------------------- devices */

typedef enum nncl_device_type {
    NNCL_DEVICE_CPU = 1,
    NNCL_DEVICE_GPU = 2,
    NNCL_DEVICE_ACCELERATOR = 4,
    NNCL_DEVICE_OTHER = 8
} nncl_device_type;

typedef struct nncl_device_info {
    int index;              /* position in the context (or in the full list) */
    int platform_index;     /* OpenCL platform number */
    char platform[96];      /* platform name, e.g. "Portable Computing Language" */
    char vendor[96];        /* device vendor */
    char name[128];         /* device name */
    char driver[64];        /* driver version */
    char cl_version[64];    /* device OpenCL version string */
    char pci_bus_id[32];    /* "0000:65:00.0" where the driver tells, else "" */
    nncl_device_type type;
    int compute_units;
    int clock_mhz;
    uint64_t global_mem;    /* bytes */
    uint64_t max_alloc;     /* largest single allocation, bytes */
    uint64_t local_mem;     /* bytes */
    int fp16;               /* half arithmetic (cl_khr_fp16) */
    int fp64;               /* double arithmetic */
} nncl_device_info;

/* Every device of every OpenCL platform present, whatever the selection.
 * Writes up to max entries; *count receives how many exist. */
NNCL_API nncl_status nncl_devices_list(nncl_device_info *out, int max, int *count);

/* ---------------------------------------------------------------- context */

/* Options for nncl_init(). Take nncl_config_default() and change fields, so
 * that new fields added later keep their defaults. */
typedef struct nncl_config {
    /* Device selection: comma-separated tokens, each an index into
     * nncl_devices_list(), "all", "gpu", "cpu", or a case-insensitive part of
     * a platform, vendor or device name ("pocl", "rusticl", "nvidia"),
     * optionally ":k" for the k-th match. NULL: $NNCL_DEVICES, and when that
     * is unset too, all GPUs, else the single fastest CPU device. */
    const char *devices;
    /* Folder holding the kernel sources (cl/NAME.cl) to use instead of the ones
     * built in (one that does not exist is refused by nncl_init()). NULL:
     * $NNCL_KERNEL_DIR, else built in. */
    const char *kernel_dir;
    /* NULL: no logging. A trainer over several devices calls it from its
     * device threads too, but never from two threads at once (calls are
     * serialised by the context); it must not call nncl functions on the
     * same context. */
    nncl_log_fn log;
    void *log_user;
    int log_level;          /* messages up to this level (NNCL_LOG_ERROR .. NNCL_LOG_DEBUG) reach log */
    int profiling;          /* create queues with profiling enabled */
    /* Disk cache of built kernels ($NNCL_CACHE_DIR, else ~/.cache/nncl):
     * 0 only for drivers without a cache of their own (not PoCL, not
     * NVIDIA), 1 always, -1 never. $NNCL_BINARY_CACHE overrides. */
    int binary_cache;
    /* GEMM tunings stored by nncl_tune_gemm() (same folder): 0 applies the
     * one stored for each device, 1 also tunes each device that has none
     * (about a minute per device, $NNCL_TUNE_SECONDS), -1 ignores them.
     * $NNCL_TUNE=1 or =0 overrides (as 1 or -1). */
    int gemm_tune;
    /* Device memory cap in bytes: every device is taken to have at most
     * this much (for tests, and for a device shared with other programs);
     * plans are sized and refused against it, and no buffer is allocated
     * past it. 0: $NNCL_MEMORY_CAP (bytes, or with a K, M or G suffix, of
     * 1024), else the device's own memory. */
    uint64_t memory_cap;
} nncl_config;

NNCL_API nncl_config nncl_config_default(void);
/* Threads: a context may be used from several threads at once. Calls that
 * launch kernels or change what a device holds (tensor creation and
 * release, eager ops, nncl_gemm, every trainer and model call, profiling,
 * tuning) take turns on it, one whole call at a time; for work that runs
 * side by side, give each thread a context of its own. A graph being
 * built, a dataset, a loader or a progress bar is one thread's at a time,
 * and nncl_free() comes after every other call on the context returned. */
NNCL_API nncl_status nncl_init(const nncl_config *config, nncl_context **out);
NNCL_API void nncl_free(nncl_context *ctx);

NNCL_API int nncl_device_count(const nncl_context *ctx);
NNCL_API nncl_status nncl_device_info_get(const nncl_context *ctx, int device, nncl_device_info *out);
/* Waits until all work queued on the device is done. */
NNCL_API nncl_status nncl_finish(nncl_context *ctx, int device);
/* Bytes of device memory that nncl holds on the device now, and at most. */
NNCL_API nncl_status nncl_device_memory(const nncl_context *ctx, int device, uint64_t *in_use, uint64_t *peak);

/* Tunes the matrix products (CLBlast SGEMM) for the device, for drivers
 * CLBlast has no tuned parameters for (PoCL, Mesa, new or embedded GPUs):
 * times a list of kernel parameter sets on the GEMM shapes of dense and
 * convolution layers for about seconds_budget seconds (<= 0: 60), keeps the
 * fastest whose results are right, applies it to the device for the whole
 * process, and stores it in the cache folder ($NNCL_CACHE_DIR, else
 * ~/.cache/nncl), keyed by device, driver and CLBlast version, so that
 * later nncl_init() calls apply it without tuning (see config.gemm_tune).
 * Call it before creating trainers on the device: their workspaces are
 * sized for the parameters in force. */
NNCL_API nncl_status nncl_tune_gemm(nncl_context *ctx, int device, double seconds_budget);

/* Kernel time accounting, for contexts created with config.profiling: from
 * start to stop, every kernel nncl queues on the device (GEMMs included) is
 * timed by its OpenCL profiling events. Drivers whose timestamps are not
 * plausible (zero, reversed, or more kernel time than wall time) are
 * reported as such rather than trusted. */
typedef struct nncl_profile_report {
    int launches;           /* kernels launched (those without timestamps too) */
    double kernel_seconds;  /* sum of their execution times */
    double span_seconds;    /* first start to last end on the device clock */
    int plausible;          /* 0: the driver's timestamps cannot be trusted */
} nncl_profile_report;

NNCL_API nncl_status nncl_profile_start(nncl_context *ctx, int device);
/* Waits for the device, then reports and stops. */
NNCL_API nncl_status nncl_profile_stop(nncl_context *ctx, int device, nncl_profile_report *out);
/* The time of the last profile_stop per kernel (CLBlast's GEMMs as
 * "clblast_sgemm"), the most time first: up to max entries into out, and
 * the number of distinct kernels as the result (0 without a report). */
#define NNCL_PROFILE_NAME 48
typedef struct nncl_profile_kernel {
    char name[NNCL_PROFILE_NAME]; /* the OpenCL kernel's function name */
    int launches;
    double seconds;               /* sum of their execution times */
} nncl_profile_kernel;
NNCL_API int nncl_profile_kernels(const nncl_context *ctx, int device, nncl_profile_kernel *out, int max);

/* ---------------------------------------------------------------- tensors */

/* A float32 tensor of 1 to 4 dimensions, row-major, on one device. */
typedef struct nncl_tensor nncl_tensor;
/* Completion of a non-blocking transfer. */
typedef struct nncl_event nncl_event;

NNCL_API nncl_status nncl_tensor_create(nncl_context *ctx, int device, int ndim, const int *shape,
                                        nncl_tensor **out);
NNCL_API void nncl_tensor_free(nncl_tensor *t);
NNCL_API int nncl_tensor_ndim(const nncl_tensor *t);
NNCL_API int nncl_tensor_dim(const nncl_tensor *t, int axis);
NNCL_API size_t nncl_tensor_numel(const nncl_tensor *t);
NNCL_API int nncl_tensor_device(const nncl_tensor *t);

/* Blocking transfers of exactly nncl_tensor_numel() floats. */
NNCL_API nncl_status nncl_tensor_write(nncl_tensor *t, const float *src, size_t count);
NNCL_API nncl_status nncl_tensor_read(const nncl_tensor *t, float *dst, size_t count);
/* Non-blocking: the host array must stay valid and untouched until the
 * event completes; wait with nncl_event_wait(), then nncl_event_free(). */
NNCL_API nncl_status nncl_tensor_write_async(nncl_tensor *t, const float *src, size_t count,
                                             nncl_event **done);
NNCL_API nncl_status nncl_tensor_read_async(const nncl_tensor *t, float *dst, size_t count,
                                            nncl_event **done);
NNCL_API nncl_status nncl_event_wait(nncl_event *ev);
NNCL_API void nncl_event_free(nncl_event *ev);
/* Copies between tensors of equal element count, on one device or two
 * (also of different platforms, through the host); dst == src does nothing. */
NNCL_API nncl_status nncl_tensor_copy(nncl_tensor *dst, const nncl_tensor *src);

/* ---------------------------------------------------------------- eager ops
 * Each queues kernels on the tensors' device and returns without waiting.
 * All tensors of one call must be of ctx and of one device. */

/* out = a op b; b has a's shape, or is a row vector [cols] broadcast over
 * the rows of a (a viewed as [numel/cols, cols]). out has a's shape. */
NNCL_API nncl_status nncl_add(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out);
NNCL_API nncl_status nncl_sub(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out);
NNCL_API nncl_status nncl_mul(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out);
/* out = alpha * x */
NNCL_API nncl_status nncl_scale(nncl_context *ctx, const nncl_tensor *x, float alpha, nncl_tensor *out);
NNCL_API nncl_status nncl_relu(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
NNCL_API nncl_status nncl_sigmoid(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
NNCL_API nncl_status nncl_tanh(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
/* gelu(x) = x/2 (1 + erf(x/sqrt 2)), the exact form */
NNCL_API nncl_status nncl_gelu(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
/* Over the last dimension (x viewed as [rows, cols]). */
NNCL_API nncl_status nncl_softmax(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
NNCL_API nncl_status nncl_log_softmax(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out);
/* x is [rows, cols]. axis 0 sums over the rows (out [cols]); axis 1 sums over
 * the columns (out [rows]). Mean divides by the count summed. */
NNCL_API nncl_status nncl_sum(nncl_context *ctx, const nncl_tensor *x, int axis, nncl_tensor *out);
NNCL_API nncl_status nncl_mean(nncl_context *ctx, const nncl_tensor *x, int axis, nncl_tensor *out);
/* c = alpha * op(a) op(b) + beta * c, all 2-D row-major; op transposes when
 * its flag is set. Runs the kernel chosen for the device and the shape:
 * nncl's own or CLBlast's, timed on the first call of a shape and stored
 * in the cache folder ($NNCL_GEMM forces one side). */
NNCL_API nncl_status nncl_gemm(nncl_context *ctx, int trans_a, int trans_b, float alpha,
                               const nncl_tensor *a, const nncl_tensor *b, float beta, nncl_tensor *c);

/* ---------------------------------------------------------------- interop */
/* For programs that run their own OpenCL work beside nncl's (and for
 * measuring nncl against raw OpenCL and CLBlast on the very same queue and
 * buffers). The OpenCL objects are given as void * so that this header
 * needs no OpenCL header; nncl owns them: do not release them. */

/* Device d's cl_platform_id, cl_device_id, cl_context and its in-order
 * cl_command_queue, the one nncl queues every launch of the device on. */
typedef struct nncl_opencl {
    void *platform, *device, *context, *queue;
} nncl_opencl;
NNCL_API nncl_status nncl_device_opencl(const nncl_context *ctx, int device, nncl_opencl *out);
/* The cl_mem of t's buffer (nncl_tensor_numel(t) floats); NULL for NULL. */
NNCL_API void *nncl_tensor_opencl(const nncl_tensor *t);
/* Writes count values of src into the first count 16-bit elements of t's
 * buffer as fp16 (store 1) or bf16 (store 2) bit patterns, rounded to
 * nearest even: the layout of half storage (count at most twice t's
 * element count). Blocking. */
NNCL_API nncl_status nncl_tensor_write_half(nncl_tensor *t, int store, const float *src, size_t count);
/* The name of the i-th kernel file built into the library ("common.cl",
 * "elementwise.cl", ...), or NULL past the last; file F.cl is family F. */
NNCL_API const char *nncl_kernel_family(int i);
/* The cl_program of cl/<family>.cl on device d as nncl builds and caches
 * it (cl/common.cl first, nncl's build options): built now unless built
 * before. For kernels of one's own (clCreateKernel on it). */
NNCL_API nncl_status nncl_kernel_program(nncl_context *ctx, int device, const char *family, void **program);

/* nncl's own GEMM variants on device d, those its timing chooses among
 * (nncl_gemm): how many, the name of variant i ("packed6x16v8", NULL when
 * there is no such variant) and whether it runs products of those
 * transpositions (1, else 0). */
NNCL_API int nncl_gemm_variant_count(nncl_context *ctx, int device);
NNCL_API const char *nncl_gemm_variant_name(nncl_context *ctx, int device, int variant);
NNCL_API int nncl_gemm_variant_takes(nncl_context *ctx, int device, int variant, int trans_a, int trans_b);
/* c = op(a) op(b) through own variant `variant` alone, packing included,
 * no choice made or stored: c [m,n] row-major from op(a) [m,k] and op(b)
 * [k,n] (a stored [k,m] when trans_a, b [n,k] when trans_b), the first
 * elements of the tensors' buffers, all three on one device. Queued. */
NNCL_API nncl_status nncl_gemm_variant_run(nncl_context *ctx, int variant, int trans_a, int trans_b, int m, int n,
                                           int k, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c);
/* The same product in half storage as training runs it: a, b and c hold
 * fp16 (store 1) or bf16 (store 2) elements (nncl_tensor_write_half),
 * panels and arithmetic fp32, on nncl's own kernels. Queued. */
NNCL_API nncl_status nncl_gemm_half(nncl_context *ctx, int store, int trans_a, int trans_b, int m, int n, int k,
                                    const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c);
/* What nncl_gemm runs for that shape on device: "clblast", an own
 * variant's name, or "" before a product of the shape chose one. */
NNCL_API const char *nncl_gemm_chosen(nncl_context *ctx, int device, int trans_a, int trans_b, int m, int n, int k);
/* 1 when a CLBlast tuning stored by nncl_tune_gemm is applied on device
 * (nncl_init applies it unless config.gemm_tune or $NNCL_TUNE says -1). */
NNCL_API int nncl_gemm_tuned(nncl_context *ctx, int device);

/* ---------------------------------------------------------------- graph */
/* A model is built once as a graph of inputs, parameters and ops, then
 * compiled into a plan per device (see the trainer). Builders return NULL on
 * error (a wrong shape names the node and both shapes) and leave the message
 * on the graph's context; passing a NULL input makes a builder return NULL
 * too, so a chain of calls can be checked once at the end. Batched nodes
 * have the batch as their first dimension; shapes given to nncl_input()
 * exclude it. Labels and indices travel as floats holding whole numbers.
 * Builders' names: the pointwise ops (arithmetic, activations, softmax)
 * are built by nncl_op_<op>, because nncl_<op> is the eager tensor op of
 * the same maths above (nncl_add on tensors, nncl_op_add on nodes); every
 * other builder (layers, losses, structural ops: nncl_linear, nncl_mse,
 * nncl_reshape) by nncl_<op>. New builders follow the same rule. */
typedef struct nncl_graph nncl_graph;
typedef struct nncl_node nncl_node;

typedef enum nncl_init_kind {
    NNCL_INIT_ZEROS = 0,
    NNCL_INIT_ONES,
    NNCL_INIT_UNIFORM,        /* U(-scale, scale) */
    NNCL_INIT_NORMAL,         /* N(0, scale^2) */
    NNCL_INIT_FAN_IN_UNIFORM  /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear/Conv default */
} nncl_init_kind;

/* ctx receives error messages (it may be NULL); seed drives initialisation. */
NNCL_API nncl_graph *nncl_graph_create(nncl_context *ctx, uint64_t seed);
NNCL_API void nncl_graph_free(nncl_graph *g);

/* An input fed every step, of per-sample shape (ndim 0 for one number per
 * sample, such as a class label). */
NNCL_API nncl_node *nncl_input(nncl_graph *g, const char *name, int ndim, const int *sample_shape);
/* A parameter named as PyTorch would name it ("fc1.weight"). */
NNCL_API nncl_node *nncl_param(nncl_graph *g, const char *name, int ndim, const int *shape, nncl_init_kind init,
                               float scale);
/* Frozen parameters get no update and no gradient work. Before any plan. */
NNCL_API nncl_status nncl_param_freeze(nncl_graph *g, nncl_node *param, int frozen);
/* Marks node n as a gradient checkpoint boundary for trainers with
 * checkpoint = NNCL_CHECKPOINT_MARKED: its value is kept from forward to
 * backward, and the forward of the segment between it and the previous
 * boundary runs again in backward. A parameter, an input, a loss, or a
 * node of another graph is refused (NNCL_ERR_INVALID_ARGUMENT naming it). */
NNCL_API nncl_status nncl_checkpoint_mark(nncl_graph *g, nncl_node *n);
/* Whether the optimizer's weight_decay applies to this parameter (default 1: every parameter
 * decays); nanoGPT decays 2-D weights only. Before any plan; saved in the model description. */
NNCL_API nncl_status nncl_param_decay(nncl_graph *g, nncl_node *param, int decay);

/* Elementwise: b of a's shape, or a vector of a's last dimension, or (add, sub, mul) an unbatched b
 * of a's per-sample shape, shared by every sample (learned positions [T, C] added to [B, T, C]):
 * its gradient is summed over the batch. */
NNCL_API nncl_node *nncl_op_add(nncl_graph *g, nncl_node *a, nncl_node *b);
NNCL_API nncl_node *nncl_op_sub(nncl_graph *g, nncl_node *a, nncl_node *b);
NNCL_API nncl_node *nncl_op_mul(nncl_graph *g, nncl_node *a, nncl_node *b);
NNCL_API nncl_node *nncl_op_scale(nncl_graph *g, nncl_node *x, float alpha);
NNCL_API nncl_node *nncl_op_relu(nncl_graph *g, nncl_node *x);
NNCL_API nncl_node *nncl_op_leaky_relu(nncl_graph *g, nncl_node *x, float slope);
NNCL_API nncl_node *nncl_op_sigmoid(nncl_graph *g, nncl_node *x);
NNCL_API nncl_node *nncl_op_tanh(nncl_graph *g, nncl_node *x);
NNCL_API nncl_node *nncl_op_gelu(nncl_graph *g, nncl_node *x);
/* PyTorch's GELU(approximate='tanh'), SiLU, ELU(alpha) (its default alpha is 1), Softplus() */
NNCL_API nncl_node *nncl_op_gelu_tanh(nncl_graph *g, nncl_node *x); /* x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
NNCL_API nncl_node *nncl_op_silu(nncl_graph *g, nncl_node *x); /* x sigmoid(x) */
NNCL_API nncl_node *nncl_op_elu(nncl_graph *g, nncl_node *x, float alpha); /* x > 0 ? x : alpha (exp(x) - 1) */
NNCL_API nncl_node *nncl_op_softplus(nncl_graph *g, nncl_node *x); /* log(1 + exp(x)); x where x > 20 */
/* MobileNet's activations, PyTorch's ReLU6, Hardswish, Hardsigmoid and
 * clamp, with PyTorch's gradients at the kinks (given after each ;). */
NNCL_API nncl_node *nncl_op_relu6(nncl_graph *g, nncl_node *x); /* min(max(x, 0), 6); 0 at x = 0 and 6 */
NNCL_API nncl_node *nncl_op_hardswish(nncl_graph *g, nncl_node *x); /* x relu6(x + 3) / 6; x/3 + 1/2 at -3 and 3 */
NNCL_API nncl_node *nncl_op_hardsigmoid(nncl_graph *g, nncl_node *x); /* relu6(x + 3) / 6; 0 at -3 and 3 */
/* min(max(x, min), max) for finite bounds; gradient 1 at both bounds */
NNCL_API nncl_node *nncl_op_clamp(nncl_graph *g, nncl_node *x, float min, float max);
/* Over the last dimension. */
NNCL_API nncl_node *nncl_op_softmax(nncl_graph *g, nncl_node *x);
NNCL_API nncl_node *nncl_op_log_softmax(nncl_graph *g, nncl_node *x);

/* Activation fused into a layer's output (applied after the bias). */
typedef enum nncl_act { NNCL_ACT_NONE = 0, NNCL_ACT_RELU, NNCL_ACT_SIGMOID, NNCL_ACT_TANH } nncl_act;

/* y = act(x W^T + b) over the last dimension of x, W [out, in] as in
 * PyTorch; creates NAME.weight and (with bias) NAME.bias. */
NNCL_API nncl_node *nncl_linear(nncl_graph *g, nncl_node *x, int out_features, int bias, nncl_act act,
                                const char *name);
/* NCHW convolution, square kernel; creates NAME.weight [out, in, k, k] and
 * NAME.bias. */
NNCL_API nncl_node *nncl_conv2d(nncl_graph *g, nncl_node *x, int out_channels, int kernel, int stride, int padding,
                                int bias, nncl_act act, const char *name);
/* PyTorch's Conv2d of any geometry: y[b,o] = b[o] + sum over the C/G
 * channels c of o's group g = o/(O/G) and taps (i,j) of
 * w[o,c,i,j] x[b, g C/G + c, oh sh - ph + i dh, ow sw - pw + j dw] (zero
 * outside x), then act; OH = (H + 2 ph - dh (kh - 1) - 1) / sh + 1.
 * Depthwise: groups == C. NAME.weight [O, C/groups, kh, kw], NAME.bias [O]. */
typedef struct nncl_conv2d_options {
    int kernel_h, kernel_w;     /* default 3x3 */
    int stride_h, stride_w;     /* default 1 */
    int padding_h, padding_w;   /* zeros; default 0 */
    int dilation_h, dilation_w; /* default 1 */
    int groups;                 /* default 1; C and out_channels multiples of it */
    int bias;                   /* default 1 */
    nncl_act act;               /* default NNCL_ACT_NONE */
} nncl_conv2d_options;
NNCL_API nncl_conv2d_options nncl_conv2d_default(void);
/* With groups 1, dilation 1, a square kernel and one stride and padding,
 * the node is nncl_conv2d's (its paths timed per layer); else direct. */
NNCL_API nncl_node *nncl_conv2d_ex(nncl_graph *g, nncl_node *x, int out_channels, const nncl_conv2d_options *opts,
                                   const char *name);
/* PyTorch's Conv1d over x [B, C, L]: conv2d_ex with H = 1; NAME.weight
 * [O, C/groups, kernel]; L_out = (L + 2 padding - dilation (kernel - 1) - 1) / stride + 1. */
typedef struct nncl_conv1d_options {
    int kernel;   /* default 3 */
    int stride;   /* default 1 */
    int padding;  /* default 0 */
    int dilation; /* default 1 */
    int groups;   /* default 1 */
    int bias;     /* default 1 */
    nncl_act act; /* default NNCL_ACT_NONE */
} nncl_conv1d_options;
NNCL_API nncl_conv1d_options nncl_conv1d_default(void);
NNCL_API nncl_node *nncl_conv1d(nncl_graph *g, nncl_node *x, int out_channels, const nncl_conv1d_options *opts,
                                const char *name);
/* PyTorch's ConvTranspose2d (dilation 1): the adjoint of conv2d_ex in x,
 * y[b,o,ih sh - ph + i, iw sw - pw + j] += w[c,o',i,j] x[b,c,ih,iw] for the
 * outputs o = g O/G + o' of c's group g, then bias and act;
 * OH = (H - 1) sh - 2 ph + kh + output_padding_h. NAME.weight
 * [C, O/groups, kh, kw], NAME.bias [O]. */
typedef struct nncl_conv_transpose2d_options {
    int kernel_h, kernel_w;                 /* default 3x3 */
    int stride_h, stride_w;                 /* default 1 */
    int padding_h, padding_w;               /* default 0 */
    int output_padding_h, output_padding_w; /* default 0; below the stride */
    int groups;                             /* default 1 */
    int bias;                               /* default 1 */
    nncl_act act;                           /* default NNCL_ACT_NONE */
} nncl_conv_transpose2d_options;
NNCL_API nncl_conv_transpose2d_options nncl_conv_transpose2d_default(void);
NNCL_API nncl_node *nncl_conv_transpose2d(nncl_graph *g, nncl_node *x, int out_channels,
                                          const nncl_conv_transpose2d_options *opts, const char *name);
/* PyTorch's Upsample(scale_factor=(factor_h, factor_w)) of [B,C,H,W] to
 * [B,C,H fh,W fw]: nearest (bilinear 0), output o reads input o / f; or
 * bilinear with align_corners=False, between the inputs around
 * max((o + 0.5) / f - 0.5, 0), the last row and column repeated. */
NNCL_API nncl_node *nncl_upsample2d(nncl_graph *g, nncl_node *x, int factor_h, int factor_w, int bilinear);
NNCL_API nncl_node *nncl_maxpool2d(nncl_graph *g, nncl_node *x, int kernel, int stride, int padding);
/* Padding counts in the divisor (PyTorch's count_include_pad=True). */
NNCL_API nncl_node *nncl_avgpool2d(nncl_graph *g, nncl_node *x, int kernel, int stride, int padding);
/* [B, C, H, W] -> [B, C] */
NNCL_API nncl_node *nncl_global_avgpool(nncl_graph *g, nncl_node *x);
/* Over the batch (and H, W for 4-D input) per channel: batch statistics in
 * training, running statistics in evaluation. Creates NAME.weight,
 * NAME.bias, NAME.running_mean, NAME.running_var. */
NNCL_API nncl_node *nncl_batchnorm(nncl_graph *g, nncl_node *x, float momentum, float eps, const char *name);
/* The activation of nncl_batchnorm_act, PyTorch's ReLU, ReLU6 and Hardswish
 * (as nncl_op_relu, nncl_op_relu6, nncl_op_hardswish). */
typedef enum nncl_bn_act {
    NNCL_BN_ACT_NONE = 0, NNCL_BN_ACT_RELU, NNCL_BN_ACT_RELU6, NNCL_BN_ACT_HARDSWISH
} nncl_bn_act;
/* act(batchnorm(x)) in one node, the same values and gradients as
 * nncl_batchnorm and the activation's op, in fewer passes over the
 * activations (NNCL_BN_FUSE=0: as many as those ops). Parameters and
 * running statistics as nncl_batchnorm's, under NAME. A trainer's plan
 * makes this node itself of nncl_batchnorm followed by the activation's op
 * (and nncl_op_add) where the inner values have no other reader. */
NNCL_API nncl_node *nncl_batchnorm_act(nncl_graph *g, nncl_node *x, nncl_bn_act act, float momentum, float eps,
                                       const char *name);
/* act(batchnorm(x) + residual) in one node, as nncl_batchnorm_act with
 * nncl_op_add before the activation; residual has x's shape and must not
 * be NULL (a NULL from a failed builder is refused, not taken as none). */
NNCL_API nncl_node *nncl_batchnorm_add_act(nncl_graph *g, nncl_node *x, nncl_node *residual, nncl_bn_act act,
                                           float momentum, float eps, const char *name);
/* Over the last dimension, with NAME.weight and NAME.bias. */
NNCL_API nncl_node *nncl_layernorm(nncl_graph *g, nncl_node *x, float eps, const char *name);
/* PyTorch's GroupNorm over x [B, C, ...]: each sample's C/groups channels
 * of a group normalised by their mean and biased variance,
 * y = (x - mean) / sqrt(var + eps) (* NAME.weight[c] + NAME.bias[c], ones
 * and zeros, when affine); the same in training and evaluation. */
NNCL_API nncl_node *nncl_groupnorm(nncl_graph *g, nncl_node *x, int groups, float eps, int affine, const char *name);
/* PyTorch's InstanceNorm (no running statistics): groupnorm with one
 * channel per group. */
NNCL_API nncl_node *nncl_instancenorm(nncl_graph *g, nncl_node *x, float eps, int affine, const char *name);
/* Zeroes each element with probability p and scales the rest by 1/(1-p) in
 * training; the identity in evaluation. Seeded by the graph's seed. */
NNCL_API nncl_node *nncl_dropout(nncl_graph *g, nncl_node *x, float p);
/* Rows of NAME.weight [num, dim] picked by the whole-number indices in x.
 * Fed indices that are not whole numbers in 0..num-1 are refused by the
 * step and predict (NNCL_ERR_INVALID_ARGUMENT); an index the graph computes
 * picks a row of NaN. */
NNCL_API nncl_node *nncl_embedding(nncl_graph *g, nncl_node *indices, int num, int dim, const char *name);
/* New per-sample shape of the same element count; flatten keeps the batch. */
NNCL_API nncl_node *nncl_reshape(nncl_graph *g, nncl_node *x, int ndim, const int *sample_shape);
NNCL_API nncl_node *nncl_flatten(nncl_graph *g, nncl_node *x);
/* Joins along a per-sample axis (0 is the first dimension after the batch). */
NNCL_API nncl_node *nncl_concat(nncl_graph *g, nncl_node *a, nncl_node *b, int axis);
/* c = op(a) x op(b), batched over the leading dimensions: a [B, .., M, K] (K, M with transpose_a),
 * b [B, .., K, N] (N, K with transpose_b), c [B, .., M, N]. b may be an unbatched node (a parameter
 * [K, N] or [.., K, N], its leading dimensions the last of a's), shared by every sample: this is how
 * weights are shared (weight tying); its gradient sums over every use. */
NNCL_API nncl_node *nncl_matmul(nncl_graph *g, nncl_node *a, nncl_node *b, int transpose_a, int transpose_b);
/* Swaps two per-sample axes (0 is the first after the batch; negative count from the end). */
NNCL_API nncl_node *nncl_transpose(nncl_graph *g, nncl_node *x, int axis0, int axis1);
/* x[..., start:start+length, ...] along one per-sample axis (q, k, v out of one projection). */
NNCL_API nncl_node *nncl_slice(nncl_graph *g, nncl_node *x, int axis, int start, int length);
/* y = x / sqrt(mean(x^2) + eps) * weight over the last axis; parameter NAME.weight (ones). */
NNCL_API nncl_node *nncl_rmsnorm(nncl_graph *g, nncl_node *x, float eps, const char *name);
/* Layer norm over the last axis with bias 1 (nncl_layernorm) or 0 (nanoGPT's LayerNorm(bias=False):
 * y = (x - mean) / sqrt(var + eps) * weight, NAME.weight only). */
NNCL_API nncl_node *nncl_layernorm_ex(nncl_graph *g, nncl_node *x, float eps, int bias, const char *name);
/* Fused causal self-attention: q, k, v [B, T, C], C = n_heads * head_dim
 * (head_dim at most 128); per head softmax(q k^T / sqrt(head_dim) + causal
 * mask) v, dropout p on the weights (training only, counter-based as
 * nncl_dropout's: a step is reproducible), output [B, T, C] (heads
 * concatenated back along C, as PyTorch's view/transpose does). */
NNCL_API nncl_node *nncl_causal_attention(nncl_graph *g, nncl_node *q, nncl_node *k, nncl_node *v,
                                          int n_heads, float dropout);

/* Recurrent layers over x [B, T, F] (batch first), `layers` stacked, initial state zero, output the
 * hidden state of every step of the last layer [B, T, hidden]. Per layer l: NAME.weight_ih_l<l>
 * [G*hidden, F or hidden], NAME.weight_hh_l<l> [G*hidden, hidden], NAME.bias_ih_l<l>,
 * NAME.bias_hh_l<l> [G*hidden], PyTorch's names and gate order (its nn.LSTM / nn.GRU state dict loads),
 * initialised U(-1/sqrt(hidden), 1/sqrt(hidden)); per layer the product x W_ih^T of all steps, then the
 * recurrence as one fused node (NNCL_RNN=graph: built from graph ops, unrolled), the nodes named
 * NAME:lstm.ID (NAME:gru.ID), which the summary shows as one row. */
/* LSTM, G = 4 (i, f, g, o): [i f g o] = x W_ih^T + b_ih + h W_hh^T + b_hh, i, f, o sigmoid, g tanh,
 * c' = f c + i g, h' = o tanh(c'). */
NNCL_API nncl_node *nncl_lstm(nncl_graph *g, nncl_node *x, int hidden, int layers, const char *name);
/* GRU, G = 3 (r, z, n): r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z likewise,
 * n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h. */
NNCL_API nncl_node *nncl_gru(nncl_graph *g, nncl_node *x, int hidden, int layers, const char *name);
/* The last step of a sequence [B, T, H] as [B, H]: seq[:, T-1, :] (a slice and a reshape). */
NNCL_API nncl_node *nncl_rnn_last(nncl_graph *g, nncl_node *seq);

/* Losses: scalar means over the batch. labels hold class indices. */
NNCL_API nncl_node *nncl_softmax_cross_entropy(nncl_graph *g, nncl_node *logits, nncl_node *labels);
NNCL_API nncl_node *nncl_bce_with_logits(nncl_graph *g, nncl_node *logits, nncl_node *targets);
NNCL_API nncl_node *nncl_mse(nncl_graph *g, nncl_node *pred, nncl_node *target);
/* Mean over all tokens whose label != ignore_index of -log softmax(logits)[label]:
 * logits [B, T, V] (any [B, .., V]), labels [B, T] (the logits' shape without V); fused with its
 * softmax. No counted token (the whole batch ignored): loss 0 and zero gradients. Data parallel,
 * it is the mean over all devices' tokens when every sample counts as many tokens. */
NNCL_API nncl_node *nncl_sequence_cross_entropy(nncl_graph *g, nncl_node *logits, nncl_node *labels,
                                                int ignore_index);

/* Looks a node up by name (parameters, inputs). */
NNCL_API nncl_node *nncl_graph_find(const nncl_graph *g, const char *name);
/* Per-sample (batched) or full shape of a node; returns ndim. */
NNCL_API int nncl_node_shape(const nncl_node *n, int *shape);

/* ---------------------------------------------------------------- training */

typedef enum nncl_optimizer { NNCL_OPT_SGD = 0, NNCL_OPT_ADAM, NNCL_OPT_ADAMW, NNCL_OPT_RMSPROP } nncl_optimizer;
/* WARMUP_COSINE is nanoGPT's get_lr, W = warmup_steps, T = total_steps (its lr_decay_iters):
 * t < W: lr (t+1)/(W+1); t > T: min_lr; else min_lr + (lr - min_lr)(1 + cos(pi (t-W)/(T-W)))/2.
 * COSINE with warmup_steps instead multiplies the unshifted cosine by min(1, (t+1)/W). */
typedef enum nncl_schedule {
    NNCL_SCHED_CONSTANT = 0,
    NNCL_SCHED_STEP,
    NNCL_SCHED_COSINE,
    NNCL_SCHED_WARMUP_COSINE
} nncl_schedule;

/* Optimizer and learning-rate schedule; the meaning of every field follows
 * PyTorch's optimizer of the same name. nncl_optim_default() gives
 * PyTorch's defaults for each kind. */
typedef struct nncl_optim_config {
    nncl_optimizer kind;
    float lr;
    float momentum;        /* SGD momentum; RMSprop momentum */
    int nesterov;          /* SGD */
    float dampening;       /* SGD */
    float weight_decay;    /* L2 added to the gradient (AdamW: decoupled) */
    float beta1, beta2;    /* Adam, AdamW */
    float eps;             /* Adam, AdamW, RMSprop */
    float alpha;           /* RMSprop smoothing */
    /* Schedule, evaluated per step on the host: lr(t) = lr * factor(t). */
    nncl_schedule schedule;
    int step_size;         /* STEP: multiply by gamma every step_size steps */
    float gamma;
    int total_steps;       /* COSINE: steps to anneal from lr to min_lr; WARMUP_COSINE: the step it ends */
    float min_lr;
    int warmup_steps;      /* linear warm-up from 0 over this many steps (any schedule; WARMUP_COSINE: its own) */
    float clip_norm;       /* clip gradients to this global L2 norm; 0: off */
} nncl_optim_config;

NNCL_API nncl_optim_config nncl_optim_default(nncl_optimizer kind);
/* The learning rate the schedule gives at step t (0-based). */
NNCL_API float nncl_optim_lr(const nncl_optim_config *o, int64_t t);

/* Storage precision of a trainer (nncl_train_config.precision). */
typedef enum nncl_precision { NNCL_PRECISION_FP32 = 0, NNCL_PRECISION_FP16, NNCL_PRECISION_BF16 } nncl_precision;

/* Options for a trainer. Take nncl_train_default() and change fields. */
/* Gradient checkpointing (nncl_train_config.checkpoint). */
typedef enum nncl_checkpoint {
    NNCL_CHECKPOINT_NONE = 0,   /* every activation kept for backward */
    NNCL_CHECKPOINT_AUTO = 1,   /* about sqrt(n) boundaries placed for the least plan memory (none if that is least) */
    NNCL_CHECKPOINT_MARKED = 2  /* the boundaries marked with nncl_checkpoint_mark() */
} nncl_checkpoint;

typedef struct nncl_train_config {
    int max_batch;             /* largest global batch a step gets */
    nncl_optim_config optim;
    /* Devices of the context to train on (indices), NULL: all of them. */
    const int *devices;
    int n_devices;
    /* Fixed relative shard weights (one per device, finite and > 0), NULL:
     * measure each device's throughput and keep re-measuring while training. */
    const float *shares;
    int rebalance_every;       /* steps between re-measurements (default 1); 0: never */
    int overlap;               /* read gradients back layer by layer during backward */
    /* Storage of activations, their gradients and the working copy of the
     * weights; master weights, optimizer state, averaged gradients and all
     * arithmetic stay fp32. An op without half storage is refused at
     * creation (NNCL_ERR_UNSUPPORTED naming it). */
    nncl_precision precision;
    /* Dynamic loss scaling with PyTorch GradScaler's rules: the backward
     * pass starts from the loss times the scale; a step whose gradient
     * holds an Inf or NaN is skipped on every device and rank and halves
     * the scale; growth_interval clean steps in a row double it. The
     * scale stays in [NNCL_LOSS_SCALE_MIN, NNCL_LOSS_SCALE_MAX], so 1/scale
     * is finite, and a step is also skipped when its unscaled gradient
     * would overflow. The unscaling is fused into the optimizer's pass.
     * 0: on with FP16, off otherwise; 1: on; -1: off. */
    int loss_scaling;
    float loss_scale_init;     /* 0: 65536 (2^16); else in [NNCL_LOSS_SCALE_MIN, NNCL_LOSS_SCALE_MAX] */
    int loss_scale_growth_interval; /* 0: 2000 */
    /* Gradient checkpointing: keep the values of a few boundaries of the
     * forward pass and recompute the rest of each segment's forward in its
     * backward, each value just before it is needed (bit-identical: dropout masks from the same
     * counters, batch norm from the batch statistics it saved, running
     * statistics moved once). Less activation memory for about one more
     * forward pass. */
    nncl_checkpoint checkpoint;
    /* Pipeline (model) parallelism, fp32: 1 cuts the graph up to the loss
     * into one contiguous stage per device (the planner picks the cuts and
     * the order of the devices so that every stage fits its device's memory
     * and the slowest stage is as fast as it can be, from each layer's
     * forward and backward timed on each device at creation, or with shares
     * given from its arithmetic over the device's share); each stage holds only
     * its own parameters, gradients and optimizer state. The global batch
     * goes through in micro_batches parts in the order pipe_schedule gives (a
     * stage recomputing a part's forward from its saved input before its
     * backward when its last forward was another's); activations at a cut
     * and their gradients pass through pinned host memory, each copy
     * running while its stage goes on computing. The gradients are accumulated
     * over the parts weighted by their size and each stage steps once per
     * global batch: the same as one device on the whole batch (mean loss).
     * Clipping by global norm, the NaN/Inf skip and loss scaling decide
     * over all stages at once. Batch norm computes its statistics per
     * micro-batch and moves its running statistics once per micro-batch.
     * Dropout draws other masks than one device's. A stage's device that
     * fails ends the step with NNCL_ERR_DEVICE naming it and changes
     * nothing (create the trainer again from the last checkpoint); predict,
     * evaluate and fit are refused (NNCL_ERR_UNSUPPORTED: load the
     * parameters into a trainer without pipeline). -1: data parallel
     * where the model fits every device, else (a device's plan refused for
     * memory) a pipeline over the devices; with arrangement 0 and a model
     * that fits, the pipeline is then also timed against data parallelism
     * and kept when it is faster (then refusing predict, evaluate and fit,
     * as above: leave pipeline 0 for a trainer that needs them). */
    int pipeline;
    int micro_batches;         /* parts of the global batch, 0: 4 (at most the batch) */
    /* n_devices - 1 node names, each the last node of a stage (a node
     * whose value alone crosses to the nodes after it), in graph order, the
     * stages then on the devices in the order given; NULL: the planner
     * chooses. */
    const char *const *cuts;
    /* The order of a pipeline's work (nncl_pipe_schedule). */
    int pipe_schedule;
    /* How the devices work (nncl_arrangement), 0: measured at creation (a
     * few untimed and timed passes on zeros of the full batch, nothing
     * learnt from them): every device alone, data parallelism over the 2,
     * 3, .. devices fastest alone (with their gradients' exchange; the
     * update, which each arrangement runs, untimed), and with pipeline -1 the
     * pipeline too; the fastest is kept, so a trainer over several devices
     * is not slower than its fastest device alone as far as those passes
     * tell, and the step info says which and the seconds each took (fixed
     * shares: data parallel, unmeasured). Any other value forces it, unmeasured:
     * NNCL_ARRANGE_ONE the first device listed alone, NNCL_ARRANGE_DATA
     * data parallelism over every device, NNCL_ARRANGE_PIPELINE as
     * pipeline 1. */
    int arrangement;
} nncl_train_config;

/* nncl_train_config.pipe_schedule. 1F1B: each stage runs K-1-s forwards (s its
 * place, K stages), then alternates one backward and one forward, then the
 * remaining backwards, so the values held at a cut (host staging of the
 * micro-batches not yet back) are at most K-s micro-batches, against
 * GPipe's M. The two sum the micro-batches' gradients in other orders, so
 * they agree to fp32 rounding, not bit for bit (tests/test_pipeline.c holds
 * both to one device within 2e-4 relative after 5 Adam steps). */
typedef enum nncl_pipe_schedule {
    NNCL_PIPE_1F1B = 0,    /* one forward, one backward (the default) */
    NNCL_PIPE_GPIPE = 1    /* every micro-batch forward, then every one backward */
} nncl_pipe_schedule;

/* The range of the dynamic loss scale: halving stops at the floor, doubling
 * at the ceiling (2^-64 and 2^64). */
#define NNCL_LOSS_SCALE_MIN 5.42101086242752217e-20f /* 2^-64: no hex floats, for C++11 */
#define NNCL_LOSS_SCALE_MAX 18446744073709551616.0f

NNCL_API nncl_train_config nncl_train_default(void);

typedef struct nncl_trainer nncl_trainer;

/* What nncl_train_max_batch found. */
typedef struct nncl_batch_fit {
    int batch;                 /* the largest global batch that fits every device; 0: not even 1 */
    int device;                /* context index of the device that limits it (the most loaded one) */
    uint64_t need_bytes;       /* that device's plan at batch (0 when batch is 0: at 1) */
    uint64_t have_bytes;       /* its memory (or the cap) less what nncl holds there, less the margin */
    int segments;              /* checkpoint segments of that plan (1: none) */
    /* That plan's activation memory: the most bytes of activations (values
     * kept for backward, their recomputed copies, saved statistics) live
     * at one step, gradients and workspace apart. */
    uint64_t activation_bytes;
} nncl_batch_fit;

/* The memory margin nncl_train_max_batch leaves free on each device: this
 * fraction of its memory (or the cap), for what the driver keeps (the GEMM
 * workspaces, sized exactly only when a plan times its kernels, are
 * counted in a plan's need by a bound: the most each op declares it can
 * take). */
#define NNCL_FIT_MARGIN 0.10

/* One host array per input node, of batch samples. */
typedef struct nncl_feed {
    nncl_node *node;
    const float *data;
} nncl_feed;

typedef struct nncl_step_info {
    float loss;                /* batch mean */
    /* 1: NaN/Inf in the gradient or the statistics: parameters, optimizer
     * state, running statistics and counts are as before, on every device */
    int skipped;
    int n_devices;             /* devices that computed a shard and are still training at the step's end */
    int failed_device;         /* context index of a device that failed and left, else -1 */
    double exchange_seconds;   /* time in the gradient exchange */
    double seconds;            /* the whole step */
    /* Loss scaling: the scale this step's backward used (1 without
     * scaling), and 1 when the step was skipped for an Inf/NaN in the
     * scaled gradient (the scale was then halved). */
    float loss_scale;
    int overflow;
    /* How the step ran (nncl_arrangement) and why: one device (the only
     * one, the others failed, or it alone was measured faster at creation
     * than the devices together), data parallel, or a pipeline. */
    int arrangement;
    char arrangement_why[128];
} nncl_step_info;

/* nncl_step_info.arrangement. */
typedef enum nncl_arrangement {
    NNCL_ARRANGE_ONE = 1,      /* one device trains alone */
    NNCL_ARRANGE_DATA = 2,     /* data parallel: every device its shard of the batch */
    NNCL_ARRANGE_PIPELINE = 3  /* pipeline stages (nncl_train_config.pipeline) */
} nncl_arrangement;

/* Compiles the graph for every chosen device, initialises the parameters
 * from the graph's seed (the same on every device) and the optimizer. */
NNCL_API nncl_status nncl_trainer_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss,
                                         const nncl_train_config *cfg, nncl_trainer **out);
/* Threads may share a trainer call by call (the context takes turns), but
 * nncl_trainer_free must not overlap any other call on it, nor be made
 * from a callback of one (it would wait for itself). What is cheap to
 * catch is caught: a step, predict, evaluate or fit already begun is
 * waited for, and one begun (or still waiting for its turn) while the free
 * waits returns NNCL_ERR_STATE without touching the trainer again; a call
 * made after nncl_trainer_free returned uses freed memory. */
NNCL_API void nncl_trainer_free(nncl_trainer *t);
/* The largest global batch (1 .. limit; limit <= 0: 65536) a trainer of
 * config cfg (its devices, precision, optimizer and checkpointing; its
 * max_batch ignored) could take: every device's plan, which holds the
 * whole batch, planned on the host (nothing allocated, no kernel built)
 * within that device's memory (or the cap) less what nncl holds there and
 * NNCL_FIT_MARGIN of it. out->batch 0: not even one sample fits. It lays
 * the graph's parameters out as a trainer does: freeze parameters before. */
NNCL_API nncl_status nncl_train_max_batch(nncl_context *ctx, nncl_graph *g, nncl_node *loss,
                                          const nncl_train_config *cfg, int limit, nncl_batch_fit *out);
/* One optimisation step on a global batch, split over the devices. Every
 * feed is checked before any device works (a node of this graph, an input,
 * fed once, data not NULL; class labels and embedding indices in range):
 * a bad feed is NNCL_ERR_INVALID_ARGUMENT naming the node and changes
 * nothing. Only a device's own failure (OpenCL, CLBlast, device memory)
 * makes it leave; the step is then redone on the others. */
NNCL_API nncl_status nncl_trainer_step(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch,
                                       nncl_step_info *info);
/* Evaluation-mode forward on batch samples; copies node out's values
 * (batch x per-sample size floats) to dst. Feeds are checked as the
 * step's are. */
NNCL_API nncl_status nncl_trainer_predict(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch,
                                          nncl_node *out, float *dst);
/* Mean loss and accuracy (argmax of logits == label) over n samples in
 * evaluation mode, in batches of at most max_batch. */
NNCL_API nncl_status nncl_trainer_evaluate(nncl_trainer *t, nncl_node *x, nncl_node *labels, nncl_node *logits,
                                           const float *xdata, const float *ydata, int n, float *loss,
                                           float *accuracy);
/* Current shard sizes (global batch of max_batch) per device; returns the
 * number of devices. */
NNCL_API int nncl_trainer_shards(const nncl_trainer *t, int *sizes, int max);
NNCL_API int64_t nncl_trainer_step_count(const nncl_trainer *t);
/* Pipelined trainer: the context index of the device whose stage holds
 * node name (an op node of the graph up to the loss); -1 when the trainer
 * is not pipelined or the name is no such node. */
NNCL_API int nncl_trainer_stage_device(const nncl_trainer *t, const char *name);
/* A pipelined trainer's stage: its device, its first and last op nodes,
 * its parameters, and of the last step the seconds it worked (its copies
 * at the cuts included), waited for the other stages (the bubble) and
 * copied at its cuts. */
typedef struct nncl_stage_info {
    int device;
    char first[64], last[64];
    size_t params;
    double busy_seconds, idle_seconds, transfer_seconds;
    /* Micro-batches whose value at the stage's output cut is held at once
     * (the host staging slots; 0 on the last stage), and their bytes. */
    int held_micro_batches;
    size_t held_bytes;
    /* Activation arenas of the stage (one per micro-batch it holds where
     * memory allows) and the forwards it ran again in the last step for
     * micro-batches whose arena another had taken. */
    int arenas, recomputed;
} nncl_stage_info;
/* Fills up to max stages in pipeline order; returns the number of stages
 * (0: not pipelined). */
NNCL_API int nncl_trainer_stages(const nncl_trainer *t, nncl_stage_info *out, int max);
/* Reads or replaces one parameter (or running statistic) by name. */
NNCL_API nncl_status nncl_trainer_param_get(nncl_trainer *t, const char *name, float *dst, size_t count);
NNCL_API nncl_status nncl_trainer_param_set(nncl_trainer *t, const char *name, const float *src, size_t count);
/* Parameters and running statistics as safetensors, under PyTorch's names. */
NNCL_API nncl_status nncl_trainer_save(nncl_trainer *t, const char *path);
NNCL_API nncl_status nncl_trainer_load(nncl_trainer *t, const char *path);
/* A checkpoint adds the optimizer state and the step count, for exact resume.
 * Loading one whose nncl.graph describes another model than the trainer's
 * (parameter initialisation apart) is refused (NNCL_ERR_INVALID_ARGUMENT,
 * naming the first node that differs). */
NNCL_API nncl_status nncl_trainer_save_checkpoint(nncl_trainer *t, const char *path);
NNCL_API nncl_status nncl_trainer_load_checkpoint(nncl_trainer *t, const char *path);

/* ---------------------------------------------------------------- data */
/* Host-side data: IDX and CSV readers, an in-memory dataset, and a loader
 * that prepares shuffled batches in a background thread. None of these
 * need a context; errors are read with nncl_last_error(NULL). */

/* --- IDX files (the MNIST / Fashion-MNIST format), plain or gzip. */
#define NNCL_IDX_MAX_DIMS 8
enum {
    NNCL_IDX_U8 = 0x08,  /* unsigned byte */
    NNCL_IDX_I8 = 0x09,  /* signed byte */
    NNCL_IDX_I16 = 0x0B, /* big-endian signed 16-bit */
    NNCL_IDX_I32 = 0x0C, /* big-endian signed 32-bit */
    NNCL_IDX_F32 = 0x0D, /* big-endian IEEE float */
    NNCL_IDX_F64 = 0x0E  /* big-endian IEEE double */
};
/* A parsed IDX array. data holds count floats, the stored values converted
 * to float (doubles beyond float range become +-Inf); it is owned by the
 * struct and released by nncl_idx_free(). */
typedef struct nncl_idx {
    int type;                         /* NNCL_IDX_U8 ... NNCL_IDX_F64 */
    int ndim;                         /* 1 .. NNCL_IDX_MAX_DIMS */
    uint32_t dims[NNCL_IDX_MAX_DIMS]; /* dims[0] is usually the sample count */
    size_t count;                     /* product of dims */
    float *data;
} nncl_idx;

/* Parses IDX bytes held in memory: magic 00 00 type ndim, ndim big-endian
 * u32 dims, then exactly the data the dims call for. Bytes starting with the
 * gzip magic 1f 8b are decompressed first (needs zlib at build time, else
 * NNCL_ERR_UNSUPPORTED; decompression stops at the size the IDX header
 * calls for, and at 4 GiB). name is used in
 * messages (NULL: "<memory>"). Malformed, truncated or oversized input gives
 * NNCL_ERR_FORMAT and leaves *out zeroed; sizes are checked before anything
 * is allocated. The bytes are only read during the call. */
NNCL_API nncl_status nncl_idx_parse(const void *bytes, size_t size, const char *name, nncl_idx *out);
/* Reads the file at path (plain or .gz, detected by content) and parses it
 * as nncl_idx_parse() does. NNCL_ERR_IO when it cannot be read, for a
 * device (/dev/zero) and for a pipe of more than 1 GiB. */
NNCL_API nncl_status nncl_idx_load(const char *path, nncl_idx *out);
/* Releases idx->data and zeroes the struct; NULL and zeroed structs are fine. */
NNCL_API void nncl_idx_free(nncl_idx *idx);

/* --- CSV tables: a header row, numeric feature columns, one label column. */
enum {
    /* Labels that are all non-negative integers are class indices as they
     * stand; otherwise every label is a class name. */
    NNCL_CSV_LABELS_AUTO = 0,
    /* Every label is a class name, also "0" or "1". */
    NNCL_CSV_LABELS_CLASSES = 1,
    /* Every label is a number, stored as it is (regression targets too). */
    NNCL_CSV_LABELS_NUMERIC = 2
};
typedef struct nncl_csv_options {
    const char *label;   /* label column by header name; NULL: by label_index */
    int label_index;     /* 0-based column; -1 (default): the last column */
    char delimiter;      /* default ',' */
    int label_mode;      /* NNCL_CSV_LABELS_*, default AUTO */
    /* Class names fixing the mapping (name classes[k] -> k), e.g. those of
     * the training table when reading the test table; a name not in the list
     * is an error. NULL (default): the distinct names found, sorted by byte
     * value (strcmp), so two files with the same classes agree. */
    const char *const *classes;
    int n_classes;       /* entries in classes */
} nncl_csv_options;

NNCL_API nncl_csv_options nncl_csv_options_default(void);

/* A parsed table. All arrays are owned by the struct (nncl_csv_free). */
typedef struct nncl_csv {
    size_t rows;           /* data rows (the header not counted) */
    size_t cols;           /* feature columns (the label column not counted) */
    float *features;       /* [rows, cols], row-major, in file column order */
    float *labels;         /* [rows]: class index (or the number, NUMERIC mode) */
    char **feature_names;  /* [cols] header names */
    char *label_name;      /* header name of the label column */
    int label_column;      /* its 0-based position in the file */
    /* Classes: max index + 1 for numeric class labels; 0 for NUMERIC labels
     * that are not all non-negative integers. class_names[k] names class k
     * when the labels were names, else class_names is NULL. */
    int n_classes;
    char **class_names;
} nncl_csv;

/* Parses CSV text of size bytes (RFC 4180: fields may be quoted with ",
 * "" is a quote inside quotes, quoted fields may hold delimiters and line
 * breaks; LF or CRLF line ends; a UTF-8 BOM, blank lines and spaces around
 * unquoted fields are ignored). Feature fields must be finite decimal
 * numbers. opt NULL: defaults. name is used in messages (NULL: "<memory>").
 * Errors (NNCL_ERR_FORMAT) say "name:line L, column C (header): what"; an
 * empty table, a table without data rows or feature columns, a row with a
 * different field count than the header and a missing label column are
 * errors. *out is zeroed on failure. */
NNCL_API nncl_status nncl_csv_parse(const char *text, size_t size, const char *name,
                                    const nncl_csv_options *opt, nncl_csv *out);
/* Reads the file at path and parses it as nncl_csv_parse() does; a device
 * or a pipe of more than 1 GiB is refused as nncl_idx_load() refuses it. */
NNCL_API nncl_status nncl_csv_load(const char *path, const nncl_csv_options *opt, nncl_csv *out);
/* Releases everything the table holds and zeroes it; NULL is fine. */
NNCL_API void nncl_csv_free(nncl_csv *t);

/* --- Datasets: n samples of d float features and one float label each. */
typedef struct nncl_dataset nncl_dataset;

/* Copies n samples: features x [n, d] with d the product of the sample
 * shape (ndim 1..3, e.g. {d} or {channels, height, width}), labels y [n]
 * (class indices in 0..n_classes-1 when n_classes > 0; any finite value
 * when n_classes is 0, for regression; y NULL: all zero). Features must be
 * finite (NNCL_ERR_NUMERIC names the first that is not). */
NNCL_API nncl_status nncl_dataset_create(size_t n, int ndim, const int *sample_shape, const float *x,
                                         const float *y, int n_classes, nncl_dataset **out);
/* From an IDX image array [n, ...] and a 1-D label array [n] of integer
 * class indices. Bytes (NNCL_IDX_U8) are scaled to [0, 1] by 1/255, other
 * types are kept as stored. Images [n, h, w] get sample shape [1, h, w];
 * [n, d] gets [d]; [n, c, h, w] keeps [c, h, w]. n_classes is the largest
 * label + 1. */
NNCL_API nncl_status nncl_dataset_from_idx(const nncl_idx *images, const nncl_idx *labels,
                                           nncl_dataset **out);
/* Loads an IDX image file and label file (plain or .gz) into a dataset. */
NNCL_API nncl_status nncl_dataset_load_idx(const char *images_path, const char *labels_path,
                                           nncl_dataset **out);
/* From a CSV table: sample shape [cols]; class names are copied. */
NNCL_API nncl_status nncl_dataset_from_csv(const nncl_csv *table, nncl_dataset **out);
NNCL_API nncl_status nncl_dataset_load_csv(const char *path, const nncl_csv_options *opt,
                                           nncl_dataset **out);
NNCL_API void nncl_dataset_free(nncl_dataset *ds);

NNCL_API size_t nncl_dataset_size(const nncl_dataset *ds);     /* n */
NNCL_API size_t nncl_dataset_features(const nncl_dataset *ds); /* d */
NNCL_API int nncl_dataset_classes(const nncl_dataset *ds);     /* 0: regression */
/* Writes the sample shape (up to 3 ints) to shape when not NULL; returns ndim. */
NNCL_API int nncl_dataset_shape(const nncl_dataset *ds, int *shape);
/* Name of class k, or NULL when the classes have no names. */
NNCL_API const char *nncl_dataset_class_name(const nncl_dataset *ds, int k);
/* The dataset's own arrays, [n, d] and [n]; valid until it is changed or freed. */
NNCL_API const float *nncl_dataset_x(const nncl_dataset *ds);
NNCL_API const float *nncl_dataset_y(const nncl_dataset *ds);
/* Pointers to samples start .. start+count-1 inside the dataset (no copy). */
NNCL_API nncl_status nncl_dataset_batch(const nncl_dataset *ds, size_t start, size_t count,
                                        const float **x, const float **y);
/* Copies the samples idx[0..count-1] into x [count, d] and y [count] (y may
 * be NULL). */
NNCL_API nncl_status nncl_dataset_gather(const nncl_dataset *ds, const size_t *idx, size_t count,
                                         float *x, float *y);

/* Fills perm with a permutation of 0..n-1 that depends only on seed (own
 * 64-bit generator and Fisher-Yates, identical on every platform). */
NNCL_API nncl_status nncl_dataset_permutation(size_t n, uint64_t seed, size_t *perm);
/* Reorders the samples by nncl_dataset_permutation(n, seed). */
NNCL_API nncl_status nncl_dataset_shuffle(nncl_dataset *ds, uint64_t seed);
/* New dataset of the samples idx[0..count-1] (indices may repeat). */
NNCL_API nncl_status nncl_dataset_subset(const nncl_dataset *ds, const size_t *idx, size_t count,
                                         nncl_dataset **out);
/* Splits into a random validation part of round(val_fraction * n) samples
 * and the rest, both non-empty, chosen by seed; ds is left as it is. */
NNCL_API nncl_status nncl_dataset_split(const nncl_dataset *ds, double val_fraction, uint64_t seed,
                                        nncl_dataset **train, nncl_dataset **val);
/* Per-feature mean and standard deviation (divided by n) into mean[d] and
 * std[d]; a feature with std below 1e-7 gets std 1 so that standardising
 * maps it to 0 rather than dividing by zero. */
NNCL_API nncl_status nncl_dataset_stats(const nncl_dataset *ds, float *mean, float *std);
/* x[i][j] = (x[i][j] - mean[j]) / std[j], with statistics usually taken from
 * the training set by nncl_dataset_stats(); std[j] must be > 0. */
NNCL_API nncl_status nncl_dataset_standardize(nncl_dataset *ds, const float *mean, const float *std);
/* x = x * scale + shift for every feature. */
NNCL_API nncl_status nncl_dataset_scale(nncl_dataset *ds, float scale, float shift);

/* --- Loader: batches gathered ahead in a background thread. */
typedef struct nncl_loader nncl_loader;
enum {
    NNCL_LOADER_SHUFFLE = 1,  /* new order every epoch, from seed and epoch */
    NNCL_LOADER_DROP_LAST = 2 /* leave out the last batch when it is short */
};
/* A loader over ds handing out batches of batch_size samples (the last of
 * an epoch shorter unless NNCL_LOADER_DROP_LAST). With NNCL_LOADER_SHUFFLE
 * epoch e visits the samples in the order nncl_dataset_permutation(n, s_e)
 * with s_e derived from seed and e, so a run is reproducible. A thread
 * gathers the next batches into a ring of buffers while the caller works.
 * ds must outlive the loader and stay unchanged while it exists. Calls on
 * one loader must not overlap (one consumer thread). */
NNCL_API nncl_status nncl_loader_create(const nncl_dataset *ds, size_t batch_size, uint64_t seed,
                                        int flags, nncl_loader **out);
/* The next batch of the current epoch: *x [*batch_n, d] and *y [*batch_n],
 * valid until the next call on the loader. At the end of an epoch it
 * returns NNCL_OK with *batch_n 0 (and x, y NULL); the call after that
 * starts the next epoch. */
NNCL_API nncl_status nncl_loader_next(nncl_loader *ld, const float **x, const float **y, int *batch_n);
/* Drops the batches prepared so far and starts epoch `epoch` (0 ..
 * INT_MAX - 4: the loader prepares batches ahead) from its first batch. */
NNCL_API nncl_status nncl_loader_reset(nncl_loader *ld, int epoch);
/* Batches per epoch, and the epoch the next batch belongs to. */
NNCL_API size_t nncl_loader_batches(const nncl_loader *ld);
NNCL_API int nncl_loader_epoch(const nncl_loader *ld);
/* Stops the thread (at any point of an epoch) and releases everything. */
NNCL_API void nncl_loader_free(nncl_loader *ld);
/* Random changes to each image as the loader gathers it, the usual
 * augmentation of small image sets. A sample is read as [channels, height,
 * width]; it moves by dy and dx drawn uniformly from [-shift, shift], the
 * pixels moved in 0 (PyTorch's RandomCrop(size, padding=shift)), then, when
 * flip_horizontal, is mirrored left-right with probability 1/2
 * (RandomHorizontalFlip). The draws come from the loader's seed, the epoch
 * and the sample's place in it: a run repeats, and resumes alike. The
 * labels are untouched. All zero: none. */
typedef struct nncl_augment {
    int channels, height, width; /* channels * height * width == the dataset's features */
    int shift;                   /* 0 .. min(height, width) - 1 */
    int flip_horizontal;         /* 0 or 1 */
} nncl_augment;
/* Augments every batch nncl_loader_next hands out after this call (aug
 * NULL or all zero: none); the batches prepared ahead are gathered again. */
NNCL_API nncl_status nncl_loader_set_augment(nncl_loader *ld, const nncl_augment *aug);

/* ---------------------------------------------------------------- files */
/* Safetensors files (the format of Hugging Face and PyTorch checkpoints):
 * a u64 little-endian header length N, N bytes of JSON naming each tensor's
 * dtype, shape and byte range, then the tensor data, little-endian.
 * nncl writes F32 tensors; it reads F32, and converts F16, BF16 and F64 to
 * float. Files are untrusted: every field is checked before use. */

#define NNCL_ST_MAX_DIMS 8          /* highest tensor rank */
#define NNCL_ST_MAX_NAME 1024       /* longest tensor name, bytes */
#define NNCL_ST_MAX_HEADER 100000000 /* largest JSON header, bytes */

typedef struct nncl_safetensors nncl_safetensors;

/* One tensor: what the writer takes and what the reader gives back. */
typedef struct nncl_safetensors_entry {
    const char *name;               /* UTF-8, 1..NNCL_ST_MAX_NAME bytes */
    int ndim;                       /* 0 (a scalar) .. NNCL_ST_MAX_DIMS */
    int64_t shape[NNCL_ST_MAX_DIMS];
    const float *data;              /* numel floats, row-major */
    size_t numel;                   /* reader: product of shape; writer ignores it */
    /* reader: dtype in the file ("F32", "F16"...); writer: "F16" or "BF16"
     * stores that dtype (rounded to nearest even), anything else F32 */
    char dtype[8];
} nncl_safetensors_entry;

/* Reads and checks a whole file. *out receives an object owning the names,
 * metadata and the tensors as float; free it with nncl_safetensors_free().
 * NNCL_ERR_IO when the file cannot be read, NNCL_ERR_FORMAT when it is
 * malformed, NNCL_ERR_UNSUPPORTED for a dtype other than F32/F16/BF16/F64,
 * the integers (I8..I64, U8..U64) and BOOL, or for an integer that float
 * cannot hold exactly (above 2^24 and not a multiple of its spacing): an
 * integer is never rounded. The message names the file, the tensor and
 * what is wrong. */
NNCL_API nncl_status nncl_safetensors_load(const char *path, nncl_safetensors **out);
/* The same from bytes in memory (copied; the caller keeps them). source
 * names the bytes in messages (NULL: "<memory>"). */
NNCL_API nncl_status nncl_safetensors_parse(const void *bytes, size_t size, const char *source,
                                            nncl_safetensors **out);
NNCL_API void nncl_safetensors_free(nncl_safetensors *st);

/* Number of tensors (0 for NULL). Indices follow the file's header order. */
NNCL_API int nncl_safetensors_count(const nncl_safetensors *st);
/* Tensor i, 0 <= i < count; the pointers in *out stay valid until st is
 * freed. NNCL_ERR_INVALID_ARGUMENT for a bad index. */
NNCL_API nncl_status nncl_safetensors_get(const nncl_safetensors *st, int i, nncl_safetensors_entry *out);
/* Index of the tensor called name, or -1. */
NNCL_API int nncl_safetensors_find(const nncl_safetensors *st, const char *name);
/* The tensor called name, checked to have exactly shape[0..ndim): its data
 * in *data (owned by st). NNCL_ERR_FORMAT when the file lacks it,
 * NNCL_ERR_SHAPE when its shape differs; the message names file, tensor and
 * both shapes. For loading parameters into a model of known shape. */
NNCL_API nncl_status nncl_safetensors_expect(const nncl_safetensors *st, const char *name, int ndim,
                                             const int64_t *shape, const float **data);
/* The __metadata__ value of key, or NULL when absent. Owned by st. */
NNCL_API const char *nncl_safetensors_meta(const nncl_safetensors *st, const char *key);
/* Metadata pairs in sorted key order: number of them, and pair i. */
NNCL_API int nncl_safetensors_meta_count(const nncl_safetensors *st);
NNCL_API nncl_status nncl_safetensors_meta_at(const nncl_safetensors *st, int i, const char **key,
                                              const char **value);

/* Writes count F32 tensors, laid out in the order given, to path. meta is
 * NULL or a NULL-terminated list of UTF-8 strings key, value, key, value,
 * ..., NULL stored in __metadata__ after "format":"pt" (a "format" key of
 * the caller replaces "pt"). Names must be distinct and not
 * "__metadata__". The header is padded to a multiple of 8 bytes. The file
 * is written under a temporary name in the same folder, synced and renamed
 * over path: a failed or interrupted write leaves an old file untouched.
 * Only reads tensors and meta. */
NNCL_API nncl_status nncl_safetensors_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                           const char *const *meta);

/* ---------------------------------------------------------------- models */
/* A model file is a safetensors file whose __metadata__ also says how to
 * use the model without the program that trained it (all text, readable
 * from PyTorch with safetensors.safe_open(...).metadata()):
 *   nncl.graph       the architecture, one node per line:
 *                    "ID OP NAME [SHAPE] (INPUT IDS) ATTRIBUTE=VALUE ...",
 *                    e.g. "4 conv2d conv1 [16,28,28] (0,2,3) kernel=3
 *                    stride=1 padding=1 act=relu"; inputs "0 input x [784]";
 *                    parameters "2 param fc1.weight [128,784] init=uniform"
 *   nncl.input       name of the input fed with samples (absent: the first)
 *   nncl.output      name of the node giving the class scores (logits;
 *                    absent: the loss's first input), computed from
 *                    nncl.input alone; a name of no node is refused
 *   nncl.scale, nncl.shift   x * scale + shift applied to raw rows first
 *   nncl.mean, nncl.std      then (x - mean) / std per feature (JSON arrays,
 *                    both or neither)
 *   nncl.classes     class names (JSON array of strings)
 *   nncl.label       the name of the label column of the training table
 * nncl_trainer_save() writes nncl.graph into every file; the rest comes
 * from nncl_trainer_save_model(). Readers treat all of it as untrusted. */

/* Rebuilds the graph described by a file's nncl.graph (parameters get
 * their initial values until a trainer loads the file's). ctx receives
 * messages and may be NULL. NNCL_ERR_FORMAT when the description is
 * missing or malformed, or when an op does not give the shape written. */
NNCL_API nncl_status nncl_graph_from_safetensors(nncl_context *ctx, const nncl_safetensors *st, nncl_graph **out);

/* What prediction needs besides the graph. Take nncl_model_meta_default(). */
typedef struct nncl_model_meta {
    nncl_node *input;                /* the input fed with samples; NULL: the graph's first input */
    nncl_node *output;               /* the class scores; NULL: the first input of the loss */
    float scale, shift;              /* raw value * scale + shift (default 1, 0) */
    const float *mean, *std;         /* then (x - mean[j]) / std[j], d each; NULL: none */
    /* n_classes names, or NULL; each, as label_name, UTF-8 of at most 4096
     * bytes without control characters (C0, DEL, C1), so that printing one
     * cannot drive a terminal: the saver and the loader refuse others */
    const char *const *class_names;
    int n_classes;
    const char *label_name;          /* the label column of a CSV table, or NULL */
    /* dtype of the weights and running statistics in the file: FP32
     * (default), FP16 or BF16 (rounded to nearest even; nncl and PyTorch
     * load either) */
    nncl_precision dtype;
} nncl_model_meta;

NNCL_API nncl_model_meta nncl_model_meta_default(void);
/* nncl_trainer_save() plus the metadata above, so that nncl_model_load()
 * can classify new rows with the file alone. */
NNCL_API nncl_status nncl_trainer_save_model(nncl_trainer *t, const char *path, const nncl_model_meta *meta);

/* An inference-only model: the graph rebuilt from a file, its parameters
 * and running statistics loaded, no gradient or optimizer memory. */
typedef struct nncl_model nncl_model;

/* Loads a model file onto the devices of ctx, predicting at most
 * max_batch rows per device pass (<= 0: 256). */
NNCL_API nncl_status nncl_model_load(nncl_context *ctx, const char *path, int max_batch, nncl_model **out);
/* The same from a parsed file. With ctx NULL it only reads and checks the
 * description (graph, preprocessing, classes); nncl_model_predict() then
 * gives NNCL_ERR_STATE. */
NNCL_API nncl_status nncl_model_from_safetensors(nncl_context *ctx, const nncl_safetensors *st, int max_batch,
                                                 nncl_model **out);
NNCL_API void nncl_model_free(nncl_model *m);
NNCL_API nncl_graph *nncl_model_graph(const nncl_model *m);
/* The trainer holding the model's plans (NULL without a context). */
NNCL_API nncl_trainer *nncl_model_trainer(const nncl_model *m);
/* The input node fed with rows (nncl.input) and the node giving the class
 * scores (nncl.output), for nncl_trainer_predict on the model's trainer. */
NNCL_API nncl_node *nncl_model_input(const nncl_model *m);
NNCL_API nncl_node *nncl_model_output(const nncl_model *m);
/* Floats per input row, and its per-sample shape (up to 3 ints; returns ndim). */
NNCL_API size_t nncl_model_features(const nncl_model *m);
NNCL_API int nncl_model_input_shape(const nncl_model *m, int *shape);
/* Classes (the output's last dimension) and the name of class k (NULL when unnamed). */
NNCL_API int nncl_model_classes(const nncl_model *m);
NNCL_API const char *nncl_model_class_name(const nncl_model *m, int k);
/* The training table's label column (nncl.label), or NULL. */
NNCL_API const char *nncl_model_label_name(const nncl_model *m);
/* The preprocessing the file asks for, applied in place to n raw rows. */
NNCL_API nncl_status nncl_model_preprocess(const nncl_model *m, float *rows, size_t n);
/* Class probabilities (softmax of the output) of n raw rows [n, features]
 * into probs [n, classes] and the predicted class (argmax of the output,
 * the first on a tie, as nncl_trainer_evaluate counts it) into classes
 * [n]; either may be NULL. The rows are preprocessed on a copy. An output
 * of a sequence, [B, T, classes] (a GPT's logits), gives T rows per input
 * row: probs [n, T, classes], classes [n, T]. A row holding NaN or Inf
 * (checked before any device works), or whose output does (NaN weights in
 * the file, an overflow), has no class: the call returns NNCL_ERR_NUMERIC
 * naming the first such row, and probs and classes then hold nothing to
 * use. Errors are recorded on the model's context (read them with
 * nncl_last_error of the ctx it was loaded on). */
NNCL_API nncl_status nncl_model_predict(nncl_model *m, const float *rows, size_t n, float *probs, int *classes);

/* ---------------------------------------------------------------- progress */
/* Progress output, training curves and plots. nncl never prints on its own:
 * these write only to the stream or file the caller names. */

typedef struct nncl_progress nncl_progress;

enum {
    NNCL_PROGRESS_AUTO = 0,  /* a bar when the stream is a terminal, else lines */
    NNCL_PROGRESS_BAR = 1,   /* one line redrawn in place with '\r' */
    NNCL_PROGRESS_LINES = 2, /* plain lines: each epoch's end, and at most one line every interval seconds */
    NNCL_PROGRESS_QUIET = 3  /* nothing */
};

/* A progress reporter writing to out (e.g. stderr) for a run of epochs
 * epochs of steps_per_epoch steps each (0 when unknown). Mode AUTO; lines
 * every 10 seconds at most. Not thread-safe: call from one thread. */
NNCL_API nncl_status nncl_progress_create(FILE *out, int epochs, int steps_per_epoch, nncl_progress **p);
/* Ends an unfinished bar line with a newline, then frees; NULL is fine. */
NNCL_API void nncl_progress_free(nncl_progress *p);
NNCL_API void nncl_progress_set_mode(nncl_progress *p, int mode);
/* LINES mode: the least seconds between two step lines (<= 0: a line every
 * step); epoch lines are always written. */
NNCL_API void nncl_progress_set_interval(nncl_progress *p, double seconds);
/* A short text shown at the end of the line, e.g. "shards 60/40" (copied,
 * at most 63 bytes kept; NULL clears). */
NNCL_API void nncl_progress_set_extra(nncl_progress *p, const char *text);
/* After step `step` (0-based) of epoch `epoch` (0-based) trained on
 * `samples` samples with batch loss `loss` and accuracy `acc` (a fraction;
 * negative when not known). Shows the epoch's sample-weighted mean loss and
 * accuracy so far, samples per second and the time left. NaN shows as nan. */
NNCL_API void nncl_progress_update(nncl_progress *p, int epoch, int step, double loss, double acc, long samples);
/* Ends epoch `epoch` with its final train loss/accuracy and the validation
 * loss/accuracy (NaN or negative accuracy when there was no validation):
 * writes one line in every mode but QUIET. */
NNCL_API void nncl_progress_epoch_end(nncl_progress *p, int epoch, double train_loss, double train_acc,
                                      double val_loss, double val_acc);
/* A line of text (no newline needed) that does not break the bar. */
NNCL_API void nncl_progress_message(nncl_progress *p, const char *text);

/* A training curve: one row per epoch, kept in memory, written as CSV and
 * drawn as an SVG plot. Accuracies are fractions in [0, 1]; NaN marks a
 * value not measured (e.g. no validation set). */
typedef struct nncl_curve_row {
    int epoch;                /* 1-based, as shown */
    double train_loss, train_acc;
    double val_loss, val_acc;
    double seconds;           /* wall time of the epoch */
    double samples_per_s;
} nncl_curve_row;

typedef struct nncl_curve nncl_curve;

NNCL_API nncl_status nncl_curve_create(nncl_curve **out);
NNCL_API void nncl_curve_free(nncl_curve *c);
/* Appends a copy of *row. */
NNCL_API nncl_status nncl_curve_add(nncl_curve *c, const nncl_curve_row *row);
NNCL_API int nncl_curve_count(const nncl_curve *c);
/* Row i, 0 <= i < count, copied into *out. */
NNCL_API nncl_status nncl_curve_get(const nncl_curve *c, int i, nncl_curve_row *out);
/* CSV with the header line
 *   epoch,train_loss,train_acc,val_loss,val_acc,seconds,samples_per_s
 * and one line per row ("nan" for NaN), written atomically. */
NNCL_API nncl_status nncl_curve_write_csv(const nncl_curve *c, const char *path);
/* A standalone SVG: loss per epoch (left panel) and accuracy in % (right
 * panel), train and validation series, axes, ticks, legend and title (NULL:
 * "Training curve"). Written atomically. */
NNCL_API nncl_status nncl_curve_write_svg(const nncl_curve *c, const char *path, const char *title);

/* A standalone SVG bar chart of n values (>= 0) with their labels, e.g.
 * throughput per device: horizontal bars, each labelled with its value and
 * unit ("samples/s"); title on top. Written atomically. */
NNCL_API nncl_status nncl_svg_bar_chart(const char *path, const char *title, const char *unit,
                                        const char *const *labels, const double *values, int n);
/* Several bar charts in one SVG under one title, each panel with its own
 * value axis, so that small values beside large ones stay visible (e.g.
 * an MLP's and a CNN's throughput): panel p is headed headings[p] (NULL or
 * "" for none) and takes the next counts[p] labels and values. */
NNCL_API nncl_status nncl_svg_bar_panels(const char *path, const char *title, const char *unit, int panels,
                                         const char *const *headings, const int *counts, const char *const *labels,
                                         const double *values);

/* ---------------------------------------------------------------- fit */

/* What nncl_trainer_fit() did, when the caller asks (cfg.result). */
typedef struct nncl_fit_result {
    int epochs_done;           /* epochs completed (counting those before a resume) */
    int best_epoch;            /* 1-based epoch of the lowest validation loss; 0: no validation */
    double best_val_loss;
    int stopped_early;         /* 1: patience ran out */
    int interrupted;           /* 1: on_step asked to stop */
    int restored_best;         /* 1: the best epoch's weights were put back (keep_best) */
    int resumed_epoch, resumed_step; /* where a resumed run went on (1-based epoch, steps done in it); 0: fresh */
    size_t train_samples, val_samples; /* after the validation split */
} nncl_fit_result;

/* The usual epoch loop of a classifier, for nncl_trainer_fit(). */
typedef struct nncl_fit_config {
    int epochs;
    int batch;                 /* global batch, <= the trainer's max_batch */
    uint64_t seed;             /* shuffling order and validation split */
    nncl_node *x, *labels;     /* the graph's inputs the datasets feed */
    nncl_node *logits;         /* for accuracy: argmax against the label */
    const nncl_dataset *val;   /* evaluated after every epoch; NULL: none, or val_fraction */
    nncl_progress *progress;   /* NULL: silent */
    nncl_curve *curve;         /* one row per epoch appended; NULL: none */
    /* With val NULL: this fraction of the training set (chosen by seed) is
     * set apart and validates each epoch instead; 0: no validation. */
    double val_fraction;
    /* Early stopping: stop after this many epochs in a row without a lower
     * validation loss (0: never). Needs validation. */
    int patience;
    /* End with the weights (and running statistics) of the epoch of lowest
     * validation loss rather than the last epoch's. Needs validation. */
    int keep_best;
    /* A checkpoint written atomically at each epoch's end and every
     * checkpoint_every steps (0: epoch ends only): parameters, optimizer
     * state, and where the run is (epoch, batch, seed, curve, early-stopping
     * state), for resume. NULL: none. */
    const char *checkpoint;
    int checkpoint_every;
    /* A checkpoint of this run (same data, seed, batch and model) to go on
     * from: the run continues at the epoch and batch it records, with the
     * same shuffle order, and ends as the uninterrupted run would, bit for
     * bit (on the same devices with a fixed split, e.g. one device). A
     * checkpoint of another model (its nncl.graph differs), or one past
     * `epochs`, is refused (NNCL_ERR_INVALID_ARGUMENT); one at `epochs`
     * trains nothing. */
    const char *resume;
    /* Called after every step with the 0-based epoch and step; a non-zero
     * return ends training (result->interrupted, NNCL_OK), the checkpoint
     * written first. NULL: none. */
    int (*on_step)(void *user, int epoch, int step, float loss);
    void *user;
    nncl_fit_result *result;   /* filled in when not NULL */
    /* The training batches' augmentation (nncl_loader_set_augment; never the
     * validation's). channels, height and width left 0 are x's [C, H, W]. */
    nncl_augment augment;
} nncl_fit_config;

NNCL_API nncl_fit_config nncl_fit_default(void);
/* Trains for cfg->epochs over train, shuffled each epoch, with batches
 * gathered ahead by a background thread; the progress line shows loss,
 * training accuracy, samples/s and the current device split; each epoch
 * ends with a validation, early-stopping check and checkpoint as asked. */
NNCL_API nncl_status nncl_trainer_fit(nncl_trainer *t, const nncl_dataset *train, const nncl_fit_config *cfg);
/* Loss and accuracy of the whole dataset, in evaluation mode. */
NNCL_API nncl_status nncl_trainer_evaluate_dataset(nncl_trainer *t, const nncl_fit_config *cfg,
                                                   const nncl_dataset *ds, float *loss, float *accuracy);

/* A Keras-like summary of the trainer's model written to out: every layer
 * (op node) with its name, kind, output shape and parameter count, the
 * totals (trainable and frozen), and each device's plan memory. */
NNCL_API nncl_status nncl_trainer_summary(const nncl_trainer *t, FILE *out);
/* The same without devices, for a graph (before any trainer). */
NNCL_API nncl_status nncl_graph_summary(const nncl_graph *g, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* NNCL_H */
