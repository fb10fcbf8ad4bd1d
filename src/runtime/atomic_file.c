/* atomic_file.c - files on the host: writing one so that readers see either
 * the old file or the complete new one (temporary name in the same folder,
 * flush, fsync, rename over the target, fsync the folder), reading one
 * whole, and a locale-independent number formatter for the text formats
 * nncl writes. A write killed before its rename leaves its temporary
 * "NAME.tmp.PID.N" behind; the next write of NAME removes those of
 * processes that no longer run. */
#include "runtime/internal.h"
#include <locale.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#if defined(_WIN32)
#include <io.h>
#include <process.h>
#include <windows.h>
#else
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

/* Distinguishes temporary names of several writes from one process; device
 * threads write files too (stored GEMM choices), hence the lock. */
static unsigned afile_counter;
static pthread_mutex_t afile_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned afile_next(void) {
    unsigned n;
    pthread_mutex_lock(&afile_lock);
    n = afile_counter++;
    pthread_mutex_unlock(&afile_lock);
    return n;
}

#if !defined(_WIN32)
/* The process id of a temporary name "BASE.tmp.PID.N" of base (PID and N
 * decimal), or 0 when name is not one. */
static unsigned long afile_tmp_pid(const char *name, const char *base, size_t base_len) {
    unsigned long pid = 0;
    const char *p;
    if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0) return 0;
    p = name + base_len + 5;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (pid > 4000000000UL) return 0;
        pid = pid * 10 + (unsigned long)(*p - '0');
    }
    if (*p++ != '.' || *p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return *p ? 0 : pid;
}

/* Removes temporaries of path left by processes that no longer run (killed
 * during a write). A live process's are kept, this one's included: they may
 * be another thread's write in progress; a reused process id only keeps a
 * stale file longer. Best effort: a folder that cannot be read is left. */
static void afile_sweep(const char *path) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t dir_len = slash ? (size_t)(slash - path) : 0, base_len = strlen(base);
    char *dir = (char *)NNCL_MALLOC(dir_len + 2), *full;
    DIR *d;
    struct dirent *e;
    if (!dir) return;
    if (!slash) strcpy(dir, ".");
    else if (dir_len == 0) strcpy(dir, "/");
    else {
        memcpy(dir, path, dir_len);
        dir[dir_len] = 0;
    }
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL) {
        unsigned long pid = afile_tmp_pid(e->d_name, base, base_len);
        if (pid == 0 || pid > (unsigned long)INT_MAX) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* running (or not ours to ask) */
        full = (char *)NNCL_MALLOC(strlen(dir) + strlen(e->d_name) + 2);
        if (!full) continue;
        sprintf(full, "%s/%s", dir, e->d_name);
        remove(full);
        NNCL_FREE(full);
    }
    if (d) closedir(d);
    NNCL_FREE(dir);
}
#endif

static void afile_release(nncl__afile *af) {
    NNCL_FREE(af->path);
    NNCL_FREE(af->tmp);
    af->path = af->tmp = NULL;
    af->f = NULL;
}

/* Opens a new file that must not exist yet (O_EXCL), so that two writers
 * never share one temporary file. */
static FILE *afile_create(const char *name) {
#if defined(_WIN32)
    FILE *f = fopen(name, "wbx");
    return f;
#else
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0666);
    FILE *f;
    if (fd < 0) return NULL;
    f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        remove(name);
        errno = e;
    }
    return f;
#endif
}

nncl_status nncl__afile_open(nncl__afile *af, const char *path, const char *what) {
    size_t n;
    int tries;
    af->f = NULL;
    af->path = af->tmp = NULL;
    if (!path || !*path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: empty file name", what);
    n = strlen(path);
    af->path = nncl__strdup(path);
    af->tmp = (char *)NNCL_MALLOC(n + 48);
    if (!af->path || !af->tmp) {
        afile_release(af);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "%s %s: out of memory", what, path);
    }
#if !defined(_WIN32)
    afile_sweep(path);
#endif
    for (tries = 0; tries < 100; tries++) {
        unsigned long pid;
#if defined(_WIN32)
        pid = (unsigned long)_getpid();
#else
        pid = (unsigned long)getpid();
#endif
        sprintf(af->tmp, "%s.tmp.%lu.%u", path, pid, afile_next());
        af->f = afile_create(af->tmp);
        if (af->f || errno != EEXIST) break;
    }
    if (!af->f) {
        int e = errno;
        nncl__fail(NULL, NNCL_ERR_IO, "%s %s: cannot create temporary file %s: %s", what, path, af->tmp,
                   strerror(e));
        afile_release(af);
        return NNCL_ERR_IO;
    }
    return NNCL_OK;
}

