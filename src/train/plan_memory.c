/* plan_memory.c - a plan's memory, known before anything is allocated: the
 * schedules (forward; backward; with gradient checkpointing the recompute
 * of each segment's forward just before the segment's backward), the
 * lifetime of every value, gradient and aux block on that timeline, a
 * first-fit packing of the blocks into the arena (in half storage the fp32
 * blocks into arena32), and the bytes a plan needs; plan_auto.c chooses
 * the checkpoint boundaries.
 *
 * Checkpointing: boundaries split the forward into segments. A value of a
 * segment before the last is dropped when no op of another segment reads
 * it and it is no boundary: it lives from its forward to its last forward
 * reader, and again, recomputed, from its recompute (just before the
 * first backward op that needs it) to its last use in backward.
 * Everything else (boundaries, values read across segments, the last
 * segment, inputs) is kept as without checkpointing. */
#include "train/plan.h"
#include <limits.h>

#define PLAN_ALIGN 16 /* floats: 64-byte block alignment */

const nncl_node *nncl__plan_root(const nncl_node *n) {
    while (nncl__opdef_get(n->op)->alias) n = n->in[0];
    return n;
}

static size_t plan_round(size_t f) { return (f + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN; }

/* Whether block a goes before block b in packing order `how`: larger
 * first; of equal sizes, 0 in the blocks' order, 1 the longer-lived
 * first, 2 the earlier first. */
static int plan_before(const nncl__plan_block *a, const nncl__plan_block *b, int how) {
    if (a->size != b->size) return a->size > b->size;
    if (how == 1) return a->last - a->first > b->last - b->first;
    if (how == 2) return a->first < b->first;
    return 0;
}

/* First-fit in order `how` (plan_before), each block at the lowest offset
 * clear of every placed block whose lifetime overlaps; the top. */
static size_t plan_pack_order(nncl__plan_block *b, int n, int *order, int how) {
    int i, j, k;
    size_t top = 0;
    for (i = 0; i < n; i++) order[i] = i;
    for (i = 1; i < n; i++) /* insertion sort: stable */
        for (j = i; j > 0 && plan_before(&b[order[j]], &b[order[j - 1]], how); j--) {
            k = order[j]; order[j] = order[j - 1]; order[j - 1] = k;
        }
    for (i = 0; i < n; i++) {
        nncl__plan_block *a = &b[order[i]];
        size_t off = 0;
        int moved = 1;
        while (moved) {
            moved = 0;
            for (j = 0; j < i; j++) {
                nncl__plan_block *p = &b[order[j]];
                if (p->last < a->first || a->last < p->first) continue;
                if (off < p->off + p->size && p->off < off + a->size) {
                    off = p->off + p->size;
                    moved = 1;
                }
            }
        }
        a->off = off;
        if (off + a->size > top) top = off + a->size;
    }
    return top;
}

/* The least top of first-fit in the orders of plan_before, its places
 * kept: (size_t)-1 out of host memory. First-fit in one order leaves gaps
 * another fills (a gradient written in place lives on in its host's
 * block). */
#define PLAN_PACK_ORDERS 3
static size_t plan_pack(nncl__plan_block *b, int n) {
    int *order = (int *)nncl__calloc((size_t)n + 1, sizeof *order), how, best = 0;
    size_t top, least = (size_t)-1;
    if (!order) return (size_t)-1;
    for (how = 0; how < PLAN_PACK_ORDERS; how++) {
        top = plan_pack_order(b, n, order, how);
        if (top < least) {
            least = top;
            best = how;
        }
    }
    if (best != PLAN_PACK_ORDERS - 1) plan_pack_order(b, n, order, best);
    NNCL_FREE(order);
    return least;
}
#undef PLAN_PACK_ORDERS

/* What n's backward reads (NNCL_BW_*) in the plan's storage. */
static int plan_bw_reads(const nncl__plan *p, const nncl_node *n) {
    const nncl__opdef *d = nncl__opdef_get(n->op);
    if (d->bw_reads_of) return d->bw_reads_of(n, p->ex.store);
    return p->ex.store && d->half_bw_reads ? d->half_bw_reads : d->bw_reads;
}

/* Which nodes run backward: those needing a gradient on a path to the loss. */
static void plan_mark_backward(const nncl__plan *p, unsigned char *on_path) {
    const nncl_graph *g = p->graph;
    const nncl_node *loss = p->loss;
    int i, k;
    memset(on_path, 0, (size_t)g->n_nodes);
    if (!loss) return;
    on_path[loss->id] = 1;
    for (i = loss->id; i >= 0; i--) {
        const nncl_node *n = nncl__plan_node(p, i);
        if (!on_path[i] || nncl__plan_away(p, i)) continue;
        for (k = 0; k < n->n_in; k++)
            if (n->in[k]->needs_grad) on_path[n->in[k]->id] = 1;
    }
    for (i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->needs_grad || nncl__plan_away(p, i)) on_path[i] = 0;
}

/* The timeline: step of each node's forward, recompute (-1: none) and
 * backward (-1: none); seg and dropped as the header says. */
typedef struct plan_time {
    unsigned char *on_path, *dropped;
    int *fstep, *bstep, *rstep, *rstep2, *seg; /* rstep2: a second recompute (-1: none) */
} plan_time;

static void plan_time_free(plan_time *t) {
    NNCL_FREE(t->on_path); NNCL_FREE(t->dropped);
    NNCL_FREE(t->fstep); NNCL_FREE(t->bstep); NNCL_FREE(t->rstep); NNCL_FREE(t->rstep2); NNCL_FREE(t->seg);
}

void nncl__plan_schedule_free(nncl__plan *p) {
    NNCL_FREE(p->fwd); NNCL_FREE(p->bwd); NNCL_FREE(p->rec); NNCL_FREE(p->rec_before); NNCL_FREE(p->rec_again);
    p->fwd = p->bwd = p->rec = p->rec_before = NULL;
    p->rec_again = NULL;
    p->n_fwd = p->n_bwd = p->n_rec = 0;
}

/* Whether node c reads the value of root r as an input (through aliases). */
static int plan_reads(const nncl_node *c, const nncl_node *r) {
    int k;
    for (k = 0; k < c->n_in; k++)
        if (nncl__plan_root(c->in[k])->id == r->id) return 1; /* by id: r may be a fused node */
    return 0;
}

/* Segments and dropped values from the boundaries marked in mark (NULL: no
 * checkpointing). */
static void plan_segments(nncl__plan *p, plan_time *t, const unsigned char *mark) {
    const nncl_graph *g = p->graph;
    int i, j, s = 0;
    for (i = 0; i < g->n_nodes; i++) t->seg[i] = -1;
    for (i = 0; i < p->n_fwd; i++) {
        t->seg[p->fwd[i]] = s;
        if (mark && (mark[p->fwd[i]] & 1)) s++;
    }
    if (!mark || !p->loss) return;
    for (i = 0; i < p->n_fwd; i++) {
        const nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        int drop = t->seg[n->id] < s && !(mark[n->id] & 1) && n != p->loss && n->n_consumers > 0 &&
                   !nncl__opdef_get(n->op)->alias && nncl__opdef_get(n->op)->forward;
        for (j = n->id + 1; drop && j <= p->loss->id; j++) {
            const nncl_node *c = nncl__plan_node(p, j);
            if (!nncl__opdef_get(c->op)->alias && !nncl__plan_away(p, j) && plan_reads(c, n) && t->seg[j] != t->seg[n->id])
                drop = 0;
        }
        t->dropped[n->id] = (unsigned char)drop;
    }
}

/* Gradients written in place (nncl__opdef.bw_inplace): where node n
 * writes input k's gradient first, in its backward, and its own gradient
 * is dead after that backward, input k's gradient takes the place of n's
 * (share; its own block sized 0), whose block lives on to the end of
 * input k's; chains follow to the first block of them. Both stay in one
 * arena (neither is fp32 unless both are). */
static void plan_inplace(const nncl__plan *p, const plan_time *t, nncl__plan_block *b, int nb, int *grad_block) {
    const nncl_graph *g = p->graph;
    int i, k;
    for (i = 0; i < g->n_nodes; i++) grad_block[i] = -1;
    for (i = 0; i < nb; i++)
        if (b[i].kind == 1) grad_block[b[i].node] = i;
    for (k = 0; k < p->n_bwd; k++) {
        const nncl_node *n = nncl__plan_node(p, p->bwd[k]), *r;
        const nncl__opdef *d = nncl__opdef_get(n->op);
        nncl__plan_block *own, *in, *host;
        if (!(d->bw_inplace & 1)) continue;
        r = nncl__plan_root(n->in[0]);
        if (r->op == NNCL_OP_INPUT || r->op == NNCL_OP_PARAM || nncl__numel(r, 1) != nncl__numel(n, 1) ||
            d->f32_out || nncl__opdef_get(r->op)->f32_out || grad_block[n->id] < 0 || grad_block[r->id] < 0)
            continue;
        own = &b[grad_block[n->id]];
        in = &b[grad_block[r->id]];
        if (in->share || own->last != t->bstep[n->id] || in->first != t->bstep[n->id]) continue;
        for (host = own; host->share;) host = &b[grad_block[host->share - 1]]; /* the first of a chain */
        if (in->last > host->last) host->last = in->last;
        in->share = n->id + 1;
        in->size = 0;
    }
}

/* The places of the gradients written in place: their hosts' (after
 * packing, grad_block re-made for the blocks' order then). */
static void plan_inplace_places(const nncl__plan *p, nncl__plan_block *b, int nb, int *grad_block) {
    int i, at;
    for (i = 0; i < p->graph->n_nodes; i++) grad_block[i] = -1;
    for (i = 0; i < nb; i++)
        if (b[i].kind == 1) grad_block[b[i].node] = i;
    for (i = 0; i < nb; i++) {
        for (at = i; b[at].share;) at = grad_block[b[at].share - 1];
        b[i].off = b[at].off;
    }
}

/* A second recompute of dropped node x (marked so: mark bit 2) for its
 * last backward reader, when its first, for earlier readers, would
 * otherwise stay until then: the place in bwd of that reader, or -1 where
 * x cannot be recomputed again (an input of it is dropped too, it has aux
 * its forward writes, a reshape reads it) or has no reader after the
 * first. t->rstep holds the first's place in bwd (INT_MAX: none). */
static int plan_again(const nncl__plan *p, const plan_time *t, int x) {
    const nncl_graph *g = p->graph;
    const nncl_node *n = nncl__plan_node(p, x);
    const nncl__opdef *d = nncl__opdef_get(n->op);
    int j, k, last = -1, before = -1;
    if (t->rstep[x] == INT_MAX || (d->aux_size && !d->keep_aux)) return -1;
    for (j = 0; j < n->n_in; j++)
        if (t->dropped[nncl__plan_root(n->in[j])->id]) return -1;
    for (j = x + 1; j < g->n_nodes; j++) {
        const nncl_node *c = nncl__plan_node(p, j);
        if (nncl__opdef_get(c->op)->alias && c->in[0]->id == n->id) return -1;
        if (t->dropped[j] && plan_reads(c, n) && t->rstep[j] != INT_MAX && t->rstep[j] > before) before = t->rstep[j];
    }
    for (k = 0; k < p->n_bwd; k++) { /* backward readers, in bwd order */
        const nncl_node *c = nncl__plan_node(p, p->bwd[k]);
        int reads = plan_bw_reads(p, c);
        if (((reads & NNCL_BW_INPUTS) && plan_reads(c, n)) || ((reads & NNCL_BW_OUTPUT) && c == n)) {
            if (last >= 0 && last > before) before = last;
            last = k;
        }
    }
    return last > t->rstep[x] && before >= 0 && before < last ? last : -1;
}

/* Where backward recomputes the dropped values (t->rstep, t->rstep2,
 * p->rec, rec_again, rec_before) and runs each op (t->bstep): the step
 * after the last. */
static int plan_recomputes(nncl__plan *p, plan_time *t, const unsigned char *mark) {
    const nncl_graph *g = p->graph;
    int N = g->n_nodes, i, j, k, last_step;
    /* Backward runs in descending id. A dropped value is recomputed just
     * before the first backward op that reads it (its value or the aux its
     * forward writes again), or before the recompute of a dropped node
     * that reads it, whichever comes first (need: that op's place in bwd),
     * so that it lives no longer than it must; those recomputed before one
     * op run in ascending id, inputs before their readers. A dropped value
     * nothing reads again is not recomputed. */
    for (i = N - 1; i >= 0; i--) {
        nncl_node *n = nncl__plan_node(p, i);
        if (t->on_path[i] && n->op != NNCL_OP_PARAM && n->op != NNCL_OP_INPUT) p->bwd[p->n_bwd++] = i;
    }
    for (i = 0; i < N; i++) t->rstep[i] = INT_MAX; /* need, for now */
    for (k = 0; mark && k < p->n_bwd; k++) {
        const nncl_node *n = nncl__plan_node(p, p->bwd[k]);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        int reads = plan_bw_reads(p, n), r = nncl__plan_root(n)->id;
        if ((reads & NNCL_BW_OUTPUT || (d->aux_size && !d->keep_aux)) && t->rstep[r] > k) t->rstep[r] = k;
        for (j = 0; reads & NNCL_BW_INPUTS && j < n->n_in; j++) {
            r = nncl__plan_root(n->in[j])->id;
            if (t->rstep[r] > k) t->rstep[r] = k;
        }
    }
    for (i = N - 1; mark && i >= 0; i--) {
        const nncl_node *n = nncl__plan_node(p, i);
        if (!t->dropped[i] || t->rstep[i] == INT_MAX) continue;
        for (j = 0; j < n->n_in; j++) {
            int r = nncl__plan_root(n->in[j])->id;
            if (t->rstep[r] > t->rstep[i]) t->rstep[r] = t->rstep[i];
        }
    }
    for (i = 0; i < N; i++) t->rstep2[i] = mark && (mark[i] & 2) && t->dropped[i] ? plan_again(p, t, i) : -1;
    last_step = p->n_fwd;
    for (k = 0; k < p->n_bwd; k++) {
        p->rec_before[k] = p->n_rec;
        for (j = 0; mark && j < p->n_fwd; j++) {
            i = p->fwd[j];
            if (!t->dropped[i] || (t->rstep[i] != k && t->rstep2[i] != k)) continue;
            p->rec_again[p->n_rec] = (unsigned char)(t->rstep2[i] == k);
            *(t->rstep2[i] == k ? &t->rstep2[i] : &t->rstep[i]) = -2 - last_step++; /* negative: placed */
            p->rec[p->n_rec++] = i;
        }
        t->bstep[p->bwd[k]] = last_step++;
    }
    p->rec_before[p->n_bwd] = p->n_rec;
    for (i = 0; i < N; i++) {
        t->rstep[i] = t->rstep[i] <= -2 ? -2 - t->rstep[i] : -1;
        t->rstep2[i] = t->rstep2[i] <= -2 ? -2 - t->rstep2[i] : -1;
    }
    return last_step;
}

static nncl__plan_block *plan_add(nncl__plan_block *b, int *nb, int node, int kind, int rec, int first, int last,
                                  size_t floats) {
    nncl__plan_block *a = &b[(*nb)++];
    memset(a, 0, sizeof *a);
    a->node = node; a->kind = kind; a->rec = rec; a->first = first; a->last = last < first ? first : last;
    a->size = plan_round(floats);
    return a;
}

/* The schedules and every block's lifetime; blocks to *out (free with
 * NNCL_FREE). */
static nncl_status plan_schedule(nncl__plan *p, const unsigned char *mark, nncl__plan_block **out, int *n_out) {
    nncl_graph *g = p->graph;
    int N = g->n_nodes, i, j, nb = 0, last_step;
    plan_time t;
    nncl__plan_block *b;
    memset(&t, 0, sizeof t);
    nncl__plan_schedule_free(p);
    t.on_path = (unsigned char *)nncl__calloc((size_t)N, 1);
    t.dropped = (unsigned char *)nncl__calloc((size_t)N, 1);
    t.fstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.bstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.rstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.rstep2 = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.seg = (int *)nncl__calloc((size_t)N, sizeof(int));
    b = (nncl__plan_block *)nncl__calloc((size_t)N * 6, sizeof *b);
    p->fwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->bwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->rec = (int *)nncl__calloc((size_t)N * 2, sizeof(int));
    p->rec_again = (unsigned char *)nncl__calloc((size_t)N * 2, 1);
    p->rec_before = (int *)nncl__calloc((size_t)N + 1, sizeof(int));
    if (!t.on_path || !t.dropped || !t.fstep || !t.bstep || !t.rstep || !t.rstep2 || !t.seg || !b || !p->fwd ||
        !p->bwd || !p->rec || !p->rec_again || !p->rec_before) {
        plan_time_free(&t);
        NNCL_FREE(b);
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory planning the graph");
    }
    plan_mark_backward(p, t.on_path);
    /* Forward: every op node up to the loss (or all, without one); inputs
     * are written at step 0 by the feed. */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        t.fstep[i] = 0;
        t.bstep[i] = t.rstep[i] = -1;
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM || nncl__plan_away(p, i)) continue;
        if (p->loss && i > p->loss->id) continue;
        t.fstep[i] = p->n_fwd;
        p->fwd[p->n_fwd++] = i;
    }
    plan_segments(p, &t, mark);
    last_step = plan_recomputes(p, &t, mark);
    /* Values: from their forward step to their last reader; a dropped
     * value's forward block to its last forward reader, its recomputed
     * block from the recompute to its last reader after it (with a second
     * recompute, the first's to its last reader before the second). */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        int own = t.bstep[i] >= 0 && (plan_bw_reads(p, n) & NNCL_BW_OUTPUT);
        int lastf = t.fstep[i], lastr = t.rstep[i], last1 = t.rstep[i], use[3], u;
        if (n->op == NNCL_OP_PARAM || d->alias || nncl__plan_away(p, i)) continue; /* an away node: F's views */
        for (j = i + 1; j <= N; j++) {
            const nncl_node *c = j < N ? nncl__plan_node(p, j) : n; /* j == N: n's own backward */
            int reads = plan_bw_reads(p, c), in = j < N && plan_reads(c, n);
            if (j < N && nncl__plan_away(p, j)) continue;
            int rd = reads & NNCL_BW_OUTPUT && t.bstep[c->id] >= 0 && nncl__plan_root(c)->id == n->id && (j < N || own);
            if (!in && !rd) continue;
            if (in && t.fstep[j] > lastf) lastf = t.fstep[j];
            use[0] = in ? t.rstep[j] : -1;
            use[1] = in ? t.rstep2[j] : -1;
            use[2] = t.bstep[c->id] >= 0 && ((in && (reads & NNCL_BW_INPUTS)) || rd) ? t.bstep[c->id] : -1;
            for (u = 0; u < 3; u++) {
                if (use[u] > lastr) lastr = use[u];
                if (use[u] > last1 && use[u] < t.rstep2[i]) last1 = use[u];
            }
        }
        if (n == p->loss || (!p->loss && n->n_consumers == 0)) lastr = last_step;
        if (!t.dropped[i]) {
            plan_add(b, &nb, i, 0, 0, t.fstep[i], lastf > lastr ? lastf : lastr, nncl__numel(n, p->max_batch));
        } else {
            plan_add(b, &nb, i, 0, 0, t.fstep[i], lastf, nncl__numel(n, p->max_batch));
            if (t.rstep[i] >= 0)
                plan_add(b, &nb, i, 0, 1, t.rstep[i], t.rstep2[i] >= 0 ? last1 : lastr, nncl__numel(n, p->max_batch));
            if (t.rstep2[i] >= 0) plan_add(b, &nb, i, 0, 2, t.rstep2[i], lastr, nncl__numel(n, p->max_batch));
        }
    }
    /* Gradients of activations: from the first writer to the node's own
     * backward (an alias's reader counts for its root). */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        int first = -1, lastb = -1;
        if (!t.on_path[i] || n->op == NNCL_OP_PARAM || nncl__opdef_get(n->op)->alias) continue;
        for (j = i + 1; j < N; j++) { /* consumers of i or of aliases of i */
            nncl_node *c = nncl__plan_node(p, j);
            if (plan_reads(c, n) && t.bstep[j] >= 0 && (first < 0 || t.bstep[j] < first)) first = t.bstep[j];
            if (nncl__plan_root(c)->id == n->id && t.bstep[j] > lastb) lastb = t.bstep[j];
        }
        if (t.bstep[i] > lastb) lastb = t.bstep[i];
        if (n == p->loss) first = p->n_fwd; /* the loss's gradient is written before backward */
        if (n->op == NNCL_OP_INPUT) lastb = last_step; /* a leaf's gradient is kept for the caller */
        if (first < 0) continue;
        plan_add(b, &nb, i, 1, 0, first, lastb, nncl__numel(n, p->max_batch));
    }
    plan_inplace(p, &t, b, nb, t.seg); /* seg is done with: the scratch of an index */
    /* Aux: from the node's forward to its backward; a dropped node's from
     * its recompute, unless the op keeps what its forward saved (keep_aux). */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        size_t a = d->aux_size && !(p->ex.store && d->half_bw_reads) ? d->aux_size(n, p->max_batch) : 0;
        int end;
        if (!a || nncl__plan_away(p, i)) continue;
        end = t.bstep[i] >= 0 ? t.bstep[i] : t.fstep[i];
        if (t.dropped[i] && !d->keep_aux) {
            plan_add(b, &nb, i, 2, 0, t.fstep[i], t.fstep[i], a);
            if (t.rstep[i] >= 0) plan_add(b, &nb, i, 2, 1, t.rstep[i], end, a);
        } else {
            plan_add(b, &nb, i, 2, 0, t.fstep[i], end, a);
        }
    }
    plan_time_free(&t);
    *out = b;
    *n_out = nb;
    return NNCL_OK;
}

