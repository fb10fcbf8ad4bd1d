/* trainer_shard.c - how the global batch is divided among the trainer's
 * devices: a cost model per device (a fixed cost per pass plus a cost per
 * sample), measured at creation by timed passes on zeros, refined after
 * steps from the passes' times, and the split that makes the slowest
 * device as quick as possible under it. */
#include "train/trainer.h"
#include <math.h>

/* Seconds device i is expected to take for a shard of s samples. */
static double trainer_cost(const nncl_trainer *t, int i, double s) {
    return s > 0 ? t->fixed[i] + t->per_sample[i] * s : 0;
}

/* Whole samples adding up to batch that make the slowest device as quick as
 * possible under the cost model fixed + per_sample * shard: the continuous
 * optimum fills every device up to one finishing time T (a device whose
 * fixed cost alone exceeds T gets nothing), found by bisection; then the
 * remainder goes, sample by sample, where it finishes soonest. So a device
 * seven times slower gets about an eighth, and one whose launches cost more
 * than it can add gets none (unless cfg.arrangement asks for data
 * parallelism: then every device gets one at least). */
void nncl__trainer_split(nncl_trainer *t, int batch) {
    double lo = 0, hi = 0, T;
    int i, it, given = 0;
    for (i = 0; i < t->nd; i++)
        if (t->alive[i] && trainer_cost(t, i, batch) > hi) hi = trainer_cost(t, i, batch);
    for (it = 0; it < 60; it++) {
        double n = 0;
        T = (lo + hi) / 2;
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] && T > t->fixed[i]) n += (T - t->fixed[i]) / t->per_sample[i];
        if (n < batch) lo = T;
        else hi = T;
    }
    for (i = 0; i < t->nd; i++) {
        double s = t->alive[i] && lo > t->fixed[i] ? (lo - t->fixed[i]) / t->per_sample[i] : 0;
        t->shard[i] = (int)floor(s);
        given += t->shard[i];
    }
    while (given < batch) {
        int best = -1;
        for (i = 0; i < t->nd; i++)
            if (t->alive[i] &&
                (best < 0 || trainer_cost(t, i, t->shard[i] + 1) < trainer_cost(t, best, t->shard[best] + 1)))
                best = i;
        t->shard[best]++;
        given++;
    }
    /* Data parallelism asked for: every live device takes part, the
     * samples it lacks taken from the largest shard. */
    for (i = 0; t->cfg.arrangement == NNCL_ARRANGE_DATA && i < t->nd; i++)
        if (t->alive[i] && !t->shard[i]) {
            int most = 0, k;
            for (k = 1; k < t->nd; k++)
                if (t->shard[k] > t->shard[most]) most = k;
            if (t->shard[most] < 2) break;
            t->shard[most]--;
            t->shard[i]++;
        }
}

/* Scales each device's cost model towards what its last pass took: a
 * device slower than predicted gets less, and one whose fixed cost alone
 * outgrows the others' whole pass gets nothing. */
void nncl__trainer_rebalance(nncl_trainer *t) {
    int i;
    for (i = 0; i < t->nd; i++) {
        double predicted, f;
        if (!t->alive[i] || !t->shard[i] || t->busy[i] <= 0) continue;
        predicted = trainer_cost(t, i, t->shard[i]);
        if (predicted <= 0) continue;
        f = 1 + 0.3 * (t->busy[i] / predicted - 1);
        t->fixed[i] *= f;
        t->per_sample[i] *= f;
    }
}

/* Runs the calibration job (every device at shard t->shard[i]) reps times
 * and keeps, per device, the least busy time in best (NULL: not kept), and
 * the least wall time of a whole pass in *wall (NULL: not kept). */
static nncl_status trainer_time_passes(nncl_trainer *t, nncl__trainer_pass *job, int reps, double *best, double *wall) {
    int r, i;
    for (r = 0; r < reps; r++) {
        double w = nncl__seconds();
        nncl__trainer_each_device(t, nncl__trainer_pass_job, job);
        w = nncl__seconds() - w;
        for (i = 0; i < t->nd; i++) {
            if (t->dev_status[i] != NNCL_OK) {
                nncl__set_error(t->ctx, nncl__trainer_dev_msg(t, i));
                return t->dev_status[i];
            }
            if (best && (r == 0 || t->busy[i] < best[i])) best[i] = t->busy[i];
        }
        if (wall && (r == 0 || w < *wall)) *wall = w;
    }
    return NNCL_OK;
}

