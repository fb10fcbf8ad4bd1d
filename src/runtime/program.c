/* program.c - building the kernel programs of cl/ once per device (from the
 * sources embedded at build time, or from $NNCL_KERNEL_DIR while developing),
 * one family each or several in one program (a bundle: a plan's families,
 * nncl__program_bundle), a per-device cache of kernel objects, and the
 * checked launch helpers. */
#include "runtime/internal.h"
#include <stdio.h>
#include <unistd.h>

struct nncl__embedded { const char *name; const char *source; size_t size; };
extern const struct nncl__embedded nncl__kernels[];

typedef struct prog_kernel {
    struct prog_kernel *next;
    char name[64];
    cl_kernel kernel;
} prog_kernel;

struct nncl_program {
    nncl_program *next;
    char family[256];   /* its families, comma-separated (several: a bundle) */
    char options[160];  /* build options beyond the defaults (variants of a family) */
    int instances;      /* > 0: the family that many times over (nncl__program_instances), found by no name */
    cl_program program;
    prog_kernel *kernels;
    double build_ms;
};

static nncl_status prog_kernel_get(nncl_context *ctx, nncl_program *p, const char *name, cl_kernel *out);

void nncl__programs_release(nncl_device *dev) {
    nncl_program *p = dev->programs;
    while (p) {
        nncl_program *pn = p->next;
        prog_kernel *k = p->kernels;
        while (k) {
            prog_kernel *kn = k->next;
            clReleaseKernel(k->kernel);
            NNCL_FREE(k);
            k = kn;
        }
        if (p->program) clReleaseProgram(p->program);
        NNCL_FREE(p);
        p = pn;
    }
    dev->programs = NULL;
    memset(dev->optim_kernels, 0, sizeof dev->optim_kernels); /* they were the programs' */
}

static nncl_status prog_file_embedded(nncl_context *ctx, const char *file, const char **src, size_t *len) {
    int i;
    for (i = 0; nncl__kernels[i].name; i++)
        if (strcmp(nncl__kernels[i].name, file) == 0) {
            *src = nncl__kernels[i].source;
            *len = nncl__kernels[i].size;
            return NNCL_OK;
        }
    return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "no kernel file \"%s\" is built into the library", file);
}

/* The text of cl/<file>: from the kernel folder when one is set (the caller
 * frees *owned), else the embedded copy. With optional, a file missing from
 * the folder is taken from the embedded copies (a folder holding only the
 * family being worked on still builds). */
static nncl_status prog_file(nncl_context *ctx, const char *file, int optional, const char **src, size_t *len,
                             char **owned) {
    *owned = NULL;
    if (ctx->kernel_dir) {
        char path[4096];
        unsigned char *text;
        snprintf(path, sizeof path, "%s/%s", ctx->kernel_dir, file);
        if (optional && access(path, F_OK) != 0) return prog_file_embedded(ctx, file, src, len);
        if (nncl__read_file(path, &text, len) != NNCL_OK)
            return nncl__fail(ctx, NNCL_ERR_IO, "%s (NNCL_KERNEL_DIR)", nncl_last_error(NULL));
        *owned = (char *)text;
        *src = *owned;
        return NNCL_OK;
    }
    return prog_file_embedded(ctx, file, src, len);
}

/* Families whose text uses another's definitions: the other comes first
 * in any program that holds them, alone or in a bundle. */
static const char *const prog_needs[][2] = {{"conv_dw_flat", "conv_dw"}};

/* The program text of families (comma-separated): cl/common.cl, then each
 * cl/<family>.cl once, a family's prog_needs ahead of it, in one buffer the
 * caller frees (one text, so the binary cache keys on all); #line makes a
 * build log count each family's lines from its own first (in a bundle,
 * under its file's name). */
