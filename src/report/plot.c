/* plot.c - standalone SVG charts with no dependency: the training curve
 * (loss and accuracy per epoch, two panels) and a horizontal bar chart for
 * the bench program (throughput per device). Numbers are written with '.'
 * whatever the C locale, text is XML-escaped. */
#include "runtime/internal.h"
#include <math.h>
#include <stdio.h>

#define PLOT_FONT "Helvetica, Arial, sans-serif"
#define PLOT_TRAIN "#1f77b4"
#define PLOT_VAL "#ff7f0e"
#define PLOT_BAR "#4c78a8"
#define PLOT_GRID "#e6e6e6"
#define PLOT_AXIS "#444444"
#define PLOT_TEXT "#222222"
#define PLOT_CLAMP 1e30 /* values beyond are drawn at the edge: no inf in the SVG */

/* Locale-proof number text; a ring of buffers so that one fprintf can take
 * several numbers. */
typedef struct plot_fmt {
    char buf[8][40];
    int next;
} plot_fmt;

static const char *plot_n(plot_fmt *pf, double v) {
    char *b = pf->buf[pf->next++ & 7];
    if (v > PLOT_CLAMP) v = PLOT_CLAMP;
    if (v < -PLOT_CLAMP) v = -PLOT_CLAMP;
    nncl__fmt_double(b, sizeof pf->buf[0], "%.1f", v);
    if (!strcmp(b, "-0.0")) strcpy(b, "0.0");
    return b;
}

/* A tick label: up to 6 significant digits, no trailing noise. */
static const char *plot_tick(plot_fmt *pf, double v, double step) {
    char *b = pf->buf[pf->next++ & 7];
    if (fabs(v) < fabs(step) * 1e-9) v = 0;
    nncl__fmt_double(b, sizeof pf->buf[0], "%.6g", v);
    return b;
}

/* A value as shown on a bar: a few digits, more for small numbers. */
static const char *plot_value(plot_fmt *pf, double v) {
    char *b = pf->buf[pf->next++ & 7];
    double a = fabs(v);
    nncl__fmt_double(b, sizeof pf->buf[0], a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.3g", v);
    return b;
}

static void plot_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* Control characters are not allowed in XML 1.0. */
            if ((unsigned char)*s < 0x20) fputc(' ', f);
            else fputc(*s, f);
        }
    }
}

/* The document's opening: the svg element of W x H, its title, a white
 * background and the title drawn centred at baseline y in font px. */
static void plot_head(FILE *f, plot_fmt *pf, double W, double H, const char *title, double y, double font) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" "
               "font-family=\"%s\">\n",
            plot_n(pf, W), plot_n(pf, H), plot_n(pf, W), plot_n(pf, H), PLOT_FONT);
    fprintf(f, "<title>");
    plot_text(f, title);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n", plot_n(pf, W),
            plot_n(pf, H));
    fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"%s\" font-weight=\"bold\" fill=\"%s\">",
            plot_n(pf, W / 2), plot_n(pf, y), plot_n(pf, font), PLOT_TEXT);
    plot_text(f, title);
    fprintf(f, "</text>\n");
}


/* An axis range [lo, hi] in whole steps of 1, 2, 2.5 or 5 times a power of
 * ten, about `target` steps covering [mn, mx]. */
typedef struct plot_axis {
    double lo, hi, step;
} plot_axis;

static void plot_nice(double mn, double mx, int target, int integer, plot_axis *ax) {
    double range, rough, mag, norm, step;
    if (!(mn <= mx)) {
        mn = 0;
        mx = 1;
    }
    if (mx - mn <= 1e-12 * (fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx))) {
        double d = mn == 0 ? 1 : fabs(mn) * 0.1;
        mn -= d;
        mx += d;
    }
    range = mx - mn;
    rough = range / target;
    mag = pow(10, floor(log10(rough)));
    norm = rough / mag;
    /* Whole-number axes (epochs) take no 2.5 steps. */
    step = (norm <= 1 ? 1 : norm <= 2 ? 2 : (norm <= 2.5 && !integer) ? 2.5 : norm <= 5 ? 5 : 10) * mag;
    if (integer && step < 1) step = 1;
    ax->step = step;
    ax->lo = floor(mn / step + 1e-9) * step;
    ax->hi = ceil(mx / step - 1e-9) * step;
    if (ax->hi <= ax->lo) ax->hi = ax->lo + step;
}

