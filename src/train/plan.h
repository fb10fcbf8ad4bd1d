/* plan.h - a graph compiled for one device: flat parameter, gradient and
 * running-statistics buffers, one activation arena whose blocks are reused
 * where lifetimes allow, and the forward/backward schedules (plan.c); the
 * training buffers and the host's exchange with every buffer
 * (plan_exchange.c). The trainer holds one plan per device and reaches its
 * device memory only through these functions; nothing here assumes one
 * device per process. */
#ifndef NNCL_PLAN_H
#define NNCL_PLAN_H
#include "ops/ops.h"

typedef struct nncl__plan {
    nncl_context *ctx;
    nncl_graph *graph;
    nncl_node *loss;             /* may be NULL: an inference-only plan */
    int device;
    int max_batch;
    nncl__exec x;
    int *fwd, n_fwd;             /* node ids run forward, in order */
    int *bwd, n_bwd;             /* node ids run backward, in order */
    size_t arena_floats, gemm_temp_bytes;
    cl_mem arena;
    uint64_t bytes;              /* device memory of the graph's buffers (the training buffers apart) */
    float seed;                  /* the loss's gradient backward starts from: 1, or the loss scale */
    /* Half storage (x.store): the arena holds fp16/bf16 elements
     * (arena_floats of them); fp32 blocks (losses, labels) go to arena32;
     * samples fed to a half input are uploaded to the start of the GEMM
     * temp (x.gemm_temp, at least stage_floats) and converted: a feed comes
     * before the products on the one in-order queue. */
    cl_mem arena32;
    size_t arena32_floats, stage_floats;
    nncl__kslot store_k;
    /* Training buffers (nncl__plan_train): the optimizer's state and
     * scratch, and the running statistics saved before a step. */
    cl_mem opt, scratch, shadow;
    size_t opt_floats, scratch_floats;
    cl_command_queue xfer;       /* second queue for reads while backward runs, or NULL */
    /* Called after the i-th backward op is queued (the trainer starts
     * reading finished gradients from there); NULL: none. */
    nncl_status (*after_backward)(void *user, int i);
    void *after_user;
} nncl__plan;

nncl_status nncl__plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                              nncl__plan **out);
/* The same with activations stored in precision store (nncl_precision):
 * fp16 or bf16 need nncl__plan_check_store to pass. */
nncl_status nncl__plan_create_store(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                                    int store, nncl__plan **out);
/* A pipeline stage's plan (fp32): out_node, any shape, takes the place of
 * the loss; its gradient comes from the next stage
 * (nncl__plan_backward_from), and an input marked needs_grad keeps its
 * gradient for the previous stage. */
nncl_status nncl__plan_create_stage(nncl_context *ctx, nncl_graph *g, nncl_node *out_node, int device, int max_batch,
                                    nncl__plan **out);
/* Whether every op training g to loss runs with half storage:
 * NNCL_ERR_UNSUPPORTED naming the first op that does not. */
nncl_status nncl__plan_check_store(nncl_context *ctx, const nncl_graph *g, const nncl_node *loss, int store);
/* Half storage: queues the conversion of the fp32 parameters into their
 * working copy (after every change to them); nothing in fp32. */
nncl_status nncl__plan_sync_params(nncl__plan *p);
/* Whether v lies in storage of the half type (1) or fp32 (0). */
int nncl__plan_view_half(const nncl__plan *p, nncl__view v);
/* Blocking read of count elements at v into dst as floats, converted from
 * the storage type where v is half. */
nncl_status nncl__plan_read_view(nncl__plan *p, nncl__view v, float *dst, size_t count);
void nncl__plan_free(nncl__plan *p);
/* Non-blocking upload of batch samples of an input node; the host array must
 * stay valid until the device's queue has passed it (the step's sync). */
nncl_status nncl__plan_feed(nncl__plan *p, const nncl_node *input, const float *data, int batch);
/* Queues the forward pass (and with training, the backward pass) on batch
 * samples; waits for nothing. */
nncl_status nncl__plan_forward(nncl__plan *p, int batch, int training);
nncl_status nncl__plan_backward(nncl__plan *p);
/* Backward of a stage plan from the gradient of its output node (batch
 * samples at grad, host memory valid until the queue has passed it). */
nncl_status nncl__plan_backward_from(nncl__plan *p, const float *grad, int batch);
/* Forward up to and including node last: its value is then intact (no
 * later op has reused its memory). */
nncl_status nncl__plan_forward_to(nncl__plan *p, int batch, int training, const nncl_node *last);
/* Non-blocking read of a node's value (batch samples) into host memory. */
nncl_status nncl__plan_read(nncl__plan *p, const nncl_node *n, float *dst, int batch, cl_event *done);

/* ------------------------------------------------------------- exchange (plan_exchange.c) */

/* The plan's flat device buffers the host exchanges with. */
typedef enum nncl__pbuf {
    NNCL__PB_PARAMS,  /* n_params floats, trainable first */
    NNCL__PB_GRADS,   /* n_trainable floats */
    NNCL__PB_STATE,   /* n_state floats: running statistics */
    NNCL__PB_SHADOW,  /* n_state floats: the statistics saved before a step (training buffer) */
    NNCL__PB_OPT,     /* the optimizer's state (training buffer) */
    NNCL__PB_SCRATCH  /* the optimizer's scratch (training buffer) */
} nncl__pbuf;

/* Adds the training buffers: opt_floats of optimizer state (zeroed),
 * scratch_floats of scratch and a shadow of the running statistics; zeroes
 * the gradients. */
nncl_status nncl__plan_train(nncl__plan *p, size_t opt_floats, size_t scratch_floats);
/* Floats [off, off + count) of buffer b from or to host memory; blocking,
 * or (wait 0) queued: the host memory must then stay valid until the queue
 * has passed it (nncl__plan_finish). A range outside the buffer is an
 * NNCL_ERR_STATE. */
nncl_status nncl__plan_get(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, float *dst, int wait);
nncl_status nncl__plan_put(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, const float *src, int wait);
/* Queues a copy of the whole of buffer from into buffer to (equal sizes). */
nncl_status nncl__plan_copy(nncl__plan *p, nncl__pbuf from, nncl__pbuf to);
/* Waits for everything queued on the plan's device. */
nncl_status nncl__plan_finish(nncl__plan *p);
/* Buffer b as a view for device functions (the optimizer). */
nncl__view nncl__plan_view(const nncl__plan *p, nncl__pbuf b);
nncl_device *nncl__plan_device(const nncl__plan *p);
/* This step's place of the device's shard in the global batch and the
 * step's random seed (dropout), the same on every device. */
void nncl__plan_set_step(nncl__plan *p, int batch_offset, int global_batch, uint64_t step_seed);
/* The batch norms' synchronisation hook (nncl__exec.sync); NULL: none. */
void nncl__plan_set_sync(nncl__plan *p, nncl_status (*sync)(nncl__exec *x, const nncl_node *n, int phase, void *user),
                         void *user);
/* Reads while backward runs: open creates the plan's second queue; read
 * queues there a read of floats of buffer b that waits for everything
 * queued on the main queue so far, and does not block; wait waits for the
 * second queue. Without an open queue (has_xfer 0) they are refused. */
nncl_status nncl__plan_xfer_open(nncl__plan *p);
int nncl__plan_has_xfer(const nncl__plan *p);
nncl_status nncl__plan_xfer_read(nncl__plan *p, nncl__pbuf b, size_t off, size_t count, float *dst);
nncl_status nncl__plan_xfer_wait(nncl__plan *p);
#endif
