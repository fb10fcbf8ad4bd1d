/* gemm.h - the GEMM layer: the matrix product the layers above call
 * (nncl__sgemm: CLBlast or nncl's own kernels, whichever was measured
 * faster), CLBlast's tuning, and, for the files that launch them directly,
 * nncl's own GEMM kernels (cl/gemm.cl): packing into panels, the
 * micro-kernels over packed panels (batched along a third NDRange
 * dimension), and the variants a device has. Panels: Ap[p][k][r] =
 * A(p*MR + r, k), Bp[q][k][c] = B(k, q*NR + c), zero past m and n, K-major,
 * panels contiguous; one batch item's panels take
 * nncl__gemm_pack_floats(MR, m, k) (or NR, n, k) floats. */
#ifndef NNCL_GEMM_H
#define NNCL_GEMM_H
#include "runtime/internal.h"

/* ------------------------------------------------------------- the product */

/* What a GEMM applies to C as it stores it, after alpha and beta: a bias
 * (1: bias[j] per column, 2: bias[i] per row) and an activation (nncl_act). */
typedef struct nncl__gemm_epi {
    int bias;
    cl_mem bias_mem;
    size_t bias_off;
    int act;
} nncl__gemm_epi;

/* C = epi(alpha op(A) op(B) + beta C), row-major, offsets and leading
 * dimensions in elements. temp: a buffer of nncl__sgemm_temp_size() bytes
 * whose start the product may use, or NULL to let it allocate (plans pass
 * one so a step allocates nothing). Runs CLBlast or nncl's own kernels,
 * whichever was measured faster for the shape on dev (gemm_pick.c). */
typedef struct nncl__gemm_args {
    int trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    cl_mem a, b, c, temp;
    size_t a_off, b_off, c_off;
    size_t lda, ldb, ldc;
    nncl__gemm_epi epi;
    /* Half storage (nncl_precision 1 fp16, 2 bf16): A, B, the bias and C
     * in that type, C in fp32 when c_f32; nncl's own kernels only. 0: fp32.
     * temp_cap (half storage, at prepare): temp bytes the product should
     * make do with when its panels need more (0: none); a step fits the
     * temp it is given (src/gemm/gemm_own.c). */
    int store, c_f32;
    size_t temp_cap;
} nncl__gemm_args;
nncl_status nncl__sgemm(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g);
/* The same for the eager nncl_gemm: a shape without a choice of its own is
 * measured (once, then stored) instead of taking a covering choice of
 * another shape, which a plan's step takes so as not to measure mid-step. */
nncl_status nncl__sgemm_exact(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g);
/* Bytes of temp the product of g's shape uses: CLBlast's, or that of the
 * own kernel chosen for the shape; before a choice, the most any may use. */
nncl_status nncl__sgemm_temp_size(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes);
/* What a plan calls for each product it will run: chooses the kernel for
 * g's shape now (measuring when no choice is stored) and gives the temp
 * size as nncl__sgemm_temp_size. */
nncl_status nncl__sgemm_prepare(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes);
/* CLBlast alone, epilogue included (gemm.c). */
nncl_status nncl__sgemm_clblast(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g);
nncl_status nncl__sgemm_clblast_temp(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, size_t *bytes);
nncl_status nncl__blas_fail(nncl_context *ctx, int code, const char *call);

/* tune.c: at nncl_init, applies the GEMM tuning stored for device d (and,
 * with config.gemm_tune 1 or $NNCL_TUNE=1, tunes a device that has none);
 * logs, never fails. mode: -1 ignore stored tunings, 0 apply, 1 also tune. */
void nncl__tune_on_open(nncl_context *ctx, int device);
int nncl__tune_mode(const nncl_context *ctx);
/* nncl_tune_gemm with the first max_candidates of each family (0: all) and
 * the first n_shapes shapes (0: all), for tests that cannot wait. */
nncl_status nncl__tune_gemm_run(nncl_context *ctx, int device, double seconds, int max_candidates, int n_shapes);
/* The path of device d's stored tuning into path; 0 when there is no folder. */
int nncl__tune_file(nncl_context *ctx, int device, char *path, size_t size);

/* ------------------------------------------------------------- choosing */

