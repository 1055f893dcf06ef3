/* check_command.c: unit tests of a sandbox's commands (daemon/command.c) and the pure
 * modules they are built from: the outcome rules (outcome.c), the kept output tail
 * (outbuf.c), the per-command rlimits (rlimits.c), how limits are enforced
 * (enforce.c), the per-uid quota (quota.c) and sandbox ids (sbxid.c).
 *
 * No daemon process and no init helper: the checks of RunCommand run against a sandbox
 * object made in the test, and a whole command runs against a sandbox whose init
 * channel is a socketpair the test itself answers as init would (it reads Start, writes
 * the command's output into the pipe it was given, and reports Exited, StartFailed or
 * the reaped leader after a kill). Each of those tests ends the sandbox and proves the
 * loop closed cleanly: every handle closed, every command and the sandbox freed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cmdsched.h"
#include "command.h"
#include "config.h"
#include "enforce.h"
#include "initmsg.h"
#include "names.h"
#include "outbuf.h"
#include "outcome.h"
#include "quota.h"
#include "rlimits.h"
#include "sandbox_int.h"
#include "sbxd.h"
#include "sbxid.h"
#include "store.h"
#include "testutil.h"

/* ---- outcome ------------------------------------------------------------------------ */

static struct outcome classify(const struct outcome_facts *f) {
        struct outcome oc;
        outcome_classify(f, &oc);
        return oc;
}

static int exited_status(int code) {
        return (code & 0xff) << 8; /* as WEXITSTATUS reads it */
}

START_TEST(outcome_exit_codes) {
        struct outcome_facts f = {.exited = 1, .wait_status = exited_status(0)};
        struct outcome oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__EXITED);
        ck_assert(oc.has_exit_code);
        ck_assert_int_eq(oc.exit_code, 0);
        ck_assert(!oc.has_signal);
        ck_assert_uint_eq(oc.n_hits, 0);

        f.wait_status = exited_status(3);
        oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__EXITED);
        ck_assert_int_eq(oc.exit_code, 3);
}
END_TEST

START_TEST(outcome_signaled) {
        struct outcome_facts f = {.exited = 1, .wait_status = SIGSEGV};
        struct outcome oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__SIGNALED);
        ck_assert(oc.has_signal);
        ck_assert_int_eq(oc.signal, SIGSEGV);
        ck_assert(!oc.has_exit_code);
}
END_TEST

START_TEST(outcome_timeout_and_cancel) {
        struct outcome_facts f = {.exited = 1, .wait_status = SIGKILL, .kill = KILL_TIMEOUT};
        struct outcome oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__TIMED_OUT);
        ck_assert_int_eq(oc.signal, SIGKILL);
        ck_assert_uint_eq(oc.n_hits, 1);
        ck_assert_str_eq(oc.hits[0], "timeout");

        /* A command that exited by itself after the kill was sent still timed out. */
        f.wait_status = exited_status(0);
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__TIMED_OUT);

        f.kill = KILL_CANCEL;
        f.wait_status = SIGKILL;
        oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__CANCELLED);
        ck_assert_uint_eq(oc.n_hits, 0);
}
END_TEST

START_TEST(outcome_out_of_memory) {
        struct outcome_facts f = {.exited = 1, .wait_status = SIGKILL, .oom_killed = 1};
        struct outcome oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__OUT_OF_MEMORY);
        ck_assert_str_eq(oc.hits[0], "memory");

        /* A shell passes its child's SIGKILL on as 128+9. */
        f.wait_status = exited_status(128 + SIGKILL);
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__OUT_OF_MEMORY);

        /* An OOM kill elsewhere in the group does not make a clean exit OOM. */
        f.wait_status = exited_status(0);
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__EXITED);

        /* Our own kill wins over the OOM counter. */
        f.wait_status = SIGKILL;
        f.kill = KILL_TIMEOUT;
        oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__TIMED_OUT);
        ck_assert_str_eq(oc.hits[0], "timeout");
}
END_TEST

START_TEST(outcome_cpu_and_file_size) {
        struct outcome_facts f = {
                .exited = 1, .wait_status = SIGXCPU, .has_cpu_limit = 1, .cpu_limit = 1.0};
        struct outcome oc = classify(&f);
        ck_assert_int_eq(oc.outcome, SBX__V1__OUTCOME__SIGNALED);
        ck_assert_uint_eq(oc.n_hits, 1);
        ck_assert_str_eq(oc.hits[0], "cpu");

        /* The hard limit's SIGKILL, once the cpu time reached the limit. */
        f.wait_status = SIGKILL;
        f.cpu_seconds = 1.2;
        ck_assert_str_eq(classify(&f).hits[0], "cpu");
        f.cpu_seconds = 0.5;
        ck_assert_uint_eq(classify(&f).n_hits, 0);

        /* A shell's child killed by SIGXCPU. */
        f.wait_status = exited_status(128 + SIGXCPU);
        ck_assert_str_eq(classify(&f).hits[0], "cpu");

        /* Without the limit in the policy, SIGXCPU is only a signal. */
        f.has_cpu_limit = 0;
        f.wait_status = SIGXCPU;
        ck_assert_uint_eq(classify(&f).n_hits, 0);

        f = (struct outcome_facts){.exited = 1, .wait_status = SIGXFSZ, .has_file_size_limit = 1};
        ck_assert_str_eq(classify(&f).hits[0], "file_size");
        f.has_file_size_limit = 0;
        ck_assert_uint_eq(classify(&f).n_hits, 0);
}
END_TEST

START_TEST(outcome_without_exit) {
        struct outcome_facts f = {.start_failed = 1};
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__START_FAILED);

        f = (struct outcome_facts){.kill = KILL_DAEMON_LEFT};
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__UNKNOWN);

        f = (struct outcome_facts){.exited = 0};
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);

        /* Reaped, but the sandbox's end killed it. */
        f = (struct outcome_facts){.exited = 1, .wait_status = SIGKILL, .kill = KILL_SANDBOX_ENDED};
        ck_assert_int_eq(classify(&f).outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
}
END_TEST

START_TEST(outcome_hits_in_order) {
        struct outcome_facts f = {.exited = 1,
                                  .wait_status = SIGKILL,
                                  .kill = KILL_TIMEOUT,
                                  .forks_refused = 1,
                                  .output_truncated = 1};
        struct outcome oc = classify(&f);
        char text[128];

        ck_assert_uint_eq(oc.n_hits, 3);
        outcome_hits_text(&oc, text, sizeof(text));
        ck_assert_str_eq(text, "timeout,processes,output");

        /* Even a command that never started can have hit the process limit. */
        f = (struct outcome_facts){.start_failed = 1, .forks_refused = 1};
        oc = classify(&f);
        outcome_hits_text(&oc, text, sizeof(text));
        ck_assert_str_eq(text, "processes");

        f = (struct outcome_facts){.exited = 1};
        oc = classify(&f);
        outcome_hits_text(&oc, text, sizeof(text));
        ck_assert_str_eq(text, "");
}
END_TEST

