#!/bin/sh
# The command's error paths (issue 2): each bad input exits 2 with a message naming the wrong value
# and what was expected; --help exits 0; a GPU mode without a GPU exits 77. $FIVEFOLD is the binary.
set -u
ff=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE PATTERN -- ARGS... : exit code must be CODE and stderr+stdout must match PATTERN.
expect() {
    code=$1 pattern=$2
    shift 3
    "$ff" "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$code" ] && grep -qE -- "$pattern" "$tmp/out"; then
        pass=$((pass + 1))
        echo "PASS  exit $rc  fivefold $*"
    else
        fail=$((fail + 1))
        echo "FAIL  fivefold $*: exit $rc (expected $code), output:"
        sed 's/^/      /' "$tmp/out"
        echo "      (expected to match: $pattern)"
    fi
}

"$ff" infer --model mnist-cnn --save-weights "$tmp/mnist.h5" >/dev/null 2>&1
printf 'not an hdf5 file\n' >"$tmp/text.h5"
head -c 3000 "$tmp/mnist.h5" >"$tmp/truncated.h5"

expect 0 "usage: fivefold <command>" -- --help
expect 2 "unknown command 'inferr'" -- inferr
for c in info infer; do expect 0 "usage: fivefold $c" -- "$c" --help; done
expect 2 "unknown model 'resnet': expected one of alexnet, mnist-cnn" -- infer --model resnet
expect 2 "unknown model 'resnet'" -- info --model resnet
expect 2 -- "--batch 0: expected 1\.\.8192" -- infer --model mnist-cnn --batch 0
expect 2 -- "--batch -3: expected 1\.\.8192" -- infer --model mnist-cnn --batch -3
expect 2 -- "--batch 1000000: expected 1\.\.8192" -- infer --model mnist-cnn --batch 1000000
expect 2 -- "--batch 'abc': expected an integer" -- infer --model mnist-cnn --batch abc
expect 2 "unknown mode 'gpu': expected serial\|mpi\|cuda\|hybrid\|direct" -- infer --model mnist-cnn --mode gpu
expect 2 "unknown or incomplete option '--bogus'" -- infer --bogus
expect 2 -- "--split rows: mode serial runs on one process" -- infer --model mnist-cnn --split rows
expect 2 "cannot open '.*nope.h5' for reading" -- infer --model mnist-cnn --weights "$tmp/nope.h5"
expect 2 "text.h5' is not an HDF5 file" -- infer --model mnist-cnn --weights "$tmp/text.h5"
expect 2 "(truncated|corrupted|not an HDF5 file)" -- infer --model mnist-cnn --weights "$tmp/truncated.h5"
expect 2 "weights/conv1/w' has shape \(32, 1, 3, 3\): expected \(96, 3, 11, 11\)" -- infer --model alexnet --weights "$tmp/mnist.h5"
expect 2 "dataset 'input' is missing" -- infer --model mnist-cnn --input "$tmp/mnist.h5"
expect 2 -- "--inject-fault 'conv9': model mnist-cnn has no such layer" -- infer --model mnist-cnn --inject-fault conv9
expect 2 -- "--precision 'fp16': expected fp32\|tf32" -- infer --model mnist-cnn --precision fp16
# The CPU conv copy: a value other than 128/256 is refused naming it.
export FF_CPU_VECTOR=512
expect 2 "FF_CPU_VECTOR=512: expected 128 or 256" -- infer --model mnist-cnn
export FF_CPU_VECTOR=128
expect 0 "output digest: [0-9a-f]{16}" -- infer --model mnist-cnn
unset FF_CPU_VECTOR
# No GPU (hidden from the CUDA runtime where one exists): exit 77 with a clear message.
export CUDA_VISIBLE_DEVICES=
expect 77 "(built without CUDA|no CUDA device)" -- infer --model mnist-cnn --mode cuda
unset CUDA_VISIBLE_DEVICES
expect 0 "output digest: [0-9a-f]{16}" -- infer --model mnist-cnn --weights "$tmp/mnist.h5" --batch 2
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
