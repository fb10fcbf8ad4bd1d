/* trainer_io.c - what goes in and out of a trainer besides steps: inference
 * and evaluation split over the devices, parameters by name, and
 * safetensors files under PyTorch's names (models) plus the optimizer state
 * and step count (checkpoints, for exact resume). */
#include "train/optim.h"
#include "train/pipeline.h"
#include "io/io.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- inference */

static nncl_status io_predict_device(nncl_trainer *t, int i, const nncl_feed *feeds, int n_feeds, int offset,
                                     nncl_node *out, float *dst) {
    nncl__plan *p = t->plan[i];
    int k, b = t->shard[i];
    for (k = 0; k < n_feeds; k++)
        NNCL_TRY(nncl__plan_feed(p, feeds[k].node, feeds[k].data + (size_t)offset * feeds[k].node->sample_numel, b));
    NNCL_TRY(nncl__plan_forward_to(p, b, 0, out));
    return nncl__plan_read(p, out, dst + (size_t)offset * out->sample_numel, b, NULL);
}

typedef struct io_predict {
    const nncl_feed *feeds;
    int n_feeds;
    nncl_node *out;
    float *dst;
} io_predict;

static nncl_status io_predict_job(nncl_trainer *t, int i, void *arg) {
    const io_predict *job = (const io_predict *)arg;
    int j, off = 0;
    if (!t->alive[i] || !t->shard[i]) return NNCL_OK;
    for (j = 0; j < i; j++) off += t->shard[j];
    return io_predict_device(t, i, job->feeds, job->n_feeds, off, job->out, job->dst);
}

/* Every input out depends on is fed: an unfed one would be read as whatever
 * the last step or prediction left in its buffer. Nodes are numbered in
 * creation order, so one pass from out down to 0 finds them all. */
static nncl_status io_check_fed(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, const nncl_node *out) {
    nncl_graph *g = t->graph;
    unsigned char *need = (unsigned char *)nncl__calloc((size_t)g->n_nodes, 1);
    int i, k, j;
    if (!need) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_predict: out of host memory");
    need[out->id] = 1;
    for (i = out->id; i >= 0; i--) {
        const nncl_node *n = g->nodes[i];
        if (!need[i]) continue;
        for (j = 0; j < n->n_in; j++) need[n->in[j]->id] = 1;
        if (n->op != NNCL_OP_INPUT) continue;
        for (k = 0; k < n_feeds && feeds[k].node != n; k++) {}
        if (k == n_feeds) {
            NNCL_FREE(need);
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_predict: input \"%s\", which \"%s\" depends on, is not fed",
                              n->name, out->name);
        }
    }
    NNCL_FREE(need);
    return NNCL_OK;
}

static nncl_status io_predict_batch(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch,
                                    nncl_node *out, float *dst) {
    int i, saved[64], failed = -1;
    io_predict job;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_predict: trainer is NULL");
    if (t->pipe)
        return nncl__fail(t->ctx, NNCL_ERR_UNSUPPORTED, "nncl_trainer_predict: not on a pipelined trainer; load its "
                          "parameters into a trainer without pipeline");
    if (!out || !dst)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_predict: out or dst is NULL");
    if (out->id < 0 || out->id >= t->graph->n_nodes || t->graph->nodes[out->id] != out || !out->batched)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_predict: out is not a per-sample node of the graph");
    NNCL_TRY(nncl__trainer_check_feeds(t, feeds, n_feeds, batch, "nncl_trainer_predict"));
    NNCL_TRY(io_check_fed(t, feeds, n_feeds, out));
    for (i = 0; i < t->nd && i < 64; i++) saved[i] = t->shard[i];
    /* The training split (sized for the training batch) scaled to this one. */
    {
        int total = 0, given = 0;
        for (i = 0; i < t->nd; i++) total += t->alive[i] ? saved[i] : 0;
        for (i = 0; i < t->nd; i++) {
            t->shard[i] = t->alive[i] && total ? (int)((long)batch * saved[i] / total) : 0;
            given += t->shard[i];
        }
        for (i = 0; given < batch; i = (i + 1) % t->nd)
            if (t->alive[i]) {
                t->shard[i]++;
                given++;
            }
    }
    job.feeds = feeds;
    job.n_feeds = n_feeds;
    job.out = out;
    job.dst = dst;
    nncl__trainer_each_device(t, io_predict_job, &job);
    for (i = 0; i < t->nd; i++) {
        if (t->dev_status[i] != NNCL_OK && failed < 0) failed = i;
        if (i < 64) t->shard[i] = saved[i];
    }
    if (failed < 0) return NNCL_OK;
    /* the failing device's own status and words: an argument error stays one */
    return nncl__fail(t->ctx, t->dev_status[failed], "nncl_trainer_predict: %s", nncl__trainer_dev_msg(t, failed));
}

