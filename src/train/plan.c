/* plan.c - compiling a graph for one device: the schedules, the lifetime of
 * every value, gradient and aux block, a first-fit packing of those blocks
 * into one arena, and the replay of forward and backward on that memory. */
#include "train/plan.h"

#define PLAN_ALIGN 16 /* floats: 64-byte block alignment */

/* ------------------------------------------------------------- lifetimes */

typedef struct plan_block {
    int first, last;      /* steps during which the block is live */
    size_t size, off;     /* floats */
    int node, kind;       /* kind 0 value, 1 gradient, 2 aux */
    int f32;              /* half storage: the block stays fp32 (arena32) */
} plan_block;

/* Storage owner of a node's value: reshapes share their input's memory. */
static const nncl_node *plan_root(const nncl_node *n) {
    while (nncl__opdef_get(n->op)->alias) n = n->in[0];
    return n;
}

static size_t plan_round(size_t f) { return (f + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN; }

/* First-fit: biggest blocks first, each at the lowest offset clear of every
 * placed block whose lifetime overlaps. */
static size_t plan_pack(plan_block *b, int n) {
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
        plan_block *a = &b[order[i]];
        size_t off = 0;
        int moved = 1;
        while (moved) {
            moved = 0;
            for (j = 0; j < i; j++) {
                plan_block *p = &b[order[j]];
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
static void plan_mark_backward(const nncl_graph *g, const nncl_node *loss, unsigned char *on_path) {
    int i, k;
    memset(on_path, 0, (size_t)g->n_nodes);
    if (!loss) return;
    on_path[loss->id] = 1;
    for (i = loss->id; i >= 0; i--) {
        const nncl_node *n = g->nodes[i];
        if (!on_path[i]) continue;
        for (k = 0; k < n->n_in; k++)
            if (n->in[k]->needs_grad) on_path[n->in[k]->id] = 1;
    }
    for (i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->needs_grad) on_path[i] = 0;
}

static nncl_status plan_schedule(nncl__plan *p, plan_block **blocks_out, int *n_blocks_out) {
    nncl_graph *g = p->graph;
    int N = g->n_nodes, i, k, nb = 0;
    unsigned char *on_path = (unsigned char *)nncl__calloc((size_t)N, 1);
    int *fstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    int *bstep = (int *)nncl__calloc((size_t)N, sizeof(int));
    plan_block *b = (plan_block *)nncl__calloc((size_t)N * 3, sizeof *b);
    int last_step;
    p->fwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    p->bwd = (int *)nncl__calloc((size_t)N, sizeof(int));
    if (!on_path || !fstep || !bstep || !b || !p->fwd || !p->bwd) {
        NNCL_FREE(on_path); NNCL_FREE(fstep); NNCL_FREE(bstep); NNCL_FREE(b);
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory planning the graph");
    }
    plan_mark_backward(g, p->loss, on_path);
    /* Forward: every op node up to the loss (or all, without one); inputs
     * are written at step 0 by the feed. */
    for (i = 0; i < N; i++) {
        nncl_node *n = g->nodes[i];
        fstep[i] = 0;
        bstep[i] = -1;
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM) continue;
        if (p->loss && i > p->loss->id) continue;
        fstep[i] = p->n_fwd;
        p->fwd[p->n_fwd++] = i;
    }
    for (i = N - 1; i >= 0; i--) {
        nncl_node *n = g->nodes[i];
        if (!on_path[i] || n->op == NNCL_OP_PARAM || n->op == NNCL_OP_INPUT) continue;
        bstep[i] = p->n_fwd + p->n_bwd;
        p->bwd[p->n_bwd++] = i;
    }
    last_step = p->n_fwd + p->n_bwd;
    /* Values: from their forward step to their last reader. */
    for (i = 0; i < N; i++) {
        nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (n->op == NNCL_OP_PARAM || d->alias) continue;
        b[nb].node = i; b[nb].kind = 0; b[nb].first = fstep[i]; b[nb].last = fstep[i];
        b[nb].size = plan_round(nncl__numel(n, p->max_batch));
        if (n == p->loss || (!p->loss && n->n_consumers == 0)) b[nb].last = last_step;
        nb++;
    }
    for (i = 0; i < N; i++) { /* extend values by every reader, through aliases */
        nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        int j, reads = p->x.store && d->half_bw_reads ? d->half_bw_reads : d->bw_reads;
        for (k = 0; k < n->n_in; k++) {
            const nncl_node *r = plan_root(n->in[k]);
            for (j = 0; j < nb; j++) {
                if (b[j].kind != 0 || b[j].node != r->id) continue;
                if (fstep[i] > b[j].last) b[j].last = fstep[i];
                if (bstep[i] >= 0 && (reads & NNCL_BW_INPUTS) && bstep[i] > b[j].last) b[j].last = bstep[i];
            }
        }
        if (bstep[i] >= 0 && (reads & NNCL_BW_OUTPUT)) {
            const nncl_node *r = plan_root(n);
            for (j = 0; j < nb; j++)
                if (b[j].kind == 0 && b[j].node == r->id && bstep[i] > b[j].last) b[j].last = bstep[i];
        }
    }
    /* Gradients of activations: from the first writer to the node's own
     * backward (an alias's reader counts for its root). */
    for (i = 0; i < N; i++) {
        nncl_node *n = g->nodes[i];
        int first = -1, lastb = -1, j;
        if (!on_path[i] || n->op == NNCL_OP_PARAM || nncl__opdef_get(n->op)->alias) continue;
        for (j = i + 1; j < N; j++) { /* consumers of i or of aliases of i */
            nncl_node *c = g->nodes[j];
            for (k = 0; k < c->n_in; k++)
                if (plan_root(c->in[k]) == n && bstep[j] >= 0 && (first < 0 || bstep[j] < first)) first = bstep[j];
            if (plan_root(c) == n && bstep[j] > lastb) lastb = bstep[j];
        }
        if (bstep[i] > lastb) lastb = bstep[i];
        if (n == p->loss) first = p->n_fwd; /* the seed is written before backward */
        if (n->op == NNCL_OP_INPUT) lastb = last_step; /* a leaf's gradient is kept for the caller */
        if (first < 0) continue;
        b[nb].node = i; b[nb].kind = 1; b[nb].first = first; b[nb].last = lastb < first ? first : lastb;
        b[nb].size = plan_round(nncl__numel(n, p->max_batch));
        nb++;
    }
    /* Aux: from the node's forward to its backward. */
    for (i = 0; i < N; i++) {
        nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        size_t a = d->aux_size && !(p->x.store && d->half_bw_reads) ? d->aux_size(n, p->max_batch) : 0;
        if (!a) continue;
        b[nb].node = i; b[nb].kind = 2; b[nb].first = fstep[i];
        b[nb].last = bstep[i] >= 0 ? bstep[i] : fstep[i];
        b[nb].size = plan_round(a);
        nb++;
    }
    NNCL_FREE(on_path); NNCL_FREE(fstep); NNCL_FREE(bstep);
    *blocks_out = b;
    *n_blocks_out = nb;
    return NNCL_OK;
}

/* ------------------------------------------------------------- creation */

void nncl__plan_free(nncl__plan *p) {
    nncl_device *dev;
    if (!p) return;
    dev = p->x.dev;
    if (p->xfer) { /* its reads target the plan's gradients */
        clFinish(p->xfer);
        clReleaseCommandQueue(p->xfer);
    }
    if (dev) {
        clFinish(dev->queue);
        nncl__buffer_release(dev, p->arena, p->arena_floats * (p->x.store ? 2 : 4));
        nncl__buffer_release(dev, p->arena32, p->arena32_floats * 4);
        nncl__buffer_release(dev, p->x.params_h, p->graph->n_params * 2);
        nncl__buffer_release(dev, p->x.params, p->graph->n_params * 4);
        nncl__buffer_release(dev, p->x.grads, p->graph->n_trainable * 4);
        nncl__buffer_release(dev, p->x.state, p->graph->n_state * 4);
        nncl__buffer_release(dev, p->x.gemm_temp, p->gemm_temp_bytes);
        nncl__buffer_release(dev, p->opt, p->opt_floats * 4);
        nncl__buffer_release(dev, p->scratch, p->scratch_floats * 4);
        if (p->shadow) nncl__buffer_release(dev, p->shadow, p->graph->n_state * 4);
    }
    NNCL_FREE(p->x.value); NNCL_FREE(p->x.grad); NNCL_FREE(p->x.aux); NNCL_FREE(p->x.grad_acc);
    NNCL_FREE(p->x.kernels);
    NNCL_FREE(p->fwd); NNCL_FREE(p->bwd);
    NNCL_FREE(p);
}

/* ------------------------------------------------------------- half storage */

/* Whether input node n is read as fp32 (labels, targets: an f32_in slot of
 * a consumer); *mixed is set when another consumer reads it as half. */
static int plan_input_f32(const nncl_graph *g, const nncl_node *n, int *mixed) {
    int i, k, f32 = 0, half = 0;
    for (i = n->id + 1; i < g->n_nodes; i++) {
        const nncl_node *c = g->nodes[i];
        for (k = 0; k < c->n_in; k++)
            if (c->in[k] == n) {
                if (nncl__opdef_get(c->op)->f32_in & (1 << k)) f32 = 1;
                else half = 1;
            }
    }
    if (mixed) *mixed = f32 && half;
    return f32;
}

nncl_status nncl__plan_check_store(nncl_context *ctx, const nncl_graph *g, const nncl_node *loss, int store) {
    static const char *const names[3] = {"fp32", "fp16", "bf16"};
    int i, k, mixed = 0;
    if (store < 1 || store > 2) return NNCL_OK;
    for (i = 0; i < g->n_nodes && (!loss || i <= loss->id); i++) {
        const nncl_node *n = g->nodes[i];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (n->op == NNCL_OP_PARAM) continue;
        if (n->op == NNCL_OP_INPUT) {
            plan_input_f32(g, n, &mixed);
            if (mixed)
                return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s storage: input \"%s\" is read both as labels or "
                                  "targets (fp32) and as an activation", names[store], n->name);
            continue;
        }
        if (!d->half)
            return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s storage: op %s (node \"%s\") has no %s kernels yet; "
                              "train this model in fp32", names[store], d->name, n->name, names[store]);
        for (k = 0; k < n->n_in; k++)
            if ((d->f32_in & (1 << k)) && n->in[k]->op != NNCL_OP_INPUT)
                return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s storage: op %s (node \"%s\") takes its input %d "
                                  "(\"%s\") as fp32 labels or targets, but it is computed, not fed",
                                  names[store], d->name, n->name, k, n->in[k]->name);
        for (k = 0; d->half < 2 && k < n->n_in; k++) /* its gradient would be written in the half type */
            if (n->in[k]->op == NNCL_OP_PARAM && n->in[k]->needs_grad)
                return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s storage: op %s (node \"%s\") trains parameter \"%s\" "
                                  "directly, but its half kernels write gradients in the storage type, not the fp32 of "
                                  "a parameter's; train this model in fp32", names[store], d->name, n->name,
                                  n->in[k]->name);
    }
    if (loss && !nncl__opdef_get(loss->op)->f32_out)
        return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "%s storage: the loss \"%s\" (%s) is not a loss op, whose value "
                          "stays fp32", names[store], loss->name, nncl__opdef_get(loss->op)->name);
    return NNCL_OK;
}

/* Half storage: marks the blocks that stay fp32 (everything of a loss,
 * indices kept for backward, label inputs), moves them to the end (*n32 of them) and
 * packs them into arena32; sizes the upload stage for the half inputs. */
static nncl_status plan_split_f32(nncl__plan *p, plan_block *b, int nb, int *n32) {
    const nncl_graph *g = p->graph;
    int i, j = 0;
    plan_block t;
    for (i = 0; i < nb; i++) {
        const nncl_node *n = g->nodes[b[i].node];
        b[i].f32 = nncl__opdef_get(n->op)->f32_out || (b[i].kind == 2 && nncl__opdef_get(n->op)->f32_aux) ||
                   (n->op == NNCL_OP_INPUT && plan_input_f32(g, n, NULL));
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

int nncl__plan_view_half(const nncl__plan *p, nncl__view v) {
    return p->x.store && v.mem && (v.mem == p->arena || v.mem == p->x.params_h);
}

static nncl__view plan_whole(cl_mem m) {
    nncl__view v;
    v.mem = m;
    v.off = 0;
    return v;
}

/* The plan's conversion kernel into its storage type. */
static nncl__kl plan_store_kernel(const nncl__plan *p) {
    nncl__kl k;
    k.ctx = p->ctx;
    k.dev = p->x.dev;
    k.slot = p->store_k;
    return k;
}

nncl_status nncl__plan_sync_params(nncl__plan *p) {
    size_t n = p->graph->n_params;
    if (!p->x.store || !n) return NNCL_OK;
    return nncl__k_store(plan_store_kernel(p), plan_whole(p->x.params_h), plan_whole(p->x.params), n);
}

nncl_status nncl__plan_read_view(nncl__plan *p, nncl__view v, float *dst, size_t count) {
    size_t i;
    if (!nncl__plan_view_half(p, v)) {
        NNCL_CL(p->ctx, clEnqueueReadBuffer(p->x.dev->queue, v.mem, CL_TRUE, v.off * 4, count * 4, dst, 0, NULL, NULL));
        return NNCL_OK;
    }
    NNCL_CL(p->ctx, clEnqueueReadBuffer(p->x.dev->queue, v.mem, CL_TRUE, v.off * 2, count * 2, dst, 0, NULL, NULL));
    /* in place from the end: element i's 2 bytes sit at or past 2i, its float goes to 4i */
    for (i = count; i-- > 0;) {
        const unsigned char *h = (const unsigned char *)dst + 2 * i;
        unsigned bits;
        uint16_t u;
        memcpy(&u, h, 2);
        bits = u;
        dst[i] = p->x.store == 1 ? nncl__f16_to_f32(bits) : nncl__bf16_to_f32(bits);
    }
    return NNCL_OK;
}

/* Kernels take element offsets and counts as int: every node's value at
 * max_batch, and every buffer (the arena once packed, parameters, running
 * statistics), must stay within INT_MAX elements, or a plan is refused
 * before any buffer exists rather than let an offset wrap. */
static nncl_status plan_check_node_sizes(nncl__plan *p) {
    nncl_graph *g = p->graph;
    size_t limit = (size_t)INT_MAX;
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        char s[96];
        if (n->sample_numel > (n->batched ? limit / (size_t)p->max_batch : limit))
            return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY,
                              "plan: node \"%s\" %s holds more than 2^31-1 elements at max_batch %d, more than a kernel "
                              "can address; lower max_batch", n->name, nncl__shape_str(n, s, sizeof s), p->max_batch);
    }
    if (g->n_params > limit || g->n_state > limit)
        return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY, "plan: %zu parameters and %zu statistics: more than 2^31-1",
                          g->n_params, g->n_state);
    return NNCL_OK;
}

