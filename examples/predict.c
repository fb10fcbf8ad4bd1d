/* predict.c - classifies new data with a model file saved by the examples
 * (or any nncl_trainer_save_model() file): the file alone rebuilds the
 * network, its preprocessing and class names. DATA is an IDX images file
 * (its labels found beside it: t10k-images-idx3-ubyte[.gz] ->
 * t10k-labels-idx1-ubyte[.gz], or --labels FILE) or a CSV table, with the
 * model's label column or without it. Prints the class of each row (with
 * its class probabilities after --probs; a count with --quiet) and, where
 * labels are known, the accuracy, the accuracy per class and (up to 50
 * classes) the confusion matrix; rows whose label is no class of the model
 * are counted and said, not scored. A model trained on a mean squared
 * error (the autoencoder) is refused as what it is. */
#include "nncl.h"
#include "options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rows {
    const float *x;    /* [n, features] raw values */
    const float *y;    /* [n] class indices, or NULL when unknown */
    size_t n;
    nncl_idx img, lab; /* what holds them */
    nncl_csv csv;
    float *own;
} rows;

/* A class name as printed: tab, newline and carriage return (a character
 * vocabulary's classes) written as \t, \n and \r, so each row stays a line. */
static const char *shown(const char *name, char *buf, size_t size) {
    size_t n = 0;
    if (!name) return "";
    for (; *name && n + 3 < size; name++) {
        char e = *name == '\t' ? 't' : *name == '\n' ? 'n' : *name == '\r' ? 'r' : 0;
        if (e) buf[n++] = '\\', buf[n++] = e;
        else buf[n++] = *name;
    }
    buf[n] = 0;
    return buf;
}

static void rows_free(rows *r) {
    nncl_idx_free(&r->img);
    nncl_idx_free(&r->lab);
    nncl_csv_free(&r->csv);
    free(r->own);
}

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* The labels file beside an images file, by the usual name. */
static int labels_beside(const char *images, char *buf, size_t len) {
    const char *at = strstr(images, "-images-idx3-ubyte");
    const char *gz[2] = {"", ".gz"};
    int k;
    if (!at) return 0;
    for (k = 0; k < 2; k++) {
        snprintf(buf, len, "%.*s-labels-idx1-ubyte%s", (int)(at - images), images, gz[k]);
        if (access(buf, R_OK) == 0) return 1;
    }
    return 0;
}

static int load_idx(const char *path, const char *labels, size_t features, rows *r) {
    char beside[1024];
    size_t per;
    if (nncl_idx_load(path, &r->img) != NNCL_OK) {
        fprintf(stderr, "predict: %s\n", nncl_last_error(NULL));
        return 1;
    }
    per = r->img.dims[0] ? r->img.count / r->img.dims[0] : 0;
    if (per != features) {
        fprintf(stderr, "predict: %s holds samples of %zu values; the model takes %zu\n", path, per, features);
        return 1;
    }
    if (!labels && labels_beside(path, beside, sizeof beside)) labels = beside;
    if (labels && nncl_idx_load(labels, &r->lab) != NNCL_OK) {
        fprintf(stderr, "predict: labels: %s\n", nncl_last_error(NULL));
        return 1;
    }
    if (labels && r->lab.count != r->img.dims[0]) {
        fprintf(stderr, "predict: %s holds %zu labels for %u images\n", labels, r->lab.count, r->img.dims[0]);
        return 1;
    }
    r->n = r->img.dims[0];
    r->x = r->img.data; /* raw values: the model file says how to scale them */
    r->y = labels ? r->lab.data : NULL;
    return 0;
}

