/* test_elementwise_graph.c - what the op table (test_op_table.c) cannot see
 * of the graph's elementwise ops and activations: NaN propagation through
 * every activation, also fused into linear and conv2d, and shape errors. */
#include "harness.h"
#include "train/plan.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A NaN input gives a NaN output, and the other elements stay finite, on
 * every device (PyTorch propagates NaN through every activation). */
static int eg_nan(nncl_context *ctx, const char *what, int which) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 3);
    int xs[1] = {4}, d;
    float in[4] = {-1.5f, 0.0f, 0.75f, 0.0f}, out[4];
    nncl_node *a = nncl_input(g, "a", 1, xs), *t = nncl_input(g, "t", 1, xs), *y = NULL;
    in[1] = (float)NAN;
    switch (which) {
    case 4: y = nncl_op_relu(g, a); break;
    case 5: y = nncl_op_leaky_relu(g, a, 0.1f); break;
    case 6: y = nncl_op_sigmoid(g, a); break;
    case 7: y = nncl_op_tanh(g, a); break;
    case 8: y = nncl_op_gelu(g, a); break;
    case 9: y = nncl_op_gelu_tanh(g, a); break;
    case 10: y = nncl_op_silu(g, a); break;
    case 11: y = nncl_op_elu(g, a, 0.7f); break;
    default: y = nncl_op_softplus(g, a); break;
    }
    (void)t;
    snprintf(name, sizeof name, "%s: NaN in, NaN out", what);
    for (d = 0; y && d < nncl_device_count(ctx); d++) {
        nncl__plan *p = NULL;
        TH_OK(name, ctx, nncl__plan_create(ctx, g, NULL, d, 1, &p));
        TH_OK(name, ctx, nncl__plan_feed(p, a, in, 1));
        TH_OK(name, ctx, nncl__plan_forward(p, 1, 0));
        TH_OK(name, ctx, nncl__plan_read(p, y, out, 1, NULL));
        nncl__plan_free(p);
        TH_CHECK(name, out[1] != out[1] && out[0] == out[0] && out[2] == out[2] && out[3] == out[3]);
    }
    TH_CHECK(name, y != NULL);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* The activations fused into a linear layer and a convolution propagate NaN
 * too: a sample with a NaN gives NaN outputs (a ReLU that made them 0 would
 * hide the NaN from the trainer's skip), the other sample stays finite. */
static int eg_nan_fused(nncl_context *ctx, nncl_act act) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 3);
    int xs[1] = {4}, is[3] = {1, 3, 3}, d, k;
    float in[8] = {-1.5f, 0.0f, 0.75f, 0.25f, 1, 2, -3, 4}, img[18], out[2 * 4 * 9], params[64], state[1];
    nncl_node *a = nncl_input(g, "a", 1, xs), *im = nncl_input(g, "im", 3, is);
    nncl_node *lin = nncl_linear(g, a, 3, 1, act, "fc"), *conv = nncl_conv2d(g, im, 4, 3, 1, 1, 1, act, "conv");
    snprintf(name, sizeof name, "NaN through a linear layer and a convolution with fused activation %d", (int)act);
    TH_CHECK(name, lin && conv);
    in[1] = (float)NAN;
    for (k = 0; k < 18; k++) img[k] = k == 4 ? (float)NAN : (float)(k % 5) - 2.0f;
    for (d = 0; d < nncl_device_count(ctx); d++) {
        nncl__plan *p = NULL;
        TH_OK(name, ctx, nncl__plan_create(ctx, g, NULL, d, 2, &p));
        TH_CHECK(name, g->n_params <= 64);
        nncl__graph_init_values(g, params, state);
        TH_CHECK(name, clEnqueueWriteBuffer(p->ex.dev->queue, p->ex.params, CL_TRUE, 0, g->n_params * 4, params, 0, NULL,
                                            NULL) == CL_SUCCESS);
        TH_OK(name, ctx, nncl__plan_feed(p, a, in, 2));
        TH_OK(name, ctx, nncl__plan_feed(p, im, img, 2));
        TH_OK(name, ctx, nncl__plan_forward_to(p, 2, 0, lin));
        TH_OK(name, ctx, nncl__plan_read(p, lin, out, 2, NULL));
        TH_CHECK(name, clFinish(p->ex.dev->queue) == CL_SUCCESS);
        for (k = 0; k < 3; k++) TH_CHECK(name, out[k] != out[k] && out[3 + k] == out[3 + k]);
        TH_OK(name, ctx, nncl__plan_forward_to(p, 2, 0, conv));
        TH_OK(name, ctx, nncl__plan_read(p, conv, out, 2, NULL));
        TH_CHECK(name, clFinish(p->ex.dev->queue) == CL_SUCCESS);
        /* every output of sample 0 sees the NaN at the centre; sample 1 has none */
        for (k = 0; k < 36; k++) TH_CHECK(name, out[k] != out[k] && out[36 + k] == out[36 + k]);
        nncl__plan_free(p);
    }
    nncl_graph_free(g);
    th_pass("%s on every device", name);
    return 0;
}

