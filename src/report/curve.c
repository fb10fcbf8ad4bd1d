/* curve.c - the training curve: one row per epoch (losses, accuracies,
 * time, throughput) kept in memory and written as CSV. The SVG drawing of it
 * is in plot.c. */
#include "runtime/internal.h"
#include <limits.h>
#include <stdio.h>

struct nncl_curve {
    nncl_curve_row *rows;
    int count, cap;
};

nncl_status nncl_curve_create(nncl_curve **out) {
    nncl_curve *c;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_curve_create: out is NULL");
    c = (nncl_curve *)nncl__calloc(1, sizeof *c);
    *out = c;
    if (!c) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_curve_create: out of memory");
    return NNCL_OK;
}

void nncl_curve_free(nncl_curve *c) {
    if (!c) return;
    NNCL_FREE(c->rows);
    NNCL_FREE(c);
}

nncl_status nncl_curve_add(nncl_curve *c, const nncl_curve_row *row) {
    if (!c || !row) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_curve_add: NULL argument");
    if (c->count == INT_MAX || nncl__grow_int((void **)&c->rows, &c->cap, c->count + 1, sizeof *c->rows, 64))
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_curve_add: out of memory for %d rows", c->count + 1);
    c->rows[c->count++] = *row;
    return NNCL_OK;
}

int nncl_curve_count(const nncl_curve *c) { return c ? c->count : 0; }

nncl_status nncl_curve_get(const nncl_curve *c, int i, nncl_curve_row *out) {
    if (!c || !out || i < 0 || i >= c->count)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_curve_get: row %d out of range [0,%d)", i,
                          c ? c->count : 0);
    *out = c->rows[i];
    return NNCL_OK;
}

nncl_status nncl_curve_write_csv(const nncl_curve *c, const char *path) {
    nncl__afile af;
    int i, k;
    if (!c || !path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_curve_write_csv: NULL argument");
    NNCL_TRY(nncl__afile_open(&af, path, "curve CSV"));
    fputs("epoch,train_loss,train_acc,val_loss,val_acc,seconds,samples_per_s\n", af.f);
    for (i = 0; i < c->count; i++) {
        const nncl_curve_row *r = &c->rows[i];
        double v[6];
        v[0] = r->train_loss;
        v[1] = r->train_acc;
        v[2] = r->val_loss;
        v[3] = r->val_acc;
        v[4] = r->seconds;
        v[5] = r->samples_per_s;
        fprintf(af.f, "%d", r->epoch);
        for (k = 0; k < 6; k++) {
            char num[64];
            /* Enough digits to read back the float the trainer measured. */
            nncl__fmt_double(num, sizeof num, "%.9g", v[k]);
            fprintf(af.f, ",%s", num);
        }
        fputc('\n', af.f);
    }
    return nncl__afile_commit(&af, "curve CSV");
}
