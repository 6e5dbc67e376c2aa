// Seeded mutation fuzzer for the IDX parser (fuzz/README.md): valid files mutated by bit flips, byte
// overwrites, header-extent rewrites (0, 1, huge, random), truncation and extension. Property:
// the parser either refuses with an IDX message, or accepts a buffer whose length is exactly the
// header plus the product of its (positive) extents. Run under the sanitizer build (FF_SANITIZE)
// it also catches any out-of-bounds read. A failing case prints its seed and case number.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/data_idx.h"
#include "fivefold/rng.h"

#define CASES 100000
#define SEED 20261122ULL

static uint64_t state;
static uint64_t next(void) {
    state += 0x9E3779B97F4A7C15ULL;
    return ff_mix64(state);
}

static size_t valid(uint8_t *b, int nd) {
    const uint32_t d3[3] = {3, 4, 5}, d1[1] = {7};
    const uint32_t *d = nd == 3 ? d3 : d1;
    b[0] = b[1] = 0;
    b[2] = 8;
    b[3] = (uint8_t)nd;
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        b[4 + 4 * i] = (uint8_t)(d[i] >> 24);
        b[5 + 4 * i] = (uint8_t)(d[i] >> 16);
        b[6 + 4 * i] = (uint8_t)(d[i] >> 8);
        b[7 + 4 * i] = (uint8_t)d[i];
        n *= d[i];
    }
    for (size_t i = 0; i < n; i++) b[4 + 4 * nd + i] = (uint8_t)i;
    return 4 + 4 * (size_t)nd + n;
}

static void mutated_buffers_are_refused_or_consistent(void **st) {
    (void)st;
    state = SEED;
    int64_t accepted = 0, refused = 0;
    for (int64_t c = 0; c < CASES; c++) {
        const int nd = (next() & 1) ? 3 : 1;
        uint8_t buf[256];
        size_t len = valid(buf, nd);
        int muts = 1 + (int)(next() % 3);
        for (int m = 0; m < muts; m++) {
            switch (next() % 6) {
                case 0:
                    if (len) buf[next() % len] ^= (uint8_t)(1u << (next() % 8));
                    break;
                case 1:
                    if (len) buf[next() % 16 % len] = (uint8_t)next();
                    break;
                case 2: {  // an extent rewritten
                    if (len < 4 + 4 * (size_t)nd) break;
                    int d = (int)(next() % (uint64_t)nd);
                    uint32_t v = (uint32_t[]){0, 1, 0xFFFFFFFFu, (uint32_t)next(), 60, 7}[next() % 6];
                    for (int k = 0; k < 4; k++) buf[4 + 4 * d + k] = (uint8_t)(v >> (24 - 8 * k));
                    break;
                }
                case 3: len = next() % (len + 1); break;  // truncated (possibly to nothing)
                case 4: {                                 // extended
                    size_t add = next() % 16;
                    if (len + add <= sizeof buf) {
                        for (size_t k = 0; k < add; k++) buf[len + k] = (uint8_t)next();
                        len += add;
                    }
                    break;
                }
                default: break;  // unchanged: must be accepted
            }
        }
        // The parser gets exactly len bytes (a heap copy, so a sanitizer sees any overread).
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        size_t off = 0;
        int64_t dims[3] = {0, 0, 0};
        ff_status s = ff_idx_parse(&off, dims, copy, len, "fuzz", nd);
        if (s == FF_OK) {
            uint64_t prod = 1;
            for (int d = 0; d < nd; d++) {
                if (dims[d] <= 0)
                    fail_msg("case %lld (seed %llu): accepted extent %lld", (long long)c, (unsigned long long)SEED,
                             (long long)dims[d]);
                prod *= (uint64_t)dims[d];
            }
            if (off != 4 + 4 * (size_t)nd || (uint64_t)len != off + prod)
                fail_msg("case %lld (seed %llu): accepted %zu bytes, header %zu + %llu", (long long)c,
                         (unsigned long long)SEED, len, off, (unsigned long long)prod);
            accepted++;
        } else {
            if (s != FF_ERR_INPUT || !strstr(ff_last_error(), "IDX file 'fuzz'"))
                fail_msg("case %lld (seed %llu): status %d message '%s'", (long long)c, (unsigned long long)SEED,
                         (int)s, ff_last_error());
            refused++;
        }
        free(copy);
    }
    printf("%d cases: %lld accepted, %lld refused\n", CASES, (long long)accepted, (long long)refused);
    assert_true(accepted > 1000 && refused > 1000);  // both sides of the property exercised
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(mutated_buffers_are_refused_or_consistent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
