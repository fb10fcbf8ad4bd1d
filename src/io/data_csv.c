/* data_csv.c - the CSV table reader: RFC 4180 records (quotes, "" escapes,
 * line breaks inside quotes), a header row, numeric feature columns and one
 * label column holding class indices, class names or numbers. Every error
 * names the file, line, column and header name. */
#include "runtime/internal.h"
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <stdio.h>

/* Class indices are stored as float: beyond 2^24 they would not be exact. */
#define CSV_MAX_CLASSES (1 << 24)

typedef struct csv_field {
    size_t off, len; /* the unquoted text in the scratch buffer, NUL-terminated */
    size_t line;     /* line the field starts on */
    int quoted;
} csv_field;

typedef struct csv_parser {
    const char *text;
    size_t size, pos, line;
    const char *name;
    char delim;
    char *scratch;
    size_t scratch_len, scratch_cap;
    csv_field *fields;
    size_t nfields, fields_cap;
    char **header; /* names of all columns, once the header is read */
    size_t ncols;
} csv_parser;

nncl_csv_options nncl_csv_options_default(void) {
    nncl_csv_options o;
    memset(&o, 0, sizeof o);
    o.label = NULL;
    o.label_index = -1;
    o.delimiter = ',';
    o.label_mode = NNCL_CSV_LABELS_AUTO;
    o.classes = NULL;
    o.n_classes = 0;
    return o;
}

/* Records a format error at line/column: "name:line L, column C (hdr): ...". */
static nncl_status csv_error(const csv_parser *P, size_t line, size_t col, const char *fmt, ...)
    NNCL_PRINTF(4, 5);
static nncl_status csv_error(const csv_parser *P, size_t line, size_t col, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (col == 0) return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s:line %zu: %s", P->name, line, what);
    if (P->header && col <= P->ncols)
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s:line %zu, column %zu (%s): %s", P->name, line, col,
                          P->header[col - 1], what);
    return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s:line %zu, column %zu: %s", P->name, line, col, what);
}

static nncl_status csv_oom(const csv_parser *P) {
    return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s: out of memory at line %zu", P->name, P->line);
}

static int csv_put(csv_parser *P, char c) {
    if (nncl__grow((void **)&P->scratch, &P->scratch_cap, P->scratch_len + 1, 1, 16)) return 1;
    P->scratch[P->scratch_len++] = c;
    return 0;
}

static int csv_is_space(const csv_parser *P, char c) {
    return (c == ' ' || c == '\t') && c != P->delim;
}

/* At P->pos: consumes a line end (LF, CRLF or a lone CR) if there is one. */
static int csv_eat_newline(csv_parser *P) {
    if (P->pos >= P->size) return 0;
    if (P->text[P->pos] == '\n') {
        P->pos++;
        P->line++;
        return 1;
    }
    if (P->text[P->pos] == '\r') {
        P->pos++;
        if (P->pos < P->size && P->text[P->pos] == '\n') P->pos++;
        P->line++;
        return 1;
    }
    return 0;
}

