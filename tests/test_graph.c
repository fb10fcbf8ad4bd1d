/* test_graph.c - graph building and its errors, the plan's memory reuse and
 * its int limits (the dense layer and the losses go through the op table,
 * test_op_table.c). */
#include "harness.h"
#include "train/plan.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int check_errors(nncl_context *ctx) {
    const char *name = "graph errors";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int xs[1] = {10};
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *h, *bad;
    nncl__plan *p = NULL;
    int ws[2] = {4, 11};
    h = nncl_linear(g, x, 4, 1, NNCL_ACT_RELU, "fc");
    TH_CHECK(name, h != NULL);
    /* a weight that does not fit: the message names the node and both shapes */
    bad = nncl_param(g, "w_bad", 2, ws, NNCL_INIT_ZEROS, 0);
    {
        nncl_node *in[2];
        in[0] = x; in[1] = bad;
        TH_CHECK(name, nncl__node_add(g, NNCL_OP_LINEAR, "wrong", 2, in, NULL, 0, NULL, 0) == NULL);
    }
    TH_CHECK(name, strstr(nncl_last_error(ctx), "wrong") && strstr(nncl_last_error(ctx), "[B,10]") &&
                       strstr(nncl_last_error(ctx), "[4,11]"));
    /* cross-entropy wants [B,C] logits and [B] labels */
    TH_CHECK(name, nncl_softmax_cross_entropy(g, y, x) == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "softmax_cross_entropy") != NULL);
    /* NULL inputs propagate */
    TH_CHECK(name, nncl_linear(g, NULL, 3, 1, NNCL_ACT_NONE, "z") == NULL);
    /* a name, and features to weigh: labels [B] have none */
    TH_CHECK(name, nncl_linear(g, x, 3, 1, NNCL_ACT_NONE, "") == NULL && nncl_graph_find(g, ".weight") == NULL);
    TH_CHECK(name, nncl_linear(g, y, 3, 1, NNCL_ACT_NONE, "lab") == NULL && strstr(nncl_last_error(ctx), "[B]"));
    TH_CHECK(name, nncl_mse(g, h, NULL) == NULL);
    /* duplicate names */
    TH_CHECK(name, nncl_input(g, "x", 1, xs) == NULL && strstr(nncl_last_error(ctx), "taken"));
    /* a loss that is not a scalar */
    TH_CHECK(name, nncl__plan_create(ctx, g, h, 0, 8, &p) == NNCL_ERR_SHAPE && p == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "scalar") != NULL);
    /* a node of another graph: cycles cannot be built, since inputs must exist first */
    {
        nncl_graph *g2 = nncl_graph_create(ctx, 1);
        nncl_node *x2 = nncl_input(g2, "x", 1, xs);
        TH_CHECK(name, nncl_linear(g, x2, 3, 1, NNCL_ACT_NONE, "other") == NULL);
        TH_CHECK(name, strstr(nncl_last_error(ctx), "another graph") != NULL);
        /* the refused node took its parameters back */
        TH_CHECK(name, nncl_graph_find(g, "other.weight") == NULL && nncl_graph_find(g, "other.bias") == NULL);
        nncl_graph_free(g2);
    }
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* A deep MLP's arena must reuse memory: smaller than all blocks together. */
static int check_reuse(nncl_context *ctx) {
    const char *name = "arena reuse";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int xs[1] = {64}, i;
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL), *h = x, *loss;
    nncl__plan *p = NULL;
    size_t all = 0;
    for (i = 0; i < 8; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "fc%d", i);
        h = nncl_linear(g, h, 64, 1, NNCL_ACT_RELU, nm);
    }
    loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "out"), y);
    TH_CHECK(name, loss != NULL);
    TH_OK(name, ctx, nncl__plan_create(ctx, g, loss, 0, 100, &p));
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op != NNCL_OP_PARAM) all += 2 * nncl__numel(g->nodes[i], 100);
    TH_CHECK(name, p->arena_floats < all);
    th_pass("%s (arena %zu floats, unshared %zu)", name, p->arena_floats, all);
    nncl__plan_free(p);
    nncl_graph_free(g);
    return 0;
}

