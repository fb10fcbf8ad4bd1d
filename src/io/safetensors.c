/* safetensors.c - reading safetensors files of named tensors and the
 * queries on them. The reader treats every file as hostile: a bounded
 * header read by a strict JSON parser (safetensors_json.c), every offset,
 * size and name checked with overflow-safe arithmetic before use, elements
 * converted to float (safetensors_dtype.c). Writing: safetensors_write.c. */
#include "io/safetensors.h"
#include <errno.h>
#if !defined(_WIN32)
#include <sys/stat.h>
#endif

/* ------------------------------------------------------------ errors */

nncl_status nncl__st_fail(const char *source, nncl_status status, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nncl__fail(NULL, status, "safetensors %s: %s", source, msg);
}
/* ------------------------------------------------------------ header */

/* Bytes per element of a dtype the format defines; sets *supported when
 * nncl can turn it into float. 0 for a name the format does not know. */
static int sft_dtype_size(const char *dtype, int *supported) {
    static const char *const names[] = {"F32", "F16", "BF16", "F64", "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3",
                                        "I16", "U16", "I32", "U32", "I64", "U64"};
    static const int sizes[] = {4, 2, 2, 8, 1, 1, 1, 1, 1, 2, 2, 4, 4, 8, 8};
    int i;
    for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
        if (!strcmp(dtype, names[i])) {
            *supported = i < 4 || names[i][0] == 'I' || names[i][0] == 'U' || names[i][0] == 'B'; /* not F8 */
            return sizes[i];
        }
    *supported = 0;
    return 0;
}

static void sft_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t len;
    int i;
    snprintf(buf, size, "[");
    for (i = 0; i < ndim; i++) {
        len = strlen(buf);
        snprintf(buf + len, size - len, "%s%lld", i ? "," : "", (long long)shape[i]);
    }
    len = strlen(buf);
    snprintf(buf + len, size - len, "]");
}

static nncl_status sft_parse_meta(nncl_safetensors *st, nncl__st_json *j) {
    NNCL_TRY(nncl__st_json_expect(j, '{'));
    if (nncl__st_json_peek(j) == '}') {
        j->pos++;
        return NNCL_OK;
    }
    for (;;) {
        nncl__st_meta *m;
        if (nncl__grow_int((void **)&st->meta, &st->cap_meta, st->n_meta + 1, sizeof *st->meta, 16))
            return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for metadata");
        m = &st->meta[st->n_meta];
        NNCL_TRY(nncl__st_json_string(j, &m->key, NULL));
        st->n_meta++; /* owns key from here on, freed with st */
        NNCL_TRY(nncl__st_json_expect(j, ':'));
        if (nncl__st_json_peek(j) != '"')
            return nncl__st_json_fail(j, "__metadata__ value of \"%.200s\" is not a string", m->key);
        NNCL_TRY(nncl__st_json_string(j, &m->value, NULL));
        if (nncl__st_json_peek(j) == ',') {
            j->pos++;
            continue;
        }
        return nncl__st_json_expect(j, '}');
    }
}

/* One tensor's entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]},
 * other fields skipped; checked against the data region's length. */