nncl_status nncl_trainer_predict(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_node *out,
                                 float *dst) {
    nncl_status st;
    NNCL__TRAINER_CALL(t, "nncl_trainer_predict", st, io_predict_batch(t, feeds, n_feeds, batch, out, dst));
    return st;
}

static nncl_status io_evaluate(nncl_trainer *t, nncl_node *x, nncl_node *labels, nncl_node *logits,
                               const float *xdata, const float *ydata, int n, float *loss, float *accuracy) {
    float *out;
    double total = 0;
    long correct = 0;
    int start, C;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_evaluate: trainer is NULL");
    if (!x || !labels || !logits || !xdata || !ydata || n <= 0 || logits->ndim != 2)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_evaluate: x, labels, 2-D logits, data and n > 0 are needed");
    if (labels->op != NNCL_OP_INPUT || labels->sample_numel != 1 || labels == x)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_trainer_evaluate: labels \"%s\" must be an input of one class index per sample, apart from x",
                          labels->name);
    C = logits->shape[1];
    NNCL_TRY(nncl__check_labels(t->ctx, labels, C, ydata, n)); /* as the training step does */
    out = (float *)nncl__calloc((size_t)t->cfg.max_batch * (size_t)C, sizeof(float));
    if (!out) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "nncl_trainer_evaluate: out of host memory");
    for (start = 0; start < n; start += t->cfg.max_batch) {
        int b = n - start < t->cfg.max_batch ? n - start : t->cfg.max_batch, r;
        nncl_feed f[2];
        nncl_status st;
        f[0].node = x;
        f[0].data = xdata + (size_t)start * x->sample_numel;
        f[1].node = labels;
        f[1].data = ydata + start;
        st = nncl_trainer_predict(t, f, 2, b, logits, out);
        if (st != NNCL_OK) {
            NNCL_FREE(out);
            return st;
        }
        for (r = 0; r < b; r++) { /* cross-entropy and argmax, in double */
            const float *z = out + (size_t)r * C;
            int c, arg = 0, y = (int)ydata[start + r];
            double m = z[0], s = 0;
            for (c = 1; c < C; c++)
                if (z[c] > z[arg]) arg = c;
            m = z[arg];
            for (c = 0; c < C; c++) s += exp((double)z[c] - m);
            total += log(s) + m - z[y];
            correct += arg == y;
        }
    }
    NNCL_FREE(out);
    if (loss) *loss = (float)(total / n);
    if (accuracy) *accuracy = (float)((double)correct / n);
    return NNCL_OK;
}

nncl_status nncl_trainer_evaluate(nncl_trainer *t, nncl_node *x, nncl_node *labels, nncl_node *logits,
                                  const float *xdata, const float *ydata, int n, float *loss, float *accuracy) {
    nncl_status st;
    NNCL__TRAINER_CALL(t, "nncl_trainer_evaluate", st,
                       io_evaluate(t, x, labels, logits, xdata, ydata, n, loss, accuracy));
    return st;
}

/* ------------------------------------------------------------- by name */

/* Where a named tensor lives: a parameter, or half of a node's running
 * statistics ("NAME.running_mean" / "NAME.running_var"). */
static int io_locate(const nncl_trainer *t, const char *name, int *is_state, size_t *off, size_t *count) {
    const nncl_graph *g = t->graph;
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        size_t len = strlen(n->name);
        if (n->op == NNCL_OP_PARAM && strcmp(n->name, name) == 0) {
            *is_state = 0;
            *off = n->param_off;
            *count = n->sample_numel;
            return 1;
        }
        if (n->state_size && strncmp(name, n->name, len) == 0 && name[len] == '.') {
            size_t half = n->state_size / 2;
            *is_state = 1;
            *count = half;
            if (strcmp(name + len + 1, "running_mean") == 0) *off = n->state_off;
            else if (strcmp(name + len + 1, "running_var") == 0) *off = n->state_off + half;
            else continue;
            return 1;
        }
    }
    return 0;
}

