/* test_progress.c - progress output (plain lines and the terminal bar, read
 * back from a temporary file), the training-curve CSV, and the SVG curve and
 * bar charts: well-formed, one path per series, finite numbers, edge cases. */
#include "harness.h"
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(_WIN32)
#include <unistd.h>
#endif

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

/* Everything written to f so far, NUL-terminated; caller frees. */
static char *read_back(FILE *f) {
    long n;
    char *buf;
    fflush(f);
    n = ftell(f);
    rewind(f);
    buf = (char *)malloc((size_t)n + 1);
    if (!buf) return NULL;
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *s;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    s = read_back(f);
    fclose(f);
    return s;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        if (*s == '\n') n++;
    return n;
}

static int count_str(const char *s, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    while ((s = strstr(s, needle)) != NULL) {
        n++;
        s += len;
    }
    return n;
}

/* ------------------------------------------------------------ progress */

static int test_lines_epochs(void) {
    const char *name = "progress lines: one line per epoch, nothing between when the interval is long";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out, *l2;
    int e, s;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 2, 3, &p));
    nncl_progress_set_interval(p, 1e9);
    for (e = 0; e < 2; e++) {
        for (s = 0; s < 3; s++) nncl_progress_update(p, e, s, 0.5, 0.75, 32);
        nncl_progress_epoch_end(p, e, 0.5, 0.75, 0.6, 0.7);
    }
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out != NULL);
    TH_CHECK(name, count_lines(out) == 2);
    TH_CHECK(name, strchr(out, '\r') == NULL);
    TH_CHECK(name, strncmp(out, "epoch 1/2  loss 0.5000  acc 75.00%  val_loss 0.6000  val_acc 70.00%  time 0:00", 78) == 0);
    l2 = strchr(out, '\n') + 1;
    TH_CHECK(name, strncmp(l2, "epoch 2/2  loss 0.5000", 22) == 0);
    TH_CHECK(name, strstr(out, "samples/s") != NULL);
    free(out);
    th_pass(name);
    return 0;
}

static int test_lines_steps(void) {
    const char *name = "progress lines: step lines show the sample-weighted mean, extra text, nan";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 1, 4, &p));
    nncl_progress_set_interval(p, 0);
    nncl_progress_set_extra(p, "shards 60/40\n");
    nncl_progress_update(p, 0, 0, 1.0, 0.5, 10);
    nncl_progress_update(p, 0, 1, 3.0, 1.0, 30);
    nncl_progress_update(p, 0, 2, NAN, -1, 10);
    nncl_progress_epoch_end(p, 0, NAN, -1, NAN, -1);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out != NULL);
    TH_CHECK(name, count_lines(out) == 4);
    TH_CHECK(name, strncmp(out, "epoch 1/1 step 1/4  loss 1.0000  acc 50.00%", 43) == 0);
    /* (1*10 + 3*30) / 40 = 2.5; (0.5*10 + 1*30) / 40 = 87.5% */
    TH_CHECK(name, strstr(out, "epoch 1/1 step 2/4  loss 2.5000  acc 87.50%") != NULL);
    TH_CHECK(name, strstr(out, "epoch 1/1 step 3/4  loss nan  acc 87.50%") != NULL);
    TH_CHECK(name, strstr(out, "ETA ") != NULL);
    TH_CHECK(name, count_str(out, "shards 60/40?") == 4); /* control character replaced */
    /* Epoch line: NaN loss shown, no accuracy and no validation columns. */
    TH_CHECK(name, strstr(out, "epoch 1/1  loss nan  time ") != NULL);
    TH_CHECK(name, strstr(out, "val_") == NULL);
    free(out);
    th_pass(name);
    return 0;
}

/* A slow first step (kernel builds) and a long pause between epochs
 * (validation) must not stretch the time left: it comes from recent steps. */
