/* test_safetensors.c - the safetensors reader and writer: round trips,
 * the exact layout PyTorch's safetensors writes, reference files made by the
 * Python safetensors package (tests/data), integer dtypes, hostile inputs,
 * atomic writes. */
#include "harness.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unistd.h>
#endif

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

/* Whole file into a new buffer; NULL when unreadable. */
static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    if (fwrite(p, 1, n, f) != n) {
        fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

/* ------------------------------------------------------------ round trip */

static int test_round_trip(void) {
    const char *name = "safetensors round trip: names, shapes, bits, metadata";
    static float w[2 * 3] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
    static float odd[5];
    static float scalar = 42.0f;
    static float x4[1 * 2 * 1 * 3] = {1, 2, 3, 4, 5, 6};
    nncl_safetensors_entry e[5];
    const char *meta[] = {"step", "123", "optimizer", "adam \"w\" \\ with\nnewline, tab\t and \xc3\xbcnicode", NULL};
    char path[512];
    nncl_safetensors *st = NULL, *st2 = NULL;
    nncl_safetensors_entry g;
    unsigned char *bytes;
    size_t size;
    uint32_t nan_bits = 0x7fc01234u, denorm_bits = 0x00000001u;
    int i, k;
    float negzero = -0.0f;
    float inf = (float)HUGE_VAL;

    memcpy(&odd[0], &nan_bits, 4);
    memcpy(&odd[1], &denorm_bits, 4);
    odd[2] = negzero;
    odd[3] = inf;
    odd[4] = -inf;
    memset(e, 0, sizeof e);
    e[0].name = "layer1.weight"; e[0].ndim = 2; e[0].shape[0] = 2; e[0].shape[1] = 3; e[0].data = w;
    e[1].name = "special \"bits\""; e[1].ndim = 1; e[1].shape[0] = 5; e[1].data = odd;
    e[2].name = "scalar"; e[2].ndim = 0; e[2].data = &scalar;
    e[3].name = "empty"; e[3].ndim = 2; e[3].shape[0] = 2; e[3].shape[1] = 0; e[3].data = NULL;
    e[4].name = "x4"; e[4].ndim = 4; e[4].shape[0] = 1; e[4].shape[1] = 2; e[4].shape[2] = 1; e[4].shape[3] = 3;
    e[4].data = x4;
    path_in_tmp(path, sizeof path, "rt.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, e, 5, meta));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    bytes = slurp(path, &size);
    TH_CHECK(name, bytes != NULL);
    TH_OK(name, NULL, nncl_safetensors_parse(bytes, size, path, &st2));
    free(bytes);
    for (k = 0; k < 2; k++) {
        nncl_safetensors *s = k ? st2 : st;
        TH_CHECK(name, nncl_safetensors_count(s) == 5);
        for (i = 0; i < 5; i++) {
            size_t numel = 1;
            int d;
            TH_OK(name, NULL, nncl_safetensors_get(s, i, &g));
            TH_CHECK(name, strcmp(g.name, e[i].name) == 0); /* header order = order given */
            TH_CHECK(name, strcmp(g.dtype, "F32") == 0);
            TH_CHECK(name, g.ndim == e[i].ndim);
            for (d = 0; d < g.ndim; d++) {
                TH_CHECK(name, g.shape[d] == e[i].shape[d]);
                numel *= (size_t)e[i].shape[d];
            }
            TH_CHECK(name, g.numel == numel);
            TH_CHECK(name, numel == 0 || memcmp(g.data, e[i].data, numel * 4) == 0);
            TH_CHECK(name, nncl_safetensors_find(s, e[i].name) == i);
        }
        TH_CHECK(name, nncl_safetensors_find(s, "missing") == -1);
        TH_CHECK(name, strcmp(nncl_safetensors_meta(s, "format"), "pt") == 0);
        TH_CHECK(name, strcmp(nncl_safetensors_meta(s, "step"), "123") == 0);
        TH_CHECK(name, strcmp(nncl_safetensors_meta(s, "optimizer"), meta[3]) == 0);
        TH_CHECK(name, nncl_safetensors_meta(s, "nope") == NULL);
        TH_CHECK(name, nncl_safetensors_meta_count(s) == 3);
    }
    {
        const char *key, *value;
        TH_OK(name, NULL, nncl_safetensors_meta_at(st, 0, &key, &value));
        TH_CHECK(name, strcmp(key, "format") == 0 && strcmp(value, "pt") == 0);
        TH_CHECK(name, nncl_safetensors_meta_at(st, 3, &key, &value) == NNCL_ERR_INVALID_ARGUMENT);
        TH_CHECK(name, nncl_safetensors_get(st, 5, &g) == NNCL_ERR_INVALID_ARGUMENT);
        TH_CHECK(name, nncl_safetensors_get(st, -1, &g) == NNCL_ERR_INVALID_ARGUMENT);
    }
    nncl_safetensors_free(st);
    nncl_safetensors_free(st2);
    nncl_safetensors_free(NULL);
    th_pass(name);
    return 0;
}

static int test_layout(void) {
    const char *name = "safetensors layout: header padded to 8, __metadata__ format pt, data contiguous";
    float a[3] = {1, 2, 3}, b[1] = {4};
    nncl_safetensors_entry e[2];
    char path[512];
    unsigned char *bytes;
    size_t size, n, i;
    const char *meta[] = {"epoch", "3", NULL};
    memset(e, 0, sizeof e);
    e[0].name = "abc"; e[0].ndim = 1; e[0].shape[0] = 3; e[0].data = a;
    e[1].name = "b"; e[1].ndim = 1; e[1].shape[0] = 1; e[1].data = b;
    path_in_tmp(path, sizeof path, "layout.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, e, 2, meta));
    bytes = slurp(path, &size);
    TH_CHECK(name, bytes != NULL && size > 8);
    for (n = 0, i = 0; i < 8; i++) n |= (size_t)bytes[i] << (8 * i);
    TH_CHECK(name, n % 8 == 0 && n + 8 + 16 == size);
    TH_CHECK(name, memcmp(bytes + 8, "{\"__metadata__\":{\"format\":\"pt\",\"epoch\":\"3\"}", 43) == 0);
    /* Closing brace, then only spaces up to the data. */
    i = 8 + n;
    while (bytes[i - 1] == ' ') i--;
    TH_CHECK(name, bytes[i - 1] == '}' && 8 + n - i < 8);
    TH_CHECK(name, strstr((const char *)bytes + 8, "\"abc\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}"));
    TH_CHECK(name, bytes[8 + n + 12] == 0 && bytes[8 + n + 15] == 0x40); /* 4.0f little-endian: 00 00 80 40 */
    TH_CHECK(name, bytes[8 + n + 14] == 0x80);
    free(bytes);
    th_pass(name);
    return 0;
}

/* The exact bytes the Python safetensors package (the same writer behind
 * safetensors.torch.save_file) makes for {"a": [1, -2.5], "b": [[0.25]]}
 * with metadata {"format": "pt"}: checked by hand with safetensors 0.8. */
static const char torch_bytes[] =
    "\x90\0\0\0\0\0\0\0"
    "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}   "
    "\x00\x00\x80\x3f\x00\x00\x20\xc0\x00\x00\x80\x3e";

static int test_torch_bytes(void) {
    const char *name = "safetensors reads PyTorch's layout and writes it byte for byte";
    nncl_safetensors *st = NULL;
    const float *d;
    int64_t s2[1] = {2}, s11[2] = {1, 1};
    float a[2] = {1.0f, -2.5f}, b[1] = {0.25f};
    nncl_safetensors_entry e[2];
    char path[512];
    unsigned char *bytes;
    size_t size, n = sizeof torch_bytes - 1;
    TH_CHECK(name, n == 8 + 0x90 + 12);
    TH_OK(name, NULL, nncl_safetensors_parse(torch_bytes, n, "torch", &st));
    TH_CHECK(name, nncl_safetensors_count(st) == 2);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "a", 1, s2, &d));
    TH_CHECK(name, d[0] == 1.0f && d[1] == -2.5f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "b", 2, s11, &d));
    TH_CHECK(name, d[0] == 0.25f);
    TH_CHECK(name, strcmp(nncl_safetensors_meta(st, "format"), "pt") == 0);
    nncl_safetensors_free(st);
    memset(e, 0, sizeof e);
    e[0].name = "a"; e[0].ndim = 1; e[0].shape[0] = 2; e[0].data = a;
    e[1].name = "b"; e[1].ndim = 2; e[1].shape[0] = 1; e[1].shape[1] = 1; e[1].data = b;
    path_in_tmp(path, sizeof path, "torch.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, e, 2, NULL));
    bytes = slurp(path, &size);
    TH_CHECK(name, bytes && size == n && memcmp(bytes, torch_bytes, n) == 0);
    free(bytes);
    th_pass(name);
    return 0;
}

static int test_expect(void) {
    const char *name = "safetensors expect: shape checked, missing tensor named";
    nncl_safetensors *st = NULL;
    const float *d = NULL;
    int64_t s21[2] = {2, 1}, s2[1] = {2};
    TH_OK(name, NULL, nncl_safetensors_parse(torch_bytes, sizeof torch_bytes - 1, "torch.st", &st));
    TH_CHECK(name, nncl_safetensors_expect(st, "a", 2, s21, &d) == NNCL_ERR_SHAPE && d == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "[2]") && strstr(nncl_last_error(NULL), "[2,1]") &&
                       strstr(nncl_last_error(NULL), "torch.st") && strstr(nncl_last_error(NULL), "'a'"));
    TH_CHECK(name, nncl_safetensors_expect(st, "zz", 1, s2, &d) == NNCL_ERR_FORMAT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "'zz'") != NULL);
    nncl_safetensors_free(st);
    th_pass(name);
    return 0;
}

