/* plan.h - a graph compiled for one device: flat parameter, gradient and
 * running-statistics buffers, one activation arena whose blocks are reused
 * where lifetimes allow, and the forward/backward schedules. The trainer
 * holds one plan per device; nothing here assumes one device per process. */
#ifndef NNCL_PLAN_H
#define NNCL_PLAN_H
#include "graph.h"

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
    uint64_t bytes;              /* device memory the plan holds */
    float seed;                  /* the loss's gradient backward starts from: 1, or the loss scale */
    /* Half storage (x.store): the arena holds fp16/bf16 elements
     * (arena_floats of them); fp32 blocks (losses, labels) go to arena32;
     * samples fed to a half input are uploaded to stage and converted. */
    cl_mem arena32, stage;
    size_t arena32_floats, stage_floats;
    nncl__kslot store_k;
    /* Called after the i-th backward op is queued (the trainer starts
     * reading finished gradients from there); NULL: none. */
    nncl_status (*after_backward)(void *user, int i);
    void *after_user;
} nncl__plan;

/* Lays out the graph's parameters (trainable first, then frozen) and
 * running statistics on first use; later calls keep the layout. */
nncl_status nncl__graph_layout(nncl_graph *g);
/* Initial parameter values (n_params floats) and running statistics
 * (n_state floats), the same for a given seed on every machine. */
void nncl__graph_init_values(const nncl_graph *g, float *params, float *state);

nncl_status nncl__plan_create(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                              nncl__plan **out);
/* The same with activations stored in precision store (nncl_precision):
 * fp16 or bf16 need nncl__plan_check_store to pass. */
nncl_status nncl__plan_create_store(nncl_context *ctx, nncl_graph *g, nncl_node *loss, int device, int max_batch,
                                    int store, nncl__plan **out);
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
/* Forward up to and including node last: its value is then intact (no
 * later op has reused its memory). */
nncl_status nncl__plan_forward_to(nncl__plan *p, int batch, int training, const nncl_node *last);
/* Non-blocking read of a node's value (batch samples) into host memory. */
nncl_status nncl__plan_read(nncl__plan *p, const nncl_node *n, float *dst, int batch, cl_event *done);
#endif