/* Every value of an enum (but its UNSPECIFIED) has its lowercase wire name in names.c's
 * table, and the name reads back as the value: a value added to sbx.proto without a
 * name fails here. */
static void check_enum_names(const ProtobufCEnumDescriptor *desc, const char *(*name)(int),
                             int (*parse)(const char *)) {
        unsigned i;
        for (i = 0; i < desc->n_values; i++) {
                const ProtobufCEnumValue *v = &desc->values[i];
                char lower[64];
                size_t k;
                if (v->value == 0)
                        continue;
                for (k = 0; v->name[k] && k + 1 < sizeof(lower); k++)
                        lower[k] = (char)(v->name[k] >= 'A' && v->name[k] <= 'Z' ? v->name[k] + 32
                                                                                 : v->name[k]);
                lower[k] = '\0';
                ck_assert_msg(strcmp(name(v->value), lower) == 0, "%s: %s is named %s", desc->name,
                              v->name, name(v->value));
                ck_assert_int_eq(parse(lower), v->value);
        }
        ck_assert_str_eq(name(9999), "unknown");
        ck_assert_str_eq(name(-1), "unknown");
        ck_assert_int_eq(parse("no such name"), 0);
        ck_assert_int_eq(parse(NULL), 0);
}

static const char *outcome_n(int v) {
        return names_outcome((Sbx__V1__Outcome)v);
}
static int outcome_p(const char *s) {
        return (int)names_outcome_parse(s);
}
static const char *state_n(int v) {
        return names_state((Sbx__V1__SandboxState)v);
}
static int state_p(const char *s) {
        return (int)names_state_parse(s);
}

START_TEST(outcome_names) {
        check_enum_names(&sbx__v1__outcome__descriptor, outcome_n, outcome_p);
        check_enum_names(&sbx__v1__sandbox_state__descriptor, state_n, state_p);
        ck_assert_str_eq(names_outcome(SBX__V1__OUTCOME__TIMED_OUT), "timed_out");
        ck_assert_str_eq(names_state(SBX__V1__SANDBOX_STATE__READY), "ready");
}
END_TEST

/* ---- the kept output ---------------------------------------------------------------- */

static char *kept(const struct outbuf *o) {
        size_t len;
        uint8_t *b = outbuf_bytes(o, &len);
        char *s = malloc(len + 1);
        ck_assert_ptr_nonnull(b);
        memcpy(s, b, len);
        s[len] = '\0';
        free(b);
        return s;
}

START_TEST(outbuf_under_the_cap) {
        struct outbuf o;
        char *s;
        outbuf_init(&o, 16);
        outbuf_take(&o, (const uint8_t *)"hello ", 6);
        outbuf_take(&o, (const uint8_t *)"world", 5);
        s = kept(&o);
        ck_assert_str_eq(s, "hello world");
        ck_assert(!o.truncated);
        ck_assert_uint_eq(o.total, 11);
        free(s);
        outbuf_free(&o);
}
END_TEST

START_TEST(outbuf_keeps_the_tail) {
        struct outbuf o;
        char *s;
        outbuf_init(&o, 10);
        outbuf_take(&o, (const uint8_t *)"aaaa", 4);
        outbuf_take(&o, (const uint8_t *)"bbbb", 4);
        outbuf_take(&o, (const uint8_t *)"cccc", 4);
        s = kept(&o);
        ck_assert_str_eq(s, "aabbbbcccc");
        ck_assert(o.truncated);
        ck_assert_uint_eq(o.total, 12);
        ck_assert_uint_eq(o.cap, 10); /* never more than the cap */
        free(s);

        /* One chunk larger than the cap: its end. */
        outbuf_take(&o, (const uint8_t *)"0123456789abcdef", 16);
        s = kept(&o);
        ck_assert_str_eq(s, "6789abcdef");
        ck_assert_uint_eq(o.total, 28);
        free(s);
        outbuf_free(&o);
}
END_TEST

START_TEST(outbuf_ring_matches_a_reference) {
        /* Many writes of every size around the cap, against the last bytes written. */
        enum { CAP = 37, TOTAL = 20000 };
        static uint8_t all[TOTAL];
        struct outbuf o;
        size_t done = 0, n, len;
        uint8_t *b;
        unsigned seed = 1;

        outbuf_init(&o, CAP);
        while (done < TOTAL) {
                seed = seed * 1103515245u + 12345u;
                n = (seed >> 16) % (2 * CAP);
                if (n > TOTAL - done)
                        n = TOTAL - done;
                for (size_t i = 0; i < n; i++)
                        all[done + i] = (uint8_t)(done + i);
                outbuf_take(&o, all + done, n);
                done += n;
                b = outbuf_bytes(&o, &len);
                ck_assert_uint_eq(len, done < CAP ? done : CAP);
                ck_assert(memcmp(b, all + done - len, len) == 0);
                free(b);
        }
        ck_assert_uint_eq(o.total, TOTAL);
        ck_assert(o.truncated);
        outbuf_free(&o);
}
END_TEST

/* Two streams of one uid against a budget of 8 KiB: the second is cut to what it has
 * when the first holds most of it, keeps its tail in that, and says why; the other
 * uid's stream is not cut; freeing gives the memory back. Then everyone's bound. */
START_TEST(outbuf_budget_cuts_to_the_tail) {
        enum { UID = 1000, OTHER = 1001 };
        static uint8_t all[40000];
        struct quota *q = NULL;
        struct quota_bound b;
        struct outbuf a, c, other;
        size_t i, len;
        uint8_t *k;

        for (i = 0; i < sizeof(all); i++)
                all[i] = (uint8_t)(i * 7);
        ck_assert_int_eq(quota_new(&q), 0);
        b = (struct quota_bound){.q = q, .max = 8192, .max_total = 1u << 20};
        outbuf_init(&a, 1u << 20);
        outbuf_init(&c, 1u << 20);
        outbuf_init(&other, 1u << 20);
        outbuf_charge(&a, &b, UID);
        outbuf_charge(&c, &b, UID);
        outbuf_charge(&other, &b, OTHER);
        outbuf_take(&a, all, 4000); /* a 4096-byte buffer */
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, UID), 4096);
        ck_assert(!a.truncated && a.refused == 0);
        outbuf_take(&c, all, 100);
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, UID), 8192);
        /* c would double to 8192: refused, so it keeps the last 4096 bytes. */
        for (i = 100; i < 30000; i += 1000)
                outbuf_take(&c, all + i, 1000);
        ck_assert_int_eq(c.refused, -EDQUOT);
        ck_assert(c.truncated);
        ck_assert_uint_eq(c.cap, 4096);
        ck_assert_uint_eq(c.total, 30100);
        k = outbuf_bytes(&c, &len);
        ck_assert_uint_eq(len, 4096);
        ck_assert(memcmp(k, all + 30100 - 4096, len) == 0);
        free(k);
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, UID), 8192);
        /* Another uid has a budget of its own. */
        outbuf_take(&other, all, 8000);
        ck_assert(!other.truncated && other.refused == 0);
        ck_assert_uint_eq(quota_total(q, QUOTA_BUFFERED), 16384);
        outbuf_free(&a);
        outbuf_free(&c);
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, UID), 0);
        /* Everyone's bound: with 16 KiB in all, OTHER (8 KiB) leaves UID only 8 KiB even
         * with a budget of 1 MiB of its own. */
        b.max = 1u << 20;
        b.max_total = 16384;
        outbuf_init(&a, 1u << 20);
        outbuf_charge(&a, &b, UID);
        outbuf_take(&a, all, sizeof(all));
        ck_assert_int_eq(a.refused, -ENOSPC);
        ck_assert_uint_le(a.cap, 8192);
        k = outbuf_bytes(&a, &len);
        ck_assert_uint_eq(len, a.cap);
        ck_assert(memcmp(k, all + sizeof(all) - len, len) == 0);
        free(k);
        outbuf_free(&a);
        outbuf_free(&other);
        ck_assert_uint_eq(quota_total(q, QUOTA_BUFFERED), 0);
        quota_free(q);
}
END_TEST

