#!/usr/bin/env python3
"""The HTTP benchmark (scripts/bench --only http): calls/s, p50 and p99 over streamable HTTP at
concurrency 1 and 32, and resident memory under that load, for `mcpgraph serve`, a binary from
`mcpgraph build` and the floor (a minimal rmcp server with one tool, `floor-server --http`), side
by side in one run, with the floor twice: answering with rmcp's default, an event stream, and with
one JSON body (`--json`), as mcpgraph answers a tool whose runs are short.

Every server serves bench/graphs/transform.yaml's `echo_value` (the floor hand-written), on
127.0.0.1 with a port of its own, stateless, with its defaults: mcpgraph's one log line per call
goes to a file under target/bench/http; the floor sets TCP_NODELAY as mcpgraph does. The load is
bench/src/bin/http-load.rs (CONCURRENCY independent clients, every answer checked), with two
kinds of client: keep-alive clients that send what the TypeScript and Python SDKs send by
default, and rmcp's client (a progress token on every request, a new connection for every call). The servers take turns, round after round
(floor, serve, built, floor, serve, built, ...), so a change in the machine's load reaches all of
them; the table gives the median of the rounds. Peak RSS is each process's VmHWM after all the
load; the largest VmRSS sampled while it was under load is beside it.

Writes bench/RESULTS-http.md and the part of README.md between the bench-http markers.

This file's name shadows the standard library's `http` when bench/ is first on sys.path (as it is
when it, or bench/run.py, runs as a script), so it imports nothing that imports `http`.
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench")
RELEASE = os.path.join(ROOT, "target", "release")
MCPGRAPH = os.path.join(RELEASE, "mcpgraph")
GRAPH = os.path.join("bench", "graphs", "transform.yaml")
BUILT = os.path.join(WORK, "transform-http")
LOGS = os.path.join(WORK, "http")
TOOL, ARGS, EXPECTED = "echo_value", {"value": "hello"}, {"result": "hello"}
START, END = "<!-- bench-http:start -->", "<!-- bench-http:end -->"
# Where the block goes in a README that has none yet: the end of the Benchmarks section.
BEFORE = "\n## Examples\n"
ADDRESS = re.compile(r" at (http://\S+/mcp)")


def log(msg):
    print(f"[bench-http] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def build_binary(timeout):
    """`mcpgraph build` of the graph with scripts/bench's cache (so a run after scripts/bench
    reuses its compiled runtime). Returns the build time in s, or None when it took longer than
    `timeout` (a cold cache compiles every dependency) and was stopped."""
    cache = os.environ.get("MCPGRAPH_CACHE_DIR") or os.path.join(WORK, "cache")
    env = dict(os.environ, MCPGRAPH_CACHE_DIR=cache)
    cmd = [MCPGRAPH, "build", GRAPH, "-o", BUILT]
    log(" ".join(cmd) + f" (cache {cache}, at most {timeout:.0f} s)")
    t0 = time.monotonic()
    # A session of its own, so a build that runs too long is stopped with its cargo and rustcs.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log(f"the build took more than {timeout:.0f} s: measuring without the built binary "
            "(the part compiled so far stays in the cache for the next run)")
        return None
    if status != 0:
        raise RuntimeError(f"mcpgraph build failed ({status}); run it by hand to see why: {' '.join(cmd)}")
    return time.monotonic() - t0


class Server:
    """A server process on 127.0.0.1:0, its stderr in a file, its URL read from that file."""

    def __init__(self, name, cmd):
        os.makedirs(LOGS, exist_ok=True)
        self.name = name
        self.log_path = os.path.join(LOGS, f"{name}.log")
        self.log_file = open(self.log_path, "w")
        log(" ".join(cmd))
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file)
        self.url = self._address(30)

    def _address(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                match = ADDRESS.search(f.read())
            if match:
                return match.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        with open(self.log_path) as f:
            raise RuntimeError(f"{self.name} printed no address:\n{f.read()}")

    def status(self, field):
        """A field of /proc/PID/status in KiB (VmRSS, VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise RuntimeError(f"no {field} for {self.name}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


def load(server, client, concurrency, calls):
    """One run of http-load with `client` (plain or rmcp) against `server`; its summary, with the
    largest VmRSS sampled meanwhile (every 10 ms) as rss_kib."""
    peak, done = [server.status("VmRSS")], threading.Event()

    def sample():
        while not done.wait(0.01):
            try:
                peak[0] = max(peak[0], server.status("VmRSS"))
            except (OSError, RuntimeError):
                return

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        out = subprocess.run([os.path.join(RELEASE, "http-load"), server.url, TOOL, json.dumps(ARGS),
                              json.dumps(EXPECTED), str(concurrency), str(calls), client],
                             capture_output=True, text=True, timeout=600)
    finally:
        done.set()
        sampler.join()
    if out.returncode != 0:
        raise RuntimeError(f"http-load against {server.name} failed:\n{out.stderr}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    summary["rss_kib"] = peak[0]
    return summary


def measure(servers, levels, rounds):
    """{(name, client, concurrency): [summary per round]}, the servers taking turns within each
    round."""
    results = {}
    for r in range(rounds):
        for client, concurrency, calls in levels:
            for server in servers:
                s = load(server, client, concurrency, calls)
                log(f"round {r + 1}/{rounds}, {client} c={concurrency}, {server.name}: {s['calls_per_s']:.0f} calls/s, "
                    f"p50 {s['p50_ms']:.3f} ms, p99 {s['p99_ms']:.3f} ms, {s['wrong']} wrong")
                results.setdefault((server.name, client, concurrency), []).append(s)
    return results


CLIENTS = {
    "plain": "**Keep-alive clients** (`http-load ... plain`): what the TypeScript and Python SDKs send by "
             "default, `initialize` then one POST per call without a progress token, each answer read to its end, "
             "so each client's connection is kept alive from call to call.",
    "rmcp": "**rmcp's client**: it puts a progress token on every request, so a graph server sends a "
            "progress notification per node (three for this graph) before the result, which the floor does not; "
            "and it leaves each SSE answer unread after the result, so its connection pool opens a new "
            "connection for every call.",
}


LABELS = {"floor": "floor (minimal rmcp server)", "floor-json": "floor answering with one JSON body (`--json`)",
          "serve": "`mcpgraph serve`", "built": "built binary", "before": "`mcpgraph serve`, the build before"}


def table(results, hwm, names, levels, rounds, build_s, skipped, before_note=""):
    clients = list(dict.fromkeys(client for client, _, _ in levels))
    wrong = lambda name: sum(s["wrong"] for key, runs in results.items() if key[0] == name for s in runs)
    sampled = lambda name: max(s["rss_kib"] for key, runs in results.items() if key[0] == name for s in runs)
    (_, c1, n1), (_, c2, n2) = levels[:2]
    lines = [
        f"Measured {datetime.date.today().isoformat()} on {platform.node() or 'this machine'}: "
        f"{os.cpu_count()} cores shared by the server and the load generator, {platform.system()} {platform.release()}, "
        f"mcpgraph {version()}. Each figure is the median of {rounds} rounds in which the servers took turns; "
        f"a round is, for each kind of client, {n1} calls by {c1} client and {n2} calls by {c2} clients (each "
        f"client waits for its answer before its next call), after 5 warm-up calls per client. Peak RSS is VmHWM "
        f"after all the rounds; beside it the largest VmRSS sampled during the load. Wrong answers are counted "
        f"over every round and both clients.",
    ]
    for client in clients:
        lines += ["", CLIENTS[client], ""]
        lines += client_table(results, hwm, names, [(c, n) for k, c, n in levels if k == client], client,
                              wrong, sampled, first=client == clients[0])
    lines.append("")
    notes = ["Ratios are ours over the floor's: what mcpgraph adds (the graph run, its schema checks, the log "
             "line per call, its HTTP middleware) shows as calls/s below 1× and latency and memory above 1×. "
             "The floor answers every call with rmcp's default, an event stream; mcpgraph answers a call of a tool "
             "whose runs are short with one JSON body (docs/http.md), as the JSON floor answers every call, and "
             "rmcp turns that answer into a stream when a notification comes first (rmcp's client asks for "
             "progress): the JSON floor is the like-for-like one for the keep-alive clients."]
    if "before" in names:
        notes.append(f"The build before is {before_note}, run as `serve` beside this build in every round.")
    if skipped:
        notes.append(f"The built binary is missing: its build took more than {skipped:.0f} s (a cold build cache, or a busy "
                     "machine) and was stopped; run again once the cache is warm.")
    elif skipped == 0:
        notes.append("The built binary is missing (`--no-build`, and none built before).")
    elif build_s:
        notes.append(f"The built binary took {build_s:.0f} s to build.")
    lines.append(" ".join(notes))
    return "\n".join(lines) + "\n"


def client_table(results, hwm, names, levels, client, wrong, sampled, first):
    """The table of one kind of client; the first carries the memory and wrong-answer columns."""
    med = lambda name, c, field: statistics.median(s[field] for s in results[(name, client, c)])
    (c1, _), (c2, _) = levels
    extra = " peak RSS (sampled under load) | wrong answers |" if first else ""
    lines = [
        f"| server ({client} client) | c={c1} calls/s | c={c1} p50 | c={c1} p99 | c={c2} calls/s | c={c2} p50 "
        f"| c={c2} p99 |{extra}",
        "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if first else ""),
    ]
    for name in names:
        cells = []
        for c, _ in levels:
            cells += [f"{med(name, c, 'calls_per_s'):,.0f}", f"{med(name, c, 'p50_ms'):.3f} ms",
                      f"{med(name, c, 'p99_ms'):.3f} ms"]
        memory = (f" {hwm[name] / 1024:.1f} MiB ({sampled(name) / 1024:.1f} MiB) | {wrong(name)} |"
                  if first else "")
        lines.append(f"| {LABELS[name]} | {' | '.join(cells)} |{memory}")
    for name in names:
        if name.startswith("floor") and name != "floor-json":
            continue
        cells = []
        for c, _ in levels:
            cells += [f"{med(name, c, field) / med('floor', c, field):.2f}×" for field in ("calls_per_s", "p50_ms", "p99_ms")]
        memory = f" {hwm[name] / hwm['floor']:.2f}× | |" if first else ""
        lines.append(f"| {LABELS[name]} ÷ floor | {' | '.join(cells)} |{memory}")
    if "floor-json" in names:
        for name in names:
            if name.startswith("floor"):
                continue
            cells = []
            for c, _ in levels:
                cells += [f"{med(name, c, field) / med('floor-json', c, field):.2f}×"
                          for field in ("calls_per_s", "p50_ms", "p99_ms")]
            memory = f" {hwm[name] / hwm['floor-json']:.2f}× | |" if first else ""
            lines.append(f"| {LABELS[name]} ÷ JSON floor | {' | '.join(cells)} |{memory}")
    if "before" in names:
        cells = []
        for c, _ in levels:
            cells += [f"{med('serve', c, field) / med('before', c, field):.2f}×" for field in ("calls_per_s", "p50_ms", "p99_ms")]
        memory = f" {hwm['serve'] / hwm['before']:.2f}× | |" if first else ""
        lines.append(f"| `mcpgraph serve` ÷ the build before | {' | '.join(cells)} |{memory}")
    return lines


def version():
    out = subprocess.run([MCPGRAPH, "--version"], capture_output=True, text=True).stdout.split()
    return out[-1] if out else "?"


def replace_block(text, block):
    """`text` with its bench-http part replaced by `block`; added before `## Examples` (the end
    of the Benchmarks section), or at the end, when it has none."""
    if START in text and END in text:
        return text[: text.index(START) + len(START)] + "\n" + block + text[text.index(END):]
    intro = ("Over streamable HTTP (`scripts/bench --only http`, bench/http.py): the same transform tool through\n"
             "`mcpgraph serve --http`, a built binary's `--http` and the floor behind rmcp's own HTTP service, side by side.\n")
    part = f"\n{intro}\n{START}\n{block}{END}\n"
    if BEFORE in text:
        at = text.index(BEFORE)
        return text[:at].rstrip("\n") + "\n" + part + text[at:]
    return text.rstrip("\n") + "\n" + part


def main(quick=False, rounds=None, build_timeout=300.0, no_build=False, before=None):
    """`before`: another mcpgraph binary (the build before a change), served as `serve` is, in
    every round beside it: the A/B of a change, with its ratio in the table."""
    if no_build:
        # The binaries as they are (a second run while the tree is being edited).
        build_s = 0.0 if os.path.exists(BUILT) else None
    else:
        run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph", "-p", "mcpgraph-bench"], cwd=ROOT)
        build_s = build_binary(build_timeout)
    levels = [(client, c, n) for client in ("plain", "rmcp")
              for c, n in (((1, 200), (32, 800)) if quick else ((1, 2000), (32, 8000)))]
    rounds = rounds or (1 if quick else 5)
    commands = [("floor", [os.path.join(RELEASE, "floor-server"), "--http", "127.0.0.1:0"]),
                ("floor-json", [os.path.join(RELEASE, "floor-server"), "--http", "127.0.0.1:0", "--json"]),
                ("serve", [MCPGRAPH, "serve", GRAPH, "--http", "127.0.0.1:0"])]
    if build_s is not None:
        commands.append(("built", [BUILT, "--http", "127.0.0.1:0"]))
    before_note = ""
    if before:
        before = os.path.abspath(before)
        commands.append(("before", [before, "serve", GRAPH, "--http", "127.0.0.1:0"]))
        out = subprocess.run([before, "--version"], capture_output=True, text=True).stdout.strip()
        before_note = f"`{os.path.basename(before)}` ({out or 'version unknown'})"
    servers = []
    try:
        for name, cmd in commands:
            servers.append(Server(name, cmd))
        results = measure(servers, levels, rounds)
        hwm = {s.name: s.status("VmHWM") for s in servers}
    finally:
        for server in servers:
            server.stop()
    names = [s.name for s in servers]
    skipped = None if build_s is not None else (build_timeout if not no_build else 0)
    block = table(results, hwm, names, levels, rounds, build_s, skipped, before_note)
    print(block)
    if quick:
        return
    with open(os.path.join(ROOT, "bench", "RESULTS-http.md"), "w") as f:
        f.write("# HTTP benchmark results\n\nWritten by `scripts/bench --only http` (bench/http.py).\n\n" + block)
    readme = os.path.join(ROOT, "README.md")
    with open(readme) as f:
        text = f.read()
    with open(readme, "w") as f:
        f.write(replace_block(text, block))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer calls, one round, nothing written (a smoke run)")
    ap.add_argument("--rounds", type=int, help="rounds of turns (default 5)")
    ap.add_argument("--build-timeout", type=float, default=300.0,
                    help="seconds the built binary's build may take before it is skipped (default 300)")
    ap.add_argument("--no-build", action="store_true",
                    help="measure the binaries already in target/ (no cargo, no mcpgraph build)")
    ap.add_argument("--before", help="an mcpgraph binary built before a change, measured as `serve` beside this build")
    a = ap.parse_args()
    main(a.quick, a.rounds, a.build_timeout, a.no_build, a.before)
