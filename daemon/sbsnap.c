/* sbsnap.c: what a snapshot takes from its sandbox; see sbsnap.h. */
#include "sbsnap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "disk.h"
#include "images.h"
#include "pbjson.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* The freezer's files of sb's cgroup (none without one). */
static int freezer_of(const struct sandbox *sb, struct snapshot_freezer *f) {
        const struct cgroup *g = sb->cg;

        if (g && g->v2_path) {
                f->v2 = 1;
                if (asprintf(&f->control, "%s/cgroup.freeze", g->v2_path) < 0)
                        f->control = NULL;
                if (asprintf(&f->events, "%s/cgroup.events", g->v2_path) < 0)
                        f->events = NULL;
                return f->control && f->events ? 0 : -ENOMEM;
        }
        if (g && g->path[CG_FREEZER] &&
            asprintf(&f->control, "%s/freezer.state", g->path[CG_FREEZER]) < 0)
                return -ENOMEM;
        return 0;
}

/* The ids of sb's files on the host as the image's: its block (root mode), else the
 * daemon's user as 0 and its subordinate ids as 1 .. N; the kind of its upper. */
static void maps_of(const struct sandbox *sb, struct snapshot_job *j) {
        const struct sbimage *im = sb->image;

        /* A root sbxd's overlay keeps its markers in trusted.* xattrs, a rootless one's
         * (mounted with userxattr, init/image.c) in user.* ones. */
        j->upper_kind = im->block >= 0 ? LAYERWRITE_UPPER : LAYERWRITE_UPPER_USERXATTR;
        if (im->block >= 0) {
                j->uids.r[0] = (struct layerwrite_range){im->uid_base, 0, SBX_IMAGE_IDS};
                j->gids.r[0] = j->uids.r[0];
                j->uids.n = j->gids.n = 1;
                return;
        }
        j->uids.r[0] = (struct layerwrite_range){(uint32_t)sb->d->euid, 0, 1};
        j->gids.r[0] = (struct layerwrite_range){(uint32_t)sb->d->egid, 0, 1};
        j->uids.n = j->gids.n = 1;
        if (im->subids) {
                j->uids.r[1] = (struct layerwrite_range){im->subuid, 1, im->subids};
                j->gids.r[1] = (struct layerwrite_range){im->subgid, 1, im->subids};
                j->uids.n = j->gids.n = 2;
        }
}

/* Its writable root's upper directory and its workspace, opened: on the host, or in
 * its disk image's filesystem. */
static int open_dirs(const struct sandbox *sb, struct snapshot_job *j, char *err, size_t errlen) {
        const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        char upper[SBX_PATH_MAX_BYTES + 16];

        if (sb->disk_fd >= 0) {
                j->upper_fd = openat(sb->disk_fd, SBIMAGE_DISK_ROOT "/upper", flags);
                j->ws_fd = openat(sb->disk_fd, SBIMAGE_DISK_WORKSPACE, flags);
        } else {
                snprintf(upper, sizeof(upper), "%s/upper", sb->image->root_dir);
                j->upper_fd = open(upper, flags);
                j->ws_fd = open(sb->workspace, flags);
        }
        if (j->upper_fd < 0 || j->ws_fd < 0) {
                snprintf(err, errlen, "cannot open sandbox '%s''s files: %s", sb->id,
                         strerror(errno));
                return -errno;
        }
        return 0;
}