/* A stream whose very first buffer is refused keeps nothing and counts everything. */
START_TEST(outbuf_budget_refuses_the_first_buffer) {
        struct quota *q = NULL;
        struct quota_bound b;
        struct outbuf o;
        size_t len;
        uint8_t *k;

        ck_assert_int_eq(quota_new(&q), 0);
        b = (struct quota_bound){.q = q, .max = 1000, .max_total = 1000};
        outbuf_init(&o, 65536);
        outbuf_charge(&o, &b, 7);
        outbuf_take(&o, (const uint8_t *)"hello", 5);
        outbuf_take(&o, (const uint8_t *)"world", 5);
        ck_assert_int_eq(o.refused, -EDQUOT);
        ck_assert(o.truncated);
        ck_assert_uint_eq(o.total, 10);
        k = outbuf_bytes(&o, &len);
        ck_assert_uint_eq(len, 0);
        free(k);
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, 7), 0);
        outbuf_free(&o);
        quota_free(q);
}
END_TEST

START_TEST(outbuf_zero_cap_and_counting) {
        struct outbuf o;
        size_t len;
        uint8_t *b;

        outbuf_init(&o, 0);
        outbuf_take(&o, (const uint8_t *)"", 0);
        ck_assert(!o.truncated);
        outbuf_take(&o, (const uint8_t *)"x", 1);
        ck_assert(o.truncated);
        b = outbuf_bytes(&o, &len);
        ck_assert_uint_eq(len, 0);
        free(b);

        /* Streamed bytes are counted, not kept: each chunk learns its offset. */
        outbuf_init(&o, 100);
        ck_assert_uint_eq(outbuf_count(&o, 5), 0);
        ck_assert_uint_eq(outbuf_count(&o, 7), 5);
        ck_assert_uint_eq(o.total, 12);
        ck_assert_uint_eq(o.len, 0);
        ck_assert(!o.truncated);
}
END_TEST

/* ---- rlimits ------------------------------------------------------------------------ */

static const Sbx__Init__V1__Rlimit *find_rlimit(const struct rlimits *l, int resource) {
        size_t i;
        for (i = 0; i < l->n; i++)
                if (l->v[i].resource == resource)
                        return &l->v[i];
        return NULL;
}

START_TEST(rlimits_bounded) {
        struct rlimits l;
        int i;
        rlimits_init(&l);
        for (i = 0; i < RLIMITS_MAX; i++)
                ck_assert_int_eq(rlimits_add(&l, RLIMIT_CORE, 0, 1, 0), 0);
        ck_assert_int_eq(rlimits_add(&l, RLIMIT_NOFILE, 1, 1, 1), -ENOSPC);
        ck_assert_uint_eq(l.n, RLIMITS_MAX);
        ck_assert_ptr_eq(l.ptrs[RLIMITS_MAX - 1], &l.v[RLIMITS_MAX - 1]);
}
END_TEST

START_TEST(rlimits_without_limits) {
        struct rlimits l;
        const Sbx__Init__V1__Rlimit *r;

        ck_assert_int_eq(
                rlimits_for_command(&l, NULL, SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE, 1024), 0);
        ck_assert_uint_eq(l.n, 2);
        r = find_rlimit(&l, RLIMIT_CORE);
        ck_assert_ptr_nonnull(r);
        ck_assert(r->has_hard);
        ck_assert_uint_eq(r->soft, 0);
        ck_assert_uint_eq(r->hard, 0);
        /* The daemon's own soft limit at start; the hard one is left alone. */
        r = find_rlimit(&l, RLIMIT_NOFILE);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->soft, 1024);
        ck_assert(!r->has_hard);

        ck_assert_int_eq(rlimits_for_command(&l, NULL, SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE, 0),
                         0);
        ck_assert_uint_eq(l.n, 1);
        ck_assert_ptr_null(find_rlimit(&l, RLIMIT_NOFILE));
}
END_TEST

START_TEST(rlimits_every_limit) {
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        const Sbx__Init__V1__Rlimit *r;
        struct rlimits l;

        lim.has_cpu_seconds = 1;
        lim.cpu_seconds = 1.5;
        lim.has_file_size_bytes = 1;
        lim.file_size_bytes = 4096;
        lim.has_open_files = 1;
        lim.open_files = 64;
        lim.has_core_dumps = lim.core_dumps = 1;
        lim.has_processes = 1;
        lim.processes = 10;
        ck_assert_int_eq(rlimits_for_command(&l, &lim, SBX__V1__ENFORCEMENT__RLIMIT, 1024), 0);
        ck_assert_uint_eq(l.n, 5);
        r = find_rlimit(&l, RLIMIT_CPU);
        ck_assert_uint_eq(r->soft, 2); /* rounded up */
        ck_assert_uint_eq(r->hard, 3); /* SIGKILL a second after SIGXCPU */
        r = find_rlimit(&l, RLIMIT_FSIZE);
        ck_assert_uint_eq(r->soft, 4096);
        ck_assert_uint_eq(r->hard, 4096);
        r = find_rlimit(&l, RLIMIT_NOFILE);
        ck_assert_uint_eq(r->soft, 64); /* the policy's, not the daemon's */
        ck_assert(r->has_hard);
        r = find_rlimit(&l, RLIMIT_CORE);
        ck_assert_uint_eq(r->soft, RLIM_INFINITY);
        r = find_rlimit(&l, RLIMIT_NPROC);
        ck_assert_uint_eq(r->soft, 10);

        /* A pids cgroup holds the process limit: no RLIMIT_NPROC then. */
        ck_assert_int_eq(rlimits_for_command(&l, &lim, SBX__V1__ENFORCEMENT__CGROUP_V2, 0), 0);
        ck_assert_ptr_null(find_rlimit(&l, RLIMIT_NPROC));
        ck_assert_uint_eq(l.n, 4);
}
END_TEST

