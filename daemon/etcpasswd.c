/* etcpasswd.c: /etc/passwd read as a file; see etcpasswd.h. */
#include "etcpasswd.h"

#include <stdlib.h>
#include <string.h>

int etcpasswd_next(FILE *f, char **line, size_t *cap, struct passwd_entry *e) {
        while (f && getline(line, cap, f) > 0) {
                /* name:passwd:uid:gid:gecos:home:shell */
                char *field[7], *p = *line, *end;
                unsigned long u, g;
                int i;
                for (i = 0; i < 7 && p; i++) {
                        field[i] = p;
                        p = strchr(p, ':');
                        if (p)
                                *p++ = '\0';
                }
                if (i < 6)
                        continue;
                u = strtoul(field[2], &end, 10);
                if (!field[2][0] || *end || u >= (uid_t)-1)
                        continue;
                g = strtoul(field[3], &end, 10);
                if (!field[3][0] || *end || g >= (gid_t)-1)
                        continue;
                e->uid = (uid_t)u;
                e->gid = (gid_t)g;
                e->home = field[5];
                return 1;
        }
        return 0;
}

gid_t etcpasswd_gid(uid_t uid) {
        FILE *f = fopen("/etc/passwd", "re");
        struct passwd_entry e;
        char *line = NULL;
        size_t cap = 0;
        gid_t gid = (gid_t)-1;

        while (gid == (gid_t)-1 && etcpasswd_next(f, &line, &cap, &e))
                if (e.uid == uid)
                        gid = e.gid;
        free(line);
        if (f)
                fclose(f);
        return gid;
}
