/*
 * sha256.c — SHA-256 as specified in FIPS 180-4, section 6.2.
 *
 * The message is processed in 64-byte blocks; each block expands into a 64-word schedule
 * w[0..63] and runs 64 rounds over the working variables a..h.  Padding appends the bit
 * 1, zeros, and the message length in bits as a big-endian 64-bit number, so the padded
 * length is a multiple of 64 bytes.  Words are assembled big-endian by hand so the code
 * does not depend on the host byte order.
 *
 * Tested against the FIPS 180-2 example vectors in tests/cpu/test_runtime_sha256.c.
 */
#include "runtime/sha256.h"

#include <string.h>

/* The first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
static const uint32_t round_constants[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

static uint32_t rotate_right(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

static void compress_block(uint32_t state[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++) {
        w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 | (uint32_t)block[4 * t + 2] << 8 |
               (uint32_t)block[4 * t + 3];
    }
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotate_right(w[t - 15], 7) ^ rotate_right(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotate_right(w[t - 2], 17) ^ rotate_right(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t++) {
        uint32_t sum1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
        uint32_t choose = (e & f) ^ (~e & g);
        uint32_t temp1 = h + sum1 + choose + round_constants[t] + w[t];
        uint32_t sum0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
        uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
        uint32_t temp2 = sum0 + majority;
        h = g;
        g = f;
        f = e;
        e = d + temp1;
        d = c;
        c = b;
        b = a;
        a = temp1 + temp2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

void frost__sha256_init(frost__sha256_ctx *h)
{
    /* The first 32 bits of the fractional parts of the square roots of the first 8 primes. */
    static const uint32_t initial[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                        0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(h->state, initial, sizeof initial);
    h->total_bytes = 0;
    h->block_used = 0;
}

void frost__sha256_update(frost__sha256_ctx *h, const void *data, size_t size)
{
    const uint8_t *bytes = data;
    h->total_bytes += size;
    while (size > 0) {
        if (h->block_used == 0 && size >= 64) {
            compress_block(h->state, bytes);
            bytes += 64;
            size -= 64;
            continue;
        }
        size_t take = 64 - h->block_used;
        if (take > size) {
            take = size;
        }
        memcpy(h->block + h->block_used, bytes, take);
        h->block_used += take;
        bytes += take;
        size -= take;
        if (h->block_used == 64) {
            compress_block(h->state, h->block);
            h->block_used = 0;
        }
    }
}

void frost__sha256_final(frost__sha256_ctx *h, uint8_t digest[FROST__SHA256_BYTES])
{
    uint64_t bit_length = h->total_bytes * 8u;
    h->block[h->block_used++] = 0x80;
    if (h->block_used > 56) {
        memset(h->block + h->block_used, 0, 64 - h->block_used);
        compress_block(h->state, h->block);
        h->block_used = 0;
    }
    memset(h->block + h->block_used, 0, 56 - h->block_used);
    for (int i = 0; i < 8; i++) {
        h->block[56 + i] = (uint8_t)(bit_length >> (56 - 8 * i));
    }
    compress_block(h->state, h->block);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(h->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(h->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(h->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)h->state[i];
    }
}

void frost__sha256(const void *data, size_t size, uint8_t digest[FROST__SHA256_BYTES])
{
    frost__sha256_ctx h;
    frost__sha256_init(&h);
    frost__sha256_update(&h, data, size);
    frost__sha256_final(&h, digest);
}

void frost__sha256_hex(const uint8_t digest[FROST__SHA256_BYTES], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < FROST__SHA256_BYTES; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}
