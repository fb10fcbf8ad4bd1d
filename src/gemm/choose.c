/* choose.c - the one harness that times the candidates of a choice (GEMM
 * kernels in src/gemm/gemm_pick.c, a conv2d layer's paths in
 * src/ops/conv_pick.c, CLBlast's parameter sets in src/gemm/tune_search.c,
 * which runs one set at a time against a double product) and the one test
 * that their results agree. The
 * caller lists its candidates, runs each once untimed and checks it
 * against the first (nncl__choose_agree), then hands the ones that passed
 * to nncl__choose_time with a function that queues one run of candidate i.
 *
 * Timing: rounds, a batch of back-to-back runs of each candidate per round
 * and one wait at its end (as a step queues its kernels: a wait per run
 * would add the driver's wake-up to every run, as much as a small
 * product's whole time on PoCL), keeping each one's fastest time per run.
 * Rounds, not one candidate's runs after another's: a machine that slows
 * down for a while slows every candidate of those rounds alike, and rounds
 * in alternating order: a device that speeds up while it is measured (a
 * GPU raising its clocks from idle) favours no candidate. Round 0 runs
 * each once and sizes its batch (CHOOSE_BATCH_SECONDS, at most 16 runs),
 * then CHOOSE_ROUNDS rounds; a candidate CHOOSE_SLOWER times slower than
 * the fastest is timed no more (on CPUs CLBlast is often many times slower
 * than the own kernels, and its rounds would be most of the choosing
 * time), judged by round 1's batches, or by round 0's single run where
 * that took over CHOOSE_SURE (a GPU leaving idle runs its first short runs
 * slowly, so judging by a short round-0 run could drop the fastest
 * candidate), and one whose run took over CHOOSE_LONG by the faster of
 * that run and one more (a single run each can keep a slower kernel).
 * Then the close contenders, those within CHOOSE_CLOSE of the fastest, run
 * more rounds among themselves, about CHOOSE_CLOSE_SECONDS each: a
 * mid-sized product on a CPU is a batch of one, and a busy machine's noise
 * is as large as the difference between them, while a choice stays for
 * every later run. A candidate whose run fails leaves the rounds (logged). */
#include "gemm/gemm.h"
#include <math.h>

#define CHOOSE_TOL 1e-3             /* max-norm disagreement, relative to the largest |reference| */
#define CHOOSE_ROUNDS 3             /* timed rounds after the one that sizes the batches */
#define CHOOSE_BATCH_SECONDS 0.0005 /* runs of a candidate per round: about this long */
#define CHOOSE_SLOWER 3.0           /* slower than the fastest by this: no more rounds */
#define CHOOSE_SURE 0.01            /* seconds: a single run this long decides CHOOSE_SLOWER */
#define CHOOSE_LONG 0.2             /* seconds: a run this long is timed twice, not in batches */
#define CHOOSE_CLOSE 1.25           /* within this of the fastest after the rounds: a close contender */
#define CHOOSE_CLOSE_SECONDS 0.02   /* close contenders' more rounds: about this long each */
#define CHOOSE_CLOSE_ROUNDS 16      /* at most this many */

int nncl__choose_agree(const float *ref, const float *out, size_t n, double *worst) {
    double big = 0, w = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)out[i] - ref[i]);
        if (fabs(ref[i]) > big) big = fabs(ref[i]);
        if (!(d <= w)) w = d; /* NaN too */
    }
    if (worst) *worst = w;
    return w <= CHOOSE_TOL * (big + 1);
}

nncl_status nncl__choose_time(nncl_context *ctx, nncl_device *dev, int n, nncl__choose_run run, void *user,
                              double *t) {
    double t0, dt, fastest, spent[NNCL__CHOOSE_MAX];
    int batch[NNCL__CHOOSE_MAX], r, q, i, j, close;
    if (n > NNCL__CHOOSE_MAX)
        return nncl__fail(ctx, NNCL_ERR_INVALID_ARGUMENT, "%d candidates to time, more than %d", n, NNCL__CHOOSE_MAX);
    for (i = 0; i < n; i++) spent[i] = 0, batch[i] = 0;
    for (r = 0; r <= CHOOSE_ROUNDS + CHOOSE_CLOSE_ROUNDS; r++) {
        for (fastest = HUGE_VAL, i = 0; i < n; i++)
            if (t[i] < fastest) fastest = t[i];
        if (r == 1 || r == 2) /* out of the running: time saved */
            for (i = 0; i < n; i++)
                if (t[i] > CHOOSE_SLOWER * fastest && (r == 2 || t[i] > CHOOSE_SURE)) batch[i] = 0;
        if (r > CHOOSE_ROUNDS) { /* close contenders alone, while two have run less than CHOOSE_CLOSE_SECONDS */
            for (close = 0, i = 0; i < n; i++) {
                if (t[i] > CHOOSE_CLOSE * fastest || t[i] > CHOOSE_LONG || spent[i] >= CHOOSE_CLOSE_SECONDS) batch[i] = 0;
                close += batch[i] != 0;
            }
            if (close < 2) break;
        }
        for (q = 0; q < n; q++) {
            nncl_status st = NNCL_OK;
            i = r % 2 ? n - 1 - q : q;
            if (t[i] == HUGE_VAL || (r && batch[i] == 0) || (r > 1 && t[i] > CHOOSE_LONG)) continue;
            t0 = nncl__seconds();
            for (j = 0; st == NNCL_OK && j < (r ? batch[i] : 1); j++) st = run(user, i);
            if (st == NNCL_OK && clFinish(dev->queue) != CL_SUCCESS) st = NNCL_ERR_DEVICE;
            if (st != NNCL_OK) {
                nncl__log(ctx, NNCL_LOG_WARN, "choice: candidate %d fails while timed: %s", i, nncl__thread_error());
                t[i] = HUGE_VAL;
                batch[i] = 0;
                continue;
            }
            dt = nncl__seconds() - t0;
            if (r == 0) {
                t[i] = dt;
                batch[i] = dt > CHOOSE_LONG                       ? 1
                           : dt * 16 < CHOOSE_BATCH_SECONDS ? 16
                                                               : (int)(CHOOSE_BATCH_SECONDS / dt) + 1;
            } else if ((r == 1 && t[i] <= CHOOSE_LONG) || dt / batch[i] < t[i]) {
                t[i] = dt / batch[i]; /* round 0's single run replaced: it paid a wait a batch shares */
            }
            if (r) spent[i] += dt;
        }
    }
    return NNCL_OK;
}

#undef CHOOSE_TOL
#undef CHOOSE_ROUNDS
#undef CHOOSE_BATCH_SECONDS
#undef CHOOSE_SLOWER
#undef CHOOSE_SURE
#undef CHOOSE_LONG
#undef CHOOSE_CLOSE
#undef CHOOSE_CLOSE_SECONDS
#undef CHOOSE_CLOSE_ROUNDS
