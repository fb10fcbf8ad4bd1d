/* syncbn.c - batch normalisation over the global batch when several devices
 * train together, so that N devices compute what one device would with the
 * same batch (synchronised batch norm). At each batch norm the device
 * threads meet at a barrier: forward, the host merges the shard means and
 * variances (parallel-variance formula) into the global ones; backward, it
 * merges the gradient sums, rescaled to each device's loss. The running
 * statistics then move once, on the host, from the global statistics. */
#include "train/trainer.h"
#include <math.h>
#include <pthread.h>

/* What a device's plan hands the hook: the trainer and the device. */
typedef struct syncbn_seat {
    nncl_trainer *t;
    int device;
} syncbn_seat;

struct nncl__syncbn {
    syncbn_seat *seat; /* per device */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int waiting, expected, generation, aborted, ready;
    size_t *off;    /* per node id: its block in host and global (BN nodes only) */
    /* per BN node, device and phase: 2C floats read from aux and 2C written
     * back; the phases apart, since a fast device reaches the backward of a
     * batch norm while a slow one still reads the forward sums */
    float *host;
    double *global; /* per BN node: 2C, global mean and biased variance of the last forward */
};

/* Waits until every device of the pass has arrived; 1 when a device failed
 * and the pass is being abandoned instead. */
static int syncbn_barrier(struct nncl__syncbn *s) {
    int gen, aborted;
    pthread_mutex_lock(&s->lock);
    gen = s->generation;
    if (!s->aborted && ++s->waiting == s->expected) {
        s->waiting = 0;
        s->generation++;
        pthread_cond_broadcast(&s->cond);
    } else {
        while (gen == s->generation && !s->aborted) pthread_cond_wait(&s->cond, &s->lock);
    }
    aborted = s->aborted;
    pthread_mutex_unlock(&s->lock);
    return aborted;
}

