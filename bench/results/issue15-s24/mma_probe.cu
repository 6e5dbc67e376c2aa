// Session 24: the rate of mma.sync m16n8k8 TF32 products on this GPU with nothing else in the loop
// (operands in registers, CH independent accumulators per warp, W warps per block, 4 blocks per
// multiprocessor), against the m16n8k16 FP16 products for scale. Prints TFLOP/s of products.
// Build and run: nvcc -arch=sm_90 -O3 -o mma_probe mma_probe.cu && ./mma_probe
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

template <int CH>
__global__ void tf32_loop(float *out, int iters, uint32_t seed) {
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = (seed * (threadIdx.x + i + 1)) & 0x3f800000u;
    for (int i = 0; i < 2; i++) b[i] = (seed * (threadIdx.x + i + 7)) & 0x3f800000u;
    float c[CH][4] = {};
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int h = 0; h < CH; h++)
            asm volatile(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};\n"
                : "+f"(c[h][0]), "+f"(c[h][1]), "+f"(c[h][2]), "+f"(c[h][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    float s = 0;
    for (int h = 0; h < CH; h++) s += c[h][0] + c[h][1] + c[h][2] + c[h][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int CH>
__global__ void f16_loop(float *out, int iters, uint32_t seed) {
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = (seed * (threadIdx.x + i + 1)) & 0x3c003c00u;
    for (int i = 0; i < 2; i++) b[i] = (seed * (threadIdx.x + i + 7)) & 0x3c003c00u;
    float c[CH][4] = {};
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int h = 0; h < CH; h++)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};\n"
                : "+f"(c[h][0]), "+f"(c[h][1]), "+f"(c[h][2]), "+f"(c[h][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    float s = 0;
    for (int h = 0; h < CH; h++) s += c[h][0] + c[h][1] + c[h][2] + c[h][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <typename K>
static void run(const char *name, K kern, int ch, int k, int warps, int sms, float *out) {
    const int iters = 4096, blocks = sms * 4;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    kern<<<blocks, warps * 32>>>(out, 16, 3);
    cudaEventRecord(e0);
    kern<<<blocks, warps * 32>>>(out, iters, 5);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double flops = 2.0 * 16 * 8 * k * (double)iters * ch * warps * blocks;
    printf("%-24s chains %d  warps/block %2d  blocks %4d: %8.3f ms  %7.1f TFLOP/s\n", name, ch, warps, blocks, ms,
           flops / ms / 1e9);
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("%s, %d multiprocessors\n", p.name, sms);
    float *out;
    cudaMalloc(&out, 1 << 24);
    for (int warps : {1, 2, 4, 8}) {
        run("tf32 m16n8k8", tf32_loop<1>, 1, 8, warps, sms, out);
        run("tf32 m16n8k8", tf32_loop<4>, 4, 8, warps, sms, out);
        run("tf32 m16n8k8", tf32_loop<8>, 8, 8, warps, sms, out);
        run("f16 m16n8k16", f16_loop<8>, 8, 16, warps, sms, out);
    }
    const cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
