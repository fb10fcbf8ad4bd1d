/* test_attention.c - what the op table (test_op_table.c) cannot see of
 * causal attention: its dropout (the same weights again for the same step,
 * a shard of samples gets what they get in the whole batch, another step
 * another mask, p = 0 and evaluation exactly no dropout), the shape errors
 * at build time, and the op in a model file's graph text (written, read
 * back into the same graph and the same predictions, a bad head count
 * refused); and the tiled kernels GPUs run, forced on every device
 * (NNCL_ATTENTION=tiles), against the double reference as the op table
 * checks the per-row ones. */
#include "opcheck.h"
#include "io/io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TA_T = 9, TA_C = 8, TA_B = 4 };

static int ta_read(nncl__plan *p, const nncl_node *n, float *out) {
    return nncl__plan_read(p, n, out, TA_B, NULL) != NNCL_OK;
}

static int ta_forward(nncl__plan *p, nncl_node *const *in, float *const *data, int batch, int offset, int training) {
    int i;
    for (i = 0; i < 3; i++)
        if (nncl__plan_feed(p, in[i], data[i] + (size_t)offset * TA_T * TA_C, batch) != NNCL_OK) return 1;
    p->ex.batch_offset = offset;
    return nncl__plan_forward(p, batch, training) != NNCL_OK;
}

static int ta_dropout(nncl_context *ctx, int d) {
    char name[160];
    const size_t n = (size_t)TA_B * TA_T * TA_C, per = (size_t)TA_T * TA_C;
    static const char *const names[3] = {"q", "k", "v"};
    int shape[2] = {TA_T, TA_C}, i, bad = 0;
    size_t k, differ = 0;
    nncl_graph *g = nncl_graph_create(ctx, 77);
    nncl_node *in[3], *a, *a0;
    nncl__plan *p = NULL;
    float *data[3], *train1 = malloc(n * 4), *train2 = malloc(n * 4), *eval = malloc(n * 4), *z = malloc(n * 4);
    snprintf(name, sizeof name, "attention dropout on %s", th_device_label(ctx, d));
    for (i = 0; i < 3; i++) {
        in[i] = nncl_input(g, names[i], 2, shape);
        data[i] = th_random(n, -2, 2, 5u + (unsigned)i);
    }
    a = nncl_causal_attention(g, in[0], in[1], in[2], 2, 0.4f);
    a0 = nncl_causal_attention(g, in[0], in[1], in[2], 2, 0.0f);
    TH_CHECK(name, a && a0 && train1 && train2 && eval && z);
    TH_OK(name, ctx, nncl__plan_create(ctx, g, NULL, d, TA_B, &p));
    p->ex.step_seed = 1001;
    bad |= ta_forward(p, in, data, TA_B, 0, 1) || ta_read(p, a, train1) || ta_read(p, a0, z);
    bad |= ta_forward(p, in, data, TA_B, 0, 0) || ta_read(p, a, eval);
    TH_CHECK(name, !bad);
    /* p = 0 in training and any p in evaluation: no dropout, bit for bit */
    TH_CHECK(name, memcmp(z, eval, n * 4) == 0);
    bad |= ta_read(p, a0, z);
    TH_CHECK(name, !bad && memcmp(z, eval, n * 4) == 0);
    for (k = 0; k < n; k++) differ += train1[k] != eval[k];
    TH_CHECK(name, differ > n / 2);
    /* the same step again: the same weights */
    bad |= ta_forward(p, in, data, TA_B, 0, 1) || ta_read(p, a, train2);
    TH_CHECK(name, !bad && memcmp(train1, train2, n * 4) == 0);
    /* samples 1..3 as a shard starting at 1: what they got in the batch */
    bad |= ta_forward(p, in, data, TA_B - 1, 1, 1) || nncl__plan_read(p, a, train2, TA_B - 1, NULL) != NNCL_OK;
    TH_CHECK(name, !bad && memcmp(train1 + per, train2, (n - per) * 4) == 0);
    /* another step: other weights */
    p->ex.step_seed = 1002;
    bad |= ta_forward(p, in, data, TA_B, 0, 1) || ta_read(p, a, train2);
    for (differ = 0, k = 0; k < n; k++) differ += train1[k] != train2[k];
    TH_CHECK(name, !bad && differ > n / 2);
    th_pass("%s", name);
    nncl__plan_free(p);
    for (i = 0; i < 3; i++) free(data[i]);
    free(train1); free(train2); free(eval); free(z);
    nncl_graph_free(g);
    return 0;
}

