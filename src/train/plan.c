/* plan.c - compiling a graph for one device: its buffers, placed as
 * plan_memory.c laid them out and refused when they do not fit, its
 * kernels, and the replay of forward and backward (with the recompute of
 * checkpointed segments) on that memory. */
#include "train/plan.h"

/* ------------------------------------------------------------- creation */

void nncl__plan_free(nncl__plan *p) {
    nncl_device *dev;
    if (!p) return;
    dev = p->ex.dev;
    if (p->xfer) { /* its reads target the plan's gradients */
        clFinish(p->xfer);
        clReleaseCommandQueue(p->xfer);
    }
    if (dev) {
        clFinish(dev->queue);
        int a;
        for (a = 0; a < p->n_arenas; a++) nncl__buffer_release(dev, p->arenas[a], p->arena_floats * 4);
        if (!p->n_arenas) nncl__buffer_release(dev, p->arena, p->arena_floats * (p->ex.store ? 2 : 4));
        nncl__buffer_release(dev, p->arena32, p->arena32_floats * 4);
        nncl__buffer_release(dev, p->ex.params_h, p->graph->n_params * 2);
        nncl__buffer_release(dev, p->ex.params, p->graph->n_params * 4);
        nncl__buffer_release(dev, p->ex.grads, p->graph->n_trainable * 4);
        nncl__buffer_release(dev, p->ex.state, p->graph->n_state * 4);
        nncl__buffer_release(dev, p->ex.gemm_temp, p->gemm_temp_bytes);
        nncl__buffer_release(dev, p->opt, p->opt_floats * 4);
        nncl__buffer_release(dev, p->scratch, p->scratch_floats * 4);
        if (p->shadow) nncl__buffer_release(dev, p->shadow, p->graph->n_state * 4);
    }
    NNCL_FREE(p->ex.value); NNCL_FREE(p->ex.grad); NNCL_FREE(p->ex.aux); NNCL_FREE(p->ex.grad_acc);
    NNCL_FREE(p->ex.kernels);
    NNCL_FREE(p->ex.kbase);
    NNCL_FREE(p->rvalue); NNCL_FREE(p->raux); NNCL_FREE(p->fvalue); NNCL_FREE(p->faux); NNCL_FREE(p->rec_place);
    NNCL_FREE(p->arenas);
    nncl__plan_schedule_free(p);
    nncl__plan_fuse_free(p);
    NNCL_FREE(p);
}

/* ------------------------------------------------------------- half storage */

/* Whether input node n is read as fp32 (labels, targets: an f32_in slot of
 * a consumer); *mixed is set when another consumer reads it as half. */
