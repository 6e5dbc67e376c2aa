#!/usr/bin/env bash
# test_slurm_sbatch.sh: a real `sbatch` of ci/slurm/infer_mpi_cpu.sbatch on a one-node Slurm
# cluster started inside this machine (CTest: slurm_sbatch, labels slurm and mpi).
#
# Why: the templates in ci/slurm/ are what a user submits on a cluster; without a scheduler in CI
# they would rot unseen (a wrong #SBATCH line, a launcher flag, a path). This test runs the CPU
# template exactly as a user would, through both launchers, and checks what it printed: the job
# must succeed, its verify gate must pass, its bench must write JSON, and the "output digest:" the
# job printed must equal the one `fivefold infer --mode serial` prints for the same model, seed
# and batch (README, Modes: serial = mpi bit for bit). A different digest FAILS the test.
#
# Steps: munged with a fresh key, a minimal slurm.conf (one node: this host, its real CPUs, small
# RealMemory, no cgroups), slurmctld and slurmd in the foreground as children of this script, wait
# for the node to be idle, then `sbatch --wait --nodes=1 --ntasks=2` the template once with
# LAUNCHER=srun and once with LAUNCHER=mpiexec. Everything lives in one temporary directory (free
# ports, its own munge socket), so a Slurm or munge already on the machine is not touched. Every
# daemon started here is stopped on exit, whatever happened (trap).
#
# Usage: test_slurm_sbatch.sh FIVEFOLD SOURCE_DIR
# Environment:
#   FF_SLURM_MODEL, FF_SLURM_BATCH, FF_SLURM_SEED  what the job runs (mnist-cnn, 4, 3)
#   FF_SLURM_LAUNCHERS   which launchers to submit with (default "srun mpiexec")
#   FF_MPIEXEC           the mpiexec of the MPI fivefold links (CTest passes CMake's MPIEXEC_EXECUTABLE)
#   FF_SLURM_KEEP=1      keep the temporary directory (logs, conf) for a post-mortem
#   FF_SLURM_TAMPER=1    test hook: expect a digest with its last hex digit changed; the test must
#                        then fail (shows that the digest comparison can fail)
#   FF_SKIP_SLURM=1      local convenience only: skip (exit 77) when Slurm/munge are not installed.
#                        CI never sets it: there a missing package is a failure (ci/deps.sh installs them).
set -euo pipefail

