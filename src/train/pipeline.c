/* pipeline.c - the stages of a pipelined trainer: where the graph may be cut
 * (a node whose value alone crosses to the nodes after it), each layer's
 * time on each device (its subgraph timed there), the cut that makes the
 * slowest stage fastest with every stage within its device's memory (a
 * dynamic programme over the cut points, for every order of the devices
 * up to 5 of them), and each stage's subgraph (copies of its nodes,
 * the leaves they read, an input for the previous stage's output) with its
 * plan, training buffers and initial values taken from the whole graph's. */
#include "train/pipeline.h"
#include "train/optim.h"
#include <float.h>

/* The nodes that can end a stage, in graph order, into cand: op nodes
 * before the loss, per sample, such that every op node after them up to
 * the loss reads, of the op nodes up to them, only them (parameters and
 * inputs go with whichever stage reads them): no op node before c is read
 * after c. */
static int pipe_cuts(const nncl_graph *g, const nncl_node *loss, int *cand, int *last_read) {
    int i, k, n = 0, reach = -1;
    for (i = 0; i <= loss->id; i++) last_read[i] = -1;
    for (i = 0; i <= loss->id; i++)
        for (k = 0; k < g->nodes[i]->n_in; k++) last_read[g->nodes[i]->in[k]->id] = i;
    for (i = 0; i < loss->id; i++) {
        const nncl_node *c = g->nodes[i];
        if (c->op == NNCL_OP_INPUT || c->op == NNCL_OP_PARAM) continue;
        if (c->batched && reach <= i) cand[n++] = i;
        if (last_read[i] > reach) reach = last_read[i];
    }
    return n;
}

/* Arithmetic of one sample through node n (forward; backward is about
 * twice it): products count 2 per multiply-add, the rest a few per
 * element. */
static double pipe_cost(const nncl_node *n) {
    double out = (double)n->sample_numel;
    if ((n->op == NNCL_OP_LINEAR || n->op == NNCL_OP_CONV2D) && n->in[1]->shape[0] > 0)
        return 2.0 * out * (double)nncl__numel(n->in[1], 1) / n->in[1]->shape[0];
    if (n->op == NNCL_OP_MATMUL) return 2.0 * out * n->in[0]->shape[n->in[0]->ndim - 1];
    if (n->op == NNCL_OP_CAUSAL_ATTENTION) return 4.0 * out * n->in[0]->shape[1];
    return 4.0 * out;
}

/* Device bytes of a stage over the op nodes (lo, hi]: its parameters with
 * their gradients and optimizer state, and every value and gradient of a
 * micro-batch (an upper bound: the plan reuses memory). */
static double pipe_bytes(const nncl_graph *g, int lo, int hi, int mb, size_t optk, unsigned char *seen) {
    double b = 0;
    int i, k;
    memset(seen, 0, (size_t)g->n_nodes);
    for (i = lo + 1; i <= hi; i++) {
        const nncl_node *n = g->nodes[i];
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM) continue;
        b += 8.0 * (double)nncl__numel(n, mb);
        for (k = 0; k < n->n_in; k++) {
            const nncl_node *r = n->in[k];
            if (seen[r->id]) continue;
            seen[r->id] = 1;
            if (r->op == NNCL_OP_PARAM) /* trainable: values, gradients, their sum, optimizer state */
                b += 4.0 * (double)nncl__numel(r, 1) * (r->trainable ? 3.0 + (double)optk : 1.0);
            else if (r->op == NNCL_OP_INPUT || r->id <= lo) b += 8.0 * (double)nncl__numel(r, mb);
        }
    }
    return b;
}

/* What the cut is chosen from. */
typedef struct pipe_plan {
    int k, n_cand, *cand;      /* cut points in graph order */
    /* seconds on device d of the op nodes up to cand[j] (j = n_cand: to the
     * loss), at cost[d * (n_cand + 1) + j], of those that run there */
    double *cost;
    int *never;                /* the same places: layers up to cand[j] that do not run on d */
    double *mem;               /* per device */
    int mb;
    size_t optk;
    unsigned char *seen;
    double *bytes;             /* pipe_bytes of layers i..j-1 at [i * (n_cand + 2) + j], 0: not yet */
} pipe_plan;

