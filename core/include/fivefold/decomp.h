// The decompositions (docs/ARCHITECTURE.md §1): how the work of a forward is divided among ranks,
// written once over the device interface (device.h) and the comm interface (comm.h), so every
// mode that splits work — mpi on CPUs, hybrid and direct on GPUs, and the loopback ranks of the
// tests and the halo fuzzer — runs this code:
//   none       one process computes everything (serial, cuda)
//   batch      rank r computes images ff_band(n, P, r) through every layer: scatter, compute, gather
//   rows       every spatial layer is cut into bands of output rows (partition.h, per the plan);
//              before a windowed layer each rank fetches its halo rows from whichever ranks own
//              them; before an FC layer the bands are all-gathered and the FC layer is split by
//              output feature; layers planned as whole-layer steps run where the tensor is
//   replicate  the input is broadcast and every rank computes everything (the counter-example)
// Bits equal the device's undivided run for every split and rank count: each output element is
// computed from its inputs alone, whichever rank computes it, and nothing sums across ranks.
// Halo and staging buffers carry guard regions (guard.h), checked after every exchange and unpack.
#pragma once
#include <stdint.h>

#include "fivefold/device.h"
#include "fivefold/executor.h"
#include "fivefold/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ff_comm;
typedef struct ff_decomp ff_decomp;

// dev computes this rank's part; comm (NULL for split none) connects the ranks and must already be
// bound to dev's memory when dev is not host memory (ff_comm_bind_device). m and dev must outlive
// the decomposition.
ff_status ff_decomp_create(ff_decomp **out, ff_split split, const ff_model *m, ff_device *dev, struct ff_comm *comm);
void ff_decomp_destroy(ff_decomp *x);

// Layers [first, last] on n images: in (n, layers[first].in) and out (n, layers[last].out) are host
// memory, used on rank 0 only. Collective. fault_layer: the --inject-fault layer (-1 none): its
// output element 0 of image 0 is perturbed on the rank that computes it. trace: phases and bytes
// are added (NULL: untimed).
ff_status ff_decomp_forward(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last, int fault_layer,
                            ff_trace *trace);

// Test hooks --inject-crash / --inject-hang (executor.h: crash_rank, crash_layer): in every later
// forward that runs `layer`, rank `rank` stops just before the first communication belonging to
// that layer or a later one (or at the forward's end if none follows): raise(SIGKILL), or (hang)
// sleep for ever, so that the other ranks are left inside or entering that exchange.
void ff_decomp_set_crash(ff_decomp *x, int rank, int layer, bool hang);

// Device-resident replay (GPU devices; what a data-parallel PyTorch figure measures): the last
// forward of these n images and layers again, without host copies. The input is where that forward
// put it — batch: each rank's images already on its own device (no scatter); rows: the batch on
// rank 0's device, scattered in row bands as usual — and the output stays on rank 0's device,
// where ff_decomp_resident_output downloads it. Collective.
ff_status ff_decomp_replay(ff_decomp *x, int64_t n, int first, int last);
ff_status ff_decomp_resident_output(ff_decomp *x, float *out_host, int64_t n, int last);

#ifdef __cplusplus
}
#endif
