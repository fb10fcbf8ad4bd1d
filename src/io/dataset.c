/* dataset.c - the in-memory dataset: features [n, d] with a sample shape,
 * float labels, class names; built from arrays, IDX pairs or CSV tables;
 * seeded permutation (own generator, the same on every platform), shuffle,
 * subset and split, per-feature statistics and standardisation. */
#include "runtime/internal.h"
#include <float.h>
#include <math.h>

/* Largest class index stored exactly in a float label. */
#define DS_MAX_CLASSES (1 << 24)

struct nncl_dataset {
    size_t n, d;
    int ndim;
    int shape[3];
    float *x, *y;
    int n_classes;
    char **class_names; /* n_classes entries, or NULL */
};

void nncl_dataset_free(nncl_dataset *ds) {
    int k;
    if (!ds) return;
    if (ds->class_names)
        for (k = 0; k < ds->n_classes; k++) NNCL_FREE(ds->class_names[k]);
    NNCL_FREE(ds->class_names);
    NNCL_FREE(ds->x);
    NNCL_FREE(ds->y);
    NNCL_FREE(ds);
}

/* A dataset with room for n samples of the given shape, arrays uninitialised. */
static nncl_status ds_alloc(size_t n, int ndim, const int *shape, int n_classes, nncl_dataset **out) {
    nncl_dataset *ds;
    size_t d = 1, nd;
    int k;
    *out = NULL;
    if (n == 0) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: no samples (n is 0)");
    if (ndim < 1 || ndim > 3 || !shape)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: sample shape needs 1 to 3 dimensions, got %d",
                          ndim);
    for (k = 0; k < ndim; k++) {
        if (shape[k] < 1)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: sample shape[%d] is %d", k, shape[k]);
        if (nncl__mul_overflow(d, (size_t)shape[k], &d))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: sample shape overflows");
    }
    if (n_classes < 0 || n_classes > DS_MAX_CLASSES)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: n_classes %d not in 0..%d", n_classes,
                          DS_MAX_CLASSES);
    if (nncl__mul_overflow(n, d, &nd))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset: %zu samples of %zu features overflow", n, d);
    ds = (nncl_dataset *)nncl__calloc(1, sizeof *ds);
    if (!ds) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset: out of memory");
    ds->n = n;
    ds->d = d;
    ds->ndim = ndim;
    for (k = 0; k < ndim; k++) ds->shape[k] = shape[k];
    ds->n_classes = n_classes;
    ds->x = (float *)nncl__calloc(nd, sizeof(float));
    ds->y = (float *)nncl__calloc(n, sizeof(float));
    if (!ds->x || !ds->y) {
        nncl_dataset_free(ds);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset: cannot allocate %zu x %zu floats", n, d);
    }
    *out = ds;
    return NNCL_OK;
}

static nncl_status ds_check_values(const nncl_dataset *ds, const char *source) {
    size_t i, nd = ds->n * ds->d;
    for (i = 0; i < nd; i++)
        if (!isfinite(ds->x[i]))
            return nncl__fail(NULL, NNCL_ERR_NUMERIC, "%s: feature %zu of sample %zu is %g", source, i % ds->d,
                              i / ds->d, (double)ds->x[i]);
    for (i = 0; i < ds->n; i++) {
        float v = ds->y[i];
        if (!isfinite(v))
            return nncl__fail(NULL, NNCL_ERR_NUMERIC, "%s: label of sample %zu is %g", source, i, (double)v);
        if (ds->n_classes > 0 && (v < 0 || v >= (float)ds->n_classes || v != floorf(v)))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: label of sample %zu is %g, not a class in 0..%d",
                              source, i, (double)v, ds->n_classes - 1);
    }
    return NNCL_OK;
}

/* Hands a filled dataset to *out once its values pass, else frees it. */
static nncl_status ds_finish(nncl_dataset *ds, const char *source, nncl_dataset **out) {
    nncl_status st = ds_check_values(ds, source);
    if (st != NNCL_OK) {
        nncl_dataset_free(ds);
        return st;
    }
    *out = ds;
    return NNCL_OK;
}

nncl_status nncl_dataset_create(size_t n, int ndim, const int *sample_shape, const float *x, const float *y,
                                int n_classes, nncl_dataset **out) {
    nncl_dataset *ds;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_create: out is NULL");
    *out = NULL;
    if (!x) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_create: x is NULL");
    NNCL_TRY(ds_alloc(n, ndim, sample_shape, n_classes, &ds));
    memcpy(ds->x, x, n * ds->d * sizeof(float));
    if (y) memcpy(ds->y, y, n * sizeof(float));
    return ds_finish(ds, "nncl_dataset_create", out);
}

