/* check_registry.c: the Check suite of daemon/registry.c (and ociwrite.c) against real
 * registries on loopback: the Distribution registry (docker-registry, open and with
 * htpasswd Basic auth) holding images built here with umoci (tests/registry_images.sh)
 * and pushed with skopeo, and tests/registry_fake.py, a registry that asks for Bearer
 * tokens, lies about blobs and manifests, redirects and stalls.
 *
 * The registries start once, in the unchecked fixture (the runner's process), on free
 * ports of 127.0.0.1; each test then runs in a process of its own and pulls into a
 * directory of its own under the fixture's. The teardown stops every server by its pid
 * and removes the directory, whether the tests passed or not. Run from the top of the
 * tree (the scripts are read from tests/). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "digest.h"
#include "imageref.h"
#include "registry.h"
#include "servers.h"
#include "testutil.h"

static char work[256];
static pid_t open_pid = -1, basic_pid = -1, token_pid = -1, tokensrv_pid = -1, fake_pid = -1;
static int open_port, basic_port, token_port, tokensrv_port, fake_port;

/* ---- the fixture -------------------------------------------------------------------- */

static void fixture_down(void) {
        srv_stop(&open_pid);
        srv_stop(&basic_pid);
        srv_stop(&token_pid);
        srv_stop(&tokensrv_pid);
        srv_stop(&fake_pid);
        test_dir_remove(work);
}

/* Fails the fixture after cleaning up (a failed unchecked fixture runs no teardown). */
static void need(int ok, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        if (ok)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fixture_down();
        ck_abort_msg("%s", msg);
}

/* Starts docker-registry NAME on a free port, with auth (YAML of its auth section, or
 * NULL). */
static void start_registry(const char *name, const char *auth, pid_t *pid, int *port) {
        char cfg[1024], log[1024];
        int tries;

        for (tries = 0; tries < 5 && *pid <= 0; tries++) {
                FILE *f;
                snprintf(cfg, sizeof(cfg), "%s/%s.yml", work, name);
                snprintf(log, sizeof(log), "%s/%s.log", work, name);
                *port = srv_free_port();
                f = fopen(cfg, "w");
                need(f != NULL, "%s", cfg);
                fprintf(f,
                        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                        "    rootdirectory: %s/%s-storage\nhttp:\n  addr: 127.0.0.1:%d\n",
                        work, name, *port);
                if (auth)
                        fprintf(f, "auth:\n%s", auth);
                fclose(f);
                *pid = srv_spawn(log, (char *const[]){"docker-registry", "serve", cfg, NULL});
                if (!srv_wait_listening(*port, *pid)) /* the port was taken meanwhile: again */
                        srv_stop(pid);
        }
        need(*pid > 0, "docker-registry %s does not start (see %s)", name, log);
}

/* Starts the Python server script with two arguments and a third, WORK/NAME.port, where
 * it writes its port once it listens; reads that port. */
static pid_t start_script(const char *name, char *script, char *arg1, char *arg2, int *port) {
        char portf[1024], out[1024];
        double end = srv_now_s() + 20;
        FILE *f = NULL;
        pid_t pid;

        snprintf(portf, sizeof(portf), "%s/%s.port", work, name);
        snprintf(out, sizeof(out), "%s/%s.log", work, name);
        pid = srv_spawn(out, (char *const[]){"python3", script, arg1, arg2, portf, NULL});
        while (!(f = fopen(portf, "r")) && srv_now_s() < end && waitpid(pid, NULL, WNOHANG) == 0)
                usleep(50000);
        need(f && fscanf(f, "%d", port) == 1, "%s does not start (see %s)", script, out);
        fclose(f);
        return pid;
}

static void start_fake(void) {
        char layout[1024], log[1024];

        snprintf(layout, sizeof(layout), "%s/layout", work);
        snprintf(log, sizeof(log), "%s/fake.requests", work);
        fake_pid = start_script("fake", "tests/registry_fake.py", layout, log, &fake_port);
}

/* The token server (a key and a self-signed certificate made here) and the registry
 * that trusts it. */
