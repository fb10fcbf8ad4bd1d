/* crew.c - a pool of worker threads for work that runs once per member at
 * the same time (the trainer's devices): n - 1 threads (the calling thread
 * is member 0), started once and woken for each job, so that a step costs
 * no thread creation. Waits block rather than spin: spinning threads would
 * take the cores that CPU devices compute on. */
#include "runtime/internal.h"
#include <pthread.h>

#define CREW_MAX 64

struct nncl__crew {
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    nncl__crew_job job;
    void *arg;
    unsigned long generation; /* of the job posted last */
    int pending;              /* threads still running it */
    int stop;
    int n;                    /* threads started: members 1..n */
    pthread_t thread[CREW_MAX - 1];
};

typedef struct crew_seat {
    nncl__crew *c;
    int member;
} crew_seat;

static void *crew_main(void *p) {
    crew_seat seat = *(crew_seat *)p;
    nncl__crew *c = seat.c;
    unsigned long seen = 0; /* threads start before the first job is posted */
    NNCL_FREE(p);
    pthread_mutex_lock(&c->lock);
    for (;;) {
        nncl__crew_job job;
        void *arg;
        while (c->generation == seen && !c->stop) pthread_cond_wait(&c->go, &c->lock);
        if (c->stop) break;
        seen = c->generation;
        job = c->job;
        arg = c->arg;
        pthread_mutex_unlock(&c->lock);
        job(arg, seat.member);
        pthread_mutex_lock(&c->lock);
        if (--c->pending == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

nncl_status nncl__crew_start(nncl_context *ctx, int n, nncl__crew **out) {
    nncl__crew *c;
    int i;
    *out = NULL;
    if (n < 1 || n > CREW_MAX)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "a crew has 1 to %d members (devices), got %d", CREW_MAX, n);
    c = (nncl__crew *)nncl__calloc(1, sizeof *c);
    if (!c) return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        NNCL_FREE(c);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "no mutex for the worker threads");
    }
    if (pthread_cond_init(&c->go, NULL) != 0 || pthread_cond_init(&c->done, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        NNCL_FREE(c);
        return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "no condition variable for the worker threads");
    }
    for (i = 1; i < n; i++) {
        crew_seat *seat = (crew_seat *)nncl__calloc(1, sizeof *seat);
        if (seat) {
            seat->c = c;
            seat->member = i;
        }
        if (!seat || pthread_create(&c->thread[i - 1], NULL, crew_main, seat) != 0) {
            NNCL_FREE(seat);
            nncl__crew_stop(c);
            return nncl__fail(ctx, NNCL_ERR_OUT_OF_MEMORY, "no thread for member %d", i);
        }
        c->n = i;
    }
    *out = c;
    return NNCL_OK;
}

void nncl__crew_stop(nncl__crew *c) {
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
}

void nncl__crew_run(nncl__crew *c, nncl__crew_job job, void *arg) {
    pthread_mutex_lock(&c->lock);
    c->job = job;
    c->arg = arg;
    c->pending = c->n;
    c->generation++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->lock);
    job(arg, 0);
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

#undef CREW_MAX
