/* test_graph.c - graph building and its errors, the plan's memory reuse and
 * its int limits (the dense layer and the losses go through the op table,
 * test_op_table.c). */
#include "harness.h"
#include "train/plan.h"
#include "io/io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    TH_OK(name, ctx, nncl__kl_find(ctx, p->ex.dev, "elementwise", "nncl_relu_f32", &k));
    v = nncl__val(&p->ex, h);
    v.off = (size_t)INT_MAX + 1;
    TH_CHECK(name, nncl__k_unary(k, v, nncl__val(&p->ex, h), 8, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(ctx), "2147483648 elements pass 2^31-1") != NULL);
    nncl__plan_free(p);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* ------------------------------------------------------------- builders and model files agree */

/* Whether the reader of model descriptions takes text (written to a file's
 * nncl.graph and read back as nncl_model_load does); NNCL_ERR_FORMAT with a
 * message is its refusal. */
static int gb_reader_takes(const char *text, int *refused_ok) {
    const char *meta[] = {"nncl.graph", text, NULL};
    nncl_safetensors_entry e;
    nncl_safetensors *st = NULL;
    nncl_graph *g = NULL;
    nncl_status s;
    float v = 0;
    char path[128];
    memset(&e, 0, sizeof e);
    e.name = "w";
    e.ndim = 1;
    e.shape[0] = 1;
    e.data = &v;
    snprintf(path, sizeof path, "/tmp/nncl-graph-%ld.safetensors", (long)getpid());
    if (nncl_safetensors_save(path, &e, 1, meta) != NNCL_OK || nncl_safetensors_load(path, &st) != NNCL_OK) {
        remove(path);
        *refused_ok = 0;
        return -1;
    }
    remove(path);
    s = nncl_graph_from_safetensors(NULL, st, &g);
    nncl_safetensors_free(st);
    nncl_graph_free(g);
    *refused_ok = s == NNCL_OK || (s == NNCL_ERR_FORMAT && !g && nncl_last_error(NULL)[0]);
    return s == NNCL_OK;
}

/* text with its first `from` replaced by `to` (static buffer). */
static const char *gb_replace(const char *text, const char *from, const char *to) {
    static char out[4096];
    const char *at = strstr(text, from);
    size_t pre;
    if (!at || strlen(text) - strlen(from) + strlen(to) >= sizeof out) return NULL;
    pre = (size_t)(at - text);
    memcpy(out, text, pre);
    snprintf(out + pre, sizeof out - pre, "%s%s", to, at + strlen(from));
    return out;
}

/* One attribute of one op: the builder with value v adds a node (1) or
 * refuses it (0); the same graph's description from the builder with the
 * good value, that attribute's text `key=good` replaced by `key=v` (and the
 * shape `extra_from` replaced by [v,2], when given), must be taken exactly
 * then. */
typedef struct gb_case {
    const char *what, *key, *good, *extra_from;
    int whole; /* an integer attribute: whole values only */
    nncl_node *(*build)(nncl_graph *g, nncl_node *x, double v);
} gb_case;

static nncl_node *gb_scale(nncl_graph *g, nncl_node *x, double v) { return nncl_op_scale(g, x, (float)v); }
static nncl_node *gb_leaky(nncl_graph *g, nncl_node *x, double v) { return nncl_op_leaky_relu(g, x, (float)v); }
static nncl_node *gb_elu(nncl_graph *g, nncl_node *x, double v) { return nncl_op_elu(g, x, (float)v); }
static nncl_node *gb_linear(nncl_graph *g, nncl_node *x, double v) {
    return nncl_linear(g, x, 3, 1, (nncl_act)(int)v, "fc");
}
static nncl_node *gb_dropout(nncl_graph *g, nncl_node *x, double v) { return nncl_dropout(g, x, (float)v); }
static nncl_node *gb_bn_eps(nncl_graph *g, nncl_node *x, double v) {
    return nncl_batchnorm(g, x, 0.5f, (float)v, "bn");
}
static nncl_node *gb_bn_mom(nncl_graph *g, nncl_node *x, double v) {
    return nncl_batchnorm(g, x, (float)v, 0.5f, "bn");
}
static nncl_node *gb_ln_eps(nncl_graph *g, nncl_node *x, double v) { return nncl_layernorm(g, x, (float)v, "ln"); }
static nncl_node *gb_emb(nncl_graph *g, nncl_node *x, double v) { return nncl_embedding(g, x, (int)v, 2, "emb"); }
static nncl_node *gb_param(nncl_graph *g, nncl_node *x, double v) {
    int s[1] = {4};
    (void)x;
    return nncl_param(g, "w", 1, s, NNCL_INIT_UNIFORM, (float)v);
}

