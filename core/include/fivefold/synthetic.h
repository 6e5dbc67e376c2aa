// Synthetic teacher data for the MLP models (issue 16; docs/ARCHITECTURE.md §9, "Data"): no
// files, every sample a pure function of (seed, split, sample index), computed where it is used
// (the host for the cpu device, a kernel for a GPU) with the same bits, and ported bit for bit to
// golden/synthetic.py (numpy; goldens and PyTorch's peer).
//
// Inputs. Feature j of sample i (split s: 0 train, 1 test) of a D-feature set:
//   key   = ff_rng_key(seed, FF_TENSOR_ID_SYNTH_X + s)                      (rng.h)
//   bits  = mix(key + (i * D + j + 1) * 0x9E3779B97F4A7C15)                 (mod 2^64)
//   u_k   = ((bits >> 16k) & 0xffff) * 2^-16, k = 0..3                       exact
//   x     = ((u_0 + u_1) + (u_2 + u_3) - 2) * 1.7320508f                     (sum exact: a
//           multiple of 2^-16 below 4; one float32 rounding in the product)
// an Irwin-Hall(4) value: mean 0, variance 1, |x| < 3.47.
//
// Labels. A fixed random sparse linear teacher: class c < C has FF_SYNTH_TAPS taps; tap t reads
// feature f(c, t) = (bits_t >> 32) * D >> 32 and weighs it w(c, t) = symmetric 24-bit uniform,
// both from bits_t = mix(tkey + (c * TAPS + t + 1) * 0x9E3779B97F4A7C15), tkey = ff_rng_key(seed,
// FF_TENSOR_ID_SYNTH_TEACHER) (the same teacher for both splits); w = (float)(bits_t >> 40) *
// 2^-24 * 2 - 1. logit_c = fmaf chain over t ascending from 0.0f: z = fmaf(w, x_f, z). The label is
// the first c with the largest logit. fmaf is one IEEE rounding on every machine, so host and GPU
// agree bit for bit; the teacher is linear in x, so a student can learn it (loss and accuracy
// move), and sparse, so a label costs C * TAPS multiply-adds, not C * D.
#pragma once
#include <stdint.h>

#include "fivefold/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define FF_SYNTH_FN static inline __host__ __device__
#else
#define FF_SYNTH_FN static inline
#endif

#define FF_TENSOR_ID_SYNTH_X 0x53594E5458ULL        // "SYNTX" (+ split)
#define FF_TENSOR_ID_SYNTH_TEACHER 0x53594E5454ULL  // "SYNTT"
#define FF_SYNTH_TAPS 32
#define FF_SYNTH_GAMMA 0x9E3779B97F4A7C15ULL

// What a synthetic set is; its samples are computed, never stored on the host.
typedef struct {
    uint64_t seed;
    int split;        // 0 train, 1 test
    int64_t dim;      // D: features per sample (the model's input)
    int64_t classes;  // C: the model's output
    uint64_t x_key;   // ff_rng_key(seed, FF_TENSOR_ID_SYNTH_X + split)
    uint64_t t_key;   // ff_rng_key(seed, FF_TENSOR_ID_SYNTH_TEACHER)
} ff_synth;

FF_SYNTH_FN uint64_t ff_synth_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Feature j of sample i.
FF_SYNTH_FN float ff_synth_x(const ff_synth *s, int64_t i, int64_t j) {
    const uint64_t bits = ff_synth_mix(s->x_key + (uint64_t)(i * s->dim + j + 1) * FF_SYNTH_GAMMA);
    const float u0 = (float)(bits & 0xffff) * 0x1p-16f, u1 = (float)((bits >> 16) & 0xffff) * 0x1p-16f;
    const float u2 = (float)((bits >> 32) & 0xffff) * 0x1p-16f, u3 = (float)((bits >> 48) & 0xffff) * 0x1p-16f;
    return ((u0 + u1) + (u2 + u3) - 2.0f) * 1.7320508f;
}

// The teacher's logit of class c for sample i.
FF_SYNTH_FN float ff_synth_logit(const ff_synth *s, int64_t i, int64_t c) {
    float z = 0.0f;
    for (int t = 0; t < FF_SYNTH_TAPS; t++) {
        const uint64_t bits = ff_synth_mix(s->t_key + (uint64_t)(c * FF_SYNTH_TAPS + t + 1) * FF_SYNTH_GAMMA);
        const int64_t f = (int64_t)(((bits >> 32) * (uint64_t)s->dim) >> 32);
        const float w = (float)(bits >> 40) * 0x1p-24f * 2.0f - 1.0f;
#if defined(__CUDA_ARCH__)
        z = __fmaf_rn(w, ff_synth_x(s, i, f), z);
#else
        z = __builtin_fmaf(w, ff_synth_x(s, i, f), z);
#endif
    }
    return z;
}

// The label of sample i: the first class with the largest teacher logit.
FF_SYNTH_FN int32_t ff_synth_label(const ff_synth *s, int64_t i) {
    int32_t best = 0;
    float top = ff_synth_logit(s, i, 0);
    for (int64_t c = 1; c < s->classes; c++) {
        const float z = ff_synth_logit(s, i, c);
        if (z > top) {
            top = z;
            best = (int32_t)c;
        }
    }
    return best;
}

// Fills *s for a set of `dim` features and `classes` classes.
void ff_synth_init(ff_synth *s, uint64_t seed, int split, int64_t dim, int64_t classes);

#ifdef __cplusplus
}
#endif
