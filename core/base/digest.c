// FNV-1a-64 and ULP distance (docs/ARCHITECTURE.md §6.3, §6.4).
#include "fivefold/digest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

uint64_t ff_fnv1a64_update(uint64_t h, const void *bytes, size_t nbytes) {
    const unsigned char *p = bytes;
    for (size_t i = 0; i < nbytes; i++) {
        h ^= p[i];
        h *= FF_FNV_PRIME;
    }
    return h;
}

uint64_t ff_digest_f32(const float *x, size_t n) {
    // x86-64 and every target we build for is little-endian, so the in-memory bytes are the
    // little-endian encoding the digest is defined over.
    return ff_fnv1a64_update(FF_FNV_OFFSET, x, n * sizeof(float));
}

uint64_t ff_digest_f32_piece(uint64_t *chain, const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = FF_FNV_OFFSET, c = *chain;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        h = (h ^ p[i]) * FF_FNV_PRIME;
        c = (c ^ p[i]) * FF_FNV_PRIME;
    }
    *chain = c;
    return h;
}

char *ff_digest_hex(char *buf, uint64_t d) {
    snprintf(buf, 17, "%016llx", (unsigned long long)d);
    return buf;
}

// Maps a float to an integer whose order is the floats' order: negative floats are reflected, so
// -0.0 and +0.0 both map to 0 and adjacent floats differ by 1 (FLT_MAX and +inf too).
static int64_t ordered(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (u & 0x80000000u) return -(int64_t)(u & 0x7fffffffu);
    return (int64_t)u;
}

uint64_t ff_ulp_distance(float a, float b) {
    if (isnan(a) || isnan(b)) return UINT64_MAX;
    int64_t d = ordered(a) - ordered(b);
    return (uint64_t)(d < 0 ? -d : d);
}
