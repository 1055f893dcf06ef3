/* sbimage.c: the image a sandbox is made from (sbimage.h). */
#include "sbimage.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "images.h"
#include "imagestore.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "uidrange.h"

/* The index of this daemon's uid range among the SBX_UID_RANGES ranges root daemons
 * pick from (reserved host-wide: uidrange.h), or -1 for a --uid-base elsewhere, whose
 * share of the image blocks another daemon's could be. */
static long range_index(const struct sbxd *d) {
        uint32_t base = uidrange_base(d->uids);

        if (base < SBX_UID_BASE || base - SBX_UID_BASE >= SBX_UID_RANGES * SBX_UID_COUNT ||
            (base - SBX_UID_BASE) % SBX_UID_COUNT)
                return -1;
        return (long)((base - SBX_UID_BASE) / SBX_UID_COUNT);
}

/* The first host id of block b of this daemon's: its range's share of the blocks. */
static uint32_t block_base(const struct sbxd *d, unsigned b) {
        uint32_t k = (uint32_t)range_index(d);

        return SBX_IMAGE_UID_BASE + (k * SBX_IMAGE_BLOCKS + b) * SBX_IMAGE_IDS;
}

/* -ENOSYS with err when this daemon has no share of the blocks (range_index). */
static int blocks_of_ours(const struct sbxd *d, char *err, size_t errlen) {
        if (range_index(d) >= 0)
                return 0;
        snprintf(err, errlen,
                 "sandboxes made from images under a root sbxd whose --uid-base "
                 "(%u) is none of sbxd's own ranges (from %u, %u apart): its share of the "
                 "image ids could be another sbxd's; leave --uid-base out",
                 (unsigned)uidrange_base(d->uids), SBX_UID_BASE, SBX_UID_COUNT);
        return -ENOSYS;
}

static int take_block(struct sbxd *d, struct sbimage *im, char *err, size_t errlen) {
        unsigned b;
        int r = blocks_of_ours(d, err, errlen);

        if (r < 0)
                return r;

        for (b = 0; b < SBX_IMAGE_BLOCKS; b++)
                if (!(d->image_blocks & (1ull << b))) {
                        d->image_blocks |= 1ull << b;
                        d->image_blocks_taken = 1;
                        im->block = (int)b;
                        im->uid_base = block_base(d, b);
                        return 0;
                }
        snprintf(err, errlen,
                 "sbxd already runs %u sandboxes made from images, the most a root sbxd "
                 "has ids for; terminate one first",
                 SBX_IMAGE_BLOCKS);
        return -EAGAIN;
}

uid_t sbimage_host_id(const struct sbimage *im, uint32_t id) {
        return im->block >= 0 ? im->uid_base + id : 0;
}

uint32_t sbimage_free_blocks(const struct sbxd *d) {
        if (d->features.rootless)
                return UINT32_MAX;
        return SBX_IMAGE_BLOCKS - (uint32_t)__builtin_popcountll(d->image_blocks);
}

/* Rootless: the subordinate ids the user has for ids 1 .. SBX_IMAGE_IDS - 1 at most,
 * when newuidmap and newgidmap can map them. */
static void take_subids(const struct sbxd *d, struct sbimage *im) {
        im->subids = hostfeat_image_subids(&d->features);
        im->subuid = d->features.subuid_start;
        im->subgid = d->features.subgid;
}

/* The most of an image's etc/passwd or etc/group read to find a name: they are read on
 * the daemon's loop (at creation, at each command with a user), and an image's file may
 * be as large as the image. */
#define SBIMAGE_ETC_MAX_BYTES (4u << 20)

/* The file etc/NAME of the topmost layer that has one, opened beneath that layer (its
 * symlinks resolved inside it, never out of it). -ENOENT when none has, -EFBIG when it
 * is larger than SBIMAGE_ETC_MAX_BYTES. */
