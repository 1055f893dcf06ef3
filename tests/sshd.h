/* sshd.h: a real OpenSSH server for the tests of the ssh:// transport (it_ssh, it_forward)
 * and the helpers around it, shared as static functions by the programs that include it.
 *
 * sshd_start starts Debian's sshd as root on 127.0.0.1 at a free port, with a
 * configuration, a throwaway host key and an authorized key of its own in the test's
 * directory, and the client side a config file of its own given through SBX_SSH_OPTS;
 * the session's PATH starts with the build directory, so the remote `sbx` is this
 * tree's. sshd writes its pid in the test's directory, and ssh_fixture_teardown (the
 * fixture's teardown) ends it by that pid even when a test failed. */
#ifndef SBX_TESTS_SSHD_H
#define SBX_TESTS_SSHD_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx.h"
#include "testutil.h"

#define SSHD_BIN "/usr/sbin/sshd"

struct sshd {
        char dir[600]; /* keys and configuration */
        int port;
        pid_t pid;
        char url[600]; /* ssh://root@127.0.0.1:PORT followed by the daemon's socket */
};

/* ---- small helpers ---------------------------------------------------------------------- */

__attribute__((unused)) static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

__attribute__((unused)) static char *read_text(const char *path) {
        FILE *f = fopen(path, "r");
        char *buf = calloc(1, 65536);
        size_t n;

        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        n = fread(buf, 1, 65535, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

/* Runs argv (NULL-terminated) with output to /dev/null; its exit status. */
__attribute__((unused)) static int run_quiet(const char *const *argv) {
        int st;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
                execvp(argv[0], (char *const *)(uintptr_t)argv);
                _exit(127);
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256;
}

__attribute__((unused)) static void keygen(const char *path) {
        const char *argv[] = {"ssh-keygen", "-q",     "-t", "ed25519", "-N", "",
                              "-C",         "sbx-it", "-f", path,      NULL};
        ck_assert_msg(run_quiet(argv) == 0, "ssh-keygen -f %s failed", path);
}

/* The first line of path without its comment: "ssh-ed25519 AAAA...". */
__attribute__((unused)) static char *pubkey(const char *path) {
        char *t = read_text(path), *sp = strchr(t, ' ');
        if (sp && (sp = strchr(sp + 1, ' ')))
                *sp = 0;
        t[strcspn(t, "\n")] = 0;
        return t;
}

__attribute__((unused)) static int free_port(void) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        port = ntohs(sa.sin_port);
        close(fd);
        return port;
}

__attribute__((unused)) static bool port_accepts(int port) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        return ok;
}

/* ---- the ssh server and the client's configuration ---------------------------------------- */

/* A client config (ssh -F) with identity key and known_hosts file kh: nothing from ~/.ssh,
 * no agent, no prompts. */
__attribute__((unused)) static void write_client_config(const struct sshd *s, const char *name, const char *key,
                                const char *kh) {
        char path[700], text[2048];

        snprintf(path, sizeof(path), "%s/%s", s->dir, name);
        snprintf(text, sizeof(text),
                 "Host *\n"
                 "  IdentityFile %s/%s\n"
                 "  IdentitiesOnly yes\n"
                 "  IdentityAgent none\n"
                 "  UserKnownHostsFile %s/%s\n"
                 "  GlobalKnownHostsFile /dev/null\n"
                 "  StrictHostKeyChecking yes\n"
                 "  UpdateHostKeys no\n"
                 "  ControlMaster no\n"
                 "  ControlPath none\n",
                 s->dir, key, s->dir, kh);
        write_file(path, text);
}

/* SBX_SSH_OPTS for libsbx in this process and the sbx it starts: -F the config name. */
__attribute__((unused)) static void use_client_config(const struct sshd *s, const char *name) {
        char v[800];
        snprintf(v, sizeof(v), "-F %s/%s", s->dir, name);
        setenv("SBX_SSH_OPTS", v, 1);
}

