/* progress.c - training progress on a stream the caller names: a one-line
 * bar redrawn in place on a terminal, plain lines at a bounded rate
 * elsewhere (logs, pipes, CI), one line per finished epoch in both. */
#include "runtime/internal.h"
#include <stdio.h>
#include <time.h>
#if defined(_WIN32)
#include <io.h>
#include <windows.h>
#else
#include <unistd.h>
#endif

#define PROGRESS_BAR_WIDTH 24
#define PROGRESS_REDRAW_S 0.1 /* a terminal line redrawn at most this often */
#define PROGRESS_LINE_MAX 320
#define PROGRESS_RECENT 32    /* steps the time left is estimated from */

struct nncl_progress {
    FILE *out;
    int epochs, steps;
    int mode;              /* BAR, LINES or QUIET once resolved */
    double interval;       /* LINES: least seconds between step lines */
    char extra[64];
    double t_epoch;        /* start of the current epoch's training */
    double t_update;       /* the last update */
    double t_draw;         /* the last bar redraw or step line */
    int epoch;             /* epoch the sums below belong to; -1 before any */
    double loss_sum, loss_w, acc_sum, acc_w;
    long samples;          /* of the current epoch */
    long steps_done;       /* over the whole run */
    /* The durations of the latest steps (a ring): the time left comes from
     * these, not from the start, so that the first steps' kernel builds and
     * each epoch's validation do not stretch it. */
    double recent[PROGRESS_RECENT];
    int n_recent;
    int step;
    int bar_len;           /* length of the bar on screen; 0 when none */
    char bar[PROGRESS_LINE_MAX];
};

static int progress_isatty(FILE *f) {
    const char *term = getenv("TERM");
    if (term && !strcmp(term, "dumb")) return 0;
#if defined(_WIN32)
    return _isatty(_fileno(f));
#else
    return isatty(fileno(f));
#endif
}

/* Appends printf output to buf (of PROGRESS_LINE_MAX bytes), never past its end. */
static void progress_cat(char *buf, const char *fmt, ...) NNCL_PRINTF(2, 3);
static void progress_cat(char *buf, const char *fmt, ...) {
    size_t len = strlen(buf);
    va_list ap;
    if (len + 1 >= PROGRESS_LINE_MAX) return;
    va_start(ap, fmt);
    vsnprintf(buf + len, PROGRESS_LINE_MAX - len, fmt, ap);
    va_end(ap);
}

/* A loss as people read it: 4 decimals, or 4 significant digits when large
 * or tiny; nan and inf spelled out rather than left to the C library. */
static void progress_num(char *buf, size_t size, double x) {
    double a = x < 0 ? -x : x;
    if (x != x) snprintf(buf, size, "nan");
    else if (a > 1e300) snprintf(buf, size, x > 0 ? "inf" : "-inf");
    else if (a != 0 && (a >= 1000 || a < 0.001)) snprintf(buf, size, "%.4g", x);
    else snprintf(buf, size, "%.4f", x);
}

static void progress_pct(char *buf, size_t size, double frac) {
    if (frac != frac) snprintf(buf, size, "nan");
    else snprintf(buf, size, "%.2f%%", 100.0 * frac);
}

static void progress_duration(char *buf, size_t size, double s) {
    long t;
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, size, "?");
        return;
    }
    t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

nncl_status nncl_progress_create(FILE *out, int epochs, int steps_per_epoch, nncl_progress **p) {
    nncl_progress *pr;
    if (!p) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_progress_create: p is NULL");
    *p = NULL;
    if (!out || epochs < 0 || steps_per_epoch < 0)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_progress_create: need a stream and epochs, steps_per_epoch >= 0 (got %d, %d)", epochs,
                          steps_per_epoch);
    pr = (nncl_progress *)nncl__calloc(1, sizeof *pr);
    if (!pr) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_progress_create: out of memory");
    pr->out = out;
    pr->epochs = epochs;
    pr->steps = steps_per_epoch;
    pr->mode = progress_isatty(out) ? NNCL_PROGRESS_BAR : NNCL_PROGRESS_LINES;
    pr->interval = 10.0;
    pr->t_epoch = pr->t_update = pr->t_draw = nncl__seconds();
    pr->epoch = -1;
    *p = pr;
    return NNCL_OK;
}

/* Takes the bar off the screen so that a full line can be written. */
static void progress_clear_bar(nncl_progress *p) {
    if (p->bar_len > 0) {
        fprintf(p->out, "\r%*s\r", p->bar_len, "");
        p->bar_len = 0;
    }
}