/* The harness every choice of an implementation times its candidates with
 * (src/gemm/choose.c). run queues one run of candidate i (0..n-1), or
 * fails; t[i] is 0 on entry for a candidate to time, HUGE_VAL for one left
 * out, and receives its fastest seconds per run (HUGE_VAL when it failed). */
#define NNCL__CHOOSE_MAX 32
typedef nncl_status (*nncl__choose_run)(void *user, int i);
nncl_status nncl__choose_time(nncl_context *ctx, nncl_device *dev, int n, nncl__choose_run run, void *user,
                              double *t);
/* Whether a candidate's result out agrees with the reference ref (the
 * first candidate's) over n values: max |out - ref| <= 1e-3 (max |ref| + 1),
 * NaN never; *worst (when not NULL) the largest difference. */
int nncl__choose_agree(const float *ref, const float *out, size_t n, double *worst);

/* ------------------------------------------------------------- own kernels */

enum {
    NNCL__GEMM_PACKED = 1, /* CPU style: register tile per work-item, no local memory */
    NNCL__GEMM_LOCAL = 2,  /* GPU style: local-memory tiles */
    NNCL__GEMM_DIRECT = 3, /* no packing: reads A and B in place (small products) */
    NNCL__GEMM_DOT = 4     /* no packing, A times B transposed alone: dot products along k */
};
#define NNCL__GEMM_MAX_VARIANTS 10

typedef struct nncl__gemm_variant {
    int kind, mr, nr, vw, wg;
    int kc;            /* K block of whole products (nncl__gemm_own), 0: none */
    int index;         /* its place in the device's list (its kernels' row) */
    char name[48];     /* e.g. "packed6x16v8" */
    char options[128]; /* build options of its program of cl/gemm.cl */
    int store;         /* its kernels' build for half storage (cl/common.cl NNCL_STORE), 0: fp32 */
} nncl__gemm_variant;

/* ceil(rows / tile) * tile * k: the floats of one batch item's panels. */
size_t nncl__gemm_pack_floats(int tile, size_t rows, size_t k);

/* The variants dev can run (*all 1: every kind, for tests; 0: those worth
 * timing on dev); *count of them into v[NNCL__GEMM_MAX_VARIANTS]. */
nncl_status nncl__gemm_variants(nncl_context *ctx, nncl_device *dev, int all, const nncl__gemm_variant **v,
                                int *count);
/* The packed (CPU or GPU style) variant to use for panels of an [m,n,k]
 * product on dev: the one measured fastest for that shape, else the device's
 * first. */
nncl_status nncl__gemm_packed_variant(nncl_context *ctx, nncl_device *dev, size_t m, size_t n, size_t k,
                                      nncl__gemm_variant *v);

/* op(A) [m,k] of batch item z (at a_off + z*a_stride, trans: A stored [k,m])
 * into panels at ap_off + z*nncl__gemm_pack_floats(v->mr, m, k). */
nncl_status nncl__gemm_pack_a(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int trans, size_t m,
                              size_t k, cl_mem a, size_t a_off, size_t lda, size_t a_stride, size_t batch, cl_mem ap,
                              size_t ap_off);
/* op(B) [k,n] likewise (trans: B stored [n,k]), panels of v->nr columns. */
nncl_status nncl__gemm_pack_b(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int trans, size_t k,
                              size_t n, cl_mem b, size_t b_off, size_t ldb, size_t b_stride, size_t batch, cl_mem bp,
                              size_t bp_off);

/* C_z = epi(alpha Ap_z Bp_z + beta C_z) for z < batch, one launch. Strides in
 * floats between batch items; ap_stride 0 shares A (convolution weights). */
typedef struct nncl__gemm_packed_args {
    size_t m, n, k, batch;
    cl_mem ap;
    size_t ap_off, ap_stride;
    cl_mem bp;
    size_t bp_off, bp_stride;
    cl_mem c;
    size_t c_off, c_stride, ldc;
    float alpha, beta;
    nncl__gemm_epi epi;
} nncl__gemm_packed_args;
nncl_status nncl__gemm_packed(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                              const nncl__gemm_packed_args *p);

/* A whole product of g through variant v: packing into the start of g->temp
 * (or of a scratch buffer of dev's when g->temp is NULL), then the
 * micro-kernel; the direct and dot variants read A and B in place. */