/* Half storage: marks the blocks that stay fp32 (everything of a loss,
 * indices kept for backward, label inputs), moves them to the end (*n32 of them) and
 * packs them into arena32; sizes the upload stage for the half inputs. */
static nncl_status plan_split_f32(nncl__plan *p, nncl__plan_block *b, int nb, int *n32) {
    const nncl_graph *g = p->graph;
    int i, j = 0;
    nncl__plan_block t;
    for (i = 0; i < nb; i++) {
        const nncl_node *n = nncl__plan_node(p, b[i].node);
        b[i].f32 = nncl__opdef_get(n->op)->f32_out || (b[i].kind == 2 && nncl__opdef_get(n->op)->f32_aux) ||
                   (n->op == NNCL_OP_INPUT && nncl__plan_input_f32(g, n, NULL));
        if (n->op == NNCL_OP_INPUT && b[i].kind == 0 && !b[i].f32 && nncl__numel(n, p->max_batch) > p->stage_floats)
            p->stage_floats = nncl__numel(n, p->max_batch);
    }
    for (i = 0; i < nb; i++) /* stable: the half blocks keep their order, and so their packing */
        if (!b[i].f32) {
            t = b[i];
            memmove(b + j + 1, b + j, (size_t)(i - j) * sizeof *b);
            b[j++] = t;
        }
    *n32 = nb - j;
    p->arena32_floats = plan_pack(b + j, nb - j);
    if (p->arena32_floats == (size_t)-1) return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (!p->arena32_floats) p->arena32_floats = 1;
    if (!p->stage_floats) p->stage_floats = 1;
    return NNCL_OK;
}

