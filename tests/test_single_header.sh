#!/bin/sh
# test_single_header.sh - the single-file header dist/nncl.h (make single)
# on its own: copied alone into an empty folder, a program that defines
# NNCL_IMPLEMENTATION is compiled as C99 and as C++11 with nothing but the
# OpenCL, CLBlast, libm and pthread libraries (no -fopenmp: OpenMP pragmas
# must be optional), linked with a second translation unit that only uses the
# API, and run: it lists the devices, adds two tensors and runs a GEMM on
# every device, checking the results. Run by tests/run.sh (B, NNCL_SANITIZE).
top=$(cd "$(dirname "$0")/.." && pwd)
hdr=$top/dist/nncl.h
CC=${CC:-cc}
CXX=${CXX:-c++}
case "$CC" in *clang*) [ "$CXX" = c++ ] && CXX=clang++ ;; esac
libs="-lclblast -lOpenCL -lm -lpthread"
# the implementation must compile warning-free (rules of the project)
cwarn="-Wall -Wextra -pedantic -Wshadow -Werror"
cxxwarn="-Wall -Wextra -Wshadow -Werror"
san=
[ "${NNCL_SANITIZE:-0}" = 1 ] && san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if [ ! -f "$hdr" ]; then
    echo "FAIL single_header: $hdr missing (make single)"
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-single.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$hdr" "$dir/nncl.h"
cd "$dir" || exit 1

cat >main.c <<'EOF'
/* The implementation goes in this translation unit; a second inclusion of
 * the header must add nothing. */
#define NNCL_IMPLEMENTATION
#include "nncl.h"
#include "nncl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C"
#endif
const char *other_tu_status_name(void);

#define CHECK(ctx, call)                                                             \
    do {                                                                             \
        nncl_status st_ = (call);                                                    \
        if (st_ != NNCL_OK) {                                                        \
            printf("FAIL %s: %s: %s\n", label, #call, nncl_last_error(ctx));         \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static int run_device(const char *label, nncl_context *ctx, int d) {
    enum { M = 17, N = 13, K = 11 };
    int s2[2] = {3, 5}, sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N}, i, j, k;
    float x[15], y[15], z[15], a[M * K], b[K * N], c[M * N];
    double err = 0, ref = 0;
    nncl_tensor *tx = NULL, *ty = NULL, *tz = NULL, *ta = NULL, *tb = NULL, *tc = NULL;
    for (i = 0; i < 15; i++) x[i] = (float)i * 0.5f, y[i] = 100.0f - (float)i, z[i] = -1e30f;
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, s2, &tx));
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, s2, &ty));
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, s2, &tz));
    CHECK(ctx, nncl_tensor_write(tx, x, 15));
    CHECK(ctx, nncl_tensor_write(ty, y, 15));
    CHECK(ctx, nncl_add(ctx, tx, ty, tz));
    CHECK(ctx, nncl_tensor_read(tz, z, 15));
    for (i = 0; i < 15; i++)
        if (z[i] != x[i] + y[i]) {
            printf("FAIL %s: add: element %d is %g, want %g\n", label, i, z[i], x[i] + y[i]);
            return 1;
        }
    for (i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    for (i = 0; i < M * N; i++) c[i] = -1e30f;
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, sa, &ta));
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, sb, &tb));
    CHECK(ctx, nncl_tensor_create(ctx, d, 2, sc, &tc));
    CHECK(ctx, nncl_tensor_write(ta, a, M * K));
    CHECK(ctx, nncl_tensor_write(tb, b, K * N));
    CHECK(ctx, nncl_gemm(ctx, 0, 0, 1.0f, ta, tb, 0.0f, tc));
    CHECK(ctx, nncl_tensor_read(tc, c, M * N));
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0;
            for (k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + j];
            err += (c[i * N + j] - s) * (c[i * N + j] - s);
            ref += s * s;
        }
    if (!(err / ref < 1e-10)) {
        printf("FAIL %s: gemm: normalised squared error %g\n", label, err / ref);
        return 1;
    }
    nncl_tensor_free(tx), nncl_tensor_free(ty), nncl_tensor_free(tz);
    nncl_tensor_free(ta), nncl_tensor_free(tb), nncl_tensor_free(tc);
    return 0;
}

int main(int argc, char **argv) {
    const char *label = argc > 1 ? argv[1] : "single_header";
    nncl_device_info infos[16];
    nncl_config cfg = nncl_config_default();
    nncl_context *ctx = NULL;
    int n = 0, d, bad = 0;
    CHECK(NULL, nncl_devices_list(infos, 16, &n));
    if (n < 1) {
        printf("FAIL %s: no device listed\n", label);
        return 1;
    }
    cfg.devices = getenv("NNCL_TEST_DEVICES") ? getenv("NNCL_TEST_DEVICES") : "all";
    CHECK(NULL, nncl_init(&cfg, &ctx));
    for (d = 0; d < nncl_device_count(ctx); d++) {
        nncl_device_info info;
        CHECK(ctx, nncl_device_info_get(ctx, d, &info));
        if (run_device(label, ctx, d)) bad = 1;
        else printf("PASS %s: %d devices listed, add and gemm on d%d %s (%s)\n", label, n, d, info.name, info.platform);
    }
    nncl_free(ctx);
    if (other_tu_status_name() != nncl_status_str(NNCL_ERR_SHAPE)) {
        printf("FAIL %s: the second translation unit sees another nncl_status_str\n", label);
        bad = 1;
    }
    return bad;
}
EOF

cat >other.c <<'EOF'
/* A second translation unit: the API only, no implementation. */
#include "nncl.h"
const char *other_tu_status_name(void) { return nncl_status_str(NNCL_ERR_SHAPE); }
EOF

# build LABEL LINKER MAIN-COMPILE... : compiles main.c and other.c (other.c
# always as C99), links, prints PASS/FAIL for the build and runs the program
fails=0
build() {
    label=$1 link=$2
    shift 2
    if ! "$@" -c -o main.o main.c >build.log 2>&1 ||
       ! $CC -std=c99 $cwarn $san -c -o other.o other.c >>build.log 2>&1 ||
       ! $link $san -o prog main.o other.o $libs >>build.log 2>&1; then
        echo "FAIL $label: does not build with nothing but dist/nncl.h and $libs:"
        echo "    $*"
        head -n 30 build.log | sed 's/^/    /'
        fails=$((fails + 1))
        return
    fi
    echo "PASS $label builds: $*"
    if ! ./prog "$label" >run.log 2>&1; then
        grep -E '^(PASS|FAIL) ' run.log
        grep -q '^FAIL ' run.log || { echo "FAIL $label: program failed:"; tail -n 20 run.log | sed 's/^/    /'; }
        fails=$((fails + 1))
        return
    fi
    cat run.log
}

build "single_header C99${san:+ +asan}" "$CC" $CC -std=c99 $cwarn -O1 $san -x c
if command -v "$CXX" >/dev/null 2>&1; then
    build "single_header C++11${san:+ +asan}" "$CXX" $CXX -std=c++11 $cxxwarn -O1 $san -x c++
else
    echo "SKIP single_header C++11: no C++ compiler ($CXX)"
fi
[ $fails -eq 0 ]
