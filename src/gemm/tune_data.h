/* tune_data.h - the data of the GEMM tuning (tune.c and tune_search.c, its
 * only readers): the limits and constants of the search, the names of
 * CLBlast's kernel parameters, the curated candidate parameter sets of Xgemm
 * and XgemmDirect, the GEMM shapes nncl issues, and what tune.c lends the
 * search. A candidate is a row here; the search needs no change for a new
 * one. */
#ifndef NNCL_TUNE_DATA_H
#define NNCL_TUNE_DATA_H
#include "gemm/gemm.h"

#define TUNE_NX 16            /* parameters of CLBlast's "Xgemm" kernel */
#define TUNE_ND 10            /* parameters of "XgemmDirect" */
#define TUNE_ALL_DIRECT 4096  /* XGEMM_MIN_INDIRECT_SIZE sending every measured shape to XgemmDirect */
#define TUNE_FILE_MAX 4096    /* a larger file is not one of ours */
#define TUNE_PRUNE 1.5        /* a candidate this much slower than the best so far is dropped early */
#define TUNE_DEFAULT_SECONDS 60.0
#define TUNE_GUARD 256        /* floats around C that a GEMM must leave alone */
#define TUNE_SENTINEL 1234.5f
#define TUNE_MAGIC "nncl-gemm-tuning 1"

/* Names exactly as CLBlast 1.5 expects them, in its database order. */
static const char *const tune_xnames[TUNE_NX] = {"GEMMK", "KREG", "KWG", "KWI",   "MDIMA", "MDIMC", "MWG", "NDIMB",
                                                 "NDIMC", "NWG",  "SA",  "SB",    "STRM",  "STRN",  "VWM", "VWN"};
static const char *const tune_dnames[TUNE_ND] = {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD",
                                                 "PADA", "PADB",   "VWMD",   "VWND",   "WGD"};
static const char *const tune_tname[1] = {"XGEMM_MIN_INDIRECT_SIZE"};

/* Xgemm candidates. cpu 1: register tiles with wide vectors and no local
 * memory (no barriers, so CPU drivers keep the tile in registers), measured
 * best on PoCL, tried first on CPUs; cpu 0: entries of CLBlast's own
 * database for GPUs of AMD, ARM, Intel, NVIDIA, Qualcomm and for Intel CPUs,
 * tried first on everything else. Each list is in order of promise, so a
 * short budget still tries the likely winners. GEMMK=1 (CLBlast's second
 * kernel) is left out: some of its database entries corrupted the heap of
 * the process on PoCL. */
