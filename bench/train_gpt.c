/* train_gpt.c - the GPTs of the training section: examples/char_gpt.c's
 * model (nanoGPT's GPT without biases, lm_head tied to wte) in the
 * example's configuration (4 layers, 4 heads, 128 channels, context 64,
 * batch 12) and a larger one (6 layers, 6 heads, 384, context 256, batch
 * 64), trained with nanoGPT's AdamW (beta2 0.99, weight decay 0.1 on 2-D
 * weights, clipping at 1) on windows of random tokens of a 65-character
 * vocabulary (tiny Shakespeare's); a sample is one window. */
#include "train.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT_VOCAB 65

typedef struct gpt_shape { int n_layer, n_head, n_embd, block, batch; } gpt_shape;
static const gpt_shape gpt_shapes[2] = {{4, 4, 128, 64, 12}, {6, 6, 384, 256, 64}};

/* nanoGPT decays the 2-D weights only: not a norm's (NAME.weight). */
static void gpt_no_decay(nncl_graph *g, const char *norm) {
    char name[80];
    snprintf(name, sizeof name, "%s.weight", norm);
    nncl_param_decay(g, nncl_graph_find(g, name), 0);
}

int train_gpt_build(nncl_context *ctx, int large, train_model *m) {
    const gpt_shape *c = &gpt_shapes[large];
    int T = c->block, C = c->n_embd, l, tc[2] = {c->block, c->n_embd};
    char name[64];
    nncl_graph *g;
    nncl_node *x;
    memset(m, 0, sizeof *m);
    if (!(m->g = g = nncl_graph_create(ctx, 1))) return 1;
    m->x = nncl_input(g, "idx", 1, &T);
    m->y = nncl_input(g, "targets", 1, &T);
    x = nncl_embedding(g, m->x, GPT_VOCAB, C, "transformer.wte");
    x = nncl_op_add(g, x, nncl_param(g, "transformer.wpe.weight", 2, tc, NNCL_INIT_NORMAL, 0.02f));
    for (l = 0; l < c->n_layer; l++) {
        nncl_node *h, *qkv;
        snprintf(name, sizeof name, "transformer.h.%d.ln_1", l);
        h = nncl_layernorm_ex(g, x, 1e-5f, 0, name);
        gpt_no_decay(g, name);
        snprintf(name, sizeof name, "transformer.h.%d.attn.c_attn", l);
        qkv = nncl_linear(g, h, 3 * C, 0, NNCL_ACT_NONE, name);
        h = nncl_causal_attention(g, nncl_slice(g, qkv, 1, 0, C), nncl_slice(g, qkv, 1, C, C),
                                  nncl_slice(g, qkv, 1, 2 * C, C), c->n_head, 0.0f);
        snprintf(name, sizeof name, "transformer.h.%d.attn.c_proj", l);
        x = nncl_op_add(g, x, nncl_linear(g, h, C, 0, NNCL_ACT_NONE, name));
        snprintf(name, sizeof name, "transformer.h.%d.ln_2", l);
        h = nncl_layernorm_ex(g, x, 1e-5f, 0, name);
        gpt_no_decay(g, name);
        snprintf(name, sizeof name, "transformer.h.%d.mlp.c_fc", l);
        h = nncl_op_gelu(g, nncl_linear(g, h, 4 * C, 0, NNCL_ACT_NONE, name));
        snprintf(name, sizeof name, "transformer.h.%d.mlp.c_proj", l);
        x = nncl_op_add(g, x, nncl_linear(g, h, C, 0, NNCL_ACT_NONE, name));
    }
    x = nncl_layernorm_ex(g, x, 1e-5f, 0, "transformer.ln_f");
    gpt_no_decay(g, "transformer.ln_f");
    m->logits = nncl_matmul(g, x, nncl_graph_find(g, "transformer.wte.weight"), 0, 1);
    m->loss = nncl_sequence_cross_entropy(g, m->logits, m->y, -1);
    m->batch = c->batch;
    m->tokens = T;
    m->optim = nncl_optim_default(NNCL_OPT_ADAMW);
    m->optim.beta2 = 0.99f;
    m->optim.weight_decay = 0.1f;
    m->optim.clip_norm = 1.0f;
    return m->loss == NULL;
}

int train_gpt_batch(int large) { return gpt_shapes[large].batch; }

/* Windows of block + 1 random tokens: x the first block, y the next. */
int train_gpt_data(int large, int quick, train_data *td) {
    const gpt_shape *c = &gpt_shapes[large];
    size_t i, j, T = (size_t)c->block;
    unsigned s = 4321u;
    memset(td, 0, sizeof *td);
    td->n = (size_t)c->batch * (quick ? 2 : 8);
    td->xs = td->ys = T;
    td->x = (float *)malloc(td->n * T * sizeof(float));
    td->y = (float *)malloc(td->n * T * sizeof(float));
    if (!td->x || !td->y) {
        free(td->x), free(td->y);
        memset(td, 0, sizeof *td);
        return 1;
    }
    for (i = 0; i < td->n; i++) {
        float prev;
        s = s * 1664525u + 1013904223u;
        prev = (float)((s >> 8) % GPT_VOCAB);
        for (j = 0; j < T; j++) {
            s = s * 1664525u + 1013904223u;
            td->x[i * T + j] = prev;
            td->y[i * T + j] = prev = (float)((s >> 8) % GPT_VOCAB);
        }
    }
    return 0;
}

#undef GPT_VOCAB
