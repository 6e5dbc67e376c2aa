// The NCCL transport's fused exchange kernel (comm_nccl_lsa.cu), for comm_nccl.c: NCCL 2.28's
// device API, where every rank's memory is load/store accessible from every other's GPU (one node
// over NVLink: NCCL's LSA team is the whole communicator). Raw NCCL and CUDA results: the caller
// turns them into statuses and waits on non-blocking communicators.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define FF_NCCL_LSA 1

typedef struct ff_nccl_lsa ff_nccl_lsa;
#define FF_NCCL_LSA_MAX_RANKS 8  // the kernel's tree over the ranks' rows in registers (train_rules.cuh)
// A rank lost while its peers' kernels wait for it in a barrier: NCCL's abort stops NCCL's kernels,
// not this one, so the kernel's waits also poll a word in pinned host memory that the comm sets
// (ff_nccl_lsa_abort) before it aborts the communicator; the kernel then returns, and the job ends
// as with any other lost rank instead of hanging in its teardown.

// The device communicator with `ctas` barriers (the kernel's blocks); collective (on a
// non-blocking communicator complete once ncclCommGetAsyncError says so).
ncclResult_t ff_nccl_lsa_create(ff_nccl_lsa **out, ncclComm_t nc, int ctas);
// How many ranks are load/store accessible together (the kernel needs every rank among them).
int ff_nccl_lsa_size(const ff_nccl_lsa *lsa);
void ff_nccl_lsa_destroy(ff_nccl_lsa *lsa, ncclComm_t nc);
// Tells every fused kernel waiting in a barrier to give up (the communicator is being aborted).
void ff_nccl_lsa_abort(ff_nccl_lsa *lsa);

// Rank q's part of one bucket's deterministic exchange, on stream s (comm.h ff_comm_fused_tree_sgd):
// slice q of every rank's row (window rows at byte offset rows_off, the same on every rank) added
// in rank order, the SGD rule on this rank's weights (window w at w_off) and mom, the result
// stored into every rank's weights at w_off. count floats; offsets and mom 16-byte aligned.
cudaError_t ff_nccl_lsa_tree_sgd(const ff_nccl_lsa *lsa, ncclWindow_t rows, size_t rows_off, ncclWindow_t w,
                                 size_t w_off, float *mom, int64_t count, float lr, float momentum, float weight_decay,
                                 bool first, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