/* Reads one record into P->fields. *eof is set when no record was left. */
static nncl_status csv_read_record(csv_parser *P, int *eof) {
    P->nfields = 0;
    P->scratch_len = 0;
    *eof = P->pos >= P->size;
    if (*eof) return NNCL_OK;
    for (;;) {
        csv_field f;
        size_t col = P->nfields + 1;
        f.off = P->scratch_len;
        f.line = P->line;
        f.quoted = 0;
        while (P->pos < P->size && csv_is_space(P, P->text[P->pos])) P->pos++;
        if (P->pos < P->size && P->text[P->pos] == '"') {
            f.quoted = 1;
            P->pos++;
            for (;;) {
                char c;
                if (P->pos >= P->size)
                    return csv_error(P, f.line, col, "quoted field not closed before the end of the file");
                c = P->text[P->pos];
                if (c == '"') {
                    if (P->pos + 1 < P->size && P->text[P->pos + 1] == '"') {
                        if (csv_put(P, '"')) return csv_oom(P);
                        P->pos += 2;
                        continue;
                    }
                    P->pos++;
                    break;
                }
                if (c == '\0') return csv_error(P, P->line, col, "NUL byte in the text");
                if (c == '\n' || (c == '\r' && !(P->pos + 1 < P->size && P->text[P->pos + 1] == '\n'))) P->line++;
                if (csv_put(P, c)) return csv_oom(P);
                P->pos++;
            }
            while (P->pos < P->size && csv_is_space(P, P->text[P->pos])) P->pos++;
            if (P->pos < P->size && P->text[P->pos] != P->delim && P->text[P->pos] != '\n' &&
                P->text[P->pos] != '\r') {
                unsigned char c = (unsigned char)P->text[P->pos];
                if (c >= 32 && c < 127)
                    return csv_error(P, P->line, col, "unexpected '%c' after the closing quote", (char)c);
                return csv_error(P, P->line, col, "unexpected byte 0x%02x after the closing quote", c);
            }
        } else {
            size_t end;
            while (P->pos < P->size) {
                char c = P->text[P->pos];
                if (c == P->delim || c == '\n' || c == '\r') break;
                if (c == '"')
                    return csv_error(P, P->line, col,
                                     "quote inside an unquoted field (quote the whole field and double the quote)");
                if (c == '\0') return csv_error(P, P->line, col, "NUL byte in the text");
                if (csv_put(P, c)) return csv_oom(P);
                P->pos++;
            }
            end = P->scratch_len;
            while (end > f.off && csv_is_space(P, P->scratch[end - 1])) end--;
            P->scratch_len = end;
        }
        f.len = P->scratch_len - f.off;
        if (csv_put(P, '\0')) return csv_oom(P);
        if (nncl__grow((void **)&P->fields, &P->fields_cap, P->nfields + 1, sizeof(csv_field), 16)) return csv_oom(P);
        P->fields[P->nfields++] = f;
        if (P->pos < P->size && P->text[P->pos] == P->delim) {
            P->pos++;
            continue;
        }
        csv_eat_newline(P);
        return NNCL_OK;
    }
}

static int csv_blank_record(const csv_parser *P) {
    return P->nfields == 1 && !P->fields[0].quoted && P->fields[0].len == 0;
}

/* Parses a finite decimal number (no hex, inf or nan). 0 ok, 1 not a
 * number, 2 beyond float range. The text is NUL-terminated and may be
 * modified (the decimal point is adapted to the C library's locale). */
static int csv_number(char *s, double *out) {
    char *p = s, *end, *dot = NULL;
    int digits = 0;
    double v;
    const struct lconv *lc;
    if (*p == '+' || *p == '-') p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        dot = p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 1;
    if (*p == 'e' || *p == 'E') {
        int ed = 0;
        p++;
        if (*p == '+' || *p == '-') p++;
        while (*p >= '0' && *p <= '9') p++, ed++;
        if (!ed) return 1;
    }
    if (*p) return 1;
    /* strtod follows the locale's decimal point; the file always uses '.' */
    lc = localeconv();
    if (dot && lc && lc->decimal_point && lc->decimal_point[0] && lc->decimal_point[0] != '.' &&
        !lc->decimal_point[1])
        *dot = lc->decimal_point[0];
    errno = 0;
    v = strtod(s, &end);
    if (dot) *dot = '.';
    if (end == s) return 1;
    if (!(v <= FLT_MAX && v >= -FLT_MAX)) return 2;
    *out = v;
    return 0;
}

static int csv_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A given class name and its index; the name comes first so that
 * csv_cmp_str compares these too. */
typedef struct csv_class {
    const char *name;
    int index;
} csv_class;

/* What the parse builds up; moved into the nncl_csv at the end. */
typedef struct csv_build {
    float *x, *y;
    size_t x_cap, y_cap, rows;
    char *pool; /* label texts, each NUL-terminated (names mode) */
    size_t pool_len, pool_cap;
    size_t *label_off, off_cap;
    csv_class *given;   /* opt->classes sorted by name, for lookups */
    int all_index;      /* every label so far is an integer in [0, 2^24) */
    double max_index;
} csv_build;

static void csv_build_free(csv_build *b) {
    NNCL_FREE(b->x);
    NNCL_FREE(b->y);
    NNCL_FREE(b->pool);
    NNCL_FREE(b->label_off);
    NNCL_FREE(b->given);
}

static void csv_parser_free(csv_parser *P) {
    size_t i;
    NNCL_FREE(P->scratch);
    NNCL_FREE(P->fields);
    if (P->header)
        for (i = 0; i < P->ncols; i++) NNCL_FREE(P->header[i]);
    NNCL_FREE(P->header);
}

static int csv_is_index(double v) {
    return v >= 0 && v < (double)CSV_MAX_CLASSES && v == (double)(long)v;
}