static int plot_finite(double v) { return v == v && v <= PLOT_CLAMP && v >= -PLOT_CLAMP; }

/* ------------------------------------------------------------ curve plot */

typedef struct plot_panel {
    double x0, y0, w, h; /* plot area */
    plot_axis xa, ya;
} plot_panel;

static double plot_px(const plot_panel *p, double v) { return p->x0 + (v - p->xa.lo) / (p->xa.hi - p->xa.lo) * p->w; }
static double plot_py(const plot_panel *p, double v) {
    return p->y0 + p->h - (v - p->ya.lo) / (p->ya.hi - p->ya.lo) * p->h;
}

/* Grid, axes, tick labels and titles of one panel. */
static void plot_frame(FILE *f, plot_fmt *pf, const plot_panel *p, const char *heading, const char *ylabel) {
    int k, n;
    fprintf(f, "<g class=\"panel\">\n");
    fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\" fill=\"%s\">",
            plot_n(pf, p->x0 + p->w / 2), plot_n(pf, p->y0 - 14), PLOT_TEXT);
    plot_text(f, heading);
    fprintf(f, "</text>\n");
    /* Horizontal grid lines and y tick labels. */
    n = (int)floor((p->ya.hi - p->ya.lo) / p->ya.step + 0.5);
    for (k = 0; k <= n && k <= 60; k++) {
        double v = p->ya.lo + k * p->ya.step, y = plot_py(p, v);
        fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>\n",
                plot_n(pf, p->x0), plot_n(pf, y), plot_n(pf, p->x0 + p->w), plot_n(pf, y), PLOT_GRID);
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                plot_n(pf, p->x0 - 8), plot_n(pf, y + 4), PLOT_TEXT, plot_tick(pf, v, p->ya.step));
    }
    /* Vertical grid lines and epoch tick labels. */
    n = (int)floor((p->xa.hi - p->xa.lo) / p->xa.step + 0.5);
    for (k = 0; k <= n && k <= 60; k++) {
        double v = p->xa.lo + k * p->xa.step, x = plot_px(p, v);
        fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>\n",
                plot_n(pf, x), plot_n(pf, p->y0), plot_n(pf, x), plot_n(pf, p->y0 + p->h), PLOT_GRID);
        fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>\n",
                plot_n(pf, x), plot_n(pf, p->y0 + p->h), plot_n(pf, x), plot_n(pf, p->y0 + p->h + 5), PLOT_AXIS);
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                plot_n(pf, x), plot_n(pf, p->y0 + p->h + 19), PLOT_TEXT, plot_tick(pf, v, p->xa.step));
    }
    /* Axis lines: left and bottom. */
    fprintf(f, "<path d=\"M%s,%s V%s H%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\"/>\n", plot_n(pf, p->x0),
            plot_n(pf, p->y0), plot_n(pf, p->y0 + p->h), plot_n(pf, p->x0 + p->w), PLOT_AXIS);
    fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"13\" fill=\"%s\">epoch</text>\n",
            plot_n(pf, p->x0 + p->w / 2), plot_n(pf, p->y0 + p->h + 40), PLOT_TEXT);
    fprintf(f,
            "<text transform=\"translate(%s,%s) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\" "
            "fill=\"%s\">",
            plot_n(pf, p->x0 - 52), plot_n(pf, p->y0 + p->h / 2), PLOT_TEXT);
    plot_text(f, ylabel);
    fprintf(f, "</text>\n</g>\n");
}

