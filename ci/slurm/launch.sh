# shellcheck shell=bash
# ci/slurm/launch.sh: sourced by the ci/slurm/*.sbatch templates (from the repository root, the
# directory sbatch runs them in), never run by itself. Why one file: every template must start its
# ranks the same way through either launcher and print the same header, so that a log from any of
# them reads the same and a fix to the launch reaches them all.
#
# What a template's environment may set (sbatch passes the submitting shell's environment on):
#   LAUNCHER=srun      (default) srun --mpi=$FF_SRUN_MPI starts the ranks through Slurm's PMI.
#   FF_SRUN_MPI        the PMI plugin srun uses; by default chosen from the MPI library the binary
#                      links: pmi2 for MPICH (and MPICH-derived libraries: Hydra's PMI client speaks
#                      the PMI-1/PMI-2 wire protocol of Slurm's pmi2 plugin), pmix for Open MPI
#                      (libmpi.so.40; Open MPI 5 speaks only PMIx). `srun --mpi=list` shows a site's.
#   FF_SRUN_ARGS       more srun flags (e.g. "--cpu-bind=cores", or "--gpu-bind=single:1" to show each
#                      rank only its own GPU; by default every rank sees its node's GPUs and fivefold
#                      takes GPU = node-local rank % GPUs visible, which also gives one GPU a rank).
#   LAUNCHER=mpiexec   the MPI library's own launcher (MPICH's Hydra, Open MPI's mpirun), which
#                      reads the allocation (nodes, tasks per node) from Slurm's environment and
#                      starts its per-node daemons through srun: $FF_MPIEXEC -n $SLURM_NTASKS
#                      (FF_MPIEXEC: default mpiexec from PATH; the one of the MPI the binary links).
#   FIVEFOLD           the binary (default build/fivefold, relative to the repository root).
#   FF_JSON_DIR        where `fivefold bench` writes its JSON, one file per batch size (default
#                      bench/results/slurm-<job id>/, created by the template).
# It defines ff_run (launch one fivefold command on every task of the job), ff_header and
# ff_gpu_check.

LAUNCHER=${LAUNCHER:-srun}
FIVEFOLD=${FIVEFOLD:-build/fivefold}
FF_JSON_DIR=${FF_JSON_DIR:-bench/results/slurm-${SLURM_JOB_ID:-nojob}}
if [ ! -x "$FIVEFOLD" ]; then
    echo "fivefold slurm: no binary at '$FIVEFOLD' (in $(pwd)): build first (cmake --preset default &&" \
         "cmake --build --preset default), or set FIVEFOLD" >&2
    exit 2
fi
# The MPI library the binary was linked with decides srun's PMI plugin (see above).
ff_mpi_lib=$(ldd "$FIVEFOLD" 2>/dev/null | sed -n 's/^[[:space:]]*\(libmpi[a-z_]*\.so[.0-9]*\) .*/\1/p' | head -n 1)
case "$ff_mpi_lib" in
    libmpi.so.40*) FF_SRUN_MPI=${FF_SRUN_MPI:-pmix} ;;
    *)             FF_SRUN_MPI=${FF_SRUN_MPI:-pmi2} ;;
esac
case "$LAUNCHER" in
    srun | mpiexec) ;;
    *) echo "fivefold slurm: LAUNCHER='$LAUNCHER': expected srun or mpiexec" >&2; exit 2 ;;
esac

# ff_run CMD...: one fivefold process per task of the job (every node), through $LAUNCHER. The
# command line is printed first, so the log says what produced each block.
ff_run() {
    local launch
    if [ "$LAUNCHER" = srun ]; then
        # shellcheck disable=SC2206  # FF_SRUN_ARGS is a list of flags
        launch=(srun --mpi="$FF_SRUN_MPI" --kill-on-bad-exit=1 ${FF_SRUN_ARGS:-})
    else
        launch=("${FF_MPIEXEC:-mpiexec}" -n "${SLURM_NTASKS:?not inside a Slurm job}")
    fi
    echo "== ${launch[*]} $*"
    "${launch[@]}" "$@"
}

# ff_header: what ran where, first in the log.
ff_header() {
    echo "== fivefold job ${SLURM_JOB_ID:-?} on ${SLURM_JOB_NUM_NODES:-?} node(s) (${SLURM_JOB_NODELIST:-?})," \
         "${SLURM_NTASKS:-?} tasks (${SLURM_TASKS_PER_NODE:-?} per node)"
    local how=$LAUNCHER
    [ "$LAUNCHER" != srun ] || how="srun --mpi=$FF_SRUN_MPI"
    echo "== binary $FIVEFOLD (MPI library ${ff_mpi_lib:-unknown}), launcher $how"
}

# ff_gpu_check: the GPU modes want one rank per GPU: ranks on this node (the first of the job) against
# the GPUs it shows (Slurm's CUDA_VISIBLE_DEVICES for --gpus-per-node, else nvidia-smi). More ranks
# than GPUs still runs (ranks share a GPU, local rank % GPUs) but is not what the template means:
# it is said, not refused. No GPU at all: the mode itself exits 77 naming what it lacks.
ff_gpu_check() {
    local per_node=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-1}} gpus
    per_node=${per_node%%[(,]*}
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
    else
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    fi
    if [ "$gpus" -eq 0 ]; then
        echo "== no GPU visible on $(hostname -s): the GPU modes will exit 77 (did the job ask for --gpus-per-node?)"
        return 0
    fi
    echo "== $per_node rank(s) per node, $gpus GPU(s) visible on $(hostname -s): GPU = node-local rank % $gpus"
    if [ "$per_node" -ne "$gpus" ]; then
        echo "== note: --ntasks-per-node ($per_node) != GPUs per node ($gpus): match --gpus-per-node for one rank per GPU"
    fi
}
