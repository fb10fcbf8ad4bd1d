/* monitor.c - what the drivers tell about each device while the bench
 * runs: power, temperature and utilisation from NVML (NVIDIA, loaded with
 * dlopen, prototypes declared here), amdgpu sysfs/hwmon (AMD) or DRM
 * fdinfo plus hwmon energy (Intel), matched to the OpenCL device by PCI
 * address and sampled by a background thread every 200 ms; and nncl's own
 * device-memory figures noted between phases. A figure a driver does not
 * give is n/a, never estimated. */
#include "bench.h"
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MON_MAX_DEV 16
#define MON_MAX_SAMPLES 20000
#define MON_ENGINES 16

/* ------------------------------------------------------------- NVML */

typedef struct mon_nvml_util { unsigned int gpu, memory; } mon_nvml_util;
typedef int (*mon_nvml_init_fn)(void);
typedef int (*mon_nvml_handle_fn)(const char *, void **);
typedef int (*mon_nvml_uint_fn)(void *, unsigned int *);
typedef int (*mon_nvml_temp_fn)(void *, int, unsigned int *);
typedef int (*mon_nvml_util_fn)(void *, mon_nvml_util *);

static struct {
    void *lib;
    mon_nvml_init_fn init, shutdown;
    mon_nvml_handle_fn handle;
    mon_nvml_uint_fn power;
    mon_nvml_temp_fn temp;
    mon_nvml_util_fn util;
} mon_nv;

static void *mon_sym(void *lib, const char *name) { return dlsym(lib, name); }

