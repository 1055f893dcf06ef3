/* quota.h: the per-uid quotas of the daemon (--max-sandboxes-per-uid,
 * --max-commands-per-uid): how many sandboxes each uid owns and how many commands each
 * uid runs, counted as they come and go instead of by walking the table.
 *
 * One struct quota belongs to the sandbox table; the table counts sandboxes, the
 * command module counts commands. Loop thread only; nothing here logs. */
#ifndef SBX_QUOTA_H
#define SBX_QUOTA_H

#include <sys/types.h>

enum quota_kind {
        QUOTA_SANDBOXES = 0, /* live sandboxes (creating to retired) a uid owns */
        QUOTA_COMMANDS,      /* commands a uid started that have no result yet */
        QUOTA_QUEUED,        /* commands of a uid waiting for a slot, all sandboxes */
        QUOTA_N
};

struct quota;

/* A new, empty quota counter. Returns 0 or -ENOMEM. */
int quota_new(struct quota **ret);

/* Frees q. Accepts NULL; returns NULL. */
struct quota *quota_free(struct quota *q);

/* Counts one more of kind for uid, unless uid already has max: then -EAGAIN, with the
 * count it has in *ret_have (may be NULL). -ENOMEM when uid's counter cannot be made
 * (its first sandbox or command). Each 0 must be matched by one quota_drop. */
int quota_take(struct quota *q, enum quota_kind kind, uid_t uid, unsigned max, unsigned *ret_have);

/* Counts one fewer of kind for uid (one taken earlier). */
void quota_drop(struct quota *q, enum quota_kind kind, uid_t uid);

/* How many of kind uid has now. */
unsigned quota_count(const struct quota *q, enum quota_kind kind, uid_t uid);

#endif
