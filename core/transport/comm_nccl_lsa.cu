// The fused exchange of one gradient bucket (comm_nccl_lsa.h, comm.h ff_comm_fused_tree_sgd) on
// NCCL 2.28's device API. What it replaces, per bucket of the deterministic exchange: an all-to-all
// of the block-sum slices (NCCL's send/recv through its staging buffers, 32 CTAs at P = 2), the
// fused tree and SGD (k_tree_sgd4, one block per multiprocessor) and the all-gather of the updated
// weight slices (9 CTAs): three kernels, each beside the backward's GEMMs, and two staging copies.
// Here one kernel reads slice q of every peer's row where the peer's backward left it (NVLink
// loads through NCCL's LSA pointers), adds the rows in rank order, updates its slice, and stores
// it into every rank's weights. The arithmetic is train_rules.cuh's, the same as k_tree_sgd4's, so
// the bits are those of the three-kernel exchange.
//
// Ordering, through one LSA barrier per block (block i meets block i of every rank):
//  - at the start: every rank's kernel for this bucket has begun, so every rank's backward has
//    written its rows (the kernel follows the bucket's fence on each rank's stream) and finished
//    its data pass (which reads the weights the stores below overwrite);
//  - at the end, acquire-release: a rank's kernel ends only when every rank's block i has stored
//    its slices, so the next kernel reading the weights (the next forward) sees them all, and no
//    rank rewrites the rows a peer still reads (its next backward follows its own kernel).
#include "comm_nccl_lsa.h"

#ifdef FF_NCCL_LSA
#include <nccl_device.h>

#include <new>

#include "../device/cuda/train_rules.cuh"

struct ff_nccl_lsa {
    ncclDevComm dc;
    // Set by the host (ff_nccl_lsa_abort) when the communicator is aborted: a kernel waiting in a
    // barrier for a rank that is gone gives up instead of spinning past the process's teardown.
    volatile int *abort_host;  // pinned, mapped
    int *abort_dev;            // the same word, as the device sees it
    // What ncclDevCommCreate was asked for: on a non-blocking communicator it may read this after
    // returning ncclInProgress, so it lives as long as the device communicator, not on a stack.
    ncclDevCommRequirements req;
    int ctas;
};

#define FF_LSA_THREADS 256
#define FF_LSA_CHUNKS 4  // float4s of every row in flight per thread (k_tree_sgd4's FF_TREE_SGD_CHUNKS)

// NCCL's LSA barrier wait (lsa_barrier__funcs.h, unicast: each of the block's first P - 1 threads
// polls one peer's word in this rank's inbox), with a way out: every 1024 polls the host's abort
// word. false: the block gave up (the caller returns; the session still stores its epoch).
__device__ bool wait_or_abort(ncclLsaBarrierSession<ncclCoopCta> &bar, const volatile int *abort_word) {
    int gave_up = 0;
    for (int i = threadIdx.x; i < bar.team.nRanks - 1; i += blockDim.x) {
        const int peer = i + (bar.team.rank <= i ? 1 : 0);
        cuda::atomic_ref<uint32_t> inbox(*bar.ucInbox(bar.team.rank, peer));
        for (unsigned spins = 1;; spins++) {
            const uint32_t got = inbox.load(cuda::memory_order_acquire);
            if (got - (bar.epoch + 1) <= uint32_t(-1) >> 1) break;
            if ((spins & 1023) == 0 && *abort_word) {
                gave_up = 1;
                break;
            }
        }
    }
    bar.epoch += 1;
    return __syncthreads_or(gave_up) == 0;
}

template <int N>
struct lsa_rows {  // tree_sgd_chunks' rows: each rank's row, through its LSA pointer
    const float *p[N];
    __device__ __forceinline__ const float *operator()(int j) const { return p[j]; }
};
template <int N>
struct lsa_out {  // tree_sgd_chunks' stores: the updated slice into every rank's weights
    float *w[N];
    __device__ __forceinline__ void vec(long long i, float4, float4 o) const {
#pragma unroll
        for (int j = 0; j < N; j++) reinterpret_cast<float4 *>(w[j])[i] = o;
    }
    __device__ __forceinline__ void one(long long i, float, float o) const {
#pragma unroll
        for (int j = 0; j < N; j++) w[j][i] = o;
    }
};

