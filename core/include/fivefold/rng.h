// The deterministic value generator that both C and golden/make_golden.py implement bit-identically,
// so that full-size AlexNet goldens need no weight file (docs/ARCHITECTURE.md §2).
//
//   key(seed, tensor_id) = mix(seed ^ mix(tensor_id + 0x9E3779B97F4A7C15))
//   bits(i)              = mix(key + (i + 1) * 0x9E3779B97F4A7C15)           (all mod 2^64)
//   uniform(i)           = (float)(bits(i) >> 40) * 2^-24                      in [0, 1), exact
//   symmetric(i)         = 2 * uniform(i) - 1                                  in [-1, 1), exact
//   value(i)             = symmetric(i) * scale   (one float32 multiply, round to nearest)
//
// where mix is splitmix64's finaliser:
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^ (z >> 31).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint64_t ff_mix64(uint64_t z);
uint64_t ff_rng_key(uint64_t seed, uint64_t tensor_id);
// out[i] = symmetric(i) * scale for i in [0, n): fills a tensor deterministically.
void ff_rng_fill(float *out, size_t n, uint64_t seed, uint64_t tensor_id, float scale);

// Tensor ids in use: parameter p (0-based, model order) has weight id 2p and bias id 2p+1;
// generated inputs use FF_TENSOR_ID_INPUT.
#define FF_TENSOR_ID_INPUT 0x494E505554ULL  // "INPUT"

#ifdef __cplusplus
}
#endif
