/* test_fuzz_corpus.c - replays the fuzz seeds without libFuzzer: every
 * tests/fuzz/fuzz_<name>.c is compiled into this program with its
 * LLVMFuzzerTestOneInput renamed nncl_fuzz_replay_fuzz_<name> (the Makefile
 * lists them in fuzz_targets.h), and every file of tests/fuzz/corpus/<name>/
 * goes through it, with a few edge inputs. A new fuzz_*.c needs no edit. */
#include "harness.h"
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*fuzz_entry)(const uint8_t *data, size_t size);

#define NNCL_FUZZ_TARGET(name) int nncl_fuzz_replay_##name(const uint8_t *data, size_t size);
#include "fuzz_targets.h"
#undef NNCL_FUZZ_TARGET

typedef struct fuzz_target {
    const char *name;
    fuzz_entry fn;
} fuzz_target;

static const fuzz_target targets[] = {
#define NNCL_FUZZ_TARGET(name) {#name, nncl_fuzz_replay_##name},
#include "fuzz_targets.h"
#undef NNCL_FUZZ_TARGET
    {NULL, NULL}};

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The corpus root: $NNCL_FUZZ_CORPUS, else tests/fuzz/corpus from the
 * current folder or from the program's folder (build/tests/). */
static int corpus_root(const char *argv0, char *out, size_t cap) {
    const char *env = getenv("NNCL_FUZZ_CORPUS"), *slash = strrchr(argv0, '/');
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return is_dir(out);
    }
    snprintf(out, cap, "tests/fuzz/corpus");
    if (is_dir(out)) return 1;
    if (slash) {
        snprintf(out, cap, "%.*s/../../tests/fuzz/corpus", (int)(slash - argv0), argv0);
        if (is_dir(out)) return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the entries of dir (no dot files), sorted; NULL-terminated. */
static char **list_dir(const char *dir, size_t *n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (*n + 2 > cap) {
            char **nn;
            cap = cap ? 2 * cap : 16;
            nn = (char **)realloc(names, cap * sizeof(char *));
            if (!nn) break;
            names = nn;
        }
        names[(*n)++] = strdup(e->d_name);
        names[*n] = NULL;
    }
    closedir(d);
    if (names) qsort(names, *n, sizeof(char *), cmp_str);
    return names;
}

static void free_list(char **names, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) free(names[i]);
    free(names);
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0, got;
    if (!f) return NULL;
    do {
        if (len == cap) {
            unsigned char *nb;
            cap = cap ? 2 * cap : 4096;
            nb = (unsigned char *)realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    *size = len;
    return buf ? buf : (unsigned char *)malloc(1);
}

/* Runs the target on edge inputs that need no corpus. */
static int replay_edges(const fuzz_target *t) {
    static const char *const texts[] = {"", "\n", "\"", ",", "\x1f\x8b", "\x1f\x8b\x08", "{}", "\0\0\x08\x01"};
    uint8_t b[1];
    size_t i;
    int c;
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (t->fn((const uint8_t *)texts[i], strlen(texts[i]) + (i == 7 ? 4 : 0)) != 0) return 1;
    for (c = 0; c < 256; c++) {
        b[0] = (uint8_t)c;
        if (t->fn(b, 1) != 0) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    char root[1024], dir[1200], path[1500], name[256];
    int have_root = corpus_root(argv[0], root, sizeof root);
    const fuzz_target *t;
    size_t i, n;
    char **dirs;
    (void)argc;
    if (!targets[0].name) th_skip("fuzz corpus", "no tests/fuzz/fuzz_*.c targets were compiled in");
    for (t = targets; t->name; t++) {
        char **files;
        size_t replayed = 0;
        snprintf(name, sizeof name, "fuzz corpus %s edge inputs", t->name);
        if (replay_edges(t)) th_fail(name, "the target returned nonzero");
        else th_pass(name);
        snprintf(name, sizeof name, "fuzz corpus %s", t->name);
        snprintf(dir, sizeof dir, "%s/%s", root, t->name);
        if (!have_root || !is_dir(dir)) {
            th_skip(name, "no seed folder tests/fuzz/corpus/<target>/");
            continue;
        }
        files = list_dir(dir, &n);
        for (i = 0; i < n; i++) {
            unsigned char *data;
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (is_dir(path)) continue;
            data = read_all(path, &size);
            if (!data) {
                th_fail(name, "cannot read %s", path);
                break;
            }
            /* a crash here ends the program: run.sh reports its status, and
             * the file being replayed is the last line printed */
            printf("  replay %s (%zu bytes)\n", path, size);
            fflush(stdout);
            if (t->fn(data, size) != 0) {
                th_fail(name, "%s: the target returned nonzero", path);
                free(data);
                break;
            }
            free(data);
            replayed++;
        }
        if (i == n) {
            if (replayed) th_pass(name);
            else th_skip(name, "seed folder is empty");
        }
        free_list(files, n);
    }
    /* a seed folder without a target would silently never run */
    dirs = have_root ? list_dir(root, &n) : NULL;
    for (i = 0; dirs && i < n; i++) {
        for (t = targets; t->name; t++)
            if (strcmp(t->name, dirs[i]) == 0) break;
        snprintf(dir, sizeof dir, "%s/%s", root, dirs[i]);
        if (!t->name && is_dir(dir))
            th_fail("fuzz corpus folders", "%s has no target tests/fuzz/%s.c compiled in", dir, dirs[i]);
    }
    free_list(dirs, dirs ? n : 0);
    return th_exit_code();
}
