"""An OTLP/HTTP trace receiver for tests/network/traces.rs: decodes each export with the
OpenTelemetry project's own protobuf classes (opentelemetry-proto) and writes what it received
to stdout, one JSON object per line, in arrival order:

  {"port": P}                           first, once listening on 127.0.0.1
  {"export": N}                         one per request to /v1/traces, N spans in it
  {"span": {...}}                       each span of that request: service, trace_id, span_id,
                                        parent (hex, "" for a root), name, kind, attributes,
                                        events [{name, attributes}], status (code), start, end
  {"sync": PATH}                        for a GET of /sync/..., answered after the line is
                                        written: a reader that sees it has seen every line
                                        written for exports answered before it
Anything but a POST of protobuf to /v1/traces is answered 404 or 415 and written as
{"refused": path}.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = Lock()


def emit(obj):
    with OUT:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if not self.path.startswith("/sync/"):
            self.send_response(404)
            self.end_headers()
            return
        emit({"sync": self.path})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            emit({"refused": self.path})
            self.send_response(404)
            self.end_headers()
            return
        if self.headers.get("Content-Type") != "application/x-protobuf":
            emit({"refused": self.path, "content_type": self.headers.get("Content-Type")})
            self.send_response(415)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append({
                        "service": resource.get("service.name"),
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "attributes": attributes(span.attributes),
                        "events": [{"name": e.name, "attributes": attributes(e.attributes)}
                                   for e in span.events],
                        "status": span.status.code,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                    })
        emit({"export": len(spans)})
        for span in spans:
            emit({"span": span})
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    emit({"port": server.server_address[1]})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
