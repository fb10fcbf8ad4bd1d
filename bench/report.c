/* report.c - writing the results store out: one table per section on the
 * terminal (median, with the min-max spread as +-% of it), the whole store
 * as JSON (every section present, n/a as null with its reason) and as CSV,
 * and the chart of training throughput per device and all together. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/utsname.h>

static void report_device_name(int device, char *buf, size_t len) {
    if (device < 0) snprintf(buf, len, "all/host");
    else snprintf(buf, len, "d%d", device);
}

static void report_number(char *buf, size_t len, double v, const char *unit) {
    double a = fabs(v);
    (void)unit;
    if (bench_isnan(v)) snprintf(buf, len, "n/a");
    else if (a >= 1e4 || (v == floor(v) && a < 1e9)) snprintf(buf, len, "%.0f", v); /* 2, not 2.000 */
    else if (a >= 100) snprintf(buf, len, "%.1f", v);
    else snprintf(buf, len, "%.3g", v);
}

static void report_cell(const bench_rec *r, char *buf, size_t len) {
    if (r->is_text && !strncmp(r->text, "n/a: ", 5)) { /* the reason follows under the table */
        snprintf(buf, len, "n/a");
        return;
    }
    if (r->is_text) { /* a path by its file name: a cut-off folder says nothing */
        const char *slash = r->text[0] == '/' ? strrchr(r->text, '/') : NULL;
        snprintf(buf, len, "%s", slash && slash[1] ? slash + 1 : r->text);
        return;
    }
    report_number(buf, len, r->s.median, r->unit);
    if (r->s.n > 1 && r->s.median != 0 && !bench_isnan(r->s.median)) {
        size_t used = strlen(buf);
        double p = 100 * (r->s.max - r->s.min) / (2 * fabs(r->s.median));
        snprintf(buf + used, len - used, p < 9.5 ? " ±%.1f%%" : " ±%.0f%%", p);
    }
}

/* ------------------------------------------------------------- table */

/* Why a value is n/a (without the "n/a: " prefix), or "" when it is not. */
static const char *report_why(const bench_rec *r) {
    const char *w = r->is_text ? (strncmp(r->text, "n/a: ", 5) ? "" : r->text) : bench_isnan(r->s.median) ? r->note : "";
    return strncmp(w, "n/a: ", 5) ? w : w + 5;
}

#define REPORT_MAXCOL 24
#define REPORT_MAXROW 256
#define REPORT_CELLW 30
#define REPORT_WIDTH 100 /* a terminal of 100 columns shows every line whole */

/* A line without trailing blanks, wrapped at REPORT_WIDTH on spaces with
 * the continuation indented. */
void bench_line(FILE *out, const char *line) {
    size_t len = strlen(line), indent = 0;
    while (len && line[len - 1] == ' ') len--;
    while (len > REPORT_WIDTH - indent) {
        size_t cut = REPORT_WIDTH - indent;
        while (cut > 20 && line[cut] != ' ') cut--;
        if (cut <= 20) cut = REPORT_WIDTH - indent;
        fprintf(out, "%*s%.*s\n", (int)indent, "", (int)cut, line);
        line += cut;
        len -= cut;
        while (len && *line == ' ') line++, len--;
        indent = 6;
    }
    fprintf(out, "%*s%.*s\n", (int)indent, "", (int)len, line);
}

