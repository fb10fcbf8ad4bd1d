#!/bin/sh
# run.sh - the test runner: runs every built test program and every
# tests/test_*.sh script, counts the PASS, FAIL and SKIP lines they print,
# counts a program that crashes or exits non-zero without saying FAIL as one
# failure, and so a program that exits 0 without a single result line (it
# checked nothing: a check left out says SKIP with the reason), and ends with
# the summary line "N passed, N failed, N skipped".
# B names the build folder, or several separated by spaces (the plain and
# the sanitized build of `make test`): they run side by side, a folder's
# runner that is done taking the others' entries from their ends (one after
# another with NNCL_TEST_PARALLEL=0), each folder printing a block of its
# own, and the last line is the total of all. A folder holding .sanitize was built
# with ASan+UBSan and runs with the options below. NNCL_TESTS, a list of
# names (test_norm test_install.sh), runs only those programs and scripts.
#
# A program that skips checks for want of a second device (a SKIP line
# "SKIP name: ... two devices ..." or "... second device ...") runs again
# where PoCL can give them: with POCL_DEVICES="pthread pthread", and with one
# PoCL device beside Mesa's rusticl (RUSTICL_ENABLE=llvmpipe) when rusticl is
# installed. A two-device SKIP line becomes COVERED, and does not count as
# skipped, when every such run printed PASS for a check of the same name
# ("PASS name", "PASS name (...)" or "PASS name: ..."). A run again counts
# only the lines the first run did not print: a check counts once.
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
# the op table builds the most kernels, and with an empty PoCL cache on a
# 2-core AVX2 machine, beside the sanitizer folder, it outran 900 s while
# still passing: a hang is told by twice the limit there
table_limit=$((limit * 2))
tmo_table=${tmo:+timeout $table_limit}

pass=0 fail=0 skip=0

md_skip='^SKIP .*(two devices|second device)'
. "$top/tests/devices.sh"
md_pocl=0 md_rusticl=0
pocl_twins && md_pocl=1
[ $md_pocl = 1 ] && rusticl_here POCL_DEVICES=pthread RUSTICL_ENABLE=llvmpipe && md_rusticl=1

# count NAME LOGFILE STATUS START [NOTE]: adds the log's results to the
# folder's counts; the summary line ends with the seconds since START (date
# +%s), so that a CI log shows where the run's time goes, then NOTE. A log
# without a result line from a program that exited 0 is a failure, except
# for a run again (NOTE given), whose lines may all be the first run's.
count() {
    p=$(grep -c '^PASS ' "$2")
    f=$(grep -c '^FAIL ' "$2")
    s=$(grep -c '^SKIP ' "$2")
    if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
        if [ "$3" -eq 124 ] && [ -n "$tmo" ]; then
            lim=$limit
            [ "$1" = test_op_table ] && lim=$table_limit
            echo "FAIL $1: no result after $lim s"
        else
            echo "FAIL $1: exited with status $3"
        fi
        # a sanitizer's report starts far above the log's end
        awk '/ERROR: [A-Za-z]*Sanitizer|runtime error:/ { n = 6 } n-- > 0 || /^SUMMARY: / { print "    " $0 }' "$2"
        tail -n 20 "$2" | sed 's/^/    /'
        f=1
    elif [ $((p + f + s)) -eq 0 ] && [ -z "$5" ]; then
        echo "FAIL $1: exited 0 without a PASS, FAIL or SKIP line: it checked nothing"
        tail -n 5 "$2" | sed 's/^/    /'
        f=1
    fi
    grep -E '^(FAIL|SKIP) ' "$2"
    echo "$1: $p passed, $f failed, $s skipped ($(( $(date +%s) - $4 )) s)$5"
    echo "$p $f $s" >>"$e_counts"
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

# md_name: awk function, the check's name in a two-device SKIP line (without
# "SKIP "): what comes before the last ": " ahead of the last "two devices"
# or "second device" (names may hold ": " themselves); "" when none.
md_name='function md_name(t,    i, k, c) {
    k = 0
    for (i = 1; i <= length(t); i++)
        if (substr(t, i, 11) == "two devices" || substr(t, i, 13) == "second device") k = i
    c = 0
    for (i = 1; i < k; i++) if (substr(t, i, 2) == ": ") c = i
    return c ? substr(t, 1, c - 1) : ""
}'