static int open_etc(const struct sbimage *im, const char *name) {
        struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
        char rel[64];
        size_t i;

        snprintf(rel, sizeof(rel), "etc/%s", name);
        for (i = im->nlayers; i-- > 0;) {
                int dfd = open(im->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC), fd;
                struct stat st;
                if (dfd < 0)
                        return -errno;
                fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
                close(dfd);
                if (fd < 0 && errno == ENOENT)
                        continue;
                /* Something there that is no file to read (a whiteout device, a loop of
                 * symlinks): this layer removed it. */
                if (fd < 0)
                        return errno == ENOMEM ? -ENOMEM : -ENOENT;
                /* A whiteout (a 0/0 device) or anything but a file: removed there. */
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(fd);
                        return -ENOENT;
                }
                if (st.st_size > (off_t)SBIMAGE_ETC_MAX_BYTES) {
                        close(fd);
                        return -EFBIG;
                }
                return fd;
        }
        return -ENOENT;
}

/* The ids of the line of the image's etc/passwd (group 0) or etc/group (group 1) whose
 * field key_field (0: the name, 2: the id) is key: its field 2, and for passwd field 3
 * (the gid) too. */
static int lookup(const struct sbimage *im, int group, int key_field, const char *key,
                  uint32_t *ret_id, uint32_t *ret_gid) {
        char line[1024];
        int fd = open_etc(im, group ? "group" : "passwd"), found = -ENOENT;
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;

        if (!f) {
                if (fd >= 0)
                        close(fd);
                return fd < 0 ? fd : -ENOMEM;
        }
        while (found == -ENOENT && fgets(line, sizeof(line), f)) {
                char *save = NULL, *fld[4] = {0};
                size_t n = 0;
                for (char *t = strtok_r(line, ":\n", &save); t && n < 4;
                     t = strtok_r(NULL, ":\n", &save))
                        fld[n++] = t;
                if (n < 3 || strcmp(fld[key_field], key) != 0)
                        continue;
                *ret_id = (uint32_t)strtoul(fld[2], NULL, 10);
                if (!group)
                        *ret_gid = n > 3 ? (uint32_t)strtoul(fld[3], NULL, 10) : *ret_id;
                found = 0;
        }
        fclose(f);
        return found;
}

/* 1 when user (an image's User) names root, or nobody. */
static int is_root(const char *user) {
        return !user || !user[0] || strcmp(user, "0") == 0 || strcmp(user, "root") == 0 ||
               strcmp(user, "0:0") == 0 || strcmp(user, "root:root") == 0;
}

/* Says (1) that a name was not looked for because the image's /etc/FILE is too large
 * (r == -EFBIG); else 0. */
static int too_big(char *err, size_t errlen, int r, const char *what, const char *name,
                   const char *file) {
        if (r != -EFBIG)
                return 0;
        snprintf(err, errlen, "%s '%s': the image's /etc/%s is larger than %u bytes, too large "
                              "to look names up in; give numeric ids", what, name, file,
                 SBIMAGE_ETC_MAX_BYTES);
        return 1;
}

/* A number of the namespace's ids, or -1. */
static long id_number(const char *s) {
        char *end;
        unsigned long v;

        if (!s[0] || s[0] < '0' || s[0] > '9')
                return -1;
        errno = 0;
        v = strtoul(s, &end, 10);
        return errno || *end || v >= SBX_IMAGE_IDS ? -1 : (long)v;
}

