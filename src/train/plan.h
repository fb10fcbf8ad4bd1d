/* plan.h - a graph compiled for one device: flat parameter, gradient and
 * running-statistics buffers, one activation arena whose blocks are reused
 * where lifetimes allow, and the forward/backward schedules with
 * checkpointing's recompute, laid out and sized before anything is
 * allocated (plan_memory.c), its buffers and replay (plan.c); the
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
    nncl__exec ex;
    /* Batch norm fused with what follows it (plan_fuse.c): node[i] is the
     * node run at id i, the graph's or a fused one the plan owns (fused,
     * n_fused of them); into[i] >= 0 for a node computed inside the
     * fused node at id into[i] (-1 otherwise). node NULL: none fused. */
    nncl_node **node, *fused;
    int *into, n_fused;
    int away_read;               /* the fused-away node forward_to last left intact, or -1 */
    int *fwd, n_fwd;             /* node ids run forward, in order */
    int *bwd, n_bwd;             /* node ids run backward, in order */
    /* Gradient checkpointing (plan_memory.c): node ids whose forward runs
     * again in backward, in order; rec[rec_before[i] .. rec_before[i+1])
     * run just before bwd[i]. The recomputed values and aux live at
     * rvalue/raux (mem NULL: the node is not recomputed); fvalue/faux keep
     * the forward's places, which ex.value/ex.aux get back for a forward. */
    int *rec, n_rec, *rec_before;
    /* rec_again[r] 1: rec[r] is a value's second recompute, for its last
     * reader, into rec_place[r] (its first went to rvalue). */
    unsigned char *rec_again;
    nncl__view *rec_place;
    int n_segments;              /* 1: no checkpointing */
    nncl__view *rvalue, *raux, *fvalue, *faux;
    size_t arena_floats, gemm_temp_bytes;
    /* Activation memory: the most bytes of values and aux (recomputed ones
     * included) live at one step of the timeline, gradients and workspace
     * apart (plan_memory.c). */
    uint64_t act_bytes;
    cl_mem arena;
    uint64_t bytes;              /* device memory of the graph's buffers (the training buffers apart) */
    float dloss;                 /* the loss's gradient backward starts from: 1, or the loss scale */
    /* Half storage (ex.store): the arena holds fp16/bf16 elements
     * (arena_floats of them); fp32 blocks (losses, labels) go to arena32;
     * samples fed to a half input are uploaded to the start of the GEMM
     * temp (ex.gemm_temp, at least stage_floats) and converted: a feed comes
     * before the products on the one in-order queue. */
    cl_mem arena32;
    size_t arena32_floats, stage_floats;
    nncl__kslot store_k;
    /* Training buffers (nncl__plan_train): the optimizer's state and
     * scratch, and the running statistics saved before a step. */
    cl_mem opt, scratch, shadow;
    size_t opt_floats, scratch_floats;
    cl_command_queue xfer;       /* second queue for reads while backward runs, or NULL */
    /* 1: backward adds the parameters' gradients to the gradient buffer
     * instead of overwriting it (a pipeline stage's sum over its
     * micro-batches). */
    int accumulate;
    /* fp32 activation arenas of arena_floats each (nncl__plan_arenas), the
     * first the plan's own; arena is arenas[cur_arena]. NULL: only arena. */
    cl_mem *arenas;
    int n_arenas, cur_arena;
    /* Called after the i-th backward op is queued (the trainer starts
     * reading finished gradients from there); NULL: none. */
    nncl_status (*after_backward)(void *user, int i);
    void *after_user;
} nncl__plan;

/* ------------------------------------------------------------- fusion (plan_fuse.c) */

/* Rewrites p's chains batchnorm -> [add(residual)] -> relu/relu6/hardswish
 * (or batchnorm -> add) into one fused batch-norm node where the
 * intermediate values have no other consumer, are not the loss and not
 * marked checkpoint boundaries; NNCL_BN_FUSE=0 keeps them apart. */
nncl_status nncl__plan_fuse(nncl__plan *p);
void nncl__plan_fuse_free(nncl__plan *p);
/* The node run at id i (the graph's, or the fused node replacing it). */
nncl_node *nncl__plan_node(const nncl__plan *p, int i);
/* Whether node id i is computed inside a fused node of p. */
int nncl__plan_away(const nncl__plan *p, int i);

/* ------------------------------------------------------------- memory (plan_memory.c) */

/* A block of the arena: live from step first to last of the timeline. */
typedef struct nncl__plan_block {
    int first, last;
    size_t size, off;     /* floats */
    int node, kind;       /* kind 0 value, 1 gradient, 2 aux */
    int rec;              /* 1: the place of a recomputed value or aux; 2: of a value's second recompute */
    int f32;              /* half storage: the block stays fp32 (arena32) */
    int share;            /* a gradient written in place: 1 + the node whose gradient's place it takes (0: none) */
} nncl__plan_block;

