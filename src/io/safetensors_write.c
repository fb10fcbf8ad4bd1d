/* safetensors_write.c - writing a safetensors file: the caller's tensors
 * and metadata checked, the JSON header built (data 8-byte aligned), F32
 * tensors (F16 or BF16 on request) laid out in the order given and the
 * target replaced atomically. */
#include "io/safetensors.h"
#include "io/io.h"

/* A JSON string; the text was checked to be UTF-8 (stw_check_text). */
static void stw_json(nncl__buf *b, const char *s) {
    nncl__buf_put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') nncl__buf_put(b, "\\%c", c);
        else if (c < 0x20) nncl__buf_put(b, "\\u%04x", (unsigned)c);
        else nncl__buf_put(b, "%c", c);
    }
    nncl__buf_put(b, "\"");
}

static nncl_status stw_check_text(const char *path, const char *what, const char *s) {
    size_t n = strlen(s);
    if (nncl__st_utf8_check((const unsigned char *)s, n) != n)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: %s \"%.200s\" is not valid UTF-8", path,
                          what, s);
    return NNCL_OK;
}

/* Bytes per element the writer stores: 2 for an entry whose dtype asks for
 * "F16" or "BF16", else 4 (F32, whatever else dtype holds). */
static size_t stw_size(const nncl_safetensors_entry *e) {
    return !strncmp(e->dtype, "F16", sizeof e->dtype) || !strncmp(e->dtype, "BF16", sizeof e->dtype) ? 2 : 4;
}

static int stw_cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A tensor name given twice, found by sorting (a model of many parameters
 * is not compared pairwise); NULL when none, or memory ran out (*oom). */
static const char *stw_twice(const nncl_safetensors_entry *tensors, int count, int *oom) {
    const char **names, *twice = NULL;
    int i;
    *oom = 0;
    if (count < 2) return NULL;
    if (!(names = (const char **)nncl__calloc((size_t)count, sizeof *names))) {
        *oom = 1;
        return NULL;
    }
    for (i = 0; i < count; i++) names[i] = tensors[i].name;
    qsort(names, (size_t)count, sizeof *names, stw_cmp_name);
    for (i = 1; i < count && !twice; i++)
        if (!strcmp(names[i - 1], names[i])) twice = names[i];
    NNCL_FREE(names);
    return twice;
}

/* Checks the caller's tensors and metadata; *data_len receives the bytes of
 * the data region. */
static nncl_status stw_check_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                  const char *const *meta, uint64_t *data_len) {
    int i, k, oom;
    uint64_t total = 0;
    const char *twice;
    if (count < 0 || (count && !tensors))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: bad tensor list (count %d)", path, count);
    for (i = 0; i < count; i++) {
        const nncl_safetensors_entry *e = &tensors[i];
        size_t numel = 1, bytes;
        if (!e->name || !*e->name || strlen(e->name) > NNCL_ST_MAX_NAME || !strcmp(e->name, "__metadata__"))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                              "safetensors %s: tensor %d: name must be 1..%d bytes and not __metadata__", path, i,
                              NNCL_ST_MAX_NAME);
        NNCL_TRY(stw_check_text(path, "tensor name", e->name));
        if (e->ndim < 0 || e->ndim > NNCL_ST_MAX_DIMS)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor '%.200s': ndim %d not in 0..%d",
                              path, e->name, e->ndim, NNCL_ST_MAX_DIMS);
        for (k = 0; k < e->ndim; k++) {
            if (e->shape[k] < 0 || (uint64_t)e->shape[k] > (uint64_t)SIZE_MAX ||
                nncl__mul_overflow(numel, (size_t)e->shape[k], &numel))
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                                  "safetensors %s: tensor '%.200s': dimension %d (%lld) negative or too large", path,
                                  e->name, k, (long long)e->shape[k]);
        }
        if (nncl__mul_overflow(numel, stw_size(e), &bytes) || (uint64_t)bytes > UINT64_MAX - total)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor '%.200s' too large", path,
                              e->name);
        if (numel && !e->data)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor '%.200s': data is NULL", path,
                              e->name);
        total += bytes;
    }
    if ((twice = stw_twice(tensors, count, &oom)) != NULL)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor name '%.200s' given twice", path,
                          twice);
    if (oom) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "safetensors %s: out of host memory", path);
    for (i = 0; meta && meta[i]; i += 2) {
        if (!meta[i + 1])
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: metadata key \"%.200s\" has no value",
                              path, meta[i]);
        NNCL_TRY(stw_check_text(path, "metadata key", meta[i]));
        NNCL_TRY(stw_check_text(path, "metadata value", meta[i + 1]));
        for (k = 0; k < i; k += 2)
            if (!strcmp(meta[k], meta[i]))
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                                  "safetensors %s: metadata key \"%.200s\" given twice", path, meta[i]);
    }
    *data_len = total;
    return NNCL_OK;
}

