/* plan_auto.c - where a plan's checkpoint boundaries go: those marked on
 * nodes (checked), or the automatic choice, a search over layouts that
 * plan_memory.c schedules and packs (nncl__plan_pack_all) for the least
 * arena; and the layout of the plan so chosen. */
#include "train/plan.h"
#include <math.h>

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

/* Arena bytes with boundaries mark (all zero: none), or 0 on failure;
 * *act its activation bytes. */
static uint64_t plan_try(nncl__plan *p, const unsigned char *mark, uint64_t *act) {
    nncl__plan_block *b = NULL;
    int nb, i, any = 0;
    for (i = 0; i < p->graph->n_nodes; i++) any |= mark[i];
    if (nncl__plan_pack_all(p, any ? mark : NULL, &b, &nb) != NNCL_OK) return 0;
    NNCL_FREE(b);
    *act = p->act_bytes;
    return nncl__plan_arena_bytes(p);
}

/* Whether a layout of arena bytes a and activation bytes act is better
 * than the best so far: less arena, or as much and fewer activations. */
static int plan_better(uint64_t a, uint64_t act, uint64_t best, uint64_t best_act) {
    return a < best || (a == best && act < best_act);
}

/* Automatic boundaries: for about sqrt(n) of them (n the nodes that may be
 * one), k in a few multiples of it, placed at equal steps of the forward's
 * cumulative value size; the layout of least arena memory wins (of equal
 * arenas, the one of least activation memory: the room a larger batch
 * needs less of), no checkpointing among the candidates (it wins full
 * ties: no recompute). Equal
 * steps miss what a graph's shape decides: a residual block's input read
 * across a boundary inside the block is kept, a first layer whose output
 * is the largest value is dropped only when a boundary follows it. So the
 * winner is then improved by descent: each node that may be a boundary is
 * toggled in turn, and so is (for a dropped value) a second recompute for
 * its last reader (mark bit 2), and a toggle that improves the layout so
 * is kept, until a
 * pass keeps none (or PLAN_AUTO_PASSES passes). */
#define PLAN_AUTO_PASSES 4
#define PLAN_AUTO_NODES 512 /* larger graphs: the equal steps alone (a packing is quadratic in the blocks) */
static nncl_status plan_auto(nncl__plan *p, unsigned char *mark) {
    static const double f[5] = {0.5, 0.7, 1.0, 1.4, 2.0};
    const nncl_graph *g = p->graph;
    unsigned char *try_mark = (unsigned char *)nncl__calloc((size_t)g->n_nodes, 1);
    nncl__plan_block *b = NULL;
    double total = 0, acc;
    uint64_t best, best_act;
    int nb, i, c, n = 0, k, prev_k = -1;
    if (!try_mark) return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (nncl__plan_pack_all(p, NULL, &b, &nb) != NNCL_OK) {
        NNCL_FREE(try_mark);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    NNCL_FREE(b);
    best = nncl__plan_arena_bytes(p);
    best_act = p->act_bytes;
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
        if (nncl__plan_pack_all(p, try_mark, &b, &nb) != NNCL_OK) {
            NNCL_FREE(try_mark);
            return NNCL_ERR_OUT_OF_MEMORY;
        }
        NNCL_FREE(b);
        if (plan_better(nncl__plan_arena_bytes(p), p->act_bytes, best, best_act)) {
            best = nncl__plan_arena_bytes(p);
            best_act = p->act_bytes;
            memcpy(mark, try_mark, (size_t)g->n_nodes);
        }
    }
    for (c = 0, prev_k = 1; c < PLAN_AUTO_PASSES && prev_k && n >= 2 && p->n_fwd <= PLAN_AUTO_NODES; c++)
        for (i = 0, prev_k = 0; i < 2 * p->n_fwd; i++) { /* prev_k: a toggle of this pass was kept */
            const nncl_node *nd = nncl__plan_node(p, p->fwd[i / 2]);
            unsigned char bit = (unsigned char)(i % 2 ? 2 : 1); /* a boundary; a second recompute */
            uint64_t a, act = 0;
            if (nd == p->loss || nncl__opdef_get(nd->op)->alias || (bit == 2 && (mark[nd->id] & 1))) continue;
            mark[nd->id] ^= bit;
            a = plan_try(p, mark, &act);
            if (!a) {
                NNCL_FREE(try_mark);
                return NNCL_ERR_OUT_OF_MEMORY;
            }
            if (plan_better(a, act, best, best_act)) {
                best = a;
                best_act = act;
                prev_k = 1;
            } else {
                mark[nd->id] ^= bit;
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
    if (st == NNCL_OK) st = nncl__plan_pack_all(p, any ? mark : NULL, b, nb);
    p->n_segments = 1;
    for (i = 0; any && i < p->graph->n_nodes; i++) p->n_segments += mark[i] & 1;
    NNCL_FREE(mark);
    return st;
}

