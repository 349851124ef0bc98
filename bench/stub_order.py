"""Writes src/stub.order: the functions a server runs, in the order the linker lays them out
first (docs/build.md, "The stub's layout").

A built server is the stub with a graph attached. Its code is about 22 MB, and a call runs a
little of it here and a little there: the kernel maps a whole window of the file at each page
fault (64 KiB here), so a server that ran ~2,000 functions spread over the whole text had 11 MiB
of it resident. Listed in an ordering file, the linker (LLD, rustc's default on
x86_64-unknown-linux-gnu) puts those functions side by side at the start of the text.

How: build mcpgraph as a user does (the release profile, as it is: symbol names carry a hash of
the profile, so only this build's names match), link the two binaries once more with their
symbol tables (`-C strip=none`: the dependencies are not rebuilt, so their names are the release
build's), build servers from the stub, with `--native` and with `--small` (in a cache of the
script's own, target/stub-order/cache; their crates' names differ from the stub's, `--small`'s
from both, and one list serves all three), run them and `mcpgraph serve` under valgrind's
callgrind over stdio and HTTP, and list every function of the binaries that ran, in the order
callgrind first names them. Functions renamed or added since are simply not in the list (the
linker ignores names it does not find): rerun this after a dependency or the toolchain changes,
or when the bench's memory rows grow.

Needs valgrind (`apt-get install valgrind`). About fifteen minutes the first time (the release
build, the cache's dependencies), six or seven after (`--small` optimises the whole program twice).
"""

import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
ORDER = os.path.join(ROOT, "src", "stub.order")
TRANSFORM = os.path.join(ROOT, "bench", "graphs", "transform.yaml")
LOOP = os.path.join(ROOT, "examples", "loop.yaml")
CALLS = 200


def release_env():
    """The environment of a user's `cargo build --release`: no profile overrides (scripts/test's
    opt-level 1, for one, would give other symbol names), and the binaries in this checkout's
    target/."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("CARGO_PROFILE_") and k not in ("CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR")}


def cargo(*args):
    subprocess.run(["cargo", *args], cwd=ROOT, env=release_env(), check=True)


@functools.cache
def driver():
    """The shared driver, loaded by bench/run.py's `driver_module` (run.py itself loaded by path,
    as it loads bench/http.py: this directory on sys.path would put bench/http.py in the standard
    library's place)."""
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "bench", "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return run.driver_module()


def stdio_session(command, tool, arguments, expected):
    """initialize, tools/list and CALLS calls of `tool`, each answer checked, through the shared
    driver's ServerProcess (../shared/tools/mcp-driver.py), as the bench drives its servers."""
    server = driver().ServerProcess(command)
    server.initialize(120)
    server.notify("notifications/initialized")
    server.request("tools/list", {}, 120)
    for _ in range(CALLS):
        _, answer, _ = server.request("tools/call", {"name": tool, "arguments": arguments}, 120)
        got = ((answer or {}).get("result") or {}).get("structuredContent")
        if got != expected:
            raise RuntimeError(f"{tool} answered {answer}, expected {expected}")
    # Time for callgrind, which writes its profile as the server exits.
    server.close(grace=120)


def http_session(command):
    """CALLS calls of the transform tool over HTTP (one keep-alive client), by the bench's
    load generator; the server is stopped with SIGTERM, as a process manager would."""
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    url = None
    for line in server.stderr:
        found = re.search(r"http://[^ ]*/mcp", line)
        if found:
            url = found.group(0)
            break
    if url is None:
        raise RuntimeError("the server under valgrind printed no URL")
    # Its log lines read on, so that a full pipe never stops it.
    drain = threading.Thread(target=server.stderr.read, daemon=True)
    drain.start()
    subprocess.run([os.path.join(RELEASE, "http-load"), url, "echo_value", '{"value":"hello"}',
                    '{"result":"hello"}', "1", str(CALLS), "plain"],
                   check=True, stdout=subprocess.DEVNULL)
    server.terminate()
    server.wait(timeout=120)
    drain.join(timeout=10)


def unstripped_native(cache, built, env, profile="release"):
    """The `--native` server at `built` linked once more with its symbol table, from the crate
    its build left in `cache` (the one whose binary is `built`'s name, written last), built with
    cargo's `profile` (`small` for `--small`)."""
    name = os.path.basename(built)
    with open(built, "rb") as f:
        wanted = f.read()
    for crate in sorted(glob.glob(os.path.join(cache, "crates", "*")), key=os.path.getmtime,
                        reverse=True):
        with open(os.path.join(crate, "Cargo.toml")) as f:
            manifest = f.read()
        found = re.search(r'\[\[bin\]\]\nname = "([^"]+)"', manifest)
        if not found:
            continue
        binary = os.path.join(cache, "target", profile, found.group(1))
        if not os.path.exists(binary):
            continue
        with open(binary, "rb") as f:
            if f.read() != wanted:
                continue
        subprocess.run(["cargo", "rustc", "--profile", profile, "--locked", "--manifest-path",
                        os.path.join(crate, "Cargo.toml"), "--target-dir",
                        os.path.join(cache, "target"), "--bin", found.group(1), "--", "-C",
                        "strip=none"], check=True, env=env)
        unstripped = built + ".symbols"
        shutil.copy(binary, unstripped)
        return unstripped
    raise RuntimeError(f"no crate in {cache} built {name}")


