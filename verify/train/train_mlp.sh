#!/bin/sh
# The MLP models on synthetic teacher data (issue 16), end to end through `fivefold train`; no data
# files needed. CTest runs each case:
#   cli     mlp-small learns its teacher: over 3 epochs the loss falls (the last 20 steps' mean
#           below 0.85 x the first 20's) and the test accuracy ends above 2 x chance (1/32); --json
#           records every step's loss and the phases; --model mnist-cnn --data synthetic, bad
#           --shares and a --shares count that does not match the ranks are refused (exit 2,
#           naming the value); --help documents --shares, the MLPs and synthetic data.
#   shares  serial = mpi at P = 2, 3, 4 with equal and unequal --shares (3,1; 1,3; 1,1,6;
#           1,2,3,4), bit for bit: shares move work between ranks, never a sum. A run with
#           another --microbatch (another reduction tree) must differ. A checkpoint written by
#           P = 2 with --shares 3,1 resumed by P = 3 with --shares 2,1,1 continues the same run.
#           FF_FUSED_EXCHANGE=1 on a host comm fuses nothing, says so and keeps the bits; a bad
#           FF_FUSED_EXCHANGE or FF_FUSED_CTAS is refused (exit 2), named once.
#   hang    (mpi) a rank that stops answering (SIGSTOP of rank 1 once the first checkpoint exists,
#           --comm-timeout 3) ends the job non-zero within 10 s, naming rank 1; the last
#           checkpoint is intact: resumed on one process (--steps 400) it gives the digests of an
#           uninterrupted 400-step run.
#   monitor the temperature limit through fake sensors (FF_FAKE_SENSORS, fivefold/monitor.h): a GPU
#           at 95 C from 0.02 s to 1.2 s of a run pauses it mid-run (a warning, then "resumed"
#           after >= 0.9 s) and the run's digests equal an unmonitored run's; 2 ranks (mpi) pause in
#           lockstep on a GPU hot from the first reading (taken when the monitor starts, so the
#           pause does not depend on how fast the run goes or when the sampler thread wakes); the progress line shows the readings and --json holds the time series and the
#           pause; --on-hot stop ends the run (exit 1) naming the GPU, 95C and --max-temp 85C; a GPU
#           that stays hot ends it after --pause-limit 1.
#   gpu     (a GPU; exit 77 without) cuda = hybrid = direct (auto: NCCL with a GPU per rank,
#           CUDA IPC on a shared one) at P = 1..4, with and without --shares, bit for bit; graph
#           replays = eager steps (FF_TRAIN_GRAPHS=0); another --microbatch differs; --backend vendor
#           (cuBLAS) is its own digest class, equal for cuda and direct P = 2 with --shares 3,1.
#           With NCCL 2.28 and one micro-batch per rank, the fused exchange (the default: each
#           bucket in one kernel) = the three-kernel one (FF_FUSED_EXCHANGE=0) = cuda at P = 2..4
#           (as many as there are GPUs); a checkpoint of it resumes.
#   gpu_full  (a GPU) the full 120 M-parameter mlp, 2 steps of batch 64: cuda against serial (the
#           CPU reference), every loss within 1e-4 relative; with an --lr 10x larger the second
#           loss falls outside (the comparison can fail).
# Usage: train_mlp.sh CASE   (env FIVEFOLD = the binary, MPIEXEC = mpiexec [and flags])
set -u
CASE=$1
F=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
MPIEXEC=${MPIEXEC:-mpiexec}
${MPIEXEC%% *} --version 2>/dev/null | grep -qE "Open MPI|OpenRTE" && MPIEXEC="$MPIEXEC --oversubscribe"  # the launcher given
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /tmp/ff_train_mlp.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
digests() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
run() {
    name=$1
    shift
    "$@" >"$T/$name.txt" 2>&1 || { cat "$T/$name.txt"; fail "$name: exit $? ($*)"; }
}
# refused NAME PATTERN ARGS...: exit 2 and PATTERN (fixed string) in the output
refused() {
    name=$1 pat=$2
    shift 2
    "$@" >"$T/$name.txt" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$T/$name.txt"; fail "$name: exit $rc, expected 2"; }
    grep -qF -- "$pat" "$T/$name.txt" || { cat "$T/$name.txt"; fail "$name: no '$pat' in the output"; }
    echo "$name: exit 2: $(grep -F -- "$pat" "$T/$name.txt" | head -1)"
}
A="--model mlp-small --train-limit 512 --test-limit 128 --batch 64 --steps 12 --log-every 0"

