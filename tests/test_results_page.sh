#!/bin/sh
# test_results_page.sh - bench/RESULTS.md against the files it cites. Every
# table of figures follows a line "Source: `results/FILE` ..., commit C,
# DATE"; for each row, the lines of FILE holding every word of the row's
# first cell must hold every figure of its other cells (a cell's words that
# contain a digit: 192.6, 1.58x, 1.53-1.70), as the file wrote them. Also:
# the files are named MACHINE-YYYY-MM-DD-WHAT.txt or .json, DATE is the
# file's date, C is a commit of this repository (where git can tell), every
# file under bench/results/ is cited and every cited file exists, and
# neither the page nor a file name tells the history of the runs (the
# pattern below). Run by tests/run.sh.
top=$(cd "$(dirname "$0")/.." && pwd)
page=$top/bench/RESULTS.md
dir=$top/bench/results
LC_ALL=C
export LC_ALL
if [ ! -f "$page" ]; then
    echo "FAIL results_page: $page is missing"
    exit 1
fi
failed=0

# the tables against their files
if awk -v dir="$dir" '
function words(s, out,    n, i, t, k) {  # the words of s, lower case, into out[1..]
    s = tolower(s)
    gsub(/\*\*|`/, "", s)
    gsub(/[();,:|]/, " ", s)
    n = split(s, t, /[ \t]+/)
    k = 0
    for (i = 1; i <= n; i++) if (t[i] != "") out[++k] = t[i]
    return k
}
function load(f,    line, n) {  # the cited file into lines[1..nlines]
    nlines = 0
    while ((getline line < f) > 0) lines[++nlines] = line
    close(f)
    return nlines
}
/^#/ { src = ""; next }  # a section starts: its tables cite their own files
/^Source:/ {
    src = ""; rows = 0
    if (match($0, /results\/[A-Za-z0-9._-]+/)) src = substr($0, RSTART + 8, RLENGTH - 8)
    if (src == "" || load(dir "/" src) == 0) { print "FAIL results_page: line " NR " cites no readable file: " $0; bad = 1; src = "" }
    next
}
/^\|/ {
    if ($0 ~ /^\|[-: |]+\|[ \t]*$/) { header_done = 1; next }  # the separator row
    if (!header_done) next                                   # the header row
    if (src == "") { print "FAIL results_page: line " NR ": a table without a Source line before it"; bad = 1; next }
    n = split($0, cell, "|")
    nk = words(cell[2], key)
    if (nk == 0) next
    # the words of the lines that hold every word of the key
    delete have; found = 0
    for (l = 1; l <= nlines; l++) {
        delete lw; m = words(lines[l], w)
        for (i = 1; i <= m; i++) lw[w[i]] = 1
        ok = 1
        for (i = 1; i <= nk; i++) if (!(key[i] in lw)) { ok = 0; break }
        if (!ok) continue
        found = 1
        for (i = 1; i <= m; i++) have[w[i]] = 1
    }
    if (!found) { print "FAIL results_page: line " NR ": no line of " src " holds \"" cell[2] "\""; bad = 1; next }
    for (c = 3; c < n; c++) {
        m = words(cell[c], w)
        for (i = 1; i <= m; i++)
            if (w[i] ~ /[0-9]/ && !(w[i] in have)) {
                print "FAIL results_page: line " NR ": " w[i] " (row " cell[2] ") is not in " src; bad = 1
            }
    }
    figures++
    next
}
{ header_done = 0 }
END {
    if (figures == 0) { print "FAIL results_page: no table of figures"; exit 1 }
    if (!bad) print "PASS results_page: " figures " rows of figures match the files they cite"
    exit bad
}' "$page"; then :; else failed=1; fi

# names, dates, commits, citations
bad=0
for f in "$dir"/*; do
    [ -f "$f" ] || continue
    b=$(basename "$f")
    if ! echo "$b" | grep -Eq '^[a-z0-9]+(-[a-z0-9]+)*-20[0-9]{2}-[01][0-9]-[0-3][0-9]-[a-z0-9-]+\.(txt|json)$'; then
        echo "FAIL results_names: $b is not named MACHINE-YYYY-MM-DD-WHAT.txt or .json"
        bad=1
    fi
    grep -q "results/$b" "$page" || { echo "FAIL results_names: $b is cited nowhere in bench/RESULTS.md"; bad=1; }
done
git=0
command -v git >/dev/null 2>&1 && git -C "$top" rev-parse --git-dir >/dev/null 2>&1 && git=1
grep '^Source:' "$page" >"${TMPDIR:-/tmp}/nncl-sources.$$"
while read -r line; do
    b=$(echo "$line" | sed -n 's/.*results\/\([A-Za-z0-9._-]*\).*/\1/p')
    [ -n "$b" ] || continue
    [ -f "$dir/$b" ] || { echo "FAIL results_names: bench/results/$b is cited but missing"; bad=1; continue; }
    fdate=$(echo "$b" | sed -n 's/.*-\(20[0-9][0-9]-[01][0-9]-[0-3][0-9]\)-.*/\1/p')
    case $line in *"$fdate"*) ;; *) echo "FAIL results_names: the Source line of $b does not give its date $fdate"; bad=1 ;; esac
    c=$(echo "$line" | sed -n 's/.*commit `\([0-9a-f]\{7,40\}\)`.*/\1/p')
    if [ -z "$c" ]; then
        echo "FAIL results_names: the Source line of $b names no commit"
        bad=1
    elif [ $git = 1 ] && ! git -C "$top" cat-file -e "$c^{commit}" 2>/dev/null; then
        echo "FAIL results_names: commit $c (for $b) is not in this repository"
        bad=1
    fi
done <"${TMPDIR:-/tmp}/nncl-sources.$$"
rm -f "${TMPDIR:-/tmp}/nncl-sources.$$"
if grep -iq 'sess[i]on' "$page" || ls "$dir" | grep -iq 'sess[i]on'; then
    echo "FAIL results_names: bench/RESULTS.md or a results file name tells the history of the runs (sess[i]on)"
    bad=1
fi
if [ $bad = 0 ]; then echo "PASS results_names: files named by machine and date, each cited with its date and commit"; else failed=1; fi
exit $failed