template <int N>
__global__ void __launch_bounds__(FF_LSA_THREADS)
    k_lsa_tree_sgd(ncclDevComm dc, ncclWindow_t rows_win, size_t rows_off, ncclWindow_t wwin, size_t w_off,
                   float *__restrict__ mom, long long count, float lr, float momentum, float wd, int first,
                   const int *abort_word) {
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
    bar.arrive(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (!wait_or_abort(bar, abort_word)) return;
    lsa_rows<N> rows;
    lsa_out<N> out;
#pragma unroll
    for (int j = 0; j < N; j++) {  // rank j's row and weights (one node: LSA rank j is rank j)
        rows.p[j] = (const float *)ncclGetLsaPointer(rows_win, rows_off, j);
        out.w[j] = (float *)ncclGetLsaPointer(wwin, w_off, j);
    }
    tree_sgd_chunks<N, FF_LSA_CHUNKS>(rows, out.w[dc.lsaRank], mom, count, lr, momentum, wd, first, out);
    bar.arrive(ncclCoopCta(), cuda::memory_order_acq_rel);
    wait_or_abort(bar, abort_word);
}

extern "C" ncclResult_t ff_nccl_lsa_create(ff_nccl_lsa **out, ncclComm_t nc, int ctas) {
    *out = NULL;
    ff_nccl_lsa *lsa = new (std::nothrow) ff_nccl_lsa();
    if (!lsa) return ncclSystemError;
    void *word = NULL;  // the abort word first: nothing of NCCL's to undo if it cannot be had
    if (cudaHostAlloc(&word, sizeof(int), cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer((void **)&lsa->abort_dev, word, 0) != cudaSuccess) {
        if (word) cudaFreeHost(word);
        delete lsa;
        return ncclUnhandledCudaError;
    }
    lsa->abort_host = (volatile int *)word;
    *lsa->abort_host = 0;
    lsa->req = ncclDevCommRequirements{};  // (2.28 has no initializer macro: every field zero, none asked for)
    lsa->req.lsaBarrierCount = ctas;
    const ncclResult_t r = ncclDevCommCreate(nc, &lsa->req, &lsa->dc);
    if (r != ncclSuccess && r != ncclInProgress) {
        cudaFreeHost(word);
        delete lsa;
        return r;
    }
    lsa->ctas = ctas;
    *out = lsa;
    return r;
}

extern "C" int ff_nccl_lsa_size(const ff_nccl_lsa *lsa) {
    return lsa ? lsa->dc.lsaSize : 0;
}

extern "C" void ff_nccl_lsa_abort(ff_nccl_lsa *lsa) {
    if (lsa && lsa->abort_host) *lsa->abort_host = 1;
}

extern "C" void ff_nccl_lsa_destroy(ff_nccl_lsa *lsa, ncclComm_t nc) {
    if (!lsa) return;
    if (lsa->abort_host) cudaFreeHost((void *)lsa->abort_host);
    if (nc) ncclDevCommDestroy(nc, &lsa->dc);
    delete lsa;
}

template <int N>
static void launch(const ff_nccl_lsa *lsa, unsigned blocks, cudaStream_t s, ncclWindow_t rows, size_t rows_off,
                   ncclWindow_t w, size_t w_off, float *mom, int64_t count, float lr, float momentum, float wd,
                   int first) {
    k_lsa_tree_sgd<N><<<blocks, FF_LSA_THREADS, 0, s>>>(lsa->dc, rows, rows_off, w, w_off, mom, count, lr, momentum, wd,
                                                        first, lsa->abort_dev);
}

extern "C" cudaError_t ff_nccl_lsa_tree_sgd(const ff_nccl_lsa *lsa, ncclWindow_t rows, size_t rows_off, ncclWindow_t w,
                                            size_t w_off, float *mom, int64_t count, float lr, float momentum,
                                            float weight_decay, bool first, cudaStream_t s) {
    // Every block takes part in its barriers whatever its share of the work, so the grid is the
    // same on every rank: the barriers' count (each rank's slice differs by at most one element).
    const unsigned blocks = (unsigned)lsa->ctas;
    const int f = first ? 1 : 0;
    switch (lsa->dc.lsaSize) {
        case 2: launch<2>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 3: launch<3>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 4: launch<4>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 5: launch<5>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 6: launch<6>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 7: launch<7>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        case 8: launch<8>(lsa, blocks, s, rows, rows_off, w, w_off, mom, count, lr, momentum, weight_decay, f); break;
        default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
#endif
