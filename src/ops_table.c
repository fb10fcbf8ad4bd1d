/* ops_table.c - the table of op definitions, indexed by nncl__op. Each op
 * family file defines its nncl__opdef_<op> entries; an op missing here is
 * not built into the library and graph builders refuse it. */
#include "graph.h"

extern const nncl__opdef nncl__opdef_linear;
extern const nncl__opdef nncl__opdef_softmax_ce;
extern const nncl__opdef nncl__opdef_bce_logits;
extern const nncl__opdef nncl__opdef_mse;
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
    /* @@OPCASE@@ */
    default: return NULL;
    }
}
