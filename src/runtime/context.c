/* context.c - finding every device of every OpenCL platform, choosing the
 * devices a context uses (config, $NNCL_DEVICES or the default), and
 * creating one OpenCL context and in-order queue per chosen device. */
#include "runtime/internal.h"
#include <ctype.h>
#include <stdio.h>
#if !defined(_WIN32)
#include <sys/stat.h>
#endif

#define CTX_MAX_PLATFORMS 16
#define CTX_MAX_DEVICES 64

typedef struct ctx_found {
    nncl_device_info info;
    cl_platform_id platform;
    cl_device_id id;
} ctx_found;

/* A string property, cut to fit out (drivers refuse a short buffer). */
static void ctx_str(cl_device_id d, cl_device_info what, char *out, size_t n) {
    char big[8192];
    size_t got = 0;
    out[0] = 0;
    if (clGetDeviceInfo(d, what, sizeof big - 1, big, &got) != CL_SUCCESS) return;
    big[got < sizeof big ? got : sizeof big - 1] = 0;
    snprintf(out, n, "%s", big);
}

static int ctx_has_extension(cl_device_id d, const char *ext) {
    char buf[8192];
    ctx_str(d, CL_DEVICE_EXTENSIONS, buf, sizeof buf);
    return strstr(buf, ext) != NULL;
}

/* PCI address from the vendor extensions that give it, else "". */
static void ctx_pci_bus_id(cl_device_id d, char *out, size_t n) {
    out[0] = 0;
#define CTX_NV_PCI_BUS 0x4008
#define CTX_NV_PCI_SLOT 0x4009
#define CTX_KHR_PCI_BUS_INFO 0x410F
    if (ctx_has_extension(d, "cl_khr_pci_bus_info")) {
        cl_uint v[4];
        if (clGetDeviceInfo(d, CTX_KHR_PCI_BUS_INFO, sizeof v, v, NULL) == CL_SUCCESS)
            snprintf(out, n, "%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]);
    } else if (ctx_has_extension(d, "cl_nv_device_attribute_query")) {
        cl_uint bus = 0, slot = 0;
        if (clGetDeviceInfo(d, CTX_NV_PCI_BUS, sizeof bus, &bus, NULL) == CL_SUCCESS &&
            clGetDeviceInfo(d, CTX_NV_PCI_SLOT, sizeof slot, &slot, NULL) == CL_SUCCESS)
            snprintf(out, n, "0000:%02x:%02x.%x", bus, slot >> 3, slot & 7);
    }
#undef CTX_NV_PCI_BUS
#undef CTX_NV_PCI_SLOT
#undef CTX_KHR_PCI_BUS_INFO
}

static void ctx_describe(cl_platform_id p, int pi, cl_device_id d, nncl_device_info *info) {
    cl_device_type type = 0;
    cl_uint cu = 0, clock = 0;
    cl_ulong gmem = 0, amax = 0, lmem = 0;
    memset(info, 0, sizeof *info);
    info->platform_index = pi;
    if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof info->platform - 1, info->platform, NULL) != CL_SUCCESS)
        info->platform[0] = 0;
    ctx_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    ctx_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    ctx_str(d, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    ctx_str(d, CL_DEVICE_VERSION, info->cl_version, sizeof info->cl_version);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof clock, &clock, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof amax, &amax, NULL);
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU)           ? NNCL_DEVICE_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? NNCL_DEVICE_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? NNCL_DEVICE_ACCELERATOR
                                                       : NNCL_DEVICE_OTHER;
    info->compute_units = (int)cu;
    info->clock_mhz = (int)clock;
    info->global_mem = gmem;
    info->max_alloc = amax;
    info->local_mem = lmem;
    info->fp16 = ctx_has_extension(d, "cl_khr_fp16");
    info->fp64 = ctx_has_extension(d, "cl_khr_fp64");
    ctx_pci_bus_id(d, info->pci_bus_id, sizeof info->pci_bus_id);
}

