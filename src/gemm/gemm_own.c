/* gemm_own.c - launching nncl's own GEMM kernels (cl/gemm.cl): the variants
 * a device gets (register tile and vector width from the device's preferred
 * float vector width), packing, the packed micro-kernels with their
 * epilogue and batch dimension, and whole products through packing into the
 * start of the temporary buffer. */
#include "gemm/gemm.h"
#include <limits.h>
#include <stdio.h>

#define OWN_ALIGN 64 /* floats: B panels start on a cache line */
#define OWN_PACK_KB 8 /* NNCL_PACK_KB of cl/gemm.cl */
/* Work-items per packing group, along k: up to 32 blocks of k of one panel,
 * so that a CPU driver's group walks a long stretch of the source (the
 * transposing pack gains most). */
#define OWN_PACK_GROUP 32
#define OWN_DOT_TILES 8 /* column tiles per work-item of the dot kernel: its NNCL_DG below */

size_t nncl__gemm_pack_floats(int tile, size_t rows, size_t k) {
    return (rows + (size_t)tile - 1) / (size_t)tile * (size_t)tile * k;
}

/* Per kind (NNCL__GEMM_*): the name's prefix, the build option that
 * selects its micro-kernel in cl/gemm.cl (the local kernel's, with its
 * work-group size, is written by own_variant), and that kernel. */
static const struct {
    const char *prefix, *option, *kernel;
} own_kinds[] = {{"", "", ""}, /* kinds start at 1 */
                 {"packed", "", "nncl_gemm_f32_packed"},
                 {"local", "", "nncl_gemm_f32_local"},
                 {"direct", " -DNNCL_DIRECT", "nncl_gemm_f32_direct"},
                 {"dot", " -DNNCL_DOT -DNNCL_DG=" NNCL_XSTR(OWN_DOT_TILES), "nncl_gemm_f32_dot"}};

static void own_variant(nncl__gemm_variant *v, int kind, int mr, int nr, int vw, int wg, int kc, int fma) {
    const char *f = fma ? " -DNNCL_FMA" : "";
    v->kind = kind;
    v->kc = kc;
    v->mr = mr;
    v->nr = nr;
    v->vw = vw;
    v->wg = wg;
    if (kind == NNCL__GEMM_LOCAL) {
        /* vw: the local kernel's NNCL_LV (its runs of rows and columns) */
        snprintf(v->name, sizeof v->name, vw > 1 ? "local%dx%dw%dv%d" : "local%dx%dw%d", mr, nr, wg, vw);
        snprintf(v->options, sizeof v->options,
                 "-cl-mad-enable -DNNCL_MR=%d -DNNCL_NR=%d -DNNCL_VW=1 -DNNCL_WG=%d -DNNCL_LV=%d%s", mr, nr, wg, vw, f);
    } else {
        snprintf(v->name, sizeof v->name, "%.6s%dx%dv%d", own_kinds[kind].prefix, mr, nr, vw);
        if (kc) snprintf(v->name + strlen(v->name), sizeof v->name - strlen(v->name), "k%d", kc);
        snprintf(v->options, sizeof v->options, "-cl-mad-enable -DNNCL_MR=%d -DNNCL_NR=%d -DNNCL_VW=%d%s%s", mr, nr, vw,
                 own_kinds[kind].option, f);
    }
}

/* Variants by device, those worth timing first. CPUs: register tiles of
 * vectors of the preferred width, 6 rows of two vectors (the shape of the
 * fastest CPU BLAS kernels on 16 vector registers), with 16-wide vectors
 * (AVX-512: 32 registers) 14 rows of two (28 accumulators, two B vectors
 * and a broadcast: every register, the least loads per multiply-add), 4
 * rows of four (fewer rows to pad when m is small), the direct kernel for
 * small products (also 8 rows of one vector: narrow products such as a
 * classifier's 10 outputs waste fewer lanes; and 4 rows of four vectors
 * for few rows and many columns, such as a convolution's 32 x 19600 x 144
 * im2col product, where B is read once in place and each 64-column block
 * of it serves every row tile from L1, where packing B would be a large
 * share of a packed kernel's time), the tall tile over K
 * blocks whose B panel block stays in L1 (large products), and the dot
 * kernel for A times B transposed (a dense layer's forward: no packing;
 * 4 x 6 dot products with 16-wide vectors, 3 x 4 with narrower ones on
 * 16 registers); then, for tests,
 * a narrower vector and the local-memory kernel. GPUs: the local-memory
 * kernel first, 4 x 4 values per work-item, then 8 x 8 read as float4
 * (four times the multiply-adds per local-memory load, for large
 * products; 8 x 8 read one value at a time, 4 x 4 as float4, 8 x 4 and
 * 2 x 8 lose to one of these two). Devices
 * with a fused multiply-add accumulate with it (NNCL_FMA).
 * NNCL_GEMM_VARIANTS=gpu|cpu gives a device the other kind's set: the
 * tests run the GPU set on CPU devices, where CI has no GPU. */