/* With steal set, the arrays of images and labels are taken over instead of
 * copied (and scaled in place), which halves the peak memory of a load. */
static nncl_status ds_from_idx(nncl_idx *images, nncl_idx *labels, int steal, nncl_dataset **out) {
    int shape[3], ndim, k, n_classes = 0;
    size_t n, i;
    double max_label = -1;
    nncl_dataset *ds;
    nncl_status st;
    if (!images || !labels || !images->data || !labels->data)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_from_idx: images or labels missing");
    n = images->dims[0];
    if (labels->ndim != 1)
        return nncl__fail(NULL, NNCL_ERR_SHAPE, "nncl_dataset_from_idx: labels have %d dimensions, 1 expected",
                          labels->ndim);
    if ((size_t)labels->dims[0] != n)
        return nncl__fail(NULL, NNCL_ERR_SHAPE, "nncl_dataset_from_idx: %zu images but %lu labels", n,
                          (unsigned long)labels->dims[0]);
    if (images->ndim > 4)
        return nncl__fail(NULL, NNCL_ERR_UNSUPPORTED,
                          "nncl_dataset_from_idx: images have %d dimensions, at most 4 ([n, c, h, w]) supported",
                          images->ndim);
    for (k = 1; k < images->ndim; k++)
        if (images->dims[k] > 0x7fffffffu)
            return nncl__fail(NULL, NNCL_ERR_UNSUPPORTED, "nncl_dataset_from_idx: image dimension %d is %lu", k,
                              (unsigned long)images->dims[k]);
    if (images->ndim == 1) {
        ndim = 1;
        shape[0] = 1;
    } else if (images->ndim == 3) {
        ndim = 3;
        shape[0] = 1;
        shape[1] = (int)images->dims[1];
        shape[2] = (int)images->dims[2];
    } else {
        ndim = images->ndim - 1;
        for (k = 0; k < ndim; k++) shape[k] = (int)images->dims[k + 1];
    }
    for (i = 0; i < n; i++) {
        float v = labels->data[i];
        if (!(v >= 0 && v < (float)DS_MAX_CLASSES) || v != floorf(v))
            return nncl__fail(NULL, NNCL_ERR_FORMAT, "nncl_dataset_from_idx: label %zu is %g, not a class index", i,
                              (double)v);
        if (v > max_label) max_label = v;
    }
    n_classes = (int)max_label + 1;
    if (!steal) {
        st = ds_alloc(n, ndim, shape, n_classes, &ds);
        if (st != NNCL_OK) return st;
        memcpy(ds->x, images->data, n * ds->d * sizeof(float));
        memcpy(ds->y, labels->data, n * sizeof(float));
    } else {
        /* a zero-size ds_alloc just for the checks would allocate n*d again */
        ds = (nncl_dataset *)nncl__calloc(1, sizeof *ds);
        if (!ds) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset: out of memory");
        if (n == 0) {
            NNCL_FREE(ds);
            return nncl__fail(NULL, NNCL_ERR_FORMAT, "nncl_dataset_from_idx: no samples");
        }
        ds->n = n;
        ds->d = images->count / n;
        ds->ndim = ndim;
        for (k = 0; k < ndim; k++) ds->shape[k] = shape[k];
        ds->n_classes = n_classes;
        ds->x = images->data;
        ds->y = labels->data;
        images->data = NULL;
        labels->data = NULL;
    }
    if (ds->d == 0) {
        nncl_dataset_free(ds);
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "nncl_dataset_from_idx: images have no pixels");
    }
    if (images->type == NNCL_IDX_U8) {
        size_t nd = n * ds->d;
        for (i = 0; i < nd; i++) ds->x[i] *= 1.0f / 255.0f;
    }
    return ds_finish(ds, "nncl_dataset_from_idx", out);
}

nncl_status nncl_dataset_from_idx(const nncl_idx *images, const nncl_idx *labels, nncl_dataset **out) {
    nncl_idx im, lb;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_from_idx: out is NULL");
    *out = NULL;
    if (!images || !labels)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_from_idx: images or labels is NULL");
    /* shallow copies: with steal 0 nothing is modified */
    im = *images;
    lb = *labels;
    return ds_from_idx(&im, &lb, 0, out);
}

