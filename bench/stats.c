/* stats.c - the bench's results store, medians with their spread (min-max
 * and interquartile range), the timing loops (warm-up, calibrated repeats,
 * alternating pairs) and the progress line on stderr. */
#include "bench.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- numbers */

double bench_nan(void) { return nan(""); }
int bench_isnan(double x) { return x != x; }

static int stats_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between order statistics (the usual "type 7"). */
static double stats_quantile(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    double frac = pos - lo;
    if (lo + 1 >= n) return sorted[n - 1];
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

bench_stat bench_stat_of(const double *v, int n) {
    bench_stat s;
    double *t;
    int i, m = 0;
    if (n <= 0) return bench_stat_na();
    t = (double *)malloc((size_t)n * sizeof *t);
    if (!t) return bench_stat_na();
    for (i = 0; i < n; i++)
        if (!bench_isnan(v[i])) t[m++] = v[i];
    if (m == 0) {
        free(t);
        return bench_stat_na();
    }
    qsort(t, (size_t)m, sizeof *t, stats_cmp);
    s.n = m;
    s.min = t[0];
    s.max = t[m - 1];
    s.median = stats_quantile(t, m, 0.5);
    s.q1 = stats_quantile(t, m, 0.25);
    s.q3 = stats_quantile(t, m, 0.75);
    free(t);
    return s;
}

bench_stat bench_stat_one(double v) {
    bench_stat s;
    s.median = s.min = s.max = s.q1 = s.q3 = v;
    s.n = bench_isnan(v) ? 0 : 1;
    return s;
}

bench_stat bench_stat_na(void) { return bench_stat_one(bench_nan()); }

bench_stat bench_stat_inverse(bench_stat s, double scale) {
    bench_stat r = s;
    r.median = scale / s.median;
    r.min = scale / s.max; /* the fastest call is the highest rate */
    r.max = scale / s.min;
    r.q1 = scale / s.q3;
    r.q3 = scale / s.q1;
    return r;
}

bench_stat bench_stat_scale(bench_stat s, double scale) {
    bench_stat r = s;
    r.median *= scale;
    r.min *= scale;
    r.max *= scale;
    r.q1 *= scale;
    r.q3 *= scale;
    if (scale < 0) {
        double t = r.min;
        r.min = r.max, r.max = t;
        t = r.q1, r.q1 = r.q3, r.q3 = t;
    }
    return r;
}

/* ------------------------------------------------------------- store */

static bench_rec *stats_recs;
static int stats_n, stats_cap;

static bench_rec *stats_slot(const char *section, int device, const char *item, const char *key) {
    bench_rec *r;
    int i;
    for (i = 0; i < stats_n; i++) { /* a figure measured again replaces the old one */
        r = &stats_recs[i];
        if (r->device == device && !strcmp(r->section, section) && !strcmp(r->item, item) && !strcmp(r->key, key))
            return r;
    }
    if (stats_n == stats_cap) {
        int cap = stats_cap ? stats_cap * 2 : 256;
        bench_rec *p = (bench_rec *)realloc(stats_recs, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        stats_recs = p;
        stats_cap = cap;
    }
    r = &stats_recs[stats_n++];
    memset(r, 0, sizeof *r);
    snprintf(r->section, sizeof r->section, "%s", section);
    r->device = device;
    snprintf(r->item, sizeof r->item, "%s", item);
    snprintf(r->key, sizeof r->key, "%s", key);
    return r;
}

void bench_put(const char *section, int device, const char *item, const char *key, bench_stat s, const char *unit,
               const char *note) {
    bench_rec *r = stats_slot(section, device, item, key);
    if (!r) return;
    r->is_text = 0;
    r->s = s;
    snprintf(r->unit, sizeof r->unit, "%s", unit ? unit : "");
    snprintf(r->note, sizeof r->note, "%s", note ? note : "");
}

void bench_put_num(const char *section, int device, const char *item, const char *key, double v, const char *unit,
                   const char *note) {
    bench_put(section, device, item, key, bench_stat_one(v), unit, note);
}

void bench_put_text(const char *section, int device, const char *item, const char *key, const char *text) {
    bench_rec *r = stats_slot(section, device, item, key);
    if (!r) return;
    r->is_text = 1;
    snprintf(r->text, sizeof r->text, "%s", text ? text : "");
}

double bench_get(const char *section, int device, const char *item, const char *key) {
    int i;
    for (i = 0; i < stats_n; i++) {
        const bench_rec *r = &stats_recs[i];
        if (r->device == device && !r->is_text && !strcmp(r->section, section) && !strcmp(r->item, item) &&
            !strcmp(r->key, key))
            return r->s.median;
    }
    return bench_nan();
}

int bench_rec_count(void) { return stats_n; }
const bench_rec *bench_rec_at(int i) { return i >= 0 && i < stats_n ? &stats_recs[i] : NULL; }
void bench_recs_free(void) {
    free(stats_recs);
    stats_recs = NULL;
    stats_n = stats_cap = 0;
}

/* ------------------------------------------------------------- timing */

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bench_timing bench_timing_of(const bench_opts *o, double budget) {
    bench_timing t;
    t.repeats = o->repeats;
    t.min_seconds = o->seconds;
    t.budget = budget;
    return t;
}

static double stats_run(bench_fn fn, void *arg, int iters) {
    double t0 = bench_now();
    if (fn(arg, iters)) return -1;
    return bench_now() - t0;
}

/* Iterations per repeat so that one repeat lasts min_seconds, from the time
 * of one call; and how many repeats fit the budget (at least one). */
static void stats_plan(double one, const bench_timing *t, int *iters, int *repeats) {
    double it = one > 0 ? ceil(t->min_seconds / one) : 1;
    double per;
    if (it < 1) it = 1;
    if (it > 100000) it = 100000;
    *iters = (int)it;
    per = one * it;
    *repeats = t->repeats;
    if (per * *repeats > t->budget && per > 0) *repeats = (int)(t->budget / per);
    if (*repeats < 1) *repeats = 1;
    if (*repeats > t->repeats) *repeats = t->repeats;
}

int bench_time(bench_fn fn, void *arg, const bench_timing *t, bench_stat *per_call) {
    double v[64], one;
    int iters, reps, r;
    *per_call = bench_stat_na();
    if (stats_run(fn, arg, 1) < 0) return -1;         /* warm-up: compiles, first touch */
    if ((one = stats_run(fn, arg, 1)) < 0) return -1; /* a second call sizes the repeats */
    stats_plan(one, t, &iters, &reps);
    if (reps > 64) reps = 64;
    for (r = 0; r < reps; r++) {
        double s = stats_run(fn, arg, iters);
        if (s < 0) return -1;
        v[r] = s / iters;
    }
    *per_call = bench_stat_of(v, reps);
    return 0;
}

int bench_time_pair(bench_fn fa, void *aa, bench_fn fb, void *ab, const bench_timing *t, bench_stat *a,
                    bench_stat *b, bench_stat *ratio) {
    double va[64], vb[64], vr[64], one_a, one_b;
    int iters, reps, r;
    *a = *b = *ratio = bench_stat_na();
    if (stats_run(fa, aa, 1) < 0 || stats_run(fb, ab, 1) < 0) return -1;
    if ((one_a = stats_run(fa, aa, 1)) < 0 || (one_b = stats_run(fb, ab, 1)) < 0) return -1;
    {
        bench_timing half = *t;
        half.budget = t->budget / 2;
        stats_plan(one_a > one_b ? one_a : one_b, &half, &iters, &reps);
    }
    if (reps > 64) reps = 64;
    for (r = 0; r < reps; r++) {
        /* alternate which goes first, so neither always follows the other */
        double sa, sb;
        if (r & 1) {
            sb = stats_run(fb, ab, iters);
            sa = stats_run(fa, aa, iters);
        } else {
            sa = stats_run(fa, aa, iters);
            sb = stats_run(fb, ab, iters);
        }
        if (sa < 0 || sb < 0) return -1;
        va[r] = sa / iters;
        vb[r] = sb / iters;
        vr[r] = sa / sb;
    }
    *a = bench_stat_of(va, reps);
    *b = bench_stat_of(vb, reps);
    *ratio = bench_stat_of(vr, reps);
    return 0;
}

/* ------------------------------------------------------------- progress */

static int stats_total, stats_done, stats_tty, stats_width;
static double stats_t0;

void bench_progress_init(int total_steps) {
    stats_total = total_steps > 0 ? total_steps : 1;
    stats_done = 0;
    stats_tty = isatty(fileno(stderr));
    stats_width = 0;
    stats_t0 = bench_now();
}

void bench_progress(const char *fmt, ...) {
    char msg[256];
    va_list ap;
    int len;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (stats_tty) {
        len = fprintf(stderr, "\r[%3d%% %5.0fs] %s", 100 * stats_done / stats_total, bench_now() - stats_t0, msg);
        if (len < stats_width) fprintf(stderr, "%*s", stats_width - len, "");
        stats_width = len;
    } else {
        fprintf(stderr, "[%3d%% %5.0fs] %s\n", 100 * stats_done / stats_total, bench_now() - stats_t0, msg);
    }
    fflush(stderr);
}

void bench_progress_step(void) {
    if (stats_done < stats_total) stats_done++;
}

void bench_progress_done(void) {
    if (stats_tty && stats_width) fprintf(stderr, "\r%*s\r", stats_width, "");
    stats_width = 0;
    fflush(stderr);
}
