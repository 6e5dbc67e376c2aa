// FNV-1a-64 digests and ULP distance (docs/ARCHITECTURE.md §6.3, §6.4).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FF_FNV_OFFSET 0xcbf29ce484222325ULL
#define FF_FNV_PRIME 0x100000001b3ULL

// FNV-1a-64 over raw bytes. Chain calls by passing the previous result as `h` (start: FF_FNV_OFFSET).
uint64_t ff_fnv1a64_update(uint64_t h, const void *bytes, size_t nbytes);
// Digest of n float32 values as their little-endian bytes.
uint64_t ff_digest_f32(const float *x, size_t n);
// Two digests in one pass: returns the digest of these n floats alone and continues *chain over
// them. A buffer's digest and its pieces' (the weights and each layer's) then cost one read: the
// two multiply chains are independent and run side by side, where separate passes cost one each.
uint64_t ff_digest_f32_piece(uint64_t *chain, const float *x, size_t n);
// "%016llx" into buf (at least 17 bytes); returns buf.
char *ff_digest_hex(char *buf, uint64_t d);

// ULP distance between two floats with the biased-integer mapping: +0 and -0 are 0 apart,
// FLT_MAX and +inf are 1 apart. Any NaN gives UINT64_MAX (a NaN always fails a ULP check).
uint64_t ff_ulp_distance(float a, float b);

#ifdef __cplusplus
}
#endif
