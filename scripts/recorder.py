#!/usr/bin/env python3
"""A catch-all HTTP server on loopback that records every request it receives as one JSON line
in driftwatch's traffic format ({"method","url","headers","body_text"}) and answers 200 {}.

It reads the wire, not a client's idea of what it sent: the independent generator's requests
are audited exactly as an API would have received them. Bodies that are not UTF-8 are kept as
text with replacement characters (driftwatch audits JSON bodies, which are UTF-8).

Usage: recorder.py OUT.jsonl PORT_FILE   (binds 127.0.0.1:0, writes the port to PORT_FILE)
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

OUT = open(sys.argv[1], "a", encoding="utf-8")
LOCK = Lock()


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_one(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        # Schemathesis probes the server before testing (a NULL byte in a header, control
        # characters in a path): marked by this header, they are not traffic of the spec.
        if self.headers.get("x-schemathesis-probe") is not None:
            return self.answer()
        line = {
            "method": self.command,
            "url": self.path,
            "headers": [{"name": k, "value": v} for k, v in self.headers.items()],
        }
        if body:
            line["body_text"] = body.decode("utf-8", errors="replace")
        with LOCK:
            OUT.write(json.dumps(line) + "\n")
            OUT.flush()
        self.answer()

    def answer(self):
        payload = b"{}"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.handle_one
        raise AttributeError(name)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
with open(sys.argv[2], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