static nncl_status plan_buffers(nncl__plan *p, const plan_block *b, int nb) {
    nncl_graph *g = p->graph;
    nncl_context *ctx = p->ctx;
    nncl_device *dev = p->x.dev;
    size_t total = 0;
    int i;
    if (p->arena_floats > (size_t)INT_MAX)
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY,
                          "plan: the activations need %zu floats at max_batch %d, more than the 2^31-1 a kernel can "
                          "address; lower max_batch", p->arena_floats, p->max_batch);
    /* bytes in size_t: checked, a 32-bit size_t holds less than 2^31 floats' worth */
    if (nncl__add_overflow(p->arena_floats, g->n_params, &total) || nncl__add_overflow(total, g->n_trainable, &total) ||
        nncl__add_overflow(total, g->n_state, &total) || nncl__mul_overflow(total, 4, &total))
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "plan: %zu + %zu + %zu floats overflow the size of memory",
                          p->arena_floats, g->n_params, g->n_state);
    NNCL_TRY(nncl__buffer_create(ctx, dev, p->arena_floats * (p->x.store ? 2 : 4), &p->arena));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_params * 4, &p->x.params));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_trainable * 4, &p->x.grads));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_state * 4, &p->x.state));
    p->bytes = total;
    if (p->x.store) { /* the arena counted at 4 bytes above holds 2-byte elements */
        p->bytes -= (uint64_t)p->arena_floats * 2;
        NNCL_TRY(nncl__buffer_create(ctx, dev, p->arena32_floats * 4, &p->arena32));
        NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_params * 2, &p->x.params_h));
        p->bytes += (uint64_t)p->arena32_floats * 4 + (uint64_t)g->n_params * 2;
    }
    for (i = 0; i < nb; i++) {
        nncl__view v;
        v.mem = b[i].f32 ? p->arena32 : p->arena;
        v.off = b[i].off;
        if (b[i].kind == 0) p->x.value[b[i].node] = v;
        else if (b[i].kind == 1) p->x.grad[b[i].node] = v;
        else p->x.aux[b[i].node] = v;
    }
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        if (n->op == NNCL_OP_PARAM) {
            p->x.value[i].mem = p->x.store ? p->x.params_h : p->x.params;
            p->x.value[i].off = n->param_off;
            if (n->trainable) {
                p->x.grad[i].mem = p->x.grads;
                p->x.grad[i].off = n->param_off;
            }
        } else if (nncl__opdef_get(n->op)->alias) {
            const nncl_node *r = plan_root(n);
            p->x.value[i] = p->x.value[r->id];
            p->x.grad[i] = p->x.grad[r->id];
        }
    }
    return NNCL_OK;
}

