/* test_op_table.c - every graph op of src/graph/ops.def through the rows
 * of tests/op_cases.def, in the manner of a backend-ops test: its OP_REF
 * rows {name, builder, attributes, inputs, batch, tolerance}, and its
 * OP_TORCH rows (tests/op_torch_rows.h) on inputs of the shapes and batch
 * of their recorded PyTorch cases (tests/data/torch_ops.safetensors), so
 * that an op's one OP_TORCH row has it checked both here and against
 * PyTorch. Each row builds a small graph, ends it in mse against a
 * random target (unless the row builds its own loss, so that every output
 * element gets a gradient of its own), and goes through tests/opcheck.h:
 * the double host reference, its gradients against central finite
 * differences, and every OpenCL device against the reference with poisoned
 * outputs. Checks a row cannot express (running statistics, dropout masks,
 * NaN propagation, shape errors, workspace bounds, GEMM paths) stay in the
 * op families' own test files. */
#include "opcheck.h"
#include "op_torch_rows.h"
#include <ctype.h>

/* An input of a row: kind (OT_GRAD: values whose gradient is checked;
 * OT_DATA: values without one, a network's input; OT_LABEL: class labels
 * or indices; OT_FIXED: the values fixed, a PyTorch case's indices or
 * targets), the uniform range of its values (a label's
 * classes in hi), and its per-sample shape. */
enum { OT_NONE, OT_GRAD, OT_DATA, OT_LABEL, OT_FIXED };
typedef struct ot_input {
    int kind;
    float lo, hi;
    int ndim, dims[3];
} ot_input;

typedef struct ot_row ot_row;
/* Builds the row's op on its inputs: the node to compare through mse, or
 * the row's own scalar loss. */
typedef nncl_node *(*ot_builder)(nncl_graph *g, nncl_node *const *in, const ot_row *r);
struct ot_row {
    const char *name;
    ot_builder build;
    int a[6];          /* the builder's integer attributes */
    float p;           /* and its float one */
    ot_input in[3];
    int batch;
    double tol;        /* normalised squared error allowed on the devices */
};

/* Rows whose inputs hold more values than this (there for the devices'
 * chunking) leave the finite differences to their op's smaller rows: each
 * difference reruns the whole reference (25 s a pass for a 3 x 105 x 106
 * convolution). */
#define OT_FD_MAX 50000

#define OT_TOL 1e-9
#define OT_X1(lo, hi, d0) {OT_GRAD, lo, hi, 1, {d0, 0, 0}}
#define OT_X2(lo, hi, d0, d1) {OT_GRAD, lo, hi, 2, {d0, d1, 0}}
#define OT_X3(lo, hi, d0, d1, d2) {OT_GRAD, lo, hi, 3, {d0, d1, d2}}
#define OT_LABELS(classes) {OT_LABEL, 0, classes, 0, {0, 0, 0}}

/* ------------------------------------------------------------- builders */

/* a[0]: the op; a[1] 1: b a parameter vector over a's last dimension, 2:
 * the same frozen (half storage trains no parameter through mul). */
static nncl_node *ot_binary(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    int cols = r->in[0].dims[r->in[0].ndim - 1];
    nncl_node *b = r->a[1] ? nncl_param(g, "b", 1, &cols, NNCL_INIT_UNIFORM, 1.0f) : in[1];
    if (r->a[1] == 2 && nncl_param_freeze(g, b, 1) != NNCL_OK) return NULL;
    switch (r->a[0]) {
    case NNCL_OP_ADD: return nncl_op_add(g, in[0], b);
    case NNCL_OP_SUB: return nncl_op_sub(g, in[0], b);
    default: return nncl_op_mul(g, in[0], b);
    }
}

/* a[0]: the op; p: its float parameter where it takes one. */
static nncl_node *ot_unary(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *x = in[0];
    switch (r->a[0]) {
    case NNCL_OP_SCALE: return nncl_op_scale(g, x, r->p);
    case NNCL_OP_RELU: return nncl_op_relu(g, x);
    case NNCL_OP_LEAKY_RELU: return nncl_op_leaky_relu(g, x, r->p);
    case NNCL_OP_SIGMOID: return nncl_op_sigmoid(g, x);
    case NNCL_OP_TANH: return nncl_op_tanh(g, x);
    case NNCL_OP_GELU: return nncl_op_gelu(g, x);
    case NNCL_OP_GELU_TANH: return nncl_op_gelu_tanh(g, x);
    case NNCL_OP_SILU: return nncl_op_silu(g, x);
    case NNCL_OP_ELU: return nncl_op_elu(g, x, r->p);
    case NNCL_OP_SOFTPLUS: return nncl_op_softplus(g, x);
    case NNCL_OP_SOFTMAX: return nncl_op_softmax(g, x);
    case NNCL_OP_RELU6: return nncl_op_relu6(g, x);
    case NNCL_OP_HARDSWISH: return nncl_op_hardswish(g, x);
    case NNCL_OP_HARDSIGMOID: return nncl_op_hardsigmoid(g, x);
    case NNCL_OP_CLAMP: return nncl_op_clamp(g, x, r->p, 1.0f);
    default: return nncl_op_log_softmax(g, x);
    }
}

/* x -> linear(9, tanh) -> linear(classes, bias a[0], act a[1]) ->
 * softmax cross-entropy with labels in[1]. */
static nncl_node *ot_linear_ce(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_linear(g, in[0], 9, 1, NNCL_ACT_TANH, "fc1");
    h = nncl_linear(g, h, (int)r->in[1].hi, r->a[0], (nncl_act)r->a[1], "fc2");
    return nncl_softmax_cross_entropy(g, h, in[1]);
}

/* linear over the last dimension of x, then mse (a[0] 1) or BCE with
 * logits against in[1], whose gradient is checked too. */
static nncl_node *ot_pair_loss(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_linear(g, in[0], r->in[1].dims[r->in[1].ndim - 1], 1, NNCL_ACT_NONE, "proj");
    return r->a[0] ? nncl_mse(g, h, in[1]) : nncl_bce_with_logits(g, h, in[1]);
}

/* a: outputs, kernel, stride, padding, bias, activation. */
static nncl_node *ot_conv(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return nncl_conv2d(g, in[0], r->a[0], r->a[1], r->a[2], r->a[3], r->a[4], (nncl_act)r->a[5], "conv");
}

/* conv2d (a[0] outputs, 3x3, padding 1, ReLU), then linear to a[1]: in
 * half storage the linear layer's panels need more GEMM temp than the conv
 * layer, so its products run in blocks of B's panels (src/gemm/gemm_own.c). */
static nncl_node *ot_conv_linear(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_conv2d(g, in[0], r->a[0], 3, 1, 1, 1, NNCL_ACT_RELU, "conv");
    return nncl_linear(g, nncl_flatten(g, h), r->a[1], 1, NNCL_ACT_NONE, "fc");
}

/* a[0]: the op; then kernel, stride, padding; a[4]: a max pool taken
 * twice and added (the second backward adds into the input's gradient). */
