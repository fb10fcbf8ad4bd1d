/* pipeline.h - pipeline parallelism (nncl_train_config.pipeline): the graph
 * cut into contiguous stages, one subgraph and plan per device
 * (pipeline.c), micro-batches streamed through them (pipeline_step.c). The
 * trainer's plan[s] is stage s's plan on device[s]. */
#ifndef NNCL_PIPELINE_H
#define NNCL_PIPELINE_H
#include "train/trainer.h"
#include <pthread.h>

/* Floats [full, full + n) of the trainer's graph are [own, own + n) of a
 * stage's subgraph. */
typedef struct nncl__span {
    size_t full, own, n;
} nncl__span;

typedef struct nncl__stage {
    nncl_graph *g;             /* the subgraph: copies of its nodes, its leaves, the cut input */
    nncl_node *out;            /* the node ending it (the next stage's input), or the loss */
    nncl_node *in;             /* the input holding the previous stage's output; NULL: the first stage */
    int last;                  /* id in the trainer's graph of its last node */
    nncl__span *params, *state; /* where its parameters and running statistics lie in the graph's */
    int n_params, n_state;
    nncl_node **inputs;        /* the graph's inputs it reads: [2k] the graph's node, [2k+1] its copy */
    int n_inputs;
    size_t opt_floats;
    /* Its plan's gradients summed over the micro-batches (each weighted by
     * its share of the batch through the loss's gradient), their sum of
     * squares read back. */
    float sumsq_dev;
    /* Its plan's arenas (nncl__plan_arenas) and the micro-batch whose
     * forward each holds this step (-1: none): a backward finding its own
     * needs no recompute. */
    int n_arenas, *holds;
    int recomputed;            /* forwards run again in the last step */
    float *saved;              /* running statistics kept across a recomputed forward */
    double busy, idle, xfer;   /* the last step's seconds: working (xfer included), waiting, copying at the cuts */
} nncl__stage;

typedef struct nncl__pipe {
    int k, m;                  /* stages, micro-batches asked for */
    int mb;                    /* samples of the largest micro-batch (the plans' batch) */
    nncl__stage *st;
    float **act, **grad;       /* per cut: slots[cut] slots of mb samples of the cut's value, of its gradient */
    int *slots;                /* per cut: m (GPipe) or min(m, k - cut) (1F1B) */
    /* Per cut, where act and grad live when pinned: a CL_MEM_ALLOC_HOST_PTR
     * buffer of the stage that writes them (cut c's values: stage c, its
     * gradients: stage c + 1), mapped for the trainer's life; NULL: host
     * memory of nncl__calloc. */
    cl_mem *pin_act, *pin_grad;
    /* [cut * m + part]: the read that fills the slot, not yet waited for
     * (the next or previous stage waits before it uses the slot); NULL:
     * none pending. */
    cl_event *act_ev, *grad_ev;
    unsigned char *act_ready, *grad_ready; /* [cut * m + part] */
    int abort;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int locks;                 /* lock and cond initialised */
    float *lossv;              /* the loss of each micro-batch */
    float *dloss;              /* the loss's gradient for each: the loss scale times its share of the batch */
    /* the step's batch: parts, their offsets and sizes */
    const nncl_feed *feeds;
    int n_feeds, batch, parts, *off, *len;
} nncl__pipe;

/* Cuts t->graph and makes every stage's plan and training buffers on
 * t->device[] (reordered to stage order), initialised from the graph's
 * seed; refuses a configuration it cannot honour, with a message. */
nncl_status nncl__pipe_create(nncl_trainer *t);
void nncl__pipe_free(nncl_trainer *t);
/* The least seconds of reps passes (forward and backward, no update) of
 * max_batch zeros through the pipeline, after one untimed; the running
 * statistics are put back. */
nncl_status nncl__pipe_time(nncl_trainer *t, int reps, double *sec);
/* Cut c's slots of values (grad 0: pinned for stage c, which reads them
 * from its device) or of gradients (1: for stage c + 1), bytes each, into
 * t->pipe's act[c] or grad[c]; host memory where the driver cannot pin
 * (said in the log). slots_free releases every cut's. */
nncl_status nncl__pipe_slots(nncl_trainer *t, int c, int grad, size_t bytes);
void nncl__pipe_slots_free(nncl_trainer *t);
/* Releases the events of reads no stage waited for (a step that failed). */
void nncl__pipe_events_release(nncl__pipe *pp);
/* nncl_trainer_step of a pipelined trainer. */
nncl_status nncl__pipe_step(nncl_trainer *t, const nncl_feed *feeds, int n_feeds, int batch, nncl_step_info *info);
/* The graph's parameters (n_params floats), running statistics (n_state)
 * or optimizer state (opt_floats, slot-major over n_trainable) gathered
 * from the stages (put 0) or scattered to them (1); NULL: not that one. */
nncl_status nncl__pipe_params(nncl_trainer *t, float *params, float *state, int put);
nncl_status nncl__pipe_opt(nncl_trainer *t, float *opt, int put);
#endif
