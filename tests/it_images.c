/* it_images.c: the image requests end to end (PullImage, ListImages, InspectImage,
 * RemoveImage, PruneImages), through libsbx and the sbx tool, against a real sbxd and
 * the Distribution registry (docker-registry) on a loopback port.
 *
 * The fixture (the Check runner's process, once for the suite's one test case) builds
 * the test images with tests/mkimage.sh (umoci, skopeo, busybox-static), starts
 * docker-registry on a free port of 127.0.0.1 holding tag "img" as test/img:v1, v2 and
 * v3, and tests/registry_gate.py in front of it, which holds every blob download until
 * the test creates its release file and logs each one: so two pulls meet, and a daemon
 * is killed, in the middle of a download for certain rather than by timing. The
 * teardown stops both servers by pid and removes the directory, pass or fail.
 *
 * Users: root, and BOB (uid 3202, asbob.h) through the socket group 3100. Run from the
 * top of the tree (the scripts are read from tests/). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asbob.h"
#include "itutil.h"
#include "sbx.h"
#include "sbx_limits.h"
#include "servers.h"
#include "testutil.h"

static char imgdir[700], gatedir[700];
static pid_t reg_pid = -1, basic_pid = -1, gate_pid = -1;
static int reg_port, basic_port, gate_port;

static const char *const group_flags[] = {"--socket-group", "3100", "--log-level", "debug", NULL};

/* ---- the fixture ----------------------------------------------------------------------- */

static void fixture_down(void) {
        srv_stop(&gate_pid);
        srv_stop(&reg_pid);
        srv_stop(&basic_pid);
        it_fixture_teardown();
}

/* Fails the fixture after cleaning up (a failed unchecked fixture runs no teardown). */
static void need(int ok, const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        if (ok)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fixture_down();
        ck_abort_msg("%s", msg);
}

/* Reads the port a server wrote to path (20 s at most, while pid lives). */
static int read_port(const char *path, pid_t pid) {
        double end = it_now_ms() + 20000;
        int port = 0;
        FILE *f;

        while (it_now_ms() < end && waitpid(pid, NULL, WNOHANG) == 0) {
                f = fopen(path, "r");
                if (f) {
                        if (fscanf(f, "%d", &port) != 1)
                                port = 0;
                        fclose(f);
                        if (port > 0)
                                return port;
                }
                usleep(50000);
        }
        return 0;
}

/* docker-registry NAME on a free port (tried again when the port was taken meanwhile),
 * with auth (YAML of its auth section) or none. */
static void start_registry(const char *name, const char *auth, pid_t *pid, int *port) {
        char cfg[800], log[800];

        snprintf(cfg, sizeof(cfg), "%s/%s.yml", it_base_dir(), name);
        snprintf(log, sizeof(log), "%s/%s.log", it_base_dir(), name);
        for (int tries = 0; tries < 5 && *pid <= 0; tries++) {
                FILE *f = fopen(cfg, "w");
                need(f != NULL, "%s", cfg);
                *port = srv_free_port();
                fprintf(f,
                        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                        "    rootdirectory: %s/%s-storage\nhttp:\n  addr: 127.0.0.1:%d\n%s%s",
                        it_base_dir(), name, *port, auth ? "auth:\n" : "", auth ? auth : "");
                fclose(f);
                *pid = srv_spawn(log, (char *const[]){"docker-registry", "serve", cfg, NULL});
                if (!srv_wait_listening(*port, *pid))
                        srv_stop(pid);
        }
        need(*pid > 0, "docker-registry %s does not start (see %s)", name, log);
}

/* The basic-auth registry: user alice, password secret (bcrypt, as htpasswd wants). */
static void start_basic_registry(void) {
        char auth[1000];

        need(srv_sh("python3 -W ignore -c \"import crypt; print('alice:' + crypt.crypt('secret', "
                    "crypt.mksalt(crypt.METHOD_BLOWFISH)))\" > %s/htpasswd",
                    it_base_dir()) == 0,
             "no bcrypt htpasswd");
        snprintf(auth, sizeof(auth), "  htpasswd:\n    realm: test\n    path: %s/htpasswd\n",
                 it_base_dir());
        start_registry("basic", auth, &basic_pid, &basic_port);
        need(srv_sh("skopeo copy -q --insecure-policy --dest-tls-verify=false --dest-creds "
                    "alice:secret oci:%s/oci:img docker://127.0.0.1:%d/test/img:v1 "
                    ">>%s/skopeo.log 2>&1",
                    imgdir, basic_port, it_base_dir()) == 0,
             "skopeo copy to the basic-auth registry (see %s/skopeo.log)", it_base_dir());
}

static void fixture_up(void) {
        char log[800], portf[800], up[16];

        it_fixture_setup_var();
        need(access("tests/mkimage.sh", R_OK) == 0, "run from the top of the tree");
        snprintf(imgdir, sizeof(imgdir), "%s/img", it_base_dir());
        snprintf(gatedir, sizeof(gatedir), "%s/gate", it_base_dir());
        need(mkdir(imgdir, 0755) == 0 && mkdir(gatedir, 0755) == 0, "mkdir");
        need(srv_sh("bash tests/mkimage.sh %s >%s/mkimage.log 2>&1", imgdir, it_base_dir()) == 0,
             "tests/mkimage.sh failed (see %s/mkimage.log; it needs umoci, skopeo and "
             "busybox-static: make test-pkgs)",
             it_base_dir());
        need(srv_sh("chmod -R a+rX %s", imgdir) == 0, "chmod");
        start_registry("open", NULL, &reg_pid, &reg_port);
        start_basic_registry();
        for (int v = 1; v <= 3; v++)
                need(srv_sh("skopeo copy -q --insecure-policy --dest-tls-verify=false "
                            "oci:%s/oci:img "
                            "docker://127.0.0.1:%d/test/img:v%d >>%s/skopeo.log 2>&1",
                            imgdir, reg_port, v, it_base_dir()) == 0,
                     "skopeo copy to the registry (see %s/skopeo.log)", it_base_dir());
        snprintf(log, sizeof(log), "%s/gate.log", it_base_dir());
        snprintf(portf, sizeof(portf), "%s/gate.port", it_base_dir());
        snprintf(up, sizeof(up), "%d", reg_port);
        gate_pid = srv_spawn(log, (char *const[]){"python3", "tests/registry_gate.py", up, gatedir,
                                                  portf, NULL});
        gate_port = read_port(portf, gate_pid);
        need(gate_port > 0, "tests/registry_gate.py does not start (see %s)", log);
}