typedef struct tune_xrow {
    int cpu;
    unsigned short v[TUNE_NX];
} tune_xrow;
static const tune_xrow tune_xcand[] = {
    /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
    {1, {0, 1, 16, 2, 8, 8, 64, 8, 8, 128, 0, 0, 0, 0, 8, 16}},
    {1, {0, 1, 16, 2, 4, 4, 32, 8, 8, 128, 0, 0, 0, 0, 8, 16}},
    {1, {0, 1, 16, 2, 8, 8, 64, 8, 8, 128, 0, 0, 1, 1, 8, 16}},
    {1, {0, 1, 16, 4, 4, 4, 64, 4, 4, 64, 0, 0, 0, 0, 16, 16}},
    {1, {0, 1, 16, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 8, 8}},
    {1, {0, 1, 32, 2, 8, 8, 64, 8, 8, 128, 0, 0, 0, 0, 8, 16}},
    {1, {0, 1, 16, 2, 8, 8, 32, 8, 8, 128, 0, 0, 0, 0, 4, 16}},
    {1, {0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 4}},
    {1, {0, 1, 16, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 8}},
    {1, {0, 1, 32, 2, 16, 16, 64, 8, 8, 64, 0, 0, 0, 0, 4, 4}},    /* Intel CPU default */
    {1, {0, 1, 32, 2, 16, 32, 32, 8, 8, 64, 0, 1, 0, 0, 1, 8}},    /* Core i7-6770HQ */
    {1, {0, 1, 16, 2, 8, 8, 128, 16, 8, 128, 0, 1, 1, 1, 1, 8}},   /* Core i7-2670QM */
    {0, {0, 1, 32, 2, 8, 8, 32, 16, 16, 32, 1, 1, 0, 0, 4, 2}},    /* generic default (CLBlast 1.5) */
    {0, {0, 1, 32, 2, 16, 16, 64, 8, 8, 64, 1, 1, 0, 0, 4, 4}},    /* AMD GPU default */
    {0, {0, 1, 32, 2, 16, 8, 64, 8, 8, 64, 1, 1, 1, 1, 4, 8}},     /* NVIDIA GTX 1080 */
    {0, {0, 1, 16, 2, 16, 16, 64, 16, 8, 128, 1, 1, 1, 0, 4, 8}},  /* NVIDIA GTX 980 */
    {0, {0, 1, 32, 2, 16, 16, 64, 8, 8, 32, 1, 1, 0, 0, 4, 2}},    /* ARM Mali default */
    {0, {0, 1, 32, 2, 8, 8, 32, 8, 8, 32, 1, 1, 0, 0, 4, 1}},      /* Qualcomm Adreno */
    {0, {0, 1, 32, 2, 8, 8, 128, 32, 16, 64, 0, 0, 1, 0, 4, 2}},   /* Intel HD Graphics 530 */
    {0, {0, 1, 16, 2, 8, 8, 128, 8, 8, 128, 1, 1, 1, 0, 1, 8}},    /* Core i7-4790K */
    {0, {0, 1, 32, 2, 32, 8, 128, 8, 8, 128, 1, 1, 1, 1, 2, 8}},   /* Core i7-3770 */
    {0, {0, 1, 32, 2, 16, 8, 32, 8, 32, 128, 1, 1, 1, 1, 1, 4}},   /* Xeon E5-2630 v3 */
    {0, {0, 1, 32, 8, 32, 32, 64, 32, 16, 64, 1, 1, 1, 0, 2, 2}},  /* Core i5-6200U */
    {0, {0, 1, 32, 2, 16, 16, 128, 16, 16, 128, 1, 1, 0, 0, 8, 8}},
};

/* XgemmDirect candidates, in the same spirit; on CPUs the ones that compile
 * quickly come first (wide direct kernels take a minute to build on PoCL). */
typedef struct tune_drow {
    int cpu;
    unsigned short v[TUNE_ND];
} tune_drow;
static const tune_drow tune_dcand[] = {
    /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
    {1, {2, 8, 8, 8, 8, 0, 0, 2, 2, 32}},
    {1, {2, 8, 8, 8, 8, 1, 1, 4, 4, 32}},     /* Intel CPU default */
    {1, {16, 8, 16, 16, 16, 0, 0, 1, 1, 32}}, /* Xeon E5-2630 v3/v4 */
    {1, {8, 8, 8, 8, 8, 0, 0, 4, 4, 32}},
    {1, {16, 16, 8, 8, 8, 0, 0, 2, 4, 32}},   /* Core i7 920 */
    {1, {2, 16, 16, 16, 16, 0, 0, 4, 4, 64}},
    {1, {2, 8, 8, 8, 8, 0, 0, 2, 2, 64}},     /* Core i7-4790K */
    {1, {8, 4, 4, 4, 4, 0, 0, 8, 8, 32}},
    {1, {8, 8, 8, 8, 8, 0, 0, 8, 4, 64}},     /* Core i5-4590S */
    {1, {2, 8, 8, 16, 8, 0, 0, 4, 4, 64}},    /* Core i7-6770HQ */
    {1, {8, 16, 16, 16, 16, 0, 0, 1, 1, 64}}, /* Core i5-4570 */
    {1, {8, 8, 8, 8, 8, 0, 0, 8, 8, 64}},
    {0, {2, 8, 8, 8, 8, 1, 1, 1, 1, 16}},     /* generic default (CLBlast 1.5) */
    {0, {2, 8, 8, 16, 16, 1, 1, 4, 2, 32}},   /* NVIDIA default */
    {0, {16, 8, 8, 16, 16, 1, 1, 1, 1, 32}},  /* NVIDIA Tesla P100 */
    {0, {2, 16, 16, 8, 8, 1, 1, 2, 2, 32}},   /* ARM Mali */
    {0, {2, 16, 16, 8, 8, 1, 1, 1, 1, 16}},   /* AMD GPU default */
    {0, {16, 16, 16, 32, 8, 0, 1, 1, 1, 32}}, /* AMD Tonga */
    {0, {2, 8, 8, 8, 8, 1, 1, 2, 1, 16}},     /* Qualcomm Adreno */
};