static void own_fill(nncl_device *dev, nncl__gemm_state *s) {
    cl_uint pw = 0;
    cl_device_fp_config fp = 0;
    const char *set = getenv("NNCL_GEMM_VARIANTS");
    int vw, i, cpu = dev->info.type == NNCL_DEVICE_CPU, wg = 16, fma, tall;
    if (set && !strcmp(set, "gpu")) cpu = 0;
    if (set && !strcmp(set, "cpu")) cpu = 1;
    if (clGetDeviceInfo(dev->id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof pw, &pw, NULL) != CL_SUCCESS) pw = 4;
    if (clGetDeviceInfo(dev->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) != CL_SUCCESS) fp = 0;
    fma = (fp & CL_FP_FMA) != 0;
    vw = pw >= 16 ? 16 : pw >= 8 ? 8 : 4;
    tall = vw >= 16 ? 14 : 6;
    while ((size_t)wg * wg > dev->max_work_group && wg > 1) wg /= 2;
    s->n_all = 0;
    if (cpu) {
        own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, 6, 2 * vw, vw, 1, 0, fma);
        if (tall != 6) own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, tall, 2 * vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, 4, 4 * vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_DIRECT, 4, 2 * vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_DIRECT, 8, vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_DIRECT, 4, 4 * vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, tall, 2 * vw, vw, 1, 4096 / vw, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_DOT, vw >= 16 ? 4 : 3, vw >= 16 ? 6 : 4, vw, 1, 0, fma);
        s->n_timed = s->n_all;
        own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, 8, vw / 2, vw / 2, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_LOCAL, 4 * wg, 4 * wg, 1, wg, 0, fma);
    } else {
        own_variant(&s->all[s->n_all++], NNCL__GEMM_LOCAL, 4 * wg, 4 * wg, 1, wg, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_LOCAL, 8 * wg, 8 * wg, 4, wg, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_PACKED, 4, 2 * vw, vw, 1, 0, fma);
        own_variant(&s->all[s->n_all++], NNCL__GEMM_DIRECT, 4, 2 * vw, vw, 1, 0, fma);
        s->n_timed = s->n_all;
    }
    for (i = 0; i < s->n_all; i++) s->all[i].index = i;
}

/* Kernel `which` of variant v (0 pack A, 1 pack B, 2 its product), with
 * arguments begun: resolved once per device and variant. */
static nncl_status own_kernel(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int which,
                              nncl__args *a) {
    static const char *const names[4] = {"nncl_gemm_pack_a_f32", "nncl_gemm_pack_b_f32", "", "nncl_gemm_pack_ab_f32"};
    nncl__gemm_state *s = NULL;
    nncl__kslot *k;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (v->index < 0 || v->index >= s->n_all)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "gemm variant %s is not one of the device's", v->name);
    k = v->store ? &s->kernels_store[v->store == 2][v->index][which] : &s->kernels[v->index][which];
    if (!k->kernel) {
        const char *name = which != NNCL__GEMM_K_PRODUCT ? names[which] : own_kinds[v->kind].kernel;
        char opts[160];
        if (!v->store && s->inst[v->index]) { /* its instance's kernels carry its name (cl/gemm.cl, NNCL_SFX) */
            snprintf(opts, sizeof opts, "%s_%s", name, v->name);
            NNCL_TRY(nncl__kslot_resolve_in(ctx, dev, s->inst[v->index], opts, k));
        } else {
            snprintf(opts, sizeof opts, "%s%s", v->options, v->store == 1 ? " -DNNCL_STORE=1" : v->store == 2 ? " -DNNCL_STORE=2" : "");
            NNCL_TRY(nncl__kslot_resolve_opts(ctx, dev, "gemm", opts, name, k));
        }
    }
    nncl__args_begin_slot(a, ctx, k);
    return NNCL_OK;
}