/* ---- helpers --------------------------------------------------------------------------- */

/* The gate's release file: blob downloads go through (open) or wait (shut). */
static void gate_open(int open_it) {
        char path[800];

        snprintf(path, sizeof(path), "%s/release", gatedir);
        if (open_it)
                close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        else
                unlink(path);
}

/* Blob downloads the gate saw, all pulls together. */
static int gate_blob_gets(void) {
        char path[800], line[1024];
        int n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/blobs.log", gatedir);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f))
                n += strncmp(line, "GET ", 4) == 0;
        if (f)
                fclose(f);
        return n;
}

static void gate_reset(void) {
        char path[800];

        snprintf(path, sizeof(path), "%s/blobs.log", gatedir);
        unlink(path);
}

/* Waits (30 s at most) until the gate saw want blob downloads. */
static void wait_blob_gets(int want) {
        double end = it_now_ms() + 30000;

        while (gate_blob_gets() < want && it_now_ms() < end)
                usleep(20000);
        ck_assert_int_ge(gate_blob_gets(), want);
}

static char *ref_at(int port, const char *tag) {
        char *s;

        ck_assert_int_ge(asprintf(&s, "127.0.0.1:%d/test/img:%s", port, tag), 0);
        return s;
}

/* Entries of the directory path (0 when it does not exist). */
static int entries(const char *path) {
        DIR *dir = opendir(path);
        struct dirent *e;
        int n = 0;

        while (dir && (e = readdir(dir)))
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        if (dir)
                closedir(dir);
        return n;
}

/* Waits (10 s at most) until the store's trash/ is empty (collected off the loop). */
static int trash_empties(const struct it_daemon *d) {
        char path[800];
        double end = it_now_ms() + 10000;

        snprintf(path, sizeof(path), "%s/images/trash", d->state);
        while (entries(path) > 0 && it_now_ms() < end)
                usleep(20000);
        return entries(path);
}

struct progress_seen {
        int events, unpack;
        uint64_t done[16], total[16];
        uint32_t count;
        unsigned reused; /* a bit per layer reported reused */
};

static void record_progress(void *ud, const struct sbx_image_progress *p) {
        struct progress_seen *s = ud;

        s->events++;
        if (strcmp(p->phase, "unpack") == 0) {
                s->unpack++;
                return;
        }
        if (p->index < 16) {
                if (p->reused)
                        s->reused |= 1u << p->index;
                s->count = p->count;
                s->done[p->index] = p->done_bytes;
                s->total[p->index] = p->total_bytes;
        }
}

static struct sbx_image *pull_ok(sbx_client *c, const char *source) {
        struct sbx_image *img = NULL;
        enum sbx_code rc = sbx_image_pull(c, source, NULL, &img);

        ck_assert_msg(rc == SBX_OK, "pull %s: %s: %s", source, sbx_code_name(rc),
                      sbx_error_message(c));
        return img;
}

/* ---- tests ----------------------------------------------------------------------------- */

/* A pull with progress: each of the 4 layers reported to its full size and the unpack
 * phase; the image under its canonical name; ls, inspect (the config mkimage.sh set),
 * the CLI's plain progress lines and --json; rm and prune leave an empty store whose
 * trash is emptied off the loop. */
