/* offload.c: bounded work off the event loop; see offload.h.
 *
 * Owns struct offload (d->offload): the uids with jobs, each with its queue of waiting
 * jobs, in the order they take turns (the one served least recently first); the list
 * of running jobs; and the timer that asks every job whether it is still wanted. Made
 * at the first submission and freed (after its timer's close) once the last job's done
 * callback has returned, so that an idle daemon holds nothing here. Jobs run on
 * libuv's thread pool (uv_queue_work): the pool's threads are made by libuv when first
 * needed and shared with the rest of the daemon, which is why the bound here is on
 * jobs handed to it, not on threads of our own. */
#include "offload.h"

#include <errno.h>
#include <stdlib.h>

#include "sbx_limits.h"
#include "sbxd.h"

/* Jobs in a list, linked through their next and prev. */
struct job_list {
        struct offload_job *head, *tail;
};

/* One uid with jobs. */
struct offload_user {
        uid_t uid;
        unsigned running, waiting;
        struct job_list queue;            /* its waiting jobs, oldest first */
        struct offload_user *next, *prev; /* o's users, the next to take a turn first */
};

struct offload {
        struct sbxd *d;
        uv_timer_t check; /* asks each job's wanted callback */
        unsigned running, waiting;
        unsigned jobs; /* submitted, done not yet returned */
        int in_done;   /* a done callback is running: not freed under it */
        struct offload_user *users, *users_tail;
        struct job_list run_list;
};

/* ---- lists ----------------------------------------------------------------------------- */

static void users_unlink(struct offload *o, struct offload_user *u) {
        if (u->prev)
                u->prev->next = u->next;
        else
                o->users = u->next;
        if (u->next)
                u->next->prev = u->prev;
        else
                o->users_tail = u->prev;
        u->next = u->prev = NULL;
}

static void users_append(struct offload *o, struct offload_user *u) {
        u->prev = o->users_tail;
        u->next = NULL;
        if (o->users_tail)
                o->users_tail->next = u;
        else
                o->users = u;
        o->users_tail = u;
}

/* A uid new to the queue goes first: it was served least recently of all. */
static void users_prepend(struct offload *o, struct offload_user *u) {
        u->prev = NULL;
        u->next = o->users;
        if (o->users)
                o->users->prev = u;
        else
                o->users_tail = u;
        o->users = u;
}

static struct offload_user *user_find(struct offload *o, uid_t uid) {
        struct offload_user *u;

        for (u = o->users; u; u = u->next)
                if (u->uid == uid)
                        return u;
        return NULL;
}

/* Drops u once it has no job left. */
static void user_maybe_free(struct offload *o, struct offload_user *u) {
        if (u->running || u->waiting)
                return;
        users_unlink(o, u);
        free(u);
}

static void jobs_unlink(struct job_list *l, struct offload_job *job) {
        if (job->prev)
                job->prev->next = job->next;
        else
                l->head = job->next;
        if (job->next)
                job->next->prev = job->prev;
        else
                l->tail = job->prev;
        job->next = job->prev = NULL;
}

static void jobs_append(struct job_list *l, struct offload_job *job) {
        job->prev = l->tail;
        job->next = NULL;
        if (l->tail)
                l->tail->next = job;
        else
                l->head = job;
        l->tail = job;
}

/* Takes job out of its user's queue. */
static void queue_unlink(struct offload_job *job) {
        jobs_unlink(&job->user->queue, job);
        job->user->waiting--;
        job->o->waiting--;
}

/* ---- running --------------------------------------------------------------------------- */

static void on_work(uv_work_t *w) {
        struct offload_job *job = w->data;
        job->work_cb(job);
}

static void on_closed(uv_handle_t *h) {
        free(h->data);
}

/* Frees o when nothing is left in it (no job, no done callback running). */
static void maybe_free(struct offload *o) {
        if (o->jobs || o->in_done)
                return;
        o->d->offload = NULL;
        uv_timer_stop(&o->check);
        o->check.data = o;
        uv_close((uv_handle_t *)&o->check, on_closed);
}

static void pump(struct offload *o);

static void on_after_work(uv_work_t *w, int status) {
        struct offload_job *job = w->data;
        struct offload *o = job->o;
        struct offload_user *u = job->user;

        (void)status; /* UV_ECANCELED only after uv_cancel, which is never called here */
        jobs_unlink(&o->run_list, job);
        job->running = 0;
        job->o = NULL;
        job->user = NULL;
        o->running--;
        u->running--;
        user_maybe_free(o, u);
        o->jobs--;
        pump(o);
        o->in_done++;
        job->done_cb(job);
        o->in_done--;
        maybe_free(o);
}