case "$CASE" in
cli)
    run learn "$F" train --model mlp-small --epochs 3 --train-limit 4096 --test-limit 1024 --log-every 0 \
        --json "$T/learn.json"
    python3 - "$T/learn.json" <<'PY' || fail "mlp-small does not learn its teacher (see above)"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["loss_per_step"]
first, last = sum(l[:20]) / 20, sum(l[-20:]) / 20
acc = d["test_accuracy"][-1]
print(f"steps {len(l)}: loss {first:.4f} (first 20) -> {last:.4f} (last 20); test accuracy {acc:.2f} %")
assert len(l) == d["steps"] == 192, (len(l), d["steps"])
assert last < 0.85 * first, "the loss did not fall"
assert acc > 2 * 100 / 32, "accuracy not above 2 x chance"
assert {"compute", "exchange", "update", "step"} <= set(d["phases_ms_per_step"])
assert d["phases_ms_per_step"]["compute"] > 0
PY
    refused wrongdata "synthetic data has 784 features, model mnist-cnn expects 1x28x28" \
        "$F" train --model mnist-cnn --data synthetic --steps 1
    refused badshares "--shares '3,0'" "$F" train $A --shares 3,0
    refused shares_count "--shares has 2 value(s), expected one per rank (1 ranks)" "$F" train $A --shares 3,1
    refused overlap "--overlap 'maybe': expected auto, on, off or steps" "$F" train $A --overlap maybe
    refused bucket "--bucket-mb 0: expected a number in (0, 65536]" "$F" train $A --bucket-mb 0
    "$F" train --help >"$T/help.txt" 2>&1 || fail "--help: exit $?"
    for w in --shares mlp-small synthetic "--max-temp" "--monitor" "--overlap" "--bucket-mb"; do
        grep -qF -- "$w" "$T/help.txt" || fail "--help does not mention $w"
    done
    ;;
