/* trainer.h - the trainer's state, shared by trainer.c (steps, data
 * parallelism), trainer_io.c (parameters, files) and the tests that inject
 * a device failure. */
#ifndef NNCL_TRAINER_H
#define NNCL_TRAINER_H
#include "plan.h"

struct nncl_trainer {
    nncl_context *ctx;
    nncl_graph *graph;
    nncl_node *loss;
    nncl_train_config cfg;
    int nd;                    /* devices given at creation */
    int *device;               /* context device index of each */
    int *alive;                /* 0 once a device has failed */
    nncl__plan **plan;
    cl_mem *opt_state;         /* optimizer state, per device */
    cl_mem *scratch;           /* optimizer scratch (clipping), per device */
    size_t opt_floats;         /* floats of optimizer state per device */
    double *rate;              /* measured samples/s per device */
    int *shard;                /* samples per device in the current step */
    float **gbuf, **sbuf;      /* per device: gradients and running statistics read back */
    float *gavg, *savg;        /* their weighted averages */
    float *lossv;              /* per device: loss of its shard */
    float sumsq;               /* one device: the gradient's sum of squares */
    double *busy;              /* per device: seconds of the last step's compute */
    nncl_status *dev_status;
    int64_t step;              /* optimizer steps applied */
    int64_t tracked;           /* training batches seen (batch norm's num_batches_tracked) */
    int steps_since_balance;
    int fail_device, fail_step; /* tests: inject a failure (device index, step), -1: none */
    /* Overlap: per device a transfer queue, and for every backward position
     * the ranges of the gradient buffer that are final after it. */
    cl_command_queue *xfer;
    struct nncl__bucket *buckets;
    int n_buckets;
    struct nncl__overlap_ctx *octx;
};

/* Overlapped gradient read-back (overlap.c): set up once, switched on for
 * exchange steps and off for solo and calibration passes. */
nncl_status nncl__overlap_setup(nncl_trainer *t);
void nncl__overlap_enable(nncl_trainer *t, int on);
void nncl__overlap_free(nncl_trainer *t);

/* Writes host parameters (n_params floats) and running statistics to every
 * live device. */
nncl_status nncl__trainer_upload(nncl_trainer *t, const float *params, const float *state);
/* Reads parameters and running statistics from the first live device. */
nncl_status nncl__trainer_download(nncl_trainer *t, float *params, float *state);
/* The first live device's index among t's devices, or -1. */
int nncl__trainer_first_alive(const nncl_trainer *t);
#endif
