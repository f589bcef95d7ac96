#!/usr/bin/env python3
"""A Channels API that answers `GET /api/v1/channels` with a page of 256 channels none of its
earlier answers showed (ids FIRST, FIRST+1, ... counted on across requests), each the 31-field
channel of examples/channel.json with its own id, as the Channels spec declares the list: for
`scripts/bench-proxy --read-before-write`, which measures what remembering a list's items costs.
Any other path answers 404. Usage: list-pages.py PORT [FIRST, default 1000000]
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ITEMS = 256
ROOT = Path(__file__).resolve().parent.parent
CHANNEL = json.loads((ROOT / "examples" / "channel.json").read_text())
# The channel's text after its id, written once: each item is `{"id":N,` and this.
REST = json.dumps(CHANNEL, separators=(",", ":"))[1:]

lock = threading.Lock()
next_id = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000


class Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (the name http.server calls)
        global next_id
        if self.path.split("?")[0] != "/api/v1/channels":
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        with lock:
            first = next_id
            next_id += ITEMS
        body = ("[" + ",".join('{"id":%d,%s' % (i, REST) for i in range(first, first + ITEMS)) + "]").encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Pages).serve_forever()