/* ---- enforcement -------------------------------------------------------------------- */

START_TEST(enforce_without_cgroups) {
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        Sbx__V1__LimitEnforcement enf[LIM_N], *ptrs[LIM_N];
        struct enforcement e;

        lim.has_memory_bytes = lim.has_processes = lim.has_cpu_percent = 1;
        lim.has_cpu_seconds = 1;
        enforce_apply(&lim, NULL, CGROUP_NONE, 0, &e);
        ck_assert_int_eq(e.how[LIM_MEMORY], SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE);
        ck_assert_int_eq(e.how[LIM_PROCESSES], SBX__V1__ENFORCEMENT__RLIMIT); /* a uid of its own */
        ck_assert_int_eq(e.how[LIM_CPU_SECONDS], SBX__V1__ENFORCEMENT__RLIMIT);
        ck_assert_int_eq(e.how[LIM_CORE_DUMPS], SBX__V1__ENFORCEMENT__RLIMIT);
        ck_assert_int_eq(e.how[LIM_FILE_SIZE], SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE);
        /* /tmp is a tmpfs of its size, always (it was reported as none). */
        ck_assert_int_eq(e.how[LIM_TMP], SBX__V1__ENFORCEMENT__TMPFS_SIZE);
        ck_assert_uint_eq(e.n_warnings, 2); /* memory, cpu_percent */
        ck_assert_ptr_nonnull(strstr(e.warnings[0], "memory limit not enforced"));

        /* Rootless: no uid of its own, so the process limit is not enforced either. */
        enforce_apply(&lim, NULL, CGROUP_NONE, 1, &e);
        ck_assert_int_eq(e.how[LIM_PROCESSES], SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE);
        ck_assert_uint_eq(e.n_warnings, 3);

        ck_assert_uint_eq(enforce_report(e.how, enf, ptrs), LIM_N);
        ck_assert_str_eq(ptrs[LIM_OPEN_FILES]->limit, "open_files");
        ck_assert_int_eq(ptrs[LIM_CORE_DUMPS]->enforcement, SBX__V1__ENFORCEMENT__RLIMIT);
}
END_TEST

/* ---- quota and ids ------------------------------------------------------------------ */

START_TEST(quota_counts_per_uid) {
        struct quota *q;
        unsigned have = 99;
        int i;

        ck_assert_int_eq(quota_new(&q), 0);
        for (i = 0; i < 3; i++)
                ck_assert_int_eq(quota_take(q, QUOTA_COMMANDS, 1000, 3, NULL), 0);
        ck_assert_int_eq(quota_take(q, QUOTA_COMMANDS, 1000, 3, &have), -EAGAIN);
        ck_assert_uint_eq(have, 3);
        /* Another uid, and another kind, are counted apart. */
        ck_assert_int_eq(quota_take(q, QUOTA_COMMANDS, 1001, 3, NULL), 0);
        ck_assert_int_eq(quota_take(q, QUOTA_SANDBOXES, 1000, 1, NULL), 0);
        quota_drop(q, QUOTA_COMMANDS, 1000);
        ck_assert_uint_eq(quota_count(q, QUOTA_COMMANDS, 1000), 2);
        ck_assert_int_eq(quota_take(q, QUOTA_COMMANDS, 1000, 3, NULL), 0);
        /* Dropping below zero, or for a uid never seen, changes nothing. */
        quota_drop(q, QUOTA_SANDBOXES, 1000);
        quota_drop(q, QUOTA_SANDBOXES, 1000);
        quota_drop(q, QUOTA_SANDBOXES, 4242);
        ck_assert_uint_eq(quota_count(q, QUOTA_SANDBOXES, 1000), 0);
        ck_assert_uint_eq(quota_count(q, QUOTA_COMMANDS, 1001), 1);
        quota_free(q);
}
END_TEST

/* quota_add_upto (the sandboxes' ptys): all of want while it fits, then what is left
 * under the tighter bound, which it names; 0 once nothing is left; given back, it fits
 * again. Everyone's bound cuts a uid that has room of its own. */
START_TEST(quota_add_upto_cuts_to_what_is_left) {
        struct quota *q;
        struct quota_bound b;
        uint64_t got = 99;
        char why[256];

        ck_assert_int_eq(quota_new(&q), 0);
        b = (struct quota_bound){.q = q, .max = 40, .max_total = 60};
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 1000, 16, &got), 0);
        ck_assert_uint_eq(got, 16);
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 1000, 16, &got), 0);
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 1000, 16, &got), -EDQUOT);
        ck_assert_uint_eq(got, 8);
        quota_explain_ptys(&b, 1000, -EDQUOT, 32, 32, why, sizeof(why));
        ck_assert_str_eq(why, "uid 1000's sandboxes held 32 ptys, its bound "
                              "(--max-ptys-per-uid 40)");
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 1000, 16, &got), -EDQUOT);
        ck_assert_uint_eq(got, 0);
        ck_assert_uint_eq(quota_amount(q, QUOTA_PTYS, 1000), 40);
        /* Another uid: 20 left of everyone's 60. */
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 0, 16, &got), 0);
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 0, 16, &got), -ENOSPC);
        ck_assert_uint_eq(got, 4);
        quota_explain_ptys(&b, 0, -ENOSPC, 16, 56, why, sizeof(why));
        ck_assert_str_eq(why, "sbxd's sandboxes held 56 ptys, its bound (--max-ptys 60)");
        ck_assert_uint_eq(quota_total(q, QUOTA_PTYS), 60);
        /* Given back, they fit again; the other kinds never saw them. */
        quota_sub(q, QUOTA_PTYS, 1000, 16);
        ck_assert_int_eq(quota_add_upto(&b, QUOTA_PTYS, 1000, 16, &got), 0);
        ck_assert_uint_eq(quota_amount(q, QUOTA_BUFFERED, 1000), 0);
        /* No bound: all of it, counted nowhere. */
        ck_assert_int_eq(quota_add_upto(NULL, QUOTA_PTYS, 1000, 16, &got), 0);
        ck_assert_uint_eq(got, 16);
        quota_free(q);
}
END_TEST

START_TEST(sbxid_rules) {
        char id[SBX_ID_MAX_BYTES + 1], other[SBX_ID_MAX_BYTES + 1], longest[SBX_ID_MAX_BYTES + 2];

        ck_assert(sbxid_valid("my-sandbox_1.2"));
        ck_assert(!sbxid_valid(""));
        ck_assert(!sbxid_valid("."));
        ck_assert(!sbxid_valid(".."));
        ck_assert(!sbxid_valid("a/b"));
        ck_assert(!sbxid_valid("~warm-x"));
        memset(longest, 'a', sizeof(longest) - 1);
        longest[SBX_ID_MAX_BYTES] = '\0';
        ck_assert(sbxid_valid(longest));
        longest[SBX_ID_MAX_BYTES] = 'a';
        longest[SBX_ID_MAX_BYTES + 1] = '\0';
        ck_assert(!sbxid_valid(longest));

        sbxid_generate(id, sizeof(id));
        sbxid_generate(other, sizeof(other));
        ck_assert(sbxid_valid(id));
        ck_assert_uint_eq(strlen(id), 22);
        ck_assert(strncmp(id, "sbx-", 4) == 0);
        ck_assert_str_ne(id, other);
        ck_assert(strncmp(id, other, 4 + 10) <= 0); /* time-ordered */
}
END_TEST

