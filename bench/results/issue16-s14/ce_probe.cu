// Does NCCL's zero-CTA policy (NCCL_CTA_POLICY_ZERO: copy engines instead of SMs, on buffers
// registered as symmetric windows) take the exchange's cost off the GEMMs? Two processes, one GPU
// each (bootstrapped through a file, no MPI): an fp32 SGEMM stream alone, the MLP-sized exchange
// alone (all-to-all of `mb` MB per rank, then the all-gather of the same bytes), and both at once
// on two streams. Printed by rank 0: each alone and the spans of both when they overlap.
// Build: nvcc -O2 -arch=sm_90 ce_probe.cu -o ce_probe -lnccl -lcublas
// Run:   ./ce_probe RANK NRANKS POLICY(-1 default, 0, 1, 2 zero) SYM(0|1) IDFILE MB  (one per GPU)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;
#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)
#define NK(x)                                                                                                    \
    do {                                                                                                         \
        ncclResult_t r_ = (x);                                                                                   \
        if (r_ != ncclSuccess) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #x, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

static float ms_between(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

#ifndef NCCL_CTA_POLICY_ZERO
int main(void) {
    printf("NCCL %d.%d.%d has no NCCL_CTA_POLICY_ZERO (copy-engine collectives): nothing to probe\n", NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH);
    return 0;
}
#else
int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: ce_probe RANK NRANKS POLICY SYM IDFILE MB\n");
        return 2;
    }
    rank = atoi(argv[1]);
    const int P = atoi(argv[2]), policy = atoi(argv[3]), sym = atoi(argv[4]);
    const char *idfile = argv[5];
    const size_t bytes = (size_t)atoi(argv[6]) << 20;
    if (P < 2 || rank < 0 || rank >= P || policy < -1 || policy > 2 || (sym != 0 && sym != 1) || bytes == 0) {
        fprintf(stderr,
                "ce_probe: RANK %s NRANKS %s POLICY %s SYM %s MB %s: expected 0 <= RANK < NRANKS, NRANKS >= 2, "
                "POLICY -1..2, SYM 0 or 1, MB >= 1\n",
                argv[1], argv[2], argv[3], argv[4], argv[6]);
        return 2;
    }
    CK(cudaSetDevice(rank));
    ncclUniqueId id;
    if (rank == 0) {
        NK(ncclGetUniqueId(&id));
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
        FILE *f = fopen(tmp, "wb");
        fwrite(&id, sizeof id, 1, f);
        fclose(f);
        rename(tmp, idfile);
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 400 && !(f = fopen(idfile, "rb")); i++) usleep(50000);
        if (!f || fread(&id, sizeof id, 1, f) != 1) {
            fprintf(stderr, "rank %d: no id in %s\n", rank, idfile);
            return 1;
        }
        fclose(f);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    if (policy >= 0) cfg.CTAPolicy = policy;
    ncclComm_t comm;
    NK(ncclCommInitRankConfig(&comm, P, id, rank, &cfg));
    float *sa, *ra, *rg;  // all-to-all send and receive (bytes each); all-gather receive (bytes)
    float *buf[3];
    for (int i = 0; i < 3; i++) {
        if (sym)
            NK(ncclMemAlloc((void **)&buf[i], bytes));
        else
            CK(cudaMalloc((void **)&buf[i], bytes));
        CK(cudaMemset(buf[i], 0, bytes));
    }
    sa = buf[0], ra = buf[1], rg = buf[2];
    if (sym) {
        ncclWindow_t w[3];
        for (int i = 0; i < 3; i++) NK(ncclCommWindowRegister(comm, buf[i], bytes, &w[i], NCCL_WIN_COLL_SYMMETRIC));
    }
    const size_t per = bytes / sizeof(float) / P;  // floats to each peer; the all-gather's send
    cudaStream_t sg, sc;
    CK(cudaStreamCreateWithFlags(&sg, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasSetStream(h, sg);
    const int n = 4096;
    float *A, *B, *C;
    CK(cudaMalloc((void **)&A, (size_t)n * n * 4));
    CK(cudaMalloc((void **)&B, (size_t)n * n * 4));
    CK(cudaMalloc((void **)&C, (size_t)n * n * 4));
    CK(cudaMemset(A, 0, (size_t)n * n * 4));
    CK(cudaMemset(B, 0, (size_t)n * n * 4));
    const float one = 1.0f, zero = 0.0f;
    auto gemm = [&]() { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n); };
    auto exchange = [&]() {
        NK(ncclAlltoAll(sa, ra, per, ncclFloat, comm, sc));
        NK(ncclAllGather(ra, rg, per, ncclFloat, comm, sc));
    };
    const int NG = 30, NC = 10;
    cudaEvent_t e[6];
    for (int i = 0; i < 6; i++) CK(cudaEventCreate(&e[i]));
    for (int i = 0; i < 3; i++) gemm(), exchange();
    CK(cudaDeviceSynchronize());
    // GEMMs alone
    CK(cudaEventRecord(e[0], sg));
    for (int i = 0; i < NG; i++) gemm();
    CK(cudaEventRecord(e[1], sg));
    CK(cudaDeviceSynchronize());
    const float g_alone = ms_between(e[0], e[1]);
    // the exchange alone
    CK(cudaEventRecord(e[2], sc));
    for (int i = 0; i < NC; i++) exchange();
    CK(cudaEventRecord(e[3], sc));
    CK(cudaDeviceSynchronize());
    const float c_alone = ms_between(e[2], e[3]);
    // both at once
    CK(cudaEventRecord(e[0], sg));
    CK(cudaStreamWaitEvent(sc, e[0], 0));
    CK(cudaEventRecord(e[2], sc));
    for (int i = 0; i < NG; i++) gemm();
    for (int i = 0; i < NC; i++) exchange();
    CK(cudaEventRecord(e[1], sg));
    CK(cudaEventRecord(e[3], sc));
    CK(cudaDeviceSynchronize());
    const float g_both = ms_between(e[0], e[1]), c_both = ms_between(e[2], e[3]);
    if (rank == 0) {
        const double gb = 2.0 * (double)bytes * (P - 1) / P / 1e9 * NC;  // bytes out per rank, both collectives
        printf(
            "policy %2d sym %d %4zu MB | GEMMs alone %7.2f ms | exchange alone %7.2f ms (%5.0f GB/s out) | "
            "together: GEMMs %7.2f ms (+%5.1f %%), exchange %7.2f ms\n",
            policy, sym, bytes >> 20, g_alone, c_alone, gb / (c_alone / 1e3), g_both,
            100.0 * (g_both - g_alone) / g_alone, c_both);
    }
    NK(ncclCommDestroy(comm));
    return 0;
}
#endif