static int pipe_end(const pipe_plan *pp, const nncl_node *loss, int j) {
    return j < pp->n_cand ? pp->cand[j] : loss->id;
}

/* The device bytes of a stage of layers i..j-1, worked out once. */
static double pipe_stage_bytes(const nncl_trainer *t, pipe_plan *pp, int i, int j) {
    double *b = &pp->bytes[(size_t)i * (size_t)(pp->n_cand + 2) + (size_t)j];
    if (*b == 0)
        *b = pipe_bytes(t->graph, i == 0 ? -1 : pipe_end(pp, t->loss, i - 1), pipe_end(pp, t->loss, j - 1), pp->mb,
                        pp->optk, pp->seen) + 1;
    return *b - 1;
}

/* Best cut for the devices in order perm: ends[s] indexes cand (n_cand for
 * the last stage); returns the slowest stage's time, DBL_MAX when nothing
 * fits. */
static double pipe_best(const nncl_trainer *t, pipe_plan *pp, const int *perm, int *ends) {
    int L = pp->n_cand + 1, k = pp->k, s, j, i;
    double *best = (double *)nncl__calloc((size_t)(k + 1) * (size_t)(L + 1), sizeof(double));
    int *from = (int *)nncl__calloc((size_t)(k + 1) * (size_t)(L + 1), sizeof(int));
    double r = DBL_MAX;
    if (!best || !from) {
        NNCL_FREE(best); NNCL_FREE(from);
        return DBL_MAX;
    }
    /* best[s][j]: stages 0..s-1 cover layers 0..j-1 (layer j: the op nodes after cut j-1 up to cut j) */
    for (s = 0; s <= k; s++)
        for (j = 0; j <= L; j++) best[s * (L + 1) + j] = DBL_MAX;
    best[0] = 0;
    for (s = 1; s <= k; s++)
        for (j = s; j <= L - (k - s); j++)
            for (i = s - 1; i < j; i++) {
                const double *cost = pp->cost + (size_t)perm[s - 1] * (size_t)L;
                double prev = best[(s - 1) * (L + 1) + i], c;
                if (prev == DBL_MAX) continue;
                const int *never = pp->never + (size_t)perm[s - 1] * (size_t)L;
                c = cost[j - 1] - (i == 0 ? 0 : cost[i - 1]);
                if (never[j - 1] - (i == 0 ? 0 : never[i - 1]) > 0) continue;
                if (c < prev) c = prev;
                if (c >= best[s * (L + 1) + j]) continue;
                if (pipe_stage_bytes(t, pp, i, j) > pp->mem[perm[s - 1]]) continue;
                best[s * (L + 1) + j] = c;
                from[s * (L + 1) + j] = i;
            }
    if (best[k * (L + 1) + L] < DBL_MAX) {
        r = best[k * (L + 1) + L];
        for (s = k, j = L; s > 0; s--) {
            ends[s - 1] = j - 1;
            j = from[s * (L + 1) + j];
        }
    }
    NNCL_FREE(best); NNCL_FREE(from);
    return r;
}

/* Every order of the k devices (Heap's algorithm), or the given one past
 * 5 devices; the best cut of them all into ends and perm. */
static nncl_status pipe_choose(nncl_trainer *t, pipe_plan *pp, int *ends, int *perm) {
    int k = pp->k, c[64], p[64], e[64], i, tmp;
    double best = DBL_MAX, r;
    for (i = 0; i < k; i++) p[i] = i, c[i] = 0;
    r = pipe_best(t, pp, p, e);
    if (r < best) best = r, memcpy(ends, e, sizeof(int) * (size_t)k), memcpy(perm, p, sizeof(int) * (size_t)k);
    for (i = 1; k <= 5 && i < k;) {
        if (c[i] < i) {
            int a = i % 2 ? c[i] : 0;
            tmp = p[a]; p[a] = p[i]; p[i] = tmp;
            r = pipe_best(t, pp, p, e);
            if (r < best) best = r, memcpy(ends, e, sizeof(int) * (size_t)k), memcpy(perm, p, sizeof(int) * (size_t)k);
            c[i]++;
            i = 1;
        } else c[i++] = 0;
    }
    if (best == DBL_MAX)
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY,
                          "nncl_trainer_create: the model fits on none of the cuts into %d stages over the devices' "
                          "memory at micro-batch %d; use more devices or micro-batches, or a smaller model", k, pp->mb);
    return NNCL_OK;
}