/* ---- a sandbox made in the test ------------------------------------------------------ */

/* The daemon's context and one sandbox whose init is the test (the other end of its
 * channel, in fd). */
struct rig {
        char tmp[128];
        uv_loop_t loop;
        struct config cfg;
        struct cgroup_env cgroups;
        struct sbxd d;
        struct quota *quota;
        struct cmdsched sched; /* as the sandbox table makes it, over quota */
        struct sandbox *sb;
        int init_fd;
        int gone;
};

/* What the callbacks saw of one command. */
struct seen {
        int done;
        Sbx__V1__Outcome outcome;
        int exit_code, has_signal, signal;
        int start_errno;
        char out[256];
        size_t out_len;
        uint64_t out_total;
        int out_truncated;
        char hits[128];
        int queued;     /* the queued callback was called */
        unsigned ahead; /* what it said */
        uint64_t queued_ms;
        double duration;
};

static void on_gone(void *ud, struct sandbox *sb) {
        struct rig *g = ud;
        g->gone = 1;
}

static void rig_up(struct rig *g) {
        Sbx__V1__CreateSandbox spec = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        struct store_sandbox rec = {0};
        char db[256];
        uint8_t packed[256];
        size_t len;
        int sv[2];

        memset(g, 0, sizeof(*g));
        snprintf(g->tmp, sizeof(g->tmp), "/tmp/check_command.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(g->tmp));
        ck_assert_int_eq(uv_loop_init(&g->loop), 0);
        ck_assert_int_eq(config_init(&g->cfg, geteuid()), 0);
        free(g->cfg.state_dir);
        g->cfg.state_dir = strdup(g->tmp);
        g->cfg.max_commands_per_sandbox = 4;
        g->cfg.max_commands_per_uid = 2;
        g->d.loop = &g->loop;
        g->d.cfg = &g->cfg;
        g->d.cgroups = &g->cgroups; /* CGROUP_NONE */
        g->d.euid = geteuid();
        g->d.egid = getegid();
        snprintf(db, sizeof(db), "%s/sbxd.db", g->tmp);
        ck_assert_int_eq(store_open(db, &g->d.store), 0);
        ck_assert_int_eq(quota_new(&g->quota), 0);
        cmdsched_init(&g->sched, &command_sched_ops, g->quota, &g->cfg);
        g->d.sched = &g->sched;

        spec.policy = &pol;
        spec.has_timeout_ms = 1;
        spec.timeout_ms = 60000;
        len = sbx__v1__create_sandbox__pack(&spec, packed);
        g->sb = sandbox_alloc(&g->d, "t1", packed, len, getuid(), sbxd_now_unix_ms());
        ck_assert_ptr_nonnull(g->sb);
        g->sb->view.state = SBX__V1__SANDBOX_STATE__READY;
        g->sb->gone = on_gone;
        g->sb->gone_ud = g;
        sandbox_set_run_ids(g->sb, getuid(), getgid());
        rec.id = "t1";
        rec.owner_uid = getuid();
        rec.state = "ready";
        rec.spec = packed;
        rec.spec_len = len;
        ck_assert_int_eq(store_sandbox_insert(g->d.store, &rec), 0);

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        initchan_open(&g->sb->chan, sv[0]);
        ck_assert_int_eq(initchan_watch(&g->sb->chan, &g->loop), 0);
        g->sb->hooks->hold(g->sb); /* the channel's handle holds the sandbox */
        g->init_fd = sv[1];
}

/* Runs the loop until *flag is set, at most ms. */
static void spin(struct rig *g, const int *flag, int ms) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!*flag) {
                uv_run(&g->loop, UV_RUN_NOWAIT);
                clock_gettime(CLOCK_MONOTONIC, &t);
                ck_assert_msg((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
                                      ms,
                              "nothing happened within %d ms", ms);
                if (!*flag)
                        usleep(1000);
        }
}

/* Ends the sandbox, and proves everything of it was freed and the loop is empty. */
static void rig_down(struct rig *g) {
        sandbox_end(g->sb, SBX__V1__SANDBOX_STATE__TERMINATED, "test over");
        spin(g, &g->gone, 2000);
        while (uv_run(&g->loop, UV_RUN_NOWAIT))
                ;
        ck_assert_int_eq(uv_loop_close(&g->loop), 0);
        close(g->init_fd);
        ck_assert_uint_eq(quota_count(g->quota, QUOTA_COMMANDS, getuid()), 0);
        quota_free(g->quota);
        store_close(g->d.store);
        config_free(&g->cfg);
        {
                char cmd[300];
                snprintf(cmd, sizeof(cmd), "rm -rf %s", g->tmp);
                ck_assert_int_eq(system(cmd), 0);
        }
}

/* Reads one message the daemon sent init, with its descriptors (nfds of them). */
static Sbx__Init__V1__ToInit *read_from_daemon(struct rig *g, int *fds, size_t *nfds) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        struct pollfd p = {.fd = g->init_fd, .events = POLLIN};
        size_t len;
        int i;

        for (i = 0; i < 2000 && poll(&p, 1, 0) == 0; i++) {
                uv_run(&g->loop, UV_RUN_NOWAIT);
                usleep(1000);
        }
        ck_assert_int_eq(
                initmsg_recv(g->init_fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, nfds), 1);
        return sbx__init__v1__to_init__unpack(NULL, len, buf);
}

static void send_to_daemon(struct rig *g, Sbx__Init__V1__FromInit *m) {
        ck_assert_int_eq(initmsg_send(g->init_fd, &m->base, NULL, 0), 0);
}

static void send_exited(struct rig *g, uint64_t id, int wait_status) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Exited ex = SBX__INIT__V1__EXITED__INIT;
        ex.has_command_id = ex.has_wait_status = 1;
        ex.command_id = id;
        ex.wait_status = wait_status;
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_EXITED;
        m.exited = &ex;
        send_to_daemon(g, &m);
}

static void cb_queued(void *ud, char *id, unsigned ahead) {
        struct seen *s = ud;
        s->queued = 1;
        s->ahead = ahead;
}

static void cb_started(void *ud, char *id) {
}

static void cb_output(void *ud, char *id, Sbx__V1__Stream s, uint64_t off, uint8_t *data,
                      size_t len, int taken) {
        if (taken)
                free(data);
}

static int cb_congested(void *ud) {
        return 0;
}