int nncl__plan_input_f32(const nncl_graph *g, const nncl_node *n, int *mixed) {
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
            nncl__plan_input_f32(g, n, &mixed);
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

int nncl__plan_view_half(const nncl__plan *p, nncl__view v) {
    return p->ex.store && v.mem && (v.mem == p->arena || v.mem == p->ex.params_h);
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
    k.dev = p->ex.dev;
    k.slot = p->store_k;
    return k;
}

nncl_status nncl__plan_sync_params(nncl__plan *p) {
    size_t n = p->graph->n_params;
    if (!p->ex.store || !n) return NNCL_OK;
    return nncl__k_store(plan_store_kernel(p), plan_whole(p->ex.params_h), plan_whole(p->ex.params), n);
}

nncl_status nncl__plan_read_view(nncl__plan *p, nncl__view v, float *dst, size_t count) {
    size_t i;
    if (!nncl__plan_view_half(p, v)) {
        NNCL_CL(p->ctx, clEnqueueReadBuffer(p->ex.dev->queue, v.mem, CL_TRUE, v.off * 4, count * 4, dst, 0, NULL, NULL));
        return NNCL_OK;
    }
    NNCL_CL(p->ctx, clEnqueueReadBuffer(p->ex.dev->queue, v.mem, CL_TRUE, v.off * 2, count * 2, dst, 0, NULL, NULL));
    /* in place from the end: element i's 2 bytes sit at or past 2i, its float goes to 4i */
    for (i = count; i-- > 0;) {
        const unsigned char *h = (const unsigned char *)dst + 2 * i;
        unsigned bits;
        uint16_t u;
        memcpy(&u, h, 2);
        bits = u;
        dst[i] = p->ex.store == 1 ? nncl__f16_to_f32(bits) : nncl__bf16_to_f32(bits);
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

static nncl_status plan_buffers(nncl__plan *p, const nncl__plan_block *b, int nb) {
    nncl_graph *g = p->graph;
    nncl_context *ctx = p->ctx;
    nncl_device *dev = p->ex.dev;
    size_t total = 0;
    int i;
    /* bytes in size_t: checked, a 32-bit size_t holds less than 2^31 floats' worth */
    if (nncl__add_overflow(p->arena_floats, g->n_params, &total) || nncl__add_overflow(total, g->n_trainable, &total) ||
        nncl__add_overflow(total, g->n_state, &total) || nncl__mul_overflow(total, 4, &total))
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "plan: %zu + %zu + %zu floats overflow the size of memory",
                          p->arena_floats, g->n_params, g->n_state);
    NNCL_TRY(nncl__buffer_create(ctx, dev, p->arena_floats * (p->ex.store ? 2 : 4), &p->arena));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_params * 4, &p->ex.params));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_trainable * 4, &p->ex.grads));
    NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_state * 4, &p->ex.state));
    p->bytes = total;
    if (p->ex.store) { /* the arena counted at 4 bytes above holds 2-byte elements */
        p->bytes -= (uint64_t)p->arena_floats * 2;
        NNCL_TRY(nncl__buffer_create(ctx, dev, p->arena32_floats * 4, &p->arena32));
        NNCL_TRY(nncl__buffer_create(ctx, dev, g->n_params * 2, &p->ex.params_h));
        p->bytes += (uint64_t)p->arena32_floats * 4 + (uint64_t)g->n_params * 2;
    }
    for (i = 0; i < nb; i++) {
        nncl__view v;
        v.mem = b[i].f32 ? p->arena32 : p->arena;
        v.off = b[i].off;
        if (b[i].kind == 0 && b[i].rec == 2) { /* a second recompute's place, at its entry of rec */
            int r;
            for (r = 0; r < p->n_rec; r++)
                if (p->rec[r] == b[i].node && p->rec_again[r]) p->rec_place[r] = v;
        } else if (b[i].kind == 0) {
            (b[i].rec ? p->rvalue : p->ex.value)[b[i].node] = v;
        } else if (b[i].kind == 1) {
            p->ex.grad[b[i].node] = v;
        } else {
            (b[i].rec ? p->raux : p->ex.aux)[b[i].node] = v;
        }
    }
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        if (n->op == NNCL_OP_PARAM) {
            p->ex.value[i].mem = p->ex.store ? p->ex.params_h : p->ex.params;
            p->ex.value[i].off = n->param_off;
            if (n->trainable) {
                p->ex.grad[i].mem = p->ex.grads;
                p->ex.grad[i].off = n->param_off;
            }
        } else if (nncl__opdef_get(n->op)->alias) {
            const nncl_node *r = nncl__plan_root(n);
            p->ex.value[i] = p->ex.value[r->id];
            p->ex.grad[i] = p->ex.grad[r->id];
            p->rvalue[i] = p->rvalue[r->id];
        }
    }
    for (i = 0; i < g->n_nodes; i++)
        if (nncl__plan_away(p, i)) { /* computed only by a prediction of it, into the fused node's places */
            p->ex.value[i] = p->ex.value[p->into[i]];
            p->ex.aux[i] = p->ex.aux[p->into[i]];
        }
    memcpy(p->fvalue, p->ex.value, (size_t)g->n_nodes * sizeof *p->fvalue);
    memcpy(p->faux, p->ex.aux, (size_t)g->n_nodes * sizeof *p->faux);
    return NNCL_OK;
}

