/* membound.c - the memory-bound kernels at bandwidth: each kernel of a
 * training step whose cost is its traffic (batch norm, ReLU, the residual
 * add, max pooling, the optimizer, and their backward), its achieved GB/s
 * (the bytes it must read and write, over its profiled time) beside the
 * device's on-device copy GB/s, measured here on the same context.
 *
 * The block's step: x [B, 32, 32, 32] (B 64, 8 MiB in fp32) -> conv 1x1
 * 32->32 without bias (so that batch norm's input gradient is wanted) ->
 * batch norm -> ReLU (which the plan fuses into batch norm's passes) -> +
 * the conv's output -> max pool 2 -> global average pool -> dense 10 ->
 * softmax cross-entropy, Adam. The rows' step, of as many elements:
 * x [B, 128, 256] + a learned [128, 256] -> layer norm -> ReLU -> softmax
 * over the 256 -> mean squared error against x, Adam (its items marked
 * "(rows)" where the block's step has the kernel too). The bytes of each
 * kernel are modelled from those shapes (membound_bytes); kernels the
 * model does not know (the convolution's, the losses') are listed by time
 * alone. */
#include "bench.h"
#include <stdlib.h>
#include <string.h>

#define MB_B 64
#define MB_C 32
#define MB_HW 32
#define MB_T 128
#define MB_D 256

typedef struct mb_copy {
    nncl_context *ctx;
    nncl_tensor *a, *b;
} mb_copy;

static int mb_copy_run(void *arg, int iters) {
    mb_copy *j = (mb_copy *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_tensor_copy(j->b, j->a) != NNCL_OK) return 1;
    return nncl_finish(j->ctx, 0) != NNCL_OK;
}

/* What kernel name must move per launch in bytes (s: bytes of an element
 * stored; n: elements of the [B, C, H, W] activation; p: parameters), 0
 * when not modelled. Batch norm: statistics read x; apply reads x, writes
 * y; the parameter gradients read x and dy; the input gradient reads x and
 * dy, writes dx. ReLU: forward reads x, writes y; backward reads y and dy,
 * writes dx. Add: reads a and b, writes the sum. Max pool 2x2: reads x,
 * writes a quarter of it and as many int argmax; backward reads those,
 * writes dx. The global average pool reads (backward: writes) the pooled
 * quarter. Adam: reads p, g, m, v, writes p, m, v (fp32). The partial sums
 * of batch norm's streaming statistics read x, of its gradient x and dy
 * (fused with the activation too). Layer norm: forward reads x, writes y;
 * its input gradient reads x and dy, writes dx; its parameter gradients
 * read x and dy. Softmax: forward reads x, writes y; backward reads y and
 * dy, writes dx. A learned per-sample tensor's gradient (the sum over the
 * batch) reads dy. */
