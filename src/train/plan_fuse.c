/* plan_fuse.c - a plan's rewrite of batch norm followed by its activation
 * (and a residual sum) into the one fused node nncl_batchnorm_act and
 * nncl_batchnorm_add_act build (src/ops/op_batchnorm.c), so that a graph
 * written as separate nodes takes the fused passes too.
 *
 * Chains: N = batchnorm (no activation, no residual), optionally
 * A = add(N, r) or add(r, N) of N's shape, then R = relu, relu6 or
 * hardswish of A (or of N); or N then A alone. Each intermediate (N, and A
 * when R follows) must have that one consumer, not be the loss and not be
 * a marked checkpoint boundary. The fused node F is a copy of N with
 * iattr[0] the activation and in[3] = r, run at the id of the chain's last
 * node, whose consumers read it; the intermediates run nowhere (into[] says
 * where they went) and get no memory of their own: their views are F's, so
 * that a prediction of one of them (nncl__plan_forward_to) runs the chain's
 * own nodes up to it into F's value. The graph stays as the user built it. */
#include "train/plan.h"

nncl_node *nncl__plan_node(const nncl__plan *p, int i) { return p->node ? p->node[i] : p->graph->nodes[i]; }

int nncl__plan_away(const nncl__plan *p, int i) { return p->into && p->into[i] >= 0; }

void nncl__plan_fuse_free(nncl__plan *p) {
    NNCL_FREE(p->node);
    NNCL_FREE(p->fused);
    NNCL_FREE(p->into);
    p->n_fused = 0;
}

/* The one node of g that reads n (n has one consumer), or NULL. */
static nncl_node *fuse_consumer(const nncl_graph *g, const nncl_node *n) {
    int j, k;
    if (n->n_consumers != 1) return NULL;
    for (j = n->id + 1; j < g->n_nodes; j++)
        for (k = 0; k < g->nodes[j]->n_in; k++)
            if (g->nodes[j]->in[k] == n) return g->nodes[j];
    return NULL;
}

/* Whether n may vanish into a fused node: one consumer, not the loss,
 * not a boundary. */
static int fuse_inner(const nncl__plan *p, const nncl_node *n) {
    return n->n_consumers == 1 && n != p->loss && !n->checkpoint;
}

/* The nncl_bn_act of op, or -1 for an op batch norm cannot end in. */
static int fuse_act(nncl__op op) {
    return op == NNCL_OP_RELU ? NNCL_BN_ACT_RELU : op == NNCL_OP_RELU6 ? NNCL_BN_ACT_RELU6
                                                 : op == NNCL_OP_HARDSWISH ? NNCL_BN_ACT_HARDSWISH : -1;
}

/* Finds the chain from batch norm n: *a the add (or NULL), *r the
 * activation's node (or NULL), *res the residual; 0 when there is none. */
static int fuse_chain(const nncl__plan *p, nncl_node *n, nncl_node **a, nncl_node **r, nncl_node **res) {
    const nncl_graph *g = p->graph;
    nncl_node *c;
    *a = *r = *res = NULL;
    if (n->op != NNCL_OP_BATCHNORM || n->n_in != 3 || n->iattr[0] != NNCL_BN_ACT_NONE || !fuse_inner(p, n) ||
        !(c = fuse_consumer(g, n)) || (p->loss && c->id > p->loss->id))
        return 0;
    if (c->op == NNCL_OP_ADD) {
        nncl_node *o = c->in[c->in[0] == n ? 1 : 0];
        if (!nncl__same_shape(o, n) || !nncl__same_shape(c, n)) return 0;
        *a = c;
        *res = o;
        c = fuse_inner(p, c) ? fuse_consumer(g, c) : NULL;
        if (!c || (p->loss && c->id > p->loss->id) || fuse_act(c->op) < 0) return 1;
    }
    if (fuse_act(c->op) < 0) return 0;
    *r = c;
    return 1;
}

nncl_status nncl__plan_fuse(nncl__plan *p) {
    nncl_graph *g = p->graph;
    int i, n = g->n_nodes, k = 0;
    nncl_node *a, *r, *res;
    nncl__plan_fuse_free(p);
    p->away_read = -1;
    if (!nncl__batchnorm_fuse_on()) return NNCL_OK;
    for (i = 0; i < n; i++) k += fuse_chain(p, g->nodes[i], &a, &r, &res);
    if (!k) return NNCL_OK;
    p->node = (nncl_node **)nncl__calloc((size_t)n, sizeof *p->node);
    p->fused = (nncl_node *)nncl__calloc((size_t)k, sizeof *p->fused);
    p->into = (int *)nncl__calloc((size_t)n, sizeof *p->into);
    if (!p->node || !p->fused || !p->into) {
        nncl__plan_fuse_free(p);
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory planning the graph");
    }
    for (i = 0; i < n; i++) {
        p->node[i] = g->nodes[i];
        p->into[i] = -1;
    }
    for (i = 0; i < n; i++) {
        nncl_node *bn = g->nodes[i], *last, *f;
        if (!fuse_chain(p, bn, &a, &r, &res)) continue;
        last = r ? r : a;
        f = &p->fused[p->n_fused++];
        *f = *bn;
        f->id = last->id;
        f->iattr[0] = r ? fuse_act(r->op) : NNCL_BN_ACT_NONE;
        if (res) f->in[f->n_in++] = res;
        f->needs_grad = last->needs_grad;
        f->n_consumers = last->n_consumers;
        f->checkpoint = last->checkpoint;
        f->name_next = -1;
        p->node[last->id] = f;
        p->into[bn->id] = last->id;
        if (a && a != last) p->into[a->id] = last->id;
    }
    return NNCL_OK;
}
