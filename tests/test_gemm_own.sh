#!/bin/sh
# test_gemm_own.sh - the op checks of the ops with matrix products (against
# their double reference and finite differences, poisoned outputs, every
# device) and the multi-device equality tests again with every product
# forced onto nncl's own GEMM kernels (NNCL_GEMM=own); the plain pass of
# the runner covers the default choice by measurement (auto). Result lines
# are passed through marked "[own]". Then the kernels a GPU gets (NNCL_GEMM_VARIANTS=gpu:
# the local-memory kernel first, src/gemm/gemm_own.c) on the CPU devices CI has:
# every GEMM variant, conv2d's op checks and the PyTorch comparisons (half
# storage included), marked "[gpu set]" (the op table's passes in the plain
# build only, see below). Then the op checks on a network's
# input with the 3x3 path forced (NNCL_CONV_3X3=1, src/ops/conv3.c;
# the plain pass times it against the others), marked "[3x3]". Run by
# tests/run.sh (B).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) bdir=$B ;; *) bdir=$top/$B ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-gemm-own.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
status=0

# pass MARK CACHE ENV... -- TEST [ARG]: one test program under ENV, its
# result lines marked; CACHE a cache folder shared by the pass's programs
# (products measured once serve the others)
pass() {
    mark=$1 cache=$2
    shift 2
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    t=$1
    if [ ! -x "$bdir/tests/$t" ]; then
        echo "SKIP [$mark] $t: $bdir/tests/$t is not built"
        return
    fi
    mkdir -p "$cache"
    # shellcheck disable=SC2086 # envs: VAR=value words
    env $envs NNCL_CACHE_DIR="$cache" "$bdir/tests/$@" >"$dir/$t.log" 2>&1
    rc=$?
    # LeakSanitizer's tracer crashing at exit is the tool failing, not a
    # leak found: once more without scanning thread-local storage, as
    # tests/run.sh does for the programs it runs itself
    if [ $rc -ne 0 ] && grep -q '^Tracer caught signal' "$dir/$t.log" &&
        grep -q 'LeakSanitizer has encountered a fatal error' "$dir/$t.log"; then
        echo "note: LeakSanitizer's tracer crashed in [$mark] $t; running it again with use_tls=0"
        # shellcheck disable=SC2086
        env $envs LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0" NNCL_CACHE_DIR="$cache" "$bdir/tests/$@" \
            >"$dir/$t.log" 2>&1
        rc=$?
    fi
    sed -n "s/^\(PASS\|FAIL\|SKIP\) /\1 [$mark] /p" "$dir/$t.log"
    if [ $rc -ne 0 ]; then
        if ! grep -q '^FAIL ' "$dir/$t.log"; then
            echo "FAIL [$mark] $t: exited with status $rc"
            tail -n 8 "$dir/$t.log" | sed 's/^/    /'
        fi
        # a sanitizer's own report lines, unindented: the runner's rerun
        # after LeakSanitizer's tracer crashed looks for them
        grep -E '^Tracer caught signal|Sanitizer has encountered a fatal error' "$dir/$t.log"
        status=1
    fi
}

# The sanitized build (NNCL_SANITIZE=1) checks host code: there the op
# table's two passes are left out, their host code being what the choice by
# measurement already runs in that build (it takes the own kernels for most
# shapes on CPU devices), and they were most of this script's time in CI.
# NNCL_GEMM chooses the kernels of linear, matmul, conv2d and rnn_scan
# alone: the op table runs only the rows whose graph holds one of them
# (--gemm), and test_norm, whose graphs hold none, is not run again.
full=1
[ "${NNCL_SANITIZE:-0}" = 1 ] && full=0
[ $full = 1 ] && pass own "$dir/own" NNCL_GEMM=own -- test_op_table --gemm
# the sanitized pass: the host code each setting reaches beyond the
# default's (the convolution's own path, the GPU kernel set's launches),
# not every program again
if [ $full = 1 ]; then own_tests="test_graph test_conv test_trainer"; else own_tests=test_conv; fi
for t in $own_tests; do
    pass own "$dir/own" NNCL_GEMM=own -- $t
done
pass "gpu set" "$dir/gpu" NNCL_GEMM_VARIANTS=gpu -- test_gemm
[ $full = 1 ] && pass "gpu set" "$dir/gpu" NNCL_GEMM_VARIANTS=gpu -- test_op_table conv2d
[ $full = 1 ] && pass "gpu set" "$dir/gpu" NNCL_GEMM_VARIANTS=gpu -- test_torch_ops
pass 3x3 "$dir/3x3" NNCL_CONV_3X3=1 -- test_op_table "on the input"
exit $status