void nncl__afile_abort(nncl__afile *af) {
    if (!af) return;
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    afile_release(af);
}

/* Makes the rename itself durable; not every system or file system can
 * fsync a folder, and the data is safe either way, so errors are ignored. */
static void afile_sync_folder(const char *path) {
#if !defined(_WIN32)
    const char *slash = strrchr(path, '/');
    char *dir;
    size_t n;
    int fd;
    if (!slash) {
        dir = nncl__strdup(".");
    } else {
        n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/name": the root folder */
        dir = (char *)NNCL_MALLOC(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = 0;
        }
    }
    if (!dir) return;
    fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    NNCL_FREE(dir);
#else
    (void)path;
#endif
}

nncl_status nncl__afile_commit(nncl__afile *af, const char *what) {
    int failed, e = 0;
    const char *step = "write";
    if (!af->f) {
        afile_release(af);
        return nncl__fail(NULL, NNCL_ERR_STATE, "%s: file not open", what);
    }
    failed = ferror(af->f) != 0;
    if (failed) e = errno;
    if (!failed && fflush(af->f) != 0) { failed = 1; e = errno; step = "flush"; }
#if defined(_WIN32)
    if (!failed && _commit(_fileno(af->f)) != 0) { failed = 1; e = errno; step = "sync"; }
#else
    if (!failed && fsync(fileno(af->f)) != 0) { failed = 1; e = errno; step = "fsync"; }
#endif
    if (fclose(af->f) != 0 && !failed) { failed = 1; e = errno; step = "close"; }
    af->f = NULL;
    if (!failed) {
#if defined(_WIN32)
        if (!MoveFileExA(af->tmp, af->path, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
            failed = 1;
            e = EIO;
            step = "rename";
        }
#else
        if (rename(af->tmp, af->path) != 0) { failed = 1; e = errno; step = "rename"; }
#endif
    }
    if (failed) {
        nncl__fail(NULL, NNCL_ERR_IO, "%s %s: %s of temporary file %s failed: %s; the old file is untouched",
                   what, af->path, step, af->tmp, e ? strerror(e) : "unknown error");
        remove(af->tmp);
        afile_release(af);
        return NNCL_ERR_IO;
    }
    afile_sync_folder(af->path);
    afile_release(af);
    return NNCL_OK;
}

void nncl__fmt_double(char *buf, size_t size, const char *fmt, double x) {
    char *p;
    if (size == 0) return;
    if (x != x) {
        snprintf(buf, size, "nan");
        return;
    }
    if (x > 1.7976931348623157e308 || x < -1.7976931348623157e308) {
        snprintf(buf, size, x > 0 ? "inf" : "-inf");
        return;
    }
    snprintf(buf, size, fmt, x);
    /* A locale with a decimal comma changes only the decimal point of %f/%g
     * output: put the '.' back so CSV, SVG and JSON stay valid. */
    for (p = buf; *p; p++)
        if (*p == ',') *p = '.';
}

double nncl__parse_double(const char *s, char **end) {
    char buf[72], *e = NULL, point = '.';
    const struct lconv *lc = localeconv();
    size_t n = 0;
    double v;
    if (lc && lc->decimal_point && lc->decimal_point[0] && !lc->decimal_point[1]) point = lc->decimal_point[0];
    /* The number's own characters only, with the locale's point for '.'. */
    while (n + 1 < sizeof buf && s[n] && strchr("0123456789+-.eEinfatyINFATY", s[n])) {
        buf[n] = s[n] == '.' ? point : s[n];
        n++;
    }
    buf[n] = 0;
    v = strtod(buf, &e);
    if (end) *end = (char *)s + (e - buf);
    return v;
}

void nncl__fmt_float(char *buf, size_t size, float x) { nncl__fmt_double(buf, size, "%.9g", (double)x); }

float nncl__parse_float(const char *s, char **end) {
    double v = nncl__parse_double(s, end);
    /* Beyond FLT_MAX by half an ulp or more rounds to Inf; below that, to
     * FLT_MAX (a conversion out of range would be undefined). */
    if (v >= 0x1.ffffffp127 || v <= -0x1.ffffffp127) return v > 0 ? HUGE_VALF : -HUGE_VALF;
    if (v > FLT_MAX || v < -FLT_MAX) return v > 0 ? FLT_MAX : -FLT_MAX;
    return (float)v;
}

nncl_status nncl__load_file(const char *fn, const char *path, void *out, size_t out_size, unsigned char **data,
                            size_t *size) {
    *data = NULL;
    *size = 0;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    memset(out, 0, out_size);
    if (!path) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "%s: path is NULL", fn);
    return nncl__read_file(path, data, size);
}