/* Files written by the Python safetensors package (tests/data/make_safetensors_ref.py). */
static int open_ref(const char *file, nncl_safetensors **st) {
    char path[512];
    const char *dirs[3] = {"tests/data", "../tests/data", "../../tests/data"};
    const char *env = getenv("NNCL_TEST_DATA");
    int i;
    if (env) {
        snprintf(path, sizeof path, "%s/%s", env, file);
        return nncl_safetensors_load(path, st);
    }
    for (i = 0; i < 3; i++) {
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", dirs[i], file);
        f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return nncl_safetensors_load(path, st);
        }
    }
    return nncl_safetensors_load(file, st);
}

static int test_reference_files(void) {
    const char *name = "safetensors reads files of the Python safetensors package (F32, F16, F64)";
    nncl_safetensors *st = NULL;
    const float *d;
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s0[1] = {0}, s2[1] = {2}, s22[2] = {2, 2};
    TH_OK(name, NULL, open_ref("ref_f32.safetensors", &st));
    TH_CHECK(name, nncl_safetensors_count(st) == 4);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "weight", 2, s23, &d));
    TH_CHECK(name, d[0] == 1.0f && d[1] == -2.5f && d[2] == 3.25f && d[3] == 0.0f && d[4] == 1e-3f && d[5] == -7.0f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "bias", 1, s3, &d));
    TH_CHECK(name, d[0] == 0.5f && d[1] == -0.5f && d[2] == 100.0f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "scalar", 0, NULL, &d));
    TH_CHECK(name, d[0] == 42.0f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "empty", 1, s0, &d));
    TH_CHECK(name, strcmp(nncl_safetensors_meta(st, "step"), "7") == 0);
    TH_CHECK(name, strcmp(nncl_safetensors_meta(st, "optimizer"), "adam") == 0);
    nncl_safetensors_free(st);
    st = NULL;
    TH_OK(name, NULL, open_ref("ref_mixed.safetensors", &st));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "w32", 1, s2, &d));
    TH_CHECK(name, d[0] == 1.5f && d[1] == -2.0f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "h16", 2, s22, &d));
    TH_CHECK(name, d[0] == 1.0f && d[1] == -2.0f && d[2] == 0.5f && d[3] == 65504.0f);
    TH_OK(name, NULL, nncl_safetensors_expect(st, "tiny16", 1, s2, &d)); /* half subnormals */
    TH_CHECK(name, d[0] == ldexpf(1.0f, -24) && d[1] == -ldexpf(1.0f, -20));
    TH_OK(name, NULL, nncl_safetensors_expect(st, "d64", 1, s3, &d));
    TH_CHECK(name, d[0] == 3.5f && d[1] == (float)-1e-10 && isinf(d[2]) && d[2] > 0);
    {
        nncl_safetensors_entry g;
        TH_OK(name, NULL, nncl_safetensors_get(st, nncl_safetensors_find(st, "h16"), &g));
        TH_CHECK(name, strcmp(g.dtype, "F16") == 0 && g.numel == 4);
    }
    nncl_safetensors_free(st);
    th_pass(name);
    return 0;
}