void bench_print_section(FILE *out, const char *section, const char *title) {
    const char *keys[REPORT_MAXCOL];
    char kunit[REPORT_MAXCOL][16];
    int rdev[REPORT_MAXROW], nk = 0, nr = 0, i, k, k0, k1, r, w[REPORT_MAXCOL + 2], nnotes = 0;
    char line[1024];
    const char *ritem[REPORT_MAXROW];
    int n = bench_rec_count();
    for (i = 0; i < n; i++) {
        const bench_rec *rec = bench_rec_at(i);
        if (strcmp(rec->section, section)) continue;
        for (k = 0; k < nk && strcmp(keys[k], rec->key); k++) {}
        if (k == nk && nk < REPORT_MAXCOL) {
            keys[nk] = rec->key;
            snprintf(kunit[nk], sizeof kunit[nk], "%s", rec->is_text ? "" : rec->unit);
            nk++;
        }
        for (r = 0; r < nr && !(rdev[r] == rec->device && !strcmp(ritem[r], rec->item)); r++) {}
        if (r == nr && nr < REPORT_MAXROW) {
            rdev[nr] = rec->device;
            ritem[nr] = rec->item;
            nr++;
        }
    }
    fprintf(out, "\n== %s\n", title);
    if (!nr) {
        fprintf(out, "   (nothing measured)\n");
        return;
    }
    w[0] = 8;
    w[1] = 4;
    for (r = 0; r < nr; r++)
        if ((int)strlen(ritem[r]) > w[1]) w[1] = (int)strlen(ritem[r]);
    for (k = 0; k < nk; k++) {
        char head[64];
        snprintf(head, sizeof head, "%.40s%s%.15s%s", keys[k], kunit[k][0] ? " (" : "", kunit[k], kunit[k][0] ? ")" : "");
        w[k + 2] = (int)strlen(head);
    }
    for (i = 0; i < n; i++) {
        const bench_rec *rec = bench_rec_at(i);
        char cell[256];
        if (strcmp(rec->section, section)) continue;
        for (k = 0; k < nk && strcmp(keys[k], rec->key); k++) {}
        if (k == nk) continue;
        report_cell(rec, cell, sizeof cell);
        if ((int)strlen(cell) > w[k + 2]) w[k + 2] = (int)strlen(cell) > REPORT_CELLW ? REPORT_CELLW : (int)strlen(cell);
    }
    /* Columns in groups that fit REPORT_WIDTH, each group a table of its
     * own with the device and item repeated, rows without a value in the
     * group left out. */
    for (k0 = 0; k0 < nk; k0 = k1) {
        int used = w[0] + 1 + w[1];
        for (k1 = k0; k1 < nk && (k1 == k0 || used + 2 + w[k1 + 2] <= REPORT_WIDTH); k1++) used += 2 + w[k1 + 2];
        if (k0 > 0) fputc('\n', out);
        snprintf(line, sizeof line, "%-*s %-*s", w[0], "device", w[1], "item");
        for (k = k0; k < k1; k++) {
            char head[64];
            size_t at = strlen(line);
            snprintf(head, sizeof head, "%.40s%s%.15s%s", keys[k], kunit[k][0] ? " (" : "", kunit[k], kunit[k][0] ? ")" : "");
            snprintf(line + at, sizeof line - at, "  %*s", w[k + 2], head);
        }
        bench_line(out, line);
        for (r = 0; r < nr; r++) {
            char dn[16];
            int any = 0;
            report_device_name(rdev[r], dn, sizeof dn);
            snprintf(line, sizeof line, "%-*s %-*s", w[0], dn, w[1], ritem[r]);
            for (k = k0; k < k1; k++) {
                char cell[256] = "";
                size_t at = strlen(line);
                for (i = 0; i < n; i++) {
                    const bench_rec *rec = bench_rec_at(i);
                    if (rec->device == rdev[r] && !strcmp(rec->section, section) && !strcmp(rec->item, ritem[r]) &&
                        !strcmp(rec->key, keys[k])) {
                        report_cell(rec, cell, sizeof cell);
                        break;
                    }
                }
                if ((int)strlen(cell) > w[k + 2]) cell[w[k + 2]] = 0;
                any |= cell[0] != 0;
                snprintf(line + at, sizeof line - at, "  %*s", w[k + 2], cell);
            }
            if (any) bench_line(out, line);
        }
    }
    /* why each n/a is n/a, once per distinct reason */
    for (i = 0; i < n && nnotes < 12; i++) {
        const bench_rec *rec = bench_rec_at(i), *prev;
        int seen = 0, j;
        char dn[16];
        const char *why = report_why(rec);
        if (strcmp(rec->section, section) || !why[0]) continue;
        for (j = 0; j < i && !seen; j++) {
            prev = bench_rec_at(j);
            seen = !strcmp(prev->section, section) && !strcmp(report_why(prev), why);
        }
        if (seen) continue;
        report_device_name(rec->device, dn, sizeof dn);
        snprintf(line, sizeof line, "   %s %s %s: n/a: %s", dn, rec->item, rec->key, why);
        bench_line(out, line);
        nnotes++;
    }
}

#undef REPORT_MAXCOL
#undef REPORT_MAXROW
#undef REPORT_CELLW
#undef REPORT_WIDTH

