/* memory.c - memory bandwidth (an on-device copy, host to device, device to
 * host, beside a host memcpy) and kernel launch cost (back-to-back nncl_add
 * against a raw clEnqueueNDRangeKernel of the same kernel on the same
 * buffers, beside the same add in a host loop). */
#include "bench.h"
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- bandwidth */

typedef struct mem_job {
    nncl_context *ctx;
    int device;
    nncl_tensor *a, *b, *out;
    float *host, *host2;
    size_t n;
    bench_raw_kernel *raw;
} mem_job;

static int mem_d2d(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_tensor_copy(j->b, j->a) != NNCL_OK) return 1;
    return nncl_finish(j->ctx, j->device) != NNCL_OK;
}

static int mem_h2d(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_tensor_write(j->a, j->host, j->n) != NNCL_OK) return 1;
    return 0;
}

static int mem_d2h(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_tensor_read(j->a, j->host, j->n) != NNCL_OK) return 1;
    return 0;
}

/* memcpy split over the OpenMP threads, as the devices use every core */
static int mem_host(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++) {
        long c, chunks = 64;
#pragma omp parallel for schedule(static)
        for (c = 0; c < chunks; c++) {
            size_t lo = j->n * (size_t)c / (size_t)chunks, hi = j->n * (size_t)(c + 1) / (size_t)chunks;
            memcpy(j->host2 + lo, j->host + lo, (hi - lo) * sizeof(float));
        }
    }
    return 0;
}

void bench_bandwidth(const bench_opts *o, nncl_context *ctx) {
    size_t bytes = o->quick ? (size_t)8 << 20 : (size_t)128 << 20;
    size_t n = bytes / sizeof(float);
    int shape[1], d, nd = nncl_device_count(ctx);
    char item[32];
    bench_timing tm = bench_timing_of(o, o->quick ? 1.0 : 5.0);
    bench_stat t, host;
    mem_job j;
    memset(&j, 0, sizeof j);
    j.n = n;
    j.host = (float *)malloc(bytes);
    j.host2 = (float *)malloc(bytes);
    snprintf(item, sizeof item, "%zu MiB", bytes >> 20);
    if (!j.host || !j.host2) {
        free(j.host), free(j.host2);
        return;
    }
    memset(j.host, 1, bytes);
    memset(j.host2, 2, bytes);
    shape[0] = (int)n;
    bench_progress("bandwidth host memcpy %s", item);
    host = bench_stat_na();
    if (bench_time(mem_host, &j, &tm, &t) == 0) host = bench_stat_inverse(t, 2.0 * bytes * 1e-9);
    bench_put("bandwidth", -1, item, "cpu_copy_gbs", host, "GB/s", "host memcpy over OpenMP threads, read+write bytes");
    for (d = 0; d < nd; d++) {
        nncl_status st;
        j.ctx = ctx;
        j.device = d;
        j.a = j.b = NULL;
        bench_progress("bandwidth d%d %s: copy, write, read", d, item);
        st = nncl_tensor_create(ctx, d, 1, shape, &j.a);
        if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shape, &j.b);
        if (st == NNCL_OK) st = nncl_tensor_write(j.a, j.host, n);
        if (st != NNCL_OK) {
            char why[200];
            snprintf(why, sizeof why, "n/a: %s", nncl_last_error(ctx));
            bench_put("bandwidth", d, item, "d2d_gbs", bench_stat_na(), "GB/s", why);
        } else {
            bench_stat gb = bench_stat_na();
            if (bench_time(mem_d2d, &j, &tm, &t) == 0) gb = bench_stat_inverse(t, 2.0 * bytes * 1e-9);
            bench_put("bandwidth", d, item, "d2d_gbs", gb, "GB/s",
                      "nncl_tensor_copy on the device, read+write bytes (2x size)");
            bench_put_num("bandwidth", d, item, "d2d_over_cpu", gb.median / host.median, "x", "on-device copy / host memcpy");
            gb = bench_stat_na();
            if (bench_time(mem_h2d, &j, &tm, &t) == 0) gb = bench_stat_inverse(t, (double)bytes * 1e-9);
            bench_put("bandwidth", d, item, "h2d_gbs", gb, "GB/s", "nncl_tensor_write (blocking) from pageable memory");
            gb = bench_stat_na();
            if (bench_time(mem_d2h, &j, &tm, &t) == 0) gb = bench_stat_inverse(t, (double)bytes * 1e-9);
            bench_put("bandwidth", d, item, "d2h_gbs", gb, "GB/s", "nncl_tensor_read (blocking) into pageable memory");
        }
        nncl_tensor_free(j.a);
        nncl_tensor_free(j.b);
    }
    free(j.host);
    free(j.host2);
}

/* ------------------------------------------------------------- launch */

static int launch_nncl(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_add(j->ctx, j->a, j->b, j->out) != NNCL_OK) return 1;
    return nncl_finish(j->ctx, j->device) != NNCL_OK;
}