nncl_status nncl_dataset_load_idx(const char *images_path, const char *labels_path, nncl_dataset **out) {
    nncl_idx im, lb;
    nncl_status st;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_load_idx: out is NULL");
    *out = NULL;
    NNCL_TRY(nncl_idx_load(labels_path, &lb));
    st = nncl_idx_load(images_path, &im);
    if (st != NNCL_OK) {
        nncl_idx_free(&lb);
        return st;
    }
    st = ds_from_idx(&im, &lb, 1, out);
    if (st != NNCL_OK) {
        /* name the files: the message of ds_from_idx names only the call */
        char msg[NNCL_MSG_MAX / 2];
        strncpy(msg, nncl_last_error(NULL), sizeof msg - 1);
        msg[sizeof msg - 1] = '\0';
        nncl__fail(NULL, st, "%s with %s: %s", images_path, labels_path, msg);
    }
    nncl_idx_free(&im);
    nncl_idx_free(&lb);
    return st;
}

nncl_status nncl_dataset_from_csv(const nncl_csv *table, nncl_dataset **out) {
    nncl_dataset *ds;
    int shape, k;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_from_csv: out is NULL");
    *out = NULL;
    if (!table || !table->features || !table->labels)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_from_csv: empty table");
    if (table->cols > 0x7fffffff)
        return nncl__fail(NULL, NNCL_ERR_UNSUPPORTED, "nncl_dataset_from_csv: %zu columns", table->cols);
    shape = (int)table->cols;
    NNCL_TRY(ds_alloc(table->rows, 1, &shape, table->n_classes, &ds));
    memcpy(ds->x, table->features, table->rows * table->cols * sizeof(float));
    memcpy(ds->y, table->labels, table->rows * sizeof(float));
    if (table->class_names && table->n_classes > 0) {
        ds->class_names = (char **)nncl__calloc((size_t)table->n_classes, sizeof(char *));
        if (!ds->class_names) {
            nncl_dataset_free(ds);
            return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_from_csv: out of memory");
        }
        for (k = 0; k < table->n_classes; k++) {
            ds->class_names[k] = nncl__strdup(table->class_names[k] ? table->class_names[k] : "");
            if (!ds->class_names[k]) {
                nncl_dataset_free(ds);
                return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_from_csv: out of memory");
            }
        }
    }
    return ds_finish(ds, "nncl_dataset_from_csv", out);
}

nncl_status nncl_dataset_load_csv(const char *path, const nncl_csv_options *opt, nncl_dataset **out) {
    nncl_csv t;
    nncl_status st;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_load_csv: out is NULL");
    *out = NULL;
    NNCL_TRY(nncl_csv_load(path, opt, &t));
    st = nncl_dataset_from_csv(&t, out);
    nncl_csv_free(&t);
    return st;
}

size_t nncl_dataset_size(const nncl_dataset *ds) { return ds ? ds->n : 0; }
size_t nncl_dataset_features(const nncl_dataset *ds) { return ds ? ds->d : 0; }
int nncl_dataset_classes(const nncl_dataset *ds) { return ds ? ds->n_classes : 0; }
const float *nncl_dataset_x(const nncl_dataset *ds) { return ds ? ds->x : NULL; }
const float *nncl_dataset_y(const nncl_dataset *ds) { return ds ? ds->y : NULL; }

int nncl_dataset_shape(const nncl_dataset *ds, int *shape) {
    int k;
    if (!ds) return 0;
    if (shape)
        for (k = 0; k < ds->ndim; k++) shape[k] = ds->shape[k];
    return ds->ndim;
}

const char *nncl_dataset_class_name(const nncl_dataset *ds, int k) {
    if (!ds || !ds->class_names || k < 0 || k >= ds->n_classes) return NULL;
    return ds->class_names[k];
}

nncl_status nncl_dataset_batch(const nncl_dataset *ds, size_t start, size_t count, const float **x,
                               const float **y) {
    if (!ds || !x) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_batch: ds or x is NULL");
    if (start > ds->n || count > ds->n - start)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_dataset_batch: samples %zu..%zu+%zu beyond the %zu samples", start, start, count,
                          ds->n);
    *x = ds->x + start * ds->d;
    if (y) *y = ds->y + start;
    return NNCL_OK;
}