START_TEST(pull_ls_inspect_rm_prune) {
        struct it_daemon d;
        struct progress_seen seen = {0};
        struct sbx_pull_opts po = {.on_progress = record_progress, .userdata = &seen};
        struct sbx_image *img = NULL, *ins = NULL;
        struct sbx_image_list *l = NULL;
        struct sbx_removed_images *rm = NULL;
        char *ref = ref_at(reg_port, "v1"), *out = NULL, *err = NULL, archive[800];
        sbx_client *c;

        gate_open(1);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        ck_assert_msg(sbx_image_pull(c, ref, &po, &img) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_int_eq(seen.count, 4);
        for (unsigned i = 0; i < 4; i++) {
                ck_assert_uint_gt(seen.total[i], 0);
                ck_assert_uint_eq(seen.done[i], seen.total[i]);
        }
        ck_assert_int_ge(seen.unpack, 1);
        ck_assert_uint_eq(img->names.n, 1);
        ck_assert_str_eq(img->names.v[0], ref);
        ck_assert_uint_gt(img->downloaded_bytes, 1u << 20);
        ck_assert_int_eq(strncmp(img->digest, "sha256:", 7), 0);

        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_str_eq(l->v[0].digest, img->digest);
        ck_assert_uint_gt(l->v[0].size_bytes, 1u << 20);
        ck_assert_uint_eq(l->v[0].sandboxes, 0);
        ck_assert_int_gt(l->v[0].last_used_unix_ms, 0);
        sbx_image_list_free(l);

        ck_assert_int_eq(sbx_image_inspect(c, img->digest, &ins), SBX_OK);
        ck_assert_ptr_nonnull(ins->config);
        ck_assert_uint_eq(ins->config->env.n, 1);
        ck_assert_str_eq(ins->config->env.v[0], "GREETING=hi");
        ck_assert_str_eq(ins->config->working_dir, "/data");
        ck_assert_str_eq(ins->config->user, "1000:1000");
        ck_assert_str_eq(ins->config->architecture, "amd64");
        ck_assert_uint_eq(ins->layers.n, 4);
        sbx_image_free(ins);

        /* The CLI: plain progress lines when stderr is no terminal, NAME DIGEST. */
        snprintf(archive, sizeof(archive), "oci-archive:%s/img.oci.tar", imgdir);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, &out, &err, (const char *[]){"image", "pull", archive, NULL}),
                0);
        ck_assert_msg(strstr(err, "unpacking layers"), "%s", err);
        ck_assert_msg(strstr(out, img->digest), "%s", out);
        free(out);
        free(err);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, &out, NULL, (const char *[]){"image", "ls", "--json", NULL}),
                0);
        ck_assert_msg(strstr(out, ref) && strstr(out, archive), "%s", out);
        free(out);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, &out, NULL, (const char *[]){"image", "inspect", ref, NULL}),
                0);
        ck_assert_msg(strstr(out, "\"GREETING=hi\"") && strstr(out, "\"working_dir\":\"/data\""),
                      "%s", out);
        free(out);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err,
                                (const char *[]){"image", "rm", "busybox:never-pulled", NULL}),
                         125);
        ck_assert_msg(strstr(err, "NOT_FOUND"), "%s", err);
        free(err);

        /* rm of one of two names keeps the image; prune takes the rest. */
        ck_assert_int_eq(sbx_image_remove(c, ref, &rm), SBX_OK);
        ck_assert_uint_eq(rm->names.n, 1);
        ck_assert_uint_eq(rm->freed_bytes, 0);
        sbx_removed_images_free(rm);
        ck_assert_int_eq(sbx_image_inspect(c, ref, &ins), SBX_NOT_FOUND);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, &out, NULL, (const char *[]){"image", "prune", "--json", NULL}),
                0);
        ck_assert_msg(strstr(out, archive) && strstr(out, "\"freed_bytes\":"), "%s", out);
        free(out);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 0);
        sbx_image_list_free(l);
        ck_assert_int_eq(trash_empties(&d), 0);
        sbx_image_free(img);
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

struct puller {
        struct it_daemon *d;
        const char *ref;
        enum sbx_code rc;
        char digest[80];
        char msg[512];
};

static void *pull_thread(void *arg) {
        struct puller *p = arg;
        struct sbx_image *img = NULL;
        sbx_client *c = NULL;

        if (sbx_connect(p->d->sock, "it_images", &c) != SBX_OK) {
                p->rc = SBX_UNAVAILABLE;
                sbx_close(c);
                return NULL;
        }
        p->rc = sbx_image_pull(c, p->ref, NULL, &img);
        snprintf(p->msg, sizeof(p->msg), "%s", sbx_error_message(c));
        if (img)
                snprintf(p->digest, sizeof(p->digest), "%s", img->digest);
        sbx_image_free(img);
        sbx_close(c);
        return NULL;
}

/* Two clients pull one image at once (the second arrives while the first is held in
 * its download by the gate): each blob is downloaded once, and both get the image. */
START_TEST(two_pulls_download_once) {
        struct it_daemon d;
        char *ref = ref_at(gate_port, "v1");
        struct puller a = {&d, ref, -1, "", ""}, b = {&d, ref, -1, "", ""};
        pthread_t ta, tb;

        gate_open(0);
        gate_reset();
        it_daemon_start(&d, group_flags);
        ck_assert_int_eq(pthread_create(&ta, NULL, pull_thread, &a), 0);
        wait_blob_gets(1); /* the first pull is in its download, held */
        ck_assert_int_eq(pthread_create(&tb, NULL, pull_thread, &b), 0);
        it_wait_requests(&d, SBX__V1__REQUEST__BODY_PULL_IMAGE, 2);
        gate_open(1);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        ck_assert_msg(a.rc == SBX_OK && b.rc == SBX_OK, "%s / %s", a.msg, b.msg);
        ck_assert_str_eq(a.digest, b.digest);
        /* The image's four layers and its config: five blobs, each fetched once. */
        ck_assert_int_eq(gate_blob_gets(), 5);
        free(ref);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A tag the registry does not have is NOT_FOUND naming the reference; a registry
 * nobody listens for is UNAVAILABLE with the reason, at once. */
START_TEST(missing_tag_and_unreachable_registry) {
        struct it_daemon d;
        struct sbx_image *img = NULL;
        char *ref = ref_at(reg_port, "nope"), *dead = ref_at(srv_free_port(), "v1");
        double t0;
        sbx_client *c;

        gate_open(1);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_pull(c, ref, NULL, &img), SBX_NOT_FOUND);
        ck_assert_msg(strstr(sbx_error_message(c), ref), "%s", sbx_error_message(c));
        t0 = it_now_ms();
        sbx_set_call_timeout_ms(c, 20000);
        ck_assert_int_eq(sbx_image_pull(c, dead, NULL, &img), SBX_UNAVAILABLE);
        ck_assert_msg(it_now_ms() - t0 < 15000, "took %.0f ms", it_now_ms() - t0);
        ck_assert_msg(strstr(sbx_error_message(c), "unreachable") &&
                              strstr(sbx_error_message(c), "refused"),
                      "%s", sbx_error_message(c));
        ck_assert_ptr_null(img);
        free(ref);
        free(dead);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Bad requests are refused before anything is opened or fetched. */
START_TEST(bad_requests_refused) {
        static const struct {
                const char *source;
                struct sbx_registry_auth auth;
                const char *words;
        } bad[] = {
                {"", {0}, "source is required"},
                {"Upper/Case:v1", {0}, "lowercase"},
                {"oci:relative/dir", {0}, "must be absolute"},
                {"oci-archive:/x.tar:", {0}, "is empty"},
                {"busybox:1", {"alice", NULL, NULL}, "both a username and a password"},
                {"busybox:1", {"alice", "pw", "tok"}, "a token and a username"},
        };
        struct it_daemon d;
        struct sbx_image *img = NULL;
        struct sbx_removed_images *rm = NULL;
        char *longcred = malloc(SBX_IMAGE_CREDENTIAL_MAX_BYTES + 2);
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct sbx_pull_opts po = {.auth = &bad[i].auth};
                enum sbx_code rc = sbx_image_pull(c, bad[i].source, &po, &img);
                ck_assert_msg(rc == SBX_INVALID_ARGUMENT &&
                                      strstr(sbx_error_message(c), bad[i].words),
                              "%s: %s: %s", bad[i].source, sbx_code_name(rc), sbx_error_message(c));
        }
        memset(longcred, 'a', SBX_IMAGE_CREDENTIAL_MAX_BYTES + 1);
        longcred[SBX_IMAGE_CREDENTIAL_MAX_BYTES + 1] = '\0';
        {
                struct sbx_registry_auth a = {NULL, NULL, longcred};
                struct sbx_pull_opts po = {.auth = &a};
                ck_assert_int_eq(sbx_image_pull(c, "busybox:1", &po, &img), SBX_INVALID_ARGUMENT);
                ck_assert_msg(strstr(sbx_error_message(c), "longer than 8192"), "%s",
                              sbx_error_message(c));
        }
        ck_assert_int_eq(sbx_image_remove(c, "", &rm), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_image_inspect(c, "Bad//Name", &img), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_image_remove(c, "busybox:never-pulled", &rm), SBX_NOT_FOUND);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL,
                                (const char *[]){"image", "pull", "--registry-auth", "nocolon",
                                                 "busybox", NULL}),
                         125);
        free(longcred);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* One user runs at most SBX_IMAGE_MAX_PULLS_PER_UID pulls at once: a third is refused
 * naming the bound, and goes through once one has ended. */