static int eg_shape_errors(nncl_context *ctx) {
    const char *name = "elementwise shape errors";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int s1[1] = {5}, s2[1] = {4};
    nncl_node *a = nncl_input(g, "a", 1, s1), *b = nncl_input(g, "b", 1, s2);
    TH_CHECK(name, nncl_op_add(g, a, b) == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "[B,4]") && strstr(nncl_last_error(ctx), "[B,5]"));
    TH_CHECK(name, nncl_op_relu(g, NULL) == NULL);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* Softmax rows of 16 (the CPU drivers' per-row kernel, on 8 lanes)
 * [0, t1 .. t15] with t from -105 to 0 and -inf: their sum is about 1, so
 * each output is e^t within the exponential's error. Within 3 ulp of the
 * double value (flushed to 0 below FLT_MIN), exactly 0 for -inf. */
static int eg_softmax_exp(nncl_context *ctx) {
    enum { R = 4096, C = 16 };
    const char *name = "softmax rows: e^t within 3 ulp over [-105, 0], 0 for -inf";
    nncl_graph *g = nncl_graph_create(ctx, 3);
    int xs[1] = {C}, d, r, c;
    float *in = (float *)malloc(sizeof(float) * R * C), *out = (float *)malloc(sizeof(float) * R * C);
    double *want = (double *)malloc(sizeof(double) * R * C), worst = 0;
    nncl_node *a = nncl_input(g, "a", 1, xs), *y = nncl_op_softmax(g, a);
    TH_CHECK(name, y && in && out && want);
    for (r = 0; r < R; r++) {
        double s = 0;
        for (c = 0; c < C; c++) {
            float t = c ? -105.0f * (float)(r * (C - 1) + c - 1) / (float)(R * (C - 1)) : 0.0f;
            in[r * C + c] = r % 64 == 5 && c == 7 ? -INFINITY : t;
            s += exp((double)in[r * C + c]);
        }
        for (c = 0; c < C; c++) want[r * C + c] = exp((double)in[r * C + c]) / s;
    }
    for (d = 0; d < nncl_device_count(ctx); d++) {
        nncl__plan *p = NULL;
        th_poison(out, (size_t)R * C);
        TH_OK(name, ctx, nncl__plan_create(ctx, g, NULL, d, R, &p));
        TH_OK(name, ctx, nncl__plan_feed(p, a, in, R));
        TH_OK(name, ctx, nncl__plan_forward(p, R, 0));
        TH_OK(name, ctx, nncl__plan_read(p, y, out, R, NULL));
        nncl__plan_free(p);
        for (r = 0; r < R * C; r++) {
            double w = want[r] < 1.1754944e-38 ? 0 : want[r], e = fabs(out[r] - w);
            if (in[r] == -INFINITY) TH_CHECK(name, out[r] == 0.0f);
            if (w > 0 && e / (w * 5.9604645e-8) > worst) worst = e / (w * 5.9604645e-8); /* in half ulps */
            if (!(e <= 3.0 * 1.1920929e-7 * w + 1.1754944e-38)) {
                th_fail(name, "d%d: t %.9g: %.9g, want %.9g", d, in[r], out[r], w);
                return 1;
            }
        }
    }
    nncl_graph_free(g);
    free(in);
    free(out);
    free(want);
    th_pass("%s (worst %.2f ulp)", name, worst / 2);
    return 0;
}

int main(void) {
    static const char *names[] = {"add",  "sub",       "mul",  "scale", "relu", "leaky_relu",
                                  "sigmoid", "tanh", "gelu", "gelu_tanh", "silu", "elu", "softplus",
                                  "softmax", "log_softmax"};
    nncl_context *ctx = th_context();
    int w;
    if (!ctx) return th_exit_code();
    eg_shape_errors(ctx);
    eg_softmax_exp(ctx);
    eg_nan_fused(ctx, NNCL_ACT_RELU);
    eg_nan_fused(ctx, NNCL_ACT_SIGMOID);
    eg_nan_fused(ctx, NNCL_ACT_TANH);
    for (w = 4; w <= 12; w++) eg_nan(ctx, names[w], w);
    nncl_free(ctx);
    return th_exit_code();
}
