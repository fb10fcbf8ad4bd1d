#!/bin/sh
# test_bench.sh - the bench program: a misspelt --only section is refused;
# then its quick mode on the devices present
# (NNCL_TEST_DEVICES narrows them): it must finish, print the table of
# every section `bench --list` names, write JSON that parses (checked with
# python3 when there is one, else SKIP) and holds every such section, each
# non-empty where this machine can measure it, plus a CSV and an SVG.
# Builds $B/bench/bench when missing. Run by tests/run.sh (B, NNCL_SANITIZE,
# MAKE).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) bdir=$B ;; *) bdir=$top/$B ;; esac
bench=$bdir/bench/bench
MAKE=${MAKE:-make}

# `make test` builds the library and tests, not the bench: bring it up to date
san=0
[ "${NNCL_SANITIZE:-0}" = 1 ] && san=1
if ! (cd "$top" && $MAKE --no-print-directory SANITIZE=$san B="$B" "$B/bench/bench") >/dev/null 2>&1; then
    if [ ! -x "$bench" ]; then
        echo "FAIL bench: $bench is missing and does not build (make SANITIZE=$san B=$B $B/bench/bench)"
        exit 1
    fi
    echo "(the bench did not rebuild; testing the existing $bench)"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-bench.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
devs=${NNCL_TEST_DEVICES:-all}
# The quick run goes to two PoCL devices where PoCL gives them (the
# multi-device sections run all the same), not to every device: rusticl,
# which builds a kernel at every launch, makes each of its figures a
# compile, and its training, checkpoint and choice timings took most of a
# run (10 minutes cold on 2 cores). Where rusticl was among the devices, a
# second short run trains the MLP on every device, so that the figures of
# mixed vendors are still checked. The sanitized build checks the host
# code, not the figures: there the quick run measures one square GEMM size
# for shorter repeats, trains the models the checks below read (not the
# LSTM, whose graph test_rnn checks under the sanitizers), on one PoCL
# device: a second PoCL device builds every program again
# (src/runtime/context.c), which doubled that pass's longest test, and the
# trainer's and pipeline's multi-device host code runs sanitized in
# test_trainer, test_pipeline and test_pipeline3.
. "$top/tests/devices.sh"
small= pocl= mixed=
[ "${NNCL_SANITIZE:-0}" = 1 ] && small="--sizes 64 --seconds 0.01 --models mlp,cnn,gpt"
if [ -z "$NNCL_TEST_DEVICES" ] && pocl_twins; then
    pocl="pthread pthread"
    devs=portable
    if [ -n "$small" ]; then
        pocl=pthread
    elif rusticl_here; then
        mixed=1
    fi
fi

# a misspelt section is refused, naming it and the sections there are,
# before any device is opened
"$bench" --only bogus >"$dir/only.out" 2>"$dir/only.err"
status=$?
if [ $status -eq 2 ] && [ ! -s "$dir/only.out" ] && grep -q '"bogus"' "$dir/only.err" &&
   grep -q 'gemm bandwidth launch build training' "$dir/only.err"; then
    echo "PASS bench: --only bogus refused with status 2 and the list of sections"
else
    echo "FAIL bench: --only bogus gave status $status: $(cat "$dir/only.err" "$dir/only.out" | head -n 3 | tr '\n' ' ')"
    exit 1
fi

start=$(date +%s)
# one repeat per figure: what is checked is that every section runs and
# reports
# shellcheck disable=SC2086 # small: options as words
env ${pocl:+POCL_DEVICES="$pocl" RUSTICL_ENABLE=} "$bench" --quick --repeats 1 $small --devices "$devs" --json "$dir/b.json" --csv "$dir/b.csv" --svg "$dir/b.svg" \
    >"$dir/out.txt" 2>"$dir/err.txt"
status=$?
if [ $status -ne 0 ]; then
    echo "FAIL bench: bench --quick --repeats 1 $small --devices $devs exited with status $status"
    tail -n 20 "$dir/err.txt" | sed 's/^/    /'
    exit 1
fi
end=$(date +%s)

# the terminal tables: one per section of `bench --list` (name, tab, title);
# the exit status alone is no check of its own
fails=0
if ! "$bench" --list >"$dir/sections.txt" || [ "$(wc -l <"$dir/sections.txt")" -lt 2 ]; then
    echo "FAIL bench: bench --list lists no sections"
    exit 1
fi
tab=$(printf '\t')
while IFS="$tab" read -r section title; do
    if ! awk -v t="== $title" 'index($0, t) == 1 { found = 1 } END { exit !found }' "$dir/out.txt"; then
        echo "FAIL bench: the table of section $section (\"$title\") is missing from the output"
        fails=$((fails + 1))
    fi
done <"$dir/sections.txt"
[ $fails -eq 0 ] && echo "PASS bench: --quick --repeats 1${small:+ $small} on \"$devs\" finished in $((end - start)) s and printed the table" \
    "of every section bench --list names ($(wc -l <"$dir/sections.txt"))"

