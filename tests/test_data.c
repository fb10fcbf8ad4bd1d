/* test_data.c - the data pipeline: IDX round trips for every element type
 * and hostile IDX/gzip input, CSV parsing and its error positions, dataset
 * shuffle/split/standardisation, the prefetching loader, and the real
 * Fashion-MNIST and iris files when present. Host only, no OpenCL. */
#include "harness.h"
#include "runtime/internal.h" /* nncl__read_file_max */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef NNCL_HAVE_ZLIB
#include <zlib.h>
#endif

#define CHECK(name, cond) TH_CHECK(name, cond)
#define OKC(name, call) TH_OK(name, NULL, call)

static const char *g_argv0 = "";

static int err_has(const char *part) { return strstr(nncl_last_error(NULL), part) != NULL; }

/* A failing check that also prints the last error message. */
#define CHECK_ERR(name, call, want, part)                                                            \
    do {                                                                                             \
        nncl_status st_ = (call);                                                                    \
        if (st_ != (want) || !err_has(part)) {                                                       \
            th_fail(name, "%s:%d: %s -> %s '%s', wanted %s with '%s'", __FILE__, __LINE__, #call,      \
                    nncl_status_str(st_), nncl_last_error(NULL), nncl_status_str(want), part);         \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* ------------------------------------------------------------------ IDX */

static void put_be(unsigned char *p, uint64_t v, int bytes) {
    int i;
    for (i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static size_t type_size(int type) {
    switch (type) {
    case NNCL_IDX_U8: case NNCL_IDX_I8: return 1;
    case NNCL_IDX_I16: return 2;
    case NNCL_IDX_I32: case NNCL_IDX_F32: return 4;
    default: return 8;
    }
}

/* Encodes an IDX file in memory; returns its size. */
static size_t make_idx(unsigned char *buf, int type, int ndim, const uint32_t *dims, const double *vals, size_t count) {
    size_t es = type_size(type), i, off;
    int k;
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = (unsigned char)type;
    buf[3] = (unsigned char)ndim;
    for (k = 0; k < ndim; k++) put_be(buf + 4 + 4 * k, dims[k], 4);
    off = 4 + 4 * (size_t)ndim;
    for (i = 0; i < count; i++) {
        uint64_t u = 0;
        double v = vals[i];
        if (type == NNCL_IDX_F32) {
            float f = (float)v;
            uint32_t w;
            memcpy(&w, &f, 4);
            u = w;
        } else if (type == NNCL_IDX_F64) {
            memcpy(&u, &v, 8);
        } else {
            int64_t s = (int64_t)v;
            u = (uint64_t)s;
        }
        put_be(buf + off + i * es, u, (int)es);
    }
    return off + count * es;
}

static int test_idx_types(void) {
    const char *T = "data idx round trip, every type";
    static const int types[6] = {NNCL_IDX_U8, NNCL_IDX_I8, NNCL_IDX_I16, NNCL_IDX_I32, NNCL_IDX_F32, NNCL_IDX_F64};
    uint32_t dims[3] = {3, 2, 2};
    double vals[12];
    unsigned char buf[4 + 12 + 12 * 8];
    int t;
    for (t = 0; t < 6; t++) {
        nncl_idx a;
        size_t i, sz;
        for (i = 0; i < 12; i++) {
            switch (types[t]) {
            case NNCL_IDX_U8: vals[i] = (double)(i * 23 % 256); break;
            case NNCL_IDX_I8: vals[i] = (double)((int)(i * 23 % 256) - 128); break;
            case NNCL_IDX_I16: vals[i] = (double)((int)i * 5431 - 32768); break;
            case NNCL_IDX_I32: vals[i] = i == 0 ? -2147483648.0 : (double)((int)i * 123457 - 1000000); break;
            case NNCL_IDX_F32: vals[i] = ((double)i - 5.5) * 0.375; break;
            default: vals[i] = ((double)i - 5.5) * 1e-3; break;
            }
        }
        if (types[t] == NNCL_IDX_F32) vals[11] = (double)FLT_MAX;
        sz = make_idx(buf, types[t], 3, dims, vals, 12);
        OKC(T, nncl_idx_parse(buf, sz, "mem.idx", &a));
        CHECK(T, a.type == types[t] && a.ndim == 3 && a.count == 12);
        CHECK(T, a.dims[0] == 3 && a.dims[1] == 2 && a.dims[2] == 2 && a.dims[3] == 0);
        for (i = 0; i < 12; i++)
            if (a.data[i] != (float)vals[i]) {
                th_fail(T, "type 0x%02x element %zu: got %.9g want %.9g", types[t], i, (double)a.data[i], vals[i]);
                nncl_idx_free(&a);
                return 1;
            }
        nncl_idx_free(&a);
        CHECK(T, a.data == NULL && a.count == 0);
    }
    return 0;
}

static int test_idx_endian(void) {
    const char *T = "data idx big-endian decoding";
    /* i16 0x0102 = 258 (513 if read little-endian); dims 0x00000002 */
    static const unsigned char i16[] = {0, 0, 0x0B, 1, 0, 0, 0, 2, 0x01, 0x02, 0xFF, 0xFE};
    /* f32 1.5 = 0x3FC00000; f64 -2.5 = 0xC004000000000000; f64 1e300 -> +Inf */
    static const unsigned char f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0};
    static const unsigned char f64[] = {0, 0, 0x0E, 2, 0, 0, 0, 1, 0, 0, 0, 2,
                                        0xC0, 0x04, 0, 0, 0, 0, 0, 0, 0x7E, 0x37, 0xE4, 0x3C, 0x88, 0x00, 0x75, 0x9C};
    nncl_idx a;
    OKC(T, nncl_idx_parse(i16, sizeof i16, NULL, &a));
    CHECK(T, a.count == 2 && a.data[0] == 258.0f && a.data[1] == -2.0f);
    nncl_idx_free(&a);
    OKC(T, nncl_idx_parse(f32, sizeof f32, NULL, &a));
    CHECK(T, a.count == 1 && a.data[0] == 1.5f);
    nncl_idx_free(&a);
    OKC(T, nncl_idx_parse(f64, sizeof f64, NULL, &a));
    CHECK(T, a.ndim == 2 && a.count == 2 && a.data[0] == -2.5f && isinf(a.data[1]) && a.data[1] > 0);
    nncl_idx_free(&a);
    nncl_idx_free(NULL);
    return 0;
}

static int test_idx_hostile(void) {
    const char *T = "data idx hostile headers";
    unsigned char buf[64];
    uint32_t dims[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    uint32_t d2[2] = {2, 3};
    double v[6] = {1, 2, 3, 4, 5, 6};
    size_t sz, cut;
    nncl_idx a;
    /* every truncation of a valid file fails cleanly, zeroed */
    sz = make_idx(buf, NNCL_IDX_I16, 2, d2, v, 6);
    for (cut = 0; cut < sz; cut++) {
        nncl_status st = nncl_idx_parse(buf, cut, "cut.idx", &a);
        CHECK(T, st == NNCL_ERR_FORMAT && a.data == NULL && a.count == 0 && err_has("cut.idx"));
    }
    CHECK_ERR(T, nncl_idx_parse(buf, 3, "h.idx", &a), NNCL_ERR_FORMAT, "header truncated");
    CHECK_ERR(T, nncl_idx_parse(buf, 10, "h.idx", &a), NNCL_ERR_FORMAT, "header truncated");
    CHECK_ERR(T, nncl_idx_parse(buf, sz - 1, "m.idx", &a), NNCL_ERR_FORMAT, "size mismatch");
    buf[sz] = 7; /* one byte too many */
    CHECK_ERR(T, nncl_idx_parse(buf, sz + 1, "m.idx", &a), NNCL_ERR_FORMAT, "size mismatch");
    /* product of 4 dims of 2^32-1 overflows 64 bits */
    sz = make_idx(buf, NNCL_IDX_U8, 4, dims, v, 0);
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "o.idx", &a), NNCL_ERR_FORMAT, "overflow");
    /* a huge product that fits size_t still must match the bytes present */
    sz = make_idx(buf, NNCL_IDX_F64, 2, dims, v, 0);
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "o.idx", &a), NNCL_ERR_FORMAT, "o.idx");
    sz = make_idx(buf, NNCL_IDX_U8, 2, d2, v, 6);
    buf[0] = 1;
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "b.idx", &a), NNCL_ERR_FORMAT, "magic");
    buf[0] = 0;
    buf[2] = 0x0A;
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "b.idx", &a), NNCL_ERR_FORMAT, "element type 0x0a");
    buf[2] = 0x08;
    buf[3] = 0;
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "b.idx", &a), NNCL_ERR_FORMAT, "0 dimensions");
    buf[3] = 9;
    CHECK_ERR(T, nncl_idx_parse(buf, sz, "b.idx", &a), NNCL_ERR_UNSUPPORTED, "9 dimensions");
    CHECK_ERR(T, nncl_idx_parse(NULL, 0, NULL, &a), NNCL_ERR_FORMAT, "<memory>");
    CHECK_ERR(T, nncl_idx_load("/nonexistent/dir/x.idx", &a), NNCL_ERR_IO, "/nonexistent/dir/x.idx");
    CHECK(T, a.data == NULL);
    /* a folder opens for reading, with no size to trust */
    CHECK_ERR(T, nncl_idx_load("/tmp", &a), NNCL_ERR_IO, "folder");
    return 0;
}

