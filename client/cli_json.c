/* cli_json.c: the JSON of the sbx tool, through jansson.
 *
 * Every --json output of cli_*.c and every message of `sbx mcp` is a jansson value
 * printed by cli_json_print. jansson rather than json-c: its decoder validates UTF-8
 * strictly (json-c passes invalid bytes through, and `sbx mcp` must answer a client
 * that sends them with a parse error rather than forward them to a sandbox), its
 * encoder is compact and keeps keys in insertion order (the CLI's --json key order is a
 * contract tests read), and it has no hidden global state to set up or tear down, so the
 * MCP server's threads can each build values of their own.
 *
 * The walking writer (json_begin_object ... json_finish) builds a tree as the caller
 * walks its structure, so cli_sandbox.c, cli_exec.c and cli_files.c stay written
 * against the interface they had. Strings are bytes that may come from a sandbox:
 * each maximal invalid UTF-8 subsequence becomes one U+FFFD (as the Unicode standard
 * recommends and Python's errors="replace" does) before jansson sees them, and jansson
 * escapes quotes, backslashes and control characters, so the output always parses.
 *
 * The output is the same bytes as the hand-made writer this file replaced, but for two
 * spellings JSON readers treat as equal: control characters other than \b \f \n \r \t
 * are escaped with upper-case hex (\u001B), DEL is not escaped, and numbers with a
 * fraction under 0.0001 print with an exponent (5e-5). Numbers keep their decimals:
 * a value with a fraction is rounded to its decimals first and printed with 15
 * significant digits, which gives that decimal text back. */
/* jansson first: cli.h then renames the writer's json_string and json_null (jansson has
 * functions of those names), so in this file jansson's two are not called by name:
 * strings are made by json_stringn_nocheck, null by json_pack. */
#include <jansson.h>

#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Significant digits of real numbers: enough for every number the tool prints (at most
 * 15 digits: Unix seconds with milliseconds have 13), few enough that a double rounded
 * to its decimals prints as those decimals (DBL_DIG). */
#define JSON_REAL_DIGITS 15

/* ---- UTF-8 ---------------------------------------------------------------------------- */

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

char *cli_utf8_valid(const void *data, size_t len, size_t *ret_len) {
        const uint8_t *p = data;
        size_t i = 0, o = 0, bad = 0;
        char *out;

        /* Each replaced subsequence is at least one byte and becomes three. */
        for (i = 0; i < len;) {
                bool ok;
                size_t n = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i, &ok);
                if (p[i] >= 0x80 && !ok)
                        bad++;
                i += n;
        }
        if (len > (SIZE_MAX - 1) / 3 - bad)
                return NULL;
        out = malloc(len + 2 * bad + 1);
        if (!out)
                return NULL;
        if (!bad) {
                if (len)
                        memcpy(out, p, len);
                o = len;
        } else {
                for (i = 0; i < len;) {
                        bool ok = true;
                        size_t n = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i, &ok);
                        if (ok) {
                                memcpy(out + o, p + i, n);
                                o += n;
                        } else {
                                memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
                                o += 3;
                        }
                        i += n;
                }
        }
        out[o] = 0;
        if (ret_len)
                *ret_len = o;
        return out;
}

size_t cli_utf8_invalid_bytes(const void *data, size_t len) {
        const uint8_t *p = data;
        size_t i = 0, bad = 0;

        while (i < len) {
                bool ok = true;
                size_t n = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i, &ok);
                if (!ok)
                        bad += n;
                i += n;
        }
        return bad;
}

json_t *cli_json_text(const void *data, size_t len) {
        size_t n;
        char *s = cli_utf8_valid(data ? data : "", data ? len : 0, &n);
        json_t *v;

        if (!s)
                return NULL;
        v = json_stringn_nocheck(s, n);
        free(s);
        return v;
}

int cli_json_print(FILE *f, const json_t *v) {
        size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(JSON_REAL_DIGITS);

        if (json_dumpf(v, f, flags) < 0 || fputc('\n', f) == EOF || fflush(f) != 0 || ferror(f)) {
                if (!errno)
                        errno = EIO;
                return -EIO;
        }
        return 0;
}

/* ---- the walking writer ---------------------------------------------------------------- */

void json_init(struct json *j, FILE *f) {
        memset(j, 0, sizeof(*j));
        j->f = f;
}

/* Adds v (taking it) where the walk is: as the document, as the value of the pending
 * key, or as the next element. NULL (memory ran out) marks the document failed. */
