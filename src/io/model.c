/* model.c - model files that carry what prediction needs besides the
 * graph (graph_text.c): the input preprocessing and the class names in the
 * safetensors __metadata__; and nncl_model, an inference-only trainer over
 * the rebuilt graph that turns raw rows into class probabilities. The
 * metadata is untrusted: lengths, counts and every number are checked. */
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>

#define MODEL_MAX_TEXT (4u << 20)  /* longest array value read */
#define MODEL_MAX_CLASSES 100000

/* ------------------------------------------------------------- JSON arrays */

static void model_put_json_string(nncl__buf *b, const char *s) {
    nncl__buf_put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') nncl__buf_put(b, "\\%c", c);
        else if (c < 0x20) nncl__buf_put(b, "\\u%04x", c);
        else nncl__buf_put(b, "%c", c);
    }
    nncl__buf_put(b, "\"");
}

/* Parses a JSON array of strings (class names) or of numbers (nums set):
 * up to max items. Returns the count, or -1. Strings are copied into
 * names[] (NNCL_NAME_MAX-1 bytes kept at most is not enough for labels,
 * so each is allocated). */
static int model_json_array(const char *s, char **names, float *nums, int max) {
    int n = 0;
    while (*s == ' ') s++;
    if (*s++ != '[') return -1;
    while (*s == ' ') s++;
    if (*s == ']') return s[1] ? -1 : 0;
    for (;;) {
        if (n == max) return -1;
        while (*s == ' ') s++;
        if (nums) {
            char *end;
            double v = nncl__parse_double(s, &end);
            if (end == s || !isfinite(v) || fabs(v) > 3.4e38) return -1;
            nums[n++] = (float)v;
            s = end;
        } else {
            const char *start;
            char *o;
            size_t len = 0;
            if (*s++ != '"') return -1;
            for (start = s; *s && *s != '"'; s++, len++)
                if (*s == '\\' && !*++s) return -1;
            if (*s != '"' || len > 4096) return -1;
            if (!(o = (char *)nncl__calloc(len + 1, 1))) return -1;
            names[n++] = o;
            for (s = start; *s != '"'; s++) {
                if (*s != '\\') {
                    *o++ = *s;
                    continue;
                }
                switch (*++s) {
                case '"': case '\\': case '/': *o++ = *s; break;
                case 'n': *o++ = '\n'; break;
                case 't': *o++ = '\t'; break;
                case 'r': *o++ = '\r'; break;
                case 'u': {
                    unsigned v = 0;
                    int k;
                    for (k = 1; k <= 4; k++) {
                        char h = s[k];
                        if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return -1;
                        v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                    }
                    if (v == 0 || (v >= 0xd800 && v <= 0xdfff)) return -1;
                    if (v < 0x80) {
                        *o++ = (char)v;
                    } else if (v < 0x800) {
                        *o++ = (char)(0xc0 | (v >> 6));
                        *o++ = (char)(0x80 | (v & 0x3f));
                    } else {
                        *o++ = (char)(0xe0 | (v >> 12));
                        *o++ = (char)(0x80 | ((v >> 6) & 0x3f));
                        *o++ = (char)(0x80 | (v & 0x3f));
                    }
                    s += 4;
                    break;
                }
                default: return -1;
                }
            }
            s++;
        }
        while (*s == ' ') s++;
        if (*s == ']') return s[1] ? -1 : n;
        if (*s++ != ',') return -1;
    }
}

/* ------------------------------------------------------------- saving */

nncl_model_meta nncl_model_meta_default(void) {
    nncl_model_meta m;
    memset(&m, 0, sizeof m);
    m.scale = 1;
    return m;
}

static nncl_node *model_first_input(const nncl_graph *g) {
    int i;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) return g->nodes[i];
    return NULL;
}

/* What nncl_model_load() will ask of the file, asked of the metadata before
 * it is written: a saved model always loads and predicts from its input. */