static void start_token_registry(void) {
        char key[1024], cert[1024], auth[2048];

        snprintf(key, sizeof(key), "%s/token-key.pem", work);
        snprintf(cert, sizeof(cert), "%s/token-cert.pem", work);
        need(srv_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 "
                "-subj /CN=sbx-test-token >/dev/null 2>&1",
                key, cert) == 0,
             "openssl cannot make the token server's key");
        tokensrv_pid =
                start_script("tokensrv", "tests/registry_token.py", key, cert, &tokensrv_port);
        snprintf(auth, sizeof(auth),
                 "  token:\n    realm: http://127.0.0.1:%d/token\n    service: sbx-test\n"
                 "    issuer: sbx-test\n    rootcertbundle: %s\n",
                 tokensrv_port, cert);
        start_registry("token", auth, &token_pid, &token_port);
}

static void push(const char *tag, int port, const char *repo, const char *extra) {
        need(srv_sh("skopeo copy --insecure-policy --dest-tls-verify=false %s oci:%s/layout:%s "
                "docker://127.0.0.1:%d/%s >>%s/skopeo.log 2>&1",
                extra, work, tag, port, repo, work) == 0,
             "skopeo copy %s to %s (see %s/skopeo.log)", tag, repo, work);
}

static void fixture_up(void) {
        char htpasswd[1024];

        need(access("tests/registry_images.sh", R_OK) == 0, "run from the top of the tree");
        test_dir_make(work, sizeof(work), "check_registry");
        need(srv_sh("sh tests/registry_images.sh %s >%s/images.log 2>&1", work, work) == 0,
             "registry_images.sh failed (see %s/images.log)", work);
        need(srv_sh("python3 -W ignore -c \"import crypt; print('alice:' + crypt.crypt('secret', "
                "crypt.mksalt(crypt.METHOD_BLOWFISH)))\" > %s/htpasswd",
                work) == 0,
             "no bcrypt htpasswd");
        snprintf(htpasswd, sizeof(htpasswd),
                 "  htpasswd:\n    realm: test\n    path: %s/htpasswd\n", work);
        start_registry("open", NULL, &open_pid, &open_port);
        start_registry("basic", htpasswd, &basic_pid, &basic_port);
        start_token_registry();
        start_fake();
        push("single", open_port, "test/single:v1", "");
        push("big", open_port, "test/big:v1", "");
        push("multi", open_port, "test/multi:v1", "--all");
        push("foreign", open_port, "test/foreign:v1", "--all");
        push("single", open_port, "test/single:v2", "");
        push("single", open_port, "test/docker:v1", "--format v2s2");
        push("multi", open_port, "test/dlist:v1", "--all --format v2s2");
        push("single", basic_port, "test/single:v1", "--dest-creds alice:secret");
        push("single", token_port, "test/single:v1", "--dest-creds alice:secret");
        push("single", token_port, "private/single:v1", "--dest-creds alice:secret");
}

/* ---- helpers of the tests ----------------------------------------------------------- */

/* A fresh destination directory under the fixture's. */
static void new_dest(char *dest, size_t len) {
        snprintf(dest, len, "%s/dest.XXXXXX", work);
        ck_assert_ptr_nonnull(mkdtemp(dest));
}

/* The digest tests/registry_images.sh wrote for tag. */
static void layout_digest(const char *tag, char out[DIGEST_STR_BYTES]) {
        char path[1024];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s.digest", work, tag);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(out, DIGEST_STR_BYTES, f));
        fclose(f);
        ck_assert(digest_parse(out, NULL));
}

/* A pull of "127.0.0.1:PORT/NAME" into dest with the defaults; *p may be adjusted by the
 * caller first when given (its ref and dest_dir are set here). */
static int pull_with(struct registry_pull *p, int port, const char *name, const char *dest,
                     struct registry_result *res, char *err, size_t errlen) {
        static struct imageref ref;
        char s[400];

        snprintf(s, sizeof(s), "127.0.0.1:%d/%s", port, name);
        ck_assert_msg(imageref_parse(s, &ref, err, errlen) == 0, "%s", err);
        p->ref = &ref;
        p->dest_dir = dest;
        if (!p->max_total_bytes)
                p->max_total_bytes = 1ull << 30;
        err[0] = '\0';
        return registry_pull(p, res, err, errlen);
}

static int pull(int port, const char *name, const char *dest, struct registry_result *res,
                char *err, size_t errlen) {
        struct registry_pull p = {0};
        return pull_with(&p, port, name, dest, res, err, errlen);
}