/* A refused builder names the node and the shapes, and adds nothing. */
static int ta_shapes(nncl_context *ctx) {
    const char *name = "attention shape errors at build time";
    int s98[2] = {9, 8}, s78[2] = {7, 8}, s8[1] = {8}, s129[2] = {3, 129}, before;
    nncl_graph *g = nncl_graph_create(ctx, 1);
    nncl_node *q = nncl_input(g, "q", 2, s98), *k7 = nncl_input(g, "k7", 2, s78), *x1 = nncl_input(g, "x1", 1, s8);
    nncl_node *wide = nncl_input(g, "wide", 2, s129), *w = nncl_param(g, "w", 2, s98, NNCL_INIT_ZEROS, 0);
    TH_CHECK(name, q && k7 && x1 && wide && w);
    before = g->n_nodes;
    TH_CHECK(name, !nncl_causal_attention(g, q, k7, q, 2, 0) && strstr(nncl_last_error(ctx), "causal_attention") &&
                       strstr(nncl_last_error(ctx), "[B,9,8]") && strstr(nncl_last_error(ctx), "[B,7,8]"));
    TH_CHECK(name, !nncl_causal_attention(g, q, q, k7, 2, 0) && strstr(nncl_last_error(ctx), "[B,7,8]"));
    TH_CHECK(name, !nncl_causal_attention(g, x1, x1, x1, 1, 0) && strstr(nncl_last_error(ctx), "[B,8]"));
    TH_CHECK(name, !nncl_causal_attention(g, w, w, w, 1, 0) && strstr(nncl_last_error(ctx), "[9,8]"));
    TH_CHECK(name, !nncl_causal_attention(g, q, q, q, 3, 0) && strstr(nncl_last_error(ctx), "3 heads"));
    TH_CHECK(name, !nncl_causal_attention(g, wide, wide, wide, 1, 0) && strstr(nncl_last_error(ctx), "128"));
    TH_CHECK(name, !nncl_causal_attention(g, q, q, q, 0, 0) && strstr(nncl_last_error(ctx), "n_heads 0"));
    TH_CHECK(name, !nncl_causal_attention(g, q, q, q, 2, 1.5f) && strstr(nncl_last_error(ctx), "1.5"));
    TH_CHECK(name, !nncl_causal_attention(g, q, q, q, 2, NAN) && !nncl_causal_attention(g, q, q, q, 2, -0.1f));
    TH_CHECK(name, !nncl_causal_attention(g, q, NULL, q, 2, 0) && !nncl_causal_attention(NULL, q, q, q, 2, 0));
    TH_CHECK(name, g->n_nodes == before);
    TH_CHECK(name, nncl_causal_attention(g, wide, wide, wide, 3, 0) != NULL); /* 43 columns a head */
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* A model file's nncl.graph with the first `find` replaced by `repl`,
 * read back. */
static nncl_status ta_tampered(const char *text, const char *find, const char *repl, const char *path) {
    const char *at = strstr(text, find);
    char *copy = malloc(strlen(text) + strlen(repl) + 1);
    const char *meta[3] = {"nncl.graph", NULL, NULL};
    nncl_safetensors_entry e;
    nncl_safetensors *st = NULL;
    nncl_graph *g = NULL;
    nncl_status s;
    float v = 0;
    if (!at || !copy) {
        free(copy);
        return NNCL_OK;
    }
    sprintf(copy, "%.*s%s%s", (int)(at - text), text, repl, at + strlen(find));
    meta[1] = copy;
    memset(&e, 0, sizeof e);
    e.name = "unused";
    e.ndim = 1;
    e.shape[0] = 1;
    e.data = &v;
    s = nncl_safetensors_save(path, &e, 1, meta);
    if (s == NNCL_OK) s = nncl_safetensors_load(path, &st);
    if (s == NNCL_OK) s = nncl_graph_from_safetensors(NULL, st, &g);
    nncl_graph_free(g);
    nncl_safetensors_free(st);
    free(copy);
    remove(path);
    return s;
}

/* x -> q, k, v projections -> attention (2 heads, dropout 0.1) -> mse:
 * saved, the graph rebuilt from the file, loaded, predicting the same. */
static int ta_roundtrip(nncl_context *ctx) {
    const char *name = "attention in the model file's graph text", *path = "test_attention_model.safetensors";
    int shape[2] = {TA_T, TA_C}, i, id;
    const size_t n = (size_t)TA_B * TA_T * TA_C;
    nncl_graph *g = nncl_graph_create(ctx, 9), *g2 = NULL;
    nncl_node *x = nncl_input(g, "x", 2, shape), *t = nncl_input(g, "t", 2, shape), *a, *loss, *a2;
    nncl_train_config cfg = nncl_train_default();
    nncl_trainer *tr = NULL, *tr2 = NULL;
    nncl_safetensors *st = NULL;
    char *text1 = NULL, *text2 = NULL;
    float *xd = th_random(n, -1, 1, 3), *out1 = malloc(n * 4), *out2 = malloc(n * 4);
    nncl_feed f[1];
    a = nncl_causal_attention(g, nncl_linear(g, x, TA_C, 0, NNCL_ACT_NONE, "q"),
                              nncl_linear(g, x, TA_C, 0, NNCL_ACT_NONE, "k"),
                              nncl_linear(g, x, TA_C, 0, NNCL_ACT_NONE, "v"), 2, 0.1f);
    loss = nncl_mse(g, nncl_linear(g, a, TA_C, 1, NNCL_ACT_NONE, "proj"), t);
    TH_CHECK(name, a && loss && out1 && out2);
    cfg.max_batch = TA_B;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &cfg, &tr));
    f[0].node = x;
    f[0].data = xd;
    TH_OK(name, ctx, nncl_trainer_predict(tr, f, 1, TA_B, a, out1));
    TH_OK(name, ctx, nncl_trainer_save(tr, path));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    TH_OK(name, NULL, nncl_graph_from_safetensors(NULL, st, &g2));
    text1 = nncl__graph_describe(g);
    text2 = nncl__graph_describe(g2);
    TH_CHECK(name, text1 && text2 && strcmp(text1, text2) == 0 && strstr(text1, "heads=2 dropout=0.1"));
    id = a->id;
    a2 = g2->nodes[id];
    TH_CHECK(name, a2->op == NNCL_OP_CAUSAL_ATTENTION && a2->fattr[0] == 0.1f);
    for (i = 0; i < 3; i++) TH_CHECK(name, a2->iattr[i] == a->iattr[i]);
    nncl_graph_free(g2);
    g2 = NULL;
    /* the graph rebuilt on the context, with the saved weights, predicts the same */
    TH_OK(name, ctx, nncl_graph_from_safetensors(ctx, st, &g2));
    TH_OK(name, ctx, nncl_trainer_create(ctx, g2, g2->nodes[g2->n_nodes - 1], &cfg, &tr2));
    TH_OK(name, ctx, nncl_trainer_load(tr2, path));
    f[0].node = g2->nodes[x->id];
    TH_OK(name, ctx, nncl_trainer_predict(tr2, f, 1, TA_B, g2->nodes[id], out2));
    TH_CHECK(name, memcmp(out1, out2, n * 4) == 0);
    /* heads that do not divide C, or none: refused as a format error */
    TH_CHECK(name, ta_tampered(text1, "heads=2", "heads=3", path) == NNCL_ERR_FORMAT);
    TH_CHECK(name, ta_tampered(text1, "heads=2", "heads=0", path) == NNCL_ERR_FORMAT);
    TH_CHECK(name, ta_tampered(text1, "dropout=0.1", "dropout=7", path) == NNCL_ERR_FORMAT);
    TH_CHECK(name, ta_tampered(text1, "heads=2", "heads=4", path) == NNCL_OK); /* 4 heads of 2 */
    NNCL_FREE(text1);
    NNCL_FREE(text2);
    nncl_trainer_free(tr2);
    nncl_trainer_free(tr);
    nncl_graph_free(g2);
    nncl_safetensors_free(st);
    nncl_graph_free(g);
    remove(path);
    free(xd); free(out1); free(out2);
    th_pass("%s", name);
    return 0;
}

