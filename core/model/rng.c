// The counter-based value generator shared bit-for-bit with golden/make_golden.py (see rng.h).
#include "fivefold/rng.h"

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ULL

uint64_t ff_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t ff_rng_key(uint64_t seed, uint64_t tensor_id) {
    return ff_mix64(seed ^ ff_mix64(tensor_id + GOLDEN_GAMMA));
}

void ff_rng_fill(float *out, size_t n, uint64_t seed, uint64_t tensor_id, float scale) {
    uint64_t key = ff_rng_key(seed, tensor_id);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = ff_mix64(key + (uint64_t)(i + 1) * GOLDEN_GAMMA);
        // 24 random bits -> exactly representable uniform in [0, 1); 2u - 1 is exact too.
        float u = (float)(bits >> 40) * 0x1p-24f;
        float sym = 2.0f * u - 1.0f;
        out[i] = sym * scale;
    }
}
