/* data_loader.c - the batch loader: a background thread gathers the samples
 * of the coming batches (in a per-epoch seeded order) into a small ring of
 * contiguous buffers, so the caller's training step never waits for data
 * held in memory. Uses only the public dataset calls. */
#include "runtime/internal.h"
#include <pthread.h>

/* Buffers in the ring: one held by the caller, the rest filled ahead. */
#define LD_RING 4

enum { LD_FREE = 0, LD_FILLING, LD_READY, LD_HELD };

typedef struct ld_slot {
    float *x, *y;
    int n;     /* samples in the batch; 0 marks the end of an epoch */
    int epoch;
    size_t batch; /* its index in the epoch */
    int state; /* LD_* */
} ld_slot;

struct nncl_loader {
    const nncl_dataset *ds;
    size_t n, d, batch, n_batches;
    uint64_t seed;
    int flags;
    ld_slot slots[LD_RING];
    int fifo[LD_RING]; /* ready slots in delivery order */
    int fifo_head, fifo_count;
    int held;          /* slot the caller holds, or -1 */
    /* Where the producer goes on; gen changes at every reset so that a
     * batch begun before a reset is dropped rather than delivered. */
    unsigned gen;
    int prod_epoch;
    size_t prod_batch;
    int stop;
    /* the producer's own order, for perm_epoch (-1: none yet) */
    size_t *perm;
    int perm_epoch;
    int cons_epoch;    /* the caller's side: epoch of the next batch */
    size_t cons_batch; /* and its index in that epoch */
    nncl_augment aug;  /* read by the producer under the lock only */
    float *aug_tmp;    /* one sample, the producer's */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_prod, cv_cons;
    int thread_started, sync_made;
};

/* The order of epoch e: a permutation seeded from (seed, e), or the
 * identity when the loader does not shuffle. */
static void ld_order(nncl_loader *L, int epoch) {
    size_t i;
    if (L->flags & NNCL_LOADER_SHUFFLE) {
        /* splitmix64 finaliser over seed and epoch: nearby seeds and epochs
         * give unrelated orders */
        uint64_t z = L->seed + UINT64_C(0x9E3779B97F4A7C15) * ((uint64_t)(unsigned)epoch + 1);
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        z ^= z >> 31;
        nncl_dataset_permutation(L->n, z, L->perm);
    } else if (L->perm_epoch < 0) {
        for (i = 0; i < L->n; i++) L->perm[i] = i;
    }
    L->perm_epoch = epoch;
}

static uint64_t ld_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Shifts (zeros moved in) and mirrors samples first .. first+count-1 of
 * the epoch in place; each sample's draws are one hash of (seed, epoch,
 * place), so they do not depend on batching or on the thread's timing. */
static void ld_augment(nncl_loader *L, const nncl_augment *a, int epoch, size_t first, size_t count, float *x) {
    size_t i, plane = (size_t)a->height * (size_t)a->width;
    int span = 2 * a->shift + 1;
    for (i = 0; i < count; i++) {
        uint64_t r = ld_mix(ld_mix(L->seed ^ UINT64_C(0x6A09E667F3BCC909)) + ((uint64_t)(unsigned)epoch << 40) +
                            first + i);
        int dy = (int)(r % (uint64_t)span) - a->shift, dx = (int)((r >> 16) % (uint64_t)span) - a->shift;
        int flip = a->flip_horizontal && ((r >> 32) & 1), c, h, w;
        float *s = x + i * L->d, *t = L->aug_tmp;
        memcpy(t, s, sizeof(float) * L->d);
        for (c = 0; c < a->channels; c++)
            for (h = 0; h < a->height; h++) {
                int sh = h - dy;
                float *o = s + (size_t)c * plane + (size_t)h * (size_t)a->width;
                const float *in = t + (size_t)c * plane + (size_t)(sh < 0 ? 0 : sh) * (size_t)a->width;
                for (w = 0; w < a->width; w++) {
                    /* the shifted image's column w, of the mirrored one when flipped */
                    int sw = (flip ? a->width - 1 - w : w) - dx;
                    o[w] = sh >= 0 && sh < a->height && sw >= 0 && sw < a->width ? in[sw] : 0.0f;
                }
            }
    }
}