static nncl_status sft_parse_tensor(nncl_safetensors *st, nncl__st_json *j, char *name, size_t name_len,
                                    uint64_t data_len) {
    nncl__st_tensor *t;
    int have_dtype = 0, have_shape = 0, have_offsets = 0, supported, i;
    uint64_t numel = 1, bytes;
    char *field = NULL, what_shape[256], what_offsets[256];
    if (name_len > NNCL_ST_MAX_NAME) {
        NNCL_FREE(name);
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "a tensor name is %zu bytes long, more than %d", name_len,
                             NNCL_ST_MAX_NAME);
    }
    if (nncl__grow_int((void **)&st->t, &st->cap, st->count + 1, sizeof *st->t, 16)) {
        NNCL_FREE(name);
        return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %d tensors", st->count + 1);
    }
    t = &st->t[st->count++];
    t->name = name; /* owned by st from here on */
    snprintf(what_shape, sizeof what_shape, "tensor '%.200s' shape", name);
    snprintf(what_offsets, sizeof what_offsets, "tensor '%.200s' data_offsets", name);
    NNCL_TRY(nncl__st_json_expect(j, '{'));
    if (nncl__st_json_peek(j) != '}') {
        for (;;) {
            nncl_status s = nncl__st_json_string(j, &field, NULL);
            if (s != NNCL_OK) return s;
            s = nncl__st_json_expect(j, ':');
            if (s == NNCL_OK && !strcmp(field, "dtype")) {
                char *dt = NULL;
                size_t dl = 0;
                if (have_dtype) s = nncl__st_json_fail(j, "tensor '%.200s': dtype given twice", name);
                if (s == NNCL_OK && nncl__st_json_peek(j) != '"')
                    s = nncl__st_json_fail(j, "tensor '%.200s': dtype is not a string", name);
                if (s == NNCL_OK) s = nncl__st_json_string(j, &dt, &dl);
                if (s == NNCL_OK && dl >= sizeof t->dtype)
                    s = nncl__st_json_fail(j, "tensor '%.200s': unknown dtype \"%.40s\"", name, dt);
                if (s == NNCL_OK) memcpy(t->dtype, dt, dl + 1);
                NNCL_FREE(dt);
                have_dtype = 1;
            } else if (s == NNCL_OK && !strcmp(field, "shape")) {
                if (have_shape) s = nncl__st_json_fail(j, "tensor '%.200s': shape given twice", name);
                if (s == NNCL_OK) s = nncl__st_json_expect(j, '[');
                if (s == NNCL_OK && nncl__st_json_peek(j) == ']') {
                    j->pos++;
                } else {
                    while (s == NNCL_OK) {
                        uint64_t d;
                        if (t->ndim == NNCL_ST_MAX_DIMS) {
                            s = nncl__st_json_fail(j, "tensor '%.200s' has more than %d dimensions", name,
                                                   NNCL_ST_MAX_DIMS);
                            break;
                        }
                        s = nncl__st_json_uint(j, what_shape, &d);
                        if (s == NNCL_OK && d > (uint64_t)INT64_MAX)
                            s = nncl__st_json_fail(j, "tensor '%.200s': dimension %d too large", name, t->ndim);
                        if (s != NNCL_OK) break;
                        t->shape[t->ndim++] = (int64_t)d;
                        if (nncl__st_json_peek(j) == ',') {
                            j->pos++;
                            continue;
                        }
                        s = nncl__st_json_expect(j, ']');
                        break;
                    }
                }
                have_shape = 1;
            } else if (s == NNCL_OK && !strcmp(field, "data_offsets")) {
                if (have_offsets) s = nncl__st_json_fail(j, "tensor '%.200s': data_offsets given twice", name);
                if (s == NNCL_OK) s = nncl__st_json_expect(j, '[');
                if (s == NNCL_OK) s = nncl__st_json_uint(j, what_offsets, &t->begin);
                if (s == NNCL_OK) s = nncl__st_json_expect(j, ',');
                if (s == NNCL_OK) s = nncl__st_json_uint(j, what_offsets, &t->end);
                if (s == NNCL_OK && nncl__st_json_peek(j) != ']')
                    s = nncl__st_json_fail(j, "tensor '%.200s': data_offsets must hold exactly two integers", name);
                if (s == NNCL_OK) j->pos++;
                have_offsets = 1;
            } else if (s == NNCL_OK) {
                s = nncl__st_json_skip(j, 1);
            }
            NNCL_FREE(field);
            field = NULL;
            if (s != NNCL_OK) return s;
            if (nncl__st_json_peek(j) == ',') {
                j->pos++;
                continue;
            }
            NNCL_TRY(nncl__st_json_expect(j, '}'));
            break;
        }
    } else {
        j->pos++;
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s' lacks %s", name,
                             !have_dtype   ? "dtype"
                             : !have_shape ? "shape"
                                           : "data_offsets");
    t->dsize = sft_dtype_size(t->dtype, &supported);
    if (!t->dsize)
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s' has unknown dtype \"%s\"", name, t->dtype);
    if (!supported)
        return nncl__st_fail(st->source, NNCL_ERR_UNSUPPORTED,
                             "tensor '%.200s' has dtype %s; nncl reads F32, F16, BF16, F64, integers and BOOL", name,
                             t->dtype);
    for (i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d && numel > UINT64_MAX / d) {
            char sh[256];
            sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
            return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s': element count of shape %s overflows",
                                 name, sh);
        }
        numel *= d;
    }
    if (numel > UINT64_MAX / (uint64_t)t->dsize || numel > (uint64_t)(SIZE_MAX / 4)) {
        char sh[256];
        sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s': byte size of shape %s overflows", name, sh);
    }
    bytes = numel * (uint64_t)t->dsize;
    t->numel = (size_t)numel;
    if (t->end < t->begin)
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                             "tensor '%.200s': data_offsets [%llu,%llu] end before they begin", name,
                             (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_len)
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                             "tensor '%.200s': data_offsets [%llu,%llu] out of range: the data region holds %llu bytes",
                             name, (unsigned long long)t->begin, (unsigned long long)t->end,
                             (unsigned long long)data_len);
    if (t->end - t->begin != bytes) {
        char sh[256];
        sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
        return nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                             "tensor '%.200s': data_offsets [%llu,%llu] span %llu bytes, but %s shape %s needs %llu",
                             name, (unsigned long long)t->begin, (unsigned long long)t->end,
                             (unsigned long long)(t->end - t->begin), t->dtype, sh, (unsigned long long)bytes);
    }
    return NNCL_OK;
}

