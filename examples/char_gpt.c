/* char_gpt.c - a character-level GPT trained on tiny Shakespeare, read top
 * to bottom: nanoGPT's model (token and position embeddings, pre-norm
 * blocks of causal self-attention and a GELU MLP, a final layer norm, the
 * output head tied to the token embedding; no biases) and its CPU
 * configuration (4 layers, 4 heads, 128 channels, context 64, batch 12,
 * 2000 iterations of AdamW with warm-up, cosine decay and clipping).
 * The vocabulary is the text's sorted distinct characters; the first 90%
 * trains, the last 10% validates; each batch is random windows, seeded.
 * The model file keeps nanoGPT's parameter names, the architecture and the
 * vocabulary, so `char_gpt --generate N` (and PyTorch, see
 * char_gpt_pytorch.py) need nothing else. Copy it (with options.h) and
 * adapt. */
#include "nncl.h"
#include "options.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef NNCL_HAVE_ZLIB
#include <zlib.h>
#endif

#define MAX_TEXT (1u << 30) /* the largest text read */

typedef struct gpt_config {
    int n_layer, n_head, n_embd, block, vocab;
} gpt_config;

static int fail(nncl_context *ctx, const char *what, nncl_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, nncl_status_str(st), nncl_last_error(ctx));
    return 1;
}

/* ------------------------------------------------------------- random */

/* splitmix64: the batch windows of iteration i come from (seed, i) alone,
 * so a run resumed at iteration i draws what the uninterrupted one drew. */
typedef struct rng { uint64_t s; } rng;
static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static rng rng_at(uint64_t seed, uint64_t stream, uint64_t i) {
    rng r;
    r.s = seed * 0x2545f4914f6cdd1dull ^ (stream << 48) ^ i;
    rng_next(&r);
    return r;
}
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; } /* [0, 1) */
static double rng_normal(rng *r) {
    double u = rng_uniform(r), v = rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* ------------------------------------------------------------- data */

/* The whole file (plain, or gzip where built with zlib) into *text. */
static int read_text(const char *path, unsigned char **text, size_t *len) {
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = (unsigned char *)malloc(cap);
#ifdef NNCL_HAVE_ZLIB
    gzFile f = gzopen(path, "rb"); /* reads plain files as they are */
    int got;
    if (!f || !buf) {
        fprintf(stderr, "error: --data %s: cannot open it\n", path);
        free(buf);
        if (f) gzclose(f);
        return 1;
    }
    while ((got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap) {
            unsigned char *more = cap < MAX_TEXT ? (unsigned char *)realloc(buf, cap * 2) : NULL;
            if (!more) {
                fprintf(stderr, "error: --data %s: longer than %u bytes, or out of memory\n", path, MAX_TEXT);
                free(buf);
                gzclose(f);
                return 1;
            }
            buf = more, cap *= 2;
        }
    }
    if (got < 0) {
        int e;
        fprintf(stderr, "error: --data %s: %s\n", path, gzerror(f, &e));
        free(buf);
        gzclose(f);
        return 1;
    }
    gzclose(f);
#else
    FILE *f = fopen(path, "rb");
    size_t got;
    if (!f || !buf) {
        fprintf(stderr, "error: --data %s: cannot open it\n", path);
        free(buf);
        if (f) fclose(f);
        return 1;
    }
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *more = cap < MAX_TEXT ? (unsigned char *)realloc(buf, cap * 2) : NULL;
            if (!more) {
                fprintf(stderr, "error: --data %s: longer than %u bytes, or out of memory\n", path, MAX_TEXT);
                free(buf);
                fclose(f);
                return 1;
            }
            buf = more, cap *= 2;
        }
    }
    fclose(f);
    if (n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
        fprintf(stderr, "error: --data %s is gzip-compressed and this build reads no gzip (it was built without "
                        "zlib: install zlib1g-dev and rebuild, or run gzip -dk %s and pass the plain file)\n", path, path);
        free(buf);
        return 1;
    }
