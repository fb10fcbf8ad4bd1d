/* plan_memory.c - a plan's memory, known before anything is allocated: the
 * schedules (forward; backward; with gradient checkpointing the recompute
 * of each segment's forward just before the segment's backward), the
 * lifetime of every value, gradient and aux block on that timeline, a
 * first-fit packing of the blocks into the arena (in half storage the fp32
 * blocks into arena32), the choice of checkpoint boundaries, and the bytes
 * a plan needs.
 *
 * Checkpointing: boundaries split the forward into segments. A value of a
 * segment before the last is dropped when no op of another segment reads
 * it and it is no boundary: it lives from its forward to its last forward
 * reader, and again, recomputed, from its recompute to its last use in the
 * segment's backward. Everything else (boundaries, values read across
 * segments, the last segment, inputs) is kept as without checkpointing. */
#include "train/plan.h"
#include <math.h>

#define PLAN_ALIGN 16 /* floats: 64-byte block alignment */

const nncl_node *nncl__plan_root(const nncl_node *n) {
    while (nncl__opdef_get(n->op)->alias) n = n->in[0];
    return n;
}

static size_t plan_round(size_t f) { return (f + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN; }

/* First-fit: biggest blocks first, each at the lowest offset clear of every
 * placed block whose lifetime overlaps. */
static size_t plan_pack(nncl__plan_block *b, int n) {
    int i, j, k;
    size_t top = 0;
    int *order = (int *)nncl__calloc((size_t)n + 1, sizeof *order);
    if (!order) return (size_t)-1;
    for (i = 0; i < n; i++) order[i] = i;
    for (i = 1; i < n; i++) /* insertion sort by size, descending */
        for (j = i; j > 0 && b[order[j]].size > b[order[j - 1]].size; j--) {
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
    NNCL_FREE(order);
    return top;
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
    int *fstep, *bstep, *rstep, *seg;
} plan_time;

static void plan_time_free(plan_time *t) {
    NNCL_FREE(t->on_path); NNCL_FREE(t->dropped);
    NNCL_FREE(t->fstep); NNCL_FREE(t->bstep); NNCL_FREE(t->rstep); NNCL_FREE(t->seg);
}

void nncl__plan_schedule_free(nncl__plan *p) {
    NNCL_FREE(p->fwd); NNCL_FREE(p->bwd); NNCL_FREE(p->rec); NNCL_FREE(p->rec_before);
    p->fwd = p->bwd = p->rec = p->rec_before = NULL;
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
        if (mark && mark[p->fwd[i]]) s++;
    }
    if (!mark || !p->loss) return;
    for (i = 0; i < p->n_fwd; i++) {
        const nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        int drop = t->seg[n->id] < s && !mark[n->id] && n != p->loss && n->n_consumers > 0 &&
                   !nncl__opdef_get(n->op)->alias && nncl__opdef_get(n->op)->forward;
        for (j = n->id + 1; drop && j <= p->loss->id; j++) {
            const nncl_node *c = nncl__plan_node(p, j);
            if (!nncl__opdef_get(c->op)->alias && !nncl__plan_away(p, j) && plan_reads(c, n) && t->seg[j] != t->seg[n->id])
                drop = 0;
        }
        t->dropped[n->id] = (unsigned char)drop;
    }
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
    int N = g->n_nodes, i, j, nb = 0, last_step, done_seg = -1;
    plan_time t;
    nncl__plan_block *b;
    memset(&t, 0, sizeof t);
    nncl__plan_schedule_free(p);
    t.on_path = (unsigned char *)nncl__calloc((size_t)N, 1);
    t.dropped = (unsigned char *)nncl__calloc((size_t)N, 1);
    t.fstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.bstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.rstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    t.seg = (int *)nncl__calloc((size_t)N, sizeof(int));
    b = (nncl__plan_block *)nncl__calloc((size_t)N * 5, sizeof *b);
    p->fwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->bwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->rec = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->rec_before = (int *)nncl__calloc((size_t)N + 1, sizeof(int));
    if (!t.on_path || !t.dropped || !t.fstep || !t.bstep || !t.rstep || !t.seg || !b || !p->fwd || !p->bwd ||
        !p->rec || !p->rec_before) {
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
    /* Backward, each checkpointed segment's recompute before the first of
     * its backward ops (a segment's nodes are contiguous in id, and
     * backward runs in descending id). */
    last_step = p->n_fwd;
    for (i = N - 1; i >= 0; i--) {
        nncl_node *n = nncl__plan_node(p, i);
        if (!t.on_path[i] || n->op == NNCL_OP_PARAM || n->op == NNCL_OP_INPUT) continue;
        p->rec_before[p->n_bwd] = p->n_rec;
        if (t.seg[i] >= 0 && t.seg[i] != done_seg) {
            done_seg = t.seg[i];
            for (j = 0; j < p->n_fwd; j++)
                if (t.seg[p->fwd[j]] == done_seg && t.dropped[p->fwd[j]]) {
                    t.rstep[p->fwd[j]] = last_step++;
                    p->rec[p->n_rec++] = p->fwd[j];
                }
        }
        t.bstep[i] = last_step++;
        p->bwd[p->n_bwd++] = i;
    }
    p->rec_before[p->n_bwd] = p->n_rec;
    /* Values: from their forward step to their last reader; a dropped
     * value's forward block to its last forward reader, its recomputed
     * block from the recompute to its last reader after it. */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        int own = t.bstep[i] >= 0 &&
                  ((p->x.store && d->half_bw_reads ? d->half_bw_reads : d->bw_reads) & NNCL_BW_OUTPUT);
        int lastf = t.fstep[i], lastr = t.rstep[i];
        if (n->op == NNCL_OP_PARAM || d->alias || nncl__plan_away(p, i)) continue; /* an away node: F's views */
        for (j = i + 1; j < N; j++) {
            const nncl_node *c = nncl__plan_node(p, j);
            const nncl__opdef *cd = nncl__opdef_get(c->op);
            int reads = p->x.store && cd->half_bw_reads ? cd->half_bw_reads : cd->bw_reads;
            int rd = reads & NNCL_BW_OUTPUT && t.bstep[j] >= 0 && nncl__plan_root(c)->id == n->id;
            if (nncl__plan_away(p, j) || (!plan_reads(c, n) && !rd)) continue;
            if (plan_reads(c, n) && t.fstep[j] > lastf) lastf = t.fstep[j];
            if (plan_reads(c, n) && t.rstep[j] > lastr) lastr = t.rstep[j];
            if (t.bstep[j] >= 0 && ((plan_reads(c, n) && (reads & NNCL_BW_INPUTS)) || rd) && t.bstep[j] > lastr)
                lastr = t.bstep[j];
        }
        if (own && t.bstep[i] > lastr) lastr = t.bstep[i];
        if (n == p->loss || (!p->loss && n->n_consumers == 0)) lastr = last_step;
        if (!t.dropped[i]) {
            plan_add(b, &nb, i, 0, 0, t.fstep[i], lastf > lastr ? lastf : lastr, nncl__numel(n, p->max_batch));
        } else {
            plan_add(b, &nb, i, 0, 0, t.fstep[i], lastf, nncl__numel(n, p->max_batch));
            if (t.rstep[i] >= 0) plan_add(b, &nb, i, 0, 1, t.rstep[i], lastr, nncl__numel(n, p->max_batch));
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
    /* Aux: from the node's forward to its backward; a dropped node's from
     * its recompute, unless the op keeps what its forward saved (keep_aux). */
    for (i = 0; i < N; i++) {
        nncl_node *n = nncl__plan_node(p, i);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        size_t a = d->aux_size && !(p->x.store && d->half_bw_reads) ? d->aux_size(n, p->max_batch) : 0;
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

/* Schedules and packs with boundaries mark (NULL: none). */
static nncl_status plan_pack_all(nncl__plan *p, const unsigned char *mark, nncl__plan_block **b, int *nb) {
    int n32 = 0;
    p->arena32_floats = p->stage_floats = 0;
    NNCL_TRY(plan_schedule(p, mark, b, nb));
    if (p->x.store && plan_split_f32(p, *b, *nb, &n32) != NNCL_OK) {
        NNCL_FREE(*b);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    p->arena_floats = plan_pack(*b, *nb - n32);
    if (p->arena_floats == (size_t)-1) {
        NNCL_FREE(*b);
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    return NNCL_OK;
}

uint64_t nncl__plan_arena_bytes(const nncl__plan *p) {
    return (uint64_t)p->arena_floats * (p->x.store ? 2 : 4) + (p->x.store ? (uint64_t)p->arena32_floats * 4 : 0);
}

/* The boundaries marked with nncl_checkpoint_mark: each must run forward
 * before the loss. */
static nncl_status plan_marks(nncl__plan *p, unsigned char *mark) {
    const nncl_graph *g = p->graph;
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = nncl__plan_node(p, i);
        if (!n->checkpoint) continue;
        if (!p->loss || i >= p->loss->id)
            return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "plan: node \"%s\" is marked as a checkpoint boundary, but it is %s", n->name,
                              p->loss && i == p->loss->id ? "the loss" : "not computed before the loss");
        mark[i] = 1;
    }
    return NNCL_OK;
}

/* Arena bytes with boundaries mark (all zero: none), or 0 on failure. */
static uint64_t plan_try(nncl__plan *p, const unsigned char *mark) {
    nncl__plan_block *b = NULL;
    int nb, i, any = 0;
    for (i = 0; i < p->graph->n_nodes; i++) any |= mark[i];
    if (plan_pack_all(p, any ? mark : NULL, &b, &nb) != NNCL_OK) return 0;
    NNCL_FREE(b);
    return nncl__plan_arena_bytes(p);
}

/* Automatic boundaries: for about sqrt(n) of them (n the nodes that may be
 * one), k in a few multiples of it, placed at equal steps of the forward's
 * cumulative value size; the layout of least arena memory wins, no
 * checkpointing among the candidates (it wins ties: no recompute). Equal
 * steps miss what a graph's shape decides: a residual block's input read
 * across a boundary inside the block is kept, a first layer whose output
 * is the largest value is dropped only when a boundary follows it. So the
 * winner is then improved by descent: each node that may be a boundary is
 * toggled in turn, and a toggle that lowers the arena is kept, until a
 * pass keeps none (or PLAN_AUTO_PASSES passes). */
#define PLAN_AUTO_PASSES 4
#define PLAN_AUTO_NODES 512 /* larger graphs: the equal steps alone (a packing is quadratic in the blocks) */
static nncl_status plan_auto(nncl__plan *p, unsigned char *mark) {
    static const double f[5] = {0.5, 0.7, 1.0, 1.4, 2.0};
    const nncl_graph *g = p->graph;
    unsigned char *try_mark = (unsigned char *)nncl__calloc((size_t)g->n_nodes, 1);
    nncl__plan_block *b = NULL;
    double total = 0, acc;
    uint64_t best;
    int nb, i, c, n = 0, k, prev_k = -1;
    if (!try_mark) return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (plan_pack_all(p, NULL, &b, &nb) != NNCL_OK) {
        NNCL_FREE(try_mark);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    NNCL_FREE(b);
    best = nncl__plan_arena_bytes(p);
    for (i = 0; i < p->n_fwd; i++) {
        const nncl_node *nd = nncl__plan_node(p, p->fwd[i]);
        if (nd == p->loss || nncl__opdef_get(nd->op)->alias) continue;
        n++;
        total += (double)nncl__numel(nd, p->max_batch);
    }
    for (c = 0; c < 5 && n >= 4 && total > 0; c++) {
        k = (int)floor(sqrt((double)n) * f[c] + 0.5);
        if (k < 1 || k >= n || k == prev_k) continue;
        prev_k = k;
        memset(try_mark, 0, (size_t)g->n_nodes);
        acc = 0;
        for (i = 0, nb = 1; i < p->n_fwd && nb <= k; i++) { /* nb: the next boundary's number */
            const nncl_node *nd = nncl__plan_node(p, p->fwd[i]);
            if (nd == p->loss || nncl__opdef_get(nd->op)->alias) continue;
            acc += (double)nncl__numel(nd, p->max_batch);
            if (acc >= total * nb / (k + 1)) {
                try_mark[nd->id] = 1;
                nb++;
            }
        }
        if (plan_pack_all(p, try_mark, &b, &nb) != NNCL_OK) {
            NNCL_FREE(try_mark);
            return NNCL_ERR_OUT_OF_MEMORY;
        }
        NNCL_FREE(b);
        if (nncl__plan_arena_bytes(p) < best) {
            best = nncl__plan_arena_bytes(p);
            memcpy(mark, try_mark, (size_t)g->n_nodes);
        }
    }
    for (c = 0, prev_k = 1; c < PLAN_AUTO_PASSES && prev_k && n >= 2 && p->n_fwd <= PLAN_AUTO_NODES; c++)
        for (i = 0, prev_k = 0; i < p->n_fwd; i++) { /* prev_k: a toggle of this pass was kept */
            const nncl_node *nd = nncl__plan_node(p, p->fwd[i]);
            uint64_t a;
            if (nd == p->loss || nncl__opdef_get(nd->op)->alias) continue;
            mark[nd->id] ^= 1;
            a = plan_try(p, mark);
            if (!a) {
                NNCL_FREE(try_mark);
                return NNCL_ERR_OUT_OF_MEMORY;
            }
            if (a < best) {
                best = a;
                prev_k = 1;
            } else {
                mark[nd->id] ^= 1;
            }
        }
    NNCL_FREE(try_mark);
    return NNCL_OK;
}
#undef PLAN_AUTO_PASSES
#undef PLAN_AUTO_NODES

nncl_status nncl__plan_layout(nncl__plan *p, int checkpoint, nncl__plan_block **b, int *nb) {
    unsigned char *mark = NULL;
    nncl_status st = NNCL_OK;
    int i, any = 0;
    if (checkpoint != NNCL_CHECKPOINT_NONE && p->loss) {
        mark = (unsigned char *)nncl__calloc((size_t)p->graph->n_nodes, 1);
        if (!mark) return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        st = checkpoint == NNCL_CHECKPOINT_AUTO ? plan_auto(p, mark) : plan_marks(p, mark);
        for (i = 0; i < p->graph->n_nodes; i++) any |= mark[i];
    }
    if (st == NNCL_OK) st = plan_pack_all(p, any ? mark : NULL, b, nb);
    p->n_segments = 1;
    for (i = 0; any && i < p->graph->n_nodes; i++) p->n_segments += mark[i];
    NNCL_FREE(mark);
    return st;
}

uint64_t nncl__plan_need(const nncl__plan *p, size_t train_floats) {
    const nncl_graph *g = p->graph;
    uint64_t need = nncl__plan_arena_bytes(p) + ((uint64_t)g->n_params + g->n_trainable + g->n_state) * 4 +
                    (uint64_t)train_floats * 4;
    if (p->x.store) need += (uint64_t)g->n_params * 2;
    return need;
}

/* A bound on the GEMM workspace, known exactly only once kernels are
 * timed: the packed panels of a product's operands, fp32, with room for
 * tile rounding, twice (the timing packs into the device's scratch, which
 * stays, before the plan's own workspace is made). */
static uint64_t plan_workspace_bound(const nncl__plan *p) {
    uint64_t most = 0;
    int i, k;
    for (i = 0; i < p->n_fwd; i++) {
        const nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        uint64_t f = 0;
        if (!nncl__opdef_get(n->op)->prepare) continue;
        for (k = 0; k < n->n_in; k++) f += nncl__numel(n->in[k], p->max_batch);
        if (f > most) most = f;
    }
    return most * 4 * 5 / 4 * 2;
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
    p.x.store = o->store;
    st = nncl__plan_fuse(&p);
    if (st == NNCL_OK) st = nncl__plan_layout(&p, o->checkpoint, &b, &nb);
    NNCL_FREE(b);
    if (st == NNCL_OK) {
        uint64_t stage = o->store ? (uint64_t)p.stage_floats * 4 : 0, ws = plan_workspace_bound(&p);
        *need = nncl__plan_need(&p, o->train_floats) + (ws > stage ? ws : stage);
        if (activations) *activations = nncl__plan_arena_bytes(&p);
        if (segments) *segments = p.n_segments;
    }
    nncl__plan_schedule_free(&p);
    nncl__plan_fuse_free(&p);
    return st;
}

#undef PLAN_ALIGN