static int sft_cmp_name(const void *a, const void *b) {
    return strcmp((*(const nncl__st_tensor *const *)a)->name, (*(const nncl__st_tensor *const *)b)->name);
}

static int sft_cmp_offset(const void *a, const void *b) {
    const nncl__st_tensor *x = *(const nncl__st_tensor *const *)a, *y = *(const nncl__st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int sft_cmp_meta(const void *a, const void *b) {
    return strcmp(((const nncl__st_meta *)a)->key, ((const nncl__st_meta *)b)->key);
}

/* Names and metadata keys unique; tensors cover the data region exactly,
 * with neither gap nor overlap, in whatever order the header lists them. */
static nncl_status sft_check_layout(nncl_safetensors *st, uint64_t data_len) {
    const nncl__st_tensor **by_off;
    uint64_t at = 0;
    int i;
    nncl_status s = NNCL_OK;
    if (st->n_meta > 1) {
        qsort(st->meta, (size_t)st->n_meta, sizeof *st->meta, sft_cmp_meta);
        for (i = 1; i < st->n_meta; i++)
            if (!strcmp(st->meta[i - 1].key, st->meta[i].key))
                return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "__metadata__ key \"%.200s\" appears twice",
                                     st->meta[i].key);
    }
    if (!st->count) {
        if (data_len)
            return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "%llu data bytes but no tensor",
                                 (unsigned long long)data_len);
        return NNCL_OK;
    }
    st->by_name = (const nncl__st_tensor **)nncl__calloc((size_t)st->count, sizeof *st->by_name);
    by_off = (const nncl__st_tensor **)nncl__calloc((size_t)st->count, sizeof *by_off);
    if (!st->by_name || !by_off) {
        NNCL_FREE(by_off);
        return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %d tensors", st->count);
    }
    for (i = 0; i < st->count; i++) st->by_name[i] = by_off[i] = &st->t[i];
    qsort(st->by_name, (size_t)st->count, sizeof *st->by_name, sft_cmp_name);
    for (i = 1; i < st->count && s == NNCL_OK; i++)
        if (!strcmp(st->by_name[i - 1]->name, st->by_name[i]->name))
            s = nncl__st_fail(st->source, NNCL_ERR_FORMAT, "tensor name '%.200s' appears twice", st->by_name[i]->name);
    qsort(by_off, (size_t)st->count, sizeof *by_off, sft_cmp_offset);
    for (i = 0; i < st->count && s == NNCL_OK; i++) {
        const nncl__st_tensor *t = by_off[i];
        if (t->begin > at)
            s = nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                              "data bytes [%llu,%llu] belong to no tensor (gap before tensor '%.200s')",
                              (unsigned long long)at, (unsigned long long)t->begin, t->name);
        else if (t->begin < at)
            s = nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                              "tensor '%.200s' [%llu,%llu] overlaps tensor '%.200s' [%llu,%llu]", t->name,
                              (unsigned long long)t->begin, (unsigned long long)t->end, by_off[i - 1]->name,
                              (unsigned long long)by_off[i - 1]->begin, (unsigned long long)by_off[i - 1]->end);
        at = t->end;
    }
    if (s == NNCL_OK && at != data_len)
        s = nncl__st_fail(st->source, NNCL_ERR_FORMAT,
                          "data bytes [%llu,%llu] after the last tensor belong to no tensor", (unsigned long long)at,
                          (unsigned long long)data_len);
    NNCL_FREE(by_off);
    return s;
}