START_TEST(pulls_per_user_bounded) {
        struct it_daemon d;
        char *r1 = ref_at(gate_port, "v1"), *r2 = ref_at(gate_port, "v2"),
             *r3 = ref_at(gate_port, "v3");
        struct puller a = {&d, r1, -1, "", ""}, b = {&d, r2, -1, "", ""};
        struct sbx_image *img = NULL;
        pthread_t ta, tb;
        sbx_client *c;

        gate_open(0);
        gate_reset();
        it_daemon_start(&d, group_flags);
        ck_assert_int_eq(pthread_create(&ta, NULL, pull_thread, &a), 0);
        ck_assert_int_eq(pthread_create(&tb, NULL, pull_thread, &b), 0);
        wait_blob_gets(2); /* both in their downloads, held */
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_pull(c, r3, NULL, &img), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "(2)"), "%s", sbx_error_message(c));
        gate_open(1);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        ck_assert_msg(a.rc == SBX_OK && b.rc == SBX_OK, "%s / %s", a.msg, b.msg);
        img = pull_ok(c, r3);
        sbx_image_free(img);
        free(r1);
        free(r2);
        free(r3);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB's side of private_images_stay_private: arg is "NAME DIGEST ARCHIVE LAYOUT". */
static void bob_looks(struct it_daemon *d, const char *arg, struct report *r) {
        char name[700], digest[100], archive[700], layout[700];
        struct sbx_image_list *l = NULL;
        struct sbx_image *img = NULL;
        struct sbx_removed_images *rm = NULL;
        sbx_client *c = bob_connect(d, r);
        enum sbx_code rc;

        if (!c || sscanf(arg, "%699s %99s %699s %699s", name, digest, archive, layout) != 4)
                return;
        if (sbx_image_list(c, &l) == SBX_OK)
                say(r, "ls %zu\n", l->n);
        sbx_image_list_free(l);
        rc = sbx_image_inspect(c, name, &img);
        say(r, "inspect %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_inspect(c, digest, &img);
        say(r, "inspect-digest %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_remove(c, name, &rm);
        say(r, "rm %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_remove(c, digest, &rm);
        say(r, "rm-digest %s\n", sbx_code_name(rc));
        rc = sbx_image_inspect(c, "oci-archive:/nobody.tar", &img);
        say(r, "nobody %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_pull(c, archive, NULL, &img);
        say(r, "archive %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_pull(c, layout, NULL, &img);
        say(r, "layout %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        sbx_image_free(img);
        sbx_close(c);
}

/* The line of text that begins with word, without it (a static copy). */
static const char *line_of(const char *text, const char *word) {
        static char buf[1024];
        const char *p = strstr(text, word), *nl;

        if (!p)
                return "";
        p += strlen(word);
        nl = strchr(p, '\n');
        snprintf(buf, sizeof(buf), "%.*s", (int)(nl ? nl - p : (long)strlen(p)), p);
        return buf;
}

/* root imports an image from an archive only root may read: BOB does not see it (ls,
 * inspect and rm by name and by digest are NOT_FOUND with the words a name nobody used
 * gets), cannot import that archive (PERMISSION_DENIED), nor a layout whose index he
 * may read but whose blobs he may not (each file read with his rights). */
START_TEST(private_images_stay_private) {
        struct it_daemon d;
        struct sbx_image *img;
        char priv[800], name[820], layout[800], src[820], arg[3000], nobody[1024];
        const char *got;
        char *text;
        sbx_client *c;

        snprintf(priv, sizeof(priv), "%s/private.tar", imgdir);
        ck_assert_int_eq(srv_sh("cp %s/img.oci.tar %s && chmod 0600 %s", imgdir, priv, priv), 0);
        snprintf(layout, sizeof(layout), "%s/closed", imgdir);
        ck_assert_int_eq(
                srv_sh("cp -a %s/oci %s && chmod 0600 %s/blobs/sha256/*", imgdir, layout, layout),
                0);
        snprintf(name, sizeof(name), "oci-archive:%s", priv);
        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        img = pull_ok(c, name);
        snprintf(src, sizeof(src), "oci:%s:img", layout);
        snprintf(arg, sizeof(arg), "%s %s %s %s", name, img->digest, name, src);
        text = as_bob(bob_looks, &d, arg);
        ck_assert_msg(strstr(text, "ls 0\n"), "%s", text);
        /* What a name nobody used gets, with the name put in. */
        got = line_of(text, "nobody NOT_FOUND ");
        ck_assert_msg(got[0], "%s", text);
        snprintf(nobody, sizeof(nobody), "%s", got);
        for (char *p; (p = strstr(nobody, "oci-archive:/nobody.tar"));) {
                char rest[1024];
                snprintf(rest, sizeof(rest), "%s", p + strlen("oci-archive:/nobody.tar"));
                snprintf(p, sizeof(nobody) - (size_t)(p - nobody), "%s%s", name, rest);
        }
        ck_assert_str_eq(line_of(text, "inspect NOT_FOUND "), nobody);
        ck_assert_str_eq(line_of(text, "rm NOT_FOUND "), nobody);
        ck_assert_msg(strstr(text, "inspect-digest NOT_FOUND"), "%s", text);
        ck_assert_msg(strstr(text, "rm-digest NOT_FOUND"), "%s", text);
        ck_assert_msg(strstr(text, "archive PERMISSION_DENIED") && strstr(text, "may not read it"),
                      "%s", text);
        /* The layout's directory and index.json are his to read, its blobs are not. */
        ck_assert_msg(strstr(text, "layout PERMISSION_DENIED") && strstr(text, "blobs/sha256/"),
                      "%s", text);
        free(text);
        /* root's image is untouched. */
        sbx_image_free(img);
        ck_assert_int_eq(sbx_image_inspect(c, name, &img), SBX_OK);
        sbx_image_free(img);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A daemon SIGKILLed while a pull is in its download restarts with a consistent store:
 * no image, nothing left in tmp/, and the same pull then succeeds. */
START_TEST(killed_mid_pull_store_consistent) {
        struct it_daemon d;
        char *ref = ref_at(gate_port, "v1"), tmp[800], images[800];
        struct puller a = {&d, ref, -1, "", ""};
        struct sbx_image_list *l = NULL;
        struct sbx_image *img;
        pthread_t ta;
        sbx_client *c;

        gate_open(0);
        gate_reset();
        it_daemon_start(&d, group_flags);
        ck_assert_int_eq(pthread_create(&ta, NULL, pull_thread, &a), 0);
        wait_blob_gets(1);
        it_daemon_kill(&d);
        pthread_join(ta, NULL);
        ck_assert_int_ne(a.rc, SBX_OK);
        it_daemon_restart(&d, group_flags);
        snprintf(tmp, sizeof(tmp), "%s/images/tmp", d.state);
        snprintf(images, sizeof(images), "%s/images/images", d.state);
        ck_assert_int_eq(entries(tmp), 0);
        ck_assert_int_eq(entries(images), 0);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 0);
        sbx_image_list_free(l);
        gate_open(1);
        img = pull_ok(c, ref);
        ck_assert_int_eq(entries(images), 1);
        sbx_image_free(img);
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --max-image-size: an image larger is RESOURCE_EXHAUSTED naming the flag, from a
 * registry and from an archive, and nothing of it stays. */
START_TEST(max_image_size_refused) {
        static const char *const flags[] = {"--max-image-size", "1M", NULL};
        struct it_daemon d;
        struct sbx_image *img = NULL;
        char *ref = ref_at(reg_port, "v1"), archive[800], images[800];
        sbx_client *c;

        gate_open(1);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_pull(c, ref, NULL, &img), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "--max-image-size"), "%s", sbx_error_message(c));
        snprintf(archive, sizeof(archive), "docker-archive:%s/img.docker.tar", imgdir);
        ck_assert_int_eq(sbx_image_pull(c, archive, NULL, &img), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "--max-image-size"), "%s", sbx_error_message(c));
        snprintf(images, sizeof(images), "%s/images/images", d.state);
        ck_assert_int_eq(entries(images), 0);
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A private registry: refused without credentials or with wrong ones
 * (PERMISSION_DENIED), pulled with sbx's --registry-auth, with the user's own auth file
 * ($REGISTRY_AUTH_FILE, then ~/.docker/config.json), and through libsbx. */
START_TEST(private_registry_credentials) {
        struct it_daemon d;
        struct sbx_registry_auth good = {"alice", "secret", NULL}, bad = {"alice", "wrong", NULL};
        struct sbx_pull_opts po = {.auth = &bad};
        struct sbx_image *img = NULL;
        char *ref = ref_at(basic_port, "v1"), home[800], file[900], *err = NULL;
        sbx_client *c;

        /* "alice:secret" in base64, as docker login writes it. */
        snprintf(home, sizeof(home), "%s/home", it_base_dir());
        ck_assert_int_eq(srv_sh("mkdir -p %s/.docker && printf '{\"auths\":{\"127.0.0.1:%d\":"
                                "{\"auth\":\"YWxpY2U6c2VjcmV0\"}}}' > %s/.docker/config.json",
                                home, basic_port, home),
                         0);
        gate_open(1);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_pull(c, ref, NULL, &img), SBX_PERMISSION_DENIED);
        ck_assert_msg(strstr(sbx_error_message(c), "user name and password"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(sbx_image_pull(c, ref, &po, &img), SBX_PERMISSION_DENIED);
        po.auth = &good;
        ck_assert_int_eq(sbx_image_pull(c, ref, &po, &img), SBX_OK);
        sbx_image_free(img);
        ck_assert_int_eq(sbx_image_remove(c, ref, NULL), SBX_OK);

        setenv("HOME", "/nonexistent", 1);
        unsetenv("XDG_RUNTIME_DIR");
        unsetenv("REGISTRY_AUTH_FILE");
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, NULL, &err, (const char *[]){"image", "pull", ref, NULL}), 125);
        ck_assert_msg(strstr(err, "PERMISSION_DENIED"), "%s", err);
        free(err);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err,
                                (const char *[]){"image", "pull", "--registry-auth", "alice:secret",
                                                 ref, NULL}),
                         0);
        free(err);
        ck_assert_int_eq(sbx_image_remove(c, ref, NULL), SBX_OK);
        setenv("HOME", home, 1);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, NULL, &err, (const char *[]){"image", "pull", ref, NULL}), 0);
        free(err);
        ck_assert_int_eq(sbx_image_remove(c, ref, NULL), SBX_OK);
        snprintf(file, sizeof(file), "%s/.docker/config.json", home);
        setenv("HOME", "/nonexistent", 1);
        setenv("REGISTRY_AUTH_FILE", file, 1);
        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, NULL, &err, (const char *[]){"image", "pull", ref, NULL}), 0);
        free(err);
        ck_assert_int_eq(sbx_image_inspect(c, ref, &img), SBX_OK);
        sbx_image_free(img);
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client that goes away drops its interest: the pull it alone waited for stops while
 * held in its download (within the registry client's next transfer step), and leaves
 * nothing; an image for another architecture is INVALID_ARGUMENT naming the platform. */
START_TEST(client_gone_cancels_pull) {
        struct it_daemon d;
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__PullImage pi = SBX__V1__PULL_IMAGE__INIT;
        struct sbx_image_list *l = NULL;
        struct sbx_image *img = NULL;
        char *ref = ref_at(gate_port, "v2"), src[800];
        sbx_client *c;
        int fd;

        gate_open(0);
        gate_reset();
        it_daemon_start(&d, group_flags);
        fd = it_raw_connect(&d);
        pi.source = ref;
        req.request_id = 1;
        req.has_request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_PULL_IMAGE;
        req.pull_image = &pi;
        it_raw_send(fd, &req);
        wait_blob_gets(1);
        close(fd);
        ck_assert_int_eq(it_wait_log(&d, "pull cancelled", 1), 1);
        gate_open(1);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 0);
        sbx_image_list_free(l);
        snprintf(src, sizeof(src), "oci:%s/oci:armonly", imgdir);
        ck_assert_int_eq(sbx_image_pull(c, src, NULL, &img), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "linux/amd64"), "%s", sbx_error_message(c));
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --image-cache-size: after a pull, the least recently used image no sandbox uses goes
 * until the store fits, never the one just pulled (larger than the bound alone here). */