static void cb_done(void *ud, Sbx__V1__CommandResult *res) {
        struct seen *s = ud;
        size_t i;
        s->done = 1;
        s->outcome = res->outcome;
        s->exit_code = res->exit_code;
        s->has_signal = res->has_signal;
        s->signal = res->signal;
        s->start_errno = res->start_errno;
        s->out_len = res->stdout.len < sizeof(s->out) ? res->stdout.len : sizeof(s->out) - 1;
        if (s->out_len)
                memcpy(s->out, res->stdout.data, s->out_len);
        s->out_total = res->stdout_bytes;
        s->out_truncated = res->stdout_truncated;
        s->queued_ms = res->queued_ms;
        s->duration = res->duration;
        for (i = 0; res->resources && i < res->resources->n_limits_hit; i++)
                snprintf(s->hits + strlen(s->hits), sizeof(s->hits) - strlen(s->hits), "%s%s",
                         i ? "," : "", res->resources->limits_hit[i]);
}

static const struct command_callbacks cbs = {.queued = cb_queued,
                                             .started = cb_started,
                                             .output = cb_output,
                                             .congested = cb_congested,
                                             .done = cb_done};

static struct caller me(void) {
        struct caller k = {
                .uid = getuid(), .gid = getgid(), .pid = getpid(), .client_name = "check"};
        return k;
}

static Sbx__V1__RunCommand echo_request(void) {
        static char *argv[] = {(char *)"echo", (char *)"hi"};
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        rc.sandbox_id = (char *)"t1";
        rc.n_argv = 2;
        rc.argv = argv;
        rc.has_timeout_ms = 1;
        rc.timeout_ms = 5000;
        return rc;
}

static int run_expect(struct rig *g, Sbx__V1__RunCommand *rc, char *err, size_t errlen) {
        struct caller k = me();
        struct seen s = {0};
        struct command *cmd = NULL;
        return command_run(g->sb, rc, &k, &cbs, &s, &cmd, err, errlen);
}

START_TEST(run_refuses_bad_requests) {
        struct rig g;
        Sbx__V1__RunCommand rc;
        char err[512];
        static char *empty[] = {(char *)""};

        rig_up(&g);
        rc = echo_request();
        rc.shell = (char *)"true";
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "give exactly one of argv and shell");

        rc = echo_request();
        rc.n_argv = 1;
        rc.argv = empty;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);

        rc = echo_request();
        rc.has_timeout_ms = 0;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "timeout_ms is required"));

        rc = echo_request();
        rc.has_stdin = 1;
        rc.stdin.len = SBX_MAX_STDIN_BYTES + 1;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EMSGSIZE);

        rc = echo_request();
        rc.has_max_stderr_bytes = 1;
        rc.max_stderr_bytes = (uint64_t)SBX_MAX_OUTPUT_BYTES + 1;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "max_stderr_bytes"));

        g.sb->view.state = SBX__V1__SANDBOX_STATE__CREATING;
        rc = echo_request();
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -ESHUTDOWN);
        g.sb->view.state = SBX__V1__SANDBOX_STATE__TERMINATING;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -ENODEV);
        g.sb->view.state = SBX__V1__SANDBOX_STATE__READY;

        /* A full sandbox, for a command that may not wait for a slot. */
        rc.has_queue_timeout_ms = 1;
        rc.queue_timeout_ms = 0;
        g.sb->sched.n_running = g.cfg.max_commands_per_sandbox;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "already runs 4 commands, its maximum"));
        /* One that may wait, with no room in the queue (--max-queued 0). */
        rc.has_queue_timeout_ms = 0;
        g.cfg.max_queued_per_sandbox = 0;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "already has 0 commands waiting for a slot"));
        ck_assert_ptr_nonnull(strstr(err, "--max-queued"));
        g.cfg.max_queued_per_sandbox = 8;
        g.cfg.max_queued_total = 0;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "--max-queued-total"));
        g.cfg.max_queued_total = 100;
        g.sb->sched.n_running = 0;

        /* The caller's quota, counted over every sandbox. */
        rc.has_queue_timeout_ms = 1;
        ck_assert_int_eq(quota_take(g.quota, QUOTA_COMMANDS, getuid(), 10, NULL), 0);
        ck_assert_int_eq(quota_take(g.quota, QUOTA_COMMANDS, getuid(), 10, NULL), 0);
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EAGAIN);
        ck_assert_ptr_nonnull(strstr(err, "already runs 2 commands"));
        quota_drop(g.quota, QUOTA_COMMANDS, getuid());
        quota_drop(g.quota, QUOTA_COMMANDS, getuid());

        /* Nothing was numbered or started by a refusal. */
        ck_assert_uint_eq(g.sb->next_command, 0);
        ck_assert_ptr_null(g.sb->commands);
        rig_down(&g);
}
END_TEST

/* Reads the next Start the daemon sent init, closes its descriptors, returns its id. */
static uint64_t read_start(struct rig *g) {
        Sbx__Init__V1__ToInit *m;
        int fds[SBX_INIT_MAX_FDS];
        size_t nfds = 0, i;
        uint64_t num;

        m = read_from_daemon(g, fds, &nfds);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->body_case, SBX__INIT__V1__TO_INIT__BODY_START);
        num = m->start->command_id;
        sbx__init__v1__to_init__free_unpacked(m, NULL);
        for (i = 0; i < nfds; i++)
                close(fds[i]);
        return num;
}

/* 1 when the daemon sent init nothing within a few loop turns. */
static int nothing_sent(struct rig *g) {
        struct pollfd p = {.fd = g->init_fd, .events = POLLIN};
        int i;
        for (i = 0; i < 20; i++) {
                uv_run(&g->loop, UV_RUN_NOWAIT);
                usleep(1000);
        }
        return poll(&p, 1, 0) == 0;
}

/* Runs rc as caller (conn: its connection, for turns); *ret: the command. */
static void run_as(struct rig *g, Sbx__V1__RunCommand *rc, uint64_t conn, struct seen *s,
                   struct command **ret) {
        struct caller k = me();
        char err[512];
        k.conn_id = conn;
        ck_assert_msg(command_run(g->sb, rc, &k, &cbs, s, ret, err, sizeof(err)) == 0, "%s", err);
}

/* Starts rc, reads its Start as init would: the message and stdin, stdout, stderr. */
static uint64_t take_start(struct rig *g, Sbx__V1__RunCommand *rc, struct seen *s, int *fds) {
        Sbx__Init__V1__ToInit *m;
        struct caller k = me();
        struct command *cmd = NULL;
        char err[512];
        size_t nfds = 0;
        uint64_t num;

        ck_assert_int_eq(command_run(g->sb, rc, &k, &cbs, s, &cmd, err, sizeof(err)), 0);
        ck_assert_str_eq(command_id(cmd), "c-1");
        m = read_from_daemon(g, fds, &nfds);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->body_case, SBX__INIT__V1__TO_INIT__BODY_START);
        ck_assert_uint_eq(nfds, 3);
        ck_assert_uint_eq(m->start->n_argv, 2);
        ck_assert(memcmp(m->start->argv[0].data, "echo", 4) == 0);
        ck_assert(memcmp(m->start->cwd.data, "/workspace", m->start->cwd.len) == 0);
        num = m->start->command_id;
        sbx__init__v1__to_init__free_unpacked(m, NULL);
        return num;
}

