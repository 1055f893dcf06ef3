/* cli_json.c: the JSON writer of the sbx tool.
 *
 * Writes one compact JSON document to a FILE as the caller walks its structure (begin
 * and end objects and arrays, keys, scalars); the writer only tracks where commas go.
 * Strings are bytes that may come from a sandbox: they are rendered as valid UTF-8 (each
 * maximal invalid subsequence becomes one U+FFFD, as the Unicode standard recommends and
 * Python's errors="replace" does) with quotes, backslashes and every control character
 * escaped, so the output always parses. Used by every --json output of cli_*.c. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json *j, FILE *f) {
        memset(j, 0, sizeof(*j));
        j->f = f;
}

/* Called before every value and key: writes the comma that separates it. */
static void before_value(struct json *j) {
        if (j->after_key) {
                j->after_key = false;
                return;
        }
        if (j->depth > 0 && j->depth <= JSON_MAX_DEPTH) {
                if (j->need_comma[j->depth - 1])
                        fputc(',', j->f);
                j->need_comma[j->depth - 1] = true;
        }
}

static void open_container(struct json *j, char ch) {
        before_value(j);
        fputc(ch, j->f);
        j->depth++;
        if (j->depth <= JSON_MAX_DEPTH)
                j->need_comma[j->depth - 1] = false;
}

static void close_container(struct json *j, char ch) {
        if (j->depth > 0)
                j->depth--;
        fputc(ch, j->f);
}

void json_begin_object(struct json *j) {
        open_container(j, '{');
}

void json_end_object(struct json *j) {
        close_container(j, '}');
}

void json_begin_array(struct json *j) {
        open_container(j, '[');
}

void json_end_array(struct json *j) {
        close_container(j, ']');
}

/* The length of the UTF-8 sequence at p (n bytes left). *ok says whether it is a valid
 * scalar value; when it is not, the length is that of the maximal subpart to replace
 * (at least 1). Overlong forms, surrogates and values past U+10FFFF are invalid. */
static size_t utf8_seq(const uint8_t *p, size_t n, bool *ok) {
        uint8_t b = p[0], lo = 0x80, hi = 0xBF;
        size_t need;

        *ok = false;
        if (b < 0x80) {
                *ok = true;
                return 1;
        }
        if (b >= 0xC2 && b <= 0xDF) {
                need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
                need = 2;
                if (b == 0xE0)
                        lo = 0xA0;
                else if (b == 0xED)
                        hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
                need = 3;
                if (b == 0xF0)
                        lo = 0x90;
                else if (b == 0xF4)
                        hi = 0x8F;
        } else {
                return 1;
        }
        for (size_t i = 1; i <= need; i++) {
                uint8_t c;
                if (i >= n)
                        return i;
                c = p[i];
                if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF))
                        return i;
        }
        *ok = true;
        return need + 1;
}

void json_escape(FILE *f, const void *s, size_t len) {
        const uint8_t *p = s;
        size_t i = 0;

        while (i < len) {
                uint8_t b = p[i];
                bool ok;
                size_t n;

                if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
                        /* Copy the run of plain ASCII at once. */
                        size_t k = i + 1;
                        while (k < len && p[k] >= 0x20 && p[k] < 0x7F && p[k] != '"' &&
                               p[k] != '\\')
                                k++;
                        fwrite(p + i, 1, k - i, f);
                        i = k;
                        continue;
                }
                switch (b) {
                case '"':
                        fputs("\\\"", f);
                        i++;
                        continue;
                case '\\':
                        fputs("\\\\", f);
                        i++;
                        continue;
                case '\b':
                        fputs("\\b", f);
                        i++;
                        continue;
                case '\f':
                        fputs("\\f", f);
                        i++;
                        continue;
                case '\n':
                        fputs("\\n", f);
                        i++;
                        continue;
                case '\r':
                        fputs("\\r", f);
                        i++;
                        continue;
                case '\t':
                        fputs("\\t", f);
                        i++;
                        continue;
                default:
                        break;
                }
                if (b < 0x20 || b == 0x7F) {
                        fprintf(f, "\\u%04x", (unsigned)b);
                        i++;
                        continue;
                }
                n = utf8_seq(p + i, len - i, &ok);
                if (ok)
                        fwrite(p + i, 1, n, f);
                else
                        fputs("\xEF\xBF\xBD", f); /* U+FFFD */
                i += n;
        }
}

void json_key(struct json *j, const char *key) {
        before_value(j);
        fputc('"', j->f);
        json_escape(j->f, key, strlen(key));
        fputs("\":", j->f);
        j->after_key = true;
}

void json_string(struct json *j, const char *s) {
        if (!s) {
                json_null(j);
                return;
        }
        json_bytes(j, s, strlen(s));
}

void json_bytes(struct json *j, const void *data, size_t len) {
        before_value(j);
        fputc('"', j->f);
        if (data)
                json_escape(j->f, data, len);
        fputc('"', j->f);
}

void json_int(struct json *j, int64_t v) {
        before_value(j);
        fprintf(j->f, "%" PRId64, v);
}

void json_uint(struct json *j, uint64_t v) {
        before_value(j);
        fprintf(j->f, "%" PRIu64, v);
}

void json_double(struct json *j, double v, int decimals) {
        char buf[64];
        size_t n;

        if (!isfinite(v)) {
                json_null(j);
                return;
        }
        if (decimals < 0 || decimals > 9)
                decimals = 6;
        snprintf(buf, sizeof(buf), "%.*f", decimals, v);
        n = strlen(buf);
        if (strchr(buf, '.')) {
                while (n > 0 && buf[n - 1] == '0')
                        buf[--n] = 0;
                if (n > 0 && buf[n - 1] == '.')
                        buf[--n] = 0;
        }
        if (strcmp(buf, "-0") == 0)
                strcpy(buf, "0");
        before_value(j);
        fputs(buf, j->f);
}

void json_ms_as_secs(struct json *j, int64_t ms) {
        char buf[48];
        uint64_t a = ms < 0 ? (uint64_t)0 - (uint64_t)ms : (uint64_t)ms;
        unsigned frac = (unsigned)(a % 1000);
        size_t n;

        n = (size_t)snprintf(buf, sizeof(buf), "%s%" PRIu64, ms < 0 ? "-" : "", a / 1000);
        if (frac) {
                snprintf(buf + n, sizeof(buf) - n, ".%03u", frac);
                n = strlen(buf);
                while (buf[n - 1] == '0')
                        buf[--n] = 0;
        }
        before_value(j);
        fputs(buf, j->f);
}

void json_bool(struct json *j, bool v) {
        before_value(j);
        fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j) {
        before_value(j);
        fputs("null", j->f);
}

void json_int_or_null(struct json *j, int has, int64_t v) {
        if (has)
                json_int(j, v);
        else
                json_null(j);
}

int json_finish(struct json *j) {
        fputc('\n', j->f);
        if (fflush(j->f) != 0 || ferror(j->f))
                return -EIO;
        return 0;
}
