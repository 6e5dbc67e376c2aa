// The element-wise arithmetic of the training update that more than one kernel runs: the tree of
// train.h over N values and the SGD rule, each float operation an explicit _rn intrinsic (no
// contraction), so that every kernel that includes this gives the same bits: train_cuda.cu's
// k_tree_sgd4 and the transport's fused exchange (comm_nccl_lsa.cu).
#pragma once

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
