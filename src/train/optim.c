/* optim.c - optimizer defaults, learning-rate schedules, config checks, the
 * per-step launches of cl/optimizer.cl on a plan's flat buffers and the
 * double-precision host reference of the same updates (semantics in optim.h). */
#include "train/optim.h"
#include <limits.h>
#include <math.h>

#define OPT_PI 3.14159265358979323846
#define OPT_ADAM_VW 8 /* NNCL_OPT_VW of cl/optimizer.cl */

nncl_optim_config nncl_optim_default(nncl_optimizer kind) {
    nncl_optim_config o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    /* Every kind's fields get PyTorch's defaults, so that changing kind
     * later keeps sensible values. */
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    o.alpha = 0.99f;
    o.schedule = NNCL_SCHED_CONSTANT;
    /* step_size and total_steps stay 0: a STEP or COSINE schedule must be
     * given its length, and nncl__optim_check() says so when it is not. */
    o.gamma = 0.1f; /* StepLR's default */
    switch (kind) {
    case NNCL_OPT_SGD: o.lr = 0.01f; break; /* PyTorch has no fixed SGD default worth copying: 0.01 */
    case NNCL_OPT_ADAM: o.lr = 1e-3f; break;
    case NNCL_OPT_ADAMW: o.lr = 1e-3f; o.weight_decay = 1e-2f; break;
    case NNCL_OPT_RMSPROP: o.lr = 1e-2f; break;
    default: o.lr = 1e-3f; break; /* nncl__optim_check() rejects the kind */
    }
    return o;
}

float nncl_optim_lr(const nncl_optim_config *o, int64_t t) {
    double lr, base;
    if (!o) return 0.0f;
    if (t < 0) t = 0;
    lr = o->lr;
    base = lr;
    if (o->schedule == NNCL_SCHED_WARMUP_COSINE && o->total_steps > o->warmup_steps) { /* nanoGPT's get_lr */
        double W = o->warmup_steps, T = o->total_steps;
        if (t < (int64_t)o->warmup_steps) return (float)(lr * (double)(t + 1) / (W + 1));
        if (t > (int64_t)o->total_steps) return o->min_lr;
        return (float)(o->min_lr + (lr - o->min_lr) * 0.5 * (1.0 + cos(OPT_PI * ((double)t - W) / (T - W))));
    }
    if (o->schedule == NNCL_SCHED_STEP && o->step_size > 0) {
        base = lr * pow((double)o->gamma, (double)(t / o->step_size));
    } else if (o->schedule == NNCL_SCHED_COSINE && o->total_steps > 0) {
        double T = (double)o->total_steps, tc = t < (int64_t)o->total_steps ? (double)t : T;
        base = o->min_lr + (lr - o->min_lr) * 0.5 * (1.0 + cos(OPT_PI * tc / T));
    }
    if (o->warmup_steps > 0 && t < (int64_t)o->warmup_steps) base *= (double)(t + 1) / (double)o->warmup_steps;
    return (float)base;
}

const char *nncl__optim_name(nncl_optimizer k) {
    switch (k) {
    case NNCL_OPT_SGD: return "SGD";
    case NNCL_OPT_ADAM: return "Adam";
    case NNCL_OPT_ADAMW: return "AdamW";
    case NNCL_OPT_RMSPROP: return "RMSprop";
    default: return "?";
    }
}

/* lo <= x (< or <=) hi and finite; hi may be HUGE_VAL for no upper bound. */
static nncl_status opt_range(nncl_context *ctx, const nncl_optim_config *o, const char *field, double x, double lo,
                             int lo_open, double hi, int hi_open) {
    int ok = isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (ok) return NNCL_OK;
    if (hi == HUGE_VAL)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer config (%s): %s = %g must be finite and %s %g",
                          nncl__optim_name(o->kind), field, x, lo_open ? ">" : ">=", lo);
    return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer config (%s): %s = %g is outside %c%g, %g%c",
                      nncl__optim_name(o->kind), field, x, lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
}

