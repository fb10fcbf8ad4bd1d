/* amalgamate.c - build helper: writes dist/nncl.h, the whole library as one
 * single-file header: the public API first, then, under NNCL_IMPLEMENTATION,
 * the internal headers, every source file and the embedded kernel table.
 * usage: amalgamate OUT.h PUBLIC.h KERNELS.c FILE.h|FILE.def|FILE.c...
 * Project headers named on the command line are inlined where they are first
 * included and their #include "..." lines are dropped; X-macro lists
 * (FILE.def) are inlined at every include, since each expands differently; the sources follow in
 * the order given; KERNELS.c (the output of tools/embed.c) comes last. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AM_MAX_FILES 512
#define AM_LINE 65536

static const char *am_files[AM_MAX_FILES]; /* project headers that may be inlined */
static int am_done[AM_MAX_FILES];          /* already inlined (or in progress) */
static int am_every[AM_MAX_FILES];         /* a .def list: inlined at every include */
static int am_nfiles;
static char am_public_base[256];           /* base name of the public header */
static FILE *am_out;
static int am_failed;

static const char *am_base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* If line is `#include "NAME"`, copies NAME into name and returns 1. */
static int am_quoted_include(const char *line, char *name, size_t size) {
    const char *p = line, *q;
    while (*p == ' ' || *p == '\t') p++;
    if (*p++ != '#') return 0;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, "include", 7) != 0) return 0;
    p += 7;
    while (*p == ' ' || *p == '\t') p++;
    if (*p++ != '"') return 0;
    q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= size) return 0;
    memcpy(name, p, (size_t)(q - p));
    name[q - p] = 0;
    return 1;
}

static int am_find(const char *name) {
    int i;
    for (i = 0; i < am_nfiles; i++)
        if (strcmp(am_base(am_files[i]), am_base(name)) == 0) return i;
    return -1;
}

static void am_emit_file(const char *path);

/* Copies one source line, resolving project includes. */
static void am_emit_line(const char *line, const char *path, int lineno) {
    char name[256];
    if (am_quoted_include(line, name, sizeof name)) {
        int k;
        if (strcmp(am_base(name), am_public_base) == 0) return; /* already at the top */
        k = am_find(name);
        if (k >= 0) {
            if (!am_done[k] || am_every[k]) am_emit_file(am_files[k]);
            return;
        }
        fprintf(stderr, "amalgamate: %s:%d: keeping #include \"%s\": not a project header\n", path, lineno, name);
    }
    fputs(line, am_out);
}

static void am_emit_file(const char *path) {
    static char line[AM_LINE];
    FILE *in;
    int k = am_find(path), lineno = 0;
    if (k >= 0) am_done[k] = 1;
    in = fopen(path, "r");
    if (!in) {
        perror(path);
        am_failed = 1;
        return;
    }
    fprintf(am_out, "\n/* ======================================================== %s */\n", path);
    while (fgets(line, sizeof line, in)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(in)) {
            fprintf(stderr, "amalgamate: %s:%d: line longer than %d bytes\n", path, lineno, AM_LINE - 2);
            am_failed = 1;
            break;
        }
        am_emit_line(line, path, lineno);
    }
    if (lineno > 0 && line[strlen(line) - 1] != '\n') fputc('\n', am_out);
    if (ferror(in)) {
        perror(path);
        am_failed = 1;
    }
    fclose(in);
}

/* The kernel table of tools/embed.c, adapted to live in the user's
 * translation unit: its file-static arrays k0, k1... get nncl__ names so
 * they cannot clash with the user's, byte values above 127 are written as
 * (char)N so that C++ accepts them (no narrowing) whatever the signedness
 * of char, and a `struct ...;` definition already made by the sources is
 * dropped. */
static void am_emit_kernels(const char *path, const char *sources_text) {
    static char line[AM_LINE];
    FILE *in = fopen(path, "r");
    if (!in) {
        perror(path);
        am_failed = 1;
        return;
    }
    fprintf(am_out, "\n/* ======================================================== %s */\n", path);
    while (fgets(line, sizeof line, in)) {
        const char *p = line;
        if (strncmp(line, "struct ", 7) == 0 && strstr(sources_text, line)) continue;
        if (strncmp(line, "#include", 8) == 0) { /* system headers only in embed's output */
            fputs(line, am_out);
            continue;
        }
        while (*p) {
            if (*p == '"') { /* copy string literals unchanged */
                const char *q = p + 1;
                while (*q && *q != '"') q += (*q == '\\' && q[1]) ? 2 : 1;
                if (*q) q++;
                fwrite(p, 1, (size_t)(q - p), am_out);
                p = q;
            } else if (isalpha((unsigned char)*p) || *p == '_') {
                const char *q = p;
                while (isalnum((unsigned char)*q) || *q == '_') q++;
                if (p[0] == 'k' && q - p > 1) { /* k<digits>: an embedded source */
                    const char *d = p + 1;
                    while (d < q && isdigit((unsigned char)*d)) d++;
                    if (d == q) fputs("nncl__kernel_src_", am_out);
                }
                fwrite(p, 1, (size_t)(q - p), am_out);
                p = q;
            } else if (isdigit((unsigned char)*p)) {
                const char *q = p;
                long v;
                while (isalnum((unsigned char)*q) || *q == '.') q++;
                v = strtol(p, NULL, 10);
                if (v > 127 && v < 256) fputs("(char)", am_out);
                fwrite(p, 1, (size_t)(q - p), am_out);
                p = q;
            } else {
                fputc(*p++, am_out);
            }
        }
    }
    if (ferror(in)) {
        perror(path);
        am_failed = 1;
    }
    fclose(in);
}

/* Whole contents of path, or NULL. */
static char *am_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

