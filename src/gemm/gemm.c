/* gemm.c - matrix products through CLBlast's C API (row-major), with its
 * status codes mapped to nncl's, and the eager nncl_gemm() on tensors
 * (which runs whichever kernel gemm_pick.c chose for the shape). */
#include "gemm/gemm.h"
#include <clblast_c.h>

nncl_status nncl__blas_fail(nncl_context *ctx, int code, const char *call) {
    if (code > -1000) /* CLBlast passes OpenCL error codes through */
        return nncl__cl_fail(ctx, (cl_int)code, call, __FILE__, __LINE__);
    if (code == CLBlastInsufficientMemoryTemp || code == CLBlastTempBufferAllocFailure)
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "%s: CLBlast could not get its temporary buffer (%d)", call, code);
    if (code <= -1007 && code >= -1024)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: CLBlast rejected the matrix arguments (%d)", call, code);
    if (code == CLBlastNoHalfPrecision || code == CLBlastNoDoublePrecision)
        return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s: the device lacks the precision CLBlast needs (%d)", call, code);
    return nncl__fail(ctx, NNCL_ERR_BLAS, "%s: CLBlast error %d", call, code);
}

nncl_status nncl__sgemm_clblast(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g) {
    CLBlastStatusCode s;
    CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (g->m == 0 || g->n == 0) return NNCL_OK;
    if (g->temp)
        s = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha, g->a, g->a_off,
                                       g->lda, g->b, g->b_off, g->ldb, g->beta, g->c, g->c_off, g->ldc, &dev->queue,
                                       nncl__profile_slot_named(dev, "clblast_sgemm"), g->temp);
    else
        s = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha, g->a, g->a_off, g->lda, g->b,
                         g->b_off, g->ldb, g->beta, g->c, g->c_off, g->ldc, &dev->queue,
                         nncl__profile_slot_named(dev, "clblast_sgemm"));
    if (s != CLBlastSuccess) return nncl__blas_fail(ctx, (int)s, "CLBlastSgemm");
    return nncl__gemm_epilogue(ctx, dev, g);
}

nncl_status nncl__sgemm_clblast_temp(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes) {
    CLBlastStatusCode s = CLBlastSGemmTempBufferSize(
        CLBlastLayoutRowMajor, g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, g->m, g->n, g->k, g->a_off, g->lda, g->b_off, g->ldb,
        g->c_off, g->ldc, &dev->queue, bytes);
    return s == CLBlastSuccess ? NNCL_OK : nncl__blas_fail(ctx, (int)s, "CLBlastSGemmTempBufferSize");
}

nncl_status nncl_gemm(nncl_context *ctx, int trans_a, int trans_b, float alpha, const nncl_tensor *a,
                      const nncl_tensor *b, float beta, nncl_tensor *c) {
    nncl__gemm_args g;
    nncl_status st;
    int am, ak, bk, bn;
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_gemm: ctx is NULL");
    NNCL_TRY(nncl__check_tensor(ctx, a, "a of nncl_gemm"));
    NNCL_TRY(nncl__check_tensor(ctx, b, "b of nncl_gemm"));
    NNCL_TRY(nncl__check_tensor(ctx, c, "c of nncl_gemm"));
    if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "nncl_gemm: a, b and c must be 2-D (got %d, %d, %d dimensions)", a->ndim,
                          b->ndim, c->ndim);
    if (a->device != b->device || a->device != c->device)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_gemm: a, b, c are on devices %d, %d, %d", a->device,
                          b->device, c->device);
    am = trans_a ? a->shape[1] : a->shape[0];
    ak = trans_a ? a->shape[0] : a->shape[1];
    bk = trans_b ? b->shape[1] : b->shape[0];
    bn = trans_b ? b->shape[0] : b->shape[1];
    if (ak != bk || c->shape[0] != am || c->shape[1] != bn)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "nncl_gemm: op(a) is [%d,%d], op(b) is [%d,%d], c is [%d,%d]", am, ak, bk,
                          bn, c->shape[0], c->shape[1]);
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = (size_t)am;
    g.n = (size_t)bn;
    g.k = (size_t)ak;
    g.alpha = alpha;
    g.beta = beta;
    g.a = a->mem;
    g.lda = (size_t)a->shape[1];
    g.b = b->mem;
    g.ldb = (size_t)b->shape[1];
    g.c = c->mem;
    g.ldc = (size_t)c->shape[1];
    NNCL_LOCKED(ctx, st, nncl__sgemm_exact(ctx, &ctx->devices[c->device], &g)); /* choices, scratch, kernels */
    return st;
}
