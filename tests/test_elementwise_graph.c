/* test_elementwise_graph.c - the graph's elementwise ops, activations and
 * softmaxes through the generic op check: each op on odd shapes, batch 1
 * and more, same-shape and broadcast operands, gradients for every input,
 * reference vs finite differences and every device vs reference. */
#include "opcheck.h"

static float *eg_random(size_t n, float lo, float hi, unsigned seed) {
    float *x = (float *)malloc(n * sizeof(float));
    th_fill_uniform(x, n, lo, hi, &seed);
    return x;
}

typedef nncl_node *(*eg_unary_fn)(nncl_graph *, nncl_node *);

/* A loss that weighs every output element differently, so that every
 * gradient element matters: mse(op(x), target). */
static void eg_check(nncl_context *ctx, const char *what, int batch, int rows, int cols, int which, int bcast) {
    char name[160];
    nncl_graph *g = nncl_graph_create(ctx, 3);
    int xs[2] = {rows, cols}, bs[1] = {cols};
    nncl_node *a = nncl_input(g, "a", 2, xs), *t = nncl_input(g, "t", 2, xs), *b = NULL, *y = NULL;
    size_t n = (size_t)batch * rows * cols;
    float *ad = eg_random(n, -2, 2, 1), *bd = eg_random(n, 0.5f, 2, 2), *td = eg_random(n, -1, 1, 3);
    oc_feed f[3];
    int nf = 2;
    a->needs_grad = 1;
    if (which < 3) { /* binary: b an input of a's shape, or a parameter vector */
        if (bcast) {
            b = nncl_param(g, "b", 1, bs, NNCL_INIT_UNIFORM, 1.0f);
        } else {
            b = nncl_input(g, "b", 2, xs);
            b->needs_grad = 1;
            f[nf].node = b;
            f[nf++].data = bd;
        }
        y = which == 0 ? nncl_op_add(g, a, b) : which == 1 ? nncl_op_sub(g, a, b) : nncl_op_mul(g, a, b);
    } else {
        switch (which) {
        case 3: y = nncl_op_scale(g, a, -1.5f); break;
        case 4: y = nncl_op_relu(g, a); break;
        case 5: y = nncl_op_leaky_relu(g, a, 0.1f); break;
        case 6: y = nncl_op_sigmoid(g, a); break;
        case 7: y = nncl_op_tanh(g, a); break;
        case 8: y = nncl_op_gelu(g, a); break;
        case 9: y = nncl_op_softmax(g, a); break;
        default: y = nncl_op_log_softmax(g, a); break;
        }
    }
    f[0].node = a; f[0].data = ad;
    f[1].node = t; f[1].data = td;
    snprintf(name, sizeof name, "%s b%d [%d,%d]%s", what, batch, rows, cols, bcast ? " broadcast" : "");
    oc_check(name, ctx, g, nncl_mse(g, y, t), f, nf, batch, 1e-9);
    free(ad); free(bd); free(td);
    nncl_graph_free(g);
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

int main(void) {
    static const char *names[] = {"add", "sub", "mul", "scale", "relu", "leaky_relu", "sigmoid", "tanh", "gelu",
                                  "softmax", "log_softmax"};
    nncl_context *ctx = th_context();
    int w;
    if (!ctx) return th_exit_code();
    eg_shape_errors(ctx);
    for (w = 0; w < 11; w++) {
        eg_check(ctx, names[w], 1, 1, 1, w, 0);
        eg_check(ctx, names[w], 3, 7, 13, w, 0);
        if (w < 3) eg_check(ctx, names[w], 2, 5, 33, w, 1);
    }
    eg_check(ctx, "softmax", 2, 3, 300, 9, 0);
    nncl_free(ctx);
    return th_exit_code();
}