/* ------------------------------------------------------------ hostile input */

/* A file of the given header (no padding needed) and data bytes. */
static unsigned char *make_file(const char *json, size_t data_len, size_t *size) {
    size_t n = strlen(json), i;
    unsigned char *b = (unsigned char *)malloc(8 + n + data_len + 1);
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    for (i = 0; i < data_len; i++) b[8 + n + i] = (unsigned char)(i * 7 + 1);
    *size = 8 + n + data_len;
    return b;
}

/* Parses json+data and expects status want with every needle in the message. */
static int expect_bad(const char *what, const char *json, size_t data_len, nncl_status want, const char *needle) {
    size_t size;
    unsigned char *b = make_file(json, data_len, &size);
    nncl_safetensors *st = NULL;
    nncl_status s = nncl_safetensors_parse(b, size, "bad.safetensors", &st);
    const char *msg = nncl_last_error(NULL);
    free(b);
    if (s != want || st != NULL || !strstr(msg, "bad.safetensors") || (needle && !strstr(msg, needle))) {
        th_fail(what, "got %s (%s), want %s with \"%s\"", nncl_status_str(s), msg, nncl_status_str(want),
                needle ? needle : "");
        nncl_safetensors_free(st);
        return 1;
    }
    return 0;
}

#define T1(x) "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" x "}}"

/* One tensor t of dtype and n elements whose bytes are data (size bytes). */
static nncl_status parse_one(const char *dtype, int n, const unsigned char *data, size_t size, nncl_safetensors **st) {
    char json[160];
    size_t total, i;
    unsigned char *b;
    nncl_status s;
    snprintf(json, sizeof json, "{\"t\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[0,%u]}}", dtype, n,
             (unsigned)size);
    b = make_file(json, size, &total);
    for (i = 0; i < size; i++) b[total - size + i] = data[i];
    s = nncl_safetensors_parse(b, total, "ints", st);
    free(b);
    return s;
}

/* Integer and BOOL tensors (PyTorch's num_batches_tracked is I64) read as
 * float where float holds the value exactly, refused where it does not. */
