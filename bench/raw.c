/* raw.c - the bench's window onto the OpenCL objects behind nncl, through
 * the public interop calls (nncl.h): the queue, context and buffers behind
 * a context and its tensors, so the baselines (a raw CLBlastSgemm, a raw
 * clEnqueueNDRangeKernel of nncl_add_f32) run on exactly the queue and
 * memory nncl uses; nncl's own GEMM variants one by one; the build of every
 * kernel family through the library's own path; the theoretical peak. */
#include "bench.h"
#include <CL/cl.h>
#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Device d's OpenCL objects (all NULL when d does not exist). */
static nncl_opencl raw_cl(nncl_context *ctx, int device) {
    nncl_opencl o;
    if (nncl_device_opencl(ctx, device, &o) != NNCL_OK) memset(&o, 0, sizeof o);
    return o;
}

static cl_mem raw_mem(const nncl_tensor *t) { return (cl_mem)nncl_tensor_opencl(t); }

int bench_raw_sgemm(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k, const nncl_tensor *a,
                    const nncl_tensor *b, nncl_tensor *c) {
    cl_command_queue queue = (cl_command_queue)raw_cl(ctx, device).queue;
    /* leading dimensions of row-major A [m,k] (or [k,m]), B [k,n] (or [n,k]) */
    size_t lda = (size_t)(ta ? m : k), ldb = (size_t)(tb ? k : n);
    CLBlastStatusCode s;
    if (!queue) return 1;
    s = CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                     tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)m, (size_t)n, (size_t)k, 1.0f, raw_mem(a),
                     0, lda, raw_mem(b), 0, ldb, 0.0f, raw_mem(c), 0, (size_t)n, &queue, NULL);
    return s != CLBlastSuccess;
}

int bench_raw_own_count(nncl_context *ctx, int device) { return nncl_gemm_variant_count(ctx, device); }

const char *bench_raw_own_name(nncl_context *ctx, int device, int i) {
    const char *name = nncl_gemm_variant_name(ctx, device, i);
    return name ? name : "?";
}

int bench_raw_own_takes(nncl_context *ctx, int device, int i, int ta, int tb) {
    return nncl_gemm_variant_takes(ctx, device, i, ta, tb);
}

int bench_raw_own_sgemm(nncl_context *ctx, int device, int i, int ta, int tb, int m, int n, int k,
                        const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    (void)device; /* the tensors' */
    return nncl_gemm_variant_run(ctx, i, ta, tb, m, n, k, a, b, c) != NNCL_OK;
}

int bench_raw_half_write(nncl_context *ctx, int device, int store, nncl_tensor *t, const float *host, size_t n) {
    (void)ctx;
    (void)device;
    return nncl_tensor_write_half(t, store, host, n) != NNCL_OK;
}

int bench_raw_half_sgemm(nncl_context *ctx, int device, int store, int ta, int tb, int m, int n, int k,
                         const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    (void)device;
    return nncl_gemm_half(ctx, store, ta, tb, m, n, k, a, b, c) != NNCL_OK;
}

const char *bench_raw_chosen(nncl_context *ctx, int device, int ta, int tb, int m, int n, int k) {
    return nncl_gemm_chosen(ctx, device, ta, tb, m, n, k);
}

int bench_raw_tuned(nncl_context *ctx, int device) { return nncl_gemm_tuned(ctx, device); }

int bench_raw_finish(nncl_context *ctx, int device) {
    cl_command_queue queue = (cl_command_queue)raw_cl(ctx, device).queue;
    return !queue || clFinish(queue) != CL_SUCCESS;
}

struct bench_raw_kernel {
    cl_kernel kernel;
    cl_command_queue queue;
    size_t global, local;
};