START_TEST(cache_bound_evicts_least_recently_used) {
        static const char *const flags[] = {"--image-cache-size", "1M", NULL};
        struct it_daemon d;
        struct sbx_image_list *l = NULL;
        struct sbx_image *a, *b;
        char oci[800], docker[800];
        sbx_client *c;

        snprintf(oci, sizeof(oci), "oci-archive:%s/img.oci.tar", imgdir);
        snprintf(docker, sizeof(docker), "docker-archive:%s/img.docker.tar", imgdir);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        a = pull_ok(c, oci);
        b = pull_ok(c, docker); /* another manifest, the same layers */
        ck_assert_str_ne(a->digest, b->digest);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_str_eq(l->v[0].digest, b->digest);
        sbx_image_list_free(l);
        ck_assert_int_eq(trash_empties(&d), 0);
        ck_assert_int_ge(it_log_count(&d, "entries: 1 least recently used"), 1);
        sbx_image_free(a);
        sbx_image_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The layers a pull reported reused (a bit each), as a string of 0 and 1, lowest first. */
static const char *reused_bits(const struct progress_seen *s, char *buf) {
        uint32_t i;

        for (i = 0; i < s->count && i < 16; i++)
                buf[i] = (s->reused >> i) & 1 ? '1' : '0';
        buf[i] = '\0';
        return buf;
}

/* A pull with progress: its code, its message, the layers reported reused. */
static enum sbx_code pull_seen(sbx_client *c, const char *ref, struct progress_seen *seen,
                               struct sbx_image **ret) {
        struct sbx_pull_opts po = {.on_progress = record_progress, .userdata = seen};

        memset(seen, 0, sizeof(*seen));
        return sbx_image_pull(c, ref, &po, ret);
}

/* BOB's side of repull_fetches_no_layer_blob: pulls arg; says its code, the layers
 * reported reused, his names of it and how many images he lists. */
static void bob_repulls(struct it_daemon *d, const char *arg, struct report *r) {
        struct progress_seen seen;
        struct sbx_image_list *l = NULL;
        struct sbx_image *img = NULL;
        sbx_client *c = bob_connect(d, r);
        char bits[17];
        enum sbx_code rc;

        if (!c)
                return;
        rc = pull_seen(c, arg, &seen, &img);
        say(r, "pull %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        say(r, "reused %s\n", reused_bits(&seen, bits));
        if (img)
                say(r, "names %zu %s\n", img->names.n, img->names.n ? img->names.v[0] : "");
        if (sbx_image_list(c, &l) == SBX_OK)
                say(r, "ls %zu\n", l->n);
        sbx_image_list_free(l);
        sbx_image_free(img);
        sbx_close(c);
}

/* Pushes "other" to the registry as test/other:v1: the test image with one more layer
 * (its four layers are the test image's, byte for byte). */
static void push_other(void) {
        ck_assert_msg(
                srv_sh("cd %s && rm -rf other t && cp -a oci other && mkdir -p t/x && "
                       "echo extra > t/x/extra && tar --numeric-owner -C t -cf extra.tar x && "
                       "umoci raw add-layer --image other:img --tag other extra.tar && "
                       "skopeo copy -q --insecure-policy --dest-tls-verify=false oci:other:other "
                       "docker://127.0.0.1:%d/test/other:v1 >>%s/skopeo.log 2>&1",
                       imgdir, reg_port, it_base_dir()) == 0,
                "building test/other:v1 (see %s/skopeo.log)", it_base_dir());
}

/* Layers the store holds are not downloaded again: another image on the same four
 * layers fetches its config and its one new layer; a new tag of the image, and the
 * image again after its names were removed (the other image keeping its layers), fetch
 * its config alone, as does BOB's pull of it, which gives him a name of his own and
 * root none of his. Progress says which layers were reused. */
START_TEST(repull_fetches_no_layer_blob) {
        struct it_daemon d;
        struct progress_seen seen;
        struct sbx_image *img = NULL, *first;
        struct sbx_image_list *l = NULL;
        struct sbx_removed_images *rm = NULL;
        char *v1 = ref_at(gate_port, "v1"), *v2 = ref_at(gate_port, "v2"), *other, bits[17];
        char *text;
        sbx_client *c;

        ck_assert_int_ge(asprintf(&other, "127.0.0.1:%d/test/other:v1", gate_port), 0);
        push_other();
        gate_open(1);
        gate_reset();
        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        first = pull_ok(c, v1);
        ck_assert_int_eq(gate_blob_gets(), 5); /* the config and four layers */

        gate_reset();
        ck_assert_msg(pull_seen(c, other, &seen, &img) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_str_eq(reused_bits(&seen, bits), "11110");
        ck_assert_int_eq(gate_blob_gets(), 2); /* its config and its new layer */
        ck_assert_str_ne(img->digest, first->digest);
        sbx_image_free(img);

        gate_reset();
        ck_assert_msg(pull_seen(c, v2, &seen, &img) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_str_eq(reused_bits(&seen, bits), "1111");
        ck_assert_int_eq(gate_blob_gets(), 1);
        ck_assert_str_eq(img->digest, first->digest);
        ck_assert_uint_lt(img->downloaded_bytes, 4096); /* a config */
        sbx_image_free(img);

        /* Its names removed, the image is gone; its layers stay, the other image's. */
        ck_assert_int_eq(sbx_image_remove(c, v1, &rm), SBX_OK);
        sbx_removed_images_free(rm);
        ck_assert_int_eq(sbx_image_remove(c, v2, &rm), SBX_OK);
        sbx_removed_images_free(rm);
        ck_assert_int_eq(sbx_image_inspect(c, first->digest, &img), SBX_NOT_FOUND);
        gate_reset();
        ck_assert_msg(pull_seen(c, v1, &seen, &img) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_str_eq(reused_bits(&seen, bits), "1111");
        ck_assert_int_eq(gate_blob_gets(), 1);
        ck_assert_str_eq(img->digest, first->digest);
        sbx_image_free(img);

        /* BOB: his own name of the image, no layer fetched. */
        gate_reset();
        text = as_bob(bob_repulls, &d, v1);
        ck_assert_msg(strstr(text, "pull OK") && strstr(text, "reused 1111\n") &&
                              strstr(text, "ls 1\n"),
                      "%s", text);
        ck_assert_msg(strstr(text, "names 1 ") && strstr(line_of(text, "names 1 "), v1), "%s",
                      text);
        free(text);
        ck_assert_int_eq(gate_blob_gets(), 1);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 2); /* root's two, BOB's name not among root's */
        for (size_t i = 0; i < l->n; i++)
                ck_assert_uint_eq(l->v[i].names.n, 1);
        sbx_image_list_free(l);
        sbx_image_free(first);
        free(v1);
        free(v2);
        free(other);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A layout of two layers of 600 empty files each (tests/mkhostile.sh --entries), from a
 * directory and from the registry, under --max-image-entries 1000: RESOURCE_EXHAUSTED
 * naming the bound and the flag, and nothing of it stays in the store (the first
 * layer, unpacked, goes too); with 2000 it is pulled. */
START_TEST(max_image_entries_refused) {
        static const char *const flags[] = {"--max-image-entries", "1000", NULL};
        static const char *const more[] = {"--max-image-entries", "2000", NULL};
        struct it_daemon d;
        struct sbx_image *img = NULL;
        char many[800], src[900], dir[800], *ref;
        const char *what[2];
        sbx_client *c;

        snprintf(many, sizeof(many), "%s/many", it_base_dir());
        ck_assert_int_eq(mkdir(many, 0755), 0);
        ck_assert_msg(
                srv_sh("bash tests/mkhostile.sh --entries %s 600 >%s/many.log 2>&1 && "
                       "skopeo copy -q --insecure-policy --dest-tls-verify=false "
                       "oci:%s/oci:many docker://127.0.0.1:%d/test/many:v1 >>%s/many.log 2>&1",
                       many, it_base_dir(), many, reg_port, it_base_dir()) == 0,
                "tests/mkhostile.sh --entries (see %s/many.log)", it_base_dir());
        snprintf(src, sizeof(src), "oci:%s/oci:many", many);
        ck_assert_int_ge(asprintf(&ref, "127.0.0.1:%d/test/many:v1", reg_port), 0);
        what[0] = src;
        what[1] = ref;
        gate_open(1);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        for (int i = 0; i < 2; i++) {
                const char *m;
                ck_assert_int_eq(sbx_image_pull(c, what[i], NULL, &img), SBX_RESOURCE_EXHAUSTED);
                m = sbx_error_message(c);
                ck_assert_msg(strstr(m, "--max-image-entries is 1000") && strstr(m, "398 entries"),
                              "%s", m);
                ck_assert_int_eq(trash_empties(&d), 0);
                for (int k = 0; k < 4; k++) {
                        static const char *const sub[] = {"images", "layers", "tmp",
                                                          "blobs/sha256"};
                        snprintf(dir, sizeof(dir), "%s/images/%s", d.state, sub[k]);
                        ck_assert_msg(entries(dir) == 0, "%s: %d left", sub[k], entries(dir));
                }
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_start(&d, more);
        c = it_connect(&d);
        img = pull_ok(c, src);
        ck_assert_uint_eq(img->layers.n, 2);
        sbx_image_free(img);
        free(ref);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The cache's bound in entries, derived: with --image-cache-size equal to
 * --max-image-size it is --max-image-entries (1000). Two images of 2 x 400 and 2 x 401
 * empty files (804 and 806 entries) are within it each; pulling the second removes the
 * first, though the bytes are far within --image-cache-size. */
START_TEST(cache_bound_counts_entries) {
        static const char *const flags[] = {
                "--max-image-entries", "1000", "--max-image-size", "1G", "--image-cache-size", "1G",
                NULL};
        struct it_daemon d;
        struct sbx_image_list *l = NULL;
        struct sbx_image *a, *b;
        char src[2][900];
        sbx_client *c;

        for (int i = 0; i < 2; i++) {
                char dir[800];
                snprintf(dir, sizeof(dir), "%s/few%d", it_base_dir(), i);
                ck_assert_int_eq(mkdir(dir, 0755), 0);
                ck_assert_msg(srv_sh("bash tests/mkhostile.sh --entries %s %d >%s/few.log 2>&1",
                                     dir, 400 + i, it_base_dir()) == 0,
                              "tests/mkhostile.sh --entries (see %s/few.log)", it_base_dir());
                snprintf(src[i], sizeof(src[i]), "oci:%s/oci:many", dir);
        }
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        a = pull_ok(c, src[0]);
        b = pull_ok(c, src[1]);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_str_eq(l->v[0].digest, b->digest);
        ck_assert_uint_lt(l->v[0].size_bytes, 1u << 20);
        sbx_image_list_free(l);
        ck_assert_int_ge(it_log_count(&d, "bound of 1000 entries: 1 least recently used"), 1);
        ck_assert_int_eq(trash_empties(&d), 0);
        sbx_image_free(a);
        sbx_image_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB's side of image_sandboxes_counted_per_caller: arg is "SOURCE"; pulls it (once)
 * and says the sandboxes count his list shows of it. */
static void bob_counts(struct it_daemon *d, const char *arg, struct report *r) {
        struct sbx_image_list *l = NULL;
        struct sbx_image *img = NULL;
        sbx_client *c = bob_connect(d, r);
        enum sbx_code rc;

        if (!c)
                return;
        rc = sbx_image_pull(c, arg, NULL, &img);
        say(r, "pull %s %s\n", sbx_code_name(rc), sbx_error_message(c));
        sbx_image_free(img);
        if (sbx_image_list(c, &l) == SBX_OK && l->n == 1)
                say(r, "sandboxes %u\n", l->v[0].sandboxes);
        sbx_image_list_free(l);
        sbx_close(c);
}

/* A sandbox from src for c, shared with share (0: with nobody): its id. */
static char *create_from(sbx_client *c, const char *src, uint32_t share) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        char *id;

        sbx_create_opts_init(&o);
        o.image = src;
        o.share_uids = &share;
        o.n_share_uids = share ? 1 : 0;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        id = strdup(sb->id);
        sbx_sandbox_free(sb);
        return id;
}

/* root and BOB pulled one image: the sandboxes count of each one's list is of the
 * sandboxes they may use, never another user's: root's one sandbox of it is 0 for BOB
 * (1 for root); a second one shared with BOB makes it 1 for him, 2 for root. */
START_TEST(image_sandboxes_counted_per_caller) {
        struct it_daemon d;
        struct sbx_image_list *l = NULL;
        struct sbx_image *img;
        char src[800], *text, *a, *b;
        sbx_client *c;

        snprintf(src, sizeof(src), "oci:%s/oci:img", imgdir);
        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        img = pull_ok(c, src);
        sbx_image_free(img);
        a = create_from(c, src, 0);
        text = as_bob(bob_counts, &d, src);
        ck_assert_msg(strstr(text, "pull OK") && strstr(text, "sandboxes 0\n"), "%s", text);
        free(text);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_uint_eq(l->v[0].sandboxes, 1);
        sbx_image_list_free(l);
        b = create_from(c, src, BOB);
        text = as_bob(bob_counts, &d, src);
        ck_assert_msg(strstr(text, "sandboxes 1\n"), "%s", text);
        free(text);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->v[0].sandboxes, 2);
        sbx_image_list_free(l);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("images");
        TCase *tc = tcase_create("images");

        tcase_add_unchecked_fixture(tc, fixture_up, fixture_down);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, pull_ls_inspect_rm_prune);
        tcase_add_test(tc, two_pulls_download_once);
        tcase_add_test(tc, missing_tag_and_unreachable_registry);
        tcase_add_test(tc, bad_requests_refused);
        tcase_add_test(tc, pulls_per_user_bounded);
        tcase_add_test(tc, private_images_stay_private);
        tcase_add_test(tc, killed_mid_pull_store_consistent);
        tcase_add_test(tc, max_image_size_refused);
        tcase_add_test(tc, private_registry_credentials);
        tcase_add_test(tc, client_gone_cancels_pull);
        tcase_add_test(tc, cache_bound_evicts_least_recently_used);
        tcase_add_test(tc, repull_fetches_no_layer_blob);
        tcase_add_test(tc, max_image_entries_refused);
        tcase_add_test(tc, cache_bound_counts_entries);
        tcase_add_test(tc, image_sandboxes_counted_per_caller);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
