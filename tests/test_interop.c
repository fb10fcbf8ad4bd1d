/* test_interop.c - the public interop calls (nncl.h) on every device: the
 * OpenCL objects behind a device and a tensor, the library's kernel files and
 * programs, the own GEMM variants run one by one and the half-storage
 * product against a double reference, the choice nncl_gemm made, and the
 * argument errors of each. Uses the public header only, as the bench does. */
#include "harness.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define M 19
#define N 23
#define K 17

/* want = A B from a [M,K], b [K,N] in double. */
static void reference(const float *a, const float *b, double *want) {
    int i, j, p;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0;
            for (p = 0; p < K; p++) s += (double)a[i * K + p] * b[p * N + j];
            want[i * N + j] = s;
        }
}

/* Half patterns to float, for reading a half-storage result back. */
static float half_to_float(unsigned h, int store) {
    if (store == 2) {
        unsigned u = h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    } else {
        int e = (int)((h >> 10) & 31), m = (int)(h & 1023);
        double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        return (float)((h & 0x8000) ? -v : v);
    }
}

static int device_checks(nncl_context *ctx, int d, const float *a, const float *b, const double *want) {
    const char *lbl = th_device_label(ctx, d);
    int sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    nncl_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    nncl_opencl o;
    float got[M * N];
    void *program = NULL;
    int v, nv, ran = 0, fails = 0;
    const char *chosen;

    TH_OK("interop_device_opencl", ctx, nncl_device_opencl(ctx, d, &o));
    TH_CHECK("interop_device_opencl", o.platform && o.device && o.context && o.queue);
    TH_CHECK("interop_device_opencl", nncl_device_opencl(ctx, nncl_device_count(ctx), &o) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK("interop_device_opencl", nncl_device_opencl(ctx, d, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    th_pass("interop_device_opencl %s", lbl);

    TH_OK("interop_kernel_program", ctx, nncl_kernel_program(ctx, d, "elementwise", &program));
    TH_CHECK("interop_kernel_program", program != NULL);
    TH_CHECK("interop_kernel_program", nncl_kernel_program(ctx, d, "no_such_family", &program) != NNCL_OK);
    th_pass("interop_kernel_program %s", lbl);
    { /* each family alone, as an eager op or a plan too large to bundle builds it */
        const char *file;
        int i, built = 0;
        for (i = 0; (file = nncl_kernel_family(i)) != NULL; i++) {
            char family[64];
            size_t len = strlen(file);
            if (len < 4 || len - 3 >= sizeof family || !strcmp(file, "common.cl")) continue;
            memcpy(family, file, len - 3);
            family[len - 3] = 0;
            program = NULL;
            if (nncl_kernel_program(ctx, d, family, &program) != NNCL_OK || !program) {
                th_fail("interop_kernel_program_each", "%s: cl/%s does not build alone: %s", lbl, file,
                        nncl_last_error(ctx));
                return 1;
            }
            built++;
        }
        th_pass("interop_kernel_program_each %s: each of %d kernel families builds alone", lbl, built);
    }

    TH_OK("interop_tensors", ctx, nncl_tensor_create(ctx, d, 2, sa, &ta));
    TH_OK("interop_tensors", ctx, nncl_tensor_create(ctx, d, 2, sb, &tb));
    TH_OK("interop_tensors", ctx, nncl_tensor_create(ctx, d, 2, sc, &tc));
    TH_CHECK("interop_tensor_opencl", nncl_tensor_opencl(ta) != NULL && nncl_tensor_opencl(ta) != nncl_tensor_opencl(tb));
    TH_CHECK("interop_tensor_opencl", nncl_tensor_opencl(NULL) == NULL);
    th_pass("interop_tensor_opencl %s", lbl);
    TH_OK("interop_tensors", ctx, nncl_tensor_write(ta, a, M * K));
    TH_OK("interop_tensors", ctx, nncl_tensor_write(tb, b, K * N));

    /* every own variant that takes A B, alone */
    nv = nncl_gemm_variant_count(ctx, d);
    for (v = 0; v < nv; v++) {
        const char *name = nncl_gemm_variant_name(ctx, d, v);
        TH_CHECK("interop_gemm_variant", name && *name);
        if (!nncl_gemm_variant_takes(ctx, d, v, 0, 0)) continue;
        th_poison(got, M * N);
        TH_OK("interop_tensors", ctx, nncl_tensor_write(tc, got, M * N));
        TH_OK("interop_gemm_variant", ctx, nncl_gemm_variant_run(ctx, v, 0, 0, M, N, K, ta, tb, tc));
        TH_OK("interop_gemm_variant", ctx, nncl_tensor_read(tc, got, M * N));
        if (!th_close("interop_gemm_variant", got, want, M * N, 1e-10)) {
            printf("    (variant %s on %s)\n", name, lbl);
            fails++;
        }
        ran++;
    }
    TH_CHECK("interop_gemm_variant", nncl_gemm_variant_name(ctx, d, nv) == NULL);
    TH_CHECK("interop_gemm_variant", nncl_gemm_variant_run(ctx, nv, 0, 0, M, N, K, ta, tb, tc) != NNCL_OK);
    TH_CHECK("interop_gemm_variant", nncl_gemm_variant_run(ctx, 0, 0, 0, M, N, K + 1, ta, tb, tc) == NNCL_ERR_SHAPE ||
                                         nv == 0);
    if (fails) return 1;
    th_pass("interop_gemm_variant %s: %d of %d variants ran A B alone", lbl, ran, nv);

    /* half storage: patterns written, the product read back as patterns */
    {
        int store;
        for (store = 1; store <= 2; store++) {
            unsigned short bits[M * N];
            double tol = store == 1 ? 1e-5 : 1e-3;
            int i;
            TH_OK("interop_gemm_half", ctx, nncl_tensor_write_half(ta, store, a, M * K));
            TH_OK("interop_gemm_half", ctx, nncl_tensor_write_half(tb, store, b, K * N));
            TH_OK("interop_gemm_half", ctx, nncl_gemm_half(ctx, store, 0, 0, M, N, K, ta, tb, tc));
            TH_OK("interop_gemm_half", ctx, nncl_tensor_read(tc, got, M * N));
            memcpy(bits, got, sizeof bits); /* the first M*N half elements of c */
            for (i = 0; i < M * N; i++) got[i] = half_to_float(bits[i], store);
            if (!th_close("interop_gemm_half", got, want, M * N, tol)) return 1;
        }
        TH_CHECK("interop_gemm_half", nncl_tensor_write_half(ta, 3, a, 4) == NNCL_ERR_INVALID_ARGUMENT);
        TH_CHECK("interop_gemm_half", nncl_tensor_write_half(ta, 1, a, 2 * M * K + 2) == NNCL_ERR_SHAPE);
        TH_CHECK("interop_gemm_half", nncl_gemm_half(ctx, 0, 0, 0, M, N, K, ta, tb, tc) == NNCL_ERR_INVALID_ARGUMENT);
        th_pass("interop_gemm_half %s: fp16 and bf16", lbl);
    }

    /* the choice nncl_gemm made for the shape is named afterwards */
    TH_OK("interop_gemm_chosen", ctx, nncl_tensor_write(ta, a, M * K));
    TH_OK("interop_gemm_chosen", ctx, nncl_tensor_write(tb, b, K * N));
    TH_OK("interop_gemm_chosen", ctx, nncl_gemm(ctx, 0, 0, 1.0f, ta, tb, 0.0f, tc));
    chosen = nncl_gemm_chosen(ctx, d, 0, 0, M, N, K);
    TH_CHECK("interop_gemm_chosen", chosen && *chosen);
    TH_CHECK("interop_gemm_chosen", nncl_gemm_tuned(ctx, d) == 0 || nncl_gemm_tuned(ctx, d) == 1);
    th_pass("interop_gemm_chosen %s: %s", lbl, chosen);

    nncl_tensor_free(ta);
    nncl_tensor_free(tb);
    nncl_tensor_free(tc);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    float *a = th_random(M * K, -1, 1, 7), *b = th_random(K * N, -1, 1, 8);
    double want[M * N];
    int d, i, seen_common = 0;
    const char *f;
    if (!ctx) {
        free(a);
        free(b);
        return th_exit_code();
    }
    for (i = 0; (f = nncl_kernel_family(i)) != NULL; i++) seen_common |= !strcmp(f, "common.cl");
    if (seen_common && i > 1 && nncl_kernel_family(-1) == NULL)
        th_pass("interop_kernel_family: %d kernel files, common.cl among them", i);
    else
        th_fail("interop_kernel_family", "%d files, common.cl %s", i, seen_common ? "seen" : "missing");
    reference(a, b, want);
    for (d = 0; d < nncl_device_count(ctx); d++) device_checks(ctx, d, a, b, want);
    nncl_free(ctx);
    free(a);
    free(b);
    return th_exit_code();
}