/* Handles the label field of one data row. */
static nncl_status csv_take_label(csv_parser *P, csv_build *b, const nncl_csv_options *o, size_t col, int names) {
    csv_field *f = &P->fields[col];
    char *text = P->scratch + f->off;
    double v = 0;
    int r;
    if (f->len == 0) return csv_error(P, f->line, col + 1, "empty label");
    if (names && o->classes) {
        csv_class key;
        const csv_class *hit;
        key.name = text;
        key.index = 0;
        hit = (const csv_class *)bsearch(&key, b->given, (size_t)o->n_classes, sizeof(csv_class), csv_cmp_str);
        if (!hit)
            return csv_error(P, f->line, col + 1, "class '%.60s' is not among the %d given classes", text,
                             o->n_classes);
        b->y[b->rows] = (float)hit->index;
        return NNCL_OK;
    }
    r = csv_number(text, &v);
    if (o->label_mode == NNCL_CSV_LABELS_NUMERIC) {
        if (r == 1) return csv_error(P, f->line, col + 1, "label '%.60s' is not a number", text);
        if (r == 2) return csv_error(P, f->line, col + 1, "label '%.60s' is beyond float range", text);
    }
    if (r == 0 && csv_is_index(v)) {
        if (v > b->max_index) b->max_index = v;
    } else {
        b->all_index = 0;
    }
    b->y[b->rows] = (float)v;
    if (o->label_mode != NNCL_CSV_LABELS_NUMERIC) {
        /* the names are kept until the end decides how labels are read */
        if (nncl__grow((void **)&b->label_off, &b->off_cap, b->rows + 1, sizeof(size_t), 16) ||
            nncl__grow((void **)&b->pool, &b->pool_cap, b->pool_len + f->len + 1, 1, 16))
            return csv_oom(P);
        b->label_off[b->rows] = b->pool_len;
        memcpy(b->pool + b->pool_len, text, f->len + 1);
        b->pool_len += f->len + 1;
    }
    return NNCL_OK;
}

/* Maps the kept label names to indices 0..K-1 in sorted order. */
static nncl_status csv_map_names(csv_parser *P, csv_build *b, nncl_csv *out) {
    const char **sorted = (const char **)nncl__calloc(b->rows, sizeof(char *));
    size_t i, k = 0;
    if (!sorted) return csv_oom(P);
    for (i = 0; i < b->rows; i++) sorted[i] = b->pool + b->label_off[i];
    qsort((void *)sorted, b->rows, sizeof(char *), csv_cmp_str);
    for (i = 0; i < b->rows; i++)
        if (k == 0 || strcmp(sorted[k - 1], sorted[i]) != 0) sorted[k++] = sorted[i];
    if (k > (size_t)CSV_MAX_CLASSES) {
        NNCL_FREE((void *)sorted);
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: %zu distinct class names, at most %d supported", P->name, k,
                          CSV_MAX_CLASSES);
    }
    out->class_names = (char **)nncl__calloc(k, sizeof(char *));
    if (!out->class_names) {
        NNCL_FREE((void *)sorted);
        return csv_oom(P);
    }
    out->n_classes = (int)k;
    for (i = 0; i < k; i++) {
        out->class_names[i] = nncl__strdup(sorted[i]);
        if (!out->class_names[i]) {
            NNCL_FREE((void *)sorted);
            return csv_oom(P);
        }
    }
    for (i = 0; i < b->rows; i++) {
        const char *key = b->pool + b->label_off[i];
        const char **hit = (const char **)bsearch(&key, (const void *)sorted, k, sizeof(char *), csv_cmp_str);
        b->y[i] = (float)(hit - sorted);
    }
    NNCL_FREE((void *)sorted);
    return NNCL_OK;
}

static nncl_status csv_check_options(const nncl_csv_options *o) {
    int k;
    if (o->delimiter == '"' || o->delimiter == '\n' || o->delimiter == '\r' || o->delimiter == '\0')
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: delimiter 0x%02x is not allowed",
                          (unsigned char)o->delimiter);
    if (o->label_mode < NNCL_CSV_LABELS_AUTO || o->label_mode > NNCL_CSV_LABELS_NUMERIC)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: unknown label_mode %d", o->label_mode);
    if (o->label_index < -1)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: label_index %d (use -1 for the last column)",
                          o->label_index);
    if (o->classes) {
        if (o->n_classes < 1 || o->n_classes > CSV_MAX_CLASSES)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: n_classes %d with a class list",
                              o->n_classes);
        if (o->label_mode == NNCL_CSV_LABELS_NUMERIC)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: a class list with numeric labels");
        for (k = 0; k < o->n_classes; k++)
            if (!o->classes[k])
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: classes[%d] is NULL", k);
    }
    return NNCL_OK;
}

