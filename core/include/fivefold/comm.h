// The one communication layer (docs/ARCHITECTURE.md §1, §7): every multi-rank mode and the trainer talk through
// this interface. Backends:
//   - MPI: a communicator; errors return FF_ERR_MPI (MPI_ERRORS_RETURN is set), and the caller
//     ends the job (the CLI calls MPI_Abort) instead of hanging.
//   - loopback: P simulated ranks inside one process, one thread per rank, for the halo fuzzer and
//     fast tests; same semantics as MPI (blocking collectives, matched point-to-point by tag).
// All counts are in bytes unless the name says elements. All collectives are blocking.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ff_comm ff_comm;

int ff_comm_rank(const ff_comm *c);
int ff_comm_size(const ff_comm *c);
// This rank's index among the ranks on its node (MPI_COMM_TYPE_SHARED; loopback: its rank): a GPU
// mode gives rank r the GPU local_rank % GPUs.
int ff_comm_local_rank(const ff_comm *c);

// The deadline of every wait (default 30 s; <= 0: wait forever): a point-to-point message or
// collective that makes no progress for this long fails with FF_ERR_MPI naming this rank and what
// it waited for, instead of hanging on a lost or stopped peer. Progress (any message or request
// completing) restarts the clock; a rank busy for longer than this between two communications
// (rank 0 alone reading files, say) trips it too. The MPI backend names the peers an exchange
// waits for and, after a short roll call among the ranks that timed out, the ranks that are silent,
// with what this node sees of their processes ("rank 1: its process 4711 is stopped"); a timed-out
// call's receives are cancelled, its sends and collectives may still use their buffers until the
// job ends (end it: the CLI calls MPI_Abort). Per communicator; loopback ranks start with the
// process-wide loopback timeout (ff_comm_loopback_set_timeout), which this overrides for one rank.
void ff_comm_set_timeout(ff_comm *c, double seconds);
double ff_comm_timeout(const ff_comm *c);

// Point-to-point exchange of a whole plan at once (halo exchange): post every receive and send,
// then wait for all. send_buf[i] goes to send_peer[i]; recv_buf[i] comes from recv_peer[i].
// Messages between the same pair are matched in the order they are listed (tag = list order).
typedef struct {
    int peer;
    void *buf;
    size_t bytes;
} ff_comm_msg;
ff_status ff_comm_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs, int n_recvs);

ff_status ff_comm_barrier(ff_comm *c);
ff_status ff_comm_bcast(ff_comm *c, void *buf, size_t bytes, int root);
// Root receives counts[r] bytes from rank r at recvbuf + displs[r]; counts/displs used on root.
ff_status ff_comm_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                          size_t sendbytes, int root);
// Root sends counts[r] bytes from sendbuf + displs[r] to rank r.
ff_status ff_comm_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                           const size_t *displs, int root);
// Everyone receives everyone's block, its own included (the trainer relies on it: its update
// writes only the slice it sends): counts/displs known on every rank. In place where sendbuf is
// recvbuf + displs[rank] (MPI_IN_PLACE, NCCL's in-place all-gather: the own block is not copied).
ff_status ff_comm_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                             size_t sendbytes);
// Personalised all-to-all: send_counts[r] bytes at sendbuf + send_displs[r] go to rank r.
ff_status ff_comm_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                            const void *sendbuf, const size_t *send_counts, const size_t *send_displs);
// Sum of n doubles / int64 across ranks (in place, result on every rank). For losses, counters and
// agreement checks; gradients use the deterministic scheme in train.c, not a float all-reduce.
// These two always take host memory, even on a communicator bound to a device.
ff_status ff_comm_allreduce_sum_f64(ff_comm *c, double *buf, size_t n);
ff_status ff_comm_allreduce_max_i64(ff_comm *c, int64_t *buf, size_t n);
// Non-deterministic fast path (--reduce allreduce): float sum in the library's order (device
// memory on a bound communicator: reduced on the host).
ff_status ff_comm_allreduce_sum_f32(ff_comm *c, float *buf, size_t n);

