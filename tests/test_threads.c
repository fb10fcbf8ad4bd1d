/* test_threads.c - one context used from several threads at once: each
 * thread trains a trainer of its own (on device id % devices), runs eager
 * ops and a GEMM, and must end with what the same work gives run alone,
 * one thread after another; two threads stepping one trainer make every
 * step count once. Kernel objects take one launch's arguments at a time,
 * so without the context's use lock (src/runtime/context.c) these runs failed with
 * CL_INVALID_KERNEL_ARGS or crashed. Also: threads failing on one context
 * each read their own message, and freeing a trainer other threads step
 * stops their steps instead of leaving them freed memory. */
#include "harness.h"
#include "train/trainer.h" /* the use lock and a trainer's count of calls in flight */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TT_THREADS 4
#define TT_STEPS 25
#define TT_B 32
#define TT_D 12
#define TT_C 3
#define TT_N 24 /* eager tensors are TT_N x TT_N */
#define TT_W (16 * TT_D) /* fc1.weight's elements */

typedef struct tt_job {
    nncl_context *ctx;
    int id;
    nncl_status st;
    char msg[256];
    float w[TT_W];          /* fc1.weight after the steps */
    float e[TT_N * TT_N];   /* relu(a b^T + a) */
} tt_job;

static float tt_x[TT_B * TT_D], tt_y[TT_B];

static nncl_status tt_fail(tt_job *j, nncl_status st) {
    j->st = st;
    strncpy(j->msg, nncl_last_error(j->ctx), sizeof j->msg - 1);
    return st;
}

/* Thread job id's work; each call from zero, so a run alone and a run
 * beside others have to agree. */
static nncl_status tt_work(tt_job *j) {
    nncl_context *ctx = j->ctx;
    int d = j->id % nncl_device_count(ctx), in = TT_D, sh[2] = {TT_N, TT_N}, i;
    nncl_graph *g = nncl_graph_create(ctx, 100 + (uint64_t)j->id);
    nncl_node *x = nncl_input(g, "x", 1, &in), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *h = nncl_linear(g, x, 16, 1, NNCL_ACT_RELU, "fc1");
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, h, TT_C, 1, NNCL_ACT_NONE, "fc2"), y);
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_tensor *a = NULL, *b = NULL, *o = NULL;
    nncl_feed f[2];
    nncl_status st;
    float host[TT_N * TT_N];
    unsigned seed = 7 + (unsigned)j->id;
    c.max_batch = TT_B;
    c.devices = &d;
    c.n_devices = 1;
    c.optim = nncl_optim_default(NNCL_OPT_ADAM);
    f[0].node = x; f[0].data = tt_x;
    f[1].node = y; f[1].data = tt_y;
    if (!loss) {
        nncl_graph_free(g);
        return tt_fail(j, NNCL_ERR_INVALID_ARGUMENT);
    }
    st = nncl_trainer_create(ctx, g, loss, &c, &t);
    for (i = 0; st == NNCL_OK && i < TT_STEPS; i++) st = nncl_trainer_step(t, f, 2, TT_B, NULL);
    if (st == NNCL_OK) st = nncl_trainer_param_get(t, "fc1.weight", j->w, TT_W);
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sh, &a);
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sh, &b);
    if (st == NNCL_OK) st = nncl_tensor_create(ctx, d, 2, sh, &o);
    th_fill_uniform(host, TT_N * TT_N, -1, 1, &seed);
    if (st == NNCL_OK) st = nncl_tensor_write(a, host, TT_N * TT_N);
    th_fill_uniform(host, TT_N * TT_N, -1, 1, &seed);
    if (st == NNCL_OK) st = nncl_tensor_write(b, host, TT_N * TT_N);
    for (i = 0; st == NNCL_OK && i < 10; i++) {
        st = nncl_gemm(ctx, 0, 1, 1.0f, a, b, 0.0f, o);
        if (st == NNCL_OK) st = nncl_add(ctx, o, a, o);
        if (st == NNCL_OK) st = nncl_relu(ctx, o, o);
    }
    if (st == NNCL_OK) st = nncl_tensor_read(o, j->e, TT_N * TT_N);
    if (st != NNCL_OK) tt_fail(j, st);
    nncl_tensor_free(a);
    nncl_tensor_free(b);
    nncl_tensor_free(o);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    return st;
}