/* Every device of every platform; platforms without devices are skipped. */
static nncl_status ctx_enumerate(ctx_found *found, int max, int *count) {
    cl_platform_id plats[CTX_MAX_PLATFORMS];
    cl_uint np = 0, p;
    cl_int err = clGetPlatformIDs(CTX_MAX_PLATFORMS, plats, &np);
    *count = 0;
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0))
        return nncl__fail(NULL, NNCL_ERR_NO_DEVICE,
                          "no OpenCL platform found: install a driver (on Debian/Ubuntu: pocl-opencl-icd)");
    if (err != CL_SUCCESS) return nncl__cl_fail(NULL, err, "clGetPlatformIDs", __FILE__, __LINE__);
    if (np > CTX_MAX_PLATFORMS) np = CTX_MAX_PLATFORMS;
    for (p = 0; p < np; p++) {
        cl_device_id devs[CTX_MAX_DEVICES];
        cl_uint nd = 0, i;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, CTX_MAX_DEVICES, devs, &nd) != CL_SUCCESS) continue;
        if (nd > CTX_MAX_DEVICES) nd = CTX_MAX_DEVICES;
        for (i = 0; i < nd && *count < max; i++) {
            ctx_found *f = &found[*count];
            f->platform = plats[p];
            f->id = devs[i];
            ctx_describe(plats[p], (int)p, devs[i], &f->info);
            f->info.index = *count;
            (*count)++;
        }
    }
    return NNCL_OK;
}

nncl_status nncl_devices_list(nncl_device_info *out, int max, int *count) {
    ctx_found found[CTX_MAX_DEVICES];
    int n = 0, i;
    nncl_status st;
    if (!count || max < 0 || (max > 0 && !out))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_devices_list: count is NULL or out/max invalid");
    st = ctx_enumerate(found, CTX_MAX_DEVICES, &n);
    *count = n;
    if (st != NNCL_OK) return st == NNCL_ERR_NO_DEVICE ? NNCL_OK : st;
    for (i = 0; i < n && i < max; i++) out[i] = found[i].info;
    return NNCL_OK;
}

static int ctx_icontains(const char *hay, const char *needle, size_t nlen) {
    size_t i, j, hl = strlen(hay);
    if (nlen == 0) return 0;
    for (i = 0; i + nlen <= hl; i++) {
        for (j = 0; j < nlen; j++)
            if (tolower((unsigned char)hay[i + j]) != tolower((unsigned char)needle[j])) break;
        if (j == nlen) return 1;
    }
    return 0;
}

/* A device's rank for the default choice among CPUs: PoCL first, then the
 * one with the most compute units times clock. */
static double ctx_cpu_rank(const nncl_device_info *d) {
    double r = (double)d->compute_units * (d->clock_mhz ? d->clock_mhz : 1000);
    if (ctx_icontains(d->platform, "portable computing", 18)) r += 1e12;
    return r;
}

static int ctx_add_choice(int *chosen, int *n, int idx) {
    int i;
    for (i = 0; i < *n; i++)
        if (chosen[i] == idx) return 0;
    chosen[(*n)++] = idx;
    return 1;
}

/* "0: NAME (PLATFORM); 1: ..." for messages about a selection. */
static const char *ctx_list(const ctx_found *found, int n, char *buf, size_t len) {
    size_t used = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < n && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%d: %.60s (%.40s)", i ? "; " : "", i, found[i].info.name,
                         found[i].info.platform);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* Resolves a selection string into indices of found[]. */
