/* choice_file.c - the stored choices of kernels and paths (src/gemm/gemm_pick.c
 * times GEMM candidates, src/ops/conv_pick.c conv2d paths) and what ships
 * as data per device class. One text file per device in the cache folder,
 * named after the device's identity: a magic line, the identity (device,
 * driver, CLBlast version, the hashes of the kernel text timed), then one
 * line per choice,
 *   choice TA TB M N K EPI BEST BEST_OWN     (a product: variant names, "clblast")
 *   conv C H W O K STRIDE PAD ACT BIAS DX DW PATH   (a conv2d layer's path)
 * and a checksum line: the format (nncl__sealed_body, gemm.h) that
 * CLBlast's tuning file (src/gemm/tune.c) is stored in too. A file that is damaged, foreign, of another version
 * or names kernels this build lacks is ignored whole and rewritten at the
 * next choice; reading never trusts a length or a number it did not check.
 *
 * Device classes (known_classes): what was measured on a kind of device
 * and holds for any device of it. On PoCL's CPU devices CLBlast measured
 * 5-15x slower than nncl's own kernels at every shape timed (square SGEMM
 * 64-2048, the bench models' products), so CLBlast is not timed there
 * (nor are its kernels built, which is most of a cold first step where
 * it is timed) unless CLBlast runs a tuning made for the device
 * (nncl_tune_gemm); $NNCL_TIME_CLBLAST=1 times it anyway on every
 * device, =0 nowhere. A class may also ship choices measured on it (the bench
 * models' products and layers), taken where the device's own file has
 * none for the shape, so a first run of those models measures nothing,
 * and a shape they lack is timed on the variants they name (each variant
 * timed costs its build and first-launch compiles; the shipped choices
 * are made to name as few as cover the shapes measured, see
 * bench/known_choices.py); $NNCL_KNOWN_CHOICES=0 leaves them out (to
 * measure afresh on every variant). Shipped lines naming a kernel this
 * build lacks are skipped one by one. */
#include "gemm/gemm.h"
#include <stdio.h>

#define PICK_MAGIC "nncl-gemm-choice 7" /* 3: the 3x3 conv path; 4: the dot kernel; 5: direct 4 x 4 vectors; 6: dot groups of 8; 7: close contenders timed longer */
#define PICK_FILE_MAX (1u << 20) /* a larger file is not one of ours */

/* ------------------------------------------------------------- device classes */

#include "gemm/choice_known.h"

typedef struct known_class {
    const char *platform;        /* the platform name holds this */
    const char *device;          /* the device name starts with this ("" any) */
    nncl_device_type type;
    int clblast_loses;           /* CLBlast measured slower than the own kernels at every shape */
    const char *const *choices;  /* lines as in the file, NULL-terminated; NULL none */
} known_class;

static const known_class known_classes[] = {
    /* choices hold for the CPUs they were measured on: PoCL names the LLVM
     * target, then the CPU */
    {"Portable Computing Language", "pthread-skylake-avx512-AMD EPYC", NNCL_DEVICE_CPU, 1, known_pocl_avx512_epyc},
    {"Portable Computing Language", "pthread-haswell-AMD EPYC", NNCL_DEVICE_CPU, 1, known_pocl_avx2_epyc},
    {"Portable Computing Language", "", NNCL_DEVICE_CPU, 1, NULL},
};

static const known_class *known_class_of(const nncl_device *dev) {
    size_t i;
    for (i = 0; i < sizeof known_classes / sizeof known_classes[0]; i++) {
        const known_class *k = &known_classes[i];
        if (strstr(dev->info.platform, k->platform) && !strncmp(dev->info.name, k->device, strlen(k->device)) &&
            dev->info.type == k->type)
            return k;
    }
    return NULL;
}

int nncl__gemm_times_clblast(const nncl_device *dev) {
    const char *env = getenv("NNCL_TIME_CLBLAST");
    const known_class *k = known_class_of(dev);
    if (env && *env) return strcmp(env, "0") != 0;
    return dev->clblast_tuned || !k || !k->clblast_loses;
}

/* The shipped choices for dev: none where CLBlast is timed (they were
 * made without it) or $NNCL_KNOWN_CHOICES=0. */
static const char *const *known_choices(const nncl_device *dev) {
    const char *env = getenv("NNCL_KNOWN_CHOICES");
    const known_class *k = known_class_of(dev);
    if ((env && !strcmp(env, "0")) || !k || nncl__gemm_times_clblast(dev)) return NULL;
    return k->choices;
}

/* ------------------------------------------------------------- choices */

int nncl__gemm_choice_add(nncl__gemm_state *s, const nncl__gemm_choice *c) {
    if (nncl__grow_int((void **)&s->choices, &s->cap_choices, s->n_choices + 1, sizeof *c, 16)) return 0;
    s->choices[s->n_choices++] = *c;
    return 1;
}

int nncl__gemm_conv_add(nncl__gemm_state *s, const nncl__conv_choice *c) {
    if (nncl__grow_int((void **)&s->convs, &s->cap_convs, s->n_convs + 1, sizeof *c, 8)) return 0;
    s->convs[s->n_convs++] = *c;
    return 1;
}