/* The user's cuts: node names in graph order, each a cut point. */
static nncl_status pipe_given(nncl_trainer *t, pipe_plan *pp, int *ends, int *perm) {
    int s, j, prev = -1;
    for (s = 0; s < pp->k; s++) perm[s] = s;
    for (s = 0; s + 1 < pp->k; s++) {
        const char *name = t->cfg.cuts[s];
        nncl_node *n = name ? nncl_graph_find(t->graph, name) : NULL;
        if (!n || n->id >= t->loss->id || n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_trainer_create: cut %d \"%s\" is not an op node before the loss", s,
                              name ? name : "(null)");
        for (j = 0; j < pp->n_cand && pp->cand[j] != n->id; j++) {}
        if (j == pp->n_cand)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_trainer_create: cut %d \"%s\" is not a cut: a node after it reads a value from "
                              "before it (a cut inside a layer)", s, name);
        if (j <= prev)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_trainer_create: cut %d \"%s\" does not come after cut %d", s, name, s - 1);
        ends[s] = prev = j;
    }
    ends[pp->k - 1] = pp->n_cand;
    for (s = 0; s < pp->k; s++) {
        double need = pipe_stage_bytes(t, pp, s ? ends[s - 1] + 1 : 0, ends[s] + 1);
        if (need > pp->mem[s])
            return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY,
                              "nncl_trainer_create: stage %d needs about %.0f bytes, device %d has %.0f", s, need,
                              t->device[s], pp->mem[s]);
    }
    return NNCL_OK;
}

/* ------------------------------------------------------------- subgraphs */

static nncl_node *pipe_leaf(nncl__stage *st, nncl_node **map, nncl_node *r) {
    nncl_node *c;
    if (map[r->id]) return map[r->id];
    if (r->op == NNCL_OP_INPUT) {
        c = nncl_input(st->g, r->name, r->ndim - 1, r->shape + 1);
        if (c) {
            st->inputs[2 * st->n_inputs] = r;
            st->inputs[2 * st->n_inputs + 1] = c;
            st->n_inputs++;
        }
    } else {
        c = nncl_param(st->g, r->name, r->ndim, r->shape, (nncl_init_kind)r->init, r->init_scale);
        if (c && !r->trainable) nncl_param_freeze(st->g, c, 1);
        if (c && r->no_decay) nncl_param_decay(st->g, c, 0);
    }
    return map[r->id] = c;
}

/* Stage st over the op nodes (lo, hi] of g. */
static nncl_status pipe_subgraph(nncl_trainer *t, nncl__stage *st, int lo, int hi, nncl_node **map) {
    nncl_graph *g = t->graph;
    int i, k, np = 0, ns = 0;
    memset(map, 0, (size_t)g->n_nodes * sizeof *map);
    st->g = nncl_graph_create(t->ctx, g->seed);
    st->inputs = (nncl_node **)nncl__calloc((size_t)g->n_nodes * 2 + 2, sizeof(nncl_node *));
    if (!st->g || !st->inputs) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    st->last = hi;
    if (lo >= 0) {
        nncl_node *c = g->nodes[lo];
        st->in = nncl_input(st->g, c->name, c->ndim - 1, c->shape + 1);
        if (!st->in) return NNCL_ERR_INVALID_ARGUMENT;
        st->in->needs_grad = c->needs_grad; /* its gradient goes back to the previous stage */
        map[lo] = st->in;
    }
    for (i = lo + 1; i <= hi; i++) {
        nncl_node *n = g->nodes[i], *in[NNCL_MAX_INPUTS];
        if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM) continue;
        for (k = 0; k < n->n_in; k++) {
            nncl_node *r = n->in[k];
            in[k] = r->op == NNCL_OP_INPUT || r->op == NNCL_OP_PARAM ? pipe_leaf(st, map, r) : map[r->id];
            if (!in[k])
                return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "pipeline: node \"%s\" lost input %d", n->name, k);
        }
        map[i] = nncl__node_add(st->g, n->op, n->name, n->n_in, in, n->iattr, 8, n->fattr, 4);
        if (!map[i]) return NNCL_ERR_INVALID_ARGUMENT;
    }
    st->out = map[hi];
    NNCL_TRY(nncl__graph_layout(st->g));
    for (i = 0; i < st->g->n_nodes; i++) {
        nncl_node *c = st->g->nodes[i];
        np += c->op == NNCL_OP_PARAM;
        ns += c->state_size > 0;
    }
    st->params = (nncl__span *)nncl__calloc((size_t)np + 1, sizeof(nncl__span));
    st->state = (nncl__span *)nncl__calloc((size_t)ns + 1, sizeof(nncl__span));
    if (!st->params || !st->state) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < st->g->n_nodes; i++) {
        nncl_node *c = st->g->nodes[i], *f = nncl_graph_find(g, c->name);
        if (c->op == NNCL_OP_PARAM) {
            nncl__span *sp = &st->params[st->n_params++];
            sp->full = f->param_off;
            sp->own = c->param_off;
            sp->n = nncl__numel(c, 1);
        }
        if (c->state_size) {
            nncl__span *sp = &st->state[st->n_state++];
            sp->full = f->state_off;
            sp->own = c->state_off;
            sp->n = c->state_size;
        }
    }
    return NNCL_OK;
}

