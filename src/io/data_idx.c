/* data_idx.c - the IDX reader (MNIST / Fashion-MNIST files): header checks
 * against the bytes present before any allocation, conversion of every IDX
 * element type to float, and gzip decompression through zlib when the build
 * has it. */
#include "runtime/internal.h"
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#ifdef NNCL_HAVE_ZLIB
#include <zlib.h>
#endif

/* Largest decompressed size accepted: a bound against gzip bombs that still
 * fits every real IDX file (Fashion-MNIST train images are 47 MB). */
#define IDX_MAX_INFLATED ((uint64_t)4 << 30)

static const char *idx_name(const char *name) { return name ? name : "<memory>"; }

static uint32_t idx_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static size_t idx_type_size(int type) {
    switch (type) {
    case NNCL_IDX_U8: case NNCL_IDX_I8: return 1;
    case NNCL_IDX_I16: return 2;
    case NNCL_IDX_I32: case NNCL_IDX_F32: return 4;
    case NNCL_IDX_F64: return 8;
    }
    return 0;
}

/* Doubles beyond float range become +-Inf explicitly: the plain conversion
 * is undefined behaviour in C for such values. */
static float idx_d2f(double v) {
    if (v > FLT_MAX) return (float)HUGE_VAL;
    if (v < -FLT_MAX) return (float)-HUGE_VAL;
    return (float)v;
}

static void idx_convert(int type, const unsigned char *p, size_t count, float *out) {
    size_t i;
    switch (type) {
    case NNCL_IDX_U8:
        for (i = 0; i < count; i++) out[i] = (float)p[i];
        break;
    case NNCL_IDX_I8:
        for (i = 0; i < count; i++) out[i] = (float)(p[i] < 128 ? (int)p[i] : (int)p[i] - 256);
        break;
    case NNCL_IDX_I16:
        for (i = 0; i < count; i++) {
            unsigned u = ((unsigned)p[2 * i] << 8) | p[2 * i + 1];
            out[i] = (float)(u < 32768u ? (long)u : (long)u - 65536L);
        }
        break;
    case NNCL_IDX_I32:
        for (i = 0; i < count; i++) {
            uint32_t u = idx_be32(p + 4 * i);
            /* two's complement without relying on an implementation-defined cast */
            double v = u < 0x80000000u ? (double)u : (double)u - 4294967296.0;
            out[i] = (float)v;
        }
        break;
    case NNCL_IDX_F32:
        for (i = 0; i < count; i++) {
            uint32_t u = idx_be32(p + 4 * i);
            memcpy(&out[i], &u, 4);
        }
        break;
    case NNCL_IDX_F64:
        for (i = 0; i < count; i++) {
            uint64_t u = ((uint64_t)idx_be32(p + 8 * i) << 32) | idx_be32(p + 8 * i + 4);
            double d;
            memcpy(&d, &u, 8);
            out[i] = idx_d2f(d);
        }
        break;
    }
}

/* Parses uncompressed IDX bytes. */
static nncl_status idx_parse_raw(const unsigned char *p, size_t size, const char *name, nncl_idx *out) {
    int type, ndim, k;
    size_t count = 1, esize, need, have;
    if (size < 4)
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: IDX header truncated: %zu bytes, at least 4 needed",
                          name, size);
    if (p[0] != 0 || p[1] != 0)
        return nncl__fail(NULL, NNCL_ERR_FORMAT,
                          "%s: not an IDX file: magic starts %02x %02x, expected 00 00", name, p[0], p[1]);
    type = p[2];
    ndim = p[3];
    esize = idx_type_size(type);
    if (!esize)
        return nncl__fail(NULL, NNCL_ERR_FORMAT,
                          "%s: unknown IDX element type 0x%02x (known: 08 09 0b 0c 0d 0e)", name, type);
    if (ndim < 1)
        return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: IDX header gives 0 dimensions", name);
    if (ndim > NNCL_IDX_MAX_DIMS)
        return nncl__fail(NULL, NNCL_ERR_UNSUPPORTED, "%s: IDX array has %d dimensions, at most %d supported",
                          name, ndim, NNCL_IDX_MAX_DIMS);
    if (size - 4 < (size_t)ndim * 4)
        return nncl__fail(NULL, NNCL_ERR_FORMAT,
                          "%s: IDX header truncated: %d dimensions need %d bytes, file has %zu", name, ndim,
                          4 + 4 * ndim, size);
    for (k = 0; k < ndim; k++) {
        out->dims[k] = idx_be32(p + 4 + 4 * k);
        if (nncl__mul_overflow(count, out->dims[k], &count))
            return nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: IDX dimensions overflow (dimension %d is %lu)", name,
                              k, (unsigned long)out->dims[k]);
    }
    have = size - 4 - 4 * (size_t)ndim;
    if (nncl__mul_overflow(count, esize, &need) || need != have)
        return nncl__fail(NULL, NNCL_ERR_FORMAT,
                          "%s: IDX size mismatch: dimensions call for %zu elements of %zu bytes, the file holds "
                          "%zu data bytes",
                          name, count, esize, have);
    out->data = (float *)nncl__calloc(count ? count : 1, sizeof(float));
    if (!out->data)
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu floats for the IDX data", name,
                          count);
    idx_convert(type, p + 4 + 4 * (size_t)ndim, count, out->data);
    out->type = type;
    out->ndim = ndim;
    out->count = count;
    return NNCL_OK;
}