static void *ld_main(void *arg) {
    nncl_loader *L = (nncl_loader *)arg;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        int s = -1, k, epoch;
        unsigned gen;
        size_t b;
        ld_slot *slot;
        nncl_augment aug;
        while (!L->stop) {
            for (k = 0; k < LD_RING; k++)
                if (L->slots[k].state == LD_FREE) break;
            if (k < LD_RING) {
                s = k;
                break;
            }
            pthread_cond_wait(&L->cv_prod, &L->mu);
        }
        if (L->stop) break;
        slot = &L->slots[s];
        slot->state = LD_FILLING;
        epoch = L->prod_epoch;
        b = L->prod_batch;
        gen = L->gen;
        aug = L->aug;
        if (b < L->n_batches) {
            L->prod_batch++;
        } else {
            L->prod_epoch++;
            L->prod_batch = 0;
        }
        pthread_mutex_unlock(&L->mu);

        /* the gathering runs unlocked, while the caller trains */
        slot->epoch = epoch;
        slot->batch = b;
        if (b < L->n_batches) {
            size_t start = b * L->batch, count = L->n - start;
            if (count > L->batch) count = L->batch;
            if (L->perm_epoch != epoch) ld_order(L, epoch);
            nncl_dataset_gather(L->ds, L->perm + start, count, slot->x, slot->y);
            if (aug.shift || aug.flip_horizontal) ld_augment(L, &aug, epoch, start, count, slot->x);
            slot->n = (int)count;
        } else {
            slot->n = 0;
        }

        pthread_mutex_lock(&L->mu);
        if (gen == L->gen) {
            slot->state = LD_READY;
            L->fifo[(L->fifo_head + L->fifo_count) % LD_RING] = s;
            L->fifo_count++;
            pthread_cond_signal(&L->cv_cons);
        } else {
            slot->state = LD_FREE;
        }
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

void nncl_loader_free(nncl_loader *ld) {
    int k;
    if (!ld) return;
    if (ld->thread_started) {
        pthread_mutex_lock(&ld->mu);
        ld->stop = 1;
        pthread_cond_broadcast(&ld->cv_prod);
        pthread_mutex_unlock(&ld->mu);
        pthread_join(ld->thread, NULL);
    }
    if (ld->sync_made) {
        pthread_cond_destroy(&ld->cv_cons);
        pthread_cond_destroy(&ld->cv_prod);
        pthread_mutex_destroy(&ld->mu);
    }
    for (k = 0; k < LD_RING; k++) {
        NNCL_FREE(ld->slots[k].x);
        NNCL_FREE(ld->slots[k].y);
    }
    NNCL_FREE(ld->aug_tmp);
    NNCL_FREE(ld->perm);
    NNCL_FREE(ld);
}

nncl_status nncl_loader_create(const nncl_dataset *ds, size_t batch_size, uint64_t seed, int flags,
                               nncl_loader **out) {
    nncl_loader *L;
    size_t xsz, n, d, batch, n_batches;
    int k, rc;
    if (!out) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_create: out is NULL");
    *out = NULL;
    if (!ds || nncl_dataset_size(ds) == 0)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_create: no dataset");
    if (batch_size < 1 || batch_size > 0x7fffffff)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_create: batch_size %zu", batch_size);
    if (flags & ~(NNCL_LOADER_SHUFFLE | NNCL_LOADER_DROP_LAST))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_create: unknown flags 0x%x", (unsigned)flags);
    n = nncl_dataset_size(ds);
    d = nncl_dataset_features(ds);
    batch = batch_size < n ? batch_size : n;
    n_batches = (flags & NNCL_LOADER_DROP_LAST) ? n / batch_size : (n + batch - 1) / batch;
    if (n_batches == 0)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                          "nncl_loader_create: batch_size %zu with drop_last leaves no batch of the %zu samples",
                          batch_size, n);
    if (nncl__mul_overflow(batch, d, &xsz))
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_create: batch of %zu x %zu overflows",
                          batch, d);
    L = (nncl_loader *)nncl__calloc(1, sizeof *L);
    if (!L) return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: out of memory");
    *L = (nncl_loader){.ds = ds, .n = n, .d = d, .batch = batch, .n_batches = n_batches, .seed = seed, .flags = flags,
                       .held = -1, .perm_epoch = -1};
    L->perm = (size_t *)nncl__calloc(L->n, sizeof(size_t));
    L->aug_tmp = (float *)nncl__calloc(d, sizeof(float));
    for (k = 0; k < LD_RING; k++) {
        L->slots[k].x = (float *)nncl__calloc(xsz, sizeof(float));
        L->slots[k].y = (float *)nncl__calloc(L->batch, sizeof(float));
        if (!L->slots[k].x || !L->slots[k].y) break;
    }
    if (!L->perm || !L->aug_tmp || k < LD_RING) {
        nncl_loader_free(L);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: cannot allocate %d batches of %zu x %zu",
                          LD_RING, batch, d);
    }
    if (pthread_mutex_init(&L->mu, NULL) != 0) {
        nncl_loader_free(L);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: pthread_mutex_init failed");
    }
    if (pthread_cond_init(&L->cv_prod, NULL) != 0) {
        pthread_mutex_destroy(&L->mu);
        nncl_loader_free(L);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: pthread_cond_init failed");
    }
    if (pthread_cond_init(&L->cv_cons, NULL) != 0) {
        pthread_cond_destroy(&L->cv_prod);
        pthread_mutex_destroy(&L->mu);
        nncl_loader_free(L);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: pthread_cond_init failed");
    }
    L->sync_made = 1;
    rc = pthread_create(&L->thread, NULL, ld_main, L);
    if (rc != 0) {
        nncl_loader_free(L);
        return nncl__fail(NULL, NNCL_ERR_OUT_OF_MEMORY, "nncl_loader_create: pthread_create failed (error %d)", rc);
    }
    L->thread_started = 1;
    *out = L;
    return NNCL_OK;
}

