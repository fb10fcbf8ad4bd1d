/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: any
 * bytes must give NNCL_OK or an error status with a message, never a crash,
 * leak or out-of-bounds access. Seeds in corpus/fuzz_safetensors/. */
#include "nncl.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nncl_safetensors *st = NULL;
    nncl_status s = nncl_safetensors_parse(data, size, "fuzz", &st);
    if (s == NNCL_OK) {
        /* Touch everything a caller could reach. */
        int i, n = nncl_safetensors_count(st);
        volatile float sink = 0;
        for (i = 0; i < n; i++) {
            nncl_safetensors_entry e;
            size_t k;
            if (nncl_safetensors_get(st, i, &e) != NNCL_OK) abort();
            if (nncl_safetensors_find(st, e.name) != i) abort();
            for (k = 0; k < e.numel; k++) sink += e.data[k];
        }
        for (i = 0; i < nncl_safetensors_meta_count(st); i++) {
            const char *key, *value;
            if (nncl_safetensors_meta_at(st, i, &key, &value) != NNCL_OK) abort();
            if (nncl_safetensors_meta(st, key) != value) abort();
        }
        (void)sink;
        nncl_safetensors_free(st);
    } else if (st != NULL || nncl_last_error(NULL)[0] == 0) {
        abort();
    }
    return 0;
}
