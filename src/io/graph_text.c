/* graph_text.c - a graph as text and back: the nncl.graph description a
 * model file carries in its safetensors __metadata__, one node per line
 * ("ID OP NAME [SHAPE] (INPUT IDS) ATTRIBUTE=VALUE ...", parameters with
 * their init), written with every save and rebuilt into a graph by
 * nncl_graph_from_safetensors. The text is untrusted when read: its length,
 * node count, every number and every reference are checked, and each node
 * must give the shape written. Also the growing text buffer both use. */
#include "io/io.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define GTEXT_MAX (4u << 20)  /* longest nncl.graph read */
#define GTEXT_MAX_NODES 100000

static const char *const gtext_inits[] = {"zeros", "ones", "uniform", "normal", "fan_in_uniform"};
static const char *const gtext_acts[] = {"none", "relu", "sigmoid", "tanh"}; /* nncl_act */

/* The names of an op's integer and float attributes, as its builder fills
 * them, so that the text reads "conv2d conv1 ... kernel=3 stride=1
 * padding=1 act=relu"; other slots are written iK= / fK=. */
typedef struct gtext_names {
    nncl__op op;
    const char *i[8], *f[4];
} gtext_names;

static const gtext_names gtext_table[] = {
    {NNCL_OP_LINEAR, {"act"}, {NULL}},
    {NNCL_OP_CONV2D, {"kernel", "stride", "padding", "act"}, {NULL}},
    {NNCL_OP_CONV2D_EX,
     {"stride_h", "stride_w", "padding_h", "padding_w", "dilation_h", "dilation_w", "groups", "act"}, {NULL}},
    {NNCL_OP_CONV1D, {"stride_h", "stride", "padding_h", "padding", "dilation_h", "dilation", "groups", "act"}, {NULL}},
    {NNCL_OP_CONV_TRANSPOSE2D,
     {"stride_h", "stride_w", "padding_h", "padding_w", "output_padding_h", "output_padding_w", "groups", "act"},
     {NULL}},
    {NNCL_OP_UPSAMPLE2D, {"factor_h", "factor_w", "bilinear"}, {NULL}},
    {NNCL_OP_MAXPOOL2D, {"kernel", "stride", "padding"}, {NULL}},
    {NNCL_OP_AVGPOOL2D, {"kernel", "stride", "padding"}, {NULL}},
    {NNCL_OP_DROPOUT, {"seed_lo", "seed_hi"}, {"p"}},
    {NNCL_OP_EMBEDDING, {"num", "dim"}, {NULL}},
    {NNCL_OP_RESHAPE, {"ndim", "d1", "d2", "d3", "d4"}, {NULL}},
    {NNCL_OP_CONCAT, {"axis"}, {NULL}},
    {NNCL_OP_MATMUL, {"transpose_a", "transpose_b"}, {NULL}},
    {NNCL_OP_TRANSPOSE, {"axis0", "axis1"}, {NULL}},
    {NNCL_OP_SLICE, {"axis", "start", "length"}, {NULL}},
    {NNCL_OP_RMSNORM, {NULL}, {"eps"}},
    {NNCL_OP_SEQ_CE, {"ignore_index"}, {NULL}},
    {NNCL_OP_CAUSAL_ATTENTION, {"seed_lo", "seed_hi", "heads"}, {"dropout"}},
    {NNCL_OP_BATCHNORM, {"activation"}, {"eps", "momentum"}},
    {NNCL_OP_LAYERNORM, {NULL}, {"eps"}},
    {NNCL_OP_GROUPNORM, {"groups"}, {"eps"}},
    {NNCL_OP_SCALE, {NULL}, {"alpha"}},
    {NNCL_OP_LEAKY_RELU, {NULL}, {"slope"}},
    {NNCL_OP_CLAMP, {NULL}, {"min", "max"}},
};

static const gtext_names *gtext_names_of(nncl__op op) {
    size_t k;
    for (k = 0; k < sizeof gtext_table / sizeof gtext_table[0]; k++)
        if (gtext_table[k].op == op) return &gtext_table[k];
    return NULL;
}

/* ------------------------------------------------------------- text buffer */