/* A stage's plan options: the trainer's, at the micro-batch size, with a
 * non-scalar output where the stage is not the last. */
static nncl_status pipe_plan_opts(nncl_trainer *t, nncl_graph *g, int inner, int mb, nncl__plan_opts *o) {
    NNCL_TRY(nncl__trainer_plan_opts(g, &t->cfg, o));
    o->max_batch = mb;
    o->stage = inner;
    return NNCL_OK;
}

static void pipe_stage_free(nncl__stage *st) {
    nncl_graph_free(st->g);
    NNCL_FREE(st->params); NNCL_FREE(st->state); NNCL_FREE(st->inputs);
    NNCL_FREE(st->saved); NNCL_FREE(st->holds);
}

/* Seconds of a forward and backward of the op nodes (lo, hi] on device d
 * at micro-batch mb: their subgraph planned there and run on zeros, once
 * to warm up and once timed; *sec < 0 when the plan does not fit there. */
static nncl_status pipe_time(nncl_trainer *t, int lo, int hi, int d, int mb, nncl_node **map, const float *zeros,
                             double *sec) {
    nncl__stage st;
    nncl__plan *p = NULL;
    nncl__plan_opts o;
    nncl_status s;
    int r, i;
    memset(&st, 0, sizeof st);
    *sec = -1;
    s = pipe_subgraph(t, &st, lo, hi, map);
    if (s == NNCL_OK) s = pipe_plan_opts(t, st.g, hi != t->loss->id, mb, &o);
    if (s == NNCL_OK) s = nncl__plan_create_opts(t->ctx, st.g, st.out, t->device[d], &o, &p);
    if (s == NNCL_ERR_OUT_OF_MEMORY) s = NNCL_OK; /* does not run there */
    for (r = 0; s == NNCL_OK && p && r < 2; r++) {
        double t0 = nncl__seconds();
        for (i = 0; s == NNCL_OK && i < st.n_inputs; i++) s = nncl__plan_feed(p, st.inputs[2 * i + 1], zeros, mb);
        if (s == NNCL_OK && st.in) s = nncl__plan_feed(p, st.in, zeros, mb);
        if (s == NNCL_OK) s = nncl__plan_forward(p, mb, 1);
        if (s == NNCL_OK) s = hi == t->loss->id ? nncl__plan_backward(p) : nncl__plan_backward_from(p, zeros, mb);
        if (s == NNCL_OK) s = nncl__plan_finish(p);
        if (r == 1) *sec = nncl__seconds() - t0;
    }
    nncl__plan_free(p);
    pipe_stage_free(&st);
    return s;
}

/* Each layer's seconds on each device, as prefix sums: with shares given,
 * its arithmetic (pipe_cost) over the device's share; else measured
 * (pipe_time). */
