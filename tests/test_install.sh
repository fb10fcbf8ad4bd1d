#!/bin/sh
# test_install.sh - `make install` into a staging folder (DESTDIR, PREFIX=/usr):
# the files and soname links are there, the shared library exports only
# nncl_* symbols, nncl.pc resolves through pkg-config, a program links and
# runs against the shared library and, with `pkg-config --static`, against
# the static one; `make uninstall` removes everything again. Run by
# tests/run.sh in the plain pass (B); the sanitized pass has nothing to add
# and says so.
if [ "${NNCL_SANITIZE:-0}" = 1 ]; then
    echo "SKIP install: not in the sanitizer pass (the plain pass installs the plain build)"
    exit 0
fi
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) ;; *) B=$top/$B ;; esac
MAKE=${MAKE:-make}
CC=${CC:-cc}
ver=$(sed -n 's/^VERSION *:= *//p' "$top/Makefile")
fails=0
fail() { echo "FAIL install: $*"; fails=$((fails + 1)); }

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP install: pkg-config not installed (apt-get install pkg-config)"
    exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-install.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
stage=$dir/stage
lib=$stage/usr/lib

# the shared library's exports: public functions only, and some of them
# (nm of a missing or foreign file prints nothing to filter)
if ! syms=$(nm -D --defined-only "$B/libnncl.so.$ver" 2>&1); then
    fail "nm -D $B/libnncl.so.$ver failed: $(echo $syms | head -c 300)"
else
    extra=$(echo "$syms" | awk '{print $3}' | grep -v -E '^(nncl_|_init$|_fini$|_edata$|_end$|__bss_start$)')
    public=$(echo "$syms" | awk '$3 ~ /^nncl_/' | wc -l)
    if [ -n "$extra" ]; then
        fail "libnncl.so exports non-public symbols: $(echo $extra | head -c 300)"
    elif ! echo "$syms" | awk '{print $3}' | grep -qx nncl_init; then
        fail "libnncl.so.$ver does not export nncl_init ($public nncl_* symbols)"
    else
        echo "PASS install: libnncl.so.$ver exports only nncl_* symbols ($public)"
    fi
fi

if ! $MAKE -s -C "$top" B="$B" install DESTDIR="$stage" PREFIX=/usr >"$dir/install.log" 2>&1; then
    fail "make install failed:"
    sed 's/^/    /' "$dir/install.log" | tail -n 20
    exit 1
fi
ok=1
for f in usr/include/nncl.h usr/lib/libnncl.a "usr/lib/libnncl.so.$ver" usr/lib/pkgconfig/nncl.pc; do
    [ -f "$stage/$f" ] || { fail "$f not installed"; ok=0; }
done
[ "$(readlink "$lib/libnncl.so.0")" = "libnncl.so.$ver" ] || { fail "libnncl.so.0 is not a link to libnncl.so.$ver"; ok=0; }
[ "$(readlink "$lib/libnncl.so")" = "libnncl.so.0" ] || { fail "libnncl.so is not a link to libnncl.so.0"; ok=0; }
readelf -d "$lib/libnncl.so.$ver" | grep -q 'SONAME.*\[libnncl\.so\.0\]' || { fail "soname is not libnncl.so.0"; ok=0; }
[ $ok = 1 ] && echo "PASS install: header, libraries, soname links and nncl.pc in DESTDIR/usr"

cat >"$dir/app.c" <<'EOF'
#include <nncl.h>
#include <stdio.h>
int main(void) {
    nncl_device_info info[8];
    nncl_context *ctx = NULL;
    nncl_tensor *t = NULL;
    int n = 0, shape[1] = {4};
    float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
    if (nncl_devices_list(info, 8, &n) != NNCL_OK || n < 1) return 1;
    if (nncl_init(NULL, &ctx) != NNCL_OK) return 2;
    if (nncl_tensor_create(ctx, 0, 1, shape, &t) != NNCL_OK || nncl_tensor_write(t, x, 4) != NNCL_OK ||
        nncl_tensor_read(t, y, 4) != NNCL_OK || y[3] != 4)
        return 3;
    nncl_tensor_free(t);
    nncl_free(ctx);
    printf("ok %d devices, %s\n", n, nncl_status_str(NNCL_ERR_SHAPE));
    return 0;
}
EOF
# pkg-config as a user of the staged tree would see it after installing
pc() { PKG_CONFIG_SYSROOT_DIR=$stage PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config "$@"; }
if ! flags=$(pc --cflags --libs nncl); then
    fail "pkg-config --cflags --libs nncl does not resolve"
elif ! $CC -std=c99 -o "$dir/app_shared" "$dir/app.c" $flags >"$dir/cc.log" 2>&1; then
    fail "linking against the installed shared library failed: $CC $flags"; sed 's/^/    /' "$dir/cc.log" | head
elif ! LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$dir/app_shared" | grep -q "libnncl.so.0 => $lib/libnncl.so.0"; then
    fail "app_shared does not load the installed libnncl.so.0"
elif ! out=$(LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$dir/app_shared" 2>&1); then
    fail "app_shared failed: $out"
else
    echo "PASS install: pkg-config --cflags --libs nncl ($flags) links and runs shared"
fi

# static: with only libnncl.a in the staged libdir, the --static flags must
# name every library it needs
rm -f "$lib"/libnncl.so*
if ! flags=$(pc --cflags --static --libs nncl); then
    fail "pkg-config --static --libs nncl does not resolve"
elif ! $CC -std=c99 -o "$dir/app_static" "$dir/app.c" $flags >"$dir/cc.log" 2>&1; then
    fail "static linking failed: $CC $flags"; sed 's/^/    /' "$dir/cc.log" | head
elif ldd "$dir/app_static" | grep -q libnncl; then
    fail "app_static still loads a shared libnncl"
elif ! out=$("$dir/app_static" 2>&1); then
    fail "app_static failed: $out"
else
    echo "PASS install: pkg-config --static --libs nncl ($flags) links and runs static"
fi

$MAKE -s -C "$top" B="$B" uninstall DESTDIR="$stage" PREFIX=/usr >"$dir/uninstall.log" 2>&1 ||
    fail "make uninstall failed"
left=$(find "$stage" ! -type d)
if [ -n "$left" ]; then fail "make uninstall left: $left"; else echo "PASS install: make uninstall removes every file"; fi
[ $fails -eq 0 ]