static void trainer_set_shards(nncl_trainer *t, int s) {
    int i;
    for (i = 0; i < t->nd; i++) t->shard[i] = s;
}

/* Sets t->shard for candidate c of trainer_choose: c < nd, device ord[c]
 * alone; else data parallel over the c - nd + 2 fastest by the cost model
 * (ord). Returns the devices given samples. */
static int trainer_candidate(nncl_trainer *t, const int *ord, int c, int full) {
    int i, used = 0, keep[64];
    for (i = 0; i < t->nd; i++) {
        keep[i] = t->alive[i];
        t->shard[i] = 0;
    }
    if (c < t->nd) {
        t->shard[ord[c]] = full;
        return 1;
    }
    for (i = c - t->nd + 2; i < t->nd; i++) t->alive[ord[i]] = 0;
    nncl__trainer_split(t, full);
    for (i = 0; i < t->nd; i++) {
        t->alive[i] = keep[i];
        used += t->shard[i] > 0;
    }
    return used;
}

/* Devices that share a processor (CPU drivers) slow each other down, which
 * the cost model cannot see, and a device may cost more than it adds: the
 * arrangements are timed as whole passes of the full batch, interleaved so
 * that a slow spell hits them all: every device alone, and data parallel
 * over the 2, 3, .. fastest by the model with their exchange (the read
 * back, the host's average, its copy to the devices; the update, which
 * every arrangement runs, is not timed). The fastest is kept (the fewer
 * devices on a tie); the devices it does not use are left out (alive 0),
 * unless cfg.arrangement asks for data parallelism over all of them. */
