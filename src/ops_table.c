/* ops_table.c - the table of op definitions, indexed by nncl__op. Each op
 * family file defines its nncl__opdef_<op> entries; an op missing here is
 * not built into the library and graph builders refuse it. */
#include "graph.h"

extern const nncl__opdef nncl__opdef_linear;
extern const nncl__opdef nncl__opdef_softmax_ce;
extern const nncl__opdef nncl__opdef_bce_logits;
extern const nncl__opdef nncl__opdef_mse;
extern const nncl__opdef nncl__opdef_batchnorm;
extern const nncl__opdef nncl__opdef_layernorm;
extern const nncl__opdef nncl__opdef_dropout;
extern const nncl__opdef nncl__opdef_embedding;
extern const nncl__opdef nncl__opdef_reshape;
extern const nncl__opdef nncl__opdef_concat;
extern const nncl__opdef nncl__opdef_conv2d;
extern const nncl__opdef nncl__opdef_maxpool2d;
extern const nncl__opdef nncl__opdef_avgpool2d;
extern const nncl__opdef nncl__opdef_global_avgpool;
extern const nncl__opdef nncl__opdef_add;
extern const nncl__opdef nncl__opdef_sub;
extern const nncl__opdef nncl__opdef_mul;
extern const nncl__opdef nncl__opdef_scale;
extern const nncl__opdef nncl__opdef_relu;
extern const nncl__opdef nncl__opdef_leaky_relu;
extern const nncl__opdef nncl__opdef_sigmoid;
extern const nncl__opdef nncl__opdef_tanh;
extern const nncl__opdef nncl__opdef_gelu;
extern const nncl__opdef nncl__opdef_softmax;
extern const nncl__opdef nncl__opdef_log_softmax;
/* @@OPDECL@@ */

static const nncl__opdef ops_table_input = {"input", NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL};
static const nncl__opdef ops_table_param = {"param", NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL};

const nncl__opdef *nncl__opdef_get(nncl__op op) {
    switch (op) {
    case NNCL_OP_INPUT: return &ops_table_input;
    case NNCL_OP_PARAM: return &ops_table_param;
    case NNCL_OP_LINEAR: return &nncl__opdef_linear;
    case NNCL_OP_SOFTMAX_CE: return &nncl__opdef_softmax_ce;
    case NNCL_OP_BCE_LOGITS: return &nncl__opdef_bce_logits;
    case NNCL_OP_MSE: return &nncl__opdef_mse;
    case NNCL_OP_BATCHNORM: return &nncl__opdef_batchnorm;
    case NNCL_OP_LAYERNORM: return &nncl__opdef_layernorm;
    case NNCL_OP_DROPOUT: return &nncl__opdef_dropout;
    case NNCL_OP_EMBEDDING: return &nncl__opdef_embedding;
    case NNCL_OP_RESHAPE: return &nncl__opdef_reshape;
    case NNCL_OP_CONCAT: return &nncl__opdef_concat;
    case NNCL_OP_CONV2D: return &nncl__opdef_conv2d;
    case NNCL_OP_MAXPOOL2D: return &nncl__opdef_maxpool2d;
    case NNCL_OP_AVGPOOL2D: return &nncl__opdef_avgpool2d;
    case NNCL_OP_GLOBAL_AVGPOOL: return &nncl__opdef_global_avgpool;
    case NNCL_OP_ADD: return &nncl__opdef_add;
    case NNCL_OP_SUB: return &nncl__opdef_sub;
    case NNCL_OP_MUL: return &nncl__opdef_mul;
    case NNCL_OP_SCALE: return &nncl__opdef_scale;
    case NNCL_OP_RELU: return &nncl__opdef_relu;
    case NNCL_OP_LEAKY_RELU: return &nncl__opdef_leaky_relu;
    case NNCL_OP_SIGMOID: return &nncl__opdef_sigmoid;
    case NNCL_OP_TANH: return &nncl__opdef_tanh;
    case NNCL_OP_GELU: return &nncl__opdef_gelu;
    case NNCL_OP_SOFTMAX: return &nncl__opdef_softmax;
    case NNCL_OP_LOG_SOFTMAX: return &nncl__opdef_log_softmax;
    /* @@OPCASE@@ */
    default: return NULL;
    }
}
