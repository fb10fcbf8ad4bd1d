/* test_errors.c - bad input to every core public function, table-driven: each
 * row is one call that must fail with the expected status, leave a message
 * naming the function or argument (freshly written, on the right context or
 * on the thread), clear the out-pointer it was given, and leave the context
 * working (a small add afterwards gives the right numbers). Also: every
 * *_free takes NULL, and the accessors take NULL. */
#include "harness.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef struct err_fx {
    nncl_context *ctx, *ctx2;
    int other;              /* a second device of ctx, or -1 */
    nncl_tensor *a, *b, *out;     /* [2,3]: the add that must keep working */
    nncl_tensor *row, *v2, *out4, *x3, *so, *c22, *c33;
    nncl_tensor *t32; /* [3,2]: as many elements as a, another shape */
    nncl_tensor *a2;        /* [2,3] of the second context */
    nncl_tensor *ad;        /* [2,3] on the second device (NULL without one) */
    nncl_tensor *tmp;       /* out-pointers the rows hand over */
    nncl_event *ev;
    nncl_context *ctx_tmp;
    nncl_config cfg_none, cfg_999, cfg_k, cfg_log, cfg_tune, cfg_kdir;
    nncl_device_info info[4];
    int count;
    uint64_t u1, u2;
    float data[64];
    int s23[2], s20[2], sneg[2], sover[3], sbig[2];
    nncl_status big_status; /* creating [max_alloc/4096 + 1, 1024] */
    const char *big_mention;
} err_fx;

/* Where the row's message goes. */
enum { ERR_CTX = 0, ERR_THREAD = 1 };
/* Row flags: needs a second device; must clear tmp / ev / ctx_tmp. */
enum { ERR_OTHER = 1, ERR_CLR_T = 2, ERR_CLR_E = 4, ERR_CLR_C = 8 };

static nncl_status err_scale(nncl_context *ctx, const nncl_tensor *x, nncl_tensor *out) {
    return nncl_scale(ctx, x, 2.0f, out);
}

