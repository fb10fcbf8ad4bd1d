/* membound_dw.c - the depthwise convolution in the memory-bound table:
 * each kernel of a depthwise layer's training step (src/ops/conv_dw.c:
 * forward, input gradient, weight gradient), its achieved GB/s beside the
 * device's copy GB/s, and beside the general direct kernels (cl/conv_ex.cl,
 * NNCL_CONV_DEPTHWISE=0) on the same trainer, in rounds of alternating
 * order so that a machine slowing down favours neither.
 *
 * A layer's step: x [B, C, HW, HW] -> conv 1x1 C->C without bias (so that
 * the depthwise input gradient is wanted) -> depthwise k x k, stride s,
 * padding k/2, no bias -> global average pool -> dense 10 -> softmax
 * cross-entropy, Adam; at 32 channels of 32x32, batch 64 (8 MiB in fp32),
 * and at the depthwise layers of examples/fashion_mnist_mobilenet (batch
 * 100); --quick measures two of them. Each of the three kernels must read one of x, dy and write the
 * other or read both: the bytes of x plus those of y, once. */
#include "bench.h"
#include <stdlib.h>
#include <string.h>

/* quick: measured also with --quick */
static const struct dw_layer {
    const char *name;
    int k, stride, B, C, HW, quick;
} dw_layers[] = {{"dw3x3 s1", 3, 1, 64, 32, 32, 1},           {"dw3x3 s2", 3, 2, 64, 32, 32, 0},
                 {"dw5x5 s1", 5, 1, 64, 32, 32, 0},           {"mobilenet 16x28 s2", 3, 2, 100, 16, 28, 0},
                 {"mobilenet 32x14 s2", 3, 2, 100, 32, 14, 1}, {"mobilenet 64x7 s1", 3, 1, 100, 64, 7, 0}};

/* kernel j (0 forward, 1 input gradient, 2 weight gradient: every kernel
 * named so far, its two passes and their variants) of path p (0 the
 * depthwise kernels, 1 the general ones) */
static const char *const dw_kernel[2][3] = {
    {"nncl_conv_dw_f32", "nncl_conv_dw_backward_f32_input", "nncl_conv_dw_backward_f32_weight"},
    {"nncl_conv_ex_f32", "nncl_conv_ex_backward_f32_input", "nncl_conv_ex_backward_f32_weight"}};
static const char *const dw_what[3] = {"forward", "input grad", "weight grad"};

/* Steps of path p under the profiler, their kernels' seconds added to
 * sec[p] and their count to done[p] (the layer runs each kernel once a step). */
static int dw_profile(nncl_context *pc, nncl_trainer *t, const nncl_feed *f, int batch, int steps, int p,
                      double sec[2][3], int done[2]) {
    nncl_profile_report rep;
    nncl_profile_kernel k[64];
    nncl_step_info info;
    int i, j, nk;
    if (p) setenv("NNCL_CONV_DEPTHWISE", "0", 1);
    else unsetenv("NNCL_CONV_DEPTHWISE");
    if (nncl_finish(pc, 0) != NNCL_OK || nncl_profile_start(pc, 0) != NNCL_OK) return 1;
    for (i = 0; i < steps; i++)
        if (nncl_trainer_step(t, f, 2, batch, &info) != NNCL_OK) break;
    if (nncl_profile_stop(pc, 0, &rep) != NNCL_OK || i < steps || !rep.plausible) return 1;
    nk = nncl_profile_kernels(pc, 0, k, 64);
    for (i = 0; i < nk && i < 64; i++)
        for (j = 0; j < 3; j++)
            if (!strncmp(k[i].name, dw_kernel[p][j], strlen(dw_kernel[p][j]))) sec[p][j] += k[i].seconds;
    done[p] += steps;
    return 0;
}