shares)
    run serial "$F" train $A
    REF=$(digests "$T/serial.txt")
    echo "serial: $REF"
    # the last two: gradient buckets of one layer each (--bucket-mb 0.05: 4 exchanges a step)
    for spec in "2 3,1" "2 1,3" "3 1,1,6" "4 -" "4 1,2,3,4" "3 1,1,6 0.05" "2 3,1 0.05"; do
        set -- $spec
        P=$1 S=$2 SH="" BK=""
        [ "$S" = "-" ] || SH="--shares $S"
        [ -z "${3:-}" ] || BK="--bucket-mb $3"
        run "p$P" $MPIEXEC -n "$P" "$F" train --mode mpi $A $SH $BK --json "$T/p$P.json"
        GOT=$(digests "$T/p$P.txt")
        NB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["buckets"])' "$T/p$P.json")
        echo "mpi P=$P shares ${S}, $NB bucket(s): $GOT"
        [ "$GOT" = "$REF" ] || fail "mpi P=$P --shares $S $BK differs from serial"
        [ -z "$BK" ] || [ "$NB" -ge 4 ] || fail "--bucket-mb $3 gave $NB buckets, expected one per layer"
    done
    # the trainer's queued path (several steps per wait, the losses summed once per wait; on a GPU
    # with NCCL) through the host comm's test hook: the same bits, with a rank left without a
    # micro-batch (shares 1,1,14: rank 0 owns none of the 8) and in buckets of one layer
    for spec in "3 1,1,14" "2 3,1 0.05"; do
        set -- $spec
        run "q$1" env FF_QUEUED_COMM=host $MPIEXEC -n "$1" "$F" train --mode mpi $A --shares "$2" ${3:+--bucket-mb $3} \
            --json "$T/q$1.json"
        python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["queued"] else 1)' "$T/q$1.json" ||
            fail "FF_QUEUED_COMM=host did not take the queued path"
        echo "mpi P=$1 shares $2${3:+, buckets of $3 MiB}, queued (FF_QUEUED_COMM=host): $(digests "$T/q$1.txt")"
        [ "$(digests "$T/q$1.txt")" = "$REF" ] || fail "the queued path (mpi P=$1 --shares $2) differs from serial"
    done
    # the fused exchange (FF_FUSED_EXCHANGE=1, NCCL only) is asked of the comm where every rank has
    # one micro-batch on the queued path: a host comm declines, the run says no bucket fused and
    # keeps the bits; a bad FF_FUSED_EXCHANGE or FF_FUSED_CTAS is refused once, naming the value
    run fsd1 "$F" train $A --microbatch 32
    run fsd2 env FF_FUSED_EXCHANGE=1 FF_QUEUED_COMM=host $MPIEXEC -n 2 "$F" train --mode mpi $A --microbatch 32 \
        --json "$T/fsd2.json"
    grep -qF "fused exchange (FF_FUSED_EXCHANGE=1): no bucket fused" "$T/fsd2.txt" || { cat "$T/fsd2.txt"; fail "no word on the fused exchange asked for"; }
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["fused_buckets"] == 0 else 1)' "$T/fsd2.json" ||
        fail "a host comm fused a bucket"
    [ "$(digests "$T/fsd2.txt")" = "$(digests "$T/fsd1.txt")" ] || fail "FF_FUSED_EXCHANGE=1 on a host comm changed the bits"
    echo "mpi P=2, one micro-batch per rank, FF_FUSED_EXCHANGE=1 on a host comm: no bucket fused, = serial"
    for bad in "FF_FUSED_EXCHANGE=maybe|FF_FUSED_EXCHANGE 'maybe': expected 0" "FF_FUSED_CTAS=0|FF_FUSED_CTAS '0': expected" \
        "FF_FUSED_CTAS=16x|FF_FUSED_CTAS '16x': expected"; do
        refused fsdbad "${bad#*|}" env "${bad%%|*}" FF_QUEUED_COMM=host $MPIEXEC -n 2 "$F" train --mode mpi $A --microbatch 32
        n=$(grep -cF -- "${bad#*|}" "$T/fsdbad.txt")
        [ "$n" -eq 1 ] || { cat "$T/fsdbad.txt"; fail "${bad%%|*}: named $n times, expected once"; }
    done
    # --overlap steps needs a device with two lanes (a GPU: the gpu case below runs it); on the host
    # it is accepted, says so in --json, and changes no bit
    run qsteps env FF_QUEUED_COMM=host $MPIEXEC -n 2 "$F" train --mode mpi $A --shares 3,1 --overlap steps \
        --json "$T/qsteps.json"
    python3 -c 'import json,sys; sys.exit(1 if json.load(open(sys.argv[1]))["overlap_steps"] else 0)' "$T/qsteps.json" ||
        fail "--overlap steps claims to overlap steps on the host"
    [ "$(digests "$T/qsteps.txt")" = "$REF" ] || fail "--overlap steps (mpi P=2, host) differs from serial"
    # one micro-batch a step (--microbatch = --batch): one process keeps its row as the reduced
    # gradient (no tree, no copy); two ranks, one of them idle, give the same bits
    run onemb "$F" train $A --microbatch 64
    run onemb2 $MPIEXEC -n 2 "$F" train --mode mpi $A --microbatch 64
    echo "one micro-batch a step: serial $(digests "$T/onemb.txt"); mpi P=2: $(digests "$T/onemb2.txt")"
    [ "$(digests "$T/onemb.txt")" = "$(digests "$T/onemb2.txt")" ] || fail "--microbatch 64: serial differs from mpi P=2"
    [ "$(digests "$T/onemb.txt")" != "$REF" ] || fail "--microbatch 64 gave the --microbatch 8 bits: the check is vacuous"
    run control "$F" train $A --microbatch 16
    [ "$(digests "$T/control.txt")" != "$REF" ] || fail "another micro-batch size gave the same digests: the check is vacuous"
    run ck $MPIEXEC -n 2 "$F" train --mode mpi $A --shares 3,1 --steps 5 --checkpoint-dir "$T/ck"
    run resumed $MPIEXEC -n 3 "$F" train --mode mpi $A --shares 2,1,1 --checkpoint-dir "$T/ck" --resume
    GOT=$(digests "$T/resumed.txt")
    echo "P=2 (3,1) for 5 steps, resumed on P=3 (2,1,1): $GOT"
    [ "$GOT" = "$REF" ] || fail "the resumed run differs from serial"
    ;;
