/* safetensors.c - reading and writing safetensors files of named tensors.
 * The reader treats every file as hostile: a small strict JSON parser of its
 * own, bounded header, every offset, size and name checked with overflow-safe
 * arithmetic before use. The writer lays F32 tensors (F16 or BF16 on
 * request) out in the order given and replaces the target atomically. */
#include "internal.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#if !defined(_WIN32)
#include <sys/stat.h>
#endif

#define SFT_JSON_DEPTH 64 /* deepest nesting skipped inside an unknown field */

typedef struct sft_tensor {
    char *name;
    int ndim;
    int64_t shape[NNCL_ST_MAX_DIMS];
    char dtype[8];
    int dsize;             /* bytes per element in the file */
    uint64_t begin, end;   /* byte range within the data region */
    size_t numel;
    float *data;           /* into the owner's data buffer */
} sft_tensor;

typedef struct sft_meta {
    char *key;
    char *value;
} sft_meta;

struct nncl_safetensors {
    char *source;          /* file name or caller's label, for messages */
    sft_tensor *t;
    int count, cap;
    const sft_tensor **by_name; /* sorted by name, for lookup */
    sft_meta *meta;         /* sorted by key once parsed */
    int n_meta, cap_meta;
    float *data;           /* every tensor's floats */
};

/* ------------------------------------------------------------ errors */

static nncl_status sft_fail(const char *source, nncl_status status, const char *fmt, ...) NNCL_PRINTF(3, 4);
static nncl_status sft_fail(const char *source, nncl_status status, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nncl__fail(NULL, status, "safetensors %s: %s", source, msg);
}

/* ------------------------------------------------------------ bytes */