static double membound_bytes(const char *name, double s, double n, double p) {
    static const struct {
        const char *prefix;
        double act, arg, par; /* bytes: act * s * n + arg * 4 * n + par * 4 * p */
    } model[] = {
        {"nncl_batchnorm_stats", 1, 0, 0},
        {"nncl_batchnorm_partial", 1, 0, 0},
        {"nncl_batchnorm_apply", 2, 0, 0},
        {"nncl_batchnorm_backward_f32_params", 2, 0, 0},
        {"nncl_batchnorm_grad_partial", 2, 0, 0},
        {"nncl_batchnorm_backward_f32_actpartial", 2, 0, 0},
        {"nncl_batchnorm_backward", 3, 0, 0},
        {"nncl_relu_backward", 3, 0, 0},
        {"nncl_relu", 2, 0, 0},
        {"nncl_add", 3, 0, 0},
        {"nncl_maxpool2d_backward", 1.25, 0.25, 0},
        {"nncl_maxpool2d", 1.25, 0.25, 0},
        {"nncl_global_avgpool", 0.25, 0, 0}, /* of the pooled [B, C, 16, 16], both ways */
        {"nncl_adam", 0, 0, 7},
        {"nncl_layernorm_backward_f32_params_merge", 0, 0, 0}, /* its partial sums only */
        {"nncl_layernorm_backward_f32_params", 2, 0, 0},
        {"nncl_layernorm_backward", 3, 0, 0},
        {"nncl_layernorm", 2, 0, 0},
        {"nncl_softmax_backward", 3, 0, 0},
        {"nncl_softmax_f32", 2, 0, 0},
        {"nncl_sum_f32_axis0_param", 1, 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof model / sizeof model[0]; i++)
        if (!strncmp(name, model[i].prefix, strlen(model[i].prefix)))
            return model[i].act * s * n + model[i].arg * 4 * n + model[i].par * 4 * p;
    return 0;
}

/* The kernel names the block's step put, so that the rows' step marks its
 * own rows of the same kernels. */
typedef struct mb_seen {
    char name[64][48];
    int n;
} mb_seen;

/* Trains graph g (loss, feeds f, n_f of them) a few steps on profiling
 * context pc and puts each kernel's time per launch and, where modelled,
 * its GB/s (p parameters, n elements an activation) beside copy_gbs.
 * Returns 1 where the driver's profile was implausible. */
static int mb_profile(const bench_opts *o, nncl_context *pc, int d, nncl_graph *g, nncl_node *loss, nncl_feed *f,
                       int n_f, double n, double p, double copy_gbs, mb_seen *seen, const char *what) {
    nncl_train_config tc = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_profile_report rep;
    nncl_profile_kernel k[64];
    nncl_step_info info;
    int i, j, nk, steps = o->quick ? 2 : 5;
    char why[200], item[64];
    tc.max_batch = MB_B;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    if (!loss || nncl_trainer_create(pc, g, loss, &tc, &t) != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", loss ? nncl_last_error(pc) : "the graph does not build");
        bench_put("membound", d, what, "ms", bench_stat_na(), "ms", why);
        return 0;
    }
    for (i = 0; i < 2; i++)
        if (nncl_trainer_step(t, f, n_f, MB_B, &info) != NNCL_OK) break;
    nncl_finish(pc, 0);
    nncl_profile_start(pc, 0);
    for (i = 0; i < steps; i++)
        if (nncl_trainer_step(t, f, n_f, MB_B, &info) != NNCL_OK) break;
    if (nncl_profile_stop(pc, 0, &rep) != NNCL_OK || i < steps || !rep.plausible) {
        snprintf(why, sizeof why, "n/a: %s", i < steps ? nncl_last_error(pc) : "no plausible profile");
        bench_put("membound", d, what, "ms", bench_stat_na(), "ms", why);
        nncl_trainer_free(t);
        return i == steps;
    }
    nk = nncl_profile_kernels(pc, 0, k, 64);
    if (nk > 64) nk = 64;
    for (i = 0; i < nk; i++) {
        double per = k[i].seconds / k[i].launches, bytes = membound_bytes(k[i].name, 4, n, p);
        for (j = 0; j < seen->n && strcmp(seen->name[j], k[i].name); j++) {}
        if (j < seen->n) snprintf(item, sizeof item, "%.33s (rows)", k[i].name);
        else snprintf(item, sizeof item, "%.40s", k[i].name);
        if (j == seen->n && seen->n < 64) snprintf(seen->name[seen->n++], sizeof seen->name[0], "%.47s", k[i].name);
        bench_put_num("membound", d, item, "us_per_launch", per * 1e6, "us", "profiling events");
        bench_put_num("membound", d, item, "launches_per_step", (double)k[i].launches / steps, "", "");
        if (bytes <= 0) continue;
        bench_put_num("membound", d, item, "gbs", bytes / per * 1e-9, "GB/s",
                      "bytes it must read and write (the step's shapes) / its time");
        if (copy_gbs > 0) bench_put_num("membound", d, item, "vs_copy", bytes / per * 1e-9 / copy_gbs, "", "target >= 0.7");
    }
    nncl_trainer_free(t);
    return 0;
}

#define IMPLAUSIBLE "n/a: the driver's profiling timestamps are implausible (the block's step)"

static void membound_device(const bench_opts *o, nncl_context *ctx, int d) {
    nncl_config cfg = nncl_config_default();
    nncl_context *pc = NULL;
    nncl_graph *g = NULL;
    nncl_node *x, *y, *h, *c, *pos;
    nncl_feed f[2];
    mb_copy j;
    mb_seen *seen = (mb_seen *)calloc(1, sizeof *seen);
    bench_stat tcopy;
    bench_timing tm = bench_timing_of(o, o->quick ? 0.5 : 2.0);
    int shape[3] = {MB_C, MB_HW, MB_HW}, rows[2] = {MB_T, MB_D}, flat[1], i, implausible = 0;
    double n = (double)MB_B * MB_C * MB_HW * MB_HW, copy_gbs = 0;
    float *xs = NULL, *ys = NULL;
    char sel[16], why[200];
    int li = bench_list_index(ctx, d);
    memset(&j, 0, sizeof j);
    if (li < 0 || !seen) {
        free(seen);
        return;
    }
    snprintf(sel, sizeof sel, "%d", li);
    cfg.devices = sel;
    cfg.profiling = 1;
    bench_progress("membound d%d: a batch-norm block's and a rows' training step on a fresh profiling context", d);
    if (nncl_init(&cfg, &pc) != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(NULL));
        bench_put("membound", d, "copy", "gbs", bench_stat_na(), "GB/s", why);
        free(seen);
        return;
    }
    /* the copy bandwidth of the same context, on the activation's size */
    flat[0] = (int)n;
    j.ctx = pc;
    if (nncl_tensor_create(pc, 0, 1, flat, &j.a) == NNCL_OK && nncl_tensor_create(pc, 0, 1, flat, &j.b) == NNCL_OK &&
        nncl_tensor_copy(j.a, j.b) == NNCL_OK && bench_time(mb_copy_run, &j, &tm, &tcopy) == 0) {
        bench_stat gb = bench_stat_inverse(tcopy, 2.0 * n * 4 * 1e-9);
        copy_gbs = gb.median;
        bench_put("membound", d, "copy", "gbs", gb, "GB/s", "nncl_tensor_copy of 8 MiB, read+write bytes");
    } else {
        snprintf(why, sizeof why, "n/a: %s", nncl_last_error(pc));
        bench_put("membound", d, "copy", "gbs", bench_stat_na(), "GB/s", why);
    }
    nncl_tensor_free(j.a);
    nncl_tensor_free(j.b);
    xs = (float *)malloc((size_t)n * sizeof(float));
    ys = (float *)malloc(MB_B * sizeof(float));
    if (!xs || !ys) goto done;
    for (i = 0; i < (int)n; i++) xs[i] = (float)((i * 2654435761u) >> 8) / 16777216.0f - 0.5f;
    for (i = 0; i < MB_B; i++) ys[i] = (float)(i % 10);

    /* the block's step */
    g = nncl_graph_create(pc, 1);
    x = nncl_input(g, "x", 3, shape);
    y = nncl_input(g, "y", 0, NULL);
    c = nncl_conv2d(g, x, MB_C, 1, 1, 0, 0, NNCL_ACT_NONE, "conv");
    h = nncl_op_relu(g, nncl_batchnorm(g, c, 0.1f, 1e-5f, "bn"));
    h = nncl_maxpool2d(g, nncl_op_add(g, h, c), 2, 2, 0);
    h = nncl_linear(g, nncl_global_avgpool(g, h), 10, 1, NNCL_ACT_NONE, "fc");
    f[0].node = x, f[0].data = xs, f[1].node = y, f[1].data = ys;
    /* parameters: conv, batch norm's weight and bias, dense */
    implausible = mb_profile(o, pc, d, g, nncl_softmax_cross_entropy(g, h, y), f, 2, n,
                             MB_C * MB_C + 2 * MB_C + MB_C * 10 + 10, copy_gbs, seen, "step");
    nncl_graph_free(g);
    g = NULL;
    if (implausible) { /* Mesa rusticl 22.3: the others would train for nothing */
        bench_put("membound", d, "rows step", "ms", bench_stat_na(), "ms", IMPLAUSIBLE);
        goto done;
    }

    /* the rows' step: x [B, T, D] against itself */
    g = nncl_graph_create(pc, 1);
    x = nncl_input(g, "x", 2, rows);
    pos = nncl_param(g, "pos", 2, rows, NNCL_INIT_ZEROS, 0);
    h = nncl_op_softmax(g, nncl_op_relu(g, nncl_layernorm(g, nncl_op_add(g, x, pos), 1e-5f, "ln")));
    f[0].node = x;
    mb_profile(o, pc, d, g, nncl_mse(g, h, x), f, 1, n, MB_T * MB_D + 2 * MB_D, copy_gbs, seen, "rows step");
done:
    free(xs);
    free(ys);
    free(seen);
    nncl_graph_free(g);
    bench_membound_dw(o, pc, d, copy_gbs, implausible ? IMPLAUSIBLE : NULL);
    nncl_free(pc);
}

void bench_membound(const bench_opts *o, nncl_context *ctx) {
    int d, nd = nncl_device_count(ctx);
    for (d = 0; d < nd; d++) {
        membound_device(o, ctx, d);
        bench_progress_step();
    }
}

#undef MB_B
#undef MB_C
#undef MB_HW
#undef MB_T
#undef MB_D
#undef IMPLAUSIBLE