START_TEST(run_keeps_the_tail_of_its_output) {
        struct rig g;
        struct seen s = {0};
        Sbx__V1__RunCommand rc;
        const char *out = "first line\nsecond line\nthe error is here\n";
        int fds[SBX_INIT_MAX_FDS];
        uint64_t num;

        rig_up(&g);
        rc = echo_request();
        rc.has_max_stdout_bytes = 1;
        rc.max_stdout_bytes = 18;
        num = take_start(&g, &rc, &s, fds);
        ck_assert_uint_eq(quota_count(g.quota, QUOTA_COMMANDS, getuid()), 1);
        ck_assert_int_eq(write(fds[1], out, strlen(out)), (int)strlen(out));
        close(fds[0]);
        close(fds[1]);
        close(fds[2]);
        send_exited(&g, num, (7 & 0xff) << 8);
        spin(&g, &s.done, 2000);
        ck_assert_int_eq(s.outcome, SBX__V1__OUTCOME__EXITED);
        ck_assert_int_eq(s.exit_code, 7);
        ck_assert_uint_eq(s.out_len, 18);
        ck_assert(memcmp(s.out, "the error is here\n", 18) == 0);
        ck_assert(s.out_truncated);
        ck_assert_uint_eq(s.out_total, strlen(out));
        ck_assert_str_eq(s.hits, "output");
        ck_assert_uint_eq(quota_count(g.quota, QUOTA_COMMANDS, getuid()), 0);
        ck_assert_uint_eq(g.sb->sched.n_running, 0);
        rig_down(&g);
}
END_TEST

START_TEST(run_start_failed) {
        struct rig g;
        struct seen s = {0};
        Sbx__V1__RunCommand rc = echo_request();
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__StartFailed sf = SBX__INIT__V1__START_FAILED__INIT;
        int fds[SBX_INIT_MAX_FDS], i;

        rig_up(&g);
        sf.has_command_id = sf.has_error_errno = 1;
        sf.command_id = take_start(&g, &rc, &s, fds);
        for (i = 0; i < 3; i++)
                close(fds[i]);
        sf.error_errno = ENOENT;
        sf.error = (char *)"execve echo: No such file or directory";
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_START_FAILED;
        m.start_failed = &sf;
        send_to_daemon(&g, &m);
        spin(&g, &s.done, 2000);
        ck_assert_int_eq(s.outcome, SBX__V1__OUTCOME__START_FAILED);
        ck_assert_int_eq(s.start_errno, ENOENT);
        rig_down(&g);
}
END_TEST

START_TEST(run_timeout_kills_then_waits_for_the_leader) {
        struct rig g;
        struct seen s = {0};
        Sbx__V1__RunCommand rc = echo_request();
        Sbx__Init__V1__ToInit *m;
        int fds[SBX_INIT_MAX_FDS], none[SBX_INIT_MAX_FDS], i;
        size_t nfds = 0;
        uint64_t num;

        rig_up(&g);
        rc.timeout_ms = 50;
        num = take_start(&g, &rc, &s, fds);
        for (i = 0; i < 3; i++)
                close(fds[i]);
        /* The timeout sends SIGKILL (after SIGCONT) to the group, through init... */
        m = read_from_daemon(&g, none, &nfds);
        ck_assert_int_eq(m->body_case, SBX__INIT__V1__TO_INIT__BODY_SIGNAL);
        ck_assert_uint_eq(m->signal->command_id, num);
        ck_assert_int_eq(m->signal->signal, SIGKILL);
        ck_assert(m->signal->cont);
        sbx__init__v1__to_init__free_unpacked(m, NULL);
        /* ...and reports timed_out only once init says the leader is reaped. */
        for (i = 0; i < 20; i++) {
                uv_run(&g.loop, UV_RUN_NOWAIT);
                usleep(1000);
        }
        ck_assert(!s.done);
        send_exited(&g, num, SIGKILL);
        spin(&g, &s.done, 2000);
        ck_assert_int_eq(s.outcome, SBX__V1__OUTCOME__TIMED_OUT);
        ck_assert_int_eq(s.signal, SIGKILL);
        ck_assert_str_eq(s.hits, "timeout");
        rig_down(&g);
}
END_TEST