/* Reads the header row and finds the label column. */
static nncl_status csv_read_header(csv_parser *P, const nncl_csv_options *o, size_t *label_col) {
    nncl_status st;
    int eof;
    size_t i;
    /* a UTF-8 byte order mark is not part of the first column's name */
    if (P->size >= 3 && (unsigned char)P->text[0] == 0xEF && (unsigned char)P->text[1] == 0xBB &&
        (unsigned char)P->text[2] == 0xBF)
        P->pos = 3;
    do {
        st = csv_read_record(P, &eof);
        if (st != NNCL_OK) return st;
        if (eof) return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: empty file, no header row", P->name);
    } while (csv_blank_record(P));
    if (P->nfields < 2)
        return csv_error(P, P->fields[0].line, 0,
                         "the header has %zu column; a feature column and a label column are needed (delimiter '%c')",
                         P->nfields, P->delim);
    P->header = (char **)nncl__calloc(P->nfields, sizeof(char *));
    if (!P->header) return csv_oom(P);
    P->ncols = P->nfields;
    for (i = 0; i < P->ncols; i++) {
        P->header[i] = nncl__strdup(P->scratch + P->fields[i].off);
        if (!P->header[i]) return csv_oom(P);
    }
    if (o->label) {
        size_t folded = P->ncols, n_folded = 0, used = 0;
        char cols[400];
        for (i = 0; i < P->ncols; i++) {
            const char *a = P->header[i], *b = o->label;
            if (strcmp(a, b) == 0) break;
            while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
            if (!*a && !*b) {
                folded = i;
                n_folded++;
            }
        }
        if (i == P->ncols && n_folded == 1) i = folded; /* "Species" for "species": one column only */
        if (i == P->ncols) {
            cols[0] = 0;
            for (i = 0; i < P->ncols && used + 4 < sizeof cols; i++) {
                int w = snprintf(cols + used, sizeof cols - used, "%s'%s'", i ? ", " : "", P->header[i]);
                if (w < 0) break;
                used += (size_t)w;
            }
            return csv_error(P, P->fields[0].line, 0, "no column named '%.100s' for the label; the columns are %s%s", o->label,
                             cols, used + 4 >= sizeof cols ? " ..." : "");
        }
        *label_col = i;
    } else if (o->label_index < 0) {
        *label_col = P->ncols - 1;
    } else {
        if ((size_t)o->label_index >= P->ncols)
            return csv_error(P, P->fields[0].line, 0, "label column index %d, but the header has %zu columns",
                             o->label_index, P->ncols);
        *label_col = (size_t)o->label_index;
    }
    return NNCL_OK;
}

static nncl_status csv_parse_body(csv_parser *P, const nncl_csv_options *o, size_t label_col, csv_build *b,
                                  int names_only) {
    size_t cols = P->ncols - 1, j;
    for (;;) {
        int eof;
        nncl_status st = csv_read_record(P, &eof);
        float *row;
        size_t need;
        if (st != NNCL_OK) return st;
        if (eof) break;
        if (csv_blank_record(P)) continue;
        if (P->nfields != P->ncols)
            return csv_error(P, P->fields[0].line, 0, "row has %zu fields, the header has %zu", P->nfields, P->ncols);
        if (nncl__mul_overflow(b->rows + 1, cols, &need) ||
            nncl__grow((void **)&b->x, &b->x_cap, need, sizeof(float), 16) ||
            nncl__grow((void **)&b->y, &b->y_cap, b->rows + 1, sizeof(float), 16))
            return csv_oom(P);
        row = b->x + b->rows * cols;
        for (j = 0; j < P->ncols; j++) {
            csv_field *f = &P->fields[j];
            char *text = P->scratch + f->off;
            double v = 0;
            int r;
            if (j == label_col) continue;
            if (f->len == 0) return csv_error(P, f->line, j + 1, "empty field (missing values are not supported)");
            r = csv_number(text, &v);
            if (r == 1) return csv_error(P, f->line, j + 1, "'%.60s' is not a number", text);
            if (r == 2) return csv_error(P, f->line, j + 1, "'%.60s' is beyond float range", text);
            *row++ = (float)v;
        }
        st = csv_take_label(P, b, o, label_col, names_only);
        if (st != NNCL_OK) return st;
        b->rows++;
    }
    if (b->rows == 0) return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: the header is not followed by any data row", P->name);
    return NNCL_OK;
}

