// The fixed split-K rule of the GPU linear layers and its CPU emulation (linear_split.h).
#include "fivefold/linear_split.h"

#include <math.h>

int ff_linear_split(int64_t K) {
    // The qualifying powers of two are closed downwards (a smaller S divides more and gives a
    // longer chunk), so doubling while the next one qualifies finds the largest.
    int s = 1;
    while (2 * s <= FF_LINEAR_MAX_SPLIT && K % (FF_LINEAR_CHUNK_ALIGN * 2 * (int64_t)s) == 0 &&
           K / (2 * s) >= FF_LINEAR_MIN_CHUNK)
        s *= 2;
    return s;
}

int64_t ff_gpu_linear_workspace_floats(const ff_layer *L, int64_t n) {
    const int s = ff_linear_split(ff_shape_numel(L->in));
    return s > 1 ? (int64_t)s * n * L->out.c : 0;
}

ff_status ff_linear_split_cpu(float *out, const float *in, const float *w, const float *b, const ff_layer *L, int split,
                              bool relu, int64_t n) {
    const int64_t K = ff_shape_numel(L->in), J = L->out.c;
    if (split < 1 || K % split != 0)
        return FF_FAIL(FF_ERR_INPUT, "%s: a split into %d chunks does not divide in_features %lld", L->name, split,
                       (long long)K);
    const int64_t c = K / split;
    for (int64_t img = 0; img < n; img++) {
        const float *x = in + img * K;
        for (int64_t j = 0; j < J; j++) {
            const float *wj = w + j * K;
            float v = 0.0f;
            for (int s = 0; s < split; s++) {
                float p = s == 0 ? b[j] : 0.0f;  // chunk 0 starts at the bias, the others at +0
                for (int64_t k = s * c; k < (s + 1) * c; k++) p = fmaf(wj[k], x[k], p);
                v = s == 0 ? p : v + p;  // ((p_0 + p_1) + p_2) + ...: float32, round to nearest
            }
            out[img * J + j] = relu && v < 0.0f ? 0.0f : v;
        }
    }
    return FF_OK;
}