static nncl_status trainer_choose(nncl_trainer *t, nncl__trainer_pass *job, int reps, int full) {
    int ord[64], n_cand = 2 * t->nd - 1, c, i, j, r, best = 0, used[128];
    double sec[128];
    size_t u;
    nncl_status st = NNCL_OK;
    for (i = 0; i < t->nd; i++) ord[i] = i;
    for (i = 1; i < t->nd; i++) /* by the model's time for the whole batch, fastest first */
        for (j = i; j > 0 && trainer_cost(t, ord[j], full) < trainer_cost(t, ord[j - 1], full); j--) {
            int x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
    if (t->cfg.arrangement == NNCL_ARRANGE_DATA) { /* asked for: all of them, split by the model */
        nncl__trainer_split(t, full);
        snprintf(t->why, sizeof t->why, "data parallel over all %d devices asked for", t->nd);
        return NNCL_OK;
    }
    job->mode = NNCL__PASS_CALIBRATE_SPLIT;
    for (c = 0; c < n_cand; c++) sec[c] = -1;
    for (r = 0; r <= reps && st == NNCL_OK; r++) /* the first round untimed: the new sizes compile */
        for (c = 0; c < n_cand && st == NNCL_OK; c++) {
            double w = 0;
            used[c] = trainer_candidate(t, ord, c, full);
            if (c >= t->nd && used[c] < c - t->nd + 2) continue; /* the model gives some of them nothing */
            job->solo = used[c] == 1; /* together, each reads its gradients back, as a step does */
            st = trainer_time_passes(t, job, 1, NULL, &w);
            if (st == NNCL_OK && used[c] > 1) { /* and the host averages them, the devices take the average */
                double ex = 0;
                st = nncl__trainer_exchange_time(t, full, &ex);
                w += ex;
            }
            if (r > 0 && (sec[c] < 0 || w < sec[c])) sec[c] = w;
        }
    if (st != NNCL_OK) return st;
    for (c = 1; c < n_cand; c++)
        if (sec[c] >= 0 && sec[c] < sec[best]) best = c;
    used[best] = trainer_candidate(t, ord, best, full);
    t->pass_seconds = sec[best];
    for (i = 0; i < t->nd; i++)
        if (!t->shard[i]) { /* it only slows the others: leave it out */
            t->alive[i] = 0;
            t->left_out++;
            nncl__log(t->ctx, NNCL_LOG_INFO, "device %d (%s) left out: %s", t->device[i],
                      nncl__plan_device(t->plan[i])->info.name, "the arrangement measured fastest does not use it");
        }
    if (best < t->nd)
        u = (size_t)snprintf(t->why, sizeof t->why, "device %d alone is fastest: %.3g s a pass of %d;",
                             t->device[ord[best]], sec[best], full);
    else
        u = (size_t)snprintf(t->why, sizeof t->why, "%d devices together are fastest: %.3g s a pass of %d;",
                             used[best], sec[best], full);
    for (c = 0; c < n_cand && u + 24 < sizeof t->why; c++) /* the others' figures, as many as fit */
        if (c != best && sec[c] >= 0) {
            if (c < t->nd) u += (size_t)snprintf(t->why + u, sizeof t->why - u, " d%d %.3g", t->device[ord[c]], sec[c]);
            else u += (size_t)snprintf(t->why + u, sizeof t->why - u, " %d together %.3g", used[c], sec[c]);
        }
    return NNCL_OK;
}

/* Forward+backward passes on zeros, every device at once, timed at a small
 * and at the full shard give each device's fixed and per-sample cost. Each
 * size runs once untimed first (drivers compile kernels for the sizes they
 * first see), and every figure is the least of a few passes, so one
 * disturbed pass does not decide the split. The gradients are discarded
 * and the caller restores the running statistics. */
nncl_status nncl__trainer_calibrate(nncl_trainer *t) {
    nncl_graph *g = t->graph;
    int i, k, n_feeds = 0, reps = 1, full = t->cfg.max_batch, small = full / 4 > 0 ? full / 4 : 1;
    size_t most = 1;
    float *zeros;
    nncl_feed *feeds;
    nncl_status st;
    nncl__trainer_pass job;
    double busy_full[64], busy_small[64], first = 0;
    for (i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            n_feeds++;
            if (g->nodes[i]->sample_numel > most) most = g->nodes[i]->sample_numel;
        }
    zeros = (float *)nncl__calloc(most * (size_t)full, sizeof(float));
    feeds = (nncl_feed *)nncl__calloc((size_t)n_feeds + 1, sizeof *feeds);
    if (!zeros || !feeds) {
        NNCL_FREE(zeros);
        NNCL_FREE(feeds);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (i = 0, k = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == NNCL_OP_INPUT) {
            feeds[k].node = g->nodes[i];
            feeds[k++].data = zeros;
        }
    memset(&job, 0, sizeof job);
    job.feeds = feeds;
    job.n_feeds = n_feeds;
    job.solo = 1;
    job.mode = NNCL__PASS_CALIBRATE_EACH;
    job.batch = full;
    trainer_set_shards(t, full);
    st = trainer_time_passes(t, &job, 2, NULL, &first); /* compiles, then a pass to size the repeats by */
    if (st == NNCL_OK && first < 0.05) reps = 3;        /* repeats where they are cheap */
    job.batch = small;
    trainer_set_shards(t, small);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, 1, NULL, NULL);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, reps, busy_small, NULL);
    job.batch = full;
    trainer_set_shards(t, full);
    if (st == NNCL_OK) st = trainer_time_passes(t, &job, reps, busy_full, NULL);
    for (i = 0; i < t->nd && i < 64 && st == NNCL_OK; i++) {
        double b = small < full ? (busy_full[i] - busy_small[i]) / (full - small) : 0;
        t->per_sample[i] = b > 1e-9 ? b : busy_full[i] / full + 1e-9;
        t->fixed[i] = busy_full[i] - t->per_sample[i] * full;
        if (t->fixed[i] < 0) t->fixed[i] = 0;
    }
    if (st == NNCL_OK) st = trainer_choose(t, &job, reps, full);
    NNCL_FREE(zeros);
    NNCL_FREE(feeds);
    return st;
}
