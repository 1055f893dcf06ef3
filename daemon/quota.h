/* quota.h: the per-uid quotas and budgets of the daemon (--max-sandboxes-per-uid,
 * --max-commands-per-uid, --max-buffered-per-uid, --max-proxy-fds-per-uid,
 * --max-ptys-per-uid): how many sandboxes each uid owns, how many commands each uid
 * runs, how many bytes the daemon holds for each uid, how many descriptors the allowlist
 * proxies of its sandboxes hold, how many ptys its sandboxes may open, counted as they
 * come and go instead of by walking the table, and in all.
 *
 * One struct quota belongs to the sandbox table, which makes it and puts it in struct
 * sbxd (d->quota); the table counts sandboxes, the command module commands and kept
 * output, the connections partly received requests, the proxies' shared state
 * (egressshare.c) their descriptors, the lifecycle each sandbox's ptys, the forwarded
 * ports (portfwd.c) their streams. Loop thread
 * only; nothing here logs. */
#ifndef SBX_QUOTA_H
#define SBX_QUOTA_H

#include <stdint.h>
#include <sys/types.h>

enum quota_kind {
        QUOTA_SANDBOXES = 0, /* live sandboxes (creating to retired) a uid owns */
        QUOTA_COMMANDS,      /* commands a uid started that have no result yet */
        QUOTA_QUEUED,        /* commands of a uid waiting for a slot, all sandboxes */
        QUOTA_BUFFERED,      /* bytes held for a uid: kept output, stdin, partial requests */
        QUOTA_PROXY_FDS,     /* descriptors of the proxy connections of a uid's sandboxes */
        QUOTA_PTYS,          /* ptys a uid's live sandboxes may open (their devpts max=) */
        QUOTA_FORWARDS,      /* streams to sandboxes' ports a uid opened (portfwd.c) */
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

/* Counts n more of kind (bytes, for QUOTA_BUFFERED) for uid, unless uid would then have
 * more than max, or all uids together more than max_total: then nothing is counted and
 * the answer is -EDQUOT (uid's own bound) or -ENOSPC (everyone's). -ENOMEM when uid's
 * counter cannot be made. Each 0 is matched by quota_sub of the same n. */
int quota_add(struct quota *q, enum quota_kind kind, uid_t uid, uint64_t n, uint64_t max,
              uint64_t max_total);

/* Counts n fewer of kind for uid (counted earlier with quota_add). */
void quota_sub(struct quota *q, enum quota_kind kind, uid_t uid, uint64_t n);

/* How much of kind uid has (quota_add's count), and all uids together. */
uint64_t quota_amount(const struct quota *q, enum quota_kind kind, uid_t uid);
uint64_t quota_total(const struct quota *q, enum quota_kind kind);

/* One uid's bound and everyone's of a kind counted with quota_add: the bytes the daemon
 * may hold for its clients (QUOTA_BUFFERED: --max-buffered-per-uid, --max-buffered),
 * the ptys of the sandboxes (QUOTA_PTYS: --max-ptys-per-uid, --max-ptys). q NULL:
 * nothing is counted. */
struct quota_bound {
        struct quota *q;
        uint64_t max, max_total;
};

/* What one holder of memory for a uid (a kept stream, a connection's buffer) has
 * counted of QUOTA_BUFFERED. b NULL: nothing is counted and every hold succeeds. */
struct quota_hold {
        const struct quota_bound *b;
        uid_t uid;
        uint64_t held;
};

/* Makes h hold want bytes: counts the difference, more or fewer. 0; or -EDQUOT or
 * -ENOSPC (quota_add's) when more would pass a bound, h holding what it held. */
int quota_hold_to(struct quota_hold *h, uint64_t want);

/* One line on a refusal r of quota_hold_to (or quota_add of QUOTA_BUFFERED) for uid:
 * which bound, its value and its flag, into buf. */
void quota_explain_buffered(const struct quota_bound *b, uid_t uid, int r, char *buf, size_t len);

/* Counts for uid as much of want of kind as b leaves it: the least of want, what uid has
 * left under b->max and what all have left under b->max_total; that many (0 to want)
 * in *ret_got, each to be given back with quota_sub. 0 when all of want was counted,
 * else the bound that cut it: -EDQUOT (uid's, the tighter) or -ENOSPC (everyone's);
 * -ENOMEM (nothing counted) when uid's counter cannot be made. b NULL or without q:
 * all of want, counted nowhere. */
int quota_add_upto(const struct quota_bound *b, enum quota_kind kind, uid_t uid, uint64_t want,
                   uint64_t *ret_got);

/* One line on what cut a sandbox's ptys (r from quota_add_upto of QUOTA_PTYS) for uid:
 * how many the bound's holders had before, the bound, its value and its flag. have_uid
 * and have_all are the counts before the cut (quota_amount, quota_total). */
void quota_explain_ptys(const struct quota_bound *b, uid_t uid, int r, uint64_t have_uid,
                        uint64_t have_all, char *buf, size_t len);

#endif
