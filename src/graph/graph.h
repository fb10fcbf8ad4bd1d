/* graph.h - the device-independent graph (nodes with op, shape, inputs and
 * attributes), the table of op definitions each op family fills in (shape
 * rule, device forward/backward, double-precision host reference), and the
 * per-device execution state the op launchers see (exec.c). */
#ifndef NNCL_GRAPH_H
#define NNCL_GRAPH_H
#include "runtime/internal.h"
#include "runtime/launch.h"

#define NNCL_MAX_INPUTS 4
#define NNCL_NAME_MAX 64

/* Every op, from the one list in ops.def. */
typedef enum nncl__op {
#define NNCL_OP(E, name, lo, hi) NNCL_OP_##E,
#include "graph/ops.def"
#undef NNCL_OP
    NNCL_OP_COUNT
} nncl__op;

/* A node. Batched nodes have shape[0] == the batch size, which is only known
 * at step time: shape[0] holds 1 and sample_numel counts one sample. */
struct nncl_node {
    int id;                       /* position in graph->nodes: topological */
    nncl__op op;
    char name[NNCL_NAME_MAX];
    int ndim;
    int shape[NNCL_MAX_DIMS];
    int batched;
    size_t sample_numel;          /* elements per sample (all of them if not batched) */
    int n_in;
    nncl_node *in[NNCL_MAX_INPUTS];
    int iattr[8];                 /* op attributes: kernel, stride, pad, axis, flags */
    float fattr[4];               /* slope, probability, epsilon, momentum, scale */
    /* parameters */
    int trainable;                /* a PARAM that the optimizer updates */
    int no_decay;                 /* a PARAM the optimizer's weight decay leaves out (nncl_param_decay) */
    int init;                     /* nncl_init kind */
    float init_scale;
    size_t param_off;             /* element offset in the flat parameter buffer */
    /* running statistics (batch norm): floats in the flat state buffer */
    size_t state_size, state_off;
    /* derived when the graph is finalised */
    int needs_grad;               /* a trainable parameter lies upstream */
    int n_consumers;
    int checkpoint;               /* marked as a checkpoint boundary (nncl_checkpoint_mark) */
    int name_next;                /* the next node id in its name's hash chain, or -1 */
};

/* What a backward rule reads, so the plan keeps only those values alive. */
enum {
    NNCL_BW_INPUTS = 1,   /* the values of the inputs (all of them) */
    NNCL_BW_OUTPUT = 2    /* the node's own value */
};

typedef struct nncl__exec nncl__exec;

/* A kernel an op launches: cl/<family>.cl's kernel `name`. Kernels are
 * named nncl_<op>_<dtype>[_<variant>], an op's gradient kernels
 * nncl_<op>_backward_<dtype>[_<variant>] (never _bwd, _grad, _dx). */
typedef struct nncl__kdecl {
    const char *family, *name;
} nncl__kdecl;
/* An opdef's kernel list, any length: NNCL_KERNELS({"family", "name"},
 * ...) sets .kernels and .n_kernels ({NULL, NULL}: a slot left empty). */
#define NNCL_KERNELS(...)                                                                                      \
    .kernels = (const nncl__kdecl[]){__VA_ARGS__},                                                             \
    .n_kernels = (int)(sizeof((const nncl__kdecl[]){__VA_ARGS__}) / sizeof(nncl__kdecl))
/* The dense helpers below (bias, activation) run as slots 0-2 of the ops
 * that use them (linear, conv2d): list NNCL_DENSE_KERNELS first. */
enum { NNCL_K_BIAS_ACT, NNCL_K_ACT_BACKWARD, NNCL_K_BIAS_GRAD, NNCL_K_DENSE_END };
#define NNCL_DENSE_KERNELS                                                                                     \
    {"dense", "nncl_bias_act_f32"}, {"dense", "nncl_act_backward_f32_inplace"}, {"dense", "nncl_bias_backward_f32"}

/* One implementation of an op, a candidate that the op's chooser times
 * against the op's others at a plan's prepare (conv2d: src/ops/conv_pick.c):
 * whether it takes node n, its preparation (kernel choices, workspace
 * bytes), its forward, and its backward from the node's incoming gradient
 * dy. All read the exec's batch. */
