/* bench.h - what the files of the `bench` program share: options, the
 * results store (one record per measured figure, from which the terminal
 * table, the JSON, the CSV and the SVG are all written), timing with
 * medians and spread, the progress line, and the measuring sections. */
#ifndef NNCL_BENCH_H
#define NNCL_BENCH_H

#include "nncl.h"
#include <stdio.h>

/* ------------------------------------------------------------- options */

typedef struct bench_opts {
    const char *devices;   /* selection as NNCL_DEVICES */
    int sizes[16];         /* square GEMM sizes */
    int n_sizes;
    int repeats;           /* timed repeats per figure (median over them) */
    double seconds;        /* least duration of one repeat */
    int quick;
    int train;             /* 0: --no-train */
    int batch;             /* global batch of the training section */
    const char *only;      /* --only: comma-separated sections to run, NULL: all */
    const char *models;    /* --models: comma-separated models to train, NULL: the default set */
    const char *json, *csv, *svg;
    const char *data_dir;  /* Fashion-MNIST folder */
    const char *self;      /* path of this program, for the build child */
    char command[1024];    /* the command line, for the record */
} bench_opts;

/* Whether section name is to run (--only). */
int bench_wanted(const bench_opts *o, const char *name);

/* ------------------------------------------------------------- results */

/* Median and spread of repeated measurements; median NaN: not available. */
typedef struct bench_stat {
    double median, min, max, q1, q3;
    int n;
} bench_stat;

bench_stat bench_stat_of(const double *v, int n);
bench_stat bench_stat_one(double v);
bench_stat bench_stat_na(void);
double bench_nan(void);
int bench_isnan(double x);

/* One figure: section ("gemm"), device (context index; -1: all devices
 * together or the host), item ("512x512x512"), key ("nncl_gflops"); a
 * number (stat) or a text; note says how it was measured or why it is n/a. */
typedef struct bench_rec {
    char section[16];
    int device;
    char item[48];
    char key[40];
    int is_text;
    char text[160];
    bench_stat s;
    char unit[16];
    char note[200];
} bench_rec;

void bench_put(const char *section, int device, const char *item, const char *key, bench_stat s, const char *unit,
               const char *note);
void bench_put_num(const char *section, int device, const char *item, const char *key, double v, const char *unit,
                   const char *note);
void bench_put_text(const char *section, int device, const char *item, const char *key, const char *text);
/* The median of a stored number, NaN when absent or n/a. */
double bench_get(const char *section, int device, const char *item, const char *key);
int bench_rec_count(void);
const bench_rec *bench_rec_at(int i);
void bench_recs_free(void);

/* report.c: the table of one section on out; the whole store as JSON or
 * CSV; the throughput chart. Each returns 0 on success. */
void bench_print_section(FILE *out, const char *section, const char *title);
int bench_write_json(const char *path, const bench_opts *o, nncl_context *ctx);
int bench_write_csv(const char *path);
int bench_write_svg(const char *path);
/* A line of the report without trailing blanks, wrapped to 100 columns. */
void bench_line(FILE *out, const char *line);

/* ------------------------------------------------------------- timing */

double bench_now(void);

/* A measured action: runs the work iters times (and waits for the device);
 * nonzero on failure. */
typedef int (*bench_fn)(void *arg, int iters);

typedef struct bench_timing {
    int repeats;        /* wanted repeats */
    double min_seconds; /* least duration of one repeat */
    double budget;      /* seconds the whole measurement should take at most */
} bench_timing;

bench_timing bench_timing_of(const bench_opts *o, double budget);
/* Seconds per call of fn over timing.repeats repeats, after one warm-up
 * call; repeats shrink when a call is so slow the budget would be passed. */
int bench_time(bench_fn fn, void *arg, const bench_timing *t, bench_stat *per_call);
/* Two actions timed in alternation (A B A B ...) so that drift on a noisy
 * machine touches both alike; ratio: per-repeat a/b time ratios. */
int bench_time_pair(bench_fn fa, void *aa, bench_fn fb, void *ab, const bench_timing *t, bench_stat *a,
                    bench_stat *b, bench_stat *ratio);
/* 1/x of every field (seconds per call -> calls per second), times scale. */
bench_stat bench_stat_inverse(bench_stat s, double scale);
bench_stat bench_stat_scale(bench_stat s, double scale);

/* ------------------------------------------------------------- progress */

void bench_progress_init(int total_steps);
/* "[k/N] what" on stderr: redrawn in place on a terminal, lines otherwise. */
void bench_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void bench_progress_step(void);
void bench_progress_done(void);

/* ------------------------------------------------------------- raw access */
/* raw.c: the OpenCL objects behind nncl's context and tensors, so the raw
 * CLBlast and clEnqueueNDRangeKernel baselines run on the very same queue
 * and buffers; and the mapping of a context device to its index in
 * nncl_devices_list(). */
typedef struct bench_raw_kernel bench_raw_kernel;
int bench_raw_sgemm(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k, const nncl_tensor *a,
                    const nncl_tensor *b, nncl_tensor *c);
int bench_raw_finish(nncl_context *ctx, int device);
/* nncl_add_f32 of cl/elementwise.cl built from the library's embedded
 * source on the device's OpenCL context, arguments set once for out = a+b. */
bench_raw_kernel *bench_raw_add_create(nncl_context *ctx, int device, const nncl_tensor *a, const nncl_tensor *b,
                                       nncl_tensor *out, char *err, size_t errlen);