#endif
    *text = buf;
    *len = n;
    return 0;
}

/* The vocabulary: the distinct bytes of the text in byte order (as
 * nanoGPT's sorted(set(text))), as one-character strings, and the token of
 * each byte (-1: absent). ASCII text only: the characters become the class
 * names of the model file, which are UTF-8. */
static int make_vocab(const unsigned char *text, size_t n, char names[128][2], int token_of[256]) {
    int seen[256] = {0}, c, v = 0;
    size_t i;
    for (i = 0; i < n; i++) seen[text[i]] = 1;
    for (c = 0; c < 256; c++) {
        token_of[c] = -1;
        if (!seen[c]) continue;
        if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) {
            for (i = 0; text[i] != c; i++) {}
            fprintf(stderr, "error: the text holds byte 0x%02x at offset %zu: char_gpt takes ASCII text\n", c, i);
            return -1;
        }
        names[v][0] = (char)c, names[v][1] = 0;
        token_of[c] = v++;
    }
    return v;
}

/* B windows of T + 1 tokens at random starts in tokens[0 .. n): x the
 * first T of each, y the T that follow them. */
static void windows(const float *tokens, size_t n, int B, int T, rng *r, float *x, float *y) {
    int b;
    for (b = 0; b < B; b++) {
        size_t start = (size_t)(rng_uniform(r) * (double)(n - (size_t)T));
        memcpy(x + (size_t)b * T, tokens + start, sizeof(float) * (size_t)T);
        memcpy(y + (size_t)b * T, tokens + start + 1, sizeof(float) * (size_t)T);
    }
}

/* ------------------------------------------------------------- model */

/* nanoGPT's GPT with bias=False, dropout 0, as a graph: idx [B, T] token
 * indices, logits [B, T, vocab]; loss the mean cross-entropy against
 * targets [B, T]. Parameter names are model.py's state_dict keys. */
static nncl_node *build_gpt(nncl_graph *g, const gpt_config *c, nncl_node **idx, nncl_node **targets, nncl_node **logits) {
    int T = c->block, C = c->n_embd, l, tc[2] = {c->block, c->n_embd};
    char name[64];
    nncl_node *x, *wte, *wpe;
    *idx = nncl_input(g, "idx", 1, &T);
    *targets = nncl_input(g, "targets", 1, &T);
    x = nncl_embedding(g, *idx, c->vocab, C, "transformer.wte");          /* [B, T, C] */
    wpe = nncl_param(g, "transformer.wpe.weight", 2, tc, NNCL_INIT_NORMAL, 0.02f);
    x = nncl_op_add(g, x, wpe); /* positions 0..T-1, the same for every sample */
    for (l = 0; l < c->n_layer; l++) {
        nncl_node *h, *qkv, *q, *k, *v, *a;
        /* x = x + attn(ln_1(x)) */
        snprintf(name, sizeof name, "transformer.h.%d.ln_1", l);
        h = nncl_layernorm_ex(g, x, 1e-5f, 0, name);
        snprintf(name, sizeof name, "transformer.h.%d.attn.c_attn", l);
        qkv = nncl_linear(g, h, 3 * C, 0, NNCL_ACT_NONE, name);               /* [B, T, 3C] */
        q = nncl_slice(g, qkv, 1, 0, C);
        k = nncl_slice(g, qkv, 1, C, C);
        v = nncl_slice(g, qkv, 1, 2 * C, C);
        a = nncl_causal_attention(g, q, k, v, c->n_head, 0.0f);               /* [B, T, C] */
        snprintf(name, sizeof name, "transformer.h.%d.attn.c_proj", l);
        x = nncl_op_add(g, x, nncl_linear(g, a, C, 0, NNCL_ACT_NONE, name));
        /* x = x + mlp(ln_2(x)) */
        snprintf(name, sizeof name, "transformer.h.%d.ln_2", l);
        h = nncl_layernorm_ex(g, x, 1e-5f, 0, name);
        snprintf(name, sizeof name, "transformer.h.%d.mlp.c_fc", l);
        h = nncl_op_gelu(g, nncl_linear(g, h, 4 * C, 0, NNCL_ACT_NONE, name)); /* nn.GELU(): the erf form */
        snprintf(name, sizeof name, "transformer.h.%d.mlp.c_proj", l);
        x = nncl_op_add(g, x, nncl_linear(g, h, C, 0, NNCL_ACT_NONE, name));
    }
    x = nncl_layernorm_ex(g, x, 1e-5f, 0, "transformer.ln_f");
    wte = nncl_graph_find(g, "transformer.wte.weight");
    *logits = nncl_matmul(g, x, wte, 0, 1); /* lm_head tied to wte: x wte^T */
    return nncl_sequence_cross_entropy(g, *logits, *targets, -1);
}

