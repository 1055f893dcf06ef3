/* sbxt_threads.c: a small threaded program for the sandbox tests. Starts N threads
 * (argv[1], default 8), each adding 1 to a shared counter 100000 times under a mutex
 * and recording its kernel thread id; joins them; prints "threads=N total=T distinct=D"
 * and exits 0 when the total is N * 100000 and every thread had its own id, 1
 * otherwise. Used by tests/it_isolation.c. */
#define _GNU_SOURCE /* the helpers are built without the project's CPPFLAGS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_THREADS 64
#define ROUNDS      100000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static long tids[MAX_THREADS];

static void *work(void *arg) {
        long idx = (long)arg, i;

        tids[idx] = syscall(SYS_gettid);
        for (i = 0; i < ROUNDS; i++) {
                pthread_mutex_lock(&lock);
                total++;
                pthread_mutex_unlock(&lock);
        }
        return NULL;
}

int main(int argc, char **argv) {
        pthread_t th[MAX_THREADS];
        long n = argc > 1 ? strtol(argv[1], NULL, 10) : 8, i, j, distinct = 0;

        if (n < 1 || n > MAX_THREADS)
                n = 8;
        for (i = 0; i < n; i++) {
                int r = pthread_create(&th[i], NULL, work, (void *)i);
                if (r != 0) {
                        fprintf(stderr, "pthread_create: error %d\n", r);
                        return 1;
                }
        }
        for (i = 0; i < n; i++)
                pthread_join(th[i], NULL);
        for (i = 0; i < n; i++) {
                int dup = 0;
                for (j = 0; j < i; j++)
                        if (tids[j] == tids[i])
                                dup = 1;
                if (!dup && tids[i] > 0)
                        distinct++;
        }
        printf("threads=%ld total=%ld distinct=%ld\n", n, total, distinct);
        return total == n * ROUNDS && distinct == n ? 0 : 1;
}