/* The JSON header (n bytes) of a file whose data region holds data_len. */
static nncl_status sft_parse_header(nncl_safetensors *st, const unsigned char *json, size_t n, uint64_t data_len) {
    nncl__st_json j;
    int have_meta = 0;
    j.s = json;
    j.n = n;
    j.pos = 0;
    j.src = st->source;
    if (n == 0 || json[0] != '{') return nncl__st_json_fail(&j, "the header does not start with '{'");
    j.pos = 1;
    if (nncl__st_json_peek(&j) == '}') {
        j.pos++;
    } else {
        for (;;) {
            char *key = NULL;
            size_t key_len = 0;
            NNCL_TRY(nncl__st_json_string(&j, &key, &key_len));
            if (nncl__st_json_expect(&j, ':') != NNCL_OK) {
                NNCL_FREE(key);
                return NNCL_ERR_FORMAT;
            }
            if (!strcmp(key, "__metadata__")) {
                NNCL_FREE(key);
                if (have_meta) return nncl__st_json_fail(&j, "__metadata__ appears twice");
                have_meta = 1;
                NNCL_TRY(sft_parse_meta(st, &j));
            } else {
                NNCL_TRY(sft_parse_tensor(st, &j, key, key_len, data_len));
            }
            if (nncl__st_json_peek(&j) == ',') {
                j.pos++;
                continue;
            }
            NNCL_TRY(nncl__st_json_expect(&j, '}'));
            break;
        }
    }
    /* Writers pad the header with spaces to align the data. */
    if (nncl__st_json_peek(&j) >= 0) return nncl__st_json_fail(&j, "bytes after the closing '}'");
    return sft_check_layout(st, data_len);
}

/* Checks the 8-byte length prefix against the file size; *header_len,
 * *data_len receive the sizes of the two regions. */
static nncl_status sft_check_prefix(const char *source, const unsigned char *prefix, uint64_t size,
                                   uint64_t *header_len, uint64_t *data_len) {
    uint64_t n;
    if (size < 8)
        return nncl__st_fail(source, NNCL_ERR_FORMAT, "%llu bytes, too short for the 8-byte header length",
                             (unsigned long long)size);
    n = nncl__st_get_u64(prefix);
    if (n > NNCL_ST_MAX_HEADER)
        return nncl__st_fail(source, NNCL_ERR_FORMAT, "header length %llu exceeds the limit of %d bytes",
                             (unsigned long long)n, NNCL_ST_MAX_HEADER);
    if (n > size - 8)
        return nncl__st_fail(source, NNCL_ERR_FORMAT, "truncated: header length %llu but only %llu bytes follow",
                             (unsigned long long)n, (unsigned long long)(size - 8));
    *header_len = n;
    *data_len = size - 8 - n;
    return NNCL_OK;
}

static nncl_status sft_new(const char *source, nncl_safetensors **out) {
    nncl_safetensors *st = (nncl_safetensors *)nncl__calloc(1, sizeof *st);
    if (st) st->source = nncl__strdup(source);
    if (!st || !st->source) {
        NNCL_FREE(st);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "safetensors %s: out of memory", source);
    }
    *out = st;
    return NNCL_OK;
}

static size_t sft_total_numel(const nncl_safetensors *st) {
    size_t total = 0;
    int i;
    /* Cannot overflow: every tensor's bytes lie in the data region. */
    for (i = 0; i < st->count; i++) total += st->t[i].numel;
    return total;
}

static nncl_status sft_alloc_data(nncl_safetensors *st) {
    size_t total = sft_total_numel(st), off = 0;
    int i;
    st->data = (float *)nncl__calloc(total ? total : 1, sizeof(float));
    if (!st->data)
        return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %zu floats", total);
    for (i = 0; i < st->count; i++) {
        st->t[i].data = st->data + off;
        off += st->t[i].numel;
    }
    return NNCL_OK;
}

/* ------------------------------------------------------------ public: read */