static void *tt_thread(void *arg) {
    tt_work((tt_job *)arg);
    return NULL;
}

/* Largest |a - b| / (1 + |b|) over n values. */
static double tt_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(e <= m)) m = e; /* NaN counts */
    }
    return m;
}

static int test_threads_agree(nncl_context *ctx) {
    static tt_job alone[TT_THREADS], together[TT_THREADS];
    pthread_t th[TT_THREADS];
    char name[128];
    int i;
    snprintf(name, sizeof name, "4 threads on one context of %d device(s) (own trainers, eager ops, GEMM) end as each "
             "run alone", nncl_device_count(ctx));
    for (i = 0; i < TT_THREADS; i++) {
        alone[i].ctx = together[i].ctx = ctx;
        alone[i].id = together[i].id = i;
        TH_OK(name, ctx, tt_work(&alone[i]));
    }
    for (i = 0; i < TT_THREADS; i++) TH_CHECK(name, pthread_create(&th[i], NULL, tt_thread, &together[i]) == 0);
    for (i = 0; i < TT_THREADS; i++) pthread_join(th[i], NULL);
    for (i = 0; i < TT_THREADS; i++) {
        double dw = tt_diff(together[i].w, alone[i].w, TT_W), de = tt_diff(together[i].e, alone[i].e, TT_N * TT_N);
        if (together[i].st != NNCL_OK || !(dw < 1e-5) || !(de < 1e-5)) {
            th_fail(name, "thread %d: %s (%s), weights differ by %.3g, eager result by %.3g", i,
                    nncl_status_str(together[i].st), together[i].msg, dw, de);
            return 1;
        }
    }
    th_pass("%s", name);
    return 0;
}

typedef struct tt_stepper {
    nncl_trainer *t;
    nncl_feed *f;
    nncl_status st;
} tt_stepper;

static void *tt_step_thread(void *arg) {
    tt_stepper *s = (tt_stepper *)arg;
    int i;
    for (i = 0; s->st == NNCL_OK && i < TT_STEPS; i++) s->st = nncl_trainer_step(s->t, s->f, 2, TT_B, NULL);
    return NULL;
}

static int test_shared_trainer(nncl_context *ctx) {
    const char *name = "2 threads stepping one trainer: every step counts once, none fails";
    int in = TT_D;
    nncl_graph *g = nncl_graph_create(ctx, 5);
    nncl_node *x = nncl_input(g, "x", 1, &in), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, x, TT_C, 1, NNCL_ACT_NONE, "fc"), y);
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    tt_stepper s[2];
    pthread_t th[2];
    int i;
    c.max_batch = TT_B;
    TH_CHECK(name, loss != NULL);
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f[0].node = x; f[0].data = tt_x;
    f[1].node = y; f[1].data = tt_y;
    for (i = 0; i < 2; i++) {
        s[i].t = t;
        s[i].f = f;
        s[i].st = NNCL_OK;
        TH_CHECK(name, pthread_create(&th[i], NULL, tt_step_thread, &s[i]) == 0);
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    TH_CHECK(name, s[0].st == NNCL_OK && s[1].st == NNCL_OK);
    TH_CHECK(name, nncl_trainer_step_count(t) == 2 * TT_STEPS);
    nncl_trainer_free(t);
    nncl_graph_free(g);
    th_pass("%s", name);
    return 0;
}

/* Two threads fail on one context in turn, each yielding before it reads
 * the message: thread 0 fails, thread 1 fails, then each reads. Every
 * read must give the reader's own failure (with one message per context,
 * thread 0 read thread 1's every time). Half the rounds fail a tensor
 * creation, half a step of a shared trainer. */
