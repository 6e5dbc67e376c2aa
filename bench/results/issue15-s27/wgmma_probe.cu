// Session 27 probe (not part of the build): can Hopper's wgmma (asynchronous warpgroup MMA, A from
// registers, B from shared memory through a descriptor) carry tf32x3, and does it give the bits of
// the mma.sync m16n8k8 kernels (k_conv_x3, tf32x3.cuh)? Three questions, one run:
//  1. correctness of the operand layouts (A fragment, B's K-major no-swizzle core matrices, D):
//     D = X W^T for X (64 x K), W (64 x K) against a float64 reference;
//  2. bits: the tf32x3 sum with wgmma (A = X, B = W; products x_big w_small, x_small w_big, x_big
//     w_big) against the mma.sync order of tf32x3.cuh (A = W, B = X; w_small x_big, w_big x_small,
//     w_big x_big), chunk by chunk over K = 576;
//  3. throughput: a loop of m64n64k8 wgmma against a loop of m16n8k8 mma.sync, TF32 products/s.
// Build: nvcc -arch=sm_90a -O3 -o wgmma_probe wgmma_probe.cu
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>

#define CK(x)                                                   \
    do {                                                        \
        cudaError_t e = (x);                                    \
        if (e != cudaSuccess) {                                 \
            printf("CUDA %s: %s\n", #x, cudaGetErrorString(e)); \
            exit(1);                                            \
        }                                                       \
    } while (0)

__device__ __forceinline__ void split_tf32(float x, uint32_t &big, uint32_t &small) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
    const float rest = __fsub_rn(x, __uint_as_float(big));
    small = isfinite(rest) ? (__float_as_uint(rest) + 0x1000u) & 0xffffe000u : 0u;
}
__device__ __forceinline__ void mma_tf32(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// no swizzle, K-major: core matrix = 8 rows (n) x 16 bytes (4 tf32 along k); LBO: the next core
// matrix along k, SBO: the next along n
__device__ __forceinline__ uint64_t desc_of(const void *smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a >> 4) & 0x3fff) | (uint64_t)((lbo >> 4) & 0x3fff) << 16 |
           (uint64_t)((sbo >> 4) & 0x3fff) << 32;
}
#define LBO 128
#define SBO 256
__device__ __forceinline__ int b_off(int n, int k) {  // float index of (n, k) in a 64 x 8 chunk
    return ((n >> 3) * SBO + (k >> 2) * LBO + (n & 7) * 16 + (k & 3) * 4) / 4;
}
__device__ __forceinline__ void wgmma_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%"
        "29,%30,%31},"
        " {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

// D[m][n] = sum_k X[m][k] W[n][k], tf32x3 with wgmma (x3 = 1) or one plain TF32 product (x3 = 0)
__global__ void k_wg(float *D, const float *X, const float *W, int K, int x3) {
    __shared__ __align__(128) float bb[64 * 8], bs[64 * 8];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32, gq = lane >> 2, tq = lane & 3;
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    const int r0 = warp * 16 + gq, r1 = r0 + 8;
    for (int k0 = 0; k0 < K; k0 += 8) {
        __syncthreads();
        for (int e = t; e < 512; e += 128) {
            const int n = e / 8, k = e % 8;
            uint32_t hi, lo;
            split_tf32(W[n * K + k0 + k], hi, lo);
            bb[b_off(n, k)] = __uint_as_float(hi), bs[b_off(n, k)] = __uint_as_float(lo);
        }
        fence_async_smem();
        __syncthreads();
        uint32_t ab[4], al[4];
        split_tf32(X[r0 * K + k0 + tq], ab[0], al[0]);
        split_tf32(X[r1 * K + k0 + tq], ab[1], al[1]);
        split_tf32(X[r0 * K + k0 + tq + 4], ab[2], al[2]);
        split_tf32(X[r1 * K + k0 + tq + 4], ab[3], al[3]);
        wg_fence();
        if (x3) {
            wgmma_n64(d, ab, desc_of(bs, LBO, SBO));  // x_big w_small
            wgmma_n64(d, al, desc_of(bb, LBO, SBO));  // x_small w_big
        }
        wgmma_n64(d, ab, desc_of(bb, LBO, SBO));  // x_big w_big
        wg_commit();
        wg_wait<0>();
    }
    for (int j = 0; j < 8; j++) {
        const int c = 8 * j + 2 * tq;
        D[r0 * 64 + c] = d[4 * j], D[r0 * 64 + c + 1] = d[4 * j + 1];
        D[r1 * 64 + c] = d[4 * j + 2], D[r1 * 64 + c + 1] = d[4 * j + 3];
    }
}
// the same with mma.sync m16n8k8 as tf32x3.cuh runs it: A = W (row n), B = X (column m)
__global__ void k_ms(float *D, const float *X, const float *W, int K, int x3) {
    const int t = threadIdx.x, warp = t / 32, lane = t % 32, gq = lane >> 2, tq = lane & 3;
    // warp: rows n in [16 warp, +16), all 64 columns m (8 tiles)
    float acc[8][4];
    for (int j = 0; j < 8; j++)
        for (int q = 0; q < 4; q++) acc[j][q] = 0.0f;
    const int n0 = warp * 16 + gq, n1 = n0 + 8;
    for (int k0 = 0; k0 < K; k0 += 8) {
        uint32_t ab[4], al[4];
        split_tf32(W[n0 * K + k0 + tq], ab[0], al[0]);
        split_tf32(W[n1 * K + k0 + tq], ab[1], al[1]);
        split_tf32(W[n0 * K + k0 + tq + 4], ab[2], al[2]);
        split_tf32(W[n1 * K + k0 + tq + 4], ab[3], al[3]);
        for (int j = 0; j < 8; j++) {
            const int m = 8 * j + gq;
            uint32_t bb[2], bl[2];
            split_tf32(X[m * K + k0 + tq], bb[0], bl[0]);
            split_tf32(X[m * K + k0 + tq + 4], bb[1], bl[1]);
            if (x3) {
                mma_tf32(acc[j], al, bb);
                mma_tf32(acc[j], ab, bl);
            }
            mma_tf32(acc[j], ab, bb);
        }
    }
    for (int j = 0; j < 8; j++) {
        const int m = 8 * j + 2 * tq;  // acc[j]: (row n0, cols m, m+1), (row n1, ...)
        D[m * 64 + n0] = acc[j][0], D[(m + 1) * 64 + n0] = acc[j][1];
        D[m * 64 + n1] = acc[j][2], D[(m + 1) * 64 + n1] = acc[j][3];
    }
}
// throughput: iters x (3 wgmma m64n64k8) per warpgroup
__global__ void __launch_bounds__(128) k_wg_loop(float *out, int iters) {
    __shared__ __align__(128) float bb[64 * 8];
    for (int e = threadIdx.x; e < 512; e += 128) bb[e] = 1e-3f * (e % 7);
    fence_async_smem();
    __syncthreads();
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    uint32_t a[4] = {0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u};
    const uint64_t desc = desc_of(bb, LBO, SBO);
    for (int it = 0; it < iters; it++) {
        wg_fence();
        wgmma_n64(d, a, desc);
        wgmma_n64(d, a, desc);
        wgmma_n64(d, a, desc);
        wg_commit();
        wg_wait<0>();
    }
    float s = 0;
    for (int i = 0; i < 32; i++) s += d[i];
    if (s == 12345.0f) out[threadIdx.x] = s;
}
// iters x (3 mma m16n8k8 on each of 8 x 2 tiles) per warp: a warpgroup's 64 x 64 x 8 three times
__global__ void __launch_bounds__(128) k_ms_loop(float *out, int iters) {
    float acc[2][8][4] = {};
    uint32_t a[4] = {0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u}, b[2] = {0x3a800000u, 0x3a800000u};
    for (int it = 0; it < iters; it++)
        for (int r = 0; r < 3; r++)
            for (int mi = 0; mi < 1; mi++)
                for (int j = 0; j < 8; j++) {
                    mma_tf32(acc[0][j], a, b);
                    mma_tf32(acc[1][j], a, b);
                }
    float s = 0;
    for (int j = 0; j < 8; j++)
        for (int q = 0; q < 4; q++) s += acc[0][j][q] + acc[1][j][q];
    if (s == 12345.0f) out[threadIdx.x] = s;
}