monitor)
    # Hot soon after the start, so that the 32-step run (0.2-0.5 s) is still going when a round
    # of the sampler (every 50 ms) reads it; cool at 1.2 s.
    printf '0 0 50 300 1000 144000 90 1980 0\n0.02 0 95 690 1000 144000 99 1500 0x20\n1.2 0 70 200 1000 144000 5 1980 0\n' \
        >"$T/fake.txt"
    printf '0 0 95 690 1000 144000 99 1500 0x20\n1.0 0 70 200 1000 144000 5 1980 0\n' >"$T/hot_first.txt"
    printf '0 0 95 690 1000 144000 99 1500 0x20\n' >"$T/hot.txt"
    M="--model mlp-small --train-limit 2048 --test-limit 128 --batch 64 --steps 150 --log-every 5"
    run plain "$F" train $M --monitor off
    REF=$(digests "$T/plain.txt")
    run paused env FF_FAKE_SENSORS="$T/fake.txt" "$F" train $M --monitor-interval 50 --json "$T/paused.json"
    grep -E "^warning: GPU0 is at 95C, over --max-temp 85C|^monitor: resumed" "$T/paused.txt"
    grep -q "^warning: GPU0 is at 95C, over --max-temp 85C" "$T/paused.txt" || fail "no warning"
    grep -q "| GPU0 [0-9]*C [0-9]*W 1.0/140.6GiB" "$T/paused.txt" || fail "the progress line shows no readings"
    [ "$(digests "$T/paused.txt")" = "$REF" ] || fail "a paused run's digests differ from an unmonitored run's"
    python3 - "$T/paused.json" <<'PY' || fail "--json: no monitor record of the pause"
import json, sys
m = json.load(open(sys.argv[1]))["monitor"]
t, temp = m["samples"]["t"], m["samples"]["temp_c"]
print(f"monitor: {len(t)} samples, source {m['source']}, pauses {m['temperature']['pauses']} "
      f"({m['temperature']['paused_s']:.2f} s), overhead {100 * m['overhead']['fraction']:.4f} %")
assert m["source"] == "fake" and len(t) >= 10 and 95 in temp and 50 in temp
assert m["temperature"]["pauses"] == 1 and m["temperature"]["paused_s"] >= 0.9
PY
    run paused2 env FF_FAKE_SENSORS="$T/hot_first.txt" $MPIEXEC -n 2 "$F" train --mode mpi $M --monitor-interval 50
    grep -q "^monitor: resumed" "$T/paused2.txt" || fail "mpi P=2: no pause"
    [ "$(digests "$T/paused2.txt")" = "$REF" ] || fail "mpi P=2 paused in lockstep: digests differ"
    echo "paused serial and mpi P=2 runs: $REF= the unmonitored run"
    FF_FAKE_SENSORS="$T/hot.txt" "$F" train $M --on-hot stop >"$T/stop.txt" 2>&1
    rc=$?
    tail -1 "$T/stop.txt"
    [ $rc -eq 1 ] || fail "--on-hot stop: exit $rc, expected 1"
    grep -q "GPU0 is at 95C, over --max-temp 85C" "$T/stop.txt" || fail "--on-hot stop: the GPU is not named"
    FF_FAKE_SENSORS="$T/hot.txt" "$F" train $M --pause-limit 1 >"$T/limit.txt" 2>&1
    rc=$?
    tail -1 "$T/limit.txt"
    [ $rc -eq 1 ] && grep -q "after pausing 1 s (--pause-limit 1 s" "$T/limit.txt" || fail "--pause-limit: exit $rc"
    ;;
