#!/usr/bin/env python3
"""registry_fake.py: a registry that lies, for tests/check_registry.c.

It serves the images of an OCI layout (tests/registry_images.sh) over the registry API
v2 on 127.0.0.1, and a second server on 127.0.0.2 that redirected blobs land on. The
first component of a repository name says how it behaves; the rest is ignored, and the
tag (or digest) names an image of the layout:
  auth       a Bearer token is required (the token endpoint /token gives one to anyone)
  private    a Bearer token is required, given only for Basic alice:secret
  liar       blobs come with their last byte changed (their digest differs)
  long       blobs come with 10 bytes more than their size
  short      blobs come with 10 bytes fewer (and a Content-Length that says so)
  bigmanifest  the manifest is 5 MiB
  manylayers   the manifest lists 129 layers
  schema1    the manifest is a Docker schema 1 one
  redirect   as auth, and blobs are redirected to the 127.0.0.2 server
  offsite    blobs are redirected to plain http on a host that is not loopback
  loop       blobs are redirected to themselves, forever
  stall      blobs send half of their bytes, then nothing for 60 s
  artifact   the manifest's config is not an image config
  bigtoken   as auth, but the token endpoint answers 70 KiB
  crlftoken  as auth, but the token holds a CR LF (a header it would inject)
  bigerror   manifests are not found, with an error body of 1 MiB
  broken     every answer is a 503
  expiring   as auth, but a token serves two requests only (then a 401 asks for another)
Usage: registry_fake.py LAYOUT LOG_FILE PORTS_FILE. PORTS_FILE gets "PORT PORT2" once
both servers listen; LOG_FILE gets a line per request the 127.0.0.2 server answers,
saying whether it came with an Authorization header.
"""
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LAYOUT, LOG_FILE, PORTS_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
REF = "org.opencontainers.image.ref.name"
state = {"port": 0, "port2": 0, "grants": 0, "uses": {}}
lock = threading.Lock()


def blob_path(digest):
    if not digest.startswith("sha256:") or "/" in digest:
        return None
    return os.path.join(LAYOUT, "blobs", "sha256", digest[7:])


def manifest_for(ref):
    """The bytes of the manifest ref (a tag of the layout, or a digest), or None."""
    if ref.startswith("sha256:"):
        p = blob_path(ref)
        return open(p, "rb").read() if p and os.path.exists(p) else None
    with open(os.path.join(LAYOUT, "index.json")) as f:
        for m in json.load(f)["manifests"]:
            if m.get("annotations", {}).get(REF) == ref:
                return open(blob_path(m["digest"]), "rb").read()
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body=b"", headers=None, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def token(self):
        scope = ""
        for part in self.path.split("?", 1)[-1].split("&"):
            if part.startswith("scope="):
                scope = part[6:].replace("%3A", ":").replace("%2F", "/")
        repo = scope.split(":")[1] if scope.count(":") == 2 else ""
        if repo.startswith("private/"):
            good = "Basic " + base64.b64encode(b"alice:secret").decode()
            if self.headers.get("Authorization") != good:
                return self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
        tok = "tok." + repo.replace("/", ".")
        if repo.startswith("expiring/"):
            with lock:
                state["grants"] += 1
                tok += ".%d" % state["grants"]
        elif repo.startswith("bigtoken/"):
            tok += "x" * (70 << 10)
        elif repo.startswith("crlftoken/"):
            tok += "\r\nX-Injected: 1"
        self.send(200, json.dumps({"token": tok}).encode())

    def authorized(self, repo):
        got = self.headers.get("Authorization") or ""
        if repo.startswith("expiring/") and got.startswith("Bearer tok." + repo.replace("/", ".") + "."):
            with lock:
                state["uses"][got] = state["uses"].get(got, 0) + 1
                if state["uses"][got] <= 2:
                    return True
        elif got == "Bearer tok." + repo.replace("/", "."):
            return True
        realm = "http://127.0.0.1:%d/token" % state["port"]
        self.send(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"token needed"}]}',
                  {"WWW-Authenticate": 'Bearer realm="%s",service="fake",scope="repository:%s:pull"'
                   % (realm, repo)})
        return False

    def do_GET(self):
        if self.path.startswith("/token"):
            return self.token()
        parts = self.path.split("/")
        # /v2/<repo...>/(manifests|blobs)/<ref>
        if len(parts) < 5 or parts[1] != "v2" or parts[-2] not in ("manifests", "blobs"):
            return self.send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
        repo, kind, ref, mode = "/".join(parts[2:-2]), parts[-2], parts[-1], parts[2]
        if mode in ("auth", "private", "redirect", "bigtoken", "crlftoken", "expiring") and \
                not self.authorized(repo):
            return
        if mode == "broken":
            return self.send(503, b'{"errors":[{"code":"UNAVAILABLE","message":"down for maintenance"}]}')
        if mode == "bigerror":
            return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","detail":"' + b"x" * (1 << 20) + b'"}]}')
        if kind == "manifests":
            return self.manifest(mode, ref)
        return self.blob(mode, ref)

    def manifest(self, mode, ref):
        body = manifest_for(ref)
        if body is None:
            return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}')
        m = json.loads(body)
        if mode == "bigmanifest":
            m["annotations"] = {"padding": "x" * (5 << 20)}
            body = json.dumps(m).encode()
        elif mode == "manylayers":
            m["layers"] = [m["layers"][0]] * 129
            body = json.dumps(m).encode()
        elif mode == "schema1":
            body = json.dumps({"schemaVersion": 1, "name": "x", "tag": ref, "fsLayers": []}).encode()
            return self.send(200, body, ctype="application/vnd.docker.distribution.manifest.v1+prettyjws")
        elif mode == "artifact":
            m["config"]["mediaType"] = "application/vnd.example.artifact+json"
            body = json.dumps(m).encode()
        self.send(200, body, ctype=m.get("mediaType", "application/json"))

    def blob(self, mode, digest):
        p = blob_path(digest)
        if not p or not os.path.exists(p):
            return self.send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
        data = open(p, "rb").read()
        if mode == "redirect":
            return self.send(307, headers={"Location": "http://127.0.0.2:%d/b/%s" % (state["port2"], digest)})
        if mode == "offsite":
            return self.send(307, headers={"Location": "http://example.com/b/" + digest})
        if mode == "loop":
            return self.send(302, headers={"Location": self.path})
        if mode == "liar":
            data = data[:-1] + bytes([data[-1] ^ 1])
        elif mode == "long":
            data = data + b"0123456789"
        elif mode == "short":
            data = data[:-10]
        elif mode == "stall":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            time.sleep(60)
            return
        self.send(200, data, ctype="application/octet-stream")


class Storage(Handler):
    """The 127.0.0.2 server: where redirected blobs are served from."""

    def do_GET(self):
        with open(LOG_FILE, "a") as f:
            f.write("%s authorization=%s\n" % (self.path, "yes" if self.headers.get("Authorization") else "no"))
        p = blob_path(self.path.split("/")[-1])
        if not p or not os.path.exists(p):
            return self.send(404)
        self.send(200, open(p, "rb").read(), ctype="application/octet-stream")


def main():
    one = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    two = ThreadingHTTPServer(("127.0.0.2", 0), Storage)
    one.daemon_threads = two.daemon_threads = True
    state["port"], state["port2"] = one.server_address[1], two.server_address[1]
    threading.Thread(target=two.serve_forever, daemon=True).start()
    tmp = PORTS_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (state["port"], state["port2"]))
    os.rename(tmp, PORTS_FILE)
    one.serve_forever()


main()