nncl_status nncl__plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                              nncl__plan **out) {
    return nncl__plan_create_store(ctx, g, loss, device, max_batch, 0, out);
}

nncl_status nncl__plan_create_store(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                                    int store, nncl__plan **out) {
    nncl__plan_opts o;
    memset(&o, 0, sizeof o);
    o.max_batch = max_batch;
    o.store = store;
    return nncl__plan_create_opts(ctx, g, loss, device, &o, out);
}

/* Refuses a plan that needs more than the device has (its memory or the
 * cap, less what nncl holds there already), before it allocates. */
static nncl_status plan_check_fits(nncl__plan *p, uint64_t held, uint64_t need, uint64_t workspace) {
    nncl_device *dev = p->ex.dev;
    uint64_t limit = nncl__device_memory_limit(p->ctx, dev);
    uint64_t have = limit > held ? limit - held : 0;
    char s[5][32];
    if (need + workspace <= have) return NNCL_OK;
    return nncl__fail(p->ctx, NNCL_ERR_OUT_OF_MEMORY,
                      "plan for device %d (%s) at max_batch %d: needs %s (activations %s%s%s%s), but the device has "
                      "%s%s, %s of it held already; try gradient checkpointing (train config checkpoint = "
                      "NNCL_CHECKPOINT_AUTO%s), a smaller max_batch (nncl_train_max_batch finds the largest that "
                      "fits), half storage (precision = NNCL_PRECISION_FP16 or _BF16%s) or more devices",
                      dev->info.index, dev->info.name, p->max_batch,
                      nncl__bytes_str(need + workspace, s[0], sizeof s[0]),
                      nncl__bytes_str(nncl__plan_arena_bytes(p), s[1], sizeof s[1]),
                      workspace ? ", GEMM workspace " : "",
                      workspace ? nncl__bytes_str(workspace, s[2], sizeof s[2]) : "",
                      p->n_segments > 1 ? ", checkpointed" : "", nncl__bytes_str(limit, s[3], sizeof s[3]),
                      limit < dev->info.global_mem ? " (the memory cap)" : "", nncl__bytes_str(held, s[4], sizeof s[4]),
                      p->n_segments > 1 ? ": on already" : "", p->ex.store ? ": on already" : "");
}

/* The kernel families of p's ops, the storage conversion's with half
 * storage and (train) the optimizer's, built as one program with options
 * (nncl__program_bundle): one build, and one load when cached, instead of
 * one for each family. $NNCL_BUNDLE=0 builds each family on first use
 * instead: a kernel is then compiled once per process and options, not
 * once per bundle it is in, which costs a cold cache less and a warm
 * start more (a load per family). */
static nncl_status plan_bundle(nncl__plan *p, int train, const char *options) {
    const char *fam[32], *env = getenv("NNCL_BUNDLE");
    char list[256];
    size_t at = 0;
    int i, k, j, n = 0;
    if (env && !strcmp(env, "0")) return NNCL_OK;
    for (i = -2; i < p->n_fwd; i++) {
        const nncl__opdef *d = i >= 0 ? nncl__opdef_get(nncl__plan_node(p, p->fwd[i])->op) : NULL;
        int nk = d ? nncl__op_kernel_count(d) : 1;
        for (k = 0; k < nk; k++) {
            const char *f = d ? (d->kernels[k].name ? d->kernels[k].family : NULL)
                              : i == -2 ? (p->ex.store ? "half" : NULL) : train ? "optimizer" : NULL;
            for (j = 0; f && j < n; j++)
                if (!strcmp(fam[j], f)) f = NULL;
            if (!f) continue;
            if (n == 32 || at + strlen(f) + 2 > sizeof list) return NNCL_OK; /* too many: each built on first use */
            fam[n++] = f;
            at += (size_t)sprintf(list + at, "%s%s", at ? "," : "", f);
        }
    }
    return n ? nncl__program_bundle(p->ctx, p->ex.dev, list, options) : NNCL_OK;
}