/* A pipelined trainer's parameter: the whole layout read from the stages,
 * and written back with the one changed. */
static nncl_status io_access_pipe(nncl_trainer *t, int is_state, size_t off, float *dst, const float *src,
                                  size_t count) {
    nncl_graph *g = t->graph;
    float *all = (float *)nncl__calloc((is_state ? g->n_state : g->n_params) + 1, sizeof(float));
    nncl_status st;
    if (!all) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    st = nncl__pipe_params(t, is_state ? NULL : all, is_state ? all : NULL, 0);
    if (st == NNCL_OK && dst) memcpy(dst, all + off, count * sizeof(float));
    if (st == NNCL_OK && src) {
        memcpy(all + off, src, count * sizeof(float));
        st = nncl__pipe_params(t, is_state ? NULL : all, is_state ? all : NULL, 1);
    }
    NNCL_FREE(all);
    return st;
}

static nncl_status io_access(nncl_trainer *t, const char *name, float *dst, const float *src, size_t count) {
    int is_state, i;
    size_t off, have;
    if (!t) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "trainer is NULL");
    if (!name || !(dst || src)) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "parameter name or data is NULL");
    if (!io_locate(t, name, &is_state, &off, &have))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "the model has no parameter \"%s\"", name);
    if (count != have)
        return nncl__fail(t->ctx, NNCL_ERR_SHAPE, "parameter \"%s\" has %zu elements, not %zu", name, have, count);
    if (t->pipe) return io_access_pipe(t, is_state, off, dst, src, count);
    for (i = 0; i < t->nd; i++) {
        nncl__pbuf b = is_state ? NNCL__PB_STATE : NNCL__PB_PARAMS;
        if (!t->alive[i]) continue;
        if (dst) return nncl__plan_get(t->plan[i], b, off, count, dst, 1);
        NNCL_TRY(nncl__plan_put(t->plan[i], b, off, count, src, 1));
    }
    return NNCL_OK;
}

nncl_status nncl_trainer_param_get(nncl_trainer *t, const char *name, float *dst, size_t count) {
    nncl_status st;
    NNCL_LOCKED(t ? t->ctx : NULL, st, io_access(t, name, dst, NULL, count));
    return st;
}

nncl_status nncl_trainer_param_set(nncl_trainer *t, const char *name, const float *src, size_t count) {
    nncl_status st;
    NNCL_LOCKED(t ? t->ctx : NULL, st, io_access(t, name, NULL, src, count));
    return st;
}

/* ------------------------------------------------------------- files */

/* Every parameter, then each normalisation's running statistics and
 * num_batches_tracked, as PyTorch's state_dict names them. */
typedef struct io_tensors {
    nncl_safetensors_entry *e;
    char (*names)[NNCL_NAME_MAX + 32];
    float *params, *state, *extra;
    int n;
} io_tensors;

static void io_tensors_free(io_tensors *w) {
    NNCL_FREE(w->e);
    NNCL_FREE(w->names);
    NNCL_FREE(w->params);
    NNCL_FREE(w->state);
    NNCL_FREE(w->extra);
}

nncl_status nncl__file_check_tensors(nncl_context *ctx, const nncl_graph *g, const nncl_safetensors *st) {
    static const char *const suffix[2] = {"running_mean", "running_var"};
    int i, k;
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        char name[NNCL_NAME_MAX + 32];
        int64_t shape[NNCL_MAX_DIMS];
        const float *data;
        nncl_status s = NNCL_OK;
        if (n->op == NNCL_OP_PARAM) {
            for (k = 0; k < n->ndim; k++) shape[k] = n->shape[k];
            s = nncl_safetensors_expect(st, n->name, n->ndim, shape, &data);
        }
        for (k = 0; k < 2 && n->state_size && s == NNCL_OK; k++) {
            snprintf(name, sizeof name, "%s.%s", n->name, suffix[k]);
            shape[0] = (int64_t)(n->state_size / 2);
            s = nncl_safetensors_expect(st, name, 1, shape, &data);
        }
        if (s != NNCL_OK) return nncl__fail(ctx, s, "%s", nncl_last_error(NULL));
    }
    return NNCL_OK;
}

