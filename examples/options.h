/* options.h - what every example program shares and a copy of one needs
 * too: command-line options that behave (--help exits 0; an unknown or
 * misspelt option or a bad value prints the usage and exits 2), an --out
 * path checked before any training, device opening whose errors say what
 * to do, and the IDX files of a data folder, plain or .gz. */
#ifndef NNCL_EXAMPLE_OPTIONS_H
#define NNCL_EXAMPLE_OPTIONS_H
#include "nncl.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OPT_STR, OPT_INT, OPT_NUM, OPT_FLAG };

typedef struct ex_option {
    const char *name;   /* "--epochs" */
    int kind;           /* OPT_* */
    void *dst;          /* const char **, int *, double * or int * (flag set to 1) */
    const char *meta;   /* "N" in the usage */
    const char *help;
} ex_option;

static inline void ex_usage(FILE *f, const char *synopsis, const ex_option *o) {
    fprintf(f, "usage: %s\n\noptions:\n", synopsis);
    for (; o->name; o++) {
        char left[48];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->kind == OPT_FLAG ? "" : " ", o->kind == OPT_FLAG ? "" : o->meta);
        fprintf(f, "  %-22s %s\n", left, o->help);
    }
    fprintf(f, "  %-22s %s\n", "--help", "this text");
}

/* Edits between two short strings, for "did you mean". */
static inline int ex_distance(const char *a, const char *b) {
    int d[40][40], i, j, la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 38 || lb > 38) return 99;
    for (i = 0; i <= la; i++) d[i][0] = i;
    for (j = 0; j <= lb; j++) d[0][j] = j;
    for (i = 1; i <= la; i++)
        for (j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static inline void ex_refuse(const char *synopsis, const ex_option *o, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n\n");
    ex_usage(stderr, synopsis, o);
    exit(2);
}

/* Parses argv into the options; other arguments go to pos[] (at most
 * max_pos). Exits 0 after --help, 2 on anything it cannot take. */
static inline int ex_parse(int argc, char **argv, const char *synopsis, const ex_option *opts, const char **pos, int max_pos) {
    int i, n_pos = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL, *eq;
        const ex_option *o, *near = NULL;
        char name[64];
        int best = 3;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ex_usage(stdout, synopsis, opts);
            exit(0);
        }
        if (a[0] != '-' || !a[1]) {
            if (n_pos == max_pos) ex_refuse(synopsis, opts, "unexpected argument '%s'%s", a, "");
            pos[n_pos++] = a;
            continue;
        }
        eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        for (o = opts; o->name && strcmp(o->name, name); o++) {
            int d = ex_distance(o->name, name);
            if (d < best) best = d, near = o;
        }
        if (!o->name) {
            char hint[96] = "";
            if (near) snprintf(hint, sizeof hint, " (did you mean %s?)", near->name);
            ex_refuse(synopsis, opts, "unknown option %s%s", name, hint);
        }
        if (o->kind == OPT_FLAG) {
            if (eq) ex_refuse(synopsis, opts, "%s takes no value%s", name, "");
            *(int *)o->dst = 1;
            continue;
        }
        if (eq) value = eq + 1;
        else if (i + 1 < argc) value = argv[++i];
        else ex_refuse(synopsis, opts, "%s needs a value (%s)", name, o->meta);
        if (o->kind == OPT_STR) {
            if (!*value) ex_refuse(synopsis, opts, "%s needs a value (%s)", name, o->meta);
            *(const char **)o->dst = value;
        } else {
            char *end;
            double v;
            errno = 0;
            v = strtod(value, &end);
            if (end == value || *end || errno || v != v)
                ex_refuse(synopsis, opts, "%s: '%s' is not a number", name, value);
            if (o->kind == OPT_INT) {
                if (v != (double)(long)v || v < 0 || v > 2147483647.0)
                    ex_refuse(synopsis, opts, "%s: '%s' is not a whole number >= 0", name, value);
                *(int *)o->dst = (int)v;
            } else {
                *(double *)o->dst = v;
            }
        }
    }
    return n_pos;
}

/* The folder of path exists and this user may write there: checked before
 * a long run rather than found out at its end. */