if [ -s "$dir/b.csv" ] && head -n 1 "$dir/b.csv" | grep -q '^section,device,item,key,median' &&
   [ "$(wc -l <"$dir/b.csv")" -gt 20 ]; then
    echo "PASS bench: CSV written ($(wc -l <"$dir/b.csv") lines)"
else
    echo "FAIL bench: the CSV is missing or short"
    fails=$((fails + 1))
fi
if grep -q '<svg' "$dir/b.svg" 2>/dev/null && grep -q '</svg>' "$dir/b.svg" && grep -q '>MLP 784-128-10<' "$dir/b.svg" &&
   grep -q '>CNN (' "$dir/b.svg"; then
    echo "PASS bench: SVG chart written, MLP and CNN on panels of their own"
else
    echo "FAIL bench: no SVG chart, or not one panel per model"
    fails=$((fails + 1))
fi
# (the closing lines hold the caller's paths, which may be longer)
wide=$(grep -v '^wrote ' "$dir/out.txt" | awk 'length($0) > 100' | wc -l)
if [ "$wide" -eq 0 ]; then
    echo "PASS bench: no output line is wider than 100 columns"
else
    echo "FAIL bench: $wide output lines are wider than 100 columns, e.g.:"
    grep -v '^wrote ' "$dir/out.txt" | awk 'length($0) > 100' | head -n 2 | cut -c1-160 | sed 's/^/    /'
    fails=$((fails + 1))
fi
if [ "$(tail -n 3 "$dir/out.txt" | tr '\n' ' ')" = "wrote JSON $dir/b.json wrote CSV $dir/b.csv wrote SVG $dir/b.svg " ]; then
    echo "PASS bench: the closing lines name the files written"
else
    echo "FAIL bench: the closing lines do not name the files: $(tail -n 3 "$dir/out.txt" | tr '\n' ' ')"
    fails=$((fails + 1))
fi

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP bench: no python3 to parse the JSON"
    [ $fails -eq 0 ]
    exit
fi
# Parses the JSON, checks every section is there, and that what can be
# measured on any OpenCL device was: a GEMM rate and an nncl/raw ratio,
# bandwidth, launch times, a cold and a warm build, MLP training, the
# checkpoint rows of each model with and without checkpointing, and with
# two devices or more the pipeline rows.
if python3 - "$dir/b.json" "$dir/sections.txt" <<'EOF'
import json, math, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
with open(sys.argv[2]) as f:
    sections = [line.split("\t")[0] for line in f if line.strip()]
bad = []
for sec in ["bench"] + sections:
    if sec not in j:
        bad.append("section %s missing" % sec)
if bad:
    print("FAIL bench: " + "; ".join(bad))
    sys.exit(1)
n = j["bench"]["devices_in_context"]
def val(sec, dev, item_prefix, key):
    for row in j[sec]:
        if row["device"] == dev and row["item"].startswith(item_prefix) and key in row:
            v = row[key]
            return v["median"] if isinstance(v, dict) else v
    return None
