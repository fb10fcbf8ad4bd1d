#!/bin/sh
# test_tsan.sh - ThreadSanitizer over a short multi-device run: the trainer
# tests and the threads sharing one context (test_threads) built with
# -fsanitize=thread (into build-tsan, OpenMP off: libgomp is
# not instrumented) run on two devices (POCL_DEVICES="pthread pthread" when
# PoCL is present) and must end without a single report. tests/tsan.supp
# names only the OpenCL runtimes' libraries. Plain pass only (the sanitized
# pass is ASan, which cannot be combined with TSan).
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${NNCL_SANITIZE:-0}" = 1 ]; then
    echo "SKIP tsan: not in the sanitizer pass (ASan and TSan do not combine; the plain pass runs it)"
    exit 0
fi
cc=${CC:-cc}
if ! echo 'int main(void){return 0;}' | $cc -x c -fsanitize=thread - -o /dev/null 2>/dev/null; then
    echo "SKIP tsan: $cc cannot build with -fsanitize=thread"
    exit 0
fi
# built from scratch each time (about 30 s on two cores), so that no object
# of an earlier state of the sources is mixed in
b=$top/build-tsan
rm -rf "$b"
mkdir -p "$b"
${MAKE:-make} -s -C "$top" B="$b" OPENMP=0 CFLAGS="-O1 -g -fsanitize=thread" LDFLAGS=-fsanitize=thread \
    "$b/tests/test_trainer_guard" "$b/tests/test_trainer" "$b/tests/test_threads" >"$b/build.log" 2>&1 ||
    { echo "FAIL tsan: the -fsanitize=thread build failed"; tail "$b/build.log"; exit 1; }
# Two PoCL devices. Rusticl is left out: its worker threads synchronise in
# code TSan cannot see, so the host memory they read for a non-blocking
# write looks unsynchronised with nncl's next write, and their stacks are
# lost (nothing to suppress by library name).
unset RUSTICL_ENABLE
two=0
if clinfo -l 2>/dev/null | grep -q "Portable Computing Language"; then
    two=1
    POCL_DEVICES="pthread pthread"
    NNCL_TEST_DEVICES=pocl
    export POCL_DEVICES NNCL_TEST_DEVICES
fi
log=$(mktemp "${TMPDIR:-/tmp}/nncl-tsan.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp halt_on_error=0 report_signal_unsafe=0"
rc=0
for t in test_trainer_guard test_trainer test_threads; do
    (cd "$top" && "$b/tests/$t") >"$log" 2>&1
    st=$?
    n=$(grep -c "WARNING: ThreadSanitizer" "$log")
    # the checks that ran on two devices ("2 devices", "2 device(s)", "two devices")
    devs=$(grep -c -E "^PASS .*(2 device|two devices)" "$log")
    if [ "$n" -ne 0 ]; then
        echo "FAIL tsan $t: $n ThreadSanitizer reports"
        grep -A14 "WARNING: ThreadSanitizer" "$log" | head -60
        rc=1
    elif [ "$st" -ne 0 ] || grep -q "^FAIL" "$log"; then
        echo "FAIL tsan $t: the run failed (status $st)"
        grep "^FAIL" "$log"
        rc=1
    elif [ $two = 1 ] && [ "$devs" -eq 0 ]; then
        echo "FAIL tsan $t: no check ran on two devices (POCL_DEVICES=\"$POCL_DEVICES\")"
        grep "^SKIP" "$log" | sed 's/^/    /' # indented: not this script's skips
        rc=1
    else
        echo "PASS tsan $t: no ThreadSanitizer report ($devs two-device checks)"
    fi
done
[ $two = 1 ] || echo "SKIP tsan on two devices: no PoCL to give two devices (the runs above had the devices present)"
exit $rc
