"""The debugging surface costs nothing when unused (issue 16): the same calls against two
`mcpgraph serve` binaries, BEFORE (a build without the debugger) and AFTER (this tree's), side by
side in one run, round by round interleaved so that load on the machine falls on both alike.

    scripts/bench --only debugger --before PATH/TO/OLD/mcpgraph

Measures the transform tool (bench/graphs/transform.yaml, 1000 sequential calls: p50 latency)
and the loop (examples/loop.yaml, sum_to_n with n = 500: 1003 nodes a call, 40 calls: mean
latency), which pays the per-node check a thousand times per call. Writes
bench/RESULTS-debugger.md and the README block between the debugger markers.
"""

import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("MCPGRAPH_SHARED", os.path.join(ROOT, "..", "shared"))
DRIVER = os.path.join(SHARED, "tools", "mcp-driver.py")
AFTER = os.path.join(ROOT, "target", "release", "mcpgraph")
ROUNDS = 5


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def bench(binary, yaml, tool, args, calls):
    cmd = [sys.executable, DRIVER, "bench", yaml, "--tool", tool, "--args", json.dumps(args),
           "--calls", str(calls), "--warmup", "20", "--json", "--", binary, "serve", "{yaml}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    raise RuntimeError(f"no summary from the driver:\n{out}")


def field(summary, name):
    if name == "mean":
        return 1000.0 / summary["throughput_calls_per_s_median"]
    return summary[name]


def main(before, quick=False):
    if not (before and os.access(before, os.X_OK)):
        sys.exit("--before must name an mcpgraph binary built without the debugger, e.g.\n"
                 "  git worktree add /tmp/before 76a6bf2 && cargo build --release --locked "
                 "--manifest-path /tmp/before/Cargo.toml")
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "mcpgraph"], cwd=ROOT, check=True)
    cases = [
        ("transform tool, p50 of 1000 sequential calls", os.path.join(ROOT, "bench", "graphs", "transform.yaml"),
         "echo_value", {"value": "hello"}, 200 if quick else 1000, "latency_median_ms_median"),
        ("loop, sum_to_n n = 500 (1003 nodes), mean of 40 calls", os.path.join(ROOT, "examples", "loop.yaml"),
         "sum_to_n", {"n": 500}, 10 if quick else 40, "mean"),
    ]
    rows = []
    for label, yaml, tool, args, calls, names in cases:
        seen = {"before": [], "after": []}
        for r in range(2 if quick else ROUNDS):
            for name, binary in (("before", before), ("after", AFTER)):
                log(f"{label}: {name}, round {r + 1}")
                seen[name].append(field(bench(binary, yaml, tool, args, calls), names))
        b, a = statistics.median(seen["before"]), statistics.median(seen["after"])
        rows.append(f"| {label} | {b:.3f} ms | {a:.3f} ms | {a / b:.2f}× |")
    table = "\n".join([
        "| median of rounds (interleaved) | before (no debugger) | after (debugger, unused) | after / before |",
        "|---|---|---|---|",
        *rows,
    ])
    machine = f"{os.cpu_count()} cores, {sys.platform}"
    with open(os.path.join(ROOT, "bench", "RESULTS-debugger.md"), "w") as f:
        f.write(f"# The debugging surface, unused: before and after\n\n`scripts/bench --only debugger --before {before}` on {machine}, "
                f"{2 if quick else ROUNDS} interleaved rounds.\n\n{table}\n")
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read()
    start, end = "<!-- bench-debugger:start -->", "<!-- bench-debugger:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        open(readme, "w").write(f"{head}{start}\n{table}\n{end}{tail}")
    print(table)