nncl_status nncl__plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                              nncl__plan **out) {
    return nncl__plan_create_store(ctx, g, loss, device, max_batch, 0, out);
}

static nncl_status plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                               int store, int stage, nncl__plan **out);

nncl_status nncl__plan_create_store(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                                    int store, nncl__plan **out) {
    return plan_create(ctx, g, loss, device, max_batch, store, 0, out);
}

nncl_status nncl__plan_create_stage(nncl_context *ctx, nncl_graph *g, nncl_node *out_node, int device, int max_batch,
                                    nncl__plan **out) {
    return plan_create(ctx, g, out_node, device, max_batch, 0, 1, out);
}

static nncl_status plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                               int store, int stage, nncl__plan **out) {
    static const char *const opts[3] = {"", "-DNNCL_STORE=1", "-DNNCL_STORE=2"};
    nncl__plan *p;
    plan_block *blocks = NULL;
    int nb = 0, n32 = 0, i;
    nncl_status st;
    nncl_device *dev = nncl__device(ctx, device);
    *out = NULL;
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!g || max_batch <= 0) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: graph is NULL or batch %d <= 0", max_batch);
    if (loss && (loss->id >= g->n_nodes || g->nodes[loss->id] != loss))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: the loss is not a node of this graph");
    if (loss && !stage && (loss->batched || loss->sample_numel != 1))
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "plan: the loss \"%s\" must be a scalar, not per-sample or of %zu elements",
                          loss->name, loss->sample_numel);
    if (store < 0 || store > 2) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: storage %d is not 0, 1 or 2", store);
    if (store) NNCL_TRY(nncl__plan_check_store(ctx, g, loss, store));
    NNCL_TRY(nncl__graph_layout(g));
    p = (nncl__plan *)nncl__calloc(1, sizeof *p);
    if (!p) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    p->ctx = ctx;
    p->graph = g;
    p->loss = loss;
    p->device = device;
    p->max_batch = max_batch;
    p->seed = 1.0f; /* the plan outlives the non-blocking write of it */
    p->x.ctx = ctx;
    p->x.dev = dev;
    p->x.graph = g;
    p->x.batch = max_batch;
    p->x.global_batch = max_batch;
    p->x.store = store;
    p->x.value = (nncl__view *)nncl__calloc((size_t)g->n_nodes, sizeof(nncl__view));
    p->x.grad = (nncl__view *)nncl__calloc((size_t)g->n_nodes, sizeof(nncl__view));
    p->x.aux = (nncl__view *)nncl__calloc((size_t)g->n_nodes, sizeof(nncl__view));
    p->x.grad_acc = (unsigned char *)nncl__calloc((size_t)g->n_nodes, 1);
    p->x.kernels = (nncl__kslot *)nncl__calloc((size_t)g->n_nodes * NNCL_OP_KERNELS, sizeof(nncl__kslot));
    if (!p->x.value || !p->x.grad || !p->x.aux || !p->x.grad_acc || !p->x.kernels) {
        nncl__plan_free(p);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    st = plan_check_node_sizes(p);
    if (st == NNCL_OK) st = plan_schedule(p, &blocks, &nb);
    if (st == NNCL_OK && store) st = plan_split_f32(p, blocks, nb, &n32);
    if (st == NNCL_OK) {
        p->arena_floats = plan_pack(blocks, nb - n32);
        if (p->arena_floats == (size_t)-1) st = nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if (st == NNCL_OK) st = plan_buffers(p, blocks, nb);
    NNCL_FREE(blocks);
    /* Every op's kernels are resolved and its GEMM workspace sized now, so
     * that a step neither compiles, nor looks up, nor allocates. */
    for (i = 0; st == NNCL_OK && i < p->n_fwd; i++) {
        nncl_node *n = g->nodes[p->fwd[i]];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        size_t bytes = 0;
        int k;
        for (k = 0; st == NNCL_OK && k < NNCL_OP_KERNELS; k++)
            if (d->kernels[k].name)
                st = nncl__kslot_resolve_opts(ctx, dev, d->kernels[k].family, opts[store], d->kernels[k].name,
                                              &p->x.kernels[(size_t)n->id * NNCL_OP_KERNELS + (size_t)k]);
        p->x.gemm_cap = p->gemm_temp_bytes;
        if (st == NNCL_OK && d->prepare) st = d->prepare(&p->x, n, &bytes);
        if (bytes > p->gemm_temp_bytes) p->gemm_temp_bytes = bytes;
    }
    if (st == NNCL_OK && store) st = nncl__kslot_resolve_opts(ctx, dev, "half", opts[store], "nncl_store_f32", &p->store_k);
    if (store && p->gemm_temp_bytes < p->stage_floats * 4) p->gemm_temp_bytes = p->stage_floats * 4; /* the feeds' stage */
    if (st == NNCL_OK && p->gemm_temp_bytes) {
        st = nncl__buffer_create(ctx, dev, p->gemm_temp_bytes, &p->x.gemm_temp);
        p->bytes += p->gemm_temp_bytes;
    }
    if (st != NNCL_OK) {
        nncl__plan_free(p);
        return st;
    }
    *out = p;
    return NNCL_OK;
}

/* ------------------------------------------------------------- replay */

nncl_status nncl__plan_feed(nncl__plan *p, const nncl_node *input, const float *data, int batch) {
    nncl__view v;
    size_t n;
    if (!input || input->op != NNCL_OP_INPUT || input->id >= p->graph->n_nodes || p->graph->nodes[input->id] != input)
        return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT, "feed: not an input node of this graph");
    if (!data) return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT, "feed \"%s\": data is NULL", input->name);
    if (batch <= 0 || batch > p->max_batch)
        return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT, "feed \"%s\": batch %d is not in 1..%d", input->name, batch,
                          p->max_batch);
    v = p->x.value[input->id];
    if (!v.mem) return NNCL_OK; /* an input nothing reads */
    n = nncl__numel(input, batch);
    if (nncl__plan_view_half(p, v)) { /* fp32 to the stage, converted into the arena */
        NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->x.dev->queue, p->x.gemm_temp, CL_FALSE, 0, n * 4, data, 0, NULL, NULL));
        return nncl__k_store(plan_store_kernel(p), v, plan_whole(p->x.gemm_temp), n);
    }
    NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->x.dev->queue, v.mem, CL_FALSE, v.off * 4, n * 4, data, 0, NULL, NULL));
    return NNCL_OK;
}

