/* device.c - the devices of a context once it is open: lookup by index,
 * their information, memory accounting of device buffers, and the identity
 * of a device (platform, name, vendor, driver, OpenCL and CLBlast versions)
 * that names and guards its files in the cache folder. It sits below
 * context.c, program.c, profile.c and tune.c, which all reach devices
 * through it, and needs none of them. */
#include "runtime/internal.h"
#include <clblast_c.h>
#include <stdio.h>
#include <sys/stat.h>

int nncl_device_count(const nncl_context *ctx) { return ctx ? ctx->n_devices : 0; }

nncl_device *nncl__device(nncl_context *ctx, int d) {
    if (!ctx) {
        nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "context is NULL");
        return NULL;
    }
    if (d < 0 || d >= ctx->n_devices) {
        nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "device %d does not exist (the context has %d)", d, ctx->n_devices);
        return NULL;
    }
    return &ctx->devices[d];
}

nncl_status nncl_device_info_get(const nncl_context *ctx, int device, nncl_device_info *out) {
    nncl_device *dev = nncl__device((nncl_context *)ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!out) return nncl__fail((nncl_context *)ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_device_info_get: out is NULL");
    *out = dev->info;
    return NNCL_OK;
}

nncl_status nncl_finish(nncl_context *ctx, int device) {
    nncl_device *dev = nncl__device(ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    NNCL_CL(ctx, clFinish(dev->queue));
    return NNCL_OK;
}

nncl_status nncl_device_memory(const nncl_context *ctx, int device, uint64_t *in_use, uint64_t *peak) {
    nncl_device *dev = nncl__device((nncl_context *)ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    nncl__enter((nncl_context *)ctx); /* a count other threads' calls change */
    if (in_use) *in_use = dev->mem_in_use;
    if (peak) *peak = dev->mem_peak;
    nncl__leave((nncl_context *)ctx);
    return NNCL_OK;
}

/* What a buffer of `bytes` takes: whole 32-bit words, at least one
 * (kernels read 16-bit storage a word at a time: nncl_ld16, cl/common.cl). */
static size_t dev_words(size_t bytes) { return bytes ? (bytes + 3) / 4 * 4 : 4; }

uint64_t nncl__device_memory_limit(const nncl_context *ctx, const nncl_device *dev) {
    uint64_t cap = ctx ? ctx->config.memory_cap : 0;
    return cap && cap < dev->info.global_mem ? cap : dev->info.global_mem;
}

const char *nncl__bytes_str(uint64_t bytes, char *buf, size_t len) {
    if (bytes < 1024) snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
    else if (bytes < 1024 * 1024) snprintf(buf, len, "%.1f KiB", (double)bytes / 1024);
    else if (bytes < 1024ull * 1024 * 1024) snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024));
    else snprintf(buf, len, "%.2f GiB", (double)bytes / (1024.0 * 1024 * 1024));
    return buf;
}

nncl_status nncl__buffer_create(nncl_context *ctx, nncl_device *dev, size_t bytes, cl_mem *out) {
    cl_int err;
    uint64_t cap = ctx ? ctx->config.memory_cap : 0;
    *out = NULL;
    bytes = dev_words(bytes);
    if ((uint64_t)bytes > dev->info.max_alloc)
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY,
                          "a buffer of %zu bytes exceeds device %d's largest allocation (%llu bytes)", bytes,
                          dev->info.index, (unsigned long long)dev->info.max_alloc);
    if (cap && (uint64_t)bytes > cap - (dev->mem_in_use < cap ? dev->mem_in_use : cap))
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY,
                          "a buffer of %zu bytes exceeds device %d's memory cap of %llu bytes (%llu in use)", bytes,
                          dev->info.index, (unsigned long long)cap, (unsigned long long)dev->mem_in_use);
    *out = clCreateBuffer(dev->cl_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return nncl__cl_fail(ctx, err, "clCreateBuffer", __FILE__, __LINE__);
    }
    dev->mem_in_use += bytes;
    if (dev->mem_in_use > dev->mem_peak) dev->mem_peak = dev->mem_in_use;
    return NNCL_OK;
}

void nncl__buffer_release(nncl_device *dev, cl_mem mem, size_t bytes) {
    if (!mem) return;
    clReleaseMemObject(mem);
    bytes = dev_words(bytes);
    dev->mem_in_use -= bytes < dev->mem_in_use ? bytes : dev->mem_in_use;
}

/* ------------------------------------------------------------- cache files */

uint64_t nncl__fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

int nncl__cache_dir(char *path, size_t size) {
    const char *dir = getenv("NNCL_CACHE_DIR"), *base;
    if (dir && *dir) {
        snprintf(path, size, "%s", dir);
    } else if ((base = getenv("XDG_CACHE_HOME")) && *base) {
        snprintf(path, size, "%s/nncl", base);
    } else if ((base = getenv("HOME")) && *base) {
        snprintf(path, size, "%s/.cache", base);
        mkdir(path, 0755);
        snprintf(path, size, "%s/.cache/nncl", base);
    } else {
        return 0;
    }
    mkdir(path, 0755); /* best effort: a missing folder only means nothing is stored */
    return 1;
}

#define DEV_CLBLAST_VERSION \
    NNCL_XSTR(CLBLAST_VERSION_MAJOR) "." NNCL_XSTR(CLBLAST_VERSION_MINOR) "." NNCL_XSTR(CLBLAST_VERSION_PATCH)

void nncl__device_identity(const nncl_device *dev, char *out, size_t size) {
    const char *fields[5];
    const char *keys[5] = {"platform", "device", "vendor", "driver", "version"};
    size_t len = 0;
    int i;
    fields[0] = dev->info.platform;
    fields[1] = dev->info.name;
    fields[2] = dev->info.vendor;
    fields[3] = dev->info.driver;
    fields[4] = dev->info.cl_version;
    out[0] = 0;
    for (i = 0; i < 5 && len + 1 < size; i++) {
        const char *p = fields[i];
        int w = snprintf(out + len, size - len, "%s ", keys[i]);
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
        for (; *p && len + 2 < size; p++) out[len++] = (*p < 32 || *p == 127) ? '?' : *p; /* one line each */
        out[len++] = '\n';
        out[len] = 0;
    }
    snprintf(out + len, size - len, "clblast %s\n", DEV_CLBLAST_VERSION);
}

int nncl__device_cache_path(const nncl_device *dev, const char *prefix, const char *ext, char *path, size_t size) {
    char id[1024];
    uint64_t h;
    size_t n;
    nncl__device_identity(dev, id, sizeof id);
    h = nncl__fnv1a(0xCBF29CE484222325ull, id, strlen(id));
    if (!nncl__cache_dir(path, size)) return 0;
    n = strlen(path);
    snprintf(path + n, size - n, "/%s-%016llx.%s", prefix, (unsigned long long)h, ext);
    return 1;
}

nncl_status nncl_device_opencl(const nncl_context *ctx, int device, nncl_opencl *out) {
    nncl_device *dev = nncl__device((nncl_context *)ctx, device);
    if (!dev) return NNCL_ERR_INVALID_ARGUMENT;
    if (!out) return nncl__fail((nncl_context *)ctx, NNCL_ERR_INVALID_ARGUMENT, "nncl_device_opencl: out is NULL");
    out->platform = (void *)dev->platform;
    out->device = (void *)dev->id;
    out->context = (void *)dev->cl_ctx;
    out->queue = (void *)dev->queue;
    return NNCL_OK;
}

#undef DEV_CLBLAST_VERSION