# md_run SAN NAME KIND COMMAND...: runs the command on two devices (KIND
# pocl: two PoCL devices; rusticl: PoCL beside rusticl) and counts the lines
# the first run did not print; NAME.KIND.pass then lists the names of the
# first run's two-device skips that this run passed.
md_run() {
    m_san=$1 m_name=$2 m_kind=$3 m_start=$(date +%s)
    shift 3
    if [ "$m_kind" = pocl ]; then
        run_log "$m_san" "$fout/$m_name.md.log" env POCL_DEVICES="pthread pthread" RUSTICL_ENABLE= "$@"
    else
        run_log "$m_san" "$fout/$m_name.md.log" env POCL_DEVICES=pthread RUSTICL_ENABLE=llvmpipe "$@"
    fi
    m_rc=$?
    awk 'NR == FNR { if (/^(PASS|SKIP) /) seen[$0] = 1; next } !($0 in seen)' "$fout/$m_name.log" "$fout/$m_name.md.log" \
        >"$fout/$m_name.md2.log"
    m_again=$(awk 'NR == FNR { if (/^(PASS|SKIP) /) seen[$0] = 1; next } ($0 in seen) { n++ } END { print n + 0 }' \
        "$fout/$m_name.log" "$fout/$m_name.md.log")
    count "$m_name [two devices: $m_kind]" "$fout/$m_name.md2.log" $m_rc $m_start \
        "; $m_again lines as in the one-device run, counted there"
    awk "$md_name"'
        NR == FNR { if (/^SKIP / && (n = md_name(substr($0, 6))) != "") want[n] = 1; next }
        /^PASS / {
            t = substr($0, 6)
            for (n in want)
                if (t == n || index(t, n " (") == 1 || index(t, n ": ") == 1) got[n] = 1
        }
        END { for (n in got) print n }' "$fout/$m_name.log" "$fout/$m_name.md.log" >"$fout/$m_name.$m_kind.pass"
}

# one SAN NAME COMMAND...: runs a test program or script and counts it; when
# it skipped two-device checks, again on two devices (md_run) where PoCL
# can give them, and marks COVERED the skips every such run passed.
one() {
    o_san=$1 o_name=$2 o_start=$(date +%s)
    shift 2
    run_log "$o_san" "$fout/$o_name.log" "$@"
    o_rc=$?
    if [ $md_pocl = 1 ] && grep -Eq "$md_skip" "$fout/$o_name.log"; then
        md_run "$o_san" "$o_name" pocl "$@"
        o_runs="$fout/$o_name.pocl.pass"
        if [ $md_rusticl = 1 ]; then
            md_run "$o_san" "$o_name" rusticl "$@"
            o_runs="$o_runs $fout/$o_name.rusticl.pass"
        fi
        # shellcheck disable=SC2086 # o_runs: file names without spaces
        awk -v runs="$(echo $o_runs | wc -w)" "$md_name"'
            FILENAME != ARGV[ARGC - 1] { passed[$0]++; next }
            /^SKIP / && (n = md_name(substr($0, 6))) != "" {
                if (passed[n] == runs) { print "COVERED " $0; cov++; next }
                unc++
            }
            { print }
            END {
                printf "%d two-device checks skipped here passed in the two-device runs", cov > "/dev/stderr"
                if (unc) printf "; %d did not (counted as skipped)", unc > "/dev/stderr"
            }' $o_runs "$fout/$o_name.log" >"$fout/$o_name.cov" 2>"$fout/$o_name.covmsg" &&
            mv "$fout/$o_name.cov" "$fout/$o_name.log"
        echo "$o_name: $(cat "$fout/$o_name.covmsg")"
    fi
    count "$o_name" "$fout/$o_name.log" $o_rc $o_start
}

