/* binary_cache.c - a disk cache of built kernel programs for drivers that
 * keep none of their own, so a second run does not compile again. Entries
 * are keyed by a hash of the source, the build options, the platform, the
 * device and its driver version; a damaged or foreign entry is ignored and
 * rebuilt from source. PoCL and NVIDIA cache on their own and are skipped
 * unless asked for. Folder: $NNCL_CACHE_DIR, else $XDG_CACHE_HOME/nncl, else
 * ~/.cache/nncl. An entry is a header (magic, key, length, checksum of the
 * binary) and the driver's binary: only an entry whose checksum holds
 * reaches the driver, since some drivers abort on a damaged binary. */
#include "runtime/internal.h"
#include <stdio.h>

#define BCACHE_MAX_BYTES (256u << 20) /* a larger file is not one of ours */
#define BCACHE_MAGIC 0x314E4942434E4E4Eull /* "NNNCBIN1" */

/* Whether dev's driver already caches compiled programs on disk. */
static int bcache_driver_caches(const nncl_device *dev) {
    return strstr(dev->info.platform, "Portable Computing Language") != NULL ||
           strstr(dev->info.platform, "NVIDIA") != NULL;
}

int nncl__bcache_enabled(const nncl_context *ctx, const nncl_device *dev) {
    const char *env = getenv("NNCL_BINARY_CACHE");
    int mode = ctx->config.binary_cache;
    if (env && *env) mode = atoi(env);
    return mode > 0 || (mode == 0 && !bcache_driver_caches(dev));
}

/* The entry's path for this source and options on dev; 0 when no folder. */
static int bcache_path(const nncl_device *dev, const char *src, size_t len, const char *options, char *path,
                       size_t size, uint64_t *key) {
    uint64_t h = 0xCBF29CE484222325ull;
    size_t n;
    h = nncl__fnv1a(h, src, len);
    h = nncl__fnv1a(h, options, strlen(options) + 1);
    h = nncl__fnv1a(h, dev->info.platform, strlen(dev->info.platform) + 1);
    h = nncl__fnv1a(h, dev->info.name, strlen(dev->info.name) + 1);
    h = nncl__fnv1a(h, dev->info.driver, strlen(dev->info.driver) + 1);
    h = nncl__fnv1a(h, dev->info.cl_version, strlen(dev->info.cl_version) + 1);
    *key = h;
    if (!nncl__cache_dir(path, size)) return 0;
    n = strlen(path);
    snprintf(path + n, size - n, "/%016llx.bin", (unsigned long long)h);
    return 1;
}

cl_program nncl__bcache_load(nncl_context *ctx, nncl_device *dev, const char *src, size_t len, const char *options) {
    char path[1200];
    FILE *f;
    uint64_t key, head[4];
    unsigned char *bin;
    const unsigned char *bins[1];
    size_t sizes[1];
    cl_int err, status;
    cl_program prog;
    if (!bcache_path(dev, src, len, options, path, sizeof path, &key) || !(f = fopen(path, "rb"))) return NULL;
    if (fread(head, sizeof head, 1, f) != 1 || head[0] != BCACHE_MAGIC || head[1] != key || head[2] == 0 ||
        head[2] > BCACHE_MAX_BYTES || !(bin = (unsigned char *)NNCL_MALLOC((size_t)head[2]))) {
        fclose(f);
        return NULL;
    }
    if (fread(bin, 1, (size_t)head[2], f) != (size_t)head[2] ||
        nncl__fnv1a(0xCBF29CE484222325ull, bin, (size_t)head[2]) != head[3]) {
        fclose(f);
        NNCL_FREE(bin);
        return NULL;
    }
    fclose(f);
    bins[0] = bin;
    sizes[0] = (size_t)head[2];
    prog = clCreateProgramWithBinary(dev->cl_ctx, 1, &dev->id, sizes, bins, &status, &err);
    NNCL_FREE(bin);
    if (err != CL_SUCCESS || status != CL_SUCCESS) return NULL;
    if (clBuildProgram(prog, 1, &dev->id, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(prog);
        return NULL;
    }
    nncl__log(ctx, NNCL_LOG_DEBUG, "kernel program loaded from %s", path);
    return prog;
}

void nncl__bcache_store(nncl_context *ctx, nncl_device *dev, const char *src, size_t len, const char *options,
                        cl_program prog) {
    char path[1200];
    size_t size = 0;
    unsigned char *bin;
    uint64_t head[4];
    nncl__afile af;
    if (!bcache_path(dev, src, len, options, path, sizeof path, &head[1])) return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || size == 0 ||
        size > BCACHE_MAX_BYTES || !(bin = (unsigned char *)NNCL_MALLOC(size)))
        return;
    /* A cache that cannot be written costs only time: not an error. */
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
        nncl__afile_open(&af, path, "kernel cache entry") == NNCL_OK) {
        head[0] = BCACHE_MAGIC;
        head[2] = size;
        head[3] = nncl__fnv1a(0xCBF29CE484222325ull, bin, size);
        if (fwrite(head, sizeof head, 1, af.f) == 1 && fwrite(bin, 1, size, af.f) == size &&
            nncl__afile_commit(&af, "kernel cache entry") == NNCL_OK)
            nncl__log(ctx, NNCL_LOG_DEBUG, "kernel program cached at %s", path);
        else if (af.f)
            nncl__afile_abort(&af);
    }
    NNCL_FREE(bin);
}

#undef BCACHE_MAX_BYTES
#undef BCACHE_MAGIC
