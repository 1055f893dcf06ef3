/* networld.h: the network world of the allowlist tests (it_egress, it_egress_budget), shared
 * as static functions by the programs that include it.
 *
 * The whole test program enters a network and a mount namespace of its own before any
 * test forks (networld_make): loopback up with the documentation address 203.0.113.10
 * and the private 10.9.9.9 on it, its own /etc/hosts (and /etc/resolv.conf when given)
 * bind-mounted over the host's, and test servers (python3 programs) started there. A
 * daemon the tests start runs in that world, so the proxy resolves and reaches only
 * these servers: no test ever reaches a real external host. */
#ifndef SBX_TESTS_NETWORLD_H
#define SBX_TESTS_NETWORLD_H

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "testutil.h"

struct networld {
        const char *name; /* the program's, for messages */
        char dir[64];     /* its files: hosts, resolv.conf, keys */
        pid_t servers[4];
        int n_servers;
};

static void networld_sh(const struct networld *w, const char *cmd) {
        if (system(cmd) != 0) {
                fprintf(stderr, "%s: setup failed: %s\n", w->name, cmd);
                exit(2);
        }
}

/* Writes text to the file name of w's directory. */
static void networld_file(const struct networld *w, const char *name, const char *text) {
        char path[128];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", w->dir, name);
        f = fopen(path, "w");
        if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                exit(2);
}

/* A server process (python3 -c code, in w's directory), dying with this program. */
static void networld_server(struct networld *w, const char *code) {
        pid_t p = fork();

        if (p == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (chdir(w->dir) < 0)
                        _exit(127);
                execl("/usr/bin/python3", "python3", "-c", code, (char *)NULL);
                _exit(127);
        }
        w->servers[w->n_servers++] = p;
}

/* Enters the world: hosts (and resolv, unless NULL) as the files of /etc, then the shell
 * command setup (unless NULL) in w's directory. */
static void networld_make(struct networld *w, const char *name, const char *hosts,
                          const char *resolv, const char *setup) {
        char cmd[512];

        w->name = name;
        snprintf(w->dir, sizeof(w->dir), "/tmp/sbx-%s-XXXXXX", name);
        if (!mkdtemp(w->dir))
                exit(2);
        if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0) {
                fprintf(stderr, "%s: unshare(net, mount): %s\n", name, strerror(errno));
                exit(2);
        }
        networld_sh(w, "mount --make-rprivate / && ip link set lo up mtu 1500 && "
                       "ip addr add 203.0.113.10/32 dev lo && ip addr add 10.9.9.9/32 dev lo");
        networld_file(w, "hosts", hosts);
        snprintf(cmd, sizeof(cmd), "mount --bind %s/hosts /etc/hosts", w->dir);
        networld_sh(w, cmd);
        if (resolv) {
                networld_file(w, "resolv.conf", resolv);
                snprintf(cmd, sizeof(cmd), "mount --bind %s/resolv.conf /etc/resolv.conf", w->dir);
                networld_sh(w, cmd);
        }
        if (setup) {
                snprintf(cmd, sizeof(cmd), "cd %s && %s", w->dir, setup);
                networld_sh(w, cmd);
        }
}

/* Waits (10 s at most) until 203.0.113.10:port takes connections, or exits. */
static void networld_wait(const struct networld *w, unsigned port) {
        char cmd[256];

        snprintf(cmd, sizeof(cmd),
                 "python3 -c \"import socket;socket.create_connection(('203.0.113.10',%u),0.2)\" "
                 "2>/dev/null",
                 port);
        for (int i = 0; i < 100; i++) {
                if (system(cmd) == 0)
                        return;
                usleep(100 * 1000);
        }
        fprintf(stderr, "%s: the test servers did not come up\n", w->name);
        exit(2);
}

static void networld_end(struct networld *w) {
        char cmd[128];

        for (int i = 0; i < w->n_servers; i++) {
                kill(w->servers[i], SIGKILL);
                waitpid(w->servers[i], NULL, 0);
        }
        snprintf(cmd, sizeof(cmd), "rm -rf %s", w->dir);
        if (system(cmd) != 0)
                fprintf(stderr, "%s: could not remove %s\n", w->name, w->dir);
}

/* The program's main after networld_make: runs suite, leaves the world, and exits as
 * Check's runner says. */
static int networld_run(struct networld *w, Suite *suite) {
        SRunner *sr = srunner_create(suite);
        int nf;

        srunner_run_all(sr, CK_NORMAL);
        nf = srunner_ntests_failed(sr);
        srunner_free(sr);
        networld_end(w);
        return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Creates an allowlist sandbox id with hosts and cidrs (NULL-terminated). */
static void create_allowlist(sbx_client *c, const char *id, const char **hosts,
                             const char **cidrs) {
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        size_t nh = 0, nc = 0;

        while (hosts && hosts[nh])
                nh++;
        while (cidrs && cidrs[nc])
                nc++;
        sbx_create_opts_init(&o);
        o.id = id;
        o.policy.network = SBX_NETWORK_ALLOWLIST;
        o.policy.allowed_hosts = (struct sbx_strv){(char **)(uintptr_t)hosts, nh};
        o.policy.allowed_cidrs = (struct sbx_strv){(char **)(uintptr_t)cidrs, nc};
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "create: %s", sbx_error_message(c));
        sbx_sandbox_free(s);
}

#endif
