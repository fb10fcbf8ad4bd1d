#!/bin/sh
# test_examples.sh - the example programs as a user meets them: --help
# exits 0, a misspelt option or a bad value is refused with the usage and
# status 2, an unwritable --out is refused before any training; the MLP
# trained one epoch on a small part of Fashion-MNIST (a data folder of
# plain and .gz files) and predict on its model agree on the test
# accuracy, and so do the LSTM's, the MobileNet's and the ResNet's; the
# autoencoder reports its loss and writes its picture, and predict says
# its file is no classifier; a run resumed from its
# checkpoint ends as the uninterrupted one; csv_classifier's iris model classifies iris rows with and without
# the label column and refuses a row holding NaN; predict copes with
# 100,000 classes and labels that are no class, and its error paths say
# why and free everything. Builds $B/examples when missing. Run by
# tests/run.sh (B, NNCL_SANITIZE, MAKE).
. "$(dirname "$0")/build_target.sh"
build_target examples "they do not build" examples
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-examples.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
# One device: the model and predict must see the very same arithmetic.
dev=${NNCL_TEST_DEVICES:-0}
case "$dev" in *,*|all|gpu|cpu) dev=0 ;; esac

pass() { echo "PASS examples: $*"; }
fail() { echo "FAIL examples: $*"; sed 's/^/    /' "$dir/err" | tail -n 8; }

# --- options
for p in fashion_mnist_mlp fashion_mnist_cnn fashion_mnist_mobilenet fashion_mnist_resnet fashion_mnist_autoencoder fashion_mnist_lstm \
    csv_classifier xor devices tune predict; do
    "$ex/$p" --help >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 0 ] && grep -q "^usage: $p" "$dir/out"; then pass "$p --help prints the usage, status 0"
    else fail "$p --help: status $s"; fi
done
for p in fashion_mnist_mlp fashion_mnist_cnn fashion_mnist_mobilenet fashion_mnist_resnet fashion_mnist_autoencoder fashion_mnist_lstm \
    csv_classifier; do
    "$ex/$p" --epoch 1 >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 2 ] && grep -q "unknown option --epoch (did you mean --epochs?)" "$dir/err" && grep -q "^usage:" "$dir/err"
    then pass "$p --epoch 1 is refused with a suggestion and the usage, status 2"
    else fail "$p --epoch 1: status $s"; fi
    "$ex/$p" --epochs two >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 2 ] && grep -q "'two' is not a number" "$dir/err"; then pass "$p --epochs two is refused, status 2"
    else fail "$p --epochs two: status $s"; fi
    "$ex/$p" --devices "$dev" --out "$dir/missing/model.safetensors" >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 2 ] && grep -q "cannot write in folder $dir/missing" "$dir/err" && ! grep -q "^epoch" "$dir/err"
    then pass "$p --out in a missing folder is refused before training, status 2"
    else fail "$p --out in a missing folder: status $s"; fi
    "$ex/$p" --batch lots >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 2 ] && grep -q "'lots' is not a whole number in 1..1000000 or auto" "$dir/err"
    then pass "$p --batch lots is refused, status 2"
    else fail "$p --batch lots: status $s"; fi
done
# the ResNet's width and shift are checked before anything loads
for a in "--width 0" "--shift 28"; do
    # shellcheck disable=SC2086 # a: an option and its value as words
    "$ex/fashion_mnist_resnet" $a --devices "$dev" >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 2 ] && grep -q "^error: --width must be in \[1, 1024\] and --shift in \[0, 27\]" "$dir/err" &&
        ! grep -q "^epoch" "$dir/err"
    then pass "fashion_mnist_resnet $a is refused, status 2"
    else fail "fashion_mnist_resnet $a: status $s"; fi
done
# --batch auto under a memory cap: the largest batch whose plan fits, said with why, and it trains
if (cd "$dir" && NNCL_MEMORY_CAP=2M "$ex/csv_classifier" "$top/examples/data/iris.csv" --devices "$dev" --epochs 2 \
    --quiet --batch auto --out "$dir/auto.safetensors" >"$dir/out" 2>"$dir/err") &&
    b=$(sed -n 's/^batch auto: \([0-9]*\), .*needs [0-9.]* MiB of the [0-9.]* MiB.*/\1/p' "$dir/out") &&
    [ -n "$b" ] && grep -q "plan .* for batch $b " "$dir/out" && grep -q "^validation accuracy" "$dir/out"
