#!/bin/sh
# test_python.sh - the Python package's tests (python/tests, pytest) against
# the library of this pass ($B/libnncl.so through NNCL_LIBRARY), each pytest
# result one PASS, FAIL or SKIP line. Skips, saying why, when no Python with
# pytest and NumPy is found ($PYTHON, else Debian's /usr/bin/python3, else
# python3). In the sanitized pass the ASan-built library needs the
# sanitizer runtimes first in the process: they are preloaded into Python
# (leak detection off there: the interpreter's own allocations at exit are
# not nncl's), and the install and RSS tests are left to the plain pass
# (python/tests/conftest.py says why). Builds $B/examples
# when missing (the README test compares with the C example). Run by
# tests/run.sh (B, NNCL_SANITIZE, MAKE, CC).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) bdir=$B ;; *) bdir=$top/$B ;; esac
MAKE=${MAKE:-make}
CC=${CC:-cc}
san=${NNCL_SANITIZE:-0}

py=
for p in ${PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, pytest' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "SKIP python: no Python with pytest and NumPy (apt-get install python3-pytest python3-numpy)"
    exit 0
fi
if [ ! -e "$bdir/libnncl.so" ]; then
    echo "FAIL python: no $bdir/libnncl.so (make B=$B lib)"
    exit 1
fi
(cd "$top" && $MAKE --no-print-directory SANITIZE=$san B="$B" examples) >/dev/null 2>&1 ||
    echo "note: the examples did not build; the README test skips its comparison with C"

dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-python.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
preload=
if [ "$san" = 1 ]; then
    for r in libasan.so libubsan.so; do
        f=$($CC -print-file-name=$r 2>/dev/null)
        case "$f" in /*) [ -e "$f" ] && preload="$preload${preload:+ }$(readlink -f "$f")" ;; esac
    done
    if [ -z "$preload" ]; then
        echo "SKIP python: the sanitized pass: $CC names no libasan.so to preload into Python"
        exit 0
    fi
fi

# pytest's results as JUnit XML, turned into the runner's lines
(
    cd "$top/python" || exit 1
    if [ -n "$preload" ]; then
        LD_PRELOAD=$preload
        ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
        export LD_PRELOAD ASAN_OPTIONS
    fi
    NNCL_LIBRARY=$bdir/libnncl.so NNCL_EXAMPLES=$bdir/examples NNCL_SANITIZE=$san CC=$CC \
        PYTHONDONTWRITEBYTECODE=1 exec "$py" -m pytest -p no:cacheprovider -q --junitxml="$dir/results.xml" tests
) >"$dir/pytest.log" 2>&1
rc=$?
if [ ! -s "$dir/results.xml" ]; then
    echo "FAIL python: pytest wrote no results (status $rc)"
    tail -n 30 "$dir/pytest.log" | sed 's/^/    /'
    exit 1
fi
"$py" - "$dir/results.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET

def one_line(s, n=300):
    s = " ".join((s or "").split())
    return s if len(s) <= n else s[:n] + "..."

for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = "python: %s::%s" % (case.get("classname", "").rsplit(".", 1)[-1], case.get("name"))
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    skipped = case.find("skipped")
    if bad is not None:
        print("FAIL %s: %s" % (name, one_line(bad.get("message"))))
    elif skipped is not None:
        print("SKIP %s (%s)" % (name, one_line(skipped.get("message"))))
    else:
        print("PASS %s" % name)
PYEOF
# a failure is printed as FAIL above; the log says more
if grep -q '^FAILED\|^ERROR' "$dir/pytest.log"; then
    grep -E '^E  ' "$dir/pytest.log" | head -n 20 | sed 's/^/    /'
fi
exit 0