nncl_status nncl__plan_create_opts(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device,
                                   const nncl__plan_opts *o, nncl__plan **out) {
    static const char *const opts[3] = {"", "-DNNCL_STORE=1", "-DNNCL_STORE=2"};
    nncl__plan *p;
    nncl__plan_block *blocks = NULL;
    int nb = 0, i, max_batch = o->max_batch, store = o->store, deferred = 0;
    size_t n = 0;
    uint64_t need = 0, held;
    nncl_status st;
    nncl_device *dev = nncl__device(ctx, device);
    *out = NULL;
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    held = dev->mem_in_use;
    if (!g || max_batch <= 0) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: graph is NULL or batch %d <= 0", max_batch);
    if (loss && (loss->id >= g->n_nodes || g->nodes[loss->id] != loss))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: the loss is not a node of this graph");
    if (loss && !o->stage && (loss->batched || loss->sample_numel != 1))
        return nncl__fail(ctx, NNCL_ERR_SHAPE, "plan: the loss \"%s\" must be a scalar, not per-sample or of %zu elements",
                          loss->name, loss->sample_numel);
    if (store < 0 || store > 2) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "plan: storage %d is not 0, 1 or 2", store);
    if (o->checkpoint < NNCL_CHECKPOINT_NONE || o->checkpoint > NNCL_CHECKPOINT_MARKED)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "plan: checkpoint %d is not NNCL_CHECKPOINT_NONE, _AUTO or _MARKED", o->checkpoint);
    if (store) NNCL_TRY(nncl__plan_check_store(ctx, g, loss, store));
    NNCL_TRY(nncl__graph_layout(g));
    p = (nncl__plan *)nncl__calloc(1, sizeof *p);
    if (!p) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    p->ctx = ctx;
    p->graph = g;
    p->loss = loss;
    p->device = device;
    p->max_batch = max_batch;
    p->dloss = 1.0f; /* the plan outlives the non-blocking write of it */
    p->ex.ctx = ctx;
    p->ex.dev = dev;
    p->ex.graph = g;
    p->ex.batch = max_batch;
    p->ex.global_batch = max_batch;
    p->ex.store = store;
    n = (size_t)g->n_nodes;
    if (nncl__plan_fuse(p) != NNCL_OK) {
        nncl__plan_free(p);
        return NNCL_ERR_OUT_OF_MEMORY;
    }
    p->ex.value = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->ex.grad = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->ex.aux = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->rvalue = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->raux = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->fvalue = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->faux = (nncl__view *)nncl__calloc(n, sizeof(nncl__view));
    p->rec_place = (nncl__view *)nncl__calloc(2 * n, sizeof(nncl__view));
    p->ex.grad_acc = (unsigned char *)nncl__calloc(n, 1);
    p->ex.kbase = (size_t *)nncl__calloc(n + 1, sizeof(size_t));
    for (i = 0; p->ex.kbase && i < (int)n; i++) /* each node the slots its op declares, no more */
        p->ex.kbase[i + 1] = p->ex.kbase[i] + (size_t)nncl__op_kernel_count(nncl__opdef_get(nncl__plan_node(p, i)->op));
    p->ex.kernels = p->ex.kbase ? (nncl__kslot *)nncl__calloc(p->ex.kbase[n] + 1, sizeof(nncl__kslot)) : NULL;
    if (!p->ex.value || !p->ex.grad || !p->ex.aux || !p->rvalue || !p->raux || !p->fvalue || !p->faux || !p->rec_place ||
        !p->ex.grad_acc || !p->ex.kernels) {
        nncl__plan_free(p);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    st = plan_check_node_sizes(p);
    if (st == NNCL_OK) st = nncl__plan_layout(p, o->checkpoint, &blocks, &nb);
    if (st == NNCL_OK && p->arena_floats > (size_t)INT_MAX) /* a kernel could not address it, whatever the memory */
        st = nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY,
                        "plan: the activations need %zu floats at max_batch %d, more than the 2^31-1 a kernel can "
                        "address; lower max_batch", p->arena_floats, max_batch);
    if (st == NNCL_OK)
        st = plan_check_fits(p, held, need = nncl__plan_need(p, o->train_floats), p->ex.store ? p->stage_floats * 4 : 0);
    if (st == NNCL_OK) st = plan_buffers(p, blocks, nb);
    NNCL_FREE(blocks);
    /* Every op's kernels are resolved and its GEMM workspace sized now, so
     * that a step neither compiles, nor looks up, nor allocates; their
     * families first built as one program. */
    if (st == NNCL_OK) st = plan_bundle(p, loss != NULL, opts[store]);
    /* the GEMM variants the products take, as one program at the loop's end */
    if (st == NNCL_OK && (st = nncl__gemm_defer(ctx, dev, 1)) == NNCL_OK) deferred = 1;
    for (i = 0; st == NNCL_OK && i < p->n_fwd + g->n_nodes; i++) { /* and the nodes fused away, for a prediction */
        nncl_node *nd = i < p->n_fwd ? nncl__plan_node(p, p->fwd[i]) : g->nodes[i - p->n_fwd];
        const nncl__opdef *d = nncl__opdef_get(nd->op);
        size_t bytes = 0;
        int k;
        if (i >= p->n_fwd && !nncl__plan_away(p, nd->id)) continue;
        for (k = 0; st == NNCL_OK && k < nncl__op_kernel_count(d); k++)
            if (d->kernels[k].name)
                st = nncl__kslot_resolve_opts(ctx, dev, d->kernels[k].family, opts[store], d->kernels[k].name,
                                              &p->ex.kernels[p->ex.kbase[nd->id] + (size_t)k]);
        p->ex.gemm_cap = p->gemm_temp_bytes;
        if (st == NNCL_OK && d->prepare) st = d->prepare(&p->ex, nd, &bytes);
        if (bytes > p->gemm_temp_bytes) p->gemm_temp_bytes = bytes;
    }
    if (deferred) { /* after a failure too: the device's next plan defers afresh */
        nncl_status built = nncl__gemm_defer(ctx, dev, 0);
        if (st == NNCL_OK) st = built;
    }
    if (st == NNCL_OK && store) st = nncl__kslot_resolve_opts(ctx, dev, "half", opts[store], "nncl_store_f32", &p->store_k);
    if (store && p->gemm_temp_bytes < p->stage_floats * 4) p->gemm_temp_bytes = p->stage_floats * 4; /* the feeds' stage */
    if (st == NNCL_OK && p->gemm_temp_bytes) { /* known once the kernels are timed */
        st = plan_check_fits(p, held, need, p->gemm_temp_bytes);
        if (st == NNCL_OK) st = nncl__buffer_create(ctx, dev, p->gemm_temp_bytes, &p->ex.gemm_temp);
        if (st == NNCL_OK) p->bytes += p->gemm_temp_bytes;
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
    v = p->ex.value[input->id];
    if (!v.mem) return NNCL_OK; /* an input nothing reads */
    n = nncl__numel(input, batch);
    if (nncl__plan_view_half(p, v)) { /* fp32 to the stage, converted into the arena */
        NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->ex.dev->queue, p->ex.gemm_temp, CL_FALSE, 0, n * 4, data, 0, NULL, NULL));
        return nncl__k_store(plan_store_kernel(p), v, plan_whole(p->ex.gemm_temp), n);
    }
    NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->ex.dev->queue, v.mem, CL_FALSE, v.off * 4, n * 4, data, 0, NULL, NULL));
    return NNCL_OK;
}

