/* graph.c - building the device-independent graph: nodes, inputs and
 * parameters with their flat-buffer layout, name lookup, and the checks that
 * make a wrong shape fail when the graph is built rather than at step time. */
#include "graph/graph.h"
#include <stdio.h>

nncl_graph *nncl_graph_create(nncl_context *ctx, uint64_t seed) {
    nncl_graph *g = (nncl_graph *)nncl__calloc(1, sizeof *g);
    if (!g) {
        nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_graph_create: out of host memory");
        return NULL;
    }
    g->ctx = ctx;
    g->seed = seed;
    return g;
}

void nncl_graph_free(nncl_graph *g) {
    int i;
    if (!g) return;
    for (i = 0; i < g->n_nodes; i++) NNCL_FREE(g->nodes[i]);
    NNCL_FREE(g->nodes);
    NNCL_FREE(g);
}

nncl_node *nncl__graph_fail(nncl_graph *g, nncl_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    nncl__vfail(g ? g->ctx : NULL, st, fmt, ap);
    va_end(ap);
    return NULL;
}

nncl_status nncl__graph_error(nncl_graph *g, nncl_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    nncl__vfail(g ? g->ctx : NULL, st, fmt, ap);
    va_end(ap);
    return st;
}

nncl_status nncl__check_feed(nncl_context *ctx, const nncl_graph *g, const nncl_node *input, const float *data,
                             int batch) {
    int i, k;
    for (i = input->id + 1; i < g->n_nodes; i++) { /* readers come after their inputs */
        const nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (!d->check_feed) continue;
        for (k = 0; k < n->n_in; k++)
            if (n->in[k] == input) NNCL_TRY(d->check_feed(ctx, n, k, data, batch));
    }
    return NNCL_OK;
}

const char *nncl__shape_str(const nncl_node *n, char *buf, size_t len) {
    size_t used = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < n->ndim && used + 16 < len; i++) {
        if (i == 0 && n->batched) used += (size_t)snprintf(buf + used, len - used, "[B");
        else used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "[", n->shape[i]);
    }
    if (used + 2 < len) snprintf(buf + used, len - used, n->ndim ? "]" : "[]");
    return buf;
}

int nncl__same_shape(const nncl_node *a, const nncl_node *b) {
    int i;
    if (a->batched != b->batched || a->ndim != b->ndim) return 0;
    for (i = a->batched ? 1 : 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

size_t nncl__numel(const nncl_node *n, int batch) {
    return n->batched ? n->sample_numel * (size_t)batch : n->sample_numel;
}

/* Sets sample_numel from shape; fails past 2^31 elements per sample. */
static int graph_count(nncl_node *n) {
    size_t e = 1;
    int i;
    for (i = n->batched ? 1 : 0; i < n->ndim; i++) {
        if (n->shape[i] <= 0 || nncl__mul_overflow(e, (size_t)n->shape[i], &e) || e > 0x7fffffffu) return 0;
    }
    n->sample_numel = e;
    return 1;
}

static nncl_node *graph_push(nncl_graph *g, nncl__op op, const char *name) {
    nncl_node *n;
    if (g->frozen)
        return nncl__graph_fail(g, NNCL_ERR_STATE, "the graph already has a plan: build the whole model first");
    if (nncl__grow_int((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes, 32))
        return nncl__graph_fail(g, NNCL_ERR_OUT_OF_MEMORY, "out of host memory building the graph");
    n = (nncl_node *)nncl__calloc(1, sizeof *n);
    if (!n) return nncl__graph_fail(g, NNCL_ERR_OUT_OF_MEMORY, "out of host memory building the graph");
    n->id = g->n_nodes;
    n->op = op;
    if (name) snprintf(n->name, sizeof n->name, "%s", name);
    else snprintf(n->name, sizeof n->name, "%s_%d", nncl__opdef_get(op) ? nncl__opdef_get(op)->name : "node", n->id);
    g->nodes[g->n_nodes++] = n;
    return n;
}

/* Drops the last node again (after its shape rule failed). */
static void graph_pop(nncl_graph *g) {
    NNCL_FREE(g->nodes[--g->n_nodes]);
}

nncl_node *nncl__layer_add(nncl_graph *g, int keep, nncl__op op, const char *name, int n_in, nncl_node *const *in,
                           const int *iattr, int n_iattr, const float *fattr, int n_fattr) {
    nncl_node *n = NULL;
    int i = 0;
    while (i < n_in && in[i]) i++;
    /* a NULL input is a parameter nncl_param refused, with its message */
    if (i == n_in) n = nncl__node_add(g, op, name, n_in, in, iattr, n_iattr, fattr, n_fattr);
    while (!n && g->n_nodes > keep && g->nodes[g->n_nodes - 1]->n_in == 0) graph_pop(g);
    return n;
}

int nncl__graph_owns(const nncl_graph *g, const nncl_node *n) {
    return n && n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

nncl_node *nncl__node_add(nncl_graph *g, nncl__op op, const char *name, int n_in, nncl_node *const *in,
                          const int *iattr, int n_iattr, const float *fattr, int n_fattr) {
    const nncl__opdef *def = nncl__opdef_get(op);
    nncl_node *n;
    int i, lo, hi;
    if (!g) return nncl__graph_fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "graph is NULL");
    if (!def || !def->shape) return nncl__graph_fail(g, NNCL_ERR_UNSUPPORTED, "op %d is not built into this library", (int)op);
    if (!nncl__op_inputs(op, n_in, &lo, &hi))
        return lo == hi ? nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s takes %d input%s, not %d", def->name, lo,
                                           lo == 1 ? "" : "s", n_in)
                        : nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s takes %d to %d inputs, not %d", def->name, lo,
                                           hi, n_in);
    for (i = 0; i < n_in; i++) {
        if (!in[i]) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: input %d is NULL (an earlier builder failed?)",
                                            def->name, i);
        if (!nncl__graph_owns(g, in[i]))
            return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: input %d is a node of another graph", def->name, i);
    }
    if (name && strlen(name) >= NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: name \"%.20s...\" is longer than %d characters", def->name,
                                name, NNCL_NAME_MAX - 1);
    if (!(n = graph_push(g, op, name))) return NULL;
    n->n_in = n_in;
    for (i = 0; i < n_in; i++) n->in[i] = in[i];
    for (i = 0; i < n_iattr && i < 8; i++) n->iattr[i] = iattr[i];
    for (i = 0; i < n_fattr && i < 4; i++) n->fattr[i] = fattr[i];
    if (def->shape(g, n) != NNCL_OK) {
        graph_pop(g);
        return NULL;
    }
    if (!graph_count(n)) {
        graph_pop(g);
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "%s: output shape has a zero dimension or too many elements", def->name);
    }
    for (i = 0; i < n_in; i++) {
        in[i]->n_consumers++;
        if (in[i]->needs_grad) n->needs_grad = 1;
    }
    return n;
}

