/* test_pocl_twins.c - programs of PoCL CPU devices that share a context:
 * PoCL 3.1 keeps one process-wide table of loaded kernel binaries keyed by
 * the program's build hash, and miscounts its entries when the same kernel
 * runs at once on two devices at different global sizes (an assertion in
 * pocl_release_dlhandle_cache), which a pipeline's stages and data
 * parallelism at unequal shares do. Every PoCL CPU device after the first
 * builds its programs with a define of its own (NNCL_POCL_TWIN), so that no
 * two devices' kernels share an entry; the first device's build stays as a
 * context of it alone would build it. Then a data-parallel trainer at
 * unequal shares over those devices trains (the same kernels at once at
 * different sizes) and agrees with one device. Asks PoCL for two CPU
 * devices (POCL_DEVICES="pthread pthread") unless POCL_DEVICES is set; with
 * fewer, each check says SKIP. */
#include "harness.h"
#include "runtime/internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The build options of the program holding nncl_relu_f32 on device d, into opt. */
static int tw_options(nncl_context *ctx, int d, char *opt, size_t size) {
    cl_kernel k = NULL;
    cl_program p = NULL;
    opt[0] = 0;
    if (nncl__kernel(ctx, nncl__device(ctx, d), "elementwise", "nncl_relu_f32", &k) != NNCL_OK) return 1;
    if (clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof p, &p, NULL) != CL_SUCCESS) return 1;
    if (clGetProgramBuildInfo(p, nncl__device(ctx, d)->id, CL_PROGRAM_BUILD_OPTIONS, size, opt, NULL) != CL_SUCCESS)
        return 1;
    return 0;
}

static int tw_options_differ(nncl_context *ctx, const int *pocl) {
    const char *name = "pocl twins build programs of their own";
    char a[512], b[512];
    TH_CHECK(name, tw_options(ctx, pocl[0], a, sizeof a) == 0);
    TH_CHECK(name, tw_options(ctx, pocl[1], b, sizeof b) == 0);
    TH_CHECK(name, strstr(a, "NNCL_POCL_TWIN") == NULL);
    TH_CHECK(name, strstr(b, "-DNNCL_POCL_TWIN=1") != NULL);
    TH_CHECK(name, strcmp(a, b) != 0);
    th_pass("%s (device %d: \"%s\")", name, pocl[1], b);
    return 0;
}

/* A 3-layer MLP trained 12 steps at batches of 37 to 96 on devices devs,
 * its loss at every step into loss. */
static int tw_train(nncl_context *ctx, const int *devs, int nd, const float *shares, float *loss) {
    const char *name = "pocl twins train at unequal shares";
    int xs[1] = {48}, i, s, batches[4] = {37, 64, 96, 53};
    nncl_graph *g = nncl_graph_create(ctx, 11);
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *h;
    nncl_train_config tc = nncl_train_default();
    nncl_trainer *t = NULL;
    float *xv = (float *)malloc(96 * 48 * sizeof(float)), yv[96];
    unsigned seed = 5;
    nncl_feed f[2];
    h = nncl_linear(g, x, 160, 1, NNCL_ACT_RELU, "fc1");
    h = nncl_linear(g, h, 96, 1, NNCL_ACT_RELU, "fc2");
    h = nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc3");
    h = nncl_softmax_cross_entropy(g, h, y);
    TH_CHECK(name, xv && h);
    th_fill_uniform(xv, 96 * 48, -1, 1, &seed);
    for (i = 0; i < 96; i++) yv[i] = (float)(i * 7 % 10);
    tc.max_batch = 96;
    tc.devices = devs;
    tc.n_devices = nd;
    tc.shares = shares;
    tc.arrangement = nd > 1 ? NNCL_ARRANGE_DATA : NNCL_ARRANGE_ONE;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, h, &tc, &t));
    f[0].node = x;
    f[0].data = xv;
    f[1].node = y;
    f[1].data = yv;
    for (s = 0; s < 12; s++) {
        nncl_step_info info;
        TH_OK(name, ctx, nncl_trainer_step(t, f, 2, batches[s % 4], &info));
        loss[s] = info.loss;
    }
    nncl_trainer_free(t);
    nncl_graph_free(g);
    free(xv);
    return 0;
}

static int tw_unequal(nncl_context *ctx, const int *pocl) {
    const char *name = "pocl twins train at unequal shares";
    float shares[2] = {1, 3}, one[12], two[12];
    int s;
    if (tw_train(ctx, pocl, 1, NULL, one) || tw_train(ctx, pocl, 2, shares, two)) return 1;
    for (s = 0; s < 12; s++)
        if (!(fabsf(one[s] - two[s]) <= 1e-3f * (1 + fabsf(one[s])))) {
            th_fail(name, "step %d: loss %.7g on two devices, %.7g on one", s, two[s], one[s]);
            return 1;
        }
    th_pass("%s (12 steps, loss %.4f to %.4f as on one device)", name, two[0], two[11]);
    return 0;
}

int main(void) {
    nncl_context *ctx;
    int pocl[2], n = 0, d;
    if (!getenv("POCL_DEVICES")) setenv("POCL_DEVICES", "pthread pthread", 1); /* before the driver loads */
    ctx = th_context();
    if (!ctx) return th_exit_code();
    for (d = 0; d < nncl_device_count(ctx) && n < 2; d++) {
        nncl_device_info info;
        if (nncl_device_info_get(ctx, d, &info) == NNCL_OK && info.type == NNCL_DEVICE_CPU &&
            strstr(info.platform, "Portable Computing Language"))
            pocl[n++] = d;
    }
    if (n < 2) {
        const char *why = "needs 2 devices of PoCL's CPU driver (POCL_DEVICES=\"pthread pthread\")";
        th_skip("pocl twins build programs of their own", why);
        th_skip("pocl twins train at unequal shares", why);
    } else {
        tw_options_differ(ctx, pocl);
        tw_unequal(ctx, pocl);
    }
    nncl_free(ctx);
    return th_exit_code();
}