/* One series as a path, broken where a value is missing (NaN), with a
 * marker on each point when there are few. */
static void plot_series(FILE *f, plot_fmt *pf, const plot_panel *p, const double *x, const double *y, int n,
                        const char *color, int dashed, const char *name) {
    int i, pen_down = 0;
    fprintf(f, "<path class=\"series\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" "
               "stroke-linejoin=\"round\" stroke-linecap=\"round\"%s d=\"",
            name, color, dashed ? " stroke-dasharray=\"7 4\"" : "");
    for (i = 0; i < n; i++) {
        if (!plot_finite(y[i])) {
            pen_down = 0;
            continue;
        }
        fprintf(f, "%s%s,%s", pen_down ? " L" : (i ? " M" : "M"), plot_n(pf, plot_px(p, x[i])),
                plot_n(pf, plot_py(p, y[i])));
        pen_down = 1;
    }
    fprintf(f, "\"/>\n");
    if (n > 60) return;
    for (i = 0; i < n; i++)
        if (plot_finite(y[i]))
            fprintf(f, "<circle cx=\"%s\" cy=\"%s\" r=\"3.2\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\"/>\n",
                    plot_n(pf, plot_px(p, x[i])), plot_n(pf, plot_py(p, y[i])), color);
}

static int plot_any(const double *v, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (plot_finite(v[i])) return 1;
    return 0;
}

/* Range of the finite values of two series into [*mn, *mx]. */
static void plot_range(const double *a, const double *b, int n, double *mn, double *mx) {
    int i;
    *mn = HUGE_VAL;
    *mx = -HUGE_VAL;
    for (i = 0; i < n; i++) {
        if (plot_finite(a[i])) {
            if (a[i] < *mn) *mn = a[i];
            if (a[i] > *mx) *mx = a[i];
        }
        if (plot_finite(b[i])) {
            if (b[i] < *mn) *mn = b[i];
            if (b[i] > *mx) *mx = b[i];
        }
    }
}