#ifdef NNCL_HAVE_ZLIB
/* What the IDX header at the start of p[0..len) says of the whole size: 0
 * not enough bytes yet, 1 *total set, 2 the header is invalid (the raw
 * parser will then say how, from the bytes inflated so far). */
static int idx_header_total(const unsigned char *p, size_t len, uint64_t *total) {
    size_t es, count = 1, bytes;
    int k, nd;
    if (len < 4) return 0;
    es = idx_type_size(p[2]);
    nd = p[3];
    if (p[0] || p[1] || !es || nd < 1 || nd > NNCL_IDX_MAX_DIMS) return 2;
    if (len < 4 + 4 * (size_t)nd) return 0;
    for (k = 0; k < nd; k++)
        if (nncl__mul_overflow(count, idx_be32(p + 4 + 4 * k), &count)) return 2;
    if (nncl__mul_overflow(count, es, &bytes) || nncl__add_overflow(bytes, 4 + 4 * (size_t)nd, &bytes)) return 2;
    *total = bytes;
    return 1;
}

/* Inflates a whole gzip stream (several members allowed) into a new buffer.
 * Truncated or corrupt input (bad CRC or length trailer too) is
 * NNCL_ERR_FORMAT. The header is inflated first into a small buffer (the
 * gzip trailer's size is untrusted and never used); once it is out, the
 * output is held to the size it calls for plus one byte (to see an
 * excess), checked against IDX_MAX_INFLATED and against what deflate can
 * produce from this many bytes, so a hostile file costs no more memory than
 * a header it could honour. */