nncl_status nncl_dataset_gather(const nncl_dataset *ds, const size_t *idx, size_t count, float *x, float *y) {
    size_t i;
    if (!ds || (!idx && count) || (!x && count))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_gather: NULL argument");
    for (i = 0; i < count; i++)
        if (idx[i] >= ds->n)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_gather: idx[%zu] is %zu, n is %zu", i,
                              idx[i], ds->n);
    for (i = 0; i < count; i++) {
        memcpy(x + i * ds->d, ds->x + idx[i] * ds->d, ds->d * sizeof(float));
        if (y) y[i] = ds->y[idx[i]];
    }
    return NNCL_OK;
}

/* splitmix64 (Steele, Lea, Flood 2014): 64-bit state, integer arithmetic
 * only, so a seed gives the same stream everywhere. */
static uint64_t ds_rand_next(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias (rejects the short last span). */
static uint64_t ds_rand_below(uint64_t *s, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound, r;
    do r = ds_rand_next(s);
    while (r < threshold);
    return r % bound;
}

nncl_status nncl_dataset_permutation(size_t n, uint64_t seed, size_t *perm) {
    size_t i;
    uint64_t s = seed;
    if (!perm && n) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_permutation: perm is NULL");
    for (i = 0; i < n; i++) perm[i] = i;
    for (i = n; i > 1; i--) {
        size_t j = (size_t)ds_rand_below(&s, (uint64_t)i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    return NNCL_OK;
}

nncl_status nncl_dataset_shuffle(nncl_dataset *ds, uint64_t seed) {
    size_t *perm;
    float *nx, *ny;
    nncl_status st;
    if (!ds) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_shuffle: ds is NULL");
    perm = (size_t *)nncl__calloc(ds->n, sizeof(size_t));
    nx = (float *)nncl__calloc(ds->n * ds->d, sizeof(float));
    ny = (float *)nncl__calloc(ds->n, sizeof(float));
    if (!perm || !nx || !ny) {
        NNCL_FREE(perm);
        NNCL_FREE(nx);
        NNCL_FREE(ny);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_shuffle: cannot allocate a copy of %zu x %zu",
                          ds->n, ds->d);
    }
    nncl_dataset_permutation(ds->n, seed, perm);
    st = nncl_dataset_gather(ds, perm, ds->n, nx, ny);
    NNCL_FREE(perm);
    if (st != NNCL_OK) {
        NNCL_FREE(nx);
        NNCL_FREE(ny);
        return st;
    }
    NNCL_FREE(ds->x);
    NNCL_FREE(ds->y);
    ds->x = nx;
    ds->y = ny;
    return NNCL_OK;
}

nncl_status nncl_dataset_subset(const nncl_dataset *ds, const size_t *idx, size_t count, nncl_dataset **out) {
    nncl_dataset *sub;
    nncl_status st;
    int k;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_subset: out is NULL");
    *out = NULL;
    if (!ds || !idx) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_subset: ds or idx is NULL");
    NNCL_TRY(ds_alloc(count, ds->ndim, ds->shape, ds->n_classes, &sub));
    st = nncl_dataset_gather(ds, idx, count, sub->x, sub->y);
    if (st == NNCL_OK && ds->class_names) {
        sub->class_names = (char **)nncl__calloc((size_t)ds->n_classes, sizeof(char *));
        if (!sub->class_names) st = nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_subset: out of memory");
        for (k = 0; st == NNCL_OK && k < ds->n_classes; k++) {
            sub->class_names[k] = nncl__strdup(ds->class_names[k]);
            if (!sub->class_names[k])
                st = nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_subset: out of memory");
        }
    }
    if (st != NNCL_OK) {
        nncl_dataset_free(sub);
        return st;
    }
    *out = sub;
    return NNCL_OK;
}

static int ds_cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

nncl_status nncl_dataset_split(const nncl_dataset *ds, double val_fraction, uint64_t seed, nncl_dataset **train,
                               nncl_dataset **val) {
    size_t *perm, n_val;
    nncl_status st;
    if (train) *train = NULL;
    if (val) *val = NULL;
    if (!train || !val)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_split: %s is NULL", train ? "val" : "train");
    if (!ds) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_split: ds is NULL");
    if (!(val_fraction > 0 && val_fraction < 1))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_split: val_fraction %g not in (0, 1)",
                          val_fraction);
    n_val = (size_t)floor(val_fraction * (double)ds->n + 0.5);
    if (n_val < 1 || n_val >= ds->n)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_dataset_split: %g of %zu samples leaves one part empty (%zu validation)", val_fraction,
                          ds->n, n_val);
    perm = (size_t *)nncl__calloc(ds->n, sizeof(size_t));
    if (!perm) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_split: out of memory");
    nncl_dataset_permutation(ds->n, seed, perm);
    /* each part keeps the original order of its samples */
    qsort(perm, n_val, sizeof(size_t), ds_cmp_size);
    qsort(perm + n_val, ds->n - n_val, sizeof(size_t), ds_cmp_size);
    st = nncl_dataset_subset(ds, perm, n_val, val);
    if (st == NNCL_OK) st = nncl_dataset_subset(ds, perm + n_val, ds->n - n_val, train);
    NNCL_FREE(perm);
    if (st != NNCL_OK) {
        nncl_dataset_free(*val);
        *val = NULL;
    }
    return st;
}