static nncl_node *ot_pool(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    if (r->a[0] == NNCL_OP_MAXPOOL2D && r->a[4])
        return nncl_op_add(g, nncl_maxpool2d(g, in[0], r->a[1], r->a[2], r->a[3]),
                           nncl_maxpool2d(g, in[0], r->a[1], r->a[2], r->a[3]));
    if (r->a[0] == NNCL_OP_MAXPOOL2D) return nncl_maxpool2d(g, in[0], r->a[1], r->a[2], r->a[3]);
    if (r->a[0] == NNCL_OP_AVGPOOL2D) return nncl_avgpool2d(g, in[0], r->a[1], r->a[2], r->a[3]);
    return nncl_global_avgpool(g, in[0]);
}

/* A linear layer after a [B,C] batch norm makes weight and bias matter
 * unevenly. */
static nncl_node *ot_batchnorm(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_batchnorm(g, in[0], 0.1f, 1e-5f, "bn");
    return r->in[0].ndim == 1 ? nncl_linear(g, h, 4, 1, NNCL_ACT_NONE, "fc") : h;
}

/* act(batchnorm(x) + residual) in one node: a[0] the nncl_bn_act, a[1] 1
 * with in[1] as the residual, 2 with x itself (both gradients into one). */
static nncl_node *ot_batchnorm_act(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *res = r->a[1] == 1 ? in[1] : r->a[1] == 2 ? in[0] : NULL;
    nncl_node *h = res ? nncl_batchnorm_add_act(g, in[0], res, (nncl_bn_act)r->a[0], 0.1f, 1e-5f, "bn")
                       : nncl_batchnorm_act(g, in[0], (nncl_bn_act)r->a[0], 0.1f, 1e-5f, "bn");
    return r->in[0].ndim == 1 ? nncl_linear(g, h, 4, 1, NNCL_ACT_NONE, "fc") : h;
}

static nncl_node *ot_layernorm(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    (void)r;
    return nncl_linear(g, nncl_layernorm(g, in[0], 1e-5f, "ln"), 3, 1, NNCL_ACT_TANH, "fc");
}

/* Two masks of probability p, between linear layers. */
static nncl_node *ot_dropout(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_dropout(g, nncl_linear(g, in[0], 11, 1, NNCL_ACT_NONE, "fc1"), r->p);
    return nncl_dropout(g, nncl_linear(g, h, 6, 1, NNCL_ACT_NONE, "fc2"), r->p);
}

/* Indices in[0] (with repeats) into a [num = in[0].hi, a[0]] table. */
static nncl_node *ot_embedding(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = nncl_embedding(g, in[0], (int)r->in[0].hi, r->a[0], "emb");
    return nncl_linear(g, h, 3, 1, NNCL_ACT_NONE, "fc");
}

/* x [B,2,3,4] reaches the output through a reshape, a flatten and a second
 * reshape to [B,6,4] and a layer norm: gradients from three readers of one
 * memory block must add up. */
static nncl_node *ot_reshape(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    static const int s1[1] = {-1}, s2[2] = {6, -1}, s3[2] = {4, 6};
    nncl_node *a = nncl_linear(g, nncl_reshape(g, in[0], 1, s1), 5, 1, NNCL_ACT_NONE, "fa");
    nncl_node *b = nncl_linear(g, nncl_flatten(g, in[0]), 5, 1, NNCL_ACT_NONE, "fb");
    nncl_node *c = nncl_layernorm(g, nncl_reshape(g, in[0], 2, s2), 1e-5f, "ln");
    (void)r;
    c = nncl_flatten(g, nncl_reshape(g, c, 2, s3)); /* alias of an alias */
    return nncl_concat(g, nncl_concat(g, a, b, 0), c, -1);
}

/* concat(a, b) along a[0]; without a second input, concat(a, a). */
static nncl_node *ot_concat(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return nncl_concat(g, in[0], r->in[1].kind ? in[1] : in[0], r->a[0]);
}

/* matmul(a, b, a[0], a[1]): b the second input, or (a[2] 1) a parameter
 * of dimensions a[3], a[4] (and a[5] before them when not 0), shared by
 * every sample. */
static nncl_node *ot_matmul(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *b = in[1];
    if (r->a[2]) {
        int dims[3] = {r->a[5], r->a[3], r->a[4]}, nd = r->a[5] ? 3 : 2;
        b = nncl_param(g, "w", nd, r->a[5] ? dims : dims + 1, NNCL_INIT_UNIFORM, 1.0f);
    }
    return nncl_matmul(g, in[0], b, r->a[0], r->a[1]);
}

/* matmul(a, a, 1, 0): the Gram matrix of a's columns. */
static nncl_node *ot_matmul_self(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    (void)r;
    return nncl_matmul(g, in[0], in[0], 1, 0);
}

/* transpose(a, a[0], a[1]), then (a[2] 1) a slice of it along a[3] from
 * a[4] of a[5] elements. */
static nncl_node *ot_shape_ops(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *t = r->a[0] == r->a[1] ? in[0] : nncl_transpose(g, in[0], r->a[0], r->a[1]);
    return r->a[2] ? nncl_slice(g, t, r->a[3], r->a[4], r->a[5]) : t;
}

/* q, k and v sliced out of one [T, 3C] input, their slices' gradients
 * added into it: (q k^T) v. */
static nncl_node *ot_qkv(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    int C = r->in[0].dims[1] / 3;
    nncl_node *q = nncl_slice(g, in[0], 1, 0, C), *k = nncl_slice(g, in[0], -1, C, C), *v = nncl_slice(g, in[0], 1, 2 * C, C);
    return nncl_matmul(g, nncl_matmul(g, q, k, 0, 1), v, 0, 0);
}

/* a + a learned [a's sample shape] parameter (add a[0] 0, sub 1, mul 2). */
static nncl_node *ot_add_sample(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *p = nncl_param(g, "pos", r->in[0].ndim, r->in[0].dims, NNCL_INIT_UNIFORM, 1.0f);
    return r->a[0] == 0 ? nncl_op_add(g, in[0], p) : r->a[0] == 1 ? nncl_op_sub(g, in[0], p) : nncl_op_mul(g, in[0], p);
}

/* a[0] 0: layer norm without bias, 1: RMS norm; then linear with tanh. */
static nncl_node *ot_norm_ex(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    nncl_node *h = r->a[0] ? nncl_rmsnorm(g, in[0], 1e-5f, "rms") : nncl_layernorm_ex(g, in[0], 1e-5f, 0, "ln");
    return nncl_linear(g, h, 3, 0, NNCL_ACT_TANH, "fc");
}

/* Logits in[0] [B, T, V] with labels in[1] [B, T], ignore_index a[0]. */
static nncl_node *ot_seq_ce(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return nncl_sequence_cross_entropy(g, in[0], in[1], r->a[0]);
}

/* A tied GPT head: tokens in[0] [B, T] through embedding "wte" [V = the
 * labels' classes, a[0]], a linear layer on [B, T, C], then the logits
 * from the same weight, matmul(h, wte, 0, 1), and the sequence
 * cross-entropy with labels in[1] (ignore_index a[1]): wte's gradient is
 * the sum of the embedding's and the head's. */