static nncl_status io_collect(nncl_trainer *t, io_tensors *w, size_t extra_floats, int extra_entries) {
    const nncl_graph *g = t->graph;
    int i, k, cap = 0;
    memset(w, 0, sizeof *w);
    for (i = 0; i < g->n_nodes; i++) cap += g->nodes[i]->op == NNCL_OP_PARAM ? 1 : g->nodes[i]->state_size ? 3 : 0;
    w->e = (nncl_safetensors_entry *)nncl__calloc((size_t)cap + 2 + (size_t)extra_entries, sizeof *w->e);
    w->names = (char(*)[NNCL_NAME_MAX + 32])nncl__calloc((size_t)cap + 2, sizeof *w->names);
    w->params = (float *)nncl__calloc(g->n_params + 1, sizeof(float));
    w->state = (float *)nncl__calloc(g->n_state + 2, sizeof(float));
    w->extra = (float *)nncl__calloc(extra_floats + 1, sizeof(float));
    if (!w->e || !w->names || !w->params || !w->state || !w->extra) {
        io_tensors_free(w);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        if (n->op == NNCL_OP_PARAM) {
            nncl_safetensors_entry *e = &w->e[w->n++];
            snprintf(w->names[w->n - 1], sizeof w->names[0], "%s", n->name);
            e->name = w->names[w->n - 1];
            e->ndim = n->ndim;
            for (k = 0; k < n->ndim; k++) e->shape[k] = n->shape[k];
            e->data = w->params + n->param_off;
        } else if (n->state_size) {
            static const char *suffix[3] = {"running_mean", "running_var", "num_batches_tracked"};
            for (k = 0; k < 3; k++) {
                nncl_safetensors_entry *e = &w->e[w->n++];
                snprintf(w->names[w->n - 1], sizeof w->names[0], "%s.%s", n->name, suffix[k]);
                e->name = w->names[w->n - 1];
                e->ndim = k < 2 ? 1 : 0;
                e->shape[0] = (int64_t)(n->state_size / 2);
                e->data = k < 2 ? w->state + n->state_off + k * (n->state_size / 2) : w->state + g->n_state;
            }
        }
    }
    w->state[g->n_state] = (float)t->tracked;
    return nncl__trainer_download(t, w->params, w->state);
}

nncl_status nncl__trainer_save_ex(nncl_trainer *t, const char *path, int checkpoint, nncl_precision dtype,
                                  const char *const *extra_meta, const nncl_safetensors_entry *extra, int n_extra) {
    io_tensors w;
    nncl_status st;
    char step[32], tracked[32], kind[16], scale[32], growth[32], *graph;
    const char **meta;
    int k = 0, i, n_meta = 0;
    if (!t || !path) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "trainer or path is NULL");
    while (extra_meta && extra_meta[n_meta]) n_meta++;
    if (n_extra < 0 || (n_extra && !extra))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "extra tensors missing");
    meta = (const char **)nncl__calloc((size_t)n_meta + 13, sizeof *meta);
    graph = nncl__graph_describe(t->graph);
    if (!meta || !graph) {
        NNCL_FREE(graph);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if ((st = io_collect(t, &w, checkpoint ? t->opt_floats : 0, n_extra)) != NNCL_OK) {
        NNCL_FREE(graph);
        NNCL_FREE(meta);
        return st;
    }
    if ((int)dtype < (int)NNCL_PRECISION_FP32 || (int)dtype > (int)NNCL_PRECISION_BF16)
        st = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "save %s: dtype %d is not NNCL_PRECISION_FP32, _FP16 or _BF16",
                        path, (int)dtype);
    for (i = 0; !checkpoint && dtype != NNCL_PRECISION_FP32 && i < w.n; i++) /* not the batch count: an integer */
        if (w.e[i].ndim > 0) snprintf(w.e[i].dtype, sizeof w.e[i].dtype, "%s", dtype == NNCL_PRECISION_FP16 ? "F16" : "BF16");
    snprintf(step, sizeof step, "%lld", (long long)t->step);
    snprintf(tracked, sizeof tracked, "%lld", (long long)t->tracked);
    snprintf(kind, sizeof kind, "%d", (int)t->cfg.optim.kind);
    meta[k++] = "nncl.step"; meta[k++] = step;
    meta[k++] = "nncl.tracked"; meta[k++] = tracked;
    meta[k++] = "nncl.graph";
    meta[k++] = graph;
    if (checkpoint) {
        meta[k++] = "nncl.optimizer";
        meta[k++] = kind;
    }
    if (checkpoint && t->scaling) {
        nncl__fmt_float(scale, sizeof scale, t->scale);
        snprintf(growth, sizeof growth, "%d", t->growth);
        meta[k++] = "nncl.loss_scale"; meta[k++] = scale;
        meta[k++] = "nncl.loss_scale_growth"; meta[k++] = growth;
    }
    if (checkpoint && t->opt_floats) {
        nncl_safetensors_entry *e = &w.e[w.n++];
        i = nncl__trainer_first_alive(t);
        e->name = "nncl.optimizer_state";
        e->ndim = 1;
        e->shape[0] = (int64_t)t->opt_floats;
        e->data = w.extra;
        if ((t->pipe ? nncl__pipe_opt(t, w.extra, 0)
                     : nncl__plan_get(t->plan[i], NNCL__PB_OPT, 0, t->opt_floats, w.extra, 1)) != NNCL_OK)
            st = nncl__fail(t->ctx, NNCL_ERR_DEVICE, "reading the optimizer state failed");
    }
    for (i = 0; i < n_meta; i++) meta[k++] = extra_meta[i];
    meta[k] = NULL;
    for (i = 0; i < n_extra; i++) w.e[w.n++] = extra[i];
    if (st == NNCL_OK) {
        st = nncl_safetensors_save(path, w.e, w.n, meta);
        if (st != NNCL_OK) nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
    }
    io_tensors_free(&w);
    NNCL_FREE(graph);
    NNCL_FREE(meta);
    return st;
}