static nncl_status idx_gunzip(const unsigned char *in, size_t in_size, const char *name, unsigned char **out,
                              size_t *out_size) {
    z_stream zs;
    unsigned char *buf = NULL;
    size_t cap, len = 0, pos = 0;
    uint64_t cap_max = IDX_MAX_INFLATED, total = 0;
    int zr = Z_OK, hdr = 0, stop = 0;
    nncl_status st = NNCL_OK;
    if ((uint64_t)(size_t)-1 < cap_max) cap_max = (size_t)-1;
    /* room for the largest header (4 + 4 * 255 bytes) */
    cap = 1024 + 64;
    buf = (unsigned char *)NNCL_MALLOC(cap);
    if (!buf)
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to decompress", name, cap);
    while (pos < in_size && !stop) {
        memset(&zs, 0, sizeof zs);
        if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
            st = nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s: inflateInit2 failed", name);
            break;
        }
        for (;;) {
            size_t in_chunk = in_size - pos, out_chunk;
            /* one byte beyond the expected size is enough to see an excess */
            uint64_t limit = hdr == 1 ? total + 1 : cap_max;
            if (len == cap) {
                size_t ncap;
                unsigned char *nbuf;
                if ((uint64_t)cap >= limit) {
                    st = nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: gzip data inflates beyond the %llu-byte limit",
                                    name, (unsigned long long)cap_max);
                    break;
                }
                ncap = (uint64_t)cap * 2 > limit ? (size_t)limit : cap * 2;
                if (hdr == 1) ncap = (size_t)limit;
                nbuf = (unsigned char *)NNCL_MALLOC(ncap);
                if (!nbuf) {
                    st = nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to decompress",
                                    name, ncap);
                    break;
                }
                memcpy(nbuf, buf, len);
                NNCL_FREE(buf);
                buf = nbuf;
                cap = ncap;
            }
            /* zlib counts in uInt: feed and drain at most 1 GiB at a time */
            if (in_chunk > (1u << 30)) in_chunk = 1u << 30;
            out_chunk = cap - len;
            if ((uint64_t)out_chunk > limit - len) out_chunk = (size_t)(limit - len);
            if (out_chunk > (1u << 30)) out_chunk = 1u << 30;
            zs.next_in = (Bytef *)(in + pos);
            zs.avail_in = (uInt)in_chunk;
            zs.next_out = buf + len;
            zs.avail_out = (uInt)out_chunk;
            zr = inflate(&zs, Z_NO_FLUSH);
            pos += in_chunk - zs.avail_in;
            len += out_chunk - zs.avail_out;
            if (hdr == 0) {
                hdr = idx_header_total(buf, len, &total);
                if (hdr == 1 && total > cap_max) {
                    st = nncl__fail(NULL, NNCL_ERR_FORMAT,
                                    "%s: IDX header calls for %llu bytes, beyond the %llu-byte limit for gzip data",
                                    name, (unsigned long long)total, (unsigned long long)cap_max);
                    break;
                }
                /* deflate expands at most 1032:1: a header asking for more
                 * than the file can hold is refused before its buffer exists */
                if (hdr == 1 && total / 1032u > (uint64_t)in_size) {
                    st = nncl__fail(NULL, NNCL_ERR_FORMAT,
                                    "%s: IDX header calls for %llu bytes, more than %zu bytes of gzip data can inflate to",
                                    name, (unsigned long long)total, in_size);
                    break;
                }
                if (hdr == 2) {
                    /* the raw parser reports the bad header */
                    stop = 1;
                    break;
                }
            }
            if (hdr == 1 && (uint64_t)len > total) {
                st = nncl__fail(NULL, NNCL_ERR_FORMAT,
                                "%s: IDX size mismatch: gzip data inflates to more than the %llu bytes the header "
                                "calls for",
                                name, (unsigned long long)total);
                break;
            }
            if (zr == Z_STREAM_END) break;
            if (zr == Z_BUF_ERROR && zs.avail_out != 0) {
                /* no progress with room to write: the input ended early */
                st = nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: gzip data truncated after %zu of %zu bytes", name,
                                pos, in_size);
                break;
            }
            if (zr != Z_OK && zr != Z_BUF_ERROR) {
                st = nncl__fail(NULL, zr == Z_MEM_ERROR ? NNCL_ERR_OUT_OF_MEMORY : NNCL_ERR_FORMAT,
                                "%s: corrupt gzip data at byte %zu: %s", name, pos, zs.msg ? zs.msg : "inflate failed");
                break;
            }
            if (pos == in_size && zs.avail_out != 0) {
                st = nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: gzip data truncated (stream ends early, %zu bytes)",
                                name, in_size);
                break;
            }
        }
        inflateEnd(&zs);
        if (st != NNCL_OK || stop) break;
        /* Another member may follow (concatenated gzip); trailing zero
         * padding, which some tools write, is ignored. */
        while (pos < in_size && in[pos] == 0) pos++;
        if (pos < in_size && (in_size - pos < 2 || in[pos] != 0x1f || in[pos + 1] != 0x8b)) {
            st = nncl__fail(NULL, NNCL_ERR_FORMAT, "%s: %zu bytes of garbage after the gzip data", name,
                            in_size - pos);
            break;
        }
    }
    if (st != NNCL_OK) {
        NNCL_FREE(buf);
        return st;
    }
    *out = buf;
    *out_size = len;
    return NNCL_OK;
}
#endif

nncl_status nncl_idx_parse(const void *bytes, size_t size, const char *name, nncl_idx *out) {
    const unsigned char *p = (const unsigned char *)bytes;
    nncl_status st;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_idx_parse: out is NULL");
    memset(out, 0, sizeof *out);
    name = idx_name(name);
    if (!p && size) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_idx_parse: bytes is NULL");
    if (size >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
#ifdef NNCL_HAVE_ZLIB
        unsigned char *raw = NULL;
        size_t raw_size = 0;
        st = idx_gunzip(p, size, name, &raw, &raw_size);
        if (st != NNCL_OK) return st;
        st = idx_parse_raw(raw, raw_size, name, out);
        NNCL_FREE(raw);
#else
        return nncl__fail(NULL, NNCL_ERR_UNSUPPORTED,
                          "%s: gzip-compressed, but nncl was built without zlib: rebuild with zlib "
                          "(make ZLIB=1, needs zlib1g-dev) or gunzip the file",
                          name);
#endif
    } else {
        st = idx_parse_raw(p, size, name, out);
    }
    if (st != NNCL_OK) nncl_idx_free(out);
    return st;
}

/* The whole file at path, parsed as nncl_idx_parse() does. */
nncl_status nncl_idx_load(const char *path, nncl_idx *out) {
    unsigned char *buf;
    size_t size;
    nncl_status st;
    NNCL_TRY(nncl__load_file("nncl_idx_load", path, out, sizeof *out, &buf, &size));
    st = nncl_idx_parse(buf, size, path, out);
    NNCL_FREE(buf);
    return st;
}

void nncl_idx_free(nncl_idx *idx) {
    if (!idx) return;
    NNCL_FREE(idx->data);
    memset(idx, 0, sizeof *idx);
}

#undef IDX_MAX_INFLATED
