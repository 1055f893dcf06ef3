/* pathcheck.c: the directory that keeps this user off a path; see pathcheck.h. */
#include "pathcheck.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int pathcheck_unsearchable(const char *path, char *dir, size_t len) {
        size_t i, n = strlen(path);

        for (i = 1; i < n && i < len; i++) {
                if (path[i] != '/')
                        continue;
                memcpy(dir, path, i);
                dir[i] = '\0';
                if (access(dir, X_OK) < 0 && errno == EACCES)
                        return 1;
        }
        return 0;
}
