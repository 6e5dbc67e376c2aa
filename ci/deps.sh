#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test fivefold (as root, or with
# sudo). Packages already present are not touched; nothing is downloaded at run time later.
set -euo pipefail
pkgs=(cmake ninja-build gcc g++ make pkg-config git
      mpich libmpich-dev libhdf5-dev libcmocka-dev zlib1g-dev
      python3 python3-numpy python3-h5py python3-torch python3-matplotlib
      dataset-fashion-mnist clang clang-format
      munge slurmctld slurmd slurm-client)
# clang: the libFuzzer target (fuzz/run_fuzz_partition.sh). clang-format: ci/format-check (test
# lint_format), which wants version 14, what Debian 12's clang-format package installs.
# munge slurmctld slurmd slurm-client: test slurm_sbatch starts a one-node Slurm cluster inside the
# CI machine and submits the ci/slurm/ CPU template to it (verify/cluster/test_slurm_sbatch.sh).
# (slurm-wlm is the metapackage of the last three.) The test runs its own daemons with its own
# configuration in a temporary directory; the services these packages install are not used.
# `ci/deps.sh openmpi`: also Open MPI, for CI's Open MPI stage (ci/cpu). Debian installs it beside
# MPICH and points the plain mpicc/mpiexec at it; CMakeLists.txt keeps MPICH for the default build.
case "${1:-}" in
    "") ;;
    openmpi) pkgs+=(libopenmpi-dev openmpi-bin) ;;
    *) echo "ci/deps.sh: unknown argument '$1': expected nothing or 'openmpi'" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#pkgs[@]} packages present"
    exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