void nncl__buf_put(nncl__buf *b, const char *fmt, ...) {
    va_list ap;
    int len;
    if (b->failed) return;
    va_start(ap, fmt);
    len = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (len < 0) {
        b->failed = 1;
        return;
    }
    if (!b->s || b->n + (size_t)len + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap : 256) * 2 + (size_t)len + 1;
        char *s = (char *)nncl__calloc(cap, 1);
        if (!s) {
            b->failed = 1;
            return;
        }
        if (b->s) memcpy(s, b->s, b->n);
        NNCL_FREE(b->s);
        b->s = s;
        b->cap = cap;
        va_start(ap, fmt);
        vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
    }
    b->n += (size_t)len;
}

void nncl__buf_num(nncl__buf *b, double x) {
    char num[40];
    nncl__fmt_double(num, sizeof num, "%.17g", x);
    nncl__buf_put(b, "%s", num);
}

void nncl__buf_float(nncl__buf *b, float x) {
    char num[40];
    nncl__fmt_float(num, sizeof num, x);
    nncl__buf_put(b, "%s", num);
}

/* ------------------------------------------------------------- describe */

/* The nncl.graph text of g, or NULL when memory ran out. Every name is one
 * token: the builders take only names nncl__name_ok accepts. */
char *nncl__graph_describe(const nncl_graph *g) {
    nncl__buf b;
    const gtext_names *names;
    int i, k;
    memset(&b, 0, sizeof b);
    for (i = 0; i < g->n_nodes; i++) {
        const nncl_node *n = g->nodes[i];
        int shape[NNCL_MAX_DIMS], nd = nncl_node_shape(n, shape);
        nncl__buf_put(&b, "%s%d %s %s [", i ? "\n" : "", i, nncl__opdef_get(n->op)->name, n->name);
        for (k = 0; k < nd; k++) nncl__buf_put(&b, "%s%d", k ? "," : "", shape[k]);
        nncl__buf_put(&b, "]");
        if (n->op == NNCL_OP_PARAM) {
            nncl__buf_put(&b, " init=%s", gtext_inits[n->init]);
            if (n->init_scale != 0) {
                nncl__buf_put(&b, " scale=");
                nncl__buf_float(&b, n->init_scale);
            }
            if (!n->trainable) nncl__buf_put(&b, " frozen");
            if (n->no_decay) nncl__buf_put(&b, " no_decay");
            continue;
        }
        if (n->op == NNCL_OP_INPUT) continue;
        nncl__buf_put(&b, " (");
        for (k = 0; k < n->n_in; k++) nncl__buf_put(&b, "%s%d", k ? "," : "", n->in[k]->id);
        nncl__buf_put(&b, ")");
        names = gtext_names_of(n->op);
        for (k = 0; k < 8; k++) {
            const char *key = names ? names->i[k] : NULL;
            int v = n->iattr[k];
            /* Zeros only where they say something (padding=0, act=none). */
            if (!v && (!key || (strcmp(key, "padding") && strcmp(key, "act") && strcmp(key, "axis")))) continue;
            if (!key) nncl__buf_put(&b, " i%d=%d", k, v);
            else if (!strcmp(key, "act") && v >= 0 && v < 4) nncl__buf_put(&b, " act=%s", gtext_acts[v]);
            else nncl__buf_put(&b, " %s=%d", key, v);
        }
        for (k = 0; k < 4; k++) {
            const char *key = names ? names->f[k] : NULL;
            if (!key && n->fattr[k] == 0) continue;
            if (key) nncl__buf_put(&b, " %s=", key);
            else nncl__buf_put(&b, " f%d=", k);
            nncl__buf_float(&b, n->fattr[k]);
        }
    }
    if (b.failed) {
        NNCL_FREE(b.s);
        return NULL;
    }
    return b.s ? b.s : nncl__strdup("");
}

/* ------------------------------------------------------------- rebuild */

static nncl_status gtext_bad(nncl_context *ctx, int line, const char *what) {
    return nncl__fail(ctx, NNCL_ERR_FORMAT, "model description, node %d: %s", line, what);
}

/* A comma-separated list of up to max ints between open and close
 * (e.g. "[1,2]"); *p moves past it. */
