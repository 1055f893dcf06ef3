/* recover.c: start-up recovery and re-adoption; see recover.h.
 *
 * Every live record belongs to a previous daemon. Its init may still wait on the
 * adoption socket in the sandbox's state directory (Setup.adoptable): connected, it
 * greets the new daemon with Ready naming its host pid, which must be the pid recorded
 * and still be an sbx-init that is PID 1 of its own namespace (pinned by a pidfd
 * between two checks). Such a sandbox is taken over as it is. Anything else is lost:
 * its init killed (verified the same way), its cgroup and state directory removed, its
 * record marked "lost". State directories and cgroups that no record owns (a crash
 * between making and recording, warm sandboxes of the daemon that died) go too. */
#include "recover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "etcpasswd.h"
#include "initmsg.h"
#include "log.h"
#include "names.h"
#include "pidns.h"
#include "policy.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbxd.h"
#include "sbxtab.h"
#include "store.h"
#include "trash.h"
#include "uidslot.h"

/* How long an adopted init has to greet the new daemon. */
#define RECOVER_GREETING_TIMEOUT_MS 5000

/* A live record found at start-up, copied out of the store. */
struct orphan {
        char *id;
        char *state;
        char *workspace;
        char *cgroup_path; /* its cgroup's name (a claimed warm sandbox's is not its id) */
        uint8_t *spec;
        size_t spec_len;
        uid_t owner;
        int64_t created_ms, deadline_ms;
        pid_t init_pid;
        uid_t run_uid;
        int keep;
};

struct orphan_list {
        struct orphan *v;
        size_t n, cap;
};

/* At start-up, removes the state directories no sandbox record owns: those of warm
 * sandboxes of a daemon that died (they went with it: no adoption socket), and any
 * other a crash left between making or renaming a directory and recording it (a claim
 * renames first). Their cgroups go with every other unused group (remove_if_stale). */
static void remove_unrecorded_dirs(struct sbxd *d) {
        char path[SBX_PATH_MAX_BYTES + 16];
        DIR *dir;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/sandboxes", d->cfg->state_dir);
        dir = opendir(path);
        while (dir && (de = readdir(dir))) {
                char ws[SBX_PATH_MAX_BYTES + 300];
                if (de->d_name[0] == '.')
                        continue;
                if (strncmp(de->d_name, "~warm-", 6) != 0) {
                        if (store_sandbox_exists(d->store, de->d_name) != 0)
                                continue; /* recorded (or the store cannot say: kept) */
                        log_notice("sbx=%s: removing its state directory, which has no record "
                                   "(a create cut short by a crash)",
                                   de->d_name);
                }
                snprintf(ws, sizeof(ws), "%s/%s/workspace", path, de->d_name);
                trash_sandbox_dir_now(d, de->d_name, ws, -1, 0);
        }
        if (dir)
                closedir(dir);
}

/* ---- the records -------------------------------------------------------------------- */

