#!/usr/bin/env python3
"""The cost of traces (scripts/bench --only traces [--before BIN]): per-call latency over stdio of
`mcpgraph serve` with traces off (no OTLP endpoint: the default), of the same build with traces
on (every span exported to a local collector), and of an older build (`--before`, built before
traces existed), side by side in one run.

Two graphs: examples/loop.yaml's `sum_to_n` with n=100 (203 node executions a call: the
executor's per-node cost) and bench/graphs/transform.yaml's `echo_value` (3 nodes: the per-call
cost). The collector is a thread of this script answering every OTLP POST with 200 (it reads the
body and decodes nothing: the cost measured is the server's). The servers take turns, round after
round, so a change in the machine's load reaches all of them; the table gives the median over the
rounds of each round's median and mean latency, driven by ../shared/tools/mcp-driver.py.

Writes bench/RESULTS-traces.md and the part of README.md between the bench-traces markers.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import threading

# bench/http.py would stand in for the standard library's `http` (bench/ is first on sys.path
# when this file or bench/run.py runs as a script).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.modules.pop("http", None)
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# This build's mcpgraph; MCPGRAPH_BENCH_BIN names another (one built with another profile).
MCPGRAPH = os.environ.get("MCPGRAPH_BENCH_BIN") or os.path.join(ROOT, "target", "release", "mcpgraph")
DRIVER = os.path.join(ROOT, "..", "shared", "tools", "mcp-driver.py")
START, END = "<!-- bench-traces:start -->", "<!-- bench-traces:end -->"
BEFORE_SECTION = "\n## Examples\n"
CASES = [
    # (label, graph, tool, args, node executions a call)
    ("loop n=100", "examples/loop.yaml", "sum_to_n", {"n": 100}, 203),
    ("transform", "bench/graphs/transform.yaml", "echo_value", {"value": "hello"}, 3),
]


def log(msg):
    print(f"[bench-traces] {msg}", file=sys.stderr, flush=True)


class Collector(BaseHTTPRequestHandler):
    requests = 0
    spans_bytes = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Collector.requests += 1
        Collector.spans_bytes += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def bench(server, env, graph, tool, args, calls):
    cmd = [sys.executable, DRIVER, "bench", os.path.join(ROOT, graph), "--tool", tool,
           "--args", json.dumps(args), "--calls", str(calls), "--runs", "1", "--warmup", "20",
           "--stderr", "devnull", "--json"]
    for k, v in env.items():
        cmd += ["--env", f"{k}={v}"]
    cmd += ["--", server, "serve", "{yaml}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    summary = json.loads(next(l for l in out.splitlines() if l.startswith("JSON "))[5:])
    assert summary["errors_total"] == 0, out
    run = next(l for l in out.splitlines() if l.startswith("run 1:"))
    # The mean: calls / throughput.
    mean_ms = 1000.0 / summary["throughput_calls_per_s_median"]
    return summary["latency_median_ms_median"], mean_ms, run


def main(quick=False, before=None):
    if not os.environ.get("MCPGRAPH_BENCH_BIN"):
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph"], cwd=ROOT, check=True)
    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    servers = []
    if before:
        servers.append(("before (traces absent)", os.path.abspath(before), {}))
    servers.append(("off (no endpoint)", MCPGRAPH, {}))
    servers.append(("on (exported)", MCPGRAPH, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}))
    rounds = 3 if quick else 7
    calls = {"loop n=100": 200 if quick else 1000, "transform": 500 if quick else 3000}
    results = {}
    for r in range(rounds):
        for label, graph, tool, args, _ in CASES:
            for name, server, env in servers:
                p50, mean, line = bench(server, env, graph, tool, args, calls[label])
                results.setdefault((label, name), []).append((p50, mean))
                log(f"round {r + 1} {label} {name}: p50 {p50:.3f} ms mean {mean:.3f} ms")
    log(f"the collector received {Collector.requests} exports ({Collector.spans_bytes} bytes)")
    rows = []
    for label, graph, tool, args, nodes in CASES:
        med = {name: (statistics.median(p for p, _ in results[(label, name)]),
                      statistics.median(m for _, m in results[(label, name)])) for name, _, _ in servers}
        off = med["off (no endpoint)"]
        on = med["on (exported)"]
        for name, _, _ in servers:
            p50, mean = med[name]
            if name.startswith("before"):
                note = f"off ÷ before: p50 {off[0] / p50:.2f}×, mean {off[1] / mean:.2f}×"
            elif name.startswith("on"):
                per_node_us = (on[1] - off[1]) * 1000.0 / (nodes + 1)
                note = f"on ÷ off: mean {on[1] / off[1]:.2f}×; {per_node_us:.1f} µs per span (the call's and {nodes} nodes')"
            else:
                note = ""
            rows.append(f"| {label} | {name} | {p50:.3f} | {mean:.3f} | {note} |")
    when = datetime.date.today().isoformat()
    table = "\n".join([
        f"Traces' cost, measured {when} ({platform.machine()}, {os.cpu_count()} cores; `scripts/bench --only traces"
        f"{' --before BIN' if before else ''}`; {rounds} interleaved rounds, medians; stdio, `mcpgraph serve`; "
        f"{Collector.requests} exports received):",
        "",
        "| graph | traces | p50 ms | mean ms | ratio |",
        "|---|---|---|---|---|",
        *rows,
    ])
    print(table)
    with open(os.path.join(ROOT, "bench", "RESULTS-traces.md"), "w") as f:
        f.write("# Traces: the cost off and on\n\n" + __doc__.split("\n\n", 1)[1] + "\n" + table + "\n")
    readme_path = os.path.join(ROOT, "README.md")
    with open(readme_path) as f:
        readme = f.read()
    block = f"{START}\n{table}\n{END}"
    if START in readme:
        head, rest = readme.split(START, 1)
        readme = head + block + rest.split(END, 1)[1]
    else:
        readme = readme.replace(BEFORE_SECTION, "\n" + block + "\n" + BEFORE_SECTION, 1)
    with open(readme_path, "w") as f:
        f.write(readme)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before")
    a = ap.parse_args()
    main(a.quick, a.before)