#define TT_ROUNDS 200
typedef struct tt_turns {
    nncl_context *ctx;
    nncl_trainer *t;
    nncl_feed *f;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int turn;             /* 4 per round: fail 0, fail 1, read 0, read 1 */
    int wrong[2];         /* reads that gave another message */
    char seen[2][256];    /* the first wrong one */
} tt_turns;

typedef struct tt_turner {
    tt_turns *s;
    int id;
} tt_turner;

static void tt_wait_turn(tt_turns *s, int turn) {
    pthread_mutex_lock(&s->lock);
    while (s->turn != turn) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void tt_next_turn(tt_turns *s) {
    pthread_mutex_lock(&s->lock);
    s->turn++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void *tt_turn_thread(void *arg) {
    tt_turner *me = (tt_turner *)arg;
    tt_turns *s = me->s;
    int r;
    for (r = 0; r < TT_ROUNDS; r++) {
        char want[64];
        const char *got;
        nncl_tensor *tmp = NULL;
        int shape[2] = {-(1000 * (me->id + 1) + r), 2}, batch = TT_B + 1 + 100 * me->id + r;
        tt_wait_turn(s, 4 * r + me->id);
        if (r % 2 == 0) {
            nncl_tensor_create(s->ctx, 0, 2, shape, &tmp);
            snprintf(want, sizeof want, "dimension 0 is %d ", shape[0]);
        } else {
            nncl_trainer_step(s->t, s->f, 2, batch, NULL);
            snprintf(want, sizeof want, "batch %d is not", batch);
        }
        tt_next_turn(s);
        tt_wait_turn(s, 4 * r + 2 + me->id);
        sched_yield();
        got = nncl_last_error(s->ctx);
        if (!strstr(got, want) && s->wrong[me->id]++ == 0)
            snprintf(s->seen[me->id], sizeof s->seen[0], "round %d wants \"%s\", read \"%.100s\"", r, want, got);
        tt_next_turn(s);
    }
    return NULL;
}

static int test_own_messages(nncl_context *ctx) {
    const char *name = "2 threads failing in turn on one context each read their own failure's message";
    int in = TT_D, i;
    nncl_graph *g = nncl_graph_create(ctx, 5);
    nncl_node *x = nncl_input(g, "x", 1, &in), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, x, TT_C, 1, NNCL_ACT_NONE, "fc"), y);
    nncl_train_config c = nncl_train_default();
    nncl_feed f[2];
    tt_turns s;
    tt_turner who[2];
    pthread_t th[2];
    memset(&s, 0, sizeof s);
    c.max_batch = TT_B;
    TH_CHECK(name, loss != NULL);
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &s.t));
    f[0].node = x; f[0].data = tt_x;
    f[1].node = y; f[1].data = tt_y;
    s.ctx = ctx;
    s.f = f;
    TH_CHECK(name, pthread_mutex_init(&s.lock, NULL) == 0 && pthread_cond_init(&s.cond, NULL) == 0);
    for (i = 0; i < 2; i++) {
        who[i].s = &s;
        who[i].id = i;
        TH_CHECK(name, pthread_create(&th[i], NULL, tt_turn_thread, &who[i]) == 0);
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.cond);
    nncl_trainer_free(s.t);
    nncl_graph_free(g);
    for (i = 0; i < 2; i++)
        if (s.wrong[i]) {
            th_fail(name, "thread %d read another message %d times of %d: %s", i, s.wrong[i], TT_ROUNDS, s.seen[i]);
            return 1;
        }
    th_pass("%s (%d rounds)", name, TT_ROUNDS);
    return 0;
}

/* nncl_trainer_free while other threads step the trainer: a step that
 * began (and waits for its turn) and one that begins while the free waits
 * both return NNCL_ERR_STATE, and nothing uses freed memory (the sanitized
 * pass checks that). Before, the waiting step ran on the freed trainer.
 * This thread holds the context's use lock meanwhile, so that the order is
 * certain: the first step waits for its turn, the free for that step. */
typedef struct tt_call {
    nncl_context *ctx; /* the trainer may be gone when the step returns */
    nncl_trainer *t;
    nncl_feed *f;
    nncl_status st;
    char msg[256];
} tt_call;