static nncl_status model_check_meta(nncl_trainer *t, const nncl_model_meta *m) {
    const nncl_graph *g = t->graph;
    const char *fn = "nncl_trainer_save_model";
    unsigned char *need;
    size_t j, d;
    int i;
    if (!nncl__graph_owns(g, m->input) || m->input->op != NNCL_OP_INPUT)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: meta input is not an input of the trainer's graph", fn);
    if (!nncl__graph_owns(g, m->output) || !m->output->batched || m->output->ndim < 2)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "%s: meta output is not a node of the trainer's graph of shape [batch, .., classes]", fn);
    /* the inputs the output is computed from (nodes come after their inputs) */
    if (!(need = (unsigned char *)nncl__calloc((size_t)g->n_nodes, 1)))
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    need[m->output->id] = 1;
    for (i = m->output->id; i >= 0; i--)
        if (need[i]) {
            int k;
            for (k = 0; k < g->nodes[i]->n_in; k++) need[g->nodes[i]->in[k]->id] = 1;
            if (g->nodes[i]->op == NNCL_OP_INPUT && g->nodes[i] != m->input) break;
        }
    NNCL_FREE(need);
    if (i >= 0)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: output \"%s\" needs input \"%s\" besides \"%s\"", fn,
                          m->output->name, g->nodes[i]->name, m->input->name);
    if (!isfinite(m->scale) || !isfinite(m->shift))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: scale %g and shift %g must be finite", fn,
                          (double)m->scale, (double)m->shift);
    if (!m->mean != !m->std)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: give mean and std together, or neither", fn);
    d = m->input->sample_numel;
    for (j = 0; m->mean && j < d; j++)
        if (!isfinite(m->mean[j]) || !isfinite(m->std[j]) || !(m->std[j] > 0))
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: mean[%zu] %g and std[%zu] %g: finite, std > 0", fn,
                              j, (double)m->mean[j], j, (double)m->std[j]);
    if (m->n_classes && (!m->class_names || m->n_classes != m->output->shape[m->output->ndim - 1]))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: %d class names for output \"%s\" of %d classes", fn,
                          m->n_classes, m->output->name, m->output->shape[m->output->ndim - 1]);
    if (m->n_classes > MODEL_MAX_CLASSES) /* the loader's limit; a negative count failed above */
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: %d classes, more than %d", fn, m->n_classes,
                          MODEL_MAX_CLASSES);
    for (i = 0; i < m->n_classes; i++)
        if (m->class_names[i] && strlen(m->class_names[i]) > 4096)
            return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: class name %d is longer than 4096 bytes", fn, i);
    if (m->label_name && strlen(m->label_name) > 4096)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: label_name is longer than 4096 bytes", fn);
    return NNCL_OK;
}

static nncl_status model_save(nncl_trainer *t, const char *path, const nncl_model_meta *meta) {
    nncl_model_meta m = meta ? *meta : nncl_model_meta_default();
    nncl__buf mean, std, classes;
    char scale[32], shift[32], out_name[NNCL_NAME_MAX];
    const char *kv[20];
    size_t d, j;
    int k = 0, i;
    nncl_status st;
    if (!t || !path) return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_trainer_save_model: trainer or path is NULL");
    if (!m.input) m.input = model_first_input(t->graph);
    if (!m.output) m.output = t->loss->n_in ? t->loss->in[0] : NULL;
    NNCL_TRY(model_check_meta(t, &m));
    memset(&mean, 0, sizeof mean);
    memset(&std, 0, sizeof std);
    memset(&classes, 0, sizeof classes);
    d = m.input->sample_numel;
    nncl__fmt_double(scale, sizeof scale, "%.9g", (double)m.scale);
    nncl__fmt_double(shift, sizeof shift, "%.9g", (double)m.shift);
    snprintf(out_name, sizeof out_name, "%s", m.output->name);
    kv[k++] = "nncl.input"; kv[k++] = m.input->name;
    kv[k++] = "nncl.output"; kv[k++] = out_name;
    kv[k++] = "nncl.scale"; kv[k++] = scale;
    kv[k++] = "nncl.shift"; kv[k++] = shift;
    if (m.mean) {
        for (j = 0; j < d; j++) {
            nncl__buf_put(&mean, "%s", j ? "," : "[");
            nncl__buf_num(&mean, (double)m.mean[j]);
            nncl__buf_put(&std, "%s", j ? "," : "[");
            nncl__buf_num(&std, (double)m.std[j]);
        }
        nncl__buf_put(&mean, "]");
        nncl__buf_put(&std, "]");
        kv[k++] = "nncl.mean"; kv[k++] = mean.s;
        kv[k++] = "nncl.std"; kv[k++] = std.s;
    }
    if (m.n_classes) {
        nncl__buf_put(&classes, "[");
        for (i = 0; i < m.n_classes; i++) {
            if (i) nncl__buf_put(&classes, ",");
            model_put_json_string(&classes, m.class_names[i] ? m.class_names[i] : "");
        }
        nncl__buf_put(&classes, "]");
        kv[k++] = "nncl.classes"; kv[k++] = classes.s;
    }
    if (m.label_name) {
        kv[k++] = "nncl.label";
        kv[k++] = m.label_name;
    }
    kv[k] = NULL;
    if (mean.failed || std.failed || classes.failed) st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    else st = nncl__trainer_save_ex(t, path, 0, m.dtype, kv, NULL, 0);
    NNCL_FREE(mean.s);
    NNCL_FREE(std.s);
    NNCL_FREE(classes.s);
    return st;
}