static int pick_conv_find(const nncl__gemm_state *s, const int *key) {
    int i;
    for (i = 0; i < s->n_convs; i++)
        if (!memcmp(s->convs[i].key, key, sizeof s->convs[i].key)) return i;
    return -1;
}

static int pick_choice_find(const nncl__gemm_state *s, const nncl__gemm_choice *c) {
    int i;
    for (i = 0; i < s->n_choices; i++) {
        const nncl__gemm_choice *o = &s->choices[i];
        if (o->ta == c->ta && o->tb == c->tb && o->m == c->m && o->n == c->n && o->k == c->k && o->epi == c->epi)
            return i;
    }
    return -1;
}

/* ------------------------------------------------------------- the file */

static uint64_t pick_fnv(const char *p, size_t n) { return nncl__fnv1a(0xCBF29CE484222325ull, p, n); }

const char *nncl__gemm_variant_name(const nncl__gemm_state *s, int idx) {
    return idx < 0 ? "clblast" : s->all[idx].name;
}

static int pick_index(const nncl__gemm_state *s, const char *name) {
    int i;
    if (!strcmp(name, "clblast")) return -1;
    for (i = 0; i < s->n_all; i++)
        if (!strcmp(name, s->all[i].name)) return i;
    return -2;
}

int nncl__gemm_candidate(const nncl__gemm_state *s, int i, int ta, int tb, size_t m, size_t n) {
    return nncl__gemm_takes(&s->all[i], ta, tb) && nncl__gemm_worth(s->all, i, m, n);
}

/* What a choice file is written for: the device's identity (driver and
 * CLBlast versions included) and the text of the kernels timed (the GEMM
 * and convolution families: gemm, conv, conv3), so that choices measured
 * with other kernels (another version of nncl, NNCL_KERNEL_DIR) are
 * measured again, not trusted. */
static void pick_identity(nncl_context *ctx, const nncl_device *dev, char *id, size_t size) {
    size_t n;
    nncl__device_identity(dev, id, size);
    n = strlen(id);
    snprintf(id + n, size - n, "kernels %016llx %016llx %016llx\n", (unsigned long long)nncl__program_hash(ctx, "gemm"),
             (unsigned long long)nncl__program_hash(ctx, "conv"), (unsigned long long)nncl__program_hash(ctx, "conv3"));
}

/* One line of choices (no newline) into s: 1 taken, 0 not (why in *why);
 * with keep, a line for a shape s already has is passed over (taken). */
static int pick_line(nncl__gemm_state *s, const char *line, int keep, const char **why) {
    nncl__gemm_choice c;
    char best[32], own[32];
    unsigned long m, nn, k;
    *why = "damaged";
    memset(&c, 0, sizeof c);
    if (!strncmp(line, "conv ", 5)) {
        nncl__conv_choice cc;
        int *q = cc.key;
        if (sscanf(line + 5, "%d %d %d %d %d %d %d %d %d %d %d %d", &q[0], &q[1], &q[2], &q[3], &q[4], &q[5], &q[6],
                   &q[7], &q[8], &q[9], &q[10], &cc.path) != NNCL__CONV_KEY + 1 ||
            cc.path < 0 || cc.path > NNCL__CONV_PATH_MAX)
            return 0;
        return (keep && pick_conv_find(s, cc.key) >= 0) || nncl__gemm_conv_add(s, &cc);
    }
    if (sscanf(line, "choice %d %d %lu %lu %lu %d %31s %31s", &c.ta, &c.tb, &m, &nn, &k, &c.epi, best, own) != 8)
        return 0;
    c.m = m;
    c.n = nn;
    c.k = k;
    c.best = pick_index(s, best);
    c.best_own = pick_index(s, own);
    if (c.best < -1 || c.best_own < 0 || (c.ta | c.tb) & ~1) {
        *why = "names kernels this build lacks";
        return 0;
    }
    if ((c.best >= 0 && !nncl__gemm_candidate(s, c.best, c.ta, c.tb, c.m, c.n)) ||
        !nncl__gemm_candidate(s, c.best_own, c.ta, c.tb, c.m, c.n)) {
        *why = "names a kernel for products it does not run";
        return 0;
    }
    return (keep && pick_choice_find(s, &c) >= 0) || nncl__gemm_choice_add(s, &c);
}

char *nncl__sealed_body(char *buf, size_t n, const char *magic, const char *id, const char *idmiss, const char **why) {
    char *check;
    size_t hl = strlen(magic), name = hl;
    unsigned long long sum;
    *why = "damaged";
    if (n == 0 || memchr(buf, 0, n)) return NULL;
    buf[n] = 0;
    while (name > 0 && magic[name - 1] != ' ') name--; /* "nncl-gemm-choice " of "nncl-gemm-choice 7" */
    if (name && !strncmp(buf, magic, name) && (strncmp(buf, magic, hl) != 0 || buf[hl] != '\n')) {
        *why = "written by another version of nncl";
        return NULL;
    }
    check = strstr(buf, "\ncheck ");
    if (!check || sscanf(check + 7, "%16llx", &sum) != 1 || pick_fnv(buf, (size_t)(check + 1 - buf)) != sum)
        return NULL;
    check[1] = 0;
    if (strncmp(buf, magic, hl) != 0 || buf[hl] != '\n') return NULL;
    if (strncmp(buf + hl + 1, id, strlen(id)) != 0) {
        *why = idmiss;
        return NULL;
    }
    return buf + hl + 1 + strlen(id);
}

