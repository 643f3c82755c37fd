/*
 * status.c — statuses, the thread-local last-error string, and logging.
 *
 * Every failure inside frost goes through frost__fail(), which formats the message into a
 * thread-local buffer (read by frost_last_error()) and logs it.  Logging is off unless
 * FROST_LOG=error|warn|info|debug is set or frost_set_log_level() is called; messages go
 * to stderr or to the user's callback, never anywhere else.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static _Thread_local char last_error[2048];

const char *frost_status_name(frost_status s)
{
    switch (s) {
#define FROST__STATUS_NAME(name, value, text)                                                                          \
    case FROST_##name:                                                                                                 \
        return #name;
        FROST_STATUS_MAP(FROST__STATUS_NAME)
#undef FROST__STATUS_NAME
    }
    return "UNKNOWN_STATUS";
}

const char *frost_last_error(void)
{
    return last_error;
}

void frost__clear_error(void)
{
    last_error[0] = '\0';
}

/* ---- logging ---- */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = FROST_LOG_OFF;
static int log_level_overridden;
static frost_log_fn log_fn;
static void *log_user;

static void read_log_env(void)
{
    const char *e = getenv("FROST_LOG");
    if (!e || log_level_overridden)
        return;
    static const char *const names[] = {"off", "error", "warn", "info", "debug"};
    for (int i = 0; i < (int)FROST__ARRAY_SIZE(names); i++)
        if (strcmp(e, names[i]) == 0)
            log_level = i;
}

void frost_set_log_callback(frost_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void frost_set_log_level(frost_log_level level)
{
    pthread_once(&log_once, read_log_env);
    pthread_mutex_lock(&log_lock);
    log_level = level;
    log_level_overridden = 1;
    pthread_mutex_unlock(&log_lock);
}

int frost__log_enabled(frost_log_level level)
{
    pthread_once(&log_once, read_log_env);
    return level != FROST_LOG_OFF && (int)level <= log_level;
}

static void log_emit(frost_log_level level, const char *msg)
{
    static const char *const tags[] = {"", "error", "warn", "info", "debug"};
    pthread_mutex_lock(&log_lock);
    if (log_fn)
        log_fn(level, msg, log_user);
    else
        fprintf(stderr, "frost %s: %s\n", tags[level], msg);
    pthread_mutex_unlock(&log_lock);
}

void frost__log(frost_log_level level, const char *fmt, ...)
{
    if (!frost__log_enabled(level))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_emit(level, msg);
}

frost_status frost__fail(frost_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    frost_log_level level =
        (s == FROST_DEVICE_ERROR || s == FROST_INTERNAL || s == FROST_OUT_OF_MEMORY) ? FROST_LOG_ERROR : FROST_LOG_WARN;
    if (frost__log_enabled(level))
        log_emit(level, last_error);
    return s;
}

/* ---- version ---- */
#define FROST__STR2(x) #x
#define FROST__STR(x) FROST__STR2(x)

const char *frost_version(void)
{
    return FROST__STR(FROST_VERSION_MAJOR) "." FROST__STR(FROST_VERSION_MINOR) "." FROST__STR(FROST_VERSION_PATCH);
}

int frost_version_number(void)
{
    return FROST_VERSION_NUMBER;
}
