/* test_conv_pick.c - the path a conv2d layer takes (im2col + CLBlast, the
 * implicit GEMM on own kernels, or the 3x3 kernels of a 3x3 layer on the
 * network's input) with NNCL_GEMM=auto is chosen once, by timing the layer
 * each way when the plan is made (the fastest of the times it logs), and
 * stored as a "conv" line of the device's GEMM choice file: a step runs
 * the stored path (seen in the kernels a profiled step launches), a later
 * context reuses the stored line instead of timing again (shown by editing
 * it), a damaged file is ignored and rewritten, and NNCL_GEMM=own|clblast
 * and NNCL_CONV_3X3 (or its former name NNCL_CONV_DIRECT) override it. */
#include "harness.h"
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* key C H W O k stride pad act bias dx dw of the layer below */
#define CP_KEY "conv 3 9 7 5 3 1 1 1 1 0 1 "

static char cp_dir[64], cp_file[512];
static char cp_timed[512]; /* the last path choice's debug line */

static void cp_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    if (strstr(msg, "conv2d \"conv\" at batch")) snprintf(cp_timed, sizeof cp_timed, "%s", msg);
}

/* Whether the debug line of the path choice names as chosen path `path`
 * and that path's time is the least of the three it prints ("inf" for a
 * path not timed; a tie in the last digit is one). */
static int cp_timed_fastest(int path) {
    static const char *const names[3] = {"im2col + CLBlast", "own", "3x3"};
    const char *p = strstr(cp_timed, "im2col + CLBlast ");
    double t[3];
    char chosen[64];
    if (!p || sscanf(p + strlen("im2col + CLBlast "), "%lf ms, own %lf ms, 3x3 %lf ms: %63[^,]", &t[0], &t[1], &t[2],
                     chosen) != 4) {
        printf("    (no path times in the log: %s)\n", cp_timed);
        return 0;
    }
    if (strcmp(chosen, names[path]) != 0 || t[path] > t[0] || t[path] > t[1] || t[path] > t[2]) {
        printf("    (the step ran %s: %s)\n", names[path], cp_timed);
        return 0;
    }
    return 1;
}

/* Trains one step of a small CNN on device 0 in a fresh context; *own the
 * path the step ran: 0 im2col, 1 own, 2 3x3, -1 none or several. */
static int cp_step(const char *name, int *own) {
    const char *sel = getenv("NNCL_TEST_DEVICES");
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    nncl_profile_kernel k[64];
    nncl_profile_report rep;
    nncl_trainer *t = NULL;
    nncl_train_config c = nncl_train_default();
    nncl_feed f[2];
    int xs[3] = {3, 9, 7}, d = 0, n, i, pack = 0, col = 0, c3 = 0;
    nncl_graph *g;
    nncl_node *x, *y, *h, *loss;
    float xd[4 * 3 * 9 * 7], yd[4] = {0, 1, 1, 0};
    unsigned seed = 9;
    th_fill_uniform(xd, sizeof xd / sizeof xd[0], -1, 1, &seed);
    cfg.devices = sel && *sel ? sel : "all";
    cfg.profiling = 1;
    cfg.log = cp_log;
    cfg.log_level = NNCL_LOG_DEBUG;
    TH_OK(name, NULL, nncl_init(&cfg, &ctx));
    g = nncl_graph_create(ctx, 3);
    x = nncl_input(g, "x", 3, xs);
    y = nncl_input(g, "y", 0, NULL);
    h = nncl_flatten(g, nncl_conv2d(g, x, 5, 3, 1, 1, 1, NNCL_ACT_RELU, "conv"));
    loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, 2, 1, NNCL_ACT_NONE, "fc"), y);
    c.max_batch = 4;
    c.devices = &d;
    c.n_devices = 1;
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f[0].node = x; f[0].data = xd;
    f[1].node = y; f[1].data = yd;
    TH_OK(name, ctx, nncl_profile_start(ctx, 0));
    TH_OK(name, ctx, nncl_trainer_step(t, f, 2, 4, NULL));
    TH_OK(name, ctx, nncl_profile_stop(ctx, 0, &rep));
    n = nncl_profile_kernels(ctx, 0, k, 64);
    for (i = 0; i < n && i < 64; i++) {
        /* the own path's forward packing: _bs for same-size layers on CPUs */
        pack |= !strcmp(k[i].name, "nncl_conv_pack_b_f32") || !strcmp(k[i].name, "nncl_conv_pack_bs_f32");
        col |= !strcmp(k[i].name, "nncl_im2col_f32");
        c3 |= !strcmp(k[i].name, "nncl_conv3_f32");
    }
    nncl_trainer_free(t);
    nncl_graph_free(g);
    nncl_free(ctx);
    *own = pack + col + c3 != 1 ? -1 : c3 ? 2 : pack;
    return 0;
}