static nncl_status csv_finish(csv_parser *P, const nncl_csv_options *o, size_t label_col, csv_build *b,
                              nncl_csv *out) {
    size_t i, k;
    nncl_status st;
    out->rows = b->rows;
    out->cols = P->ncols - 1;
    out->label_column = (int)label_col;
    out->feature_names = (char **)nncl__calloc(out->cols, sizeof(char *));
    out->label_name = nncl__strdup(P->header[label_col]);
    if (!out->feature_names || !out->label_name) return csv_oom(P);
    for (i = 0, k = 0; i < P->ncols; i++) {
        if (i == label_col) continue;
        out->feature_names[k] = nncl__strdup(P->header[i]);
        if (!out->feature_names[k++]) return csv_oom(P);
    }
    if (o->classes) {
        out->class_names = (char **)nncl__calloc((size_t)o->n_classes, sizeof(char *));
        if (!out->class_names) return csv_oom(P);
        out->n_classes = o->n_classes;
        for (k = 0; k < (size_t)o->n_classes; k++) {
            out->class_names[k] = nncl__strdup(o->classes[k]);
            if (!out->class_names[k]) return csv_oom(P);
        }
    } else if (o->label_mode == NNCL_CSV_LABELS_CLASSES || (o->label_mode == NNCL_CSV_LABELS_AUTO && !b->all_index)) {
        st = csv_map_names(P, b, out);
        if (st != NNCL_OK) return st;
    } else {
        out->n_classes = b->all_index ? (int)b->max_index + 1 : 0;
    }
    out->features = b->x;
    out->labels = b->y;
    b->x = b->y = NULL;
    return NNCL_OK;
}

nncl_status nncl_csv_parse(const char *text, size_t size, const char *name, const nncl_csv_options *opt,
                           nncl_csv *out) {
    nncl_csv_options o = opt ? *opt : nncl_csv_options_default();
    csv_parser P;
    csv_build b;
    size_t label_col = 0;
    nncl_status st;
    int k, names_only;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!text && size) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv_parse: text is NULL");
    NNCL_TRY(csv_check_options(&o));
    memset(&P, 0, sizeof P);
    memset(&b, 0, sizeof b);
    P.text = text;
    P.size = size;
    P.line = 1;
    P.name = name ? name : "<memory>";
    P.delim = o.delimiter;
    b.all_index = 1;
    names_only = o.classes != NULL;
    if (o.classes) {
        b.given = (csv_class *)nncl__calloc((size_t)o.n_classes, sizeof(csv_class));
        if (!b.given) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_csv_parse: out of memory");
        for (k = 0; k < o.n_classes; k++) {
            b.given[k].name = o.classes[k];
            b.given[k].index = k;
        }
        qsort(b.given, (size_t)o.n_classes, sizeof(csv_class), csv_cmp_str);
        for (k = 1; k < o.n_classes; k++)
            if (strcmp(b.given[k - 1].name, b.given[k].name) == 0) {
                st = nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_csv: class '%.60s' is listed twice",
                                b.given[k].name);
                csv_build_free(&b);
                return st;
            }
    }
    st = csv_read_header(&P, &o, &label_col);
    if (st == NNCL_OK) st = csv_parse_body(&P, &o, label_col, &b, names_only);
    if (st == NNCL_OK) st = csv_finish(&P, &o, label_col, &b, out);
    csv_parser_free(&P);
    csv_build_free(&b);
    if (st != NNCL_OK) nncl_csv_free(out);
    return st;
}

nncl_status nncl_csv_load(const char *path, const nncl_csv_options *opt, nncl_csv *out) {
    unsigned char *buf;
    size_t len;
    nncl_status st;
    NNCL_TRY(nncl__load_file("nncl_csv_load", path, out, sizeof *out, &buf, &len));
    st = nncl_csv_parse((const char *)buf, len, path, opt, out);
    NNCL_FREE(buf);
    return st;
}

void nncl_csv_free(nncl_csv *t) {
    size_t i;
    int k;
    if (!t) return;
    if (t->feature_names)
        for (i = 0; i < t->cols; i++) NNCL_FREE(t->feature_names[i]);
    if (t->class_names)
        for (k = 0; k < t->n_classes; k++) NNCL_FREE(t->class_names[k]);
    NNCL_FREE(t->feature_names);
    NNCL_FREE(t->class_names);
    NNCL_FREE(t->label_name);
    NNCL_FREE(t->features);
    NNCL_FREE(t->labels);
    memset(t, 0, sizeof *t);
}

#undef CSV_MAX_CLASSES