static int gtext_ints(const char **p, char open, char close, int *out, int max, int lo) {
    const char *s = *p;
    int n = 0;
    if (*s++ != open) return -1;
    if (*s == close) {
        *p = s + 1;
        return 0;
    }
    for (;;) {
        char *end;
        long v;
        if (n == max || !(*s == '-' || (*s >= '0' && *s <= '9'))) return -1;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || v < lo || v > 0x7fffffffL) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == close) break;
        if (*s++ != ',') return -1;
    }
    *p = s + 1;
    return n;
}

/* One line "ID OP NAME [SHAPE] rest" parsed and added to g. */
static nncl_status gtext_node(nncl_context *ctx, nncl_graph *g, int id, char *line) {
    char *op_s, *name, *p, *save = NULL;
    const char *q;
    int shape[NNCL_MAX_DIMS], nd, got[NNCL_MAX_DIMS], ngot, k, op = -1;
    nncl_node *n = NULL;
    char *tok = strtok_r(line, " ", &save);
    if (!tok || strtol(tok, &p, 10) != id || *p) return gtext_bad(ctx, id, "does not start with its number");
    op_s = strtok_r(NULL, " ", &save);
    name = strtok_r(NULL, " ", &save);
    tok = strtok_r(NULL, " ", &save);
    if (!op_s || !name || !tok || strlen(name) >= NNCL_NAME_MAX) return gtext_bad(ctx, id, "needs op, name and [shape]");
    q = tok;
    if ((nd = gtext_ints(&q, '[', ']', shape, NNCL_MAX_DIMS, 1)) < 0 || *q) return gtext_bad(ctx, id, "bad [shape]");
    for (k = 0; k < NNCL_OP_COUNT; k++)
        if (nncl__opdef_get((nncl__op)k) && strcmp(nncl__opdef_get((nncl__op)k)->name, op_s) == 0) op = k;
    if (op == NNCL_OP_INPUT) {
        if (nd > NNCL_MAX_DIMS - 1) return gtext_bad(ctx, id, "input of too many dimensions");
        n = nncl_input(g, name, nd, shape);
    } else if (op == NNCL_OP_PARAM) {
        int init = -1, frozen = 0, no_decay = 0;
        float scale = 0;
        while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
            if (strncmp(tok, "init=", 5) == 0) {
                for (k = 0; k < 5; k++)
                    if (strcmp(tok + 5, gtext_inits[k]) == 0) init = k;
            } else if (strncmp(tok, "scale=", 6) == 0) {
                scale = nncl__parse_float(tok + 6, &p);
                if (*p || !isfinite(scale)) return gtext_bad(ctx, id, "bad scale=");
            } else if (strcmp(tok, "frozen") == 0) {
                frozen = 1;
            } else if (strcmp(tok, "no_decay") == 0) {
                no_decay = 1;
            } else {
                return gtext_bad(ctx, id, "unknown parameter field");
            }
        }
        if (init < 0) return gtext_bad(ctx, id, "parameter without a known init=");
        n = nncl_param(g, name, nd, shape, (nncl_init_kind)init, scale);
        if (n && frozen && nncl_param_freeze(g, n, 1) != NNCL_OK) n = NULL;
        if (n && no_decay && nncl_param_decay(g, n, 0) != NNCL_OK) n = NULL;
    } else if (op > NNCL_OP_PARAM) {
        int ins[NNCL_MAX_INPUTS], n_in, iattr[8] = {0}, k2;
        float fattr[4] = {0};
        nncl_node *in[NNCL_MAX_INPUTS];
        tok = strtok_r(NULL, " ", &save);
        q = tok ? tok : "";
        if ((n_in = gtext_ints(&q, '(', ')', ins, NNCL_MAX_INPUTS, 0)) < 0 || *q) return gtext_bad(ctx, id, "bad (inputs)");
        for (k = 0; k < n_in; k++) {
            if (ins[k] >= id) return gtext_bad(ctx, id, "an input refers to a later node");
            in[k] = g->nodes[ins[k]];
        }
        while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
            const gtext_names *names = gtext_names_of((nncl__op)op);
            char *eq = strchr(tok, '='), *val;
            int slot = -1, is_float = 0;
            if (!eq) return gtext_bad(ctx, id, "an attribute without '='");
            *eq = 0;
            val = eq + 1;
            for (k2 = 0; names && k2 < 8 && slot < 0; k2++)
                if (names->i[k2] && !strcmp(names->i[k2], tok)) slot = k2;
            for (k2 = 0; names && k2 < 4 && slot < 0; k2++)
                if (names->f[k2] && !strcmp(names->f[k2], tok)) slot = k2, is_float = 1;
            if (slot < 0 && (tok[0] == 'i' || tok[0] == 'f') && tok[1] >= '0' && tok[1] <= '7' && !tok[2]) {
                slot = tok[1] - '0';
                is_float = tok[0] == 'f';
                if (is_float && slot > 3) slot = -1;
            }
            if (slot < 0) return nncl__fail(ctx, NNCL_ERR_FORMAT, "model description, node %d: unknown attribute \"%.40s\"", id, tok);
            if (is_float) {
                fattr[slot] = nncl__parse_float(val, &p);
                if (p == val || *p || !isfinite(fattr[slot])) return gtext_bad(ctx, id, "an attribute is not a finite number");
            } else {
                long v = -1;
                for (k2 = 0; k2 < 4 && !strcmp(tok, "act"); k2++)
                    if (!strcmp(val, gtext_acts[k2])) v = k2;
                if (v < 0) {
                    errno = 0;
                    v = strtol(val, &p, 10);
                    if (errno || p == val || *p || v < -0x7fffffffL - 1 || v > 0x7fffffffL)
                        return gtext_bad(ctx, id, "an attribute is not a whole number");
                }
                iattr[slot] = (int)v;
            }
        }
        n = nncl__node_add(g, (nncl__op)op, name, n_in, in, iattr, 8, fattr, 4);
    } else {
        return nncl__fail(ctx, NNCL_ERR_FORMAT, "model description, node %d: unknown op \"%.40s\"", id, op_s);
    }
    if (!n) {
        char why[512]; /* the builder's message, copied: it lives in the buffer written next */
        snprintf(why, sizeof why, "%.500s", nncl_last_error(ctx));
        return nncl__fail(ctx, NNCL_ERR_FORMAT, "model description, node %d: %s", id, why);
    }
    if (n->id != id || strcmp(n->name, name) != 0) return gtext_bad(ctx, id, "name or number differs from the one written");
    ngot = nncl_node_shape(n, got);
    for (k = 0; k < nd && ngot == nd; k++)
        if (got[k] != shape[k]) break;
    if (ngot != nd || k != nd) return gtext_bad(ctx, id, "the op gives another shape than the one written");
    return NNCL_OK;
}