#ifdef NNCL_HAVE_ZLIB
static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    if (fwrite(p, 1, n, f) != n) {
        fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}
#endif

#ifdef NNCL_HAVE_ZLIB
/* gzip of src into dst (room for cap bytes); its size, 0 on failure. */
static size_t gz_compress(const unsigned char *src, size_t n, unsigned char *dst, size_t cap) {
    z_stream zs;
    size_t out;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    zs.next_in = (Bytef *)src;
    zs.avail_in = (uInt)n;
    zs.next_out = dst;
    zs.avail_out = (uInt)cap;
    out = deflate(&zs, Z_FINISH) == Z_STREAM_END ? (size_t)zs.total_out : 0;
    deflateEnd(&zs);
    return out;
}

/* A field of /proc/self/status in kB ("VmPeak"), or -1 where there is none. */
static long proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* A gzip bomb: 64 MB of zeros behind an IDX header that asks for 2 bytes
 * (about 64 KB compressed, streamed so that the test never holds the 64 MB).
 * Refused, and the reader's address space grows by far less than the size
 * the gzip trailer claims: it sizes its buffer from the header alone. Run
 * first, while the process's peak is still its size. */
static int test_idx_gzip_bomb(void) {
    const char *T = "data idx gzip bomb costs no more memory than its header";
    static unsigned char zeros[1 << 20], head[16];
    uint32_t small[1] = {2};
    double v[2] = {1, 2};
    size_t cap = 1 << 20, hn;
    unsigned char *gz = (unsigned char *)malloc(cap);
    z_stream zs;
    nncl_idx a;
    long before, after;
    int k, ok;
    memset(&zs, 0, sizeof zs);
    hn = make_idx(head, NNCL_IDX_U8, 1, small, v, 2);
    if (!gz || deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(gz);
        th_fail(T, "zlib set-up failed");
        return 1;
    }
    zs.next_out = gz;
    zs.avail_out = (uInt)cap;
    zs.next_in = head;
    zs.avail_in = (uInt)hn;
    ok = deflate(&zs, Z_NO_FLUSH) == Z_OK;
    for (k = 0; k < 64 && ok; k++) {
        zs.next_in = zeros;
        zs.avail_in = sizeof zeros;
        ok = deflate(&zs, k == 63 ? Z_FINISH : Z_NO_FLUSH) == (k == 63 ? Z_STREAM_END : Z_OK);
    }
    deflateEnd(&zs);
    before = proc_status_kb("VmSize");
    if (!ok) {
        free(gz);
        th_fail(T, "compressing the bomb failed");
        return 1;
    }
    if (nncl_idx_parse(gz, (size_t)zs.total_out, "bomb.gz", &a) != NNCL_ERR_FORMAT || !err_has("more than the 10 bytes")) {
        free(gz);
        th_fail(T, "not refused: %s", nncl_last_error(NULL));
        return 1;
    }
    after = proc_status_kb("VmPeak");
    free(gz);
    if (before < 0 || after < 0) {
        th_skip(T, "no /proc/self/status to read the address space from (refusal checked)");
        return -1;
    }
    if (after - before > 16 * 1024) {
        th_fail(T, "the address space grew by %ld kB for a header of 10 bytes", after - before);
        return 1;
    }
    return 0;
}