static nncl_status io_save(nncl_trainer *t, const char *path, int checkpoint) {
    nncl_status st;
    NNCL_LOCKED(t ? t->ctx : NULL, st, nncl__trainer_save_ex(t, path, checkpoint, NNCL_PRECISION_FP32, NULL, NULL, 0));
    return st;
}
nncl_status nncl_trainer_save(nncl_trainer *t, const char *path) { return io_save(t, path, 0); }
nncl_status nncl_trainer_save_checkpoint(nncl_trainer *t, const char *path) { return io_save(t, path, 1); }

/* Counts in a checkpoint are at most 2^53: exact in a double (the learning
 * rate schedules compute in double) and far from overflowing a step. */
#define IO_COUNT_MAX ((int64_t)1 << 53)

/* Metadata key of st as a whole decimal number in 0..IO_COUNT_MAX (only
 * digits: no sign, space or suffix); NNCL_ERR_FORMAT naming the field. */
static nncl_status io_meta_count(nncl_trainer *t, const nncl_safetensors *st, const char *path, const char *key,
                                 int64_t *out) {
    const char *v = nncl_safetensors_meta(st, key);
    int64_t x = 0;
    size_t k;
    if (!v) return nncl__fail(t->ctx, NNCL_ERR_FORMAT, "%s: not a checkpoint (no %s)", path, key);
    for (k = 0; v[k]; k++) {
        if (v[k] < '0' || v[k] > '9' || x > IO_COUNT_MAX) break;
        x = x * 10 + (v[k] - '0');
    }
    if (k == 0 || v[k] || x > IO_COUNT_MAX)
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT, "%s: %s = \"%.40s\" is not a whole number in 0..2^53", path, key, v);
    *out = x;
    return NNCL_OK;
}

/* The optimizer a checkpoint was written by must be the trainer's, with
 * state of the same size: another optimizer's state would be taken for
 * this one's (SGD momentum as RMSprop's square average). */
static nncl_status io_check_optimizer(nncl_trainer *t, const nncl_safetensors *st, const char *path) {
    const char *v = nncl_safetensors_meta(st, "nncl.optimizer");
    int have = nncl_safetensors_find(st, "nncl.optimizer_state") >= 0;
    char want[16];
    snprintf(want, sizeof want, "%d", (int)t->cfg.optim.kind);
    if (!v && t->opt_floats)
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT, "%s: nncl.optimizer is missing (which optimizer wrote the state?)", path);
    if (v && strcmp(v, want) != 0) {
        const char *by = nncl__optim_name((nncl_optimizer)(strlen(v) == 1 ? v[0] - '0' : -1));
        int known = by[0] != '?';
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT,
                          "%s: written by %s%s optimizer (nncl.optimizer = \"%.40s\"), but the trainer's is %s", path,
                          known ? "the " : "an unknown", known ? by : "", v, nncl__optim_name(t->cfg.optim.kind));
    }
    if (have && !t->opt_floats)
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT,
                          "%s: nncl.optimizer_state is present, but the trainer's optimizer keeps no state", path);
    return NNCL_OK;
}

