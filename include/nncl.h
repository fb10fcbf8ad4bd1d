/* nncl.h - the whole public API of nncl, a tensor and neural-network library
 * that trains on any OpenCL device. Every fallible call returns nncl_status
 * (0 is OK); nncl_last_error() says what failed and where. Graph builders
 * return NULL and leave the message. MIT licence, see LICENSE. */
#ifndef NNCL_H
#define NNCL_H

#include <stddef.h>
#include <stdint.h>

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
    NNCL_ERR_OUT_OF_MEMORY = -3,    /* host or device allocation failed */
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

/* The message of the last error on this context: what failed and where (the
 * OpenCL call and code, file:line, the build log). With ctx NULL: the last
 * error of calls made without a context on this thread. Never NULL. */
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
     * built in. NULL: $NNCL_KERNEL_DIR, else built in. */
    const char *kernel_dir;
    nncl_log_fn log;        /* NULL: no logging */
    void *log_user;
    int log_level;          /* messages up to this level reach log */
    int profiling;          /* create queues with profiling enabled */
} nncl_config;

NNCL_API nncl_config nncl_config_default(void);
NNCL_API nncl_status nncl_init(const nncl_config *config, nncl_context **out);
NNCL_API void nncl_free(nncl_context *ctx);

NNCL_API int nncl_device_count(const nncl_context *ctx);
NNCL_API nncl_status nncl_device_info_get(const nncl_context *ctx, int device, nncl_device_info *out);
/* Waits until all work queued on the device is done. */
NNCL_API nncl_status nncl_finish(nncl_context *ctx, int device);
/* Bytes of device memory that nncl holds on the device now, and at most. */
NNCL_API nncl_status nncl_device_memory(const nncl_context *ctx, int device, uint64_t *in_use, uint64_t *peak);

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
 * (also of different platforms, through the host). */
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
 * its flag is set. Runs through CLBlast. */
NNCL_API nncl_status nncl_gemm(nncl_context *ctx, int trans_a, int trans_b, float alpha,
                               const nncl_tensor *a, const nncl_tensor *b, float beta, nncl_tensor *c);

/* ---------------------------------------------------------------- graph */
/* @@GRAPH@@ */

/* ---------------------------------------------------------------- data */
/* @@DATA@@ */

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
    char dtype[8];                  /* reader: dtype in the file ("F32", "F16"...); writer ignores it */
} nncl_safetensors_entry;

/* Reads and checks a whole file. *out receives an object owning the names,
 * metadata and the tensors as float; free it with nncl_safetensors_free().
 * NNCL_ERR_IO when the file cannot be read, NNCL_ERR_FORMAT when it is
 * malformed, NNCL_ERR_UNSUPPORTED for a dtype other than F32/F16/BF16/F64;
 * the message names the file, the tensor and what is wrong. */
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
/* @@FILES@@ */

/* ---------------------------------------------------------------- progress */
/* @@PROGRESS@@ */

#ifdef __cplusplus
}
#endif
#endif /* NNCL_H */