nncl_status nncl__gemm_state_get(nncl_context *ctx, nncl_device *dev, nncl__gemm_state **out) {
    if (!dev->gemm) {
        nncl_status st;
        dev->gemm = (nncl__gemm_state *)nncl__calloc(1, sizeof *dev->gemm);
        if (!dev->gemm) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        own_fill(dev, dev->gemm);
        st = nncl__device_on_free(ctx, dev, nncl__gemm_state_free); /* nncl_free releases it */
        if (st != NNCL_OK) {
            nncl__gemm_state_free(dev);
            return st;
        }
    }
    *out = dev->gemm;
    return NNCL_OK;
}

void nncl__gemm_state_free(nncl_device *dev) {
    if (!dev->gemm) return;
    if (dev->gemm->scratch) nncl__buffer_release(dev, dev->gemm->scratch, dev->gemm->scratch_bytes);
    NNCL_FREE(dev->gemm->choices);
    NNCL_FREE(dev->gemm->convs);
    NNCL_FREE(dev->gemm);
    dev->gemm = NULL;
}

nncl_status nncl__gemm_variants(nncl_context *ctx, nncl_device *dev, int all, const nncl__gemm_variant **v,
                                int *count) {
    nncl__gemm_state *s = NULL;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    *v = s->all;
    *count = all ? s->n_all : s->n_timed;
    return NNCL_OK;
}

/* Every index and size a kernel sees must fit its int arguments. */
static nncl_status own_fits(nncl_context *ctx, const char *what, size_t last) {
    if (last > (size_t)INT_MAX)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: %zu elements, more than the kernels index", what, last);
    return NNCL_OK;
}

int nncl__gemm_packs(const nncl__gemm_variant *v) {
    return v->kind == NNCL__GEMM_PACKED || v->kind == NNCL__GEMM_LOCAL;
}

int nncl__gemm_takes(const nncl__gemm_variant *v, int trans_a, int trans_b) {
    return v->kind != NNCL__GEMM_DOT || (!trans_a && trans_b);
}

int nncl__gemm_worth(const nncl__gemm_variant *all, int i, size_t m, size_t n) {
    int j;
    if (all[i].kind != NNCL__GEMM_LOCAL || (m >= (size_t)all[i].mr && n >= (size_t)all[i].nr)) return 1;
    for (j = 0; j < i; j++)
        if (all[j].kind == NNCL__GEMM_LOCAL && all[j].mr < all[i].mr) return 0;
    return 1;
}

int nncl__gemm_own_fits(const nncl__gemm_args *g) {
    size_t lim = (size_t)INT_MAX, ea, eb, ec, pa, pb;
    /* each extent below lim/4 and the products of sizes checked one factor at a time */
    if (g->m >= lim / 4 || g->n >= lim / 4 || g->k >= lim / 4 || g->lda >= lim / 4 || g->ldb >= lim / 4 ||
        g->ldc >= lim / 4)
        return 0;
    if ((g->trans_a ? g->k : g->m) > lim / 4 / (g->lda + 1) || (g->trans_b ? g->n : g->k) > lim / 4 / (g->ldb + 1) ||
        g->m > lim / 4 / (g->ldc + 1) || g->m + 64 > lim / 4 / (g->k + 1) || g->n + 64 > lim / 4 / (g->k + 1))
        return 0;
    ea = g->a_off + (g->trans_a ? g->k : g->m) * g->lda;
    eb = g->b_off + (g->trans_b ? g->n : g->k) * g->ldb;
    ec = g->c_off + g->m * g->ldc;
    pa = (g->m + 64) * g->k;
    pb = (g->n + 64) * g->k;
    return ea < lim && eb < lim && ec < lim && pa + pb + 64 < lim;
}

/* Work-items of a packing group: OWN_PACK_GROUP blocks of k of one panel
 * (fewer only where the device allows fewer), whatever k is: a CPU driver
 * compiles a kernel once per group size it is launched with (PoCL: 0.6-1.4
 * s each for the packing kernel), and sizing groups by k (1 to 32) built
 * it four times per variant for the MLP's products. The launch rounds the
 * blocks up to whole groups; the items past k return. */
static size_t own_pack_group(const nncl_device *dev) {
    return dev->max_work_group < OWN_PACK_GROUP ? dev->max_work_group : OWN_PACK_GROUP;
}