static void *tt_step_once(void *arg) {
    tt_call *c = (tt_call *)arg;
    c->st = nncl_trainer_step(c->t, c->f, 2, TT_B, NULL);
    snprintf(c->msg, sizeof c->msg, "%s", c->st ? nncl_last_error(c->ctx) : "");
    return NULL;
}

static void *tt_free_trainer(void *arg) {
    nncl_trainer_free((nncl_trainer *)arg);
    return NULL;
}

/* Waits up to 10 s for t's calls in flight to be users and its free begun
 * to be closing (-1: either); 0 when they are. */
static int tt_until(nncl_trainer *t, int users, int closing) {
    int k, ok = 0;
    for (k = 0; k < 10000 && !ok; k++) {
        pthread_mutex_lock(&t->ctx->lock);
        ok = t->users == users && (closing < 0 || t->closing == closing);
        pthread_mutex_unlock(&t->ctx->lock);
        if (!ok) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    return !ok;
}

static int test_free_while_stepping(nncl_context *ctx) {
    const char *name = "nncl_trainer_free while threads step: a waiting and a late step fail with NNCL_ERR_STATE";
    int in = TT_D, ok;
    nncl_graph *g = nncl_graph_create(ctx, 5);
    nncl_node *x = nncl_input(g, "x", 1, &in), *y = nncl_input(g, "y", 0, NULL);
    nncl_node *loss = nncl_softmax_cross_entropy(g, nncl_linear(g, x, TT_C, 1, NNCL_ACT_NONE, "fc"), y);
    nncl_train_config c = nncl_train_default();
    nncl_trainer *t = NULL;
    nncl_feed f[2];
    tt_call waiting, late;
    pthread_t a, b, l;
    c.max_batch = TT_B;
    TH_CHECK(name, loss != NULL);
    TH_OK(name, ctx, nncl_trainer_create(ctx, g, loss, &c, &t));
    f[0].node = x; f[0].data = tt_x;
    f[1].node = y; f[1].data = tt_y;
    waiting.ctx = late.ctx = ctx;
    waiting.t = late.t = t;
    waiting.f = late.f = f;
    nncl__enter(ctx);
    ok = pthread_create(&a, NULL, tt_step_once, &waiting) == 0;
    ok = ok && tt_until(t, 1, 0) == 0; /* the step waits for its turn */
    ok = ok && pthread_create(&b, NULL, tt_free_trainer, t) == 0;
    if (ok && tt_until(t, 1, 1) == 0) { /* the free waits for the step; a step now is refused at once */
        ok = pthread_create(&l, NULL, tt_step_once, &late) == 0;
        if (ok) pthread_join(l, NULL);
    } else late.st = NNCL_OK, late.msg[0] = 0;
    nncl__leave(ctx);
    TH_CHECK(name, ok);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    nncl_graph_free(g);
    if (waiting.st != NNCL_ERR_STATE || late.st != NNCL_ERR_STATE || !strstr(waiting.msg, "being freed") ||
        !strstr(late.msg, "being freed")) {
        th_fail(name, "the waiting step: %s (%s); the late one: %s (%s)", nncl_status_str(waiting.st), waiting.msg,
                nncl_status_str(late.st), late.msg);
        return 1;
    }
    th_pass("%s", name);
    return 0;
}

int main(void) {
    nncl_context *ctx;
    unsigned seed = 3;
    int i;
    for (i = 0; i < TT_B; i++) tt_y[i] = (float)(i % TT_C);
    th_fill_uniform(tt_x, TT_B * TT_D, -1, 1, &seed);
    if (!(ctx = th_context())) return th_exit_code();
    test_threads_agree(ctx);
    test_shared_trainer(ctx);
    test_own_messages(ctx);
    test_free_while_stepping(ctx);
    /* the runner then runs this file again on two */
    th_devices_lack(ctx, 2, "4 threads on one context of 2 device(s) (own trainers, eager ops, GEMM) end as each run alone");
    nncl_free(ctx);
    return th_exit_code();
}
