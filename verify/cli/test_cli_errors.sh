#!/bin/sh
# The command's error paths (issue 2): each bad input exits 2 with a message naming the wrong value
# and what was expected; --help exits 0; a GPU mode without a GPU exits 77. $FIVEFOLD is the binary,
# $H5POKE the helper that changes one float of an HDF5 file in place (verify/cli/h5poke.c).
set -u
ff=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
poke=${H5POKE:?set H5POKE to the ff_h5poke binary}
case $ff in /*) ;; *) ff=$PWD/$ff ;; esac  # the tests below run in a scratch folder
case $poke in /*) ;; *) poke=$PWD/$poke ;; esac
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE [--] PATTERN -- ARGS... : exit code must be CODE and stderr+stdout must match PATTERN
# (the first -- lets PATTERN begin with a dash).
expect() {
    code=$1
    shift
    [ "$1" = "--" ] && shift
    pattern=$1
    shift 2
    "$ff" "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$code" ] && grep -qE -- "$pattern" "$tmp/out"; then
        pass=$((pass + 1))
        echo "PASS  exit $rc  fivefold $*: $(grep -E -- "$pattern" "$tmp/out" | head -1)"
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
# the file is named once, not once per layer of context ("golden 'x': golden 'x': ...")
expect 2 "error \\(bad input\\): golden '[^']*truncated.h5': not a readable HDF5 file\$" -- verify --model mnist-cnn --golden "$tmp/truncated.h5" --trust
expect 2 "weights/conv1/w' has shape \(32, 1, 3, 3\): expected \(96, 3, 11, 11\)" -- infer --model alexnet --weights "$tmp/mnist.h5"
expect 2 "dataset 'input' is missing" -- infer --model mnist-cnn --input "$tmp/mnist.h5"
expect 2 -- "--inject-fault 'conv9': model mnist-cnn has no such layer" -- infer --model mnist-cnn --inject-fault conv9
expect 2 -- "--precision 'fp16': expected fp32\|tf32\|tf32x3" -- infer --model mnist-cnn --precision fp16
expect 2 -- "--precision tf32x3: the cpu device computes in fp32 only \\(expected fp32\\)" -- infer --model mnist-cnn --mode serial --precision tf32x3
expect 2 -- "--precision tf32x3: the cpu device computes in fp32 only" -- train --model mlp-small --mode serial --precision tf32x3
# The plan flags (issue 13): the same parser in infer, verify and info; each bad value is named with
# what was expected, the environment only sets their defaults (a bad default is refused, naming it).
expect 2 -- "--conv 'fft': expected direct\|winograd" -- infer --model mnist-cnn --conv fft
expect 2 -- "--conv 'Direct': expected direct\|winograd" -- verify --model mnist-cnn --conv Direct
expect 2 -- "--winograd-m '3': expected 2\|4" -- infer --model mnist-cnn --winograd-m 3
expect 2 -- "--winograd-m '4x': expected 2\|4" -- info --mode cuda --winograd-m 4x
expect 2 -- "--s2d 'yes': expected on\|off" -- verify --model mnist-cnn --s2d yes
expect 2 -- "--s2d '1': expected on\|off" -- info --s2d 1
expect 2 -- "--conv needs a value, got the flag --mode" -- info --conv --mode cuda
expect 2 -- "--backend 'cudnn': expected own\|vendor" -- info --mode cuda --backend cudnn
expect 2 -- "--backend vendor: the cpu device has no vendor library" -- info --backend vendor
for c in infer verify info; do
    expect 0 -- "--winograd-m M +Winograd output tile" -- "$c" --help
    expect 0 -- "FF_CUDA_CONV=direct\|winograd" -- "$c" --help
done
export FF_CUDA_CONV=fft
expect 2 "FF_CUDA_CONV=fft: expected direct or winograd" -- infer --model mnist-cnn
unset FF_CUDA_CONV
export FF_WINOGRAD_M=8
expect 2 "FF_WINOGRAD_M=8: expected 2 or 4" -- info --mode cuda
unset FF_WINOGRAD_M
export FF_CUDA_S2D=yes
expect 2 "FF_CUDA_S2D=yes: expected 0 or 1" -- verify --model mnist-cnn
unset FF_CUDA_S2D
export FF_CUDA_SHORT_CONV=2
expect 2 "FF_CUDA_SHORT_CONV=2: expected 0" -- train --model mnist-cnn
unset FF_CUDA_SHORT_CONV
# The flags win over the environment's defaults; info prints the plan they make (no GPU needed).
export FF_CUDA_CONV=direct
expect 0 "plan \(cuda device, digest class gpu\)" -- info --mode cuda --conv winograd
unset FF_CUDA_CONV
expect 0 "plan \(cuda device, digest class gpu-direct\)" -- info --mode cuda --conv direct
expect 0 "plan \(cuda device, digest class gpu-wg2\)" -- info --mode cuda --winograd-m 2
expect 0 "plan \(cuda device, digest class gpu-wg4-nos2d\)" -- info --mode cuda --s2d off
expect 0 "plan \(cpu device, digest class cpu\)" -- info --model mnist-cnn
expect 0 "conv1 +conv2d +winograd-4-s2d +96x55x55 +whole step" -- info --mode cuda --ranks 4 --split rows
expect 0 "1:\[6,13\)<-\[2,18\)" -- info --mode cuda --ranks 4 --split rows
# The CPU conv copy: a value other than 128/256/512 is refused naming it; each copy the CPU has
# prints the same digest.
export FF_CPU_VECTOR=1024
expect 2 "FF_CPU_VECTOR=1024: expected 128, 256 or 512" -- infer --model mnist-cnn
export FF_CPU_VECTOR=avx2
expect 2 "FF_CPU_VECTOR=avx2: expected 128, 256 or 512" -- infer --model mnist-cnn
expect 2 "FF_CPU_VECTOR=avx2: expected 128, 256 or 512" -- info --model mnist-cnn
export FF_CPU_VECTOR=128
expect 0 "kernels: the 128-bit baseline copy \(FF_CPU_VECTOR=128" -- info --model mnist-cnn
expect 0 "output digest: [0-9a-f]{16}" -- infer --model mnist-cnn
base_digest=$(grep -Eo "output digest: [0-9a-f]{16}" "$tmp/out")
for copy in 256 512; do
    export FF_CPU_VECTOR=$copy
    flag=avx2 && [ "$copy" = 512 ] && flag=avx512f
    if grep -m1 '^flags' /proc/cpuinfo | grep -qw "$flag"; then
        expect 0 "$base_digest" -- infer --model mnist-cnn
    else
        expect 2 "FF_CPU_VECTOR=$copy: this CPU \(or build\) has no" -- infer --model mnist-cnn
    fi
done
unset FF_CPU_VECTOR
# No GPU (hidden from the CUDA runtime where one exists): exit 77 with a clear message.
export CUDA_VISIBLE_DEVICES=
expect 77 "(built without CUDA|no CUDA device)" -- infer --model mnist-cnn --mode cuda
unset CUDA_VISIBLE_DEVICES
expect 0 "output digest: [0-9a-f]{16}" -- infer --model mnist-cnn --weights "$tmp/mnist.h5" --batch 2

# check NAME CONDITION...: a check that is not one command's exit and message.
check() {
    name=$1
    shift
    if "$@"; then
        pass=$((pass + 1))
        echo "PASS  $name"
    else
        fail=$((fail + 1))
        echo "FAIL  $name"
    fi
}
# expect_not CODE PATTERN -- ARGS...: exit CODE and the output does NOT match PATTERN.
expect_not() {
    code=$1
    shift
    [ "$1" = "--" ] && shift
    pattern=$1
    shift 2
    "$ff" "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$code" ] && ! grep -qE -- "$pattern" "$tmp/out"; then
        pass=$((pass + 1))
        echo "PASS  exit $rc, no '$pattern'  fivefold $*"
    else
        fail=$((fail + 1))
        echo "FAIL  fivefold $*: exit $rc (expected $code) or output matches '$pattern':"
        sed 's/^/      /' "$tmp/out"
    fi
}
digest_of() { "$ff" infer --model mnist-cnn "$@" 2>&1 | sed -n 's/^output digest: //p'; }

# Issue 12 item 4. A value that is itself a flag: the value was forgotten (every parser).
cd "$tmp" || exit 1
expect 2 -- "--checkpoint-dir needs a value, got the flag --resume" -- train --checkpoint-dir --resume
check "train --checkpoint-dir --resume made no directory named --resume" test ! -e "$tmp/--resume"
expect 2 -- "--weights needs a value, got the flag --batch" -- infer --model mnist-cnn --weights --batch 2
expect 2 -- "--weights needs a value, got the flag --batch" -- train --weights --batch 2
expect 2 -- "--golden needs a value, got the flag --trust" -- verify --model mnist-cnn --golden --trust
expect 2 -- "--batch needs a value, got the flag --iters" -- bench --batch --iters 3
expect 2 -- "--ranks needs a value, got the flag --split" -- info --ranks --split rows
expect 2 -- "--data needs a value, got the flag --json" -- bench --loader --data --json x.json
expect 2 -- "--data needs a value$" -- train --data
expect 2 "unknown flag '--bogus'" -- train --bogus 1
# Batch lists: an empty item is refused, not skipped.
expect 2 -- "--batch '1,,2': item 2 is empty: expected N or N,N,\.\.\. \(each 1\.\.8192\)" -- bench --batch 1,,2
expect 2 -- "--batch '1,': item 2 is empty" -- bench --batch 1,
expect 2 -- "--batch 0: expected 1\.\.8192" -- bench --batch 1,0
# Seeds are decimal (or 0x hex) in every command, never octal: 010 is ten.
d010=$(digest_of --seed 010)
d10=$(digest_of --seed 10)
d8=$(digest_of --seed 8)
dhex=$(digest_of --seed 0xa)
check "infer --seed 010 = --seed 10 = --seed 0xa ($d010) != --seed 8 ($d8)" \
    sh -c "[ -n '$d010' ] && [ '$d010' = '$d10' ] && [ '$d010' = '$dhex' ] && [ '$d010' != '$d8' ]"
expect 2 -- "--seed 18446744073709551616: expected at most 18446744073709551615" -- infer --model mnist-cnn --seed 18446744073709551616
expect 2 -- "--seed '0x1g': expected a decimal integer" -- infer --model mnist-cnn --seed 0x1g
expect 2 -- "--seed '-1': expected a decimal integer" -- train --seed -1
expect 2 -- "--seed '1e3': expected a decimal integer" -- train --seed 1e3
# Integers that overflow, numbers that are not finite or out of range (train's own parser).
expect 2 -- "--iters 99999999999999999999: expected 1\.\.100000" -- infer --model mnist-cnn --iters 99999999999999999999
expect 2 -- "--epochs 9223372036854775808: expected 1\.\.1000000" -- train --epochs 9223372036854775808
expect 2 -- "--steps 99999999999999999999: expected 1\.\.9223372036854775807" -- train --steps 99999999999999999999
expect 2 -- "--lr inf: not a finite number: expected a number in \(0, 10\]" -- train --lr inf
expect 2 -- "--lr nan: not a finite number" -- train --lr nan
expect 2 -- "--lr 1e30: expected a number in \(0, 10\]" -- train --lr 1e30
expect 2 -- "--lr 0: expected a number in \(0, 10\]" -- train --lr 0
expect 2 -- "--lr 1e39: not a finite number" -- train --lr 1e39
expect 2 -- "--momentum 5: expected a number in \[0, 1\)" -- train --momentum 5
expect 2 -- "--momentum 1: expected a number in \[0, 1\)" -- train --momentum 1
expect 2 -- "--weight-decay -0.5: expected a number in \[0, 1\)" -- train --weight-decay -0.5
expect 2 -- "--weight-decay 'x': expected a number in \[0, 1\)" -- train --weight-decay x

# Weights files record each tensor's FNV-1a digest (attribute fnv1a64) and a load checks it.
cp "$tmp/mnist.h5" "$tmp/flipped.h5"
"$poke" "$tmp/flipped.h5" weights/conv1/b 3 flip
expect 2 "error \(integrity check failed\): weights file '.*flipped.h5' \(model mnist-cnn\): 'weights/conv1/b': the file records digest [0-9a-f]{16}, its data has digest [0-9a-f]{16}" -- infer --model mnist-cnn --weights "$tmp/flipped.h5"
expect 2 "'weights/conv1/b': the file records digest" -- train --weights "$tmp/flipped.h5" --steps 1
# NaN/Inf in a tensor without a recorded digest (another tool's file): refused naming the index.
cp "$tmp/mnist.h5" "$tmp/nan.h5"
"$poke" "$tmp/nan.h5" weights/fc1/w --delete-attr fnv1a64
"$poke" "$tmp/nan.h5" weights/fc1/w 1234 nan
expect 2 "'weights/fc1/w' element \[1234\] is NaN: expected finite weights" -- infer --model mnist-cnn --weights "$tmp/nan.h5"
cp "$tmp/mnist.h5" "$tmp/inf.h5"
"$poke" "$tmp/inf.h5" weights/fc2/b --delete-attr fnv1a64
"$poke" "$tmp/inf.h5" weights/fc2/b 7 inf
expect 2 "'weights/fc2/b' element \[7\] is \+Inf" -- infer --model mnist-cnn --weights "$tmp/inf.h5"
# Without digests at all (files written before they were recorded) a file still loads; --verbose says so.
cp "$tmp/mnist.h5" "$tmp/old.h5"
for t in conv1/w conv1/b conv2/w conv2/b fc1/w fc1/b fc2/w fc2/b; do "$poke" "$tmp/old.h5" "weights/$t" --delete-attr fnv1a64; done
expect 0 "no recorded digests .*loaded without an integrity check" -- infer --model mnist-cnn --weights "$tmp/old.h5" --verbose
expect_not 0 "recorded digests" -- infer --model mnist-cnn --weights "$tmp/old.h5"
expect 0 "8 tensor digests checked" -- infer --model mnist-cnn --weights "$tmp/mnist.h5" --verbose
# NaN in an input tensor file.
golden=$here/../../golden/data/mnist-cnn.h5
cp "$golden" "$tmp/input.h5" && chmod u+w "$tmp/input.h5"
"$poke" "$tmp/input.h5" input 800 nan
expect 2 "input file '.*input.h5': dataset 'input' element \[800\] \(image 1\) is NaN: expected finite values" -- infer --model mnist-cnn --input "$tmp/input.h5"

# Item 6. User-facing messages carry no source location; --verbose and internal errors do.
expect_not 2 "[a-z_]+\.c:[0-9]+" -- infer --model mnist-cnn --batch 0
expect 2 "error \(bad input\) at [a-z_]+\.c:[0-9]+: --batch 0" -- infer --model mnist-cnn --batch 0 --verbose
# infer says what it timed (after a warm-up) and points to bench.
expect 0 "^time: [0-9.]+ ms median of 1 warm iteration \(min" -- infer --model mnist-cnn
expect 0 "after 1 untimed warm-up; --iters K for more; fivefold bench times a verified configuration" -- infer --model mnist-cnn
# Every flag of train's synopsis has a line of its own explaining it.
"$ff" train --help >"$tmp/help" 2>&1
missing=""
for f in $(sed -n '/^usage:/,/^[A-Z]/p' "$tmp/help" | grep -oE '\[--[a-z0-9-]+' | tr -d '['); do
    grep -qE "^  $f( |$)" "$tmp/help" || missing="$missing $f"
done
check "train --help explains every flag (missing:${missing:- none})" test -z "$missing"
for f in --microbatch --reduce --checkpoint-every; do
    check "train --help: $f has units/an explanation" sh -c "grep -E '^  $f ' '$tmp/help' | grep -qE '[a-z]+ [a-z]+ [a-z]+'"
done
# The training summary counts the images trained: 100 images in batches of 64 are 2 steps, 100 images.
data=/usr/share/datasets/fashion-mnist
if [ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ]; then
    expect 0 "^trained 2 steps \(100 images\) in [0-9.]+ s \([0-9.]+ samples/s\)" -- train --train-limit 100 --batch 64 --test-limit 10 --log-every 0
else
    echo "SKIP  training summary: no data in $data (not counted)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
