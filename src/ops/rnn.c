/* rnn.c - LSTM and GRU layers over [B, T, F] (batch first). Per layer the
 * input projection of all T steps is one product x W_ih^T ([B, T, G*H],
 * G gates); the recurrence is then one fused rnn_scan node (op_rnn.c: the
 * biases, per step one hidden product and one cell kernel), or, with
 * NNCL_RNN=graph, built from graph ops as kann builds it, unrolled in the
 * graph, one hidden product h W_hh^T per step
 * with the gates' nonlinearities and the cell update as elementwise nodes,
 * so the backward through time is the graph's exact autodiff. Each step
 * keeps [B, 1, *] shapes; the steps' hidden states are concatenated along
 * the time axis (a balanced tree of concats) into the layer's output
 * [B, T, H], which feeds the next layer. Gate order and parameter names
 * are PyTorch's (LSTM i, f, g, o; GRU r, z, n), so an nn.LSTM / nn.GRU
 * state dict loads. The initial state is zero, so step 0 has no hidden
 * product. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { RNN_LSTM, RNN_GRU };

/* Gate k (of width h) of a [B, 1, G*H] node. */
static nncl_node *rnn_gate(nncl_graph *g, nncl_node *x, int k, int h) {
    return nncl_slice(g, x, 1, k * h, h);
}

/* One LSTM step: gates pre [B, 1, 4H] (both biases in), state c (NULL at
 * step 0); returns h, sets *c. */
static nncl_node *lstm_step(nncl_graph *g, nncl_node *pre, nncl_node **c, int h) {
    nncl_node *i = nncl_op_sigmoid(g, rnn_gate(g, pre, 0, h));
    nncl_node *f = nncl_op_sigmoid(g, rnn_gate(g, pre, 1, h));
    nncl_node *gg = nncl_op_tanh(g, rnn_gate(g, pre, 2, h));
    nncl_node *o = nncl_op_sigmoid(g, rnn_gate(g, pre, 3, h));
    nncl_node *ig = nncl_op_mul(g, i, gg);
    /* c' = f c + i g; at step 0 c = 0, so f has no use there */
    *c = *c ? nncl_op_add(g, nncl_op_mul(g, f, *c), ig) : ig;
    return nncl_op_mul(g, o, nncl_op_tanh(g, *c));
}

/* One GRU step: input gates gi [B, 1, 3H] (b_ih in), hidden gates gh
 * [B, 1, 3H] (b_hh in), previous h (NULL at step 0). PyTorch's
 * n = tanh(gi_n + r (W_hn h + b_hn)), h' = (1 - z) n + z h = n + z (h - n). */
static nncl_node *gru_step(nncl_graph *g, nncl_node *gi, nncl_node *gh, nncl_node *hprev, int h) {
    nncl_node *r = nncl_op_sigmoid(g, nncl_op_add(g, rnn_gate(g, gi, 0, h), rnn_gate(g, gh, 0, h)));
    nncl_node *z = nncl_op_sigmoid(g, nncl_op_add(g, rnn_gate(g, gi, 1, h), rnn_gate(g, gh, 1, h)));
    nncl_node *n = nncl_op_tanh(g, nncl_op_add(g, rnn_gate(g, gi, 2, h), nncl_op_mul(g, r, rnn_gate(g, gh, 2, h))));
    if (!hprev) return nncl_op_sub(g, n, nncl_op_mul(g, z, n));
    return nncl_op_add(g, n, nncl_op_mul(g, z, nncl_op_sub(g, hprev, n)));
}

/* The steps [B, 1, H] joined along time into [B, T, H], halves first:
 * each step is copied log2(T) times, not up to T times as by a chain. */
static nncl_node *rnn_join(nncl_graph *g, nncl_node *const *steps, int n) {
    nncl_node *a;
    if (n == 1) return steps[0];
    a = rnn_join(g, steps, n / 2);
    return a ? nncl_concat(g, a, rnn_join(g, steps + n / 2, n - n / 2), 0) : NULL;
}

/* Whether the layers are built from graph ops (NNCL_RNN=graph), the
 * reference the fused recurrence is checked and measured against. */
static int rnn_unrolled(void) {
    const char *env = getenv("NNCL_RNN");
    return env && !strcmp(env, "graph");
}