int sbimage_user(const struct sbimage *im, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                 char *err, size_t errlen) {
        char buf[256], *colon;
        uint32_t uid = 0, gid = 0;
        long n;
        int r = 0;

        if (!user || !user[0])
                user = "0";
        if (strlen(user) >= sizeof(buf)) {
                snprintf(err, errlen, "user '%.64s...' is too long", user);
                return -EINVAL;
        }
        snprintf(buf, sizeof(buf), "%s", user);
        colon = strchr(buf, ':');
        if (colon)
                *colon++ = '\0';
        n = id_number(buf);
        if (n >= 0) {
                /* A uid alone takes its passwd line's group, else 0, as docker does. */
                uid = (uint32_t)n;
                if (lookup(im, 0, 2, buf, &uid, &gid) < 0)
                        gid = 0;
        } else if ((r = lookup(im, 0, 0, buf, &uid, &gid)) < 0 && strcmp(buf, "root") == 0) {
                uid = gid = 0; /* root is 0 whether the image names it or not */
        } else if (r < 0) {
                if (!too_big(err, errlen, r, "user", buf, "passwd"))
                        snprintf(err, errlen, "user '%s' is not in the image's /etc/passwd; "
                                              "give UID[:GID] or a user it has", buf);
                return r == -ENOENT || r == -EFBIG ? -EINVAL : r;
        }
        if (colon && colon[0]) {
                n = id_number(colon);
                if (n >= 0) {
                        gid = (uint32_t)n;
                } else if ((r = lookup(im, 1, 0, colon, &gid, NULL)) < 0) {
                        if (!too_big(err, errlen, r, "group", colon, "group"))
                                snprintf(err, errlen,
                                         "group '%s' is not in the image's /etc/group", colon);
                        return r == -ENOENT || r == -EFBIG ? -EINVAL : r;
                }
        }
        if (im->block < 0 && !im->subids && (uid || gid)) {
                snprintf(err, errlen, "user '%s': this rootless sbxd's image sandboxes have one "
                                      "user, root (0); others need ranges of its user's in "
                                      "/etc/subuid and /etc/subgid, and uidmap installed", user);
                return -ENOSYS;
        }
        if (im->block < 0 && (uid > im->subids || gid > im->subids)) {
                snprintf(err, errlen, "user '%s': ids above %u are none of this rootless "
                                      "sbxd's (its user's subordinate ids)", user,
                         (unsigned)im->subids);
                return -EINVAL;
        }
        if (uid >= SBX_IMAGE_IDS || gid >= SBX_IMAGE_IDS) {
                snprintf(err, errlen, "user '%s': ids from 0 to %u only", user,
                         SBX_IMAGE_IDS - 1);
                return -EINVAL;
        }
        *ret_uid = uid;
        *ret_gid = gid;
        return 0;
}

/* The layers' paths and the config of img. */
static int load(struct sbxd *d, const struct imagestore_image *img, struct sbimage *im,
                char *err, size_t errlen) {
        char path[SBX_PATH_MAX_BYTES];
        size_t i;
        int r;

        im->layers = calloc(img->nlayers ? img->nlayers : 1, sizeof(*im->layers));
        if (!im->layers)
                return -ENOMEM;
        for (i = 0; i < img->nlayers; i++) {
                r = imagestore_layer_path(d->images, img->layers[i], path, sizeof(path));
                if (r < 0)
                        return r;
                im->layers[i] = strdup(path);
                if (!im->layers[i])
                        return -ENOMEM;
                im->nlayers++;
        }
        if (im->nlayers == 0 || im->nlayers > SBX_MAX_IMAGE_LAYERS) {
                snprintf(err, errlen, "image %s has %zu layers (1 to %u)", im->name,
                         im->nlayers, SBX_MAX_IMAGE_LAYERS);
                return -EINVAL;
        }
        r = imagestore_inspect(d->images, img->manifest, &im->config);
        if (r < 0)
                snprintf(err, errlen, "image %s: its config cannot be read (%s); pull it again",
                         im->name, strerror(-r));
        return r;
}

/* A new im for the image name whose record img is (held here), with its layers and
 * config. */
