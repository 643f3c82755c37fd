/*
 * buf.c — a growable NUL-terminated string used for explain reports and refusal reasons.
 * On allocation failure the buffer keeps what it had and sets oom, so callers never need
 * to check each append.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

void frost__buf_vprintf(frost__buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || b->oom)
        return;
    size_t need = b->len + (size_t)n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < need)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    b->len += (size_t)n;
}

void frost__buf_printf(frost__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    frost__buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void frost__buf_free(frost__buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

const char *frost__buf_str(const frost__buf *b)
{
    return b->data ? b->data : "";
}

void frost__buf_copy_out(const frost__buf *b, char *dst, size_t cap)
{
    if (cap == 0)
        return;
    size_t n = b->len < cap - 1 ? b->len : cap - 1;
    memcpy(dst, frost__buf_str(b), n);
    dst[n] = '\0';
}
