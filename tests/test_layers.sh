#!/bin/sh
# test_layers.sh - the source folders are layers, each using only those
# below it: runtime < gemm < graph < ops < train < io < report. Fails when
#  - a file of a folder includes a header of a higher folder (its own
#    folder's and lower folders' headers are fine);
#  - a file of bench/ or examples/ includes anything but the public header
#    nncl.h and the files of its own folder;
#  - a header of a folder declares a function that a higher folder's
#    object defines (a declaration belongs in its provider's header);
#  - an object of a folder calls a function defined in an object of a
#    higher folder (the call graph from nm on $B/obj). A reference to data
#    is no call: the op table's rows (graph/ops_table.c) are how the op
#    families register with the graph that dispatches to them.
# The last two need the library built in $B (default build; a path without
# spaces).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case $B in /*) obj=$B/obj ;; *) obj=$top/$B/obj ;; esac
cd "$top" || exit 1
LC_ALL=C
export LC_ALL
layers="runtime gemm graph ops train io report"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nncl-layers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

rank() {
    r=0
    for l in $layers; do
        [ "$l" = "$1" ] && { echo $r; return; }
        r=$((r + 1))
    done
    echo -1
}

# every src folder is a known layer
failed=0
bad=0
for d in src/*/; do
    d=$(basename "$d")
    [ "$(rank "$d")" -ge 0 ] || { echo "src/$d is no layer: add it to the order in tests/test_layers.sh"; bad=1; }
done
if [ $bad = 0 ]; then echo "PASS layers_folders"; else failed=1; echo "FAIL layers_folders"; fi

# includes between layers
: >"$tmp/inc"
for f in src/*/*.c src/*/*.h; do
    l=$(basename "$(dirname "$f")")
    r=$(rank "$l")
    sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" | while read -r h; do
        case $h in */*) ;; *) continue ;; esac
        hr=$(rank "${h%%/*}")
        [ "$hr" -gt "$r" ] && echo "$f includes $h (layer ${h%%/*} is above $l)"
    done >>"$tmp/inc"
done
if [ -s "$tmp/inc" ]; then cat "$tmp/inc"; failed=1; echo "FAIL layers_includes"; else echo "PASS layers_includes"; fi

# bench and examples: the public header and their own files only
: >"$tmp/pub"
for f in bench/*.c bench/*.h examples/*.c examples/*.h; do
    [ -f "$f" ] || continue
    sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" | while read -r h; do
        [ "$h" = nncl.h ] && continue
        case $h in */*) ;; *) [ -f "$(dirname "$f")/$h" ] && continue ;; esac
        echo "$f includes $h: only nncl.h and the files of its folder"
    done >>"$tmp/pub"
done
if [ -s "$tmp/pub" ]; then cat "$tmp/pub"; failed=1; echo "FAIL layers_public_only"; else echo "PASS layers_public_only"; fi

if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP layers_declarations (no nm)"
    echo "SKIP layers_calls (no nm)"
    exit 0
fi
# the objects of today's sources (a build folder may keep stale ones)
objs= n_obj=0 n_src=0
for c in src/*/*.c; do
    n_src=$((n_src + 1))
    o=$obj/${c#src/}
    o=${o%.c}.o
    [ -f "$o" ] && objs="$objs $o" n_obj=$((n_obj + 1))
done
if [ "$n_obj" -lt "$n_src" ]; then
    echo "SKIP layers_declarations (the library is not built in $B: $n_obj objects for $n_src sources)"
    echo "SKIP layers_calls (the library is not built in $B)"
    exit 0
fi

# what each object defines: "symbol layer type file", functions only (T)
for o in $objs; do
    l=$(basename "$(dirname "$o")")
    [ "$(rank "$l")" -ge 0 ] || continue
    nm -g --defined-only "$o" | awk -v l="$l" -v f="${o#$obj/}" '$2 == "T" { print $3, l, f }'
done | sort -k1,1 >"$tmp/defs"

# declarations: function names a header declares at file scope
: >"$tmp/decl"
for h in src/*/*.h; do
    l=$(basename "$(dirname "$h")")
    r=$(rank "$l")
    grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *]nncl_[a-z0-9_]+\(' "$h" | sed -E 's/^[^(]*[ *](nncl_[a-z0-9_]+)\(.*/\1/' |
        sort -u | join - "$tmp/defs" | while read -r s dl df; do
            [ "$(rank "$dl")" -gt "$r" ] && echo "$h declares $s, defined above it in $df"
        done >>"$tmp/decl"
done
if [ -s "$tmp/decl" ]; then cat "$tmp/decl"; failed=1; echo "FAIL layers_declarations"; else echo "PASS layers_declarations"; fi

# calls: undefined symbols of an object that a higher layer's object defines
: >"$tmp/calls"
for o in $objs; do
    l=$(basename "$(dirname "$o")")
    r=$(rank "$l")
    [ "$r" -ge 0 ] || continue
    nm -u "$o" | awk '{ print $NF }' | sort -u | join - "$tmp/defs" | while read -r s dl df; do
        [ "$(rank "$dl")" -gt "$r" ] && echo "${o#$obj/} calls $s of $df"
    done >>"$tmp/calls"
done
if [ -s "$tmp/calls" ]; then cat "$tmp/calls"; failed=1; echo "FAIL layers_calls"; else echo "PASS layers_calls"; fi
exit $failed
