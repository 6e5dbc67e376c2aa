// Session 11: which GPU kernel for train.h's tree over a step's micro-batch gradient rows. The
// three candidates, copied from core/device/cuda/train_cuda.cu's history: `inplace` (sessions 7-10:
// one thread per element, the tree level by level through global memory), `stack` (session 11's
// first try: rows read once, partial sums on a run-time stack, which lands in local memory) and
// `reg` (kept: the row count a template argument, everything in registers). Each is checked
// against `inplace` bit for bit and timed with CUDA events (median of 15), for the shapes the
// trainer meets: MNIST-CNN (1.2 M parameters) at 8 and 32 rows, the MLP (120 M) at 2, 4 and 8.
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 tree_kernels.cu -o tree_kernels && ./tree_kernels
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>
#define GRID(i, n)                                                                \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)
__global__ void k_inplace(float *rows, long long nrows, long long stride, long long len) {
    GRID(i, len) {
        for (long long s = 1; s < nrows; s *= 2)
            for (long long j = 0; j + s < nrows; j += 2 * s)
                rows[j * stride + i] = __fadd_rn(rows[j * stride + i], rows[(j + s) * stride + i]);
    }
}
__global__ void k_stack(float *out, const float *rows, long long nrows, long long stride, long long len) {
    GRID(i, len) {
        float sum[12];
        long long leaves[12];
        int top = 0;
        for (long long j0 = 0; j0 < nrows; j0 += 8) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = j0 + u < nrows ? rows[(j0 + u) * stride + i] : 0.0f;
            for (int u = 0; u < 8 && j0 + u < nrows; u++) {
                float x = v[u];
                long long n = 1;
                while (top > 0 && leaves[top - 1] == n) {
                    x = __fadd_rn(sum[top - 1], x);
                    n *= 2;
                    top--;
                }
                sum[top] = x;
                leaves[top] = n;
                top++;
            }
        }
        float x = sum[top - 1];
        for (int k = top - 2; k >= 0; k--) x = __fadd_rn(sum[k], x);
        out[i] = x;
    }
}
__host__ __device__ constexpr int levels(int n) {
    return n <= 1 ? 0 : 1 + levels((n + 1) / 2);
}
template <int N>
__global__ void k_reg(float *out, const float *rows, long long stride, long long len) {
    GRID(i, len) {
        float v[N];
#pragma unroll
        for (int j = 0; j < N; j++) v[j] = rows[j * stride + i];
#pragma unroll
        for (int l = 0; l < levels(N); l++) {
            const int s = 1 << l;
#pragma unroll
            for (int j = 0; j < N; j += 2 * s)
                if (j + s < N) v[j] = __fadd_rn(v[j], v[j + s]);
        }
        out[i] = v[0];
    }
}
static void reg(int n, float *out, const float *rows, long long len, unsigned g) {
    switch (n) {
        case 2: k_reg<2><<<g, 256>>>(out, rows, len, len); break;
        case 4: k_reg<4><<<g, 256>>>(out, rows, len, len); break;
        case 8: k_reg<8><<<g, 256>>>(out, rows, len, len); break;
        case 32: k_reg<32><<<g, 256>>>(out, rows, len, len); break;
    }
}
int main() {
    struct {
        const char *what;
        int n;
        long long len;
    } cases[] = {{"mnist-cnn b64 (M 8)", 8, 1200000},
                 {"mnist-cnn b256 (M 8)", 32, 1200000},
                 {"mlp 2 rows", 2, 120080000},
                 {"mlp 4 rows", 4, 120080000},
                 {"mlp 8 rows", 8, 120080000}};
    printf("%-22s %5s %12s %10s %10s %10s %8s\n", "case", "rows", "floats", "inplace", "stack", "reg", "bits");
    for (auto &c : cases) {
        const size_t bytes = (size_t)c.n * c.len * sizeof(float);
        std::vector<float> h((size_t)c.n * c.len);
        unsigned x = 12345;
        for (auto &v : h) {
            x = x * 1664525u + 1013904223u;
            v = ldexpf((float)(x >> 8) / 16777216.0f - 0.5f, (int)(x % 13) - 6);
        }
        float *src, *work, *out;
        cudaMalloc(&src, bytes);
        cudaMalloc(&work, bytes);
        cudaMalloc(&out, c.len * sizeof(float));
        cudaMemcpy(src, h.data(), bytes, cudaMemcpyHostToDevice);
        const unsigned g = (unsigned)std::min<long long>((c.len + 255) / 256, 132 * 16);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        double ms[3];
        for (int k = 0; k < 3; k++) {
            std::vector<float> t;
            for (int r = 0; r < 18; r++) {
                cudaMemcpy(work, src, bytes, cudaMemcpyDeviceToDevice);
                cudaEventRecord(e0);
                if (k == 0) k_inplace<<<g, 256>>>(work, c.n, c.len, c.len);
                if (k == 1) k_stack<<<g, 256>>>(out, work, c.n, c.len, c.len);
                if (k == 2) reg(c.n, out, work, c.len, g);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                float v;
                cudaEventElapsedTime(&v, e0, e1);
                if (r >= 3) t.push_back(v);
            }
            std::sort(t.begin(), t.end());
            ms[k] = t[t.size() / 2];
        }
        std::vector<float> a(c.len), b(c.len), d(c.len);
        cudaMemcpy(work, src, bytes, cudaMemcpyDeviceToDevice);
        k_inplace<<<g, 256>>>(work, c.n, c.len, c.len);
        cudaMemcpy(a.data(), work, c.len * 4, cudaMemcpyDeviceToHost);
        k_stack<<<g, 256>>>(out, src, c.n, c.len, c.len);
        cudaMemcpy(b.data(), out, c.len * 4, cudaMemcpyDeviceToHost);
        reg(c.n, out, src, c.len, g);
        cudaMemcpy(d.data(), out, c.len * 4, cudaMemcpyDeviceToHost);
        const bool same = !memcmp(a.data(), b.data(), c.len * 4) && !memcmp(a.data(), d.data(), c.len * 4);
        printf("%-22s %5d %12lld %8.3f ms %7.3f ms %7.3f ms %8s   (reg: %.0f GB/s)\n", c.what, c.n, c.len, ms[0], ms[1],
               ms[2], same ? "equal" : "DIFFER", (c.n + 1) * c.len * 4.0 / (ms[2] * 1e6));
        cudaFree(src);
        cudaFree(work);
        cudaFree(out);
    }
    return cudaGetLastError() != cudaSuccess;
}