nncl_status nncl__gemm_own(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                           const nncl__gemm_args *g);
/* A product with half storage (g->store): through the panel variant (CPU
 * packed or GPU local-memory kernel) the device would pack g's shape with
 * (K blocks off, so that C is written once), the packing reading fp16/bf16
 * into fp32 panels and the product storing C in the storage type, or in
 * fp32 with g->c_f32; given less temp than its panels, B goes in blocks
 * of panels beside A's. prepare: only resolve its kernels and give the
 * temp bytes it needs in *bytes: its panels, or (g->temp_cap smaller) the
 * cap or A's panels and one of B's, whichever is more. */
nncl_status nncl__gemm_own_store(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, int prepare,
                                 size_t *bytes);
/* Whether every index of g (offsets, leading dimensions, panels) fits the
 * own kernels' int arguments; when not, products stay with CLBlast. */
int nncl__gemm_own_fits(const nncl__gemm_args *g);
/* Whether v's micro-kernel takes packed panels (nncl__gemm_packed, the
 * convolution paths): the direct and dot kernels read A and B in place. */
int nncl__gemm_packs(const nncl__gemm_variant *v);
/* Whether v runs a product of g's transposes (the dot kernel: A times B
 * transposed, nothing else). */
int nncl__gemm_takes(const nncl__gemm_variant *v, int trans_a, int trans_b);
/* Whether all[i] is worth timing on an [m,n] product: not a local-memory
 * tile larger than the product either way when an earlier variant has a
 * smaller one (the GPU set's 128 x 128 tile on a small product pads more
 * and computes no faster; not timing it also spares its build). */
int nncl__gemm_worth(const nncl__gemm_variant *all, int i, size_t m, size_t n);
/* Bytes of temp nncl__gemm_own needs for g's shape through v. */
size_t nncl__gemm_own_temp(const nncl__gemm_variant *v, const nncl__gemm_args *g);

/* Resolves the kernels a product of g through variant v (NULL: CLBlast)
 * launches, so that running it later looks nothing up (plan preparation). */
nncl_status nncl__gemm_own_resolve(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                                   const nncl__gemm_args *g);
/* on 1: from now on nncl__gemm_own_resolve records the fp32 variants it
 * is asked for; on 0 (as often as 1 was given): resolves those recorded,
 * the ones not built yet as one program of their instances (one build and
 * one load when cached instead of one each, which cost a CPU driver as
 * much again as their source; $NNCL_GEMM_ONE_PROGRAM=0 builds each alone).
 * A plan brackets its kernel resolution with the two. */
nncl_status nncl__gemm_defer(nncl_context *ctx, nncl_device *dev, int on);
/* Resolves the kernels variant v launches (gemm_own.c), now. */
nncl_status nncl__gemm_own_resolve_kernels(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v);
/* The epilogue alone, over C of g (after CLBlast). */
nncl_status nncl__gemm_epilogue(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g);

/* Per-device state: variants, measured choices, scratch (gemm_own.c and
 * gemm_pick.c). */
typedef struct nncl__gemm_choice {
    int ta, tb, epi;          /* epi: bias | act << 2 */
    size_t m, n, k;
    int best, best_own;       /* variant index, -1 for CLBlast */
} nncl__gemm_choice;

/* A conv2d layer's path (src/ops/conv_pick.c), measured on the whole layer:
 * key C H W O k stride pad act bias dx dw; path 0 im2col + CLBlast, 1 the
 * implicit GEMM on own kernels, 2 the 3x3 kernels, 3 and 4 the own path with
 * the input gradient by a product or the 3x3 kernel, up to NNCL__CONV_PATH_MAX
 * (NNCL__CONV_*, src/ops/conv.h, which checks that its paths fit). */
#define NNCL__CONV_KEY 11
#define NNCL__CONV_PATH_MAX 4
typedef struct nncl__conv_choice {
    int key[NNCL__CONV_KEY];
    int path;
} nncl__conv_choice;

