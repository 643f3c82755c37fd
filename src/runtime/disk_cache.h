/*
 * disk_cache.h — private to src/runtime/: the on-disk layer of the kernel cache
 * (disk_cache.c).  compile.c drives it: read, lock, read again, compile, write, unlock.
 */
#ifndef FROST_RUNTIME_DISK_CACHE_H
#define FROST_RUNTIME_DISK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"
#include "runtime/sha256.h"

typedef enum frost__cache_mode {
    FROST__CACHE_OFF = 0,
    FROST__CACHE_READONLY = 1,
    FROST__CACHE_READWRITE = 2,
} frost__cache_mode;

/* Entry file layout (all integers little-endian):
 *   0  8 bytes  magic "FRSTCUBN"
 *   8  u32      format version (FROST__CACHE_FORMAT)
 *  12  u32      header size in bytes (FROST__CACHE_HEADER_BYTES)
 *  16  u64      payload size in bytes
 *  24  32 bytes the cache key (SHA-256) the entry was written for
 *  56  32 bytes SHA-256 of the payload
 *  88  payload (the cubin) */
#define FROST__CACHE_FORMAT 1u
#define FROST__CACHE_HEADER_BYTES 88u

/* The mode from $FROST_CACHE ("off", "readonly"; anything else, or unset: read-write). */
frost__cache_mode frost__cache_mode_get(void);
/* The cache directory from the environment; 0 when none can be found (no HOME). */
int frost__cache_dir(frost__buf *out);

/* Reads the entry for key; 1 and a malloc'd payload on a hit.  A missing, truncated,
 * corrupt or mismatched entry is a miss (0), logged at DEBUG (WARN when damaged). */
int frost__cache_read(const char *dir, const uint8_t key[FROST__SHA256_BYTES], void **payload, size_t *size);
/* Writes the entry through a temp file and rename(); 0 (logged at WARN) on failure. */
int frost__cache_write(const char *dir, const uint8_t key[FROST__SHA256_BYTES], const void *payload, size_t size);
/* Takes the key's lock file (creating the directories); -1 (logged) when impossible. */
int frost__cache_lock(const char *dir, const uint8_t key[FROST__SHA256_BYTES]);
void frost__cache_unlock(int fd);
/* The entry's path into out. */
void frost__cache_entry_path(const char *dir, const uint8_t key[FROST__SHA256_BYTES], frost__buf *out);

#endif /* FROST_RUNTIME_DISK_CACHE_H */