static int sft_host_le(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

static uint64_t sft_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void sft_put_u64(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Little-endian integer element i of a dtype of size bytes, signed or not,
 * as a 64-bit value (an unsigned one above INT64_MAX is marked in *huge). */
static int64_t sft_int_at(const unsigned char *src, size_t i, int size, int is_signed, int *huge) {
    uint64_t u = 0;
    int k;
    for (k = size - 1; k >= 0; k--) u = u << 8 | src[(size_t)size * i + (size_t)k];
    *huge = 0;
    if (is_signed && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~(uint64_t)0 << (8 * size); /* sign-extend */
    if (!is_signed && u > (uint64_t)INT64_MAX) {
        *huge = 1;
        return 0;
    }
    return (int64_t)u; /* two's complement: the implementation-defined conversion every target does */
}

/* Converts a tensor's little-endian bytes to float. Floating dtypes always
 * convert; integers (PyTorch stores num_batches_tracked as I64, masks as
 * BOOL) only where the float holds the value exactly: a count above 2^24
 * that float would round is refused rather than changed. */
static nncl_status sft_convert(const char *source, const sft_tensor *t, const unsigned char *src, float *dst) {
    const char *dtype = t->dtype;
    size_t i, n = t->numel;
    if (!strcmp(dtype, "F32")) {
        if (sft_host_le()) {
            if (n) memcpy(dst, src, n * 4);
        } else {
            for (i = 0; i < n; i++) {
                const unsigned char *p = src + 4 * i;
                uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(dst + i, &u, 4);
            }
        }
    } else if (!strcmp(dtype, "F16")) {
        for (i = 0; i < n; i++) dst[i] = nncl__f16_to_f32((unsigned)src[2 * i] | (unsigned)src[2 * i + 1] << 8);
    } else if (!strcmp(dtype, "BF16")) {
        for (i = 0; i < n; i++) {
            uint32_t u = ((uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8) << 16;
            memcpy(dst + i, &u, 4);
        }
    } else if (!strcmp(dtype, "F64")) {
        for (i = 0; i < n; i++) {
            uint64_t u = sft_get_u64(src + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            /* Out-of-range double to float conversion is undefined in C. */
            if (d > 3.4028234663852886e38) dst[i] = (float)HUGE_VAL;
            else if (d < -3.4028234663852886e38) dst[i] = -(float)HUGE_VAL;
            else dst[i] = (float)d;
        }
    } else if (!strcmp(dtype, "BOOL")) {
        for (i = 0; i < n; i++) {
            if (src[i] > 1)
                return sft_fail(source, NNCL_ERR_FORMAT, "tensor '%.200s' (BOOL) element %zu is %u, not 0 or 1", t->name,
                                i, (unsigned)src[i]);
            dst[i] = (float)src[i];
        }
    } else { /* I8..I64, U8..U64 */
        int is_signed = dtype[0] == 'I', huge;
        for (i = 0; i < n; i++) {
            int64_t v = sft_int_at(src, i, t->dsize, is_signed, &huge);
            float f = (float)v;
            /* exact when converting back gives v: |f| < 2^63 keeps the cast defined */
            if (huge || f >= 9.2233720368547758e18f || f < -9.2233720368547758e18f || (int64_t)f != v) {
                char text[32];
                if (huge) snprintf(text, sizeof text, "above 2^63");
                else snprintf(text, sizeof text, "%lld", (long long)v);
                return sft_fail(source, NNCL_ERR_UNSUPPORTED,
                                "tensor '%.200s' (%s) element %zu is %s, which float cannot hold exactly", t->name, dtype,
                                i, text);
            }
            dst[i] = f;
        }
    }
    return NNCL_OK;
}

/* Offset of the first byte that is not valid UTF-8 (overlong forms,
 * surrogates and code points past U+10FFFF included), or n when all are. */
static size_t sft_utf8_check(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len, k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        else return i;
        if (n - i < len) return i;
        for (k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3fu);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += len;
    }
    return n;
}

/* ------------------------------------------------------------ JSON reader */

typedef struct sft_json {
    const unsigned char *s;
    size_t n, pos;
    const char *src;
} sft_json;

static nncl_status sft_json_fail(const sft_json *j, const char *fmt, ...) NNCL_PRINTF(2, 3);
static nncl_status sft_json_fail(const sft_json *j, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nncl__fail(NULL, NNCL_ERR_FORMAT, "safetensors %s: bad JSON header at byte %zu of %zu: %s", j->src,
                      j->pos, j->n, msg);
}

static void sft_json_ws(sft_json *j) {
    while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

/* The next non-blank byte, or -1 at the end. */
static int sft_json_peek(sft_json *j) {
    sft_json_ws(j);
    return j->pos < j->n ? j->s[j->pos] : -1;
}

static nncl_status sft_json_expect(sft_json *j, int c) {
    int got = sft_json_peek(j);
    if (got != c) {
        if (got < 0) return sft_json_fail(j, "expected '%c', found the end of the header", c);
        if (got >= 0x20 && got < 0x7f) return sft_json_fail(j, "expected '%c', found '%c'", c, got);
        return sft_json_fail(j, "expected '%c', found byte 0x%02x", c, (unsigned)got);
    }
    j->pos++;
    return NNCL_OK;
}

static int sft_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at j->pos into *v. */
static nncl_status sft_json_hex4(sft_json *j, unsigned *v) {
    int k;
    *v = 0;
    if (j->n - j->pos < 4) return sft_json_fail(j, "\\u escape cut short");
    for (k = 0; k < 4; k++) {
        int h = sft_hex(j->s[j->pos + k]);
        if (h < 0) return sft_json_fail(j, "bad hex digit in \\u escape");
        *v = (*v << 4) | (unsigned)h;
    }
    j->pos += 4;
    return NNCL_OK;
}

/* A JSON string, unescaped into a new NUL-terminated buffer (*out, when
 * out is not NULL; else only checked). Control characters, invalid UTF-8,
 * lone surrogates and \u0000 (which would cut a C string short) are errors. */
static nncl_status sft_json_string(sft_json *j, char **out, size_t *out_len) {
    size_t start, end, raw;
    char *buf = NULL;
    size_t len = 0;
    NNCL_TRY(sft_json_expect(j, '"'));
    start = j->pos;
    /* Find the closing quote first so that the buffer fits the string. */
    for (end = start; end < j->n && j->s[end] != '"'; end++)
        if (j->s[end] == '\\') end++;
    if (end >= j->n) return sft_json_fail(j, "string not closed before the end of the header");
    raw = end - start;
    {
        size_t bad = sft_utf8_check(j->s + start, raw);
        if (bad != raw) {
            j->pos = start + bad;
            return sft_json_fail(j, "string holds invalid UTF-8");
        }
    }
    if (out) {
        buf = (char *)NNCL_MALLOC(raw + 1);
        if (!buf) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "safetensors %s: out of memory", j->src);
    }
    while (j->pos < end) {
        unsigned c = j->s[j->pos];
        if (c < 0x20) {
            NNCL_FREE(buf);
            return sft_json_fail(j, "control character 0x%02x inside a string", c);
        }
        if (c != '\\') {
            if (buf) buf[len] = (char)c;
            len++;
            j->pos++;
            continue;
        }
        j->pos++;
        c = j->s[j->pos++];
        switch (c) {
        case '"': case '\\': case '/': break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            nncl_status s = sft_json_hex4(j, &cp);
            if (s == NNCL_OK && cp >= 0xd800 && cp <= 0xdbff) {
                if (j->pos + 2 > end || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u') {
                    s = sft_json_fail(j, "high surrogate \\u%04x without a low one", cp);
                } else {
                    j->pos += 2;
                    s = sft_json_hex4(j, &lo);
                    if (s == NNCL_OK && (lo < 0xdc00 || lo > 0xdfff))
                        s = sft_json_fail(j, "high surrogate \\u%04x followed by \\u%04x", cp, lo);
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
            } else if (s == NNCL_OK && cp >= 0xdc00 && cp <= 0xdfff) {
                s = sft_json_fail(j, "lone low surrogate \\u%04x", cp);
            } else if (s == NNCL_OK && cp == 0) {
                s = sft_json_fail(j, "\\u0000 inside a string");
            }
            if (s != NNCL_OK) {
                NNCL_FREE(buf);
                return s;
            }
            /* Encode as UTF-8; never longer than the escape it replaces. */
            if (buf) {
                if (cp < 0x80) {
                    buf[len] = (char)cp;
                } else if (cp < 0x800) {
                    buf[len] = (char)(0xc0 | (cp >> 6));
                    buf[len + 1] = (char)(0x80 | (cp & 0x3f));
                } else if (cp < 0x10000) {
                    buf[len] = (char)(0xe0 | (cp >> 12));
                    buf[len + 1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[len + 2] = (char)(0x80 | (cp & 0x3f));
                } else {
                    buf[len] = (char)(0xf0 | (cp >> 18));
                    buf[len + 1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                    buf[len + 2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[len + 3] = (char)(0x80 | (cp & 0x3f));
                }
            }
            len += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            continue;
        }
        default:
            j->pos--;
            NNCL_FREE(buf);
            return sft_json_fail(j, "unknown escape in a string");
        }
        if (buf) buf[len] = (char)c;
        len++;
    }
    j->pos = end + 1;
    if (buf) {
        buf[len] = 0;
        *out = buf;
    }
    if (out_len) *out_len = len;
    return NNCL_OK;
}

/* A non-negative integer without sign, fraction or exponent. */
static nncl_status sft_json_uint(sft_json *j, const char *what, uint64_t *v) {
    int c = sft_json_peek(j);
    size_t start = j->pos;
    *v = 0;
    if (c < '0' || c > '9') return sft_json_fail(j, "%s: expected a non-negative integer", what);
    while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        unsigned d = (unsigned)(j->s[j->pos] - '0');
        if (*v > (UINT64_MAX - d) / 10) return sft_json_fail(j, "%s: integer too large", what);
        *v = *v * 10 + d;
        j->pos++;
    }
    if (j->s[start] == '0' && j->pos - start > 1) {
        j->pos = start;
        return sft_json_fail(j, "%s: leading zero in an integer", what);
    }
    if (j->pos < j->n && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return sft_json_fail(j, "%s: expected an integer, found a fraction or exponent", what);
    return NNCL_OK;
}

/* Checks and skips any JSON value, for fields nncl does not use. */
static nncl_status sft_json_skip(sft_json *j, int depth) {
    int c = sft_json_peek(j);
    if (depth > SFT_JSON_DEPTH) return sft_json_fail(j, "nested deeper than %d levels", SFT_JSON_DEPTH);
    if (c == '"') return sft_json_string(j, NULL, NULL);
    if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        j->pos++;
        if (sft_json_peek(j) == close) {
            j->pos++;
            return NNCL_OK;
        }
        for (;;) {
            if (c == '{') {
                NNCL_TRY(sft_json_string(j, NULL, NULL));
                NNCL_TRY(sft_json_expect(j, ':'));
            }
            NNCL_TRY(sft_json_skip(j, depth + 1));
            if (sft_json_peek(j) == ',') {
                j->pos++;
                continue;
            }
            return sft_json_expect(j, close);
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t digits = 0;
        if (c == '-') j->pos++;
        if (j->pos < j->n && j->s[j->pos] == '0') {
            j->pos++;
            digits = 1;
        } else {
            while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') j->pos++, digits++;
        }
        if (!digits) return sft_json_fail(j, "bad number");
        if (j->pos < j->n && j->s[j->pos] == '.') {
            j->pos++;
            digits = 0;
            while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') j->pos++, digits++;
            if (!digits) return sft_json_fail(j, "bad number: no digit after '.'");
        }
        if (j->pos < j->n && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
            j->pos++;
            if (j->pos < j->n && (j->s[j->pos] == '+' || j->s[j->pos] == '-')) j->pos++;
            digits = 0;
            while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') j->pos++, digits++;
            if (!digits) return sft_json_fail(j, "bad number: no digit in the exponent");
        }
        return NNCL_OK;
    }
    {
        static const char *const words[3] = {"true", "false", "null"};
        int w;
        for (w = 0; w < 3; w++) {
            size_t len = strlen(words[w]);
            if (j->n - j->pos >= len && !memcmp(j->s + j->pos, words[w], len)) {
                j->pos += len;
                return NNCL_OK;
            }
        }
    }
    if (c < 0) return sft_json_fail(j, "expected a value, found the end of the header");
    return sft_json_fail(j, "expected a value");
}

/* ------------------------------------------------------------ header */

static void *sft_grow(void *p, int count, int *cap, size_t elem) {
    int ncap;
    void *q;
    if (count < *cap) return p;
    if (*cap > INT_MAX / 2) return NULL;
    ncap = *cap ? *cap * 2 : 16;
    q = nncl__calloc((size_t)ncap, elem);
    if (!q) return NULL;
    if (p) memcpy(q, p, (size_t)count * elem);
    NNCL_FREE(p);
    *cap = ncap;
    return q;
}

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

static nncl_status sft_parse_meta(nncl_safetensors *st, sft_json *j) {
    NNCL_TRY(sft_json_expect(j, '{'));
    if (sft_json_peek(j) == '}') {
        j->pos++;
        return NNCL_OK;
    }
    for (;;) {
        sft_meta *m;
        void *grown = sft_grow(st->meta, st->n_meta, &st->cap_meta, sizeof *st->meta);
        if (!grown) return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for metadata");
        st->meta = (sft_meta *)grown;
        m = &st->meta[st->n_meta];
        NNCL_TRY(sft_json_string(j, &m->key, NULL));
        st->n_meta++; /* owns key from here on, freed with st */
        NNCL_TRY(sft_json_expect(j, ':'));
        if (sft_json_peek(j) != '"')
            return sft_json_fail(j, "__metadata__ value of \"%.200s\" is not a string", m->key);
        NNCL_TRY(sft_json_string(j, &m->value, NULL));
        if (sft_json_peek(j) == ',') {
            j->pos++;
            continue;
        }
        return sft_json_expect(j, '}');
    }
}

/* One tensor's entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]},
 * other fields skipped; checked against the data region's length. */
static nncl_status sft_parse_tensor(nncl_safetensors *st, sft_json *j, char *name, size_t name_len, uint64_t data_len) {
    sft_tensor *t;
    void *grown;
    int have_dtype = 0, have_shape = 0, have_offsets = 0, supported, i;
    uint64_t numel = 1, bytes;
    char *field = NULL, what_shape[256], what_offsets[256];
    if (name_len > NNCL_ST_MAX_NAME) {
        NNCL_FREE(name);
        return sft_fail(st->source, NNCL_ERR_FORMAT, "a tensor name is %zu bytes long, more than %d", name_len,
                       NNCL_ST_MAX_NAME);
    }
    grown = sft_grow(st->t, st->count, &st->cap, sizeof *st->t);
    if (!grown) {
        NNCL_FREE(name);
        return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %d tensors", st->count + 1);
    }
    st->t = (sft_tensor *)grown;
    t = &st->t[st->count++];
    t->name = name; /* owned by st from here on */
    snprintf(what_shape, sizeof what_shape, "tensor '%.200s' shape", name);
    snprintf(what_offsets, sizeof what_offsets, "tensor '%.200s' data_offsets", name);
    NNCL_TRY(sft_json_expect(j, '{'));
    if (sft_json_peek(j) != '}') {
        for (;;) {
            nncl_status s = sft_json_string(j, &field, NULL);
            if (s != NNCL_OK) return s;
            s = sft_json_expect(j, ':');
            if (s == NNCL_OK && !strcmp(field, "dtype")) {
                char *dt = NULL;
                size_t dl = 0;
                if (have_dtype) s = sft_json_fail(j, "tensor '%.200s': dtype given twice", name);
                if (s == NNCL_OK && sft_json_peek(j) != '"') s = sft_json_fail(j, "tensor '%.200s': dtype is not a string", name);
                if (s == NNCL_OK) s = sft_json_string(j, &dt, &dl);
                if (s == NNCL_OK && dl >= sizeof t->dtype)
                    s = sft_json_fail(j, "tensor '%.200s': unknown dtype \"%.40s\"", name, dt);
                if (s == NNCL_OK) memcpy(t->dtype, dt, dl + 1);
                NNCL_FREE(dt);
                have_dtype = 1;
            } else if (s == NNCL_OK && !strcmp(field, "shape")) {
                if (have_shape) s = sft_json_fail(j, "tensor '%.200s': shape given twice", name);
                if (s == NNCL_OK) s = sft_json_expect(j, '[');
                if (s == NNCL_OK && sft_json_peek(j) == ']') {
                    j->pos++;
                } else {
                    while (s == NNCL_OK) {
                        uint64_t d;
                        if (t->ndim == NNCL_ST_MAX_DIMS) {
                            s = sft_json_fail(j, "tensor '%.200s' has more than %d dimensions", name, NNCL_ST_MAX_DIMS);
                            break;
                        }
                        s = sft_json_uint(j, what_shape, &d);
                        if (s == NNCL_OK && d > (uint64_t)INT64_MAX)
                            s = sft_json_fail(j, "tensor '%.200s': dimension %d too large", name, t->ndim);
                        if (s != NNCL_OK) break;
                        t->shape[t->ndim++] = (int64_t)d;
                        if (sft_json_peek(j) == ',') {
                            j->pos++;
                            continue;
                        }
                        s = sft_json_expect(j, ']');
                        break;
                    }
                }
                have_shape = 1;
            } else if (s == NNCL_OK && !strcmp(field, "data_offsets")) {
                if (have_offsets) s = sft_json_fail(j, "tensor '%.200s': data_offsets given twice", name);
                if (s == NNCL_OK) s = sft_json_expect(j, '[');
                if (s == NNCL_OK) s = sft_json_uint(j, what_offsets, &t->begin);
                if (s == NNCL_OK) s = sft_json_expect(j, ',');
                if (s == NNCL_OK) s = sft_json_uint(j, what_offsets, &t->end);
                if (s == NNCL_OK && sft_json_peek(j) != ']')
                    s = sft_json_fail(j, "tensor '%.200s': data_offsets must hold exactly two integers", name);
                if (s == NNCL_OK) j->pos++;
                have_offsets = 1;
            } else if (s == NNCL_OK) {
                s = sft_json_skip(j, 1);
            }
            NNCL_FREE(field);
            field = NULL;
            if (s != NNCL_OK) return s;
            if (sft_json_peek(j) == ',') {
                j->pos++;
                continue;
            }
            NNCL_TRY(sft_json_expect(j, '}'));
            break;
        }
    } else {
        j->pos++;
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return sft_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s' lacks %s", name,
                       !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    t->dsize = sft_dtype_size(t->dtype, &supported);
    if (!t->dsize)
        return sft_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s' has unknown dtype \"%s\"", name, t->dtype);
    if (!supported)
        return sft_fail(st->source, NNCL_ERR_UNSUPPORTED,
                       "tensor '%.200s' has dtype %s; nncl reads F32, F16, BF16, F64, integers and BOOL", name,
                       t->dtype);
    for (i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d && numel > UINT64_MAX / d) {
            char sh[256];
            sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
            return sft_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s': element count of shape %s overflows",
                           name, sh);
        }
        numel *= d;
    }
    if (numel > UINT64_MAX / (uint64_t)t->dsize || numel > (uint64_t)(SIZE_MAX / 4)) {
        char sh[256];
        sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
        return sft_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s': byte size of shape %s overflows", name, sh);
    }
    bytes = numel * (uint64_t)t->dsize;
    t->numel = (size_t)numel;
    if (t->end < t->begin)
        return sft_fail(st->source, NNCL_ERR_FORMAT, "tensor '%.200s': data_offsets [%llu,%llu] end before they begin",
                       name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_len)
        return sft_fail(st->source, NNCL_ERR_FORMAT,
                       "tensor '%.200s': data_offsets [%llu,%llu] out of range: the data region holds %llu bytes",
                       name, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_len);
    if (t->end - t->begin != bytes) {
        char sh[256];
        sft_shape_str(sh, sizeof sh, t->ndim, t->shape);
        return sft_fail(st->source, NNCL_ERR_FORMAT,
                       "tensor '%.200s': data_offsets [%llu,%llu] span %llu bytes, but %s shape %s needs %llu", name,
                       (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->end - t->begin), t->dtype, sh, (unsigned long long)bytes);
    }
    return NNCL_OK;
}

static int sft_cmp_name(const void *a, const void *b) {
    return strcmp((*(const sft_tensor *const *)a)->name, (*(const sft_tensor *const *)b)->name);
}

static int sft_cmp_offset(const void *a, const void *b) {
    const sft_tensor *x = *(const sft_tensor *const *)a, *y = *(const sft_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int sft_cmp_meta(const void *a, const void *b) {
    return strcmp(((const sft_meta *)a)->key, ((const sft_meta *)b)->key);
}

/* Names and metadata keys unique; tensors cover the data region exactly,
 * with neither gap nor overlap, in whatever order the header lists them. */
static nncl_status sft_check_layout(nncl_safetensors *st, uint64_t data_len) {
    const sft_tensor **by_off;
    uint64_t at = 0;
    int i;
    nncl_status s = NNCL_OK;
    if (st->n_meta > 1) {
        qsort(st->meta, (size_t)st->n_meta, sizeof *st->meta, sft_cmp_meta);
        for (i = 1; i < st->n_meta; i++)
            if (!strcmp(st->meta[i - 1].key, st->meta[i].key))
                return sft_fail(st->source, NNCL_ERR_FORMAT, "__metadata__ key \"%.200s\" appears twice",
                               st->meta[i].key);
    }
    if (!st->count) {
        if (data_len)
            return sft_fail(st->source, NNCL_ERR_FORMAT, "%llu data bytes but no tensor",
                           (unsigned long long)data_len);
        return NNCL_OK;
    }
    st->by_name = (const sft_tensor **)nncl__calloc((size_t)st->count, sizeof *st->by_name);
    by_off = (const sft_tensor **)nncl__calloc((size_t)st->count, sizeof *by_off);
    if (!st->by_name || !by_off) {
        NNCL_FREE(by_off);
        return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %d tensors", st->count);
    }
    for (i = 0; i < st->count; i++) st->by_name[i] = by_off[i] = &st->t[i];
    qsort(st->by_name, (size_t)st->count, sizeof *st->by_name, sft_cmp_name);
    for (i = 1; i < st->count && s == NNCL_OK; i++)
        if (!strcmp(st->by_name[i - 1]->name, st->by_name[i]->name))
            s = sft_fail(st->source, NNCL_ERR_FORMAT, "tensor name '%.200s' appears twice", st->by_name[i]->name);
    qsort(by_off, (size_t)st->count, sizeof *by_off, sft_cmp_offset);
    for (i = 0; i < st->count && s == NNCL_OK; i++) {
        const sft_tensor *t = by_off[i];
        if (t->begin > at)
            s = sft_fail(st->source, NNCL_ERR_FORMAT,
                        "data bytes [%llu,%llu] belong to no tensor (gap before tensor '%.200s')",
                        (unsigned long long)at, (unsigned long long)t->begin, t->name);
        else if (t->begin < at)
            s = sft_fail(st->source, NNCL_ERR_FORMAT,
                        "tensor '%.200s' [%llu,%llu] overlaps tensor '%.200s' [%llu,%llu]", t->name,
                        (unsigned long long)t->begin, (unsigned long long)t->end, by_off[i - 1]->name,
                        (unsigned long long)by_off[i - 1]->begin, (unsigned long long)by_off[i - 1]->end);
        at = t->end;
    }
    if (s == NNCL_OK && at != data_len)
        s = sft_fail(st->source, NNCL_ERR_FORMAT, "data bytes [%llu,%llu] after the last tensor belong to no tensor",
                    (unsigned long long)at, (unsigned long long)data_len);
    NNCL_FREE(by_off);
    return s;
}

/* The JSON header (n bytes) of a file whose data region holds data_len. */
static nncl_status sft_parse_header(nncl_safetensors *st, const unsigned char *json, size_t n, uint64_t data_len) {
    sft_json j;
    int have_meta = 0;
    j.s = json;
    j.n = n;
    j.pos = 0;
    j.src = st->source;
    if (n == 0 || json[0] != '{') return sft_json_fail(&j, "the header does not start with '{'");
    j.pos = 1;
    if (sft_json_peek(&j) == '}') {
        j.pos++;
    } else {
        for (;;) {
            char *key = NULL;
            size_t key_len = 0;
            NNCL_TRY(sft_json_string(&j, &key, &key_len));
            if (sft_json_expect(&j, ':') != NNCL_OK) {
                NNCL_FREE(key);
                return NNCL_ERR_FORMAT;
            }
            if (!strcmp(key, "__metadata__")) {
                NNCL_FREE(key);
                if (have_meta) return sft_json_fail(&j, "__metadata__ appears twice");
                have_meta = 1;
                NNCL_TRY(sft_parse_meta(st, &j));
            } else {
                NNCL_TRY(sft_parse_tensor(st, &j, key, key_len, data_len));
            }
            if (sft_json_peek(&j) == ',') {
                j.pos++;
                continue;
            }
            NNCL_TRY(sft_json_expect(&j, '}'));
            break;
        }
    }
    /* Writers pad the header with spaces to align the data. */
    if (sft_json_peek(&j) >= 0) return sft_json_fail(&j, "bytes after the closing '}'");
    return sft_check_layout(st, data_len);
}

/* Checks the 8-byte length prefix against the file size; *header_len,
 * *data_len receive the sizes of the two regions. */
static nncl_status sft_check_prefix(const char *source, const unsigned char *prefix, uint64_t size,
                                   uint64_t *header_len, uint64_t *data_len) {
    uint64_t n;
    if (size < 8)
        return sft_fail(source, NNCL_ERR_FORMAT, "%llu bytes, too short for the 8-byte header length",
                       (unsigned long long)size);
    n = sft_get_u64(prefix);
    if (n > NNCL_ST_MAX_HEADER)
        return sft_fail(source, NNCL_ERR_FORMAT, "header length %llu exceeds the limit of %d bytes",
                       (unsigned long long)n, NNCL_ST_MAX_HEADER);
    if (n > size - 8)
        return sft_fail(source, NNCL_ERR_FORMAT, "truncated: header length %llu but only %llu bytes follow",
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
        return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %zu floats", total);
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
        s = sft_convert(st->source, &st->t[i], b + 8 + header_len + st->t[i].begin, st->t[i].data);
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
        return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "%llu data bytes do not fit in memory",
                       (unsigned long long)data_len);
    buf = (unsigned char *)NNCL_MALLOC((size_t)header_len + 1);
    if (!buf) return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for the header");
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
        if (!sft_host_le())
            for (i = 0; i < st->count; i++)
                sft_convert(st->source, &st->t[i], (const unsigned char *)st->t[i].data, st->t[i].data);
        return NNCL_OK;
    }
    buf = (unsigned char *)NNCL_MALLOC(data_len ? (size_t)data_len : 1);
    if (!buf) return sft_fail(st->source, NNCL_ERR_OUT_OF_MEMORY, "out of memory for %llu data bytes",
                             (unsigned long long)data_len);
    s = sft_read(f, st->source, buf, (size_t)data_len, "the tensor data");
    for (i = 0; i < st->count && s == NNCL_OK; i++) s = sft_convert(st->source, &st->t[i], buf + st->t[i].begin, st->t[i].data);
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
    const sft_tensor *t;
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
    sft_tensor key;
    const sft_tensor *kp = &key;
    const sft_tensor **hit;
    if (!st || !name || !st->count) return -1;
    key.name = (char *)name;
    hit = (const sft_tensor **)bsearch(&kp, st->by_name, (size_t)st->count, sizeof *st->by_name, sft_cmp_name);
    return hit ? (int)(*hit - st->t) : -1;
}

nncl_status nncl_safetensors_expect(const nncl_safetensors *st, const char *name, int ndim, const int64_t *shape,
                                    const float **data) {
    const sft_tensor *t;
    int i, same;
    if (!st || !name || !data || ndim < 0 || ndim > NNCL_ST_MAX_DIMS || (ndim && !shape))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_expect: bad argument");
    *data = NULL;
    i = nncl_safetensors_find(st, name);
    if (i < 0) return sft_fail(st->source, NNCL_ERR_FORMAT, "no tensor named '%.200s'", name);
    t = &st->t[i];
    same = t->ndim == ndim;
    for (i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[256], want[256];
        sft_shape_str(got, sizeof got, t->ndim, t->shape);
        sft_shape_str(want, sizeof want, ndim, shape);
        return sft_fail(st->source, NNCL_ERR_SHAPE, "tensor '%.200s' has shape %s, expected %s", name, got, want);
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

/* ------------------------------------------------------------ write */

typedef struct sft_buf {
    char *p;
    size_t n, cap;
    int oom;
} sft_buf;

static void sft_buf_put(sft_buf *b, const char *s, size_t n) {
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

static void sft_buf_puts(sft_buf *b, const char *s) { sft_buf_put(b, s, strlen(s)); }

static void sft_buf_json(sft_buf *b, const char *s) {
    static const char hexd[] = "0123456789abcdef";
    sft_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sft_buf_put(b, esc, 2);
        } else if (c < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hexd[c >> 4];
            esc[5] = hexd[c & 15];
            sft_buf_put(b, esc, 6);
        } else {
            sft_buf_put(b, s, 1);
        }
    }
    sft_buf_put(b, "\"", 1);
}

static void sft_buf_u64(sft_buf *b, uint64_t v) {
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sft_buf_puts(b, tmp);
}

static nncl_status sft_check_text(const char *path, const char *what, const char *s) {
    size_t n = strlen(s);
    if (sft_utf8_check((const unsigned char *)s, n) != n)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: %s \"%.200s\" is not valid UTF-8", path,
                          what, s);
    return NNCL_OK;
}

/* Bytes per element the writer stores: 2 for an entry whose dtype asks for
 * "F16" or "BF16", else 4 (F32, whatever else dtype holds). */
static size_t sft_write_size(const nncl_safetensors_entry *e) {
    return !strncmp(e->dtype, "F16", sizeof e->dtype) || !strncmp(e->dtype, "BF16", sizeof e->dtype) ? 2 : 4;
}

/* Checks the caller's tensors and metadata; *data_len receives the bytes of
 * the data region. */
static nncl_status sft_check_save(const char *path, const nncl_safetensors_entry *tensors, int count,
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
        NNCL_TRY(sft_check_text(path, "tensor name", e->name));
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
        if (nncl__mul_overflow(numel, sft_write_size(e), &bytes) || (uint64_t)bytes > UINT64_MAX - total)
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
        NNCL_TRY(sft_check_text(path, "metadata key", meta[i]));
        NNCL_TRY(sft_check_text(path, "metadata value", meta[i + 1]));
        for (k = 0; k < i; k += 2)
            if (!strcmp(meta[k], meta[i]))
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "safetensors %s: metadata key \"%.200s\" given twice",
                                  path, meta[i]);
    }
    *data_len = total;
    return NNCL_OK;
}

static void sft_build_header(sft_buf *b, const nncl_safetensors_entry *tensors, int count, const char *const *meta) {
    int i, k, own_format = 0;
    uint64_t at = 0;
    for (i = 0; meta && meta[i]; i += 2)
        if (!strcmp(meta[i], "format")) own_format = 1;
    sft_buf_puts(b, "{\"__metadata__\":{");
    if (!own_format) sft_buf_puts(b, "\"format\":\"pt\"");
    for (i = 0; meta && meta[i]; i += 2) {
        if (i || !own_format) sft_buf_puts(b, ",");
        sft_buf_json(b, meta[i]);
        sft_buf_puts(b, ":");
        sft_buf_json(b, meta[i + 1]);
    }
    sft_buf_puts(b, "}");
    for (i = 0; i < count; i++) {
        const nncl_safetensors_entry *e = &tensors[i];
        uint64_t numel = 1;
        sft_buf_puts(b, ",");
        sft_buf_json(b, e->name);
        sft_buf_puts(b, ":{\"dtype\":\"");
        sft_buf_puts(b, sft_write_size(e) == 2 ? e->dtype : "F32");
        sft_buf_puts(b, "\",\"shape\":[");
        for (k = 0; k < e->ndim; k++) {
            if (k) sft_buf_puts(b, ",");
            sft_buf_u64(b, (uint64_t)e->shape[k]);
            numel *= (uint64_t)e->shape[k];
        }
        sft_buf_puts(b, "],\"data_offsets\":[");
        sft_buf_u64(b, at);
        sft_buf_puts(b, ",");
        at += numel * sft_write_size(e);
        sft_buf_u64(b, at);
        sft_buf_puts(b, "]}");
    }
    sft_buf_puts(b, "}");
    /* Pad with spaces so that the data starts 8-byte aligned. */
    while (!b->oom && b->n % 8) sft_buf_put(b, " ", 1);
}

/* F16 and BF16 elements of a tensor to write, converted from its floats
 * (round to nearest even), little-endian. */
static void sft_write_halves(FILE *f, const float *x, size_t n, int bf16) {
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

static void sft_write_floats(FILE *f, const float *x, size_t n) {
    unsigned char chunk[4096];
    size_t i, k;
    if (sft_host_le()) {
        if (n) fwrite(x, 4, n, f);
        return;
    }
    for (i = 0; i < n; i += k) {
        for (k = 0; k < sizeof chunk / 4 && i + k < n; k++) {
            uint32_t u;
            memcpy(&u, x + i + k, 4);
            chunk[4 * k] = (unsigned char)u;
            chunk[4 * k + 1] = (unsigned char)(u >> 8);
            chunk[4 * k + 2] = (unsigned char)(u >> 16);
            chunk[4 * k + 3] = (unsigned char)(u >> 24);
        }
        fwrite(chunk, 4, k, f);
    }
}

nncl_status nncl_safetensors_save(const char *path, const nncl_safetensors_entry *tensors, int count,
                                  const char *const *meta) {
    sft_buf b;
    nncl__afile af;
    unsigned char prefix[8];
    uint64_t data_len;
    int i, k;
    if (!path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_safetensors_save: path is NULL");
    NNCL_TRY(sft_check_save(path, tensors, count, meta, &data_len));
    memset(&b, 0, sizeof b);
    sft_build_header(&b, tensors, count, meta);
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
    sft_put_u64(prefix, (uint64_t)b.n);
    fwrite(prefix, 1, 8, af.f);
    fwrite(b.p, 1, b.n, af.f);
    NNCL_FREE(b.p);
    for (i = 0; i < count; i++) {
        size_t numel = 1;
        for (k = 0; k < tensors[i].ndim; k++) numel *= (size_t)tensors[i].shape[k];
        if (sft_write_size(&tensors[i]) == 2) sft_write_halves(af.f, tensors[i].data, numel, tensors[i].dtype[0] == 'B');
        else sft_write_floats(af.f, tensors[i].data, numel);
    }
    (void)data_len;
    return nncl__afile_commit(&af, "safetensors");
}

#undef SFT_JSON_DEPTH
