/* fuzz_choice.c - libFuzzer target for the reader of stored kernel choices
 * (src/gemm/choice_file.c): nncl__gemm_choices_parse() on arbitrary bytes
 * for a device of three variants, checking that what a success keeps names
 * those variants (or CLBlast) and paths that exist, and that nothing is
 * read past the input. Built by `make fuzz`, replayed by test_fuzz_corpus. */
#include "gemm/gemm.h"
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ID "platform fuzz\ndevice fuzz\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct { int kind, mr, nr; const char *name; } vs[] = {
        {NNCL__GEMM_PACKED, 6, 16, "packed6x16v8"}, {NNCL__GEMM_DIRECT, 4, 32, "direct4x32v8"},
        {NNCL__GEMM_DOT, 4, 6, "dot4x6v8"}};
    nncl__gemm_state *s = (nncl__gemm_state *)calloc(1, sizeof *s);
    char *buf = (char *)malloc(size + 1);
    const char *why = NULL;
    int i, ok;
    if (!s || !buf) abort();
    for (i = 0; i < 3; i++) {
        s->all[i].kind = vs[i].kind;
        s->all[i].mr = vs[i].mr;
        s->all[i].nr = vs[i].nr;
        s->all[i].vw = 8;
        s->all[i].index = i;
        strcpy(s->all[i].name, vs[i].name);
    }
    s->n_all = s->n_timed = 3;
    if (size) memcpy(buf, data, size);
    ok = nncl__gemm_choices_parse(s, FUZZ_ID, buf, size, &why);
    if (!ok && !why) abort();
    if (ok) {
        for (i = 0; i < s->n_choices; i++) {
            const nncl__gemm_choice *c = &s->choices[i];
            if (c->best < -1 || c->best >= s->n_all || c->best_own < 0 || c->best_own >= s->n_all || (c->ta | c->tb) & ~1)
                abort();
        }
        for (i = 0; i < s->n_convs; i++)
            if (s->convs[i].path < 0 || s->convs[i].path > 2) abort();
    }
    free(s->choices);
    free(s->convs);
    free(s);
    free(buf);
    return 0;
}
