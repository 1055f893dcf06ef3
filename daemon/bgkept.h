/* bgkept.h: the background commands of one sandbox that ended and can still be attached
 * to (RunCommand.background, AttachCommand): each one's packed result, with the output
 * it kept, and what SandboxInfo.commands says of it.
 *
 * Bounded: at most SBX_KEPT_BACKGROUND_RESULTS of them, and at most
 * SBX_KEPT_BACKGROUND_BYTES of packed results together; past either the oldest are
 * forgotten (the newest always stays). Their records stay in the history. Each result's
 * bytes are held for the uid that ran it (quota.h QUOTA_BUFFERED) while it is kept. Pure
 * memory: used by command.c, which clears the list when its sandbox ends. An all-zero
 * struct bgkept is empty. */
#ifndef SBX_BGKEPT_H
#define SBX_BGKEPT_H

#include <stddef.h>
#include <stdint.h>

#include "quota.h"
#include "sbx.pb-c.h"

/* The most ended background commands a sandbox keeps for AttachCommand. */
#define SBX_KEPT_BACKGROUND_RESULTS 16u
/* The most bytes their packed results (their kept output, mostly) take together: two
 * streams at the largest cap (SBX_MAX_OUTPUT_BYTES). */
#define SBX_KEPT_BACKGROUND_BYTES (128u * 1024u * 1024u)

struct bgkept_entry {
        struct bgkept_entry *next; /* the next newer one */
        uint64_t num;              /* c-N: N */
        char id[32];
        char **argv;
        size_t argc;
        uint32_t caller_uid;
        int64_t started_ms, ended_ms;
        Sbx__V1__Outcome outcome;
        int has_exit_code;
        int32_t exit_code;
        int tty;
        uint8_t *result; /* packed Sbx__V1__CommandResult */
        size_t result_len;
        struct quota_hold hold; /* result_len, held for caller_uid */
};

struct bgkept {
        struct bgkept_entry *head, *tail; /* oldest, newest */
        unsigned n;
        size_t bytes;
};

/* Keeps the end of a background command: res packed (with its output), its argv copied,
 * and the rest of e's fields as given (e->next, argv, result, hold are set here), its
 * bytes held for e->caller_uid against b (may be NULL). Forgets the oldest past the
 * bounds. 0; -ENOMEM, or -EDQUOT or -ENOSPC when b refuses the bytes (nothing kept). */
int bgkept_add(struct bgkept *k, const struct bgkept_entry *e, const char *const *argv, size_t argc,
               const Sbx__V1__CommandResult *res, const struct quota_bound *b);

/* The kept command with this id, or NULL. */
const struct bgkept_entry *bgkept_find(const struct bgkept *k, const char *id);

/* Forgets them all (k is empty again). */
void bgkept_clear(struct bgkept *k);

#endif