typedef struct nncl__impl {
    const char *name; /* in logs */
    int (*fits)(nncl__exec *ex, const nncl_node *n);
    nncl_status (*prepare)(nncl__exec *ex, const nncl_node *n, size_t *bytes);
    nncl_status (*forward)(nncl__exec *ex, const nncl_node *n);
    nncl_status (*backward)(nncl__exec *ex, const nncl_node *n, nncl__view dy);
} nncl__impl;

/* What the host reference of an op sees besides its arrays. */
typedef struct nncl__refctx {
    int batch;                 /* samples */
    int training;
    uint64_t step_seed;        /* as nncl__exec.step_seed */
    int batch_offset;          /* as nncl__exec.batch_offset */
    double *state;             /* the graph's running statistics (n_state) */
} nncl__refctx;

/* One op's definition. Device functions queue kernels and never wait. */
typedef struct nncl__opdef {
    const char *name;
    /* Every kernel the op launches, listed once: the plan resolves them on
     * its device when it is made, and a launch names its slot
     * (nncl__kbegin), so a step neither builds nor looks anything up. */
    const nncl__kdecl *kernels;
    int n_kernels;
    /* Sets n->ndim/shape/batched (and state_size) from the inputs and
     * attributes; a mismatch returns NNCL_ERR_SHAPE with a message naming the
     * node and both shapes (nncl__graph_fail). */
    nncl_status (*shape)(nncl_graph *g, nncl_node *n);
    /* Checks n's attributes (iattr, fattr) against the ranges the op
     * documents, before its shape rule runs: the one check of the builders
     * and of a model description read from a file, so that both accept the
     * same nodes. An argument error naming the node. NULL: no attributes,
     * or the shape rule checks them with the inputs. */
    nncl_status (*check)(nncl_graph *g, const nncl_node *n);
    /* Extra floats the node keeps from forward to backward (masks, saved
     * statistics, argmax) for a batch of that many samples. NULL: none. */
    size_t (*aux_size)(const nncl_node *n, int batch);
    /* At plan creation (x->batch is the largest batch, the kernels are
     * resolved): report the CLBlast workspace the op's GEMMs need. NULL:
     * nothing to prepare. */
    nncl_status (*prepare)(nncl__exec *ex, nncl_node *n, size_t *gemm_temp_bytes);
    /* The most bytes prepare can report for n at batch samples, whatever
     * the device and the kernels timed, given an activation arena of
     * arena_bytes and storage store: what a plan counts for the workspace
     * before it has one. Every way the op runs (each path a timing may
     * choose) must stay within it. NULL: the plan counts twice the panels
     * of n's operands. */
    uint64_t (*workspace)(const nncl_node *n, int batch, uint64_t arena_bytes, int store);
    nncl_status (*forward)(nncl__exec *ex, nncl_node *n);
    /* Adds this node's contribution to the gradients of its inputs that
     * need one (nncl__need_grad); nncl__grad_accumulate() says whether to
     * add to (1) or overwrite (0) input i's gradient. Reads the node's own
     * gradient at nncl__grd(x, n). */
    nncl_status (*backward)(nncl__exec *ex, nncl_node *n);
    int bw_reads;              /* NNCL_BW_* flags */
    /* The same for node n where it depends on the node's attributes (a
     * product without a fused activation reads no output), in half storage
     * (store) as half_bw_reads would say: the plan frees what it names not.
     * NULL: bw_reads (half_bw_reads) for every node. */
    int (*bw_reads_of)(const nncl_node *n, int store);
    int alias;                 /* output shares input 0's memory (reshape) */
    /* Host reference in double: in[i] are the input values, out the
     * output, aux scratch of aux_size floats. */
    void (*ref_forward)(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out, double *aux);
    /* Adds to gin[i] (NULL where not needed) given gout. */
    void (*ref_backward)(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                         const double *gout, double *const *gin, double *aux);
    const void *impl;          /* what the family's shared functions read for this op */
    /* The op's implementations, n_impls of them, when it has several to
     * choose from: impls[0] the one every other must agree with. The index
     * is what a stored choice holds, so a new one is appended. NULL: its
     * forward and backward alone. */
    const nncl__impl *impls;
    int n_impls;
    /* The op's contract on host data fed to its input `in` (batch samples),
     * checked before any device works (class labels in range): an
     * argument error naming the input. NULL: any data. */
    nncl_status (*check_feed)(nncl_context *ctx, const nncl_node *n, int in, const float *data, int batch);
    /* Half storage (nncl_train_config.precision): half 1 when the op's
     * kernels take activations in the storage type (cl/common.cl act_t),
     * 2 when also the gradients of parameter inputs (kept fp32);
     * f32_in has bit i set for an input that stays fp32 (labels, targets);
     * f32_out 1 when the node's value, gradient and aux stay fp32 (losses);
     * f32_aux 1 when its aux alone does (indices); half_bw_reads nonzero
     * when in half storage the op keeps no aux and its backward reads these
     * (NNCL_BW_*) instead of bw_reads, recomputing what aux held. */
    int half, f32_in, f32_out, f32_aux, half_bw_reads;
    /* Bit i: backward writes input i's gradient element by element after
     * it has read the node's own gradient at that element (and reads that
     * element of it no more), so that where this node writes input i's
     * gradient first the plan may give both gradients one place. */
    int bw_inplace;
    /* Checkpointing: 1 when the op's recompute (nncl__exec.recompute)
     * reuses the aux its forward saved instead of writing it again (batch
     * norm's batch statistics), so the plan keeps that aux to backward. */
    int keep_aux;
} nncl__opdef;