nncl_status nncl__optim_check(nncl_context *ctx, const nncl_optim_config *o) {
    if (!o) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer config is NULL");
    if ((int)o->kind < (int)NNCL_OPT_SGD || (int)o->kind > (int)NNCL_OPT_RMSPROP)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "optimizer config: kind = %d is not an optimizer (NNCL_OPT_SGD, _ADAM, _ADAMW, _RMSPROP)",
                          (int)o->kind);
    NNCL_TRY(opt_range(ctx, o, "lr", o->lr, 0, 0, HUGE_VAL, 0));
    NNCL_TRY(opt_range(ctx, o, "weight_decay", o->weight_decay, 0, 0, HUGE_VAL, 0));
    NNCL_TRY(opt_range(ctx, o, "clip_norm", o->clip_norm, 0, 0, HUGE_VAL, 0));
    switch (o->kind) {
    case NNCL_OPT_SGD:
        NNCL_TRY(opt_range(ctx, o, "momentum", o->momentum, 0, 0, HUGE_VAL, 0));
        NNCL_TRY(opt_range(ctx, o, "dampening", o->dampening, 0, 0, 1, 0));
        if (o->nesterov != 0 && o->nesterov != 1)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer config (SGD): nesterov = %d must be 0 or 1",
                              o->nesterov);
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "optimizer config (SGD): nesterov needs momentum > 0 and dampening 0 (momentum = %g, "
                              "dampening = %g)", (double)o->momentum, (double)o->dampening);
        break;
    case NNCL_OPT_ADAM:
    case NNCL_OPT_ADAMW:
        NNCL_TRY(opt_range(ctx, o, "beta1", o->beta1, 0, 0, 1, 1));
        NNCL_TRY(opt_range(ctx, o, "beta2", o->beta2, 0, 0, 1, 1));
        NNCL_TRY(opt_range(ctx, o, "eps", o->eps, 0, 1, HUGE_VAL, 0));
        break;
    case NNCL_OPT_RMSPROP:
        NNCL_TRY(opt_range(ctx, o, "alpha", o->alpha, 0, 0, 1, 1));
        NNCL_TRY(opt_range(ctx, o, "eps", o->eps, 0, 1, HUGE_VAL, 0));
        NNCL_TRY(opt_range(ctx, o, "momentum", o->momentum, 0, 0, HUGE_VAL, 0));
        break;
    }
    switch (o->schedule) {
    case NNCL_SCHED_CONSTANT: break;
    case NNCL_SCHED_STEP:
        if (o->step_size < 1)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "optimizer config (%s): step_size = %d must be >= 1 for the STEP schedule",
                              nncl__optim_name(o->kind), o->step_size);
        NNCL_TRY(opt_range(ctx, o, "gamma", o->gamma, 0, 1, HUGE_VAL, 0));
        break;
    case NNCL_SCHED_COSINE:
        if (o->total_steps < 1)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "optimizer config (%s): total_steps = %d must be >= 1 for the COSINE schedule",
                              nncl__optim_name(o->kind), o->total_steps);
        NNCL_TRY(opt_range(ctx, o, "min_lr", o->min_lr, 0, 0, o->lr, 0));
        break;
    case NNCL_SCHED_WARMUP_COSINE:
        if (o->total_steps <= o->warmup_steps)
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "optimizer config (%s): total_steps = %d must be > warmup_steps = %d for the "
                              "WARMUP_COSINE schedule", nncl__optim_name(o->kind), o->total_steps, o->warmup_steps);
        NNCL_TRY(opt_range(ctx, o, "min_lr", o->min_lr, 0, 0, o->lr, 0));
        break;
    default:
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "optimizer config (%s): schedule = %d is not a schedule (NNCL_SCHED_CONSTANT, _STEP, _COSINE, "
                          "_WARMUP_COSINE)",
                          nncl__optim_name(o->kind), (int)o->schedule);
    }
    if (o->warmup_steps < 0)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer config (%s): warmup_steps = %d must be >= 0",
                          nncl__optim_name(o->kind), o->warmup_steps);
    return NNCL_OK;
}

size_t nncl__optim_state_floats(const nncl_optim_config *o) {
    switch (o->kind) {
    case NNCL_OPT_SGD: return o->momentum != 0 ? 1 : 0;
    case NNCL_OPT_ADAM:
    case NNCL_OPT_ADAMW: return 2;
    case NNCL_OPT_RMSPROP: return o->momentum > 0 ? 2 : 1;
    default: return 0;
    }
}