/* A gzip file inflates only as far as its IDX header allows. */
static int test_idx_gzip_limits(void) {
    const char *T = "data idx gzip held to the header's size";
    enum { BIG = 1 << 20 };
    unsigned char *raw = (unsigned char *)calloc(BIG, 1), *gz = (unsigned char *)malloc(BIG);
    uint32_t small[1] = {2}, huge[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
    double v[2] = {1, 2};
    size_t gzsz;
    nncl_idx a;
    int rc = 1;
    /* header says 2 bytes, the stream holds a megabyte of zeros */
    make_idx(raw, NNCL_IDX_U8, 1, small, v, 2);
    gzsz = gz_compress(raw, BIG, gz, BIG);
    if (!gzsz || nncl_idx_parse(gz, gzsz, "bomb.gz", &a) != NNCL_ERR_FORMAT || !err_has("more than the 10 bytes")) {
        th_fail(T, "oversized stream: %s", nncl_last_error(NULL));
        goto done;
    }
    /* header claims 2^64 - 2^33 bytes: refused before inflating the rest */
    gzsz = gz_compress(raw, make_idx(raw, NNCL_IDX_U8, 2, huge, v, 0) + 100, gz, BIG);
    if (!gzsz || nncl_idx_parse(gz, gzsz, "huge.gz", &a) != NNCL_ERR_FORMAT || !err_has("limit")) {
        th_fail(T, "huge header: %s", nncl_last_error(NULL));
        goto done;
    }
    /* header asks for 100 MB that 1 KB of gzip cannot hold: refused before its buffer exists */
    small[0] = 100000000;
    gzsz = gz_compress(raw, make_idx(raw, NNCL_IDX_U8, 1, small, v, 0) + 100, gz, BIG);
    if (!gzsz || nncl_idx_parse(gz, gzsz, "tall.gz", &a) != NNCL_ERR_FORMAT || !err_has("can inflate to")) {
        th_fail(T, "header beyond what the file can hold: %s", nncl_last_error(NULL));
        goto done;
    }
    /* a bad header inside gzip is reported as such */
    raw[0] = 7;
    gzsz = gz_compress(raw, 1000, gz, BIG);
    if (!gzsz || nncl_idx_parse(gz, gzsz, "magic.gz", &a) != NNCL_ERR_FORMAT || !err_has("magic")) {
        th_fail(T, "bad magic in gzip: %s", nncl_last_error(NULL));
        goto done;
    }
    rc = 0;
done:
    free(raw);
    free(gz);
    return rc;
}
#else
static int test_idx_gzip_limits(void) {
    th_skip("data idx gzip held to the header's size", "built without zlib");
    return -1;
}
static int test_idx_gzip_bomb(void) {
    th_skip("data idx gzip bomb costs no more memory than its header", "built without zlib");
    return -1;
}
#endif

static int test_idx_gzip(void) {
    const char *T = "data idx gzip";
#ifdef NNCL_HAVE_ZLIB
    enum { N = 5000 };
    uint32_t dims[2] = {50, 100};
    double *v = (double *)malloc(N * sizeof(double));
    unsigned char *raw = (unsigned char *)malloc(N + 16), *gz = (unsigned char *)malloc(2 * N + 256);
    unsigned char *two = (unsigned char *)malloc(4 * N + 512), *bad = (unsigned char *)malloc(2 * N + 256);
    size_t rawsz, gzsz = 0, gz1 = 0, gz2 = 0, i, cut;
    char path[] = "/tmp/nncl-test-idx-XXXXXX";
    nncl_idx a, b;
    z_stream zs;
    int fd, parts, rc = 1;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    for (i = 0; i < N; i++) v[i] = (double)((i * 7 + i / 13) % 256);
    rawsz = make_idx(raw, NNCL_IDX_U8, 2, dims, v, N);
    /* one member of the whole file, and two members of its halves */
    for (parts = 0; parts < 3; parts++) {
        const unsigned char *src = parts == 2 ? raw + rawsz / 2 : raw;
        size_t srcn = parts == 0 ? rawsz : parts == 1 ? rawsz / 2 : rawsz - rawsz / 2;
        unsigned char *dst = parts == 0 ? gz : two + gz1;
        memset(&zs, 0, sizeof zs);
        if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) goto done;
        zs.next_in = (Bytef *)src;
        zs.avail_in = (uInt)srcn;
        zs.next_out = dst;
        zs.avail_out = (uInt)(2 * N + 256);
        if (deflate(&zs, Z_FINISH) != Z_STREAM_END) goto done;
        if (parts == 0) gzsz = zs.total_out;
        else if (parts == 1) gz1 = zs.total_out;
        else gz2 = zs.total_out;
        deflateEnd(&zs);
    }
    if (nncl_idx_parse(gz, gzsz, "g.idx.gz", &a) != NNCL_OK) {
        th_fail(T, "parse gzip: %s", nncl_last_error(NULL));
        goto done;
    }
    if (nncl_idx_parse(raw, rawsz, "g.idx", &b) != NNCL_OK) goto done;
    if (a.count != N || memcmp(a.data, b.data, N * sizeof(float)) != 0 || a.dims[1] != 100) {
        th_fail(T, "gzip and plain parse differ");
        goto done;
    }
    nncl_idx_free(&a);
    if (nncl_idx_parse(two, gz1 + gz2, "two.gz", &a) != NNCL_OK || a.count != N ||
        memcmp(a.data, b.data, N * sizeof(float)) != 0) {
        th_fail(T, "two gzip members: %s", nncl_last_error(NULL));
        goto done;
    }
    nncl_idx_free(&a);
    /* every truncation is a format error naming the file, never a short read */
    for (cut = 2; cut < gzsz; cut += (cut < 40 || cut > gzsz - 20) ? 1 : 97) {
        nncl_status st = nncl_idx_parse(gz, cut, "t.gz", &a);
        if (st != NNCL_ERR_FORMAT || a.data || !err_has("t.gz")) {
            th_fail(T, "gzip cut to %zu of %zu bytes: %s: %s", cut, gzsz, nncl_status_str(st), nncl_last_error(NULL));
            goto done;
        }
    }
    /* a flipped bit in the data, and in the CRC and length trailer */
    for (i = 0; i < 3; i++) {
        size_t at = i == 0 ? gzsz / 2 : i == 1 ? gzsz - 6 : gzsz - 2;
        nncl_status st;
        memcpy(bad, gz, gzsz);
        bad[at] ^= 0x10;
        st = nncl_idx_parse(bad, gzsz, "c.gz", &a);
        if (st != NNCL_ERR_FORMAT || a.data) {
            th_fail(T, "gzip corrupted at byte %zu: %s: %s", at, nncl_status_str(st), nncl_last_error(NULL));
            goto done;
        }
    }
    /* garbage after the stream */
    memcpy(bad, gz, gzsz);
    bad[gzsz] = 'x';
    if (nncl_idx_parse(bad, gzsz + 1, "c.gz", &a) != NNCL_ERR_FORMAT || !err_has("garbage")) {
        th_fail(T, "garbage after gzip accepted: %s", nncl_last_error(NULL));
        goto done;
    }
    /* from a file */
    fd = mkstemp(path);
    if (fd < 0 || write_file(path, gz, gzsz)) {
        th_fail(T, "cannot write %s", path);
        goto done;
    }
    close(fd);
    if (nncl_idx_load(path, &a) != NNCL_OK || a.count != N || memcmp(a.data, b.data, N * sizeof(float)) != 0) {
        th_fail(T, "nncl_idx_load(%s): %s", path, nncl_last_error(NULL));
        remove(path);
        goto done;
    }
    remove(path);
    rc = 0;
done:
    nncl_idx_free(&a);
    nncl_idx_free(&b);
    free(v);
    free(raw);
    free(gz);
    free(two);
    free(bad);
    return rc;
#else
    static const unsigned char gzmagic[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    nncl_idx a;
    T = "data idx gzip refused as UNSUPPORTED, naming zlib and the file (built without zlib)";
    CHECK_ERR(T, nncl_idx_parse(gzmagic, sizeof gzmagic, "g.gz", &a), NNCL_ERR_UNSUPPORTED, "zlib");
    CHECK(T, err_has("g.gz"));
    th_pass("%s", T);
    th_skip("data idx gzip", "built without zlib");
    return -1; /* its own lines: not the PASS of the decompression */
#endif
}

/* ------------------------------------------------------------------ CSV */

static nncl_status csv_str(const char *text, const nncl_csv_options *o, nncl_csv *t) {
    return nncl_csv_parse(text, strlen(text), "t.csv", o, t);
}

static int test_csv_good(void) {
    const char *T = "data csv parsing";
    nncl_csv t;
    nncl_csv_options o = nncl_csv_options_default();
    const char *classes[3] = {"zebra", "ant", "cat"};
    /* BOM, CRLF, spaces, quotes with "" and a line break, blank lines, no final newline */
    const char *txt = "\xEF\xBB\xBF" "a, \"b,x\" ,label\r\n"
                      "1,2.5,cat\r\n"
                      "\r\n"
                      " -3e2 , \"4\",\"do\"\"g\nhouse\"\n"
                      "+.5,6.,cat\n"
                      "   \n"
                      "7,8,ant";
    OKC(T, csv_str(txt, NULL, &t));
    CHECK(T, t.rows == 4 && t.cols == 2 && t.label_column == 2);
    CHECK(T, strcmp(t.feature_names[0], "a") == 0 && strcmp(t.feature_names[1], "b,x") == 0);
    CHECK(T, strcmp(t.label_name, "label") == 0);
    CHECK(T, t.features[0] == 1 && t.features[1] == 2.5f && t.features[2] == -300 && t.features[3] == 4);
    CHECK(T, t.features[4] == 0.5f && t.features[5] == 6 && t.features[6] == 7 && t.features[7] == 8);
    /* classes sorted by strcmp: ant, cat, do"g\nhouse */
    CHECK(T, t.n_classes == 3 && t.class_names);
    CHECK(T, strcmp(t.class_names[0], "ant") == 0 && strcmp(t.class_names[1], "cat") == 0 &&
                 strcmp(t.class_names[2], "do\"g\nhouse") == 0);
    CHECK(T, t.labels[0] == 1 && t.labels[1] == 2 && t.labels[2] == 1 && t.labels[3] == 0);
    nncl_csv_free(&t);
    CHECK(T, t.features == NULL && t.rows == 0);
    nncl_csv_free(NULL);

    /* label by name in the middle; numeric class labels (AUTO) */
    o.label = "y";
    OKC(T, csv_str("f1,y,f2\n1,0,2\n3,4,5\n", &o, &t));
    CHECK(T, t.cols == 2 && t.label_column == 1 && t.n_classes == 5 && t.class_names == NULL);
    CHECK(T, t.features[0] == 1 && t.features[1] == 2 && t.features[2] == 3 && t.features[3] == 5);
    CHECK(T, t.labels[0] == 0 && t.labels[1] == 4);
    CHECK(T, strcmp(t.feature_names[1], "f2") == 0 && strcmp(t.label_name, "y") == 0);
    nncl_csv_free(&t);
    /* label by index, semicolon delimiter */
    o = nncl_csv_options_default();
    o.label_index = 0;
    o.delimiter = ';';
    CHECK_ERR(T, csv_str("y;a\n2;1,5\n", &o, &t), NNCL_ERR_FORMAT, "line 2, column 2 (a): '1,5' is not a number");
    OKC(T, csv_str("y;a\n2;1.5\n", &o, &t));
    CHECK(T, t.rows == 1 && t.labels[0] == 2 && t.features[0] == 1.5f && t.n_classes == 3);
    nncl_csv_free(&t);
    /* AUTO falls back to names when a label is not an index */
    OKC(T, csv_str("a,y\n1,-1\n2,1\n3,1\n", NULL, &t));
    CHECK(T, t.n_classes == 2 && strcmp(t.class_names[0], "-1") == 0 && t.labels[0] == 0 && t.labels[2] == 1);
    nncl_csv_free(&t);
    /* NUMERIC: regression targets */
    o = nncl_csv_options_default();
    o.label_mode = NNCL_CSV_LABELS_NUMERIC;
    OKC(T, csv_str("a,y\n1,-1.25\n2,3e1\n", &o, &t));
    CHECK(T, t.n_classes == 0 && t.class_names == NULL && t.labels[0] == -1.25f && t.labels[1] == 30);
    nncl_csv_free(&t);
    /* CLASSES: digits as names, sorted as strings */
    o.label_mode = NNCL_CSV_LABELS_CLASSES;
    OKC(T, csv_str("a,y\n1,10\n2,9\n3,10\n", &o, &t));
    CHECK(T, t.n_classes == 2 && strcmp(t.class_names[0], "10") == 0 && t.labels[1] == 1 && t.labels[2] == 0);
    nncl_csv_free(&t);
    /* a given class list fixes the mapping */
    o = nncl_csv_options_default();
    o.classes = classes;
    o.n_classes = 3;
    OKC(T, csv_str("a,y\n1,cat\n2,zebra\n3,ant\n", &o, &t));
    CHECK(T, t.n_classes == 3 && t.labels[0] == 2 && t.labels[1] == 0 && t.labels[2] == 1);
    CHECK(T, strcmp(t.class_names[0], "zebra") == 0);
    nncl_csv_free(&t);
    CHECK_ERR(T, csv_str("a,y\n1,cat\n2,dog\n", &o, &t), NNCL_ERR_FORMAT, "t.csv:line 3, column 2 (y): class 'dog'");
    classes[1] = "zebra";
    CHECK_ERR(T, csv_str("a,y\n1,cat\n", &o, &t), NNCL_ERR_INVALID_ARGUMENT, "twice");
    return 0;
}

static int test_csv_bad(void) {
    const char *T = "data csv errors name line and column";
    nncl_csv t;
    nncl_csv_options o = nncl_csv_options_default();
    CHECK_ERR(T, csv_str("a,b,c\n1,2,x\n3,abc,y\n", NULL, &t), NNCL_ERR_FORMAT,
              "t.csv:line 3, column 2 (b): 'abc' is not a number");
    CHECK(T, t.rows == 0 && t.features == NULL);
    CHECK_ERR(T, csv_str("a,b,c\n1,,x\n", NULL, &t), NNCL_ERR_FORMAT, "t.csv:line 2, column 2 (b): empty field");
    /* a line break inside quotes moves the line count on */
    CHECK_ERR(T, csv_str("a,b,c\n1,2,\"x\ny\"\n3,4,z\n5,1e99,z\n", NULL, &t), NNCL_ERR_FORMAT,
              "t.csv:line 5, column 2 (b): '1e99' is beyond float range");
    CHECK_ERR(T, csv_str("a,b,c\n1,2,x\n3,4\n", NULL, &t), NNCL_ERR_FORMAT, "t.csv:line 3: row has 2 fields, the header has 3");
    CHECK_ERR(T, csv_str("a,b,c\n1,2,x,4\n", NULL, &t), NNCL_ERR_FORMAT, "t.csv:line 2: row has 4 fields");
    CHECK_ERR(T, csv_str("a,b,c\n1,2,\"x\n", NULL, &t), NNCL_ERR_FORMAT,
              "t.csv:line 2, column 3 (c): quoted field not closed");
    CHECK_ERR(T, csv_str("a,b,c\n1,2\"3,x\n", NULL, &t), NNCL_ERR_FORMAT, "t.csv:line 2, column 2 (b): quote inside");
    CHECK_ERR(T, csv_str("a,b,c\n1,\"2\"3,x\n", NULL, &t), NNCL_ERR_FORMAT,
              "t.csv:line 2, column 2 (b): unexpected '3' after the closing quote");
    CHECK_ERR(T, csv_str("", NULL, &t), NNCL_ERR_FORMAT, "t.csv: empty file");
    CHECK_ERR(T, csv_str("\n\n  \n", NULL, &t), NNCL_ERR_FORMAT, "empty file");
    CHECK_ERR(T, csv_str("a,b,c\n", NULL, &t), NNCL_ERR_FORMAT, "not followed by any data row");
    CHECK_ERR(T, csv_str("a\n1\n", NULL, &t), NNCL_ERR_FORMAT, "t.csv:line 1: the header has 1 column");
    CHECK_ERR(T, csv_str("a,b,c\n1,inf,x\n", NULL, &t), NNCL_ERR_FORMAT, "column 2 (b): 'inf' is not a number");
    CHECK_ERR(T, csv_str("a,b\nnan,1\n", NULL, &t), NNCL_ERR_FORMAT, "column 1 (a): 'nan' is not a number");
    CHECK_ERR(T, csv_str("a,b\n0x10,1\n", NULL, &t), NNCL_ERR_FORMAT, "'0x10' is not a number");
    CHECK_ERR(T, csv_str("a,b\n1.5.2,1\n", NULL, &t), NNCL_ERR_FORMAT, "'1.5.2' is not a number");
    CHECK_ERR(T, csv_str("a,b\n1,\n", NULL, &t), NNCL_ERR_FORMAT, "line 2, column 2 (b): empty label");
    CHECK_ERR(T, nncl_csv_parse("a,b\n1\0,2\n", 9, "n.csv", NULL, &t), NNCL_ERR_FORMAT, "n.csv:line 2, column 1 (a): NUL");
    o.label = "species";
    CHECK_ERR(T, csv_str("a,b\n1,2\n", &o, &t), NNCL_ERR_FORMAT, "t.csv:line 1: no column named 'species'");
    CHECK_ERR(T, csv_str("a,b\n1,2\n", &o, &t), NNCL_ERR_FORMAT, "the columns are 'a', 'b'");
    /* Case is ignored when it picks out one column only. */
    CHECK_ERR(T, csv_str("Species,b,SPECIES\n1,2,3\n", &o, &t), NNCL_ERR_FORMAT, "no column named 'species'");
    if (csv_str("a,Species\n1,2\n", &o, &t) != NNCL_OK || t.label_column != 1 || strcmp(t.label_name, "Species") != 0) {
        th_fail(T, "label 'species' did not pick column 'Species'");
        return 1;
    }
    nncl_csv_free(&t);
    o.label = NULL;
    o.label_index = 5;
    CHECK_ERR(T, csv_str("a,b\n1,2\n", &o, &t), NNCL_ERR_FORMAT, "label column index 5, but the header has 2");
    o.label_index = -1;
    o.label_mode = NNCL_CSV_LABELS_NUMERIC;
    CHECK_ERR(T, csv_str("a,b\n1,2\n3,x\n", &o, &t), NNCL_ERR_FORMAT, "line 3, column 2 (b): label 'x' is not a number");
    o.label_mode = 7;
    CHECK_ERR(T, csv_str("a,b\n1,2\n", &o, &t), NNCL_ERR_INVALID_ARGUMENT, "label_mode");
    o = nncl_csv_options_default();
    o.delimiter = '"';
    CHECK_ERR(T, csv_str("a,b\n1,2\n", &o, &t), NNCL_ERR_INVALID_ARGUMENT, "delimiter");
    CHECK_ERR(T, nncl_csv_load("/nonexistent/t.csv", NULL, &t), NNCL_ERR_IO, "/nonexistent/t.csv");
    CHECK_ERR(T, nncl_csv_load("/tmp", NULL, &t), NNCL_ERR_IO, "folder");
    CHECK(T, t.rows == 0 && t.features == NULL && t.class_names == NULL);
    return 0;
}

/* Finds a file of the source tree from the current folder, or from the
 * folder of the test program (build/tests/). */
static int source_path(const char *rel, char *out, size_t cap) {
    const char *slash = strrchr(g_argv0, '/');
    snprintf(out, cap, "%s", rel);
    if (access(out, R_OK) == 0) return 1;
    if (slash) {
        snprintf(out, cap, "%.*s/../../%s", (int)(slash - g_argv0), g_argv0, rel);
        if (access(out, R_OK) == 0) return 1;
    }
    return 0;
}

static int test_iris(void) {
    const char *T = "data csv iris.csv: 150 rows, 3 classes of 50";
    char path[1024];
    nncl_csv t;
    nncl_dataset *ds;
    int counts[3] = {0, 0, 0};
    size_t i;
    nncl_csv_options o = nncl_csv_options_default();
    if (!source_path("examples/data/iris.csv", path, sizeof path)) {
        th_fail(T, "examples/data/iris.csv not found from the current folder nor from %s", g_argv0);
        return 1;
    }
    o.label = "species";
    OKC(T, nncl_csv_load(path, &o, &t));
    CHECK(T, t.rows == 150 && t.cols == 4 && t.n_classes == 3 && t.label_column == 4);
    CHECK(T, strcmp(t.class_names[0], "setosa") == 0 && strcmp(t.class_names[1], "versicolor") == 0 &&
                 strcmp(t.class_names[2], "virginica") == 0);
    CHECK(T, strcmp(t.feature_names[0], "sepal_length") == 0 && strcmp(t.feature_names[3], "petal_width") == 0);
    for (i = 0; i < t.rows; i++) counts[(int)t.labels[i]]++;
    CHECK(T, counts[0] == 50 && counts[1] == 50 && counts[2] == 50);
    CHECK(T, t.features[0] == 5.1f && t.features[1] == 3.5f && t.features[2] == 1.4f && t.features[3] == 0.2f);
    nncl_csv_free(&t);
    OKC(T, nncl_dataset_load_csv(path, NULL, &ds));
    CHECK(T, nncl_dataset_size(ds) == 150 && nncl_dataset_features(ds) == 4 && nncl_dataset_classes(ds) == 3);
    CHECK(T, strcmp(nncl_dataset_class_name(ds, 2), "virginica") == 0 && nncl_dataset_class_name(ds, 3) == NULL);
    nncl_dataset_free(ds);
    return 0;
}

/* -------------------------------------------------------------- dataset */

/* n samples of 3 features, x[i] = {i, 2i, 7}, y[i] = i % 4 */
static int make_ds(size_t n, nncl_dataset **ds) {
    float *x = (float *)malloc(n * 3 * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    int shape = 3;
    size_t i;
    nncl_status st;
    for (i = 0; i < n; i++) {
        x[3 * i] = (float)i;
        x[3 * i + 1] = (float)(2 * i);
        x[3 * i + 2] = 7;
        y[i] = (float)(i % 4);
    }
    st = nncl_dataset_create(n, 1, &shape, x, y, 4, ds);
    free(x);
    free(y);
    return st != NNCL_OK;
}

static int test_permutation(void) {
    const char *T = "data permutation deterministic";
    /* fixed value for a fixed seed (also computed by an independent Python
     * splitmix64 + Fisher-Yates): the order must not change across platforms
     * or versions, or saved experiments stop being reproducible */
    static const size_t want[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
    size_t p[10], q[10], i, seen[10] = {0}, same = 1;
    OKC(T, nncl_dataset_permutation(10, 42, p));
    for (i = 0; i < 10; i++) {
        CHECK(T, p[i] < 10 && !seen[p[i]]);
        seen[p[i]] = 1;
    }
    for (i = 0; i < 10; i++)
        if (p[i] != want[i]) {
            th_fail(T, "permutation(10, 42) = %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu differs from the recorded order",
                    p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]);
            return 1;
        }
    OKC(T, nncl_dataset_permutation(10, 43, q));
    for (i = 0; i < 10; i++) same &= p[i] == q[i];
    CHECK(T, !same);
    return 0;
}

static int test_shuffle(void) {
    const char *T = "data shuffle same seed same order";
    nncl_dataset *a, *b, *c;
    const float *xa, *xb, *xc, *ya;
    size_t i, n = 200, diff = 0, moved = 0;
    char seen[200] = {0};
    if (make_ds(n, &a) || make_ds(n, &b) || make_ds(n, &c)) {
        th_fail(T, "create: %s", nncl_last_error(NULL));
        return 1;
    }
    OKC(T, nncl_dataset_shuffle(a, 7));
    OKC(T, nncl_dataset_shuffle(b, 7));
    OKC(T, nncl_dataset_shuffle(c, 8));
    xa = nncl_dataset_x(a);
    ya = nncl_dataset_y(a);
    xb = nncl_dataset_x(b);
    xc = nncl_dataset_x(c);
    for (i = 0; i < n; i++) {
        size_t id = (size_t)xa[3 * i];
        CHECK(T, xa[3 * i] == xb[3 * i]);
        diff += xa[3 * i] != xc[3 * i];
        moved += id != i;
        /* rows stay whole and keep their label */
        CHECK(T, id < n && !seen[id] && xa[3 * i + 1] == 2.0f * (float)id && ya[i] == (float)(id % 4));
        seen[id] = 1;
    }
    CHECK(T, diff > n / 2 && moved > n / 2);
    nncl_dataset_free(a);
    nncl_dataset_free(b);
    nncl_dataset_free(c);
    nncl_dataset_free(NULL);
    return 0;
}

static int test_split(void) {
    const char *T = "data split sizes and coverage";
    nncl_dataset *ds, *tr, *va, *tr2, *va2;
    char seen[101] = {0};
    size_t i;
    if (make_ds(101, &ds)) return 1;
    OKC(T, nncl_dataset_split(ds, 0.2, 5, &tr, &va));
    CHECK(T, nncl_dataset_size(va) == 20 && nncl_dataset_size(tr) == 81);
    CHECK(T, nncl_dataset_classes(tr) == 4 && nncl_dataset_features(va) == 3);
    for (i = 0; i < 20; i++) seen[(int)nncl_dataset_x(va)[3 * i]]++;
    for (i = 0; i < 81; i++) seen[(int)nncl_dataset_x(tr)[3 * i]]++;
    for (i = 0; i < 101; i++) CHECK(T, seen[i] == 1);
    OKC(T, nncl_dataset_split(ds, 0.2, 5, &tr2, &va2));
    CHECK(T, memcmp(nncl_dataset_x(va), nncl_dataset_x(va2), 20 * 3 * sizeof(float)) == 0);
    nncl_dataset_free(tr2);
    nncl_dataset_free(va2);
    OKC(T, nncl_dataset_split(ds, 0.2, 6, &tr2, &va2));
    CHECK(T, memcmp(nncl_dataset_x(va), nncl_dataset_x(va2), 20 * 3 * sizeof(float)) != 0);
    nncl_dataset_free(tr2);
    nncl_dataset_free(va2);
    CHECK_ERR(T, nncl_dataset_split(ds, 0.001, 5, &tr2, &va2), NNCL_ERR_INVALID_ARGUMENT, "empty");
    CHECK_ERR(T, nncl_dataset_split(ds, 1.0, 5, &tr2, &va2), NNCL_ERR_INVALID_ARGUMENT, "val_fraction");
    CHECK(T, tr2 == NULL && va2 == NULL);
    /* one output missing: the other is cleared too, as every constructor's */
    tr2 = va2 = (nncl_dataset *)ds;
    CHECK_ERR(T, nncl_dataset_split(ds, 0.2, 5, NULL, &va2), NNCL_ERR_INVALID_ARGUMENT, "train");
    CHECK_ERR(T, nncl_dataset_split(ds, 0.2, 5, &tr2, NULL), NNCL_ERR_INVALID_ARGUMENT, "val");
    CHECK(T, tr2 == NULL && va2 == NULL);
    nncl_dataset_free(tr);
    nncl_dataset_free(va);
    nncl_dataset_free(ds);
    return 0;
}

static int test_standardize(void) {
    const char *T = "data standardisation";
    nncl_dataset *tr, *te;
    float mean[3], sd[3];
    const float *x;
    size_t i, n = 11;
    double m = 5, s = 0;
    int j;
    if (make_ds(n, &tr) || make_ds(4, &te)) return 1;
    OKC(T, nncl_dataset_stats(tr, mean, sd));
    /* feature 0 is 0..10: mean 5, population std sqrt(10) */
    for (i = 0; i < n; i++) s += ((double)i - m) * ((double)i - m);
    s = sqrt(s / (double)n);
    CHECK(T, fabs(mean[0] - 5) < 1e-6 && fabs(sd[0] - s) < 1e-5);
    CHECK(T, fabs(mean[1] - 10) < 1e-6 && fabs(sd[1] - 2 * s) < 1e-5);
    CHECK(T, mean[2] == 7 && sd[2] == 1); /* constant feature: std 1 */
    OKC(T, nncl_dataset_standardize(tr, mean, sd));
    OKC(T, nncl_dataset_stats(tr, mean, sd));
    for (j = 0; j < 2; j++) CHECK(T, fabs(mean[j]) < 1e-6 && fabs(sd[j] - 1) < 1e-5);
    CHECK(T, mean[2] == 0);
    /* training statistics applied to another set */
    mean[0] = 5;
    sd[0] = (float)s;
    mean[1] = 10;
    sd[1] = (float)(2 * s);
    mean[2] = 7;
    sd[2] = 1;
    OKC(T, nncl_dataset_standardize(te, mean, sd));
    x = nncl_dataset_x(te);
    for (i = 0; i < 4; i++) {
        CHECK(T, fabs(x[3 * i] - ((double)i - 5) / s) < 1e-5);
        CHECK(T, fabs(x[3 * i + 1] - (2.0 * (double)i - 10) / (2 * s)) < 1e-5 && x[3 * i + 2] == 0);
    }
    OKC(T, nncl_dataset_scale(te, 2, 1));
    CHECK(T, fabs(x[3] - (2 * (1 - 5) / s + 1)) < 1e-5);
    sd[1] = 0;
    CHECK_ERR(T, nncl_dataset_standardize(te, mean, sd), NNCL_ERR_INVALID_ARGUMENT, "feature 1");
    { /* results that overflow to Inf are refused and the data stays as it was */
        float keep[12];
        memcpy(keep, x, sizeof keep);
        CHECK_ERR(T, nncl_dataset_scale(te, 3e38f, 0), NNCL_ERR_NUMERIC, "not finite");
        CHECK(T, memcmp(keep, x, sizeof keep) == 0);
        sd[1] = 1e-38f;
        CHECK_ERR(T, nncl_dataset_standardize(te, mean, sd), NNCL_ERR_NUMERIC, "feature 1");
        CHECK(T, memcmp(keep, x, sizeof keep) == 0);
    }
    nncl_dataset_free(tr);
    nncl_dataset_free(te);
    return 0;
}

static int test_dataset_checks(void) {
    const char *T = "data dataset checks input";
    float x[6] = {1, 2, 3, 4, 5, 6}, y[2] = {0, 3};
    int shape[3] = {1, 1, 3};
    nncl_dataset *ds;
    const float *bx, *by;
    size_t idx[2] = {1, 0};
    float gx[6], gy[2];
    CHECK_ERR(T, nncl_dataset_create(2, 3, shape, x, y, 3, &ds), NNCL_ERR_INVALID_ARGUMENT, "sample 1 is 3");
    y[1] = 2;
    x[4] = (float)NAN;
    CHECK_ERR(T, nncl_dataset_create(2, 3, shape, x, y, 3, &ds), NNCL_ERR_NUMERIC, "feature 1 of sample 1");
    x[4] = 5;
    CHECK_ERR(T, nncl_dataset_create(0, 3, shape, x, y, 3, &ds), NNCL_ERR_INVALID_ARGUMENT, "no samples");
    {
        /* 2^48 features: more than the machine has, refused before allocating
         * (the sanitizers abort on such a request rather than fail it) */
        int huge[3] = {65536, 65536, 65536};
        CHECK_ERR(T, nncl_dataset_create(1, 3, huge, x, y, 3, &ds), NNCL_ERR_OUT_OF_MEMORY, "");
        CHECK(T, ds == NULL);
    }
    OKC(T, nncl_dataset_create(2, 3, shape, x, y, 3, &ds));
    CHECK(T, nncl_dataset_shape(ds, shape) == 3 && shape[2] == 3 && nncl_dataset_class_name(ds, 0) == NULL);
    OKC(T, nncl_dataset_batch(ds, 1, 1, &bx, &by));
    CHECK(T, bx[0] == 4 && by[0] == 2);
    CHECK_ERR(T, nncl_dataset_batch(ds, 1, 2, &bx, &by), NNCL_ERR_INVALID_ARGUMENT, "beyond");
    OKC(T, nncl_dataset_gather(ds, idx, 2, gx, gy));
    CHECK(T, gx[0] == 4 && gx[3] == 1 && gy[0] == 2 && gy[1] == 0);
    idx[1] = 2;
    CHECK_ERR(T, nncl_dataset_gather(ds, idx, 2, gx, gy), NNCL_ERR_INVALID_ARGUMENT, "idx[1] is 2");
    nncl_dataset_free(ds);
    return 0;
}

/* --------------------------------------------------------------- loader */

/* Runs epochs of a loader over make_ds(n): every sample once per epoch
 * (or, with drop_last, all but the n % batch left over), batches of the
 * promised size, rows intact. order receives the sample ids of each epoch. */
static int run_loader(const char *T, size_t n, size_t batch, int flags, int epochs, size_t *order) {
    nncl_dataset *ds;
    nncl_loader *ld;
    int e;
    size_t expect_batches = (flags & NNCL_LOADER_DROP_LAST) ? n / batch : (n + batch - 1) / batch;
    size_t per_epoch = (flags & NNCL_LOADER_DROP_LAST) ? n / batch * batch : n;
    char *seen = (char *)calloc(n, 1);
    if (make_ds(n, &ds)) return 1;
    OKC(T, nncl_loader_create(ds, batch, 99, flags, &ld));
    CHECK(T, nncl_loader_batches(ld) == expect_batches);
    for (e = 0; e < epochs; e++) {
        size_t got = 0, nb = 0, i;
        const float *x, *y;
        int bn;
        memset(seen, 0, n);
        CHECK(T, nncl_loader_epoch(ld) == e);
        for (;;) {
            OKC(T, nncl_loader_next(ld, &x, &y, &bn));
            if (bn == 0) break;
            CHECK(T, (size_t)bn == batch || (!(flags & NNCL_LOADER_DROP_LAST) && nb == expect_batches - 1));
            for (i = 0; i < (size_t)bn; i++) {
                size_t id = (size_t)x[3 * i];
                CHECK(T, id < n && !seen[id]);
                CHECK(T, x[3 * i + 1] == 2.0f * (float)id && x[3 * i + 2] == 7 && y[i] == (float)(id % 4));
                seen[id] = 1;
                if (order) order[(size_t)e * n + got] = id;
                got++;
            }
            nb++;
        }
        CHECK(T, x == NULL && y == NULL);
        CHECK(T, got == per_epoch && nb == expect_batches);
    }
    nncl_loader_free(ld);
    nncl_dataset_free(ds);
    free(seen);
    return 0;
}

static int test_loader_cover(void) {
    const char *T = "data loader covers every sample once per epoch";
    size_t *o = (size_t *)malloc(3 * 103 * sizeof(size_t)), i, diff = 0, inorder = 1;
    if (run_loader(T, 103, 10, NNCL_LOADER_SHUFFLE, 3, o)) return 1;
    for (i = 0; i < 103; i++) diff += o[i] != o[103 + i];
    CHECK(T, diff > 50); /* epochs differ */
    if (run_loader(T, 103, 10, 0, 2, o)) return 1;
    for (i = 0; i < 103; i++) inorder &= o[i] == i && o[103 + i] == i;
    CHECK(T, inorder);
    if (run_loader(T, 7, 100, NNCL_LOADER_SHUFFLE, 2, NULL)) return 1; /* one short batch */
    if (run_loader(T, 1, 1, NNCL_LOADER_SHUFFLE, 2, NULL)) return 1;
    free(o);
    return 0;
}

static int test_loader_drop_last(void) {
    const char *T = "data loader drop_last";
    nncl_dataset *ds;
    nncl_loader *ld = NULL;
    if (run_loader(T, 103, 10, NNCL_LOADER_SHUFFLE | NNCL_LOADER_DROP_LAST, 3, NULL)) return 1;
    if (run_loader(T, 100, 10, NNCL_LOADER_DROP_LAST, 2, NULL)) return 1;
    if (make_ds(5, &ds)) return 1;
    CHECK_ERR(T, nncl_loader_create(ds, 6, 1, NNCL_LOADER_DROP_LAST, &ld), NNCL_ERR_INVALID_ARGUMENT, "no batch");
    CHECK_ERR(T, nncl_loader_create(ds, 0, 1, 0, &ld), NNCL_ERR_INVALID_ARGUMENT, "batch_size");
    CHECK_ERR(T, nncl_loader_create(ds, 2, 1, 8, &ld), NNCL_ERR_INVALID_ARGUMENT, "flags");
    CHECK(T, ld == NULL);
    nncl_dataset_free(ds);
    return 0;
}

/* Same seed, same orders; reset(e) replays epoch e, also mid-epoch. */
static int test_loader_reset(void) {
    const char *T = "data loader reset and reproducibility";
    nncl_dataset *ds;
    nncl_loader *a, *b;
    const float *x, *y;
    int bn, e, k;
    size_t first[2][10];
    if (make_ds(50, &ds)) return 1;
    OKC(T, nncl_loader_create(ds, 10, 3, NNCL_LOADER_SHUFFLE, &a));
    OKC(T, nncl_loader_create(ds, 10, 3, NNCL_LOADER_SHUFFLE, &b));
    /* a: epoch 0 then 1 in a row; record the first batch of each */
    for (e = 0; e < 2; e++) {
        for (k = 0;; k++) {
            OKC(T, nncl_loader_next(a, &x, &y, &bn));
            if (!bn) break;
            if (k == 0) {
                int i;
                for (i = 0; i < 10; i++) first[e][i] = (size_t)x[3 * i];
            }
        }
    }
    /* b: jump to epoch 1 after two batches of epoch 0 */
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    OKC(T, nncl_loader_reset(b, 1));
    CHECK(T, nncl_loader_epoch(b) == 1);
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    for (k = 0; k < 10; k++) CHECK(T, (size_t)x[3 * k] == first[1][k]);
    OKC(T, nncl_loader_reset(b, 0));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    for (k = 0; k < 10; k++) CHECK(T, (size_t)x[3 * k] == first[0][k]);
    CHECK_ERR(T, nncl_loader_reset(b, -1), NNCL_ERR_INVALID_ARGUMENT, "epoch -1");
    /* the loader runs epochs ahead: its count must not wrap past INT_MAX */
    CHECK_ERR(T, nncl_loader_reset(b, INT_MAX), NNCL_ERR_INVALID_ARGUMENT, "epoch 2147483647");
    OKC(T, nncl_loader_reset(b, 3));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    CHECK(T, nncl_loader_epoch(b) == 3);
    nncl_loader_free(a);
    nncl_loader_free(b);
    nncl_dataset_free(ds);
    return 0;
}

/* Freeing at any point stops the thread; run under SANITIZE=1 for leaks. */
static int test_loader_free(void) {
    const char *T = "data loader freed mid-epoch";
    nncl_dataset *ds;
    nncl_loader *ld;
    const float *x, *y;
    int bn, k, round;
    if (make_ds(1000, &ds)) return 1;
    for (round = 0; round < 50; round++) {
        OKC(T, nncl_loader_create(ds, 7, (uint64_t)round, NNCL_LOADER_SHUFFLE, &ld));
        for (k = 0; k < round % 5; k++) OKC(T, nncl_loader_next(ld, &x, &y, &bn));
        if (round % 3 == 0) OKC(T, nncl_loader_reset(ld, round));
        nncl_loader_free(ld);
    }
    nncl_loader_free(NULL);
    nncl_dataset_free(ds);
    return 0;
}

/* ------------------------------------------------- loader augmentation */

enum { AUG_N = 300, AUG_C = 2, AUG_H = 5, AUG_W = 6, AUG_D = AUG_C * AUG_H * AUG_W };

/* sample id's pixel p is id * 100 + p + 1: every value names its sample and
 * place, and none is the 0 that shifting moves in */
static int make_images(nncl_dataset **ds) {
    static float x[AUG_N * AUG_D], y[AUG_N];
    int shape[3] = {AUG_C, AUG_H, AUG_W};
    size_t i, p;
    for (i = 0; i < AUG_N; i++) {
        for (p = 0; p < AUG_D; p++) x[i * AUG_D + p] = (float)(i * 100 + p + 1);
        y[i] = (float)(i % 3);
    }
    return nncl_dataset_create(AUG_N, 3, shape, x, y, 3, ds) != NNCL_OK;
}

/* The draws (dy, dx, flip) that turn sample id into got: the image moved by
 * (dy, dx), zeros moved in, then mirrored; -1 when none with |d| <= shift. */
static int aug_match(const float *got, size_t id, int shift, int *dy_out, int *dx_out) {
    int dy, dx, flip, c, h, w;
    for (flip = 0; flip < 2; flip++)
        for (dy = -shift; dy <= shift; dy++)
            for (dx = -shift; dx <= shift; dx++) {
                int same = 1;
                for (c = 0; c < AUG_C && same; c++)
                    for (h = 0; h < AUG_H && same; h++)
                        for (w = 0; w < AUG_W && same; w++) {
                            int mw = flip ? AUG_W - 1 - w : w, sh = h - dy, sw = mw - dx;
                            float want = sh < 0 || sh >= AUG_H || sw < 0 || sw >= AUG_W
                                             ? 0.0f
                                             : (float)(id * 100 + (size_t)((c * AUG_H + sh) * AUG_W + sw) + 1);
                            same = got[(c * AUG_H + h) * AUG_W + w] == want;
                        }
                if (same) {
                    *dy_out = dy;
                    *dx_out = dx;
                    return flip;
                }
            }
    return -1;
}

/* One epoch's samples into out[AUG_N * AUG_D] and their ids. */
static int aug_epoch(const char *T, nncl_loader *ld, float *out, size_t *ids) {
    const float *x, *y;
    int bn, i;
    size_t got = 0;
    for (;;) {
        OKC(T, nncl_loader_next(ld, &x, &y, &bn));
        if (!bn) break;
        for (i = 0; i < bn; i++, got++) {
            const float *s = x + (size_t)i * AUG_D;
            float any = 0;
            int p;
            for (p = 0; p < AUG_D; p++)
                if (s[p] > any) any = s[p];
            ids[got] = (size_t)(any - 1) / 100;
            CHECK(T, y[i] == (float)(ids[got] % 3)); /* labels untouched */
        }
        memcpy(out + (got - (size_t)bn) * AUG_D, x, sizeof(float) * (size_t)bn * AUG_D);
    }
    CHECK(T, got == AUG_N);
    return 0;
}

static int test_loader_augment(void) {
    const char *T = "data loader augmentation: shift and flip";
    static float e0[AUG_N * AUG_D], e0b[AUG_N * AUG_D], e1[AUG_N * AUG_D];
    size_t ids[AUG_N], ids_b[AUG_N], i, same_draws = 0;
    int flips = 0, dys[5] = {0}, dxs[5] = {0}, k, d0y = 0, d0x = 0;
    const float *x, *y;
    int bn;
    nncl_dataset *ds;
    nncl_loader *a, *b;
    nncl_augment aug = {AUG_C, AUG_H, AUG_W, 2, 1};
    if (make_images(&ds)) return 1;
    OKC(T, nncl_loader_create(ds, 32, 5, NNCL_LOADER_SHUFFLE, &a));
    OKC(T, nncl_loader_set_augment(a, &aug));
    if (aug_epoch(T, a, e0, ids)) return 1;
    for (i = 0; i < AUG_N; i++) {
        int dy, dx, f = aug_match(e0 + i * AUG_D, ids[i], 2, &dy, &dx);
        CHECK(T, f >= 0);
        if (f < 0) break;
        flips += f;
        dys[dy + 2]++;
        dxs[dx + 2]++;
    }
    CHECK(T, flips > AUG_N / 3 && flips < 2 * AUG_N / 3);
    for (k = 0; k < 5; k++) CHECK(T, dys[k] > AUG_N / 10 && dxs[k] > AUG_N / 10);
    /* the next epoch draws again */
    if (aug_epoch(T, a, e1, ids_b)) return 1;
    for (i = 0; i < AUG_N; i++) {
        size_t j;
        int dy, dx, f;
        for (j = 0; j < AUG_N && ids_b[j] != ids[i]; j++) {}
        if (j == AUG_N) break;
        f = aug_match(e1 + j * AUG_D, ids[i], 2, &dy, &dx);
        same_draws += f == aug_match(e0 + i * AUG_D, ids[i], 2, &d0y, &d0x) && dy == d0y && dx == d0x;
    }
    CHECK(T, same_draws < AUG_N / 5);
    /* the same seed repeats it, whatever the batch size or a reset */
    OKC(T, nncl_loader_create(ds, 7, 5, NNCL_LOADER_SHUFFLE, &b));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    OKC(T, nncl_loader_set_augment(b, &aug));
    OKC(T, nncl_loader_reset(b, 0));
    if (aug_epoch(T, b, e0b, ids_b)) return 1;
    CHECK(T, memcmp(e0, e0b, sizeof e0) == 0);
    /* set mid-epoch: the batches after it change, the order goes on */
    OKC(T, nncl_loader_reset(b, 0));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    CHECK(T, memcmp(x, e0, sizeof(float) * 7 * AUG_D) == 0);
    OKC(T, nncl_loader_set_augment(b, NULL));
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    for (k = 0; k < 7; k++) {
        int dy = 9, dx = 9;
        CHECK(T, aug_match(x + (size_t)k * AUG_D, ids[7 + k], 0, &dy, &dx) == 0 && dy == 0 && dx == 0);
    }
    /* refused, and the loader goes on as it was */
    aug.shift = 5;
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "shift 5 is not in 0..4");
    aug.shift = -1;
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "shift -1");
    aug.shift = 1;
    aug.flip_horizontal = 2;
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "flip_horizontal 2");
    aug.flip_horizontal = 1;
    aug.width = 5;
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "not the dataset's 60 features");
    aug.width = 0;
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "width 0");
    aug = (nncl_augment){INT_MAX, INT_MAX, INT_MAX, 1, 0};
    CHECK_ERR(T, nncl_loader_set_augment(b, &aug), NNCL_ERR_INVALID_ARGUMENT, "features per sample");
    CHECK_ERR(T, nncl_loader_set_augment(NULL, &aug), NNCL_ERR_INVALID_ARGUMENT, "ld is NULL");
    OKC(T, nncl_loader_next(b, &x, &y, &bn));
    CHECK(T, bn == 7 && memcmp(x, e0 + 14 * AUG_D, sizeof(float) * 7 * AUG_D) != 0);
    nncl_loader_free(a);
    nncl_loader_free(b);
    nncl_dataset_free(ds);
    return 0;
}

