/* io.h - what the file and data code (src/io/) shares and gives the
 * layers above: growing text, a graph's nncl.graph text, and a trainer's
 * model and checkpoint files. */
#ifndef NNCL_IO_H
#define NNCL_IO_H
#include "train/trainer.h"

/* Growing text (graph_text.c): NUL-terminated s of n bytes; failed set
 * (and s kept) when memory ran out. Free s with NNCL_FREE. */
typedef struct nncl__buf {
    char *s;
    size_t n, cap;
    int failed;
} nncl__buf;
void nncl__buf_put(nncl__buf *b, const char *fmt, ...) NNCL_PRINTF(2, 3);
/* A double as "%.17g", a float as nncl__fmt_float writes it, with '.'
 * whatever the locale: each reads back exactly. */
void nncl__buf_num(nncl__buf *b, double x);
void nncl__buf_float(nncl__buf *b, float x);

/* Saves (trainer_io.c) with extra metadata pairs (NULL-terminated) and
 * tensors added after the model's own; checkpoint adds the optimizer.
 * dtype: the weights' and statistics' dtype in a model file (a checkpoint
 * keeps fp32). */
nncl_status nncl__trainer_save_ex(nncl_trainer *t, const char *path, int checkpoint, nncl_precision dtype,
                                  const char *const *extra_meta, const nncl_safetensors_entry *extra, int n_extra);
/* Loads parameters (and, for a checkpoint, optimizer state and step) from a
 * parsed file; a bad file changes nothing. */
nncl_status nncl__trainer_load_from(nncl_trainer *t, const nncl_safetensors *st, const char *source, int checkpoint);
/* The nncl.graph text of a graph (model.c), or NULL when it cannot be
 * written; free with NNCL_FREE. */
char *nncl__graph_describe(const nncl_graph *g);
/* Whether file st holds every tensor a trainer of g loads (parameters and
 * running statistics, in their shapes): checked before anything of the
 * size the graph declares is allocated. */
nncl_status nncl__file_check_tensors(nncl_context *ctx, const nncl_graph *g, const nncl_safetensors *st);

#endif /* NNCL_IO_H */