#define EXPECT(r, want, err, text)                                                                 \
        do {                                                                                       \
                ck_assert_msg((r) == (want), "got %d (%s), not %d", (r), (err), (want));           \
                ck_assert_msg(strstr((err), (text)), "\"%s\" lacks \"%s\"", (err), (text));        \
        } while (0)

/* Every file of dest/blobs/sha256 is named by its content's digest, no temporary file is
 * left; returns how many there are. */
static int blobs_all_good(const char *dest) {
        char dir[1024];
        struct dirent *e;
        DIR *d;
        int n = 0;

        snprintf(dir, sizeof(dir), "%s/blobs/sha256", dest);
        d = opendir(dir);
        if (!d)
                return 0;
        while ((e = readdir(d))) {
                char got[DIGEST_STR_BYTES];
                int fd;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                ck_assert_msg(e->d_name[0] != '.', "a temporary file is left: %s", e->d_name);
                fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(digest_fd(fd, got, NULL), 0);
                close(fd);
                ck_assert_str_eq(got + 7, e->d_name);
                n++;
        }
        closedir(d);
        return n;
}

static int has_blob(const char *dest, const char *digest) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/blobs/sha256/%s", dest, digest + 7);
        return access(path, F_OK) == 0;
}

/* The ref.name of index.json's entry for digest ("" for none), or NULL without one. */
static const char *index_name(const char *dest, const char *digest) {
        static char name[256];
        char path[1024];
        json_t *j, *e;
        size_t i;
        const char *found = NULL;

        snprintf(path, sizeof(path), "%s/index.json", dest);
        j = json_load_file(path, 0, NULL);
        json_array_foreach(json_object_get(j, "manifests"), i, e) {
                const char *d = json_string_value(json_object_get(e, "digest"));
                const char *n = json_string_value(json_object_get(
                        json_object_get(e, "annotations"), "org.opencontainers.image.ref.name"));
                if (d && strcmp(d, digest) == 0) {
                        snprintf(name, sizeof(name), "%s", n ? n : "");
                        found = name;
                }
        }
        json_decref(j);
        return found;
}

/* ---- the tests ---------------------------------------------------------------------- */

static struct registry_progress events[64];
static char event_digests[64][DIGEST_STR_BYTES];
static int n_events;

static void record(void *opaque, const struct registry_progress *p) {
        (void)opaque;
        if (n_events < 64) {
                events[n_events] = *p;
                snprintf(event_digests[n_events], DIGEST_STR_BYTES, "%s", p->digest);
                n_events++;
        }
}