/* Runs the check_feed of every op that reads input node `input`, on the
 * data fed to it (batch samples). */
nncl_status nncl__check_feed(nncl_context *ctx, const nncl_graph *g, const nncl_node *input, const float *data,
                             int batch);
/* The table, indexed by nncl__op and generated from ops.def (ops_table.c);
 * each family file defines the rows of its ops. Rows name the fields they
 * set (designated initializers); what a row leaves out is NULL or 0. */
const nncl__opdef *nncl__opdef_get(nncl__op op);
/* Whether op takes n_in inputs (ops.def); *lo and *hi get its range. */
int nncl__op_inputs(nncl__op op, int n_in, int *lo, int *hi);

struct nncl_graph {
    nncl_context *ctx;            /* for messages; may be NULL */
    nncl_node **nodes;
    int n_nodes, cap_nodes;
    size_t n_params;              /* floats in the flat parameter buffer */
    size_t n_trainable;           /* the first n_trainable of them are trainable */
    size_t n_decay;               /* the first n_decay of those take weight decay */
    size_t n_state;               /* floats of running statistics */
    uint64_t seed;
    int frozen;                   /* parameter layout fixed (a plan exists) */
    /* Names hashed (chains through nncl_node.name_next), so that a lookup
     * does not visit every node: a file of many parameters loads in time
     * linear in their count. */
    int *name_head, name_cap;
};

/* Shape errors and other build-time failures: message on the graph's context. */
nncl_node *nncl__graph_fail(nncl_graph *g, nncl_status st, const char *fmt, ...) NNCL_PRINTF(3, 4);
/* The same for shape rules, returning the status. */
nncl_status nncl__graph_error(nncl_graph *g, nncl_status st, const char *fmt, ...) NNCL_PRINTF(3, 4);
/* Adds a node of op with inputs; runs the op's shape rule; NULL on error. */
nncl_node *nncl__node_add(nncl_graph *g, nncl__op op, const char *name, int n_in, nncl_node *const *in,
                          const int *iattr, int n_iattr, const float *fattr, int n_fattr);
/* Freezes every parameter of g (nncl_param_freeze on each, in one pass). */
void nncl__graph_freeze_all(nncl_graph *g);
/* Whether a node name can be written in a model description as it is: 1
 * to NNCL_NAME_MAX-1 bytes, none a space, a control byte, '(' or '['. */
int nncl__name_ok(const char *name);
/* Whether n is a node of g (not of another graph). */
int nncl__graph_owns(const nncl_graph *g, const nncl_node *n);
/* nncl__node_add for a layer builder that made parameters (in[1..]) after
 * the graph's first `keep` nodes: when a parameter is missing or the node
 * is refused, those leaves are dropped again, so that a failed builder adds
 * nothing. */
nncl_node *nncl__layer_add(nncl_graph *g, int keep, nncl__op op, const char *name, int n_in, nncl_node *const *in,
                           const int *iattr, int n_iattr, const float *fattr, int n_fattr);
/* Rebuilds the name lookup after a builder renamed nodes in place. */
void nncl__graph_rehash(nncl_graph *g);
/* Drops every node after the graph's first `keep` again (a composite
 * builder that failed part way), so that it adds nothing. */