/* The refs of the snapshot named name (NULL: the default) for the owner and caller. */
static int refs_of(const struct sandbox *sb, uid_t caller, const char *name,
                   struct snapshot_job *j, char *err, size_t errlen) {
        char def[SBX_ID_MAX_BYTES + 48], ref[SBX_PATH_MAX_BYTES + 32];
        const uid_t who[2] = {sb->owner_uid, caller};
        struct images_source src;
        enum images_kind kind;
        unsigned i;
        int r, digest;

        if (!name || !name[0]) {
                snprintf(def, sizeof(def), "localhost/%s:%lld", sb->id,
                         (long long)sbxd_now_unix_ms());
                name = def;
        }
        r = images_source_parse(name, &src, err, errlen);
        if (r < 0)
                return r;
        kind = src.kind;
        digest = src.ref.digest[0] != '\0';
        images_source_clear(&src);
        if (kind != IMAGES_REGISTRY || digest) {
                snprintf(err, errlen,
                         "snapshot name '%.200s': a reference (NAME[:TAG]), not a digest or a "
                         "local source",
                         name);
                return -EINVAL;
        }
        for (i = 0; i < 2 && (i == 0 || caller != sb->owner_uid); i++) {
                r = images_ref(who[i], name, ref, sizeof(ref), err, errlen);
                if (r == 0 && !(j->refs[j->n_refs] = strdup(ref))) {
                        snprintf(err, errlen, "daemon out of memory");
                        r = -ENOMEM;
                }
                if (r < 0)
                        return r;
                j->n_refs++;
        }
        return 0;
}

/* sb's effective policy as compact JSON (malloc()ed), or NULL when out of memory. */
static char *policy_json(const struct sandbox *sb) {
        json_t *o = sb->spec->policy ? pbjson_of(&sb->spec->policy->base) : json_object();
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

        json_decref(o);
        return s;
}

int sbsnap_begin(struct sandbox *sb, uid_t caller, const char *name, struct snapshot_job *j,
                 char *err, size_t errlen) {
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        int r;

        /* One at a time: a second one's capture would go on after the first thawed the
         * processes (its files no longer of one instant). */
        if (sb->dir_holds) {
                snprintf(err, errlen,
                         "a snapshot of sandbox '%s' is being taken now; retry when it is done",
                         sb->id);
                return -EBUSY;
        }
        if (!sb->image) {
                snprintf(err, errlen,
                         "a snapshot of a sandbox of the host's root (sandbox '%s'): "
                         "only one made from an image (sbx create --image) has a root to "
                         "capture",
                         sb->id);
                return -ENOSYS;
        }
        if (l && l->has_disk_bytes && sb->d->features.disk_mech == DISK_MECH_TMPFS) {
                snprintf(err, errlen,
                         "a snapshot of sandbox '%s', whose disk limit is a tmpfs "
                         "in its own mount namespace (sbxd --disk-via tmpfs, or rootless): its "
                         "files are out of the daemon's reach",
                         sb->id);
                return -ENOSYS;
        }
        r = freezer_of(sb, &j->freezer);
        /* Without a cgroup: its PID namespace's processes are stopped by signals. */
        if (r == 0 && !j->freezer.control) {
                j->freezer.pidns_dev = sb->pidns_dev;
                j->freezer.pidns_ino = sb->pidns_ino;
                j->freezer.init_pid = sb->view.init_pid;
        }
        if (r == 0 && !j->freezer.control && (!sb->pidns_ino || sb->view.init_pid <= 0)) {
                snprintf(err, errlen,
                         "a snapshot of sandbox '%s' without a cgroup, whose PID "
                         "namespace is not known: its processes cannot be held still while its "
                         "files are read",
                         sb->id);
                return -ENOSYS;
        }
        if (r < 0) {
                snprintf(err, errlen, "daemon out of memory");
                return r;
        }
        r = refs_of(sb, caller, name, j, err, errlen);
        if (r < 0)
                return r;
        snprintf(j->parent, sizeof(j->parent), "%s", sb->image->digest);
        snprintf(j->owner_prefix, sizeof(j->owner_prefix), "%u/", (unsigned)sb->owner_uid);
        if (!(j->sandbox_id = strdup(sb->id)) || !(j->policy = policy_json(sb))) {
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        maps_of(sb, j);
        r = open_dirs(sb, j, err, errlen);
        if (r == 0)
                sandbox_dir_hold(sb);
        return r;
}

void sbsnap_end(struct sandbox *sb) {
        sandbox_dir_release(sb);
}