/* Packs rows x k (A: op(A) [m,k]; B, is_b: op(B) [k,n] with rows = n),
 * one work-item per panel and block of OWN_PACK_KB values of k. */
static nncl_status own_pack(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int is_b, int trans,
                            size_t rows, size_t k, cl_mem src, size_t off, size_t ld, size_t stride, size_t batch,
                            cl_mem dst, size_t dst_off) {
    const char *kernel = is_b ? "nncl_gemm_pack_b_f32" : "nncl_gemm_pack_a_f32";
    int tile = is_b ? v->nr : v->mr;
    nncl__args a;
    size_t per = nncl__gemm_pack_floats(tile, rows, k), global[3], local[3] = {1, 1, 1};
    if (rows == 0 || k == 0 || batch == 0) return NNCL_OK;
    NNCL_TRY(own_fits(ctx, kernel, dst_off + per * batch));
    NNCL_TRY(own_fits(ctx, kernel, off + stride * batch + ((is_b ? !trans : trans) ? k : rows) * ld));
    NNCL_TRY(own_kernel(ctx, dev, v, is_b ? NNCL__GEMM_K_PACK_B : NNCL__GEMM_K_PACK_A, &a));
    nncl__arg_mem(&a, src);
    nncl__arg_int(&a, (int)off);
    nncl__arg_int(&a, (int)stride);
    nncl__arg_int(&a, (int)ld);
    nncl__arg_int(&a, is_b ? !trans : trans);
    nncl__arg_int(&a, (int)rows);
    nncl__arg_int(&a, (int)k);
    nncl__arg_mem(&a, dst);
    nncl__arg_int(&a, (int)dst_off);
    nncl__arg_int(&a, (int)per);
    global[0] = (rows + (size_t)tile - 1) / (size_t)tile;
    global[1] = (k + OWN_PACK_KB - 1) / OWN_PACK_KB;
    global[2] = batch;
    local[1] = own_pack_group(dev);
    return nncl__launch(&a, dev, 3, global, local);
}

nncl_status nncl__gemm_pack_a(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int trans, size_t m,
                              size_t k, cl_mem a, size_t a_off, size_t lda, size_t a_stride, size_t batch, cl_mem ap,
                              size_t ap_off) {
    return own_pack(ctx, dev, v, 0, trans, m, k, a, a_off, lda, a_stride, batch, ap, ap_off);
}

nncl_status nncl__gemm_pack_b(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v, int trans, size_t k,
                              size_t n, cl_mem b, size_t b_off, size_t ldb, size_t b_stride, size_t batch, cl_mem bp,
                              size_t bp_off) {
    return own_pack(ctx, dev, v, 1, trans, n, k, b, b_off, ldb, b_stride, batch, bp, bp_off);
}

/* op(A) and op(B) of a whole product g into panels at ap_off and bp_off of
 * dst, one launch. */
static nncl_status own_pack_ab(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                               const nncl__gemm_args *g, cl_mem dst, size_t ap_off, size_t bp_off) {
    nncl__args a;
    size_t global[3], local[3] = {1, 1, 1};
    NNCL_TRY(own_fits(ctx, "nncl_gemm_pack_ab_f32", bp_off + nncl__gemm_pack_floats(v->nr, g->n, g->k)));
    NNCL_TRY(own_fits(ctx, "nncl_gemm_pack_ab_f32", g->a_off + (g->trans_a ? g->k : g->m) * g->lda));
    NNCL_TRY(own_fits(ctx, "nncl_gemm_pack_ab_f32", g->b_off + (g->trans_b ? g->n : g->k) * g->ldb));
    NNCL_TRY(own_kernel(ctx, dev, v, NNCL__GEMM_K_PACK_AB, &a));
    nncl__arg_mem(&a, g->a);
    nncl__arg_int(&a, (int)g->a_off);
    nncl__arg_int(&a, (int)g->lda);
    nncl__arg_int(&a, g->trans_a);
    nncl__arg_int(&a, (int)g->m);
    nncl__arg_mem(&a, g->b);
    nncl__arg_int(&a, (int)g->b_off);
    nncl__arg_int(&a, (int)g->ldb);
    nncl__arg_int(&a, !g->trans_b);
    nncl__arg_int(&a, (int)g->n);
    nncl__arg_int(&a, (int)g->k);
    nncl__arg_mem(&a, dst);
    nncl__arg_int(&a, (int)ap_off);
    nncl__arg_int(&a, (int)bp_off);
    global[0] = (g->m + (size_t)v->mr - 1) / (size_t)v->mr + (g->n + (size_t)v->nr - 1) / (size_t)v->nr;
    global[1] = (g->k + OWN_PACK_KB - 1) / OWN_PACK_KB;
    global[2] = 1;
    local[1] = own_pack_group(dev);
    return nncl__launch(&a, dev, 3, global, local);
}