nncl_status nncl__plan_forward(nncl__plan *p, int batch, int training) {
    return nncl__plan_forward_to(p, batch, training, NULL);
}

/* Forward to last, a node fused away (plan_fuse.c): every node before the
 * fused one, then the chain's own nodes from its batch norm up to last, in
 * the fused node's value (an add in place) and aux. */
static nncl_status plan_forward_away(nncl__plan *p, const nncl_node *last) {
    int i, f = p->into[last->id];
    for (i = 0; i < p->n_fwd && p->fwd[i] < f; i++) {
        nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        if (nncl__opdef_get(n->op)->forward) NNCL_TRY(nncl__opdef_get(n->op)->forward(&p->ex, n));
    }
    for (i = 0; i <= last->id; i++)
        if (p->into[i] == f) NNCL_TRY(nncl__opdef_get(p->graph->nodes[i]->op)->forward(&p->ex, p->graph->nodes[i]));
    p->away_read = last->id;
    return NNCL_OK;
}

nncl_status nncl__plan_forward_to(nncl__plan *p, int batch, int training, const nncl_node *last) {
    int i;
    if (batch <= 0 || batch > p->max_batch)
        return nncl__fail(p->ctx, NNCL_ERR_INVALID_ARGUMENT, "batch %d is not in 1..%d", batch, p->max_batch);
    p->ex.batch = batch;
    p->ex.training = training;
    if (p->n_rec) { /* the forward's places, where backward left the recomputed ones */
        memcpy(p->ex.value, p->fvalue, (size_t)p->graph->n_nodes * sizeof *p->fvalue);
        memcpy(p->ex.aux, p->faux, (size_t)p->graph->n_nodes * sizeof *p->faux);
    }
    p->away_read = -1;
    if (last && nncl__plan_away(p, last->id)) return plan_forward_away(p, last);
    for (i = 0; i < p->n_fwd && (!last || p->fwd[i] <= last->id); i++) {
        nncl_node *n = nncl__plan_node(p, p->fwd[i]);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        if (d->forward) NNCL_TRY(d->forward(&p->ex, n));
    }
    return NNCL_OK;
}