nncl_status nncl__plan_forward(nncl__plan *p, int batch, int training) {
    return nncl__plan_forward_to(p, batch, training, NULL);
}

nncl_status nncl__plan_forward_to(nncl__plan *p, int batch, int training, const nncl_node *last) {
    int i;
    if (batch <= 0 || batch > p->max_batch)
        return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT, "batch %d is not in 1..%d", batch, p->max_batch);
    p->x.batch = batch;
    p->x.training = training;
    for (i = 0; i < p->n_fwd && (!last || p->fwd[i] <= last->id); i++) {
        nncl_node *n = p->graph->nodes[p->fwd[i]];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (d->forward) NNCL_TRY(d->forward(&p->x, n));
    }
    return NNCL_OK;
}

/* Backward from a seed of count floats at src (the host memory stays valid
 * until the queue has passed it). */
static nncl_status plan_backward_seeded(nncl__plan *p, const float *src, size_t count) {
    nncl__view seed;
    int i;
    if (!p->loss) return nncl__fail(p->ctx, NNCL_ERR_STATE, "backward: the plan has no loss");
    memset(p->x.grad_acc, 0, (size_t)p->graph->n_nodes);
    seed = p->x.grad[p->loss->id];
    if (!seed.mem) return NNCL_OK; /* nothing trainable reaches the loss */
    NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->x.dev->queue, seed.mem, CL_FALSE, seed.off * 4, count * 4, src, 0, NULL,
                                         NULL));
    for (i = 0; i < p->n_bwd; i++) {
        nncl_node *n = p->graph->nodes[p->bwd[i]];
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (d->backward) NNCL_TRY(d->backward(&p->x, n));
        if (p->after_backward) NNCL_TRY(p->after_backward(p->after_user, i));
    }
    return NNCL_OK;
}

nncl_status nncl__plan_backward(nncl__plan *p) { return plan_backward_seeded(p, &p->seed, 1); }

nncl_status nncl__plan_backward_from(nncl__plan *p, const float *grad, int batch) {
    if (!p->loss) return nncl__fail(p->ctx, NNCL_ERR_STATE, "backward: the plan has no output");
    return plan_backward_seeded(p, grad, nncl__numel(p->loss, batch));
}

nncl_status nncl__plan_read(nncl__plan *p, const nncl_node *n, float *dst, int batch, cl_event *done) {
    nncl__view v = p->x.value[n->id];
    size_t count = nncl__numel(n, batch);
    if (!v.mem) return nncl__fail(p->ctx, NNCL_ERR_STATE, "node \"%s\" has no value in this plan", n->name);
    if (nncl__plan_view_half(p, v)) { /* converted on the host: a blocking read */
        if (done) *done = NULL;
        return nncl__plan_read_view(p, v, dst, count);
    }
    NNCL_CL(p->ctx, clEnqueueReadBuffer(p->x.dev->queue, v.mem, done ? CL_FALSE : CL_TRUE, v.off * 4, count * 4, dst, 0,
                                        NULL, done));
    return NNCL_OK;
}

#undef PLAN_ALIGN