int bench_raw_add_enqueue(bench_raw_kernel *k);
void bench_raw_add_free(bench_raw_kernel *k);
/* nncl's own GEMM variants that device times when choosing (count, name of
 * the i-th, whether it runs products of these transposes), one product
 * through variant i (packing included, into the device's scratch buffer),
 * and the name of the kernel nncl_gemm runs for a shape ("clblast" or a
 * variant; "" before it was chosen). */
int bench_raw_own_count(nncl_context *ctx, int device);
const char *bench_raw_own_name(nncl_context *ctx, int device, int i);
int bench_raw_own_takes(nncl_context *ctx, int device, int i, int ta, int tb);
int bench_raw_own_sgemm(nncl_context *ctx, int device, int i, int ta, int tb, int m, int n, int k,
                        const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c);
const char *bench_raw_chosen(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k);
/* Half storage (store 1 fp16, 2 bf16): the first n elements of tensor t
 * overwritten with host[] in that format, and a product of such operands
 * into C in that format as training runs it (nncl's own packed kernels,
 * fp32 panels and arithmetic, packing included). */
int bench_raw_half_write(nncl_context *ctx, int device, int store, nncl_tensor *t, const float *host, size_t n);
int bench_raw_half_sgemm(nncl_context *ctx, int device, int store, int ta, int tb, int m, int n, int k,
                         const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c);
/* Whether a CLBlast tuning is stored for device (nncl_init applied it). */
int bench_raw_tuned(nncl_context *ctx, int device);
/* Index in nncl_devices_list() of context device d, -1 when not found. */
int bench_list_index(nncl_context *ctx, int device);
/* Builds every kernel family of cl/ through the library's own build path
 * (the programs a plan compiles); returns the number built, -1 on failure. */
int bench_build_all_families(nncl_context *ctx, int device, char *err, size_t errlen);
/* The theoretical single-precision peak where the vendor's FLOPs per compute
 * unit per clock are known, else NaN; method says how or why not. */
double bench_peak_gflops(nncl_context *ctx, int device, char *method, size_t len);

/* ------------------------------------------------------------- host CPU */
/* cpu.c: the host references. */
int bench_cpu_threads(void);
/* C = op(A) op(B) by a blocked OpenMP loop (NN on pre-transposed copies). */
void bench_cpu_gemm(int m, int n, int k, const float *a, const float *b, float *c);
/* cblas_sgemm of a BLAS loaded at run time ($NNCL_BENCH_BLAS, OpenBLAS,
 * BLIS, MKL, libblas): 0 when none could be loaded. */
int bench_blas_load(char *name, size_t len);
void bench_blas_sgemm(int ta, int tb, int m, int n, int k, const float *a, const float *b, float *c);
void bench_blas_unload(void);

/* ------------------------------------------------------------- monitor */
/* monitor.c: driver telemetry (NVML, amdgpu sysfs, DRM fdinfo) matched to
 * the context devices by PCI address, sampled by a background thread. */
void bench_monitor_start(nncl_context *ctx);
/* A short "45W 61C 93%" text of device d's latest sample, "" when none. */
void bench_monitor_latest(int device, char *buf, size_t len);
/* Stops the thread and stores the monitor section's driver figures. */
void bench_monitor_stop(void);
/* nncl's own figures of device d now (memory in use and peak). */
void bench_monitor_note_memory(nncl_context *ctx);

/* ------------------------------------------------------------- sections */
void bench_devices(const bench_opts *o, nncl_context *ctx);
void bench_gemm(const bench_opts *o, nncl_context *ctx);
void bench_bandwidth(const bench_opts *o, nncl_context *ctx);
void bench_launch(const bench_opts *o, nncl_context *ctx);
void bench_build(const bench_opts *o, nncl_context *ctx);
/* The child process of bench_build: cold and warm builds on one device of
 * nncl_devices_list(), the figures on stdout. Returns the exit status. */
int bench_build_child(const char *list_index, int quick);
void bench_training(const bench_opts *o, nncl_context *ctx);
/* Gradient checkpointing (checkpoint.c): each model without and with it. */
void bench_checkpoint(const bench_opts *o, nncl_context *ctx);
int bench_checkpoint_steps(const bench_opts *o, int n_devices);
void bench_pipeline(const bench_opts *o, nncl_context *ctx);
void bench_membound(const bench_opts *o, nncl_context *ctx);
/* membound_dw.c: the depthwise kernels' rows of that table on profiling context pc */
/* skip: put each layer as n/a for this reason instead (no plausible profile). */
void bench_membound_dw(const bench_opts *o, nncl_context *pc, int d, double copy_gbs, const char *skip);
/* Units of the progress line each section reports. */
int bench_gemm_steps(const bench_opts *o, int n_devices);
int bench_training_steps(const bench_opts *o, int n_devices);

/* The sections, one table (main.c), in the order they run and print:
 * name (--only, the JSON key, the CSV's first column) and the title of
 * its terminal table; run measures it (NULL: main fills it, or the
 * section named in part_of does); steps are its units on the progress line
 * (NULL: one per device, counted by main after run). `bench --list` prints
 * the table; tests/test_bench.sh reads that list. Ends with a NULL name. */
typedef struct bench_section {
    const char *name, *title;
    void (*run)(const bench_opts *o, nncl_context *ctx);
    int (*steps)(const bench_opts *o, int n_devices);
    const char *part_of;
} bench_section;
extern const bench_section bench_sections[];

#endif