size_t nncl__optim_scratch_floats(void) { return NNCL_OPTIM_GROUPS + 1; }

/* The optimizer's kernels of cl/optimizer.cl, slots of dev->optim_kernels
 * (per storage type: half builds also write the parameters' working copy):
 * resolved once per device (by nncl__optim_prepare when a trainer is
 * made), then launched by index. */
enum { OPT_K_SGD, OPT_K_ADAM, OPT_K_RMSPROP, OPT_K_SUMSQ_PARTIAL, OPT_K_SUMSQ_FINAL };
static const char *const opt_kernel_names[5] = {"nncl_sgd_f32", "nncl_adam_f32", "nncl_rmsprop_f32",
                                                "nncl_sumsq_f32_partial", "nncl_sumsq_f32_final"};

static int opt_update_slot(nncl_optimizer k) {
    return k == NNCL_OPT_SGD ? OPT_K_SGD : k == NNCL_OPT_RMSPROP ? OPT_K_RMSPROP : OPT_K_ADAM;
}

static nncl_status opt_kernel(nncl_context *ctx, nncl_device *dev, int slot, int store, nncl__args *a) {
    static const char *const opts[3] = {"", "-DNNCL_STORE=1", "-DNNCL_STORE=2"};
    nncl__kslot *k = &dev->optim_kernels[store][slot];
    if (!k->kernel) NNCL_TRY(nncl__kslot_resolve_opts(ctx, dev, "optimizer", opts[store], opt_kernel_names[slot], k));
    nncl__args_begin_slot(a, ctx, k);
    return NNCL_OK;
}

nncl_status nncl__optim_prepare(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o) {
    return nncl__optim_prepare_store(ctx, dev, o, 0);
}

nncl_status nncl__optim_prepare_store(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int store) {
    nncl__args a;
    NNCL_TRY(nncl__optim_check(ctx, o));
    if (!dev) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl__optim_prepare: device is NULL");
    if (store < 0 || store > 2)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl__optim_prepare: storage type %d is not 0, 1 or 2",
                          store);
    NNCL_TRY(opt_kernel(ctx, dev, opt_update_slot(o->kind), store, &a));
    if (o->clip_norm > 0) {
        NNCL_TRY(opt_kernel(ctx, dev, OPT_K_SUMSQ_PARTIAL, 0, &a));
        NNCL_TRY(opt_kernel(ctx, dev, OPT_K_SUMSQ_FINAL, 0, &a));
    }
    return NNCL_OK;
}

/* The buffer behind v holds floats [v.off, v.off + count), and the kernels'
 * int offsets and sizes can address them. */
static nncl_status opt_check_view(nncl_context *ctx, nncl__view v, size_t count, const char *what) {
    size_t bytes = 0, end;
    if (!v.mem) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer step: %s buffer is NULL", what);
    if (nncl__add_overflow(v.off, count, &end) || end > (size_t)INT_MAX)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "optimizer step: %s view (offset %zu, %zu floats) goes past the 2^31 floats a kernel "
                          "addresses", what, v.off, count);
    NNCL_CL(ctx, clGetMemObjectInfo(v.mem, CL_MEM_SIZE, sizeof bytes, &bytes, NULL));
    if (end > bytes / sizeof(float))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "optimizer step: %s view (offset %zu, %zu floats) does not fit its buffer of %zu floats",
                          what, v.off, count, bytes / sizeof(float));
    return NNCL_OK;
}

