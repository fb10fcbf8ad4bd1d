#!/bin/sh
# run.sh - the test runner: runs every built test program, counts the PASS,
# FAIL and SKIP lines they print, counts a program that crashes or exits
# non-zero without saying FAIL as one failure, and ends with the summary line.
B=${B:-build}
out=${TMPDIR:-/tmp}/nncl-tests.$$
mkdir -p "$out"
pass=0 fail=0 skip=0
for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    "$t" >"$out/$name.log" 2>&1
    rc=$?
    p=$(grep -c '^PASS ' "$out/$name.log")
    f=$(grep -c '^FAIL ' "$out/$name.log")
    s=$(grep -c '^SKIP ' "$out/$name.log")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited with status $rc"
        tail -n 20 "$out/$name.log" | sed 's/^/    /'
        f=1
    fi
    grep -E '^(FAIL|SKIP) ' "$out/$name.log"
    echo "$name: $p passed, $f failed, $s skipped"
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
rm -rf "$out"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
