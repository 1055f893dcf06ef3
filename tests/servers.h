/* servers.h: the servers image tests run beside them (docker-registry, the Python
 * registries of tests/) and the shell commands they build images with, shared as static
 * functions by the programs that include it (check_registry, check_imagestore,
 * it_images). Each server is a child of the test's runner process, logging to a file;
 * the fixture that starts one stops it by its pid (srv_stop), pass or fail. */
#ifndef SBX_TESTS_SERVERS_H
#define SBX_TESTS_SERVERS_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Runs the shell command fmt; its exit status (128 when it did not exit). */
__attribute__((format(printf, 1, 2), unused)) static int srv_sh(const char *fmt, ...) {
        char cmd[4096];
        va_list ap;
        int st;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Starts argv with stdout and stderr appended to log; its pid. */
__attribute__((unused)) static pid_t srv_spawn(const char *log, char *const argv[]) {
        pid_t pid = fork();

        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execvp(argv[0], argv);
                _exit(127);
        }
        return pid;
}

/* SIGTERM, 2 s to exit, then SIGKILL; reaps it and sets *pid to -1. */
__attribute__((unused)) static void srv_stop(pid_t *pid) {
        int i;

        if (*pid <= 0)
                return;
        kill(*pid, SIGTERM);
        for (i = 0; i < 100 && waitpid(*pid, NULL, WNOHANG) == 0; i++)
                usleep(20000);
        if (i == 100) {
                kill(*pid, SIGKILL);
                waitpid(*pid, NULL, 0);
        }
        *pid = -1;
}

/* Seconds on the monotonic clock. */
__attribute__((unused)) static double srv_now_s(void) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A port of 127.0.0.1 that was free a moment ago (0 when none could be had). */
__attribute__((unused)) static int srv_free_port(void) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t n = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

        if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &n) == 0)
                port = ntohs(a.sin_port);
        if (fd >= 0)
                close(fd);
        return port;
}

/* 1 once 127.0.0.1:port accepts a connection (within 20 s) while pid lives. */
__attribute__((unused)) static int srv_wait_listening(int port, pid_t pid) {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        double end = srv_now_s() + 20;

        while (srv_now_s() < end && waitpid(pid, NULL, WNOHANG) == 0) {
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
                ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
                close(fd);
                if (ok)
                        return 1;
                usleep(50000);
        }
        return 0;
}

#endif
