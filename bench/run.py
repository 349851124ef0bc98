#!/usr/bin/env python3
"""Benchmarks mcpgraph against the original, side by side in one run (scripts/bench).

Servers: the original (npm mcpgraph@0.1.23 under node, installed into target/bench/original),
`mcpgraph serve`, two servers of each graph from `mcpgraph build` (stub-built: the prebuilt
stub with the graph attached; native-built: `--native`, the graph's crate compiled by cargo), and
(for the transform tool) a minimal rmcp server with one tool: the floor. Measurements through
../shared/tools/mcp-driver.py (cold start, sequential calls, memory) and our own concurrent-call
driver; JSONata micro-benchmarks against jsonata-js. Writes bench/RESULTS.md and the table in
README.md (between the bench markers).

The build part (between the build markers) compares the two ways of building one graph: build
time (the stub, `--native` with a warm cache, after an edit, and with a cold cache), and binary
size. `--cold-native` adds the cold-cache build: one `build --native` into a fresh
MCPGRAPH_CACHE_DIR in target/bench, which compiles the whole runtime (minutes); without it the row
says it was not measured, unless this run's own cache was empty, so its first build was cold.
`--only build` measures just this part and rewrites only it (under a minute with a warm cache,
plus a runtime recompile when the runtime changed since the cache's last build).

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
STUB = os.path.join(ROOT, "target", "release", "mcpgraph-stub")
BINS = os.path.join(WORK, "bin")
TRANSFORM = os.path.join(ROOT, "bench", "graphs", "transform.yaml")
LOOP = os.path.join(ROOT, "examples", "loop.yaml")
SLOW = os.path.join(ROOT, "bench", "graphs", "slow.yaml")


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


def run_cache():
    """The mcpgraph cache this run's `--native` builds share: scripts/bench's own (which
    bench/http.py reuses) unless MCPGRAPH_CACHE_DIR names one."""
    return os.environ.get("MCPGRAPH_CACHE_DIR") or os.path.join(WORK, "cache")


def timed_build(graph, out, flags, env):
    """Seconds that `mcpgraph build FLAGS GRAPH -o OUT` took, the wall time a user waits."""
    cmd = [MCPGRAPH, "build", *flags, graph, "-o", out]
    log(" ".join(cmd))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t0 = time.perf_counter()
    # Captured, not shown: cargo's progress would drown the log; it is shown when the build fails.
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}); run it by hand to see "
                           f"all of its output. The end of it:\n{done.stderr[-4000:]}")
    return elapsed


def stub_build(graph, out, env):
    """`mcpgraph build` the default way, from this tree's stub (named, so that $MCPGRAPH_STUB or a
    stub in mcpgraph's cache cannot stand in for it)."""
    return timed_build(graph, out, ["--stub", STUB], env)


STUB_BUILDS = 5


