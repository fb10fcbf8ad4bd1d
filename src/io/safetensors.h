/* safetensors.h - what the safetensors reader and writer share: the parsed
 * file (struct nncl_safetensors), the header's JSON reader
 * (safetensors_json.c) and the little-endian element conversions
 * (safetensors_dtype.c). safetensors.c parses and answers queries,
 * safetensors_write.c writes. */
#ifndef NNCL_SAFETENSORS_H
#define NNCL_SAFETENSORS_H
#include "runtime/internal.h"
#include <stdio.h>

typedef struct nncl__st_tensor {
    char *name;
    int ndim;
    int64_t shape[NNCL_ST_MAX_DIMS];
    char dtype[8];
    int dsize;             /* bytes per element in the file */
    uint64_t begin, end;   /* byte range within the data region */
    size_t numel;
    float *data;           /* into the owner's data buffer */
} nncl__st_tensor;

typedef struct nncl__st_meta {
    char *key;
    char *value;
} nncl__st_meta;

struct nncl_safetensors {
    char *source;          /* file name or caller's label, for messages */
    nncl__st_tensor *t;
    int count, cap;
    const nncl__st_tensor **by_name; /* sorted by name, for lookup */
    nncl__st_meta *meta;         /* sorted by key once parsed */
    int n_meta, cap_meta;
    float *data;           /* every tensor's floats */
};

/* "safetensors SOURCE: message" through nncl__fail. */
nncl_status nncl__st_fail(const char *source, nncl_status status, const char *fmt, ...) NNCL_PRINTF(3, 4);

/* ------------------------------------------------------------ JSON (safetensors_json.c) */

typedef struct nncl__st_json {
    const unsigned char *s;
    size_t n, pos;
    const char *src;
} nncl__st_json;

/* Offset of the first byte that is not valid UTF-8, or n when all are. */
size_t nncl__st_utf8_check(const unsigned char *s, size_t n);
nncl_status nncl__st_json_fail(const nncl__st_json *j, const char *fmt, ...) NNCL_PRINTF(2, 3);
int nncl__st_json_peek(nncl__st_json *j);
nncl_status nncl__st_json_expect(nncl__st_json *j, int c);
/* A string; *out (NUL-terminated, NNCL_MALLOC'd) and *out_len may be NULL
 * to check and skip it. */
nncl_status nncl__st_json_string(nncl__st_json *j, char **out, size_t *out_len);
nncl_status nncl__st_json_uint(nncl__st_json *j, const char *what, uint64_t *v);
nncl_status nncl__st_json_skip(nncl__st_json *j, int depth);

/* ------------------------------------------------------------ bytes (safetensors_dtype.c) */

int nncl__st_host_le(void);
uint64_t nncl__st_get_u64(const unsigned char *p);
void nncl__st_put_u64(unsigned char *p, uint64_t v);
nncl_status nncl__st_convert(const char *source, const nncl__st_tensor *t, const unsigned char *src, float *dst);
void nncl__st_write_floats(FILE *f, const float *x, size_t n);

#endif
