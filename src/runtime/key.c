/*
 * key.c — kernel keys: building them, printing them, reading them back.
 *
 * A key names one specialisation of one kernel: the embedded source, the extern "C"
 * entry point, and the -D defines.  Its printable form is one line,
 *     src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel DTYPE_BF16 D_QK=128 CAUSAL=1
 * which is what logs, error messages, frost-precompile's list files and frost-repro use.
 *
 * Defines keep the order they were added in; defining a NAME again replaces its value in
 * place.  A NULL or empty value gives the bare define NAME (the preprocessor's 1).
 *
 * Bounds: at most FROST__KEY_MAX_DEFINES defines of at most 47 characters each.  A define
 * that does not fit is never truncated into a different kernel: the key is marked broken
 * (num_defines = -1), prints as such, and frost__compile refuses it.
 *
 * Parsing points key->source at the embedded table's own string.  Entry names have no
 * such home, so parsed entry names are interned in a process-lifetime list (a handful of
 * distinct names ever exist).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define DEFINE_CAP ((int)sizeof(((frost__kernel_key *)0)->defines[0]))

void frost__key_init(frost__kernel_key *k, const char *source, const char *entry)
{
    memset(k, 0, sizeof *k);
    k->source = source;
    k->entry = entry;
}

static void mark_broken(frost__kernel_key *k, const char *why, const char *name)
{
    if (k->num_defines >= 0) {
        frost__log(FROST_LOG_ERROR, "kernel key %s:%s: define %s %s; the key is unusable",
                   k->source ? k->source : "?", k->entry ? k->entry : "?", name, why);
    }
    k->num_defines = -1;
}

/* Length of NAME in a "NAME=VALUE" or "NAME" define. */
static size_t define_name_length(const char *define)
{
    const char *eq = strchr(define, '=');
    return eq ? (size_t)(eq - define) : strlen(define);
}

void frost__key_define(frost__kernel_key *k, const char *name, const char *value_fmt, ...)
{
    if (k->num_defines < 0) {
        return;
    }
    char value[DEFINE_CAP];
    value[0] = '\0';
    if (value_fmt) {
        va_list ap;
        va_start(ap, value_fmt);
        int n = vsnprintf(value, sizeof value, value_fmt, ap);
        va_end(ap);
        if (n < 0 || n >= (int)sizeof value) {
            mark_broken(k, "has a value too long for a key", name);
            return;
        }
    }
    char define[DEFINE_CAP];
    int n = value[0] ? snprintf(define, sizeof define, "%s=%s", name, value)
                     : snprintf(define, sizeof define, "%s", name);
    if (n < 0 || n >= (int)sizeof define) {
        mark_broken(k, "does not fit the key's 47 characters", name);
        return;
    }
    size_t name_len = strlen(name);
    for (int i = 0; i < k->num_defines; i++) {
        if (define_name_length(k->defines[i]) == name_len && strncmp(k->defines[i], name, name_len) == 0) {
            memcpy(k->defines[i], define, (size_t)n + 1);
            return;
        }
    }
    if (k->num_defines == FROST__KEY_MAX_DEFINES) {
        mark_broken(k, "exceeds the key's limit of 32 defines", name);
        return;
    }
    memcpy(k->defines[k->num_defines++], define, (size_t)n + 1);
}

void frost__key_print(const frost__kernel_key *k, frost__buf *out)
{
    frost__buf_printf(out, "%s:%s", k->source ? k->source : "(no source)", k->entry ? k->entry : "(no entry)");
    if (k->num_defines < 0) {
        frost__buf_printf(out, " <broken: a define did not fit>");
        return;
    }
    for (int i = 0; i < k->num_defines; i++) {
        frost__buf_printf(out, " %s", k->defines[i]);
    }
}

/* ---- parsing ------------------------------------------------------------------------- */
typedef struct interned_name {
    struct interned_name *next;
    char text[];
} interned_name;

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static interned_name *interned_names;

/* A process-lifetime copy of text[0..len). */
static const char *intern(const char *text, size_t len)
{
    pthread_mutex_lock(&intern_lock);
    const char *found = NULL;
    for (interned_name *n = interned_names; n && !found; n = n->next) {
        if (strlen(n->text) == len && memcmp(n->text, text, len) == 0) {
            found = n->text;
        }
    }
    if (!found) {
        interned_name *n = malloc(sizeof *n + len + 1);
        if (n) {
            memcpy(n->text, text, len);
            n->text[len] = '\0';
            n->next = interned_names;
            interned_names = n;
            found = n->text;
        }
    }
    pthread_mutex_unlock(&intern_lock);
    return found;
}

static int is_identifier(const char *s, size_t len)
{
    if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) {
            return 0;
        }
    }
    return 1;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
        p++;
    }
    return p;
}

static const char *token_end(const char *p)
{
    while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
        p++;
    }
    return p;
}

frost_status frost__key_parse(const char *text, frost__kernel_key *out)
{
    if (!text || !out) {
        return frost__fail(FROST_INVALID_ARGUMENT, "frost__key_parse: text and out must not be NULL");
    }
    const char *p = skip_space(text);
    const char *end = token_end(p);
    const char *colon = NULL;
    for (const char *c = p; c < end; c++) {
        colon = *c == ':' ? c : colon;
    }
    if (!colon) {
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "kernel key \"%s\": expected \"source:entry [NAME=VALUE ...]\"", text);
    }
    char source_path[512];
    size_t source_len = (size_t)(colon - p);
    if (source_len == 0 || source_len >= sizeof source_path) {
        return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": bad source path", text);
    }
    memcpy(source_path, p, source_len);
    source_path[source_len] = '\0';
    const frost__source *source = frost__source_find(source_path);
    if (!source || strcmp(source->path, source_path) != 0) {
        return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": no embedded kernel source is named \"%s\"",
                           text, source_path);
    }
    size_t entry_len = (size_t)(end - colon - 1);
    if (!is_identifier(colon + 1, entry_len)) {
        return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": entry point \"%.*s\" is not an identifier",
                           text, (int)entry_len, colon + 1);
    }
    const char *entry = intern(colon + 1, entry_len);
    if (!entry) {
        return frost__fail(FROST_OUT_OF_MEMORY, "kernel key \"%s\": out of memory", text);
    }
    frost__kernel_key key;
    frost__key_init(&key, source->path, entry);
    for (p = skip_space(end); *p; p = skip_space(end)) {
        end = token_end(p);
        size_t len = (size_t)(end - p);
        char define[DEFINE_CAP];
        if (len >= sizeof define) {
            return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": define \"%.*s\" is longer than %d characters",
                               text, (int)len, p, DEFINE_CAP - 1);
        }
        memcpy(define, p, len);
        define[len] = '\0';
        size_t name_len = define_name_length(define);
        if (!is_identifier(define, name_len)) {
            return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": \"%s\" is not NAME or NAME=VALUE", text,
                               define);
        }
        define[name_len] = '\0';
        const char *value = name_len < len ? define + name_len + 1 : NULL;
        if (value && !*value) {
            return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": define %s has an empty value", text,
                               define);
        }
        frost__key_define(&key, define, value ? "%s" : NULL, value);
        if (key.num_defines < 0) {
            return frost__fail(FROST_INVALID_ARGUMENT, "kernel key \"%s\": more than %d defines", text,
                               FROST__KEY_MAX_DEFINES);
        }
    }
    *out = key;
    return FROST_OK;
}