def functions(profile):
    """The symbols callgrind names in `profile`, in the order it first names them."""
    names = {}
    with open(profile) as f:
        for line in f:
            found = re.match(r"^c?fn=\((\d+)\) (\S+)$", line.rstrip("\n"))
            if found and not found.group(2).startswith("0x"):
                names.setdefault(found.group(2), None)
    return list(names)


def main():
    if shutil.which("valgrind") is None:
        sys.exit("stub-order needs valgrind: apt-get install valgrind")
    cargo("build", "--release", "--locked", "-p", "mcpgraph", "-p", "mcpgraph-bench")
    work = tempfile.mkdtemp(prefix="stub-order-")
    try:
        stub = os.path.join(work, "mcpgraph-stub")
        mcpgraph = os.path.join(work, "mcpgraph")
        for binary, copy in (("mcpgraph-stub", stub), ("mcpgraph", mcpgraph)):
            cargo("rustc", "--release", "--locked", "-p", "mcpgraph", "--bin", binary,
                  "--", "-C", "strip=none")
            shutil.copy(os.path.join(RELEASE, binary), copy)
        # Back to the binaries a release build makes.
        cargo("build", "--release", "--locked", "-p", "mcpgraph")
        servers = {}
        for name, graph in (("transform", TRANSFORM), ("loop", LOOP)):
            servers[name] = os.path.join(work, name)
            subprocess.run([os.path.join(RELEASE, "mcpgraph"), "build", graph, "-o",
                            servers[name], "--stub", stub], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # `--native` servers: their crates are built in mcpgraph's cache, against a vendored copy
        # of the runtime, so their symbol names are not the stub's. A cache of the script's own,
        # kept between runs (the first build compiles every dependency: minutes).
        cache = os.path.join(ROOT, "target", "stub-order", "cache")
        native_env = dict(release_env(), MCPGRAPH_CACHE_DIR=cache)
        natives = {}
        for name, graph in (("transform", TRANSFORM), ("loop", LOOP)):
            built = os.path.join(work, f"{name}-native")
            subprocess.run([os.path.join(RELEASE, "mcpgraph"), "build", "--native", graph, "-o",
                            built], check=True, env=native_env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            natives[name] = unstripped_native(cache, built, native_env)
        # `--small`: another profile (fat LTO, `opt-level = "s"`), so other names again. Its
        # build and the relink with symbols each optimise the whole program: minutes.
        built = os.path.join(work, "transform-small")
        subprocess.run([os.path.join(RELEASE, "mcpgraph"), "build", "--small", TRANSFORM, "-o",
                        built], check=True, env=native_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        natives["small"] = unstripped_native(cache, built, native_env, "small")
        profiles = []

        def traced(label):
            profiles.append(os.path.join(work, f"{label}.callgrind"))
            return ["valgrind", "--quiet", "--tool=callgrind", "--demangle=no",
                    f"--callgrind-out-file={profiles[-1]}"]

        stdio_session(traced("transform-stdio") + [servers["transform"]], "echo_value",
                      {"value": "hello"}, {"result": "hello"})
        stdio_session(traced("loop-stdio") + [servers["loop"]], "sum_to_n", {"n": 20},
                      {"sum": 210})
        http_session(traced("transform-http") + [servers["transform"], "--http", "127.0.0.1:0"])
        # `mcpgraph serve` (and `-g`) runs the same server after the compiler's front end.
        stdio_session(traced("serve-stdio") + [mcpgraph, "serve", LOOP], "sum_to_n", {"n": 20},
                      {"sum": 210})
        stdio_session(traced("transform-native") + [natives["transform"]], "echo_value",
                      {"value": "hello"}, {"result": "hello"})
        stdio_session(traced("loop-native") + [natives["loop"]], "sum_to_n", {"n": 20},
                      {"sum": 210})
        stdio_session(traced("transform-small") + [natives["small"]], "echo_value",
                      {"value": "hello"}, {"result": "hello"})
        # Only the binaries' own functions: not libc's, which the dynamic linker places.
        defined = set()
        for binary in (stub, mcpgraph, *natives.values()):
            listed = subprocess.run(["nm", "--defined-only", "--format=just-symbols", binary],
                                    check=True, capture_output=True, text=True).stdout
            defined.update(listed.split())
        order = {}
        for profile in profiles:
            for name in functions(profile):
                if name in defined:
                    order.setdefault(name, None)
        with open(ORDER, "w") as f:
            f.write("\n".join(order) + "\n")
        print(f"{ORDER}: {len(order)} functions, from {len(profiles)} sessions")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