static void plot_curve_svg(FILE *f, const char *title, int n, const double *ep, const double *tl, const double *ta,
                           const double *vl, const double *va) {
    plot_fmt pf;
    plot_panel pl, pa;
    double mn, mx, emin = 1, emax = 1;
    int i, have_train, have_val;
    const double W = 960, H = 440;
    pf.next = 0;
    for (i = 0; i < n; i++) {
        if (i == 0 || ep[i] < emin) emin = ep[i];
        if (i == 0 || ep[i] > emax) emax = ep[i];
    }
    pl.x0 = 84;
    pa.x0 = 84 + 480;
    pl.y0 = pa.y0 = 96;
    pl.w = pa.w = 360;
    pl.h = pa.h = 270;
    /* Epochs: whole-number ticks; a single epoch sits in the middle. */
    if (emax - emin < 1) plot_nice(emin - 1, emax + 1, 2, 1, &pl.xa);
    else plot_nice(emin, emax, 8, 1, &pl.xa);
    pa.xa = pl.xa;
    plot_range(tl, vl, n, &mn, &mx);
    plot_nice(mn, mx, 5, 0, &pl.ya);
    plot_range(ta, va, n, &mn, &mx);
    if (mn <= mx) {
        plot_nice(mn, mx, 5, 0, &pa.ya);
        if (pa.ya.lo < 0) pa.ya.lo = 0;
        if (pa.ya.hi > 100) pa.ya.hi = 100;
        if (pa.ya.hi <= pa.ya.lo) plot_nice(mn, mx, 5, 0, &pa.ya);
    } else {
        plot_nice(0, 100, 5, 0, &pa.ya);
    }
    have_train = plot_any(tl, n) || plot_any(ta, n);
    have_val = plot_any(vl, n) || plot_any(va, n);

    plot_head(f, &pf, W, H, title, 32, 19);
    /* Legend, centred under the title. */
    {
        double lx = W / 2 - (have_train && have_val ? 110 : 50);
        fprintf(f, "<g class=\"legend\" font-size=\"13\" fill=\"%s\">\n", PLOT_TEXT);
        if (have_train) {
            fprintf(f, "<line x1=\"%s\" y1=\"56\" x2=\"%s\" y2=\"56\" stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                    plot_n(&pf, lx), plot_n(&pf, lx + 28), PLOT_TRAIN);
            fprintf(f, "<text x=\"%s\" y=\"60\">train</text>\n", plot_n(&pf, lx + 36));
            lx += 100;
        }
        if (have_val) {
            fprintf(f, "<line x1=\"%s\" y1=\"56\" x2=\"%s\" y2=\"56\" stroke=\"%s\" stroke-width=\"2.5\" "
                       "stroke-dasharray=\"7 4\"/>\n",
                    plot_n(&pf, lx), plot_n(&pf, lx + 28), PLOT_VAL);
            fprintf(f, "<text x=\"%s\" y=\"60\">validation</text>\n", plot_n(&pf, lx + 36));
        }
        fprintf(f, "</g>\n");
    }
    plot_frame(f, &pf, &pl, "Loss", "loss");
    plot_frame(f, &pf, &pa, "Accuracy", "accuracy (%)");
    if (!have_train && !have_val)
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"16\" fill=\"#888888\">no data yet</text>\n",
                plot_n(&pf, W / 2), plot_n(&pf, pl.y0 + pl.h / 2));
    if (plot_any(tl, n)) plot_series(f, &pf, &pl, ep, tl, n, PLOT_TRAIN, 0, "train loss");
    if (plot_any(vl, n)) plot_series(f, &pf, &pl, ep, vl, n, PLOT_VAL, 1, "validation loss");
    if (plot_any(ta, n)) plot_series(f, &pf, &pa, ep, ta, n, PLOT_TRAIN, 0, "train accuracy");
    if (plot_any(va, n)) plot_series(f, &pf, &pa, ep, va, n, PLOT_VAL, 1, "validation accuracy");
    fprintf(f, "</svg>\n");
}

nncl_status nncl_curve_write_svg(const nncl_curve *c, const char *path, const char *title) {
    nncl__afile af;
    double *buf;
    int n, i;
    nncl_status s;
    if (!c || !path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_curve_write_svg: NULL argument");
    n = nncl_curve_count(c);
    buf = (double *)nncl__calloc((size_t)(n ? n : 1), 5 * sizeof(double));
    if (!buf) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "curve SVG %s: out of memory for %d rows", path, n);
    for (i = 0; i < n; i++) {
        nncl_curve_row r;
        nncl_curve_get(c, i, &r);
        buf[i] = r.epoch;
        buf[n + i] = r.train_loss;
        buf[2 * n + i] = 100.0 * r.train_acc;
        buf[3 * n + i] = r.val_loss;
        buf[4 * n + i] = 100.0 * r.val_acc;
    }
    s = nncl__afile_open(&af, path, "curve SVG");
    if (s == NNCL_OK) {
        plot_curve_svg(af.f, title ? title : "Training curve", n, buf, buf + n, buf + 2 * n, buf + 3 * n, buf + 4 * n);
        s = nncl__afile_commit(&af, "curve SVG");
    }
    NNCL_FREE(buf);
    return s;
}

/* ------------------------------------------------------------ bar chart */

#define PLOT_LABEL_MAX 48 /* characters of a bar label shown */

/* Number of UTF-8 characters in s. */
static int plot_chars(const char *s) {
    int n = 0;
    for (; s && *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) n++;
    return n;
}

/* s, cut to PLOT_LABEL_MAX characters with "..." at a character boundary. */
static void plot_label(FILE *f, const char *s) {
    const char *p = s;
    int n = 0;
    char cut[256];
    size_t len;
    if (plot_chars(s) <= PLOT_LABEL_MAX) {
        plot_text(f, s);
        return;
    }
    while (*p && n < PLOT_LABEL_MAX - 3) {
        p++;
        while (((unsigned char)*p & 0xc0) == 0x80) p++;
        n++;
    }
    len = (size_t)(p - s);
    if (len > sizeof cut - 4) len = sizeof cut - 4;
    memcpy(cut, s, len);
    memcpy(cut + len, "...", 4);
    plot_text(f, cut);
}