nncl_status nncl__read_file(const char *path, unsigned char **out, size_t *out_size) {
    return nncl__read_file_max(path, NNCL__STREAM_MAX, out, out_size);
}

nncl_status nncl__read_file_max(const char *path, size_t stream_max, unsigned char **out, size_t *out_size) {
    FILE *f;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    long hint = 0;
    int stream = 0;
    *out = NULL;
    *out_size = 0;
    f = fopen(path, "rb");
    if (!f) return nncl__fail(NULL, NNCL_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
#if !defined(_WIN32)
    {
        /* a folder opens for reading on POSIX systems, and its "size" (a
         * seek to its end) is no size; a pipe has none: read it as it
         * comes, up to stream_max; a device (/dev/zero) may never end */
        struct stat sb;
        int known = fstat(fileno(f), &sb) == 0;
        if (known && S_ISDIR(sb.st_mode)) {
            fclose(f);
            return nncl__fail(NULL, NNCL_ERR_IO, "cannot read '%s': it is a folder, not a file", path);
        }
        if (known && !S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode)) {
            fclose(f);
            return nncl__fail(NULL, NNCL_ERR_IO, "cannot read '%s': it is neither a file nor a pipe (a device?)", path);
        }
        if (known && S_ISREG(sb.st_mode)) hint = sb.st_size > LONG_MAX ? LONG_MAX : (long)sb.st_size;
        stream = !known || S_ISFIFO(sb.st_mode);
    }
#else
    if (fseek(f, 0, SEEK_END) == 0) {
        hint = ftell(f);
        if (hint < 0) hint = 0;
    }
    rewind(f);
#endif
    cap = (size_t)hint + 1;
    for (;;) {
        size_t got;
        if (!buf || len == cap) {
            size_t ncap = buf ? cap * 2 : cap;
            unsigned char *nbuf = NULL;
            if (stream && ncap > stream_max + 1) ncap = stream_max + 1; /* one byte past the bound tells */
            /* beyond a quarter of the address space no allocation succeeds */
            if ((!buf || cap <= ((size_t)-1 >> 2)) && nncl__host_fits(ncap)) nbuf = (unsigned char *)NNCL_MALLOC(ncap);
            if (!nbuf) {
                NNCL_FREE(buf);
                fclose(f);
                return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to read '%s'", ncap,
                                  path);
            }
            if (buf) memcpy(nbuf, buf, len);
            NNCL_FREE(buf);
            buf = nbuf;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
        if (stream && len > stream_max) {
            NNCL_FREE(buf);
            fclose(f);
            return nncl__fail(NULL, NNCL_ERR_IO, "cannot read '%s': a pipe of more than %zu bytes (save it to a file)",
                              path, stream_max);
        }
    }
    if (ferror(f)) {
        NNCL_FREE(buf);
        fclose(f);
        return nncl__fail(NULL, NNCL_ERR_IO, "cannot read '%s'", path);
    }
    fclose(f);
    *out = buf;
    *out_size = len;
    return NNCL_OK;
}