nncl_status nncl__optim_sumsq(nncl_context *ctx, nncl_device *dev, nncl__view grads, cl_mem scratch, size_t n) {
    nncl__args a;
    nncl__view sv;
    /* Work-items in groups of 16, each summing at least 256 floats (fewer
     * items for a small buffer), at most NNCL_OPTIM_GROUPS. */
    size_t local = dev->max_work_group < 16 ? dev->max_work_group : 16;
    size_t items = (n + 255) / 256, one = 1;
    if (items > NNCL_OPTIM_GROUPS) items = NNCL_OPTIM_GROUPS;
    items = (items + local - 1) / local * local;
    if (items > NNCL_OPTIM_GROUPS) items = NNCL_OPTIM_GROUPS / local * local; /* a group size not dividing 256 */
    sv.mem = scratch;
    sv.off = 0;
    NNCL_TRY(opt_check_view(ctx, grads, n, "grads"));
    NNCL_TRY(opt_check_view(ctx, sv, nncl__optim_scratch_floats(), "clipping scratch"));
    NNCL_TRY(opt_kernel(ctx, dev, OPT_K_SUMSQ_PARTIAL, 0, &a));
    nncl__arg_mem(&a, grads.mem);
    nncl__arg_int(&a, (int)grads.off);
    nncl__arg_mem(&a, scratch);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, (int)n);
    NNCL_TRY(nncl__launch(&a, dev, 1, &items, &local));
    NNCL_TRY(opt_kernel(ctx, dev, OPT_K_SUMSQ_FINAL, 0, &a));
    nncl__arg_mem(&a, scratch);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, (int)items);
    nncl__arg_int(&a, NNCL_OPTIM_TOTAL);
    NNCL_TRY(nncl__launch(&a, dev, 1, &one, NULL));
    return NNCL_OK;
}

nncl_status nncl__optim_step(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                             nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n) {
    NNCL_TRY(nncl__optim_check(ctx, o));
    if (o->clip_norm > 0 && dev && n > 0 && t >= 1) NNCL_TRY(nncl__optim_sumsq(ctx, dev, grads, scratch, n));
    return nncl__optim_update(ctx, dev, o, t, params, grads, state, scratch, n);
}

nncl_status nncl__optim_update(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                               nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n) {
    nncl__view none;
    none.mem = NULL;
    none.off = 0;
    return nncl__optim_update_store(ctx, dev, o, t, params, grads, state, scratch, n, 1.0f, none, 0, n);
}

nncl_status nncl__optim_update_store(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                                     nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n,
                                     float unscale, nncl__view half, int store, size_t n_decay) {
    size_t k, sfloats = 0;
    int clip;
    cl_mem smem;
    nncl__args a;
    float lr;
    NNCL_TRY(nncl__optim_check(ctx, o));
    if (!dev) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer step: device is NULL");
    if (t < 1)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer step: step number t = %lld must be >= 1",
                          (long long)t);
    if (n == 0) return NNCL_OK;
    k = nncl__optim_state_floats(o);
    clip = o->clip_norm > 0;
    NNCL_TRY(opt_check_view(ctx, params, n, "params"));
    NNCL_TRY(opt_check_view(ctx, grads, n, "grads"));
    if (k) {
        if (nncl__mul_overflow(k, n, &sfloats))
            return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "optimizer step: state of %zu x %zu floats overflows", k,
                              n);
        NNCL_TRY(opt_check_view(ctx, state, sfloats, "optimizer state"));
    }
    if (clip) {
        nncl__view sv;
        sv.mem = scratch;
        sv.off = 0;
        NNCL_TRY(opt_check_view(ctx, sv, nncl__optim_scratch_floats(), "clipping scratch"));
    }
    if (store < 0 || store > 2 || (store && !half.mem))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "optimizer step: storage type %d %s a working copy of the parameters", store,
                          store ? "without" : "with");
    lr = nncl_optim_lr(o, t - 1);

    NNCL_TRY(opt_kernel(ctx, dev, opt_update_slot(o->kind), store, &a));
    smem = k ? state.mem : params.mem; /* never touched when there is no state */
    nncl__arg_mem(&a, params.mem);
    nncl__arg_int(&a, (int)params.off);
    nncl__arg_mem(&a, store ? half.mem : params.mem); /* fp32: a stand-in, never written */
    nncl__arg_int(&a, store ? (int)half.off : 0);
    nncl__arg_mem(&a, grads.mem);
    nncl__arg_int(&a, (int)grads.off);
    nncl__arg_mem(&a, smem);
    nncl__arg_int(&a, k ? (int)state.off : 0);
    nncl__arg_mem(&a, clip ? scratch : grads.mem); /* not clipping: a stand-in, never read */
    nncl__arg_int(&a, clip ? NNCL_OPTIM_TOTAL : 0);
    nncl__arg_int(&a, (int)n);
    nncl__arg_int(&a, (int)(n_decay < n ? n_decay : n));
    nncl__arg_float(&a, lr);
    switch (o->kind) {
    case NNCL_OPT_SGD:
        nncl__arg_float(&a, o->momentum);
        nncl__arg_float(&a, o->dampening);
        nncl__arg_float(&a, o->weight_decay);
        nncl__arg_float(&a, o->clip_norm);
        nncl__arg_float(&a, unscale);
        nncl__arg_int(&a, o->nesterov);
        nncl__arg_int(&a, t == 1);
        break;
    case NNCL_OPT_ADAM:
    case NNCL_OPT_ADAMW:
        nncl__arg_float(&a, o->beta1);
        nncl__arg_float(&a, o->beta2);
        nncl__arg_float(&a, o->eps);
        nncl__arg_float(&a, o->weight_decay);
        nncl__arg_float(&a, (float)((double)lr / (1.0 - pow((double)o->beta1, (double)t))));
        nncl__arg_float(&a, (float)sqrt(1.0 - pow((double)o->beta2, (double)t)));
        nncl__arg_float(&a, o->clip_norm);
        nncl__arg_float(&a, unscale);
        nncl__arg_int(&a, o->kind == NNCL_OPT_ADAMW);
        return nncl__launch_1d(&a, dev, (n + OPT_ADAM_VW - 1) / OPT_ADAM_VW); /* a vector of parameters per item */
    case NNCL_OPT_RMSPROP:
        nncl__arg_float(&a, o->alpha);
        nncl__arg_float(&a, o->eps);
        nncl__arg_float(&a, o->momentum);
        nncl__arg_float(&a, o->weight_decay);
        nncl__arg_float(&a, o->clip_norm);
        nncl__arg_float(&a, unscale);
        break;
    }
    return nncl__launch_1d(&a, dev, n);
}

