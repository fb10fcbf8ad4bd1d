/* summary.c - a model summary as Keras' summary() and torchinfo print it:
 * one row per layer (every op node) with its kind, output shape and the
 * parameters it owns, the totals, and with a trainer each device's plan
 * memory. Writes only to the stream the caller names. */
#include "train/pipeline.h"
#include <stdio.h>
#include <string.h>

/* Parameter elements among n's inputs that no earlier layer has counted. */
static size_t summary_params(const nncl_node *n, unsigned char *seen, size_t *frozen) {
    size_t total = 0;
    int k;
    for (k = 0; k < n->n_in; k++) {
        const nncl_node *p = n->in[k];
        if (p->op != NNCL_OP_PARAM || seen[p->id]) continue;
        seen[p->id] = 1;
        total += p->sample_numel;
        if (!p->trainable) *frozen += p->sample_numel;
    }
    return total + n->state_size; /* running statistics count, as in Keras */
}

/* Whether node i's row folds into the next op node's: both named
 * NAME:..., as the layers built from several ops (an LSTM) name theirs;
 * the run's parameters and op count add up in *np and *ops. */
static int summary_folds(const nncl_graph *g, int i, size_t *np, int *ops, size_t own) {
    const char *name = g->nodes[i]->name, *colon = strchr(name, ':');
    int j = i + 1;
    *np += own;
    (*ops)++;
    if (!colon) return 0;
    while (j < g->n_nodes && g->nodes[j]->op == NNCL_OP_PARAM) j++;
    return j < g->n_nodes && !strncmp(g->nodes[j]->name, name, (size_t)(colon - name) + 1);
}

static void summary_bytes(char *buf, size_t len, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, len, "%.1f KiB", b / 1024.0);
}

static nncl_status summary_write(const nncl_graph *g, const nncl_trainer *t, FILE *out) {
    unsigned char *seen;
    size_t total = 0, frozen = 0, state = 0, run_np = 0;
    int i, k, run_ops = 0;
    char line[160], shape[64], kb[32];
    if (!g || !out) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "summary: graph or stream is NULL");
    if (!(seen = (unsigned char *)nncl__calloc((size_t)g->n_nodes + 1, 1)))
        return nncl__fail(g->ctx, NNCL_ERR_OUT_OF_MEMORY, "summary: out of host memory");
    fprintf(out, "%-24s %-22s %-16s %10s\n", "layer", "kind", "output shape", "params");
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        size_t np;
        int used;
        if (n->op == NNCL_OP_PARAM) continue;
        np = n->op == NNCL_OP_INPUT ? 0 : summary_params(n, seen, &frozen);
        state += n->state_size;
        total += np;
        used = snprintf(shape, sizeof shape, "[%s", n->batched ? "B" : "");
        for (k = n->batched ? 1 : 0; k < n->ndim && used < (int)sizeof shape - 12; k++)
            used += snprintf(shape + used, sizeof shape - (size_t)used, "%s%d", k || n->batched ? "," : "", n->shape[k]);
        snprintf(shape + used, sizeof shape - (size_t)used, "]");
        if (summary_folds(g, i, &run_np, &run_ops, np)) continue;
        if (run_ops > 1) { /* the last node of a layer built from ops: NAME:KIND.ID */
            const char *colon = strchr(n->name, ':'), *dot = strchr(colon, '.');
            char kind[40];
            int len = colon - n->name < 24 ? (int)(colon - n->name) : 24;
            snprintf(kind, sizeof kind, "%.*s (%d ops)", (int)(dot ? dot - colon - 1 : 12), colon + 1, run_ops);
            snprintf(line, sizeof line, "%-24.*s %-22.22s %-16.16s %10zu", len, n->name, kind, shape, run_np);
        } else {
            snprintf(line, sizeof line, "%-24.24s %-22.22s %-16.16s %10zu", n->name, nncl__opdef_get(n->op)->name,
                     shape, np);
        }
        run_np = 0;
        run_ops = 0;
        fprintf(out, "%s\n", line);
    }
    /* Parameters no op reads (unusual) still count. */
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_PARAM && !seen[g->nodes[i]->id]) {
            total += g->nodes[i]->sample_numel;
            if (!g->nodes[i]->trainable) frozen += g->nodes[i]->sample_numel;
        }
    summary_bytes(kb, sizeof kb, (double)(total - state) * 4);
    fprintf(out, "parameters %zu (%s), trainable %zu, frozen %zu, running statistics %zu\n", total - state, kb,
            total - state - frozen, frozen, state);
    for (i = 0; t && i < t->nd; i++) {
        nncl_device_info info;
        const nncl__plan *p = t->plan[i];
        char act[32], all[32];
        memset(&info, 0, sizeof info);
        nncl_device_info_get(t->ctx, t->device[i], &info);
        size_t opt = t->pipe ? t->pipe->st[i].opt_floats : t->opt_floats;
        summary_bytes(all, sizeof all, (double)p->bytes + (double)opt * 4);
        summary_bytes(act, sizeof act, (double)p->arena_floats * (p->ex.store ? 2 : 4) + (double)p->arena32_floats * 4);
        fprintf(out, "device %d (%.60s): plan %s for batch %d (activations %s%s), optimizer state %zu floats\n", t->device[i],
                info.name, all, p->max_batch, act, p->ex.store == 1   ? " in fp16, arithmetic fp32"
                : p->ex.store == 2 ? " in bf16, arithmetic fp32"
                                  : "",
                opt);
        if (t->pipe) {
            nncl_stage_info si[64];
            nncl_trainer_stages(t, si, 64);
            fprintf(out, "  pipeline stage %d of %d: nodes %s to %s, %zu parameters, micro-batches of %d\n", i,
                    t->pipe->k, si[i].first, si[i].last, si[i].params, t->pipe->mb);
        }
        if (p->n_segments > 1)
            fprintf(out, "  gradient checkpointing: %d segments, %d ops recomputed in backward\n", p->n_segments,
                    p->n_rec);
    }
    fflush(out);
    NNCL_FREE(seen);
    return NNCL_OK;
}

nncl_status nncl_graph_summary(const nncl_graph *g, FILE *out) { return summary_write(g, NULL, out); }

nncl_status nncl_trainer_summary(const nncl_trainer *t, FILE *out) {
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_summary: trainer is NULL");
    return summary_write(t->graph, t, out);
}