/* The tiled kernels: rows in groups of 64 and tiles of 16, both cut short
 * (T 70, 33), heads of 3, 35 and 128 columns (the most), dropout, q = k =
 * v, in fp32, fp16 and bf16 storage. */
static int ta_tiles(nncl_context *ctx) {
    static const int shapes[5][6] = {/* batch, T, C, heads, dropout %, self */
                                     {2, 70, 6, 2, 0, 0}, {3, 5, 9, 3, 0, 0}, {2, 33, 70, 2, 30, 0},
                                     {1, 64, 256, 2, 0, 0}, {2, 17, 8, 2, 20, 1}};
    static const double tol[3] = {1e-9, 1e-5, 6e-4};
    int s, i, k;
    setenv("NNCL_ATTENTION", "tiles", 1);
    oc_no_fd = 1; /* the op table's rows have the finite differences */
    for (oc_store = 0; oc_store <= 2; oc_store++)
        for (s = 0; s < 5; s++) {
            const int *z = shapes[s];
            int shape[2] = {z[1], z[2]};
            char name[200];
            nncl_graph *g = nncl_graph_create(ctx, 42);
            nncl_node *in[3], *a, *t, *loss;
            float *data[4];
            oc_feed f[4];
            int nin = z[5] ? 1 : 3;
            for (i = 0; i < nin; i++) {
                static const char *const names[3] = {"q", "k", "v"};
                in[i] = nncl_input(g, names[i], 2, shape);
                in[i]->needs_grad = 1;
            }
            a = z[5] ? nncl_causal_attention(g, in[0], in[0], in[0], z[3], (float)z[4] / 100)
                     : nncl_causal_attention(g, in[0], in[1], in[2], z[3], (float)z[4] / 100);
            t = nncl_input(g, "target", 2, shape);
            loss = nncl_mse(g, a, t);
            for (k = 0; k <= nin; k++) { /* the inputs, then the target (off-centre) */
                data[k] = th_random((size_t)z[0] * z[1] * z[2], k == nin ? -0.5f : -2, k == nin ? 1.5f : 2,
                                    31u * (unsigned)(s + 1) + (unsigned)k);
                f[k].node = k == nin ? t : in[k];
                f[k].data = data[k];
            }
            snprintf(name, sizeof name, "%s%sattention tiles b%d T%d C%d heads %d dropout 0.%02d%s",
                     oc_store ? (oc_store == 1 ? "fp16" : "bf16") : "", oc_store ? " storage: " : "", z[0], z[1], z[2],
                     z[3], z[4], z[5] ? " q = k = v" : "");
            oc_check(name, ctx, g, loss, f, nin + 1, z[0], tol[oc_store]);
            for (k = 0; k <= nin; k++) free(data[k]);
            nncl_graph_free(g);
        }
    oc_store = 0;
    oc_no_fd = 0;
    unsetenv("NNCL_ATTENTION");
    return 0;
}

int main(void) {
    nncl_context *ctx = th_context();
    int d;
    if (!ctx) return th_exit_code();
    ta_shapes(ctx);
    for (d = 0; d < nncl_device_count(ctx); d++) ta_dropout(ctx, d);
    ta_roundtrip(ctx);
    ta_tiles(ctx);
    nncl_free(ctx);
    return th_exit_code();
}
