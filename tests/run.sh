#!/bin/sh
# run.sh - the test runner: runs every built test program and every
# tests/test_*.sh script, counts the PASS, FAIL and SKIP lines they print,
# counts a program that crashes or exits non-zero without saying FAIL as one
# failure, and ends with the summary line "N passed, N failed, N skipped".
# B names the build folder, or several separated by spaces (the plain and
# the sanitized build of `make test`): each is run in turn and the last line
# is the total of all. A folder holding .sanitize was built with ASan+UBSan
# and runs with the options below.
#
# A program that skips checks for want of a second device (a SKIP line
# saying "two devices" or "second device") runs again where PoCL can give
# them: with POCL_DEVICES="pthread pthread", and with one PoCL device beside
# Mesa's rusticl (RUSTICL_ENABLE=llvmpipe) when rusticl is installed. When
# those runs had their devices, the first run's two-device SKIP lines become
# COVERED and do not count as skipped.
B=${B:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/nncl-tests.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
# a test that hangs counts as failed instead of stalling CI
limit=${NNCL_TEST_TIMEOUT:-600}
# PoCL compiles a work-group function per kernel and local size, and the
# tests launch over many odd shapes: with an empty kernel cache, compiling
# took most of a run (one op-table program 255 s cold, 44 s warm).
# Unspecialised, PoCL compiles one per kernel (that program 144 s cold, 49 s
# warm). The kernels' results do not depend on it; the bench and programs
# keep PoCL's default. POCL_WORK_GROUP_SPECIALIZATION=1 tests that instead.
POCL_WORK_GROUP_SPECIALIZATION=${POCL_WORK_GROUP_SPECIALIZATION:-0}
export POCL_WORK_GROUP_SPECIALIZATION
if command -v timeout >/dev/null 2>&1; then tmo="timeout $limit"; else tmo=; fi

pass=0 fail=0 skip=0

md_skip='^SKIP .*(two devices|second device)'
md_pocl=0 md_rusticl=0
if command -v clinfo >/dev/null 2>&1; then
    env POCL_DEVICES="pthread pthread" RUSTICL_ENABLE= clinfo -l 2>/dev/null |
        awk '/^Platform/ { p = /Portable Computing Language/ } p && /Device/ { n++ } END { exit n < 2 }' && md_pocl=1
    [ $md_pocl = 1 ] && env POCL_DEVICES=pthread RUSTICL_ENABLE=llvmpipe clinfo -l 2>/dev/null |
        awk '/^Platform/ { p = /rusticl/ } p && /Device/ { n++ } END { exit n < 1 }' && md_rusticl=1
fi

# count NAME LOGFILE STATUS START: adds the log's results to the folder's
# counts; the summary line ends with the seconds since START (date +%s), so
# that a CI log shows where the run's time goes
count() {
    p=$(grep -c '^PASS ' "$2")
    f=$(grep -c '^FAIL ' "$2")
    s=$(grep -c '^SKIP ' "$2")
    if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
        if [ "$3" -eq 124 ] && [ -n "$tmo" ]; then
            echo "FAIL $1: no result after $limit s"
        else
            echo "FAIL $1: exited with status $3"
        fi
        tail -n 20 "$2" | sed 's/^/    /'
        f=1
    fi
    grep -E '^(FAIL|SKIP) ' "$2"
    echo "$1: $p passed, $f failed, $s skipped ($(( $(date +%s) - $4 )) s)"
    bp=$((bp + p)) bf=$((bf + f)) bs=$((bs + s))
}

# run SAN COMMAND...: runs the command, with the sanitizer settings when SAN
# is 1. allocator_may_return_null: a huge allocation fails as with plain
# malloc (the tests of size checks rely on it) instead of aborting. Leaks
# inside the OpenCL runtimes are suppressed by tests/lsan.supp, which names
# only their libraries. Mesa's clover driver dlopens its gallium pipe
# drivers and unloads them again, so leaks inside those have no library name
# to be suppressed by: the sanitized run hides them from clover (rusticl and
# PoCL do not use them). detect_stack_use_after_return: every instrumented
# frame lives on ASan's fake stack, whose redzones stay. On the thread's own
# stack they do not: a C++ exception thrown inside an OpenCL driver (clover
# throws while loading and in clGetPlatformIDs) makes ASan unpoison the
# whole stack above the throw, so the arrays of every frame live across
# nncl_init (main's, and those of the functions inlined into it) lost their
# redzones where clover is installed and an overflow of them passed.
run() {
    if [ "$1" = 1 ]; then
        shift
        (
            ASAN_OPTIONS=${NNCL_ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=1}
            LSAN_OPTIONS=suppressions=$top/tests/lsan.supp:print_suppressions=0$lsan_extra
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
            GALLIUM_PIPE_SEARCH_DIR=${NNCL_GALLIUM_PIPE_SEARCH_DIR:-$out/no-pipe-drivers}
            export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS GALLIUM_PIPE_SEARCH_DIR
            exec "$@"
        )
    else
        shift
        "$@"
    fi
}

# run_log SAN LOG COMMAND...: run with the output in LOG. LeakSanitizer's
# tracer can crash at exit while it reads the dynamic TLS of libraries the
# OpenCL drivers loaded and unloaded again ("Tracer caught signal 11", after
# a "DTLS" entry with a bogus range under verbosity=1): that is the tool
# failing, not a leak found. Such a run is said and run once more without
# scanning thread-local storage for pointers (use_tls=0), which can only
# report more leaks, never fewer; the second run counts.
lsan_extra=
run_log() {
    r_san=$1 r_log=$2
    shift 2
    run "$r_san" "$@" >"$r_log" 2>&1
    r_rc=$?
    if [ "$r_san" = 1 ] && grep -q '^Tracer caught signal' "$r_log" &&
        grep -q 'LeakSanitizer has encountered a fatal error' "$r_log"; then
        echo "note: LeakSanitizer's tracer crashed in $(basename "$r_log" .log); running it again with use_tls=0"
        lsan_extra=:use_tls=0
        run "$r_san" "$@" >"$r_log" 2>&1
        r_rc=$?
        lsan_extra=
    fi
    return $r_rc
}

# md_run SAN NAME KIND COMMAND...: runs the command on two devices (KIND
# pocl: two PoCL devices; rusticl: PoCL beside rusticl) and counts it;
# fails when it still lacked a second device.
md_run() {
    m_san=$1 m_name=$2 m_kind=$3 m_start=$(date +%s)
    shift 3
    if [ "$m_kind" = pocl ]; then
        run_log "$m_san" "$out/$m_name.md.log" env POCL_DEVICES="pthread pthread" RUSTICL_ENABLE= "$@"
    else
        run_log "$m_san" "$out/$m_name.md.log" env POCL_DEVICES=pthread RUSTICL_ENABLE=llvmpipe "$@"
    fi
    m_rc=$?
    # a skip the first run counted already (not for want of a device) once only
    awk 'NR == FNR { if (/^SKIP /) seen[$0] = 1; next } !($0 in seen)' "$out/$m_name.log" "$out/$m_name.md.log" \
        >"$out/$m_name.md2.log"
    count "$m_name [two devices: $m_kind]" "$out/$m_name.md2.log" $m_rc $m_start
    ! grep -Eq "$md_skip" "$out/$m_name.md.log"
}

# one SAN NAME COMMAND...: runs a test program or script and counts it; when
# it skipped two-device checks, again on two devices (md_run) where PoCL
# can give them.
one() {
    o_san=$1 o_name=$2 o_start=$(date +%s)
    shift 2
    run_log "$o_san" "$out/$o_name.log" "$@"
    o_rc=$?
    if [ $md_pocl = 1 ] && grep -Eq "$md_skip" "$out/$o_name.log"; then
        covered=1
        md_run "$o_san" "$o_name" pocl "$@" || covered=0
        if [ $md_rusticl = 1 ]; then md_run "$o_san" "$o_name" rusticl "$@" || covered=0; fi
        if [ $covered = 1 ]; then
            echo "$o_name: $(grep -Ec "$md_skip" "$out/$o_name.log") two-device checks skipped here ran in the two-device runs"
            sed -E "s/$md_skip/COVERED &/" "$out/$o_name.log" >"$out/$o_name.cov" && mv "$out/$o_name.cov" "$out/$o_name.log"
        fi
    fi
    count "$o_name" "$out/$o_name.log" $o_rc $o_start
}

for b in $B; do
    bp=0 bf=0 bs=0
    san=0
    if [ -f "$b/.sanitize" ]; then
        san=1
        mkdir -p "$out/no-pipe-drivers"
        echo "== $b: AddressSanitizer + UndefinedBehaviorSanitizer"
    else
        echo "== $b"
    fi
    for t in "$b"/tests/test_*; do
        [ -x "$t" ] && [ -f "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        one $san "$(basename "$t")" $tmo "$t"
    done
    for s in "$top"/tests/test_*.sh; do
        [ -f "$s" ] || continue
        one $san "$(basename "$s")" env B="$b" NNCL_SANITIZE=$san $tmo sh "$s"
    done
    echo "$b: $bp passed, $bf failed, $bs skipped"
    pass=$((pass + bp)) fail=$((fail + bf)) skip=$((skip + bs))
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