static void progress_draw_bar(nncl_progress *p) {
    int len = (int)strlen(p->bar);
    /* Pad over what is left of a longer previous line. */
    fprintf(p->out, "\r%s%*s", p->bar, p->bar_len > len ? p->bar_len - len : 0, "");
    fflush(p->out);
    p->bar_len = len;
}

void nncl_progress_free(nncl_progress *p) {
    if (!p) return;
    if (p->bar_len > 0) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    NNCL_FREE(p);
}

void nncl_progress_set_mode(nncl_progress *p, int mode) {
    if (!p) return;
    if (mode == NNCL_PROGRESS_AUTO) mode = progress_isatty(p->out) ? NNCL_PROGRESS_BAR : NNCL_PROGRESS_LINES;
    if (mode < NNCL_PROGRESS_BAR || mode > NNCL_PROGRESS_QUIET) return;
    if (p->mode == NNCL_PROGRESS_BAR && mode != NNCL_PROGRESS_BAR) progress_clear_bar(p);
    p->mode = mode;
}

void nncl_progress_set_interval(nncl_progress *p, double seconds) {
    if (p) p->interval = seconds > 0 ? seconds : 0;
}

void nncl_progress_set_extra(nncl_progress *p, const char *text) {
    size_t i;
    if (!p) return;
    p->extra[0] = 0;
    if (!text) return;
    for (i = 0; text[i] && i + 1 < sizeof p->extra; i++)
        /* Control characters would break the line in two. */
        p->extra[i] = (unsigned char)text[i] < 0x20 ? '?' : text[i];
    p->extra[i] = 0;
}

/* "epoch e/E" with E left out when the run length is unknown. */
static void progress_epoch_str(const nncl_progress *p, char *buf, int epoch) {
    /* counts shown from 1, in a wider type: any int the caller passes prints */
    if (p->epochs > 0) progress_cat(buf, "epoch %lld/%d", (long long)epoch + 1, p->epochs);
    else progress_cat(buf, "epoch %lld", (long long)epoch + 1);
}

/* The statistics shared by the bar and the step lines. */
static void progress_stats(const nncl_progress *p, char *buf, double now) {
    char num[48];
    double train_s = now - p->t_epoch;
    progress_num(num, sizeof num, p->loss_w > 0 ? p->loss_sum / p->loss_w : 0.0);
    progress_cat(buf, "  loss %s", num);
    if (p->acc_w > 0) {
        progress_pct(num, sizeof num, p->acc_sum / p->acc_w);
        progress_cat(buf, "  acc %s", num);
    }
    if (p->samples > 0 && train_s > 0) progress_cat(buf, "  %.0f samples/s", (double)p->samples / train_s);
    if (p->epochs > 0 && p->steps > 0 && p->n_recent > 0) {
        double total = (double)p->epochs * p->steps;
        double left = total - ((double)p->epoch * p->steps + p->step + 1.0);
        int k, n = p->n_recent < PROGRESS_RECENT ? p->n_recent : PROGRESS_RECENT;
        double sum = 0;
        for (k = 0; k < n; k++) sum += p->recent[k];
        if (left < 0) left = 0;
        progress_duration(num, sizeof num, sum / n * left);
        progress_cat(buf, "  ETA %s", num);
    }
    if (p->extra[0]) progress_cat(buf, "  %s", p->extra);
}