/* Rows of CLBlast's generic default above: the fallback after a failure. */
#define TUNE_X_GENERIC 12
#define TUNE_D_GENERIC 12
#define TUNE_NXC ((int)(sizeof tune_xcand / sizeof tune_xcand[0]))
#define TUNE_NDC ((int)(sizeof tune_dcand / sizeof tune_dcand[0]))

/* The GEMMs nncl issues, smallest first (so that a slow candidate is dropped
 * before the large ones): the small output layer of a classifier (forward
 * x W^T), conv1 and conv2 of the CNN example (forward, dW, dX, with view
 * offsets), the linear layers of the MLP and the CNN (forward x W^T,
 * dx = dy W, dW = dy^T x), and two squares. */
typedef struct tune_shape {
    int ta, tb;
    size_t m, n, k, a_off, b_off;
    float beta;
} tune_shape;
static const tune_shape tune_shapes[] = {
    {0, 1, 100, 10, 128, 0, 0, 0.0f},      {0, 1, 16, 9, 2352, 32, 32, 1.0f},
    {0, 0, 16, 2352, 9, 16, 0, 0.0f},      {0, 1, 100, 128, 784, 0, 0, 0.0f},
    {0, 0, 100, 784, 128, 0, 0, 0.0f},     {1, 0, 128, 784, 100, 0, 0, 1.0f},
    {0, 0, 32, 2352, 144, 0, 32, 0.0f},    {0, 1, 32, 144, 2352, 32, 32, 0.0f},
    {1, 0, 144, 2352, 32, 0, 32, 0.0f},    {0, 0, 256, 256, 256, 0, 0, 0.0f},
    {0, 1, 100, 128, 1568, 0, 0, 0.0f},    {0, 0, 512, 512, 512, 0, 0, 0.0f},
};
#define TUNE_NS ((int)(sizeof tune_shapes / sizeof tune_shapes[0]))

/* A tuning: for each family its parameters, or (has_* 0) CLBlast's own. */
typedef struct tune_set {
    int has_x, has_d;
    size_t x[TUNE_NX], d[TUNE_ND];
    size_t min_indirect;
} tune_set;

typedef struct tune_limits {
    size_t max_wg, max_item[3];
    uint64_t local_mem;
} tune_limits;

/* tune.c: a device's limits, the validity of a set for them, applying it */
void nncl__tune_limits(nncl_device *dev, tune_limits *L);
int nncl__tune_x_ok(const size_t *v, const tune_limits *L);
int nncl__tune_d_ok(const size_t *v, const tune_limits *L);
/* one family's parameters; 0 or CLBlast's code */
int nncl__tune_override(nncl_device *dev, const char *kernel, const char *const *names, const size_t *values, size_t n);
/* Overrides every family the set names; 0 or the first CLBlast code. */
int nncl__tune_apply(nncl_device *dev, const tune_set *s);
/* "FAMILY default" or "FAMILY N1=v1 N2=v2 ..." */
void nncl__tune_format_family(char *out, size_t size, const char *family, int has, const char *const *names,
                              const size_t *v, int n);
/* Writes s as dev's tuning file; its name in path. */
nncl_status nncl__tune_store(nncl_context *ctx, const nncl_device *dev, const tune_set *s, char *path, size_t size);

#endif /* NNCL_TUNE_DATA_H */