# chosen PATH: the program or script is to run (NNCL_TESTS); ran lists them
chosen() {
    [ -z "$NNCL_TESTS" ] && return 0
    for c in $NNCL_TESTS; do [ "$c" = "$(basename "$1")" ] && ran="$ran $c" && return 0; done
    return 1
}
[ -n "$NNCL_TESTS" ] && echo "note: NNCL_TESTS=\"$NNCL_TESTS\": only those run"

# Each folder of B is a list of entries (p:NAME a program of the folder,
# s:NAME a script), and its settings are shell variables suffixed with the
# folder's number k: f_b_k the folder, san_k, table_env_k (the op table's
# extra settings), cache_k (NNCL_CACHE_DIR, "" to inherit), list_k and
# rev_k (the list from its end).
# folder_set K: makes folder K's settings current (f_b, fout, san, table_env).
folder_set() {
    eval "f_b=\$f_b_$1 san=\$san_$1 table_env=\$table_env_$1 f_cache=\$cache_$1"
    fout=$out/$1
}

# entry K ENTRY: runs ENTRY of folder K unless it was claimed already (a
# folder made for its name under $out/claim: mkdir is atomic, so of two
# runners only one gets it) and returns 1 then; its lines go to
# $fout/NAME.out and its counts, a line per count, to $fout/NAME.counts.
entry() {
    folder_set "$1"
    n=${2#?:}
    mkdir "$out/claim/$1.$n" 2>/dev/null || return 1
    e_counts=$fout/$n.counts
    : >"$e_counts"
    (
        if [ -n "$f_cache" ]; then
            # built programs are the same in every folder (their entries are
            # checksummed: one read while being written is built again)
            for bin in "${f_cache%/*}"/*.bin; do
                [ -f "$bin" ] && [ ! -e "$f_cache/${bin##*/}" ] && ln "$bin" "$f_cache/" 2>/dev/null
            done
            NNCL_CACHE_DIR=$f_cache && export NNCL_CACHE_DIR
        fi
        # the test programs build each kernel family on its own program
        # (NNCL_BUNDLE=0, src/train/plan.c): a plan's bundle is a program
        # of its own text, so PoCL compiled a kernel again in every program
        # whose plans bundled it with other families; the scripts' examples
        # and bench keep the bundles
        case $2 in p:*) NNCL_BUNDLE=${NNCL_BUNDLE:-0} && export NNCL_BUNDLE ;; esac
        case $2 in
        p:test_op_table) one $san "$n" $table_env $tmo_table "$f_b/tests/$n" ;;
        p:*) one $san "$n" $tmo "$f_b/tests/$n" ;;
        *) one $san "$n" env B="$f_b" NNCL_SANITIZE=$san $tmo sh "$top/tests/$n" ;;
        esac
    ) >"$fout/$n.out"
}

# header K: the first line of folder K's block
header() {
    folder_set "$1"
    if [ "$san" = 1 ]; then echo "== $f_b: AddressSanitizer + UndefinedBehaviorSanitizer"; else echo "== $f_b"; fi
}

# total K: the rest of folder K's block after its entries: the names of
# NNCL_TESTS it lacks, and its counts, which also go to $out/K.counts
total() {
    folder_set "$1"
    eval "t_missing=\$missing_$1"
    t_p=0 t_f=0 t_s=0
    for c in $t_missing; do echo "FAIL $c: named in NNCL_TESTS, not built in $f_b"; t_f=$((t_f + 1)); done
    eval "t_list=\$list_$1"
    for i in $t_list; do
        if [ ! -f "$fout/${i#?:}.counts" ]; then
            echo "FAIL ${i#?:}: it did not run"
            t_f=$((t_f + 1))
            continue
        fi
        while read -r cp cf cs; do t_p=$((t_p + cp)) t_f=$((t_f + cf)) t_s=$((t_s + cs)); done <"$fout/${i#?:}.counts"
    done
    echo "$f_b: $t_p passed, $t_f failed, $t_s skipped"
    echo "$t_p $t_f $t_s" >"$out/$1.counts"
}