START_TEST(pull_by_tag_gives_a_valid_layout) {
        struct registry_pull p = {.progress = record};
        struct registry_result res;
        char dest[400], err[512], want[DIGEST_STR_BYTES];
        unsigned layer_done[3] = {0};
        int r, i;

        new_dest(dest, sizeof(dest));
        layout_digest("single", want);
        r = pull_with(&p, open_port, "test/single:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_str_eq(res.manifest_digest, want);
        ck_assert_uint_eq(res.layers, 3);
        ck_assert_uint_eq(res.reused_bytes, 0);
        ck_assert_uint_gt(res.downloaded_bytes, 0);
        ck_assert_int_eq(blobs_all_good(dest), 5); /* manifest, config, 3 layers */
        ck_assert_str_eq(index_name(dest, want), "v1");
        /* what umoci and skopeo, which read OCI layouts, make of it */
        ck_assert_int_eq(srv_sh("umoci unpack --image %s:v1 %s/bundle >/dev/null 2>&1", dest, dest), 0);
        ck_assert_int_eq(srv_sh("grep -qx two %s/bundle/rootfs/two && grep -qx conf "
                            "%s/bundle/rootfs/etc-dir/conf",
                            dest, dest),
                         0);
        ck_assert_int_eq(srv_sh("skopeo inspect oci:%s:v1 >/dev/null 2>&1", dest), 0);
        /* progress: per layer, from 0 to its size, in order, none reused */
        ck_assert_int_ge(n_events, 6);
        for (i = 0; i < n_events; i++) {
                ck_assert_uint_eq(events[i].count, 3);
                ck_assert_uint_lt(events[i].index, 3);
                ck_assert_int_eq(events[i].reused, 0);
                ck_assert_uint_le(events[i].done_bytes, events[i].total_bytes);
                if (i > 0)
                        ck_assert_uint_ge(events[i].index, events[i - 1].index);
                if (events[i].done_bytes == events[i].total_bytes)
                        layer_done[events[i].index]++;
        }
        ck_assert_uint_eq(events[0].done_bytes, 0);
        for (i = 0; i < 3; i++)
                ck_assert_uint_eq(layer_done[i], 1);
}
END_TEST

START_TEST(pull_by_digest) {
        struct registry_result res;
        char dest[400], err[512], want[DIGEST_STR_BYTES], name[300];
        int r;

        new_dest(dest, sizeof(dest));
        layout_digest("single", want);
        snprintf(name, sizeof(name), "test/single@%s", want);
        r = pull(open_port, name, dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_str_eq(res.manifest_digest, want);
        ck_assert_str_eq(index_name(dest, want), ""); /* no tag: no ref.name */
        /* a tag beside the digest: the digest decides, the tag names it */
        snprintf(name, sizeof(name), "test/single:other@%s", want);
        ck_assert_msg(pull(open_port, name, dest, &res, err, sizeof(err)) == 0, "%s", err);
        ck_assert_str_eq(index_name(dest, want), "other");
        /* the digest of nothing there */
        snprintf(name, sizeof(name), "test/single@sha256:%064d", 0);
        r = pull(open_port, name, dest, &res, err, sizeof(err));
        EXPECT(r, -ENOENT, err, "manifest not found");
}
END_TEST

START_TEST(index_selects_the_platform) {
        struct registry_pull p = {.arch = "arm64"};
        struct registry_result res;
        char dest[400], err[512], want[DIGEST_STR_BYTES];
        const char *arch, *variant;
        int r;

        new_dest(dest, sizeof(dest));
        registry_machine_platform(&arch, &variant);
        r = pull(open_port, "test/multi:v1", dest, &res, err, sizeof(err));
        if (strcmp(arch, "amd64") == 0 || strcmp(arch, "arm64") == 0) {
                layout_digest(arch, want);
                ck_assert_msg(r == 0, "%s", err);
                ck_assert_str_eq(res.manifest_digest, want);
                ck_assert_str_eq(index_name(dest, want), "v1");
                ck_assert_int_eq(srv_sh("umoci unpack --image %s:v1 %s/b >/dev/null 2>&1 && "
                                    "grep -qx %s %s/b/rootfs/arch",
                                    dest, dest, arch, dest),
                                 0);
        } else {
                EXPECT(r, -ENOEXEC, err, "linux/arm64");
        }
        /* the caller's platform */
        layout_digest("arm64", want);
        r = pull_with(&p, open_port, "test/multi:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_str_eq(res.manifest_digest, want);
        /* variants: arm64/v8 is arm64, arm64/v9 is not there */
        p = (struct registry_pull){.arch = "arm64", .variant = "v8"};
        ck_assert_int_eq(pull_with(&p, open_port, "test/multi:v1", dest, &res, err, sizeof(err)),
                         0);
        p = (struct registry_pull){.arch = "arm", .variant = "v7"};
        r = pull_with(&p, open_port, "test/multi:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -ENOEXEC, err, "no image for linux/arm/v7");
}
END_TEST

/* Docker schema 2 manifests and manifest lists are kept byte for byte, with their own
 * media types (their digests are the registry's). */
START_TEST(docker_schema2_kept_as_is) {
        struct registry_pull p = {.arch = "arm64"};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(open_port, "test/docker:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_str_eq(res.media_type, "application/vnd.docker.distribution.manifest.v2+json");
        ck_assert_uint_eq(res.layers, 3);
        ck_assert_str_eq(index_name(dest, res.manifest_digest), "v1");
        ck_assert_int_eq(blobs_all_good(dest), 5);
        r = pull_with(&p, open_port, "test/dlist:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_str_eq(res.media_type, "application/vnd.docker.distribution.manifest.v2+json");
        ck_assert_int_eq(srv_sh("grep -q arm64 %s/blobs/sha256/%s", dest, res.config_digest + 7), 0);
}
END_TEST

START_TEST(index_without_this_platform_is_refused) {
        struct registry_pull p = {.arch = "amd64"};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull_with(&p, open_port, "test/foreign:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -ENOEXEC, err, "no image for linux/amd64");
        ck_assert_msg(strstr(err, "linux/arm64, linux/s390x"), "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

START_TEST(second_pull_reuses_blobs) {
        struct registry_pull p = {.progress = record};
        struct registry_result res, first;
        char dest[400], dest2[400], err[512], path[600];
        int i, fd;

        new_dest(dest, sizeof(dest));
        ck_assert_msg(pull(open_port, "test/single:v1", dest, &first, err, sizeof(err)) == 0, "%s",
                      err);
        /* the same destination: nothing downloaded, every layer said to be reused */
        n_events = 0;
        ck_assert_msg(pull_with(&p, open_port, "test/single:v1", dest, &res, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_uint_eq(res.downloaded_bytes, 0);
        ck_assert_uint_eq(res.reused_bytes, first.downloaded_bytes);
        ck_assert_int_eq(n_events, 3);
        for (i = 0; i < 3; i++)
                ck_assert(events[i].reused && events[i].done_bytes == events[i].total_bytes);
        /* another destination, with the first one's blobs to reuse */
        new_dest(dest2, sizeof(dest2));
        snprintf(path, sizeof(path), "%s/blobs", dest);
        p = (struct registry_pull){.reuse_blobs = path};
        ck_assert_msg(pull_with(&p, open_port, "test/single:v1", dest2, &res, err, sizeof(err)) ==
                              0,
                      "%s", err);
        ck_assert_uint_eq(res.downloaded_bytes, 0);
        ck_assert_int_eq(blobs_all_good(dest2), 5);
        /* a blob there that is not what its name says is downloaded again */
        snprintf(path, sizeof(path), "%s/blobs/sha256/%.64s", dest2, event_digests[1] + 7);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "X", 1, 0), 1);
        close(fd);
        ck_assert_msg(pull(open_port, "test/single:v1", dest2, &res, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert_uint_eq(res.downloaded_bytes, events[1].total_bytes);
        ck_assert_int_eq(blobs_all_good(dest2), 5);
}
END_TEST

static volatile int cancel_flag;
static uint64_t cancelled_at, cancelled_total;
static char cancelled_digest[DIGEST_STR_BYTES];

static void cancel_mid_blob(void *opaque, const struct registry_progress *p) {
        (void)opaque;
        if (!cancel_flag && p->done_bytes >= (1u << 20) && p->done_bytes < p->total_bytes) {
                cancelled_at = p->done_bytes;
                cancelled_total = p->total_bytes;
                snprintf(cancelled_digest, sizeof(cancelled_digest), "%s", p->digest);
                cancel_flag = 1;
        }
}

START_TEST(cancel_mid_blob_leaves_nothing_half_written) {
        struct registry_pull p = {.progress = cancel_mid_blob, .cancel = &cancel_flag};
        struct registry_result res;
        char dest[400], err[512], path[500];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull_with(&p, open_port, "test/big:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -ECANCELED, err, "cancelled");
        ck_assert_int_eq(cancel_flag, 1);
        ck_assert_uint_lt(cancelled_at, cancelled_total); /* it was mid-blob */
        ck_assert(!has_blob(dest, cancelled_digest));
        blobs_all_good(dest); /* only whole blobs (the config), no temporary file */
        snprintf(path, sizeof(path), "%s/index.json", dest);
        ck_assert_int_ne(access(path, F_OK), 0);
        /* and the next pull completes */
        cancel_flag = 0;
        p.cancel = NULL;
        ck_assert_msg(pull_with(&p, open_port, "test/big:v1", dest, &res, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert(has_blob(dest, cancelled_digest));
}
END_TEST

START_TEST(basic_auth) {
        struct registry_pull p = {.username = "alice", .password = "secret"};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(basic_port, "test/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "asks for a user name and password");
        p.password = "wrong";
        r = pull_with(&p, basic_port, "test/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "unauthorized");
        ck_assert_int_eq(blobs_all_good(dest), 0);
        p.password = "secret";
        r = pull_with(&p, basic_port, "test/single:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
}
END_TEST

START_TEST(bearer_token_handshake) {
        struct registry_pull p = {.username = "alice", .password = "secret"};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        /* anonymous token */
        r = pull(fake_port, "auth/img:single", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
        /* a token only for credentials */
        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "private/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "refused anonymous access");
        p.password = "wrong";
        r = pull_with(&p, fake_port, "private/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "refused the credentials");
        p.password = "secret";
        r = pull_with(&p, fake_port, "private/img:single", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
        /* tokens that expire after two requests: each 401 is answered again */
        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "expiring/img:single", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
        /* a token server's answer past its bound; a token that would inject a header */
        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "bigtoken/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EFBIG, err, "larger than 65536 bytes");
        r = pull(fake_port, "crlftoken/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "no token from");
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

/* The same handshake against docker-registry itself, with tokens of registry_token.py. */
START_TEST(bearer_token_with_docker_registry) {
        struct registry_pull p = {.username = "alice", .password = "secret"};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(token_port, "test/single:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
        new_dest(dest, sizeof(dest));
        r = pull(token_port, "private/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "unauthorized");
        p.password = "wrong";
        r = pull_with(&p, token_port, "private/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EACCES, err, "refused the credentials");
        ck_assert_int_eq(blobs_all_good(dest), 0);
        p.password = "secret";
        r = pull_with(&p, token_port, "private/single:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
}
END_TEST

START_TEST(lying_blobs_are_refused) {
        static const char *const liars[] = {"liar/img:single", "long/img:single",
                                            "short/img:single"};
        static const char *const why[] = {"its content has digest", "more bytes than its size",
                                          "not its size"};
        struct registry_result res;
        char dest[400], err[512], config[DIGEST_STR_BYTES];
        size_t i;

        for (i = 0; i < 3; i++) {
                int r;
                new_dest(dest, sizeof(dest));
                r = pull(fake_port, liars[i], dest, &res, err, sizeof(err));
                EXPECT(r, -EBADMSG, err, why[i]);
                /* the message names the blob (the config comes first), none is kept */
                ck_assert_int_eq(sscanf(err, "blob %71s", config), 1);
                config[DIGEST_STR_BYTES - 1] = '\0';
                ck_assert(digest_parse(config, NULL));
                ck_assert(!has_blob(dest, config));
                ck_assert_int_eq(blobs_all_good(dest), 0);
        }
}
END_TEST

START_TEST(bounds_on_manifests_and_size) {
        struct registry_pull p = {.max_total_bytes = 2000};
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "bigmanifest/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EFBIG, err, "larger than 4194304 bytes");
        r = pull(fake_port, "manylayers/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EFBIG, err, "129 layers, more than 128");
        /* single is about 1.9 KB: 2000 bytes hold it, 1000 do not, and nothing is fetched */
        r = pull_with(&p, open_port, "test/single:v1", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        new_dest(dest, sizeof(dest));
        p = (struct registry_pull){.max_total_bytes = 1000};
        r = pull_with(&p, open_port, "test/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EFBIG, err, "more than the bound of 1000");
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

START_TEST(schema1_and_artifacts_are_refused) {
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "schema1/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EPROTONOSUPPORT, err, "schema 1");
        r = pull(fake_port, "artifact/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EPROTONOSUPPORT, err, "not a container image");
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

START_TEST(redirects_drop_authorization) {
        struct registry_result res;
        char dest[400], err[512], log[1024], line[512];
        int seen = 0, r;
        FILE *f;

        new_dest(dest, sizeof(dest));
        /* blobs behind a token, redirected to 127.0.0.2: followed, without the token */
        r = pull(fake_port, "redirect/img:single", dest, &res, err, sizeof(err));
        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_eq(blobs_all_good(dest), 5);
        snprintf(log, sizeof(log), "%s/fake.requests", work);
        f = fopen(log, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                ck_assert_msg(strstr(line, "authorization=no"), "%s", line);
                seen++;
        }
        fclose(f);
        ck_assert_int_ge(seen, 4); /* config and three layers went there */
        /* plain http to a host that is not loopback; a loop */
        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "offsite/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EBADMSG, err, "http://example.com/b/sha256:");
        ck_assert_msg(strstr(err, "refused"), "%s", err);
        r = pull(fake_port, "loop/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EBADMSG, err, "more than 5 redirects");
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

START_TEST(unreachable_and_missing) {
        struct registry_pull p = {.connect_timeout_ms = 5000};
        struct registry_result res;
        char dest[400], err[512], name[300];
        int r, closed = srv_free_port();

        new_dest(dest, sizeof(dest));
        r = pull(closed, "test/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -EHOSTUNREACH, err, "Connection refused");
        snprintf(name, sizeof(name), "127.0.0.1:%d/test/single:v1", closed);
        ck_assert_msg(strstr(err, name), "%s", err);
        /* a name that does not resolve (.invalid never does) */
        {
                struct imageref ref;
                ck_assert_int_eq(imageref_parse("registry.invalid/x:y", &ref, err, sizeof(err)), 0);
                p.ref = &ref;
                p.dest_dir = dest;
                p.max_total_bytes = 1 << 20;
                r = registry_pull(&p, &res, err, sizeof(err));
                ck_assert_msg(r == -EHOSTUNREACH || r == -ETIMEDOUT, "%d %s", r, err);
                ck_assert_msg(strstr(err, "registry.invalid"), "%s", err);
        }
        /* an image that is not there, a tag that is not there */
        r = pull(open_port, "test/nothere:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -ENOENT, err, "manifest not found");
        snprintf(name, sizeof(name), "127.0.0.1:%d/test/nothere:v1", open_port);
        ck_assert_msg(strstr(err, name), "%s", err);
        r = pull(open_port, "test/single:nosuchtag", dest, &res, err, sizeof(err));
        EXPECT(r, -ENOENT, err, "test/single:nosuchtag");
        /* an error page of 1 MiB: read up to its bound, the answer still a 404 */
        r = pull(fake_port, "bigerror/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -ENOENT, err, "bigerror/img:single");
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

/* A registry whose connections never complete: a listening socket whose accept queue
 * is full (backlog 0, one connection already queued and a second one waiting), so that
 * the kernel drops further SYNs. */
START_TEST(connect_times_out) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct registry_pull p = {.connect_timeout_ms = 1000};
        struct registry_result res;
        socklen_t n = sizeof(a);
        char dest[400], err[512];
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c[4], i, r;
        double t0;

        ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &n), 0);
        ck_assert_int_eq(listen(l, 0), 0);
        for (i = 0; i < 4; i++) { /* fill the queue; the later ones stay in SYN_SENT */
                c[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                connect(c[i], (struct sockaddr *)&a, sizeof(a));
        }
        usleep(200000);
        new_dest(dest, sizeof(dest));
        t0 = srv_now_s();
        r = pull_with(&p, ntohs(a.sin_port), "test/single:v1", dest, &res, err, sizeof(err));
        EXPECT(r, -ETIMEDOUT, err, "timed out");
        ck_assert_msg(srv_now_s() - t0 < 15, "%.1f s", srv_now_s() - t0);
        for (i = 0; i < 4; i++)
                close(c[i]);
        close(l);
}
END_TEST

START_TEST(server_errors) {
        struct registry_result res;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        r = pull(fake_port, "broken/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -EPROTO, err, "HTTP 503");
        ck_assert_msg(strstr(err, "down for maintenance"), "%s", err);
}
END_TEST

struct racer {
        int port;
        const char *name, *dest;
        int r;
        char err[512];
};

static void *race(void *opaque) {
        struct racer *x = opaque;
        struct registry_result res;
        struct registry_pull p = {.max_total_bytes = 1ull << 30};
        static __thread struct imageref ref;
        char s[300];

        snprintf(s, sizeof(s), "127.0.0.1:%d/%s", x->port, x->name);
        x->r = imageref_parse(s, &ref, x->err, sizeof(x->err));
        p.ref = &ref;
        p.dest_dir = x->dest;
        if (x->r == 0)
                x->r = registry_pull(&p, &res, x->err, sizeof(x->err));
        return NULL;
}

/* Pulls on several threads at once, two of them into one destination: each its own. */
START_TEST(threads_pull_at_once) {
        char d1[400], d2[400], path[1024];
        json_t *j;
        struct racer x[4];
        pthread_t t[4];
        int i;

        new_dest(d1, sizeof(d1));
        new_dest(d2, sizeof(d2));
        x[0] = (struct racer){.port = open_port, .name = "test/single:v1", .dest = d1};
        x[1] = (struct racer){.port = open_port, .name = "test/single:v2", .dest = d1};
        x[2] = (struct racer){.port = open_port, .name = "test/big:v1", .dest = d2};
        x[3] = (struct racer){.port = fake_port, .name = "auth/img:multi", .dest = d2};
        for (i = 0; i < 4; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, race, &x[i]), 0);
        for (i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        for (i = 0; i < 4; i++)
                ck_assert_msg(x[i].r == 0, "%s: %s", x[i].name, x[i].err);
        snprintf(path, sizeof(path), "%s/index.json", d1); /* both tags are in it */
        j = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
        ck_assert_uint_eq(json_array_size(json_object_get(j, "manifests")), 2);
        json_decref(j);
        ck_assert_int_eq(blobs_all_good(d1), 5);
        ck_assert_int_ge(blobs_all_good(d2), 6); /* big: 3 blobs; multi: at least 3 */
}
END_TEST

START_TEST(stalled_transfer_times_out) {
        struct registry_pull p = {.stall_timeout_ms = 1000};
        struct registry_result res;
        char dest[400], err[512];
        double t0 = srv_now_s();
        int r;

        new_dest(dest, sizeof(dest));
        r = pull_with(&p, fake_port, "stall/img:single", dest, &res, err, sizeof(err));
        EXPECT(r, -ETIMEDOUT, err, "timed out");
        ck_assert_msg(srv_now_s() - t0 < 20, "%.1f s", srv_now_s() - t0); /* it sleeps 60 s */
        ck_assert_int_eq(blobs_all_good(dest), 0);
}
END_TEST

START_TEST(bad_requests) {
        struct registry_pull p = {0};
        struct registry_result res;
        struct imageref ref;
        char dest[400], err[512];
        int r;

        new_dest(dest, sizeof(dest));
        ck_assert_int_eq(imageref_parse("127.0.0.1:1/a", &ref, err, sizeof(err)), 0);
        ck_assert_int_eq(registry_pull(NULL, &res, err, sizeof(err)), -EINVAL);
        p.ref = &ref;
        EXPECT(registry_pull(&p, &res, err, sizeof(err)), -EINVAL, err, "no destination");
        p.dest_dir = dest;
        EXPECT(registry_pull(&p, &res, err, sizeof(err)), -EINVAL, err, "max_total_bytes is 0");
        p.max_total_bytes = 1;
        p.username = "alice";
        EXPECT(registry_pull(&p, &res, err, sizeof(err)), -EINVAL, err, "without a password");
        p.username = NULL;
        p.variant = "v7";
        EXPECT(registry_pull(&p, &res, err, sizeof(err)), -EINVAL, err, "without an architecture");
        p.variant = NULL;
        snprintf(dest + strlen(dest), sizeof(dest) - strlen(dest), "/missing");
        r = registry_pull(&p, &res, err, sizeof(err));
        EXPECT(r, -ENOENT, err, "/missing");
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("registry");
        TCase *tc = tcase_create("registry");

        tcase_add_unchecked_fixture(tc, fixture_up, fixture_down);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, pull_by_tag_gives_a_valid_layout);
        tcase_add_test(tc, pull_by_digest);
        tcase_add_test(tc, index_selects_the_platform);
        tcase_add_test(tc, docker_schema2_kept_as_is);
        tcase_add_test(tc, index_without_this_platform_is_refused);
        tcase_add_test(tc, second_pull_reuses_blobs);
        tcase_add_test(tc, cancel_mid_blob_leaves_nothing_half_written);
        tcase_add_test(tc, basic_auth);
        tcase_add_test(tc, bearer_token_handshake);
        tcase_add_test(tc, bearer_token_with_docker_registry);
        tcase_add_test(tc, lying_blobs_are_refused);
        tcase_add_test(tc, bounds_on_manifests_and_size);
        tcase_add_test(tc, schema1_and_artifacts_are_refused);
        tcase_add_test(tc, redirects_drop_authorization);
        tcase_add_test(tc, unreachable_and_missing);
        tcase_add_test(tc, server_errors);
        tcase_add_test(tc, threads_pull_at_once);
        tcase_add_test(tc, connect_times_out);
        tcase_add_test(tc, stalled_transfer_times_out);
        tcase_add_test(tc, bad_requests);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
