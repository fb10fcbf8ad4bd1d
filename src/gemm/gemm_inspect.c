/* gemm_inspect.c - the public window onto the GEMM layer's choices (nncl.h,
 * interop): the own variants a device chooses among, one product through a
 * given variant or in half storage with no choice made, the choice made for
 * a shape, and whether a CLBlast tuning is applied. For measuring each
 * candidate against CLBlast on the same queue and buffers. */
#include "gemm/gemm.h"
#include <stdio.h>

/* Variant i of device d, or NULL (the reason recorded on ctx). */
static const nncl__gemm_variant *inspect_variant(nncl_context *ctx, int device, int i) {
    nncl_device *dev = nncl__device(ctx, device);
    const nncl__gemm_variant *v = NULL;
    nncl_status st;
    int n = 0;
    if (!dev) return NULL;
    NNCL_LOCKED(ctx, st, nncl__gemm_variants(ctx, dev, 0, &v, &n));
    if (st != NNCL_OK) return NULL;
    if (i < 0 || i >= n) {
        nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "device %d has no own GEMM variant %d (it has %d)", device, i, n);
        return NULL;
    }
    return &v[i];
}

int nncl_gemm_variant_count(nncl_context *ctx, int device) {
    nncl_device *dev = nncl__device(ctx, device);
    const nncl__gemm_variant *v;
    nncl_status st;
    int n = 0;
    if (!dev) return 0;
    NNCL_LOCKED(ctx, st, nncl__gemm_variants(ctx, dev, 0, &v, &n));
    return st == NNCL_OK ? n : 0;
}

const char *nncl_gemm_variant_name(nncl_context *ctx, int device, int variant) {
    const nncl__gemm_variant *v = inspect_variant(ctx, device, variant);
    return v ? v->name : NULL;
}

int nncl_gemm_variant_takes(nncl_context *ctx, int device, int variant, int trans_a, int trans_b) {
    const nncl__gemm_variant *v = inspect_variant(ctx, device, variant);
    return v ? nncl__gemm_takes(v, trans_a, trans_b) : 0;
}

/* The arguments of c [m,n] = op(a) op(b) from the first elements of the
 * tensors' buffers, half elements two to a float when half. */
static nncl_status inspect_args(nncl_context *ctx, const char *fn, int half, int ta, int tb, int m, int n, int k,
                                const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c, nncl__gemm_args *g) {
    size_t per = half ? 2 : 1;
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    NNCL_TRY(nncl__check_tensor(ctx, a, "a"));
    NNCL_TRY(nncl__check_tensor(ctx, b, "b"));
    NNCL_TRY(nncl__check_tensor(ctx, c, "c"));
    if (a->device != b->device || a->device != c->device)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: a, b, c are on devices %d, %d, %d", fn, a->device,
                          b->device, c->device);
    if (m <= 0 || n <= 0 || k <= 0)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: m %d, n %d, k %d must be positive", fn, m, n, k);
    if ((size_t)m * (size_t)k > a->numel * per || (size_t)k * (size_t)n > b->numel * per ||
        (size_t)m * (size_t)n > c->numel * per)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: [%d,%d] x [%d,%d] -> [%d,%d] exceeds a, b or c (%zu, %zu, %zu %s)",
                          fn, m, k, k, n, m, n, a->numel * per, b->numel * per, c->numel * per,
                          half ? "half elements" : "floats");
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
    g->a = a->mem;
    g->b = b->mem;
    g->c = c->mem;
    return NNCL_OK;
}

nncl_status nncl_gemm_variant_run(nncl_context *ctx, int variant, int trans_a, int trans_b, int m, int n, int k,
                                  const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    nncl__gemm_args g;
    const nncl__gemm_variant *v;
    nncl_status st;
    NNCL_TRY(inspect_args(ctx, "nncl_gemm_variant_run", 0, trans_a, trans_b, m, n, k, a, b, c, &g));
    if (!(v = inspect_variant(ctx, c->device, variant))) return NNCL_ERR_INVALID_ARGUMENT;
    if (!nncl__gemm_takes(v, trans_a, trans_b))
        return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "nncl_gemm_variant_run: %s runs no product with trans_a %d, trans_b %d",
                          v->name, trans_a, trans_b);
    NNCL_LOCKED(ctx, st, nncl__gemm_own(ctx, &ctx->devices[c->device], v, &g));
    return st;
}

nncl_status nncl_gemm_half(nncl_context *ctx, int store, int trans_a, int trans_b, int m, int n, int k,
                           const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *c) {
    nncl__gemm_args g;
    nncl_status st;
    if (store != 1 && store != 2)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_gemm_half: store %d is not 1 (fp16) or 2 (bf16)", store);
    NNCL_TRY(inspect_args(ctx, "nncl_gemm_half", 1, trans_a, trans_b, m, n, k, a, b, c, &g));
    g.store = store;
    NNCL_LOCKED(ctx, st, nncl__sgemm(ctx, &ctx->devices[c->device], &g));
    return st;
}

const char *nncl_gemm_chosen(nncl_context *ctx, int device, int trans_a, int trans_b, int m, int n, int k) {
    nncl_device *dev = nncl__device(ctx, device);
    const nncl__gemm_choice *c;
    nncl__gemm_args g;
    int mode = nncl__gemm_mode(), idx;
    if (!dev) return "";
    if (mode == 1) return "clblast";
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = m > 0 ? (size_t)m : 0;
    g.n = n > 0 ? (size_t)n : 0;
    g.k = k > 0 ? (size_t)k : 0;
    if (!dev->gemm || !(c = nncl__gemm_choice_find(dev->gemm, &g))) return "";
    idx = mode == 2 ? c->best_own : c->best;
    return idx < 0 ? "clblast" : dev->gemm->all[idx].name;
}

int nncl_gemm_tuned(nncl_context *ctx, int device) {
    char path[1200];
    FILE *f;
    if (!nncl__device(ctx, device)) return 0;
    if (!nncl__tune_file(ctx, device, path, sizeof path) || !(f = fopen(path, "rb"))) return 0;
    fclose(f);
    return nncl__tune_mode(ctx) >= 0;
}