/* One layer over x [B, T, F]: returns its output [B, T, hidden]. */
static nncl_node *rnn_layer(nncl_graph *g, int kind, nncl_node *x, int hidden, int layer, const char *name) {
    char nm[NNCL_NAME_MAX + 24];
    int gates = kind == RNN_LSTM ? 4 : 3, T = x->shape[1], shape[2], t;
    float bound = 1.0f / sqrtf((float)hidden);
    nncl_node *w_ih, *w_hh, *b_ih, *b_hh, *gi, *h = NULL, *c = NULL, *seq = NULL, **steps;
    shape[0] = gates * hidden;
    shape[1] = x->shape[2];
    snprintf(nm, sizeof nm, "%s.weight_ih_l%d", name, layer);
    w_ih = nncl_param(g, nm, 2, shape, NNCL_INIT_UNIFORM, bound);
    shape[1] = hidden;
    snprintf(nm, sizeof nm, "%s.weight_hh_l%d", name, layer);
    w_hh = w_ih ? nncl_param(g, nm, 2, shape, NNCL_INIT_UNIFORM, bound) : NULL;
    snprintf(nm, sizeof nm, "%s.bias_ih_l%d", name, layer);
    b_ih = w_hh ? nncl_param(g, nm, 1, shape, NNCL_INIT_UNIFORM, bound) : NULL;
    snprintf(nm, sizeof nm, "%s.bias_hh_l%d", name, layer);
    b_hh = b_ih ? nncl_param(g, nm, 1, shape, NNCL_INIT_UNIFORM, bound) : NULL;
    if (!b_hh) return NULL;
    if (!rnn_unrolled()) {
        gi = nncl_matmul(g, x, w_ih, 0, 1);
        return gi ? nncl__rnn_scan(g, kind == RNN_GRU, gi, w_hh, b_ih, b_hh) : NULL;
    }
    if (!(steps = (nncl_node **)nncl__calloc((size_t)T, sizeof *steps)))
        return nncl__graph_fail(g, NNCL_ERR_OUT_OF_MEMORY, "out of host memory building the graph");
    /* the LSTM's hidden bias adds to every step's gates alike: one bias b_ih + b_hh, one gradient sum */
    gi = nncl_op_add(g, nncl_matmul(g, x, w_ih, 0, 1), kind == RNN_LSTM ? nncl_op_add(g, b_ih, b_hh) : b_ih);
    for (t = 0; t < T && gi; t++) {
        nncl_node *git = T == 1 ? gi : nncl_slice(g, gi, 0, t, 1);
        nncl_node *hh = h ? nncl_matmul(g, h, w_hh, 0, 1) : NULL;
        if (kind == RNN_LSTM) h = lstm_step(g, hh ? nncl_op_add(g, git, hh) : git, &c, hidden);
        /* at step 0 the hidden gates are b_hh alone, broadcast as 0 x + b_hh (exact for a finite x):
         * b_hh enters through add, which half storage trains, as it trains no sliced parameter */
        else h = gru_step(g, git, nncl_op_add(g, hh ? hh : nncl_op_scale(g, git, 0.0f), b_hh), h, hidden);
        if (!(steps[t] = h)) break;
    }
    if (t == T) seq = rnn_join(g, steps, T);
    NNCL_FREE(steps);
    return seq;
}

static nncl_node *rnn_build(nncl_graph *g, int kind, nncl_node *x, int hidden, int layers, const char *name) {
    const char *fn = kind == RNN_LSTM ? "nncl_lstm" : "nncl_gru";
    char s1[64];
    int keep, l;
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: graph or input is NULL", fn);
    if (!name || !nncl__name_ok(name) || strlen(name) + 24 > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s: needs a name of 1 to %d characters, no spaces", fn,
                                NNCL_NAME_MAX - 24);
    if (hidden <= 0 || layers <= 0)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "%s \"%s\": needs hidden > 0 and layers > 0, got %d, %d",
                                fn, name, hidden, layers);
    if (!x->batched || x->ndim != 3)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "%s \"%s\": input %s is not [B, T, F]", fn, name,
                                nncl__shape_str(x, s1, sizeof s1));
    keep = g->n_nodes;
    for (l = 0; l < layers && x; l++) x = rnn_layer(g, kind, x, hidden, l, name);
    if (!x) {
        nncl__graph_truncate(g, keep);
        return NULL;
    }
    /* the layer's own names, NAME:KIND.ID, which a summary folds into one row */
    for (l = keep; l < g->n_nodes; l++)
        if (g->nodes[l]->op != NNCL_OP_PARAM)
            snprintf(g->nodes[l]->name, sizeof g->nodes[l]->name, "%s:%s.%d", name, fn + 5, l);
    nncl__graph_rehash(g);
    return x;
}

nncl_node *nncl_lstm(nncl_graph *g, nncl_node *x, int hidden, int layers, const char *name) {
    return rnn_build(g, RNN_LSTM, x, hidden, layers, name);
}

nncl_node *nncl_gru(nncl_graph *g, nncl_node *x, int hidden, int layers, const char *name) {
    return rnn_build(g, RNN_GRU, x, hidden, layers, name);
}

nncl_node *nncl_rnn_last(nncl_graph *g, nncl_node *seq) {
    char s1[64];
    int shape[1];
    if (!g || !seq) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_rnn_last: graph or input is NULL");
    if (!seq->batched || seq->ndim != 3)
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "nncl_rnn_last: input %s is not [B, T, H]",
                                nncl__shape_str(seq, s1, sizeof s1));
    shape[0] = seq->shape[2];
    return nncl_reshape(g, nncl_slice(g, seq, 0, seq->shape[1] - 1, 1), 1, shape);
}