/* Backward from the loss's gradient, count floats at src (the host memory
 * stays valid until the queue has passed it). */
static nncl_status plan_backward_with(nncl__plan *p, const float *src, size_t count) {
    nncl__view dloss;
    int i;
    if (!p->loss) return nncl__fail(p->ctx, NNCL_ERR_STATE, "backward: the plan has no loss");
    memset(p->ex.grad_acc, 0, (size_t)p->graph->n_nodes);
    for (i = 0; p->accumulate && i < p->graph->n_nodes; i++) /* as if already written this step: added to */
        if (p->graph->nodes[i]->op == NNCL_OP_PARAM && p->graph->nodes[i]->trainable) p->ex.grad_acc[i] = 1;
    dloss = p->ex.grad[p->loss->id];
    if (!dloss.mem) return NNCL_OK; /* nothing trainable reaches the loss */
    NNCL_CL(p->ctx, clEnqueueWriteBuffer(p->ex.dev->queue, dloss.mem, CL_FALSE, dloss.off * 4, count * 4, src, 0, NULL,
                                         NULL));
    /* The forward's dropped values are dead now: their readers from here
     * on find the recomputed ones (aliases included). */
    for (i = 0; p->n_rec && i < p->graph->n_nodes; i++) {
        if (p->rvalue[i].mem) p->ex.value[i] = p->rvalue[i];
        if (p->raux[i].mem) p->ex.aux[i] = p->raux[i];
    }
    for (i = 0; i < p->n_bwd; i++) {
        nncl_node *n = nncl__plan_node(p, p->bwd[i]);
        const nncl__opdef *d = nncl__opdef_get(n->op);
        int r;
        for (r = p->rec_before[i]; r < p->rec_before[i + 1]; r++) { /* the segment's forward again */
            nncl_node *c = nncl__plan_node(p, p->rec[r]);
            nncl_status st;
            if (p->rec_again[r]) p->ex.value[c->id] = p->rec_place[r];
            p->ex.recompute = 1;
            st = nncl__opdef_get(c->op)->forward(&p->ex, c);
            p->ex.recompute = 0;
            NNCL_TRY(st);
        }
        if (d->backward) NNCL_TRY(d->backward(&p->ex, n));
        if (p->after_backward) NNCL_TRY(p->after_backward(p->after_user, i));
    }
    return NNCL_OK;
}

