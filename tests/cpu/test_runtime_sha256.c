/*
 * test_runtime_sha256.c — SHA-256 (src/runtime/sha256.c) against the FIPS 180-2 example
 * vectors ("abc", the 448-bit two-block message, one million 'a'), the empty message,
 * and messages fed in uneven pieces (which must hash like the whole), including lengths
 * around the 55/56/64-byte padding boundaries checked against a one-shot digest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sha256.h"
#include "test_util.h"

static void expect_hex(const char *what, const uint8_t digest[FROST__SHA256_BYTES], const char *expected)
{
    char hex[65];
    frost__sha256_hex(digest, hex);
    if (strcmp(hex, expected) != 0) {
        tu_failf("%s: got %s, expected %s", what, hex, expected);
    }
}

static void case_fips_vectors(void)
{
    uint8_t d[FROST__SHA256_BYTES];
    frost__sha256("abc", 3, d);
    expect_hex("\"abc\"", d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    TU_CHECK(strlen(two_blocks) == 56);
    frost__sha256(two_blocks, strlen(two_blocks), d);
    expect_hex("448-bit message", d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    frost__sha256("", 0, d);
    expect_hex("empty message", d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void case_million_a(void)
{
    /* Fed in 1000 pieces of 1000 bytes: also exercises the streaming path. */
    char piece[1000];
    memset(piece, 'a', sizeof piece);
    frost__sha256_ctx h;
    frost__sha256_init(&h);
    for (int i = 0; i < 1000; i++) {
        frost__sha256_update(&h, piece, sizeof piece);
    }
    uint8_t d[FROST__SHA256_BYTES];
    frost__sha256_final(&h, d);
    expect_hex("one million 'a'", d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void case_uneven_pieces(void)
{
    /* Every length 0..200 hashed whole and in pieces of 1, 7, 63 and 65 bytes. */
    uint8_t message[200];
    for (size_t i = 0; i < sizeof message; i++) {
        message[i] = (uint8_t)(i * 131u + 7u);
    }
    static const size_t piece_sizes[] = {1, 7, 63, 65};
    for (size_t len = 0; len <= sizeof message; len++) {
        uint8_t whole[FROST__SHA256_BYTES];
        frost__sha256(message, len, whole);
        for (size_t p = 0; p < sizeof piece_sizes / sizeof piece_sizes[0]; p++) {
            frost__sha256_ctx h;
            frost__sha256_init(&h);
            for (size_t at = 0; at < len; at += piece_sizes[p]) {
                size_t n = len - at < piece_sizes[p] ? len - at : piece_sizes[p];
                frost__sha256_update(&h, message + at, n);
            }
            uint8_t pieces[FROST__SHA256_BYTES];
            frost__sha256_final(&h, pieces);
            if (memcmp(whole, pieces, sizeof whole) != 0) {
                tu_failf("length %zu in pieces of %zu hashes differently from the whole", len, piece_sizes[p]);
            }
        }
    }
    /* A one-byte change must change the digest. */
    uint8_t a[FROST__SHA256_BYTES], b[FROST__SHA256_BYTES];
    frost__sha256(message, 100, a);
    message[50] ^= 1;
    frost__sha256(message, 100, b);
    TU_CHECK(memcmp(a, b, sizeof a) != 0);
}

int main(void)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"fips_vectors", case_fips_vectors},
        {"million_a", case_million_a},
        {"uneven_pieces", case_uneven_pieces},
    };
    int n = (int)(sizeof cases / sizeof cases[0]), only = tu_case_filter(), run = 0;
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) {
            continue;
        }
        run++;
        tu_set_context("test_runtime_sha256", 0, i, cases[i].name);
        tu_case_begin();
        cases[i].run();
        tu_case_end();
    }
    return tu_finish(run);
}
