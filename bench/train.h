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
    int real, dim, batch; /* dim: floats per sample; batch: the models' batch */
    nncl_dataset *ds;
} train_data;

/* The models, their items in fp32, fp16 and bf16 storage. */
enum { TRAIN_MLP, TRAIN_CNN, TRAIN_VGG, TRAIN_RESNET, TRAIN_MODELS };
#define TRAIN_CIFAR_BATCH 64
extern const char *const train_items[TRAIN_MODELS][3];
/* Model (TRAIN_MLP...) on ctx: 0 when built. */
int train_build(nncl_context *ctx, int model, train_model *m);
/* The batch the model trains at: --batch, 64 for the CIFAR-shaped ones. */
int train_batch(const bench_opts *o, int model);
/* What training the model needs at the least, in floats, for batch B (its
 * formula into formula); negative where the bench has no formula. */
double train_need_floats(int model, int B, char *formula, size_t len);
/* One step on the next batch of the data. */
nncl_status train_step(const bench_opts *o, nncl_trainer *t, const train_model *m, const train_data *td,
                       nncl_step_info *info);
/* The bench's trainer options: Adam, batches up to batch, the devices
 * listed (n 0: all of the context), storage in prec. */
nncl_train_config train_options(int batch, const int *devs, int n, nncl_precision prec);
/* Device d's detail (bench/train_profile.c): the fp16 and bf16 rows beside
 * fp32 and the profiles on fresh contexts; fp32_rate: its samples/s alone
 * (0 when unknown). */
void train_detail(const bench_opts *o, nncl_context *ctx, int d, int model, const train_data *td, double fp32_rate);
#endif