static int test_eta_recent(void) {
    const char *name = "progress ETA: from the recent steps, not from the start";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out, *last;
    int s, m = -1, sec = -1;
    struct timespec slow = {1, 500000000L}, fast = {0, 2000000L};
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 2, 100, &p));
    nncl_progress_set_interval(p, 0);
    nanosleep(&slow, NULL);
    nncl_progress_update(p, 0, 0, 1.0, -1, 10);
    for (s = 1; s < 40; s++) {
        nanosleep(&fast, NULL);
        nncl_progress_update(p, 0, s, 1.0, -1, 10);
    }
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out != NULL);
    last = strstr(out, "step 40/100");
    TH_CHECK(name, last != NULL && (last = strstr(last, "ETA ")) != NULL);
    /* 160 steps of ~2 ms: about 0:00; counted from the start (1.5 s for 40
     * steps) it would be 0:06 or more. */
    TH_CHECK(name, sscanf(last, "ETA %d:%d", &m, &sec) == 2);
    TH_CHECK(name, m == 0 && sec < 4);
    free(out);
    th_pass(name);
    return 0;
}

static int test_unknown_lengths(void) {
    const char *name = "progress lines: 0 epochs and 0 steps (unknown) and 1 epoch";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 0, 0, &p));
    nncl_progress_set_interval(p, 0);
    nncl_progress_update(p, 0, 0, 0.25, -1, 8);
    nncl_progress_update(p, 0, 1, 0.25, -1, 8);
    nncl_progress_epoch_end(p, 0, 0.25, -1, 0.5, NAN);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out != NULL);
    TH_CHECK(name, strncmp(out, "epoch 1 step 1  loss 0.2500", 27) == 0);
    TH_CHECK(name, strstr(out, "epoch 1 step 2  loss 0.2500") != NULL);
    TH_CHECK(name, strstr(out, "ETA") == NULL && strstr(out, " acc") == NULL);
    TH_CHECK(name, strstr(out, "epoch 1  loss 0.2500  val_loss 0.5000  val_acc nan  time") != NULL);
    free(out);

    f = tmpfile();
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 1, 1, &p));
    nncl_progress_set_interval(p, 1e9);
    nncl_progress_update(p, 0, 0, 1e-5, 1.0, 1);
    nncl_progress_epoch_end(p, 0, 12345.678, 1.0, NAN, -1);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out && count_lines(out) == 1);
    TH_CHECK(name, strncmp(out, "epoch 1/1  loss 1.235e+04  acc 100.00%  time", 44) == 0);
    free(out);
    th_pass(name);
    return 0;
}

/* Counts at the ends of their types print as given (shown from 1 without
 * wrapping), and samples add up without overflowing (UBSan's builds abort
 * on a signed overflow). */
static int test_huge_counts(void) {
    const char *name = "progress lines: counts at INT_MAX and LONG_MAX";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 0, 0, &p));
    nncl_progress_set_interval(p, 0);
    nncl_progress_update(p, INT_MAX, INT_MAX, 0.5, -1, LONG_MAX);
    nncl_progress_update(p, INT_MAX, INT_MAX, 0.5, -1, LONG_MAX);
    nncl_progress_epoch_end(p, INT_MAX, 0.5, -1, NAN, -1);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out && count_str(out, "epoch 2147483648 step 2147483648  loss 0.5000") == 2);
    TH_CHECK(name, strstr(out, "epoch 2147483648  loss 0.5000") != NULL);
    free(out);
    /* the bar, whose fill is computed from the step */
    TH_CHECK(name, (f = tmpfile()) != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 2, 5, &p));
    nncl_progress_set_mode(p, NNCL_PROGRESS_BAR);
    nncl_progress_update(p, 0, INT_MAX, 0.5, -1, 1);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out && strstr(out, "[========================] 2147483648/5") != NULL);
    free(out);
    th_pass(name);
    return 0;
}