/* The choice file in cp_dir (there is one device's), read whole into buf. */
static size_t cp_read(char *buf, size_t cap) {
    DIR *dir = opendir(cp_dir);
    struct dirent *e;
    FILE *f;
    size_t n = 0;
    cp_file[0] = 0;
    while (dir && (e = readdir(dir)) != NULL)
        if (!strncmp(e->d_name, "gemm-", 5) && strstr(e->d_name, ".choice"))
            snprintf(cp_file, sizeof cp_file, "%s/%s", cp_dir, e->d_name);
    if (dir) closedir(dir);
    if (cp_file[0] && (f = fopen(cp_file, "rb")) != NULL) {
        n = fread(buf, 1, cap - 1, f);
        fclose(f);
    }
    buf[n] = 0;
    return n;
}

/* The stored path of the layer: 0-2, or -1 when there is no line for it. */
static int cp_stored(const char *buf) {
    const char *p = strstr(buf, "\n" CP_KEY);
    return p ? p[1 + strlen(CP_KEY)] - '0' : -1;
}

/* Writes buf back with its "conv" line's path set to own, resealed with
 * the file's check line (FNV-1a 64 of what precedes it) when seal. */
static int cp_write(char *buf, int own, int seal) {
    char *p = strstr(buf, "\n" CP_KEY), *check = strstr(buf, "\ncheck ");
    uint64_t h = 0xCBF29CE484222325ull;
    FILE *f;
    size_t i;
    if (!p || !check) return 0;
    p[1 + strlen(CP_KEY)] = (char)('0' + own);
    if (seal) {
        for (i = 0; i < (size_t)(check + 1 - buf); i++) h = (h ^ (unsigned char)buf[i]) * 0x100000001B3ull;
        snprintf(check + 1, 32, "check %016llx\n", (unsigned long long)h);
    }
    if (!(f = fopen(cp_file, "wb"))) return 0;
    fputs(buf, f);
    return fclose(f) == 0;
}

static int check_pick(void) {
    static const char *const paths[3] = {"im2col + CLBlast", "implicit GEMM on own kernels", "3x3"};
    const char *name = "conv2d path timed at plan creation, stored, reused and forced by NNCL_GEMM";
    static char buf[1 << 20];
    int first, own, other;
    TH_CHECK(name, cp_read(buf, sizeof buf) == 0); /* a fresh cache */
    /* auto: timed once, stored, and the step runs the stored path */
    cp_timed[0] = '\0';
    TH_CHECK(name, cp_step(name, &first) == 0 && first >= 0);
    TH_CHECK(name, cp_read(buf, sizeof buf) > 0 && cp_stored(buf) == first);
    TH_CHECK(name, cp_timed_fastest(first)); /* the fastest of the paths timed */
    /* reused: a new context takes the stored line, even when edited */
    other = (first + 1) % 3;
    TH_CHECK(name, cp_write(buf, other, 1));
    TH_CHECK(name, cp_step(name, &own) == 0 && own == other);
    cp_read(buf, sizeof buf);
    TH_CHECK(name, cp_stored(buf) == other);
    /* a damaged file is ignored: timed again and stored sealed */
    TH_CHECK(name, cp_write(buf, first, 0));
    TH_CHECK(name, cp_step(name, &own) == 0 && own >= 0);
    cp_read(buf, sizeof buf);
    TH_CHECK(name, cp_stored(buf) == own);
    TH_CHECK(name, cp_write(buf, own, 1)); /* the seal it had (else this one changes the file) */
    /* forced either way, whatever is stored */
    setenv("NNCL_GEMM", "own", 1);
    TH_CHECK(name, cp_step(name, &own) == 0 && own == 1);
    setenv("NNCL_GEMM", "clblast", 1);
    TH_CHECK(name, cp_step(name, &own) == 0 && own == 0);
    unsetenv("NNCL_GEMM");
    setenv("NNCL_CONV_3X3", "1", 1);
    TH_CHECK(name, cp_step(name, &own) == 0 && own == 2);
    unsetenv("NNCL_CONV_3X3");
    setenv("NNCL_CONV_DIRECT", "1", 1); /* the former name */
    TH_CHECK(name, cp_step(name, &own) == 0 && own == 2);
    unsetenv("NNCL_CONV_DIRECT");
    th_pass("%s (auto took %s)", name, paths[first]);
    return 0;
}

int main(void) {
    const char *mode = getenv("NNCL_GEMM");
    strcpy(cp_dir, "/tmp/nncl-conv-pick-XXXXXX");
    if ((mode && strcmp(mode, "auto") != 0) || getenv("NNCL_CONV_3X3") || getenv("NNCL_CONV_DIRECT")) {
        th_skip("conv2d path timed at plan creation", "NNCL_GEMM or NNCL_CONV_3X3 forces a path");
        return th_exit_code();
    }
    if (!mkdtemp(cp_dir)) {
        th_fail("conv2d path timed at plan creation", "mkdtemp failed");
        return th_exit_code();
    }
    setenv("NNCL_CACHE_DIR", cp_dir, 1);
    check_pick();
    { /* the folder holds the choice file and the device's compiled programs */
        DIR *dir = opendir(cp_dir);
        struct dirent *e;
        char path[512];
        while (dir && (e = readdir(dir)) != NULL) {
            snprintf(path, sizeof path, "%s/%s", cp_dir, e->d_name);
            if (e->d_name[0] != '.') remove(path);
        }
        if (dir) closedir(dir);
        rmdir(cp_dir);
    }
    return th_exit_code();
}
