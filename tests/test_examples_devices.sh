#!/bin/sh
# test_examples_devices.sh - the classifier examples' models (MobileNet,
# ResNet, LSTM) trained 2 steps on two devices, the batch split between
# them, end as on one device: the class probabilities predict gives for
# 100 test images with the two models agree within fp32 tolerance. Two
# steps, as rusticl builds its kernels again at every launch. On one
# device each check is a SKIP that tests/run.sh covers by running this
# again on two PoCL devices and on PoCL beside rusticl. Where the second
# device is rusticl's and PoCL can give two devices, the convolutional
# models run on two PoCL devices and the LSTM on PoCL beside rusticl: a
# kernel compiled again at every launch makes each timing of the
# convolutions' and products' choices a compile, minutes for a cold
# ResNet on rusticl, whose convolution kernels test_op_table checks. The
# sanitized pass trains only the LSTM.
# Builds $B/examples when missing. Run by tests/run.sh (B, NNCL_SANITIZE,
# MAKE).
. "$(dirname "$0")/build_target.sh"
build_target "examples on two devices" "they do not build" examples
data=${NNCL_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -r "$data/t10k-images-idx3-ubyte.gz" ] || [ ! -r "$data/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP examples on two devices: no $data (apt-get install dataset-fashion-mnist)"
    exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-examples-devices.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
tol=${NNCL_EXAMPLES_TOL:-2e-4} # largest difference of a probability

# twins: the conv models go to two PoCL devices (rusticl is there and PoCL
# gives two devices)
. "$top/tests/devices.sh"
twins=0
rusticl_here && pocl_twins && twins=1

for p in fashion_mnist_mobilenet fashion_mnist_resnet fashion_mnist_lstm; do
    name="examples: $p trained 2 steps on two devices equals one device"
    on=
    if [ $p != fashion_mnist_lstm ]; then
        # the multi-device host code these reach beyond the LSTM's runs
        # sanitized in test_trainer and test_bn_fuse
        if [ $san = 1 ]; then
            echo "SKIP examples: $p split across devices: not in the sanitizer pass (the plain pass runs it)"
            continue
        fi
        [ $twins = 1 ] && on=1
    fi
    train() { # OUT DEVICES
        env ${on:+POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=} "$ex/$p" --devices "$2" --data "$data" --limit 100 --batch 50 --epochs 1 --val 0 --quiet \
            --out "$dir/$1.safetensors" >"$dir/$1.out" 2>"$dir/err"
    }
    if ! train two 0,1; then
        if grep -q "no device 1" "$dir/err"; then
            echo "SKIP $name: needs two devices (POCL_DEVICES=\"pthread pthread\" or RUSTICL_ENABLE=llvmpipe)"
        else
            echo "FAIL $name: the two-device run failed"
            sed 's/^/    /' "$dir/err" | tail -n 8
        fi
        continue
    fi
    if ! train one 0; then
        echo "FAIL $name: the one-device run failed"
        sed 's/^/    /' "$dir/err" | tail -n 8
        continue
    fi
    # the same device predicts with both models: only the training differs
    for m in one two; do
        "$ex/predict" "$dir/$m.safetensors" "$data/t10k-images-idx3-ubyte.gz" --devices 0 --limit 100 --probs \
            >"$dir/$m.p" 2>"$dir/err" || break
    done
    if ! grep -q "^accuracy" "$dir/two.p"; then
        echo "FAIL $name: predict on the models failed"
        sed 's/^/    /' "$dir/err" | tail -n 8
        continue
    fi
    # rows "i class name... p0 .. p9": the last ten fields
    if d=$(awk -v tol="$tol" 'NR == FNR { if (/^[0-9]+ [0-9]/) for (k = 0; k < 10; k++) a[FNR, k] = $(NF - k); next }
            /^[0-9]+ [0-9]/ { n++; for (k = 0; k < 10; k++) { e = $(NF - k) - a[FNR, k]; if (e < 0) e = -e; if (e > m) m = e } }
            END { printf "%.2g", m; exit !(n == 100 && m <= tol) }' "$dir/one.p" "$dir/two.p"); then
        echo "PASS $name (${on:+on two PoCL devices; }largest difference of a class probability $d on 100 test images)"
    else
        echo "FAIL $name: a class probability differs by $d (more than $tol)"
    fi
done
exit 0