static int launch_raw(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (bench_raw_add_enqueue(j->raw)) return 1;
    return bench_raw_finish(j->ctx, j->device);
}

/* each launch waited for: the round trip a synchronous caller sees */
static int launch_nncl_sync(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (nncl_add(j->ctx, j->a, j->b, j->out) != NNCL_OK || nncl_finish(j->ctx, j->device) != NNCL_OK) return 1;
    return 0;
}

static int launch_raw_sync(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    int i;
    for (i = 0; i < iters; i++)
        if (bench_raw_add_enqueue(j->raw) || bench_raw_finish(j->ctx, j->device)) return 1;
    return 0;
}

static int launch_host(void *arg, int iters) {
    mem_job *j = (mem_job *)arg;
    volatile float sink;
    int i;
    size_t k;
    for (i = 0; i < iters; i++) {
        for (k = 0; k < j->n; k++) j->host2[k] = j->host[k] + j->host[k];
        sink = j->host2[i % j->n];
        (void)sink;
    }
    return 0;
}

void bench_launch(const bench_opts *o, nncl_context *ctx) {
    int n = 4096, shape[1], d, nd = nncl_device_count(ctx);
    const char *item_b2b = "add 4096 back-to-back", *item_sync = "add 4096 + finish";
    bench_timing tm = bench_timing_of(o, o->quick ? 1.0 : 4.0);
    bench_stat t, host = bench_stat_na();
    mem_job j;
    float *init;
    memset(&j, 0, sizeof j);
    j.n = (size_t)n;
    j.host = (float *)calloc((size_t)n, sizeof(float));
    j.host2 = (float *)calloc((size_t)n, sizeof(float));
    init = (float *)calloc((size_t)n, sizeof(float));
    if (!j.host || !j.host2 || !init) {
        free(j.host), free(j.host2), free(init);
        return;
    }
    shape[0] = n;
    if (bench_time(launch_host, &j, &tm, &t) == 0) host = bench_stat_scale(t, 1e6);
    bench_put("launch", -1, item_b2b, "cpu_us", host, "us", "the same add of 4096 floats in a host loop");
    for (d = 0; d < nd; d++) {
        char err[256] = "";
        nncl_status st;
        bench_stat tn, tr, ratio;
        j.ctx = ctx;
        j.device = d;
        j.a = j.b = j.out = NULL;
        j.raw = NULL;
        bench_progress("launch d%d: nncl_add vs raw clEnqueueNDRangeKernel", d);
        st = nncl_tensor_create(ctx, d, 1, shape, &j.a);
        if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shape, &j.b);
        if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 1, shape, &j.out);
        if (st == NNCL_OK) st = nncl_tensor_write(j.a, init, j.n);
        if (st == NNCL_OK) st = nncl_tensor_write(j.b, init, j.n);
        if (st != NNCL_OK) snprintf(err, sizeof err, "n/a: %s", nncl_last_error(ctx));
        else if (!(j.raw = bench_raw_add_create(ctx, d, j.a, j.b, j.out, err, sizeof err))) st = NNCL_ERR_DEVICE;
        if (st != NNCL_OK || bench_time_pair(launch_nncl, &j, launch_raw, &j, &tm, &tn, &tr, &ratio) != 0) {
            bench_put("launch", d, item_b2b, "nncl_us", bench_stat_na(), "us", err[0] ? err : "n/a: launch failed");
        } else {
            bench_put("launch", d, item_b2b, "nncl_us", bench_stat_scale(tn, 1e6), "us",
                      "per launch: nncl_add queued back to back, one nncl_finish at the end");
            bench_put("launch", d, item_b2b, "raw_us", bench_stat_scale(tr, 1e6), "us",
                      "per launch: clEnqueueNDRangeKernel of nncl_add_f32, arguments set once");
            bench_put("launch", d, item_b2b, "nncl_over_raw", ratio, "x",
                      "median of per-repeat time ratios, alternating runs; target <= 1.1");
            bench_put_num("launch", d, item_b2b, "dev_over_cpu", tn.median * 1e6 / host.median, "x",
                          "device launch time / host loop time (lower is better)");
            if (bench_time_pair(launch_nncl_sync, &j, launch_raw_sync, &j, &tm, &tn, &tr, &ratio) == 0) {
                bench_put("launch", d, item_sync, "nncl_us", bench_stat_scale(tn, 1e6), "us",
                          "nncl_add then nncl_finish each time: the round trip");
                bench_put("launch", d, item_sync, "raw_us", bench_stat_scale(tr, 1e6), "us",
                          "clEnqueueNDRangeKernel then clFinish each time");
                bench_put("launch", d, item_sync, "nncl_over_raw", ratio, "x", "median of per-repeat time ratios");
            }
        }
        bench_raw_add_free(j.raw);
        nncl_tensor_free(j.a);
        nncl_tensor_free(j.b);
        nncl_tensor_free(j.out);
    }
    free(j.host);
    free(j.host2);
    free(init);
}