/* Hands the caller's slot back to the producer. Called locked. */
static void ld_release_held(nncl_loader *L) {
    if (L->held >= 0) {
        L->slots[L->held].state = LD_FREE;
        L->held = -1;
        pthread_cond_signal(&L->cv_prod);
    }
}

nncl_status nncl_loader_next(nncl_loader *ld, const float **x, const float **y, int *batch_n) {
    ld_slot *slot;
    int s;
    if (!ld || !x || !y || !batch_n)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_next: NULL argument");
    pthread_mutex_lock(&ld->mu);
    ld_release_held(ld);
    while (ld->fifo_count == 0) pthread_cond_wait(&ld->cv_cons, &ld->mu);
    s = ld->fifo[ld->fifo_head];
    ld->fifo_head = (ld->fifo_head + 1) % LD_RING;
    ld->fifo_count--;
    slot = &ld->slots[s];
    slot->state = LD_HELD;
    ld->held = s;
    pthread_mutex_unlock(&ld->mu);
    *batch_n = slot->n;
    *x = slot->n ? slot->x : NULL;
    *y = slot->n ? slot->y : NULL;
    ld->cons_epoch = slot->n ? slot->epoch : slot->epoch + 1;
    ld->cons_batch = slot->n ? slot->batch + 1 : 0;
    return NNCL_OK;
}

/* Drops the batches prepared ahead and has the producer go on from batch
 * b of epoch e. Called locked. */
static void ld_restart(nncl_loader *L, int epoch, size_t b) {
    while (L->fifo_count > 0) {
        L->slots[L->fifo[L->fifo_head]].state = LD_FREE;
        L->fifo_head = (L->fifo_head + 1) % LD_RING;
        L->fifo_count--;
    }
    L->gen++;
    L->prod_epoch = epoch;
    L->prod_batch = b;
    pthread_cond_signal(&L->cv_prod);
}

nncl_status nncl_loader_reset(nncl_loader *ld, int epoch) {
    if (!ld) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_reset: ld is NULL");
    /* the producer runs up to LD_RING epochs ahead; its count must not wrap */
    if (epoch < 0 || epoch > INT_MAX - LD_RING)
        return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_reset: epoch %d is not in 0..%d", epoch,
                          INT_MAX - LD_RING);
    pthread_mutex_lock(&ld->mu);
    ld_release_held(ld);
    ld_restart(ld, epoch, 0);
    pthread_mutex_unlock(&ld->mu);
    ld->cons_epoch = epoch;
    ld->cons_batch = 0;
    return NNCL_OK;
}

nncl_status nncl_loader_set_augment(nncl_loader *ld, const nncl_augment *aug) {
    nncl_augment a = {0, 0, 0, 0, 0};
    if (!ld) return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT, "nncl_loader_set_augment: ld is NULL");
    if (aug) a = *aug;
    if (a.shift || a.flip_horizontal) {
        size_t numel;
        int most = a.height < a.width ? a.height : a.width;
        if (a.channels < 1 || a.height < 1 || a.width < 1 ||
            nncl__mul_overflow((size_t)a.channels * (size_t)a.height, (size_t)a.width, &numel) || numel != ld->d)
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_loader_set_augment: [channels %d, height %d, width %d] is not the dataset's %zu "
                              "features per sample",
                              a.channels, a.height, a.width, ld->d);
        if (a.shift < 0 || a.shift >= most || (a.flip_horizontal != 0 && a.flip_horizontal != 1))
            return nncl__fail(NULL, NNCL_ERR_INVALID_ARGUMENT,
                              "nncl_loader_set_augment: shift %d is not in 0..%d or flip_horizontal %d is not 0 or 1",
                              a.shift, most - 1, a.flip_horizontal);
    } else {
        a = (nncl_augment){0, 0, 0, 0, 0};
    }
    pthread_mutex_lock(&ld->mu);
    ld->aug = a;
    ld_restart(ld, ld->cons_epoch, ld->cons_batch);
    pthread_mutex_unlock(&ld->mu);
    return NNCL_OK;
}

size_t nncl_loader_batches(const nncl_loader *ld) { return ld ? ld->n_batches : 0; }
int nncl_loader_epoch(const nncl_loader *ld) { return ld ? ld->cons_epoch : 0; }

#undef LD_RING
