/* crew.c - the trainer's device threads: one per device after the first
 * (the calling thread serves device 0), started with the trainer and woken
 * for each job, so that a step costs no thread creation (two per step
 * before, about 35 us each on a small VM). Waits block rather than spin:
 * spinning threads would take the cores that CPU devices compute on. */
#include "trainer.h"
#include <pthread.h>

typedef struct nncl__crew nncl__crew;

struct nncl__crew {
    nncl_trainer *t;
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    nncl__device_job job;
    void *arg;
    unsigned long generation; /* of the job posted last */
    int pending;              /* threads still running it */
    int stop;
    int n;                    /* threads started: devices 1..n */
    pthread_t thread[63];
};

typedef struct crew_seat {
    nncl__crew *c;
    int device;
} crew_seat;

static void *crew_main(void *p) {
    crew_seat seat = *(crew_seat *)p;
    nncl__crew *c = seat.c;
    unsigned long seen = 0; /* threads start before the first job is posted */
    NNCL_FREE(p);
    pthread_mutex_lock(&c->lock);
    for (;;) {
        nncl__device_job job;
        void *arg;
        nncl_status st;
        while (c->generation == seen && !c->stop) pthread_cond_wait(&c->go, &c->lock);
        if (c->stop) break;
        seen = c->generation;
        job = c->job;
        arg = c->arg;
        pthread_mutex_unlock(&c->lock);
        st = job(c->t, seat.device, arg);
        if (st != NNCL_OK) /* this thread's own message, not whatever another wrote last */
            memcpy(nncl__trainer_dev_msg(c->t, seat.device), nncl__thread_error(), NNCL_MSG_MAX);
        pthread_mutex_lock(&c->lock);
        c->t->dev_status[seat.device] = st;
        if (--c->pending == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

nncl_status nncl__crew_start(nncl_trainer *t) {
    nncl__crew *c;
    int i;
    if (t->nd > 64)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "a trainer takes at most 64 devices, got %d", t->nd);
    c = (nncl__crew *)nncl__calloc(1, sizeof *c);
    if (!c) return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    c->t = t;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        NNCL_FREE(c);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "no mutex for the device threads");
    }
    if (pthread_cond_init(&c->go, NULL) != 0 || pthread_cond_init(&c->done, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        NNCL_FREE(c);
        return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "no condition variable for the device threads");
    }
    t->crew = c;
    for (i = 1; i < t->nd; i++) {
        crew_seat *seat = (crew_seat *)nncl__calloc(1, sizeof *seat);
        if (seat) {
            seat->c = c;
            seat->device = i;
        }
        if (!seat || pthread_create(&c->thread[i - 1], NULL, crew_main, seat) != 0) {
            NNCL_FREE(seat);
            nncl__crew_stop(t);
            return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "no thread for device %d", i);
        }
        c->n = i;
    }
    return NNCL_OK;
}

void nncl__crew_stop(nncl_trainer *t) {
    nncl__crew *c = t->crew;
    int i;
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->lock);
    for (i = 0; i < c->n; i++) pthread_join(c->thread[i], NULL);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->lock);
    NNCL_FREE(c);
    t->crew = NULL;
}

void nncl__trainer_each_device(nncl_trainer *t, nncl__device_job job, void *arg) {
    nncl__crew *c = t->crew;
    pthread_mutex_lock(&c->lock);
    c->job = job;
    c->arg = arg;
    c->pending = c->n;
    c->generation++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->lock);
    t->dev_status[0] = job(t, 0, arg);
    if (t->dev_status[0] != NNCL_OK) memcpy(nncl__trainer_dev_msg(t, 0), nncl__thread_error(), NNCL_MSG_MAX);
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}