/* Rows of a unary op fn named NAME (id prefix P). */
#define ERR_UNARY(X, P, fn, NAME)                                                                                \
    X(P##_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, NAME ": ctx", 0, fn(NULL, f->a, f->out))                   \
    X(P##_x, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument x", 0, fn(f->ctx, NULL, f->out))        \
    X(P##_out, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument out", 0, fn(f->ctx, f->a, NULL))      \
    X(P##_shape, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out is [2,2], x is [2,3]", 0, fn(f->ctx, f->a, f->out4))        \
    X(P##_shape6, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out is [3,2], x is [2,3]", 0, fn(f->ctx, f->a, f->t32))        \
    X(P##_ctx2x, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor x belongs to another context", 0,            \
      fn(f->ctx, f->a2, f->out))                                                                                 \
    X(P##_ctx2o, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor out belongs to another context", 0,          \
      fn(f->ctx, f->a, f->a2))                                                                                   \
    X(P##_dev, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensors are on different devices", ERR_OTHER,         \
      fn(f->ctx, f->a, f->ad))

#define ERR_BINARY(X, P, fn, NAME)                                                                               \
    X(P##_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, NAME ": ctx", 0, fn(NULL, f->a, f->b, f->out))             \
    X(P##_a, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument a", 0, fn(f->ctx, NULL, f->b, f->out))  \
    X(P##_b, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument b", 0, fn(f->ctx, f->a, NULL, f->out))  \
    X(P##_out, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument out", 0,                              \
      fn(f->ctx, f->a, f->b, NULL))                                                                              \
    X(P##_bshape, NNCL_ERR_SHAPE, ERR_CTX, NAME ": b is [2]; it must have a's shape [2,3]", 0,                   \
      fn(f->ctx, f->a, f->v2, f->out))                                                                           \
    X(P##_bshape6, NNCL_ERR_SHAPE, ERR_CTX, NAME ": b is [3,2]; it must have a's shape [2,3]", 0,                \
      fn(f->ctx, f->a, f->t32, f->out))                                                                          \
    X(P##_oshape, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out is [2,2], a is [2,3]", 0, fn(f->ctx, f->a, f->b, f->out4)) \
    X(P##_oshape6, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out is [3,2], a is [2,3]", 0, fn(f->ctx, f->a, f->b, f->t32)) \
    X(P##_ctx2, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor b belongs to another context", 0,             \
      fn(f->ctx, f->a, f->a2, f->out))                                                                           \
    X(P##_dev, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensors are on different devices", ERR_OTHER,         \
      fn(f->ctx, f->ad, f->b, f->out))

#define ERR_SUM(X, P, fn, NAME)                                                                                  \
    X(P##_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, NAME ": ctx", 0, fn(NULL, f->a, 0, f->so))                 \
    X(P##_x, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument x", 0, fn(f->ctx, NULL, 0, f->so))      \
    X(P##_out, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor argument out", 0, fn(f->ctx, f->a, 0, NULL))   \
    X(P##_axis2, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": axis is 2", 0, fn(f->ctx, f->a, 2, f->so))          \
    X(P##_axisneg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": axis is -1", 0, fn(f->ctx, f->a, -1, f->so))      \
    X(P##_3d, NNCL_ERR_SHAPE, ERR_CTX, NAME ": x has 3 dimensions", 0, fn(f->ctx, f->x3, 0, f->so))              \
    X(P##_out0, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out has 4 elements; axis 0", 0, fn(f->ctx, f->a, 0, f->out4))   \
    X(P##_out1, NNCL_ERR_SHAPE, ERR_CTX, NAME ": out has 3 elements; axis 1", 0, fn(f->ctx, f->a, 1, f->so))     \
    X(P##_ctx2, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensor x belongs to another context", 0,             \
      fn(f->ctx, f->a2, 0, f->so))                                                                               \
    X(P##_dev, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, NAME ": tensors are on different devices", ERR_OTHER,         \
      fn(f->ctx, f->a, 0, f->ad))

/* X(id, expected status, where the message goes, what it must contain,
 * flags, call) */
#define ERR_TABLE(X)                                                                                             \
    X(init_out, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_init: out", 0, nncl_init(NULL, NULL))               \
    X(init_none, NNCL_ERR_NO_DEVICE, ERR_THREAD, "no-such-device-anywhere", ERR_CLR_C,                           \
      nncl_init(&f->cfg_none, &f->ctx_tmp))                                                                      \
    X(init_999, NNCL_ERR_NO_DEVICE, ERR_THREAD, "no device 999", ERR_CLR_C, nncl_init(&f->cfg_999, &f->ctx_tmp)) \
    X(init_k, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "bad \":k\"", ERR_CLR_C, nncl_init(&f->cfg_k, &f->ctx_tmp)) \
    X(init_log, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "log_level 9", ERR_CLR_C,                                 \
      nncl_init(&f->cfg_log, &f->ctx_tmp))                                                                       \
    X(init_tune, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "gemm_tune 9", ERR_CLR_C,                                \
      nncl_init(&f->cfg_tune, &f->ctx_tmp))                                                                      \
    X(init_kdir, NNCL_ERR_IO, ERR_THREAD, "/no-such-nncl-kernel-folder", ERR_CLR_C,                             \
      nncl_init(&f->cfg_kdir, &f->ctx_tmp))                                                                      \
    X(list_count, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_devices_list", 0, nncl_devices_list(NULL, 0, NULL)) \
    X(list_out, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_devices_list", 0,                                   \
      nncl_devices_list(NULL, 4, &f->count))                                                                     \
    X(list_max, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_devices_list", 0,                                   \
      nncl_devices_list(f->info, -1, &f->count))                                                                 \
    X(info_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "context is NULL", 0, nncl_device_info_get(NULL, 0, f->info)) \
    X(info_neg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device -1", 0, nncl_device_info_get(f->ctx, -1, f->info))   \
    X(info_big, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device 64", 0, nncl_device_info_get(f->ctx, 64, f->info))   \
    X(info_out, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_device_info_get: out", 0,                              \
      nncl_device_info_get(f->ctx, 0, NULL))                                                                     \
    X(finish_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "context is NULL", 0, nncl_finish(NULL, 0))             \
    X(finish_neg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device -1", 0, nncl_finish(f->ctx, -1))                   \
    X(finish_big, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device 64", 0, nncl_finish(f->ctx, 64))                   \
    X(mem_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "context is NULL", 0,                                      \
      nncl_device_memory(NULL, 0, &f->u1, &f->u2))                                                               \
    X(mem_big, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device 64", 0, nncl_device_memory(f->ctx, 64, &f->u1, &f->u2)) \
    X(create_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "context is NULL", ERR_CLR_T,                           \
      nncl_tensor_create(NULL, 0, 2, f->s23, &f->tmp))                                                           \
    X(create_out, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_create: out", 0,                              \
      nncl_tensor_create(f->ctx, 0, 2, f->s23, NULL))                                                            \
    X(create_devneg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device -1", ERR_CLR_T,                                 \
      nncl_tensor_create(f->ctx, -1, 2, f->s23, &f->tmp))                                                        \
    X(create_devbig, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "device 64", ERR_CLR_T,                                 \
      nncl_tensor_create(f->ctx, 64, 2, f->s23, &f->tmp))                                                        \
    X(create_ndim0, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "ndim 0", ERR_CLR_T,                                     \
      nncl_tensor_create(f->ctx, 0, 0, f->s23, &f->tmp))                                                         \
    X(create_ndim5, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "ndim 5", ERR_CLR_T,                                     \
      nncl_tensor_create(f->ctx, 0, 5, f->sover, &f->tmp))                                                       \
    X(create_ndimneg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "ndim -1", ERR_CLR_T,                                  \
      nncl_tensor_create(f->ctx, 0, -1, f->s23, &f->tmp))                                                        \
    X(create_shape, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "shape is NULL", ERR_CLR_T,                              \
      nncl_tensor_create(f->ctx, 0, 2, NULL, &f->tmp))                                                           \
    X(create_zero, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "dimension 1 is 0", ERR_CLR_T,                            \
      nncl_tensor_create(f->ctx, 0, 2, f->s20, &f->tmp))                                                         \
    X(create_neg, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "dimension 0 is -3", ERR_CLR_T,                            \
      nncl_tensor_create(f->ctx, 0, 2, f->sneg, &f->tmp))                                                        \
    X(create_overflow, NNCL_ERR_OUT_OF_MEMORY, ERR_CTX, "2^31-1", ERR_CLR_T,                                     \
      nncl_tensor_create(f->ctx, 0, 3, f->sover, &f->tmp))                                                       \
    X(create_huge, f->big_status, ERR_CTX, f->big_mention, ERR_CLR_T,                                            \
      nncl_tensor_create(f->ctx, 0, 2, f->sbig, &f->tmp))                                                        \
    X(write_t, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_tensor_write: tensor", 0,                            \
      nncl_tensor_write(NULL, f->data, 6))                                                                       \
    X(write_host, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_write: host pointer", 0,                      \
      nncl_tensor_write(f->a, NULL, 6))                                                                          \
    X(write_short, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_write: count 5", 0, nncl_tensor_write(f->a, f->data, 5)) \
    X(write_long, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_write: count 7", 0, nncl_tensor_write(f->a, f->data, 7)) \
    X(read_t, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_tensor_read: tensor", 0,                                \
      nncl_tensor_read(NULL, f->data, 6))                                                                          \
    X(read_host, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_read: host pointer", 0,                        \
      nncl_tensor_read(f->a, NULL, 6))                                                                           \
    X(read_zero, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_read: count 0", 0, nncl_tensor_read(f->a, f->data, 0))    \
    X(wasync_done, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_write_async: done", 0,                       \
      nncl_tensor_write_async(f->a, f->data, 6, NULL))                                                           \
    X(wasync_t, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_tensor_write_async: tensor", ERR_CLR_E,             \
      nncl_tensor_write_async(NULL, f->data, 6, &f->ev))                                                         \
    X(wasync_count, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_write_async: count 5", ERR_CLR_E,                      \
      nncl_tensor_write_async(f->a, f->data, 5, &f->ev))                                                         \
    X(rasync_done, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_read_async: done", 0,                        \
      nncl_tensor_read_async(f->a, f->data, 6, NULL))                                                            \
    X(rasync_host, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_read_async: host pointer", ERR_CLR_E,        \
      nncl_tensor_read_async(f->a, NULL, 6, &f->ev))                                                             \
    X(rasync_count, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_read_async: count 60", ERR_CLR_E,                      \
      nncl_tensor_read_async(f->a, f->data, 60, &f->ev))                                                         \
    X(event_wait, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_event_wait", 0, nncl_event_wait(NULL))            \
    X(copy_dst, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_copy: dst", 0, nncl_tensor_copy(NULL, f->a))    \
    X(copy_src, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_tensor_copy: src", 0, nncl_tensor_copy(f->out, NULL))  \
    X(copy_both, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_tensor_copy", 0, nncl_tensor_copy(NULL, NULL))     \
    X(copy_shape, NNCL_ERR_SHAPE, ERR_CTX, "nncl_tensor_copy: 6 elements into 4", 0,                             \
      nncl_tensor_copy(f->out4, f->a))                                                                           \
    ERR_BINARY(X, add, nncl_add, "nncl_add")                                                                     \
    ERR_BINARY(X, sub, nncl_sub, "nncl_sub")                                                                     \
    ERR_BINARY(X, mul, nncl_mul, "nncl_mul")                                                                     \
    ERR_UNARY(X, scale, err_scale, "nncl_scale")                                                                 \
    ERR_UNARY(X, relu, nncl_relu, "nncl_relu")                                                                   \
    ERR_UNARY(X, sigmoid, nncl_sigmoid, "nncl_sigmoid")                                                          \
    ERR_UNARY(X, tanh, nncl_tanh, "nncl_tanh")                                                                   \
    ERR_UNARY(X, gelu, nncl_gelu, "nncl_gelu")                                                                   \
    ERR_UNARY(X, softmax, nncl_softmax, "nncl_softmax")                                                          \
    ERR_UNARY(X, log_softmax, nncl_log_softmax, "nncl_log_softmax")                                              \
    ERR_SUM(X, sum, nncl_sum, "nncl_sum")                                                                        \
    ERR_SUM(X, mean, nncl_mean, "nncl_mean")                                                                     \
    X(gemm_ctx, NNCL_ERR_INVALID_ARGUMENT, ERR_THREAD, "nncl_gemm: ctx", 0,                                      \
      nncl_gemm(NULL, 0, 1, 1.0f, f->a, f->b, 0.0f, f->c22))                                                     \
    X(gemm_a, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "argument a of nncl_gemm", 0,                                  \
      nncl_gemm(f->ctx, 0, 1, 1.0f, NULL, f->b, 0.0f, f->c22))                                                   \
    X(gemm_b, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "argument b of nncl_gemm", 0,                                  \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->a, NULL, 0.0f, f->c22))                                                   \
    X(gemm_c, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "argument c of nncl_gemm", 0,                                  \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->a, f->b, 0.0f, NULL))                                                     \
    X(gemm_inner, NNCL_ERR_SHAPE, ERR_CTX, "nncl_gemm: op(a) is [2,3], op(b) is [2,3]", 0,                       \
      nncl_gemm(f->ctx, 0, 0, 1.0f, f->a, f->b, 0.0f, f->c22))                                                   \
    X(gemm_cshape, NNCL_ERR_SHAPE, ERR_CTX, "c is [3,3]", 0,                                                     \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->a, f->b, 0.0f, f->c33))                                                   \
    X(gemm_1d, NNCL_ERR_SHAPE, ERR_CTX, "nncl_gemm: a, b and c must be 2-D", 0,                                  \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->row, f->b, 0.0f, f->c22))                                                 \
    X(gemm_ctx2, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "tensor a of nncl_gemm belongs to another context", 0,      \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->a2, f->b, 0.0f, f->c22))                                                  \
    X(gemm_dev, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "nncl_gemm: a, b, c are on devices", ERR_OTHER,              \
      nncl_gemm(f->ctx, 0, 1, 1.0f, f->a, f->b, 0.0f, f->ad))                                                    \
    X(tune_nan, NNCL_ERR_INVALID_ARGUMENT, ERR_CTX, "seconds_budget is NaN", 0, nncl_tune_gemm(f->ctx, 0, NAN))

#define ERR_FN(id, status, where, mention, flags, call)                                                          \
    static nncl_status err_##id(err_fx *f) {                                                                     \
        (void)f;                                                                                                 \
        return call;                                                                                             \
    }
ERR_TABLE(ERR_FN)
#undef ERR_FN

typedef struct err_row {
    const char *name;
    nncl_status (*call)(err_fx *f);
    int where, flags;
} err_row;

#define ERR_ROW(id, status, where, mention, flags, call) {#id, err_##id, where, flags},
static const err_row err_rows[] = {ERR_TABLE(ERR_ROW)};
#undef ERR_ROW

/* Expected status and mention, which may depend on the fixture. */
static void err_expect(const err_fx *f, int i, nncl_status *status, const char **mention) {
    int k = 0;
#define ERR_EXPECT(id, st, where, men, flags, call)                                                              \
    if (k++ == i) {                                                                                              \
        *status = st;                                                                                            \
        *mention = men;                                                                                          \
        return;                                                                                                  \
    }
    ERR_TABLE(ERR_EXPECT)
#undef ERR_EXPECT
    (void)f;
}

/* Writes a message that does not contain mention on ctx (or the thread),
 * so that finding mention afterwards shows the row wrote it. */
static void err_reset_message(err_fx *f, int where, const char *mention) {
    if (where == ERR_THREAD) {
        nncl_finish(NULL, 0); /* "context is NULL" */
        if (strstr(nncl_last_error(NULL), mention)) nncl_event_wait(NULL);
    } else {
        nncl_tensor_read(f->a, NULL, 6); /* "...read: host pointer is NULL" */
        if (strstr(nncl_last_error(f->ctx), mention)) nncl_finish(f->ctx, 98765);
    }
}

/* The add that must keep working: a = 1..6, b = 10..60. */
static int err_context_works(const char *name, err_fx *f) {
    float got[6];
    int i;
    TH_OK(name, f->ctx, nncl_add(f->ctx, f->a, f->b, f->out));
    for (i = 0; i < 6; i++) got[i] = -1;
    TH_OK(name, f->ctx, nncl_tensor_read(f->out, got, 6));
    for (i = 0; i < 6; i++)
        if (got[i] != 11.0f * (float)(i + 1)) {
            th_fail(name, "context broken after the row: add gave [%d] = %g, want %g", i, (double)got[i],
                    11.0 * (i + 1));
            return 1;
        }
    return 0;
}

static int err_run_row(err_fx *f, int i) {
    static int sentinel_storage[3];
    const err_row *r = &err_rows[i];
    char name[160];
    nncl_status want, got;
    const char *mention, *msg;
    snprintf(name, sizeof name, "errors %s", r->name);
    err_expect(f, i, &want, &mention);
    if ((r->flags & ERR_OTHER) && !f->ad) {
        th_skip(name, "needs a second device in the context (have one)");
        return 0;
    }
    f->tmp = (nncl_tensor *)(void *)&sentinel_storage[0];
    f->ev = (nncl_event *)(void *)&sentinel_storage[1];
    f->ctx_tmp = (nncl_context *)(void *)&sentinel_storage[2];
    err_reset_message(f, r->where, mention);
    got = r->call(f);
    msg = nncl_last_error(r->where == ERR_CTX ? f->ctx : NULL);
    /* release whatever a wrongly successful call created */
    if (f->tmp != (nncl_tensor *)(void *)&sentinel_storage[0]) nncl_tensor_free(f->tmp);
    if (f->ev != (nncl_event *)(void *)&sentinel_storage[1]) nncl_event_free(f->ev);
    if (f->ctx_tmp != (nncl_context *)(void *)&sentinel_storage[2]) nncl_free(f->ctx_tmp);
    if (got != want) {
        th_fail(name, "returned %d (%s), want %d (%s); message: %s", (int)got, nncl_status_str(got), (int)want,
                nncl_status_str(want), msg);
        return 1;
    }
    if (!msg || !*msg || !strstr(msg, mention)) {
        th_fail(name, "message \"%s\" does not mention \"%s\"", msg ? msg : "(null)", mention);
        return 1;
    }
    if (((r->flags & ERR_CLR_T) && f->tmp) || ((r->flags & ERR_CLR_E) && f->ev) ||
        ((r->flags & ERR_CLR_C) && f->ctx_tmp)) {
        th_fail(name, "the out-pointer was not set to NULL on failure");
        return 1;
    }
    if (err_context_works(name, f)) return 1;
    th_pass("%s: %s", name, msg);
    return 0;
}

static int err_tensor(err_fx *f, nncl_context *ctx, int d, int ndim, int d0, int d1, int d2, nncl_tensor **t) {
    int shape[3];
    float zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    shape[0] = d0;
    shape[1] = d1;
    shape[2] = d2;
    TH_OK("errors setup", ctx, nncl_tensor_create(ctx, d, ndim, shape, t));
    if (nncl_tensor_numel(*t) <= 8) TH_OK("errors setup", ctx, nncl_tensor_write(*t, zero, nncl_tensor_numel(*t)));
    (void)f;
    return 0;
}

static int err_setup(err_fx *f) {
    nncl_config cfg = nncl_config_default();
    nncl_device_info info;
    uint64_t blocks;
    int i;
    memset(f, 0, sizeof *f);
    if (!(f->ctx = th_context())) return 1;
    f->other = nncl_device_count(f->ctx) > 1 ? 1 : -1;
    cfg.devices = "0"; /* a second context: its tensors are foreign to ctx */
    TH_OK("errors setup", NULL, nncl_init(&cfg, &f->ctx2));
    f->cfg_none = nncl_config_default();
    f->cfg_none.devices = "no-such-device-anywhere";
    f->cfg_999 = nncl_config_default();
    f->cfg_999.devices = "999";
    f->cfg_k = nncl_config_default();
    f->cfg_k.devices = "cpu:x";
    f->cfg_log = f->cfg_tune = f->cfg_kdir = nncl_config_default();
    f->cfg_log.log_level = 9;
    f->cfg_tune.gemm_tune = 9; /* once taken as 1: a minute of tuning */
    f->cfg_kdir.kernel_dir = "/no-such-nncl-kernel-folder";
    for (i = 0; i < 64; i++) f->data[i] = (float)(i + 1);
    f->s23[0] = 2, f->s23[1] = 3;
    f->s20[0] = 2, f->s20[1] = 0;
    f->sneg[0] = -3, f->sneg[1] = 2;
    f->sover[0] = 65536, f->sover[1] = 65536, f->sover[2] = 2;
    TH_OK("errors setup", f->ctx, nncl_device_info_get(f->ctx, 0, &info));
    /* past the largest allocation; past 2^31-1 elements it is caught earlier */
    blocks = info.max_alloc / 4 / 1024 + 1;
    f->sbig[0] = blocks > 0x7fffffff ? 0x7fffffff : (int)blocks;
    f->sbig[1] = 1024;
    f->big_status = NNCL_ERR_OUT_OF_MEMORY;
    f->big_mention = (uint64_t)f->sbig[0] * 1024u > 0x7fffffffu ? "2^31-1" : "largest allocation";
    if (err_tensor(f, f->ctx, 0, 2, 2, 3, 1, &f->a) || err_tensor(f, f->ctx, 0, 2, 2, 3, 1, &f->b) ||
        err_tensor(f, f->ctx, 0, 2, 2, 3, 1, &f->out) || err_tensor(f, f->ctx, 0, 1, 3, 1, 1, &f->row) ||
        err_tensor(f, f->ctx, 0, 1, 2, 1, 1, &f->v2) || err_tensor(f, f->ctx, 0, 2, 2, 2, 1, &f->out4) ||
        err_tensor(f, f->ctx, 0, 3, 2, 3, 1, &f->x3) || err_tensor(f, f->ctx, 0, 1, 3, 1, 1, &f->so) ||
        err_tensor(f, f->ctx, 0, 2, 2, 2, 1, &f->c22) || err_tensor(f, f->ctx, 0, 2, 3, 3, 1, &f->c33) ||
        err_tensor(f, f->ctx, 0, 2, 3, 2, 1, &f->t32) ||
        err_tensor(f, f->ctx2, 0, 2, 2, 3, 1, &f->a2) ||
        (f->other >= 0 && err_tensor(f, f->ctx, f->other, 2, 2, 3, 1, &f->ad)))
        return 1;
    TH_OK("errors setup", f->ctx, nncl_tensor_write(f->a, f->data, 6));
    for (i = 0; i < 6; i++) f->data[i + 8] = 10.0f * (float)(i + 1);
    TH_OK("errors setup", f->ctx, nncl_tensor_write(f->b, f->data + 8, 6));
    for (i = 0; i < 6; i++) f->data[i + 8] = (float)(i + 9);
    return err_context_works("errors setup", f);
}

static void err_teardown(err_fx *f) {
    nncl_tensor *ts[13];
    int i;
    ts[0] = f->a, ts[1] = f->b, ts[2] = f->out, ts[3] = f->row, ts[4] = f->v2, ts[5] = f->out4, ts[6] = f->x3;
    ts[7] = f->so, ts[8] = f->c22, ts[9] = f->c33, ts[10] = f->a2, ts[11] = f->ad, ts[12] = f->t32;
    for (i = 0; i < 13; i++) nncl_tensor_free(ts[i]);
    nncl_free(f->ctx2);
    nncl_free(f->ctx);
}

/* Every *_free takes NULL; accessors take NULL and bad axes. */
static int err_nulls(void) {
    const char *name = "errors free(NULL) and accessors";
    nncl_free(NULL);
    nncl_tensor_free(NULL);
    nncl_event_free(NULL);
    nncl_graph_free(NULL);
    nncl_trainer_free(NULL);
    nncl_idx_free(NULL);
    nncl_csv_free(NULL);
    nncl_dataset_free(NULL);
    nncl_loader_free(NULL);
    nncl_safetensors_free(NULL);
    nncl_progress_free(NULL);
    nncl_curve_free(NULL);
    TH_CHECK(name, nncl_tensor_ndim(NULL) == 0 && nncl_tensor_dim(NULL, 0) == 0);
    TH_CHECK(name, nncl_tensor_numel(NULL) == 0 && nncl_tensor_device(NULL) == -1);
    TH_CHECK(name, nncl_device_count(NULL) == 0);
    TH_CHECK(name, nncl_last_error(NULL) != NULL);
    TH_CHECK(name, nncl_status_str((nncl_status)-999) != NULL && nncl_status_str(NNCL_ERR_SHAPE)[0]);
    th_pass("%s", name);
    return 0;
}

/* A message read with nncl_last_error(ctx) stays as it was while other
 * threads record failures on the same context (the reader gets its own
 * copy), and a new read gives the reader's own failure, not theirs. */
typedef struct err_writer {
    err_fx *f;
    volatile int stop, failures;
} err_writer;

static void *err_write_loop(void *arg) {
    err_writer *w = (err_writer *)arg;
    while (!w->stop)
        if (nncl_add(w->f->ctx, w->f->a, w->f->t32, w->f->out) != NNCL_OK) w->failures++;
    return NULL;
}

static int err_stable_message(err_fx *f) {
    const char *name = "errors message stable under concurrent failures";
    err_writer w;
    pthread_t th;
    char first[512];
    const char *msg;
    int i, changed = 0;
    w.f = f;
    w.stop = 0;
    w.failures = 0;
    nncl_scale(f->ctx, f->a, 2.0f, f->t32); /* a different message to start from */
    msg = nncl_last_error(f->ctx);
    snprintf(first, sizeof first, "%s", msg);
    if (pthread_create(&th, NULL, err_write_loop, &w) != 0) {
        th_skip(name, "no thread");
        return 0;
    }
    for (i = 0; i < 50000000 && w.failures < 500; i++)
        if (strcmp(msg, first) != 0) changed = 1;
    w.stop = 1;
    pthread_join(th, NULL);
    TH_CHECK(name, w.failures > 0);
    TH_CHECK(name, !changed);
    TH_CHECK(name, strcmp(nncl_last_error(f->ctx), first) == 0); /* the writer's failures are the writer's */
    th_pass("%s", name);
    return 0;
}

/* A model too large for the library to address is refused as out of
 * memory, as a device that lacks the memory is: a limit, not a bad
 * argument. */
static int err_too_large(err_fx *f) {
    const char *name = "errors: a model past the 2^31-1 elements a kernel can address is out of memory";
    nncl_graph *g = nncl_graph_create(f->ctx, 1);
    int xs[1] = {1000};
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, x, 10, 1, NNCL_ACT_NONE, "fc"), y);
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = (nncl_trainer *)f; /* must be cleared */
    nncl_status st;
    c.max_batch = 3000000; /* [B,1000] holds 3e9 floats */
    st = loss ? nncl_trainer_create(f->ctx, g, loss, &c, &t) : NNCL_ERR_SHAPE;
    nncl_graph_free(g);
    TH_CHECK(name, st == NNCL_ERR_OUT_OF_MEMORY && t == NULL);
    TH_CHECK(name, strstr(nncl_last_error(f->ctx), "2^31-1") != NULL);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    err_fx f;
    int i, n = (int)(sizeof err_rows / sizeof err_rows[0]);
    err_nulls();
    if (err_setup(&f)) {
        if (f.ctx) err_teardown(&f);
        return th_exit_code();
    }
    TH_CHECK("errors accessors", nncl_tensor_dim(f.a, 2) == 0 && nncl_tensor_dim(f.a, -1) == 0);
    for (i = 0; i < n; i++) err_run_row(&f, i);
    err_stable_message(&f);
    err_too_large(&f);
    err_teardown(&f);
    return th_exit_code();
}