static nncl_status ctx_select(const char *sel, const ctx_found *found, int n, int *chosen, int *n_chosen) {
    const char *s = sel;
    *n_chosen = 0;
    while (*s) {
        char tok[128], list[600];
        size_t len = strcspn(s, ",");
        const char *colon;
        size_t name_len;
        int want = -1, hits = 0, i, any = 0;
        if (len >= sizeof tok)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "device selection token too long in \"%s\"", sel);
        memcpy(tok, s, len);
        tok[len] = 0;
        s += len + (s[len] == ',');
        while (len && isspace((unsigned char)tok[len - 1])) tok[--len] = 0;
        if (!len) continue;
        colon = strrchr(tok, ':');
        name_len = colon ? (size_t)(colon - tok) : len;
        if (colon) {
            char *end;
            long k = strtol(colon + 1, &end, 10);
            if (*end || k < 0 || end == colon + 1)
                return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "device selection \"%s\": bad \":k\" in \"%s\"", sel, tok);
            want = (int)k;
        }
        if (isdigit((unsigned char)tok[0]) && !colon) {
            char *end;
            long k = strtol(tok, &end, 10);
            if (*end || k >= n)
                return nncl__fail(NULL, NNCL_ERR_NO_DEVICE, "device selection \"%s\": no device %s; there are %d: %s", sel,
                                  tok, n, ctx_list(found, n, list, sizeof list));
            ctx_add_choice(chosen, n_chosen, (int)k);
            continue;
        }
        for (i = 0; i < n; i++) {
            const nncl_device_info *d = &found[i].info;
            int match;
            if (name_len == 3 && ctx_icontains(tok, "all", 3)) match = 1;
            else if (name_len == 3 && ctx_icontains(tok, "gpu", 3)) match = d->type == NNCL_DEVICE_GPU;
            else if (name_len == 3 && ctx_icontains(tok, "cpu", 3)) match = d->type == NNCL_DEVICE_CPU;
            else /* the version string names PoCL, whose platform calls itself otherwise */
                match = ctx_icontains(d->platform, tok, name_len) || ctx_icontains(d->vendor, tok, name_len) ||
                        ctx_icontains(d->name, tok, name_len) || ctx_icontains(d->cl_version, tok, name_len);
            if (!match) continue;
            if (want < 0 || hits == want) {
                ctx_add_choice(chosen, n_chosen, i);
                any = 1;
            }
            hits++;
        }
        if (!any && hits > 0)
            return nncl__fail(NULL, NNCL_ERR_NO_DEVICE,
                              "device selection \"%s\": index %d is out of range: %d device(s) match \"%.*s\" (\":k\" counts from 0)",
                              sel, want, hits, (int)name_len, tok);
        if (!any)
            return nncl__fail(NULL, NNCL_ERR_NO_DEVICE, "device selection \"%s\": nothing matches \"%s\"; the devices are %s",
                              sel, tok, ctx_list(found, n, list, sizeof list));
    }
    if (*n_chosen == 0) return nncl__fail(NULL, NNCL_ERR_NO_DEVICE, "device selection \"%s\" is empty", sel);
    return NNCL_OK;
}

static void ctx_default(const ctx_found *found, int n, int *chosen, int *n_chosen) {
    int i, best = -1;
    *n_chosen = 0;
    for (i = 0; i < n; i++)
        if (found[i].info.type == NNCL_DEVICE_GPU) chosen[(*n_chosen)++] = i;
    if (*n_chosen) return;
    for (i = 0; i < n; i++)
        if (best < 0 || ctx_cpu_rank(&found[i].info) > ctx_cpu_rank(&found[best].info)) best = i;
    if (best >= 0) chosen[(*n_chosen)++] = best;
}

nncl_config nncl_config_default(void) {
    nncl_config c;
    memset(&c, 0, sizeof c);
    c.log_level = NNCL_LOG_WARN;
    return c;
}