static int collect_orphan(const struct store_sandbox *rec, void *ud) {
        struct orphan_list *l = ud;
        struct orphan *o;
        Sbx__V1__CreateSandbox *spec;
        if (l->n == l->cap) {
                size_t nc = l->cap ? l->cap * 2 : 16;
                struct orphan *nv = realloc(l->v, nc * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                l->v = nv;
                l->cap = nc;
        }
        o = &l->v[l->n];
        memset(o, 0, sizeof(*o));
        spec = sbx__v1__create_sandbox__unpack(NULL, rec->spec_len, rec->spec);
        o->keep = spec && spec->has_keep_workspace && spec->keep_workspace;
        if (spec)
                sbx__v1__create_sandbox__free_unpacked(spec, NULL);
        o->id = strdup(rec->id);
        o->state = strdup(rec->state);
        o->workspace = rec->workspace_dir ? strdup(rec->workspace_dir) : NULL;
        o->cgroup_path =
                strdup(rec->cgroup_path && rec->cgroup_path[0] ? rec->cgroup_path : rec->id);
        o->spec = malloc(rec->spec_len ? rec->spec_len : 1);
        if (o->spec)
                memcpy(o->spec, rec->spec, rec->spec_len);
        o->spec_len = rec->spec_len;
        o->owner = rec->owner_uid;
        o->created_ms = rec->created_ms;
        o->deadline_ms = rec->deadline_ms;
        o->init_pid = rec->init_pid;
        o->run_uid = rec->run_uid;
        l->n++;
        if (!o->id || !o->state || !o->spec)
                return -ENOMEM;
        return 0;
}

static void orphans_free(struct orphan_list *l) {
        size_t i;
        for (i = 0; i < l->n; i++) {
                free(l->v[i].id);
                free(l->v[i].state);
                free(l->v[i].workspace);
                free(l->v[i].cgroup_path);
                free(l->v[i].spec);
        }
        free(l->v);
}

/* The highest command number of a sandbox's records: its seq, or the N of its c-N
 * (records from before schema 3 were numbered anew, in their order). */
static int count_commands(const struct store_command *c, void *ud) {
        uint64_t *max = ud;
        uint64_t n;
        if (c->seq > *max)
                *max = c->seq;
        if (c->command_id && sscanf(c->command_id, "c-%" SCNu64, &n) == 1 && n > *max)
                *max = n;
        return 0;
}

/* ---- adoption ----------------------------------------------------------------------- */

/* 1 when pid is a sandbox init. The record's pid may have been reused by anything
 * since. */
static int is_sbx_init(pid_t pid) {
        return pidns_is_sbx_init(pid) == 1;
}

/* Connects to the adoption socket of o's init. The socket, or -errno. */
static int connect_init(const struct orphan *o) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int dfd, fd, r;

        dfd = sandbox_adopt_path(o->workspace, sa.sun_path, sizeof(sa.sun_path));
        if (dfd < 0)
                return dfd;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        r = fd < 0 ? -errno : connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(dfd);
        if (r < 0 && fd >= 0)
                close(fd);
        return r < 0 ? r : fd;
}

/* What init's greeting told: its pid, the egress proxy's listener it carried
 * (Ready.proxy_listener; the caller's) or -1, and whether it answers MakeSocket (an
 * older init does not: Ready.sockets). */
struct greeting {
        pid_t pid;
        int proxy_fd;
        int sockets;
};

/* Reads init's greeting (Ready naming its host pid) from fd and pins that pid, which
 * must be o's init. The pidfd, or -errno; *ret filled (its proxy_fd -1 on failure). */
static int take_greeting(int fd, const struct orphan *o, struct greeting *ret) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        Sbx__Init__V1__FromInit *m = NULL;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int fds[SBX_INIT_MAX_FDS], pidfd = -1, r;
        size_t len = 0, nfds = 0;
        pid_t pid;

        r = poll(&pfd, 1, RECOVER_GREETING_TIMEOUT_MS) == 1
                    ? initmsg_recv(fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds)
                    : -ETIMEDOUT;
        ret->proxy_fd = -1;
        ret->sockets = 0;
        if (r > 0) {
                m = sbx__init__v1__from_init__unpack(NULL, len, buf);
                if (m && m->body_case == SBX__INIT__V1__FROM_INIT__BODY_READY &&
                    m->ready->has_proxy_listener && m->ready->proxy_listener && nfds == 1)
                        ret->proxy_fd = fds[--nfds];
                if (m && m->body_case == SBX__INIT__V1__FROM_INIT__BODY_READY)
                        ret->sockets = m->ready->has_sockets && m->ready->sockets;
                while (nfds > 0)
                        close(fds[--nfds]);
        }
        if (!m || m->body_case != SBX__INIT__V1__FROM_INIT__BODY_READY || !m->ready->ok ||
            !m->ready->has_init_host_pid) {
                r = r < 0 ? r : -EPROTO;
        } else {
                pid = m->ready->init_host_pid;
                /* Checked, pinned, and checked again: the pid cannot change in between. */
                if (pid != o->init_pid || !is_sbx_init(pid) ||
                    (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0 || !is_sbx_init(pid)) {
                        r = -ESRCH;
                } else {
                        ret->pid = pid;
                        r = pidfd;
                        pidfd = -1;
                }
        }
        if (pidfd >= 0)
                close(pidfd);
        if (r < 0 && ret->proxy_fd >= 0) {
                close(ret->proxy_fd);
                ret->proxy_fd = -1;
        }
        if (m)
                sbx__init__v1__from_init__free_unpacked(m, NULL);
        return r;
}

/* A sandbox made from an image (sbimage.h): its image held and its ids taken again. 0,
 * or -1 (logged; sb discarded). */