static int mon_nvml_load(void) {
    union { void *p; mon_nvml_init_fn i; mon_nvml_handle_fn h; mon_nvml_uint_fn u; mon_nvml_temp_fn t;
            mon_nvml_util_fn ut; } s;
    if (mon_nv.lib) return 1;
    if (!(mon_nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL))) return 0;
    s.p = mon_sym(mon_nv.lib, "nvmlInit_v2"), mon_nv.init = s.i;
    s.p = mon_sym(mon_nv.lib, "nvmlShutdown"), mon_nv.shutdown = s.i;
    s.p = mon_sym(mon_nv.lib, "nvmlDeviceGetHandleByPciBusId_v2"), mon_nv.handle = s.h;
    s.p = mon_sym(mon_nv.lib, "nvmlDeviceGetPowerUsage"), mon_nv.power = s.u;
    s.p = mon_sym(mon_nv.lib, "nvmlDeviceGetTemperature"), mon_nv.temp = s.t;
    s.p = mon_sym(mon_nv.lib, "nvmlDeviceGetUtilizationRates"), mon_nv.util = s.ut;
    if (!mon_nv.init || !mon_nv.handle || mon_nv.init() != 0) { /* NVML_SUCCESS is 0 */
        dlclose(mon_nv.lib);
        memset(&mon_nv, 0, sizeof mon_nv);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------- state */

typedef struct mon_dev {
    char source[96];          /* "nvml", "amdgpu sysfs", ... or "n/a: why" */
    void *nvml;               /* NVML handle */
    char sysdir[256];         /* /sys/class/drm/cardN/device */
    char hwmon[300];          /* its hwmon folder, "" when none */
    char pci[32];
    int fdinfo;               /* utilisation from DRM fdinfo */
    double last_energy, last_t; /* hwmon energy1_input (uJ) for power */
    char eng_name[MON_ENGINES][32];
    double eng_ns[MON_ENGINES], eng_t;
    int n_eng;
    double *power, *temp, *util;
    int n_power, n_temp, n_util;
    double latest_power, latest_temp, latest_util;
    double mem_in_use_max, mem_peak;
} mon_dev;

static mon_dev mon_devs[MON_MAX_DEV];
static int mon_n;
static pthread_t mon_thread;
static pthread_mutex_t mon_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int mon_stop_flag;
static int mon_running;

static int mon_read_double(const char *path, double *v) {
    FILE *f = fopen(path, "r");
    int ok;
    if (!f) return 0;
    ok = fscanf(f, "%lf", v) == 1;
    fclose(f);
    return ok;
}

static void mon_push(double **arr, int *n, double v) {
    if (!*arr) *arr = (double *)calloc(MON_MAX_SAMPLES, sizeof(double));
    if (*arr && *n < MON_MAX_SAMPLES) (*arr)[(*n)++] = v;
}

/* The DRM card whose device folder is the PCI function pci, e.g.
 * /sys/class/drm/card1/device -> ../../../0000:03:00.0 */
static int mon_find_card(const char *pci, char *sysdir, size_t len) {
    DIR *dir = opendir("/sys/class/drm");
    struct dirent *e;
    int found = 0;
    if (!dir) return 0;
    while (!found && (e = readdir(dir)) != NULL) {
        char link[300], target[512];
        ssize_t n;
        const char *base;
        if (strncmp(e->d_name, "card", 4) || strchr(e->d_name, '-')) continue;
        snprintf(link, sizeof link, "/sys/class/drm/%s/device", e->d_name);
        n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (!strcasecmp(base, pci)) {
            snprintf(sysdir, len, "%.250s", link);
            found = 1;
        }
    }
    closedir(dir);
    return found;
}

static void mon_find_hwmon(mon_dev *m) {
    char path[300];
    DIR *dir;
    struct dirent *e;
    m->hwmon[0] = 0;
    snprintf(path, sizeof path, "%s/hwmon", m->sysdir);
    if (!(dir = opendir(path))) return;
    while ((e = readdir(dir)) != NULL)
        if (!strncmp(e->d_name, "hwmon", 5)) {
            snprintf(m->hwmon, sizeof m->hwmon, "%.250s/%.40s", path, e->d_name);
            break;
        }
    closedir(dir);
}

/* Busy nanoseconds per engine of this process's DRM clients on the device
 * (drm-engine-NAME lines of /proc/self/fdinfo, divided by the engine's
 * capacity), summed over the clients. */
static int mon_fdinfo(const char *pci, char names[][32], double *ns, int max) {
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (!dir) return 0;
    while ((e = readdir(dir)) != NULL) {
        char link[300], target[256], line[256], dev[64] = "";
        char en[MON_ENGINES][32];
        double ev[MON_ENGINES], cap[MON_ENGINES];
        int ne = 0, i, k;
        ssize_t len;
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        if (strncmp(target, "/dev/dri/", 9)) continue;
        snprintf(link, sizeof link, "/proc/self/fdinfo/%s", e->d_name);
        if (!(f = fopen(link, "r"))) continue;
        while (fgets(line, sizeof line, f)) {
            char name[32];
            double v;
            if (sscanf(line, "drm-pdev: %63s", dev) == 1) continue;
            if (sscanf(line, "drm-engine-capacity-%31[^:]: %lf", name, &v) == 2) {
                for (i = 0; i < ne; i++)
                    if (!strcmp(en[i], name)) cap[i] = v;
                continue;
            }
            if (sscanf(line, "drm-engine-%31[^:]: %lf", name, &v) == 2 && ne < MON_ENGINES) {
                snprintf(en[ne], sizeof en[ne], "%s", name);
                ev[ne] = v;
                cap[ne] = 1;
                ne++;
            }
        }
        fclose(f);
        if (strcasecmp(dev, pci)) continue;
        for (i = 0; i < ne; i++) {
            for (k = 0; k < n; k++)
                if (!strcmp(names[k], en[i])) break;
            if (k == n) {
                if (n == max) continue;
                snprintf(names[n], 32, "%.31s", en[i]);
                ns[n++] = 0;
            }
            ns[k] += ev[i] / (cap[i] > 0 ? cap[i] : 1);
        }
    }
    closedir(dir);
    return n;
}

static void mon_sample(mon_dev *m, double now) {
    double power = bench_nan(), temp = bench_nan(), util = bench_nan(), v;
    if (m->nvml) {
        unsigned int mw = 0, c = 0;
        mon_nvml_util u;
        if (mon_nv.power && mon_nv.power(m->nvml, &mw) == 0) power = mw / 1000.0;
        if (mon_nv.temp && mon_nv.temp(m->nvml, 0, &c) == 0) temp = c; /* NVML_TEMPERATURE_GPU */
        if (mon_nv.util && mon_nv.util(m->nvml, &u) == 0) util = u.gpu;
    } else if (m->sysdir[0]) {
        char path[400];
        snprintf(path, sizeof path, "%s/gpu_busy_percent", m->sysdir);
        if (mon_read_double(path, &v)) util = v;
        if (m->hwmon[0]) {
            snprintf(path, sizeof path, "%s/power1_average", m->hwmon);
            if (mon_read_double(path, &v)) power = v * 1e-6; /* microwatts */
            else {
                snprintf(path, sizeof path, "%s/power1_input", m->hwmon);
                if (mon_read_double(path, &v)) power = v * 1e-6;
                else {
                    snprintf(path, sizeof path, "%s/energy1_input", m->hwmon);
                    if (mon_read_double(path, &v)) { /* microjoules: power from the difference */
                        if (m->last_t > 0 && now > m->last_t && v >= m->last_energy)
                            power = (v - m->last_energy) * 1e-6 / (now - m->last_t);
                        m->last_energy = v;
                        m->last_t = now;
                    }
                }
            }
            snprintf(path, sizeof path, "%s/temp1_input", m->hwmon);
            if (mon_read_double(path, &v)) temp = v / 1000.0;
        }
        if (m->fdinfo && bench_isnan(util)) {
            char names[MON_ENGINES][32];
            double ns[MON_ENGINES];
            int n = mon_fdinfo(m->pci, names, ns, MON_ENGINES), i, k;
            double best = bench_nan();
            for (i = 0; i < n && m->eng_t > 0; i++)
                for (k = 0; k < m->n_eng; k++)
                    if (!strcmp(names[i], m->eng_name[k]) && ns[i] >= m->eng_ns[k]) {
                        double u = (ns[i] - m->eng_ns[k]) * 1e-9 / (now - m->eng_t) * 100;
                        if (u > 100) u = 100;
                        if (bench_isnan(best) || u > best) best = u;
                    }
            util = best;
            for (i = 0; i < n; i++) {
                snprintf(m->eng_name[i], 32, "%s", names[i]);
                m->eng_ns[i] = ns[i];
            }
            m->n_eng = n;
            m->eng_t = now;
        }
    }
    pthread_mutex_lock(&mon_lock);
    m->latest_power = power;
    m->latest_temp = temp;
    m->latest_util = util;
    if (!bench_isnan(power)) mon_push(&m->power, &m->n_power, power);
    if (!bench_isnan(temp)) mon_push(&m->temp, &m->n_temp, temp);
    if (!bench_isnan(util)) mon_push(&m->util, &m->n_util, util);
    pthread_mutex_unlock(&mon_lock);
}

static void *mon_main(void *arg) {
    (void)arg;
    while (!mon_stop_flag) {
        struct timespec ts;
        double now = bench_now();
        int i;
        for (i = 0; i < mon_n; i++)
            if (mon_devs[i].nvml || mon_devs[i].sysdir[0]) mon_sample(&mon_devs[i], now);
        ts.tv_sec = 0;
        ts.tv_nsec = 200000000L;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

void bench_monitor_start(nncl_context *ctx) {
    int d, any = 0;
    mon_n = nncl_device_count(ctx);
    if (mon_n > MON_MAX_DEV) mon_n = MON_MAX_DEV;
    for (d = 0; d < mon_n; d++) {
        mon_dev *m = &mon_devs[d];
        nncl_device_info info;
        memset(m, 0, sizeof *m);
        m->latest_power = m->latest_temp = m->latest_util = bench_nan();
        if (nncl_device_info_get(ctx, d, &info) != NNCL_OK) continue;
        snprintf(m->pci, sizeof m->pci, "%s", info.pci_bus_id);
        if (!info.pci_bus_id[0]) {
            snprintf(m->source, sizeof m->source, "n/a: the driver gives no PCI address%s",
                     info.type == NNCL_DEVICE_CPU ? " (a CPU device)" : "");
            continue;
        }
        if (strstr(info.vendor, "NVIDIA")) {
            void *h = NULL;
            if (!mon_nvml_load()) {
                snprintf(m->source, sizeof m->source, "n/a: libnvidia-ml.so.1 not loadable");
            } else if (mon_nv.handle(info.pci_bus_id, &h) != 0 || !h) {
                snprintf(m->source, sizeof m->source, "n/a: NVML knows no device at %s", info.pci_bus_id);
            } else {
                m->nvml = h;
                snprintf(m->source, sizeof m->source, "NVML");
                any = 1;
            }
            continue;
        }
        if (!mon_find_card(info.pci_bus_id, m->sysdir, sizeof m->sysdir)) {
            snprintf(m->source, sizeof m->source, "n/a: no /sys/class/drm card at %s", info.pci_bus_id);
            continue;
        }
        mon_find_hwmon(m);
        if (strstr(info.vendor, "Intel")) {
            m->fdinfo = 1;
            snprintf(m->source, sizeof m->source, "DRM fdinfo + hwmon (%s)", m->sysdir);
        } else {
            snprintf(m->source, sizeof m->source, "amdgpu sysfs/hwmon (%s)", m->sysdir);
        }
        any = 1;
    }
    mon_stop_flag = 0;
    mon_running = any && pthread_create(&mon_thread, NULL, mon_main, NULL) == 0;
}

void bench_monitor_latest(int device, char *buf, size_t len) {
    mon_dev *m;
    size_t used = 0;
    buf[0] = 0;
    if (device < 0 || device >= mon_n) return;
    m = &mon_devs[device];
    pthread_mutex_lock(&mon_lock);
    if (!bench_isnan(m->latest_power)) used += (size_t)snprintf(buf + used, len - used, "%.0fW ", m->latest_power);
    if (!bench_isnan(m->latest_temp) && used < len)
        used += (size_t)snprintf(buf + used, len - used, "%.0fC ", m->latest_temp);
    if (!bench_isnan(m->latest_util) && used < len) snprintf(buf + used, len - used, "%.0f%%", m->latest_util);
    pthread_mutex_unlock(&mon_lock);
}

void bench_monitor_note_memory(nncl_context *ctx) {
    int d;
    for (d = 0; d < mon_n && d < nncl_device_count(ctx); d++) {
        uint64_t use = 0, peak = 0;
        if (nncl_device_memory(ctx, d, &use, &peak) != NNCL_OK) continue;
        if (use / 1048576.0 > mon_devs[d].mem_in_use_max) mon_devs[d].mem_in_use_max = use / 1048576.0;
        if (peak / 1048576.0 > mon_devs[d].mem_peak) mon_devs[d].mem_peak = peak / 1048576.0;
    }
}

void bench_monitor_stop(void) {
    int d;
    if (mon_running) {
        mon_stop_flag = 1;
        pthread_join(mon_thread, NULL);
        mon_running = 0;
    }
    for (d = 0; d < mon_n; d++) {
        mon_dev *m = &mon_devs[d];
        const char *na = m->source[0] == 'n' ? m->source : "n/a: the driver does not report it";
        bench_put_text("monitor", d, "driver", "source", m->source);
        bench_put("monitor", d, "driver", "power_w", bench_stat_of(m->power, m->n_power), "W",
                  m->n_power ? "samples every 200 ms over the whole run" : na);
        bench_put("monitor", d, "driver", "temp_c", bench_stat_of(m->temp, m->n_temp), "C",
                  m->n_temp ? "samples every 200 ms over the whole run" : na);
        bench_put("monitor", d, "driver", "util_pct", bench_stat_of(m->util, m->n_util), "%",
                  m->n_util ? "driver's utilisation, samples every 200 ms" : na);
        bench_put_num("monitor", d, "nncl", "mem_in_use_mib", m->mem_in_use_max, "MiB",
                      "nncl_device_memory in use, largest seen between phases");
        bench_put_num("monitor", d, "nncl", "mem_peak_mib", m->mem_peak, "MiB", "nncl_device_memory peak of the run");
        free(m->power), free(m->temp), free(m->util);
        m->power = m->temp = m->util = NULL;
    }
    if (mon_nv.lib) {
        if (mon_nv.shutdown) mon_nv.shutdown();
        dlclose(mon_nv.lib);
        memset(&mon_nv, 0, sizeof mon_nv);
    }
}

#undef MON_MAX_DEV
#undef MON_MAX_SAMPLES
#undef MON_ENGINES
