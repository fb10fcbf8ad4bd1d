#!/bin/sh
# test_pipeline3.sh - the pipeline's 3-stage checks (test_pipeline three):
# MLP, CNN, an attention block and a GPT over three stages, GPipe and 1F1B, equal
# to one device on the whole batch, and a failure in the middle stage's
# forward and backward changing nothing, on three PoCL devices
# (POCL_DEVICES="pthread pthread pthread"). Where PoCL cannot give three,
# each check says SKIP with the reason. Needs the tests built in $B
# (default build).
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case $B in /*) bin=$B/tests/test_pipeline ;; *) bin=$top/$B/tests/test_pipeline ;; esac
if [ ! -x "$bin" ]; then
    echo "FAIL pipeline over 3 stages: $bin is not built"
    exit 1
fi
POCL_DEVICES="pthread pthread pthread"
RUSTICL_ENABLE=
export POCL_DEVICES RUSTICL_ENABLE
exec "$bin" three
