/* mountinfo.h: one line of /proc/PID/mountinfo, parsed.
 *
 * Shared by the daemon (hostpath.c: which mounts show its own directories) and the init
 * helper (mnt.c: remounts, cgroup hierarchies). No allocation, no logging; the fields
 * point into the line, unescaped in place. */
#ifndef SBX_MOUNTINFO_H
#define SBX_MOUNTINFO_H

/* "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue" */
struct mountinfo_line {
        unsigned major, minor; /* the filesystem's device */
        char *root;            /* the path within the filesystem that is the mount's root */
        char *point;           /* the mount point, relative to the reader's root */
        char *fstype;
        char *super_options;   /* the filesystem's own options ("rw,memory" for a cgroup) */
};

/* Parses line (modified: fields are cut and unescaped). 0, or -EINVAL for a line that
 * is not a mountinfo line. */
int mountinfo_parse(char *line, struct mountinfo_line *ret);

/* Undoes the octal escapes mountinfo writes for space, tab, newline and backslash. */
void mountinfo_unescape(char *s);

#endif
