/* graph_layout.c - a graph's flat parameter and running-statistics
 * buffers: where each parameter (trainable first, so that the optimizer
 * runs over one prefix, and of those the decayed first, so that weight
 * decay covers a prefix of it) and each node's statistics live, fixed once a plan
 * is made, and their initial values, the same for a seed on every machine
 * and device (plan.h). */
#include "train/plan.h"
#include <math.h>

nncl_status nncl__graph_layout(nncl_graph *g) {
    size_t off = 0, st = 0;
    int pass, i;
    if (g->frozen) return NNCL_OK;
    /* trainable and decayed, trainable, frozen: the optimizer runs over one
     * prefix, its weight decay over a prefix of that */
    for (pass = 0; pass < 3; pass++) {
        for (i = 0; i < g->n_nodes; i++) {
            nncl_node *n = g->nodes[i];
            if (n->op != NNCL_OP_PARAM || n->trainable != (pass < 2) || (pass < 2 && n->no_decay != (pass == 1)))
                continue;
            n->param_off = off;
            if (nncl__add_overflow(off, n->sample_numel, &off))
                return nncl__fail(g->ctx, NNCL_ERR_OUT_OF_MEMORY, "parameters overflow the address space");
        }
        if (pass == 0) g->n_decay = off;
        if (pass == 1) g->n_trainable = off;
    }
    g->n_params = off;
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        if (!n->state_size) continue;
        n->state_off = st;
        st += n->state_size;
    }
    g->n_state = st;
    g->frozen = 1;
    return NNCL_OK;
}

static uint64_t layout_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double layout_unit(uint64_t *s) { return (double)(layout_splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

void nncl__graph_init_values(const nncl_graph *g, float *params, float *state) {
    int i;
    size_t k;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        uint64_t s = g->seed ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
        double bound = n->init_scale;
        if (n->op != NNCL_OP_PARAM) continue;
        if (n->init == NNCL_INIT_FAN_IN_UNIFORM) bound = 1.0 / sqrt((double)(n->sample_numel / (size_t)n->shape[0]));
        for (k = 0; k < n->sample_numel; k++) {
            double v = 0;
            switch (n->init) {
            case NNCL_INIT_ZEROS: v = 0; break;
            case NNCL_INIT_ONES: v = 1; break;
            case NNCL_INIT_UNIFORM:
            case NNCL_INIT_FAN_IN_UNIFORM: v = (2 * layout_unit(&s) - 1) * bound; break;
            case NNCL_INIT_NORMAL: { /* Box-Muller */
                double u1 = layout_unit(&s), u2 = layout_unit(&s);
                v = sqrt(-2 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2) * bound;
                break;
            }
            }
            params[n->param_off + k] = (float)v;
        }
    }
    /* Running statistics start as mean 0, variance 1: pairs of [C] blocks. */
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        size_t half = n->state_size / 2;
        for (k = 0; k < n->state_size; k++) state[n->state_off + k] = k < half ? 0.0f : 1.0f;
    }
}
