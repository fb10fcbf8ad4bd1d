/* fuzz_csv.c - libFuzzer target for the CSV reader: the first byte picks
 * the options (delimiter, label column, label mode, a fixed class list),
 * the rest is the text. A parsed table must be consistent and become a
 * dataset; a failure must leave the table empty and say why. */
#include "nncl.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char delims[4] = {',', ';', '\t', ' '};
    static const char *const classes[3] = {"a", "b", "c"};
    nncl_csv_options o = nncl_csv_options_default();
    nncl_csv t;
    nncl_status st;
    unsigned sel = size ? data[0] : 0;
    const char *text = size ? (const char *)data + 1 : (const char *)data;
    size_t len = size ? size - 1 : 0, i;
    o.delimiter = delims[sel & 3];
    o.label_mode = (int)((sel >> 2) & 3) % 3;
    switch ((sel >> 4) & 3) {
    case 1: o.label_index = 0; break;
    case 2: o.label = "y"; break;
    case 3: o.label_index = 1; break;
    }
    if ((sel & 0xC0) == 0xC0 && o.label_mode != NNCL_CSV_LABELS_NUMERIC) {
        o.classes = classes;
        o.n_classes = 3;
    }
    st = nncl_csv_parse(text, len, "fuzz.csv", &o, &t);
    if (st == NNCL_OK) {
        nncl_dataset *ds = NULL;
        float *mean, *sd;
        if (t.rows < 1 || t.cols < 1 || !t.features || !t.labels || !t.label_name || !t.feature_names) abort();
        for (i = 0; i < t.cols; i++)
            if (!t.feature_names[i]) abort();
        for (i = 0; i < t.rows * t.cols; i++)
            if (!isfinite(t.features[i])) abort();
        for (i = 0; i < t.rows; i++) {
            float v = t.labels[i];
            if (!isfinite(v)) abort();
            if (t.n_classes > 0 && (v < 0 || v >= (float)t.n_classes || v != floorf(v))) abort();
        }
        if (t.class_names)
            for (i = 0; i < (size_t)t.n_classes; i++)
                if (!t.class_names[i]) abort();
        if (nncl_dataset_from_csv(&t, &ds) != NNCL_OK) abort();
        mean = (float *)malloc(t.cols * sizeof(float));
        sd = (float *)malloc(t.cols * sizeof(float));
        if (mean && sd && nncl_dataset_stats(ds, mean, sd) == NNCL_OK) nncl_dataset_standardize(ds, mean, sd);
        free(mean);
        free(sd);
        nncl_dataset_free(ds);
    } else {
        if (t.rows || t.features || t.labels || t.class_names || t.feature_names) abort();
        if (!nncl_last_error(NULL)[0]) abort();
    }
    nncl_csv_free(&t);
    return 0;
}
