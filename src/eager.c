/* eager.c - the public eager ops on tensors: argument and shape checks, then
 * one kernel launch on the tensors' device, without waiting. */
#include "internal.h"

/* All of a call's tensors must be of ctx and on one device. */
static nncl_status eager_same_device(nncl_context *ctx, const char *fn, const nncl_tensor *a, const nncl_tensor *b,
                                     const nncl_tensor *out) {
    if (a->device != out->device || (b && b->device != a->device))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: tensors are on different devices", fn);
    return NNCL_OK;
}

static nncl_status eager_binary(nncl_context *ctx, const char *fn, const char *kernel, const nncl_tensor *a,
                                const nncl_tensor *b, nncl_tensor *out) {
    nncl_device *dev;
    cl_kernel k;
    nncl__args args;
    int cols;
    NNCL_TRY(nncl__check_tensor(ctx, a, "a"));
    NNCL_TRY(nncl__check_tensor(ctx, b, "b"));
    NNCL_TRY(nncl__check_tensor(ctx, out, "out"));
    NNCL_TRY(eager_same_device(ctx, fn, a, b, out));
    cols = a->shape[a->ndim - 1];
    if (out->numel != a->numel)
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: out has %zu elements, a has %zu", fn, out->numel, a->numel);
    if (b->numel != a->numel && !(b->ndim == 1 && b->shape[0] == cols))
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "%s: b has %zu elements; it must match a (%zu) or be a row vector [%d]", fn,
                          b->numel, a->numel, cols);
    dev = &ctx->devices[a->device];
    NNCL_TRY(nncl__kernel(ctx, dev, "elementwise", kernel, &k));
    nncl__args_begin(&args, ctx, k);
    nncl__arg_mem(&args, a->mem);
    nncl__arg_int(&args, 0);
    nncl__arg_mem(&args, b->mem);
    nncl__arg_int(&args, 0);
    nncl__arg_int(&args, (int)b->numel);
    nncl__arg_mem(&args, out->mem);
    nncl__arg_int(&args, 0);
    nncl__arg_int(&args, (int)a->numel);
    return nncl__launch_1d(&args, dev, a->numel);
}

nncl_status nncl_add(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_add", "nncl_add_f32", a, b, out);
}
nncl_status nncl_sub(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_sub", "nncl_sub_f32", a, b, out);
}
nncl_status nncl_mul(nncl_context *ctx, const nncl_tensor *a, const nncl_tensor *b, nncl_tensor *out) {
    return eager_binary(ctx, "nncl_mul", "nncl_mul_f32", a, b, out);
}