static int test_integer_dtypes(void) {
    const char *name = "safetensors integer and BOOL dtypes read exactly or are refused";
    static const unsigned char i64[24] = {5, 0, 0, 0, 0, 0, 0, 0, 0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0, 0, 0, 1, 0, 0, 0, 0},          /* 5, -7, 2^24 */
        i64_odd[8] = {1, 0, 0, 1, 0, 0, 0, 0},                                /* 2^24 + 1 */
        u64_top[8] = {0, 0, 0, 0, 0, 0, 0, 0x80},                             /* 2^63 */
        i32[8] = {0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f},                     /* -2^31 (exact), 2^31 - 1 (not) */
        i16[4] = {0x00, 0x80, 0xff, 0x7f}, i8[2] = {0x80, 0x7f}, u8[2] = {0, 255}, u16[2] = {0xff, 0xff},
        u32[4] = {0, 0, 0, 0x80}, boolean[3] = {1, 0, 1}, bool_bad[1] = {2};
    nncl_safetensors *st = NULL;
    nncl_safetensors_entry e;
    TH_OK(name, NULL, parse_one("I64", 3, i64, 24, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == 5 && e.data[1] == -7 && e.data[2] == 16777216.0f && strcmp(e.dtype, "I64") == 0);
    nncl_safetensors_free(st);
    TH_CHECK(name, parse_one("I64", 1, i64_odd, 8, &st) == NNCL_ERR_UNSUPPORTED && st == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "'t' (I64) element 0 is 16777217"));
    TH_CHECK(name, parse_one("U64", 1, u64_top, 8, &st) == NNCL_ERR_UNSUPPORTED);
    TH_CHECK(name, parse_one("I64", 1, u64_top, 8, &st) == NNCL_OK); /* -2^63: a power of two, exact */
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == -9223372036854775808.0f);
    nncl_safetensors_free(st);
    TH_CHECK(name, parse_one("I32", 2, i32, 8, &st) == NNCL_ERR_UNSUPPORTED);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "element 1 is 2147483647"));
    TH_OK(name, NULL, parse_one("I32", 1, i32, 4, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == -2147483648.0f);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("I16", 2, i16, 4, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == -32768 && e.data[1] == 32767);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("I8", 2, i8, 2, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == -128 && e.data[1] == 127);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("U8", 2, u8, 2, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == 0 && e.data[1] == 255);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("U16", 1, u16, 2, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == 65535);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("U32", 1, u32, 4, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == 2147483648.0f);
    nncl_safetensors_free(st);
    TH_OK(name, NULL, parse_one("BOOL", 3, boolean, 3, &st));
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &e));
    TH_CHECK(name, e.data[0] == 1 && e.data[1] == 0 && e.data[2] == 1);
    nncl_safetensors_free(st);
    TH_CHECK(name, parse_one("BOOL", 1, bool_bad, 1, &st) == NNCL_ERR_FORMAT && st == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "not 0 or 1"));
    th_pass(name);
    return 0;
}

