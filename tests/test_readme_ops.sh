#!/bin/sh
# test_readme_ops.sh - README.md against the source: its table of ops (the
# lines between "<!-- ops:" and "<!-- /ops -->", each op as `name`
# (`builder`, ...)) names every op of src/graph/ops.def once and no other,
# each with at least one builder, and every builder it names is declared in
# include/nncl.h; its table of environment variables (between "<!-- env:"
# and "<!-- /env -->") lists every name src/ passes to getenv and no other.
# Run by tests/run.sh.
top=$(cd "$(dirname "$0")/.." && pwd)
readme=$top/README.md
LC_ALL=C
export LC_ALL
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-readme.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
failed=0

# lists LABEL A WHY_A B WHY_B: with both sorted lists A and B holding
# lines, only_a and only_b are set to the lines of each that the other
# lacks (space-separated); an empty one is a FAIL LABEL: its WHY (status 1)
lists() {
    if [ ! -s "$2" ]; then failed=1; echo "FAIL $1: $3"; return 1; fi
    if [ ! -s "$4" ]; then failed=1; echo "FAIL $1: $5"; return 1; fi
    only_a=$(comm -23 "$2" "$4" | tr '\n' ' ')
    only_b=$(comm -13 "$2" "$4" | sort -u | tr '\n' ' ')
}

# block START: the README's lines between "<!-- START" and "<!-- /START -->"
block() { awk -v s="<!-- $1" -v e="<!-- /$1 -->" 'index($0, e) == 1 { on = 0 } on { print } index($0, s) == 1 { on = 1 }' "$readme"; }

# --- the ops
sed -n 's/^NNCL_OP([A-Z0-9_]*, *\([a-z0-9_]*\),.*/\1/p' "$top/src/graph/ops.def" | sort >"$dir/def"
block ops >"$dir/ops.md"
# one "name builder builder ..." line per op of the table
grep -o '`[a-z0-9_]*` ([^)]*)' "$dir/ops.md" | tr -d '`(),' >"$dir/pairs"
cut -d' ' -f1 "$dir/pairs" | sort >"$dir/listed"
if lists "readme ops" "$dir/def" "no NNCL_OP line read from src/graph/ops.def" \
    "$dir/listed" "README.md has no op table between <!-- ops: ... --> and <!-- /ops -->"; then
    twice=$(uniq -d "$dir/listed" | tr '\n' ' ')
    nobuilder=$(awk 'NF < 2 { printf "%s ", $1 }' "$dir/pairs")
    if [ -z "$only_a$only_b$twice$nobuilder" ]; then
        echo "PASS readme ops: the README's op table names the $(wc -l <"$dir/def") ops of ops.def, each once with its builders"
    else
        failed=1; echo "FAIL readme ops: README.md's op table and src/graph/ops.def differ:" \
            "${only_a:+missing from README: $only_a}${only_b:+not in ops.def: $only_b}" \
            "${twice:+listed twice: $twice}${nobuilder:+without a builder: $nobuilder}" | tr -s ' ' 
    fi
fi
# every builder named is public
sed -n 's/^NNCL_API [a-z_ ]*\*\{0,1\}\(nncl_[a-z0-9_]*\)(.*/\1/p' "$top/include/nncl.h" | sort -u >"$dir/api"
cut -d' ' -f2- "$dir/pairs" | tr ' ' '\n' | sed '/^$/d' | sort -u >"$dir/builders"
unknown=$(comm -23 "$dir/builders" "$dir/api" | tr '\n' ' ')
if [ ! -s "$dir/builders" ]; then
    failed=1; echo "FAIL readme ops: the README's op table names no builder"
elif [ -z "$unknown" ]; then
    echo "PASS readme ops: the $(wc -l <"$dir/builders") builders the table names are declared in include/nncl.h"
else
    failed=1; echo "FAIL readme ops: builders in README.md's op table not declared in include/nncl.h: $unknown"
fi

# --- the environment variables
grep -rhoE 'getenv\("[A-Za-z0-9_]+"\)' "$top/src" | sed 's/getenv("\(.*\)")/\1/' | sort -u >"$dir/read"
block env | sed -n 's/^| *\(`[^|]*\)|.*/\1/p' | grep -o '`[A-Za-z0-9_]*`' | tr -d '`' | sort -u >"$dir/documented"
if lists "readme env" "$dir/read" "no getenv(\"NAME\") found under src/" \
    "$dir/documented" "README.md has no table of variables between <!-- env: ... --> and <!-- /env -->"; then
    if [ -z "$only_a$only_b" ]; then
        echo "PASS readme env: the README's table lists the $(wc -l <"$dir/read") variables src/ reads, and no other"
    else
        failed=1; echo "FAIL readme env: README.md's table of environment variables and src/'s getenv calls differ:" \
            "${only_a:+read but not documented: $only_a}${only_b:+documented but not read: $only_b}" | tr -s ' ' 
    fi
fi
exit $failed
