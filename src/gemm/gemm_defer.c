/* gemm_defer.c - a plan's own GEMM variants as one program: while a plan
 * resolves its kernels (nncl__gemm_defer), the fp32 variants it asks for
 * are recorded; at its end those not yet built are built as one program of
 * their instances (cl/gemm.cl once per variant, its functions named with
 * the variant's suffix), since a CPU driver pays each program's build and
 * cache load as much again as its source. */
#include "gemm/gemm.h"
#include <stdlib.h>
#include <string.h>

/* Whether variant v can be an instance of a program of several: its
 * options past -cl-mad-enable (the program's) are all -D (own_variant). */
#define OWN_PROGRAM_OPTIONS "-cl-mad-enable"
static int own_instance(const nncl__gemm_variant *v) {
    const char *o = v->options + strlen(OWN_PROGRAM_OPTIONS);
    if (strncmp(v->options, OWN_PROGRAM_OPTIONS, strlen(OWN_PROGRAM_OPTIONS)) != 0) return 0;
    while (*o == ' ') {
        o++;
        if (strncmp(o, "-D", 2) != 0) return 0;
        o += strcspn(o, " ");
    }
    return *o == 0;
}

nncl_status nncl__gemm_defer(nncl_context *ctx, nncl_device *dev, int on) {
    nncl__gemm_state *s = NULL;
    const char *env = getenv("NNCL_GEMM_ONE_PROGRAM"), *defs[NNCL__GEMM_MAX_VARIANTS], *sfx[NNCL__GEMM_MAX_VARIANTS];
    int i, n = 0;
    unsigned want;
    nncl_program *p = NULL;
    NNCL_TRY(nncl__gemm_state_get(ctx, dev, &s));
    if (on) {
        s->defer++;
        return NNCL_OK;
    }
    if (s->defer > 0) s->defer--;
    if (s->defer) return NNCL_OK;
    want = s->pending;
    s->pending = 0;
    for (i = 0; i < s->n_all; i++)
        if (want >> i & 1 && !s->kernels[i][NNCL__GEMM_K_PRODUCT].kernel && !s->inst[i] && own_instance(&s->all[i])) {
            defs[n] = s->all[i].options + strlen(OWN_PROGRAM_OPTIONS);
            sfx[n++] = s->all[i].name;
        }
    if (n >= 2 && !(env && !strcmp(env, "0"))) { /* one alone is built as always (its program shared by any plan) */
        NNCL_TRY(nncl__program_instances(ctx, dev, "gemm", OWN_PROGRAM_OPTIONS, n, defs, sfx, &p));
        for (i = 0; i < s->n_all; i++)
            if (want >> i & 1 && !s->kernels[i][NNCL__GEMM_K_PRODUCT].kernel && !s->inst[i] && own_instance(&s->all[i]))
                s->inst[i] = p;
    }
    for (i = 0; i < s->n_all; i++)
        if (want >> i & 1) NNCL_TRY(nncl__gemm_own_resolve_kernels(ctx, dev, &s->all[i]));
    return NNCL_OK;
}
#undef OWN_PROGRAM_OPTIONS