/* One panel of bars from y0 (its heading above it when given), with its
 * own value axis; returns the height it took. */
static double plot_bars_panel(FILE *f, plot_fmt *pf, double y0, double x0, double w, const char *heading,
                              const char *unit, const char *const *labels, const double *values, int n) {
    plot_axis xa;
    double mx = 0, bar_h = 24, pitch = 36, top = y0;
    int i, k, nt;
    for (i = 0; i < n; i++)
        if (plot_finite(values[i]) && values[i] > mx) mx = values[i];
    plot_nice(0, mx > 0 ? mx : 1, 5, 0, &xa);
    xa.lo = 0;
    if (heading && *heading) {
        fprintf(f, "<text x=\"%s\" y=\"%s\" font-size=\"15\" font-weight=\"bold\" fill=\"%s\">", plot_n(pf, x0),
                plot_n(pf, y0 + 4), PLOT_TEXT);
        plot_text(f, heading);
        fprintf(f, "</text>\n");
        y0 += 22;
    }
    /* Vertical grid and value ticks along the bottom. */
    nt = (int)floor((xa.hi - xa.lo) / xa.step + 0.5);
    for (k = 0; k <= nt && k <= 60; k++) {
        double v = xa.lo + k * xa.step, x = x0 + (v - xa.lo) / (xa.hi - xa.lo) * w;
        fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>\n",
                plot_n(pf, x), plot_n(pf, y0 - 8), plot_n(pf, x), plot_n(pf, y0 + n * pitch), PLOT_GRID);
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                plot_n(pf, x), plot_n(pf, y0 + n * pitch + 18), PLOT_TEXT, plot_tick(pf, v, xa.step));
    }
    fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"13\" fill=\"%s\">", plot_n(pf, x0 + w / 2),
            plot_n(pf, y0 + n * pitch + 38), PLOT_TEXT);
    plot_text(f, unit);
    fprintf(f, "</text>\n");
    if (!n)
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"16\" fill=\"#888888\">no data</text>\n",
                plot_n(pf, x0 + w / 2), plot_n(pf, y0 + pitch / 2));
    for (i = 0; i < n; i++) {
        double y = y0 + i * pitch + (pitch - bar_h) / 2, v = values[i];
        int ok = plot_finite(v);
        double bw = ok ? v / (xa.hi - xa.lo) * w : 0;
        fprintf(f, "<g class=\"bar\">\n");
        fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" font-size=\"13\" fill=\"%s\">", plot_n(pf, x0 - 10),
                plot_n(pf, y + bar_h / 2 + 4.5), PLOT_TEXT);
        plot_label(f, labels[i]);
        fprintf(f, "</text>\n");
        if (ok)
            fprintf(f, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" rx=\"3\" fill=\"%s\"/>\n", plot_n(pf, x0),
                    plot_n(pf, y), plot_n(pf, bw), plot_n(pf, bar_h), PLOT_BAR);
        fprintf(f, "<text x=\"%s\" y=\"%s\" font-size=\"12\" fill=\"%s\">", plot_n(pf, x0 + bw + 6),
                plot_n(pf, y + bar_h / 2 + 4), PLOT_TEXT);
        if (ok) {
            fprintf(f, "%s ", plot_value(pf, v));
            plot_text(f, unit);
        } else {
            fprintf(f, "n/a");
        }
        fprintf(f, "</text>\n</g>\n");
    }
    /* Value axis line at zero. */
    fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.2\"/>\n", plot_n(pf, x0),
            plot_n(pf, y0 - 8), plot_n(pf, x0), plot_n(pf, y0 + n * pitch), PLOT_AXIS);
    return y0 - top + (n ? n : 1) * pitch + 58;
}