/* Shapes are compared whole, not by element count: [B,4,5] and [B,5,4]
 * (20 elements each) are refused by the elementwise ops and the losses
 * with both shapes named; b as a row vector [5] of a [B,4,5] still works. */
static int check_full_shapes(nncl_context *ctx) {
    const char *name = "elementwise ops and losses compare whole shapes, not element counts";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int s45[2] = {4, 5}, s54[2] = {5, 4}, s20[1] = {20}, s5[1] = {5};
    nncl_node *a = nncl_input(g, "a", 2, s45), *b = nncl_input(g, "b", 2, s54), *flat = nncl_input(g, "flat", 1, s20);
    nncl_node *v = nncl_param(g, "v", 1, s5, NNCL_INIT_ZEROS, 0);
    TH_CHECK(name, a && b && flat && v);
    TH_CHECK(name, nncl_op_add(g, a, b) == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "[B,5,4]") && strstr(nncl_last_error(ctx), "[B,4,5]"));
    TH_CHECK(name, nncl_op_sub(g, a, b) == NULL && nncl_op_mul(g, a, b) == NULL);
    TH_CHECK(name, nncl_mse(g, a, flat) == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "[B,4,5]") && strstr(nncl_last_error(ctx), "[B,20]"));
    TH_CHECK(name, nncl_bce_with_logits(g, a, flat) == NULL && nncl_bce_with_logits(g, a, b) == NULL);
    TH_CHECK(name, nncl_op_add(g, a, v) != NULL && nncl_op_mul(g, a, a) != NULL && nncl_mse(g, a, a) != NULL);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* Kernels take offsets and counts as int: a plan whose node values or
 * whose packed activations pass 2^31-1 floats (a huge max_batch) is refused
 * before any buffer exists, as out of memory (a limit of the library, not
 * an argument error), and an offset past INT_MAX given to a kernel
 * fails its launch as an argument error, never wraps. */
static int check_int_limits(nncl_context *ctx) {
    const char *name = "plans and kernel arguments past 2^31-1 elements are refused, never wrapped";
    nncl_graph *g = nncl_graph_create(ctx, 1);
    int xs[1] = {1000};
    nncl_node *x = nncl_input(g, "x", 1, xs), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *h = nncl_linear(g, x, 1000, 1, NNCL_ACT_TANH, "fc1");
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, 10, 1, NNCL_ACT_NONE, "fc2"), y);
    nncl__plan *p = NULL;
    nncl__kl k;
    nncl__view v;
    TH_CHECK(name, loss != NULL);
    /* 3e6 samples of 1000: every [B,1000] node alone passes 2^31-1 */
    TH_CHECK(name, nncl__plan_create(ctx, g, loss, 0, 3000000, &p) == NNCL_ERR_OUT_OF_MEMORY && p == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "2^31-1") && strstr(nncl_last_error(ctx), "max_batch 3000000"));
    /* 2e6: each node fits, the activations together do not */
    TH_CHECK(name, nncl__plan_create(ctx, g, loss, 0, 2000000, &p) == NNCL_ERR_OUT_OF_MEMORY && p == NULL);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "the activations need") && strstr(nncl_last_error(ctx), "2^31-1"));
    /* an offset past INT_MAX: the launch refuses it as the caller's error */
    TH_OK(name, ctx, nncl__plan_create(ctx, g, loss, 0, 4, &p));
    TH_OK(name, ctx, nncl__kl_find(ctx, p->x.dev, "elementwise", "nncl_relu_f32", &k));
    v = nncl__val(&p->x, h);
    v.off = (size_t)INT_MAX + 1;
    TH_CHECK(name, nncl__k_unary(k, v, nncl__val(&p->x, h), 8, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "2147483648 elements pass 2^31-1") != NULL);
    nncl__plan_free(p);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    if (!ctx) return th_exit_code();
    check_errors(ctx);
    check_full_shapes(ctx);
    check_int_limits(ctx);
    check_reuse(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