nncl_status nncl_graph_from_safetensors(nncl_context *ctx, const nncl_safetensors *st, nncl_graph **out) {
    const char *text;
    char *copy, *line, *next;
    nncl_graph *g;
    nncl_status s = NNCL_OK;
    int id = 0;
    size_t len;
    if (!out) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_graph_from_safetensors: out is NULL");
    *out = NULL;
    if (!st) return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_graph_from_safetensors: file is NULL");
    text = nncl_safetensors_meta(st, "nncl.graph");
    if (!text || !*text)
        return nncl__fail(ctx, NNCL_ERR_FORMAT, "the file holds no model description (nncl.graph): weights only, "
                          "saved by another program or an older nncl; build the graph in code and nncl_trainer_load() it");
    if ((len = strlen(text)) > GTEXT_MAX)
        return nncl__fail(ctx, NNCL_ERR_FORMAT, "model description of %zu bytes is longer than %u", len, GTEXT_MAX);
    if (!(copy = nncl__strdup(text))) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (!(g = nncl_graph_create(ctx, 1))) {
        NNCL_FREE(copy);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (line = copy; line && s == NNCL_OK; line = next, id++) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (id >= GTEXT_MAX_NODES) s = gtext_bad(ctx, id, "too many nodes");
        else s = gtext_node(ctx, g, id, line);
    }
    NNCL_FREE(copy);
    if (s != NNCL_OK) {
        nncl_graph_free(g);
        return s;
    }
    *out = g;
    return NNCL_OK;
}

#undef GTEXT_MAX
#undef GTEXT_MAX_NODES
