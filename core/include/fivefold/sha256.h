// SHA-256 (FIPS 180-4), for the golden-file manifest: a golden's checksum is checked before the file
// is handed to HDF5, which is not safe against crafted input (docs/ARCHITECTURE.md §6). Written here to avoid a
// crypto dependency; tested with the FIPS example vectors (verify/unit/test_sha256.c).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t h[8];      // chaining state
    uint64_t nbytes;    // message length so far
    uint8_t block[64];  // pending partial block
    size_t fill;        // bytes in block
} ff_sha256_ctx;

void ff_sha256_init(ff_sha256_ctx *c);
void ff_sha256_update(ff_sha256_ctx *c, const void *data, size_t n);
void ff_sha256_final(uint8_t digest[32], ff_sha256_ctx *c);

// One-shot helpers. hex: 64 lowercase hex digits + NUL (65 bytes).
void ff_sha256(uint8_t digest[32], const void *data, size_t n);
void ff_sha256_hex(char hex[65], const uint8_t digest[32]);
// SHA-256 of a file's bytes; FF_ERR_IO naming the path if it cannot be read.
ff_status ff_sha256_file(char hex[65], const char *path);

#ifdef __cplusplus
}
#endif