hang)
    H="--model mlp-small --train-limit 8192 --test-limit 128 --batch 256 --log-every 0 --checkpoint-every 5"
    $MPIEXEC -n 2 "$F" train --mode mpi $H --steps 100000 --checkpoint-dir "$T/ck" --comm-timeout 3 --verbose \
        >"$T/hang.txt" 2>&1 &
    job=$!
    i=0
    while [ ! -f "$T/ck/checkpoint.h5" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    pid1=$(sed -n 's/^fivefold: rank 1: pid \([0-9]*\).*/\1/p' "$T/hang.txt" | head -1)
    [ -n "$pid1" ] && [ -f "$T/ck/checkpoint.h5" ] || { kill $job; cat "$T/hang.txt"; fail "no checkpoint or no pid of rank 1"; }
    kill -STOP "$pid1"
    t0=$(date +%s.%N)
    i=0
    while kill -0 $job 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    t1=$(date +%s.%N)
    kill -CONT "$pid1" 2>/dev/null
    kill -9 "$pid1" 2>/dev/null
    wait $job
    rc=$?
    took=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
    echo "SIGSTOP of rank 1 (pid $pid1): exit $rc after $took s: $(grep -o 'rank [0-9]* is lost or stopped' "$T/hang.txt" | head -1)"
    [ $rc -ne 0 ] || fail "the job exited 0"
    awk "BEGIN { exit !($took < 10) }" || { cat "$T/hang.txt"; fail "the job took $took s to end (limit 10)"; }
    grep -q "rank 1 is lost or stopped" "$T/hang.txt" || { cat "$T/hang.txt"; fail "rank 1 is not named"; }
    run resumed "$F" train $H --steps 400 --checkpoint-dir "$T/ck" --resume
    grep -o "resum[a-z]* .*step [0-9]*" "$T/resumed.txt" | head -1
    run straight "$F" train $H --steps 400
    [ "$(digests "$T/resumed.txt")" = "$(digests "$T/straight.txt")" ] || fail "the resumed run differs"
    echo "resumed from the last checkpoint: $(digests "$T/resumed.txt")= the uninterrupted run"
    ;;
gpu | gpu_full)
    "$F" infer --model mlp-small --batch 1 --mode cuda >"$T/probe.txt" 2>&1
    [ $? -eq 77 ] && { echo "SKIP: no GPU here ($(tail -1 "$T/probe.txt"))"; exit 77; }
    if [ "$CASE" = gpu ]; then
        run cuda "$F" train --mode cuda $A --json "$T/cuda.json"
        REF=$(digests "$T/cuda.txt")
        echo "cuda: $REF"
        run eager env FF_TRAIN_GRAPHS=0 "$F" train --mode cuda $A
        [ "$(digests "$T/eager.txt")" = "$REF" ] || fail "eager steps differ from graph replays"
        # one micro-batch a step: cuda keeps its row as the reduced gradient, hybrid P = 2 exchanges it
        run onemb "$F" train --mode cuda $A --microbatch 64
        run onemb2 $MPIEXEC -n 2 "$F" train --mode hybrid $A --microbatch 64
        echo "one micro-batch a step: cuda $(digests "$T/onemb.txt"); hybrid P=2: $(digests "$T/onemb2.txt")"
        [ "$(digests "$T/onemb.txt")" = "$(digests "$T/onemb2.txt")" ] || fail "--microbatch 64: cuda differs from hybrid P=2"
        # then: one bucket per layer (--bucket-mb 0.05), exchanged during the backward (overlap, the
        # default) or after it; and --overlap steps (NCCL: the next step's forward bucket by bucket
        # beside the last buckets' exchange, steps without graphs)
        for spec in "hybrid 2 -" "direct 2 -" "direct 2 3,1" "hybrid 3 1,1,6" "direct 3 -" "direct 4 1,2,3,4" \
            "direct 2 3,1 --bucket-mb=0.05" "direct 3 1,1,6 --bucket-mb=0.05" "hybrid 3 1,1,6 --bucket-mb=0.05" \
            "direct 2 3,1 --bucket-mb=0.05 --overlap=off" "direct 2 - --overlap=steps" \
            "direct 2 3,1 --bucket-mb=0.05 --overlap=steps" "direct 4 1,2,3,4 --bucket-mb=0.05 --overlap=steps"; do
            set -- $spec
            MODE=$1 P=$2 S=$3
            shift 3
            SH=""
            [ "$S" = "-" ] || SH="--shares $S"
            run "$MODE$P" $MPIEXEC -n "$P" "$F" train --mode "$MODE" $A $SH "$@" --json "$T/$MODE$P.json"
            GOT=$(digests "$T/$MODE$P.txt")
            OV=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("overlap" if d["overlap"] else "no overlap", d["buckets"], "buckets" + (", queued" if d.get("queued") else ""))' "$T/$MODE$P.json")
            TR=$(grep -o 'transport [a-z]*' "$T/$MODE$P.txt" | head -1)
            echo "$MODE P=$P shares $S $* ($TR, $OV): $GOT"
            [ "$GOT" = "$REF" ] || fail "$MODE P=$P --shares $S $* differs from cuda"
            # NCCL queues the exchange on the GPU (comm.h, ff_comm_set_queued); nothing else does
            case "$TR,$OV" in
            "transport nccl,"*queued | "transport "[!n]*,*[!d]) ;;
            *) fail "$MODE P=$P: the exchange over '$TR' should be queued only on NCCL: $OV" ;;
            esac
            case "$*" in
            *overlap=off*) [ "${OV%% *}" = "no" ] || fail "--overlap off still overlapped" ;;
            *bucket-mb*) [ "${OV%, queued}" = "overlap 4 buckets" ] || fail "expected 4 buckets exchanged during the backward: $OV" ;;
            esac
            case "$*,$TR" in
            *overlap=steps*nccl) python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["overlap_steps"] else 1)' \
                "$T/$MODE$P.json" || fail "$MODE P=$P --overlap steps over NCCL did not overlap the steps" ;;
            *) # the default, auto: never for a model this small (train.h, FF_TRAIN_STEPS_AUTO_FLOATS)
                python3 -c 'import json,sys; sys.exit(1 if json.load(open(sys.argv[1]))["overlap_steps"] else 0)' \
                    "$T/$MODE$P.json" || fail "$MODE P=$P overlapped steps unasked (auto, mlp-small)" ;;
            esac
        done
        # the queued exchange (NCCL: collectives on the GPU's streams, captured in the step's graph,
        # one host wait per 4 steps) against host waits around every collective (FF_QUEUED_COMM=0)
        # and the exchange enqueued call by call (FF_CAPTURE_EXCHANGE=0): the same bits
        if grep -q 'transport nccl' "$T/direct2.txt"; then
            run unqueued env FF_QUEUED_COMM=0 $MPIEXEC -n 2 "$F" train --mode direct $A --shares 3,1 --bucket-mb=0.05 \
                --json "$T/unq.json"
            python3 -c 'import json,sys; sys.exit(0 if not json.load(open(sys.argv[1]))["queued"] else 1)' "$T/unq.json" ||
                fail "FF_QUEUED_COMM=0 still queued the exchange"
            echo "direct P=2 shares 3,1, 4 buckets, FF_QUEUED_COMM=0 (host waits): $(digests "$T/unqueued.txt")"
            [ "$(digests "$T/unqueued.txt")" = "$REF" ] || fail "the exchange with host waits differs from cuda"
            run uncaptured env FF_CAPTURE_EXCHANGE=0 $MPIEXEC -n 2 "$F" train --mode direct $A --shares 3,1 --bucket-mb=0.05
            echo "direct P=2 shares 3,1, 4 buckets, FF_CAPTURE_EXCHANGE=0: $(digests "$T/uncaptured.txt")"
            [ "$(digests "$T/uncaptured.txt")" = "$REF" ] || fail "the exchange outside the step's graph differs from cuda"
            # NCCL's symmetric windows (comm.h ff_comm_alloc_window: the weights and the exchange's
            # buffers, the same offsets on every rank) are on by default where NCCL has them (2.27+);
            # plain memory (FF_NCCL_WINDOWS=0) and copy-engine collectives (FF_NCCL_CTA_POLICY=zero,
            # 2.28+) give the same bits, equal shares (NCCL's all-to-all) and unequal ones alike
            NW=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nccl_windows"])' "$T/direct2.json")
            echo "direct P=2: $NW buffers in NCCL symmetric windows"
            # the NCCL fivefold was built with (--version: "NCCL 2.28.3"), as NCCL_VERSION_CODE 22803
            NV=$("$F" --version | sed -n 's/.*NCCL \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p' | awk '{ print $1 * 10000 + $2 * 100 + $3 }')
            if [ "${NV:-0}" -ge 22700 ]; then
                [ "$NW" -ge 5 ] || fail "NCCL ${NV}: expected the weights and 4 exchange buffers in windows, got $NW"
            fi
            # a checkpoint written from windows (the momentum and gradient gathered from the slices:
            # ff_trainer_sync) resumes bit-identically, with other shares and buckets
            run ckw $MPIEXEC -n 2 "$F" train --mode direct $A --shares 3,1 --bucket-mb=0.05 --steps 5 --checkpoint-dir "$T/ckw"
            run ckw_resumed $MPIEXEC -n 2 "$F" train --mode direct $A --checkpoint-dir "$T/ckw" --resume
            echo "direct P=2 shares 3,1 for 5 steps, resumed by direct P=2: $(digests "$T/ckw_resumed.txt")"
            [ "$(digests "$T/ckw_resumed.txt")" = "$REF" ] || fail "a checkpoint written from windows resumed differently"
            run nowin env FF_NCCL_WINDOWS=0 $MPIEXEC -n 2 "$F" train --mode direct $A --json "$T/nowin.json"
            python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["nccl_windows"] == 0 else 1)' "$T/nowin.json" ||
                fail "FF_NCCL_WINDOWS=0 still registered windows"
            [ "$(digests "$T/nowin.txt")" = "$REF" ] || fail "the exchange from plain memory differs from cuda"
            [ "${NV:-0}" -ge 22800 ] && for sh in - 3,1; do
                SH=""
                [ "$sh" = "-" ] || SH="--shares $sh"
                run zero$sh env FF_NCCL_CTA_POLICY=zero $MPIEXEC -n 2 "$F" train --mode direct $A $SH
                echo "direct P=2 shares $sh, FF_NCCL_CTA_POLICY=zero: $(digests "$T/zero$sh.txt")"
                [ "$(digests "$T/zero$sh.txt")" = "$REF" ] || fail "FF_NCCL_CTA_POLICY=zero (shares $sh) differs from cuda"
            done
            if [ "${NV:-0}" -ge 22800 ]; then
                $MPIEXEC -n 2 env FF_NCCL_CTA_POLICY=most "$F" train --mode direct $A >"$T/badcta.txt" 2>&1
                rc=$?
                n=$(grep -c "FF_NCCL_CTA_POLICY 'most': expected default, efficiency or zero" "$T/badcta.txt")
                [ $rc -ne 0 ] && [ "$n" -eq 1 ] || {
                    cat "$T/badcta.txt"
                    fail "a bad FF_NCCL_CTA_POLICY: exit $rc, named $n times (expected once, non-zero)"
                }
            fi
            # the fused exchange (comm.h ff_comm_fused_tree_sgd, the default: each bucket in one
            # kernel on NCCL's device API where every rank has one micro-batch) gives cuda's bits for
            # the same micro-batches, as the three-kernel exchange (FF_FUSED_EXCHANGE=0) does, at
            # every rank count the GPUs allow; the run says so; a checkpoint written from it (the
            # reduced gradient fetched back for the sync) resumes
            if [ "${NV:-0}" -ge 22800 ]; then
                fb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fused_buckets"])' "$1"; }
                NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
                for p in 2 3 4; do
                    [ "$p" -le "${NG:-0}" ] || continue
                    mb=$((96 / p / 8 * 8))  # one micro-batch per rank: batch p * mb
                    run fcuda "$F" train --mode cuda $A --batch $((p * mb)) --microbatch $mb
                    run fused $MPIEXEC -n $p "$F" train --mode direct $A --batch $((p * mb)) --microbatch $mb \
                        --json "$T/fused.json"
                    run unfused env FF_FUSED_EXCHANGE=0 $MPIEXEC -n $p "$F" train --mode direct $A --batch $((p * mb)) \
                        --microbatch $mb --json "$T/unfused.json"
                    echo "one micro-batch per rank ($mb): cuda $(digests "$T/fcuda.txt"); direct P=$p fused" \
                        "($(fb "$T/fused.json") buckets) $(digests "$T/fused.txt"); unfused ($(fb "$T/unfused.json")) $(digests "$T/unfused.txt")"
                    # a bucket fuses where every rank's slice starts 16-byte aligned: all of them at P = 2
                    # here; at 3 and 4 those that do (the bits are the same either way)
                    if [ "$p" -eq 2 ]; then
                        [ "$(fb "$T/fused.json")" -ge 1 ] || fail "no bucket went through the fused exchange at P=2"
                        grep -qE "^fused exchange: [0-9]+ of [0-9]+ buckets in one kernel" "$T/fused.txt" ||
                            fail "the run did not say its buckets fused (P=2)"
                    fi
                    [ "$(fb "$T/unfused.json")" -eq 0 ] || fail "FF_FUSED_EXCHANGE=0 fused a bucket (P=$p)"
                    [ "$(digests "$T/fused.txt")" = "$(digests "$T/fcuda.txt")" ] || fail "the fused exchange differs from cuda (P=$p)"
                    [ "$(digests "$T/unfused.txt")" = "$(digests "$T/fcuda.txt")" ] || fail "the unfused exchange differs from cuda (P=$p)"
                done
                [ "$(digests "$T/fcuda.txt")" != "$REF" ] || fail "one micro-batch per rank gave --microbatch 8's bits: vacuous"
                run fcuda "$F" train --mode cuda $A --microbatch 32
                run fck $MPIEXEC -n 2 "$F" train --mode direct $A --microbatch 32 --steps 5 --checkpoint-dir "$T/fck"
                run fck_res $MPIEXEC -n 2 "$F" train --mode direct $A --microbatch 32 --checkpoint-dir "$T/fck" --resume
                [ "$(digests "$T/fck_res.txt")" = "$(digests "$T/fcuda.txt")" ] || fail "a checkpoint of the fused exchange resumed differently"
            fi
        else
            echo "direct P=2 did not use NCCL (one GPU): the queued exchange is checked where each rank has a GPU"
        fi
        # the fast option (NCCL's all-reduce, bits its own) in buckets during the backward: it trains
        run allreduce $MPIEXEC -n 2 "$F" train --mode direct $A --bucket-mb 0.05 --reduce allreduce --json "$T/ar.json"
        python3 - "$T/ar.json" "$T/cuda.json" <<'PY' || fail "--reduce allreduce with overlap"