/* What a plan is made for. */
typedef struct nncl__plan_opts {
    int max_batch;
    int store;            /* nncl_precision of the activations */
    int checkpoint;       /* nncl_checkpoint */
    size_t train_floats;  /* floats of training buffers nncl__plan_train will add (counted against memory) */
    /* A pipeline stage's plan (fp32): the loss may be any node, its
     * gradient coming from the next stage (nncl__plan_backward_from); an
     * input marked needs_grad keeps its gradient for the previous stage. */
    int stage;
} nncl__plan_opts;

/* Storage owner of a node's value: reshapes share their input's memory. */
const nncl_node *nncl__plan_root(const nncl_node *n);
/* Schedules p (graph, loss, max_batch, ex.store set) with checkpointing
 * checkpoint (nncl_checkpoint) and packs its blocks: p->fwd, bwd, rec,
 * arena_floats, arena32_floats, stage_floats, n_segments; the blocks to *b
 * (NNCL_FREE). A boundary marked where none can be is an argument error. */
nncl_status nncl__plan_layout(nncl__plan *p, int checkpoint, nncl__plan_block **b, int *nb);
void nncl__plan_schedule_free(nncl__plan *p);
/* Schedules and packs p with boundaries mark (NULL: none; bit 1 a
 * boundary, bit 2 a second recompute of a dropped value for its last
 * reader), setting act_bytes; the blocks to *b (NNCL_FREE). */
nncl_status nncl__plan_pack_all(nncl__plan *p, const unsigned char *mark, nncl__plan_block **b, int *nb);
/* Bytes of the laid-out arenas, and of the whole plan with train_floats of
 * training buffers (the GEMM workspace apart: sized when kernels are
 * timed; measure counts half storage's upload stage, its least size). */
uint64_t nncl__plan_arena_bytes(const nncl__plan *p);
uint64_t nncl__plan_need(const nncl__plan *p, size_t train_floats);
/* The same for a plan not made, host work only, no device touched: its
 * need with a bound on the workspace (the most any op declares,
 * nncl__opdef.workspace), which a made plan sizes by timing its kernels;
 * *activations its act_bytes. */
nncl_status nncl__plan_measure(nncl_context *ctx, nncl_graph *g, nncl_node *loss, const nncl__plan_opts *o,
                               uint64_t *need, uint64_t *activations, int *segments);
/* Whether input node n is read as fp32 (labels, targets: an f32_in slot of
 * a consumer); *mixed is set when another consumer reads it as half. */
int nncl__plan_input_f32(const nncl_graph *g, const nncl_node *n, int *mixed);

/* ------------------------------------------------------------- plan (plan.c) */

nncl_status nncl__plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                              nncl__plan **out);
/* The same with activations stored in precision store (nncl_precision):
 * fp16 or bf16 need nncl__plan_check_store to pass. */
nncl_status nncl__plan_create_store(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                                    int store, nncl__plan **out);
/* The same for the options o; a plan that does not fit the device's
 * memory (or the context's cap) less what nncl holds there is refused
 * before it allocates, NNCL_ERR_OUT_OF_MEMORY saying what it needs and
 * what to try. */
nncl_status nncl__plan_create_opts(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device,
                                   const nncl__plan_opts *o, nncl__plan **out);
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
/* Backward from the loss's gradient *dloss instead of p->dloss (host
 * memory valid until the queue has passed it). */
nncl_status nncl__plan_backward_scaled(nncl__plan *p, const float *dloss);
/* Backward of a stage plan from the gradient of its output node (batch
 * samples at grad, host memory valid until the queue has passed it). */
nncl_status nncl__plan_backward_from(nncl__plan *p, const float *grad, int batch);
/* Forward up to and including node last: its value is then intact (no
 * later op has reused its memory). */
nncl_status nncl__plan_forward_to(nncl__plan *p, int batch, int training, const nncl_node *last);
/* Activation arenas, up to n in all (fp32 storage), as many as the device's
 * memory (or the cap) holds beside what nncl has there: returns how many
 * there are, 1 when none could be added; a later call adds none. A pipeline stage keeps each
 * micro-batch it holds in one of its own, so its backward needs no
 * recomputed forward. */
int nncl__plan_arenas(nncl__plan *p, int n);
/* Points every value, gradient and aux of the plan at arena i (0 ..
 * n_arenas - 1): what the next forward writes and backward reads. */
void nncl__plan_use_arena(nncl__plan *p, int i);
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
void nncl__plan_set_sync(nncl__plan *p, nncl_status (*sync)(nncl__exec *ex, const nncl_node *n, int phase, void *user),
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