/* One parameter set to N(0, sd^2), or to ones for a norm's 1-D weight. */
static nncl_status init_param(nncl_trainer *t, nncl_graph *g, const char *name, double sd, rng *r) {
    int shape[4], nd, k;
    size_t n = 1, j;
    float *w;
    nncl_status st;
    nncl_node *p = nncl_graph_find(g, name);
    if (!p) return NNCL_ERR_INVALID_ARGUMENT;
    nd = nncl_node_shape(p, shape);
    for (k = 0; k < nd; k++) n *= (size_t)shape[k];
    if (!(w = (float *)malloc(n * sizeof(float)))) return NNCL_ERR_OUT_OF_MEMORY;
    for (j = 0; j < n; j++) w[j] = nd == 1 ? 1.0f : (float)(sd * rng_normal(r));
    st = nncl_trainer_param_set(t, name, w, n);
    free(w);
    return st;
}

/* nanoGPT's initialisation: every weight N(0, 0.02^2), the residual
 * projections (c_proj) N(0, (0.02 / sqrt(2 n_layer))^2), norms 1. */
static nncl_status init_gpt(nncl_trainer *t, nncl_graph *g, const gpt_config *c, uint64_t seed) {
    static const char *const parts[6] = {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"};
    double proj = 0.02 / sqrt(2.0 * c->n_layer);
    char name[64];
    int l, k;
    rng r = rng_at(seed, 1, 0);
    nncl_status st = init_param(t, g, "transformer.wte.weight", 0.02, &r);
    if (st == NNCL_OK) st = init_param(t, g, "transformer.wpe.weight", 0.02, &r);
    for (l = 0; l < c->n_layer && st == NNCL_OK; l++)
        for (k = 0; k < 6 && st == NNCL_OK; k++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s.weight", l, parts[k]);
            st = init_param(t, g, name, strstr(parts[k], "c_proj") ? proj : 0.02, &r);
        }
    return st == NNCL_OK ? init_param(t, g, "transformer.ln_f.weight", 0, &r) : st;
}

/* nanoGPT's weight decay: on the 2-D weights, not on the norms. */
static nncl_status decay_2d_only(nncl_graph *g, const gpt_config *c) {
    char name[64];
    int l, k;
    static const char *const norms[2] = {"ln_1", "ln_2"};
    nncl_status st = nncl_param_decay(g, nncl_graph_find(g, "transformer.ln_f.weight"), 0);
    for (l = 0; l < c->n_layer && st == NNCL_OK; l++)
        for (k = 0; k < 2 && st == NNCL_OK; k++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s.weight", l, norms[k]);
            st = nncl_param_decay(g, nncl_graph_find(g, name), 0);
        }
    return st;
}

/* ------------------------------------------------------------- evaluation */

/* Mean cross-entropy and next-character accuracy over n random windows of
 * tokens, in batches of B (evaluation mode; the loss from the logits, in
 * double on the host). */
static nncl_status estimate(nncl_trainer *t, nncl_node *idx, nncl_node *logits, const gpt_config *c, int B,
                            const float *tokens, size_t n_tokens, int n, rng *r, double *loss, double *acc) {
    int T = c->block, V = c->vocab, done, b, p, k;
    float *x = (float *)malloc(sizeof(float) * (size_t)B * T), *y = (float *)malloc(sizeof(float) * (size_t)B * T);
    float *z = (float *)malloc(sizeof(float) * (size_t)B * T * V);
    double sum = 0;
    long right = 0, count = 0;
    nncl_status st = NNCL_OK;
    if (!x || !y || !z) st = NNCL_ERR_OUT_OF_MEMORY;
    for (done = 0; done < n && st == NNCL_OK; done += B) {
        int nb = n - done < B ? n - done : B;
        nncl_feed f;
        windows(tokens, n_tokens, nb, T, r, x, y);
        f.node = idx;
        f.data = x;
        if ((st = nncl_trainer_predict(t, &f, 1, nb, logits, z)) != NNCL_OK) break;
        for (b = 0; b < nb; b++)
            for (p = 0; p < T; p++) {
                const float *row = z + ((size_t)b * T + p) * V;
                int label = (int)y[b * T + p], arg = 0;
                double mx = row[0], s = 0;
                for (k = 1; k < V; k++)
                    if (row[k] > row[arg]) arg = k;
                mx = row[arg];
                for (k = 0; k < V; k++) s += exp((double)row[k] - mx);
                sum += log(s) + mx - row[label];
                right += arg == label;
                count++;
            }
    }
    free(x), free(y), free(z);
    *loss = count ? sum / count : NAN;
    *acc = count ? (double)right / count : NAN;
    return st;
}

/* ------------------------------------------------------------- generation */

/* One character drawn from a row of logits: divided by the temperature,
 * cut to the top_k likeliest (0: all; ties with the k-th stay in, as
 * nanoGPT's torch.topk cut does), softmax, then sampled. */
static int sample(const float *row, int V, double temperature, int top_k, double *w, rng *r) {
    double mx = -HUGE_VAL, kth = -HUGE_VAL, s = 0, u;
    int k, j, above, pick;
    for (k = 0; k < V; k++) {
        w[k] = row[k] / temperature;
        if (w[k] > mx) mx = w[k];
    }
    if (top_k > 0 && top_k < V)
        for (kth = HUGE_VAL, k = 0; k < V; k++) {
            for (above = 0, j = 0; j < V; j++) above += w[j] > w[k];
            if (above < top_k && w[k] < kth) kth = w[k];
        }
    for (k = 0; k < V; k++) s += w[k] = w[k] < kth ? 0 : exp(w[k] - mx);
    u = rng_uniform(r) * s;
    for (pick = 0; pick < V - 1 && (u -= w[pick]) >= 0; pick++) {}
    while (w[pick] == 0 && pick > 0) pick--; /* rounding at the end never picks one left out */
    return pick;
}

/* Loads the model file, then prints the prompt and n characters sampled
 * one at a time from the logits at the context's last position; the
 * context is the last block_size tokens (nanoGPT's crop). stdout gets the
 * text alone. */
static int generate(const char *devices, const char *path, const char *prompt, int n, double temperature, int top_k,
                    uint64_t seed) {
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_model *m = NULL;
    nncl_status st;
    nncl_node *idx, *out;
    int T, V, shape[3], k, i, len, *toks = NULL, token_of[256], rc = 1;
    float *x = NULL, *z = NULL;
    double *w = NULL;
    rng r = rng_at(seed, 3, 0);
    if (!(temperature > 0)) {
        fprintf(stderr, "error: --temperature must be above 0\n");
        return 2;
    }
    cfg.devices = devices;
    if ((st = nncl_init(&cfg, &ctx)) != NNCL_OK) {
        fprintf(stderr, "char_gpt: no device: %s\n", nncl_last_error(NULL));
        return 1;
    }
    if ((st = nncl_model_load(ctx, path, 1, &m)) != NNCL_OK) {
        fail(ctx, "loading the model", st);
        goto done;
    }
    idx = nncl_model_input(m);
    out = nncl_model_output(m);
    V = nncl_model_classes(m);
    if (nncl_model_input_shape(m, shape) != 1 || nncl_node_shape(out, NULL) != 2 || !nncl_model_class_name(m, 0)) {
        fprintf(stderr, "error: %s is not a char_gpt model (no input [T], logits [T, vocabulary] and vocabulary)\n", path);
        goto done;
    }
    T = shape[0];
    for (k = 0; k < 256; k++) token_of[k] = -1;
    for (k = 0; k < V; k++) {
        const char *s = nncl_model_class_name(m, k);
        if (!s || strlen(s) != 1) {
            fprintf(stderr, "error: %s: vocabulary entry %d is not one character\n", path, k);
            goto done;
        }
        token_of[(unsigned char)s[0]] = k;
    }
    if (!*prompt) prompt = token_of['\n'] >= 0 ? "\n" : nncl_model_class_name(m, 0); /* nanoGPT starts from "\n" */
    len = (int)strlen(prompt);
    toks = (int *)malloc(sizeof(int) * ((size_t)len + (size_t)n));
    x = (float *)calloc((size_t)T, sizeof(float));
    z = (float *)malloc(sizeof(float) * (size_t)T * V);
    w = (double *)malloc(sizeof(double) * (size_t)V);
    if (!toks || !x || !z || !w) {
        fail(NULL, "generating", NNCL_ERR_OUT_OF_MEMORY);
        goto done;
    }
    for (i = 0; i < len; i++)
        if ((toks[i] = token_of[(unsigned char)prompt[i]]) < 0) {
            fprintf(stderr, "error: --prompt: the character '%c' (0x%02x) is not in the model's vocabulary\n", prompt[i],
                    (unsigned char)prompt[i]);
            rc = 2;
            goto done;
        }
    fputs(prompt, stdout);
    for (i = 0; i < n; i++) {
        int have = len + i, first = have > T ? have - T : 0, used = have - first;
        nncl_feed f;
        /* Right-padded with token 0: causal attention keeps position
         * used-1 blind to what comes after it. */
        for (k = 0; k < T; k++) x[k] = k < used ? (float)toks[first + k] : 0.0f;
        f.node = idx;
        f.data = x;
        if ((st = nncl_trainer_predict(nncl_model_trainer(m), &f, 1, 1, out, z)) != NNCL_OK) {
            fail(ctx, "generating", st);
            goto done;
        }
        toks[have] = sample(z + (size_t)(used - 1) * V, V, temperature, top_k, w, &r);
        fputs(nncl_model_class_name(m, toks[have]), stdout);
    }
    fputs("\n", stdout);
    rc = 0;
done:
    free(toks), free(x), free(z), free(w);
    nncl_model_free(m);
    nncl_free(ctx);
    return rc;
}

/* ------------------------------------------------------------- training */

int main(int argc, char **argv) {
    const char *data = "examples/data/tinyshakespeare.txt.gz", *out = "char_gpt.safetensors", *devices = NULL;
    const char *checkpoint = NULL, *resume = NULL, *precision = "fp32", *save_dtype = "f32", *model = NULL, *prompt = "";
    int iters = 2000, decay_iters = -1, warmup = 100, eval_interval = 250, eval_windows = 200, batch = 12, seed = 1337;
    int quiet = 0, gen = -1, top_k = 0, it, start = 0, rc = 1, token_of[256];
    gpt_config c = {4, 4, 128, 64, 0};
    double lr = 1e-3, temperature = 0.8, train_seconds = 0, tloss = NAN, tacc = NAN, vloss = NAN, vacc = NAN;
    const ex_option opts[] = {
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--data", OPT_STR, &data, "FILE", "ASCII text, plain or .gz (examples/data/tinyshakespeare.txt.gz)"},
        {"--iters", OPT_INT, &iters, "N", "training iterations (2000)"},
        {"--batch", OPT_INT, &batch, "N", "windows per batch (12)"},
        {"--block", OPT_INT, &c.block, "T", "context length in characters (64)"},
        {"--layers", OPT_INT, &c.n_layer, "N", "transformer blocks (4)"},
        {"--heads", OPT_INT, &c.n_head, "N", "attention heads (4)"},
        {"--embd", OPT_INT, &c.n_embd, "C", "channels, a multiple of --heads (128)"},
        {"--lr", OPT_NUM, &lr, "LR", "peak learning rate (1e-3), decayed to LR/10"},
        {"--warmup", OPT_INT, &warmup, "N", "linear warm-up iterations (100)"},
        {"--lr-decay-iters", OPT_INT, &decay_iters, "N", "cosine decay to LR/10 ends here (--iters)"},
        {"--eval-interval", OPT_INT, &eval_interval, "N", "estimate train and val loss every N iterations (250)"},
        {"--eval-windows", OPT_INT, &eval_windows, "N", "random windows per estimate (200; the final one at least 200)"},
        {"--seed", OPT_INT, &seed, "S", "initialisation, batches, sampling (1337)"},
        {"--checkpoint", OPT_STR, &checkpoint, "FILE", "write a checkpoint at each estimate"},
        {"--resume", OPT_STR, &resume, "FILE", "go on from a checkpoint of this run"},
        {"--out", OPT_STR, &out, "FILE", "the model file (char_gpt.safetensors); curve in FILE's .csv and .svg"},
        {"--precision", OPT_STR, &precision, "P", "storage of activations and working weights: fp32, fp16, bf16"},
        {"--save-dtype", OPT_STR, &save_dtype, "D", "dtype of the saved model's weights: f32, f16, bf16 (f32)"},
        {"--quiet", OPT_FLAG, &quiet, "", "no progress lines"},
        {"--generate", OPT_INT, &gen, "N", "no training: load --model and print N generated characters"},
        {"--model", OPT_STR, &model, "FILE", "the model --generate loads (--out's file)"},
        {"--prompt", OPT_STR, &prompt, "TEXT", "the text generation starts from (a newline)"},
        {"--temperature", OPT_NUM, &temperature, "T", "divides the logits before sampling (0.8)"},
        {"--top-k", OPT_INT, &top_k, "K", "sample among the K likeliest characters only (0: all)"},
        {NULL, 0, NULL, NULL, NULL}};
    nncl_train_config tc = nncl_train_default();
    nncl_model_meta meta = nncl_model_meta_default();
    nncl_context *ctx = NULL;
    nncl_graph *g = NULL;
    nncl_node *idx, *targets, *logits, *loss;
    nncl_trainer *t = NULL;
    nncl_progress *progress = NULL;
    nncl_curve *curve = NULL;
    nncl_status st;
    unsigned char *text = NULL;
    size_t n_text, n_train, i;
    float *tokens = NULL, *bx = NULL, *by = NULL;
    char names[128][2], csv[1024], svg[1024], line[200];
    const char *vocab[128];

    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with the progress on stderr, also when piped */
    ex_parse(argc, argv, "char_gpt [options]\n       char_gpt --generate N [--model FILE] [--prompt TEXT] "
                         "[--temperature T] [--top-k K] [--seed S]", opts, NULL, 0);
    if (gen >= 0) return generate(devices, model ? model : out, prompt, gen, temperature, top_k, (uint64_t)seed);
    if (decay_iters < 0) decay_iters = iters;
    if (iters < 1 || batch < 1 || c.block < 1 || c.n_layer < 1 || c.n_head < 1 || c.n_embd < 1 ||
        c.n_embd % c.n_head || eval_interval < 1 || eval_windows < 1 || decay_iters < 1 || !(lr > 0)) {
        fprintf(stderr, "error: --iters, --batch, --block, --layers, --heads, --embd, --lr-decay-iters, --eval-interval and "
                        "--eval-windows must be at least 1, --embd a multiple of --heads, --lr above 0\n");
        return 2;
    }
    if (warmup >= decay_iters) { /* a short run: the decay needs room after the warm-up */
        warmup = decay_iters / 10;
        printf("warm-up cut to %d iterations (--lr-decay-iters %d)\n", warmup, decay_iters);
    }
    ex_beside(out, ".csv", csv, sizeof csv);
    ex_beside(out, ".svg", svg, sizeof svg);
    if (ex_check_writable("--out", out) || (checkpoint && ex_check_writable("--checkpoint", checkpoint))) return 2;
    if (ex_precision("--precision", precision, &tc.precision) || ex_precision("--save-dtype", save_dtype, &meta.dtype))
        return 2;

    /* The text, its vocabulary, and the tokens: 90% train, 10% validation. */
    if (read_text(data, &text, &n_text)) return 1;
    if ((c.vocab = make_vocab(text, n_text, names, token_of)) < 0) goto done;
    n_train = (size_t)(0.9 * (double)n_text);
    if (n_train <= (size_t)c.block + 1 || n_text - n_train <= (size_t)c.block + 1) {
        fprintf(stderr, "error: --data %s: %zu characters are too few for windows of %d in both parts\n", data, n_text,
                c.block + 1);
        goto done;
    }
    tokens = (float *)malloc(sizeof(float) * n_text);
    bx = (float *)malloc(sizeof(float) * (size_t)batch * c.block);
    by = (float *)malloc(sizeof(float) * (size_t)batch * c.block);
    if (!tokens || !bx || !by) {
        fail(NULL, "data", NNCL_ERR_OUT_OF_MEMORY);
        goto done;
    }
    for (i = 0; i < n_text; i++) tokens[i] = (float)token_of[text[i]];
    for (it = 0; it < c.vocab; it++) vocab[it] = names[it];
    printf("%s: %zu characters, vocabulary of %d; %zu train, %zu validation\n", data, n_text, c.vocab, n_train,
           n_text - n_train);
    if (ex_init("char_gpt", devices, &ctx)) goto done;

    /* The model, and nanoGPT's optimizer: AdamW (0.9, 0.99), weight decay
     * 0.1 on 2-D weights, its learning rate (get_lr: linear warm-up, then
     * cosine decay to lr/10 at lr_decay_iters), clipping at 1. */
    g = nncl_graph_create(ctx, (uint64_t)seed);
    loss = build_gpt(g, &c, &idx, &targets, &logits);
    if (!loss || decay_2d_only(g, &c) != NNCL_OK) {
        fail(ctx, "model", NNCL_ERR_INVALID_ARGUMENT);
        goto done;
    }
    tc.max_batch = batch;
    tc.optim = nncl_optim_default(NNCL_OPT_ADAMW);
    tc.optim.lr = (float)lr;
    tc.optim.beta2 = 0.99f;
    tc.optim.weight_decay = 0.1f;
    tc.optim.schedule = NNCL_SCHED_WARMUP_COSINE;
    tc.optim.total_steps = decay_iters;
    tc.optim.min_lr = (float)(lr / 10);
    tc.optim.warmup_steps = warmup;
    tc.optim.clip_norm = 1.0f;
    ex_compiling(ctx);
    if ((st = nncl_trainer_create(ctx, g, loss, &tc, &t)) != NNCL_OK ||
        (st = init_gpt(t, g, &c, (uint64_t)seed)) != NNCL_OK) {
        fail(ctx, "trainer", st);
        goto done;
    }
    nncl_trainer_summary(t, stdout);
    if (resume) {
        if ((st = nncl_trainer_load_checkpoint(t, resume)) != NNCL_OK) {
            fail(ctx, "--resume", st);
            goto done;
        }
        start = (int)nncl_trainer_step_count(t);
        printf("resuming from %s at iteration %d\n", resume, start);
    }

    if (nncl_progress_create(stderr, 1, iters, &progress) != NNCL_OK || nncl_curve_create(&curve) != NNCL_OK) {
        fail(NULL, "progress", NNCL_ERR_OUT_OF_MEMORY);
        goto done;
    }
    if (quiet) nncl_progress_set_mode(progress, NNCL_PROGRESS_QUIET);
    for (it = start; it < iters; it++) {
        nncl_step_info info;
        nncl_feed f[2];
        rng r = rng_at((uint64_t)seed, 2, (uint64_t)it);
        windows(tokens, n_train, batch, c.block, &r, bx, by);
        f[0].node = idx, f[0].data = bx;
        f[1].node = targets, f[1].data = by;
        if ((st = nncl_trainer_step(t, f, 2, batch, &info)) != NNCL_OK) {
            fail(ctx, "training", st);
            goto done;
        }
        train_seconds += info.seconds;
        nncl_progress_update(progress, 0, it, info.loss, -1, batch);
        if ((it + 1) % eval_interval == 0 || it + 1 == iters) { /* estimates, curve, checkpoint */
            nncl_curve_row row;
            rng er = rng_at((uint64_t)seed, 4, (uint64_t)it);
            int nw = it + 1 == iters && eval_windows < 200 ? 200 : eval_windows;
            if ((st = estimate(t, idx, logits, &c, batch, tokens, n_train, nw, &er, &tloss, &tacc)) != NNCL_OK ||
                (st = estimate(t, idx, logits, &c, batch, tokens + n_train, n_text - n_train, nw, &er, &vloss, &vacc)) != NNCL_OK) {
                fail(ctx, "evaluation", st);
                goto done;
            }
            snprintf(line, sizeof line, "step %d: train loss %.4f, val loss %.4f (%d windows each)", it + 1, tloss, vloss, nw);
            nncl_progress_message(progress, line);
            memset(&row, 0, sizeof row);
            row.epoch = it + 1;
            row.train_loss = tloss, row.train_acc = tacc, row.val_loss = vloss, row.val_acc = vacc;
            row.seconds = train_seconds;
            row.samples_per_s = train_seconds > 0 ? (double)(it + 1 - start) * batch / train_seconds : 0;
            if ((st = nncl_curve_add(curve, &row)) != NNCL_OK || (st = nncl_curve_write_csv(curve, csv)) != NNCL_OK ||
                (st = nncl_curve_write_svg(curve, svg, "char_gpt on tiny Shakespeare (x: iteration)")) != NNCL_OK) {
                fail(NULL, "writing the curve", st);
                goto done;
            }
            if (checkpoint && (st = nncl_trainer_save_checkpoint(t, checkpoint)) != NNCL_OK) {
                fail(ctx, "checkpoint", st);
                goto done;
            }
        }
    }
    nncl_progress_epoch_end(progress, 0, tloss, tacc, vloss, vacc);
    nncl_progress_free(progress);
    progress = NULL;
    if (iters > start)
        printf("trained %d iterations in %.1f s: %.0f tokens/s\n", iters - start, train_seconds,
               (double)(iters - start) * batch * c.block / train_seconds);
    printf("val loss %.4f\n", vloss);

    meta.input = idx;
    meta.output = logits;
    meta.class_names = vocab; /* the characters in token order */
    meta.n_classes = c.vocab;
    if ((st = nncl_trainer_save_model(t, out, &meta)) != NNCL_OK) {
        fail(ctx, "saving", st);
        goto done;
    }
    printf("model saved to %s; curve in %s and %s\n", out, csv, svg);
    rc = 0;
done:
    free(text), free(tokens), free(bx), free(by);
    nncl_progress_free(progress);
    nncl_curve_free(curve);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_free(ctx);
    return rc;
}
