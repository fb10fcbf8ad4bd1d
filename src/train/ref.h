/* ref.h - the host reference executor: runs a whole graph in double
 * precision through every op's reference rules, forward and backward. Tests
 * compare devices against it and check it against finite differences. */
#ifndef NNCL_REF_H
#define NNCL_REF_H
#include "graph/graph.h"

typedef struct nncl__ref {
    const nncl_graph *graph;
    nncl__refctx r;
    double **val;   /* per node: value (inputs and parameters set by the caller) */
    double **grad;  /* per node: gradient after backward */
    double **aux;
    double *state;  /* running statistics */
} nncl__ref;

/* Arrays for batch samples; parameters and state get their initial values. */
nncl_status nncl__ref_create(nncl_graph *g, int batch, nncl__ref **out);
void nncl__ref_free(nncl__ref *r);
void nncl__ref_forward(nncl__ref *r, int training);
/* Gradients of the scalar node loss with respect to every node. */
void nncl__ref_backward(nncl__ref *r, const nncl_node *loss);
#endif
