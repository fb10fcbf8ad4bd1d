/* train.h - what the training section's files share (bench/train.c:
 * the models, their data and steps; bench/train_profile.c: the per-kernel
 * profile, peak memory and the half-storage rows). */
#ifndef NNCL_BENCH_TRAIN_H
#define NNCL_BENCH_TRAIN_H
#include "bench.h"

typedef struct train_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
} train_model;

typedef struct train_data {
    float *x, *y;
    size_t n;
    int real;
    nncl_dataset *ds;
} train_data;

/* The models, by index (the `cnn` argument below): the MLP, the CNN, the LSTM. */
enum { TRAIN_MLP, TRAIN_CNN, TRAIN_LSTM, TRAIN_MODELS };
/* The model's item name in the results: "mlp", "cnn", "lstm". */
const char *train_model_name(int model);
/* Model cnn on ctx: 0 when built. */
int train_build(nncl_context *ctx, int cnn, train_model *m);
/* What training the model needs at the least, in floats, for batch B (its
 * formula into formula). */
double train_need_floats(int cnn, int B, char *formula, size_t len);
/* One step on the next batch of the data. */
nncl_status train_step(const bench_opts *o, nncl_trainer *t, const train_model *m, const train_data *td,
                       nncl_step_info *info);
/* The bench's trainer options: Adam, batches up to batch, the devices
 * listed (n 0: all of the context), storage in prec. */
nncl_train_config train_options(int batch, const int *devs, int n, nncl_precision prec);
/* Device d's detail (bench/train_profile.c): the fp16 and bf16 rows beside
 * fp32 and the profiles on fresh contexts; fp32_rate: its samples/s alone
 * (0 when unknown). */
void train_detail(const bench_opts *o, nncl_context *ctx, int d, int cnn, const train_data *td, double fp32_rate);
#endif
