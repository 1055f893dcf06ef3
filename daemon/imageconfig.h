/* imageconfig.h: what the daemon takes from an image's config (the OCI image config,
 * which Docker's is too): the platform it was built for and the defaults of a process
 * (Env, Entrypoint, Cmd, WorkingDir, User), read with jansson.
 *
 * Used by imagestore_inspect, and by imageimport to refuse at import a config a sandbox
 * could not later read. No state: any thread. Never logs. */
#ifndef SBX_IMAGECONFIG_H
#define SBX_IMAGECONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Strings and arrays are NULL when the config has none (or null); arrays are
 * NULL-terminated as well as counted. */
struct imageconfig {
        char *os, *arch, *variant;
        char **env;
        size_t nenv;
        char **entrypoint;
        size_t nentrypoint;
        char **cmd;
        size_t ncmd;
        char *working_dir;
        char *user;
        /* A snapshot's (snapshot.h): its /workspace is the workspace it was taken with
         * (config.Labels[IMAGECONFIG_LABEL_WORKSPACE] is "1"). */
        int snapshot_workspace;
        /* A snapshot's: the file data of its own layer (IMAGECONFIG_LABEL_BYTES); 0 for
         * an image that is none. */
        uint64_t snapshot_bytes;
        /* config.Labels whose values are strings, sorted by key. */
        char **label_keys, **label_values;
        size_t nlabels;
};

/* The labels a snapshot's config carries (snapshot.h). */
#define IMAGECONFIG_LABEL_WORKSPACE "io.sbxd.snapshot.workspace"
#define IMAGECONFIG_LABEL_SANDBOX   "io.sbxd.snapshot.sandbox"
#define IMAGECONFIG_LABEL_PARENT    "io.sbxd.snapshot.parent"
#define IMAGECONFIG_LABEL_BYTES     "io.sbxd.snapshot.bytes"
#define IMAGECONFIG_LABEL_POLICY    "io.sbxd.snapshot.policy"

/* Reads the config in len bytes of buf (imageconfig_load: what fd reads to its end)
 * into *ret, which the caller frees with imageconfig_free. -EINVAL when it is not JSON
 * or a field has the wrong type (Env, Entrypoint, Cmd: lists of strings; WorkingDir,
 * User, os, architecture, variant: strings), -ENOMEM; *ret is then empty. */
int imageconfig_parse(const char *buf, size_t len, struct imageconfig *ret);
int imageconfig_load(int fd, struct imageconfig *ret);

/* Frees what c holds and empties it. Accepts NULL and an empty one. */
void imageconfig_free(struct imageconfig *c);

#endif
