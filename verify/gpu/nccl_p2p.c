// NCCL's own send/recv bandwidth between ranks (the reference for the direct mode's halo
// transfers, issue 14): rank r exchanges a buffer of S bytes with rank r^1 (both directions at
// once, as a halo exchange does) in one ncclGroupStart/End, for S = 1, 4, 16, 64, 256 MB; median
// of 20 after 5 warm-ups, event-timed. Prints one JSON line per size on rank 0 ("JSON {...}").
// Usage: mpiexec -n 2 ff_nccl_p2p [MB ...]
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                    \
    do {                                                                         \
        if ((x) != 0) {                                                          \
            fprintf(stderr, "ff_nccl_p2p: %s failed (line %d)\n", #x, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                        \
        }                                                                        \
    } while (0)

static int cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, P, ngpu;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (P % 2) {
        if (rank == 0) fprintf(stderr, "ff_nccl_p2p: run with an even number of ranks (pairs r, r^1)\n");
        MPI_Finalize();
        return 2;
    }
    int sizes_mb[16] = {1, 4, 16, 64, 256}, n_sizes = 5;
    if (argc > 1) {
        n_sizes = 0;
        for (int i = 1; i < argc; i++) {
            char *end = NULL;
            long v = strtol(argv[i], &end, 10);
            if (i > 16 || end == argv[i] || *end || v < 1 || v > 8192) {
                if (rank == 0)
                    fprintf(stderr, "ff_nccl_p2p: size '%s' (argument %d): expected 1..8192 MB, at most 16 sizes\n",
                            argv[i], i);
                MPI_Finalize();
                return 2;
            }
            sizes_mb[n_sizes++] = (int)v;
        }
    }
    CK(cudaGetDeviceCount(&ngpu));
    CK(cudaSetDevice(rank % ngpu));
    ncclUniqueId id;
    if (rank == 0) CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t nc;
    CK(ncclCommInitRank(&nc, P, id, rank));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int peer = rank ^ 1, iters = 20, warm = 5;
    for (int k = 0; k < n_sizes; k++) {
        size_t bytes = (size_t)sizes_mb[k] << 20;
        void *sb, *rb;
        CK(cudaMalloc(&sb, bytes));
        CK(cudaMalloc(&rb, bytes));
        float ms[64];
        for (int it = 0; it < warm + iters; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            CK(cudaEventRecord(e0, s));
            CK(ncclGroupStart());
            CK(ncclRecv(rb, bytes, ncclUint8, peer, nc, s));
            CK(ncclSend(sb, bytes, ncclUint8, peer, nc, s));
            CK(ncclGroupEnd());
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            if (it >= warm) CK(cudaEventElapsedTime(&ms[it - warm], e0, e1));
        }
        qsort(ms, iters, sizeof(float), cmp);
        double med = 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]);
        if (rank == 0)
            printf(
                "JSON {\"name\": \"nccl-sendrecv\", \"nccl\": \"%d.%d.%d\", \"ranks\": %d, \"bytes\": %zu, "
                "\"median_ms\": %.4f, \"gbs_each_way\": %.2f}\n",
                NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, P, bytes, med, (double)bytes / (med / 1e3) / 1e9);
        CK(cudaFree(sb));
        CK(cudaFree(rb));
    }
    ncclCommDestroy(nc);
    MPI_Finalize();
    return 0;
}