static int test_bar(void) {
    const char *name = "progress bar: redrawn with \\r, cleared for epoch lines and messages";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out, *last;
    int s;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 2, 5, &p));
    nncl_progress_set_mode(p, NNCL_PROGRESS_BAR);
    nncl_progress_set_extra(p, "shards 60/40");
    for (s = 0; s < 5; s++) nncl_progress_update(p, 0, s, 0.5, 0.5, 64);
    nncl_progress_message(p, "rebalanced");
    nncl_progress_epoch_end(p, 0, 0.5, 0.5, 0.4, 0.6);
    nncl_progress_update(p, 1, 0, 0.5, 0.5, 64);
    nncl_progress_free(p);
    out = read_back(f);
    fclose(f);
    TH_CHECK(name, out != NULL);
    /* First and last steps are always drawn; redraws in between are throttled. */
    TH_CHECK(name, strstr(out, "\repoch 1/2 [===>                    ] 1/5  loss 0.5000  acc 50.00%") != NULL);
    TH_CHECK(name, strstr(out, "\repoch 1/2 [========================] 5/5  loss 0.5000") != NULL);
    TH_CHECK(name, strstr(out, "shards 60/40") != NULL);
    /* The message goes on a line of its own and the bar comes back. */
    TH_CHECK(name, strstr(out, "\rrebalanced\n\repoch 1/2 [====") != NULL);
    /* The epoch line replaces the bar. */
    TH_CHECK(name, strstr(out, "\repoch 1/2  loss 0.5000  acc 50.00%  val_loss 0.4000  val_acc 60.00%") != NULL);
    /* free ends the open bar with a newline. */
    last = strrchr(out, '\r');
    TH_CHECK(name, last && strncmp(last, "\repoch 2/2 [", 12) == 0);
    TH_CHECK(name, out[strlen(out) - 1] == '\n');
    free(out);
    th_pass(name);
    return 0;
}

static int test_quiet_and_args(void) {
    const char *name = "progress quiet mode prints nothing; bad arguments rejected; NULL safe";
    FILE *f = tmpfile();
    nncl_progress *p = NULL;
    char *out;
    TH_CHECK(name, f != NULL);
    TH_OK(name, NULL, nncl_progress_create(f, 1, 1, &p));
    nncl_progress_set_mode(p, NNCL_PROGRESS_QUIET);
    nncl_progress_update(p, 0, 0, 1, 1, 1);
    nncl_progress_message(p, "hello");
    nncl_progress_epoch_end(p, 0, 1, 1, 1, 1);
    nncl_progress_free(p);
    out = read_back(f);
    TH_CHECK(name, out && out[0] == 0);
    free(out);
    fclose(f);
    TH_CHECK(name, nncl_progress_create(NULL, 1, 1, &p) == NNCL_ERR_INVALID_ARGUMENT && p == NULL);
    TH_CHECK(name, nncl_progress_create(stderr, -1, 1, &p) == NNCL_ERR_INVALID_ARGUMENT);
    nncl_progress_update(NULL, 0, 0, 1, 1, 1);
    nncl_progress_epoch_end(NULL, 0, 1, 1, 1, 1);
    nncl_progress_free(NULL);
    th_pass(name);
    return 0;
}

/* ------------------------------------------------------------ curve */

static void fill_curve(nncl_curve *c, int n) {
    int e;
    for (e = 1; e <= n; e++) {
        nncl_curve_row r;
        r.epoch = e;
        r.train_loss = 2.0 / e;
        r.train_acc = 1.0 - 0.5 / e;
        r.val_loss = 2.2 / e;
        r.val_acc = 1.0 - 0.6 / e;
        r.seconds = 1.5;
        r.samples_per_s = 1000.0 * e;
        nncl_curve_add(c, &r);
    }
}