# The folders' lists. A sanitized folder's op table runs on PoCL alone: its
# host code is the same for every device, and rusticl builds each kernel
# again at every launch, most of that program's time; the plain build runs
# it on both vendors. Each folder after the first keeps nncl's stored
# choices (NNCL_CACHE_DIR) in a subfolder of its own: choices are timed, so
# two processes timing one shape at once may store different ones, and a
# test comparing the bits of two runs would see the kernels change under it.
# The programs the first folder's cache holds are linked into it before
# each entry.
nf=$(echo $B | wc -w)
parallel=0
[ "$nf" -gt 1 ] && [ "${NNCL_TEST_PARALLEL:-1}" != 0 ] && parallel=1
mkdir -p "$out/claim"
k=0
for b in $B; do
    k=$((k + 1))
    mkdir -p "$out/$k"
    s_san=0 s_env= s_cache= ran='' progs='' scripts='' missing=''
    if [ -f "$b/.sanitize" ]; then
        s_san=1 s_env="env RUSTICL_ENABLE="
        mkdir -p "$out/no-pipe-drivers"
    fi
    if [ $k -gt 1 ] && [ $parallel = 1 ]; then
        s_cache=${NNCL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nncl}/$(basename "$b")
        mkdir -p "$s_cache"
    fi
    for t in "$b"/tests/test_*; do
        [ -x "$t" ] && [ -f "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        chosen "$t" && progs="$progs p:$(basename "$t")"
    done
    for s in "$top"/tests/test_*.sh; do
        [ -f "$s" ] && chosen "$s" && scripts="$scripts s:$(basename "$s")"
    done
    for c in $NNCL_TESTS; do
        case " $ran " in *" $c "*) ;; *) missing="$missing $c" ;; esac
    done
    # side by side, each folder after the first runs its scripts first, so
    # that its programs come after the first folder's have filled PoCL's
    # kernel cache and the two seldom compile the same kernels at once
    if [ $k -gt 1 ] && [ $parallel = 1 ]; then l="$scripts$progs"; else l="$progs$scripts"; fi
    rev=
    for i in $l; do rev="$i $rev"; done
    eval "f_b_$k=\$b san_$k=\$s_san table_env_$k=\$s_env cache_$k=\$s_cache list_$k=\$l rev_$k=\$rev missing_$k=\$missing"
done

# runner K: one runner per folder, side by side (on 2 cores a test program
# mostly compiles kernels, which PoCL and rusticl do on one thread, so one
# folder at a time leaves a core idle). Runner K runs folder K's entries
# in order, then takes the other folders' entries not yet started from
# their ends, so that no core idles while a folder has work left; each
# entry runs with its own folder's settings. It prints a line per entry
# it ran (the entry's counts); the blocks print once all ran.
runner() {
    for j in $1 $(seq "$nf" | grep -vx "$1"); do
        if [ $j = "$1" ]; then eval "r_list=\$list_$j"; else eval "r_list=\$rev_$j"; fi
        for i in $r_list; do
            entry "$j" "$i" && echo "[$f_b] $(tail -n 1 "$fout/${i#?:}.out")"
        done
    done
}

# An interrupted runner (INT, TERM) ends the other runners too, which,
# started in the background, do not get the terminal's interrupt: no
# further program starts.
later=
trap '[ -n "$later" ] && kill $later 2>/dev/null; exit 130' INT TERM
if [ $parallel = 1 ]; then
    k=1
    while [ $k -lt "$nf" ]; do
        k=$((k + 1))
        runner $k &
        later="$later $!"
    done
    runner 1
    wait
    k=0
    while [ $k -lt "$nf" ]; do
        k=$((k + 1))
        header $k
        eval "l=\$list_$k"
        for i in $l; do cat "$out/$k/${i#?:}.out"; done
        total $k
    done
else
    # one folder after another, each entry's lines as it ends
    k=0
    while [ $k -lt "$nf" ]; do
        k=$((k + 1))
        header $k
        eval "l=\$list_$k"
        for i in $l; do entry $k "$i" && cat "$fout/${i#?:}.out"; done
        total $k
    done
fi
k=0
while [ $k -lt "$nf" ]; do
    k=$((k + 1))
    read -r bp bf bs <"$out/$k.counts"
    pass=$((pass + bp)) fail=$((fail + bf)) skip=$((skip + bs))
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
