#!/usr/bin/env bash
# Session 21, GPU call 5: run15.sh again after the teardown fix (comm_nccl.c boot_done: a failed
# bootstrap operation makes nc_destroy abort the communicator; runs 16 to 18 found rank 0 waiting
# forever in ncclCommDestroy / ncclCommWindowDeregister after its deadline had passed). It ran as a
# copy of run15.sh under this name; the copy is now this call of it, with the same steps.
# Usage: bash bench/results/issue16-s21/run19.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
RUN_NAME=run19 exec bash "$(dirname "$0")/run15.sh" "$@"