void nncl__optim_ref(const nncl_optim_config *o, int64_t t, double *p, const double *g, double *state, size_t n) {
    nncl__optim_ref_decay(o, t, p, g, state, n, n);
}

void nncl__optim_ref_decay(const nncl_optim_config *o, int64_t t, double *p, const double *g, double *state, size_t n,
                           size_t n_decay) {
    double lr = nncl_optim_lr(o, t - 1), scale = 1.0;
    double *s0 = state, *s1 = state ? state + n : NULL;
    size_t i;
    if (o->clip_norm > 0) {
        double ss = 0, c;
        for (i = 0; i < n; i++) ss += g[i] * g[i];
        c = (double)o->clip_norm / (sqrt(ss) + 1e-6);
        scale = c >= 1.0 ? 1.0 : c;
    }
    for (i = 0; i < n; i++) {
        double gi = g[i] * scale, pi = p[i], wd = i < n_decay ? o->weight_decay : 0;
        switch (o->kind) {
        case NNCL_OPT_SGD: {
            double mu = o->momentum;
            if (wd != 0) gi += wd * pi;
            if (mu != 0) {
                double b = t == 1 ? gi : mu * s0[i] + (1.0 - (double)o->dampening) * gi;
                s0[i] = b;
                gi = o->nesterov ? gi + mu * b : b;
            }
            p[i] = pi - lr * gi;
            break;
        }
        case NNCL_OPT_ADAM:
        case NNCL_OPT_ADAMW: {
            double b1 = o->beta1, b2 = o->beta2, m, v;
            double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
            if (wd != 0) {
                if (o->kind == NNCL_OPT_ADAMW)
                    pi *= 1.0 - lr * wd;
                else
                    gi += wd * pi;
            }
            m = b1 * s0[i] + (1.0 - b1) * gi;
            v = b2 * s1[i] + (1.0 - b2) * gi * gi;
            s0[i] = m;
            s1[i] = v;
            p[i] = pi - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + (double)o->eps);
            break;
        }
        case NNCL_OPT_RMSPROP: {
            double al = o->alpha, a, d;
            if (wd != 0) gi += wd * pi;
            a = al * s0[i] + (1.0 - al) * gi * gi;
            s0[i] = a;
            d = gi / (sqrt(a) + (double)o->eps);
            if (o->momentum > 0) {
                s1[i] = (double)o->momentum * s1[i] + d;
                d = s1[i];
            }
            p[i] = pi - lr * d;
            break;
        }
        }
    }
}

#undef OPT_PI
#undef OPT_ADAM_VW
