/*
 * disk_cache.c — the on-disk layer of the kernel cache.
 *
 * Where: $FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else $HOME/.cache/frost.  Entries
 * are spread over 256 subdirectories by the first two hex digits of the key:
 *     <dir>/3f/3fa9...c1.cubin     the entry (header + cubin, see disk_cache.h)
 *     <dir>/3f/3fa9...c1.lock      the key's lock file (never deleted)
 *
 * Why this shape:
 *   - An entry must be usable or ignored, never half-read.  Writers fill a temp file in
 *     the same directory (mkstemp) and rename() it over the entry, which is atomic on
 *     POSIX file systems; readers check the magic, format, sizes, the key and a SHA-256
 *     of the payload, and treat any mismatch as a miss.  The caller then compiles and
 *     overwrites the damaged entry.
 *   - Concurrent processes should compile a kernel once.  The writer takes flock(LOCK_EX)
 *     on the key's lock file, reads again (someone may have just written it), and only
 *     then compiles and writes.  Lock files stay: deleting one while another process
 *     waits on it would let a third process lock a fresh file and compile twice.
 *   - FROST_CACHE=readonly reads only: no directories, lock files or entries are created.
 *
 * Failures of the cache itself (unwritable directory, full disk) are logged and never
 * fail a compile: the kernel is simply not cached.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/disk_cache.h"

static const char cache_magic[8] = {'F', 'R', 'S', 'T', 'C', 'U', 'B', 'N'};

frost__cache_mode frost__cache_mode_get(void)
{
    const char *mode = getenv("FROST_CACHE");
    if (!mode || !*mode) {
        return FROST__CACHE_READWRITE;
    }
    if (strcmp(mode, "off") == 0 || strcmp(mode, "0") == 0) {
        return FROST__CACHE_OFF;
    }
    if (strcmp(mode, "readonly") == 0) {
        return FROST__CACHE_READONLY;
    }
    if (strcmp(mode, "on") != 0 && strcmp(mode, "readwrite") != 0 && strcmp(mode, "1") != 0) {
        frost__log(FROST_LOG_WARN, "FROST_CACHE=%s is not off, readonly or on; using the cache read-write", mode);
    }
    return FROST__CACHE_READWRITE;
}

int frost__cache_dir(frost__buf *out)
{
    const char *dir = getenv("FROST_CACHE_DIR");
    if (dir && *dir) {
        frost__buf_printf(out, "%s", dir);
        return !out->oom;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && *xdg) {
        frost__buf_printf(out, "%s/frost", xdg);
        return !out->oom;
    }
    const char *home = getenv("HOME");
    if (home && *home) {
        frost__buf_printf(out, "%s/.cache/frost", home);
        return !out->oom;
    }
    return 0;
}

static void key_hex(const uint8_t key[FROST__SHA256_BYTES], char hex[65])
{
    frost__sha256_hex(key, hex);
}

void frost__cache_entry_path(const char *dir, const uint8_t key[FROST__SHA256_BYTES], frost__buf *out)
{
    char hex[65];
    key_hex(key, hex);
    frost__buf_printf(out, "%s/%.2s/%s.cubin", dir, hex, hex);
}

/* ---- little-endian fields ---------------------------------------------------------------- */
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* ---- reading ------------------------------------------------------------------------------ */
/* Reads a whole regular file; NULL when it cannot. */
static uint8_t *read_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    struct stat st;
    uint8_t *data = NULL;
    /* No cubin comes near 1 GiB; a bigger file is not an entry and is not read. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && st.st_size < (1 << 30)) {
        size_t want = (size_t)st.st_size;
        data = malloc(want ? want : 1);
        size_t got = 0;
        while (data && got < want) {
            ssize_t n = read(fd, data + got, want - got);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            got += (size_t)n;
        }
        if (data && got != want) {
            free(data);
            data = NULL;
        }
        *size = want;
    }
    close(fd);
    return data;
}

/* Names what is wrong with an entry, or NULL when it checks out. */
static const char *entry_problem(const uint8_t *file, size_t size, const uint8_t key[FROST__SHA256_BYTES])
{
    if (size < FROST__CACHE_HEADER_BYTES) {
        return "shorter than its header";
    }
    if (memcmp(file, cache_magic, sizeof cache_magic) != 0) {
        return "bad magic";
    }
    if (get_u32(file + 8) != FROST__CACHE_FORMAT || get_u32(file + 12) != FROST__CACHE_HEADER_BYTES) {
        return "another format version";
    }
    if (get_u64(file + 16) != size - FROST__CACHE_HEADER_BYTES) {
        return "payload size does not match the file size (truncated?)";
    }
    if (memcmp(file + 24, key, FROST__SHA256_BYTES) != 0) {
        return "written for another key";
    }
    uint8_t digest[FROST__SHA256_BYTES];
    frost__sha256(file + FROST__CACHE_HEADER_BYTES, size - FROST__CACHE_HEADER_BYTES, digest);
    if (memcmp(file + 56, digest, FROST__SHA256_BYTES) != 0) {
        return "payload checksum mismatch";
    }
    return NULL;
}