/* Panels stacked under one title. The title's font shrinks to fit the
 * width (an average glyph is ~0.6 of the font size), never below 11. */
static void plot_bars_svg(FILE *f, const char *title, const char *unit, int panels, const char *const *headings,
                          const int *counts, const char *const *labels, const double *values) {
    plot_fmt pf;
    double lw, x0, w, y, H, W = 820, font;
    int i, p, n = 0, longest = 0, tch = plot_chars(title);
    pf.next = 0;
    for (p = 0; p < panels; p++) n += counts[p];
    for (i = 0; i < n; i++) {
        int ch = plot_chars(labels[i]);
        if (ch > PLOT_LABEL_MAX) ch = PLOT_LABEL_MAX;
        if (ch > longest) longest = ch;
    }
    lw = 7.0 * longest + 12;
    if (lw < 60) lw = 60;
    x0 = 24 + lw;
    w = W - x0 - 150;
    font = tch > 0 ? (W - 40) / (0.6 * tch) : 19;
    if (font > 19) font = 19;
    if (font < 11) font = 11;
    H = 56;
    for (p = 0; p < panels; p++) H += (headings && headings[p] && *headings[p] ? 22 : 0) + (counts[p] ? counts[p] : 1) * 36 + 58;
    plot_head(f, &pf, W, H, title, 34, font);
    for (p = 0, i = 0, y = 74; p < panels; i += counts[p], p++)
        y += plot_bars_panel(f, &pf, y, x0, w, headings ? headings[p] : NULL, unit, labels + i, values + i, counts[p]);
    fprintf(f, "</svg>\n");
}

nncl_status nncl_svg_bar_panels(const char *path, const char *title, const char *unit, int panels,
                                const char *const *headings, const int *counts, const char *const *labels,
                                const double *values) {
    nncl__afile af;
    const char **lab;
    int i, p, n = 0;
    nncl_status s;
    if (!path || panels < 1 || panels > 64 || !counts)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "bar chart: path, 1..64 panels and their counts are needed");
    for (p = 0; p < panels; p++) {
        if (counts[p] < 0 || counts[p] > 100000)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "bar chart %s: panel %d has %d bars", path, p, counts[p]);
        n += counts[p];
    }
    if (n && (!labels || !values))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "bar chart %s: labels or values missing", path);
    for (i = 0; i < n; i++)
        if (values[i] < 0 || (values[i] == values[i] && !plot_finite(values[i])))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                              "bar chart %s: value %d (%s) must be finite and >= 0 (NaN draws as n/a)", path, i,
                              labels[i] ? labels[i] : "");
    lab = (const char **)nncl__calloc((size_t)(n ? n : 1), sizeof *lab);
    if (!lab) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "bar chart %s: out of memory", path);
    for (i = 0; i < n; i++) lab[i] = labels[i] ? labels[i] : "";
    s = nncl__afile_open(&af, path, "bar chart SVG");
    if (s == NNCL_OK) {
        plot_bars_svg(af.f, title ? title : "", unit ? unit : "", panels, headings, counts, lab, values);
        s = nncl__afile_commit(&af, "bar chart SVG");
    }
    NNCL_FREE(lab);
    return s;
}

nncl_status nncl_svg_bar_chart(const char *path, const char *title, const char *unit, const char *const *labels,
                               const double *values, int n) {
    if (n < 0) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_svg_bar_chart: bad argument (n %d)", n);
    return nncl_svg_bar_panels(path, title, unit, 1, NULL, &n, labels, values);
}

#undef PLOT_FONT
#undef PLOT_TRAIN
#undef PLOT_VAL
#undef PLOT_BAR
#undef PLOT_GRID
#undef PLOT_AXIS
#undef PLOT_TEXT
#undef PLOT_CLAMP
#undef PLOT_LABEL_MAX