static int test_csv(void) {
    const char *name = "curve CSV: header, rows read back, nan for missing values";
    nncl_curve *c = NULL;
    nncl_curve_row r;
    char path[512], *s, *line;
    int i;
    TH_OK(name, NULL, nncl_curve_create(&c));
    path_in_tmp(path, sizeof path, "empty.csv");
    TH_OK(name, NULL, nncl_curve_write_csv(c, path));
    s = read_file(path);
    TH_CHECK(name, s && strcmp(s, "epoch,train_loss,train_acc,val_loss,val_acc,seconds,samples_per_s\n") == 0);
    free(s);
    fill_curve(c, 3);
    r.epoch = 4;
    r.train_loss = NAN;
    r.train_acc = 0.125;
    r.val_loss = NAN;
    r.val_acc = NAN;
    r.seconds = 0.25;
    r.samples_per_s = HUGE_VAL;
    TH_OK(name, NULL, nncl_curve_add(c, &r));
    TH_CHECK(name, nncl_curve_count(c) == 4);
    TH_OK(name, NULL, nncl_curve_get(c, 3, &r));
    TH_CHECK(name, r.epoch == 4 && r.train_acc == 0.125);
    TH_CHECK(name, nncl_curve_get(c, 4, &r) == NNCL_ERR_INVALID_ARGUMENT);
    path_in_tmp(path, sizeof path, "curve.csv");
    TH_OK(name, NULL, nncl_curve_write_csv(c, path));
    s = read_file(path);
    TH_CHECK(name, s != NULL);
    TH_CHECK(name, count_lines(s) == 5);
    line = strchr(s, '\n') + 1;
    for (i = 1; i <= 3; i++) {
        char *end;
        double v[6];
        int k;
        TH_CHECK(name, strtol(line, &end, 10) == i && *end == ',');
        for (k = 0; k < 6; k++) {
            v[k] = strtod(end + 1, &end);
            TH_CHECK(name, *end == (k == 5 ? '\n' : ','));
        }
        TH_CHECK(name, fabs(v[0] - 2.0 / i) < 1e-8 && fabs(v[1] - (1.0 - 0.5 / i)) < 1e-8);
        TH_CHECK(name, fabs(v[2] - 2.2 / i) < 1e-8 && fabs(v[3] - (1.0 - 0.6 / i)) < 1e-8);
        TH_CHECK(name, v[4] == 1.5 && v[5] == 1000.0 * i);
        line = end + 1;
    }
    TH_CHECK(name, strcmp(line, "4,nan,0.125,nan,nan,0.25,inf\n") == 0);
    free(s);
    path_in_tmp(path, sizeof path, "no/such/dir/curve.csv");
    TH_CHECK(name, nncl_curve_write_csv(c, path) == NNCL_ERR_IO);
    nncl_curve_free(c);
    nncl_curve_free(NULL);
    th_pass(name);
    return 0;
}

/* ------------------------------------------------------------ SVG checks */

/* Tags balanced and properly nested, attribute values quoted, every numeric
 * attribute finite, path data only numbers and commands. Returns NULL when
 * fine, else what is wrong. */
static const char *svg_check(const char *s) {
    static char why[200];
    char stack[32][32];
    int depth = 0, tags = 0;
    const char *p = s;
    if (strncmp(s, "<?xml", 5)) return "no XML declaration";
    while ((p = strchr(p, '<')) != NULL) {
        const char *end = strchr(p, '>'), *q;
        char nm[32];
        size_t n = 0;
        int closing = p[1] == '/', selfclose;
        if (!end) return "unclosed tag";
        if (p[1] == '?') {
            p = end + 1;
            continue;
        }
        q = p + 1 + closing;
        while (q < end && *q != ' ' && *q != '/' && *q != '\n' && n < sizeof nm - 1) nm[n++] = *q++;
        nm[n] = 0;
        selfclose = end[-1] == '/';
        /* Attributes: name="value" with numbers finite. */
        while (q < end) {
            const char *eq = strchr(q, '='), *v0, *v1;
            if (!eq || eq > end) break;
            if (eq[1] != '"') return "unquoted attribute";
            v0 = eq + 2;
            v1 = strchr(v0, '"');
            if (!v1 || v1 > end) return "unterminated attribute";
            if ((*v0 >= '0' && *v0 <= '9') || *v0 == '-') {
                char *stop;
                double v = strtod(v0, &stop);
                if (!isfinite(v)) return "non-finite number";
            }
            if (eq - q >= 2 && !strncmp(eq - 2, " d", 2)) {
                const char *c;
                for (c = v0; c < v1; c++)
                    if (!strchr("0123456789.,- MLVH", *c)) return "bad character in path data";
            }
            q = v1 + 1;
        }
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], nm)) {
                snprintf(why, sizeof why, "</%s> does not close <%s>", nm, depth ? stack[depth - 1] : "");
                return why;
            }
            depth--;
        } else if (!selfclose) {
            if (depth == 32) return "nested too deep";
            strcpy(stack[depth++], nm);
        }
        tags++;
        p = end + 1;
    }
    if (depth) return "unclosed element";
    if (tags < 3) return "too few tags";
    if (strstr(s, "nan") || strstr(s, "inf")) return "nan or inf in the file";
    return NULL;
}