static int check_builders_agree(nncl_context *ctx) {
    const char *name = "builders and the model-file reader accept exactly the same attributes";
    static const gb_case cases[] = {
        {"scale", "alpha", "0.5", NULL, 0, gb_scale},
        {"leaky_relu", "slope", "0.5", NULL, 0, gb_leaky},
        {"elu", "f0", "0.5", NULL, 0, gb_elu},
        {"linear", "act", "tanh", NULL, 1, gb_linear},
        {"dropout", "p", "0.5", NULL, 0, gb_dropout},
        {"batchnorm eps", "eps", "0.5", NULL, 0, gb_bn_eps},
        {"batchnorm momentum", "momentum", "0.5", NULL, 0, gb_bn_mom},
        {"layernorm", "eps", "0.5", NULL, 0, gb_ln_eps},
        {"embedding", "num", "5", "[5,2]", 1, gb_emb},
        {"param init scale", "scale", "0.5", NULL, 0, gb_param},
    };
    static const double finite[] = {0, 0.25, 0.5, 1, 2, 3, 4, 5, -1, -5, 99, 1.5, 16777216, 16777217};
    const int n_finite = (int)(sizeof finite / sizeof finite[0]);
    double values[sizeof finite / sizeof finite[0] + 3];
    int c, k, n = 0;
    memcpy(values, finite, sizeof finite);
    values[n_finite] = NAN;
    values[n_finite + 1] = INFINITY;
    values[n_finite + 2] = -INFINITY;
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const gb_case *gc = &cases[c];
        int xs[1] = {4}, good_taken, ok;
        nncl_graph *g = nncl_graph_create(ctx, 1);
        nncl_node *x = nncl_input(g, "x", 1, xs);
        char *text;
        TH_CHECK(name, gc->build(g, x, !strcmp(gc->good, "tanh") ? 3 : atof(gc->good)) != NULL);
        TH_CHECK(name, (text = nncl__graph_describe(g)) != NULL);
        nncl_graph_free(g);
        good_taken = gb_reader_takes(text, &ok);
        if (good_taken != 1) {
            th_fail(name, "%s: the reader refuses the builder's own description \"%s\": %s", gc->what, text,
                    nncl_last_error(NULL));
            NNCL_FREE(text);
            return 1;
        }
        for (k = 0; k < n_finite + 3; k++) {
            double v = values[k];
            char from[64], to[64], num[40], shape[64];
            const char *edited;
            int built, read;
            if (gc->whole && !(isfinite(v) && v == floor(v))) continue;
            g = nncl_graph_create(ctx, 1);
            x = nncl_input(g, "x", 1, xs);
            built = gc->build(g, x, v) != NULL;
            TH_CHECK(name, built || nncl_last_error(ctx)[0]);
            nncl_graph_free(g);
            if (isnan(v)) snprintf(num, sizeof num, "nan");
            else if (isinf(v)) snprintf(num, sizeof num, v > 0 ? "inf" : "-inf");
            else snprintf(num, sizeof num, "%.17g", v);
            snprintf(from, sizeof from, "%s=%s", gc->key, gc->good);
            snprintf(to, sizeof to, "%s=%s", gc->key, num);
            TH_CHECK(name, (edited = gb_replace(text, from, to)) != NULL);
            if (gc->extra_from) {
                static char copy[4096];
                snprintf(shape, sizeof shape, "[%s,2]", num);
                snprintf(copy, sizeof copy, "%s", edited);
                TH_CHECK(name, (edited = gb_replace(copy, gc->extra_from, shape)) != NULL);
            }
            read = gb_reader_takes(edited, &ok);
            TH_CHECK(name, ok);
            if (built != read) {
                th_fail(name, "%s %s=%s: the builder %s it, the reader %s it", gc->what, gc->key, num,
                        built ? "takes" : "refuses", read ? "takes" : "refuses");
                NNCL_FREE(text);
                return 1;
            }
            n++;
        }
        NNCL_FREE(text);
    }
    th_pass("%s (%d values over %d attributes)", name, n, c);
    return 0;
}

/* A name the description cannot hold as one token is refused by every
 * builder that takes a name, and by the reader. */
