#!/usr/bin/env python3
"""Benchmarks mcpgraph against the original, side by side in one run (scripts/bench).

Servers: the original (npm mcpgraph@0.1.23 under node, installed into target/bench/original),
`mcpgraph serve`, a binary from `mcpgraph build`, and (for the transform tool) a minimal rmcp
server with one tool: the floor. Measurements through ../shared/tools/mcp-driver.py (cold start,
sequential calls, memory) and our own concurrent-call driver; JSONata micro-benchmarks against
jsonata-js. Writes bench/RESULTS.md and the table in README.md (between the bench markers).

`--only fanout` measures just the fan-out of a `map` (bench/graphs/fanout.yaml: 100 calls of the
mock's `nap` with ms 0 at concurrency 1, 10 and 64, through `mcpgraph serve`) and rewrites only
its part of the table (between the fanout markers), in a minute or so. `--only http` runs the HTTP
benchmark instead (bench/http.py, its own table); `--only debugger --before BIN` the debugging
surface's cost when unused (bench/debugger.py, its own table).
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("MCPGRAPH_SHARED", os.path.join(ROOT, "..", "shared"))
DRIVER = os.path.join(SHARED, "tools", "mcp-driver.py")
WORK = os.path.join(ROOT, "target", "bench")
ORIGINAL = os.path.join(WORK, "original")
MCPGRAPH = os.path.join(ROOT, "target", "release", "mcpgraph")


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def setup():
    main_js = os.path.join(ORIGINAL, "node_modules", "mcpgraph", "dist", "main.js")
    if not os.path.exists(main_js):
        os.makedirs(ORIGINAL, exist_ok=True)
        run(["npm", "install", "--prefix", ORIGINAL, "--no-audit", "--no-fund", "--loglevel=error", "mcpgraph@0.1.23"])
    run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph", "-p", "mcpgraph-bench"], cwd=ROOT)
    return main_js


def build_servers():
    """Builds the bench graphs; returns (binaries, build times in s: first graph, second graph)."""
    cache = os.environ.get("MCPGRAPH_CACHE_DIR") or os.path.join(WORK, "cache")
    cold = not os.path.isdir(os.path.join(cache, "target"))
    env = dict(os.environ, MCPGRAPH_CACHE_DIR=cache)
    bins, times = {}, []
    graphs = [("transform", "bench/graphs/transform.yaml", []), ("loop", "examples/loop.yaml", []),
              ("concurrent", "bench/graphs/slow.yaml", []), ("transform-small", "bench/graphs/transform.yaml", ["--small"])]
    for name, graph, flags in graphs:
        out = os.path.join(WORK, "bin", name)
        t0 = time.monotonic()
        run([MCPGRAPH, "build", *flags, graph, "-o", out], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        times.append(time.monotonic() - t0)
        bins[name] = out
    return bins, times, cold


def driver_bench(yaml, cmd, tool, args, calls, runs=1, cold_extra=0, cwd=None, warmup=0):
    full = [sys.executable, DRIVER, "bench", yaml, "--tool", tool, "--args", json.dumps(args), "--calls", str(calls),
            "--runs", str(runs), "--cold-extra", str(cold_extra), "--warmup", str(warmup), "--json"]
    if cwd:
        full += ["--cwd", cwd]
    out = subprocess.run(full + ["--"] + cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    raise RuntimeError(f"no summary from the driver:\n{out}")


def concurrent(cmd, yaml, calls=50):
    """Sends `calls` tools/call at once; returns (seconds until all answered, error count)."""
    spec = importlib.util.spec_from_file_location("mcp_driver", DRIVER)
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    full = driver.build_cmd(cmd, os.path.abspath(yaml))
    server = driver.ServerProcess(full)
    server.initialize(60)
    server.notify("notifications/initialized")
    ids = {}
    t0 = time.perf_counter()
    for i in range(calls):
        rid = server.next_id
        server.next_id += 1
        ids[rid] = f"tag-{i}"
        server.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "work", "arguments": {"tag": ids[rid]}}})
    errors, answered = 0, 0
    deadline = time.monotonic() + 120
    while answered < calls and time.monotonic() < deadline:
        msg = server.read_message(deadline)
        if msg is None:
            break
        rid = msg.get("id")
        if rid not in ids:
            continue
        answered += 1
        result = msg.get("result") or {}
        ok = "error" not in msg and not result.get("isError") and (result.get("structuredContent") or {}).get("tag") == ids[rid]
        errors += 0 if ok else 1
    elapsed = time.perf_counter() - t0
    server.close()
    return elapsed, errors + (calls - answered)


def jsonata_micro():
    rust = subprocess.run([os.path.join(ROOT, "target", "release", "jsonata-bench"), "1000"], capture_output=True, text=True, check=True).stdout
    js_lib = os.path.join(ORIGINAL, "node_modules", "jsonata")
    js = subprocess.run(["node", os.path.join(ROOT, "bench", "jsonata-bench.js"), js_lib, "1000"], capture_output=True, text=True, check=True, cwd=os.path.join(ROOT, "bench")).stdout
    parse = lambda text: {d["case"]: d["ns"] for d in map(json.loads, text.splitlines()) if text}
    return parse(rust), parse(js)


FANOUT_START, FANOUT_END = "<!-- bench:fanout:start -->", "<!-- bench:fanout:end -->"
FANOUT_ITEMS = 100


def mock_floor(concurrency, calls):
    """Median ms for FANOUT_ITEMS naps (ms 0) sent straight to the mock, `concurrency` in flight
    (a sliding window, as a map keeps its slots full): what the mock and the pipes cost without
    mcpgraph."""
    mock = os.path.join(SHARED, "tools", "mock-mcp-server.py")
    proc = subprocess.Popen([sys.executable, mock], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    out = proc.stdout  # buffered: an unbuffered readline would read a byte per system call

    def send(obj):
        proc.stdin.write((json.dumps(obj) + "\n").encode())
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    out.readline()
    nap = lambda rid: send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                            "params": {"name": "nap", "arguments": {"ms": 0}}})
    times, rid = [], 1
    for _ in range(calls + 1):  # the first round is a warm-up
        t0 = time.perf_counter()
        sent = answered = 0
        while sent < min(concurrency, FANOUT_ITEMS):
            nap(rid)
            rid += 1
            sent += 1
        while answered < FANOUT_ITEMS:
            out.readline()
            answered += 1
            if sent < FANOUT_ITEMS:
                nap(rid)
                rid += 1
                sent += 1
        times.append((time.perf_counter() - t0) * 1000)
    proc.stdin.close()
    proc.wait()
    return statistics.median(times[1:])


def fanout(quick):
    """The fan-out table, between its markers: wall time of a map of 100 naps (ms 0) per
    concurrency, per item, and the cost of each item beyond a map of one (`mcpgraph serve`)."""
    graphs = os.path.join(ROOT, "bench", "graphs")
    yaml = os.path.join(graphs, "fanout.yaml")
    serve = [MCPGRAPH, "serve", "{yaml}"]
    calls = 5 if quick else 30
    rows = {}
    for tool, n in (("fan_single", 10 * calls), ("fan_1", calls), ("fan_10", calls), ("fan_64", calls)):
        log(f"fan-out: {tool}, {n} calls")
        # The warm-up call starts the mock, so no timed call pays for its start.
        r = driver_bench(yaml, serve, tool, {}, n, runs=1, cwd=graphs, warmup=1)
        if r["errors_total"]:
            raise RuntimeError(f"fan-out {tool}: {r['errors_total']} calls failed")
        rows[tool] = r
    single = rows["fan_single"]["latency_median_ms_median"]
    lines = [FANOUT_START, "",
             f"Fan-out: a `map` of {FANOUT_ITEMS} calls of the shared mock's `nap` with ms 0 (so all of it is "
             f"overhead: ours, the pipes and the Python mock), through `mcpgraph serve`; median of {calls} "
             f"calls each, measured {datetime.date.today().isoformat()} on {os.cpu_count()} cores. A whole "
             f"`tools/call` of a map of one item takes {single:.3f} ms.", "",
             f"| concurrency | wall time, {FANOUT_ITEMS} items | per item | each item beyond the first | "
             f"the same {FANOUT_ITEMS} naps sent straight to the mock | mcpgraph's overhead per item |",
             "|---:|---:|---:|---:|---:|---:|"]
    for tool, conc in (("fan_1", 1), ("fan_10", 10), ("fan_64", 64)):
        wall = rows[tool]["latency_median_ms_median"]
        floor = mock_floor(conc, calls)
        lines.append(f"| {conc} | {wall:.2f} ms | {wall / FANOUT_ITEMS:.3f} ms | "
                     f"{(wall - single) / (FANOUT_ITEMS - 1):.3f} ms | {floor:.2f} ms | "
                     f"{(wall - floor) / FANOUT_ITEMS:.3f} ms |")
    lines += ["", FANOUT_END]
    return "\n".join(lines)


def replace_fanout(text, block):
    """`text` with its fan-out part replaced by `block` (appended when it has none)."""
    if FANOUT_START in text and FANOUT_END in text:
        return text[: text.index(FANOUT_START)] + block + text[text.index(FANOUT_END) + len(FANOUT_END):]
    end = "<!-- bench:end -->"
    if end in text:
        return text[: text.index(end)] + "\n" + block + "\n" + text[text.index(end):]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def only_fanout(quick):
    run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph"], cwd=ROOT)
    block = fanout(quick)
    print(block)
    if quick:
        return
    for path in (os.path.join(ROOT, "README.md"), os.path.join(ROOT, "bench", "RESULTS.md")):
        text = open(path).read()
        open(path, "w").write(replace_fanout(text, block))


def ratio(theirs, ours):
    return f"{theirs / ours:.1f}×" if ours else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    ap.add_argument("--only", choices=["fanout", "http", "debugger"], help="measure only this part and rewrite only its table")
    ap.add_argument("--before", help="with --only debugger: an mcpgraph binary built without the debugging surface")
    a = ap.parse_args()
    if a.only == "debugger":
        sys.dont_write_bytecode = True
        spec = importlib.util.spec_from_file_location("bench_debugger", os.path.join(ROOT, "bench", "debugger.py"))
        bench_debugger = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_debugger)
        bench_debugger.main(a.before, a.quick)
        return
    if a.only == "fanout":
        only_fanout(a.quick)
        return
    if a.only == "http":
        # Loaded by path: as a module named `http` it would stand in for the standard library's.
        sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
        spec = importlib.util.spec_from_file_location("bench_http", os.path.join(ROOT, "bench", "http.py"))
        bench_http = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_http)
        bench_http.main(a.quick)
        return
    main_js = setup()
    bins, build_times, cold_build = build_servers()
    q = a.quick
    original = ["node", main_js, "-g", "{yaml}"]
    serve = [MCPGRAPH, "serve", "{yaml}"]
    built = lambda name: ["sh", "-c", 'exec "$0"', bins[name], "{yaml}"]
    floor = ["sh", "-c", 'exec "$0"', os.path.join(ROOT, "target", "release", "floor-server"), "{yaml}"]
    transform = os.path.join(ROOT, "bench", "graphs", "transform.yaml")
    loop = os.path.join(ROOT, "examples", "loop.yaml")
    slow = os.path.join(ROOT, "bench", "graphs", "slow.yaml")
    servers = {"original": original, "serve": serve, "built": built("transform"), "floor": floor, "small": built("transform-small")}
    r = {}
    for name, cmd in servers.items():
        log(f"transform tool, cold start and 1000 calls: {name}")
        r[("transform", name)] = driver_bench(transform, cmd, "echo_value", {"value": "hello"}, 100 if q else 1000, cold_extra=3 if q else 12)
    loops = {"original": original, "serve": serve, "built": built("loop")}
    for n, calls in ((100, {"original": 5 if q else 30, "ours": 50 if q else 300}), (900, {"original": 2 if q else 5, "ours": 20 if q else 100})):
        for name, cmd in loops.items():
            log(f"sum_to_n n={n}: {name}")
            r[(f"loop{n}", name)] = driver_bench(loop, cmd, "sum_to_n", {"n": n}, calls["original" if name == "original" else "ours"])
    conc = {}
    for name, cmd in {"original": original, "serve": serve, "built": built("concurrent")}.items():
        log(f"50 concurrent calls: {name}")
        conc[name] = concurrent(cmd, slow)
    rust_ns, js_ns = jsonata_micro()
    fanout_block = fanout(q)

    med = lambda key, name, field: r[(key, name)][field]
    lines = []
    lines.append(f"Measured {datetime.date.today().isoformat()} on {platform.node() or 'this machine'}: {os.cpu_count()} cores, "
                 f"{platform.system()} {platform.release()}, node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}, "
                 f"mcpgraph {subprocess.run([MCPGRAPH, '--version'], capture_output=True, text=True).stdout.split()[-1]}, original mcpgraph 0.1.23. "
                 f"Ratios are the original's figure over ours (higher is better for us); the machine is shared and noisy, so compare ratios, not times.")
    lines.append("")
    lines.append("| measurement | original | `mcpgraph serve` | built binary | floor (minimal rmcp server) | original ÷ built |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    cold = lambda name: med("transform", name, "cold_extra_median_ms") or med("transform", name, "cold_start_ms_median")
    lines.append(f"| cold start, spawn → `initialize` answer (median of {3 if q else 12} spawns) | {cold('original'):.1f} ms | {cold('serve'):.1f} ms | {cold('built'):.1f} ms | {cold('floor'):.1f} ms | {ratio(cold('original'), cold('built'))} |")
    for field, label in (("latency_median_ms_median", "p50"), ("latency_p99_ms_median", "p99")):
        v = lambda name: med("transform", name, field)
        lines.append(f"| transform tool, {label} of {100 if q else 1000} sequential calls | {v('original'):.3f} ms | {v('serve'):.3f} ms | {v('built'):.3f} ms | {v('floor'):.3f} ms | {ratio(v('original'), v('built'))} |")
    for n in (100, 900):
        v = lambda name: med(f"loop{n}", name, "latency_median_ms_median")
        lines.append(f"| `sum_to_n` n={n}, time per call (median) | {v('original'):.2f} ms | {v('serve'):.3f} ms | {v('built'):.3f} ms | | {ratio(v('original'), v('built'))} |")
    l100 = lambda name: med("loop100", name, "latency_median_ms_median")
    l900 = lambda name: med("loop900", name, "latency_median_ms_median")
    lines.append(f"| n=900 ÷ n=100 (linear ≈ 9) | {l900('original') / l100('original'):.1f} | {l900('serve') / l100('serve'):.1f} | {l900('built') / l100('built'):.1f} | | |")
    rss = lambda name: med("transform", name, "rss_after_kib_median") / 1024
    lines.append(f"| resident memory after {100 if q else 1000} calls | {rss('original'):.1f} MiB | {rss('serve'):.1f} MiB | {rss('built'):.1f} MiB | {rss('floor'):.1f} MiB | {ratio(rss('original'), rss('built'))} |")
    lines.append(f"| resident memory after {100 if q else 1000} calls, built with `--small` | {rss('original'):.1f} MiB | | {rss('small'):.1f} MiB | {rss('floor'):.1f} MiB | {ratio(rss('original'), rss('small'))} |")
    lines.append(f"| transform tool p50, built with `--small` | {med('transform', 'original', 'latency_median_ms_median'):.3f} ms | | {med('transform', 'small', 'latency_median_ms_median'):.3f} ms | {med('transform', 'floor', 'latency_median_ms_median'):.3f} ms | {ratio(med('transform', 'original', 'latency_median_ms_median'), med('transform', 'small', 'latency_median_ms_median'))} |")
    lrss = lambda name: med("loop100", name, "rss_after_kib_median") / 1024
    lines.append(f"| resident memory after the n=100 loop calls | {lrss('original'):.1f} MiB | {lrss('serve'):.1f} MiB | {lrss('built'):.1f} MiB | | {ratio(lrss('original'), lrss('built'))} |")
    tput = lambda name: 50 / conc[name][0]
    lines.append(f"| 50 concurrent calls (a 43-node loop each): calls/s, wrong or failed answers | {tput('original'):.0f}/s, {conc['original'][1]} wrong | {tput('serve'):.0f}/s, {conc['serve'][1]} wrong | {tput('built'):.0f}/s, {conc['built'][1]} wrong | | {ratio(tput('built'), tput('original'))} |")
    lines.append(f"| build time: first graph{' (cold: empty cache)' if cold_build else ' (cache warm)'}, second graph; with `--small` | | | {build_times[0]:.1f} s, {build_times[1]:.1f} s; {build_times[3]:.1f} s | | |")
    lines.append("")
    lines.append("JSONata micro-benchmarks (ns per evaluation, pre-parsed expression; ours with the history functions registered, as in a run):")
    lines.append("")
    lines.append("| expression | jsonata-js 2.2 (node) | mcpgraph (jsonata-core) | ratio |")
    lines.append("|---|---:|---:|---:|")
    for case, ns in rust_ns.items():
        theirs = js_ns.get(case)
        lines.append(f"| {case} | {theirs:,.0f} | {ns:,.0f} | {ratio(theirs, ns) if theirs else 'n/a'} |")
    lines.append("")
    lines.append(fanout_block)
    table = "\n".join(lines) + "\n"
    print(table)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "w") as f:
        f.write("# Benchmark results\n\nWritten by `scripts/bench`.\n\n" + table)
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read()
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    if start in text and end in text and not q:
        text = text[: text.index(start) + len(start)] + "\n" + table + text[text.index(end):]
        open(readme, "w").write(text)


if __name__ == "__main__":
    main()
