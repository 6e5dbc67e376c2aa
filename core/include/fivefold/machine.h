// What machine and build a result came from (bench JSON `machine` and `build`, docs/ARCHITECTURE.md §8).
#pragma once
#include <stddef.h>

#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char cpu[128];  // model name from /proc/cpuinfo
    int cores;      // online logical CPUs
    char hostname[64];
    char gpu[128];                  // name of device 0, "" if none
    int gpus;                       // usable CUDA devices (0 without a GPU or a CUDA build)
    int cuda_runtime, cuda_driver;  // 1000*major + 10*minor, 0 if none
    char mpi[160];                  // MPI library name and version (MPI_Get_library_version, first line)
    char nccl[32];                  // NCCL version compiled against, "" if none
} ff_machine;

// Fills m; never fails (unknown fields are left empty / zero).
void ff_machine_probe(ff_machine *m);

#ifdef __cplusplus
}
#endif