static int check_names(nncl_context *ctx) {
    const char *name = "names a model file cannot hold are refused by the builders and the reader";
    static const char *const bad[] = {"hidden layer", "a\tb", "new\nline", "a(b", "x[0]", "\x7f"};
    int k, xs[1] = {4}, ok;
    for (k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        nncl_graph *g = nncl_graph_create(ctx, 1);
        nncl_node *x = nncl_input(g, "x", 1, xs);
        char text[128];
        TH_CHECK(name, nncl_input(g, bad[k], 1, xs) == NULL && strstr(nncl_last_error(ctx), "space"));
        TH_CHECK(name, nncl_param(g, bad[k], 1, xs, NNCL_INIT_ZEROS, 0) == NULL);
        TH_CHECK(name, nncl_linear(g, x, 2, 1, NNCL_ACT_NONE, bad[k]) == NULL);
        TH_CHECK(name, nncl_batchnorm(g, x, 0.1f, 1e-5f, bad[k]) == NULL);
        TH_CHECK(name, nncl_layernorm(g, x, 1e-5f, bad[k]) == NULL);
        TH_CHECK(name, g->n_nodes == 1); /* a refused layer leaves no parameter behind */
        nncl_graph_free(g);
        if (!strchr(bad[k], ' ') && !strchr(bad[k], '\n')) { /* one token in the text */
            snprintf(text, sizeof text, "0 input %s [4]", bad[k]);
            TH_CHECK(name, gb_reader_takes(text, &ok) == 0 && ok);
        }
    }
    th_pass("%s", name);
    return 0;
}

/* The convolutions of any geometry, group norm, upsampling and clamp: a
 * model description rebuilds them (the rebuilt graph describes itself in
 * the same words), the reader refuses what the builders refuse (groups 0),
 * and a shape error names the node and the input's shape. */
static int check_conv_ex_text(nncl_context *ctx) {
    const char *name =
        "conv2d_ex, conv1d, conv_transpose2d, groupnorm, upsample2d and clamp rebuild from a model description";
    int xs[3] = {4, 9, 8}, ls[2] = {3, 11}, ok;
    nncl_graph *g = nncl_graph_create(ctx, 1), *back = NULL;
    nncl_node *x = nncl_input(g, "x", 3, xs), *l = nncl_input(g, "l", 2, ls), *h;
    nncl_conv2d_options c2 = nncl_conv2d_default();
    nncl_conv1d_options c1 = nncl_conv1d_default();
    nncl_conv_transpose2d_options ct = nncl_conv_transpose2d_default();
    nncl_safetensors_entry e;
    nncl_safetensors *st = NULL;
    const char *meta[3] = {"nncl.graph", NULL, NULL};
    char *text, *again = NULL, path[128];
    float v = 0;
    c2.groups = 4; c2.stride_h = 2; c2.dilation_w = 2; c2.padding_h = 1; c2.kernel_w = 2; c2.act = NNCL_ACT_RELU;
    h = nncl_conv2d_ex(g, x, 8, &c2, "dw");
    ct.stride_h = ct.stride_w = 2; ct.output_padding_h = 1; ct.padding_w = 1; ct.groups = 2; ct.bias = 0;
    TH_CHECK(name, nncl_conv_transpose2d(g, h, 4, &ct, "up") != NULL);
    c1.kernel = 5; c1.dilation = 2; c1.padding = 3; c1.stride = 2; c1.groups = 3;
    TH_CHECK(name, nncl_conv1d(g, l, 6, &c1, "c1") != NULL);
    TH_CHECK(name, nncl_groupnorm(g, x, 2, 1e-3f, 1, "gn") && nncl_instancenorm(g, l, 1e-5f, 0, NULL));
    TH_CHECK(name, nncl_upsample2d(g, h, 2, 3, 1) && nncl_op_clamp(g, h, -0.5f, 2.0f) && nncl_op_hardswish(g, h));
    TH_CHECK(name, (text = nncl__graph_describe(g)) != NULL);
    meta[1] = text;
    memset(&e, 0, sizeof e);
    e.name = "w";
    e.ndim = 1;
    e.shape[0] = 1;
    e.data = &v;
    snprintf(path, sizeof path, "/tmp/nncl-conv-ex-%ld.safetensors", (long)getpid());
    TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, (const char **)meta));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    remove(path);
    TH_OK(name, NULL, nncl_graph_from_safetensors(ctx, st, &back));
    nncl_safetensors_free(st);
    TH_CHECK(name, (again = nncl__graph_describe(back)) != NULL);
    if (strcmp(text, again)) {
        th_fail(name, "written \"%s\", rebuilt \"%s\"", text, again);
        return 1;
    }
    {
        const char *edited = gb_replace(text, "groups=4", "groups=0");
        TH_CHECK(name, edited && gb_reader_takes(edited, &ok) == 0 && ok);
    }
    nncl_graph_free(back);
    NNCL_FREE(text);
    NNCL_FREE(again);
    c2 = nncl_conv2d_default();
    c2.groups = 3;
    TH_CHECK(name, nncl_conv2d_ex(g, x, 6, &c2, "bad") == NULL && strstr(nncl_last_error(ctx), "\"bad\"") &&
                       strstr(nncl_last_error(ctx), "[B,4,9,8]") && !nncl_graph_find(g, "bad.weight"));
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
    check_builders_agree(ctx);
    check_names(ctx);
    check_conv_ex_text(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