int main() {
    const int K = 576;
    std::vector<float> X(64 * K), W(64 * K);
    uint64_t st = 7;
    auto rnd = [&]() {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        return (float)((int)(st >> 40) % 20001 - 10000) / 10000.0f * ldexpf(1.0f, (int)(st >> 61) % 3);
    };
    for (auto &v : X) v = rnd();
    for (auto &v : W) v = rnd();
    float *dX, *dW, *d1, *d2, *dout;
    CK(cudaMalloc(&dX, X.size() * 4));
    CK(cudaMalloc(&dW, W.size() * 4));
    CK(cudaMalloc(&d1, 64 * 64 * 4));
    CK(cudaMalloc(&d2, 64 * 64 * 4));
    CK(cudaMalloc(&dout, 4096));
    CK(cudaMemcpy(dX, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, W.data(), W.size() * 4, cudaMemcpyHostToDevice));
    std::vector<float> D1(4096), D2(4096);
    for (int x3 = 0; x3 < 2; x3++) {
        k_wg<<<1, 128>>>(d1, dX, dW, K, x3);
        k_ms<<<1, 128>>>(d2, dX, dW, K, x3);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(D1.data(), d1, 16384, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(D2.data(), d2, 16384, cudaMemcpyDeviceToHost));
        double worst1 = 0, worst2 = 0;
        int differ = 0;
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < 64; n++) {
                double ref = 0, A = 0;
                for (int k = 0; k < K; k++)
                    ref += (double)X[m * K + k] * W[n * K + k], A += fabs((double)X[m * K + k] * W[n * K + k]);
                worst1 = fmax(worst1, fabs(D1[m * 64 + n] - ref) / A);
                worst2 = fmax(worst2, fabs(D2[m * 64 + n] - ref) / A);
                differ += memcmp(&D1[m * 64 + n], &D2[m * 64 + n], 4) != 0;
            }
        printf("%s: wgmma worst |err|/A 2^%.1f, mma.sync 2^%.1f; %d of 4096 differ in bits\n", x3 ? "tf32x3" : "tf32  ",
               log2(worst1), log2(worst2), differ);
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int iters = 20000;
    for (int bps = 1; bps <= 4; bps *= 2) {
        for (int v = 0; v < 2; v++) {
            float ms = 0;
            for (int rep = 0; rep < 2; rep++) {
                CK(cudaEventRecord(e0));
                if (v == 0)
                    k_wg_loop<<<sms * bps, 128>>>(dout, iters);
                else
                    k_ms_loop<<<sms * bps, 128>>>(dout, iters);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms, e0, e1));
            }
            const double flops = 2.0 * sms * bps * (double)iters * 3 * 64 * 64 * 8;
            printf("%s, %d warpgroups a multiprocessor: %.3f ms, %.1f TFLOP/s of TF32 products\n",
                   v ? "mma.sync m16n8k8" : "wgmma m64n64k8 ", bps, ms, flops / ms * 1e-9);
        }
    }
    return 0;
}