size_t nncl__sealed_seal(char *text, size_t len, size_t cap) {
    if (len + 32 >= cap) return 0;
    return len + (size_t)snprintf(text + len, cap - len, "check %016llx\n", (unsigned long long)pick_fnv(text, len));
}

int nncl__gemm_choices_parse(nncl__gemm_state *s, const char *id, char *buf, size_t n, const char **why) {
    char *line, *next;
    line = nncl__sealed_body(buf, n, PICK_MAGIC, id, "written for another device, driver, CLBlast or kernel text", why);
    if (!line) return 0;
    for (; *line; line = next) {
        char *nl = strchr(line, '\n');
        if (!nl) return 0;
        *nl = 0;
        next = nl + 1;
        if (!pick_line(s, line, 0, why)) return 0;
    }
    return 1;
}

void nncl__gemm_choices_load(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s) {
    char path[1200];
    unsigned char *data = NULL;
    size_t size = 0;
    const char *why;
    const char *const *known = known_choices(dev);
    int i, n = 0;
    s->loaded = 1;
    pick_identity(ctx, dev, s->id, sizeof s->id);
    if (nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path) &&
        nncl__read_file(path, &data, &size) == NNCL_OK && size < PICK_FILE_MAX) { /* else none stored yet */
        char *buf = (char *)NNCL_MALLOC(size + 1);
        if (buf) {
            memcpy(buf, data, size);
            if (nncl__gemm_choices_parse(s, s->id, buf, size, &why))
                nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: %d GEMM choices from %s", dev->info.index, s->n_choices,
                          path);
            else {
                s->n_choices = s->n_convs = 0;
                nncl__log(ctx, NNCL_LOG_WARN, "device %d: GEMM choices %s ignored: %s", dev->info.index, path, why);
            }
            NNCL_FREE(buf);
        }
    }
    NNCL_FREE(data);
    for (i = 0; known && known[i]; i++) {
        char best[32], own[32];
        int b, o;
        if (sscanf(known[i], "choice %*d %*d %*u %*u %*u %*d %31s %31s", best, own) == 2 &&
            (b = pick_index(s, best)) >= 0 && (o = pick_index(s, own)) >= 0)
            s->shipped |= 1u << b | 1u << o;
        n += pick_line(s, known[i], 1, &why);
    }
    if (known) nncl__log(ctx, NNCL_LOG_DEBUG, "device %d: %d shipped choices of its device class", dev->info.index, n);
}

/* Rewrites the file with every choice (best effort: logs on failure); s
 * was loaded first, which made its id. */
void nncl__gemm_choices_store(nncl_context *ctx, nncl_device *dev, nncl__gemm_state *s) {
    char path[1200], line[256];
    nncl__afile af;
    char *text;
    size_t cap = 2048 + (size_t)(s->n_choices + s->n_convs) * 160, len;
    int i;
    if (!nncl__device_cache_path(dev, "gemm", "choice", path, sizeof path)) return;
    if (!(text = (char *)NNCL_MALLOC(cap))) return;
    len = (size_t)snprintf(text, cap, "%s\n%s", PICK_MAGIC, s->id);
    for (i = 0; i < s->n_choices && len < cap; i++) {
        const nncl__gemm_choice *c = &s->choices[i];
        snprintf(line, sizeof line, "choice %d %d %lu %lu %lu %d %s %s\n", c->ta, c->tb, (unsigned long)c->m,
                 (unsigned long)c->n, (unsigned long)c->k, c->epi, nncl__gemm_variant_name(s, c->best), nncl__gemm_variant_name(s, c->best_own));
        len += (size_t)snprintf(text + len, cap - len, "%s", line);
    }
    for (i = 0; i < s->n_convs && len < cap; i++) {
        const int *q = s->convs[i].key;
        len += (size_t)snprintf(text + len, cap - len, "conv %d %d %d %d %d %d %d %d %d %d %d %d\n", q[0], q[1], q[2], q[3],
                                q[4], q[5], q[6], q[7], q[8], q[9], q[10], s->convs[i].path);
    }
    if (nncl__sealed_seal(text, len, cap)) {
        if (nncl__afile_open(&af, path, "GEMM choices") == NNCL_OK) {
            if (fputs(text, af.f) == EOF) nncl__afile_abort(&af);
            else if (nncl__afile_commit(&af, "GEMM choices") != NNCL_OK)
                nncl__log(ctx, NNCL_LOG_WARN, "device %d: cannot store GEMM choices in %s", dev->info.index, path);
        }
    }
    NNCL_FREE(text);
}

#undef PICK_MAGIC
#undef PICK_FILE_MAX