/* F16 and BF16 elements of a tensor, converted from its floats (round to
 * nearest even), little-endian. */
static void stw_write_halves(FILE *f, const float *x, size_t n, int bf16) {
    unsigned char chunk[4096];
    size_t i, k;
    for (i = 0; i < n; i += k) {
        for (k = 0; k < sizeof chunk / 2 && i + k < n; k++) {
            unsigned h = bf16 ? nncl__f32_to_bf16(x[i + k]) : nncl__f32_to_f16(x[i + k]);
            chunk[2 * k] = (unsigned char)h;
            chunk[2 * k + 1] = (unsigned char)(h >> 8);
        }
        fwrite(chunk, 2, k, f);
    }
}

static void stw_build_header(nncl__buf *b, const nncl_safetensors_entry *tensors, int count, const char *const *meta) {
    int i, k, own_format = 0;
    uint64_t at = 0;
    for (i = 0; meta && meta[i]; i += 2)
        if (!strcmp(meta[i], "format")) own_format = 1;
    nncl__buf_put(b, "{\"__metadata__\":{");
    if (!own_format) nncl__buf_put(b, "\"format\":\"pt\"");
    for (i = 0; meta && meta[i]; i += 2) {
        nncl__buf_put(b, "%s", i || !own_format ? "," : "");
        stw_json(b, meta[i]);
        nncl__buf_put(b, ":");
        stw_json(b, meta[i + 1]);
    }
    nncl__buf_put(b, "}");
    for (i = 0; i < count; i++) {
        const nncl_safetensors_entry *e = &tensors[i];
        uint64_t numel = 1;
        nncl__buf_put(b, ",");
        stw_json(b, e->name);
        nncl__buf_put(b, ":{\"dtype\":\"%s\",\"shape\":[", stw_size(e) == 2 ? e->dtype : "F32");
        for (k = 0; k < e->ndim; k++) {
            nncl__buf_put(b, "%s%llu", k ? "," : "", (unsigned long long)e->shape[k]);
            numel *= (uint64_t)e->shape[k];
        }
        nncl__buf_put(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                      (unsigned long long)(at + numel * stw_size(e)));
        at += numel * stw_size(e);
    }
    nncl__buf_put(b, "}");
    /* Pad with spaces so that the data starts 8-byte aligned. */
    while (!b->failed && b->n % 8) nncl__buf_put(b, " ");
}

nncl_status nncl_safetensors_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                  const char *const *meta) {
    nncl__buf b;
    nncl__afile af;
    unsigned char prefix[8];
    uint64_t data_len;
    int i, k;
    if (!path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_save: path is NULL");
    NNCL_TRY(stw_check_save(path, tensors, count, meta, &data_len));
    memset(&b, 0, sizeof b);
    stw_build_header(&b, tensors, count, meta);
    if (b.failed || b.n > NNCL_ST_MAX_HEADER) {
        NNCL_FREE(b.s);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "safetensors %s: header too large or out of memory", path);
    }
    {
        nncl_status s = nncl__afile_open(&af, path, "safetensors");
        if (s != NNCL_OK) {
            NNCL_FREE(b.s);
            return s;
        }
    }
    nncl__st_put_u64(prefix, (uint64_t)b.n);
    fwrite(prefix, 1, 8, af.f);
    fwrite(b.s, 1, b.n, af.f);
    NNCL_FREE(b.s);
    for (i = 0; i < count; i++) {
        size_t numel = 1;
        for (k = 0; k < tensors[i].ndim; k++) numel *= (size_t)tensors[i].shape[k];
        if (stw_size(&tensors[i]) == 2) stw_write_halves(af.f, tensors[i].data, numel, tensors[i].dtype[0] == 'B');
        else nncl__st_write_floats(af.f, tensors[i].data, numel);
    }
    (void)data_len;
    return nncl__afile_commit(&af, "safetensors");
}
