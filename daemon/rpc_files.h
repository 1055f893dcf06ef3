/* rpc_files.h: the handlers of the file requests (ReadFile, WriteFile, ListDirectory,
 * Stat, MakeDirectory, Remove).
 *
 * Each finds its sandbox for the caller (rpc_common.h), calls the file operations of
 * files.h as the sandbox's user, answers, and records the operation in the store, a
 * refusal too (a caller told "not found" of a sandbox that exists is recorded for its
 * owner and the operator to see). A listing and a recursive remove do their slow part
 * off the loop (offload.h): the handler opens what it works on, hands the rest to the
 * thread pool through a struct file_work holding its call, and answers when the work is
 * done, once it has found its sandbox again by id (one that ended meanwhile is answered
 * ENDED). Called by rpc_dispatch only, on the event loop, with a request whose body is
 * the one the handler's name says; the request is the caller's, and no handler keeps a
 * pointer into it. */
#ifndef SBX_RPC_FILES_H
#define SBX_RPC_FILES_H

#include "sbx.pb-c.h"

struct conn;

void rpc_files_read_file(struct conn *c, const Sbx__V1__Request *req);
void rpc_files_write_file(struct conn *c, const Sbx__V1__Request *req);
void rpc_files_list_directory(struct conn *c, const Sbx__V1__Request *req);
void rpc_files_stat(struct conn *c, const Sbx__V1__Request *req);
void rpc_files_make_directory(struct conn *c, const Sbx__V1__Request *req);
void rpc_files_remove(struct conn *c, const Sbx__V1__Request *req);

#endif