#define PROG_LINE1 "\n#line 1\n"
#define PROG_LINE1_NAMED "\n#line 1 \"%s\"\n" /* in a bundle */
#define PROG_PARTS 32 /* families in one program at most */
static nncl_status prog_source(nncl_context *ctx, const char *families, char **text, size_t *len) {
    const char *src[PROG_PARTS + 1], *f = families;
    size_t lens[PROG_PARTS + 1], total = 0, at = 0;
    char *owned[PROG_PARTS + 1], files[PROG_PARTS + 1][48];
    int n = 0, i;
    nncl_status st;
    *text = NULL;
    st = prog_file(ctx, "common.cl", 1, &src[0], &lens[0], &owned[0]);
    if (st != NNCL_OK) return st;
    n = 1;
    while (st == NNCL_OK && *f && strcmp(families, "common") != 0) {
        size_t k = strcspn(f, ","), r;
        const char *part[2] = {NULL, NULL}; /* a family it needs, the family */
        char name[48];
        int j, q;
        snprintf(name, sizeof name, "%.*s", (int)(k < 40 ? k : 40), f);
        part[1] = name;
        for (r = 0; r < sizeof prog_needs / sizeof prog_needs[0]; r++)
            if (!strcmp(name, prog_needs[r][0])) part[0] = prog_needs[r][1];
        for (q = 0; q < 2 && st == NNCL_OK; q++) {
            char file[48];
            if (!part[q]) continue;
            snprintf(file, sizeof file, "%s.cl", part[q]);
            for (j = 1; j < n && strcmp(files[j], file) != 0; j++) {
            }
            if (j < n) continue; /* already in */
            if (n > PROG_PARTS) {
                st = nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "more than %d kernel families in one program", PROG_PARTS);
                break;
            }
            strcpy(files[n], file);
            st = prog_file(ctx, files[n], 0, &src[n], &lens[n], &owned[n]);
            if (st == NNCL_OK) n++;
        }
        f += k + (f[k] == ',');
    }
    for (i = 0; i < n; i++) total += lens[i] + (i ? sizeof PROG_LINE1_NAMED + strlen(files[i]) : 0);
    if (st == NNCL_OK && !(*text = (char *)NNCL_MALLOC(total + 1)))
        st = nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < n; i++) {
        if (st == NNCL_OK) {
            if (i) at += (size_t)(n > 2 ? sprintf(*text + at, PROG_LINE1_NAMED, files[i]) : sprintf(*text + at, PROG_LINE1));
            memcpy(*text + at, src[i], lens[i]);
            at += lens[i];
        }
        NNCL_FREE(owned[i]);
    }
    if (st != NNCL_OK) return st;
    (*text)[at] = 0;
    *len = at;
    return NNCL_OK;
}

uint64_t nncl__program_hash(nncl_context *ctx, const char *family) {
    char *text = NULL;
    size_t len = 0;
    uint64_t h;
    if (prog_source(ctx, family, &text, &len) != NNCL_OK) return 0;
    h = nncl__fnv1a(0xCBF29CE484222325ull, text, len);
    NNCL_FREE(text);
    return h;
}

/* Builds the program text owned (freed here) of family (its name in
 * logs) with options extra on dev: from the binary cache where it is used. */