nncl_status nncl_trainer_save_model(nncl_trainer *t, const char *path, const nncl_model_meta *meta) {
    nncl_status st;
    NNCL_LOCKED(t ? t->ctx : NULL, st, model_save(t, path, meta));
    return st;
}

/* ------------------------------------------------------------- loading */

struct nncl_model {
    nncl_graph *graph;
    nncl_trainer *trainer;
    nncl_node *input, *output;
    int classes;              /* the output's last dimension */
    size_t positions;         /* rows of classes per sample: 1, or a sequence's [.., classes] */
    char **class_names;       /* NULL or classes names */
    char *label_name;         /* NULL or the label column's name */
    float scale, shift;
    float *mean, *std;        /* NULL or features each */
    float *work, *logits;     /* max_batch rows, max_batch * positions * classes */
    int max_batch;
};

void nncl_model_free(nncl_model *m) {
    int k;
    if (!m) return;
    nncl_trainer_free(m->trainer);
    nncl_graph_free(m->graph);
    for (k = 0; m->class_names && k < m->classes; k++) NNCL_FREE(m->class_names[k]);
    NNCL_FREE(m->class_names);
    NNCL_FREE(m->label_name);
    NNCL_FREE(m->mean);
    NNCL_FREE(m->std);
    NNCL_FREE(m->work);
    NNCL_FREE(m->logits);
    NNCL_FREE(m);
}

static nncl_node *model_node_named(const nncl_graph *g, const char *name) {
    return name ? nncl_graph_find(g, name) : NULL;
}

static nncl_status model_float_meta(nncl_context *ctx, const nncl_safetensors *st, const char *key, float dflt, float *out) {
    const char *v = nncl_safetensors_meta(st, key);
    char *end;
    *out = dflt;
    if (!v) return NNCL_OK;
    *out = (float)nncl__parse_double(v, &end);
    if (end == v || *end || !isfinite(*out)) return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata %s is not a number", key);
    return NNCL_OK;
}

static int model_is_loss(const nncl_node *n) {
    return n->op == NNCL_OP_SOFTMAX_CE || n->op == NNCL_OP_BCE_LOGITS || n->op == NNCL_OP_MSE || n->op == NNCL_OP_SEQ_CE;
}