static int start(struct sbxd *d, const char *name, const struct imagestore_image *img,
                 struct sbimage **ret, char *err, size_t errlen) {
        struct sbimage *im = calloc(1, sizeof(*im));
        int r;

        if (!im || !(im->name = strdup(name))) {
                free(im);
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        im->block = -1;
        *ret = im;
        r = imagestore_hold(d->images, img->manifest);
        if (r < 0) {
                snprintf(err, errlen, "image %s went away meanwhile; pull it again", name);
                return r;
        }
        snprintf(im->digest, sizeof(im->digest), "%s", img->manifest);
        im->held = 1;
        r = load(d, img, im, err, errlen);
        if (r == -ENOMEM)
                snprintf(err, errlen, "daemon out of memory");
        return r;
}

/* The commands' default user of im: the image's User (rootless: root, the only id). */
static int default_user(struct sbxd *d, struct sbimage *im, char *err, size_t errlen) {
        if (d->features.rootless)
                take_subids(d, im);
        if (d->features.rootless && !im->subids) {
                im->user_dropped = !is_root(im->config.user);
                return 0;
        }
        return sbimage_user(im, im->config.user, &im->uid, &im->gid, err, errlen);
}

int sbimage_open(struct sbxd *d, const char *name, uid_t caller_uid, struct sbimage **ret,
                 char *err, size_t errlen) {
        struct imagestore_image img;
        struct sbimage *im = NULL;
        int r;

        memset(&img, 0, sizeof(img));
        r = images_find(d, caller_uid, name, &img, err, errlen);
        if (r < 0)
                return r;
        r = start(d, name, &img, &im, err, errlen);
        imagestore_image_free(&img);
        if (r == 0 && !d->features.rootless)
                r = take_block(d, im, err, errlen);
        if (r == 0)
                r = default_user(d, im, err, errlen);
        if (r < 0) {
                sbimage_close(d, im);
                return r;
        }
        *ret = im;
        return 0;
}

/* Root mode: the block of this daemon's whose ids hold host id id, taken. */
static int retake_block(struct sbxd *d, struct sbimage *im, uid_t id, char *err,
                        size_t errlen) {
        int r = blocks_of_ours(d, err, errlen);
        uint32_t first = r < 0 ? 0 : block_base(d, 0);
        unsigned b = id >= first ? (unsigned)((id - first) / SBX_IMAGE_IDS) : SBX_IMAGE_BLOCKS;

        if (r < 0)
                return r;

        if (b >= SBX_IMAGE_BLOCKS) {
                snprintf(err, errlen, "its ids (%u) are none of this sbxd's image blocks",
                         (unsigned)id);
                return -EINVAL;
        }
        if (d->image_blocks & (1ull << b)) {
                snprintf(err, errlen, "its ids' block %u is another sandbox's", b);
                return -EBUSY;
        }
        d->image_blocks |= 1ull << b;
        d->image_blocks_taken = 1;
        im->block = (int)b;
        im->uid_base = block_base(d, b);
        return 0;
}

int sbimage_adopt(struct sbxd *d, const char *name, const char *digest, uid_t run_uid,
                  const char *sandbox_dir, struct sbimage **ret, char *err, size_t errlen) {
        struct imagestore_image img;
        struct sbimage *im = NULL;
        int r;

        memset(&img, 0, sizeof(img));
        r = digest && d->images ? imagestore_find(d->images, digest, &img) : -ENOENT;
        if (r < 0) {
                snprintf(err, errlen, "its image %s (%s) is no longer in the store", name,
                         digest ? digest : "no digest recorded");
                return r;
        }
        r = start(d, name, &img, &im, err, errlen);
        imagestore_image_free(&img);
        if (r == 0 && !d->features.rootless)
                r = retake_block(d, im, run_uid, err, errlen);
        if (r == 0)
                r = default_user(d, im, err, errlen);
        if (r == 0 && sbimage_host_id(im, im->uid) != run_uid) {
                snprintf(err, errlen, "its image's user is no longer the one it runs as");
                r = -EINVAL;
        }
        if (r == 0) {
                char path[SBX_PATH_MAX_BYTES];
                snprintf(path, sizeof(path), "%s/root", sandbox_dir);
                if (!(im->root_dir = strdup(path)))
                        r = -ENOMEM;
        }
        if (r < 0) {
                sbimage_close(d, im);
                return r;
        }
        *ret = im;
        return 0;
}

void sbimage_release(struct sbxd *d, struct sbimage *im) {
        if (im && im->held && d->images)
                (void)imagestore_release(d->images, im->digest);
        if (im)
                im->held = 0;
}

struct sbimage *sbimage_close(struct sbxd *d, struct sbimage *im) {
        size_t i;

        if (!im)
                return NULL;
        sbimage_release(d, im);
        if (im->block >= 0)
                d->image_blocks &= ~(1ull << im->block);
        for (i = 0; i < im->nlayers; i++)
                free(im->layers[i]);
        free(im->layers);
        imageconfig_free(&im->config);
        free(im->root_dir);
        free(im->name);
        free(im);
        return NULL;
}

int sbimage_rename(struct sbimage *im, const char *name, const char *sandbox_dir) {
        char *n = strdup(name), *root = NULL;

        if (n && asprintf(&root, "%s/root", sandbox_dir) < 0)
                root = NULL;
        if (!n || !root) {
                free(n);
                return -ENOMEM;
        }
        free(im->name);
        free(im->root_dir);
        im->name = n;
        im->root_dir = root;
        return 0;
}

int sbimage_make_dirs(struct sbimage *im, struct sbxd *d, const char *sandbox_dir) {
        char path[SBX_PATH_MAX_BYTES];
        uid_t root = sbimage_host_id(im, 0);

        if (im->block < 0)
                root = d->euid;
        snprintf(path, sizeof(path), "%s/root", sandbox_dir);
        if (mkdir(path, 0700) < 0)
                return -errno;
        free(im->root_dir);
        im->root_dir = strdup(path);
        if (!im->root_dir)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s/root/work", sandbox_dir);
        if (mkdir(path, 0700) < 0)
                return -errno;
        /* The root directory of the view: the sandbox root's, as an image's / is. */
        snprintf(path, sizeof(path), "%s/root/upper", sandbox_dir);
        if (mkdir(path, 0755) < 0 || chown(path, root, im->block >= 0 ? root : d->egid) < 0)
                return -errno;
        return 0;
}

int sbimage_disk_dirs(const struct sbimage *im, int mount_fd, uid_t uid, gid_t gid) {
        uid_t root = sbimage_host_id(im, 0);

        if (mkdirat(mount_fd, SBIMAGE_DISK_WORKSPACE, 0755) < 0 ||
            fchownat(mount_fd, SBIMAGE_DISK_WORKSPACE, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            mkdirat(mount_fd, SBIMAGE_DISK_ROOT, 0700) < 0 ||
            mkdirat(mount_fd, SBIMAGE_DISK_ROOT "/upper", 0755) < 0 ||
            fchownat(mount_fd, SBIMAGE_DISK_ROOT "/upper", root, root, AT_SYMLINK_NOFOLLOW) < 0 ||
            mkdirat(mount_fd, SBIMAGE_DISK_ROOT "/work", 0700) < 0)
                return -errno;
        return 0;
}

void sbimage_fill_setup(const struct sbimage *im, Sbx__Init__V1__Setup *setup) {
        setup->n_image_layers = im->nlayers;
        setup->image_layers = im->layers;
        setup->image_upper = im->root_dir;
        if (im->block >= 0) {
                setup->has_image_uid_base = 1;
                setup->image_uid_base = im->uid_base;
        }
        if (im->setid_modes)
                setup->has_setid_modes = setup->setid_modes = 1;
        if (im->config.snapshot_workspace)
                setup->has_seed_workspace = setup->seed_workspace = 1;
        if (im->subids) {
                setup->has_outer_subuid = setup->has_outer_subgid = setup->has_image_subids = 1;
                setup->outer_subuid = im->subuid;
                setup->outer_subgid = im->subgid;
                setup->image_subids = im->subids;
        }
}