static inline int ex_check_writable(const char *what, const char *path) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK) != 0) {
        fprintf(stderr, "error: %s %s: cannot write in folder %s (%s)\n", what, path, dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* --precision fp32|fp16|bf16 (storage while training) or --save-dtype
 * f32|f16|bf16 (the saved model's weights): 0 and *out set, or 1 after
 * saying what is wrong. */
static inline int ex_precision(const char *what, const char *s, nncl_precision *out) {
    static const char *const names[2][3] = {{"fp32", "fp16", "bf16"}, {"f32", "f16", "bf16"}};
    int i, k;
    for (k = 0; k < 2; k++)
        for (i = 0; i < 3; i++)
            if (!strcmp(s, names[k][i])) {
                *out = (nncl_precision)i;
                return 0;
            }
    fprintf(stderr, "error: %s %s: not fp32, fp16 or bf16\n", what, s);
    return 1;
}

/* --batch N or auto: *batch gets N, or 0 for auto (ex_batch_auto
 * resolves it once the model is built); anything else exits 2. */
static inline void ex_batch_arg(const char *synopsis, const ex_option *o, const char *arg, int *batch) {
    char *end;
    long v = strtol(arg, &end, 10);
    if (!strcmp(arg, "auto")) *batch = 0;
    else if (end != arg && !*end && v >= 1 && v <= 1000000) *batch = (int)v;
    else ex_refuse(synopsis, o, "--batch: '%s' is not a whole number in 1..1000000 or auto%s", arg, "");
}

/* The most samples a step of an epoch over (1 - val) of d can take, at most cap. */
static inline int ex_batch_most(const nncl_dataset *d, double val, int cap) {
    double n = (double)nncl_dataset_size(d) * (1 - val);
    return n < 1 ? 1 : n < cap ? (int)n : cap;
}

static inline const char *ex_mib(uint64_t bytes, char *buf, size_t len) {
    snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    return buf;
}

/* --batch auto: the largest global batch whose plans fit every device of
 * tc (nncl_train_max_batch, with tc's checkpointing and precision), at
 * most limit; says what it chose and why. 0 and *batch set, or 1 after
 * saying what is wrong. */
static inline int ex_batch_auto(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl_train_config *tc,
                                int limit, int *batch) {
    nncl_batch_fit f;
    nncl_device_info info;
    char need[32], have[32];
    nncl_status st = nncl_train_max_batch(ctx, g, loss, tc, limit, &f);
    if (st != NNCL_OK) {
        fprintf(stderr, "error: --batch auto: %s: %s\n", nncl_status_str(st), nncl_last_error(ctx));
        return 1;
    }
    nncl_device_info_get(ctx, f.device, &info);
    ex_mib(f.need_bytes, need, sizeof need);
    ex_mib(f.have_bytes, have, sizeof have);
    if (f.batch == 0) {
        fprintf(stderr, "error: --batch auto: not even one sample fits device %d (%s): its plan needs %s, it has %s "
                "(its memory or NNCL_MEMORY_CAP, less what nncl holds and %.0f%% kept free); try --grad-checkpoint, "
                "--precision fp16 or more devices\n", f.device, info.name, need, have, NNCL_FIT_MARGIN * 100);
        return 1;
    }
    if (f.batch == limit)
        printf("batch auto: %d, the most this run takes (an epoch's training samples, at most 4096); the plan "
               "needs %s of the %s device %d (%s) has for it%s\n", f.batch, need, have, f.device, info.name,
               f.segments > 1 ? ", with gradient checkpointing" : "");
    else
        printf("batch auto: %d, the largest whose plan fits every device: device %d (%s) limits it, its plan needs "
               "%s of the %s it has (its memory or NNCL_MEMORY_CAP, less what nncl holds and %.0f%% kept free)%s\n",
               f.batch, f.device, info.name, need, have, NNCL_FIT_MARGIN * 100,
               f.segments > 1 ? ", with gradient checkpointing" : "");
    *batch = f.batch;
    return 0;
}

/* nncl_init with the selection; on failure the message lists the devices. */
static inline int ex_init(const char *prog, const char *devices, nncl_context **ctx) {
    nncl_config cfg = nncl_config_default();
    nncl_status st;
    int i;
    cfg.devices = devices;
    if ((st = nncl_init(&cfg, ctx)) != NNCL_OK) {
        fprintf(stderr, "%s: no device: %s\n(build/examples/devices lists the devices and checks each one)\n", prog,
                nncl_last_error(NULL));
        return 1;
    }
    for (i = 0; i < nncl_device_count(*ctx); i++) {
        nncl_device_info info;
        nncl_device_info_get(*ctx, i, &info);
        printf("device %d: %s (%s)\n", i, info.name, info.platform);
    }
    return 0;
}

/* Said before creating a trainer: its first build of the kernels, with
 * the GEMM variants timed for each shape, takes 13-17 s on PoCL (the
 * Fashion-MNIST models on 2 cores), and a silent wait looks like a hang. */
static inline void ex_compiling(nncl_context *ctx) {
    int i, n = nncl_device_count(ctx);
    printf("compiling kernels for");
    for (i = 0; i < n; i++) {
        nncl_device_info info;
        nncl_device_info_get(ctx, i, &info);
        printf("%s %s", i ? "," : "", info.name);
    }
    printf(" (up to a minute the first time; cached after)...\n");
}

/* DIR/PART-KIND-idxN-ubyte or the same with .gz, whichever exists. */
static inline const char *ex_idx_path(const char *dir, const char *part, const char *kind, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s-%s-idx%d-ubyte", dir, part, kind, strcmp(kind, "images") ? 1 : 3);
    if (access(buf, R_OK) == 0) return buf;
    snprintf(buf + strlen(buf), len - strlen(buf), ".gz");
    return buf;
}

/* "model.safetensors" -> "model.csv": the curve files beside the model. */
static inline const char *ex_beside(const char *path, const char *ext, char *buf, size_t len) {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    int keep = dot && (!slash || dot > slash) ? (int)(dot - path) : (int)strlen(path);
    snprintf(buf, len, "%.*s%s", keep, path, ext);
    return buf;
}
#endif
