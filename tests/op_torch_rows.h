/* op_torch_rows.h - the OP_TORCH rows of tests/op_cases.def as a table of
 * cases {name, builder, loss, wd}, for the two programs that run them:
 * tests/test_torch_ops.c against PyTorch's recorded results, and
 * tests/test_op_table.c against the double reference, finite differences
 * and every device, on inputs of the shapes the case recorded. A row's
 * builder is an expression of the graph g, the inputs h and h2 and the
 * target t; the b_* functions below are the builders that take
 * statements. Parameters start uniform (test_torch_ops sets PyTorch's
 * values by name). Include once, before op_cases.def's own rows. */
#ifndef NNCL_OP_TORCH_ROWS_H
#define NNCL_OP_TORCH_ROWS_H
#include "harness.h"
#include <stdio.h>
#include <string.h>

#define TTO_FILE "tests/data/torch_ops.safetensors"

typedef nncl_node *(*tto_builder)(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t);

/* A parameter vector over h's last dimension. */
static nncl_node *tto_vector(nncl_graph *g, nncl_node *h) {
    int shape[8], n = nncl_node_shape(h, shape);
    return nncl_param(g, "v", 1, &shape[n - 1], NNCL_INIT_UNIFORM, 1.0f);
}

static nncl_node *b_reshape(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    int shape[2] = {3, 4};
    (void)h2; (void)t;
    return nncl_reshape(g, h, 2, shape);
}
static nncl_node *b_matmul_shared_bt(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    int shape[2] = {5, 4};
    (void)h2; (void)t;
    return nncl_matmul(g, h, nncl_param(g, "w", 2, shape, NNCL_INIT_UNIFORM, 1.0f), 0, 1);
}
static nncl_node *b_add_positions(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    int shape[2] = {3, 4};
    (void)h2; (void)t;
    return nncl_op_add(g, h, nncl_param(g, "pos", 2, shape, NNCL_INIT_UNIFORM, 1.0f));
}
/* the embedding's weight is also the output head: one parameter, two uses */
static nncl_node *b_tied_head(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_node *e = nncl_embedding(g, h, 7, 5, "wte");
    (void)h2; (void)t;
    return nncl_matmul(g, e, nncl_graph_find(g, "wte.weight"), 0, 1);
}
/* q, k, v projections of h (no bias), two heads of 3 */
static nncl_node *b_attention(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_node *q = nncl_linear(g, h, 6, 0, NNCL_ACT_NONE, "q"), *k = nncl_linear(g, h, 6, 0, NNCL_ACT_NONE, "k");
    (void)h2; (void)t;
    return nncl_causal_attention(g, q, k, nncl_linear(g, h, 6, 0, NNCL_ACT_NONE, "v"), 2, 0.0f);
}

static nncl_node *b_conv_depthwise(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_conv2d_options o = nncl_conv2d_default();
    (void)h2; (void)t;
    o.padding_h = o.padding_w = 1;
    o.groups = 4;
    o.act = NNCL_ACT_RELU;
    return nncl_conv2d_ex(g, h, 4, &o, "c");
}
static nncl_node *b_conv_grouped_dilated(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_conv2d_options o = nncl_conv2d_default();
    (void)h2; (void)t;
    o.kernel_w = 1;
    o.stride_w = 2;
    o.padding_h = 2;
    o.dilation_h = 2;
    o.groups = 2;
    return nncl_conv2d_ex(g, h, 6, &o, "c");
}
/* depthwise: kernel kh x kw, stride, padding and dilation (h, w), outputs per channel m, bias, act */
static nncl_node *b_conv_dw(nncl_graph *g, nncl_node *h, int kh, int kw, int sh, int sw, int ph, int pw, int dil,
                            int m, int bias, nncl_act act) {
    nncl_conv2d_options o = nncl_conv2d_default();
    int shape[4];
    nncl_node_shape(h, shape);
    o.kernel_h = kh; o.kernel_w = kw; o.stride_h = sh; o.stride_w = sw; o.padding_h = ph; o.padding_w = pw;
    o.dilation_h = o.dilation_w = dil; o.groups = shape[0]; o.bias = bias; o.act = act;
    return nncl_conv2d_ex(g, h, shape[0] * m, &o, "c");
}
static nncl_node *b_conv_dw_5x5(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    (void)h2; (void)t;
    return b_conv_dw(g, h, 5, 5, 2, 2, 2, 2, 1, 2, 0, NNCL_ACT_NONE);
}
static nncl_node *b_conv_dw_dilated(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    (void)h2; (void)t;
    return b_conv_dw(g, h, 3, 3, 1, 2, 2, 1, 2, 1, 1, NNCL_ACT_SIGMOID);
}
static nncl_node *b_conv_dw_1x3(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    (void)h2; (void)t;
    return b_conv_dw(g, h, 1, 3, 2, 1, 0, 1, 1, 1, 1, NNCL_ACT_NONE);
}
static nncl_node *b_conv1d(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_conv1d_options o = nncl_conv1d_default();
    (void)h2; (void)t;
    o.stride = 2;
    o.padding = 1;
    o.act = NNCL_ACT_TANH;
    return nncl_conv1d(g, h, 4, &o, "c");
}
static nncl_node *b_conv_transpose2d(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {
    nncl_conv_transpose2d_options o = nncl_conv_transpose2d_default();
    (void)h2; (void)t;
    o.stride_h = o.stride_w = 2;
    o.padding_h = o.padding_w = 1;
    o.output_padding_h = o.output_padding_w = 1;
    return nncl_conv_transpose2d(g, h, 2, &o, "c");
}

/* loss: the builder gives the loss itself; 2: and t holds one class per sample.
 * wd: SGD's weight decay, on the parameters of two or more dimensions
 * alone (nncl_param_decay 0 on the others, as nanoGPT decays). */
typedef struct tto_case {
    const char *name;
    tto_builder build;
    int loss;
    float wd;
} tto_case;

/* The cases: a row's first pass here makes its builder a function named
 * after the row's line, the second lists the rows. */
#define TTO_PASTE(a, b) a##b
#define TTO_FN(line) TTO_PASTE(tto_build_, line)
#define OP_REF(...)
#define OP_TORCH(name, builder, loss, wd, python)                                                       \
    static nncl_node *TTO_FN(__LINE__)(nncl_graph *g, nncl_node *h, nncl_node *h2, nncl_node *t) {      \
        (void)g, (void)h, (void)h2, (void)t;                                                            \
        return builder;                                                                                 \
    }
#include "op_cases.def"
#undef OP_TORCH
#define OP_TORCH(name, builder, loss, wd, python) {name, TTO_FN(__LINE__), loss, wd},
static const tto_case tto_cases[] = {
#include "op_cases.def"
};
#undef OP_REF
#undef OP_TORCH
#define TTO_NCASES ((int)(sizeof tto_cases / sizeof tto_cases[0]))

/* The tensor CASE.what, or NULL; its per-sample shape in shape[0..*ndim). */
static const nncl_safetensors_entry *tto_get(const nncl_safetensors *st, const char *c, const char *what,
                                             nncl_safetensors_entry *e, int *ndim, int *shape) {
    char key[160];
    int i, k;
    snprintf(key, sizeof key, "%s.%s", c, what);
    if ((i = nncl_safetensors_find(st, key)) < 0 || nncl_safetensors_get(st, i, e) != NNCL_OK) return NULL;
    if (ndim) {
        *ndim = e->ndim - 1;
        for (k = 1; k < e->ndim; k++) shape[k - 1] = (int)e->shape[k];
    }
    return e;
}
#endif
