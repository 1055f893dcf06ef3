/* mountinfo.c: parsing /proc/PID/mountinfo lines; see mountinfo.h. */
#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void mountinfo_unescape(char *s) {
        char *w = s;

        while (*s) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
                    s[3] >= '0' && s[3] <= '7') {
                        *w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
                        s += 4;
                } else {
                        *w++ = *s++;
                }
        }
        *w = '\0';
}

int mountinfo_parse(char *line, struct mountinfo_line *ret) {
        char *save = NULL, *f[5], *dash;
        int i;

        /* The optional fields end at " - "; the filesystem's part follows. */
        dash = strstr(line, " - ");
        if (!dash)
                return -EINVAL;
        *dash = '\0';
        for (i = 0; i < 5; i++) {
                f[i] = strtok_r(i ? NULL : line, " ", &save);
                if (!f[i])
                        return -EINVAL;
        }
        if (sscanf(f[2], "%u:%u", &ret->major, &ret->minor) != 2)
                return -EINVAL;
        save = NULL;
        ret->fstype = strtok_r(dash + 3, " \n", &save);
        (void)strtok_r(NULL, " \n", &save); /* the source */
        ret->super_options = strtok_r(NULL, " \n", &save);
        if (!ret->fstype || !ret->super_options)
                return -EINVAL;
        mountinfo_unescape(f[3]);
        mountinfo_unescape(f[4]);
        ret->root = f[3];
        ret->point = f[4];
        return 0;
}