static void dw_layer_run(const bench_opts *o, nncl_context *pc, int d, const struct dw_layer *l, double copy_gbs) {
    nncl_train_config tc = nncl_train_default();
    nncl_conv2d_options co = nncl_conv2d_default();
    nncl_trainer *t = NULL;
    nncl_graph *g = nncl_graph_create(pc, 1);
    nncl_node *x, *y, *h, *loss = NULL;
    nncl_feed f[2];
    nncl_step_info info;
    int shape[3] = {l->C, l->HW, l->HW}, i, j, p, r, rounds = o->quick ? 1 : 3, steps = o->quick ? 1 : 3;
    int done[2] = {0, 0}, oh = (l->HW + 2 * (l->k / 2) - l->k) / l->stride + 1;
    double sec[2][3] = {{0}}, n_in = (double)l->B * l->C * l->HW * l->HW, n_out = (double)l->B * l->C * oh * oh;
    float *xs = (float *)malloc((size_t)n_in * sizeof(float)), ys[128];
    char item[64], why[200];
    if (g) {
        x = nncl_input(g, "x", 3, shape);
        y = nncl_input(g, "y", 0, NULL);
        h = nncl_conv2d(g, x, l->C, 1, 1, 0, 0, NNCL_ACT_NONE, "pw");
        co.kernel_h = co.kernel_w = l->k;
        co.stride_h = co.stride_w = l->stride;
        co.padding_h = co.padding_w = l->k / 2;
        co.groups = l->C;
        co.bias = 0;
        h = nncl_conv2d_ex(g, h, l->C, &co, "dw");
        h = nncl_linear(g, nncl_global_avgpool(g, h), 10, 1, NNCL_ACT_NONE, "fc");
        loss = nncl_softmax_cross_entropy(g, h, y);
    }
    tc.max_batch = l->B;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAM);
    if (!loss || !xs || nncl_trainer_create(pc, g, loss, &tc, &t) != NNCL_OK) {
        snprintf(why, sizeof why, "n/a: %s", loss ? nncl_last_error(pc) : "the graph does not build");
        bench_put("membound", d, l->name, "gbs", bench_stat_na(), "GB/s", why);
        goto done;
    }
    for (i = 0; i < (int)n_in; i++) xs[i] = (float)((i * 2654435761u) >> 8) / 16777216.0f - 0.5f;
    for (i = 0; i < l->B; i++) ys[i] = (float)(i % 10);
    f[0].node = x, f[0].data = xs, f[1].node = y, f[1].data = ys;
    for (p = 0; p < 2; p++) { /* builds and first launches, untimed */
        if (p) setenv("NNCL_CONV_DEPTHWISE", "0", 1);
        else unsetenv("NNCL_CONV_DEPTHWISE");
        for (i = 0; i < 2; i++)
            if (nncl_trainer_step(t, f, 2, l->B, &info) != NNCL_OK) break;
    }
    for (r = 0; r < rounds; r++)
        for (i = 0; i < 2; i++)
            if (dw_profile(pc, t, f, l->B, steps, (r + i) & 1, sec, done)) {
                snprintf(why, sizeof why, "n/a: %s", nncl_last_error(pc));
                bench_put("membound", d, l->name, "gbs", bench_stat_na(), "GB/s", why);
                goto done;
            }
    for (j = 0; j < 3; j++) {
        double per = done[0] ? sec[0][j] / done[0] : 0, gbs = per > 0 ? (n_in + n_out) * 4 / per * 1e-9 : 0;
        double old = done[1] ? sec[1][j] / done[1] : 0;
        snprintf(item, sizeof item, "%s %s", l->name, dw_what[j]);
        if (per <= 0) {
            bench_put("membound", d, item, "gbs", bench_stat_na(), "GB/s", "n/a: no launch of the depthwise kernel");
            continue;
        }
        bench_put_num("membound", d, item, "us_per_step", per * 1e6, "us", dw_kernel[0][j]);
        bench_put_num("membound", d, item, "gbs", gbs, "GB/s", "bytes of x and y, once / its time");
        if (copy_gbs > 0) bench_put_num("membound", d, item, "vs_copy", gbs / copy_gbs, "", "target >= 0.7");
        if (old > 0) bench_put_num("membound", d, item, "vs_general", old / per, "",
                                   "the general direct kernel's time / this one's, rounds interleaved");
    }
done:
    unsetenv("NNCL_CONV_DEPTHWISE");
    free(xs);
    nncl_trainer_free(t);
    nncl_graph_free(g);
}

void bench_membound_dw(const bench_opts *o, nncl_context *pc, int d, double copy_gbs, const char *skip) {
    const char *env = getenv("NNCL_CONV_DEPTHWISE");
    char keep[32] = "";
    size_t i;
    if (env) snprintf(keep, sizeof keep, "%s", env);
    for (i = 0; i < sizeof dw_layers / sizeof dw_layers[0]; i++) {
        if (o->quick && !dw_layers[i].quick) continue;
        if (skip) {
            bench_put("membound", d, dw_layers[i].name, "gbs", bench_stat_na(), "GB/s", skip);
            continue;
        }
        bench_progress("membound d%d: depthwise %s, its kernels and the general ones interleaved", d,
                       dw_layers[i].name);
        dw_layer_run(o, pc, d, &dw_layers[i], copy_gbs);
    }
    if (env) setenv("NNCL_CONV_DEPTHWISE", keep, 1);
}