nncl_status nncl__plan_backward(nncl__plan *p) { return plan_backward_with(p, &p->dloss, 1); }

nncl_status nncl__plan_backward_scaled(nncl__plan *p, const float *dloss) { return plan_backward_with(p, dloss, 1); }

nncl_status nncl__plan_backward_from(nncl__plan *p, const float *grad, int batch) {
    if (!p->loss) return nncl__fail(p->ctx, NNCL_ERR_STATE, "backward: the plan has no output");
    return plan_backward_with(p, grad, nncl__numel(p->loss, batch));
}

int nncl__plan_arenas(nncl__plan *p, int n) {
    nncl_device *dev = p->ex.dev;
    size_t bytes = p->arena_floats * 4;
    if (p->arenas) return p->n_arenas; /* made once: the list is sized for that call's n */
    if (p->ex.store || !p->arena || n <= 1) return 1;
    if (!(p->arenas = (cl_mem *)nncl__calloc((size_t)n, sizeof(cl_mem)))) return 1;
    p->arenas[0] = p->arena;
    p->n_arenas = 1;
    p->cur_arena = 0;
    while (p->n_arenas < n) {
        uint64_t lim = nncl__device_memory_limit(p->ctx, dev);
        if (dev->mem_in_use + bytes > lim || nncl__buffer_create(p->ctx, dev, bytes, &p->arenas[p->n_arenas]) != NNCL_OK)
            break;
        p->n_arenas++;
        p->bytes += bytes;
    }
    return p->n_arenas;
}

static void plan_move_views(nncl__view *v, int n, cl_mem from, cl_mem to) {
    int i;
    for (i = 0; i < n; i++)
        if (v[i].mem == from) v[i].mem = to;
}

void nncl__plan_use_arena(nncl__plan *p, int i) {
    cl_mem from, to;
    int n = p->graph->n_nodes;
    if (i < 0 || i >= p->n_arenas || i == p->cur_arena) return;
    from = p->arenas[p->cur_arena];
    to = p->arenas[i];
    plan_move_views(p->ex.value, n, from, to);
    plan_move_views(p->ex.grad, n, from, to);
    plan_move_views(p->ex.aux, n, from, to);
    plan_move_views(p->rvalue, n, from, to);
    plan_move_views(p->raux, n, from, to);
    plan_move_views(p->fvalue, n, from, to);
    plan_move_views(p->faux, n, from, to);
    plan_move_views(p->rec_place, 2 * n, from, to);
    p->arena = to;
    p->cur_arena = i;
}

nncl_status nncl__plan_read(nncl__plan *p, const nncl_node *n, float *dst, int batch, cl_event *done) {
    nncl__view v = p->ex.value[n->id];
    size_t count = nncl__numel(n, batch);
    if (!v.mem) return nncl__fail(p->ctx, NNCL_ERR_STATE, "node \"%s\" has no value in this plan", n->name);
    if (nncl__plan_away(p, n->id) && p->away_read != n->id)
        return nncl__fail(p->ctx, NNCL_ERR_STATE, "node \"%s\" is computed inside the fused batch norm \"%s\" in this "
                          "plan, which keeps no value of it; predict it (nncl_trainer_predict), or set NNCL_BN_FUSE=0",
                          n->name, nncl__plan_node(p, p->into[n->id])->name);
    if (nncl__plan_view_half(p, v)) { /* converted on the host: a blocking read */
        if (done) *done = NULL;
        return nncl__plan_read_view(p, v, dst, count);
    }
    NNCL_CL(p->ctx, clEnqueueReadBuffer(p->ex.dev->queue, v.mem, done ? CL_FALSE : CL_TRUE, v.off * 4, count * 4, dst, 0,
                                        NULL, done));
    return NNCL_OK;
}