__attribute__((unused)) static bool sshd_try(struct sshd *s, const char *cfg) {
        char log[700];
        pid_t pid;
        int i, st;

        snprintf(log, sizeof(log), "%s/sshd.log", s->dir);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                dup2(fd, 1);
                dup2(fd, 2);
                execl(SSHD_BIN, SSHD_BIN, "-D", "-e", "-f", cfg, (char *)NULL);
                _exit(127);
        }
        for (i = 0; i < 200; i++) {
                if (waitpid(pid, &st, WNOHANG) == pid)
                        return false; /* the port was taken after all, say: the log says */
                if (port_accepts(s->port)) {
                        s->pid = pid;
                        return true;
                }
                usleep(50000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return false;
}

/* Starts sshd for daemon d (its socket goes into s->url) and points libsbx at it. */
__attribute__((unused)) static void sshd_start(struct sshd *s, const struct it_daemon *d) {
        char cfg[700], path[700], bin[4096], text[8192], *hk, *ck;
        int attempt;

        ck_assert_msg(access(SSHD_BIN, X_OK) == 0,
                      "no %s: install openssh-server (`make ssh-test-pkgs`, part of make check)",
                      SSHD_BIN);
        memset(s, 0, sizeof(*s));
        snprintf(s->dir, sizeof(s->dir), "%s/ssh", it_base_dir());
        ck_assert_int_eq(mkdir(s->dir, 0700), 0);
        /* sshd's privilege separation directory; the package's service makes it at boot. */
        if (mkdir("/run/sshd", 0755) < 0)
                ck_assert_int_eq(errno, EEXIST);
        snprintf(path, sizeof(path), "%s/host_key", s->dir);
        keygen(path);
        snprintf(path, sizeof(path), "%s/client_key", s->dir);
        keygen(path);
        snprintf(path, sizeof(path), "%s/other_key", s->dir);
        keygen(path);
        snprintf(path, sizeof(path), "%s/client_key.pub", s->dir);
        ck = pubkey(path);
        snprintf(path, sizeof(path), "%s/authorized_keys", s->dir);
        snprintf(text, sizeof(text), "%s\n", ck);
        write_file(path, text);
        free(ck);
        ck_assert_ptr_nonnull(realpath(it_build_dir(), bin));
        snprintf(cfg, sizeof(cfg), "%s/sshd_config", s->dir);
        for (attempt = 0; attempt < 5; attempt++) {
                s->port = free_port();
                snprintf(text, sizeof(text),
                         "ListenAddress 127.0.0.1\n"
                         "Port %d\n"
                         "HostKey %s/host_key\n"
                         "AuthorizedKeysFile %s/authorized_keys\n"
                         "PidFile %s/sshd.pid\n"
                         "UsePAM no\n"
                         "StrictModes no\n"
                         "PermitRootLogin prohibit-password\n"
                         "PubkeyAuthentication yes\n"
                         "PasswordAuthentication no\n"
                         "KbdInteractiveAuthentication no\n"
                         "UseDNS no\n"
                         "LogLevel VERBOSE\n"
                         "SetEnv "
                         "PATH=%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
                         s->port, s->dir, s->dir, it_base_dir(), bin);
                write_file(cfg, text);
                if (sshd_try(s, cfg))
                        break;
        }
        if (!s->pid) {
                snprintf(path, sizeof(path), "%s/sshd.log", s->dir);
                ck_abort_msg("sshd did not start: %s", read_text(path));
        }
        /* known_hosts with the server's key, and one with another key in its place. */
        snprintf(path, sizeof(path), "%s/host_key.pub", s->dir);
        hk = pubkey(path);
        snprintf(path, sizeof(path), "%s/known_hosts", s->dir);
        snprintf(text, sizeof(text), "[127.0.0.1]:%d %s\n", s->port, hk);
        write_file(path, text);
        free(hk);
        snprintf(path, sizeof(path), "%s/other_key.pub", s->dir);
        hk = pubkey(path);
        snprintf(path, sizeof(path), "%s/known_hosts_wrong", s->dir);
        snprintf(text, sizeof(text), "[127.0.0.1]:%d %s\n", s->port, hk);
        write_file(path, text);
        free(hk);
        write_client_config(s, "ssh_config", "client_key", "known_hosts");
        write_client_config(s, "ssh_config_wrong_host", "client_key", "known_hosts_wrong");
        write_client_config(s, "ssh_config_wrong_key", "other_key", "known_hosts");
        use_client_config(s, "ssh_config");
        unsetenv("SBX_SSH");
        unsetenv("SBX_SSH_REMOTE_SBX");
        ck_assert_int_lt(
                snprintf(s->url, sizeof(s->url), "ssh://root@127.0.0.1:%d%.500s", s->port, d->sock),
                (int)sizeof(s->url));
}

__attribute__((unused)) static void sshd_stop(struct sshd *s) {
        int st;
        if (s->pid > 0) {
                kill(s->pid, SIGTERM);
                waitpid(s->pid, &st, 0);
        }
        s->pid = 0;
}

/* The fixture: the base directory of itutil, and at its end the sshd of the test (by the
 * pid it wrote, when that pid still runs sshd) even when the test failed. */
__attribute__((unused)) static void ssh_fixture_teardown(void) {
        char path[700], exe[64], link[512];
        FILE *f;
        int pid;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/sshd.pid", it_base_dir());
        f = fopen(path, "r");
        if (f && fscanf(f, "%d", &pid) == 1 && pid > 1) {
                snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
                n = readlink(exe, link, sizeof(link) - 1);
                if (n > 0) {
                        link[n] = 0;
                        if (strstr(link, "sshd"))
                                kill(pid, SIGTERM);
                }
        }
        if (f)
                fclose(f);
        it_fixture_teardown();
}

/* ---- clients ---------------------------------------------------------------------------- */

__attribute__((unused)) static sbx_client *connect_url(const char *url) {
        sbx_client *c = NULL;
        enum sbx_code rc = sbx_connect(url, "it_ssh", &c);
        ck_assert_msg(rc == SBX_OK, "connect %s: %s: %s", url, sbx_code_name(rc),
                      sbx_error_message(c));
        sbx_set_call_timeout_ms(c, 30000);
        return c;
}

/* Processes of the ssh path to d: the local ssh and the remote dial-stdio (both carry
 * "dial-stdio --socket SOCKET" in their command lines). */
__attribute__((unused)) static int dial_procs(const struct it_daemon *d) {
        char needle[700];
        snprintf(needle, sizeof(needle), "dial-stdio --socket %s", d->sock);
        return it_count_procs(needle);
}

/* Waits up to 30 s for the processes of the ssh path to d to end; asserts they did. */
__attribute__((unused)) static void dial_procs_end(const struct it_daemon *d) {
        for (int i = 0; i < 600 && dial_procs(d) > 0; i++)
                usleep(50000);
        ck_assert_int_eq(dial_procs(d), 0);
}

/* The URL of s with another socket path. */
__attribute__((unused)) static void url_with_path(const struct sshd *s, const char *path, char *buf, size_t len) {
        snprintf(buf, len, "ssh://root@127.0.0.1:%d%s", s->port, path);
}

/* Starts `sbx dial-stdio --socket sock` with a socketpair as its stdin and stdout (*ret_fd,
 * the other end) and a pipe as its stderr (*ret_err). */
__attribute__((unused)) static pid_t spawn_dial(const char *sock, int *ret_fd, int *ret_err) {
        char bin[600];
        int sv[2], e[2];
        pid_t pid;

        snprintf(bin, sizeof(bin), "%s/sbx", it_build_dir());
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        ck_assert_int_eq(pipe2(e, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(sv[1], 0);
                dup2(sv[1], 1);
                dup2(e[1], 2);
                execl(bin, bin, "dial-stdio", "--socket", sock, (char *)NULL);
                _exit(127);
        }
        close(sv[1]);
        close(e[1]);
        *ret_fd = sv[0];
        *ret_err = e[0];
        return pid;
}

#endif