nncl_status nncl_safetensors_parse(const void *bytes, size_t size, const char *source, nncl_safetensors **out) {
    const unsigned char *b = (const unsigned char *)bytes;
    uint64_t header_len, data_len;
    nncl_safetensors *st = NULL;
    nncl_status s;
    int i;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_parse: out is NULL");
    *out = NULL;
    if (!source) source = "<memory>";
    if (!b && size) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_parse: bytes is NULL");
    NNCL_TRY(sft_check_prefix(source, b, size, &header_len, &data_len));
    NNCL_TRY(sft_new(source, &st));
    s = sft_parse_header(st, b + 8, (size_t)header_len, data_len);
    if (s == NNCL_OK) s = sft_alloc_data(st);
    if (s != NNCL_OK) {
        nncl_safetensors_free(st);
        return s;
    }
    for (i = 0; i < st->count && s == NNCL_OK; i++)
        s = nncl__st_convert(st->source, &st->t[i], b + 8 + header_len + st->t[i].begin, st->t[i].data);
    if (s != NNCL_OK) {
        nncl_safetensors_free(st);
        return s;
    }
    *out = st;
    return NNCL_OK;
}

static nncl_status sft_file_size(FILE *f, const char *path, uint64_t *size) {
#if !defined(_WIN32)
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0)
        return nncl__fail(NULL, NNCL_ERR_IO, "safetensors %s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return nncl__fail(NULL, NNCL_ERR_IO, "safetensors %s: not a regular file", path);
    *size = (uint64_t)sb.st_size;
#else
    long n;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        return nncl__fail(NULL, NNCL_ERR_IO, "safetensors %s: cannot find the file size", path);
    *size = (uint64_t)n;
#endif
    return NNCL_OK;
}

static nncl_status sft_read(FILE *f, const char *path, void *dst, size_t n, const char *what) {
    if (n && fread(dst, 1, n, f) != n) {
        if (ferror(f))
            return nncl__fail(NULL, NNCL_ERR_IO, "safetensors %s: reading %s failed: %s", path, what, strerror(errno));
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "safetensors %s: the file ended inside %s (did it shrink?)", path,
                          what);
    }
    return NNCL_OK;
}

static nncl_status sft_load_file(FILE *f, nncl_safetensors *st) {
    unsigned char prefix[8] = {0};
    uint64_t size = 0, header_len, data_len;
    unsigned char *buf = NULL;
    int i, all_f32 = 1;
    nncl_status s;
    NNCL_TRY(sft_file_size(f, st->source, &size));
    if (size < 8) return sft_check_prefix(st->source, prefix, size, &header_len, &data_len);
    NNCL_TRY(sft_read(f, st->source, prefix, 8, "the header length"));
    NNCL_TRY(sft_check_prefix(st->source, prefix, size, &header_len, &data_len));
    if (data_len > (uint64_t)SIZE_MAX)
        return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "%llu data bytes do not fit in memory",
                             (unsigned long long)data_len);
    buf = (unsigned char *)NNCL_MALLOC((size_t)header_len + 1);
    if (!buf) return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for the header");
    s = sft_read(f, st->source, buf, (size_t)header_len, "the header");
    if (s == NNCL_OK) s = sft_parse_header(st, buf, (size_t)header_len, data_len);
    NNCL_FREE(buf);
    buf = NULL;
    if (s == NNCL_OK) s = sft_alloc_data(st);
    if (s != NNCL_OK) return s;
    for (i = 0; i < st->count; i++)
        if (strcmp(st->t[i].dtype, "F32")) all_f32 = 0;
    if (all_f32) {
        /* The floats are the data region itself: read it in place, no copy.
         * Every offset is a multiple of 4 since the tensors tile the region. */
        NNCL_TRY(sft_read(f, st->source, st->data, (size_t)data_len, "the tensor data"));
        for (i = 0; i < st->count; i++) st->t[i].data = st->data + st->t[i].begin / 4;
        if (!nncl__st_host_le())
            for (i = 0; i < st->count; i++)
                nncl__st_convert(st->source, &st->t[i], (const unsigned char *)st->t[i].data, st->t[i].data);
        return NNCL_OK;
    }
    buf = (unsigned char *)NNCL_MALLOC(data_len ? (size_t)data_len : 1);
    if (!buf)
        return nncl__st_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %llu data bytes",
                             (unsigned long long)data_len);
    s = sft_read(f, st->source, buf, (size_t)data_len, "the tensor data");
    for (i = 0; i < st->count && s == NNCL_OK; i++)
        s = nncl__st_convert(st->source, &st->t[i], buf + st->t[i].begin, st->t[i].data);
    NNCL_FREE(buf);
    return s;
}