/* A checkpoint's loss scale and count of clean steps (GradScaler's growth
 * tracker); one written without loss scaling starts scaling afresh. */
static nncl_status io_loss_scale(nncl_trainer *t, const nncl_safetensors *st, const char *path, float *scale,
                                 int *growth) {
    const char *v = nncl_safetensors_meta(st, "nncl.loss_scale");
    char *end = NULL;
    float d;
    int64_t gr = 0;
    *scale = t->cfg.loss_scale_init > 0 ? t->cfg.loss_scale_init : 65536.0f;
    *growth = 0;
    if (!v) return NNCL_OK;
    d = nncl__parse_float(v, &end);
    if (end == v || *end || !(d >= NNCL_LOSS_SCALE_MIN && d <= NNCL_LOSS_SCALE_MAX))
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT, "%s: nncl.loss_scale = \"%.40s\" is not a float in [2^-64, 2^64]",
                          path, v);
    NNCL_TRY(io_meta_count(t, st, path, "nncl.loss_scale_growth", &gr));
    if (gr >= t->cfg.loss_scale_growth_interval)
        return nncl__fail(t->ctx, NNCL_ERR_FORMAT,
                          "%s: nncl.loss_scale_growth = %lld clean steps, not below the growth interval %d", path,
                          (long long)gr, t->cfg.loss_scale_growth_interval);
    *scale = d;
    *growth = (int)gr;
    return NNCL_OK;
}

/* The part of a description line that is the architecture: all of it but
 * a parameter's initialisation and frozen flag (a resumed run keeps its
 * trained values, whatever their start). */
static size_t io_arch_len(const char *line, size_t len) {
    const char *sp = (const char *)memchr(line, ' ', len), *init;
    if (sp && (size_t)(line + len - sp) > 7 && !strncmp(sp, " param ", 7) &&
        (init = strstr(sp, " init=")) != NULL && init < line + len)
        return (size_t)(init - line);
    return len;
}

/* A checkpoint that describes its graph (nncl.graph) must describe the
 * trainer's: the message names the first node that differs. */
static nncl_status io_same_graph(nncl_trainer *t, const nncl_safetensors *st, const char *path) {
    const char *file = nncl_safetensors_meta(st, "nncl.graph"), *a, *b;
    char *mine;
    int node = 0;
    nncl_status s = NNCL_OK;
    if (!file) return NNCL_OK; /* weights only: by name and shape alone */
    if (!(mine = nncl__graph_describe(t->graph)))
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (a = file, b = mine; (*a || *b) && s == NNCL_OK; node++) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n"), ka = io_arch_len(a, la), kb = io_arch_len(b, lb);
        if (!*a || !*b)
            s = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s is a checkpoint of another model: %s %d nodes", path,
                           *a ? "this model has" : "it has", node);
        else if (ka != kb || memcmp(a, b, ka))
            s = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                           "%s is a checkpoint of another model: its node %d is \"%.*s\", this model's \"%.*s\"", path,
                           node, (int)(ka < 160 ? ka : 160), a, (int)(kb < 160 ? kb : 160), b);
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
    NNCL_FREE(mine);
    return s;
}