static nncl_status prog_build_text(nncl_context *ctx, nncl_device *dev, const char *family, const char *label,
                                   const char *extra, char *owned, size_t len, int instances, nncl_program **out) {
    const char *src = owned;
    cl_int err;
    nncl_program *p;
    char options[480], twin[32];
    int cached;
    double t0;
    p = (nncl_program *)nncl__calloc(1, sizeof *p);
    if (!p) {
        NNCL_FREE(owned);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    snprintf(p->family, sizeof p->family, "%s", family);
    snprintf(p->options, sizeof p->options, "%s", extra);
    p->instances = instances;
    twin[0] = 0;
    if (dev->pocl_twin) snprintf(twin, sizeof twin, " -DNNCL_POCL_TWIN=%d", dev->pocl_twin); /* see nncl_device */
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DNNCL_RED_WG=%d%s%s%s%s", NNCL_RED_WG,
             dev->info.fp64 ? " -DNNCL_FP64=1" : "", twin, *extra ? " " : "", extra);
    cached = nncl__bcache_enabled(ctx, dev);
    if (cached && (p->program = nncl__bcache_load(ctx, dev, src, len, options)) != NULL) {
        NNCL_FREE(owned);
        p->next = dev->programs;
        dev->programs = p;
        *out = p;
        return NNCL_OK;
    }
    p->program = clCreateProgramWithSource(dev->cl_ctx, 1, &src, &len, &err);
    if (err != CL_SUCCESS) {
        NNCL_FREE(owned);
        NNCL_FREE(p);
        return nncl__cl_fail(ctx, err, "clCreateProgramWithSource", __FILE__, __LINE__);
    }
    t0 = nncl__seconds();
    err = clBuildProgram(p->program, 1, &dev->id, options, NULL, NULL);
    p->build_ms = (nncl__seconds() - t0) * 1e3;
    if (err == CL_SUCCESS)
        nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: cl/%s%s%s.cl%s%s%s built in %.0f ms", dev->info.index,
                  strchr(family, ',') ? "{" : "", family, strchr(family, ',') ? "}" : "", label, *extra ? " " : "",
                  extra, p->build_ms);
    if (err == CL_SUCCESS && cached) nncl__bcache_store(ctx, dev, src, len, options, p->program);
    NNCL_FREE(owned);
    if (err != CL_SUCCESS) {
        char log[6000];
        size_t got = 0;
        log[0] = 0;
        clGetProgramBuildInfo(p->program, dev->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &got);
        log[sizeof log - 1] = 0;
        clReleaseProgram(p->program);
        NNCL_FREE(p);
        return nncl__fail(ctx, err == CL_BUILD_PROGRAM_FAILURE ? NNCL_ERR_BUILD : NNCL_ERR_DEVICE,
                          "building cl/%s.cl for device %d (%s) failed: %s (%d); build log:\n%s", family,
                          dev->info.index, dev->info.name, nncl__cl_error_name(err), (int)err, log);
    }
    p->next = dev->programs;
    dev->programs = p;
    *out = p;
    return NNCL_OK;
}

static nncl_status prog_build(nncl_context *ctx, nncl_device *dev, const char *family, const char *extra,
                              nncl_program **out) {
    char *owned;
    size_t len = 0;
    NNCL_TRY(prog_source(ctx, family, &owned, &len));
    return prog_build_text(ctx, dev, family, "", extra, owned, len, 0, out);
}

/* The program of dev built with options that holds family (its first
 * len characters), alone or in a bundle; NULL when none is built. */
static nncl_program *prog_find(nncl_device *dev, const char *family, size_t len, const char *options) {
    nncl_program *p;
    for (p = dev->programs; p; p = p->next) {
        const char *f = p->family;
        if (p->instances || strcmp(p->options, options) != 0) continue;
        while (*f) {
            size_t k = strcspn(f, ",");
            if (k == len && !strncmp(f, family, len)) return p;
            f += k + (f[k] == ',');
        }
    }
    return NULL;
}

nncl_status nncl__program_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                               nncl_program **out) {
    nncl_program *p;
    dev->lookups++;
    if (strlen(options) >= sizeof p->options)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "build options of cl/%s.cl too long: %s", family, options);
    if ((p = prog_find(dev, family, strlen(family), options)) != NULL) {
        *out = p;
        return NNCL_OK;
    }
    return prog_build(ctx, dev, family, options, out);
}

nncl_status nncl__program_bundle(nncl_context *ctx, nncl_device *dev, const char *families, const char *options) {
    char want[sizeof ((nncl_program *)0)->family];
    size_t at = 0, k;
    int n = 0;
    nncl_program *p;
    const char *f;
    for (f = families; *f; f += k + (f[k] == ',')) {
        k = strcspn(f, ",");
        if (!k || prog_find(dev, f, k, options)) continue;
        if (at + k + 2 > sizeof want) return NNCL_OK; /* too many for one: each is built on first use */
        at += (size_t)sprintf(want + at, "%s%.*s", at ? "," : "", (int)k, f);
        n++;
    }
    if (n < 2) return NNCL_OK; /* one alone is built on first use as always */
    return prog_build(ctx, dev, want, options, &p);
}

