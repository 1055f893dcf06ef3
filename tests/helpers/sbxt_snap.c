/* sbxt_snap.c: what a hostile sandbox does to its files before a snapshot, for
 * tests/it_snapshot_attacks.c. Built static (the test image holds busybox alone):
 *   sbxt_snap setx PATH NAME VALUE   lsetxattr (VALUE "cap": a v2 file capability
 *                                    of cap_sys_admin)
 *   sbxt_snap getx PATH NAME         the value's length, or the errno's name
 *   sbxt_snap whiteout PATH          mknod a character device 0:0 (overlayfs's whiteout)
 *   sbxt_snap links DIR N            N files in DIR, each with a second hard link
 * Prints "ok" (or what getx read) or "ERRNO" (EPERM, ...), one line; exits 0 when it
 * printed its line. */
#define _GNU_SOURCE /* the helpers are built without the project's CPPFLAGS */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

static int say(int r) {
        if (r == 0)
                puts("ok");
        else
                puts(strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
        return 0;
}

static int links(const char *dir, long n) {
        char a[4096], b[4096];
        long i;

        for (i = 0; i < n; i++) {
                int fd;
                snprintf(a, sizeof(a), "%s/f%ld", dir, i);
                snprintf(b, sizeof(b), "%s/g%ld", dir, i);
                fd = open(a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0)
                        return say(-1);
                close(fd);
                if (link(a, b) < 0)
                        return say(-1);
        }
        return say(0);
}

int main(int argc, char **argv) {
        /* struct vfs_cap_data, revision 2: cap_sys_admin (21) permitted, effective. */
        const unsigned char cap[20] = {0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x20, 0x00};
        char buf[256];
        ssize_t n;

        if (argc == 5 && strcmp(argv[1], "setx") == 0) {
                int is_cap = strcmp(argv[4], "cap") == 0;
                return say(lsetxattr(argv[2], argv[3], is_cap ? (const void *)cap : argv[4],
                                     is_cap ? sizeof(cap) : strlen(argv[4]), 0));
        }
        if (argc == 4 && strcmp(argv[1], "getx") == 0) {
                n = lgetxattr(argv[2], argv[3], buf, sizeof(buf));
                if (n < 0)
                        return say(-1);
                printf("%zd\n", n);
                return 0;
        }
        if (argc == 3 && strcmp(argv[1], "whiteout") == 0)
                return say(mknod(argv[2], S_IFCHR | 0600, makedev(0, 0)));
        if (argc == 4 && strcmp(argv[1], "links") == 0)
                return links(argv[2], atol(argv[3]));
        fprintf(stderr, "usage: sbxt_snap setx|getx|whiteout|links ...\n");
        return 2;
}
