/* raw.c - the bench's one window into nncl's internals: the OpenCL queue,
 * context and buffers behind a context and its tensors, so the baselines
 * (a raw CLBlastSgemm, a raw clEnqueueNDRangeKernel of nncl_add_f32) run
 * on exactly the queue and memory nncl uses; the build of every kernel
 * family through the library's own path; the theoretical peak. */
#include "gemm/gemm.h"
#include "bench.h"
#include <clblast_c.h>
#include <stdio.h>

struct nncl__embedded { const char *name; const char *source; size_t size; };
extern const struct nncl__embedded nncl__kernels[];

int bench_raw_sgemm(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k, const nncl_tensor *a,
                    const nncl_tensor *b, nncl_tensor *c) {
    nncl_device *dev = &ctx->devices[device];
    /* leading dimensions of row-major A [m,k] (or [k,m]), B [k,n] (or [n,k]) */
    size_t lda = (size_t)(ta ? m : k), ldb = (size_t)(tb ? k : n);
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                                       tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)m, (size_t)n, (size_t)k,
                                       1.0f, a->mem, 0, lda, b->mem, 0, ldb, 0.0f, c->mem, 0, (size_t)n, &dev->queue,
                                       NULL);
    return s != CLBlastSuccess;
}

int bench_raw_own_count(nncl_context *ctx, int device) {
    const nncl__gemm_variant *v;
    int n = 0;
    return nncl__gemm_variants(ctx, &ctx->devices[device], 0, &v, &n) == NNCL_OK ? n : 0;
}

const char *bench_raw_own_name(nncl_context *ctx, int device, int i) {
    const nncl__gemm_variant *v;
    int n = 0;
    if (nncl__gemm_variants(ctx, &ctx->devices[device], 0, &v, &n) != NNCL_OK || i < 0 || i >= n) return "?";
    return v[i].name;
}

int bench_raw_own_takes(nncl_context *ctx, int device, int i, int ta, int tb) {
    const nncl__gemm_variant *v;
    int n = 0;
    if (nncl__gemm_variants(ctx, &ctx->devices[device], 0, &v, &n) != NNCL_OK || i < 0 || i >= n) return 0;
    return nncl__gemm_takes(&v[i], ta, tb);
}

static void raw_args(nncl__gemm_args *g, int ta, int tb, int m, int n, int k) {
    memset(g, 0, sizeof *g);
    g->trans_a = ta;
    g->trans_b = tb;
    g->m = (size_t)m;
    g->n = (size_t)n;
    g->k = (size_t)k;
    g->alpha = 1.0f;
    g->lda = (size_t)(ta ? m : k);
    g->ldb = (size_t)(tb ? k : n);
    g->ldc = (size_t)n;
}

int bench_raw_own_sgemm(nncl_context *ctx, int device, int i, int ta, int tb, int m, int n, int k,
                        const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    const nncl__gemm_variant *v;
    nncl__gemm_args g;
    int count = 0;
    if (nncl__gemm_variants(ctx, &ctx->devices[device], 0, &v, &count) != NNCL_OK || i < 0 || i >= count) return 1;
    raw_args(&g, ta, tb, m, n, k);
    g.a = a->mem;
    g.b = b->mem;
    g.c = c->mem;
    return nncl__gemm_own(ctx, &ctx->devices[device], &v[i], &g) != NNCL_OK;
}

int bench_raw_half_write(nncl_context *ctx, int device, int store, nncl_tensor *t, const float *host, size_t n) {
    unsigned short *bits = (unsigned short *)malloc(n * sizeof *bits);
    size_t i;
    int bad;
    if (!bits) return 1;
    for (i = 0; i < n; i++) bits[i] = (unsigned short)(store == 1 ? nncl__f32_to_f16(host[i]) : nncl__f32_to_bf16(host[i]));
    bad = clEnqueueWriteBuffer(ctx->devices[device].queue, t->mem, CL_TRUE, 0, n * 2, bits, 0, NULL, NULL) != CL_SUCCESS;
    free(bits);
    return bad;
}

int bench_raw_half_sgemm(nncl_context *ctx, int device, int store, int ta, int tb, int m, int n, int k,
                         const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    nncl__gemm_args g;
    raw_args(&g, ta, tb, m, n, k);
    g.a = a->mem;
    g.b = b->mem;
    g.c = c->mem;
    g.store = store;
    return nncl__sgemm(ctx, &ctx->devices[device], &g) != NNCL_OK;
}

