#!/bin/sh
# test_char_gpt.sh - examples/char_gpt on a tiny configuration (2 layers, 2
# heads, 32 channels, context 16): its options, a few training iterations
# whose loss falls below the uniform guess, the curve files, a resumed run
# that saves the very bytes of the uninterrupted one, text generated from
# the saved model (seeded: the same twice), a prompt outside the
# vocabulary refused, a build without zlib that reads plain text and
# refuses .gz with a clear message, and (where PyTorch is importable) the
# saved model loaded into nanoGPT's module with the same logits as nncl's
# (examples/char_gpt_pytorch.py), its loss by char_gpt_train_pytorch.py's
# fixed estimate near char_gpt's, and that script's training run going
# through. Builds $B/examples when missing. Run by
# tests/run.sh (B, NNCL_SANITIZE, MAKE).
. "$(dirname "$0")/build_target.sh"
build_target char_gpt "it does not build" "$B/examples/char_gpt"
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-char-gpt.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
dev=${NNCL_TEST_DEVICES:-0}
case "$dev" in *,*|all|gpu|cpu) dev=0 ;; esac
data=$top/examples/data/tinyshakespeare.txt.gz
tiny="--devices $dev --data $data --layers 2 --heads 2 --embd 32 --block 16 --batch 8 --warmup 2 --eval-interval 10 --eval-windows 16 --quiet"

pass() { echo "PASS char_gpt: $*"; }
fail() { echo "FAIL char_gpt: $*"; sed 's/^/    /' "$dir/err" | tail -n 8; }

# --- options
"$ex/char_gpt" --help >"$dir/out" 2>"$dir/err"
s=$?
if [ $s -eq 0 ] && grep -q "^usage: char_gpt" "$dir/out" && grep -q -- "--generate N" "$dir/out"; then
    pass "--help prints the usage, status 0"
else fail "--help: status $s"; fi
"$ex/char_gpt" --iter 5 >"$dir/out" 2>"$dir/err"
s=$?
if [ $s -eq 2 ] && grep -q "did you mean --iters?" "$dir/err"; then pass "--iter 5 is refused with a suggestion, status 2"
else fail "--iter 5: status $s"; fi
"$ex/char_gpt" --embd 30 --heads 4 >"$dir/out" 2>"$dir/err"
s=$?
if [ $s -eq 2 ] && grep -q "multiple of --heads" "$dir/err"; then pass "--embd 30 --heads 4 is refused, status 2"
else fail "--embd 30 --heads 4: status $s"; fi

# --- training: 20 iterations, the loss below ln 65 = 4.17 (a uniform guess)
run() { # NAME ARGS...: one run into $dir/NAME.*, its val loss in $dir/NAME.val
    n=$1
    shift
    # shellcheck disable=SC2086
    "$ex/char_gpt" $tiny --out "$dir/$n.safetensors" "$@" >"$dir/$n.out" 2>"$dir/err"
    s=$?
    sed -n 's/^val loss \([0-9.]*\)$/\1/p' "$dir/$n.out" >"$dir/$n.val"
    return $s
}
if run a --iters 20 && [ -s "$dir/a.val" ] && awk "BEGIN { exit !($(cat "$dir/a.val") < 4.0) }" &&
    [ "$(wc -l <"$dir/a.csv")" -eq 3 ] && grep -q '</svg>' "$dir/a.svg" &&
    grep -q "^transformer.h.1.attn.c_a" "$dir/a.out"; then
    pass "20 iterations train: val loss $(cat "$dir/a.val") < 4.0 (uniform: 4.17), curve rows at 10 and 20, summary"
else
    fail "20 iterations: status $s, val loss '$(cat "$dir/a.val")'"
fi
if run half --iters 10 --lr-decay-iters 20 --checkpoint "$dir/ckpt.safetensors" &&
    run resumed --iters 20 --resume "$dir/ckpt.safetensors" && grep -q "resuming from .* at iteration 10" "$dir/resumed.out"; then
    if cmp -s "$dir/a.safetensors" "$dir/resumed.safetensors"; then
        pass "a run resumed at iteration 10 saves the very bytes of the uninterrupted run"
    else fail "the resumed model differs from the uninterrupted one (val loss $(cat "$dir/a.val") vs $(cat "$dir/resumed.val"))"; fi
else
    fail "the resume runs: status $s"
fi

# --- generation from the saved model
gen() { "$ex/char_gpt" --devices "$dev" --model "$dir/a.safetensors" --generate 40 "$@" 2>"$dir/err"; }
if gen --prompt "ROMEO:" --seed 3 >"$dir/g1" && gen --prompt "ROMEO:" --seed 3 >"$dir/g2" &&
    [ "$(head -c 6 "$dir/g1")" = "ROMEO:" ] && [ "$(tr -d '\n' <"$dir/g1" | wc -c)" -le 46 ] &&
    [ "$(wc -c <"$dir/g1")" -ge 40 ] && cmp -s "$dir/g1" "$dir/g2"; then
    pass "--generate 40 --prompt ROMEO: prints the prompt and 40 characters, the same twice with one seed"