/* Appends the -D options of defines ("-DX=Y -DZ") to t as #define lines
 * (-DZ defines Z as 1, as the compiler's option does). */
static size_t prog_defines(char *t, const char *defines) {
    size_t at = 0;
    const char *d = defines;
    while (*d) {
        size_t k;
        while (*d == ' ') d++;
        k = strcspn(d, " ");
        if (k > 2 && !strncmp(d, "-D", 2)) {
            size_t eq = strcspn(d, "= ");
            if (eq < k) at += (size_t)sprintf(t + at, "#define %.*s %.*s\n", (int)(eq - 2), d + 2, (int)(k - eq - 1), d + eq + 1);
            else at += (size_t)sprintf(t + at, "#define %.*s 1\n", (int)(k - 2), d + 2);
        }
        d += k;
    }
    return at;
}

nncl_status nncl__program_instances(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                                    int n, const char *const *defines, const char *const *suffixes,
                                    nncl_program **out) {
    char *one = NULL, *text;
    const char *body;
    size_t len = 0, cap, at = 0, head, names = 0;
    char label[sizeof ((nncl_program *)0)->family];
    int i;
    *out = NULL;
    NNCL_TRY(prog_source(ctx, family, &one, &len)); /* common.cl, #line, the family */
    body = strstr(one, PROG_LINE1);
    head = body ? (size_t)(body - one) : 0;
    body = body ? body + strlen(PROG_LINE1) : one;
    for (cap = head + 1, i = 0; i < n; i++) cap += len - head + 2 * strlen(defines[i]) + strlen(suffixes[i]) + 128;
    if (!(text = (char *)NNCL_MALLOC(cap))) {
        NNCL_FREE(one);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    memcpy(text, one, head);
    at = head;
    label[0] = 0;
    for (i = 0; i < n; i++) {
        at += (size_t)sprintf(text + at, "\n#define NNCL_SFX _%s\n", suffixes[i]);
        at += prog_defines(text + at, defines[i]);
        at += (size_t)sprintf(text + at, "#line 1 \"%s.cl\"\n", family);
        memcpy(text + at, body, strlen(body));
        at += strlen(body);
        at += (size_t)sprintf(text + at, "\n#undef NNCL_SFX\n");
        if (names + strlen(suffixes[i]) + 4 < sizeof label)
            names += (size_t)sprintf(label + names, "%s%s", i ? " " : " x{", suffixes[i]);
    }
    if (names) snprintf(label + names, sizeof label - names, "}");
    text[at] = 0;
    NNCL_FREE(one);
    return prog_build_text(ctx, dev, family, label, options, text, at, n, out);
}

nncl_status nncl__kslot_resolve_in(nncl_context *ctx, nncl_device *dev, nncl_program *p, const char *name,
                                   nncl__kslot *out) {
    size_t wg = 0;
    dev->lookups++;
    NNCL_TRY(prog_kernel_get(ctx, p, name, &out->kernel));
    if (clGetKernelWorkGroupInfo(out->kernel, dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) !=
            CL_SUCCESS ||
        wg == 0)
        wg = dev->max_work_group;
    out->wg = wg;
    return NNCL_OK;
}

nncl_status nncl__program(nncl_context *ctx, nncl_device *dev, const char *family, nncl_program **out) {
    return nncl__program_opts(ctx, dev, family, "", out);
}

nncl_status nncl__kernel(nncl_context *ctx, nncl_device *dev, const char *family, const char *name, cl_kernel *out) {
    return nncl__kernel_opts(ctx, dev, family, "", name, out);
}

nncl_status nncl__kernel_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                              const char *name, cl_kernel *out) {
    nncl_program *p;
    dev->lookups++;
    NNCL_TRY(nncl__program_opts(ctx, dev, family, options, &p));
    return prog_kernel_get(ctx, p, name, out);
}

