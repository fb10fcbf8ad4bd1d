/* optim.h - the optimizers on a plan's flat buffers (cl/optimizer.cl): config
 * checks, learning-rate schedules, optimizer-state sizes, the per-step launch
 * and a double-precision host reference of the same math. */
#ifndef NNCL_OPTIM_H
#define NNCL_OPTIM_H
#include "runtime/internal.h"

/* Most partial sums of the clipping reduction (one per work-item); the
 * scratch buffer holds these plus the total, at NNCL_OPTIM_TOTAL. */
#define NNCL_OPTIM_GROUPS 256
#define NNCL_OPTIM_TOTAL NNCL_OPTIM_GROUPS

/* Semantics (PyTorch's, per parameter i, after clipping; see
 * cl/optimizer.cl for the exact formulas):
 *   SGD      torch.optim.SGD: momentum, dampening, nesterov, L2 weight decay;
 *            the momentum buffer is set to the gradient on the first step.
 *   ADAM     torch.optim.Adam (amsgrad=False), L2 weight decay added to the
 *            gradient, bias correction 1 - beta^t with t the 1-based step.
 *   ADAMW    torch.optim.AdamW: p *= 1 - lr*wd first, then Adam without L2.
 *   RMSPROP  torch.optim.RMSprop, centered=False.
 * Clipping (clip_norm > 0): torch.nn.utils.clip_grad_norm_ over the whole
 * gradient buffer, grad *= min(1, clip_norm / (||grad||_2 + 1e-6)), done
 * on the device: the gradient buffer itself is left unchanged.
 *
 * Schedule, nncl_optim_lr(o, t), t the 0-based step (negative t counts as 0):
 *   CONSTANT  base(t) = lr
 *   STEP      base(t) = lr * gamma^floor(t / step_size)     (StepLR, per step)
 *   COSINE    base(t) = min_lr + (lr - min_lr) * (1 + cos(pi * min(t, T) / T)) / 2
 *             with T = total_steps: lr at t = 0, min_lr from t = T on
 *             (CosineAnnealingLR's closed form, held at min_lr after T).
 *   warm-up   W = warmup_steps > 0 multiplies any schedule by
 *             min(1, (t + 1) / W): step 0 uses base(0)/W (not 0, which would
 *             waste a step), step W-1 and later the full base(t). The
 *             schedule's clock is not shifted by the warm-up (nanoGPT's is:
 *             WARMUP_COSINE).
 *   WARMUP_COSINE  nanoGPT's get_lr with W = warmup_steps, T = total_steps
 *             (lr_decay_iters), W < T: lr (t + 1) / (W + 1) for t < W, then
 *             min_lr + (lr - min_lr) (1 + cos(pi (t - W) / (T - W))) / 2,
 *             min_lr after T.
 * Computed in double, returned as float. */

/* "SGD", "Adam", "AdamW", "RMSprop"; "?" for another value. */
const char *nncl__optim_name(nncl_optimizer k);

/* Checks every field that o's kind and schedule use: NNCL_ERR_INVALID_ARGUMENT
 * naming the field, its value and the allowed range. ctx may be NULL. */
nncl_status nncl__optim_check(nncl_context *ctx, const nncl_optim_config *o);

/* Floats of optimizer state per trainable parameter: SGD 1 with momentum
 * else 0; Adam and AdamW 2; RMSprop 2 with momentum else 1. The state view
 * of nncl__optim_step holds this times n floats, slot-major: slot k of
 * parameter i at off + k*n + i (Adam: m then v; RMSprop: square average then
 * momentum buffer). Zero it before the first step (t = 1). */
size_t nncl__optim_state_floats(const nncl_optim_config *o);

/* Floats of the scratch buffer nncl__optim_step needs when clipping
 * (NNCL_OPTIM_GROUPS + 1); one per device, its content is not kept. */
size_t nncl__optim_scratch_floats(void);

/* Checks o and builds the kernels o needs on dev (the program and the
 * kernel objects, cached on the device), so that a step never compiles. */
nncl_status nncl__optim_prepare(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o);

/* Queues the update of n trainable parameters on dev's queue and returns
 * without waiting: one launch, after the clipping reduction
 * (nncl__optim_sumsq) when o->clip_norm > 0. t is the 1-based number of
 * this update, PyTorch's state["step"] after its increment (1 for the first
 * update on a zeroed state; t < 1 is NNCL_ERR_INVALID_ARGUMENT): lr =
 * nncl_optim_lr(o, t - 1) (whose step is 0-based), Adam's bias correction
 * uses 1 - beta^t, and SGD sets its momentum buffer to the gradient when
 * t == 1.
 * params: n floats updated in place; grads: n floats, only read; state:
 * nncl__optim_state_floats(o) * n floats (its mem may be NULL when that is
 * 0); scratch: nncl__optim_scratch_floats() floats, NULL allowed when not
 * clipping. Views' offsets are in floats. Buffer sizes are checked against
 * the views (NNCL_ERR_INVALID_ARGUMENT). o is assumed checked
 * (nncl__optim_prepare). Kernels belong to dev's thread of use. */
nncl_status nncl__optim_step(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                             nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n);

/* The update alone, for a caller that already has this step's sum of
 * squares of grads at scratch[NNCL_OPTIM_TOTAL] (from nncl__optim_sumsq, or
 * written there by the host): clipping reads it instead of reducing the
 * gradient again, so the reduction that checks a step for NaN/Inf also
 * serves its clipping. */
nncl_status nncl__optim_update(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                               nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n);

/* The same with weight decay on the first n_decay parameters alone (the
 * graph's decayed prefix, nncl_param_decay), and with the gradient multiplied by unscale (1 / the loss scale, a
 * power of two) before anything else reads it (scratch[NNCL_OPTIM_TOTAL]
 * must then hold the sum of squares of the unscaled gradient), in a plan
 * whose activations are stored in half (store 1 fp16, 2 bf16; 0 fp32,
 * half unused): the update also writes the parameters' working copy,
 * half[i] = params[i] in that type, in the same pass. The prepare for it
 * builds the optimizer's kernels for that type. */
nncl_status nncl__optim_update_store(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int64_t t,
                                     nncl__view params, nncl__view grads, nncl__view state, cl_mem scratch, size_t n,
                                     float unscale, nncl__view half, int store, size_t n_decay);
nncl_status nncl__optim_prepare_store(nncl_context *ctx, nncl_device *dev, const nncl_optim_config *o, int store);

/* Queues the sum of squares of grads[0..n) into scratch[NNCL_OPTIM_TOTAL]
 * (the clipping reduction, also the trainer's NaN/Inf check on one device):
 * one pass over grads without barriers, then one work-item adds the
 * partials. */
nncl_status nncl__optim_sumsq(nncl_context *ctx, nncl_device *dev, nncl__view grads, cl_mem scratch, size_t n);

/* The same step on the host in double, t as above (>= 1): p[n] updated,
 * g[n] only read (clipping scales a copy), state[state_floats * n] in the
 * layout above. lr is nncl_optim_lr(o, t - 1), a float as the device gets;
 * the other hyperparameters are o's floats taken exactly. */
void nncl__optim_ref(const nncl_optim_config *o, int64_t t, double *p, const double *g, double *state, size_t n);
/* The same with weight decay on p[0..n_decay) alone. */
void nncl__optim_ref_decay(const nncl_optim_config *o, int64_t t, double *p, const double *g, double *state, size_t n,
                           size_t n_decay);

#endif /* NNCL_OPTIM_H */
