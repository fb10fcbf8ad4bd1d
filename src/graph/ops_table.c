/* ops_table.c - the table of op definitions, indexed by nncl__op, generated
 * from ops.def: a row per op, defined by the op's family file as
 * nncl__opdef_<name>. An op listed there but defined nowhere fails to link. */
#include "graph/graph.h"

#define NNCL_OP(E, name, lo, hi) extern const nncl__opdef nncl__opdef_##name;
#include "graph/ops.def"
#undef NNCL_OP

/* Graph leaves: no computation, no gradient rule of their own. */
const nncl__opdef nncl__opdef_input = {.name = "input"};
const nncl__opdef nncl__opdef_param = {.name = "param"};

static const nncl__opdef *const ops_table[] = {
#define NNCL_OP(E, name, lo, hi) &nncl__opdef_##name,
#include "graph/ops.def"
#undef NNCL_OP
};

/* The table covers the enum (an enum value added outside ops.def fails here). */
typedef char ops_table_covers_enum[sizeof ops_table / sizeof ops_table[0] == NNCL_OP_COUNT ? 1 : -1];

const nncl__opdef *nncl__opdef_get(nncl__op op) {
    return (unsigned)op < (unsigned)NNCL_OP_COUNT ? ops_table[op] : NULL;
}

static const signed char ops_inputs[][2] = {
#define NNCL_OP(E, name, lo, hi) {lo, hi},
#include "graph/ops.def"
#undef NNCL_OP
};

int nncl__op_inputs(nncl__op op, int n_in, int *lo, int *hi) {
    if ((unsigned)op >= (unsigned)NNCL_OP_COUNT) return *lo = *hi = 0;
    *lo = ops_inputs[op][0];
    *hi = ops_inputs[op][1];
    return n_in >= *lo && n_in <= *hi;
}