else fail "--generate: status $?, '$(head -c 60 "$dir/g1")'"; fi
if gen --top-k 1 --prompt "the" >"$dir/g3" && gen --top-k 1 --prompt "the" --seed 9 >"$dir/g4" && cmp -s "$dir/g3" "$dir/g4"; then
    pass "--top-k 1 is greedy: the same text whatever the seed"
else fail "--top-k 1 depends on the seed"; fi
gen --prompt "a~b" >"$dir/out"
s=$?
if [ $s -eq 2 ] && grep -q "'~' (0x7e) is not in the model's vocabulary" "$dir/err"; then
    pass "a prompt character outside the vocabulary is refused, status 2"
else fail "--prompt a~b: status $s"; fi

# --- built without zlib: plain text is read, .gz is refused with the way out
# (the example alone compiled without NNCL_HAVE_ZLIB, against the library)
if [ $san -eq 0 ]; then
    gzip -dc "$data" >"$dir/shakespeare.txt"
    nozlib=$dir/char_gpt_nozlib
    if cc -std=c99 -D_POSIX_C_SOURCE=200809L -I"$top/include" -o "$nozlib" "$top/examples/char_gpt.c" "$bdir/libnncl.a" \
        -fopenmp -lclblast -lOpenCL -lm -lpthread -lz 2>"$dir/err" ||
        cc -std=c99 -D_POSIX_C_SOURCE=200809L -I"$top/include" -o "$nozlib" "$top/examples/char_gpt.c" "$bdir/libnncl.a" \
            -fopenmp -lclblast -lOpenCL -lm -lpthread 2>"$dir/err"; then
        # shellcheck disable=SC2086
        "$nozlib" $tiny --iters 1 --out "$dir/nz.safetensors" >"$dir/out" 2>"$dir/err"
        s=$?
        # shellcheck disable=SC2086
        if [ $s -eq 1 ] && grep -q "gzip-compressed and this build reads no gzip" "$dir/err" &&
            "$nozlib" $tiny --data "$dir/shakespeare.txt" --iters 1 --out "$dir/nz.safetensors" >"$dir/out" 2>"$dir/err" &&
            grep -q "^val loss" "$dir/out"; then
            pass "built without zlib: the .gz is refused with what to do, the plain text trains"
        else fail "built without zlib: status $s"; fi
    else
        echo "SKIP char_gpt: the build without zlib (the example does not link against $bdir/libnncl.a here)"
    fi
fi

# --- PyTorch: the same logits from nanoGPT's module
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if [ $san -eq 1 ]; then
    echo "SKIP char_gpt: PyTorch interop (the sanitized library does not load into Python)"
elif ! "$py" -c "import torch, numpy" 2>/dev/null; then
    echo "SKIP char_gpt: PyTorch interop (no torch and numpy for $py)"
elif (cd "$top" && "$py" examples/char_gpt_pytorch.py "$dir/a.safetensors" --lib "$bdir/libnncl.so" --devices "$dev" \
    --data "$data") >"$dir/out" 2>"$dir/err"; then
    pass "PyTorch: $(tail -n 1 "$dir/out")"
else
    cp "$dir/out" "$dir/err.py"
    cat "$dir/out" >>"$dir/err"
    fail "PyTorch interop: the logits differ or the script failed"
fi

# --- PyTorch: char_gpt's run as nanoGPT trains it, and its estimators on nncl's model
if [ $san -eq 0 ] && "$py" -c "import torch" 2>/dev/null; then
    if (cd "$top" && "$py" examples/char_gpt_train_pytorch.py --eval "$dir/a.safetensors" --data "$data") \
        >"$dir/out" 2>"$dir/err" &&
        fixed=$(sed -n 's/^val loss: .* fixed \([0-9.]*\) .*/\1/p' "$dir/out") && [ -n "$fixed" ] &&
        awk -v a="$fixed" -v b="$(cat "$dir/a.val")" 'BEGIN { d = a - b; exit !(d < 0.1 && d > -0.1) }'; then
        pass "PyTorch's fixed estimate of the saved model's val loss $fixed, char_gpt's $(cat "$dir/a.val")"
    else
        cat "$dir/out" >>"$dir/err"
        fail "char_gpt_train_pytorch.py --eval: failed, or its val loss '$fixed' is not within 0.1 of $(cat "$dir/a.val")"
    fi
    if (cd "$top" && "$py" examples/char_gpt_train_pytorch.py --iters 3 --layers 2 --heads 2 --embd 32 --block 16 \
        --batch 8 --data "$data") >"$dir/out" 2>"$dir/err" && grep -q "^val loss: nanoGPT [0-9]" "$dir/out"; then
        pass "char_gpt_train_pytorch.py trains 3 iterations: $(tail -n 1 "$dir/out")"
    else
        cat "$dir/out" >>"$dir/err"
        fail "char_gpt_train_pytorch.py --iters 3: it failed"
    fi
fi