static nncl_node *ot_tied(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    int V = (int)r->in[1].hi;
    nncl_node *h = nncl_embedding(g, in[0], V, r->a[0], "wte"), *wte = nncl_graph_find(g, "wte.weight");
    h = nncl_linear(g, h, r->a[0], 0, NNCL_ACT_TANH, "mix");
    return nncl_sequence_cross_entropy(g, nncl_matmul(g, h, wte, 0, 1), in[1], r->a[1]);
}

/* causal_attention of a[0] heads, dropout p, on inputs q, k, v; a[1] 1:
 * self-attention of one input (q = k = v: three gradients into one). */
static nncl_node *ot_attention(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return r->a[1] ? nncl_causal_attention(g, in[0], in[0], in[0], r->a[0], r->p)
                   : nncl_causal_attention(g, in[0], in[1], in[2], r->a[0], r->p);
}

/* Convolutions of op_conv_ex.c, a[0] an index into ot_cx: kind 0
 * conv2d_ex, 1 conv1d (kernel, stride, padding, dilation in the _w
 * fields), 2 conv_transpose2d (output padding in the dilation fields). */
static const struct ot_cx_opts {
    int kind, O, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias, act;
} ot_cx[] = {
    /* depthwise without ReLU (here and in the tanh row below): over a few
     * hundred outputs, some ReLU input from bf16-rounded values comes out
     * on the other side of the kink on the device than in the reference */
    {0, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1, NNCL_ACT_NONE},
    {0, 6, 3, 3, 2, 2, 1, 1, 1, 1, 3, 0, NNCL_ACT_NONE},  /* depthwise, 2 outputs per channel, stride 2 */
    {0, 6, 3, 1, 1, 2, 1, 0, 1, 1, 2, 1, NNCL_ACT_TANH},  /* groups 2, 3x1 */
    {0, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, NNCL_ACT_NONE},  /* dilation 2 */
    {0, 2, 1, 3, 2, 1, 0, 1, 1, 1, 1, 1, NNCL_ACT_SIGMOID}, /* 1x3, strides 2 and 1 */
    {0, 3, 5, 5, 2, 2, 2, 2, 1, 2, 1, 0, NNCL_ACT_NONE},  /* 5x5, dilation 1x2 */
    {1, 6, 1, 3, 1, 1, 0, 1, 1, 1, 2, 1, NNCL_ACT_RELU},  /* 1-D, groups 2 */
    {1, 3, 1, 5, 1, 2, 0, 2, 1, 2, 3, 0, NNCL_ACT_NONE},  /* 1-D depthwise, stride 2, dilation 2 */
    {1, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, NNCL_ACT_NONE},  /* 1-D pointwise */
    {2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, NNCL_ACT_RELU},  /* transposed, stride 2, output padding 1 */
    {2, 6, 2, 2, 2, 2, 0, 0, 0, 0, 2, 0, NNCL_ACT_NONE},  /* transposed 2x2, groups 2 */
    {2, 3, 5, 3, 1, 1, 2, 1, 0, 0, 1, 1, NNCL_ACT_TANH},  /* transposed 5x3, stride 1 */
    {2, 2, 3, 4, 3, 2, 1, 0, 2, 1, 1, 1, NNCL_ACT_NONE},  /* transposed, strides 3 and 2 */
    {0, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1, NNCL_ACT_TANH}, /* depthwise with tanh */
    /* depthwise kernels (src/ops/conv_dw.c): rows of 7, 13 and 29, segments
     * cut short, channels of no vector width */
    {0, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, 1, NNCL_ACT_NONE},     /* 3x3, width 29 */
    {0, 5, 5, 5, 2, 2, 2, 2, 1, 1, 5, 0, NNCL_ACT_NONE},     /* 5x5, stride 2, width 13 */
    {0, 3, 3, 3, 1, 2, 2, 1, 2, 2, 3, 1, NNCL_ACT_SIGMOID},  /* dilation 2, strides 1 and 2, width 29 */
    {0, 14, 1, 3, 2, 1, 0, 1, 1, 1, 7, 1, NNCL_ACT_NONE},    /* 1x3, 2 outputs per channel, width 13 */
    {0, 6, 3, 3, 2, 2, 1, 1, 2, 1, 3, 1, NNCL_ACT_TANH},     /* stride 2, dilation 2x1, 2 per channel, width 29 */
    {0, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0, NNCL_ACT_NONE},     /* stride 2, width 7 */
    {0, 3, 3, 3, 3, 3, 1, 1, 1, 1, 3, 1, NNCL_ACT_NONE},     /* stride 3: the general kernels */
    {0, 4, 3, 1, 1, 1, 1, 0, 1, 1, 4, 1, NNCL_ACT_NONE},     /* 3x1: the weight gradient a work-group per tap */
    /* the square-kernel variants (16 lanes a work-item): rows wide enough
     * for lanes that need no masks, paddings 0 and 2, 1-pixel images */
    {0, 4, 3, 3, 1, 1, 0, 0, 1, 1, 4, 1, NNCL_ACT_NONE},     /* 3x3, padding 0, width 37 */
    {0, 6, 3, 3, 1, 1, 2, 2, 1, 1, 3, 0, NNCL_ACT_NONE},     /* 3x3, padding 2, 2 per channel, width 35 */
    {0, 4, 3, 3, 2, 2, 0, 0, 1, 1, 4, 1, NNCL_ACT_NONE},     /* stride 2, padding 0, width 37 */
    {0, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0, NNCL_ACT_NONE},     /* stride 2, width 40 */
    {0, 3, 3, 3, 2, 2, 2, 2, 1, 1, 3, 1, NNCL_ACT_NONE},     /* stride 2, padding 2, 1 pixel */
    {0, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, NNCL_ACT_NONE},     /* 1 pixel, 2 per channel */
    {0, 3, 5, 5, 1, 1, 2, 2, 1, 1, 3, 1, NNCL_ACT_NONE},     /* 5x5, width 40 */
    {0, 6, 5, 5, 2, 2, 1, 1, 1, 1, 3, 0, NNCL_ACT_NONE},     /* 5x5, stride 2, padding 1, 2 per channel, width 38 */
};