bench_raw_kernel *bench_raw_add_create(nncl_context *ctx, int device, const nncl_tensor *a, const nncl_tensor *b,
                                       nncl_tensor *out, char *err, size_t errlen) {
    nncl_opencl o = raw_cl(ctx, device);
    bench_raw_kernel *k;
    void *program = NULL;
    cl_mem am = raw_mem(a), bm = raw_mem(b), om = raw_mem(out);
    size_t max_wg = 0;
    cl_int e;
    int zero = 0, n = (int)nncl_tensor_numel(a);
    /* the library's own build of cl/elementwise.cl, a kernel object of ours */
    if (nncl_kernel_program(ctx, device, "elementwise", &program) != NNCL_OK) {
        snprintf(err, errlen, "%s", nncl_last_error(ctx));
        return NULL;
    }
    k = (bench_raw_kernel *)calloc(1, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k->queue = (cl_command_queue)o.queue;
    k->kernel = clCreateKernel((cl_program)program, "nncl_add_f32", &e);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 0, sizeof(cl_mem), &am);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 1, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 2, sizeof(cl_mem), &bm);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 3, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 4, sizeof(int), &n);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 5, sizeof(cl_mem), &om);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 6, sizeof(int), &zero);
    if (e == CL_SUCCESS) e = clSetKernelArg(k->kernel, 7, sizeof(int), &n);
    if (e == CL_SUCCESS)
        e = clGetDeviceInfo((cl_device_id)o.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    if (e != CL_SUCCESS) {
        snprintf(err, errlen, "raw kernel nncl_add_f32 failed: OpenCL error %d", (int)e);
        bench_raw_add_free(k);
        return NULL;
    }
    /* the launch geometry of nncl's 1-D launches: groups of 64, rounded up */
    k->local = max_wg < 64 ? max_wg : 64;
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
    free(k);
}

int bench_list_index(nncl_context *ctx, int device) {
    cl_device_id id = (cl_device_id)raw_cl(ctx, device).device;
    cl_platform_id plats[16];
    cl_uint np = 0, p;
    int index = 0;
    if (!id || clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return -1;
    if (np > 16) np = 16;
    for (p = 0; p < np; p++) { /* the order of nncl_devices_list() */
        cl_device_id ids[64];
        cl_uint nd = 0, i;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, ids, &nd) != CL_SUCCESS) continue;
        if (nd > 64) nd = 64;
        for (i = 0; i < nd; i++, index++)
            if (ids[i] == id) return index;
    }
    return -1;
}

int bench_build_all_families(nncl_context *ctx, int device, char *err, size_t errlen) {
    const char *file;
    int i, built = 0;
    for (i = 0; (file = nncl_kernel_family(i)) != NULL; i++) {
        char family[64];
        size_t len = strlen(file);
        void *program;
        if (len < 4 || len - 3 >= sizeof family) continue;
        memcpy(family, file, len - 3); /* "dense.cl" -> "dense" */
        family[len - 3] = 0;
        if (nncl_kernel_program(ctx, device, family, &program) != NNCL_OK) {
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
    cl_device_id id = (cl_device_id)raw_cl(ctx, device).device;
    nncl_device_info info, *d = &info;
    double cu, ghz;
    if (nncl_device_info_get(ctx, device, &info) != NNCL_OK) {
        snprintf(method, len, "n/a: %s", nncl_last_error(ctx));
        return bench_nan();
    }
    cu = d->compute_units;
    ghz = d->clock_mhz / 1000.0;
    if (d->compute_units <= 0 || d->clock_mhz <= 0) {
        snprintf(method, len, "n/a: the driver reports no compute units or clock");
        return bench_nan();
    }
    if (d->type == NNCL_DEVICE_GPU && strstr(d->vendor, "NVIDIA")) {
        cl_uint major = 0, minor = 0; /* cl_nv_device_attribute_query */
        int cores;
        if (clGetDeviceInfo(id, 0x4000, sizeof major, &major, NULL) != CL_SUCCESS ||
            clGetDeviceInfo(id, 0x4001, sizeof minor, &minor, NULL) != CL_SUCCESS ||
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