void nncl__syncbn_abort(nncl_trainer *t) {
    struct nncl__syncbn *s = t->syncbn;
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->aborted = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void nncl__syncbn_begin(nncl_trainer *t) {
    struct nncl__syncbn *s = t->syncbn;
    int i;
    if (!s) return;
    s->expected = s->waiting = s->aborted = 0;
    for (i = 0; i < t->nd; i++) s->expected += t->alive[i] && t->shard[i] > 0;
}

static int syncbn_takes_part(const nncl_trainer *t, int i) { return t->alive[i] && t->shard[i] > 0; }

static nncl_status syncbn_hook(nncl__exec *ex, const nncl_node *n, int phase, void *user) {
    const syncbn_seat *seat = (const syncbn_seat *)user;
    nncl_trainer *t = seat->t;
    struct nncl__syncbn *s = t->syncbn;
    int C = n->in[0]->shape[1], i, me = seat->device, c, first = -1, aborted;
    double t0;
    size_t inner = n->in[0]->sample_numel / (size_t)C, block = 8 * (size_t)C;
    double N = (double)ex->global_batch * (double)inner, eps = n->fattr[0];
    float *base = s->host + s->off[n->id] * (size_t)t->nd * 4 + (size_t)phase * 4 * C, *mine, *out;
    for (i = 0; i < t->nd && first < 0; i++)
        if (syncbn_takes_part(t, i)) first = i;
    mine = base + (size_t)me * block;
    out = mine + 2 * (size_t)C;
    /* phase 0: [mean, invstd] of the shard; phase 1: [sum dy, sum dy*xhat] */
    NNCL_TRY(nncl__batchnorm_stats_io(ex, n, phase, mine, 0));
    t0 = nncl__seconds();
    aborted = syncbn_barrier(s);
    t->waited[me] += nncl__seconds() - t0;
    if (aborted) {
        t->peer_failed[me] = 1;
        return nncl__fail(t->ctx, NNCL_ERR_STATE, "batch norm \"%s\": another device failed", n->name);
    }
    for (c = 0; c < C; c++) { /* the same sums in every thread, in device order */
        double a = 0, b = 0;
        for (i = 0; i < t->nd; i++) {
            const float *d = base + (size_t)i * block;
            if (!syncbn_takes_part(t, i)) continue;
            if (phase == 0) a += (double)t->shard[i] * inner * d[c];
            else {
                a += (double)t->shard[i] / ex->global_batch * d[c];
                b += (double)t->shard[i] / ex->global_batch * d[C + c];
            }
        }
        if (phase == 0) { /* variance = mean of shard variances + variance of shard means */
            double mean = a / N;
            for (i = 0; i < t->nd; i++) {
                const float *d = base + (size_t)i * block;
                double inv = d[C + c];
                if (syncbn_takes_part(t, i))
                    b += (double)t->shard[i] * inner * (1.0 / (inv * inv) - eps + (d[c] - mean) * (d[c] - mean));
            }
            b /= N;
            out[c] = (float)mean;
            out[C + c] = (float)(1.0 / sqrt(b + eps));
            if (me == first) {
                s->global[s->off[n->id] + c] = mean;
                s->global[s->off[n->id] + C + c] = b;
            }
        } else { /* this device's loss is the mean over its shard: scale by B / b_me */
            double scale = (double)ex->global_batch / t->shard[me];
            out[c] = (float)(a * scale);
            out[C + c] = (float)(b * scale);
        }
    }
    return nncl__batchnorm_stats_io(ex, n, phase, out, 1);
}

/* After the step's exchange: the running statistics (the same old values on
 * every device, which left them alone) move towards the global statistics,
 * PyTorch's way (unbiased variance). */
void nncl__syncbn_running(nncl_trainer *t, float *state, int batch) {
    struct nncl__syncbn *s = t->syncbn;
    nncl_graph *g = t->graph;
    int i, c;
    if (!s) return;
    for (i = 0; i < g->n_nodes; i++) {
        nncl_node *n = g->nodes[i];
        int C;
        float *rm, *rv;
        double mom, N;
        if (n->op != NNCL_OP_BATCHNORM) continue;
        C = n->in[0]->shape[1];
        mom = n->fattr[1];
        N = (double)batch * (double)(n->in[0]->sample_numel / (size_t)C);
        nncl__batchnorm_running(n, state, &rm, &rv);
        for (c = 0; c < C; c++) {
            rm[c] = (float)((1 - mom) * rm[c] + mom * s->global[s->off[i] + c]);
            if (N > 1) rv[c] = (float)((1 - mom) * rv[c] + mom * s->global[s->off[i] + C + c] * N / (N - 1));
        }
    }
}

nncl_status nncl__syncbn_setup(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    struct nncl__syncbn *s;
    size_t total = 0;
    int i;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_BATCHNORM) total += 2 * (size_t)g->nodes[i]->in[0]->shape[1];
    if (!total || t->nd < 2) return NNCL_OK;
    s = (struct nncl__syncbn *)nncl__calloc(1, sizeof *s);
    if (!s) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    t->syncbn = s;
    s->off = (size_t *)nncl__calloc((size_t)g->n_nodes, sizeof(size_t));
    s->host = (float *)nncl__calloc(total * 4 * (size_t)t->nd, sizeof(float));
    s->global = (double *)nncl__calloc(total, sizeof(double));
    s->seat = (syncbn_seat *)nncl__calloc((size_t)t->nd, sizeof *s->seat);
    if (!s->off || !s->host || !s->global || !s->seat)
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->ready = 1;
    for (i = 0; i < t->nd; i++) {
        s->seat[i].t = t;
        s->seat[i].device = i;
    }
    for (i = 0, total = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_BATCHNORM) {
            s->off[i] = total;
            /* fused with what follows it, the node the hook sees has that node's id (plan_fuse.c) */
            if (nncl__plan_away(t->plan[0], i)) s->off[t->plan[0]->into[i]] = total;
            total += 2 * (size_t)g->nodes[i]->in[0]->shape[1];
        }
    return NNCL_OK;
}

void nncl__syncbn_enable(nncl_trainer *t, int on) {
    int i;
    for (i = 0; t->syncbn && i < t->nd; i++)
        nncl__plan_set_sync(t->plan[i], on ? syncbn_hook : NULL, on ? &t->syncbn->seat[i] : NULL);
}

void nncl__syncbn_free(nncl_trainer *t) {
    struct nncl__syncbn *s = t->syncbn;
    if (!s) return;
    if (s->ready) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
    }
    NNCL_FREE(s->off);
    NNCL_FREE(s->host);
    NNCL_FREE(s->global);
    NNCL_FREE(s->seat);
    NNCL_FREE(s);
    t->syncbn = NULL;
}
