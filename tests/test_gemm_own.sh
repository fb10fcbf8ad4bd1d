#!/bin/sh
# test_gemm_own.sh - the op checks (every op against its double reference
# and finite differences, poisoned outputs, every device) and the
# multi-device equality tests again with every matrix product forced onto
# nncl's own GEMM kernels (NNCL_GEMM=own); the plain pass of the runner
# covers the default choice by measurement (auto). Result lines are passed
# through marked "[own]". Run by tests/run.sh (B).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) bdir=$B ;; *) bdir=$top/$B ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-gemm-own.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
status=0
for t in test_op_table test_graph test_conv test_norm test_trainer; do
    if [ ! -x "$bdir/tests/$t" ]; then
        echo "SKIP [own] $t: $bdir/tests/$t is not built"
        continue
    fi
    # one cache folder for all: products measured once serve the others
    NNCL_GEMM=own NNCL_CACHE_DIR=$dir "$bdir/tests/$t" >"$dir/$t.log" 2>&1
    rc=$?
    sed -n 's/^\(PASS\|FAIL\|SKIP\) /\1 [own] /p' "$dir/$t.log"
    if [ $rc -ne 0 ]; then
        if ! grep -q '^FAIL ' "$dir/$t.log"; then
            echo "FAIL [own] $t: exited with status $rc"
            tail -n 8 "$dir/$t.log" | sed 's/^/    /'
        fi
        status=1
    fi
done
exit $status
