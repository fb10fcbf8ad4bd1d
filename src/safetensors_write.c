/* safetensors_write.c - writing a safetensors file: the caller's tensors
 * and metadata checked, the JSON header built (data 8-byte aligned), F32
 * tensors (F16 or BF16 on request) laid out in the order given and the
 * target replaced atomically. */
#include "safetensors.h"

typedef struct stw_buf {
    char *p;
    size_t n, cap;
    int oom;
} stw_buf;

static void stw_put(stw_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->cap - b->n < n + 1) {
        size_t ncap = b->cap ? b->cap : 256;
        char *q;
        while (ncap - b->n < n + 1) {
            if (ncap > (size_t)-1 / 2) {
                b->oom = 1;
                return;
            }
            ncap *= 2;
        }
        q = (char *)NNCL_MALLOC(ncap);
        if (!q) {
            b->oom = 1;
            return;
        }
        if (b->p) memcpy(q, b->p, b->n);
        NNCL_FREE(b->p);
        b->p = q;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void stw_puts(stw_buf *b, const char *s) { stw_put(b, s, strlen(s)); }

static void stw_json(stw_buf *b, const char *s) {
    static const char hexd[] = "0123456789abcdef";
    stw_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            stw_put(b, esc, 2);
        } else if (c < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hexd[c >> 4];
            esc[5] = hexd[c & 15];
            stw_put(b, esc, 6);
        } else {
            stw_put(b, s, 1);
        }
    }
    stw_put(b, "\"", 1);
}

static void stw_u64(stw_buf *b, uint64_t v) {
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    stw_puts(b, tmp);
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

/* Checks the caller's tensors and metadata; *data_len receives the bytes of
 * the data region. */
static nncl_status stw_check_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                  const char *const *meta, uint64_t *data_len) {
    int i, k;
    uint64_t total = 0;
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
        for (k = 0; k < i; k++)
            if (!strcmp(tensors[k].name, e->name))
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor name '%.200s' given twice",
                                  path, e->name);
    }
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

static void stw_build_header(stw_buf *b, const nncl_safetensors_entry *tensors, int count, const char *const *meta) {
    int i, k, own_format = 0;
    uint64_t at = 0;
    for (i = 0; meta && meta[i]; i += 2)
        if (!strcmp(meta[i], "format")) own_format = 1;
    stw_puts(b, "{\"__metadata__\":{");
    if (!own_format) stw_puts(b, "\"format\":\"pt\"");
    for (i = 0; meta && meta[i]; i += 2) {
        if (i || !own_format) stw_puts(b, ",");
        stw_json(b, meta[i]);
        stw_puts(b, ":");
        stw_json(b, meta[i + 1]);
    }
    stw_puts(b, "}");
    for (i = 0; i < count; i++) {
        const nncl_safetensors_entry *e = &tensors[i];
        uint64_t numel = 1;
        stw_puts(b, ",");
        stw_json(b, e->name);
        stw_puts(b, ":{\"dtype\":\"");
        stw_puts(b, stw_size(e) == 2 ? e->dtype : "F32");
        stw_puts(b, "\",\"shape\":[");
        for (k = 0; k < e->ndim; k++) {
            if (k) stw_puts(b, ",");
            stw_u64(b, (uint64_t)e->shape[k]);
            numel *= (uint64_t)e->shape[k];
        }
        stw_puts(b, "],\"data_offsets\":[");
        stw_u64(b, at);
        stw_puts(b, ",");
        at += numel * stw_size(e);
        stw_u64(b, at);
        stw_puts(b, "]}");
    }
    stw_puts(b, "}");
    /* Pad with spaces so that the data starts 8-byte aligned. */
    while (!b->oom && b->n % 8) stw_put(b, " ", 1);
}

nncl_status nncl_safetensors_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                  const char *const *meta) {
    stw_buf b;
    nncl__afile af;
    unsigned char prefix[8];
    uint64_t data_len;
    int i, k;
    if (!path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_save: path is NULL");
    NNCL_TRY(stw_check_save(path, tensors, count, meta, &data_len));
    memset(&b, 0, sizeof b);
    stw_build_header(&b, tensors, count, meta);
    if (b.oom || b.n > NNCL_ST_MAX_HEADER) {
        NNCL_FREE(b.p);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "safetensors %s: header too large or out of memory", path);
    }
    {
        nncl_status s = nncl__afile_open(&af, path, "safetensors");
        if (s != NNCL_OK) {
            NNCL_FREE(b.p);
            return s;
        }
    }
    nncl__st_put_u64(prefix, (uint64_t)b.n);
    fwrite(prefix, 1, 8, af.f);
    fwrite(b.p, 1, b.n, af.f);
    NNCL_FREE(b.p);
    for (i = 0; i < count; i++) {
        size_t numel = 1;
        for (k = 0; k < tensors[i].ndim; k++) numel *= (size_t)tensors[i].shape[k];
        if (stw_size(&tensors[i]) == 2) stw_write_halves(af.f, tensors[i].data, numel, tensors[i].dtype[0] == 'B');
        else nncl__st_write_floats(af.f, tensors[i].data, numel);
    }
    (void)data_len;
    return nncl__afile_commit(&af, "safetensors");
}