nncl_status nncl_safetensors_load(const char *path, nncl_safetensors **out) {
    nncl_safetensors *st = NULL;
    nncl_status s;
    FILE *f;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_load: out is NULL");
    *out = NULL;
    if (!path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_load: path is NULL");
    f = fopen(path, "rb");
    if (!f) return nncl__fail(NULL, NNCL_ERR_IO, "safetensors %s: cannot open: %s", path, strerror(errno));
    s = sft_new(path, &st);
    if (s == NNCL_OK) s = sft_load_file(f, st);
    fclose(f);
    if (s != NNCL_OK) {
        nncl_safetensors_free(st);
        return s;
    }
    *out = st;
    return NNCL_OK;
}

void nncl_safetensors_free(nncl_safetensors *st) {
    int i;
    if (!st) return;
    for (i = 0; i < st->count; i++) NNCL_FREE(st->t[i].name);
    for (i = 0; i < st->n_meta; i++) {
        NNCL_FREE(st->meta[i].key);
        NNCL_FREE(st->meta[i].value);
    }
    NNCL_FREE(st->t);
    NNCL_FREE(st->by_name);
    NNCL_FREE(st->meta);
    NNCL_FREE(st->data);
    NNCL_FREE(st->source);
    NNCL_FREE(st);
}

int nncl_safetensors_count(const nncl_safetensors *st) { return st ? st->count : 0; }

nncl_status nncl_safetensors_get(const nncl_safetensors *st, int i, nncl_safetensors_entry *out) {
    const nncl__st_tensor *t;
    if (!st || !out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_get: NULL argument");
    if (i < 0 || i >= st->count)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: tensor index %d out of range [0,%d)",
                          st->source, i, st->count);
    t = &st->t[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof t->shape);
    out->data = t->data;
    out->numel = t->numel;
    memcpy(out->dtype, t->dtype, sizeof t->dtype);
    return NNCL_OK;
}

int nncl_safetensors_find(const nncl_safetensors *st, const char *name) {
    nncl__st_tensor key;
    const nncl__st_tensor *kp = &key;
    const nncl__st_tensor **hit;
    if (!st || !name || !st->count) return -1;
    key.name = (char *)name;
    hit = (const nncl__st_tensor **)bsearch(&kp, st->by_name, (size_t)st->count, sizeof *st->by_name, sft_cmp_name);
    return hit ? (int)(*hit - st->t) : -1;
}

nncl_status nncl_safetensors_expect(const nncl_safetensors *st, const char *name, int ndim, const int64_t *shape,
                                    const float **data) {
    const nncl__st_tensor *t;
    int i, same;
    if (!st || !name || !data || ndim < 0 || ndim > NNCL_ST_MAX_DIMS || (ndim && !shape))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_expect: bad argument");
    *data = NULL;
    i = nncl_safetensors_find(st, name);
    if (i < 0) return nncl__st_fail(st->source, NNCL_ERR_FORMAT, "no tensor named '%.200s'", name);
    t = &st->t[i];
    same = t->ndim == ndim;
    for (i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[256], want[256];
        sft_shape_str(got, sizeof got, t->ndim, t->shape);
        sft_shape_str(want, sizeof want, ndim, shape);
        return nncl__st_fail(st->source, NNCL_ERR_SHAPE, "tensor '%.200s' has shape %s, expected %s", name, got, want);
    }
    *data = t->data;
    return NNCL_OK;
}

const char *nncl_safetensors_meta(const nncl_safetensors *st, const char *key) {
    int lo = 0, hi;
    if (!st || !key) return NULL;
    hi = st->n_meta - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(st->meta[mid].key, key);
        if (!c) return st->meta[mid].value;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

int nncl_safetensors_meta_count(const nncl_safetensors *st) { return st ? st->n_meta : 0; }

nncl_status nncl_safetensors_meta_at(const nncl_safetensors *st, int i, const char **key, const char **value) {
    if (!st || i < 0 || i >= st->n_meta)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_meta_at: index %d out of range", i);
    if (key) *key = st->meta[i].key;
    if (value) *value = st->meta[i].value;
    return NNCL_OK;
}