static const char am_head[] =
    "/* nncl.h - single-file edition of nncl, a tensor and neural-network library\n"
    " * that trains on any OpenCL device. Generated by tools/amalgamate.c from\n"
    " * include/nncl.h, src/ and cl/: do not edit; change those and run `make single`.\n"
    " *\n"
    " * Use: include this file wherever you need the API. In exactly ONE C or C++\n"
    " * file, define NNCL_IMPLEMENTATION before including it, and link with\n"
    " *     -lclblast -lOpenCL -lm -lpthread\n"
    " * (add -fopenmp to run the host loops in parallel; define NNCL_HAVE_ZLIB and\n"
    " * link -lz to read .gz files). Define NNCL_MALLOC and NNCL_FREE together to\n"
    " * route host allocations elsewhere. MIT licence. */\n"
    "\n"
    "/* The implementation uses POSIX functions (fsync, ...). A strict -std=c99\n"
    " * build hides them unless a feature macro asks for them; ask for POSIX 2008\n"
    " * only then, and only when no other feature macro was chosen, so that the\n"
    " * user's own choice stands. Works when this file comes before the system\n"
    " * headers in the implementation file (or pass -D_POSIX_C_SOURCE=200809L). */\n"
    "#if defined(NNCL_IMPLEMENTATION) && !defined(NNCL_H) && !defined(__cplusplus) && \\\n"
    "    defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \\\n"
    "    !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_WIN32)\n"
    "#define _POSIX_C_SOURCE 200809L\n"
    "#endif\n";

static const char am_impl_head[] =
    "\n/* ================================================================== */\n"
    "/*                         implementation                               */\n"
    "/* ================================================================== */\n"
    "#if defined(NNCL_IMPLEMENTATION) && !defined(NNCL_IMPLEMENTATION_INCLUDED)\n"
    "#define NNCL_IMPLEMENTATION_INCLUDED\n"
    "/* The public functions above were declared without visibility attributes,\n"
    " * so they get plain external linkage in the user's translation unit. */\n"
    "/* The op table's rows are C99 designated initializers naming only the\n"
    " * fields they set; C++ compilers before C++20 take them as an extension\n"
    " * and warn about the fields left out. */\n"
    "#if defined(__cplusplus) && defined(__clang__)\n"
    "#pragma clang diagnostic push\n"
    "#pragma clang diagnostic ignored \"-Wpedantic\"\n"
    "#elif defined(__cplusplus) && defined(__GNUC__)\n"
    "#pragma GCC diagnostic push\n"
    "#pragma GCC diagnostic ignored \"-Wmissing-field-initializers\"\n"
    "#pragma GCC diagnostic ignored \"-Wpedantic\"\n"
    "#endif\n";

static const char am_impl_tail[] =
    "\n#if defined(__cplusplus) && defined(__clang__)\n"
    "#pragma clang diagnostic pop\n"
    "#elif defined(__cplusplus) && defined(__GNUC__)\n"
    "#pragma GCC diagnostic pop\n"
    "#endif\n"
    "#endif /* NNCL_IMPLEMENTATION */\n";

int main(int argc, char **argv) {
    int i;
    char *sources_text = NULL;
    size_t total = 1;
    if (argc < 4) {
        fprintf(stderr, "usage: amalgamate OUT.h PUBLIC.h KERNELS.c FILE.h|FILE.def|FILE.c...\n");
        return 2;
    }
    if (argc - 4 > AM_MAX_FILES) {
        fprintf(stderr, "amalgamate: more than %d files\n", AM_MAX_FILES);
        return 2;
    }
    snprintf(am_public_base, sizeof am_public_base, "%s", am_base(argv[2]));
    for (i = 4; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n > 4 && strcmp(argv[i] + n - 4, ".def") == 0) am_every[am_nfiles] = 1;
        if ((n > 2 && strcmp(argv[i] + n - 2, ".h") == 0) || am_every[am_nfiles]) am_files[am_nfiles++] = argv[i];
    }
    /* all sources as one text, to recognise what the kernel table repeats */
    for (i = 4; i < argc; i++) {
        char *t = am_slurp(argv[i]), *grown;
        size_t n;
        if (!t) {
            perror(argv[i]);
            free(sources_text);
            return 1;
        }
        n = strlen(t);
        grown = (char *)realloc(sources_text, total + n);
        if (!grown) {
            free(t);
            free(sources_text);
            fprintf(stderr, "amalgamate: out of memory\n");
            return 1;
        }
        if (!sources_text) grown[0] = 0;
        sources_text = grown;
        memcpy(sources_text + total - 1, t, n + 1);
        total += n;
        free(t);
    }
    am_out = fopen(argv[1], "w");
    if (!am_out) {
        perror(argv[1]);
        free(sources_text);
        return 1;
    }
    fputs(am_head, am_out);
    am_emit_file(argv[2]);
    fputs(am_impl_head, am_out);
    /* headers first (internal.h leads when it is named first), then sources;
     * a header already pulled in by an include is not repeated */
    for (i = 4; i < argc; i++)
        if (am_find(argv[i]) >= 0 && !am_done[am_find(argv[i])] && !am_every[am_find(argv[i])]) am_emit_file(argv[i]);
    for (i = 4; i < argc; i++)
        if (am_find(argv[i]) < 0) am_emit_file(argv[i]);
    am_emit_kernels(argv[3], sources_text ? sources_text : "");
    fputs(am_impl_tail, am_out);
    free(sources_text);
    if (fclose(am_out) != 0 || am_failed) {
        fprintf(stderr, "amalgamate: failed, removing %s\n", argv[1]);
        remove(argv[1]);
        return 1;
    }
    return 0;
}