import json, sys
d, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["final_loss"]
print(f"direct P=2 allreduce: overlap {d['overlap']}, {d['buckets']} buckets, final loss {d['final_loss']} (cuda {ref})")
assert d["overlap"] and d["buckets"] == 4
assert abs(d["final_loss"] - ref) <= 1e-3 * max(1.0, abs(ref))
PY
        run control "$F" train --mode cuda $A --microbatch 16
        [ "$(digests "$T/control.txt")" != "$REF" ] || fail "another micro-batch size gave the same digests"
        # --backend vendor (cuBLAS linear layers): its own digest class, the same in every GPU mode
        run vcuda "$F" train --mode cuda $A --backend vendor
        VREF=$(digests "$T/vcuda.txt")
        run vdirect $MPIEXEC -n 2 "$F" train --mode direct $A --backend vendor --shares 3,1
        run vhybrid $MPIEXEC -n 3 "$F" train --mode hybrid $A --backend vendor
        echo "vendor: cuda $VREF; direct P=2 shares 3,1: $(digests "$T/vdirect.txt"); hybrid P=3: $(digests "$T/vhybrid.txt")"
        [ "$(digests "$T/vdirect.txt")" = "$VREF" ] || fail "--backend vendor: direct P=2 --shares 3,1 differs from cuda"
        [ "$(digests "$T/vhybrid.txt")" = "$VREF" ] || fail "--backend vendor: hybrid P=3 differs from cuda"
        [ "$VREF" != "$REF" ] || fail "--backend vendor gave the own kernels' bits: cuBLAS did not run"
    else
        B="--model mlp --train-limit 128 --test-limit 64 --batch 64 --steps 2 --log-every 1"
        run gserial "$F" train $B
        run gcuda "$F" train --mode cuda $B
        run gcuda_lr "$F" train --mode cuda $B --lr 0.1
        python3 - "$T/gserial.txt" "$T/gcuda.txt" "$T/gcuda_lr.txt" <<'PY' || fail "cuda and serial disagree"