static int test_svg_curve(void) {
    const char *name = "curve SVG: well-formed, a path per series, finite numbers, NaN gaps";
    nncl_curve *c = NULL;
    nncl_curve_row r;
    char path[512], *s;
    const char *why;
    TH_OK(name, NULL, nncl_curve_create(&c));
    fill_curve(c, 12);
    r.epoch = 13;
    r.train_loss = NAN; /* diverged: a gap in the line, no crash */
    r.train_acc = 0.9;
    r.val_loss = HUGE_VAL;
    r.val_acc = 0.85;
    r.seconds = 1;
    r.samples_per_s = 1;
    nncl_curve_add(c, &r);
    fill_curve(c, 2); /* epochs 1, 2 again: any order is drawn */
    path_in_tmp(path, sizeof path, "curve.svg");
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, "Fashion <MLP> & \"friends\""));
    s = read_file(path);
    TH_CHECK(name, s != NULL);
    why = svg_check(s);
    if (why) {
        th_fail(name, "%s", why);
        free(s);
        return 1;
    }
    TH_CHECK(name, count_str(s, "class=\"series\"") == 4);
    TH_CHECK(name, strstr(s, "data-series=\"train loss\"") && strstr(s, "data-series=\"validation accuracy\""));
    TH_CHECK(name, strstr(s, "Fashion &lt;MLP&gt; &amp; &quot;friends&quot;") != NULL);
    TH_CHECK(name, strstr(s, ">epoch</text>") && strstr(s, ">accuracy (%)</text>") && strstr(s, ">validation</text>"));
    free(s);
    nncl_curve_free(c);
    th_pass(name);
    return 0;
}

