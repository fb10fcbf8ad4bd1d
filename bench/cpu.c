/* cpu.c - the host-CPU references the device figures are set beside: a
 * blocked OpenMP SGEMM, and cblas_sgemm of whatever BLAS is installed,
 * loaded with dlopen at run time so that the bench has no build dependency
 * on one. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "bench.h"
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int bench_cpu_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Blocks: a panel of 64 rows of C per task; within it, k in steps of 256
 * and columns in steps of 512 so that the B tile (512 KB) and four rows of
 * C (8 KB) stay in cache; four rows of A at a time, so every element of B
 * loaded feeds four multiply-adds, in a unit-stride loop the compiler
 * vectorises. */
#define CPU_MB 64
#define CPU_KB 256
#define CPU_NB 512
static void cpu_rows(int rows, int n, int k, int kb, int ke, int jb, int je, const float *a, const float *b,
                     float *c) {
    int i = 0, p, j;
    for (; i + 4 <= rows; i += 4) {
        float *c0 = c + (size_t)i * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
        const float *a0 = a + (size_t)i * k, *a1 = a0 + k, *a2 = a1 + k, *a3 = a2 + k;
        for (p = kb; p < ke; p++) {
            float v0 = a0[p], v1 = a1[p], v2 = a2[p], v3 = a3[p];
            const float *bp = b + (size_t)p * n;
#pragma omp simd
            for (j = jb; j < je; j++) {
                float bv = bp[j];
                c0[j] += v0 * bv;
                c1[j] += v1 * bv;
                c2[j] += v2 * bv;
                c3[j] += v3 * bv;
            }
        }
    }
    for (; i < rows; i++) {
        float *ci = c + (size_t)i * n;
        for (p = kb; p < ke; p++) {
            float v = a[(size_t)i * k + p];
            const float *bp = b + (size_t)p * n;
#pragma omp simd
            for (j = jb; j < je; j++) ci[j] += v * bp[j];
        }
    }
}

void bench_cpu_gemm(int m, int n, int k, const float *a, const float *b, float *c) {
    int ib;
    memset(c, 0, (size_t)m * (size_t)n * sizeof *c);
#pragma omp parallel for schedule(dynamic, 1)
    for (ib = 0; ib < m; ib += CPU_MB) {
        int kb, jb, rows = ib + CPU_MB < m ? CPU_MB : m - ib;
        for (jb = 0; jb < n; jb += CPU_NB)
            for (kb = 0; kb < k; kb += CPU_KB)
                cpu_rows(rows, n, k, kb, kb + CPU_KB < k ? kb + CPU_KB : k, jb, jb + CPU_NB < n ? jb + CPU_NB : n,
                         a + (size_t)ib * k, b, c + (size_t)ib * n);
    }
}
#undef CPU_MB
#undef CPU_KB
#undef CPU_NB

/* CBLAS with 32-bit ints, and the ILP64 flavour with a "64_" suffix (the
 * OpenBLAS that NumPy wheels carry). Enum values are CBLAS's. */
typedef void (*cpu_sgemm32)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                            float *, int);
typedef void (*cpu_sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                            const float *, int64_t, float, float *, int64_t);
static void *cpu_lib;
static cpu_sgemm32 cpu_f32;
static cpu_sgemm64 cpu_f64;

int bench_blas_load(char *name, size_t len) {
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", "libopenblasp-r0.so",
                                        "libblis.so.4",     "libblis.so",     "libmkl_rt.so.2",
                                        "libmkl_rt.so",     "libcblas.so.3",  "libblas.so.3",
                                        "libblas.so",       NULL};
    const char *env = getenv("NNCL_BENCH_BLAS");
    int i;
    if (cpu_lib) return 1;
    for (i = -1; !cpu_lib && (i < 0 || names[i]); i++) {
        const char *lib = i < 0 ? env : names[i];
        union { void *p; cpu_sgemm32 f32; cpu_sgemm64 f64; } sym; /* object to function pointer, portably */
        if (!lib || !*lib) continue;
        if (!(cpu_lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) continue;
        if ((sym.p = dlsym(cpu_lib, "cblas_sgemm")) != NULL) {
            cpu_f32 = sym.f32;
        } else if ((sym.p = dlsym(cpu_lib, "cblas_sgemm64_")) != NULL) {
            cpu_f64 = sym.f64;
        } else {
            dlclose(cpu_lib);
            cpu_lib = NULL;
            continue;
        }
        {
            Dl_info info;
            const char *path = lib;
            union { void *p; cpu_sgemm32 f; } fp;
            fp.f = cpu_f32;
            if (!fp.p) {
                union { void *p; cpu_sgemm64 f; } fq;
                fq.f = cpu_f64;
                fp.p = fq.p;
            }
            if (dladdr(fp.p, &info) && info.dli_fname) path = info.dli_fname;
            snprintf(name, len, "%s%s", path, cpu_f64 ? " (ILP64)" : "");
        }
    }
    return cpu_lib != NULL;
}

void bench_blas_sgemm(int ta, int tb, int m, int n, int k, const float *a, const float *b, float *c) {
    int lda = ta ? m : k, ldb = tb ? k : n;
    /* 101 CblasRowMajor, 111 CblasNoTrans, 112 CblasTrans */
    if (cpu_f32) cpu_f32(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    else if (cpu_f64) cpu_f64(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}

/* The library stays mapped: BLAS runtimes (libgfortran, OpenBLAS's thread
 * pool) keep allocations from their start-up that a leak checker would
 * report as lost, with no name to suppress, once the library is gone. */
void bench_blas_unload(void) {
    cpu_lib = NULL;
    cpu_f32 = NULL;
    cpu_f64 = NULL;
}