/* The epilogue's kernel arguments: bias buffer (C's when none), offset, code. */
static void own_arg_epi(nncl__args *a, const nncl__gemm_epi *e, cl_mem c) {
    nncl__arg_mem(a, e->bias ? e->bias_mem : c);
    nncl__arg_int(a, e->bias ? (int)e->bias_off : 0);
    nncl__arg_int(a, (e->bias & 3) | (e->act << 2));
}

/* Launch grid: one work-item (CPU style) or one w x w group (local) per
 * tile; the dot kernel's work-items take OWN_DOT_TILES tiles of a row. */
static nncl_status own_launch(nncl__args *a, nncl_device *dev, const nncl__gemm_variant *v, size_t m, size_t n,
                              size_t batch) {
    size_t global[3], local[3] = {1, 1, 1}, cols = (size_t)v->nr * (v->kind == NNCL__GEMM_DOT ? OWN_DOT_TILES : 1);
    global[0] = (m + (size_t)v->mr - 1) / (size_t)v->mr;
    global[1] = (n + cols - 1) / cols;
    global[2] = batch;
    if (v->kind == NNCL__GEMM_LOCAL) {
        global[0] *= (size_t)v->wg;
        global[1] *= (size_t)v->wg;
        local[0] = local[1] = (size_t)v->wg;
    } else if (v->kind == NNCL__GEMM_PACKED) {
        /* Four row tiles of one column panel per group: a CPU driver runs
         * a group's work-items in turn on one core, which then reuses the
         * B panel from its cache, and it schedules a quarter of the groups
         * (2 and 8 gain no more).
         * Always four, also for fewer tiles (the launch rounds up, the
         * items past m return): each group size is a build of its own. */
        local[0] = dev->max_work_group < 4 ? dev->max_work_group : 4;
    }
    return nncl__launch(a, dev, 3, global, local);
}

/* The packed micro-kernel over k of panels kp long (k < kp: one K block). */
static nncl_status own_packed(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                              const nncl__gemm_packed_args *p, size_t k, size_t kp) {
    nncl__args a;
    size_t last_c = p->c_off + (p->batch - 1) * p->c_stride + (p->m - 1) * p->ldc + p->n;
    if (p->m == 0 || p->n == 0 || p->batch == 0) return NNCL_OK;
    if (!nncl__gemm_packs(v))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "gemm variant %s takes no packed panels", v->name);
    NNCL_TRY(own_fits(ctx, "packed GEMM", last_c));
    NNCL_TRY(own_fits(ctx, "packed GEMM", p->ap_off + p->batch * p->ap_stride + nncl__gemm_pack_floats(v->mr, p->m, kp)));
    NNCL_TRY(own_fits(ctx, "packed GEMM", p->bp_off + p->batch * p->bp_stride + nncl__gemm_pack_floats(v->nr, p->n, kp)));
    NNCL_TRY(own_kernel(ctx, dev, v, NNCL__GEMM_K_PRODUCT, &a));
    nncl__arg_mem(&a, p->ap);
    nncl__arg_int(&a, (int)p->ap_off);
    nncl__arg_int(&a, (int)p->ap_stride);
    nncl__arg_mem(&a, p->bp);
    nncl__arg_int(&a, (int)p->bp_off);
    nncl__arg_int(&a, (int)p->bp_stride);
    nncl__arg_mem(&a, p->c);
    nncl__arg_int(&a, (int)p->c_off);
    nncl__arg_int(&a, (int)p->c_stride);
    nncl__arg_int(&a, (int)p->ldc);
    nncl__arg_int(&a, (int)p->m);
    nncl__arg_int(&a, (int)p->n);
    nncl__arg_int(&a, (int)k);
    nncl__arg_int(&a, (int)kp);
    nncl__arg_float(&a, p->alpha);
    nncl__arg_float(&a, p->beta);
    own_arg_epi(&a, &p->epi, p->c);
    return own_launch(&a, dev, v, p->m, p->n, p->batch);
}

