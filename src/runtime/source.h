/*
 * source.h — private to src/runtime/: the include closure of an embedded kernel source
 * (source.c), which compile.c hands to NVRTC as named headers and hashes into the key.
 */
#ifndef FROST_RUNTIME_SOURCE_H
#define FROST_RUNTIME_SOURCE_H

#include "runtime/runtime.h"

#define FROST__MAX_HEADERS 64
#define FROST__MAX_INCLUDE_DEPTH 16
#define FROST__INCLUDE_NAME_MAX 128

typedef struct frost__source_closure {
    const frost__source *root;
    int count;
    /* headers[i] is included as `#include "include_names[i]"`; depth-first, first-seen
     * order, each name once. */
    const frost__source *headers[FROST__MAX_HEADERS];
    char include_names[FROST__MAX_HEADERS][FROST__INCLUDE_NAME_MAX];
} frost__source_closure;

/* Finds source `path` and every embedded header it reaches.  INTERNAL when the source is
 * not embedded; COMPILE_FAILED for an include cycle deeper than the limit, too many
 * headers or one name standing for two files. */
frost_status frost__source_closure_build(const char *path, frost__source_closure *out);

#endif /* FROST_RUNTIME_SOURCE_H */
