# build_target.sh - sourced by the test scripts that run a program of the
# tree beyond the library and tests (tests/run.sh's B, NNCL_SANITIZE,
# MAKE): sets top, B, bdir, ex (the examples' folder), MAKE and san, and
# defines build_target LABEL WHY TARGET, which brings make's TARGET up to
# date in the sanitizer setting of the run or prints "FAIL LABEL: WHY
# (the make command)" and exits 1.
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) bdir=$B ;; *) bdir=$top/$B ;; esac
ex=$bdir/examples
MAKE=${MAKE:-make}
san=0
[ "${NNCL_SANITIZE:-0}" = 1 ] && san=1
build_target() {
    if ! (cd "$top" && $MAKE --no-print-directory SANITIZE=$san B="$B" "$3") >/dev/null 2>&1; then
        echo "FAIL $1: $2 (make SANITIZE=$san B=$B $3)"
        exit 1
    fi
}
