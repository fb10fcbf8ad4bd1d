/* ref.c - the host reference executor (see ref.h). Memory comes from the
 * allocator; values are plain double arrays indexed by node id. */
#include "train/ref.h"
#include "train/plan.h"

void nncl__ref_free(nncl__ref *r) {
    int i;
    if (!r) return;
    for (i = 0; r->val && i < r->graph->n_nodes; i++) {
        NNCL_FREE(r->val[i]);
        NNCL_FREE(r->grad[i]);
        NNCL_FREE(r->aux[i]);
    }
    NNCL_FREE(r->val);
    NNCL_FREE(r->grad);
    NNCL_FREE(r->aux);
    NNCL_FREE(r->state);
    NNCL_FREE(r);
}

nncl_status nncl__ref_create(nncl_graph *g, int batch, nncl__ref **out) {
    nncl__ref *r;
    float *p = NULL, *s = NULL;
    int i;
    size_t k;
    NNCL_TRY(nncl__graph_layout(g));
    r = (nncl__ref *)nncl__calloc(1, sizeof *r);
    if (!r) return nncl__fail(g->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    r->graph = g;
    r->r.batch = batch;
    r->val = (double **)nncl__calloc((size_t)g->n_nodes, sizeof(double *));
    r->grad = (double **)nncl__calloc((size_t)g->n_nodes, sizeof(double *));
    r->aux = (double **)nncl__calloc((size_t)g->n_nodes, sizeof(double *));
    r->state = (double *)nncl__calloc(g->n_state + 1, sizeof(double));
    p = (float *)nncl__calloc(g->n_params + 1, sizeof(float));
    s = (float *)nncl__calloc(g->n_state + 1, sizeof(float));
    if (!r->val || !r->grad || !r->aux || !r->state || !p || !s) goto oom;
    r->r.state = r->state;
    nncl__graph_init_values(g, p, s);
    for (k = 0; k < g->n_state; k++) r->state[k] = s[k];
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        size_t count = nncl__numel(n, batch);
        size_t a = d && d->aux_size ? d->aux_size(n, batch) : 0;
        r->val[i] = (double *)nncl__calloc(count, sizeof(double));
        r->grad[i] = (double *)nncl__calloc(count, sizeof(double));
        r->aux[i] = (double *)nncl__calloc(a + 1, sizeof(double));
        if (!r->val[i] || !r->grad[i] || !r->aux[i]) goto oom;
        if (n->op == NNCL_OP_PARAM)
            for (k = 0; k < count; k++) r->val[i][k] = p[n->param_off + k];
    }
    NNCL_FREE(p);
    NNCL_FREE(s);
    *out = r;
    return NNCL_OK;
oom:
    NNCL_FREE(p);
    NNCL_FREE(s);
    nncl__ref_free(r);
    return nncl__fail(g->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory for the reference executor");
}

void nncl__ref_forward(nncl__ref *r, int training) {
    const nncl_graph *g = r->graph;
    int i, k;
    r->r.training = training;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        const double *in[NNCL_MAX_INPUTS];
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM) continue;
        for (k = 0; k < n->n_in; k++) in[k] = r->val[n->in[k]->id];
        if (d->alias) memcpy(r->val[i], in[0], nncl__numel(n, r->r.batch) * sizeof(double));
        else d->ref_forward(n, &r->r, in, r->val[i], r->aux[i]);
    }
}

void nncl__ref_backward(nncl__ref *r, const nncl_node *loss) {
    const nncl_graph *g = r->graph;
    int i, k;
    for (i = 0; i < g->n_nodes; i++)
        memset(r->grad[i], 0, nncl__numel(g->nodes[i], r->r.batch) * sizeof(double));
    r->grad[loss->id][0] = 1;
    for (i = loss->id; i >= 0; i--) {
        const nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        const double *in[NNCL_MAX_INPUTS];
        double *gin[NNCL_MAX_INPUTS];
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM || !n->needs_grad) continue;
        for (k = 0; k < n->n_in; k++) {
            in[k] = r->val[n->in[k]->id];
            gin[k] = n->in[k]->needs_grad ? r->grad[n->in[k]->id] : NULL;
        }
        if (d->alias) {
            size_t j, c = nncl__numel(n, r->r.batch);
            if (gin[0])
                for (j = 0; j < c; j++) gin[0][j] += r->grad[i][j];
        } else {
            d->ref_backward(n, &r->r, in, r->val[i], r->grad[i], gin, r->aux[i]);
        }
    }
}
