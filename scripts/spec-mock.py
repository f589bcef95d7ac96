"""A mock of an API made from its OpenAPI spec, for scripts/real-mcp-servers: each request is
routed by the spec's templates (a parameter marked x-multi-segment takes several segments) and
answered with the first 2xx response's example when the spec has one, else an empty object
(or no body for a 204). It never judges the request: driftwatch, in front of it, does.
SPEC_MOCK_EXTRA (JSON, {"GET /about.json": BODY}) adds answers the spec lacks that a server needs.
Usage: python spec-mock.py SPEC PORT_FILE [CERT KEY]  (binds 127.0.0.1:0 and writes its port to
PORT_FILE; with a PEM certificate and key it serves TLS, as the API itself does)
"""

import gzip
import json
import os
import re
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def deref(doc, node, depth=0):
    while isinstance(node, dict) and "$ref" in node and depth < 32:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        node = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part, {}) if isinstance(node, dict) else {}
        depth += 1
    return node if isinstance(node, dict) else {}


def example(doc, response):
    response = deref(doc, response)
    for media, content in (response.get("content") or {}).items():
        if "json" not in media:
            continue
        content = deref(doc, content)
        if "example" in content:
            return content["example"]
        for ex in (content.get("examples") or {}).values():
            ex = deref(doc, ex)
            if "value" in ex:
                return ex["value"]
        schema = deref(doc, content.get("schema") or {})
        if "example" in schema:
            return schema["example"]
        return [] if schema.get("type") == "array" else {}
    return None


def routes(doc):
    base = ""
    servers = doc.get("servers") or []
    if servers:
        base = urlsplit(servers[0].get("url", "")).path.rstrip("/")
    table = []
    for template, item in (doc.get("paths") or {}).items():
        item = deref(doc, item)
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            params = [deref(doc, p) for p in item.get("parameters", []) + op.get("parameters", [])]
            spans = {p.get("name") for p in params if p.get("x-multi-segment")}
            pattern = ""
            for piece in re.split(r"(\{[^}]+\})", template):
                if piece.startswith("{"):
                    pattern += ".+" if piece[1:-1] in spans else "[^/]+"
                else:
                    pattern += re.escape(piece)
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            status, body = 200, {}
            for code, response in (op.get("responses") or {}).items():
                if str(code).startswith("2"):
                    status, body = int(code), example(doc, response)
                    break
            table.append((method.upper(), re.compile(f"^{re.escape(base)}{pattern}/?$"), literal, status, body))
    # More literal text first: `/repos/{o}/{r}/git/ref/{ref}` before `/repos/{o}/{r}/{x}/...`.
    table.sort(key=lambda r: -r[2])
    return table


def serve(spec, port_file, cert=None, key=None):
    table = routes(load(spec))
    # Answers the spec lacks but a server needs to start (Discourse's `GET /about.json`), from
    # SPEC_MOCK_EXTRA: {"GET /about.json": BODY, ...}. Still requests driftwatch judges.
    extra = json.loads(os.environ.get("SPEC_MOCK_EXTRA") or "{}")
    count = {"requests": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            path = urlsplit(self.path).path
            if path != "/__count":
                with lock:
                    count["requests"] += 1
            if path == "/__count":
                status, body = 200, count
            elif f"{self.command} {path}" in extra:
                status, body = 200, extra[f"{self.command} {path}"]
            else:
                status, body = 404, {"message": "Not Found"}
                for method, pattern, _, s, b in table:
                    if method == self.command and pattern.match(path):
                        status, body = s, b
                        break
            data = b"" if body is None or status == 204 else json.dumps(body).encode()
            self.send_response(status)
            if data:
                self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    with open(port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    serve(*sys.argv[1:5])