START_TEST(run_ends_with_its_sandbox) {
        struct rig g;
        struct seen s = {0};
        Sbx__V1__RunCommand rc = echo_request();
        int fds[SBX_INIT_MAX_FDS], i;

        rig_up(&g);
        (void)take_start(&g, &rc, &s, fds);
        for (i = 0; i < 3; i++)
                close(fds[i]);
        /* An exit report for a command that was never started is ignored. */
        send_exited(&g, 999, 0);
        for (i = 0; i < 10; i++) {
                uv_run(&g.loop, UV_RUN_NOWAIT);
                usleep(1000);
        }
        ck_assert(!s.done);
        rig_down(&g); /* the end finishes the command first */
        ck_assert(s.done);
        ck_assert_int_eq(s.outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
}
END_TEST

/* Over the caller's quota (2 in the rig), a command waits; it is told so, starts when
 * a slot frees, and its result says how long it waited. Its id is the next one at once,
 * and it is found by it while it waits. */
START_TEST(queue_waits_for_a_slot) {
        struct rig g;
        struct seen s[3] = {{0}};
        struct command *cmd[3];
        Sbx__V1__RunCommand rc = echo_request();
        uint64_t first;

        rig_up(&g);
        run_as(&g, &rc, 1, &s[0], &cmd[0]);
        first = read_start(&g);
        run_as(&g, &rc, 1, &s[1], &cmd[1]);
        (void)read_start(&g);
        rc.has_stream = 1;
        rc.stream = 1;
        run_as(&g, &rc, 2, &s[2], &cmd[2]);
        ck_assert(s[2].queued);
        ck_assert_uint_eq(s[2].ahead, 0);
        ck_assert_str_eq(command_id(cmd[2]), "c-3");
        ck_assert_ptr_eq(command_find(g.sb, "c-3"), cmd[2]);
        ck_assert_uint_eq(g.sb->sched.n_queued, 1);
        ck_assert_uint_eq(g.sched.n_queued, 1);
        ck_assert(nothing_sent(&g));
        usleep(30 * 1000);
        send_exited(&g, first, 0);
        spin(&g, &s[0].done, 2000);
        ck_assert_uint_eq(read_start(&g), 3);
        ck_assert_uint_eq(g.sb->sched.n_queued, 0);
        ck_assert_uint_eq(g.sched.n_queued, 0);
        ck_assert_ptr_null(g.sched.waiting);
        ck_assert_uint_eq(g.sb->sched.n_running, 2);
        send_exited(&g, 3, 0);
        spin(&g, &s[2].done, 2000);
        ck_assert_int_eq(s[2].outcome, SBX__V1__OUTCOME__EXITED);
        ck_assert_uint_ge(s[2].queued_ms, 25);
        ck_assert_uint_eq(s[0].queued_ms, 0);
        rig_down(&g);
        ck_assert_int_eq(s[1].outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
}
END_TEST

/* A command that waits longer than its queue_timeout_ms never runs; one cancelled while
 * it waits ends at once; those still waiting when the sandbox ends end with it, and
 * the slots its end frees start none of them. Each is recorded. */
START_TEST(queue_timeout_cancel_and_end) {
        struct rig g;
        struct seen s[6] = {{0}};
        struct command *cmd[6];
        Sbx__V1__RunCommand rc = echo_request();
        int i;

        rig_up(&g);
        for (i = 0; i < 2; i++) {
                run_as(&g, &rc, 1, &s[i], &cmd[i]);
                (void)read_start(&g);
        }
        rc.has_queue_timeout_ms = 1;
        rc.queue_timeout_ms = 40;
        run_as(&g, &rc, 1, &s[2], &cmd[2]);
        rc.queue_timeout_ms = 60000;
        run_as(&g, &rc, 1, &s[3], &cmd[3]);
        run_as(&g, &rc, 1, &s[4], &cmd[4]);
        ck_assert_uint_eq(g.sb->sched.n_queued, 3);
        spin(&g, &s[2].done, 2000);
        ck_assert_int_eq(s[2].outcome, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
        ck_assert_uint_ge(s[2].queued_ms, 35);
        ck_assert(s[2].duration == 0);
        ck_assert_uint_eq(g.sb->sched.n_queued, 2);

        command_cancel(cmd[3]);
        ck_assert(s[3].done);
        ck_assert_int_eq(s[3].outcome, SBX__V1__OUTCOME__CANCELLED);
        ck_assert_ptr_null(command_find(g.sb, "c-4"));
        ck_assert(nothing_sent(&g));
        ck_assert_uint_eq(quota_count(g.quota, QUOTA_COMMANDS, getuid()), 2);

        rig_down(&g);
        ck_assert_int_eq(s[4].outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        ck_assert_int_eq(s[0].outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        ck_assert_uint_eq(g.sched.n_queued, 0);
}
END_TEST

/* A timeout_ms or queue_timeout_ms past --max-command-timeout (UINT64_MAX among them)
 * is refused, naming the flag and its value, and nothing runs or waits (both were
 * lowered to the flag's value silently); at the flag's value, a command waits that
 * long. An output cap past 64 MiB is refused likewise; 0 keeps nothing. */
START_TEST(timeouts_above_the_maximum_are_refused) {
        struct rig g;
        struct seen s[3] = {{0}};
        struct command *cmd[3];
        Sbx__V1__RunCommand rc = echo_request();
        char err[512];
        int i;

        rig_up(&g);
        g.cfg.max_command_timeout_ms = 80;
        rc.timeout_ms = 81;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "timeout_ms 81 ms is above the maximum of 80 ms (sbxd "
                              "--max-command-timeout); nothing was run");
        rc.timeout_ms = UINT64_MAX;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "timeout_ms 18446744073709551615 ms is above"));
        /* A background command's 0 is none at all, no timeout past the maximum. */
        rc.timeout_ms = 0;
        rc.has_background = rc.background = 1;
        rc.has_queue_timeout_ms = 1;
        rc.queue_timeout_ms = UINT64_MAX;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "queue_timeout_ms 18446744073709551615 ms is above the maximum of "
                              "80 ms (sbxd --max-command-timeout); nothing was run");
        rc = echo_request();
        rc.timeout_ms = 80;
        rc.has_max_stdout_bytes = 1;
        rc.max_stdout_bytes = UINT64_MAX;
        ck_assert_int_eq(run_expect(&g, &rc, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err,
                         "max_stdout_bytes 18446744073709551615 bytes is above the maximum "
                         "of 67108864 bytes (64 MiB, the most output kept per stream); nothing "
                         "was run");
        ck_assert_uint_eq(g.sched.n_queued, 0);

        rc = echo_request();
        rc.timeout_ms = 50;
        for (i = 0; i < 2; i++) {
                run_as(&g, &rc, 1, &s[i], &cmd[i]);
                (void)read_start(&g);
        }
        rc.has_queue_timeout_ms = 1;
        rc.queue_timeout_ms = 80;
        run_as(&g, &rc, 1, &s[2], &cmd[2]);
        spin(&g, &s[2].done, 2000);
        ck_assert_int_eq(s[2].outcome, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
        ck_assert_uint_ge(s[2].queued_ms, 70);
        ck_assert_uint_lt(s[2].queued_ms, 1000);
        rig_down(&g);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("command");
        TCase *pure = tcase_create("pure");
        TCase *run = tcase_create("run");

        tcase_add_test(pure, outcome_exit_codes);
        tcase_add_test(pure, outcome_signaled);
        tcase_add_test(pure, outcome_timeout_and_cancel);
        tcase_add_test(pure, outcome_out_of_memory);
        tcase_add_test(pure, outcome_cpu_and_file_size);
        tcase_add_test(pure, outcome_without_exit);
        tcase_add_test(pure, outcome_hits_in_order);
        tcase_add_test(pure, outcome_names);
        tcase_add_test(pure, outbuf_under_the_cap);
        tcase_add_test(pure, outbuf_keeps_the_tail);
        tcase_add_test(pure, outbuf_ring_matches_a_reference);
        tcase_add_test(pure, outbuf_zero_cap_and_counting);
        tcase_add_test(pure, outbuf_budget_cuts_to_the_tail);
        tcase_add_test(pure, outbuf_budget_refuses_the_first_buffer);
        tcase_add_test(pure, rlimits_bounded);
        tcase_add_test(pure, rlimits_without_limits);
        tcase_add_test(pure, rlimits_every_limit);
        tcase_add_test(pure, enforce_without_cgroups);
        tcase_add_test(pure, quota_counts_per_uid);
        tcase_add_test(pure, quota_add_upto_cuts_to_what_is_left);
        tcase_add_test(pure, sbxid_rules);
        tcase_set_timeout(pure, 10);
        suite_add_tcase(s, pure);

        tcase_add_test(run, run_refuses_bad_requests);
        tcase_add_test(run, run_keeps_the_tail_of_its_output);
        tcase_add_test(run, run_start_failed);
        tcase_add_test(run, run_timeout_kills_then_waits_for_the_leader);
        tcase_add_test(run, run_ends_with_its_sandbox);
        tcase_add_test(run, queue_waits_for_a_slot);
        tcase_add_test(run, queue_timeout_cancel_and_end);
        tcase_add_test(run, timeouts_above_the_maximum_are_refused);
        tcase_set_timeout(run, 20);
        suite_add_tcase(s, run);
        return s;
}

SBX_TEST_MAIN(make_suite)