typedef struct nncl__gemm_state {
    nncl__gemm_variant all[NNCL__GEMM_MAX_VARIANTS];
    int n_all;
    int n_timed; /* all[0 .. n_timed-1] are worth timing on the device */
    unsigned shipped; /* bit i: all[i] is named by a choice shipped for the device's class (0: none) */
    nncl__gemm_choice *choices;
    int n_choices, cap_choices, loaded;
    char id[1024]; /* what the choice file is written for (gemm_pick.c), made as it is loaded */
    nncl__conv_choice *convs;
    int n_convs, cap_convs;
    cl_mem scratch;
    size_t scratch_bytes;
    /* Each variant's kernels (pack A, pack B, product, both packs) and the epilogue,
     * resolved on first use (a plan's prepare measures every product it
     * will run), then launched by index. */
    nncl__kslot kernels[NNCL__GEMM_MAX_VARIANTS][4], epilogue;
    nncl__kslot kernels_store[2][NNCL__GEMM_MAX_VARIANTS][4]; /* the same built for fp16 and bf16 storage */
    /* While a plan is made (nncl__gemm_defer > 0), the fp32 variants its
     * products resolve (bit i: all[i]), built at its end as one program;
     * inst[i] the program holding variant i's instance, if any. */
    int defer;
    unsigned pending;
    nncl_program *inst[NNCL__GEMM_MAX_VARIANTS];
} nncl__gemm_state;
enum { NNCL__GEMM_K_PACK_A, NNCL__GEMM_K_PACK_B, NNCL__GEMM_K_PRODUCT, NNCL__GEMM_K_PACK_AB }; /* columns of kernels */

nncl_status nncl__gemm_state_get(nncl_context *ctx, nncl_device *dev, nncl__gemm_state **out);
void nncl__gemm_state_free(nncl_device *dev);

/* The stored choice for g's shape on dev: NULL when none yet. */
const nncl__gemm_choice *nncl__gemm_choice_find(nncl__gemm_state *s, const nncl__gemm_args *g);
/* The stored path of the conv layer with key (NNCL__CONV_KEY ints), -1
 * none yet (reads the cache file first). */
int nncl__conv_choice_find(nncl_context *ctx, nncl_device *dev, const int *key);
/* Records a conv layer's measured path, in memory and in the cache file. */
nncl_status nncl__conv_choice_add(nncl_context *ctx, nncl_device *dev, const int *key, int path);
/* The stored choices (src/gemm/choice_file.c): a choice or a conv
 * layer's path into s (0: out of memory); the device's file and its
 * class's shipped choices into s (once, at the state's first use); s
 * written back whole (best effort); the file's text (buf of n bytes and
 * one more for a NUL) parsed into s for identity id (0: ignored, why in
 * *why). */
int nncl__gemm_choice_add(nncl__gemm_state *s, const nncl__gemm_choice *c);
int nncl__gemm_conv_add(nncl__gemm_state *s, const nncl__conv_choice *c);
void nncl__gemm_choices_load(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s);
void nncl__gemm_choices_store(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s);
int nncl__gemm_choices_parse(nncl__gemm_state *s, const char *id, char *buf, size_t n, const char **why);
/* The one format of the files that store choices, the GEMM choices and
 * conv2d paths above and CLBlast's tuning (src/gemm/tune.c):
 *     MAGIC "\n" IDENTITY BODY "check " 16 hex digits "\n"
 * IDENTITY and BODY whole lines, the check FNV-1a over all before it.
 * nncl__sealed_body checks buf (n bytes and one more for a NUL): its
 * body, NUL-terminated where the check line was, or NULL with *why
 * "damaged", "written by another version of nncl" (MAGIC's name with
 * another version number) or idmiss (another identity than id).
 * nncl__sealed_seal appends the check line to text (len bytes, cap in
 * all): the new length, 0 where it does not fit. */
char *nncl__sealed_body(char *buf, size_t n, const char *magic, const char *id, const char *idmiss, const char **why);
size_t nncl__sealed_seal(char *text, size_t len, size_t cap);
/* Variant idx's name ("clblast" for -1); whether variant i is timed for a
 * product of these transposes and [m,n] shape (what a choice may name). */
const char *nncl__gemm_variant_name(const nncl__gemm_state *s, int idx);
int nncl__gemm_candidate(const nncl__gemm_state *s, int i, int ta, int tb, size_t m, size_t n);
/* Whether CLBlast is timed against the own kernels on dev: not on a
 * device class where it was measured slower at every shape (PoCL's CPU
 * devices) unless it runs a tuning made for dev or $NNCL_TIME_CLBLAST=1;
 * =0 never. */
int nncl__gemm_times_clblast(const nncl_device *dev);
/* $NNCL_GEMM: 0 auto (default), 1 clblast, 2 own. */
int nncl__gemm_mode(void);

#endif /* NNCL_GEMM_H */