static int test_hostile(void) {
    const char *name = "safetensors hostile inputs give NNCL_ERR_FORMAT with a useful message";
    int bad = 0;
    char big[2200];
    unsigned char raw[16];
    nncl_safetensors *st = NULL;
    size_t i;

    /* Length prefix. */
    memset(raw, 0, sizeof raw);
    raw[0] = 0x00; raw[4] = 0x01; /* 2^32 */
    TH_CHECK(name, nncl_safetensors_parse(raw, 16, "len", &st) == NNCL_ERR_FORMAT && st == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "exceeds the limit") != NULL);
    raw[4] = 0;
    raw[0] = 9;
    TH_CHECK(name, nncl_safetensors_parse(raw, 16, "len", &st) == NNCL_ERR_FORMAT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "truncated") != NULL);
    TH_CHECK(name, nncl_safetensors_parse(raw, 5, "len", &st) == NNCL_ERR_FORMAT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "too short") != NULL);
    TH_CHECK(name, nncl_safetensors_parse(raw, 0, "len", &st) == NNCL_ERR_FORMAT);
    raw[0] = 0xff; raw[7] = 0xff; /* near 2^64 */
    TH_CHECK(name, nncl_safetensors_parse(raw, 16, "len", &st) == NNCL_ERR_FORMAT);

    /* JSON syntax. */
    bad |= expect_bad("bad json: not an object", "[1]", 0, NNCL_ERR_FORMAT, "start with '{'");
    bad |= expect_bad("bad json: empty header", "", 0, NNCL_ERR_FORMAT, NULL);
    bad |= expect_bad("bad json: unclosed object", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8,
                      NNCL_ERR_FORMAT, "expected '}'");
    bad |= expect_bad("bad json: trailing bytes", T1("[0,8]") "x", 8, NNCL_ERR_FORMAT, "after the closing");
    bad |= expect_bad("bad json: unterminated string", "{\"t", 0, NNCL_ERR_FORMAT, "not closed");
    bad |= expect_bad("bad json: bad escape", "{\"t\\q\":{}}", 0, NNCL_ERR_FORMAT, "escape");
    bad |= expect_bad("bad json: control char", "{\"t\n\":{}}", 0, NNCL_ERR_FORMAT, "control character");
    bad |= expect_bad("bad json: \\u0000", "{\"t\\u0000\":{}}", 0, NNCL_ERR_FORMAT, "u0000");
    bad |= expect_bad("bad json: lone surrogate", "{\"t\\udc00\":{}}", 0, NNCL_ERR_FORMAT, "surrogate");
    bad |= expect_bad("bad json: invalid utf-8", "{\"t\xc0\xaf\":{}}", 0, NNCL_ERR_FORMAT, "UTF-8");
    bad |= expect_bad("bad json: missing colon", "{\"t\" {}}", 0, NNCL_ERR_FORMAT, "expected ':'");
    bad |= expect_bad("bad json: fraction in shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
                      8, NNCL_ERR_FORMAT, "fraction");
    bad |= expect_bad("bad json: negative dim", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
                      NNCL_ERR_FORMAT, "non-negative integer");
    bad |= expect_bad("bad json: leading zero", T1("[00,8]"), 8, NNCL_ERR_FORMAT, "leading zero");
    bad |= expect_bad("bad json: huge integer", T1("[0,99999999999999999999]"), 8, NNCL_ERR_FORMAT, "too large");
    bad |= expect_bad("bad json: three offsets", T1("[0,8,8]"), 8, NNCL_ERR_FORMAT, "exactly two");
    bad |= expect_bad("bad json: metadata not string", "{\"__metadata__\":{\"step\":3}}", 0, NNCL_ERR_FORMAT,
                      "not a string");
    bad |= expect_bad("bad json: duplicate metadata key", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0,
                      NNCL_ERR_FORMAT, "\"a\" appears twice");
    bad |= expect_bad("bad json: two __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, NNCL_ERR_FORMAT,
                      "__metadata__ appears twice");
    bad |= expect_bad("bad json: duplicate field", "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
                      "\"data_offsets\":[0,8]}}", 8, NNCL_ERR_FORMAT, "dtype given twice");
    bad |= expect_bad("bad json: missing data_offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, NNCL_ERR_FORMAT,
                      "lacks data_offsets");
    /* Unknown fields are skipped, but checked and bounded in depth. */
    for (i = 0; i < 100; i++) big[i] = '[';
    strcpy(big + 100, "]");
    {
        char json[2400];
        snprintf(json, sizeof json, "{\"t\":{\"x\":%s,\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", big);
        bad |= expect_bad("bad json: nesting too deep", json, 8, NNCL_ERR_FORMAT, "nested deeper");
    }

    /* Offsets and sizes. */
    bad |= expect_bad("offsets out of range", T1("[0,8]"), 4, NNCL_ERR_FORMAT, "out of range");
    bad |= expect_bad("offsets reversed", T1("[8,0]"), 8, NNCL_ERR_FORMAT, "end before");
    bad |= expect_bad("size mismatch", T1("[0,12]"), 12, NNCL_ERR_FORMAT, "needs 8");
    bad |= expect_bad("gap between tensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, NNCL_ERR_FORMAT,
                      "belong to no tensor (gap before tensor 'b')");
    bad |= expect_bad("overlapping tensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, NNCL_ERR_FORMAT,
                      "overlaps");
    bad |= expect_bad("bytes after the last tensor", T1("[0,8]"), 12, NNCL_ERR_FORMAT, "after the last tensor");
    bad |= expect_bad("data but no tensor", "{}", 4, NNCL_ERR_FORMAT, "no tensor");
    bad |= expect_bad("duplicate tensor name",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, NNCL_ERR_FORMAT,
                      "'a' appears twice");
    bad |= expect_bad("shape product overflow",
                      "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                      NNCL_ERR_FORMAT, "overflows");
    bad |= expect_bad("byte size overflow",
                      "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387905],\"data_offsets\":[0,8]}}", 8,
                      NNCL_ERR_FORMAT, "overflows");
    bad |= expect_bad("rank 9", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                      NNCL_ERR_FORMAT, "more than 8 dimensions");
    bad |= expect_bad("unknown dtype", "{\"t\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                      NNCL_ERR_FORMAT, "unknown dtype \"F99\"");
    bad |= expect_bad("unsupported dtype", "{\"t\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                      NNCL_ERR_UNSUPPORTED, "'t' has dtype F8_E4M3");
    memset(big, 'n', 1025);
    big[1025] = 0;
    {
        char json[2400];
        snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", big);
        bad |= expect_bad("name too long", json, 4, NNCL_ERR_FORMAT, "more than 1024");
        /* 1024 bytes is fine. */
        snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", big + 1);
        {
            size_t size;
            unsigned char *b = make_file(json, 4, &size);
            nncl_status s = nncl_safetensors_parse(b, size, "ok", &st);
            free(b);
            TH_OK(name, NULL, s);
            nncl_safetensors_free(st);
            st = NULL;
        }
    }
    if (bad) return 1;
    th_pass(name);
    return 0;
}

/* Valid but unusual: tensors listed out of offset order, unknown fields,
 * escapes in names, whitespace, BF16 and F16 specials, an empty file. */
static int test_unusual_valid(void) {
    const char *name = "safetensors accepts valid unusual headers (order, unknown fields, escapes, BF16)";
    const char *json =
        " {\"b\" : {\"shape\":[1], \"data_offsets\":[4,8], \"dtype\":\"F32\", \"extra\":{\"x\":[1,-2.5e3,true,null]}},"
        "\n\t\"a\\u00e9\\ud83d\\ude00\\\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[8,8]},"
        "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[12,18]}}  ";
    size_t size, n = strlen(json) - 1; /* skip the leading blank: the header must start with '{' */
    unsigned char *b = (unsigned char *)malloc(8 + n + 18);
    nncl_safetensors *st = NULL;
    nncl_safetensors_entry g;
    float one = 1.0f, two = 2.0f;
    int i;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json + 1, n);
    memcpy(b + 8 + n, &one, 4); /* assumes a little-endian host for the fixture */
    memcpy(b + 8 + n + 4, &two, 4);
    b[8 + n + 8] = 0x80; b[8 + n + 9] = 0x3f;   /* bf16 1.0 */
    b[8 + n + 10] = 0x40; b[8 + n + 11] = 0xc0; /* bf16 -3.0 */
    b[8 + n + 12] = 0x00; b[8 + n + 13] = 0x7c; /* f16 +inf */
    b[8 + n + 14] = 0x01; b[8 + n + 15] = 0x7e; /* f16 nan */
    b[8 + n + 16] = 0x00; b[8 + n + 17] = 0x80; /* f16 -0 */
    size = 8 + n + 18;
    {
        nncl_status s = nncl_safetensors_parse(b, size, NULL, &st);
        free(b);
        TH_OK(name, NULL, s);
    }
    TH_CHECK(name, nncl_safetensors_count(st) == 5);
    TH_OK(name, NULL, nncl_safetensors_get(st, 0, &g));
    TH_CHECK(name, strcmp(g.name, "b") == 0 && g.data[0] == 2.0f);
    TH_OK(name, NULL, nncl_safetensors_get(st, 1, &g));
    TH_CHECK(name, strcmp(g.name, "a\xc3\xa9\xf0\x9f\x98\x80\"") == 0 && g.data[0] == 1.0f);
    TH_OK(name, NULL, nncl_safetensors_get(st, 2, &g));
    TH_CHECK(name, g.numel == 0 && g.ndim == 2 && g.shape[1] == 5);
    TH_OK(name, NULL, nncl_safetensors_get(st, 3, &g));
    TH_CHECK(name, g.data[0] == 1.0f && g.data[1] == -3.0f && strcmp(g.dtype, "BF16") == 0);
    TH_OK(name, NULL, nncl_safetensors_get(st, 4, &g));
    TH_CHECK(name, isinf(g.data[0]) && g.data[0] > 0 && isnan(g.data[1]) && g.data[2] == 0.0f && signbit(g.data[2]));
    nncl_safetensors_free(st);
    st = NULL;
    {
        /* No tensors, no metadata: valid and empty. */
        unsigned char e[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        TH_OK(name, NULL, nncl_safetensors_parse(e, 10, "empty", &st));
        TH_CHECK(name, nncl_safetensors_count(st) == 0 && nncl_safetensors_find(st, "a") == -1);
        nncl_safetensors_free(st);
    }
    th_pass(name);
    return 0;
}

static int test_file_errors(void) {
    const char *name = "safetensors load: missing, truncated and directory files";
    nncl_safetensors *st = NULL;
    char path[512];
    size_t n = sizeof torch_bytes - 1;
    path_in_tmp(path, sizeof path, "does-not-exist.safetensors");
    TH_CHECK(name, nncl_safetensors_load(path, &st) == NNCL_ERR_IO && st == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "does-not-exist") != NULL);
    TH_CHECK(name, nncl_safetensors_load(tmpdir, &st) == NNCL_ERR_IO);
    path_in_tmp(path, sizeof path, "cut.safetensors");
    TH_CHECK(name, write_bytes(path, torch_bytes, n - 3) == 0);
    TH_CHECK(name, nncl_safetensors_load(path, &st) == NNCL_ERR_FORMAT && st == NULL);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "cut.safetensors") && strstr(nncl_last_error(NULL), "'b'"));
    TH_CHECK(name, write_bytes(path, torch_bytes, 20) == 0);
    TH_CHECK(name, nncl_safetensors_load(path, &st) == NNCL_ERR_FORMAT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "truncated") != NULL);
    TH_CHECK(name, write_bytes(path, torch_bytes, 3) == 0);
    TH_CHECK(name, nncl_safetensors_load(path, &st) == NNCL_ERR_FORMAT);
    TH_CHECK(name, nncl_safetensors_load(NULL, &st) == NNCL_ERR_INVALID_ARGUMENT);
    th_pass(name);
    return 0;
}