static int graph_valid_shape(int ndim, const int *shape, int lo) {
    int i;
    if (ndim < lo || ndim > NNCL_MAX_DIMS - (lo == 0 ? 1 : 0) || (ndim && !shape)) return 0;
    for (i = 0; i < ndim; i++)
        if (shape[i] <= 0) return 0;
    return 1;
}

/* A new leaf of op (an input or a parameter) named name, of the given
 * dimensions after a batch dimension of 1 (batched) or alone, once the
 * checks both builders share have passed; fn names the builder. */
static nncl_node *graph_leaf(nncl_graph *g, nncl__op op, const char *fn, const char *name, int ndim, const int *shape,
                             int batched) {
    nncl_node *n;
    int i;
    if (!g) return nncl__graph_fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    if (!name || !*name || strlen(name) >= NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: a name of 1 to %d characters is needed", fn,
                                NNCL_NAME_MAX - 1);
    if (!graph_valid_shape(ndim, shape, !batched))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": %s must have %d to %d positive dimensions",
                                fn, name, batched ? "per-sample shape" : "shape", !batched, NNCL_MAX_DIMS - batched);
    if (nncl_graph_find(g, name))
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: name \"%s\" is taken", fn, name);
    if (!(n = graph_push(g, op, name))) return NULL;
    n->batched = batched;
    n->ndim = ndim + batched;
    n->shape[0] = 1;
    for (i = 0; i < ndim; i++) n->shape[i + batched] = shape[i];
    if (!graph_count(n)) {
        graph_pop(g);
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": too many elements%s", fn, name,
                                batched ? " per sample" : "");
    }
    return n;
}

nncl_node *nncl_input(nncl_graph *g, const char *name, int ndim, const int *sample_shape) {
    return graph_leaf(g, NNCL_OP_INPUT, "nncl_input", name, ndim, sample_shape, 1);
}

nncl_node *nncl_param(nncl_graph *g, const char *name, int ndim, const int *shape, nncl_init_kind init, float scale) {
    nncl_node *n = graph_leaf(g, NNCL_OP_PARAM, "nncl_param", name, ndim, shape, 0);
    if (!n) return NULL;
    if ((int)init < NNCL_INIT_ZEROS || (int)init > NNCL_INIT_FAN_IN_UNIFORM) {
        graph_pop(g);
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_param \"%s\": unknown init %d", name, (int)init);
    }
    n->init = (int)init;
    n->init_scale = scale;
    n->trainable = 1;
    n->needs_grad = 1;
    return n;
}

nncl_status nncl_param_freeze(nncl_graph *g, nncl_node *param, int frozen) {
    int i;
    if (!g || !nncl__graph_owns(g, param) || param->op != NNCL_OP_PARAM)
        return nncl__fail(g ? g->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_param_freeze: not a parameter of this graph");
    if (g->frozen) return nncl__fail(g->ctx, NNCL_ERR_STATE, "nncl_param_freeze: the graph already has a plan");
    param->trainable = !frozen;
    param->needs_grad = !frozen;
    /* needs_grad flows forward again from the parameters. */
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        int k;
        if (n->op == NNCL_OP_PARAM || n->op == NNCL_OP_INPUT) continue;
        n->needs_grad = 0;
        for (k = 0; k < n->n_in; k++)
            if (n->in[k]->needs_grad) n->needs_grad = 1;
    }
    return NNCL_OK;
}

nncl_status nncl_param_decay(nncl_graph *g, nncl_node *param, int decay) {
    if (!g || !nncl__graph_owns(g, param) || param->op != NNCL_OP_PARAM)
        return nncl__fail(g ? g->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_param_decay: not a parameter of this graph");
    if (decay != 0 && decay != 1)
        return nncl__fail(g->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_param_decay \"%s\": decay %d must be 0 or 1",
                          param->name, decay);
    if (g->frozen) return nncl__fail(g->ctx, NNCL_ERR_STATE, "nncl_param_decay: the graph already has a plan");
    param->no_decay = !decay;
    return NNCL_OK;
}

nncl_node *nncl_graph_find(const nncl_graph *g, const char *name) {
    int i;
    if (!g || !name) return NULL;
    for (i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

int nncl_node_shape(const nncl_node *n, int *shape) {
    int i, k = 0;
    if (!n) return 0;
    for (i = n->batched ? 1 : 0; i < n->ndim; i++) {
        if (shape) shape[k] = n->shape[i];
        k++;
    }
    return k;
}
