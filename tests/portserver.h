/* portserver.h: a small TCP server for the tests of port forwarding (it_ports, it_forward),
 * started in a sandbox, and the reads the tests make of its streams. Shared as static
 * functions by the programs that include it.
 *
 * The server (Python, in the background, on 127.0.0.1 and ::1 port PORT): a first line
 * "GET /x" gets an HTTP answer, "ECHO" echoes what follows until the client's end and
 * then says "END n", "CLOSE" says "bye", ends its own side and keeps what comes after in
 * /tmp/after, "FLOOD" writes forever, and "HOLD" never reads, writes or closes again. On port BANNER_PORT it writes "banner\n" as soon as it
 * accepts, and then reads to the client's end. */
#ifndef SBX_TESTS_PORTSERVER_H
#define SBX_TESTS_PORTSERVER_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx.h"
#include "testutil.h"

#define PORT  8080u
#define IO_MS 20000
#define BANNER_PORT 8081u

static const char server_py[] =
        "import os,socket,socketserver,threading\n"
        "class H(socketserver.BaseRequestHandler):\n"
        "  def handle(self):\n"
        "    s=self.request;f=b''\n"
        "    while b'\\n' not in f:\n"
        "      d=s.recv(65536)\n"
        "      if not d: return\n"
        "      f+=d\n"
        "    line,rest=f.split(b'\\n',1)\n"
        "    if line.startswith(b'GET '):\n"
        "      b=b'hello '+line.split()[1]+b'\\n'\n"
        "      s.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n'%len(b)+b);return\n"
        "    if line==b'ECHO':\n"
        "      n=len(rest);s.sendall(rest)\n"
        "      while True:\n"
        "        d=s.recv(65536)\n"
        "        if not d: break\n"
        "        n+=len(d);s.sendall(d)\n"
        "      s.sendall(b'END %d\\n'%n);return\n"
        "    if line==b'CLOSE':\n"
        "      s.sendall(b'bye\\n');s.shutdown(socket.SHUT_WR);got=rest\n"
        "      while True:\n"
        "        d=s.recv(65536)\n"
        "        if not d: break\n"
        "        got+=d\n"
        "      open('/tmp/after','wb').write(got);return\n"
        "    if line==b'FLOOD':\n"
        "      while True: s.sendall(b'f'*65536)\n"
        "    if line==b'HOLD':\n"
        "      threading.Event().wait()\n"
        "class S(socketserver.ThreadingTCPServer):\n"
        "  allow_reuse_address=True;daemon_threads=True;request_queue_size=512\n"
        "class S6(S): address_family=socket.AF_INET6\n"
        "class B(socketserver.BaseRequestHandler):\n"
        "  def handle(self):\n"
        "    self.request.sendall(b'banner\\n')\n"
        "    while self.request.recv(65536): pass\n"
        "a=S(('127.0.0.1',8080),H);b=S6(('::1',8080),H);c=S(('127.0.0.1',8081),B)\n"
        "threading.Thread(target=b.serve_forever,daemon=True).start()\n"
        "threading.Thread(target=c.serve_forever,daemon=True).start()\n"
        "open('/tmp/ready','w').close()\n"
        "a.serve_forever()\n";

/* Starts the server in sandbox id (in the background) and waits until it listens. */
static void start_server(sbx_client *c, const char *id) {
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;
        const char *argv[] = {"/usr/bin/python3", "-c", server_py, NULL};
        struct sbx_result *r = it_sh(c, id, 30000, "rm -f /tmp/ready");

        sbx_result_free(r);
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        ck_assert_msg(sbx_exec_background(c, id, &o, &b) == SBX_OK, "server: %s",
                      sbx_error_message(c));
        sbx_background_free(b);
        r = it_sh(c, id, 30000,
                  "for i in $(seq 300); do test -e /tmp/ready && exit 0; sleep 0.1; done; exit 1");
        ck_assert_msg(r->exit_code == 0, "the server in %s did not start", id);
        sbx_result_free(r);
}

/* Reads exactly n bytes from fd within IO_MS; 0, or -1 at end of stream first. */
static int read_exact(int fd, void *buf, size_t n) {
        uint8_t *p = buf;

        while (n > 0) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                ssize_t k;
                ck_assert_msg(poll(&pfd, 1, IO_MS) == 1, "nothing to read within %d ms", IO_MS);
                k = read(fd, p, n);
                if (k == 0)
                        return -1;
                ck_assert_msg(k > 0, "read: %s", strerror(errno));
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Reads fd to its end (within IO_MS) into a new NUL-terminated buffer. */
static char *read_to_end(int fd, size_t *ret_len) {
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);

        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                ssize_t k;
                ck_assert_msg(poll(&pfd, 1, IO_MS) == 1, "no end of stream within %d ms", IO_MS);
                if (n == cap)
                        buf = realloc(buf, (cap *= 2) + 1);
                k = read(fd, buf + n, cap - n);
                if (k == 0 || (k < 0 && errno == ECONNRESET))
                        break;
                ck_assert_msg(k > 0, "read: %s", strerror(errno));
                n += (size_t)k;
        }
        buf[n] = '\0';
        if (ret_len)
                *ret_len = n;
        return buf;
}

/* Reads the HTTP answer to "GET path" on fd to its end, checks it, and closes fd. */
static void expect_http(int fd, const char *path) {
        char want[128], *in = read_to_end(fd, NULL);

        snprintf(want, sizeof(want), "hello %s\n", path);
        ck_assert_msg(strstr(in, "HTTP/1.0 200 OK") && strstr(in, want), "%s", in);
        free(in);
        close(fd);
}

#endif