static int adopt_image(struct sbxd *d, struct sandbox *sb, struct orphan *o) {
        char err[512], *dir = strdup(sb->workspace), *slash = dir ? strrchr(dir, '/') : NULL;
        int r = slash ? 0 : -ENOMEM;

        if (slash) {
                *slash = '\0';
                r = sbimage_adopt(d, sb->spec->image, sb->spec->image_digest, o->run_uid, dir,
                                  &sb->image, err, sizeof(err));
        } else {
                snprintf(err, sizeof(err), "daemon out of memory");
        }
        free(dir);
        if (r < 0) {
                log_err("sbx=%s: cannot adopt it: %s", sb->id, err);
                sandbox_discard(sb);
                return -1;
        }
        {
                uid_t uid = sbimage_host_id(sb->image, sb->image->uid);
                gid_t gid = sbimage_host_id(sb->image, sb->image->gid);
                sandbox_set_run_ids(sb, uid, gid);
        }
        return 0;
}

/* The sandbox object for o, in the table: its record's owner, deadline, workspace, uid
 * and cgroup name, its commands numbered after the recorded ones. NULL when out of
 * memory. */
static struct sandbox *revive(struct sbxd *d, struct orphan *o) {
        struct sandbox *sb = sandbox_alloc(d, o->id, o->spec, o->spec_len, o->owner, o->created_ms);
        struct uidslots *slots = sbxtab_uidslots(d->sandboxes);
        if (!sb)
                return NULL;
        sb->owner_gid = etcpasswd_gid(o->owner);
        sb->deadline_ms = o->deadline_ms;
        free(sb->workspace);
        sb->workspace = o->workspace;
        o->workspace = NULL;
        if (sb->spec->image && sb->spec->image[0]) {
                if (adopt_image(d, sb, o) < 0)
                        return NULL;
        } else if (d->features.rootless) {
                sandbox_set_run_ids(sb, 0, 0);
        } else if (uidslot_slot_of(slots, o->run_uid) >= 0) {
                sb->uid_slot = uidslot_slot_of(slots, o->run_uid);
                uidslot_take(slots, (unsigned)sb->uid_slot);
                sandbox_set_run_ids(sb, o->run_uid, o->run_uid);
        }
        if (o->cgroup_path)
                snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", o->cgroup_path);
        /* Its commands go on numbering after the recorded ones; should the records not
         * be readable now, a command whose number is taken loses its record (logged). */
        if (store_history(d->store, sb->id, 0, 0, count_commands, &sb->next_command) < 0)
                log_err("sbx=%s: cannot read its command records (%s); numbering goes on "
                        "from c-%llu",
                        sb->id, store_last_error(d->store),
                        (unsigned long long)sb->next_command + 1);
        sb->commands_run = sb->next_command;
        sbxtab_adopt(d->sandboxes, sb);
        return sb;
}

/* Thaws group name (nothing to do for a group not frozen). */
static void thaw_group(struct sbxd *d, const char *name) {
        struct cgroup *g = NULL;

        if (d->cgroups->version == CGROUP_NONE || cgroup_attach(d->cgroups, name, &g) < 0)
                return;
        (void)cgroup_thaw(g);
        cgroup_forget(g);
}

/* A daemon killed while a snapshot held o frozen (snapshot.h) left it so: its init
 * would never answer. Thawed first. */
static void thaw_orphan(struct sbxd *d, const struct orphan *o) {
        thaw_group(d, o->cgroup_path ? o->cgroup_path : o->id);
}

/* Connects to the adoption socket of o's init and takes the sandbox over. Returns 0
 * when adopted, -errno when it cannot be (the caller then declares it lost). */
static int adopt_one(struct sbxd *d, struct orphan *o) {
        struct greeting g = {.pid = 0, .proxy_fd = -1, .sockets = 0};
        struct sandbox *sb;
        int fd, pidfd;

        if (!d->cfg->adopt_grace_ms || !o->workspace || o->init_pid <= 0 ||
            strcmp(o->state, names_state(SBX__V1__SANDBOX_STATE__READY)) != 0)
                return -ENOTSUP;
        thaw_orphan(d, o);
        fd = connect_init(o);
        if (fd < 0)
                return fd;
        pidfd = take_greeting(fd, o, &g);
        if (pidfd < 0 || !(sb = revive(d, o))) {
                if (pidfd >= 0)
                        close(pidfd);
                if (g.proxy_fd >= 0)
                        close(g.proxy_fd);
                close(fd);
                return pidfd < 0 ? pidfd : -ENOMEM;
        }
        sandbox_adopted(sb, fd, g.pid, pidfd, g.proxy_fd, g.sockets);
        return 0;
}

