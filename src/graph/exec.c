/* exec.c - what an op's launcher reads from the per-device execution state
 * (graph.h's nncl__exec, filled in by a plan): its nodes' views, whether an
 * input needs a gradient and whether to add to it, and its resolved kernels. */
#include "graph/graph.h"

/* The node whose memory n's value is: n itself, or the node an alias
 * (reshape) views, followed down to a node with memory of its own. */
static const nncl_node *exec_root(const nncl_node *n) {
    while (nncl__opdef_get(n->op)->alias) n = n->in[0];
    return n;
}

nncl__view nncl__val(nncl__exec *ex, const nncl_node *n) { return ex->value[n->id]; }
nncl__view nncl__grd(nncl__exec *ex, const nncl_node *n) { return ex->grad[n->id]; }
nncl__view nncl__auxv(nncl__exec *ex, const nncl_node *n) { return ex->aux[n->id]; }

int nncl__need_grad(nncl__exec *ex, const nncl_node *n, int i) {
    return n->in[i]->needs_grad && ex->grad[n->in[i]->id].mem != NULL;
}

int nncl__grad_accumulate(nncl__exec *ex, const nncl_node *n, int i) {
    int r = exec_root(n->in[i])->id;
    int acc = ex->grad_acc[r];
    ex->grad_acc[r] = 1;
    return acc;
}

int nncl__op_kernel_count(const nncl__opdef *d) {
    return d->n_kernels;
}

const nncl__kslot *nncl__kslot_of(const nncl__exec *ex, const nncl_node *n, int slot) {
    size_t at;
    if (!ex->kbase || slot < 0) return NULL;
    at = ex->kbase[n->id] + (size_t)slot;
    return at < ex->kbase[n->id + 1] ? &ex->kernels[at] : NULL;
}

nncl_status nncl__kbegin(nncl__exec *ex, const nncl_node *n, int slot, nncl__args *a) {
    const nncl__kslot *k = nncl__kslot_of(ex, n, slot);
    if (!k || !k->kernel)
        return nncl__fail(ex->ctx, NNCL_ERR_STATE, "%s \"%s\": kernel slot %d is not among the op's kernels",
                          nncl__opdef_get(n->op)->name, n->name, slot);
    nncl__args_begin_slot(a, ex->ctx, k);
    return NNCL_OK;
}

nncl__kl nncl__kl_of(nncl__exec *ex, const nncl_node *n, int slot) {
    nncl__kl k;
    k.ctx = ex->ctx;
    k.dev = ex->dev;
    k.slot.kernel = NULL;
    k.slot.wg = 0;
    if (nncl__kslot_of(ex, n, slot)) k.slot = *nncl__kslot_of(ex, n, slot);
    if (!k.slot.kernel)
        nncl__fail(ex->ctx, NNCL_ERR_STATE, "%s \"%s\": kernel slot %d is not among the op's kernels",
                   nncl__opdef_get(n->op)->name, n->name, slot);
    return k;
}