static nncl_status pipe_costs(nncl_trainer *t, pipe_plan *pp, nncl_node **map) {
    nncl_graph *g = t->graph;
    int L = pp->n_cand + 1, d, j, i;
    size_t most = 1;
    float *zeros;
    nncl_status st = NNCL_OK;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->sample_numel > most) most = g->nodes[i]->sample_numel;
    zeros = (float *)nncl__calloc(most * (size_t)pp->mb, sizeof(float));
    if (!zeros) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (d = 0; st == NNCL_OK && d < t->nd; d++) {
        double acc = 0;
        int nev = 0;
        for (j = 0; st == NNCL_OK && j < L; j++) {
            int lo = j ? pp->cand[j - 1] : -1, hi = pipe_end(pp, t->loss, j);
            double c = 0;
            if (t->fixed_shares) {
                for (i = lo + 1; i <= hi; i++)
                    if (g->nodes[i]->op != NNCL_OP_INPUT && g->nodes[i]->op != NNCL_OP_PARAM)
                        c += pipe_cost(g->nodes[i]) * t->per_sample[d];
            } else st = pipe_time(t, lo, hi, d, pp->mb, map, zeros, &c);
            if (c < 0) nev++;
            else acc += c;
            pp->cost[(size_t)d * (size_t)L + (size_t)j] = acc;
            pp->never[(size_t)d * (size_t)L + (size_t)j] = nev;
        }
    }
    NNCL_FREE(zeros);
    return st;
}

/* No parameter may be read on both sides of a cut (tied weights): each
 * stage holds its own. */
static nncl_status pipe_check_shared(nncl_trainer *t) {
    nncl__pipe *pp = t->pipe;
    int s, r, i;
    for (s = 0; s < pp->k; s++)
        for (r = s + 1; r < pp->k; r++)
            for (i = 0; i < pp->st[s].g->n_nodes; i++) {
                const nncl_node *n = pp->st[s].g->nodes[i];
                if (n->op == NNCL_OP_PARAM && nncl_graph_find(pp->st[r].g, n->name))
                    return nncl__fail(t->ctx, NNCL_ERR_UNSUPPORTED,
                                      "nncl_trainer_create: parameter \"%s\" is used by stages %d and %d (tied "
                                      "weights cannot be split); choose cuts that keep its users together",
                                      n->name, s, r);
            }
    return NNCL_OK;
}

static nncl_status pipe_alloc(nncl_trainer *t) {
    nncl__pipe *pp = t->pipe;
    int s, cuts = pp->k - 1;
    pp->act = (float **)nncl__calloc((size_t)pp->k, sizeof(float *));
    pp->grad = (float **)nncl__calloc((size_t)pp->k, sizeof(float *));
    pp->act_ready = (unsigned char *)nncl__calloc((size_t)pp->k * (size_t)pp->m, 1);
    pp->grad_ready = (unsigned char *)nncl__calloc((size_t)pp->k * (size_t)pp->m, 1);
    pp->lossv = (float *)nncl__calloc((size_t)pp->m, sizeof(float));
    pp->dloss = (float *)nncl__calloc((size_t)pp->m, sizeof(float));
    pp->off = (int *)nncl__calloc((size_t)pp->m, sizeof(int));
    pp->len = (int *)nncl__calloc((size_t)pp->m, sizeof(int));
    pp->slots = (int *)nncl__calloc((size_t)pp->k, sizeof(int));
    pp->pin_act = (cl_mem *)nncl__calloc((size_t)pp->k, sizeof(cl_mem));
    pp->pin_grad = (cl_mem *)nncl__calloc((size_t)pp->k, sizeof(cl_mem));
    pp->act_ev = (cl_event *)nncl__calloc((size_t)pp->k * (size_t)pp->m, sizeof(cl_event));
    pp->grad_ev = (cl_event *)nncl__calloc((size_t)pp->k * (size_t)pp->m, sizeof(cl_event));
    if (!pp->act || !pp->grad || !pp->act_ready || !pp->grad_ready || !pp->lossv || !pp->dloss || !pp->off || !pp->len ||
        !pp->slots || !pp->pin_act || !pp->pin_grad || !pp->act_ev || !pp->grad_ev)
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (s = 0; s < cuts; s++) {
        size_t n;
        pp->slots[s] = t->cfg.pipe_schedule == NNCL_PIPE_GPIPE || pp->k - s > pp->m ? pp->m : pp->k - s;
        n = nncl__numel(pp->st[s].out, pp->mb) * (size_t)pp->slots[s];
        NNCL_TRY(nncl__pipe_slots(t, s, 0, n * sizeof(float)));
        NNCL_TRY(nncl__pipe_slots(t, s, 1, n * sizeof(float)));
    }
    for (s = 0; s < pp->k; s++) {
        nncl__stage *st = &pp->st[s];
        st->saved = (float *)nncl__calloc(st->g->n_state + 1, sizeof(float));
        st->holds = (int *)nncl__calloc((size_t)pp->m, sizeof(int));
        if (!st->saved || !st->holds) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if (pthread_mutex_init(&pp->lock, NULL)) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "no mutex");
    if (pthread_cond_init(&pp->cond, NULL)) {
        pthread_mutex_destroy(&pp->lock);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "no condition variable");
    }
    pp->locks = 1;
    return NNCL_OK;
}