int frost__cache_read(const char *dir, const uint8_t key[FROST__SHA256_BYTES], void **payload, size_t *size)
{
    frost__buf path = {0};
    frost__cache_entry_path(dir, key, &path);
    size_t file_size = 0;
    uint8_t *file = path.oom ? NULL : read_file(frost__buf_str(&path), &file_size);
    int hit = 0;
    if (file) {
        const char *problem = entry_problem(file, file_size, key);
        if (problem) {
            frost__log(FROST_LOG_WARN, "kernel cache entry %s is damaged (%s); treating it as a miss",
                       frost__buf_str(&path), problem);
        } else {
            size_t payload_size = file_size - FROST__CACHE_HEADER_BYTES;
            /* Keep the allocation; the payload moves to its front. */
            memmove(file, file + FROST__CACHE_HEADER_BYTES, payload_size);
            *payload = file;
            *size = payload_size;
            file = NULL;
            hit = 1;
        }
    }
    free(file);
    frost__buf_free(&path);
    return hit;
}

/* ---- writing ------------------------------------------------------------------------------ */
/* mkdir -p for dir and dir/<2 hex>; 0 (errno set) on failure. */
static int make_dirs(const char *dir, const char *hex)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%.2s", dir, hex);
    if (n < 0 || n >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return 0;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') {
            continue;
        }
        *p = '\0';
        int ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) {
            return 0;
        }
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

static int write_all(int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return 0;
        }
        p += n;
        size -= (size_t)n;
    }
    return 1;
}

int frost__cache_write(const char *dir, const uint8_t key[FROST__SHA256_BYTES], const void *payload, size_t size)
{
    char hex[65];
    key_hex(key, hex);
    if (!make_dirs(dir, hex)) {
        frost__log(FROST_LOG_WARN, "kernel cache: cannot create %s/%.2s (%s); not caching", dir, hex, strerror(errno));
        return 0;
    }
    uint8_t header[FROST__CACHE_HEADER_BYTES];
    memcpy(header, cache_magic, sizeof cache_magic);
    put_u32(header + 8, FROST__CACHE_FORMAT);
    put_u32(header + 12, FROST__CACHE_HEADER_BYTES);
    put_u64(header + 16, size);
    memcpy(header + 24, key, FROST__SHA256_BYTES);
    frost__sha256(payload, size, header + 56);

    frost__buf temp = {0}, final_path = {0};
    frost__buf_printf(&temp, "%s/%.2s/%s.tmp.XXXXXX", dir, hex, hex);
    frost__cache_entry_path(dir, key, &final_path);
    int ok = 0;
    int fd = temp.oom || final_path.oom ? -1 : mkstemp(temp.data);
    if (fd >= 0) {
        ok = fchmod(fd, 0644) == 0 && write_all(fd, header, sizeof header) && write_all(fd, payload, size);
        ok = close(fd) == 0 && ok;
        ok = ok && rename(temp.data, final_path.data) == 0;
        if (!ok) {
            int saved = errno;
            unlink(temp.data);
            errno = saved;
        }
    }
    if (ok) {
        frost__log(FROST_LOG_DEBUG, "kernel cache: wrote %s (%zu bytes)", frost__buf_str(&final_path), size);
    } else {
        frost__log(FROST_LOG_WARN, "kernel cache: cannot write %s (%s); not caching", frost__buf_str(&final_path),
                   strerror(errno));
    }
    frost__buf_free(&temp);
    frost__buf_free(&final_path);
    return ok;
}

/* ---- locking ------------------------------------------------------------------------------ */
int frost__cache_lock(const char *dir, const uint8_t key[FROST__SHA256_BYTES])
{
    char hex[65];
    key_hex(key, hex);
    if (!make_dirs(dir, hex)) {
        frost__log(FROST_LOG_WARN, "kernel cache: cannot create %s/%.2s (%s); compiling without a lock", dir, hex,
                   strerror(errno));
        return -1;
    }
    frost__buf path = {0};
    frost__buf_printf(&path, "%s/%.2s/%s.lock", dir, hex, hex);
    int fd = path.oom ? -1 : open(path.data, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        int r;
        do {
            r = flock(fd, LOCK_EX);
        } while (r != 0 && errno == EINTR);
        if (r != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        frost__log(FROST_LOG_WARN, "kernel cache: cannot lock %s (%s); compiling without a lock",
                   frost__buf_str(&path), strerror(errno));
    }
    frost__buf_free(&path);
    return fd;
}

void frost__cache_unlock(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

void frost__cache_describe(frost__buf *out)
{
    frost__cache_mode mode = frost__cache_mode_get();
    if (mode == FROST__CACHE_OFF) {
        frost__buf_printf(out, "off (FROST_CACHE=off)");
        return;
    }
    frost__buf dir = {0};
    if (!frost__cache_dir(&dir)) {
        frost__buf_printf(out, "off (no FROST_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    } else {
        frost__buf_printf(out, "%s (%s)", dir.data, mode == FROST__CACHE_READONLY ? "readonly" : "read-write");
    }
    frost__buf_free(&dir);
}