/* Kernel name of p, created once and kept with p. */
static nncl_status prog_kernel_get(nncl_context *ctx, nncl_program *p, const char *name, cl_kernel *out) {
    prog_kernel *k;
    cl_int err;
    for (k = p->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k->kernel;
            return NNCL_OK;
        }
    k = (prog_kernel *)nncl__calloc(1, sizeof *k);
    if (!k) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    snprintf(k->name, sizeof k->name, "%s", name);
    k->kernel = clCreateKernel(p->program, name, &err);
    if (err != CL_SUCCESS) {
        NNCL_FREE(k);
        return nncl__fail(ctx, NNCL_ERR_DEVICE, "kernel %s not found in cl/%s.cl: %s (%d)", name, p->family,
                          nncl__cl_error_name(err), (int)err);
    }
    k->next = p->kernels;
    p->kernels = k;
    *out = k->kernel;
    return NNCL_OK;
}

unsigned long nncl__kernel_lookups(const nncl_device *dev) { return dev->lookups; }

nncl_status nncl__kslot_resolve(nncl_context *ctx, nncl_device *dev, const char *family, const char *name,
                                nncl__kslot *out) {
    return nncl__kslot_resolve_opts(ctx, dev, family, "", name, out);
}

nncl_status nncl__kslot_resolve_opts(nncl_context *ctx, nncl_device *dev, const char *family, const char *options,
                                     const char *name, nncl__kslot *out) {
    nncl_program *p;
    NNCL_TRY(nncl__program_opts(ctx, dev, family, options, &p));
    return nncl__kslot_resolve_in(ctx, dev, p, name, out);
}

void nncl__args_begin(nncl__args *a, nncl_context *ctx, cl_kernel k) {
    a->ctx = ctx;
    a->kernel = k;
    a->wg = 0;
    a->index = 0;
    a->err = CL_SUCCESS;
    a->too_big = 0;
}

void nncl__args_begin_slot(nncl__args *a, nncl_context *ctx, const nncl__kslot *k) {
    nncl__args_begin(a, ctx, k->kernel);
    a->wg = k->wg;
}

static void prog_arg(nncl__args *a, size_t size, const void *value) {
    cl_int err = clSetKernelArg(a->kernel, a->index, size, value);
    if (err != CL_SUCCESS && a->err == CL_SUCCESS) {
        a->err = err;
        a->bad_index = a->index;
    }
    a->index++;
}

void nncl__arg_mem(nncl__args *a, cl_mem m) { prog_arg(a, sizeof m, &m); }
void nncl__arg_int(nncl__args *a, int v) { prog_arg(a, sizeof v, &v); }
void nncl__arg_float(nncl__args *a, float v) { prog_arg(a, sizeof v, &v); }
void nncl__arg_local(nncl__args *a, size_t bytes) { prog_arg(a, bytes, NULL); }

void nncl__arg_count(nncl__args *a, size_t v) {
    int i = (int)(v <= (size_t)INT_MAX ? v : 0);
    if (v > (size_t)INT_MAX && !a->too_big) {
        a->too_big = v;
        a->too_big_index = a->index;
    }
    prog_arg(a, sizeof i, &i);
}

void nncl__arg_view(nncl__args *a, nncl__view v) {
    nncl__arg_mem(a, v.mem);
    nncl__arg_count(a, v.off);
}

static size_t prog_round_up(size_t x, size_t m) { return m ? (x + m - 1) / m * m : x; }

nncl_status nncl__launch(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global, const size_t *local) {
    cl_event *slot = NULL;
    size_t g[3];
    cl_uint i;
    cl_int err;
    if (a->too_big) /* the caller's sizes, not the device's fault */
        return nncl__fail(a->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "kernel argument %u: %zu elements pass 2^31-1, the most a kernel offset or count holds",
                          (unsigned)a->too_big_index, a->too_big);
    if (a->err != CL_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "clSetKernelArg(arg %u)", a->bad_index);
        return nncl__cl_fail(a->ctx, a->err, what, __FILE__, __LINE__);
    }
    for (i = 0; i < dims; i++) {
        g[i] = local ? prog_round_up(global[i], local[i]) : global[i];
        if (g[i] == 0) return NNCL_OK; /* nothing to do */
    }
    if (dev->profiling) { /* named, for the per-kernel table */
        char name[NNCL_PROFILE_NAME] = "";
        if (clGetKernelInfo(a->kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL) != CL_SUCCESS) name[0] = 0;
        name[sizeof name - 1] = 0;
        slot = nncl__profile_slot_named(dev, name);
    }
    err = clEnqueueNDRangeKernel(dev->queue, a->kernel, dims, NULL, g, local, 0, NULL, slot);
    if (err != CL_SUCCESS) return nncl__cl_fail(a->ctx, err, "clEnqueueNDRangeKernel", __FILE__, __LINE__);
    return NNCL_OK;
}

