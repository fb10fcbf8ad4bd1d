/* trainer.h - the trainer's state, shared by trainer.c (creation),
 * trainer_shard.c (the split of a batch), trainer_step.c (steps),
 * trainer_io.c (parameters, files) and the tests that inject a device
 * failure. */
#ifndef NNCL_TRAINER_H
#define NNCL_TRAINER_H
#include "train/plan.h"

struct nncl_trainer {
    nncl_context *ctx;
    nncl_graph *graph;
    nncl_node *loss;
    nncl_train_config cfg;
    int nd;                    /* devices given at creation */
    int *device;               /* context device index of each */
    int *alive;                /* 0 once a device has failed */
    nncl__plan **plan;
    size_t opt_floats;         /* floats of optimizer state per device (in each plan's training buffers) */
    double *fixed, *per_sample; /* per device: seconds a pass costs, and each sample on top */
    int *shard;                /* samples per device in the current step */
    float **gbuf, **sbuf;      /* per device: gradients and running statistics read back */
    float *gavg, *savg;        /* their weighted averages */
    float *lossv;              /* per device: loss of its shard */
    float *sumsq;              /* per device: the step's gradient's sum of squares, read back (solo) or the host's */
    double *chunk_ss;          /* the host average's sum of squares, per chunk */
    double *busy;              /* per device: seconds of the last step's compute */
    double *waited;            /* per device: of those, seconds spent waiting for the others */
    nncl_status *dev_status;
    char *dev_msg;             /* per device, NNCL_MSG_MAX each: the message of its last failure */
    int64_t step;              /* optimizer steps applied */
    int64_t tracked;           /* training batches seen (batch norm's num_batches_tracked) */
    int steps_since_balance;
    int fixed_shares;          /* the split was given: no measuring */
    int fail_device, fail_step; /* tests: inject a failure (device index or -2: all, step), -1: none */
    nncl_status fail_status;   /* tests: the injected failure's status (0: NNCL_ERR_DEVICE) */
    int fail_in_update;        /* tests: inject it in the optimizer update, not the pass */
    int fail_in_backward;      /* tests: a pipelined trainer's failure in the stage's backward, not its forward */
    struct nncl__pipe *pipe;   /* pipeline parallelism (pipeline.h); NULL: data parallel */
    char why[128];             /* why the devices work as they do (nncl_step_info.arrangement_why) */
    int left_out;              /* devices the calibration left out (alive 0, not failed) */
    double pass_seconds;       /* the calibration's time of a pass of max_batch as arranged */
    /* Overlap: for every backward position the ranges of the gradient
     * buffer that are final after it (read on the plans' transfer queues). */
    struct nncl__bucket *buckets;
    int n_buckets;
    struct nncl__overlap_ctx *octx;
    struct nncl__syncbn *syncbn; /* NULL: one device or no batch norm */
    int *peer_failed;          /* per device: stopped because another device failed */
    nncl__crew *crew;          /* the device threads: one member per device */
    /* Read back after every training forward (fit's training accuracy):
     * node watch's value of the whole batch into watch_dst; NULL: none. */
    const nncl_node *watch;
    float *watch_dst;
    /* Dynamic loss scaling (GradScaler): on, the current scale, and clean
     * steps since it last changed (its growth tracker). */
    int scaling;
    float scale;
    int growth;
    /* Calls in flight that nncl_trainer_free waits for, and whether a free
     * has begun: both under the context's lock (see NNCL__TRAINER_CALL). */
    int users;
    int closing;
};

/* What each device's plan of a trainer with config cfg is made for. */
nncl_status nncl__trainer_plan_opts(nncl_graph *g, const nncl_train_config *cfg, nncl__plan_opts *o);

/* Overlapped gradient read-back (overlap.c): set up once, switched on for
 * exchange steps and off for solo and calibration passes. */
nncl_status nncl__overlap_setup(nncl_trainer *t);
void nncl__overlap_enable(nncl_trainer *t, int on);
void nncl__overlap_free(nncl_trainer *t);

/* Synchronised batch norm (syncbn.c): set up once for several devices and
 * batch norms; enabled for exchange steps; begin before each parallel pass;
 * abort releases the threads waiting at a batch norm when a device fails;
 * running moves the running statistics after the exchange. */
nncl_status nncl__syncbn_setup(nncl_trainer *t);
void nncl__syncbn_enable(nncl_trainer *t, int on);
void nncl__syncbn_begin(nncl_trainer *t);
void nncl__syncbn_abort(nncl_trainer *t);
void nncl__syncbn_running(nncl_trainer *t, float *state, int batch);
void nncl__syncbn_free(nncl_trainer *t);