nncl_status nncl__gemm_packed(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                              const nncl__gemm_packed_args *p) {
    return own_packed(ctx, dev, v, p, p->k, p->k);
}

static size_t own_b_offset(const nncl__gemm_variant *v, size_t m, size_t k) {
    size_t a = nncl__gemm_pack_floats(v->mr, m, k);
    return (a + OWN_ALIGN - 1) / OWN_ALIGN * OWN_ALIGN;
}

size_t nncl__gemm_own_temp(const nncl__gemm_variant *v, const nncl__gemm_args *g) {
    if (!nncl__gemm_packs(v) || g->m == 0 || g->n == 0) return 0;
    return (own_b_offset(v, g->m, g->k) + nncl__gemm_pack_floats(v->nr, g->n, g->k)) * sizeof(float);
}

static nncl_status own_direct(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                              const nncl__gemm_args *g) {
    nncl__args a;
    NNCL_TRY(own_fits(ctx, "direct GEMM", g->a_off + (g->trans_a ? g->k : g->m) * g->lda));
    NNCL_TRY(own_fits(ctx, "direct GEMM", g->b_off + (g->trans_b ? g->n : g->k) * g->ldb));
    NNCL_TRY(own_fits(ctx, "direct GEMM", g->c_off + g->m * g->ldc));
    NNCL_TRY(own_kernel(ctx, dev, v, NNCL__GEMM_K_PRODUCT, &a));
    nncl__arg_mem(&a, g->a);
    nncl__arg_int(&a, (int)g->a_off);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, (int)g->lda);
    nncl__arg_int(&a, g->trans_a);
    nncl__arg_mem(&a, g->b);
    nncl__arg_int(&a, (int)g->b_off);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, (int)g->ldb);
    nncl__arg_int(&a, g->trans_b);
    nncl__arg_mem(&a, g->c);
    nncl__arg_int(&a, (int)g->c_off);
    nncl__arg_int(&a, 0);
    nncl__arg_int(&a, (int)g->ldc);
    nncl__arg_int(&a, (int)g->m);
    nncl__arg_int(&a, (int)g->n);
    nncl__arg_int(&a, (int)g->k);
    nncl__arg_float(&a, g->alpha);
    nncl__arg_float(&a, g->beta);
    own_arg_epi(&a, &g->epi, g->c);
    return own_launch(&a, dev, v, g->m, g->n, 1);
}

/* dev's scratch buffer of at least bytes, for products given no temp. */
static nncl_status own_scratch(nncl_context *ctx, nncl_device *dev, size_t bytes, cl_mem *out) {
    nncl__gemm_state *s = NULL;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (s->scratch_bytes < bytes) {
        if (s->scratch) {
            /* the queue may still use the old one: the release waits for it */
            nncl__buffer_release(dev, s->scratch, s->scratch_bytes);
            s->scratch = NULL;
            s->scratch_bytes = 0;
        }
        NNCL_TRY(nncl__buffer_create(ctx, dev, bytes, &s->scratch));
        s->scratch_bytes = bytes;
    }
    *out = s->scratch;
    return NNCL_OK;
}

/* Packs g's A and B into the workspace (g->temp when large enough, else
 * the device's scratch) and fills p for a product over those panels. */
static nncl_status own_pack_args(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                                 const nncl__gemm_args *g, size_t need, nncl__gemm_packed_args *p) {
    size_t bytes = 0;
    cl_mem ws = g->temp;
    if (ws) NNCL_CL(ctx, clGetMemObjectInfo(ws, CL_MEM_SIZE, sizeof bytes, &bytes, NULL));
    if (!ws || bytes < need) NNCL_TRY(own_scratch(ctx, dev, need, &ws));
    if (g->k) NNCL_TRY(own_pack_ab(ctx, dev, v, g, ws, 0, own_b_offset(v, g->m, g->k)));
    memset(p, 0, sizeof *p);
    p->m = g->m;
    p->n = g->n;
    p->k = g->k;
    p->batch = 1;
    p->ap = ws;
    p->bp = ws;
    p->bp_off = own_b_offset(v, g->m, g->k);
    p->c = g->c;
    p->c_off = g->c_off;
    p->ldc = g->ldc;
    p->alpha = g->alpha;
    p->beta = g->beta;
    p->epi = g->epi;
    return NNCL_OK;
}

