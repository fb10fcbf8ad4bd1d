/* fuzz_idx.c - libFuzzer target for the IDX reader: nncl_idx_parse() on
 * arbitrary bytes (plain or gzip), checking that a success is consistent
 * and a failure leaves nothing behind; 1-D results also go through the
 * dataset label checks. Built by `make fuzz`, replayed by test_fuzz_corpus. */
#include "nncl.h"
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nncl_idx a;
    nncl_status st = nncl_idx_parse(data, size, "fuzz.idx", &a);
    if (st == NNCL_OK) {
        size_t count = 1, i;
        volatile float sink = 0;
        int k;
        if (!a.data || a.ndim < 1 || a.ndim > NNCL_IDX_MAX_DIMS) abort();
        for (k = 0; k < a.ndim; k++) count *= a.dims[k];
        if (count != a.count) abort();
        /* every element readable: ASan catches a short allocation */
        for (i = 0; i < a.count; i++) sink = sink + a.data[i];
        if (a.ndim == 1) {
            nncl_dataset *ds = NULL;
            if (nncl_dataset_from_idx(&a, &a, &ds) == NNCL_OK &&
                (nncl_dataset_size(ds) != a.count || nncl_dataset_classes(ds) < 1))
                abort();
            nncl_dataset_free(ds);
        }
    } else {
        if (a.data || a.count || a.ndim) abort();
        if (!nncl_last_error(NULL)[0]) abort();
    }
    nncl_idx_free(&a);
    return 0;
}
