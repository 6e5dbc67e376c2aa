#!/bin/sh
# ff_conv_tiles' command line (tools/conv_tiles.c), no GPU needed: --help exits 0; each bad value
# exits 2 before any GPU work, said once, naming the flag and the value.
# Usage: test_conv_tiles_usage.sh PATH/TO/ff_conv_tiles
tool=${1:?usage: test_conv_tiles_usage.sh ff_conv_tiles}
bad=0
expect() {  # expect EXIT 'MESSAGE PART' ARGS...
    want=$1 msg=$2
    shift 2
    err=$("$tool" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != "$want" ] || ! printf '%s' "$err" | grep -qF -- "$msg"; then
        echo "FAIL: ff_conv_tiles $*: exit $rc (want $want), stderr: $err"
        bad=1
    elif [ "$want" = 2 ] && [ "$(printf '%s\n' "$err" | grep -c "ff_conv_tiles:")" != 1 ]; then
        echo "FAIL: ff_conv_tiles $*: the error is not said exactly once: $err"
        bad=1
    fi
}
"$tool" --help | grep -q "^usage: ff_conv_tiles" || { echo "FAIL: --help"; bad=1; }
expect 2 "--batch 'abc': expected a whole number in 1..4096" --batch abc
expect 2 "--batch '0': expected a whole number in 1..4096" --batch 0
expect 2 "--batch '5000'" --batch 5000
expect 2 "--iters '5x': expected a whole number in 1..100000" --iters 5x
expect 2 "--precision fp16: expected fp32 or tf32x3" --precision fp16
expect 2 "unknown model 'nope'" --model nope
expect 2 "has no conv or linear layer named 'pool1'" --layer pool1
expect 2 "has no conv or linear layer named 'nope'" --model alexnet --layer nope
expect 2 "--weight-grad: mnist-cnn.fc1 is a linear layer" --layer fc1 --weight-grad
expect 2 "--pool-sparse: alexnet.fc6 is a linear layer" --model alexnet --layer fc6 --pool-sparse
expect 2 "alexnet.conv1: its data gradient does not run through the forward conv" --model alexnet --layer conv1 --data-grad
expect 2 "unknown or incomplete argument '--batch'" --batch
expect 2 "--data-grad, --weight-grad and --pool-sparse: expected one of them" --data-grad --weight-grad
expect 2 "--data-grad, --weight-grad and --pool-sparse: expected one of them" --pool-sparse --weight-grad
expect 2 "--pool-sparse: mnist-cnn.conv1 is not a conv under a relu and a 2x2 max-pool" --pool-sparse --layer conv1
expect 2 "--pool-sparse: alexnet.conv2 is not a conv under a relu and a 2x2 max-pool" --pool-sparse --model alexnet
export FF_CUDA_SHORT_CONV=yes
expect 2 "FF_CUDA_SHORT_CONV=yes: expected 0" --layer conv1
unset FF_CUDA_SHORT_CONV
# linear layers and their data gradients are timed too (since session 41): not usage errors
for a in "--layer fc1" "--layer fc1 --data-grad" "--model mlp --layer fc2"; do
    "$tool" $a --iters 1 >/dev/null 2>&1
    [ $? != 2 ] || { echo "FAIL: ff_conv_tiles $a refused as a usage error"; bad=1; }
done
# tf32x3 weight gradients are timed too (since session 27): not a usage error (exit 1 without a GPU)
"$tool" --weight-grad --precision tf32x3 --iters 1 >/dev/null 2>&1
[ $? != 2 ] || { echo "FAIL: --weight-grad --precision tf32x3 refused as a usage error"; bad=1; }
[ $bad = 0 ] && echo "PASS ff_conv_tiles usage errors"
exit $bad