static nncl_node *ot_conv_ex(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    const struct ot_cx_opts *c = &ot_cx[r->a[0]];
    if (c->kind == 1) {
        nncl_conv1d_options o = nncl_conv1d_default();
        o.kernel = c->kw; o.stride = c->sw; o.padding = c->pw; o.dilation = c->dw;
        o.groups = c->groups; o.bias = c->bias; o.act = (nncl_act)c->act;
        return nncl_conv1d(g, in[0], c->O, &o, "conv");
    }
    if (c->kind == 2) {
        nncl_conv_transpose2d_options o = nncl_conv_transpose2d_default();
        o.kernel_h = c->kh; o.kernel_w = c->kw; o.stride_h = c->sh; o.stride_w = c->sw;
        o.padding_h = c->ph; o.padding_w = c->pw; o.output_padding_h = c->dh; o.output_padding_w = c->dw;
        o.groups = c->groups; o.bias = c->bias; o.act = (nncl_act)c->act;
        return nncl_conv_transpose2d(g, in[0], c->O, &o, "conv");
    } else {
        nncl_conv2d_options o = nncl_conv2d_default();
        o.kernel_h = c->kh; o.kernel_w = c->kw; o.stride_h = c->sh; o.stride_w = c->sw;
        o.padding_h = c->ph; o.padding_w = c->pw; o.dilation_h = c->dh; o.dilation_w = c->dw;
        o.groups = c->groups; o.bias = c->bias; o.act = (nncl_act)c->act;
        return nncl_conv2d_ex(g, in[0], c->O, &o, "conv");
    }
}

/* groupnorm: a[0] groups (0: instancenorm), a[1] affine */
static nncl_node *ot_groupnorm(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    if (!r->a[0]) return nncl_instancenorm(g, in[0], 1e-5f, r->a[1], "gn");
    return nncl_groupnorm(g, in[0], r->a[0], 1e-5f, r->a[1], "gn");
}

/* upsample2d by a[0] x a[1], bilinear a[2] */
static nncl_node *ot_upsample(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return nncl_upsample2d(g, in[0], r->a[0], r->a[1], r->a[2]);
}

/* rnn_scan: a[0] 1 GRU (else LSTM), a[1] H; in[0] the gates [T, G H] with
 * W_hh, b_ih and b_hh parameters; a[2] 1: instead a two-layer
 * nncl_lstm / nncl_gru of H over in[0] [T, F] (input products, the
 * parameters' names and the layers' chain around the op). */
static nncl_node *ot_rnn(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    int G = r->a[0] ? 3 : 4, H = r->a[1], ws[2], bs[1];
    nncl_node *w, *bi, *bh;
    if (r->a[2]) return r->a[0] ? nncl_gru(g, in[0], H, 2, "rnn") : nncl_lstm(g, in[0], H, 2, "rnn");
    ws[0] = bs[0] = G * H;
    ws[1] = H;
    w = nncl_param(g, "w_hh", 2, ws, NNCL_INIT_UNIFORM, 0.6f);
    bi = nncl_param(g, "b_ih", 1, bs, NNCL_INIT_UNIFORM, 0.6f);
    bh = nncl_param(g, "b_hh", 1, bs, NNCL_INIT_UNIFORM, 0.6f);
    return nncl__rnn_scan(g, r->a[0], in[0], w, bi, bh);
}

/* ------------------------------------------------------------- the table */