/* A CSV with the model's label column, or with the features alone. */
static int load_csv(const char *path, nncl_model *m, rows *r) {
    nncl_csv_options o = nncl_csv_options_default();
    nncl_csv *t = &r->csv;
    const char *names[1024];
    size_t d = nncl_model_features(m), i, j;
    int k, C = nncl_model_classes(m), named = nncl_model_class_name(m, 0) != NULL && C <= 1024;
    nncl_status st = NNCL_ERR_FORMAT;
    if (nncl_model_label_name(m)) {
        o.label = nncl_model_label_name(m);
        for (k = 0; named && k < C; k++) names[k] = nncl_model_class_name(m, k);
        o.classes = named ? names : NULL;
        o.n_classes = named ? C : 0;
        o.label_mode = named ? NNCL_CSV_LABELS_CLASSES : NNCL_CSV_LABELS_AUTO;
        st = nncl_csv_load(path, &o, t);
        if (st == NNCL_OK && t->cols == d) {
            r->x = t->features;
            r->y = t->labels;
            r->n = t->rows;
            return 0;
        }
        if (st == NNCL_OK || !strstr(nncl_last_error(NULL), "no column named")) {
            if (st == NNCL_OK) fprintf(stderr, "predict: %s has %zu feature columns; the model takes %zu\n", path, t->cols, d);
            else fprintf(stderr, "predict: %s\n", nncl_last_error(NULL));
            return 1;
        }
    }
    /* No label column: read the last column as a number and put it back. */
    o = nncl_csv_options_default();
    o.label_mode = NNCL_CSV_LABELS_NUMERIC;
    if ((st = nncl_csv_load(path, &o, t)) != NNCL_OK) {
        fprintf(stderr, "predict: %s\n", nncl_last_error(NULL));
        return 1;
    }
    if (t->cols + 1 != d) {
        fprintf(stderr, "predict: %s has %zu columns; the model takes %zu features%s%s%s\n", path, t->cols + 1, d,
                nncl_model_label_name(m) ? " (and the label column '" : "",
                nncl_model_label_name(m) ? nncl_model_label_name(m) : "", nncl_model_label_name(m) ? "')" : "");
        return 1;
    }
    if (!(r->own = (float *)malloc(sizeof(float) * t->rows * d + 1))) {
        fprintf(stderr, "predict: out of memory for %zu rows of %zu values\n", t->rows, d);
        return 1;
    }
    for (i = 0; i < t->rows; i++) {
        for (j = 0; j + 1 < d; j++) r->own[i * d + j] = t->features[i * (d - 1) + j];
        r->own[i * d + d - 1] = t->labels[i];
    }
    r->x = r->own;
    r->n = t->rows;
    r->y = NULL;
    return 0;
}

/* Row i's label as a class of the model in *want; 0 when it is none (out
 * of range, not a whole number, NaN): converting that to int would be
 * undefined. */
static int label_class(const rows *r, size_t i, int C, int *want) {
    float v = r->y[i];
    if (!(v >= 0 && v < (float)C && v == (float)(int)v)) return 0;
    *want = (int)v;
    return 1;
}

/* A model trained on a mean squared error (a regression, an autoencoder)
 * has an output but no classes: 1 after saying what the file holds, 0 for
 * any other file (nncl_model_load then judges it). */
static int not_classifier(const char *path) {
    nncl_safetensors *st = NULL;
    const char *g, *line;
    int rc = 0;
    if (nncl_safetensors_load(path, &st) != NNCL_OK) return 0;
    g = nncl_safetensors_meta(st, "nncl.graph");
    for (line = g; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *op = strchr(line, ' ');
        if (op && !strncmp(op, " mse ", 5)) {
            fprintf(stderr,
                    "predict: %s is not a classifier: it was trained on a mean squared error (node %.*s), so its output is "
                    "values, not classes (an autoencoder's reconstruction, a regression); rebuild it with "
                    "nncl_graph_from_safetensors and read its output with nncl_trainer_predict\n",
                    path, (int)strcspn(op + 5, " \n"), op + 5);
            rc = 1;
            break;
        }
    }
    nncl_safetensors_free(st);
    return rc;
}

/* The accuracy, per class and, for up to CONFUSION_MAX classes, the
 * confusion matrix (C x C counts: 100,000 classes would need 80 GB). Rows
 * whose label is no class of the model are counted and said, not scored.
 * 0, or 1 after saying why. */
#define CONFUSION_MAX 50
static int report(const rows *r, const int *cls, nncl_model *m, int C) {
    long *hit = (long *)calloc((size_t)C, sizeof(long)), *total = (long *)calloc((size_t)C, sizeof(long));
    long *confusion = C <= CONFUSION_MAX ? (long *)calloc((size_t)C * C, sizeof(long)) : NULL;
    long correct = 0, scored = 0, outside = 0;
    size_t i, first = 0;
    int k, c;
    if (!hit || !total || (C <= CONFUSION_MAX && !confusion)) {
        fprintf(stderr, "predict: out of memory for the counts of %d classes\n", C);
        free(hit), free(total), free(confusion);
        return 1;
    }
    for (i = 0; i < r->n; i++) {
        int want;
        if (!label_class(r, i, C, &want)) {
            if (!outside++) first = i;
            continue;
        }
        scored++;
        total[want]++;
        hit[want] += want == cls[i];
        correct += want == cls[i];
        if (confusion) confusion[(size_t)want * C + cls[i]]++;
    }
    if (outside)
        printf("%ld rows have a label that is no class of the model (0..%d), first row %zu (%g): not scored\n", outside,
               C - 1, first, (double)r->y[first]);
    if (scored) {
        printf("accuracy %.4f (%ld of %ld)\nper class%s:\n", (double)correct / (double)scored, correct, scored,
               C > CONFUSION_MAX ? " (those with samples)" : "");
        for (k = 0; k < C; k++) {
            char buf[64];
            const char *name = shown(nncl_model_class_name(m, k), buf, sizeof buf);
            if (total[k]) printf("  %d %-14s %.4f (%ld of %ld)\n", k, name, (double)hit[k] / (double)total[k], hit[k], total[k]);
            else if (C <= CONFUSION_MAX) printf("  %d %-14s no samples\n", k, name);
        }
    }
    if (scored && confusion) {
        printf("confusion matrix (rows: true class, columns: predicted):\n      ");
        for (c = 0; c < C; c++) printf(" %5d", c);
        printf("\n");
        for (k = 0; k < C; k++) {
            printf("  %3d ", k);
            for (c = 0; c < C; c++) printf(" %5ld", confusion[(size_t)k * C + c]);
            printf("\n");
        }
    } else if (scored) {
        printf("(no confusion matrix for %d classes: more than %d)\n", C, CONFUSION_MAX);
    }
    free(hit), free(total), free(confusion);
    return 0;
}