if [ $# -ne 2 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d'
    exit 2
fi
ff=$(realpath "$1")
src=$(realpath "$2")
model=${FF_SLURM_MODEL:-mnist-cnn} batch=${FF_SLURM_BATCH:-4} seed=${FF_SLURM_SEED:-3}
launchers=${FF_SLURM_LAUNCHERS:-srun mpiexec}
template=ci/slurm/infer_mpi_cpu.sbatch
t0=$(date +%s)
say() { echo "[slurm_sbatch $(($(date +%s) - t0))s] $*"; }

# ---------------------------------------------------------------- prerequisites
missing=()
for c in munged slurmctld slurmd sbatch sinfo squeue scancel "${FF_MPIEXEC:-mpiexec}"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
    msg="missing ${missing[*]}: run ci/deps.sh (it installs munge slurmctld slurmd slurm-client; CI does this)"
    if [ "${FF_SKIP_SLURM:-0}" = 1 ]; then
        echo "SKIP slurm_sbatch: $msg (FF_SKIP_SLURM=1)"
        exit 77
    fi
    echo "FAIL slurm_sbatch: $msg"
    exit 1
fi
[ -f "$src/$template" ] || { echo "FAIL slurm_sbatch: no $template in $src"; exit 1; }

# A Slurm job's environment (this test run inside an allocation of a real cluster) would point
# sbatch and srun at that cluster and job: only our own SLURM_CONF below may reach them.
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# ---------------------------------------------------------------- the cluster's directory
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ff-slurm.XXXXXX")
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/json"
chmod 711 "$tmp" "$tmp/munge"   # munge clients must reach the socket; nobody else may write here
pids=()   # daemons started here, stopped by cleanup in reverse order
sbatch_pid=""   # a running sbatch --wait, ended by cleanup
export SLURM_CONF=$tmp/slurm.conf

dump_logs() {
    for f in "$tmp"/log/*; do
        [ -s "$f" ] || continue
        echo "---- $(basename "$f") (last 40 lines)"
        tail -n 40 "$f"
    done
}
cleanup() {
    local rc=$?
    set +e
    [ -z "$sbatch_pid" ] || kill -TERM "$sbatch_pid" 2>/dev/null
    if [ ${#pids[@]} -ge 3 ] && kill -0 "${pids[1]}" 2>/dev/null; then
        # a job still queued or running (an interrupted run): cancel it and let its steps end
        # before slurmd goes, so no slurmstepd outlives the test
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null)
        if [ -n "$jobs" ]; then
            echo "$jobs" | xargs scancel --full 2>/dev/null
            for _ in $(seq 1 20); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
        fi
    fi
    local i p
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        p=${pids[$i]}
        kill -TERM "$p" 2>/dev/null || continue
        for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then dump_logs; fi
    if [ "${FF_SLURM_KEEP:-0}" = 1 ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
    say "done, exit $rc"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "FAIL slurm_sbatch: $*"; exit 1; }
alive() { kill -0 "$1" 2>/dev/null; }

# A TCP port nothing listens on (bash's /dev/tcp: a refused connection means free).
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 20000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------- munge
# A fresh key readable by this user only (munged refuses anything looser), and munged on its own
# socket in the foreground, a child of this script. --force: a test daemon in a temporary
# directory, where munged's checks on the paths' owners and permissions would only get in the way.
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$tmp/munge/munge.key"
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/socket" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/log/munged.log" \
    >>"$tmp/log/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 40); do [ -S "$tmp/munge/socket" ] && break; alive "${pids[0]}" || break; sleep 0.25; done
[ -S "$tmp/munge/socket" ] || fail "munged did not start"
say "munged up (pid ${pids[0]})"

# ---------------------------------------------------------------- slurm.conf
node=$(hostname -s)
user=$(id -un)
# The node's real topology as slurmd detects it (CPUs, sockets, cores, threads), RealMemory small.
topo=$(slurmd -C | sed -n 's/^NodeName=[^ ]* \(.*\) RealMemory=.*/\1/p')
[ -n "$topo" ] || fail "slurmd -C printed no node line: $(slurmd -C 2>&1)"
cpus=$(echo "$topo" | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
ctld_port=$(free_port) || fail "no free TCP port"
slurmd_port=$(free_port) || fail "no free TCP port"
[ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))
cat >"$SLURM_CONF" <<EOF
# written by verify/cluster/test_slurm_sbatch.sh: one node, no cgroups, no accounting
ClusterName=ffci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=$node NodeAddr=127.0.0.1 $topo RealMemory=256 State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=10 State=UP
EOF

# ---------------------------------------------------------------- slurmctld, slurmd
# In the foreground (-D) they log to stderr, here a file each; -c: no state from an earlier run.
slurmctld -D -c -i -f "$SLURM_CONF" >>"$tmp/log/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$node" >>"$tmp/log/slurmd.log" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 1 60); do
    alive "${pids[1]}" || fail "slurmctld exited"
    alive "${pids[2]}" || fail "slurmd exited"
    state=$(sinfo -h -N -n "$node" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || fail "node $node not idle after 30 s (state '$state')"
say "slurmctld (port $ctld_port) and slurmd (port $slurmd_port) up, node $node idle ($cpus CPUs)"

# ---------------------------------------------------------------- the reference digest
serial_out=$("$ff" infer --model "$model" --mode serial --batch "$batch" --seed "$seed" 2>&1) \
    || fail "fivefold infer --mode serial failed: $serial_out"
want=$(echo "$serial_out" | sed -n 's/^output digest: \([0-9a-f]\{16\}\)$/\1/p')
[ -n "$want" ] || fail "no digest in the serial run's output: $serial_out"
say "serial digest of $model --batch $batch --seed $seed: $want"
if [ "${FF_SLURM_TAMPER:-0}" = 1 ]; then
    # test hook: an expectation no correct run can meet
    want=${want%?}$(printf '%x' $(((0x${want: -1} + 1) % 16)))
    say "FF_SLURM_TAMPER=1: expecting the tampered digest $want instead"
fi

# ---------------------------------------------------------------- the jobs
# Time budget (CTest TIMEOUT 180): 30 s for the node to come up, 60 s for each job (each takes
# 6-10 s on the 2-core CI machine), so the test ends itself, and cleans up, before CTest kills it.
overcommit=()
[ "$cpus" -ge 2 ] || overcommit=(--overcommit)   # a 1-CPU machine still runs 2 ranks
for launcher in $launchers; do
    log=$tmp/job-$launcher.log
    # The template reads these variables; the command-line options override its #SBATCH lines
    # (2 nodes x 4 ranks x 4 CPUs, 15 min) for this one node (--ntasks alone would leave its
    # --ntasks-per-node=4, which a 2-CPU node cannot hold). --chdir: the template runs from the
    # repository root; its log and JSON go to the temporary directory, never into the source tree.
    t_job=$(date +%s)
    # In the background and waited for: a signal to this script then ends the wait at once, and
    # cleanup cancels the job (a foreground sbatch would hold the trap until the job ended).
    LAUNCHER=$launcher FIVEFOLD=$ff FF_MODEL=$model FF_BATCH=$batch FF_SEED=$seed \
        FF_JSON_DIR=$tmp/json/$launcher FF_BENCH_ARGS="--iters 5 --warmup 1" \
        timeout 60 sbatch --wait --quiet --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
        "${overcommit[@]}" --time=2 --job-name="ff-ci-$launcher" --chdir="$src" --output="$log" \
        "$src/$template" &
    sbatch_pid=$!
    rc=0
    wait "$sbatch_pid" || rc=$?
    sbatch_pid=""
    echo "---- job log ($launcher)"
    cat "$log" 2>/dev/null || true
    echo "----"
    [ "$rc" -eq 0 ] || fail "LAUNCHER=$launcher: sbatch --wait exited $rc (the job failed or timed out)"
    grep -Eq '^[0-9]+ passed, 0 failed$' "$log" || fail "LAUNCHER=$launcher: no '... passed, 0 failed' line of verify"
    got=$(sed -n 's/^output digest: \([0-9a-f]\{16\}\)$/\1/p' "$log")
    [ "$(echo "$got" | grep -c .)" -eq 1 ] || fail "LAUNCHER=$launcher: expected one 'output digest:' line, got '$got'"
    json=$(find "$tmp/json/$launcher" -name '*.json' 2>/dev/null | head -n 1)
    if [ -z "$json" ] || ! grep -q '"schema": *"fivefold-bench/1"' "$json"; then
        fail "LAUNCHER=$launcher: bench wrote no fivefold-bench/1 JSON to its FF_JSON_DIR"
    fi
    if [ "$got" != "$want" ]; then
        fail "LAUNCHER=$launcher: the job's output digest $got != expected $want (serial; $model, batch $batch, seed $seed)"
    fi
    say "PASS LAUNCHER=$launcher ($(($(date +%s) - t_job)) s): job digest $got = serial, verify passed," \
        "bench wrote $(basename "$json")"
done
