// The modes (docs/ARCHITECTURE.md §1): each is a device, the splits it allows, and how its ranks
// talk. Nothing else distinguishes them: executor.c composes the device (device.h), the
// decomposition (decomp.h) and the communicator (comm.h) this table names.
#include "modes.h"

#define B(s) (1u << (s))

static const ff_mode_desc table[FF_N_MODES] = {
    [FF_MODE_SERIAL] = {"serial", "v1", FF_DEVICE_CPU, false, B(FF_SPLIT_NONE), FF_SPLIT_NONE, true, NULL},
    [FF_MODE_MPI] = {"mpi", "v2", FF_DEVICE_CPU, true, B(FF_SPLIT_BATCH) | B(FF_SPLIT_ROWS) | B(FF_SPLIT_REPLICATE),
                     FF_SPLIT_BATCH, true, NULL},
    [FF_MODE_CUDA] = {"cuda", "v3", FF_DEVICE_CUDA, false, B(FF_SPLIT_NONE), FF_SPLIT_NONE, true, NULL},
    // cuda device + the rank's communicator carrying device buffers: over MPI each message is
    // staged through host memory; over loopback (tests, fuzzer) the simulated ranks share a GPU.
    [FF_MODE_HYBRID] = {"hybrid", "v4", FF_DEVICE_CUDA, true, B(FF_SPLIT_BATCH) | B(FF_SPLIT_ROWS), FF_SPLIT_BATCH,
                        true, NULL},
    // cuda device + device buffers handed straight to NCCL (bootstrapped over the rank's MPI
    // communicator) or to a CUDA-aware MPI (--transport): no host copy on the way.
    [FF_MODE_DIRECT] = {"direct", "v5", FF_DEVICE_CUDA, true, B(FF_SPLIT_BATCH) | B(FF_SPLIT_ROWS), FF_SPLIT_BATCH,
                        true, NULL},
};

const ff_mode_desc *ff_mode_desc_of(ff_mode m) {
    return (unsigned)m < FF_N_MODES ? &table[m] : NULL;
}