nncl_status nncl__gemm_own(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                           const nncl__gemm_args *g) {
    nncl__gemm_packed_args p;
    size_t k0;
    if (g->m == 0 || g->n == 0) return NNCL_OK;
    if (!nncl__gemm_takes(v, g->trans_a, g->trans_b))
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "gemm variant %s runs A times B transposed alone (got %s%s)",
                          v->name, g->trans_a ? "T" : "N", g->trans_b ? "T" : "N");
    if (!nncl__gemm_packs(v)) return own_direct(ctx, dev, v, g);
    NNCL_TRY(own_pack_args(ctx, dev, v, g, nncl__gemm_own_temp(v, g), &p));
    if (!v->kc || g->k <= (size_t)v->kc) return nncl__gemm_packed(ctx, dev, v, &p);
    /* K blocks: each adds its partial product to C (beta 1 after the
     * first); the epilogue comes with the last. A block of B panels small
     * enough for L1 then serves the work-items of consecutive A panels. */
    for (k0 = 0; k0 < g->k; k0 += (size_t)v->kc) {
        nncl__gemm_packed_args b = p;
        size_t kc = g->k - k0 < (size_t)v->kc ? g->k - k0 : (size_t)v->kc;
        b.ap_off = p.ap_off + k0 * (size_t)v->mr;
        b.bp_off = p.bp_off + k0 * (size_t)v->nr;
        if (k0) b.beta = 1.0f;
        if (k0 + kc < g->k) memset(&b.epi, 0, sizeof b.epi);
        NNCL_TRY(own_packed(ctx, dev, v, &b, kc, g->k));
    }
    return NNCL_OK;
}

/* Half storage given less temp (bytes) than a product's panels: B in
 * blocks of whole panels beside A's, the columns of a block (0 when not one
 * panel fits). */
static size_t own_store_cols(const nncl__gemm_variant *v, const nncl__gemm_args *g, size_t bytes) {
    size_t a = own_b_offset(v, g->m, g->k), panel = (size_t)v->nr * g->k;
    if (!g->k || bytes / sizeof(float) < a + panel) return 0;
    return (bytes / sizeof(float) - a) / panel * (size_t)v->nr;
}

/* A packed once into the temp, then each block of cols columns of B packed
 * behind it and multiplied into those columns of C, whole rows of them (no
 * rounding to half between blocks, as K blocks would have). */
static nncl_status own_store_blocks(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                                    const nncl__gemm_variant *pv, const nncl__gemm_args *g, size_t cols) {
    nncl__gemm_packed_args p;
    size_t a = own_b_offset(v, g->m, g->k), j0;
    NNCL_TRY(nncl__gemm_pack_a(ctx, dev, v, g->trans_a, g->m, g->k, g->a, g->a_off, g->lda, 0, 1, g->temp, 0));
    memset(&p, 0, sizeof p);
    p.m = g->m;
    p.k = g->k;
    p.batch = 1;
    p.ap = p.bp = g->temp;
    p.bp_off = a;
    p.c = g->c;
    p.ldc = g->ldc;
    p.alpha = g->alpha;
    p.beta = g->beta;
    p.epi = g->epi;
    for (j0 = 0; j0 < g->n; j0 += cols) {
        p.n = g->n - j0 < cols ? g->n - j0 : cols;
        NNCL_TRY(nncl__gemm_pack_b(ctx, dev, v, g->trans_b, g->k, p.n, g->b, g->b_off + (g->trans_b ? j0 * g->ldb : j0),
                                   g->ldb, 0, 1, g->temp, a));
        p.c_off = g->c_off + j0;
        p.epi.bias_off = g->epi.bias_off + (g->epi.bias == 1 ? j0 : 0);
        NNCL_TRY(nncl__gemm_packed(ctx, dev, pv, &p));
    }
    return NNCL_OK;
}