def edited_transform():
    """A copy of the transform graph whose tool description differs from every earlier copy's:
    the description is in the checked graph, so `--native` must recompile the copy's crate, as
    after a user's edit. The same path every run, so its crate in the cache is reused."""
    text = open(TRANSFORM).read()
    line = 'description: "entry -> transform -> exit"'
    if line not in text:
        raise RuntimeError(f"{TRANSFORM} no longer has the line `{line}` that edited_transform() in "
                           f"bench/run.py changes: make it change a line the graph has")
    path = os.path.join(WORK, "build", "transform-edited.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text.replace(line, f'description: "entry -> transform -> exit, edited {time.time_ns()}"'))
    return path


def build_figures(cold_native):
    """Builds the transform graph both ways and returns the build table's figures: seconds of
    the stub builds (median of STUB_BUILDS), of `--native` with a warm cache (the graph unchanged
    since the build before, and after an edit) and with a cold one (None when not measured), and
    the servers' paths."""
    cache = run_cache()
    env = dict(os.environ, MCPGRAPH_CACHE_DIR=cache)
    stub_out = os.path.join(BINS, "transform")
    native_out = os.path.join(BINS, "transform-native")
    stub_s = statistics.median(stub_build(TRANSFORM, stub_out, env) for _ in range(STUB_BUILDS))
    target = os.environ.get("MCPGRAPH_TARGET_DIR") or os.path.join(cache, "target")
    run_cache_empty = not os.path.isdir(target)
    cold_s = cold_how = None
    if cold_native and not run_cache_empty:
        # Only mcpgraph's cache is fresh: cargo's download cache keeps the crates' sources (a
        # build offline works), so this is the compile a first build pays, without the download.
        fresh = os.path.join(WORK, "cold-cache")
        shutil.rmtree(fresh, ignore_errors=True)
        cold_env = {k: v for k, v in env.items() if k != "MCPGRAPH_TARGET_DIR"}
        cold_env["MCPGRAPH_CACHE_DIR"] = fresh
        log(f"`build --native` with a cold cache ({fresh}): the whole runtime compiles, minutes")
        cold_s = timed_build(TRANSFORM, native_out, ["--native"], cold_env)
        cold_how = "a fresh MCPGRAPH_CACHE_DIR"
        shutil.rmtree(fresh, ignore_errors=True)  # gigabytes, kept only to be measured
    # The first build also recompiles the runtime when it changed since the cache's last build.
    first_s = timed_build(TRANSFORM, native_out, ["--native"], env)
    if run_cache_empty:
        cold_s, cold_how = first_s, "this run's cache was empty"
    warm_s = timed_build(TRANSFORM, native_out, ["--native"], env)
    edited_s = timed_build(edited_transform(), os.path.join(BINS, "transform-edited-native"), ["--native"], env)
    return {"stub_s": stub_s, "warm_s": warm_s, "edited_s": edited_s, "cold_s": cold_s, "cold_how": cold_how,
            "stub_out": stub_out, "native_out": native_out}


def build_servers(cold_native):
    """Builds every bench graph with the stub and with `--native`, and the transform graph with
    `--small`; returns (servers by name, the build table's figures, seconds of the `--small`
    build)."""
    env = dict(os.environ, MCPGRAPH_CACHE_DIR=run_cache())
    figures = build_figures(cold_native)
    bins = {"transform": figures["stub_out"], "transform-native": figures["native_out"]}
    for name, graph in (("loop", LOOP), ("concurrent", SLOW)):
        bins[name] = os.path.join(BINS, name)
        stub_build(graph, bins[name], env)
        bins[f"{name}-native"] = os.path.join(BINS, f"{name}-native")
        timed_build(graph, bins[f"{name}-native"], ["--native"], env)
    bins["transform-small"] = os.path.join(BINS, "transform-small")
    small_s = timed_build(TRANSFORM, bins["transform-small"], ["--small"], env)
    return bins, figures, small_s


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


def driver_module():
    """The shared driver (../shared/tools/mcp-driver.py) as a module, for its `ServerProcess`."""
    spec = importlib.util.spec_from_file_location("mcp_driver", DRIVER)
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    return driver


def concurrent(cmd, yaml, calls=50, bursts=15):
    """Sends `calls` tools/call at once, `bursts` times after one burst to warm up, each burst
    answered in full before the next; returns (the median burst's seconds until all its calls
    were answered, wrong or missing answers over every burst but the warm-up). One burst takes
    a few milliseconds, so a single one was mostly noise (its ratios ranged from 0.57x to 1.30x
    between runs of the same code)."""
    driver = driver_module()
    full = driver.build_cmd(cmd, os.path.abspath(yaml))
    server = driver.ServerProcess(full)
    server.initialize(60)
    server.notify("notifications/initialized")
    times, wrong = [], 0
    for burst in range(bursts + 1):
        ids = {}
        t0 = time.perf_counter()
        for i in range(calls):
            rid = server.next_id
            server.next_id += 1
            ids[rid] = f"tag-{burst}-{i}"
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
        # The warm-up counts only when it is the last burst: one left unanswered ends the run
        # (the rest would arrive in the next burst's reading).
        if burst > 0 or answered < calls:
            times.append(time.perf_counter() - t0)
            wrong += errors + (calls - answered)
        if answered < calls:
            break
    server.close()
    return statistics.median(times), wrong


def jsonata_micro():
    rust = subprocess.run([os.path.join(ROOT, "target", "release", "jsonata-bench"), "1000"], capture_output=True, text=True, check=True).stdout
    js_lib = os.path.join(ORIGINAL, "node_modules", "jsonata")
    js = subprocess.run(["node", os.path.join(ROOT, "bench", "jsonata-bench.js"), js_lib, "1000"], capture_output=True, text=True, check=True, cwd=os.path.join(ROOT, "bench")).stdout
    parse = lambda text: {d["case"]: d for d in map(json.loads, text.splitlines()) if text}
    return parse(rust), {case: d["ns"] for case, d in parse(js).items()}



def inside_times(servers, yaml, tool, args, calls, rounds=3):
    """The loop's time per call as the client sees it and inside the server, for each of
    `servers` (name: command with "{yaml}"), `rounds` rounds in which they take turns, each
    round `calls` sequential calls after a fifth as many to warm up. Inside is the call log's
    `duration_ms` (`MCPGRAPH_LOG=mcpgraph::call=info`): from the handler's start to its result,
    the arguments' and the result's validation included, reading and writing the messages not.
    Returns {name: (client p50 ms, inside p50 ms)}, each the median of the rounds' medians."""
    driver = driver_module()
    seen = {name: ([], []) for name in servers}
    warm = max(1, calls // 5)
    for _ in range(rounds):
        for name, cmd in servers.items():
            log_path = os.path.join(WORK, f"calls-{name}.log")
            open(log_path, "w").close()  # the driver appends
            server = driver.ServerProcess(driver.build_cmd(cmd, yaml), env={"MCPGRAPH_LOG": "mcpgraph::call=info"},
                                          stderr_mode="file", stderr_file=log_path)
            server.initialize(60)
            server.notify("notifications/initialized")
            client = []
            for _ in range(warm + calls):
                _, response, ms = server.request("tools/call", {"name": tool, "arguments": args})
                result = (response or {}).get("result") or {}
                if not result or result.get("isError"):
                    raise RuntimeError(f"{name}: {tool} failed: {response}")
                client.append(ms)
            server.close()
            inside = [float(line.split("duration_ms=")[1].split()[0])
                      for line in open(log_path) if "duration_ms=" in line]
            if len(inside) != warm + calls:
                raise RuntimeError(f"{name}: {len(inside)} call log lines for {warm + calls} calls ({log_path})")
            seen[name][0].append(statistics.median(client[warm:]))
            seen[name][1].append(statistics.median(inside[warm:]))
    return {name: (statistics.median(c), statistics.median(i)) for name, (c, i) in seen.items()}


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


def replace_part(text, start, end, block):
    """`text` with its part between the markers `start` and `end` replaced by `block` (which
    carries them); put before the end of the bench table when `text` has no such part yet."""
    if start in text and end in text:
        return text[: text.index(start)] + block + text[text.index(end) + len(end):]
    table_end = "<!-- bench:end -->"
    if table_end in text:
        return text[: text.index(table_end)] + "\n" + block + "\n" + text[text.index(table_end):]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def rewrite_part(start, end, block):
    """Replaces one part of the README table and of bench/RESULTS.md, leaving the rest as it was."""
    for path in (os.path.join(ROOT, "README.md"), os.path.join(ROOT, "bench", "RESULTS.md")):
        text = open(path).read()
        open(path, "w").write(replace_part(text, start, end, block))


def only_fanout(quick):
    run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph"], cwd=ROOT)
    block = fanout(quick)
    print(block)
    if not quick:
        rewrite_part(FANOUT_START, FANOUT_END, block)


BUILD_START, BUILD_END = "<!-- bench:build:start -->", "<!-- bench:build:end -->"


def duration(seconds):
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def mib(size):
    return f"{size / (1024 * 1024):.2f} MiB"


def versus(stub, native):
    """The stub-built server's figure over the native one's: two decimals near 1×; a far smaller
    one (a build time) with two significant digits and as a fraction, which reads better."""
    if not native:
        return "n/a"
    share = stub / native
    if share >= 0.1 or not share:
        return f"{share:.2f}×"
    return f"{share:.2g}× (1/{native / stub:,.0f})"


def build_block(figures):
    """The build part, between its markers: build times and binary sizes of the transform graph
    built both ways."""
    stub, stub_size = figures["stub_s"], os.path.getsize(figures["stub_out"])
    native_size = os.path.getsize(figures["native_out"])
    graph_bytes = stub_size - os.path.getsize(STUB)
    lines = [BUILD_START, "",
             f"Building `bench/graphs/transform.yaml` both ways, measured {datetime.date.today().isoformat()} on "
             f"{os.cpu_count()} cores. The stub (`mcpgraph build`) copies the prebuilt `mcpgraph-stub` and attaches "
             f"the checked graph; it uses no cache, so its figure (the median of {STUB_BUILDS} builds) is the same in "
             f"each build row. `--native` runs cargo on the graph's generated crate in mcpgraph's cache: warm, the "
             f"runtime is compiled there already; cold, mcpgraph's cache is empty and cargo compiles the runtime and "
             f"every dependency (cargo's own download cache left as it was, so no download is timed). Ratios are the stub-built server's figure over the "
             f"native one's.", "",
             "| measurement | stub-built (`mcpgraph build`) | native-built (`build --native`) | stub ÷ native |",
             "|---|---:|---:|---:|",
             f"| build time; `--native` with a warm cache, the graph unchanged since its last build | {duration(stub)} | "
             f"{duration(figures['warm_s'])} | {versus(stub, figures['warm_s'])} |",
             f"| build time; `--native` with a warm cache after an edit to the graph (its crate recompiled) | "
             f"{duration(stub)} | {duration(figures['edited_s'])} | {versus(stub, figures['edited_s'])} |"]
    cold = figures["cold_s"]
    if cold is None:
        lines.append(f"| build time; `--native` with a cold cache | {duration(stub)} | not measured (`scripts/bench "
                     f"--only build --cold-native`: minutes) | |")
    else:
        lines.append(f"| build time; `--native` with a cold cache ({figures['cold_how']}), measured once | "
                     f"{duration(stub)} | {duration(cold)} | {versus(stub, cold)} |")
    lines.append(f"| binary size (both stripped by their release profiles) | {mib(stub_size)} (the stub and "
                 f"{graph_bytes:,} bytes attached: the graph and its trailer) | {mib(native_size)} | {versus(stub_size, native_size)} |")
    lines += ["", BUILD_END]
    return "\n".join(lines)


def only_build(quick, cold_native):
    run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph"], cwd=ROOT)
    block = build_block(build_figures(cold_native))
    print(block)
    if not quick:
        rewrite_part(BUILD_START, BUILD_END, block)


def ratio(theirs, ours):
    return f"{theirs / ours:.1f}×" if ours else "n/a"


def stale_layout():
    """Why src/stub.order may no longer match the binaries' symbol names, or None: a change to
    `Cargo.lock` or the toolchain file renames part of the functions it lists (docs/build.md
    "Where it applies"; the runtime's own, in one codegen unit, keep their names), and the
    memory rows then grow. Judged by git: a commit touching them after the list's last one, or
    an uncommitted change to them. Not seen: new runtime code that every call runs, which the
    list lacks until it is written again."""
    paths = ["Cargo.lock", "rust-toolchain.toml"]
    git = lambda *args: subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not git("rev-parse", "--git-dir"):
        return None
    if git("status", "--porcelain", "--", *paths):
        return "Cargo.lock or the toolchain file has uncommitted changes"
    listed = git("log", "-1", "--format=%H", "--", "src/stub.order")
    changed = git("log", "-1", "--format=%H", "--", *paths)
    newer = listed and changed and changed != listed and subprocess.run(
        ["git", "merge-base", "--is-ancestor", listed, changed], cwd=ROOT).returncode == 0
    if newer:
        return f"{changed[:7]} changed Cargo.lock or the toolchain file after src/stub.order was last written ({listed[:7]})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    ap.add_argument("--only", choices=["build", "fanout", "http", "debugger", "traces"], help="measure only this part and rewrite only its table")
    ap.add_argument("--cold-native", action="store_true",
                    help="also time one `build --native` with a cold cache (a fresh MCPGRAPH_CACHE_DIR in target/bench: minutes)")
    ap.add_argument("--before", help="with --only debugger: an mcpgraph binary built without the debugging surface; "
                                     "with --only http or traces: an mcpgraph binary built before a change, served beside this one; "
                                     "without --only: one whose `serve` is measured in the stdio rows beside this build's (its own table)")
    a = ap.parse_args()
    stale = stale_layout()
    if stale and a.only in (None, "http"):
        log(f"warning: {stale}; the memory rows may be high until `scripts/stub-order` writes the list again")
    if a.only == "debugger":
        sys.dont_write_bytecode = True
        spec = importlib.util.spec_from_file_location("bench_debugger", os.path.join(ROOT, "bench", "debugger.py"))
        bench_debugger = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_debugger)
        bench_debugger.main(a.before, a.quick)
        return
    if a.only == "traces":
        sys.dont_write_bytecode = True
        spec = importlib.util.spec_from_file_location("bench_traces", os.path.join(ROOT, "bench", "traces.py"))
        bench_traces = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_traces)
        bench_traces.main(a.quick, before=a.before)
        return
    if a.only == "build":
        only_build(a.quick, a.cold_native)
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
        bench_http.main(a.quick, before=a.before)
        return
    main_js = setup()
    bins, build_fig, small_s = build_servers(a.cold_native)
    q = a.quick
    original = ["node", main_js, "-g", "{yaml}"]
    serve = [MCPGRAPH, "serve", "{yaml}"]
    built = lambda name: ["sh", "-c", 'exec "$0"', bins[name], "{yaml}"]
    floor = ["sh", "-c", 'exec "$0"', os.path.join(ROOT, "target", "release", "floor-server"), "{yaml}"]
    # "stub" and "native" are the two builds of one graph; "small" is `--small` (a native build).
    servers = {"original": original, "serve": serve, "stub": built("transform"), "native": built("transform-native"),
               "floor": floor, "small": built("transform-small")}
    before = [os.path.abspath(a.before), "serve", "{yaml}"] if a.before else None
    if before:
        servers["before"] = before
    r = {}
    for name, cmd in servers.items():
        log(f"transform tool, cold start and 1000 calls: {name}")
        r[("transform", name)] = driver_bench(TRANSFORM, cmd, "echo_value", {"value": "hello"}, 100 if q else 1000, cold_extra=3 if q else 12)
    loops = {"original": original, "serve": serve, "stub": built("loop"), "native": built("loop-native")}
    if before:
        loops["before"] = before
    for n, calls in ((100, {"original": 5 if q else 30, "ours": 50 if q else 300}), (900, {"original": 2 if q else 5, "ours": 20 if q else 100})):
        for name, cmd in loops.items():
            log(f"sum_to_n n={n}: {name}")
            r[(f"loop{n}", name)] = driver_bench(LOOP, cmd, "sum_to_n", {"n": n}, calls["original" if name == "original" else "ours"])
    inside = {}
    for n, calls in ((100, 60 if q else 400), (900, 10 if q else 60)):
        log(f"sum_to_n n={n}, time inside the server: serve, stub, native")
        inside[n] = inside_times({name: loops[name] for name in ("serve", "stub", "native")}, LOOP, "sum_to_n", {"n": n}, calls)
    conc = {}
    for name, cmd in {"original": original, "serve": serve, "stub": built("concurrent"), "native": built("concurrent-native")}.items():
        log(f"50 concurrent calls: {name}")
        conc[name] = concurrent(cmd, SLOW, bursts=3 if q else 15)
    rust_ns, js_ns = jsonata_micro()
    fanout_block = fanout(q)

    med = lambda key, name, field: r[(key, name)][field]
    row = lambda *cells: "| " + " | ".join(cells) + " |"
    lines = []
    lines.append(f"Measured {datetime.date.today().isoformat()} on {platform.node() or 'this machine'}: {os.cpu_count()} cores, "
                 f"{platform.system()} {platform.release()}, node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}, "
                 f"mcpgraph {subprocess.run([MCPGRAPH, '--version'], capture_output=True, text=True).stdout.split()[-1]}, original mcpgraph 0.1.23. "
                 f"Each graph is served by two servers built from it: stub-built (`mcpgraph build`, the prebuilt stub with the graph attached) "
                 f"and native-built (`mcpgraph build --native`, the graph's crate compiled by cargo). "
                 f"original ÷ built is the original's figure over the stub-built server's (over the `--small` one in its rows; higher is better for us); "
                 f"stub ÷ native is the stub-built server's figure over the native-built one's (1.00× is the same; above 1× the stub-built one "
                 f"takes longer or more memory, or for calls/s answers faster); serve ÷ native is `mcpgraph serve`'s figure over the native-built "
                 f"server's, whose expressions are compiled to Rust (docs/build.md), in the same sense. The machine is shared and noisy, so compare ratios, not times.")
    lines.append("")
    lines.append("| measurement | original | `mcpgraph serve` | stub-built (`mcpgraph build`) | native-built (`build --native`) | floor (minimal rmcp server) | original ÷ built | stub ÷ native | serve ÷ native |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cold = lambda name: med("transform", name, "cold_extra_median_ms") or med("transform", name, "cold_start_ms_median")
    lines.append(row(f"cold start, spawn → `initialize` answer (median of {3 if q else 12} spawns)",
                     *(f"{cold(name):.1f} ms" for name in ("original", "serve", "stub", "native", "floor")),
                     ratio(cold("original"), cold("stub")), versus(cold("stub"), cold("native")), versus(cold("serve"), cold("native"))))
    for field, label in (("latency_median_ms_median", "p50"), ("latency_p99_ms_median", "p99")):
        v = lambda name: med("transform", name, field)
        lines.append(row(f"transform tool, {label} of {100 if q else 1000} sequential calls",
                         *(f"{v(name):.3f} ms" for name in ("original", "serve", "stub", "native", "floor")),
                         ratio(v("original"), v("stub")), versus(v("stub"), v("native")), versus(v("serve"), v("native"))))
    for n in (100, 900):
        v = lambda name: med(f"loop{n}", name, "latency_median_ms_median")
        lines.append(row(f"`sum_to_n` n={n}, time per call (median)", f"{v('original'):.2f} ms",
                         *(f"{v(name):.3f} ms" for name in ("serve", "stub", "native")), "",
                         ratio(v("original"), v("stub")), versus(v("stub"), v("native")), versus(v("serve"), v("native"))))
        lines.append(row(f"`sum_to_n` n={n}: original ÷ native-built", "", "", "", "", "", ratio(v("original"), v("native")), "", ""))
    for n in (100, 900):
        for which, label in ((0, "as the client sees it"), (1, "inside the server (the call log's duration_ms)")):
            v = lambda name: inside[n][name][which]
            lines.append(row(f"`sum_to_n` n={n}, time per call {label}, the three taking turns (median of 3 rounds)", "",
                             *(f"{v(name):.3f} ms" for name in ("serve", "stub", "native")), "", "",
                             versus(v("stub"), v("native")), versus(v("serve"), v("native"))))
    linear = lambda name: med("loop900", name, "latency_median_ms_median") / med("loop100", name, "latency_median_ms_median")
    lines.append(row("n=900 ÷ n=100 (linear ≈ 9)", *(f"{linear(name):.1f}" for name in ("original", "serve", "stub", "native")), "", "", "", ""))
    rss = lambda name: med("transform", name, "rss_after_kib_median") / 1024
    lines.append(row(f"resident memory after {100 if q else 1000} calls",
                     *(f"{rss(name):.1f} MiB" for name in ("original", "serve", "stub", "native", "floor")),
                     ratio(rss("original"), rss("stub")), versus(rss("stub"), rss("native")), versus(rss("serve"), rss("native"))))
    lines.append(row(f"resident memory after {100 if q else 1000} calls, built with `--small`", f"{rss('original'):.1f} MiB", "", "",
                     f"{rss('small'):.1f} MiB", f"{rss('floor'):.1f} MiB", ratio(rss("original"), rss("small")), "", ""))
    p50 = lambda name: med("transform", name, "latency_median_ms_median")
    lines.append(row("transform tool p50, built with `--small`", f"{p50('original'):.3f} ms", "", "", f"{p50('small'):.3f} ms",
                     f"{p50('floor'):.3f} ms", ratio(p50("original"), p50("small")), "", ""))
    lines.append(row("build time with `--small` (fat LTO over the whole runtime when the graph or the runtime changed)",
                     "", "", "", duration(small_s), "", "", "", ""))
    lrss = lambda name: med("loop100", name, "rss_after_kib_median") / 1024
    lines.append(row("resident memory after the n=100 loop calls", *(f"{lrss(name):.1f} MiB" for name in ("original", "serve", "stub", "native")),
                     "", ratio(lrss("original"), lrss("stub")), versus(lrss("stub"), lrss("native")), versus(lrss("serve"), lrss("native"))))
    tput = lambda name: 50 / conc[name][0]
    lines.append(row(f"50 concurrent calls (a 43-node loop each): calls/s of the median of {3 if q else 15} bursts, wrong or failed answers in all",
                     *(f"{tput(name):.0f}/s, {conc[name][1]} wrong" for name in ("original", "serve", "stub", "native")), "",
                     ratio(tput("stub"), tput("original")), versus(tput("stub"), tput("native")), versus(tput("serve"), tput("native"))))
    if a.before:
        lines.append("")
        lines.append(f"`mcpgraph serve` of this build against the build before (`{os.path.basename(a.before)}`), "
                     f"served the same way in the same run; before ÷ this above 1× means this build answers sooner or holds less:")
        lines.append("")
        lines.append("| measurement | this build | the build before | before ÷ this |")
        lines.append("|---|---:|---:|---:|")
        for key, field, label in (("transform", "latency_median_ms_median", f"transform tool, p50 of {100 if q else 1000} sequential calls"),
                                  ("transform", "latency_p99_ms_median", f"transform tool, p99 of {100 if q else 1000} sequential calls"),
                                  ("loop100", "latency_median_ms_median", "`sum_to_n` n=100, time per call (median)"),
                                  ("loop900", "latency_median_ms_median", "`sum_to_n` n=900, time per call (median)"),
                                  ("transform", "rss_after_kib_median", f"resident memory after {100 if q else 1000} calls")):
            this, then = med(key, "serve", field), med(key, "before", field)
            cell = (lambda v: f"{v / 1024:.1f} MiB") if field.startswith("rss") else (lambda v: f"{v:.3f} ms")
            lines.append(row(label, cell(this), cell(then), versus(then, this)))
    lines.append("")
    lines.append(build_block(build_fig))
    lines.append("")
    lines.append("JSONata micro-benchmarks (ns per evaluation, pre-parsed expression; ours with the history functions registered, as in a run, interpreted and compiled taking turns in 10 rounds, each figure the median of its rounds):")
    lines.append("")
    lines.append("| expression | jsonata-js 2.2 (node) | mcpgraph interpreted (jsonata-core) | mcpgraph compiled (`--native`) | jsonata-js ÷ interpreted | interpreted ÷ compiled |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for case, d in rust_ns.items():
        theirs, ns, compiled = js_ns.get(case), d["ns"], d.get("compiled_ns")
        lines.append(f"| {case} | {theirs:,.0f} | {ns:,.0f} | {f'{compiled:,.0f}' if compiled else 'interpreted'} | "
                     f"{ratio(theirs, ns) if theirs else 'n/a'} | {ratio(ns, compiled) if compiled else ''} |")
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
