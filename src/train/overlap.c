/* overlap.c - reading gradients back while backward still runs (the idea
 * of bucketed all-reduce): a parameter's gradient is final once the last
 * backward op that writes it is queued; from then on a second queue of the
 * device copies it to the host, waiting only on that op, while earlier
 * layers keep computing on the first queue. Mesa's OpenCL drivers (rusticl
 * 22.3 seen here) sometimes let such a read run before the kernels it waits
 * on have finished, so devices of theirs read back after backward instead. */
#include "train/trainer.h"

/* Gradient floats [off, off+count) are final after backward position pos. */
struct nncl__bucket {
    int pos;
    size_t off, count;
};

struct nncl__overlap_ctx {
    nncl_trainer *t;
    int device;
};

/* Buckets from the plan's backward order: every trainable parameter goes to
 * the position of its last writer; neighbours in the buffer that finish at
 * the same position are merged into one read. */
static nncl_status overlap_buckets(nncl_trainer *t) {
    nncl__plan *p = t->plan[0];
    nncl_graph *g = t->graph;
    int i, k, j, n = 0;
    t->buckets = (struct nncl__bucket *)nncl__calloc((size_t)g->n_nodes + 1, sizeof *t->buckets);
    if (!t->buckets) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *w = g->nodes[i];
        int pos = -1;
        if (w->op != NNCL_OP_PARAM || !w->trainable) continue;
        for (j = 0; j < p->n_bwd; j++) {
            nncl_node *c = nncl__plan_node(p, p->bwd[j]);
            for (k = 0; k < c->n_in; k++)
                if (c->in[k] == w) pos = j;
        }
        if (pos < 0) continue; /* no gradient reaches it: nothing to read */
        if (n && t->buckets[n - 1].pos == pos && t->buckets[n - 1].off + t->buckets[n - 1].count == w->param_off) {
            t->buckets[n - 1].count += w->sample_numel;
            continue;
        }
        t->buckets[n].pos = pos;
        t->buckets[n].off = w->param_off;
        t->buckets[n].count = w->sample_numel;
        n++;
    }
    t->n_buckets = n;
    return NNCL_OK;
}

static nncl_status overlap_after(void *user, int pos) {
    struct nncl__overlap_ctx *o = (struct nncl__overlap_ctx *)user;
    nncl_trainer *t = o->t;
    int b;
    for (b = 0; b < t->n_buckets; b++) {
        const struct nncl__bucket *k = &t->buckets[b];
        if (k->pos == pos)
            NNCL_TRY(nncl__plan_xfer_read(t->plan[o->device], NNCL__PB_GRADS, k->off, k->count,
                                          t->gbuf[o->device] + k->off));
    }
    return NNCL_OK;
}

/* Whether dev orders a second queue's commands after its events reliably. */
static int overlap_trusted(const nncl_device *dev) {
    return !strstr(dev->info.platform, "rusticl") && !strstr(dev->info.platform, "Clover");
}

nncl_status nncl__overlap_setup(nncl_trainer *t) {
    /* devices left out by overlap_trusted() get no transfer queue */
    int i;
    t->octx = (struct nncl__overlap_ctx *)nncl__calloc((size_t)t->nd, sizeof *t->octx);
    if (!t->octx) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    NNCL_TRY(overlap_buckets(t));
    for (i = 0; i < t->nd; i++) {
        if (!overlap_trusted(nncl__plan_device(t->plan[i]))) continue;
        NNCL_TRY(nncl__plan_xfer_open(t->plan[i]));
        t->octx[i].t = t;
        t->octx[i].device = i;
    }
    return NNCL_OK;
}

void nncl__overlap_enable(nncl_trainer *t, int on) {
    int i;
    for (i = 0; i < t->nd && t->octx; i++) {
        if (on && !nncl__plan_has_xfer(t->plan[i])) continue;
        t->plan[i]->after_backward = on ? overlap_after : NULL;
        t->plan[i]->after_user = on ? &t->octx[i] : NULL;
    }
}

/* The transfer queues go with the plans. */
void nncl__overlap_free(nncl_trainer *t) {
    NNCL_FREE(t->octx);
    NNCL_FREE(t->buckets);
    t->octx = NULL;
}