/* --------------------------------------------------------- Fashion-MNIST */

#define FMNIST "/usr/share/datasets/fashion-mnist/"

static int test_fashion_mnist(void) {
    const char *T = "data Fashion-MNIST train and t10k";
    static const char *const parts[2][2] = {{FMNIST "train-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz"},
                                            {FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz"}};
    if (access(parts[0][0], R_OK) != 0) {
        th_skip(T, "not installed at " FMNIST);
        return -1;
    }
#ifndef NNCL_HAVE_ZLIB
    th_skip(T, "built without zlib");
    return -1;
#else
    int p;
    for (p = 0; p < 2; p++) {
        nncl_dataset *ds;
        size_t n = p == 0 ? 60000 : 10000, i;
        int shape[3], counts[10] = {0}, k;
        const float *x, *y;
        float lo = 1, hi = 0;
        OKC(T, nncl_dataset_load_idx(parts[p][0], parts[p][1], &ds));
        CHECK(T, nncl_dataset_size(ds) == n && nncl_dataset_features(ds) == 784 && nncl_dataset_classes(ds) == 10);
        CHECK(T, nncl_dataset_shape(ds, shape) == 3 && shape[0] == 1 && shape[1] == 28 && shape[2] == 28);
        x = nncl_dataset_x(ds);
        y = nncl_dataset_y(ds);
        for (i = 0; i < n; i++) counts[(int)y[i]]++;
        for (k = 0; k < 10; k++) CHECK(T, counts[k] == (int)(n / 10));
        for (i = 0; i < n * 784; i++) {
            if (x[i] < lo) lo = x[i];
            if (x[i] > hi) hi = x[i];
        }
        CHECK(T, lo == 0 && hi == 1);
        nncl_dataset_free(ds);
    }
    return 0;
#endif
}

/* The IDX pair path on small in-memory arrays, without the real files. */
static int test_dataset_idx(void) {
    const char *T = "data dataset from IDX pair";
    unsigned char ib[4 + 12 + 2 * 6], lb[4 + 4 + 2];
    uint32_t idims[3] = {2, 2, 3}, ldims[1] = {2};
    double iv[12] = {0, 255, 51, 102, 0, 0, 255, 255, 255, 0, 0, 0}, lv[2] = {3, 1};
    nncl_idx im, la;
    nncl_dataset *ds;
    int shape[3];
    size_t isz = make_idx(ib, NNCL_IDX_U8, 3, idims, iv, 12), lsz = make_idx(lb, NNCL_IDX_U8, 1, ldims, lv, 2);
    OKC(T, nncl_idx_parse(ib, isz, "i", &im));
    OKC(T, nncl_idx_parse(lb, lsz, "l", &la));
    OKC(T, nncl_dataset_from_idx(&im, &la, &ds));
    CHECK(T, im.data != NULL && im.data[1] == 255); /* inputs untouched */
    CHECK(T, nncl_dataset_size(ds) == 2 && nncl_dataset_features(ds) == 6 && nncl_dataset_classes(ds) == 4);
    CHECK(T, nncl_dataset_shape(ds, shape) == 3 && shape[0] == 1 && shape[1] == 2 && shape[2] == 3);
    CHECK(T, nncl_dataset_x(ds)[1] == 1.0f && fabs(nncl_dataset_x(ds)[2] - 0.2) < 1e-7 && nncl_dataset_y(ds)[0] == 3);
    nncl_dataset_free(ds);
    la.dims[0] = 3;
    CHECK_ERR(T, nncl_dataset_from_idx(&im, &la, &ds), NNCL_ERR_SHAPE, "2 images but 3 labels");
    la.dims[0] = 2;
    la.data[1] = 1.5f;
    CHECK_ERR(T, nncl_dataset_from_idx(&im, &la, &ds), NNCL_ERR_FORMAT, "label 1 is 1.5");
    nncl_idx_free(&im);
    nncl_idx_free(&la);
    return 0;
}

/* /dev/zero never ends: the CSV and IDX readers refuse a device at once,
 * read a pipe as it comes and refuse one past their bound. */
static int test_streams(void) {
    const char *T = "data csv and idx refuse /dev/zero and bound a pipe";
    nncl_csv csv;
    nncl_idx idx;
    CHECK_ERR(T, nncl_csv_load("/dev/zero", NULL, &csv), NNCL_ERR_IO, "neither a file nor a pipe");
    CHECK_ERR(T, nncl_idx_load("/dev/zero", &idx), NNCL_ERR_IO, "neither a file nor a pipe");
#ifdef __linux__
    {
        static const char text[] = "a,b,label\n1,2,0\n3,4,1\n";
        static char big[16384];
        unsigned char *data = NULL;
        size_t size = 0;
        char path[64];
        int fd[2];
        /* a small table through a pipe loads (it fits the pipe's buffer: no writer thread) */
        CHECK(T, pipe(fd) == 0);
        CHECK(T, write(fd[1], text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
        close(fd[1]);
        snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
        OKC(T, nncl_csv_load(path, NULL, &csv));
        CHECK(T, csv.rows == 2);
        nncl_csv_free(&csv);
        close(fd[0]);
        /* past the bound: refused, saying so */
        CHECK(T, pipe(fd) == 0);
        memset(big, 'x', sizeof big);
        CHECK(T, write(fd[1], big, sizeof big) == (ssize_t)sizeof big);
        close(fd[1]);
        snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
        CHECK_ERR(T, nncl__read_file_max(path, 4096, &data, &size), NNCL_ERR_IO, "a pipe of more than 4096 bytes");
        CHECK(T, data == NULL);
        close(fd[0]);
    }
#endif
    return 0;
}

#define RUN(fn, name)                         \
    do {                                      \
        int r_ = fn();                        \
        if (r_ == 0) th_pass(name);           \
    } while (0)

int main(int argc, char **argv) {
    (void)argc;
    g_argv0 = argv[0];
    RUN(test_idx_gzip_bomb, "data idx gzip bomb costs no more memory than its header");
    RUN(test_idx_types, "data idx round trip, every type");
    RUN(test_idx_endian, "data idx big-endian decoding");
    RUN(test_idx_hostile, "data idx hostile headers");
    RUN(test_idx_gzip, "data idx gzip");
    RUN(test_idx_gzip_limits, "data idx gzip held to the header's size");
    RUN(test_csv_good, "data csv parsing");
    RUN(test_csv_bad, "data csv errors name line and column");
    RUN(test_streams, "data csv and idx refuse /dev/zero and bound a pipe");
    RUN(test_iris, "data csv iris.csv: 150 rows, 3 classes of 50");
    RUN(test_permutation, "data permutation deterministic");
    RUN(test_shuffle, "data shuffle same seed same order");
    RUN(test_split, "data split sizes and coverage");
    RUN(test_standardize, "data standardisation");
    RUN(test_dataset_checks, "data dataset checks input");
    RUN(test_dataset_idx, "data dataset from IDX pair");
    RUN(test_loader_cover, "data loader covers every sample once per epoch");
    RUN(test_loader_drop_last, "data loader drop_last");
    RUN(test_loader_reset, "data loader reset and reproducibility");
    RUN(test_loader_free, "data loader freed mid-epoch");
    RUN(test_loader_augment, "data loader augmentation: shift and flip");
    RUN(test_fashion_mnist, "data Fashion-MNIST train and t10k");
    printf("done\n");
    return th_exit_code();
}