static void put(struct json *j, json_t *v) {
        json_t *parent = j->depth > 0 && j->depth <= JSON_MAX_DEPTH ? j->stack[j->depth - 1] : NULL;
        char *key = j->key;

        j->key = NULL;
        if (!v || j->failed) {
                json_decref(v);
                j->failed = true;
        } else if (j->depth == 0 && !j->root) {
                j->root = v;
        } else if (json_is_object(parent) && key) {
                if (json_object_set_new_nocheck(parent, key, v) < 0)
                        j->failed = true;
        } else if (json_is_array(parent)) {
                if (json_array_append_new(parent, v) < 0)
                        j->failed = true;
        } else {
                /* A second document, a value without its key, or past JSON_MAX_DEPTH. */
                json_decref(v);
                j->failed = true;
        }
        free(key);
}

static void open_container(struct json *j, json_t *c) {
        json_t *held = c;

        put(j, c);
        if (j->failed)
                held = NULL;
        if (j->depth < JSON_MAX_DEPTH)
                j->stack[j->depth] = held;
        else
                j->failed = true;
        j->depth++;
}

static void close_container(struct json *j) {
        if (j->depth > 0)
                j->depth--;
}

void json_begin_object(struct json *j) {
        open_container(j, json_object());
}

void json_end_object(struct json *j) {
        close_container(j);
}

void json_begin_array(struct json *j) {
        open_container(j, json_array());
}

void json_end_array(struct json *j) {
        close_container(j);
}

void json_key(struct json *j, const char *key) {
        free(j->key);
        /* Keys (label names, limit names) may come from a sandbox's owner: made valid. */
        j->key = cli_utf8_valid(key, strlen(key), NULL);
        if (!j->key)
                j->failed = true;
}

void json_string(struct json *j, const char *s) {
        if (!s) {
                json_null(j);
                return;
        }
        json_bytes(j, s, strlen(s));
}

void json_bytes(struct json *j, const void *data, size_t len) {
        put(j, cli_json_text(data, len));
}

char *cli_base64(const void *data, size_t len) {
        static const char tab[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const uint8_t *p = data;
        char *out, *o;

        if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
                return NULL;
        out = malloc((len + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        o = out;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < len)
                        v |= p[i + 2];
                *o++ = tab[(v >> 18) & 63];
                *o++ = tab[(v >> 12) & 63];
                *o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
                *o++ = i + 2 < len ? tab[v & 63] : '=';
        }
        *o = 0;
        return out;
}

void json_base64_unless_utf8(struct json *j, const void *data, size_t len) {
        char *b;

        if (!data || cli_utf8_invalid_bytes(data, len) == 0) {
                json_null(j);
                return;
        }
        b = cli_base64(data, len);
        if (!b) {
                j->failed = true;
                return;
        }
        json_string(j, b);
        free(b);
}

void json_int(struct json *j, int64_t v) {
        put(j, json_integer((json_int_t)v));
}

void json_uint(struct json *j, uint64_t v) {
        /* jansson's integers are signed 64-bit; nothing sbx prints comes near 2^63. */
        if (v > (uint64_t)INT64_MAX)
                put(j, json_real((double)v));
        else
                put(j, json_integer((json_int_t)v));
}

/* The number written as text in buf: an integer when it has no fraction, else a real
 * that prints back as the same text (at most JSON_REAL_DIGITS significant digits). */
static void put_number_text(struct json *j, const char *buf) {
        char *end;

        if (!strchr(buf, '.')) {
                long long ll;
                errno = 0;
                ll = strtoll(buf, &end, 10);
                if (!errno && !*end) {
                        put(j, json_integer((json_int_t)ll));
                        return;
                }
        }
        put(j, json_real(strtod(buf, NULL)));
}

void json_double(struct json *j, double v, int decimals) {
        char buf[400];
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
        put_number_text(j, buf);
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
        put_number_text(j, buf);
}

void json_bool(struct json *j, bool v) {
        put(j, json_boolean(v));
}

void json_null(struct json *j) {
        put(j, json_pack("n"));
}

void json_int_or_null(struct json *j, int has, int64_t v) {
        if (has)
                json_int(j, v);
        else
                json_null(j);
}

void json_strv(struct json *j, const struct sbx_strv *s) {
        json_begin_array(j);
        for (size_t i = 0; i < s->n; i++)
                json_string(j, s->v[i]);
        json_end_array(j);
}

void json_enforcement(struct json *j, const struct sbx_enforcement *e, size_t n) {
        json_begin_object(j);
        for (size_t i = 0; i < n; i++) {
                json_key(j, e[i].limit);
                json_string(j, e[i].enforcement);
        }
        json_end_object(j);
}

int json_finish(struct json *j) {
        int r;

        free(j->key);
        j->key = NULL;
        if (j->failed || !j->root) {
                json_decref(j->root);
                j->root = NULL;
                errno = ENOMEM;
                return -ENOMEM;
        }
        r = cli_json_print(j->f, j->root);
        json_decref(j->root);
        j->root = NULL;
        return r;
}