/* Reads everything but the parameters. */
static nncl_status model_describe(nncl_context *ctx, const nncl_safetensors *st, nncl_model *m) {
    const char *v;
    size_t d;
    int k, n;
    nncl_node *loss = NULL;
    NNCL_TRY(nncl_graph_from_safetensors(ctx, st, &m->graph));
    m->input = model_node_named(m->graph, nncl_safetensors_meta(st, "nncl.input"));
    if (!m->input) m->input = model_first_input(m->graph);
    m->output = model_node_named(m->graph, nncl_safetensors_meta(st, "nncl.output"));
    for (k = 0; k < m->graph->n_nodes; k++)
        if (model_is_loss(m->graph->nodes[k])) loss = m->graph->nodes[k];
    if (!m->output && loss) m->output = loss->in[0];
    if (!m->input || m->input->op != NNCL_OP_INPUT || !m->output || !m->output->batched || m->output->ndim < 2)
        return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata: no input, or no output of shape [batch, .., classes]");
    m->classes = m->output->shape[m->output->ndim - 1];
    m->positions = m->output->sample_numel / (size_t)m->classes;
    d = m->input->sample_numel;
    NNCL_TRY(model_float_meta(ctx, st, "nncl.scale", 1, &m->scale));
    NNCL_TRY(model_float_meta(ctx, st, "nncl.shift", 0, &m->shift));
    if ((v = nncl_safetensors_meta(st, "nncl.mean")) != NULL) {
        const char *w = nncl_safetensors_meta(st, "nncl.std");
        m->mean = (float *)nncl__calloc(d + 1, sizeof(float));
        m->std = (float *)nncl__calloc(d + 1, sizeof(float));
        if (!m->mean || !m->std) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        if (!w || strlen(v) > MODEL_MAX_TEXT || strlen(w) > MODEL_MAX_TEXT || model_json_array(v, NULL, m->mean, (int)d) != (int)d ||
            model_json_array(w, NULL, m->std, (int)d) != (int)d)
            return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata nncl.mean / nncl.std: not two arrays of %zu numbers", d);
        for (k = 0; k < (int)d; k++)
            if (!(m->std[k] > 0)) return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata nncl.std[%d] is not positive", k);
    }
    if ((v = nncl_safetensors_meta(st, "nncl.label")) != NULL) {
        if (strlen(v) > 4096) return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata nncl.label is too long");
        if (!(m->label_name = nncl__strdup(v))) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if ((v = nncl_safetensors_meta(st, "nncl.classes")) != NULL) {
        if (m->classes > MODEL_MAX_CLASSES || strlen(v) > MODEL_MAX_TEXT)
            return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata nncl.classes is too long");
        if (!(m->class_names = (char **)nncl__calloc((size_t)m->classes + 1, sizeof(char *))))
            return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        if ((n = model_json_array(v, m->class_names, NULL, m->classes)) != m->classes)
            return nncl__fail(ctx, NNCL_ERR_FORMAT, "model metadata nncl.classes: not an array of %d strings", m->classes);
    }
    return NNCL_OK;
}

nncl_status nncl_model_from_safetensors(nncl_context *ctx, const nncl_safetensors *st, int max_batch, nncl_model **out) {
    nncl_model *m;
    nncl_status s;
    int k;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_from_safetensors: out is NULL");
    *out = NULL;
    if (!st) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_from_safetensors: file is NULL");
    if (!(m = (nncl_model *)nncl__calloc(1, sizeof *m))) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    m->max_batch = max_batch > 0 ? max_batch : 256;
    s = model_describe(ctx, st, m);
    if (s == NNCL_OK && ctx) {
        nncl_train_config tc = nncl_train_default();
        nncl_node *loss = NULL;
        tc.max_batch = m->max_batch;
        tc.optim = nncl_optim_default(NNCL_OPT_SGD);
        /* Frozen parameters: no gradient and no optimizer memory. */
        for (k = 0; k < m->graph->n_nodes && s == NNCL_OK; k++) {
            nncl_node *n = m->graph->nodes[k];
            if (n->op == NNCL_OP_PARAM) s = nncl_param_freeze(m->graph, n, 1);
            if (model_is_loss(n)) loss = n;
        }
        if (s == NNCL_OK && !loss) s = nncl__fail(ctx, NNCL_ERR_FORMAT, "model description has no loss node");
        if (s == NNCL_OK) s = nncl_trainer_create(ctx, m->graph, loss, &tc, &m->trainer);
        if (s == NNCL_OK) s = nncl__trainer_load_from(m->trainer, st, "the model file", 0);
        if (s == NNCL_OK) {
            m->work = (float *)nncl__calloc((size_t)m->max_batch * m->input->sample_numel, sizeof(float));
            m->logits = (float *)nncl__calloc((size_t)m->max_batch * m->output->sample_numel, sizeof(float));
            if (!m->work || !m->logits) s = nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    if (s != NNCL_OK) {
        nncl_model_free(m);
        return s;
    }
    *out = m;
    return NNCL_OK;
}

nncl_status nncl_model_load(nncl_context *ctx, const char *path, int max_batch, nncl_model **out) {
    nncl_safetensors *st = NULL;
    nncl_status s;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_load: out is NULL");
    *out = NULL;
    if (!ctx || !path) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_load: context or path is NULL");
    if ((s = nncl_safetensors_load(path, &st)) != NNCL_OK) return nncl__fail(ctx, s, "%s", nncl_last_error(NULL));
    s = nncl_model_from_safetensors(ctx, st, max_batch, out);
    if (s != NNCL_OK) {
        char why[512];
        snprintf(why, sizeof why, "%.500s", nncl_last_error(ctx));
        nncl__fail(ctx, s, "%s: %s", path, why);
    }
    nncl_safetensors_free(st);
    return s;
}

nncl_graph *nncl_model_graph(const nncl_model *m) { return m ? m->graph : NULL; }
nncl_trainer *nncl_model_trainer(const nncl_model *m) { return m ? m->trainer : NULL; }
size_t nncl_model_features(const nncl_model *m) { return m ? m->input->sample_numel : 0; }
int nncl_model_input_shape(const nncl_model *m, int *shape) { return m ? nncl_node_shape(m->input, shape) : 0; }
int nncl_model_classes(const nncl_model *m) { return m ? m->classes : 0; }

const char *nncl_model_class_name(const nncl_model *m, int k) {
    return m && m->class_names && k >= 0 && k < m->classes ? m->class_names[k] : NULL;
}

const char *nncl_model_label_name(const nncl_model *m) { return m ? m->label_name : NULL; }

nncl_status nncl_model_preprocess(const nncl_model *m, float *rows, size_t n) {
    size_t d, i, j;
    if (!m || (!rows && n)) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_preprocess: model or rows is NULL");
    d = m->input->sample_numel;
    for (i = 0; i < n; i++) {
        float *r = rows + i * d;
        /* The same expressions as nncl_dataset_from_idx / _scale / _standardize,
         * so that a row gets the very bits it got in training. */
        if (m->scale != 1)
            for (j = 0; j < d; j++) r[j] *= m->scale;
        if (m->shift != 0)
            for (j = 0; j < d; j++) r[j] += m->shift;
        if (m->mean)
            for (j = 0; j < d; j++) r[j] = (r[j] - m->mean[j]) / m->std[j];
    }
    return NNCL_OK;
}

static nncl_status model_predict(nncl_model *m, const float *rows, size_t n, float *probs, int *classes) {
    size_t d, start;
    int C;
    if (!m || (n && (!rows || (!probs && !classes)))) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_model_predict: model, rows or probs is NULL");
    if (!m->trainer) return nncl__fail(NULL, NNCL_ERR_STATE, "nncl_model_predict: the model was read without a context");
    d = m->input->sample_numel;
    C = m->classes;
    for (start = 0; start < n; start += (size_t)m->max_batch) {
        int b = n - start < (size_t)m->max_batch ? (int)(n - start) : m->max_batch, r, c;
        nncl_feed f;
        memcpy(m->work, rows + start * d, (size_t)b * d * sizeof(float));
        nncl_model_preprocess(m, m->work, (size_t)b);
        f.node = m->input;
        f.data = m->work;
        NNCL_TRY(nncl_trainer_predict(m->trainer, &f, 1, b, m->output, m->logits));
        for (r = 0; r < b * (int)m->positions; r++) { /* softmax in double */
            const float *z = m->logits + (size_t)r * C;
            double mx, s = 0;
            int arg = 0;
            for (c = 1; c < C; c++)
                if (z[c] > z[arg]) arg = c;
            mx = z[arg];
            if (classes) classes[start * m->positions + (size_t)r] = arg;
            if (!probs) continue;
            for (c = 0; c < C; c++) s += exp((double)z[c] - mx);
            for (c = 0; c < C; c++)
                probs[(start * m->positions + (size_t)r) * C + (size_t)c] = (float)(exp((double)z[c] - mx) / s);
        }
    }
    return NNCL_OK;
}

nncl_status nncl_model_predict(nncl_model *m, const float *rows, size_t n, float *probs, int *classes) {
    nncl_status st;
    NNCL_LOCKED(m && m->trainer ? m->trainer->ctx : NULL, st, model_predict(m, rows, n, probs, classes));
    return st;
}

#undef MODEL_MAX_TEXT
#undef MODEL_MAX_CLASSES