void nncl_progress_update(nncl_progress *p, int epoch, int step, double loss, double acc, long samples) {
    double now, w;
    int last;
    if (!p) return;
    now = nncl__seconds();
    if (epoch != p->epoch) {
        /* A new epoch without epoch_end: its training starts now-ish. */
        if (p->epoch >= 0 && epoch != p->epoch) p->t_epoch = p->t_update;
        p->epoch = epoch;
        p->loss_sum = p->loss_w = p->acc_sum = p->acc_w = 0;
        p->samples = 0;
    }
    p->step = step;
    /* The run's first step builds kernels (seconds on some drivers): it
     * counts only until real steps replace it. */
    if (p->steps_done == 1 && p->n_recent == 1) p->n_recent = 0;
    p->recent[p->n_recent++ % PROGRESS_RECENT] = now - p->t_update;
    if (p->n_recent >= 2 * PROGRESS_RECENT) p->n_recent -= PROGRESS_RECENT;
    p->steps_done++;
    p->t_update = now;
    w = samples > 0 ? (double)samples : 1.0;
    if (samples > 0) p->samples = samples > LONG_MAX - p->samples ? LONG_MAX : p->samples + samples;
    p->loss_sum += w * loss;
    p->loss_w += w;
    if (acc >= 0 || acc != acc) {
        p->acc_sum += w * acc;
        p->acc_w += w;
    }
    if (p->mode == NNCL_PROGRESS_QUIET) return;
    last = p->steps > 0 && step >= p->steps - 1;
    if (p->mode == NNCL_PROGRESS_BAR) {
        char *b = p->bar;
        if (!last && step != 0 && now - p->t_draw < PROGRESS_REDRAW_S) return;
        b[0] = 0;
        progress_epoch_str(p, b, epoch);
        if (p->steps > 0) {
            /* clamped before the conversion: a step past the end overflows int */
            double part = (double)PROGRESS_BAR_WIDTH * ((double)step + 1.0) / (double)p->steps;
            int fill = part > PROGRESS_BAR_WIDTH ? PROGRESS_BAR_WIDTH : part < 0 ? 0 : (int)part, i;
            char bar[PROGRESS_BAR_WIDTH + 1];
            for (i = 0; i < PROGRESS_BAR_WIDTH; i++) bar[i] = i < fill ? '=' : ' ';
            if (fill > 0 && fill < PROGRESS_BAR_WIDTH) bar[fill - 1] = '>';
            bar[PROGRESS_BAR_WIDTH] = 0;
            progress_cat(b, " [%s] %lld/%d", bar, (long long)step + 1, p->steps);
        } else {
            progress_cat(b, " step %lld", (long long)step + 1);
        }
        progress_stats(p, b, now);
        progress_draw_bar(p);
    } else {
        char line[PROGRESS_LINE_MAX];
        if (now - p->t_draw < p->interval) return;
        line[0] = 0;
        progress_epoch_str(p, line, epoch);
        if (p->steps > 0) progress_cat(line, " step %lld/%d", (long long)step + 1, p->steps);
        else progress_cat(line, " step %lld", (long long)step + 1);
        progress_stats(p, line, now);
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
    }
    p->t_draw = now;
}

void nncl_progress_epoch_end(nncl_progress *p, int epoch, double train_loss, double train_acc, double val_loss,
                             double val_acc) {
    char line[PROGRESS_LINE_MAX], num[48];
    double now, train_s;
    if (!p) return;
    now = nncl__seconds();
    train_s = (p->epoch == epoch ? p->t_update : now) - p->t_epoch;
    if (p->mode != NNCL_PROGRESS_QUIET) {
        line[0] = 0;
        progress_epoch_str(p, line, epoch);
        progress_num(num, sizeof num, train_loss);
        progress_cat(line, "  loss %s", num);
        if (train_acc >= 0 || train_acc != train_acc) {
            progress_pct(num, sizeof num, train_acc);
            progress_cat(line, "  acc %s", num);
        }
        if (val_loss == val_loss || (val_acc == val_acc && val_acc >= 0)) {
            progress_num(num, sizeof num, val_loss);
            progress_cat(line, "  val_loss %s", num);
            if (val_acc >= 0 || val_acc != val_acc) {
                progress_pct(num, sizeof num, val_acc);
                progress_cat(line, "  val_acc %s", num);
            }
        }
        progress_duration(num, sizeof num, now - p->t_epoch);
        progress_cat(line, "  time %s", num);
        if (p->epoch == epoch && p->samples > 0 && train_s > 0)
            progress_cat(line, "  %.0f samples/s", (double)p->samples / train_s);
        if (p->extra[0]) progress_cat(line, "  %s", p->extra);
        if (p->mode == NNCL_PROGRESS_BAR) progress_clear_bar(p);
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
    }
    /* The next epoch's training starts after this epoch's validation. */
    p->t_epoch = p->t_update = p->t_draw = now;
    p->epoch = -1;
    p->loss_sum = p->loss_w = p->acc_sum = p->acc_w = 0;
    p->samples = 0;
}

void nncl_progress_message(nncl_progress *p, const char *text) {
    int had_bar;
    if (!p || !text || p->mode == NNCL_PROGRESS_QUIET) return;
    had_bar = p->bar_len > 0;
    progress_clear_bar(p);
    fprintf(p->out, "%s\n", text);
    if (had_bar) progress_draw_bar(p);
    fflush(p->out);
}

#undef PROGRESS_BAR_WIDTH
#undef PROGRESS_REDRAW_S
#undef PROGRESS_LINE_MAX
#undef PROGRESS_RECENT