void nncl__graph_truncate(nncl_graph *g, int keep);
/* "[B,3,28,28]" style text of a node's shape for messages. */
const char *nncl__shape_str(const nncl_node *n, char *buf, size_t len);
size_t nncl__numel(const nncl_node *n, int batch);
/* Whether a and b have the same shape: both batched or neither, the same
 * dimensions (the batch apart), not merely as many elements. */
int nncl__same_shape(const nncl_node *a, const nncl_node *b);

/* Lays out the graph's parameters (trainable first, then frozen) and
 * running statistics on first use; later calls keep the layout. */
nncl_status nncl__graph_layout(nncl_graph *g);
/* Initial parameter values (n_params floats) and running statistics
 * (n_state floats), the same for a given seed on every machine. */
void nncl__graph_init_values(const nncl_graph *g, float *params, float *state);

/* ------------------------------------------------------------- execution */

/* Per-device state a launcher uses: where every node's value, gradient and
 * aux space live, the current batch and mode, and the step's random seed. */
struct nncl__exec {
    nncl_context *ctx;
    nncl_device *dev;
    nncl_graph *graph;
    int batch;                 /* samples in this device's shard */
    int batch_offset;          /* index of the shard's first sample in the global batch */
    int global_batch;          /* samples in the global batch */
    int training;
    /* 1 while checkpointing runs a forward op again in backward: values
     * must come out as the forward's did, and no state moves twice. */
    int recompute;
    uint64_t step_seed;        /* differs every step; the same on every device */
    /* Synchronised batch norm across devices: called by a batch norm in
     * training once its shard statistics are in its aux (phase 0, forward)
     * and once its gradient sums are (phase 1, backward); it replaces them
     * with the statistics of the global batch. NULL on a single device. */
    nncl_status (*sync)(nncl__exec *ex, const nncl_node *n, int phase, void *user);
    void *sync_user;
    nncl__view *value, *grad, *aux; /* indexed by node id; mem NULL where absent */
    nncl__kslot *kernels;      /* kbase[node id] + slot: the op's kernels on dev */
    size_t *kbase;             /* per node id, and one past: where its slots start (as many as its op declares) */
    unsigned char *grad_acc;   /* per node: 1 once its gradient has been written this step */
    cl_mem params, grads, state;
    cl_mem gemm_temp;          /* CLBlast temporary buffer, or NULL */
    int store;                 /* activations' storage: 0 fp32, 1 fp16, 2 bf16 (nncl_precision) */
    cl_mem params_h;           /* half storage: the parameters' working copy in that type */
    size_t conv_budget;        /* nonzero: a conv2d's workspace budget in floats (its timing, src/ops/conv_pick.c) */
    size_t gemm_cap;           /* at a plan's prepare: the GEMM temp bytes the nodes before need (0: none) */
};

nncl__view nncl__val(nncl__exec *ex, const nncl_node *n);
nncl__view nncl__grd(nncl__exec *ex, const nncl_node *n);
nncl__view nncl__auxv(nncl__exec *ex, const nncl_node *n);
/* Whether input i of n needs a gradient. */
int nncl__need_grad(nncl__exec *ex, const nncl_node *n, int i);
/* 1 when input i's gradient already holds a contribution this step (add to
 * it), 0 when this is the first (overwrite it). Marks it written: call once
 * per input per backward, just before the launch that writes it. */
int nncl__grad_accumulate(nncl__exec *ex, const nncl_node *n, int i);
/* Slots op d declares: the length of its kernel list. */
int nncl__op_kernel_count(const nncl__opdef *d);
/* Kernel `slot` of n's op on the exec's device as resolved at plan
 * creation; NULL when the op declares no such slot. */
const nncl__kslot *nncl__kslot_of(const nncl__exec *ex, const nncl_node *n, int slot);
/* Kernel `slot` of n's op (its opdef's kernels[slot]) on the exec's device,
 * resolved at plan creation, with arguments begun. */
nncl_status nncl__kbegin(nncl__exec *ex, const nncl_node *n, int slot, nncl__args *a);
/* The same kernel for the typed wrappers of launch.h; a missing
 * slot is recorded and makes the wrapper fail. */
nncl__kl nncl__kl_of(nncl__exec *ex, const nncl_node *n, int slot);

#endif /* NNCL_GRAPH_H */