static nncl_status ctx_open_device(nncl_context *ctx, nncl_device *dev, const ctx_found *f) {
    cl_int err;
    cl_context_properties props[3];
    cl_command_queue_properties qp = ctx->config.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
    size_t wg = 0;
    cl_uint align_bits = 0;
    dev->info = f->info;
    dev->platform = f->platform;
    dev->id = f->id;
    props[0] = CL_CONTEXT_PLATFORM;
    props[1] = (cl_context_properties)f->platform;
    props[2] = 0;
    dev->cl_ctx = clCreateContext(props, 1, &f->id, NULL, NULL, &err);
    NNCL_CL_CHECK(ctx, err, "clCreateContext");
    dev->queue = clCreateCommandQueue(dev->cl_ctx, f->id, qp, &err);
    NNCL_CL_CHECK(ctx, err, "clCreateCommandQueue");
    NNCL_CL(ctx, clGetDeviceInfo(f->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
    NNCL_CL(ctx, clGetDeviceInfo(f->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
    dev->max_work_group = wg ? wg : 1;
    dev->mem_base_align = align_bits >= 8 ? align_bits / 8 : 1;
    return NNCL_OK;
}

/* The options that take one of a few values, and the kernel folder (a
 * mistyped one would otherwise surface at the first op as a missing file;
 * a file missing from it still does, named). */
static nncl_status ctx_check_config(const nncl_config *c, const char *kdir) {
    if (c && (c->log_level < NNCL_LOG_ERROR || c->log_level > NNCL_LOG_DEBUG))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_init: log_level %d is not NNCL_LOG_ERROR .. NNCL_LOG_DEBUG",
                          c->log_level);
    if (c && (c->binary_cache < -1 || c->binary_cache > 1 || c->gemm_tune < -1 || c->gemm_tune > 1))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_init: binary_cache %d and gemm_tune %d must be -1, 0 or 1",
                          c->binary_cache, c->gemm_tune);
#if !defined(_WIN32)
    if (kdir && *kdir) {
        struct stat sb;
        if (stat(kdir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return nncl__fail(NULL, NNCL_ERR_IO, "nncl_init: kernel folder '%s' is not a folder", kdir);
    }
#endif
    return NNCL_OK;
}

/* The memory cap: config's, else $NNCL_MEMORY_CAP (a whole number of
 * bytes, or of KiB, MiB or GiB with a K, M or G suffix), else 0 (none). */
static nncl_status ctx_memory_cap(const nncl_config *c, uint64_t *cap) {
    const char *e = getenv("NNCL_MEMORY_CAP");
    unsigned long long v = 0;
    int shift = 0;
    const char *q;
    *cap = c ? c->memory_cap : 0;
    if (*cap || !e || !*e) return NNCL_OK;
    for (q = e; *q >= '0' && *q <= '9'; q++) {
        if (v > (~0ull - 9) / 10) break;
        v = v * 10 + (unsigned long long)(*q - '0');
    }
    if (*q == 'K' || *q == 'k') shift = 10, q++;
    else if (*q == 'M' || *q == 'm') shift = 20, q++;
    else if (*q == 'G' || *q == 'g') shift = 30, q++;
    if (q == e || (*q >= '0' && *q <= '9') || *q || v == 0 || v > (~0ull >> shift))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_init: NNCL_MEMORY_CAP='%s' is not a byte count > 0 (such as 268435456, 256M or 2G)", e);
    *cap = (uint64_t)v << shift;
    return NNCL_OK;
}

/* The message lock with its condition and the recursive use lock; 0 when
 * all are made. */
static int ctx_mutexes(nncl_context *ctx) {
    pthread_mutexattr_t a;
    int bad;
    if (pthread_mutexattr_init(&a) != 0) return -1;
    bad = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE) != 0 || pthread_mutex_init(&ctx->use, &a) != 0;
    pthread_mutexattr_destroy(&a);
    if (bad) return -1;
    if (pthread_mutex_init(&ctx->lock, NULL) == 0) {
        if (pthread_cond_init(&ctx->idle, NULL) == 0) return 0;
        pthread_mutex_destroy(&ctx->lock);
    }
    pthread_mutex_destroy(&ctx->use);
    return -1;
}

void nncl__enter(nncl_context *ctx) {
    if (ctx && ctx->lock_ready) pthread_mutex_lock(&ctx->use);
}
void nncl__leave(nncl_context *ctx) {
    if (ctx && ctx->lock_ready) pthread_mutex_unlock(&ctx->use);
}

nncl_status nncl__context_open(const nncl_config *config, nncl_context **out) {
    ctx_found found[CTX_MAX_DEVICES];
    int chosen[CTX_MAX_DEVICES];
    int n = 0, n_chosen = 0, i;
    nncl_context *ctx;
    nncl_status st;
    const char *sel, *kdir;
    uint64_t cap;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_init: out is NULL");
    *out = NULL;
    kdir = config && config->kernel_dir ? config->kernel_dir : getenv("NNCL_KERNEL_DIR");
    NNCL_TRY(ctx_check_config(config, kdir));
    NNCL_TRY(ctx_memory_cap(config, &cap));
    NNCL_TRY(ctx_enumerate(found, CTX_MAX_DEVICES, &n));
    if (n == 0)
        return nncl__fail(NULL, NNCL_ERR_NO_DEVICE,
                          "no OpenCL device found on %s: install a driver (on Debian/Ubuntu: pocl-opencl-icd)",
                          "any platform");
    sel = config && config->devices ? config->devices : getenv("NNCL_DEVICES");
    if (sel && *sel) NNCL_TRY(ctx_select(sel, found, n, chosen, &n_chosen));
    else ctx_default(found, n, chosen, &n_chosen);

    ctx = (nncl_context *)nncl__calloc(1, sizeof *ctx);
    if (!ctx) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_init: out of host memory");
    if (ctx_mutexes(ctx) != 0) {
        NNCL_FREE(ctx);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_init: no mutex");
    }
    ctx->lock_ready = 1;
    ctx->serial = nncl__context_serial();
    ctx->config = config ? *config : nncl_config_default();
    ctx->config.devices = NULL; /* the caller's string is not kept */
    ctx->config.kernel_dir = NULL;
    ctx->config.memory_cap = cap;
    if (kdir && *kdir && !(ctx->kernel_dir = nncl__strdup(kdir))) {
        nncl_free(ctx);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_init: out of host memory");
    }
    ctx->devices = (nncl_device *)nncl__calloc((size_t)n_chosen, sizeof *ctx->devices);
    if (!ctx->devices) {
        nncl_free(ctx);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_init: out of host memory");
    }
    for (i = 0; i < n_chosen; i++) {
        ctx->n_devices = i + 1;
        st = ctx_open_device(ctx, &ctx->devices[i], &found[chosen[i]]);
        if (st != NNCL_OK) {
            nncl__fail(NULL, st, "opening device %d (%s): %s", chosen[i], found[chosen[i]].info.name,
                       nncl__thread_error());
            nncl_free(ctx);
            return st;
        }
        ctx->devices[i].info.index = i;
        if (ctx->devices[i].info.type == NNCL_DEVICE_CPU &&
            strstr(ctx->devices[i].info.platform, "Portable Computing Language")) {
            int j;
            for (j = 0; j < i; j++)
                if (ctx->devices[j].info.type == NNCL_DEVICE_CPU &&
                    strstr(ctx->devices[j].info.platform, "Portable Computing Language"))
                    ctx->devices[i].pocl_twin++;
        }
        nncl__log(ctx, NNCL_LOG_INFO, "device %d: %s / %s", i, ctx->devices[i].info.platform,
                  ctx->devices[i].info.name);
    }
    *out = ctx;
    return NNCL_OK;
}

nncl_status nncl__device_on_free(nncl_context *ctx, nncl_device *dev, void (*fn)(nncl_device *dev)) {
    int i;
    for (i = 0; i < dev->n_on_free; i++)
        if (dev->on_free[i] == fn) return NNCL_OK;
    if (dev->n_on_free == NNCL_DEVICE_ON_FREE)
        return nncl__fail(ctx, NNCL_ERR_STATE, "device %d: more than %d layers keep state on it", dev->info.index,
                          NNCL_DEVICE_ON_FREE);
    dev->on_free[dev->n_on_free++] = fn;
    return NNCL_OK;
}

void nncl_free(nncl_context *ctx) {
    int i;
    if (!ctx) return;
    for (i = 0; i < ctx->n_devices; i++) {
        nncl_device *d = &ctx->devices[i];
        while (d->n_on_free > 0) d->on_free[--d->n_on_free](d);
        nncl__programs_release(d);
        nncl__profile_release(d);
        if (d->queue) {
            clFinish(d->queue);
            clReleaseCommandQueue(d->queue);
        }
        if (d->cl_ctx) clReleaseContext(d->cl_ctx);
    }
    NNCL_FREE(ctx->devices);
    NNCL_FREE(ctx->kernel_dir);
    if (ctx->lock_ready) {
        pthread_mutex_destroy(&ctx->lock);
        pthread_mutex_destroy(&ctx->use);
        pthread_cond_destroy(&ctx->idle);
    }
    NNCL_FREE(ctx);
}


#undef CTX_MAX_PLATFORMS
#undef CTX_MAX_DEVICES