static int test_save_arguments(void) {
    const char *name = "safetensors save rejects bad tensors and metadata";
    float x[2] = {1, 2};
    nncl_safetensors_entry e[2];
    char path[512];
    const char *meta_odd[] = {"key", NULL};
    const char *meta_dup[] = {"k", "1", "k", "2", NULL};
    const char *meta_fmt[] = {"format", "np", NULL};
    nncl_safetensors *st = NULL;
    path_in_tmp(path, sizeof path, "args.safetensors");
    memset(e, 0, sizeof e);
    e[0].name = "x"; e[0].ndim = 1; e[0].shape[0] = 2; e[0].data = x;
    e[1] = e[0];
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "'x' given twice") != NULL);
    e[1].name = "__metadata__";
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    e[1].name = "";
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    e[1].name = "bad\xff";
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    e[1].name = "y";
    e[1].ndim = 9;
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    e[1].ndim = 1;
    e[1].shape[0] = -1;
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    e[1].shape[0] = 2;
    e[1].data = NULL;
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "'y'") != NULL);
    e[1].data = x;
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, meta_odd) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, nncl_safetensors_save(path, e, 2, meta_dup) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, nncl_safetensors_save(path, e, -1, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    TH_CHECK(name, nncl_safetensors_save(NULL, e, 2, NULL) == NNCL_ERR_INVALID_ARGUMENT);
    {
        FILE *f = fopen(path, "rb");
        TH_CHECK(name, f == NULL); /* nothing was written */
    }
    TH_OK(name, NULL, nncl_safetensors_save(path, e, 2, meta_fmt));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    TH_CHECK(name, strcmp(nncl_safetensors_meta(st, "format"), "np") == 0 && nncl_safetensors_meta_count(st) == 1);
    nncl_safetensors_free(st);
    /* No tensors at all is a valid file. */
    TH_OK(name, NULL, nncl_safetensors_save(path, NULL, 0, NULL));
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    TH_CHECK(name, nncl_safetensors_count(st) == 0);
    nncl_safetensors_free(st);
    th_pass(name);
    return 0;
}

/* ------------------------------------------------------------ atomic write */