int main(int argc, char **argv) {
    const char *devices = NULL, *labels = NULL, *pos[2];
    int quiet = 0, limit = 0, batch = 100, show_probs = 0;
    const ex_option opts[] = {
        {"--labels", OPT_STR, &labels, "FILE", "IDX labels of the images (default: found beside them)"},
        {"--devices", OPT_STR, &devices, "SEL", "devices: all, gpu, cpu, an index, a name part (pocl), comma-separated"},
        {"--limit", OPT_INT, &limit, "N", "only the first N rows"},
        {"--batch", OPT_INT, &batch, "N", "rows per device pass (100)"},
        {"--quiet", OPT_FLAG, &quiet, "", "print counts, not the class of every row"},
        {"--probs", OPT_FLAG, &show_probs, "", "print each row's class probabilities after its class"},
        {NULL, 0, NULL, NULL, NULL}};
    const char *synopsis = "predict MODEL.safetensors DATA [options]   (DATA: IDX images, plain or .gz, or CSV)";
    nncl_context *ctx = NULL;
    nncl_model *m = NULL;
    rows r;
    int *cls = NULL, C, k, rc = 1;
    float *probs = NULL;
    long *count = NULL;
    size_t i;
    nncl_status st;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (ex_parse(argc, argv, synopsis, opts, pos, 2) != 2 || batch < 1) {
        fprintf(stderr, "error: a model file and a data file are needed, and --batch at least 1\n\n");
        ex_usage(stderr, synopsis, opts);
        return 2;
    }
    memset(&r, 0, sizeof r);
    if (not_classifier(pos[0]) || ex_init("predict", devices, &ctx)) return 1;
    if ((st = nncl_model_load(ctx, pos[0], batch, &m)) != NNCL_OK) {
        fprintf(stderr, "predict: %s: %s\n", nncl_status_str(st), nncl_last_error(ctx));
        goto done;
    }
    C = nncl_model_classes(m);
    if (nncl_node_shape(nncl_model_output(m), NULL) > 1) {
        fprintf(stderr, "predict: %s is a sequence model (a class per position); it predicts one class per row\n",
                pos[0]);
        goto done;
    }
    if (ends_with(pos[1], ".csv") ? load_csv(pos[1], m, &r) : load_idx(pos[1], labels, nncl_model_features(m), &r))
        goto done;
    if (limit > 0 && (size_t)limit < r.n) r.n = (size_t)limit;
    cls = (int *)malloc(sizeof(int) * (r.n + 1));
    count = (long *)calloc((size_t)C, sizeof(long));
    if (show_probs) probs = (float *)malloc(sizeof(float) * r.n * (size_t)C + 1);
    if (!cls || !count || (show_probs && !probs)) {
        fprintf(stderr, "predict: out of memory for %zu rows and %d classes\n", r.n, C);
        goto done;
    }
    if ((st = nncl_model_predict(m, r.x, r.n, probs, cls)) != NNCL_OK) {
        fprintf(stderr, "predict: %s: %s\n", nncl_status_str(st), nncl_last_error(ctx));
        goto done;
    }
    for (i = 0; i < r.n; i++) {
        char buf[64];
        const char *name = nncl_model_class_name(m, cls[i]) ? shown(nncl_model_class_name(m, cls[i]), buf, sizeof buf) : NULL;
        count[cls[i]]++;
        if (!quiet) {
            if (name) printf("%zu %d %s", i, cls[i], name);
            else printf("%zu %d", i, cls[i]);
            for (k = 0; probs && k < C; k++) printf(" %.6f", (double)probs[i * (size_t)C + k]);
            printf("\n");
        }
    }
    printf("%zu rows classified by %s\n", r.n, pos[0]);
    if (quiet)
        for (k = 0; k < C; k++)
            if (count[k] || C <= CONFUSION_MAX) {
                char buf[64];
                printf("  class %d %-14s %ld\n", k, shown(nncl_model_class_name(m, k), buf, sizeof buf), count[k]);
            }
    rc = r.y && r.n ? report(&r, cls, m, C) : 0;
done:
    free(cls);
    free(probs);
    free(count);
    rows_free(&r);
    nncl_model_free(m);
    nncl_free(ctx);
    return rc;
}