import re, sys
def losses(p):
    return [float(x) for x in re.findall(r"loss ([0-9.]+) samples/s", open(p).read())]
s, c, c2 = (losses(p) for p in sys.argv[1:4])
print("serial", s, "cuda", c, "cuda lr 0.1", c2)
assert len(s) == len(c) == 2
assert all(abs(a - b) <= 1e-4 * abs(a) for a, b in zip(s, c)), "cuda's losses are not within 1e-4 of serial's"
assert abs(c2[1] - s[1]) > 1e-4 * abs(s[1]), "a 10x learning rate stays within the tolerance: vacuous"
PY
        # --overlap auto (the default) lets the full MLP's steps overlap from 3 ranks on, over NCCL
        # (one GPU per rank); --overlap on does not; both give cuda's bits
        NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        if [ "${NG:-0}" -ge 3 ]; then
            for ov in auto on; do
                run "g3$ov" $MPIEXEC -n 3 "$F" train --mode direct $B --overlap $ov --json "$T/g3$ov.json"
                ST=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["overlap_steps"])' "$T/g3$ov.json")
                NB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["buckets"])' "$T/g3$ov.json")
                echo "direct P=3 --overlap $ov: steps overlapped $ST, $NB buckets, $(digests "$T/g3$ov.txt")"
                # the direct mode's default bucket (2 MiB, train.h): one per layer of the six
                [ "$NB" = 6 ] || fail "direct P=3 (mlp): $NB buckets by default, expected one per layer (6)"
                [ "$(digests "$T/g3$ov.txt")" = "$(digests "$T/gcuda.txt")" ] || fail "direct P=3 --overlap $ov differs from cuda"
                case "$ov,$ST" in
                auto,True | on,False) ;;
                *) grep -q 'transport nccl' "$T/g3$ov.txt" && fail "--overlap $ov at P=3 (mlp, NCCL): steps overlapped $ST" ;;
                esac
            done
        else
            echo "fewer than 3 GPUs ($NG): --overlap auto at P=3 not run here"
        fi
    fi
    ;;
*)
    fail "unknown case '$CASE' (cli, shares, gpu, gpu_full)"
    ;;
esac
echo "PASS $CASE"