#if !defined(_WIN32)
/* Number of entries of tmpdir whose name holds ".tmp.". */
static int count_temp_files(void) {
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    int n = 0;
    if (!d) return -1;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}
#endif

static int test_atomic(void) {
    const char *name = "safetensors atomic write: failures leave the old file untouched";
    float x[2] = {1, 2};
    nncl_safetensors_entry e;
    char path[512];
    unsigned char *before, *after;
    size_t nb, na;
    memset(&e, 0, sizeof e);
    e.name = "x"; e.ndim = 1; e.shape[0] = 2; e.data = x;
    path_in_tmp(path, sizeof path, "no/such/folder/x.safetensors");
    TH_CHECK(name, nncl_safetensors_save(path, &e, 1, NULL) == NNCL_ERR_IO);
    TH_CHECK(name, strstr(nncl_last_error(NULL), "no/such/folder") != NULL);

    path_in_tmp(path, sizeof path, "keep.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, NULL));
    before = slurp(path, &nb);
    TH_CHECK(name, before != NULL);
#if !defined(_WIN32)
    {
        /* A write that fails half way (file size limit) must leave the old
         * file as it was and no temporary file behind. */
        static float big[1 << 18];
        struct rlimit old, lim;
        nncl_status s;
        e.shape[0] = 1 << 18;
        e.data = big;
        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 65536;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            s = nncl_safetensors_save(path, &e, 1, NULL);
            setrlimit(RLIMIT_FSIZE, &old);
            TH_CHECK(name, s == NNCL_ERR_IO);
            TH_CHECK(name, strstr(nncl_last_error(NULL), "untouched") != NULL);
            after = slurp(path, &na);
            TH_CHECK(name, after && na == nb && memcmp(before, after, nb) == 0);
            free(after);
            TH_CHECK(name, count_temp_files() == 0);
        } else {
            th_skip("safetensors atomic write under a file size limit", "setrlimit failed");
        }
        /* Renaming onto a folder fails at the last step: cleaned up too. */
        {
            char dir[512];
            path_in_tmp(dir, sizeof dir, "a_folder");
            TH_CHECK(name, mkdir(dir, 0755) == 0);
            e.shape[0] = 2;
            e.data = x;
            TH_CHECK(name, nncl_safetensors_save(dir, &e, 1, NULL) == NNCL_ERR_IO);
            TH_CHECK(name, strstr(nncl_last_error(NULL), "rename") != NULL);
            TH_CHECK(name, count_temp_files() == 0);
            rmdir(dir);
        }
    }
#endif
    /* A good write replaces the file whole. */
    {
        float y[3] = {7, 8, 9};
        nncl_safetensors *st = NULL;
        e.shape[0] = 3;
        e.data = y;
        TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, NULL));
        TH_OK(name, NULL, nncl_safetensors_load(path, &st));
        TH_CHECK(name, nncl_safetensors_count(st) == 1);
        nncl_safetensors_free(st);
    }
    free(before);
    th_pass(name);
    return 0;
}

#if !defined(_WIN32)
/* Creates an empty file at tmpdir/name. */
static int touch_in_tmp(const char *name) {
    char path[512];
    FILE *f;
    path_in_tmp(path, sizeof path, name);
    f = fopen(path, "wb");
    return f ? fclose(f) : -1;
}

static int exists_in_tmp(const char *name) {
    char path[512];
    struct stat sb;
    path_in_tmp(path, sizeof path, name);
    return stat(path, &sb) == 0;
}

/* A write killed before its rename leaves NAME.tmp.PID.N: the next save of
 * NAME removes those of dead processes, and nothing else. */
static int test_stale_temporaries(void) {
    const char *name = "safetensors save removes the temporaries of dead processes";
    float x[1] = {1};
    nncl_safetensors_entry e;
    char path[512], dead[96], live[96], other[96], odd[96];
    pid_t child = fork();
    if (child == 0) _exit(0);
    TH_CHECK(name, child > 0 && waitpid(child, NULL, 0) == child); /* a process id that no longer runs */
    snprintf(dead, sizeof dead, "s.safetensors.tmp.%ld.0", (long)child);
    snprintf(live, sizeof live, "s.safetensors.tmp.%ld.999", (long)getpid());
    snprintf(other, sizeof other, "t.safetensors.tmp.%ld.0", (long)child);
    snprintf(odd, sizeof odd, "s.safetensors.tmp.%ld.0x", (long)child);
    TH_CHECK(name, !touch_in_tmp(dead) && !touch_in_tmp(live) && !touch_in_tmp(other) && !touch_in_tmp(odd));
    memset(&e, 0, sizeof e);
    e.name = "x"; e.ndim = 1; e.shape[0] = 1; e.data = x;
    path_in_tmp(path, sizeof path, "s.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, &e, 1, NULL));
    TH_CHECK(name, !exists_in_tmp(dead));
    TH_CHECK(name, exists_in_tmp(live) && exists_in_tmp(other) && exists_in_tmp(odd));
    th_pass(name);
    return 0;
}
#endif

/* ------------------------------------------------------------ main */

static void remove_tmpdir(void) {
#if !defined(_WIN32)
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    char p[1024];
    if (!d) return;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(tmpdir);
#endif
}

/* F16 and BF16 on request: each element rounded to nearest even as
 * PyTorch's .to(torch.float16 / torch.bfloat16) does (the bit patterns
 * below are PyTorch's, from numpy and torch 2.15), overflow to Inf, NaN kept
 * a NaN; the reader gives back the rounded values, the dtype named. */
static const float hv_in[24] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1.00048828f, 1.00146484f,
                                5.96046448e-08f, 2.98023224e-08f, 4.47034836e-08f, 6.10351562e-05f, 6.10053539e-05f,
                                0.100000001f, -3.14159274f, INFINITY, -INFINITY, 1e+10f, 1.00000001e-10f, 1.00390625f,
                                1.01171875f, 3.38999991e+38f, -1.00000012f};