// Where the buffers handed to c live (default: host memory). After binding device d, every buffer
// passed to c is d's memory (device.h); d's pending work is the caller's to finish (ff_device_sync)
// before a call. The loopback backend then copies with ff_device_copy_bytes (one GPU shared by the
// simulated ranks); the MPI backend stages each message through host buffers (device -> host ->
// MPI -> host -> device: the hybrid mode's transport). NULL: host memory again.
struct ff_device;
ff_status ff_comm_bind_device(ff_comm *c, struct ff_device *d);
struct ff_device *ff_comm_device(const ff_comm *c);
// Queued collectives (the direct mode's training step, docs/ARCHITECTURE.md §9): a comm bound to a
// GPU device whose backend can order its work on the device's queue (NCCL: the device's current
// stream) can be switched to queueing. While on, its collectives on device buffers (the trainer
// uses alltoallv and allgatherv) are enqueued after the device's pending work, the device's later
// work runs after them, and the calls return without waiting: no ff_device_sync before a call, no
// host round trip after it. ff_comm_wait_queued then waits until the device's current queue has
// run, polling the peers' errors against the deadline (ff_comm_set_timeout): a lost or stopped peer
// ends the wait with FF_ERR_MPI naming the silent ranks, the communicator aborted. can_queue is
// false elsewhere, and when FF_QUEUED_COMM=0 is in the environment (A/B timing; the bits do not
// change). A test hook, FF_QUEUED_COMM=host, makes it true for a comm on host memory too (its calls
// complete in order anyway), so that the CPU tests run the trainer's queued path
// (verify/train/train_mlp.sh).
bool ff_comm_can_queue(const ff_comm *c);
ff_status ff_comm_set_queued(ff_comm *c, bool on);  // on: FF_ERR_INPUT where !ff_comm_can_queue
ff_status ff_comm_wait_queued(ff_comm *c);
// Device memory that c's collectives move fastest, for buffers that live as long as c: NCCL (2.27
// and later) allocates it with ncclMemAlloc and registers it as a symmetric window, on which NCCL
// runs its symmetric kernels (fewer SMs taken from the kernels beside them, a higher bus rate) and,
// with FF_NCCL_CTA_POLICY=zero, copy-engine collectives that take no SMs at all. Collective: every
// rank calls it in the same order with the same `bytes`. *p = NULL with FF_OK where c has no such
// memory (another backend, c not bound to a device, an older NCCL, an ncclMemAlloc that failed on
// some rank, or FF_NCCL_WINDOWS=0 in the environment): the caller then allocates as usual. A failed
// registration is an error (the other ranks' waits end at the comm's deadline). The memory
// belongs to c and is freed when c is destroyed; callers never free it, and stop using it before.
ff_status ff_comm_alloc_window(ff_comm *c, void **p, size_t bytes, const char *what);
// One bucket of the trainer's deterministic exchange in one kernel, where c can (train.c
// exchange_bucket, every rank one block-sum row): rank q reads slice q of every rank's row straight
// from the peers' memory, adds them in rank order (train.h's tree over P rows), applies the SGD
// rule to its slice of the weights and momentum, and stores the updated slice into every rank's
// weights: the all-to-all, ff_device_tree_sgd and the all-gather it stands for, with their bits, in
// one pass on the device's current stream (c queued). row: this rank's slice q of its own row;
// w: this rank's slice of its weights; each peer's lies at the same offset of the same window
// (ff_comm_alloc_window); mom: this rank's momentum slice; count floats. *done = false with FF_OK,
// nothing enqueued, where c does not: not NCCL 2.28's device API, not every rank load/store
// accessible (one node), more than 8 ranks, buffers outside windows or not 16-byte aligned, not
// queued, or turned off by FF_FUSED_EXCHANGE=0 in the environment (the default is 1: on where it
// applies), with FF_FUSED_CTAS blocks (16). A rank lost while its peers' kernels wait for it ends
// them when the communicator is aborted (comm_nccl_lsa.h).
// Another FF_FUSED_EXCHANGE than 0 or 1, or FF_FUSED_CTAS outside 1..1024, is FF_ERR_INPUT naming
// the value, on any comm. The bits never change. Collective: every rank calls it for the same bucket, and all get the
// same *done.
ff_status ff_comm_fused_tree_sgd(ff_comm *c, bool *done, float *w, float *mom, const float *row, int64_t count,
                                 float lr, float momentum, float weight_decay, bool first);
// How bytes move for the buffers c now carries: the backend's name on host memory ("mpi",
// "loopback", "nccl", "ipc"); bound to a device, "mpi (staged through pinned host memory)",
// "loopback (device copies)", "nccl (device buffers)", "cuda-ipc (device to device)" or
// "mpi (CUDA-aware: device buffers)".
const char *ff_comm_transport_name(const ff_comm *c);

