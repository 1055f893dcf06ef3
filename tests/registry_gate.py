#!/usr/bin/env python3
"""registry_gate.py UPSTREAM_PORT DIR PORTFILE: a gate in front of a loopback registry
for tests/it_images.c.

Forwards every GET and HEAD to the registry at 127.0.0.1:UPSTREAM_PORT, except that a
GET of a blob (/v2/.../blobs/sha256:...) waits until the file DIR/release exists (at most
120 s), so that a test can hold a pull in the middle of its download for as long as it
needs (two pulls meeting, a daemon killed mid-pull). Appends one line per blob GET
("GET PATH") to DIR/blobs.log before it waits, so the test can count downloads and see
that a pull reached its blobs. Writes its port to PORTFILE once it listens. Stops on
SIGTERM."""
import http.client
import http.server
import os
import socketserver
import sys
import time

UPSTREAM, DIR, PORTFILE = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def forward(self, method):
        if method == "GET" and "/blobs/sha256:" in self.path:
            with open(os.path.join(DIR, "blobs.log"), "a") as f:
                f.write("GET %s\n" % self.path)
            end = time.time() + 120
            while not os.path.exists(os.path.join(DIR, "release")) and time.time() < end:
                time.sleep(0.05)
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        up.request(method, self.path, headers=headers)
        r = up.getresponse()
        body = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)
        up.close()

    def do_GET(self):
        self.forward("GET")

    def do_HEAD(self):
        self.forward("HEAD")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
