/* check_devpts.c: the daemon's terminals (devpts.c) against a hostile sandbox root.
 *
 * The daemon opens a command's pty master itself, through the sandbox's root, so what it
 * must refuse is a root whose /dev/pts/ptmx is not a devpts ptmx: a symlink (to the
 * host's /dev/ptmx, or a /dev/pts that is a symlink), a regular file, a FIFO (which must
 * not block the loop), another character device bind-mounted there, and the daemon's
 * own devpts (the host's ptys) bind-mounted there. A private devpts instance mounted
 * there, as sbx-init does, works: a master that answers TIOCGPTN, its slave sized as
 * asked. devpts_check_master refuses /dev/null, a pipe and a slave. devpts_max_of reads a
 * devpts's max= from what the kernel shows of a process's mounts. Each test runs in a
 * process of its own (Check's fork mode) that unshares a mount namespace first, so
 * nothing it mounts is seen on the host; the tree lives in a temporary directory the
 * test removes. Needs root (the mounts). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "devpts.h"
#include "testutil.h"

static char root[64];
static int root_fd = -1;

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* A fake sandbox root with an empty dev/pts, in a mount namespace of this process. */
static void setup(void) {
        char p[128];

        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        snprintf(root, sizeof(root), "/tmp/check_devpts.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(root));
        /* A tmpfs of its own: nothing is left on /tmp when the process ends. */
        ck_assert_int_eq(mount("t", root, "tmpfs", 0, "size=64k"), 0);
        snprintf(p, sizeof(p), "%s/dev", root);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/dev/pts", root);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(root_fd, 0);
}

static void teardown(void) {
        char p[128];

        close(root_fd);
        snprintf(p, sizeof(p), "%s/dev/pts", root);
        (void)umount2(p, MNT_DETACH);
        (void)umount2(root, MNT_DETACH);
        (void)rmdir(root);
}

static const char *at(const char *rel) {
        static char p[128];
        snprintf(p, sizeof(p), "%s/%s", root, rel);
        return p;
}

/* devpts_open on the tree must be refused with -ENOTTY, at once. */
static void assert_refused(void) {
        int m = -1, s = -1, r;
        double t0 = now_ms();

        r = devpts_open(root_fd, 24, 80, &m, &s);
        ck_assert_msg(r == -ENOTTY, "devpts_open: %d (%s), expected -ENOTTY", r, strerror(-r));
        ck_assert_int_eq(m, -1);
        ck_assert_int_eq(s, -1);
        ck_assert_double_lt(now_ms() - t0, 1000);
}

START_TEST(symlink_to_the_hosts_ptmx_is_refused) {
        setup();
        ck_assert_int_eq(symlink("/dev/ptmx", at("dev/pts/ptmx")), 0);
        assert_refused();
        teardown();
}
END_TEST

START_TEST(pts_directory_symlink_is_refused) {
        setup();
        ck_assert_int_eq(rmdir(at("dev/pts")), 0);
        ck_assert_int_eq(symlink("/dev/pts", at("dev/pts")), 0);
        assert_refused();
        teardown();
}
END_TEST

START_TEST(regular_file_is_refused) {
        int fd;

        setup();
        fd = open(at("dev/pts/ptmx"), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        ck_assert_int_ge(fd, 0);
        close(fd);
        assert_refused();
        teardown();
}
END_TEST

/* Opening a FIFO for reading would wait for a writer: the check comes first (O_PATH). */
START_TEST(fifo_is_refused_without_blocking) {
        setup();
        ck_assert_int_eq(mkfifo(at("dev/pts/ptmx"), 0666), 0);
        assert_refused();
        teardown();
}
END_TEST

START_TEST(other_character_device_is_refused) {
        int fd;

        setup();
        fd = open(at("dev/pts/ptmx"), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(mount("/dev/null", at("dev/pts/ptmx"), NULL, MS_BIND, NULL), 0);
        assert_refused();
        teardown();
}
END_TEST

/* The host's devpts (the daemon's own /dev/pts) bound into the sandbox: its ptys are
 * the host's, refused. */
START_TEST(daemons_own_devpts_is_refused) {
        setup();
        if (access("/dev/pts/ptmx", F_OK) != 0) {
                teardown();
                return; /* no devpts on this host: nothing to bind */
        }
        ck_assert_int_eq(mount("/dev/pts", at("dev/pts"), NULL, MS_BIND, NULL), 0);
        assert_refused();
        teardown();
}
END_TEST

/* A private devpts instance, as sbx-init mounts it: a master, unlocked, its slave sized
 * as asked, bytes flowing both ways; a resize shows on the slave. */
/* Reads the non-blocking fd into buf until it holds want bytes, or 10 s have passed;
 * returns how many it holds. What the slave writes reaches the master through the
 * kernel's work queue, later: a read at once may find nothing. */
static ssize_t read_for(int fd, char *buf, size_t len, size_t want) {
        size_t have = 0;
        double t0 = now_ms();

        while (have < want && have < len && now_ms() - t0 < 10000) {
                struct pollfd f = {.fd = fd, .events = POLLIN};
                ssize_t n;
                if (poll(&f, 1, 100) <= 0)
                        continue;
                n = read(fd, buf + have, len - have);
                if (n > 0)
                        have += (size_t)n;
        }
        return (ssize_t)have;
}

START_TEST(private_devpts_gives_a_sized_pty) {
        struct winsize ws;
        char buf[64];
        int m = -1, s = -1, r;
        unsigned n;
        ssize_t got;

        setup();
        ck_assert_int_eq(mount("devpts", at("dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=620"),
                         0);
        r = devpts_open(root_fd, 33, 101, &m, &s);
        ck_assert_msg(r == 0, "devpts_open: %s", strerror(-r));
        ck_assert_int_eq(devpts_check_master(m), 0);
        ck_assert_int_eq(ioctl(m, TIOCGPTN, &n), 0);
        ck_assert_uint_eq(n, 0); /* the first pty of this instance, not one of the host's */
        ck_assert_int_eq(fcntl(m, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
        ck_assert_int_eq(ioctl(s, TIOCGWINSZ, &ws), 0);
        ck_assert_uint_eq(ws.ws_row, 33);
        ck_assert_uint_eq(ws.ws_col, 101);
        ck_assert_int_eq(devpts_resize(m, 50, 132), 0);
        ck_assert_int_eq(ioctl(s, TIOCGWINSZ, &ws), 0);
        ck_assert_uint_eq(ws.ws_row, 50);
        ck_assert_uint_eq(ws.ws_col, 132);
        ck_assert_int_eq(devpts_resize(m, 0, 80), -EINVAL);
        ck_assert_int_eq(devpts_resize(m, 24, DEVPTS_MAX_DIM + 1), -EINVAL);
        ck_assert_int_eq(devpts_eof_char(m), 4);
        ck_assert_int_eq(write(s, "hi\n", 3), 3);
        got = read_for(m, buf, sizeof(buf), 4);
        ck_assert_int_eq(got, 4); /* "hi\r\n": the terminal's output processing */
        ck_assert_int_eq(memcmp(buf, "hi\r\n", 4), 0);
        /* The slave is no master. */
        ck_assert_int_eq(devpts_check_master(s), -ENOTTY);
        close(s);
        close(m);
        teardown();
}
END_TEST

START_TEST(check_master_refuses_what_is_no_master) {
        int p[2], fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(devpts_check_master(fd), -ENOTTY);
        close(fd);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(devpts_check_master(p[0]), -ENOTTY);
        close(p[0]);
        close(p[1]);
}
END_TEST

/* devpts_max_of reads what the kernel shows of a process's /dev/pts: the max= of the
 * devpts last mounted there (this process's, in its own mount namespace), none for a
 * devpts without one, 0 when what is there is no devpts; an unknown pid is an error. */
START_TEST(max_of_a_process) {
        setup(); /* a mount namespace of this process: the host's /dev/pts stays as it is */
        ck_assert_int_eq(mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=620,max=7"),
                         0);
        ck_assert_int_eq(devpts_max_of(getpid()), 7);
        ck_assert_int_eq(mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=620"),
                         0);
        ck_assert_int_eq(devpts_max_of(getpid()), DEVPTS_NO_MAX);
        ck_assert_int_eq(mount("t", "/dev/pts", "tmpfs", 0, "size=4k"), 0);
        ck_assert_int_eq(devpts_max_of(getpid()), 0);
        ck_assert_int_eq(umount2("/dev/pts", MNT_DETACH), 0);
        ck_assert_int_eq(umount2("/dev/pts", MNT_DETACH), 0);
        ck_assert_int_eq(devpts_max_of(getpid()), 7);
        ck_assert_int_eq(devpts_max_of(0x7ffffff0), -ENOENT);
        teardown();
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("devpts");
        TCase *tc = tcase_create("devpts");
        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, symlink_to_the_hosts_ptmx_is_refused);
        tcase_add_test(tc, pts_directory_symlink_is_refused);
        tcase_add_test(tc, regular_file_is_refused);
        tcase_add_test(tc, fifo_is_refused_without_blocking);
        tcase_add_test(tc, other_character_device_is_refused);
        tcase_add_test(tc, daemons_own_devpts_is_refused);
        tcase_add_test(tc, private_devpts_gives_a_sized_pty);
        tcase_add_test(tc, check_master_refuses_what_is_no_master);
        tcase_add_test(tc, max_of_a_process);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