nncl_status nncl__launch_1d(nncl__args *a, nncl_device *dev, size_t n) {
    size_t local = 64, global = n;
    if (local > dev->max_work_group) local = dev->max_work_group;
    return nncl__launch(a, dev, 1, &global, &local);
}

/* Work-items a group of the launching kernel may have on dev, capped at the
 * size of the kernels' local arrays. */
static size_t prog_group_cap(nncl__args *a, nncl_device *dev) {
    size_t k = a->wg; /* resolved with the kernel; else asked now (eager launches) */
    if (!k && clGetKernelWorkGroupInfo(a->kernel, dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof k, &k, NULL) != CL_SUCCESS)
        k = 0;
    if (k == 0) k = dev->max_work_group;
    return k < NNCL_RED_WG ? k : NNCL_RED_WG;
}

nncl_status nncl__launch_exact(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global) {
    size_t local[3] = {1, 1, 1}, cap = prog_group_cap(a, dev), used = 1;
    cl_uint i;
    if (cap > 64) cap = 64;
    for (i = 0; i < dims && i < 3; i++)
        while (global[i] % (local[i] * 2) == 0 && used * 2 <= cap) local[i] *= 2, used *= 2;
    return nncl__launch(a, dev, dims, global, local);
}

nncl_status nncl__launch_checked(nncl__args *a, nncl_device *dev, cl_uint dims, const size_t *global) {
    size_t cap = prog_group_cap(a, dev), local[3] = {1, 1, 1};
    local[0] = cap < 64 ? cap : 64;
    return nncl__launch(a, dev, dims, global, local);
}

nncl_status nncl__launch_rows(nncl__args *a, nncl_device *dev, size_t rows, size_t cols) {
    size_t cap = prog_group_cap(a, dev), local = 1, global;
    while (local < cols && local * 2 <= cap) local *= 2;
    if (nncl__mul_overflow(rows, local, &global))
        return nncl__fail(a->ctx, NNCL_ERR_INVALID_ARGUMENT, "launch of %zu rows: too many work-items", rows);
    return nncl__launch(a, dev, 1, &global, &local);
}

nncl_status nncl__launch_cols(nncl__args *a, nncl_device *dev, size_t rows, size_t cols) {
    size_t cap = prog_group_cap(a, dev), local[2] = {1, 1}, global[2];
    while (local[0] < cols && local[0] < 16 && local[0] * 2 <= cap) local[0] *= 2;
    while (local[1] < rows && local[0] * local[1] * 2 <= cap) local[1] *= 2;
    global[0] = cols;
    global[1] = local[1];
    return nncl__launch(a, dev, 2, global, local);
}

#undef PROG_LINE1
#undef PROG_LINE1_NAMED
#undef PROG_PARTS

const char *nncl_kernel_family(int i) {
    int n = 0;
    if (i < 0) return NULL;
    while (nncl__kernels[n].name && n < i) n++;
    return nncl__kernels[n].name;
}

nncl_status nncl_kernel_program(nncl_context *ctx, int device, const char *family, void **program) {
    nncl_device *dev = nncl__device(ctx, device);
    nncl_program *p = NULL;
    nncl_status st;
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!family || !program)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_kernel_program: family or program is NULL");
    *program = NULL;
    NNCL_LOCKED(ctx, st, nncl__program(ctx, dev, family, &p));
    if (st == NNCL_OK) *program = (void *)p->program;
    return st;
}
