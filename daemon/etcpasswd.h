/* etcpasswd.h: /etc/passwd read as a file, entry by entry.
 *
 * The daemon never asks NSS (getpwuid and its kin): a lookup could go to a network
 * directory and block the event loop. It reads /etc/passwd itself, which is where the
 * accounts of the machines it runs on live. Called on the event loop by the credential
 * cache (credcache.c: the homes whose credentials it hides), the policy (policy.c: a
 * person's home is not a system directory) and recovery (recover.c: the owner's gid);
 * owns nothing between calls; no logging. */
#ifndef SBX_ETCPASSWD_H
#define SBX_ETCPASSWD_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* One entry of /etc/passwd, pointing into the line read. */
struct passwd_entry {
        uid_t uid;
        gid_t gid;
        const char *home;
};

/* The next well-formed entry of f, an /etc/passwd read as a file (no NSS lookup that
 * could block the loop on a network), into *e; *line and *cap as getline's. 1, or 0 at
 * the end. f may be NULL (no entry). */
int etcpasswd_next(FILE *f, char **line, size_t *cap, struct passwd_entry *e);

/* The primary gid of uid from /etc/passwd (read as a file), or (gid_t)-1: the owner's
 * gid of a sandbox adopted after a restart, which the records do not keep. */
gid_t etcpasswd_gid(uid_t uid);

#endif