/* Runs job(t, device, arg) for every device of t at once on the trainer's
 * crew, one thread each, and leaves each result in t->dev_status[device]
 * (and a failure's message in nncl__trainer_dev_msg). */
typedef nncl_status (*nncl__device_job)(nncl_trainer *t, int device, void *arg);
void nncl__trainer_each_device(nncl_trainer *t, nncl__device_job job, void *arg);

/* Host buffers of the exchange are allocated in whole chunks of
 * NNCL__TRAINER_CHUNK floats (at least one float more than n), zeros past n. */
enum { NNCL__TRAINER_CHUNK = 4096 };
#define nncl__trainer_chunks(n) ((size_t)(n) / NNCL__TRAINER_CHUNK + 1)

/* What a pass of every device (nncl__trainer_pass_job) is for. */
typedef enum nncl__pass_mode {
    NNCL__PASS_STEP,            /* a step: every live device its shard of the batch */
    NNCL__PASS_CALIBRATE_EACH,  /* calibration: every device a shard of t->shard[i] alone (solo) */
    NNCL__PASS_CALIBRATE_SPLIT  /* calibration: the shards as split, devices without one idle, the gradients
                                 * read back unless solo */
} nncl__pass_mode;

/* What the threads of a pass share. */
typedef struct nncl__trainer_pass {
    const nncl_feed *feeds;
    int n_feeds, batch, solo;
    nncl__pass_mode mode;
    int snapshot; /* save the running statistics first (a step's first pass) */
} nncl__trainer_pass;

/* Device i's part of a pass (trainer_step.c), a crew job; arg: the pass. */
nncl_status nncl__trainer_pass_job(nncl_trainer *t, int i, void *arg);

/* Shards (trainer_shard.c): split sets t->shard for batch samples over the
 * live devices by their cost models; calibrate measures the models at
 * creation (the caller restores the running statistics); rebalance moves
 * them towards the last step's times. */
void nncl__trainer_split(nncl_trainer *t, int batch);
/* The seconds of a step's exchange after a pass of the shards set (their
 * gradients read back into gbuf, sbuf): the host's average, and one
 * device's copy of it (the devices take theirs at once). Overwrites that
 * device's gradients and running statistics: for calibration only. */
nncl_status nncl__trainer_exchange_time(nncl_trainer *t, int batch, double *sec);
nncl_status nncl__trainer_calibrate(nncl_trainer *t);
void nncl__trainer_rebalance(nncl_trainer *t);

/* The message device i's thread recorded with its last failure. */
#define nncl__trainer_dev_msg(t, i) ((t)->dev_msg + (size_t)(i)*NNCL_MSG_MAX)

/* Checks every feed before any device works: a node of t's graph, an input,
 * fed once, with data the ops reading it accept (class labels, embedding
 * indices: their check_feed); batch in 1..max_batch. fn names the caller. */
nncl_status nncl__trainer_check_feeds(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, const char *fn);
/* After a pass of every device: the first device whose status is not OK and
 * not a device fault (an argument, shape or data error), or -1. Such an
 * error is the caller's and retires no device. */
int nncl__trainer_caller_error(const nncl_trainer *t);

/* Writes host parameters (n_params floats) and running statistics to every
 * live device. */
nncl_status nncl__trainer_upload(nncl_trainer *t, const float *params, const float *state);
/* Reads parameters and running statistics from the first live device. */
nncl_status nncl__trainer_download(nncl_trainer *t, float *params, float *state);
/* The first live device's index among t's devices, or -1. */
int nncl__trainer_first_alive(const nncl_trainer *t);
/* A public call on t that nncl_trainer_free waits for: hold registers it
 * (NNCL_ERR_STATE naming fn once a free has begun), still says whether it
 * may go on once it has its turn on the context, release ends it. */
nncl_status nncl__trainer_hold(nncl_trainer *t, const char *fn);
nncl_status nncl__trainer_still(nncl_trainer *t, const char *fn);
void nncl__trainer_release(nncl_trainer *t);
/* st = call as such a call on t, under the context's use lock (call
 * itself refuses a NULL t). */
#define NNCL__TRAINER_CALL(t, fn, st, call)                                     \
    do {                                                                        \
        nncl_trainer *nncl_tc_ = (t);                                           \
        if (!nncl_tc_) st = (call);                                             \
        else if ((st = nncl__trainer_hold(nncl_tc_, fn)) == NNCL_OK) {          \
            nncl__enter(nncl_tc_->ctx);                                         \
            if ((st = nncl__trainer_still(nncl_tc_, fn)) == NNCL_OK) st = (call); \
            nncl__leave(nncl_tc_->ctx);                                         \
            nncl__trainer_release(nncl_tc_);                                    \
        }                                                                       \
    } while (0)
#endif
