/* log.c: stderr logging with syslog level prefixes; see log.h. Owns the level. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum log_level max_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level) {
        max_level = level;
}

int log_enabled(enum log_level level) {
        return level <= max_level;
}

int log_parse_level(const char *s, enum log_level *ret) {
        static const struct {
                const char *name;
                enum log_level level;
        } names[] = {
                {"err", LOG_LEVEL_ERR},       {"error", LOG_LEVEL_ERR},
                {"warning", LOG_LEVEL_WARNING}, {"warn", LOG_LEVEL_WARNING},
                {"notice", LOG_LEVEL_NOTICE}, {"info", LOG_LEVEL_INFO},
                {"debug", LOG_LEVEL_DEBUG},
        };
        size_t i;

        if (s[0] >= '3' && s[0] <= '7' && s[1] == '\0') {
                *ret = (enum log_level)(s[0] - '0');
                return 0;
        }
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(s, names[i].name) == 0) {
                        *ret = names[i].level;
                        return 0;
                }
        return -EINVAL;
}

void log_emit(enum log_level level, const char *fmt, ...) {
        char line[2048];
        int saved = errno;
        va_list ap;
        int n;

        if (level > max_level) {
                errno = saved;
                return;
        }
        n = snprintf(line, sizeof(line), "<%d>sbxd: ", (int)level);
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        n = (int)strlen(line);
        line[n++] = '\n';
        /* One write per line so concurrent writers (init helpers share stderr) do not
         * interleave inside a line. */
        (void)!fwrite(line, 1, (size_t)n, stderr);
        fflush(stderr);
        errno = saved;
}