static nncl_status io_load_st(nncl_trainer *t, const nncl_safetensors *st, const char *path, int checkpoint) {
    io_tensors w;
    nncl_status s;
    int64_t tracked = -1; /* a model's num_batches_tracked (a checkpoint has nncl.tracked) */
    float scale = t->scale;
    int i, k, growth = t->growth;
    if (checkpoint) NNCL_TRY(io_same_graph(t, st, path));
    if ((s = io_collect(t, &w, t->opt_floats, 0)) != NNCL_OK) return s;
    /* Everything is checked into host copies first: a bad file changes nothing. */
    for (i = 0; i < w.n && s == NNCL_OK; i++) {
        const float *data;
        int64_t shape[NNCL_ST_MAX_DIMS];
        size_t count = 1;
        /* a normalisation's counter by its place (io_collect), never by its
         * name: a parameter may be called anything */
        int is_tracked = w.e[i].data == w.state + t->graph->n_state;
        for (k = 0; k < w.e[i].ndim; k++) {
            shape[k] = w.e[i].shape[k];
            count *= (size_t)shape[k];
        }
        if (is_tracked && nncl_safetensors_find(st, w.e[i].name) < 0) continue; /* optional */
        s = nncl_safetensors_expect(st, w.e[i].name, w.e[i].ndim, shape, &data);
        if (s != NNCL_OK) nncl__fail(t->ctx, s, "%s", nncl_last_error(NULL));
        else if (is_tracked) { /* batches seen: a whole number, as PyTorch's int64 counter */
            if (!(data[0] >= 0 && data[0] <= (float)IO_COUNT_MAX && data[0] == floorf(data[0])))
                s = nncl__fail(t->ctx, NNCL_ERR_FORMAT, "%s: %s = %g is not a whole number in 0..2^53", path, w.e[i].name,
                               (double)data[0]);
            else if (!checkpoint) tracked = (int64_t)data[0];
        } else memcpy((float *)w.e[i].data, data, count * sizeof(float));
    }
    if (s == NNCL_OK && checkpoint) {
        const float *data = NULL;
        int64_t shape[1], step = 0;
        shape[0] = (int64_t)t->opt_floats;
        s = io_meta_count(t, st, path, "nncl.step", &step);
        if (s == NNCL_OK) s = io_meta_count(t, st, path, "nncl.tracked", &tracked);
        if (s == NNCL_OK) s = io_check_optimizer(t, st, path);
        if (s == NNCL_OK && t->scaling) s = io_loss_scale(t, st, path, &scale, &growth);
        if (s == NNCL_OK && t->opt_floats &&
            (s = nncl_safetensors_expect(st, "nncl.optimizer_state", 1, shape, &data)) != NNCL_OK)
            nncl__fail(t->ctx, s, "%s (a checkpoint of another optimizer configuration?)", nncl_last_error(NULL));
        if (s == NNCL_OK) {
            if (t->opt_floats) memcpy(w.extra, data, t->opt_floats * sizeof(float));
            t->step = step;
            t->scale = scale;
            t->growth = growth;
        }
    }
    if (s == NNCL_OK && tracked >= 0) t->tracked = tracked;
    if (s == NNCL_OK) s = nncl__trainer_upload(t, w.params, w.state);
    if (s == NNCL_OK && checkpoint && t->opt_floats && t->pipe && nncl__pipe_opt(t, w.extra, 1) != NNCL_OK)
        s = nncl__fail(t->ctx, NNCL_ERR_DEVICE, "writing the optimizer state failed");
    for (i = 0; s == NNCL_OK && checkpoint && t->opt_floats && !t->pipe && i < t->nd; i++)
        if (t->alive[i] && nncl__plan_put(t->plan[i], NNCL__PB_OPT, 0, t->opt_floats, w.extra, 1) != NNCL_OK)
            s = nncl__fail(t->ctx, NNCL_ERR_DEVICE, "writing the optimizer state failed");
    io_tensors_free(&w);
    return s;
}

nncl_status nncl__trainer_load_from(nncl_trainer *t, const nncl_safetensors *st, const char *source, int checkpoint) {
    return io_load_st(t, st, source ? source : "<memory>", checkpoint);
}

static nncl_status io_load(nncl_trainer *t, const char *path, int checkpoint) {
    nncl_safetensors *st = NULL;
    nncl_status s;
    if (!t || !path) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "trainer or path is NULL");
    if ((s = nncl_safetensors_load(path, &st)) != NNCL_OK) return nncl__fail(t->ctx, s, "%s", nncl_last_error(NULL));
    s = io_load_st(t, st, path, checkpoint);
    nncl_safetensors_free(st);
    return s;
}

static nncl_status io_load_locked(nncl_trainer *t, const char *path, int checkpoint) {
    nncl_status st;
    NNCL_LOCKED(t ? t->ctx : NULL, st, io_load(t, path, checkpoint));
    return st;
}
nncl_status nncl_trainer_load(nncl_trainer *t, const char *path) { return io_load_locked(t, path, 0); }
nncl_status nncl_trainer_load_checkpoint(nncl_trainer *t, const char *path) { return io_load_locked(t, path, 1); }
#undef IO_COUNT_MAX
