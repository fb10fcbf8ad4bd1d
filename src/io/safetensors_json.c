/* safetensors_json.c - the strict JSON reader of safetensors headers and the
 * UTF-8 check of their strings. Every input is hostile: bounded nesting,
 * escapes and code points checked, integers overflow-safe. */
#include "io/safetensors.h"

#define STJ_DEPTH 64 /* deepest nesting skipped inside an unknown field */

/* Offset of the first byte that is not valid UTF-8 (overlong forms,
 * surrogates and code points past U+10FFFF included), or n when all are. */
size_t nncl__st_utf8_check(const unsigned char *s, size_t n) {
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
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += len;
    }
    return n;
}
nncl_status nncl__st_json_fail(const nncl__st_json *j, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nncl__fail(NULL, NNCL_ERR_FORMAT, "safetensors %s: bad JSON header at byte %zu of %zu: %s", j->src,
                      j->pos, j->n, msg);
}

static void stj_ws(nncl__st_json *j) {
    while (j->pos < j->n &&
           (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

/* The next non-blank byte, or -1 at the end. */
int nncl__st_json_peek(nncl__st_json *j) {
    stj_ws(j);
    return j->pos < j->n ? j->s[j->pos] : -1;
}

nncl_status nncl__st_json_expect(nncl__st_json *j, int c) {
    int got = nncl__st_json_peek(j);
    if (got != c) {
        if (got < 0) return nncl__st_json_fail(j, "expected '%c', found the end of the header", c);
        if (got >= 0x20 && got < 0x7f) return nncl__st_json_fail(j, "expected '%c', found '%c'", c, got);
        return nncl__st_json_fail(j, "expected '%c', found byte 0x%02x", c, (unsigned)got);
    }
    j->pos++;
    return NNCL_OK;
}

static int stj_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at j->pos into *v. */
static nncl_status stj_hex4(nncl__st_json *j, unsigned *v) {
    int k;
    *v = 0;
    if (j->n - j->pos < 4) return nncl__st_json_fail(j, "\\u escape cut short");
    for (k = 0; k < 4; k++) {
        int h = stj_hex(j->s[j->pos + k]);
        if (h < 0) return nncl__st_json_fail(j, "bad hex digit in \\u escape");
        *v = (*v << 4) | (unsigned)h;
    }
    j->pos += 4;
    return NNCL_OK;
}

/* A JSON string, unescaped into a new NUL-terminated buffer (*out, when
 * out is not NULL; else only checked). Control characters, invalid UTF-8,
 * lone surrogates and \u0000 (which would cut a C string short) are errors. */
nncl_status nncl__st_json_string(nncl__st_json *j, char **out, size_t *out_len) {
    size_t start, end, raw;
    char *buf = NULL;
    size_t len = 0;
    NNCL_TRY(nncl__st_json_expect(j, '"'));
    start = j->pos;
    /* Find the closing quote first so that the buffer fits the string. */
    for (end = start; end < j->n && j->s[end] != '"'; end++)
        if (j->s[end] == '\\') end++;
    if (end >= j->n) return nncl__st_json_fail(j, "string not closed before the end of the header");
    raw = end - start;
    {
        size_t bad = nncl__st_utf8_check(j->s + start, raw);
        if (bad != raw) {
            j->pos = start + bad;
            return nncl__st_json_fail(j, "string holds invalid UTF-8");
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
            return nncl__st_json_fail(j, "control character 0x%02x inside a string", c);
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
            nncl_status s = stj_hex4(j, &cp);
            if (s == NNCL_OK && cp >= 0xd800 && cp <= 0xdbff) {
                if (j->pos + 2 > end || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u') {
                    s = nncl__st_json_fail(j, "high surrogate \\u%04x without a low one", cp);
                } else {
                    j->pos += 2;
                    s = stj_hex4(j, &lo);
                    if (s == NNCL_OK && (lo < 0xdc00 || lo > 0xdfff))
                        s = nncl__st_json_fail(j, "high surrogate \\u%04x followed by \\u%04x", cp, lo);
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
            } else if (s == NNCL_OK && cp >= 0xdc00 && cp <= 0xdfff) {
                s = nncl__st_json_fail(j, "lone low surrogate \\u%04x", cp);
            } else if (s == NNCL_OK && cp == 0) {
                s = nncl__st_json_fail(j, "\\u0000 inside a string");
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
            return nncl__st_json_fail(j, "unknown escape in a string");
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
nncl_status nncl__st_json_uint(nncl__st_json *j, const char *what, uint64_t *v) {
    int c = nncl__st_json_peek(j);
    size_t start = j->pos;
    *v = 0;
    if (c < '0' || c > '9') return nncl__st_json_fail(j, "%s: expected a non-negative integer", what);
    while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        unsigned d = (unsigned)(j->s[j->pos] - '0');
        if (*v > (UINT64_MAX - d) / 10) return nncl__st_json_fail(j, "%s: integer too large", what);
        *v = *v * 10 + d;
        j->pos++;
    }
    if (j->s[start] == '0' && j->pos - start > 1) {
        j->pos = start;
        return nncl__st_json_fail(j, "%s: leading zero in an integer", what);
    }
    if (j->pos < j->n && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return nncl__st_json_fail(j, "%s: expected an integer, found a fraction or exponent", what);
    return NNCL_OK;
}

/* Checks and skips any JSON value, for fields nncl does not use. */
nncl_status nncl__st_json_skip(nncl__st_json *j, int depth) {
    int c = nncl__st_json_peek(j);
    if (depth > STJ_DEPTH) return nncl__st_json_fail(j, "nested deeper than %d levels", STJ_DEPTH);
    if (c == '"') return nncl__st_json_string(j, NULL, NULL);
    if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        j->pos++;
        if (nncl__st_json_peek(j) == close) {
            j->pos++;
            return NNCL_OK;
        }
        for (;;) {
            if (c == '{') {
                NNCL_TRY(nncl__st_json_string(j, NULL, NULL));
                NNCL_TRY(nncl__st_json_expect(j, ':'));
            }
            NNCL_TRY(nncl__st_json_skip(j, depth + 1));
            if (nncl__st_json_peek(j) == ',') {
                j->pos++;
                continue;
            }
            return nncl__st_json_expect(j, close);
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
        if (!digits) return nncl__st_json_fail(j, "bad number");
        if (j->pos < j->n && j->s[j->pos] == '.') {
            j->pos++;
            digits = 0;
            while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') j->pos++, digits++;
            if (!digits) return nncl__st_json_fail(j, "bad number: no digit after '.'");
        }
        if (j->pos < j->n && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
            j->pos++;
            if (j->pos < j->n && (j->s[j->pos] == '+' || j->s[j->pos] == '-')) j->pos++;
            digits = 0;
            while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') j->pos++, digits++;
            if (!digits) return nncl__st_json_fail(j, "bad number: no digit in the exponent");
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
    if (c < 0) return nncl__st_json_fail(j, "expected a value, found the end of the header");
    return nncl__st_json_fail(j, "expected a value");
}

#undef STJ_DEPTH