const char *bench_raw_chosen(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k) {
    nncl_device *dev = &ctx->devices[device];
    const nncl__gemm_choice *c;
    nncl__gemm_args g;
    int mode = nncl__gemm_mode(), idx;
    if (mode == 1) return "clblast";
    raw_args(&g, ta, tb, m, n, k);
    if (!dev->gemm || !(c = nncl__gemm_choice_find(dev->gemm, &g))) return "";
    idx = mode == 2 ? c->best_own : c->best;
    return idx < 0 ? "clblast" : dev->gemm->all[idx].name;
}

int bench_raw_tuned(nncl_context *ctx, int device) {
    char path[1200];
    FILE *f;
    if (!nncl__tune_file(ctx, device, path, sizeof path) || !(f = fopen(path, "rb"))) return 0;
    fclose(f);
    return nncl__tune_mode(ctx) >= 0;
}

int bench_raw_finish(nncl_context *ctx, int device) { return clFinish(ctx->devices[device].queue) != CL_SUCCESS; }

struct bench_raw_kernel {
    cl_program program;
    cl_kernel kernel;
    cl_command_queue queue;
    size_t global, local;
};

bench_raw_kernel *bench_raw_add_create(nncl_context *ctx, int device, const nncl_tensor *a, const nncl_tensor *b,
                                       nncl_tensor *out, char *err, size_t errlen) {
    nncl_device *dev = &ctx->devices[device];
    bench_raw_kernel *k;
    const char *src[2] = {NULL, NULL}; /* cl/common.cl, then the family, as program.c puts them */
    size_t len[2] = {0, 0}, i;
    char opts[96];
    cl_int e;
    int zero = 0, n = (int)a->numel;
    for (i = 0; nncl__kernels[i].name; i++) {
        int which = !strcmp(nncl__kernels[i].name, "common.cl") ? 0 : !strcmp(nncl__kernels[i].name, "elementwise.cl") ? 1 : -1;
        if (which < 0) continue;
        src[which] = nncl__kernels[i].source;
        len[which] = nncl__kernels[i].size;
    }
    if (!src[0] || !src[1]) {
        snprintf(err, errlen, "cl/common.cl or cl/elementwise.cl is not embedded in the library");
        return NULL;
    }
    k = (bench_raw_kernel *)calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k->queue = dev->queue;
    k->program = clCreateProgramWithSource(dev->cl_ctx, 2, src, len, &e);
    /* the options the library builds with (program.c) */
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DNNCL_RED_WG=%d%s", NNCL_RED_WG, dev->info.fp64 ? " -DNNCL_FP64=1" : "");
    if (e == CL_SUCCESS) e = clBuildProgram(k->program, 1, &dev->id, opts, NULL, NULL);
    if (e == CL_SUCCESS) k->kernel = clCreateKernel(k->program, "nncl_add_f32", &e);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 0, sizeof(cl_mem), &a->mem);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 1, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 2, sizeof(cl_mem), &b->mem);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 3, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 4, sizeof(int), &n);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 5, sizeof(cl_mem), &out->mem);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 6, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 7, sizeof(int), &n);
    if (e != CL_SUCCESS) {
        snprintf(err, errlen, "raw build of nncl_add_f32 failed: %s (%d)", nncl__cl_error_name(e), (int)e);
        bench_raw_add_free(k);
        return NULL;
    }
    /* the launch geometry of nncl__launch_1d: groups of 64, rounded up */
    k->local = dev->max_work_group < 64 ? dev->max_work_group : 64;
    k->global = ((size_t)n + k->local - 1) / k->local * k->local;
    return k;
}

int bench_raw_add_enqueue(bench_raw_kernel *k) {
    return clEnqueueNDRangeKernel(k->queue, k->kernel, 1, NULL, &k->global, &k->local, 0, NULL, NULL) != CL_SUCCESS;
}

void bench_raw_add_free(bench_raw_kernel *k) {
    if (!k) return;
    if (k->queue) clFinish(k->queue);
    if (k->kernel) clReleaseKernel(k->kernel);
    if (k->program) clReleaseProgram(k->program);
    free(k);
}

