/* caller.h: who is asking, as the sandbox layer sees a request's client: its
 * credentials from SO_PEERCRED and SO_PEERGROUPS, and its name from Hello. Filled by the
 * rpc layer for each request; read by the sandbox modules. */
#ifndef SBX_CALLER_H
#define SBX_CALLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The groups belong to the connection and are valid during the call only. */
struct caller {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        const char *client_name;
        const gid_t *groups; /* supplementary groups */
        size_t n_groups;
        uint64_t conn_id;    /* its connection (0: none), whose commands take turns in a queue */
};

#endif