nncl_status nncl_dataset_stats(const nncl_dataset *ds, float *mean, float *std) {
    double *sum, *sq;
    size_t i, j;
    if (!ds || !mean || !std) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_stats: NULL argument");
    sum = (double *)nncl__calloc(ds->d, sizeof(double));
    sq = (double *)nncl__calloc(ds->d, sizeof(double));
    if (!sum || !sq) {
        NNCL_FREE(sum);
        NNCL_FREE(sq);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_dataset_stats: out of memory");
    }
    for (i = 0; i < ds->n; i++)
        for (j = 0; j < ds->d; j++) sum[j] += ds->x[i * ds->d + j];
    for (j = 0; j < ds->d; j++) sum[j] /= (double)ds->n;
    /* second pass around the mean: no cancellation as in E[x^2] - E[x]^2 */
    for (i = 0; i < ds->n; i++)
        for (j = 0; j < ds->d; j++) {
            double e = ds->x[i * ds->d + j] - sum[j];
            sq[j] += e * e;
        }
    for (j = 0; j < ds->d; j++) {
        double s = sqrt(sq[j] / (double)ds->n);
        if (s > FLT_MAX) s = FLT_MAX; /* rounding at the edge of float range */
        mean[j] = (float)sum[j];
        std[j] = s < 1e-7 ? 1.0f : (float)s;
    }
    NNCL_FREE(sum);
    NNCL_FREE(sq);
    return NNCL_OK;
}

nncl_status nncl_dataset_standardize(nncl_dataset *ds, const float *mean, const float *std) {
    size_t i, j;
    if (!ds || !mean || !std)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_standardize: NULL argument");
    for (j = 0; j < ds->d; j++)
        if (!(std[j] > 0) || !isfinite(std[j]) || !isfinite(mean[j]))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_dataset_standardize: feature %zu has mean %g and std %g", j, (double)mean[j],
                              (double)std[j]);
    /* every result is checked before any is written: a std so small that a
     * value overflows leaves the data as it was */
    for (i = 0; i < ds->n; i++)
        for (j = 0; j < ds->d; j++) {
            float v = (ds->x[i * ds->d + j] - mean[j]) / std[j];
            if (!isfinite(v))
                return nncl__fail(NULL, NNCL_ERR_NUMERIC,
                                  "nncl_dataset_standardize: sample %zu, feature %zu: (%g - %g) / %g is not finite; "
                                  "data unchanged", i, j, (double)ds->x[i * ds->d + j], (double)mean[j], (double)std[j]);
        }
    for (i = 0; i < ds->n; i++)
        for (j = 0; j < ds->d; j++) {
            float *v = &ds->x[i * ds->d + j];
            *v = (*v - mean[j]) / std[j];
        }
    return NNCL_OK;
}

nncl_status nncl_dataset_scale(nncl_dataset *ds, float scale, float shift) {
    size_t i, nd;
    if (!ds) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_scale: ds is NULL");
    if (!isfinite(scale) || !isfinite(shift))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_dataset_scale: scale %g, shift %g", (double)scale,
                          (double)shift);
    nd = ds->n * ds->d;
    for (i = 0; i < nd; i++) /* checked before any is written, as in standardize */
        if (!isfinite(ds->x[i] * scale + shift))
            return nncl__fail(NULL, NNCL_ERR_NUMERIC, "nncl_dataset_scale: sample %zu: %g * %g + %g is not finite; data unchanged",
                              i / (ds->d ? ds->d : 1), (double)ds->x[i], (double)scale, (double)shift);
    for (i = 0; i < nd; i++) ds->x[i] = ds->x[i] * scale + shift;
    return NNCL_OK;
}

#undef DS_MAX_CLASSES