#define OT_BIN(op, b, r, c) {#op, ot_binary, {NNCL_OP_##op}, 0, {OT_X2(-2, 2, r, c), OT_X2(0.5f, 2, r, c)}, b, OT_TOL}
#define OT_BCAST(op, b, r, c) {#op " broadcast", ot_binary, {NNCL_OP_##op, 1}, 0, {OT_X2(-2, 2, r, c)}, b, OT_TOL}
#define OT_BCAST_FROZEN(op, b, r, c)                                                                                   \
    {#op " broadcast (frozen b)", ot_binary, {NNCL_OP_##op, 2}, 0, {OT_X2(-2, 2, r, c)}, b, OT_TOL}
#define OT_UN(op, p, range, b, r, c) {#op, ot_unary, {NNCL_OP_##op}, p, {OT_X2(-range, range, r, c)}, b, OT_TOL}
#define OT_UN2(op, p) OT_UN(op, p, 2, 1, 1, 1), OT_UN(op, p, 2, 3, 7, 13)
#define OT_CONV(b, C, H, W, O, k, s, pad, bias, act)                                                              \
    {"conv2d o" #O " k" #k " s" #s " p" #pad " bias" #bias " " #act, ot_conv, {O, k, s, pad, bias, NNCL_ACT_##act}, 0, {OT_X3(-1, 1, C, H, W)}, b, OT_TOL}
/* the same on a network's input (no input gradient: the 3x3 path's
 * layers, src/ops/conv3.c) */
#define OT_CONV_IN(b, C, H, W, O, bias, act)                                                                       \
    {"conv2d on the input o" #O " k3 s1 p1 bias" #bias " " #act, ot_conv, {O, 3, 1, 1, bias, NNCL_ACT_##act}, 0,     \
     {{OT_DATA, -1, 1, 3, {C, H, W}}}, b, OT_TOL}
#define OT_POOL(op, b, C, H, W, k, s, pad) {#op " k" #k " s" #s " p" #pad, ot_pool, {NNCL_OP_##op, k, s, pad}, 0, {OT_X3(-1, 1, C, H, W)}, b, OT_TOL}
#define OT_POOL_TWICE(b, C, H, W) {"MAXPOOL2D twice k2 s2 p0", ot_pool, {NNCL_OP_MAXPOOL2D, 2, 2, 0, 1}, 0, {OT_X3(-1, 1, C, H, W)}, b, OT_TOL}
#define OT_GAP(b, C, H, W) {"global_avgpool", ot_pool, {NNCL_OP_GLOBAL_AVGPOOL}, 0, {OT_X3(-1, 1, C, H, W)}, b, OT_TOL}
#define OT_BN(b, ndim, d0, d1, d2) {"batchnorm", ot_batchnorm, {0}, 0, {{OT_GRAD, -2, 2, ndim, {d0, d1, d2}}}, b, OT_TOL}
#define OT_BNA(b, act, C, H, W)                                                                                     \
    {"batchnorm_act " #act, ot_batchnorm_act, {NNCL_BN_ACT_##act}, 0, {OT_X3(-2, 2, C, H, W)}, b, OT_TOL}
/* the residual's values reach ReLU6's top and hard-swish's ends */
#define OT_BNAR(b, act, C, H, W)                                                                                    \
    {"batchnorm_act " #act " residual", ot_batchnorm_act, {NNCL_BN_ACT_##act, 1}, 0,                              \
     {OT_X3(-2, 2, C, H, W), OT_X3(-3, 5, C, H, W)}, b, OT_TOL}
#define OT_LN(b, ndim, d0, d1, d2) {"layernorm", ot_layernorm, {0}, 0, {{OT_GRAD, -2, 2, ndim, {d0, d1, d2}}}, b, OT_TOL}
#define OT_ATT(name, b, T, C, heads, p)                                                                               \
    {"causal_attention " name, ot_attention, {heads}, p,                                                             \
     {OT_X2(-2, 2, T, C), OT_X2(-2, 2, T, C), OT_X2(-2, 2, T, C)}, b, OT_TOL}
#define OT_RNN(b, gru, H, T, layers, F)                                                                            \
    {"rnn_scan " #gru " H" #H " T" #T " layers" #layers, ot_rnn, {gru, H, layers}, 0,                              \
     {OT_X2(-2, 2, T, layers ? F : (gru ? 3 : 4) * H)}, b, OT_TOL}
#define OT_CAT(b, axis, ndim, a0, a1, a2, b0, b1, b2)                                                                \
    {"concat", ot_concat, {axis}, 0, {{OT_GRAD, -2, 2, ndim, {a0, a1, a2}}, {OT_GRAD, -2, 2, ndim, {b0, b1, b2}}}, b, \
     OT_TOL}

/* matmul of a [d0, d1] and b [e0, e1] (both batched) with transposes; of
 * a [d0, d1] and a parameter [e0, e1] (3-D with h). */
#define OT_MM(b, ta, tb, h, d0, d1, e0, e1)                                                                        \
    {"matmul ta" #ta " tb" #tb, ot_matmul, {ta, tb}, 0, {OT_X3(-1, 1, h, d0, d1), OT_X3(-1, 1, h, e0, e1)}, b, OT_TOL}
#define OT_MMP(b, ta, tb, d0, d1, e0, e1, h)                                                                       \
    {"matmul ta" #ta " tb" #tb " shared b", ot_matmul, {ta, tb, 1, e0, e1, h}, 0, {OT_X2(-1, 1, d0, d1)}, b, OT_TOL}
/* transpose axes a0, a1 (equal: none) of [d0, d1, d2], then slice axis s
 * from start of len (sl 1) */
#define OT_TR(b, a0, a1, d0, d1, d2, sl, s, start, len)                                                            \
    {"transpose/slice " #a0 "," #a1 " " #s ":" #start "+" #len, ot_shape_ops, {a0, a1, sl, s, start, len}, 0,       \
     {OT_X3(-2, 2, d0, d1, d2)}, b, OT_TOL}
#define OT_NORM(kind, b, ndim, d0, d1)                                                                              \
    {kind ? "rmsnorm" : "layernorm(no bias)", ot_norm_ex, {kind}, 0, {{OT_GRAD, -2, 2, ndim, {d0, d1, 0}}}, b, OT_TOL}
#define OT_SEQ_LAB(T, classes) {OT_LABEL, 0, classes, 1, {T, 0, 0}}
#define OT_SEQ(ignore, b, T, V, classes)                                                                            \
    {"sequence_ce ignore " #ignore, ot_seq_ce, {ignore}, 0, {OT_X2(-3, 3, T, V), OT_SEQ_LAB(T, classes)}, b, OT_TOL}

/* conv2d_ex, conv1d (W 0: [B,C,H] is [B,C,L]) or conv_transpose2d of ot_cx[i] */
#define OT_CX(b, i, ndim, C, H, W)                                                                                 \
    {"conv_ex " #i, ot_conv_ex, {i}, 0, {{OT_GRAD, -1, 1, ndim, {C, H, W}}}, b, OT_TOL}

#define OT_GN(b, groups, affine, ndim, C, d1, d2)                                                                  \
    {"groupnorm g" #groups " affine" #affine, ot_groupnorm, {groups, affine}, 0,                                  \
     {{OT_GRAD, -2, 2, ndim, {C, d1, d2}}}, b, OT_TOL}

#define OT_UP(b, fh, fw, bilinear, C, H, W)                                                                        \
    {"upsample2d " #fh "x" #fw " bilinear" #bilinear, ot_upsample, {fh, fw, bilinear}, 0, {OT_X3(-2, 2, C, H, W)},  \
     b, OT_TOL}

/* The rows: the OP_REF rows of op_cases.def (its OP_TORCH rows are
 * tests/test_torch_ops.c's). */
#define OP_REF(...) __VA_ARGS__,
#define OP_TORCH(name, builder, loss, wd, python)
static const ot_row ot_rows[] = {
#include "op_cases.def"
};
#define OT_NROWS (sizeof ot_rows / sizeof ot_rows[0])

/* ------------------------------------------------------------- PyTorch rows */

/* The builder of an OP_TORCH row: case a[0] of tto_cases on h = in[0],
 * h2 = in[1] where a[1], and the target t = in[a[2]] where a[2]. */
static nncl_node *ot_torch(nncl_graph *g, nncl_node *const *in, const ot_row *r) {
    return tto_cases[r->a[0]].build(g, in[0], r->a[1] ? in[1] : NULL, r->a[2] ? in[r->a[2]] : NULL);
}

/* Every row: OP_REF's, then OP_TORCH's; OT_FIXED inputs' values (batch
 * included) by row and input. */
#define OT_NALL (OT_NROWS + (size_t)TTO_NCASES)
static ot_row ot_all[OT_NALL];
static const float *ot_fixed[OT_NALL][3];
static char ot_torch_names[TTO_NCASES][96];

/* Input spec of CASE.what (x or x2, with the parameter pname PyTorch adds
 * to it): values whose gradient is checked, uniform over the range of x +
 * p there, where the case has p; else (indices) the recorded values into
 * *fixed. *batch: the case's. 0 when the file lacks it or its shape does
 * not fit. */
static int ot_torch_input(const nncl_safetensors *st, const char *c, const char *what, const char *pname,
                          ot_input *in, const float **fixed, int *batch) {
    nncl_safetensors_entry e, pe;
    char key[64];
    size_t k;
    int ndim, shape[8], i;
    if (!tto_get(st, c, what, &e, &ndim, shape) || ndim > 3) return 0;
    memset(in, 0, sizeof *in);
    in->ndim = ndim;
    for (i = 0; i < ndim; i++) in->dims[i] = shape[i];
    *batch = (int)e.shape[0];
    snprintf(key, sizeof key, "param.%s", pname);
    if (!tto_get(st, c, key, &pe, NULL, NULL)) {
        in->kind = OT_FIXED;
        *fixed = e.data;
        return 1;
    }
    in->kind = OT_GRAD;
    in->lo = in->hi = e.data[0] + pe.data[0];
    for (k = 0; k < e.numel; k++) {
        float v = e.data[k] + pe.data[k % pe.numel];
        if (v < in->lo) in->lo = v;
        if (v > in->hi) in->hi = v;
    }
    return 1;
}

/* The row of PyTorch case i: x, x2 where the case has one, and its
 * recorded target where its builder takes one (a loss of its own: labels
 * or targets); named "CASE (PyTorch case)" into name. */
static int ot_torch_row(const nncl_safetensors *st, int i, ot_row *r, const float **fixed, char *name, size_t len) {
    const tto_case *c = &tto_cases[i];
    nncl_safetensors_entry e;
    int ndim, shape[8], b2 = 0, k;
    memset(r, 0, sizeof *r);
    snprintf(name, len, "%s (PyTorch case)", c->name);
    r->name = name;
    r->build = ot_torch;
    r->a[0] = i;
    r->tol = OT_TOL;
    if (!ot_torch_input(st, c->name, "x", "p", &r->in[0], &fixed[0], &r->batch)) return 0;
    r->a[1] = ot_torch_input(st, c->name, "x2", "p2", &r->in[1], &fixed[1], &b2);
    if (r->a[1] && b2 != r->batch) return 0;
    if (c->loss == 2 || (c->loss == 1 && !r->a[1])) {
        if (!tto_get(st, c->name, "t", &e, &ndim, shape) || ndim > 3 || (int)e.shape[0] != r->batch) return 0;
        r->a[2] = r->a[1] ? 2 : 1;
        r->in[r->a[2]].kind = OT_FIXED;
        r->in[r->a[2]].ndim = c->loss == 2 ? 0 : ndim;
        for (k = 0; k < ndim && c->loss != 2; k++) r->in[r->a[2]].dims[k] = shape[k];
        fixed[r->a[2]] = e.data;
    }
    return 1;
}

static int ot_rows_load(nncl_safetensors **st) {
    const char *name = "op table rows of the PyTorch cases";
    size_t k;
    TH_OK(name, NULL, nncl_safetensors_load(TTO_FILE, st));
    for (k = 0; k < OT_NROWS; k++) ot_all[k] = ot_rows[k];
    for (k = 0; k < (size_t)TTO_NCASES; k++)
        if (!ot_torch_row(*st, (int)k, &ot_all[OT_NROWS + k], ot_fixed[OT_NROWS + k], ot_torch_names[k],
                          sizeof ot_torch_names[k])) {
            th_fail(name, "case %s: missing or of an unexpected shape in %s", tto_cases[k].name, TTO_FILE);
            return 1;
        }
    return 0;
}

/* ------------------------------------------------------------- running */

/* "[B,3,5]" of an input spec into buf. */
static void ot_shape_str(const ot_input *in, char *buf, size_t len) {
    int i, k = snprintf(buf, len, "[B");
    for (i = 0; i < in->ndim && k > 0 && (size_t)k < len; i++) k += snprintf(buf + k, len - (size_t)k, ",%d", in->dims[i]);
    if (k > 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, "]");
}

/* Values for input i of the row: uniform in its range, whole numbers
 * below hi (labels, indices; with repeats), or fixed's (OT_FIXED). */
static float *ot_data(const ot_input *in, size_t count, unsigned seed, const float *fixed) {
    float *d = th_random(count, in->lo, in->hi, seed);
    size_t k;
    if (d && in->kind == OT_FIXED) memcpy(d, fixed, count * sizeof(float));
    if (in->kind == OT_LABEL)
        for (k = 0; k < count; k++) d[k] = (float)(int)d[k]; /* th_uniform is below 1 */
    return d;
}

/* Half storage (oc_store 1 fp16, 2 bf16): the rows whose ops all have half
 * kernels and whose op gives (or whose loss takes) at least 8 values run
 * again with the format's tolerance, one bound for every op (the same as
 * tests/test_mixed.c): 40 u^2 for unit roundoff u, 1e-5 fp16 (u = 2^-11),
 * 6e-4 bf16 (u = 2^-8), on the normalised squared error, i.e. a relative
 * error of about 6u over a node's values, room for each stored value's
 * rounding and the few roundings before it. Two things keep it a bound on
 * what the ops do (tests/opcheck.h): the reference starts from the fed
 * values and parameters rounded as the device stores them (a ReLU's input
 * near 0 is then the same on both sides; conv2d's input gradient in bf16
 * missed the bound by 2x without it), and fp16 runs backward from a loss
 * gradient of 1024, as training does from its loss scale (the softmax of
 * 300 columns put its input gradient, near 7e-6, among fp16's subnormals
 * without it). Fewer than 8 values are left to fp32: the mse against a
 * random target is then one difference of near values, whose relative
 * error rounding the prediction to half can make any size. Every element
 * is held to a bound of its own as well, in units of the format's unit
 * roundoff (OC_ELEM_U, tests/opcheck.h), which the aggregate cannot give.
 * ot_half_ran marks the ops those rows covered. */
static int ot_half_ran[NNCL_OP_COUNT];
/* What the row names add after the storage: ", im2col" for conv2d's rows
 * run again through its im2col path, ", work-group kernels" for the row
 * reductions' GPU kernels on any device (main). */
static const char *ot_path = "";

/* Max pooling's input in half storage: j/64 for j in -125..125 (exact in
 * fp16 and bf16), distinct over any 251 consecutive elements and so within
 * every window. Random values could round to a tie, whose gradient the
 * kernels give to the first in scan order and the reference to the larger
 * unrounded one. */
static void ot_distinct(float *d, size_t count) {
    size_t k;
    for (k = 0; k < count; k++) d[k] = (float)((int)((k * 37 + 11) % 251) - 125) / 64.0f;
}

/* The kinked activations' input in half storage: odd multiples of 1/32 in
 * (-8, 8), exact in fp16 and bf16 and never on a kink (whole numbers, -1/2
 * or 1): random values rounded to the format's grid land on -3, 3 or 6
 * often enough that a finite difference straddles the kink. */
static void ot_off_kinks(float *d, size_t count) {
    size_t k;
    for (k = 0; k < count; k++) d[k] = (float)(2 * (int)((k * 37 + 11) % 256) - 255) / 32.0f;
}

static void ot_run(nncl_context *ctx, const ot_row *r, int index) {
    static const char *const names[3] = {"a", "b", "c"};
    char name[200], s0[48], s1[48] = "";
    nncl_graph *g = nncl_graph_create(ctx, 42);
    nncl_node *in[3] = {NULL, NULL, NULL}, *out, *t = NULL, *loss;
    float *data[4] = {NULL, NULL, NULL, NULL};
    oc_feed f[4];
    int i, nf = 0, ok = 1;
    for (i = 0; i < 3 && r->in[i].kind; i++) {
        in[i] = nncl_input(g, names[i], r->in[i].ndim, r->in[i].dims);
        if (!in[i]) ok = 0;
        else in[i]->needs_grad = r->in[i].kind == OT_GRAD; /* check the input's gradient too */
    }
    ot_shape_str(&r->in[0], s0, sizeof s0);
    if (r->in[1].kind) ot_shape_str(&r->in[1], s1, sizeof s1);
    snprintf(name, sizeof name, "%s b%d %s%s%s", r->name, r->batch, s0, *s1 ? " " : "", s1);
    for (i = 0; name[i] && name[i] != ' '; i++) name[i] = (char)tolower((unsigned char)name[i]); /* the op's own name */
    if (oc_store || *ot_path) {
        char op[180];
        snprintf(op, sizeof op, "%.179s", name);
        snprintf(name, sizeof name, "%s storage%s: %s", oc_store == 1 ? "fp16" : oc_store ? "bf16" : "fp32", ot_path,
                 op);
    }
    out = ok ? r->build(g, in, r) : NULL;
    loss = out;
    if (out && !(out->op == NNCL_OP_SOFTMAX_CE || out->op == NNCL_OP_BCE_LOGITS || out->op == NNCL_OP_MSE ||
                 out->op == NNCL_OP_SEQ_CE)) {
        int shape[NNCL_MAX_DIMS], nd = nncl_node_shape(out, shape);
        t = nncl_input(g, "target", nd, shape);
        loss = nncl_mse(g, out, t);
    }
    if (loss) {
        for (i = 0; i < 3 && in[i]; i++) {
            data[nf] = ot_data(&r->in[i], nncl__numel(in[i], r->batch), 17u + 12u * (unsigned)i + 97u * (unsigned)index,
                               ot_fixed[index][i]);
            f[nf].node = in[i];
            f[nf].data = data[nf];
            nf++;
        }
        if (t) { /* off-centre: no cancelling bias sums */
            data[nf] = th_random(nncl__numel(t, r->batch), -0.5f, 1.5f, 29u + 97u * (unsigned)index);
            f[nf].node = t;
            f[nf].data = data[nf];
            nf++;
        }
    }
    if (oc_store && out && (out->op == NNCL_OP_MAXPOOL2D || (out->n_in > 0 && out->in[0]->op == NNCL_OP_MAXPOOL2D)) &&
        data[0]) ot_distinct(data[0], nncl__numel(in[0], r->batch));
    if (oc_store && out && data[0] &&
        (out->op == NNCL_OP_RELU6 || out->op == NNCL_OP_HARDSWISH || out->op == NNCL_OP_HARDSIGMOID ||
         out->op == NNCL_OP_CLAMP))
        ot_off_kinks(data[0], nncl__numel(in[0], r->batch));
    for (oc_no_fd = 0, i = 0; i < 3 && in[i]; i++) oc_no_fd |= nncl__numel(in[i], r->batch) > OT_FD_MAX;
    if (!oc_store) oc_check(name, ctx, g, loss, f, nf, r->batch, r->tol);
    else if (loss && nncl__numel(out == loss ? out->in[0] : out, r->batch) >= 8 &&
             nncl__plan_check_store(ctx, g, loss, oc_store) == NNCL_OK) {
        oc_check(name, ctx, g, loss, f, nf, r->batch, oc_store == 1 ? 1e-5 : 6e-4);
        for (i = 0; i < g->n_nodes; i++) ot_half_ran[g->nodes[i]->op] = 1;
    }
    for (i = 0; i < 4; i++) free(data[i]);
    nncl_graph_free(g);
}

/* Every op of ops.def appears in some row's graph, and in some OP_TORCH
 * row's but dropout (its masks are random: PyTorch's draw others). */
static int ot_coverage(nncl_context *ctx) {
    const char *name = "the table covers every op of ops.def", *tname = "every op but dropout has an OP_TORCH row";
    unsigned char seen[NNCL_OP_COUNT];
    int i, k, bad = 0;
    memset(seen, 0, sizeof seen);
    for (k = 0; k < (int)OT_NALL; k++) {
        const ot_row *r = &ot_all[k];
        nncl_graph *g = nncl_graph_create(ctx, 1);
        nncl_node *in[3] = {NULL, NULL, NULL};
        for (i = 0; i < 3 && r->in[i].kind; i++) in[i] = nncl_input(g, i ? (i == 1 ? "b" : "c") : "a", r->in[i].ndim, r->in[i].dims);
        TH_CHECK(name, r->build(g, in, r) != NULL);
        for (i = 0; i < g->n_nodes; i++) seen[g->nodes[i]->op] |= (unsigned char)(r->build == ot_torch ? 3 : 1);
        nncl_graph_free(g);
    }
    for (i = 0; i < NNCL_OP_COUNT; i++) {
        const char *op = nncl__opdef_get((nncl__op)i)->name;
        if (!seen[i]) th_fail(name, "no row builds op %s", op), bad = 1;
        else if (!(seen[i] & 2) && i != NNCL_OP_DROPOUT) th_fail(tname, "no OP_TORCH row builds op %s", op), bad = 1;
    }
    if (bad) return 1;
    th_pass("%s (%d rows)", name, (int)OT_NALL);
    th_pass("%s", tname);
    return 0;
}

/* Every op with half kernels ran in half storage in some row. */
static int ot_half_coverage(void) {
    const char *name = "every op with half-storage kernels is checked in fp16 (reshape, an alias: test_mixed)";
    int i;
    for (i = 0; i < NNCL_OP_COUNT; i++)
        if (nncl__opdef_get((nncl__op)i)->half && !nncl__opdef_get((nncl__op)i)->alias && !ot_half_ran[i]) {
            th_fail(name, "op %s has half kernels but no row ran it", nncl__opdef_get((nncl__op)i)->name);
            return 1;
        }
    th_pass("%s", name);
    return 0;
}

/* The rows a filter leaves in: those whose name holds the filter, or for
 * "--gemm" those whose graph holds a matrix product (linear, matmul,
 * conv2d, rnn_scan: the ops that call nncl__sgemm, whose kernels NNCL_GEMM
 * chooses), which a pass that
 * forces one side of the choice reruns (tests/test_gemm_own.sh); every
 * other row runs the same kernels whatever NNCL_GEMM says. */
static unsigned char ot_chosen[OT_NALL];
static size_t ot_choose(nncl_context *ctx, const char *filter) {
    size_t k, n = 0;
    int i;
    for (k = 0; k < OT_NALL; k++) {
        const ot_row *r = &ot_all[k];
        if (!filter) ot_chosen[k] = 1;
        else if (strcmp(filter, "--gemm")) ot_chosen[k] = strstr(r->name, filter) != NULL;
        else {
            nncl_graph *g = nncl_graph_create(ctx, 1);
            nncl_node *in[3] = {NULL, NULL, NULL};
            ot_chosen[k] = 0;
            for (i = 0; i < 3 && r->in[i].kind; i++) in[i] = nncl_input(g, i ? (i == 1 ? "b" : "c") : "a", r->in[i].ndim, r->in[i].dims);
            if (r->build(g, in, r))
                for (i = 0; i < g->n_nodes; i++)
                    ot_chosen[k] |= g->nodes[i]->op == NNCL_OP_LINEAR || g->nodes[i]->op == NNCL_OP_MATMUL ||
                                    g->nodes[i]->op == NNCL_OP_CONV2D || g->nodes[i]->op == NNCL_OP_RNN_SCAN;
            nncl_graph_free(g);
        }
        n += ot_chosen[k];
    }
    return n;
}

int main(int argc, char **argv) {
    nncl_context *ctx = th_context();
    const char *filter = argc >= 2 ? argv[1] : NULL;
    nncl_safetensors *st = NULL;
    size_t k, chosen;
    if (!ctx) return th_exit_code();
    if (ot_rows_load(&st)) {
        nncl_safetensors_free(st);
        nncl_free(ctx);
        return th_exit_code();
    }
    ot_coverage(ctx);
    chosen = ot_choose(ctx, filter);
    if (filter) { /* what the filter leaves out says SKIP */
        char why[160];
        snprintf(why, sizeof why, "%zu of %zu rows left out by the filter \"%.60s\"", OT_NALL - chosen, OT_NALL,
                 filter);
        if (!chosen) th_fail("op table rows", "no row matches \"%s\"", filter);
        else th_skip("op table rows not matching the filter", why);
    }
    for (k = 0; k < OT_NALL; k++)
        if (ot_chosen[k]) ot_run(ctx, &ot_all[k], (int)k);
    for (oc_store = 1; oc_store <= 2; oc_store++)
        for (k = 0; k < OT_NALL; k++)
            if (ot_chosen[k]) ot_run(ctx, &ot_all[k], (int)k);
    /* conv2d's im2col path in half storage (which the own path's taking
     * every layer it fits leaves to NNCL_GEMM=clblast and to sizes beyond
     * the own kernels): the column matrix in the format, its products on
     * the own half kernels (CLBlast takes no half operands). Under a
     * forced side (NNCL_GEMM set) it would repeat the unforced run's. */
    if (!getenv("NNCL_GEMM") || !*getenv("NNCL_GEMM")) {
        setenv("NNCL_GEMM", "clblast", 1);
        ot_path = ", im2col";
        for (oc_store = 1; oc_store <= 2; oc_store++)
            for (k = 0; k < OT_NALL; k++)
                if (ot_all[k].build == ot_conv && ot_chosen[k]) ot_run(ctx, &ot_all[k], (int)k);
        ot_path = "";
        unsetenv("NNCL_GEMM");
    } else
        th_skip("conv2d's im2col path in half storage", "NNCL_GEMM is set; the run without it checks the path");
    /* conv2d's input gradient on the own path by a product and by the 3x3
     * kernel (NNCL_CONV_DX=gemm, =3x3) where each fits: fp32 storage,
     * which they take (src/ops/conv_own.c) */
    {
        static const char *const modes[2][2] = {{"gemm", ", dx by product"}, {"3x3", ", dx by 3x3 kernel"}};
        const char *env = getenv("NNCL_CONV_DX");
        char keep[32] = "";
        int m;
        if (env) snprintf(keep, sizeof keep, "%s", env);
        for (m = 0; m < 2; m++) {
            setenv("NNCL_CONV_DX", modes[m][0], 1);
            ot_path = modes[m][1];
            oc_store = 0;
            for (k = 0; k < OT_NALL; k++)
                if (!strncmp(ot_all[k].name, "conv", 4) && ot_chosen[k]) ot_run(ctx, &ot_all[k], (int)k);
        }
        ot_path = "";
        if (env) setenv("NNCL_CONV_DX", keep, 1);
        else unsetenv("NNCL_CONV_DX");
    }
    /* depthwise layers on the general direct kernels (NNCL_CONV_DEPTHWISE=0;
     * the depthwise ones run above, src/ops/conv_dw.c) */
    {
        const char *env = getenv("NNCL_CONV_DEPTHWISE");
        char keep[32] = "";
        if (env) snprintf(keep, sizeof keep, "%s", env);
        setenv("NNCL_CONV_DEPTHWISE", "0", 1);
        ot_path = ", general direct kernels";
        for (oc_store = 0; oc_store <= 2; oc_store++)
            for (k = 0; k < OT_NALL; k++)
                if (ot_all[k].build == ot_conv_ex && ot_chosen[k]) ot_run(ctx, &ot_all[k], (int)k);
        ot_path = "";
        if (env) setenv("NNCL_CONV_DEPTHWISE", keep, 1);
        else unsetenv("NNCL_CONV_DEPTHWISE");
    }
    /* batch norm's other path: a work-group per channel (NNCL_BN=groups;
     * the streaming kernels run above, src/ops/op_norm.c) */
    {
        const char *env = getenv("NNCL_BN");
        char keep[32] = "";
        if (env) snprintf(keep, sizeof keep, "%s", env);
        setenv("NNCL_BN", env && !strcmp(env, "groups") ? "stream" : "groups", 1);
        ot_path = env && !strcmp(env, "groups") ? ", streaming" : ", per-channel groups";
        for (oc_store = 0; oc_store <= 2; oc_store++)
            for (k = 0; k < OT_NALL; k++)
                if ((ot_all[k].build == ot_batchnorm || ot_all[k].build == ot_batchnorm_act) && ot_chosen[k])
                    ot_run(ctx, &ot_all[k], (int)k);
        ot_path = "";
        if (env) setenv("NNCL_BN", keep, 1);
        else unsetenv("NNCL_BN");
    }
    /* batch norm's activation and residual in passes of their own
     * (NNCL_BN_FUSE=0; the fused kernels run above, src/ops/op_batchnorm.c) */
    {
        const char *env = getenv("NNCL_BN_FUSE");
        char keep[32] = "";
        int off = env && (!strcmp(env, "0") || !strcmp(env, "off"));
        if (env) snprintf(keep, sizeof keep, "%s", env);
        setenv("NNCL_BN_FUSE", off ? "1" : "0", 1);
        ot_path = off ? ", fused" : ", separate passes";
        for (oc_store = 0; oc_store <= 2; oc_store++)
            for (k = 0; k < OT_NALL; k++)
                if (ot_all[k].build == ot_batchnorm_act && ot_chosen[k])
                    ot_run(ctx, &ot_all[k], (int)k);
        ot_path = "";
        if (env) setenv("NNCL_BN_FUSE", keep, 1);
        else unsetenv("NNCL_BN_FUSE");
    }
    /* binary ops and axpy's gradients by a work-item an element
     * (NNCL_EW_VEC=0; their 8-element kernels run above,
     * src/ops/op_elementwise.c) */
    {
        const char *env = getenv("NNCL_EW_VEC");
        char keep[32] = "";
        int off = env && !strcmp(env, "0");
        if (env) snprintf(keep, sizeof keep, "%s", env);
        setenv("NNCL_EW_VEC", off ? "1" : "0", 1);
        ot_path = off ? ", 8 elements a work-item" : ", an element a work-item";
        for (oc_store = 0; oc_store <= 2; oc_store++)
            for (k = 0; k < OT_NALL; k++)
                if ((ot_all[k].build == ot_binary || ot_all[k].build == ot_add_sample) && ot_chosen[k])
                    ot_run(ctx, &ot_all[k], (int)k);
        ot_path = "";
        if (env) setenv("NNCL_EW_VEC", keep, 1);
        else unsetenv("NNCL_EW_VEC");
    }
    /* the row reductions' work-group kernels, which GPUs get, on every
     * device (CPU devices take the per-row ones) */
    setenv("NNCL_REDUCE", "groups", 1);
    ot_path = ", work-group kernels";
    for (oc_store = 0; oc_store <= 2; oc_store++)
        for (k = 0; k < OT_NALL; k++)
            if ((!strncmp(ot_all[k].name, "layernorm", 9) || !strncmp(ot_all[k].name, "rmsnorm", 7) ||
                 !strncmp(ot_all[k].name, "sequence_ce", 11) || !strcmp(ot_all[k].name, "SOFTMAX") ||
                 !strcmp(ot_all[k].name, "LOG_SOFTMAX") || ot_all[k].build == ot_add_sample) &&
                ot_chosen[k])
                ot_run(ctx, &ot_all[k], (int)k);
    ot_path = "";
    unsetenv("NNCL_REDUCE");
    oc_store = 0;
    if (!filter) ot_half_coverage();
    else th_skip("every op with half-storage kernels is checked in fp16", "a row filter is set");
    nncl_safetensors_free(st);
    nncl_free(ctx);
    return th_exit_code();
}