/* The plans, the optimizer on every stage's device and the initial values. */
static nncl_status pipe_plans(nncl_trainer *t) {
    nncl__pipe *pp = t->pipe;
    nncl_graph *g = t->graph;
    float *init = (float *)nncl__calloc(g->n_params + 1, sizeof(float));
    float *state = (float *)nncl__calloc(g->n_state + 1, sizeof(float));
    nncl_status st = init && state ? NNCL_OK : nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    int s;
    for (s = 0; st == NNCL_OK && s < pp->k; s++) {
        nncl__stage *sg = &pp->st[s];
        sg->opt_floats = nncl__optim_state_floats(&t->cfg.optim) * sg->g->n_trainable;
        nncl__plan_opts o;
        st = pipe_plan_opts(t, sg->g, s + 1 < pp->k, pp->mb, &o);
        if (st == NNCL_OK) st = nncl__plan_create_opts(t->ctx, sg->g, sg->out, t->device[s], &o, &t->plan[s]);
        if (st == NNCL_OK) st = nncl__plan_train(t->plan[s], sg->opt_floats, nncl__optim_scratch_floats());
        if (st == NNCL_OK) st = nncl__optim_prepare_store(t->ctx, nncl__plan_device(t->plan[s]), &t->cfg.optim, 0);
    }
    /* Last, from what memory is left: an arena per micro-batch a stage holds
     * (1F1B: K-s, GPipe: all), else fewer and recomputed forwards. */
    for (s = 0; st == NNCL_OK && s < pp->k; s++) {
        nncl__stage *sg = &pp->st[s];
        int want = t->cfg.pipe_schedule == NNCL_PIPE_GPIPE || pp->k - s > pp->m ? pp->m : pp->k - s;
        sg->n_arenas = nncl__plan_arenas(t->plan[s], want);
        if (sg->n_arenas < want)
            nncl__log(t->ctx, NNCL_LOG_INFO, "pipeline stage %d: %d of %d activation arenas fit; the others' forwards "
                      "run again before their backwards", s, sg->n_arenas, want);
    }
    if (st == NNCL_OK) {
        nncl__graph_init_values(g, init, state);
        st = nncl__pipe_params(t, init, state, 1);
    }
    NNCL_FREE(init);
    NNCL_FREE(state);
    return st;
}

static const nncl_node *pipe_first(const nncl_trainer *t, int s);

static void pipe_log(nncl_trainer *t) {
    int s;
    for (s = 0; s < t->pipe->k; s++)
        nncl__log(t->ctx, NNCL_LOG_INFO, "pipeline stage %d on device %d (%s): nodes \"%s\" to \"%s\", %zu parameters",
                  s, t->device[s], nncl__plan_device(t->plan[s])->info.name, pipe_first(t, s)->name,
                  t->graph->nodes[t->pipe->st[s].last]->name, t->pipe->st[s].g->n_params);
}