// Bytes this rank has sent since creation (for traces), and the part sent by ff_comm_exchange.
int64_t ff_comm_bytes_sent(const ff_comm *c);
int64_t ff_comm_p2p_bytes(const ff_comm *c);
// Bus bytes since creation, nccl-tests' convention: each operation's size times its collective's
// factor (send/recv and bcast 1; gatherv, scatterv, allgatherv, alltoallv (P-1)/P; allreduce
// 2(P-1)/P). Bus bytes / communication time is the bus bandwidth, comparable across rank counts.
double ff_comm_bus_bytes(const ff_comm *c);

// ---- backends ----
// MPI: wraps `mpi_comm` (an MPI_Comm passed as its integer/handle value via a pointer, so that
// mpi.h stays out of this header): ff_comm_mpi_create(&c, &some_MPI_Comm). Sets MPI_ERRORS_RETURN.
ff_status ff_comm_mpi_create(ff_comm **out, const void *mpi_comm);
// Loopback: runs body(rank_comm, arg) on P threads, one per simulated rank, and joins them;
// returns the first non-OK status any rank returned (its message is kept).
typedef ff_status (*ff_comm_body)(ff_comm *c, void *arg);
ff_status ff_comm_loopback_run(int P, ff_comm_body body, void *arg);
void ff_comm_destroy(ff_comm *c);  // MPI backend only; loopback comms are owned by the runner

// ---- GPU-direct transports (the direct mode): device buffers go to the interconnect as they are ----
// A CUDA-aware MPI (MPIX_Query_cuda_support in Open MPI, MPIX_GPU_query_support in MPICH): sets
// *yes and writes the library's name and what it reported to `why` (for messages).
ff_status ff_comm_mpi_cuda_aware(bool *yes, char *why, size_t why_cap);
// Makes an MPI comm hand device buffers straight to MPI (no host staging) once it is bound to a
// device. FF_ERR_INPUT naming the MPI library when it is not CUDA-aware.
ff_status ff_comm_mpi_device_direct(ff_comm *c);
// NCCL over the calling thread's current GPU, bootstrapped through `boot` (MPI, or loopback ranks
// each on their own GPU): rank 0's unique id is broadcast, then every point-to-point message and
// collective on device buffers is an NCCL call on the comm's own stream (grouped send/recv for
// exchanges and v-collectives, ncclBroadcast, ncclAllReduce); host-memory operations (barrier,
// f64/i64 all-reduces, and everything while no device is bound) go through `boot`, which must
// outlive the new comm. NCCL refuses two ranks on one GPU: that is checked first and reported as
// FF_ERR_INPUT naming the ranks, the GPU and the host. Waits poll NCCL's asynchronous error and
// the stream against the comm's timeout (ff_comm_set_timeout); on a lost peer the communicator is
// aborted and FF_ERR_MPI names this rank and the operation. ff_comm_destroy frees it.
ff_status ff_comm_nccl_create(ff_comm **out, ff_comm *boot);
// Whether this build has NCCL (ff_comm_nccl_create returns FF_ERR_NO_CUDA otherwise).
bool ff_comm_nccl_built(void);
// CUDA IPC between the MPI ranks of one node (any GPUs, shared ones included): a receiver maps the
// sender's device allocation and copies from it device to device; only descriptors and
// acknowledgements go through `boot` (which must outlive the new comm). Device all-reduces are
// staged through host memory. FF_ERR_INPUT when the ranks span several hosts.
ff_status ff_comm_ipc_create(ff_comm **out, ff_comm *boot);
// Over `boot` (collective; the calling thread's current GPU): whether every rank has a GPU of its
// own (else `why` names two ranks sharing one) and whether all ranks are on one host.
ff_status ff_comm_gpu_layout(ff_comm *boot, bool *one_gpu_per_rank, bool *one_node, char *why, size_t cap);
// Loopback only: the timeout (ff_comm_set_timeout) the rank comms of later ff_comm_loopback_run
// calls start with: a blocked receive or collective that sees no progress for this long fails with
// FF_ERR_MPI instead of hanging (default 60 s; <= 0 restores it; tests of misuse set it short).
void ff_comm_loopback_set_timeout(double seconds);

#ifdef __cplusplus
}
#endif
