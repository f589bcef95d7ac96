"""An OTLP/HTTP trace receiver for the tests, on the OpenTelemetry project's own messages (PyPI
`opentelemetry-proto`): each `POST /v1/traces` body is parsed as an ExportTraceServiceRequest
(gunzipped first when its Content-Encoding is gzip, as Rotel sends) and every span in it
written to OUT as one JSON line (ids in hex, attributes as a dict, its
events and links, its resource's service.name and the export's headers). Answers an empty
ExportTraceServiceResponse, after DELAY seconds when one is given (a slow collector).
Usage: python otlp-receiver.py PORT OUT [DELAY]
"""

import gzip
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "int_value", "bool_value", "double_value") else str(v)


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def span_line(span, service, headers):
    return {
        "service": service,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "attributes": attributes(span.attributes),
        "events": [{"name": e.name, "attributes": attributes(e.attributes)} for e in span.events],
        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in span.links],
        "status": {"code": span.status.code, "message": span.status.message},
        "headers": headers,
    }


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.headers.get("content-encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        if DELAY:
            time.sleep(DELAY)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        lines = []
        for rs in request.resource_spans:
            service = attributes(rs.resource.attributes).get("service.name")
            for ss in rs.scope_spans:
                lines += [span_line(s, service, headers) for s in ss.spans]
        with LOCK, open(OUT, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    PORT, OUT = int(sys.argv[1]), sys.argv[2]
    DELAY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    ThreadingHTTPServer(("127.0.0.1", PORT), Receiver).serve_forever()
