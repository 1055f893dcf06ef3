/* sbxid.h: sandbox ids: the ones clients may choose, and the ones the daemon makes.
 * Pure functions; called by the table and the warm pool. */
#ifndef SBX_SBXID_H
#define SBX_SBXID_H

#include <stddef.h>

/* 1 when id may name a sandbox: 1 to SBX_ID_MAX_BYTES of [A-Za-z0-9._-], not "." or "..". */
int sbxid_valid(const char *id);

/* Writes a new id into out (len bytes, at least 23): "sbx-" + 10 base32 characters of
 * the time in milliseconds + 8 random ones, unique and sortable by creation time. */
void sbxid_generate(char *out, size_t len);

#endif
