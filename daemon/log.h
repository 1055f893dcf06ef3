/* log.h: the daemon's log, one line per event on stderr with a syslog level prefix
 * ("<3>" error ... "<7>" debug) that journald understands. Lines about a sandbox or a
 * request name it ("sbx=ID req=N"). Only the daemon's own modules log; the store,
 * framing and libsbx never do. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdarg.h>

enum log_level {
        LOG_LEVEL_ERR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

/* Sets the most verbose level written. Default LOG_LEVEL_INFO. */
void log_set_level(enum log_level level);

/* Parses "err", "warning", "notice", "info", "debug" (or a digit 3..7). -EINVAL otherwise. */
int log_parse_level(const char *s, enum log_level *ret);

/* Writes one line at level when enabled. Preserves errno. */
void log_emit(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int log_enabled(enum log_level level);

#define log_err(...) log_emit(LOG_LEVEL_ERR, __VA_ARGS__)
#define log_warning(...) log_emit(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_notice(...) log_emit(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...) log_emit(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_emit(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