then pass "csv_classifier --batch auto chooses batch $b, says why, and trains"
else fail "csv_classifier --batch auto: $(grep 'batch auto' "$dir/out")"; fi
if (cd "$dir" && NNCL_MEMORY_CAP=1K "$ex/csv_classifier" "$top/examples/data/iris.csv" --devices "$dev" --quiet \
    --batch auto >"$dir/out" 2>"$dir/err"); then fail "csv_classifier --batch auto under a 1 KiB cap trained"
elif grep -q "not even one sample fits device" "$dir/err" && grep -q "try --grad-checkpoint" "$dir/err"
then pass "csv_classifier --batch auto under a 1 KiB cap: not even one sample fits, what to try, status 1"
else fail "csv_classifier --batch auto under a 1 KiB cap: $(cat "$dir/err")"; fi
"$ex/xor" --devices no-such-device >"$dir/out" 2>"$dir/err"
s=$?
if [ $s -eq 1 ] && grep -q "the devices are 0: " "$dir/err" && grep -q "build/examples/devices" "$dir/err"
then pass "a device selection that matches nothing lists the devices, status 1"
else fail "--devices no-such-device: status $s"; fi

# --- Fashion-MNIST: train one epoch on 2000 images, predict with the model file
data=${NNCL_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -r "$data/t10k-images-idx3-ubyte.gz" ] || [ ! -r "$data/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP examples: Fashion-MNIST runs: no $data (apt-get install dataset-fashion-mnist)"
else
    mkdir "$dir/data"
    ln -s "$data/train-images-idx3-ubyte.gz" "$data/train-labels-idx1-ubyte.gz" "$dir/data/"
    gzip -dc "$data/t10k-images-idx3-ubyte.gz" >"$dir/data/t10k-images-idx3-ubyte"   # plain beside .gz
    gzip -dc "$data/t10k-labels-idx1-ubyte.gz" >"$dir/data/t10k-labels-idx1-ubyte"
    run_mlp() { # NAME EXTRA...: one run, its test accuracy in $dir/NAME.acc
        n=$1
        shift
        "$ex/fashion_mnist_mlp" --devices "$dev" --data "$dir/data" --limit 2000 --out "$dir/$n.safetensors" "$@" \
            >"$dir/$n.out" 2>"$dir/err"
        s=$?
        sed -n 's/^test accuracy \([0-9.]*\) .*/\1/p' "$dir/$n.out" >"$dir/$n.acc"
        return $s
    }
    if run_mlp one --epochs 1 && [ -s "$dir/one.acc" ] && [ -s "$dir/one.csv" ] && [ -s "$dir/one.svg" ] &&
        grep -q "^fc1 *linear *\[B,128\] *100480" "$dir/one.out"; then
        pass "fashion_mnist_mlp --epochs 1 --limit 2000 trains, prints its summary, test accuracy $(cat "$dir/one.acc")"
        "$ex/predict" "$dir/one.safetensors" "$dir/data/t10k-images-idx3-ubyte" --devices "$dev" --limit 2000 --quiet \
            >"$dir/p.out" 2>"$dir/err"
        s=$?
        got=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$dir/p.out")
        if [ $s -eq 0 ] && [ "$got" = "$(cat "$dir/one.acc")" ] && grep -q "^confusion matrix" "$dir/p.out" &&
            grep -q "Ankle boot" "$dir/p.out"; then
            pass "predict on the model file gives the example's test accuracy $got (labels found beside the images)"
        else fail "predict: status $s, accuracy '$got', the example printed $(cat "$dir/one.acc")"; fi
        grep -q ",train_acc," "$dir/one.csv" && ! grep -q "nan" "$dir/one.csv" &&
            pass "the curve CSV has training and validation accuracy" || fail "the curve CSV: $(tail -n 1 "$dir/one.csv")"
    else
        fail "fashion_mnist_mlp --epochs 1 --limit 2000: status $s"
    fi
    # The LSTM (28 steps of 28 pixels) on 500 images, 54 steps (in fewer its predictions are those of
    # one class): it trains, and predict reads its model file.
    if "$ex/fashion_mnist_lstm" --devices "$dev" --data "$dir/data" --limit 500 --batch 25 --epochs 3 --quiet \
        --out "$dir/lstm.safetensors" >"$dir/lstm.out" 2>"$dir/err" &&
        acc=$(sed -n 's/^test accuracy \([0-9.]*\) .*/\1/p' "$dir/lstm.out") && [ -n "$acc" ] &&
        awk "BEGIN { exit !($acc > 0.25) }" &&
        grep -q "^lstm *lstm ([0-9]* ops) *\[B,28,128\] *80896" "$dir/lstm.out"; then
        pass "fashion_mnist_lstm --epochs 3 --limit 500 trains, its LSTM one summary row, test accuracy $acc"
        "$ex/predict" "$dir/lstm.safetensors" "$dir/data/t10k-images-idx3-ubyte" --devices "$dev" --limit 500 --quiet \
            >"$dir/p.out" 2>"$dir/err"
        s=$?
        got=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$dir/p.out")
        if [ $s -eq 0 ] && [ "$got" = "$acc" ]; then
            pass "predict on the LSTM's model file gives the example's test accuracy $got"
        else fail "predict on the LSTM model: status $s, accuracy '$got', the example printed $acc"; fi
    else
        fail "fashion_mnist_lstm --epochs 3 --limit 500: status $?"
    fi
    # The MobileNet and the ResNet on 500 images: they train, and predict reads their model files. 54
    # steps, so that the batch norms' running statistics have come near the batches' and the
    # predictions (compared through the accuracy) are not those of one class.
    for p in mobilenet resnet; do
        if "$ex/fashion_mnist_$p" --devices "$dev" --data "$dir/data" --limit 500 --batch 25 --epochs 3 --quiet \
            --out "$dir/$p.safetensors" >"$dir/$p.out" 2>"$dir/err" &&
            acc=$(sed -n 's/^test accuracy \([0-9.]*\) .*/\1/p' "$dir/$p.out") && [ -n "$acc" ] &&
            awk "BEGIN { exit !($acc > 0.25) }"; then
            pass "fashion_mnist_$p --epochs 3 --limit 500 trains, test accuracy $acc"
            "$ex/predict" "$dir/$p.safetensors" "$dir/data/t10k-images-idx3-ubyte" --devices "$dev" --limit 500 --quiet \
                >"$dir/p.out" 2>"$dir/err"
            s=$?
            got=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$dir/p.out")
            if [ $s -eq 0 ] && [ "$got" = "$acc" ] && grep -q "Ankle boot" "$dir/p.out"; then
                pass "predict on the $p's model file gives the example's test accuracy $got"
            else fail "predict on the $p model: status $s, accuracy '$got', the example printed $acc"; fi
        else
            fail "fashion_mnist_$p --epochs 3 --limit 500: status $?, test accuracy '$acc'"
        fi
    done
    # The autoencoder on 300 images: its loss, the picture, and predict says what the file is.
    if "$ex/fashion_mnist_autoencoder" --devices "$dev" --data "$dir/data" --limit 300 --epochs 1 \
        --out "$dir/ae.safetensors" >"$dir/ae.out" 2>"$dir/err" &&
        loss=$(sed -n 's/^test reconstruction loss \([0-9.]*\) .*/\1/p' "$dir/ae.out") && [ -n "$loss" ] &&
        grep -q "^<svg" "$dir/ae.svg" && [ "$(grep -c "<rect" "$dir/ae.svg")" -gt 1000 ]; then
        pass "fashion_mnist_autoencoder --epochs 1 --limit 300 trains, test reconstruction loss $loss, the SVG written"
        "$ex/predict" "$dir/ae.safetensors" "$dir/data/t10k-images-idx3-ubyte" --devices "$dev" >"$dir/p.out" 2>"$dir/err"
        s=$?
        if [ $s -eq 1 ] && grep -q "is not a classifier: it was trained on a mean squared error" "$dir/err" &&
            ! grep -q "^0 " "$dir/p.out"; then
            pass "predict on the autoencoder's model file says it is no classifier, status 1"
        else fail "predict on the autoencoder model: status $s: $(head -n 1 "$dir/err")"; fi
    else
        fail "fashion_mnist_autoencoder --epochs 1 --limit 300: status $?"
    fi
    # Two epochs at once, and one epoch then a resume to two: the same model.
    if run_mlp two --epochs 2 && run_mlp half --epochs 1 --checkpoint "$dir/ckpt.safetensors" &&
        run_mlp resumed --epochs 2 --resume "$dir/ckpt.safetensors" && grep -q "resuming from" "$dir/err"; then
        if cmp -s "$dir/two.safetensors" "$dir/resumed.safetensors"; then
            pass "a run resumed from its epoch-1 checkpoint saves the very bytes of the uninterrupted run"
        else fail "the resumed model differs from the uninterrupted one ($(cat "$dir/two.acc") vs $(cat "$dir/resumed.acc"))"; fi
    else
        fail "the resume runs: status $s"
    fi
fi

# --- CSV: iris
if (cd "$dir" && "$ex/csv_classifier" "$top/examples/data/iris.csv" --devices "$dev" --epochs 30 --quiet \
    --out iris.safetensors >"$dir/c.out" 2>"$dir/err"); then
    "$ex/predict" "$dir/iris.safetensors" "$top/examples/data/iris.csv" --devices "$dev" --quiet >"$dir/p.out" 2>"$dir/err"
    s=$?
    acc=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$dir/p.out")
    if [ $s -eq 0 ] && [ -n "$acc" ] && awk "BEGIN { exit !($acc > 0.8) }" && grep -q "setosa" "$dir/p.out"; then
        pass "predict on the iris model: accuracy $acc on the 150 rows, class names from the file"
    else fail "predict on iris: status $s, accuracy '$acc'"; fi
    cut -d, -f1-4 "$top/examples/data/iris.csv" | head -n 4 >"$dir/new.csv"
    "$ex/predict" "$dir/iris.safetensors" "$dir/new.csv" --devices "$dev" >"$dir/p.out" 2>"$dir/err"
    s=$?
    if [ $s -eq 0 ] && [ "$(grep -c ' setosa$' "$dir/p.out")" = 3 ] && ! grep -q "^accuracy" "$dir/p.out"; then
        pass "predict classifies iris rows without a label column (3 of 3 setosa)"
    else fail "predict on rows without labels: status $s"; fi
    # a float IDX of two rows, the second with a NaN: no class made up
    one='\077\200\000\000' nan='\177\300\000\000'
    printf "\000\000\015\002\000\000\000\002\000\000\000\004$one$one$one$one$one$one$nan$one" >"$dir/nan.idx"
    "$ex/predict" "$dir/iris.safetensors" "$dir/nan.idx" --devices "$dev" >"$dir/p.out" 2>"$dir/err"
    s=$?
    if [ $s -eq 1 ] && grep -q "row 1: value 2 is NaN" "$dir/err" && ! grep -q "^1 " "$dir/p.out"; then
        pass "predict refuses a row holding NaN, naming it, with status 1"
    else fail "predict on a NaN row: status $s: $(cat "$dir/err" "$dir/p.out" | tail -n 2 | tr '\n' ' ')"; fi
else
    fail "csv_classifier on iris failed"
fi
# --- predict: a model of 100,000 classes, labels that are no class, and
# its error paths (status 1 with the reason; in the sanitized pass nothing
# leaked)
le8() { n=$1; i=0; while [ $i -lt 8 ]; do printf "\\$(printf %03o $((n % 256)))"; n=$((n / 256)); i=$((i + 1)); done; }
g='0 input x [4]\n1 input y []\n2 param fc.weight [100000,4] init=zeros\n3 param fc.bias [100000] init=zeros'
g="$g"'\n4 linear fc [100000] (0,2,3) act=none\n5 softmax_cross_entropy loss [1] (4,1)'
h='{"__metadata__":{"nncl.graph":"'"$g"'"},"fc.weight":{"dtype":"F32","shape":[100000,4],"data_offsets":[0,1600000]},'
h="$h"'"fc.bias":{"dtype":"F32","shape":[100000],"data_offsets":[1600000,2000000]}}'
{ le8 ${#h}; printf '%s' "$h"; head -c 2000000 /dev/zero; } >"$dir/wide.safetensors"
one='\077\200\000\000'
printf "\000\000\015\002\000\000\000\003\000\000\000\004$one$one$one$one$one$one$one$one$one$one$one$one" >"$dir/b-images-idx3-ubyte"
printf '\000\000\010\001\000\000\000\003\000\000\007' >"$dir/b-labels-idx1-ubyte"
"$ex/predict" "$dir/wide.safetensors" "$dir/b-images-idx3-ubyte" --devices "$dev" >"$dir/p.out" 2>"$dir/err"
s=$?
if [ $s -eq 0 ] && grep -q "^accuracy 0.6667 (2 of 3)" "$dir/p.out" && grep -q "no confusion matrix for 100000 classes" "$dir/p.out"; then
    pass "predict with a model of 100,000 classes: accuracy and per class, the confusion matrix left out, said"
else fail "predict with 100,000 classes: status $s: $(tail -n 2 "$dir/p.out" | tr '\n' ' ')"; fi
if [ -f "$dir/iris.safetensors" ]; then
    # labels 0, 200 and NaN for a model of 3 classes: two are no class
    printf '\000\000\015\001\000\000\000\003\000\000\000\000\103\110\000\000\177\300\000\000' >"$dir/odd.idx"
    "$ex/predict" "$dir/iris.safetensors" "$dir/b-images-idx3-ubyte" --labels "$dir/odd.idx" --devices "$dev" \
        >"$dir/p.out" 2>"$dir/err"
    s=$?
    if [ $s -eq 0 ] && grep -q "^2 rows have a label that is no class of the model (0..2), first row 1 (200): not scored" "$dir/p.out" &&
       grep -q "^accuracy [0-9.]* ([01] of 1)" "$dir/p.out"; then
        pass "predict says how many labels are no class of the model (200, NaN) and scores the others"
    else fail "predict with labels 200 and NaN: status $s: $(grep -v '^[0-9] ' "$dir/p.out" | head -n 3 | tr '\n' ' ')"; fi
    printf '0,1\n2,3\n' >"$dir/two.csv"
    for c in "$dir/missing.safetensors $dir/new.csv:missing.safetensors" "$dir/iris.safetensors $dir/missing.csv:missing.csv" \
        "$dir/iris.safetensors $dir/two.csv:the model takes 4 features" "$dir/iris.safetensors $dir/nan.idx:row 1: value 2 is NaN" \
        "$dir/iris.safetensors $dir/b-images-idx3-ubyte --labels $dir/nan.idx:holds 8 labels for 3 images"; do
        # shellcheck disable=SC2086 # the case is words
        "$ex/predict" ${c%%:*} --devices "$dev" >"$dir/out" 2>"$dir/err"
        s=$?
        if [ $s -eq 1 ] && grep -q "${c#*:}" "$dir/err" && ! grep -q "LeakSanitizer" "$dir/err"; then
            pass "predict stops with status 1 and says \"${c#*:}\", freeing everything"
        else fail "predict ${c%%:*}: status $s, want 1 and \"${c#*:}\""; fi
    done
fi
# --- CSV in bf16 storage, saved as F16: predict reads the half file
if (cd "$dir" && "$ex/csv_classifier" "$top/examples/data/iris.csv" --devices "$dev" --epochs 30 --quiet \
    --precision bf16 --save-dtype f16 --out iris16.safetensors >"$dir/c.out" 2>"$dir/err") &&
    grep -q '"dtype":"F16"' "$dir/iris16.safetensors"; then
    "$ex/predict" "$dir/iris16.safetensors" "$top/examples/data/iris.csv" --devices "$dev" --quiet >"$dir/p.out" 2>"$dir/err"
    s=$?
    acc=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$dir/p.out")
    if [ $s -eq 0 ] && [ -n "$acc" ] && awk "BEGIN { exit !($acc > 0.8) }"; then
        pass "csv_classifier --precision bf16 --save-dtype f16: predict reads the F16 file, accuracy $acc"
    else fail "predict on the F16 iris model: status $s, accuracy '$acc'"; fi
else
    fail "csv_classifier --precision bf16 --save-dtype f16 failed or wrote no F16 tensor"
fi
if "$ex/fashion_mnist_mlp" --precision fp8 >"$dir/out" 2>"$dir/err"; then s=0; else s=$?; fi
if [ $s -eq 2 ] && grep -q "fp8" "$dir/err"; then pass "--precision fp8 is refused with status 2"
else fail "--precision fp8: status $s"; fi
# early exits after the context, the table and the datasets exist: status 1
# with the reason, and (in the sanitized pass) nothing leaked
printf 'a,label\n1,x\n2,x\n' >"$dir/one.csv"
for c in "$dir/missing.csv:data" "$dir/one.csv:at least two classes"; do
    "$ex/csv_classifier" "${c%%:*}" --devices "$dev" --epochs 1 --quiet --out "$dir/o.safetensors" >"$dir/out" 2>"$dir/err"
    s=$?
    if [ $s -eq 1 ] && grep -q "${c#*:}" "$dir/err" && ! grep -q "LeakSanitizer" "$dir/err"; then
        pass "csv_classifier $(basename "${c%%:*}") stops with status 1, freeing everything"
    else fail "csv_classifier $(basename "${c%%:*}"): status $s"; fi
done
exit 0
