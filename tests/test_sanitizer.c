/* test_sanitizer.c - the sanitized pass catches a read past a local array
 * in a frame that lives across nncl_init, wherever it runs. An OpenCL
 * driver that throws C++ exceptions while it loads (Mesa's clover does, in
 * its constructor and in clGetPlatformIDs) makes ASan unpoison the whole
 * stack above the throw; with the frames on the thread's stack, a test's
 * overflow of such an array then passed on machines with clover installed
 * and failed on those without. tests/run.sh runs the sanitized pass with
 * detect_stack_use_after_return=1, which keeps the frames on ASan's fake
 * stack: this program checks, in a child process with the runner's options,
 * that the read is reported as a stack-buffer-overflow. Without ASan it says
 * SKIP. */
#include "harness.h"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_ASAN 1
#endif
#endif

#ifdef TS_ASAN
/* through a pointer the compiler cannot see through, so that only ASan's
 * shadow (not UBSan's bounds of a known array) can catch the read */
static int ts_read(const int *a, int i) { return a[i]; }
static int (*volatile ts_reader)(const int *, int) = ts_read;

static void ts_child(int fd) {
    int shape[3] = {2, 3, 4};
    nncl_context *ctx = NULL;
    dup2(fd, 2);
    if (nncl_init(NULL, &ctx) == NNCL_OK) nncl_free(ctx); /* loads every driver */
    printf("read %d\n", ts_reader(shape, 3));
    _exit(0);
}

int main(void) {
    const char *name = "ASan reports a read past an array of a frame live across nncl_init";
    char path[] = "/tmp/nncl-sanitizer-XXXXXX", buf[8192];
    int fd = mkstemp(path), st = 0;
    size_t n;
    pid_t pid;
    FILE *f;
    if (fd < 0) {
        th_fail(name, "mkstemp failed");
        return th_exit_code();
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) ts_child(fd);
    close(fd);
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        th_fail(name, "fork or waitpid failed");
        remove(path);
        return th_exit_code();
    }
    f = fopen(path, "r");
    n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    remove(path);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        th_fail(name, "the child read past the array and exited 0 (ASAN_OPTIONS=%s)",
                getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "");
    else if (!strstr(buf, "stack-buffer-overflow"))
        th_fail(name, "the child ended with status %d without a stack-buffer-overflow report: %.300s", st, buf);
    else
        th_pass("%s", name);
    return th_exit_code();
}
#else
int main(void) {
    th_skip("ASan reports a read past an array of a frame live across nncl_init", "not built with AddressSanitizer");
    return th_exit_code();
}
#endif