/* Hands job (out of every queue) to the thread pool. */
static void start(struct offload_job *job) {
        struct offload *o = job->o;

        job->running = 1;
        o->running++;
        job->user->running++;
        jobs_append(&o->run_list, job);
        job->work.data = job;
        /* libuv refuses only a NULL work callback (UV_EINVAL): this cannot fail. */
        (void)uv_queue_work(o->d->loop, &job->work, on_work, on_after_work);
}

/* Starts waiting jobs while the bounds allow, the uids taking turns: the first in line
 * that may run one more is served and goes to the end of the line. */
static void pump(struct offload *o) {
        while (o->running < SBX_OFFLOAD_MAX_RUNNING) {
                struct offload_user *u;
                struct offload_job *job;

                for (u = o->users; u; u = u->next)
                        if (u->waiting && u->running < SBX_OFFLOAD_MAX_RUNNING_PER_UID)
                                break;
                if (!u)
                        return;
                job = u->queue.head;
                queue_unlink(job);
                users_unlink(o, u);
                users_append(o, u);
                start(job);
        }
}

/* Every SBX_OFFLOAD_CHECK_MS: each job whose reason to run has gone is cancelled. */
static void on_check(uv_timer_t *t) {
        struct offload *o = t->data;
        struct offload_user *u, *un;
        struct offload_job *job, *next;

        for (u = o->users; u; u = un) {
                un = u->next;
                for (job = u->queue.head; job; job = next) {
                        next = job->next; /* a cancel moves job to the running list */
                        if (job->wanted_cb && !job->wanted_cb(job))
                                offload_cancel(job);
                }
        }
        for (job = o->run_list.head; job; job = job->next)
                if (!offload_cancelled(job) && job->wanted_cb && !job->wanted_cb(job))
                        offload_cancel(job);
}

static struct offload *offload_get(struct sbxd *d) {
        struct offload *o = d->offload;

        if (o)
                return o;
        o = calloc(1, sizeof(*o));
        if (!o)
                return NULL;
        o->d = d;
        /* Timer initialisation cannot fail. Unreferenced: a job waits only behind a
         * running one, whose request keeps the loop alive. */
        uv_timer_init(d->loop, &o->check);
        o->check.data = o;
        uv_unref((uv_handle_t *)&o->check);
        uv_timer_start(&o->check, on_check, SBX_OFFLOAD_CHECK_MS, SBX_OFFLOAD_CHECK_MS);
        d->offload = o;
        return o;
}

/* ---- the interface --------------------------------------------------------------------- */

int offload_submit(struct sbxd *d, struct offload_job *job, uid_t uid, offload_work_cb work,
                   offload_done_cb done, offload_wanted_cb wanted) {
        struct offload *o = offload_get(d);
        struct offload_user *u;

        if (!o)
                return -ENOMEM;
        u = user_find(o, uid);
        if (!u) {
                u = calloc(1, sizeof(*u));
                if (!u) {
                        maybe_free(o);
                        return -ENOMEM;
                }
                u->uid = uid;
                users_prepend(o, u);
        }
        if (u->waiting >= SBX_OFFLOAD_MAX_QUEUED_PER_UID) {
                user_maybe_free(o, u);
                maybe_free(o);
                return -EAGAIN;
        }
        job->o = o;
        job->user = u;
        job->work_cb = work;
        job->done_cb = done;
        job->wanted_cb = wanted;
        atomic_store(&job->cancelled, 0);
        job->running = 0;
        jobs_append(&u->queue, job);
        u->waiting++;
        o->waiting++;
        o->jobs++;
        pump(o);
        return 0;
}

void offload_cancel(struct offload_job *job) {
        if (atomic_exchange(&job->cancelled, 1))
                return;
        if (!job->running) {
                /* Its work only lets go of what it holds: it goes at once. */
                queue_unlink(job);
                start(job);
        }
}

int offload_cancelled(struct offload_job *job) {
        return atomic_load_explicit(&job->cancelled, memory_order_relaxed);
}

void offload_counts(const struct sbxd *d, uid_t uid, unsigned *ret_running, unsigned *ret_waiting,
                    unsigned *ret_uid_running, unsigned *ret_uid_waiting) {
        struct offload *o = d->offload;
        struct offload_user *u = o ? user_find(o, uid) : NULL;

        if (ret_running)
                *ret_running = o ? o->running : 0;
        if (ret_waiting)
                *ret_waiting = o ? o->waiting : 0;
        if (ret_uid_running)
                *ret_uid_running = u ? u->running : 0;
        if (ret_uid_waiting)
                *ret_uid_waiting = u ? u->waiting : 0;
}