/* ---- what is lost ------------------------------------------------------------------- */

/* Kills the init of a record that could not be adopted, if it still runs (verified). */
static void kill_orphan_init(pid_t pid) {
        int pidfd;
        if (pid <= 0 || !is_sbx_init(pid))
                return;
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return;
        if (is_sbx_init(pid))
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        close(pidfd);
}

/* o could not be adopted (why: -errno): its init, cgroup and workspace go, its record
 * says lost. n: its commands just marked unknown. */
static void declare_lost(struct sbxd *d, const struct orphan *o, int why, int n, int64_t now) {
        kill_orphan_init(o->init_pid);
        if (d->cgroups->version != CGROUP_NONE)
                cgroup_remove_tree(d->cgroups, o->cgroup_path ? o->cgroup_path : o->id);
        if (o->workspace && strstr(o->workspace, "/sandboxes/"))
                trash_sandbox_dir_now(d, o->id, o->workspace, -1, o->keep);
        store_sandbox_set_state(d->store, o->id, names_state(SBX__V1__SANDBOX_STATE__LOST), now,
                                "lost: the daemon stopped while it ran");
        log_notice("sbx=%s: lost in a daemon restart (%s); %d running commands marked "
                   "unknown, leftovers removed",
                   o->id, strerror(-why), n < 0 ? 0 : n);
}

struct cgroup_name {
        const char *name;
};

static int uses_cgroup(struct sandbox *sb, void *ud) {
        const struct cgroup_name *n = ud;
        return strcmp(sb->cg_name, n->name) == 0;
}

/* A group under the base that no sandbox of ours uses: a crash left it (between a
 * sandbox's recorded end and its cgroup's removal one loop turn later, say). */
static int remove_if_stale(const char *name, void *ud) {
        struct sbxd *d = ud;
        struct cgroup_name n = {name};
        int r;

        if (sbxtab_foreach(d->sandboxes, uses_cgroup, &n))
                return 0;
        /* Frozen, its processes would never die of the SIGKILL (v1's freezer): one a
         * restore replaced, ending while a snapshot held it frozen, say. */
        thaw_group(d, name);
        r = cgroup_remove_tree(d->cgroups, name);
        if (r < 0)
                log_warning("cannot remove the stale cgroup %s: %s", name, strerror(-r));
        else
                log_notice("removed the stale cgroup %s", name);
        return 0;
}

int recover_sandboxes(struct sbxd *d) {
        struct orphan_list l = {0};
        int64_t now = sbxd_now_unix_ms();
        size_t i;
        int r, adopted = 0;

        remove_unrecorded_dirs(d);
        r = uidslot_load(sbxtab_uidslots(d->sandboxes), d->store);
        if (r < 0)
                return r;
        r = store_sandbox_foreach(d->store, 1, 0, 0, 0, collect_orphan, &l);
        for (i = 0; i < l.n; i++) {
                struct orphan *x = &l.v[i];
                int n, a;
                if (!x->id || !x->state || !x->spec)
                        continue;
                /* Commands of the previous daemon are unknown either way: their output
                 * pipes ended with it. */
                n = store_commands_mark_unknown(d->store, x->id, now);
                /* Its streams went with the previous daemon's connections. */
                (void)store_forwards_close_open(d->store, x->id, now, "the daemon restarted");
                a = adopt_one(d, x);
                if (a < 0) {
                        declare_lost(d, x, a, n, now);
                        continue;
                }
                adopted++;
                log_notice("sbx=%s: adopted after a daemon restart (init pid %d); %d commands "
                           "of the previous daemon marked unknown",
                           x->id, (int)x->init_pid, n < 0 ? 0 : n);
        }
        orphans_free(&l);
        /* Only the adopted sandboxes' groups are in use now. */
        if (d->cgroups->version != CGROUP_NONE)
                (void)cgroup_foreach_child(d->cgroups, remove_if_stale, d);
        return r < 0 ? r : adopted;
}