nncl_status nncl__gemm_own_store(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g, int prepare,
                                 size_t *bytes) {
    nncl__gemm_variant v, pv;
    nncl__gemm_packed_args p;
    nncl__args a;
    size_t need, have = 0, cols;
    NNCL_TRY(nncl__gemm_packed_variant(ctx, dev, g->m, g->n, g->k, &v));
    v.kc = 0; /* K blocks would round C to half between them */
    v.store = g->store;
    pv = v;
    pv.store = g->c_f32 ? 0 : g->store;
    need = nncl__gemm_own_temp(&v, g);
    if (prepare) { /* the kernels of both ways: a step fits the temp the plan ends up with */
        size_t least = (own_b_offset(&v, g->m, g->k) + (size_t)v.nr * g->k) * sizeof(float); /* A and one panel of B */
        if (bytes) *bytes = !g->temp_cap || need <= g->temp_cap ? need : g->temp_cap > least ? g->temp_cap : least;
        NNCL_TRY(own_kernel(ctx, dev, &v, NNCL__GEMM_K_PACK_A, &a));
        NNCL_TRY(own_kernel(ctx, dev, &v, NNCL__GEMM_K_PACK_B, &a));
        NNCL_TRY(own_kernel(ctx, dev, &v, NNCL__GEMM_K_PACK_AB, &a));
        return own_kernel(ctx, dev, &pv, NNCL__GEMM_K_PRODUCT, &a);
    }
    if (bytes) *bytes = need;
    if (g->m == 0 || g->n == 0) return NNCL_OK;
    if (!nncl__gemm_own_fits(g))
        return nncl__fail(ctx, NNCL_ERR_UNSUPPORTED, "half-precision GEMM [%zu,%zu,%zu]: too large for the kernels' int "
                          "indices", g->m, g->n, g->k);
    if (g->temp) NNCL_CL(ctx, clGetMemObjectInfo(g->temp, CL_MEM_SIZE, sizeof have, &have, NULL));
    if (g->temp && have < need && (cols = own_store_cols(&v, g, have)) > 0)
        return own_store_blocks(ctx, dev, &v, &pv, g, cols);
    NNCL_TRY(own_pack_args(ctx, dev, &v, g, need, &p));
    return nncl__gemm_packed(ctx, dev, &pv, &p);
}

nncl_status nncl__gemm_own_resolve_kernels(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v) {
    nncl__args a;
    int k;
    for (k = nncl__gemm_packs(v) ? NNCL__GEMM_K_PACK_A : NNCL__GEMM_K_PRODUCT; k <= NNCL__GEMM_K_PACK_AB; k++)
        NNCL_TRY(own_kernel(ctx, dev, v, k, &a));
    return NNCL_OK;
}

nncl_status nncl__gemm_own_resolve(nncl_context *ctx, nncl_device *dev, const nncl__gemm_variant *v,
                                   const nncl__gemm_args *g) {
    nncl__gemm_state *s = NULL;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!v) {
        if ((g->epi.bias || g->epi.act) && !s->epilogue.kernel)
            NNCL_TRY(nncl__kslot_resolve(ctx, dev, "gemm", "nncl_gemm_epilogue_f32", &s->epilogue));
        return NNCL_OK;
    }
    if (s->defer && !v->store && v->index >= 0 && v->index < s->n_all) {
        s->pending |= 1u << v->index;
        return NNCL_OK;
    }
    return nncl__gemm_own_resolve_kernels(ctx, dev, v);
}


nncl_status nncl__gemm_epilogue(nncl_context *ctx, nncl_device *dev, const nncl__gemm_args *g) {
    nncl__gemm_state *s = NULL;
    nncl__args a;
    size_t global[2], local[2] = {16, 4};
    if (!g->epi.bias && !g->epi.act) return NNCL_OK;
    NNCL_TRY(own_fits(ctx, "GEMM epilogue", g->c_off + g->m * g->ldc));
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (!s->epilogue.kernel) NNCL_TRY(nncl__kslot_resolve(ctx, dev, "gemm", "nncl_gemm_epilogue_f32", &s->epilogue));
    nncl__args_begin_slot(&a, ctx, &s->epilogue);
    nncl__arg_mem(&a, g->c);
    nncl__arg_int(&a, (int)g->c_off);
    nncl__arg_int(&a, (int)g->ldc);
    nncl__arg_int(&a, (int)g->m);
    nncl__arg_int(&a, (int)g->n);
    own_arg_epi(&a, &g->epi, g->c);
    global[0] = g->n;
    global[1] = g->m;
    if (local[0] * local[1] > dev->max_work_group) local[0] = local[1] = 1;
    return nncl__launch(&a, dev, 2, global, local);
}

#undef OWN_ALIGN
#undef OWN_PACK_KB
#undef OWN_PACK_GROUP
#undef OWN_DOT_TILES