def pos(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0
for d in range(n):
    checks = [("gemm", "100x128x784", "nncl_gflops"), ("gemm", "100x128x784", "raw_gflops"),
              ("gemm", "100x128x784", "own0_gflops"),
              ("gemm", "100x128x784", "nncl_over_raw"), ("bandwidth", "", "d2d_gbs"),
              ("bandwidth", "", "h2d_gbs"), ("launch", "add 4096 back", "nncl_us"),
              ("launch", "add 4096 back", "nncl_over_raw"), ("build", "kernels", "cold_ms"),
              ("build", "kernels", "warm_ms"), ("training", "mlp", "samples_s"), ("training", "gpt", "tokens_s")]
    for sec, item, key in checks:
        if not pos(val(sec, d, item, key)):
            bad.append("d%d %s/%s/%s is %r" % (d, sec, item, key, val(sec, d, item, key)))
    if not any(r["device"] == d for r in j["devices"]):
        bad.append("d%d not in devices" % d)
    if not any(r["device"] == d for r in j["monitor"]):
        bad.append("d%d not in monitor" % d)
    nse = val("gemm", d, "100x128x784", "nse_vs_cpu")
    if not (isinstance(nse, (int, float)) and nse < 1e-8):
        bad.append("d%d gemm result differs from the CPU (nse %r)" % (d, nse))
    ratio = val("training", d, "mlp", "mem_ratio")
    if not (pos(ratio) and ratio < 3):
        bad.append("d%d mlp memory ratio %r" % (d, ratio))
    # the checkpoint section: each model without and with checkpointing, well formed
    rows = {r["item"]: r for r in j["checkpoint"] if r["device"] == d}
    for model in ("cnn", "mlp16", "gpt"):  # --quick leaves the ResNet out
        got = []
        for ck, item in ((0, model), (1, model + "_checkpoint")):
            r = rows.get(item)
            if r is None:
                bad.append("d%d checkpoint row %s missing" % (d, item))
                continue
            f = {k: (v["median"] if isinstance(v, dict) else v) for k, v in r.items()}
            if f.get("checkpoint") != ck:
                bad.append("d%d checkpoint %s: checkpoint is %r, not %d" % (d, item, f.get("checkpoint"), ck))
            for key in ("peak_mib", "activation_mib", "samples_s", "max_batch"):
                if not pos(f.get(key)):
                    bad.append("d%d checkpoint %s/%s is %r" % (d, item, key, f.get(key)))
            if pos(f.get("max_batch")) and f["max_batch"] != int(f["max_batch"]):
                bad.append("d%d checkpoint %s: max_batch %r is not whole" % (d, item, f["max_batch"]))
            got.append(f.get("max_batch"))
        if len(got) == 2 and pos(got[0]) and pos(got[1]) and got[1] < got[0]:
            bad.append("d%d checkpoint %s: a smaller batch fits with checkpointing (%r < %r)"
                       % (d, model, got[1], got[0]))
if n > 1 and not pos(val("training", None, "mlp", "scaling_eff")):
    bad.append("no scaling efficiency with %d devices" % n)
# the pipeline section: one row per stage count, every figure present
# (values are not judged: a loaded machine times nothing reliably)
rows = j["pipeline"]
if n > 1:
    for k in range(2, min(n, 3) + 1):
        item = "deep mlp, %d stages" % k
        for key in (["stages", "micro_batches", "samples_s", "one_device_samples_s", "dp_samples_s",
                    "over_one_device", "over_data_parallel", "transfer_s", "gpipe_samples_s", "over_gpipe",
                    "even_cut_samples_s", "over_even_cut", "measured_samples_s", "measured_over_one_device"]
                    + ["stage%d_s" % s for s in range(k)]):
            if not pos(val("pipeline", None, item, key)):
                bad.append("pipeline %s/%s is %r" % (item, key, val("pipeline", None, item, key)))
        for s in range(k):
            w = val("pipeline", None, item, "stage%d_idle_s" % s)
            if not (isinstance(w, (int, float)) and w >= 0):
                bad.append("pipeline %s stage %d idle %r" % (item, s, w))
        # memory is ample here: every micro-batch a stage holds has its arena
        if val("pipeline", None, item, "recomputed") != 0:
            bad.append("pipeline %s recomputed %r forwards" % (item, val("pipeline", None, item, "recomputed")))
        b = val("pipeline", None, item, "bubble")
        if not (isinstance(b, (int, float)) and 0 <= b < 1):
            bad.append("pipeline %s bubble %r" % (item, b))
        if val("pipeline", None, item, "stages") != k:
            bad.append("pipeline %s has stages %r" % (item, val("pipeline", None, item, "stages")))
        cut = val("pipeline", None, item, "cut")
        if not (isinstance(cut, str) and cut.count(":") == k):
            bad.append("pipeline %s cut %r does not name %d stages" % (item, cut, k))
elif not (len(rows) == 1 and isinstance(rows[0].get("samples_s"), dict) and
          rows[0]["samples_s"].get("median") is None):
    bad.append("pipeline on one device: %r, not one row of n/a" % rows)
if bad:
    print("FAIL bench: " + "; ".join(bad))
    sys.exit(1)
print("PASS bench: JSON parses and holds every section with figures for %d device(s)" % n)
EOF
then :; else fails=$((fails + 1)); fi

# mixed vendors: the MLP trained on each device and on all together
if [ -n "$mixed" ]; then
    if "$bench" --quick --repeats 1 --only training --models mlp --devices all --json "$dir/m.json" \
        >"$dir/m.out" 2>"$dir/m.err" &&
        python3 - "$dir/m.json" <<'EOF'
import json, math, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
n = j["bench"]["devices_in_context"]
rate = {r["device"]: r["samples_s"]["median"] for r in j["training"]
        if r["item"] == "mlp" and isinstance(r.get("samples_s"), dict)}
want = list(range(n)) + [None]
bad = [d for d in want if not (isinstance(rate.get(d), (int, float)) and math.isfinite(rate[d]) and rate[d] > 0)]
if n < 2 or bad:
    print("FAIL bench: the MLP on each of %d devices and on all: no samples/s for %r" % (n, bad))
    sys.exit(1)
print("PASS bench: the MLP trained on each of %d devices, PoCL's and rusticl's, and on all together (%s samples/s)"
      % (n, ", ".join("%.0f" % rate[d] for d in want)))
EOF
    then :; else
        [ -s "$dir/m.err" ] && tail -n 5 "$dir/m.err" | sed 's/^/    /'
        fails=$((fails + 1))
    fi
fi
[ $fails -eq 0 ]
