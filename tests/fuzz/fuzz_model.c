/* fuzz_model.c - libFuzzer target for model descriptions: any bytes that
 * parse as safetensors go through the model reader without a context (the
 * nncl.graph rebuild, preprocessing arrays and class names), which must
 * give NNCL_OK or an error with a message, never a crash, leak or
 * out-of-bounds access. Seeds in corpus/fuzz_model/. */
#include "nncl.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nncl_safetensors *st = NULL;
    nncl_model *m = NULL;
    nncl_status s;
    if (nncl_safetensors_parse(data, size, "fuzz", &st) != NNCL_OK) return 0;
    s = nncl_model_from_safetensors(NULL, st, 0, &m);
    if (s == NNCL_OK) {
        int k, n = nncl_model_classes(m), shape[4];
        volatile size_t sink = nncl_model_features(m) + (size_t)nncl_model_input_shape(m, shape);
        for (k = 0; k < n; k++) {
            const char *name = nncl_model_class_name(m, k);
            if (name) sink += strlen(name);
        }
        (void)sink;
        nncl_model_free(m);
    } else if (m != NULL || nncl_last_error(NULL)[0] == 0) {
        abort();
    }
    nncl_safetensors_free(st);
    return 0;
}