/* p->act_bytes from the blocks (their f32 marks set): a sweep over the
 * steps, each value or aux block counted from its first step to its last. */
static nncl_status plan_activations(nncl__plan *p, const nncl__plan_block *b, int nb) {
    int64_t *delta, live = 0;
    int i, steps = 1;
    for (i = 0; i < nb; i++)
        if (b[i].last + 1 > steps) steps = b[i].last + 1;
    delta = (int64_t *)nncl__calloc((size_t)steps + 1, sizeof *delta);
    if (!delta) return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < nb; i++) {
        int64_t bytes = (int64_t)b[i].size * (b[i].f32 || !p->ex.store ? 4 : 2);
        if (b[i].kind == 1) continue;
        delta[b[i].first] += bytes;
        delta[b[i].last + 1] -= bytes;
    }
    p->act_bytes = 0;
    for (i = 0; i < steps; i++) {
        live += delta[i];
        if ((uint64_t)live > p->act_bytes) p->act_bytes = (uint64_t)live;
    }
    NNCL_FREE(delta);
    return NNCL_OK;
}

nncl_status nncl__plan_pack_all(nncl__plan *p, const unsigned char *mark, nncl__plan_block **b, int *nb) {
    int n32 = 0;
    p->arena32_floats = p->stage_floats = 0;
    NNCL_TRY(plan_schedule(p, mark, b, nb));
    if ((p->ex.store && plan_split_f32(p, *b, *nb, &n32) != NNCL_OK) || plan_activations(p, *b, *nb) != NNCL_OK) {
        NNCL_FREE(*b);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    p->arena_floats = plan_pack(*b, *nb - n32);
    if (p->arena_floats == (size_t)-1) {
        NNCL_FREE(*b);
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    {
        int *grad_block = (int *)nncl__calloc((size_t)p->graph->n_nodes + 1, sizeof(int));
        if (!grad_block) {
            NNCL_FREE(*b);
            return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        plan_inplace_places(p, *b, *nb, grad_block);
        NNCL_FREE(grad_block);
    }
    return NNCL_OK;
}

uint64_t nncl__plan_arena_bytes(const nncl__plan *p) {
    return (uint64_t)p->arena_floats * (p->ex.store ? 2 : 4) + (p->ex.store ? (uint64_t)p->arena32_floats * 4 : 0);
}

uint64_t nncl__plan_need(const nncl__plan *p, size_t train_floats) {
    const nncl_graph *g = p->graph;
    uint64_t need = nncl__plan_arena_bytes(p) + ((uint64_t)g->n_params + g->n_trainable + g->n_state) * 4 +
                    (uint64_t)train_floats * 4;
    if (p->ex.store) need += (uint64_t)g->n_params * 2;
    return need;
}

/* A bound on the workspace, known exactly only once kernels are timed:
 * the plan has one, as large as the most any op's prepare asks for; each
 * op's bound is what it declares (nncl__opdef.workspace), or for an op
 * that declares none the packed panels of its operands, fp32, with room
 * for tile rounding, twice (its timing may pack into a scratch of its
 * own beside the plan's workspace). */
static uint64_t plan_workspace_bound(const nncl__plan *p) {
    uint64_t most = 0, arena = (uint64_t)p->arena_floats * (p->ex.store ? 2 : 4);
    int i, k;
    for (i = 0; i < p->n_fwd; i++) {
        const nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        uint64_t f = 0;
        if (!d->prepare) continue;
        if (d->workspace) {
            f = d->workspace(n, p->max_batch, arena, p->ex.store);
        } else {
            for (k = 0; k < n->n_in; k++) f += nncl__numel(n->in[k], p->max_batch);
            f = f * 4 * 5 / 4 * 2;
        }
        if (f > most) most = f;
    }
    return most;
}

nncl_status nncl__plan_measure(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl__plan_opts *o,
                               uint64_t *need, uint64_t *activations, int *segments) {
    nncl__plan p;
    nncl__plan_block *b = NULL;
    int nb = 0;
    nncl_status st;
    NNCL_TRY(nncl__graph_layout(g));
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.graph = g;
    p.loss = loss;
    p.max_batch = o->max_batch;
    p.ex.store = o->store;
    st = nncl__plan_fuse(&p);
    if (st == NNCL_OK) st = nncl__plan_layout(&p, o->checkpoint, &b, &nb);
    NNCL_FREE(b);
    if (st == NNCL_OK) {
        uint64_t stage = o->store ? (uint64_t)p.stage_floats * 4 : 0, ws = plan_workspace_bound(&p);
        *need = nncl__plan_need(&p, o->train_floats) + (ws > stage ? ws : stage);
        if (activations) *activations = p.act_bytes;
        if (segments) *segments = p.n_segments;
    }
    nncl__plan_schedule_free(&p);
    nncl__plan_fuse_free(&p);
    return st;
}

#undef PLAN_ALIGN