nncl_status nncl__pipe_create(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    pipe_plan pp;
    int ends[64], perm[64], dev[64], i, s;
    nncl_node **map;
    nncl_status st = NNCL_OK;
    if (t->cfg.precision != NNCL_PRECISION_FP32)
        return nncl__fail(t->ctx, NNCL_ERR_UNSUPPORTED, "nncl_trainer_create: a pipeline trains in fp32 storage only");
    if (t->cfg.micro_batches < 0)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_create: micro_batches %d must be >= 0",
                          t->cfg.micro_batches);
    memset(&pp, 0, sizeof pp);
    pp.k = t->nd;
    t->pipe = (nncl__pipe *)nncl__calloc(1, sizeof(nncl__pipe));
    pp.cand = (int *)nncl__calloc((size_t)g->n_nodes + 1, sizeof(int));
    pp.cost = (double *)nncl__calloc(((size_t)g->n_nodes + 1) * (size_t)t->nd, sizeof(double));
    pp.never = (int *)nncl__calloc(((size_t)g->n_nodes + 1) * (size_t)t->nd, sizeof(int));
    pp.mem = (double *)nncl__calloc((size_t)t->nd, sizeof(double));
    pp.seen = (unsigned char *)nncl__calloc((size_t)g->n_nodes + 1, 1);
    map = (nncl_node **)nncl__calloc((size_t)g->n_nodes + 1, sizeof(nncl_node *));
    if (!t->pipe || !pp.cand || !pp.cost || !pp.never || !pp.mem || !pp.seen || !map) {
        st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto done;
    }
    t->pipe->k = pp.k;
    t->pipe->m = t->cfg.micro_batches ? t->cfg.micro_batches : 4;
    if (t->pipe->m > t->cfg.max_batch) t->pipe->m = t->cfg.max_batch;
    t->pipe->mb = pp.mb = (t->cfg.max_batch + t->pipe->m - 1) / t->pipe->m;
    pp.optk = nncl__optim_state_floats(&t->cfg.optim);
    t->opt_floats = pp.optk * g->n_trainable; /* a checkpoint's, in the graph's layout */
    for (i = 0; i < t->nd; i++) { /* its memory or the cap, less what nncl holds there */
        nncl_device *di = nncl__device(t->ctx, t->device[i]);
        uint64_t lim = nncl__device_memory_limit(t->ctx, di);
        pp.mem[i] = lim > di->mem_in_use ? (double)(lim - di->mem_in_use) : 0;
    }
    pp.n_cand = pipe_cuts(g, t->loss, pp.cand, pp.never); /* never: scratch until the costs */
    memset(pp.never, 0, ((size_t)g->n_nodes + 1) * (size_t)t->nd * sizeof(int));
    pp.bytes = (double *)nncl__calloc((size_t)(pp.n_cand + 2) * (size_t)(pp.n_cand + 2), sizeof(double));
    if (!pp.bytes) {
        st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto done;
    }
    if (pp.n_cand + 1 < pp.k) {
        st = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                        "nncl_trainer_create: %d stages asked for (one per device), but the graph has %d layers "
                        "between which it can be cut", pp.k, pp.n_cand + 1);
        goto done;
    }
    if (!t->cfg.cuts && pp.k > 1) st = pipe_costs(t, &pp, map); /* one stage: nothing to choose */
    if (st == NNCL_OK) st = t->cfg.cuts ? pipe_given(t, &pp, ends, perm) : pipe_choose(t, &pp, ends, perm);
    if (st != NNCL_OK) goto done;
    for (s = 0; s < pp.k; s++) dev[s] = t->device[perm[s]];
    for (s = 0; s < pp.k; s++) t->device[s] = dev[s];
    t->pipe->st = (nncl__stage *)nncl__calloc((size_t)pp.k, sizeof(nncl__stage));
    if (!t->pipe->st) st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (s = 0; st == NNCL_OK && s < pp.k; s++)
        st = pipe_subgraph(t, &t->pipe->st[s], s ? pipe_end(&pp, t->loss, ends[s - 1]) : -1,
                           pipe_end(&pp, t->loss, ends[s]), map);
    if (st == NNCL_OK) st = pipe_check_shared(t);
    if (st == NNCL_OK) st = pipe_alloc(t);
    if (st == NNCL_OK) st = pipe_plans(t);
    if (st == NNCL_OK) {
        pipe_log(t);
        snprintf(t->why, sizeof t->why, "%s: %d stages, %d micro-batches, %s, cut %s",
                 t->cfg.pipeline > 0 ? "asked for" : "the model fits no device whole", pp.k, t->pipe->m,
                 t->cfg.pipe_schedule == NNCL_PIPE_GPIPE ? "GPipe" : "1F1B",
                 t->cfg.cuts ? "given" : t->fixed_shares ? "by arithmetic over the shares" : "by measured layer times");
    }
