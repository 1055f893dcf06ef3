#!/usr/bin/env python3
"""registry_token.py: a token server for docker-registry, for tests/check_registry.c.

It answers GET /token?service=S&scope=repository:NAME:ACTIONS (the Bearer handshake of
the registry API) with a JWT signed RS256 by KEY (openssl does the signing), carrying
the certificate CERT in its x5c header, which the registry checks against its
rootcertbundle. Grants: pull of any repository not under private/ to anyone; pull and
push of everything to alice:secret (Basic credentials); other credentials get a 401.
Usage: registry_token.py KEY CERT PORT_FILE; PORT_FILE gets the port once it listens.
"""
import base64
import json
import os
import subprocess
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

KEY, CERT, PORT_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
CERT_DER = subprocess.run(["openssl", "x509", "-in", CERT, "-outform", "DER"],
                          capture_output=True, check=True).stdout
ALICE = "Basic " + base64.b64encode(b"alice:secret").decode()


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign(claims):
    header = {"alg": "RS256", "typ": "JWT", "x5c": [base64.b64encode(CERT_DER).decode()]}
    msg = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", KEY], input=msg.encode(),
                         capture_output=True, check=True).stdout
    return msg + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path != "/token":
            return self.send(404, b"{}")
        q = parse_qs(u.query)
        auth = self.headers.get("Authorization")
        if auth is not None and auth != ALICE:
            return self.send(401, b'{"details":"bad credentials"}')
        access = []
        for scope in q.get("scope", []):
            parts = scope.split(":")
            if len(parts) != 3 or parts[0] != "repository":
                continue
            wanted = parts[2].split(",")
            if auth == ALICE:
                granted = wanted
            elif parts[1].startswith("private/"):
                granted = []
            else:
                granted = [a for a in wanted if a == "pull"]
            access.append({"type": "repository", "name": parts[1], "actions": granted})
        now = int(time.time())
        token = sign({"iss": "sbx-test", "sub": "alice" if auth else "", "aud": q.get("service", [""])[0],
                      "exp": now + 600, "nbf": now - 60, "iat": now, "jti": str(uuid.uuid4()),
                      "access": access})
        self.send(200, json.dumps({"token": token, "expires_in": 600}).encode())


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    server.serve_forever()


main()
