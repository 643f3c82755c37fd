/*
 * sha256.h — SHA-256 (FIPS 180-4) for kernel-cache keys and cache-entry checksums.
 *
 * Streaming interface: init, update any number of times, final.  The digest is 32 bytes;
 * frost__sha256_hex writes the usual 64 lowercase hex digits.  Not constant-time and not
 * meant for secrets: frost only needs a collision-resistant name for compiled kernels.
 */
#ifndef FROST_RUNTIME_SHA256_H
#define FROST_RUNTIME_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define FROST__SHA256_BYTES 32

typedef struct frost__sha256_ctx {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_used;
} frost__sha256_ctx;

void frost__sha256_init(frost__sha256_ctx *h);
void frost__sha256_update(frost__sha256_ctx *h, const void *data, size_t size);
void frost__sha256_final(frost__sha256_ctx *h, uint8_t digest[FROST__SHA256_BYTES]);

/* One-shot digest of a buffer. */
void frost__sha256(const void *data, size_t size, uint8_t digest[FROST__SHA256_BYTES]);
/* 64 lowercase hex digits and a NUL into hex. */
void frost__sha256_hex(const uint8_t digest[FROST__SHA256_BYTES], char hex[65]);

#endif /* FROST_RUNTIME_SHA256_H */
