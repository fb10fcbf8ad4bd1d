/* train.h - what the training section's files share (bench/train.c:
 * the models, their data and steps; bench/train_profile.c: the per-kernel
 * profile, peak memory and the half-storage rows). */
#ifndef NNCL_BENCH_TRAIN_H
#define NNCL_BENCH_TRAIN_H
#include "bench.h"

/* The models trained: the Fashion-MNIST MLP, CNN and LSTM, two CIFAR-shaped
 * networks (VGG-style, and residual with batch norm; 3x32x32, batch 64),
 * examples/fashion_mnist_mobilenet's depthwise-separable CNN (batch 100) and
 * two GPTs (bench/train_gpt.c). Items are named by
 * train_items[kind][precision]. */
enum {
    TRAIN_MLP, TRAIN_CNN, TRAIN_LSTM, TRAIN_VGG, TRAIN_RESNET, TRAIN_MOBILENET, TRAIN_GPT, TRAIN_GPT_LARGE, TRAIN_MODELS
};
#define TRAIN_CIFAR_BATCH 64
extern const char *const train_items[TRAIN_MODELS][3];

typedef struct train_model {
    nncl_graph *g;
    nncl_node *x, *y, *logits, *loss;
    int batch;                 /* samples per step */
    int tokens;                /* tokens per sample (a GPT's context), 0 for the classifiers */
    nncl_optim_config optim;   /* Adam for the classifiers, nanoGPT's AdamW for the GPTs */
} train_model;

typedef struct train_data {
    float *x, *y;
    size_t n, xs, ys;          /* samples, floats per sample of x and of y */
    int real;
    nncl_dataset *ds;
} train_data;

/* Whether the bench trains model kind (--models; by default all, but the
 * large GPT, the CIFAR-shaped networks and the MobileNet only without
 * --quick). */
int train_wanted(const bench_opts *o, int kind);
/* Model kind on ctx: 0 when built. */
int train_build(nncl_context *ctx, const bench_opts *o, int kind, train_model *m);
/* The GPTs (bench/train_gpt.c): the graph, and n windows of random tokens. */
int train_gpt_build(nncl_context *ctx, int large, train_model *m);
int train_gpt_data(int large, int quick, train_data *td);
int train_gpt_batch(int large);
/* What training the model needs at the least, in floats, for batch B (its
 * formula into formula); MLP, CNN and LSTM only (negative for the others). */
double train_need_floats(int kind, int B, char *formula, size_t len);
/* Model kind's data: Fashion-MNIST where found (not with --quick), else
 * synthetic of the same shapes; random tokens for the GPTs. */
void train_data_load(const bench_opts *o, int kind, train_data *td);
void train_data_free(train_data *td);
/* One step on the next batch of the data. */
nncl_status train_step(const bench_opts *o, nncl_trainer *t, const train_model *m, const train_data *td,
                       nncl_step_info *info);
/* The bench's trainer options: the model's optimizer, batches up to
 * batch, the devices listed (n 0: all of the context), storage in prec. */
nncl_train_config train_options(const train_model *m, int batch, const int *devs, int n, nncl_precision prec);
/* Device d's detail (bench/train_profile.c): the fp16 and bf16 rows beside
 * fp32 and the profiles on fresh contexts; fp32_rate: its samples/s alone
 * (0 when unknown). */
void train_detail(const bench_opts *o, nncl_context *ctx, int d, int kind, const train_data *td, double fp32_rate);
/* --first-step MODEL (bench/first_step.c): this process's first training
 * step of the model, from a fresh context, split into where it went. */
int bench_first_step(const bench_opts *o, const char *model);
#endif