static const unsigned short hv_f16[24] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7bff, 0x7c00, 0x3c00,
                                          0x3c02, 0x0001, 0x0000, 0x0001, 0x0400, 0x0400, 0x2e66, 0xc248,
                                          0x7c00, 0xfc00, 0x7c00, 0x0000, 0x3c04, 0x3c0c, 0x7c00, 0xbc00};
static const unsigned short hv_bf16[24] = {0x0000, 0x8000, 0x3f80, 0xc020, 0x4780, 0x4780, 0x4780, 0x3f80,
                                           0x3f80, 0x3380, 0x3300, 0x3340, 0x3880, 0x3880, 0x3dcd, 0xc049,
                                           0x7f80, 0xff80, 0x5015, 0x2edc, 0x3f80, 0x3f82, 0x7f7f, 0xbf80};

static int test_half_write(void) {
    const char *name = "safetensors F16 and BF16 on request: PyTorch's rounding, bits and read-back";
    float in[25];
    nncl_safetensors_entry e[3];
    nncl_safetensors *st = NULL;
    char path[512];
    unsigned char *bytes;
    size_t size, hdr;
    int k, i;
    memcpy(in, hv_in, sizeof hv_in);
    in[24] = NAN;
    memset(e, 0, sizeof e);
    e[0].name = "h"; e[0].ndim = 1; e[0].shape[0] = 25; e[0].data = in; strcpy(e[0].dtype, "F16");
    e[1].name = "b"; e[1].ndim = 1; e[1].shape[0] = 25; e[1].data = in; strcpy(e[1].dtype, "BF16");
    e[2].name = "f"; e[2].ndim = 1; e[2].shape[0] = 25; e[2].data = in; strcpy(e[2].dtype, "I64"); /* F32 */
    path_in_tmp(path, sizeof path, "half.safetensors");
    TH_OK(name, NULL, nncl_safetensors_save(path, e, 3, NULL));
    bytes = slurp(path, &size);
    TH_CHECK(name, bytes != NULL && size > 8);
    hdr = 8 + (size_t)bytes[0] + ((size_t)bytes[1] << 8);
    TH_CHECK(name, size == hdr + 25 * 2 + 25 * 2 + 25 * 4);
    for (k = 0; k < 2; k++)
        for (i = 0; i < 25; i++) {
            const unsigned char *p = bytes + hdr + (size_t)k * 50 + 2 * (size_t)i;
            unsigned got = (unsigned)p[0] | (unsigned)p[1] << 8, want = i < 24 ? (k ? hv_bf16[i] : hv_f16[i]) : 0;
            if (i == 24 ? (k ? (got & 0x7f80u) != 0x7f80u || !(got & 0x7fu) : (got & 0x7c00u) != 0x7c00u || !(got & 0x3ffu))
                        : got != want) {
                th_fail(name, "%s of %.9g: 0x%04x, PyTorch 0x%04x", k ? "BF16" : "F16", (double)in[i], got, want);
                free(bytes);
                return 1;
            }
        }
    free(bytes);
    TH_OK(name, NULL, nncl_safetensors_load(path, &st));
    for (k = 0; k < 3; k++) {
        nncl_safetensors_entry g;
        TH_OK(name, NULL, nncl_safetensors_get(st, k, &g));
        TH_CHECK(name, strcmp(g.dtype, k == 0 ? "F16" : k == 1 ? "BF16" : "F32") == 0 && g.numel == 25);
        for (i = 0; i < 24; i++) {
            uint32_t bits = (uint32_t)(k == 1 ? hv_bf16[i] : 0) << 16;
            float want = in[i];
            if (k == 1) memcpy(&want, &bits, 4);
            if (k == 0) { /* half to float by hand: sign, exponent, mantissa */
                unsigned h = hv_f16[i], ex = (h >> 10) & 31u, man = h & 1023u;
                double v = ex == 31 ? HUGE_VAL : ex ? ldexp(1024.0 + man, (int)ex - 25) : ldexp((double)man, -24);
                want = (float)((h & 0x8000u) ? -v : v);
            }
            TH_CHECK(name, memcmp(&g.data[i], &want, 4) == 0);
        }
        TH_CHECK(name, isnan(g.data[24]));
    }
    nncl_safetensors_free(st);
    th_pass(name);
    return 0;
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nncl-st-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        th_fail("safetensors setup", "mkdtemp %s failed", tmpdir);
        return 1;
    }
    test_round_trip();
    test_half_write();
    test_layout();
    test_torch_bytes();
    test_expect();
    test_reference_files();
    test_hostile();
    test_integer_dtypes();
    test_unusual_valid();
    test_file_errors();
    test_save_arguments();
    test_atomic();
#if !defined(_WIN32)
    test_stale_temporaries();
#endif
    remove_tmpdir();
    return th_exit_code();
}
