/* harness.h - the small test framework every tests/test_*.c program uses:
 * result lines the runner counts ("PASS name", "FAIL name: why",
 * "SKIP name: why"), comparison against double-precision host references,
 * and the context over every OpenCL device present. */
#ifndef NNCL_TEST_HARNESS_H
#define NNCL_TEST_HARNESS_H
#include "nncl.h"
#include <stdio.h>

/* Context over every device present (NNCL_TEST_DEVICES overrides "all");
 * NULL when there is none, after printing why. */
nncl_context *th_context(void);

/* Prints "PASS " and the formatted name. */
void th_pass(const char *fmt, ...);
void th_fail(const char *name, const char *fmt, ...);
void th_skip(const char *name, const char *why);
/* Nonzero, after "SKIP name: needs two devices (...)", when ctx has fewer
 * than nd devices. tests/run.sh then runs the program again on two devices
 * and counts the skip as covered only when that run passes a check of the
 * same name: a check that needs two devices skips under its own name. */
int th_devices_lack(nncl_context *ctx, int nd, const char *name);
/* Exit code for main: 1 when any check failed. */
int th_exit_code(void);

/* A check inside a test function returning int (0 ok): on failure prints
 * FAIL with the condition and location and returns 1. */
#define TH_CHECK(name, cond)                                           \
    do {                                                                    \
        if (!(cond)) {                                                      \
            th_fail(name, "%s:%d: %s", __FILE__, __LINE__, #cond);          \
            return 1;                                                       \
        }                                                                   \
    } while (0)
#define TH_OK(name, ctx, call)                                              \
    do {                                                                    \
        nncl_status th_st_ = (call);                                        \
        if (th_st_ != NNCL_OK) {                                            \
            th_fail(name, "%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call,  \
                    nncl_status_str(th_st_), nncl_last_error(ctx));         \
            return 1;                                                       \
        }                                                                   \
    } while (0)

/* Normalised squared error sum (got-want)^2 / sum want^2 (plain squared error
 * when want is all zero). Returns a value > any tolerance (1e30) when got holds
 * a NaN or Inf. */
double th_nse(const float *got, const double *want, size_t n);
/* th_nse() <= tol, else prints FAIL with the error and the first bad index. */
int th_close(const char *name, const float *got, const double *want, size_t n, double tol);

/* Fills with a value no op produces, so an unwritten element is caught. */
void th_poison(float *x, size_t n);
/* Deterministic uniform values in [lo, hi). */
void th_fill_uniform(float *x, size_t n, float lo, float hi, unsigned *seed);
float th_uniform(unsigned *seed);
/* A new array (free()) of n such values from seed. */
float *th_random(size_t n, float lo, float hi, unsigned seed);

/* Short device description for test names: "d0 pthread-... (Portable ...)". */
const char *th_device_label(nncl_context *ctx, int d);
#endif
