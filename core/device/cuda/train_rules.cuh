// The element-wise arithmetic of the training kernels that more than one kernel runs: relu's and a
// 2x2 pool's backward rules, the tree of train.h over N values and the SGD rule, each float operation an explicit _rn
// intrinsic (no contraction), so that every kernel that includes this gives the same bits: train_cuda.cu's k_tree_sgd4
// and the transport's fused exchange (comm_nccl_lsa.cu), which share the loop below.
#pragma once

// relu's backward, the CPU's selection exactly: y > 0 is false for NaN and for -0, both giving +0.
__device__ __forceinline__ float relu_pass(float y, float dy) {
    return y > 0.0f ? dy : 0.0f;
}

// A 2x2 pool window's pick, the CPU's scan: (0,0), (0,1), (1,0), (1,1), a later one winning if
// greater or NaN. Returns 0..3 in that order; *bv receives the picked value.
__device__ __forceinline__ int pool2x2_pick(float a0, float a1, float b0, float b1, float *bv) {
    int best = 0;
    float v = a0;
    if (a1 > v || isnan(a1)) best = 1, v = a1;
    if (b0 > v || isnan(b0)) best = 2, v = b0;
    if (b1 > v || isnan(b1)) best = 3, v = b1;
    *bv = v;
    return best;
}

__host__ __device__ constexpr int tree_levels(int n) {
    return n <= 1 ? 0 : 1 + tree_levels((n + 1) / 2);
}
// The tree over v[0..N) in train.h's order, its sum left in v[0]: every loop unrolled, so the
// partial sums stay in registers.
template <int N>
__device__ __forceinline__ float tree_of(float *v) {
#pragma unroll
    for (int l = 0; l < tree_levels(N); l++) {
        const int s = 1 << l;
#pragma unroll
        for (int j = 0; j < N; j += 2 * s)
            if (j + s < N) v[j] = __fadd_rn(v[j], v[j + s]);
    }
    return v[0];
}
// step_core's (train.c) float operations one by one, no contraction: weight w[i] and gradient g
// of element i give the updated weight; mom[i] updated in place.
// m: the element's momentum (read unless first; the updated one left there when momentum != 0).
__device__ __forceinline__ float sgd_rule_reg(float w, float g, float &m, float lr, float momentum, float wd,
                                              int first) {
    if (wd != 0.0f) g = __fadd_rn(g, __fmul_rn(wd, w));
    float b = g;
    if (momentum != 0.0f) {
        b = first ? g : __fadd_rn(__fmul_rn(momentum, m), g);
        m = b;
    }
    return __fsub_rn(w, __fmul_rn(lr, b));
}

// The loop both update kernels run over [0, count) (train_cuda.cu k_tree_sgd4, comm_nccl_lsa.cu
// k_lsa_tree_sgd), for a grid of few blocks: each thread loads CHUNKS float4s of every row, of the
// weights and of the momentum before it computes any (the loads in flight together), then adds
// each element's N rows in the tree's order, applies the SGD rule and hands the float4 index, the
// sums and the updated weights to `out.vec`; elements past the last whole float4 go one by one
// through `out.one`. rows(j): row j (16-byte aligned, like w and mom); w: the weights read (out may
// overwrite them: every load of an index comes before its stores); mom: updated in place when
// momentum != 0 (read unless first).
template <int N, int CHUNKS, class Rows, class Out>
__device__ __forceinline__ void tree_sgd_chunks(const Rows &rows, const float *w, float *__restrict__ mom,
                                                long long count, float lr, float momentum, float wd, int first,
                                                const Out &out) {
    const long long T = gridDim.x * (long long)blockDim.x, c4 = count / 4;
    for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < c4; base += CHUNKS * T) {
        float4 rv[CHUNKS][N], wv[CHUNKS], mv[CHUNKS];
#pragma unroll
        for (int u = 0; u < CHUNKS; u++) {  // every load first: the chunks in flight at once
            const long long i = base + u * T;
            if (i >= c4) continue;
#pragma unroll
            for (int j = 0; j < N; j++) rv[u][j] = reinterpret_cast<const float4 *>(rows(j))[i];
            wv[u] = reinterpret_cast<const float4 *>(w)[i];
            mv[u] = reinterpret_cast<const float4 *>(mom)[i];
        }
#pragma unroll
        for (int u = 0; u < CHUNKS; u++) {
            const long long i = base + u * T;
            if (i >= c4) continue;
            float a[N], b[N], c[N], d[N];
#pragma unroll
            for (int j = 0; j < N; j++) a[j] = rv[u][j].x, b[j] = rv[u][j].y, c[j] = rv[u][j].z, d[j] = rv[u][j].w;
            const float4 g = make_float4(tree_of<N>(a), tree_of<N>(b), tree_of<N>(c), tree_of<N>(d));
            float4 o;
            o.x = sgd_rule_reg(wv[u].x, g.x, mv[u].x, lr, momentum, wd, first);
            o.y = sgd_rule_reg(wv[u].y, g.y, mv[u].y, lr, momentum, wd, first);
            o.z = sgd_rule_reg(wv[u].z, g.z, mv[u].z, lr, momentum, wd, first);
            o.w = sgd_rule_reg(wv[u].w, g.w, mv[u].w, lr, momentum, wd, first);
            if (momentum != 0.0f) reinterpret_cast<float4 *>(mom)[i] = mv[u];
            out.vec(i, g, o);
        }
    }
    for (long long i = 4 * c4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += T) {
        float v[N];
#pragma unroll
        for (int j = 0; j < N; j++) v[j] = rows(j)[i];
        const float g = tree_of<N>(v);
        float m = momentum != 0.0f && !first ? mom[i] : 0.0f;
        const float o = sgd_rule_reg(w[i], g, m, lr, momentum, wd, first);
        if (momentum != 0.0f) mom[i] = m;
        out.one(i, g, o);
    }
}
