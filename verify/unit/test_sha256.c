// SHA-256 against the FIPS 180-4 example vectors, streaming in odd pieces, and a file digest equal
// to the one-shot digest of its bytes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fivefold/sha256.h"

static void hex_of(char out[65], const void *data, size_t n) {
    uint8_t d[32];
    ff_sha256(d, data, n);
    ff_sha256_hex(out, d);
}

static void fips_vectors(void **state) {
    (void)state;
    char h[65];
    hex_of(h, "abc", 3);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of(h, "", 0);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // 448 bits: the padding no longer fits the block, so a second block is added.
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(h, m448, strlen(m448));
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // 896 bits (FIPS 180-2 appendix B.3 long message style vector).
    const char *m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrs"
        "tu";
    hex_of(h, m896, strlen(m896));
    assert_string_equal(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void one_million_a_streamed(void **state) {
    (void)state;
    // "a" x 10^6 fed in pieces of varying size crosses block boundaries at every offset.
    ff_sha256_ctx c;
    ff_sha256_init(&c);
    char buf[1000];
    memset(buf, 'a', sizeof buf);
    size_t done = 0, step = 1;
    while (done < 1000000) {
        size_t k = step < 1000000 - done ? step : 1000000 - done;
        ff_sha256_update(&c, buf, k);
        done += k;
        step = step % 997 + 1;
    }
    uint8_t d[32];
    char h[65];
    ff_sha256_final(d, &c);
    ff_sha256_hex(h, d);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void file_digest_and_single_bit_change(void **state) {
    (void)state;
    char path[] = "/tmp/ff_sha256_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 31 + 7);
    assert_int_equal(write(fd, data, sizeof data), (ssize_t)sizeof data);
    close(fd);
    char hf[65], hm[65];
    assert_int_equal(ff_sha256_file(hf, path), FF_OK);
    hex_of(hm, data, sizeof data);
    assert_string_equal(hf, hm);
    data[4321] ^= 0x10;  // one bit: a different digest
    hex_of(hm, data, sizeof data);
    assert_string_not_equal(hf, hm);
    unlink(path);
    assert_int_equal(ff_sha256_file(hf, path), FF_ERR_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fips_vectors),
        cmocka_unit_test(one_million_a_streamed),
        cmocka_unit_test(file_digest_and_single_bit_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