int bench_list_index(nncl_context *ctx, int device) {
    cl_platform_id plats[16];
    cl_uint np = 0, p;
    int index = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return -1;
    if (np > 16) np = 16;
    for (p = 0; p < np; p++) { /* the order of nncl_devices_list() (context.c) */
        cl_device_id ids[64];
        cl_uint nd = 0, i;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, ids, &nd) != CL_SUCCESS) continue;
        if (nd > 64) nd = 64;
        for (i = 0; i < nd; i++, index++)
            if (ids[i] == ctx->devices[device].id) return index;
    }
    return -1;
}

int bench_build_all_families(nncl_context *ctx, int device, char *err, size_t errlen) {
    int i, built = 0;
    for (i = 0; nncl__kernels[i].name; i++) {
        char family[64];
        size_t len = strlen(nncl__kernels[i].name);
        nncl_program *p;
        if (len < 4 || len - 3 >= sizeof family) continue;
        memcpy(family, nncl__kernels[i].name, len - 3); /* "dense.cl" -> "dense" */
        family[len - 3] = 0;
        if (nncl__program(ctx, &ctx->devices[device], family, &p) != NNCL_OK) {
            snprintf(err, errlen, "%s", nncl_last_error(ctx));
            return -1;
        }
        built++;
    }
    return built;
}

/* CUDA cores per SM by compute capability (NVIDIA's architecture guides);
 * 0 for unknown generations. */
static int raw_nv_cores_per_sm(int major, int minor) {
    switch (major) {
    case 2: return minor == 1 ? 48 : 32;
    case 3: return 192;
    case 5: return 128;
    case 6: return minor == 0 ? 64 : 128;
    case 7: return 64;
    case 8: return minor == 0 ? 64 : 128;
    case 9: return 128;
    default: return 0;
    }
}

double bench_peak_gflops(nncl_context *ctx, int device, char *method, size_t len) {
    nncl_device *dev = &ctx->devices[device];
    const nncl_device_info *d = &dev->info;
    double cu = d->compute_units, ghz = d->clock_mhz / 1000.0;
    if (d->compute_units <= 0 || d->clock_mhz <= 0) {
        snprintf(method, len, "n/a: the driver reports no compute units or clock");
        return bench_nan();
    }
    if (d->type == NNCL_DEVICE_GPU && strstr(d->vendor, "NVIDIA")) {
        cl_uint major = 0, minor = 0; /* cl_nv_device_attribute_query */
        int cores;
        if (clGetDeviceInfo(dev->id, 0x4000, sizeof major, &major, NULL) != CL_SUCCESS ||
            clGetDeviceInfo(dev->id, 0x4001, sizeof minor, &minor, NULL) != CL_SUCCESS ||
            !(cores = raw_nv_cores_per_sm((int)major, (int)minor))) {
            snprintf(method, len, "n/a: NVIDIA compute capability unknown to the bench");
            return bench_nan();
        }
        snprintf(method, len, "%d SMs x %d MHz x %d FP32 cores x 2 (FMA), compute capability %u.%u",
                 d->compute_units, d->clock_mhz, cores, major, minor);
        return cu * ghz * cores * 2;
    }
    if (d->type == NNCL_DEVICE_GPU && (strstr(d->vendor, "Advanced Micro") || strstr(d->vendor, "AMD")) &&
        !strncmp(d->name, "gfx9", 4)) {
        snprintf(method, len, "%d CUs x %d MHz x 64 lanes x 2 (FMA), GCN/CDNA (%s)", d->compute_units, d->clock_mhz,
                 d->name);
        return cu * ghz * 128;
    }
    if (d->type == NNCL_DEVICE_GPU && strstr(d->vendor, "Intel") && !strstr(d->name, "Max")) {
        snprintf(method, len, "%d EUs x %d MHz x 8 lanes x 2 (FMA), Intel Gen9/Xe", d->compute_units, d->clock_mhz);
        return cu * ghz * 16;
    }
    if (d->type == NNCL_DEVICE_CPU)
        snprintf(method, len, "n/a: a CPU's FMA units per core and SMT sharing are not reported by OpenCL");
    else
        snprintf(method, len, "n/a: FLOPs per compute unit per clock unknown for this vendor/architecture");
    return bench_nan();
}