static int test_svg_edges(void) {
    const char *name = "curve SVG edge cases: 0 epochs, 1 epoch, no validation, all NaN";
    nncl_curve *c = NULL;
    nncl_curve_row r;
    char path[512], *s;
    const char *why;
    TH_OK(name, NULL, nncl_curve_create(&c));
    path_in_tmp(path, sizeof path, "edge.svg");
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, NULL));
    s = read_file(path);
    TH_CHECK(name, s && (why = svg_check(s)) == NULL);
    TH_CHECK(name, count_str(s, "class=\"series\"") == 0 && strstr(s, "no data yet") && strstr(s, "Training curve"));
    free(s);
    r.epoch = 1;
    r.train_loss = 0.7;
    r.train_acc = 0.6;
    r.val_loss = NAN;
    r.val_acc = NAN;
    r.seconds = 2;
    r.samples_per_s = 10;
    nncl_curve_add(c, &r);
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, "one"));
    s = read_file(path);
    TH_CHECK(name, s && (why = svg_check(s)) == NULL);
    TH_CHECK(name, count_str(s, "class=\"series\"") == 2 && count_str(s, "<circle") == 2);
    TH_CHECK(name, strstr(s, ">validation</text>") == NULL);
    free(s);
    r.epoch = 2;
    r.train_loss = r.train_acc = NAN;
    nncl_curve_add(c, &r);
    nncl_curve_free(c);
    TH_OK(name, NULL, nncl_curve_create(&c));
    r.epoch = 1;
    nncl_curve_add(c, &r);
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, "all missing"));
    s = read_file(path);
    TH_CHECK(name, s && (why = svg_check(s)) == NULL && count_str(s, "class=\"series\"") == 0);
    free(s);
    /* Constant values still give a sensible axis. */
    nncl_curve_free(c);
    TH_OK(name, NULL, nncl_curve_create(&c));
    r.train_loss = 0;
    r.train_acc = 1;
    nncl_curve_add(c, &r);
    r.epoch = 2;
    nncl_curve_add(c, &r);
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, "flat"));
    s = read_file(path);
    TH_CHECK(name, s && (why = svg_check(s)) == NULL && count_str(s, "class=\"series\"") == 2);
    free(s);
    nncl_curve_free(c);
    TH_CHECK(name, nncl_curve_write_svg(NULL, path, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    (void)why;
    th_pass(name);
    return 0;
}

static int test_bar_chart(void) {
    const char *name = "bar chart SVG: a bar per value, labels escaped and cut, n/a for NaN, bad values rejected";
    const char *labels[4] = {"pthread-Intel(R) Xeon(R) CPU <PoCL> & friends, a rather long device name indeed",
                             "llvmpipe (rusticl)", NULL, "missing device"};
    double values[4] = {15234.5, 8123.25, 0.5, NAN};
    char path[512], *s;
    const char *why;
    path_in_tmp(path, sizeof path, "bars.svg");
    TH_OK(name, NULL, nncl_svg_bar_chart(path, "Throughput per device", "samples/s", labels, values, 4));
    s = read_file(path);
    TH_CHECK(name, s != NULL);
    why = svg_check(s);
    if (why) {
        th_fail(name, "%s", why);
        free(s);
        return 1;
    }
    TH_CHECK(name, count_str(s, "class=\"bar\"") == 4 && count_str(s, "rx=\"3\"") == 3);
    TH_CHECK(name, strstr(s, ">pthread-Intel(R) Xeon(R) CPU &lt;PoCL&gt; &amp; friends...</text>") != NULL);
    TH_CHECK(name, strstr(s, ">15234 samples/s<") || strstr(s, ">15235 samples/s<"));
    TH_CHECK(name, strstr(s, ">8123 samples/s<") && strstr(s, ">0.5 samples/s<") && strstr(s, ">n/a<"));
    free(s);
    TH_OK(name, NULL, nncl_svg_bar_chart(path, "empty", "x", NULL, NULL, 0));
    s = read_file(path);
    TH_CHECK(name, s && svg_check(s) == NULL && strstr(s, "no data"));
    free(s);
    values[1] = -1;
    TH_CHECK(name, nncl_svg_bar_chart(path, "t", "u", labels, values, 4) == NNCL_ERR_INVALID_ARGUMENT);
    values[1] = HUGE_VAL;
    TH_CHECK(name, nncl_svg_bar_chart(path, "t", "u", labels, values, 4) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, nncl_svg_bar_chart(path, "t", "u", NULL, values, 4) == NNCL_ERR_INVALID_ARGUMENT);
    th_pass(name);
    return 0;
}

/* Numbers in files keep '.' under a locale with a decimal comma. */
static int test_locale(void) {
    const char *name = "curve CSV and SVG keep '.' under a decimal-comma locale";
    const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", NULL};
    nncl_curve *c = NULL;
    char path[512], *s;
    int i, set = 0;
    for (i = 0; locales[i] && !set; i++) set = setlocale(LC_NUMERIC, locales[i]) != NULL;
    if (!set) {
        th_skip(name, "no decimal-comma locale installed");
        return 0;
    }
    TH_OK(name, NULL, nncl_curve_create(&c));
    fill_curve(c, 3);
    path_in_tmp(path, sizeof path, "locale.csv");
    TH_OK(name, NULL, nncl_curve_write_csv(c, path));
    s = read_file(path);
    TH_CHECK(name, s && strstr(s, "\n1,2,0.5,2.2,0.4,1.5,1000\n") != NULL);
    free(s);
    path_in_tmp(path, sizeof path, "locale.svg");
    TH_OK(name, NULL, nncl_curve_write_svg(c, path, NULL));
    s = read_file(path);
    TH_CHECK(name, s && svg_check(s) == NULL && strstr(s, "width=\"960.0\""));
    free(s);
    nncl_curve_free(c);
    setlocale(LC_NUMERIC, "C");
    th_pass(name);
    return 0;
}

static void remove_tmpdir(void) {
    const char *names[] = {"empty.csv", "curve.csv", "curve.svg", "edge.svg", "bars.svg", "locale.csv", "locale.svg"};
    char p[512];
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        path_in_tmp(p, sizeof p, names[i]);
        remove(p);
    }
#if !defined(_WIN32)
    rmdir(tmpdir);
#endif
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nncl-progress-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        th_fail("progress setup", "mkdtemp %s failed", tmpdir);
        return 1;
    }
    test_lines_epochs();
    test_lines_steps();
    test_unknown_lengths();
    test_huge_counts();
    test_eta_recent();
    test_bar();
    test_quiet_and_args();
    test_csv();
    test_svg_curve();
    test_svg_edges();
    test_bar_chart();
    test_locale();
    remove_tmpdir();
    return th_exit_code();
}