done:
    NNCL_FREE(pp.cand); NNCL_FREE(pp.cost); NNCL_FREE(pp.never); NNCL_FREE(pp.mem); NNCL_FREE(pp.seen);
    NNCL_FREE(pp.bytes);
    NNCL_FREE(map);
    return st;
}

void nncl__pipe_free(nncl_trainer *t) {
    nncl__pipe *pp = t->pipe;
    int s;
    if (!pp) return;
    for (s = 0; pp->st && s < pp->k; s++) pipe_stage_free(&pp->st[s]);
    nncl__pipe_slots_free(t);
    if (pp->locks) {
        pthread_mutex_destroy(&pp->lock);
        pthread_cond_destroy(&pp->cond);
    }
    NNCL_FREE(pp->st); NNCL_FREE(pp->act); NNCL_FREE(pp->grad); NNCL_FREE(pp->act_ready); NNCL_FREE(pp->grad_ready);
    NNCL_FREE(pp->lossv); NNCL_FREE(pp->dloss); NNCL_FREE(pp->off); NNCL_FREE(pp->len); NNCL_FREE(pp->slots);
    NNCL_FREE(pp->pin_act); NNCL_FREE(pp->pin_grad); NNCL_FREE(pp->act_ev); NNCL_FREE(pp->grad_ev);
    NNCL_FREE(pp);
    t->pipe = NULL;
}

int nncl_trainer_stage_device(const nncl_trainer *t, const char *name) {
    const nncl_node *n;
    int s;
    if (!t || !t->pipe || !name || !(n = nncl_graph_find(t->graph, name))) return -1;
    if (n->op == NNCL_OP_INPUT || n->op == NNCL_OP_PARAM || n->id > t->loss->id) return -1;
    for (s = 0; s < t->pipe->k; s++)
        if (n->id <= t->pipe->st[s].last) return t->device[s];
    return -1;
}

/* The first op node of stage s, in the trainer's graph. */
static const nncl_node *pipe_first(const nncl_trainer *t, int s) {
    int i = s ? t->pipe->st[s - 1].last + 1 : 0;
    for (; i <= t->pipe->st[s].last; i++)
        if (t->graph->nodes[i]->op != NNCL_OP_INPUT && t->graph->nodes[i]->op != NNCL_OP_PARAM)
            return t->graph->nodes[i];
    return t->graph->nodes[t->pipe->st[s].last];
}

int nncl_trainer_stages(const nncl_trainer *t, nncl_stage_info *out, int max) {
    int s;
    if (!t || !t->pipe) return 0;
    for (s = 0; out && s < t->pipe->k && s < max; s++) {
        const nncl__stage *st = &t->pipe->st[s];
        memset(&out[s], 0, sizeof out[s]);
        out[s].device = t->device[s];
        snprintf(out[s].first, sizeof out[s].first, "%s", pipe_first(t, s)->name);
        snprintf(out[s].last, sizeof out[s].last, "%s", t->graph->nodes[st->last]->name);
        out[s].params = st->g->n_params;
        out[s].busy_seconds = st->busy;
        out[s].idle_seconds = st->idle;
        out[s].transfer_seconds = st->xfer;
        out[s].arenas = st->n_arenas;
        out[s].recomputed = st->recomputed;
        if (s + 1 < t->pipe->k) {
            out[s].held_micro_batches = t->pipe->slots[s];
            /* a slot of values and one of gradients per micro-batch held */
            out[s].held_bytes = 8 * nncl__numel(st->out, t->pipe->mb) * (size_t)t->pipe->slots[s];
        }
    }
    return t->pipe->k;
}