/* ------------------------------------------------------------- JSON */

static void report_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void report_json_num(FILE *f, double v) {
    if (bench_isnan(v) || isinf(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static void report_json_rec(FILE *f, const bench_rec *r) {
    report_json_str(f, r->key);
    fputs(": ", f);
    if (r->is_text) {
        report_json_str(f, r->text);
        return;
    }
    fputs("{\"median\": ", f);
    report_json_num(f, r->s.median);
    fputs(", \"min\": ", f);
    report_json_num(f, r->s.n ? r->s.min : bench_nan());
    fputs(", \"max\": ", f);
    report_json_num(f, r->s.n ? r->s.max : bench_nan());
    fputs(", \"q1\": ", f);
    report_json_num(f, r->s.n ? r->s.q1 : bench_nan());
    fputs(", \"q3\": ", f);
    report_json_num(f, r->s.n ? r->s.q3 : bench_nan());
    fprintf(f, ", \"n\": %d, \"unit\": ", r->s.n);
    report_json_str(f, r->unit);
    if (r->note[0]) {
        fputs(", \"note\": ", f);
        report_json_str(f, r->note);
    }
    fputc('}', f);
}

int bench_write_json(const char *path, const bench_opts *o, nncl_context *ctx) {
    FILE *f = fopen(path, "w");
    int s, i, j, n = bench_rec_count(), first_row;
    char date[64] = "";
    time_t now = time(NULL);
    struct tm tmv;
    struct utsname un;
    if (!f) return 1;
    if (gmtime_r(&now, &tmv)) strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (uname(&un) != 0) memset(&un, 0, sizeof un);
    fputs("{\n  \"bench\": {\"nncl_version\": ", f);
    fprintf(f, "\"%d.%d.%d\", \"date\": ", NNCL_VERSION_MAJOR, NNCL_VERSION_MINOR, NNCL_VERSION_PATCH);
    report_json_str(f, date);
    fputs(", \"command\": ", f);
    report_json_str(f, o->command);
    fputs(", \"host\": ", f);
    report_json_str(f, un.nodename);
    fputs(", \"machine\": ", f);
    report_json_str(f, un.machine);
    fprintf(f, ", \"quick\": %d, \"repeats\": %d, \"seconds\": %g, \"cpu_threads\": %d, \"devices_in_context\": %d",
            o->quick, o->repeats, o->seconds, bench_cpu_threads(), nncl_device_count(ctx));
    { /* the environment that changes the figures */
        static const char *const vars[] = {"NNCL_DEVICES", "POCL_DEVICES", "RUSTICL_ENABLE", "OMP_NUM_THREADS",
                                           "OMP_WAIT_POLICY", "OPENBLAS_CORETYPE", NULL};
        int v;
        fputs(", \"env\": {", f);
        for (v = 0; vars[v]; v++) {
            const char *val = getenv(vars[v]);
            fprintf(f, "%s\"%s\": ", v ? ", " : "", vars[v]);
            if (val) report_json_str(f, val);
            else fputs("null", f);
        }
        fputs("}},\n", f);
    }
    for (s = 0; bench_sections[s].name; s++) {
        const char *sec = bench_sections[s].name;
        fprintf(f, "  \"%s\": [", sec);
        first_row = 1;
        for (i = 0; i < n; i++) { /* one object per (device, item), at its first record */
            const bench_rec *r = bench_rec_at(i);
            int dup = 0;
            if (strcmp(r->section, sec)) continue;
            for (j = 0; j < i && !dup; j++) {
                const bench_rec *p = bench_rec_at(j);
                dup = !strcmp(p->section, sec) && p->device == r->device && !strcmp(p->item, r->item);
            }
            if (dup) continue;
            fprintf(f, "%s\n    {\"device\": ", first_row ? "" : ",");
            if (r->device < 0) fputs("null", f);
            else fprintf(f, "%d", r->device);
            fputs(", \"item\": ", f);
            report_json_str(f, r->item);
            for (j = i; j < n; j++) {
                const bench_rec *q = bench_rec_at(j);
                if (strcmp(q->section, sec) || q->device != r->device || strcmp(q->item, r->item)) continue;
                fputs(",\n      ", f);
                report_json_rec(f, q);
            }
            fputc('}', f);
            first_row = 0;
        }
        fprintf(f, "%s]%s\n", first_row ? "" : "\n  ", bench_sections[s + 1].name ? "," : "");
    }
    fputs("}\n", f);
    return fclose(f) != 0;
}

/* ------------------------------------------------------------- CSV */

static void report_csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

static void report_csv_num(FILE *f, double v) {
    if (!bench_isnan(v)) fprintf(f, "%.6g", v);
}

int bench_write_csv(const char *path) {
    FILE *f = fopen(path, "w");
    int i, n = bench_rec_count();
    if (!f) return 1;
    fputs("section,device,item,key,median,min,max,q1,q3,n,unit,text,note\n", f);
    for (i = 0; i < n; i++) {
        const bench_rec *r = bench_rec_at(i);
        fprintf(f, "%s,", r->section);
        if (r->device >= 0) fprintf(f, "%d", r->device);
        else fputs("all", f);
        fputc(',', f);
        report_csv_field(f, r->item);
        fputc(',', f);
        report_csv_field(f, r->key);
        fputc(',', f);
        if (!r->is_text) {
            report_csv_num(f, r->s.median), fputc(',', f);
            report_csv_num(f, r->s.n ? r->s.min : bench_nan()), fputc(',', f);
            report_csv_num(f, r->s.n ? r->s.max : bench_nan()), fputc(',', f);
            report_csv_num(f, r->s.n ? r->s.q1 : bench_nan()), fputc(',', f);
            report_csv_num(f, r->s.n ? r->s.q3 : bench_nan()), fputc(',', f);
            fprintf(f, "%d,", r->s.n);
        } else {
            fputs(",,,,,,", f);
        }
        report_csv_field(f, r->unit);
        fputc(',', f);
        report_csv_field(f, r->is_text ? r->text : "");
        fputc(',', f);
        report_csv_field(f, r->note);
        fputc('\n', f);
    }
    return fclose(f) != 0;
}

/* ------------------------------------------------------------- SVG */

static const char *report_text(const char *section, int device, const char *item, const char *key) {
    int i, n = bench_rec_count();
    for (i = 0; i < n; i++) {
        const bench_rec *r = bench_rec_at(i);
        if (r->is_text && r->device == device && !strcmp(r->section, section) && !strcmp(r->item, item) &&
            !strcmp(r->key, key))
            return r->text;
    }
    return NULL;
}

int bench_write_svg(const char *path) {
    static const char *const models[] = {"mlp", "cnn", "lstm", "gpt", "gpt_large"};
    static const char *const headings[] = {"MLP 784-128-10", "CNN (two conv+pool blocks, batch norm)",
                                           "LSTM 128 over 28 steps of 28 pixels",
                                           "GPT 4 layers, 128 channels, context 64, batch 12 (a sample: a window)",
                                           "GPT 6 layers, 384 channels, context 256, batch 64"};
    char labels[64][96];
    const char *lp[64], *heads[5];
    double values[64];
    int nv = 0, m, i, n = bench_rec_count(), counts[5], panels = 0;
    for (m = 0; m < 5; m++) {
        counts[panels] = 0;
        for (i = 0; i < n && nv < 64; i++) {
            const bench_rec *r = bench_rec_at(i);
            const char *name;
            if (r->is_text || strcmp(r->section, "training") || strcmp(r->item, models[m]) ||
                strcmp(r->key, "samples_s") || bench_isnan(r->s.median))
                continue;
            name = r->device >= 0 ? report_text("devices", r->device, "info", "name") : NULL;
            if (r->device < 0) snprintf(labels[nv], sizeof labels[nv], "all devices together");
            else snprintf(labels[nv], sizeof labels[nv], "d%d %.60s", r->device, name ? name : "");
            lp[nv] = labels[nv];
            values[nv] = r->s.median;
            counts[panels]++;
            nv++;
        }
        if (counts[panels]) heads[panels++] = headings[m];
    }
    if (!nv) return 1;
    /* One panel per model: the CNN's few hundred samples/s would be a sliver
     * on the MLP's scale of tens of thousands. */
    return nncl_svg_bar_panels(path, "nncl training throughput: each device alone and all together", "samples/s",
                               panels, heads, counts, lp, values) != NNCL_OK;
}
