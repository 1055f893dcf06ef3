/* clock.c: the daemon's wall clock (sbxd.h), for records and deadlines. A leaf: every
 * module may call it. */
#include <time.h>

#include "sbxd.h"

int64_t sbxd_now_unix_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
