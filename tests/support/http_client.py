"""A real MCP client (the Python `mcp` package) against `mcpgraph serve --http`, for tests/network/http.rs.
Prints one JSON object on stdout describing what the client saw; the Rust test asserts on it.

    http_client.py tour MODE LOOP_URL SLOW_URL MOCK_LOG
        Lists LOOP_URL's tools, calls sum_to_n {"n": 100} recording progress callbacks and the
        result as one ordered list of events, then calls SLOW_URL's `nap` {"ms": 10000} and
        cancels it (leaves its cancel scope) once the mock server has logged the downstream call.
    http_client.py call MODE URL TOOL ARGS_JSON
        Lists the tools and calls TOOL once; prints "started" on stderr just before the call.
        An error is reported, not raised. $MCPGRAPH_TEST_TOKEN, when set, is sent as a bearer token.
"""
import json
import os
import sys
import time

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# Every wait here has a deadline, so a server that never answers fails the test, not hangs it.
DEADLINE_SECONDS = float(os.environ.get("MCPGRAPH_TEST_DEADLINE", "15"))


def connect(url: str, mode: str) -> Client:
    token = os.environ.get("MCPGRAPH_TEST_TOKEN")
    if token is None:
        return Client(url, mode=mode)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def tour(mode: str, loop_url: str, slow_url: str, mock_log: str) -> dict:
    report: dict = {}
    async with connect(loop_url, mode) as client:
        report["protocol"] = client.protocol_version
        tools = await client.list_tools()
        report["tools"] = [t.name for t in tools.tools]
        events: list = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            events.append({"progress": done, "message": message})

        with anyio.fail_after(DEADLINE_SECONDS):
            result = await client.call_tool("sum_to_n", {"n": 100}, progress_callback=progress)
        events.append({"result": result.structured_content, "is_error": result.is_error})
        report["events"] = events

    async with connect(slow_url, mode) as client:
        started = time.monotonic()
        outcome: dict = {"finished": False}

        async def call() -> None:
            result = await client.call_tool("nap", {"ms": 10000})
            outcome["finished"] = True
            outcome["result"] = result.structured_content

        with anyio.fail_after(DEADLINE_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                # Cancel once the downstream call is under way, so there is a run to stop.
                while not downstream_called(mock_log, 10000):
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()
        outcome["seconds"] = time.monotonic() - started
        report["cancel"] = outcome
    return report


def downstream_called(mock_log: str, ms: int) -> bool:
    try:
        with open(mock_log) as log:
            lines = [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return False
    return any(
        m.get("method") == "tools/call" and (m["params"].get("arguments") or {}).get("ms") == ms
        for m in lines
    )


async def call(mode: str, url: str, tool: str, arguments: dict) -> dict:
    report: dict = {}
    try:
        async with connect(url, mode) as client:
            report["protocol"] = client.protocol_version
            tools = await client.list_tools()
            report["tools"] = [t.name for t in tools.tools]
            print("started", file=sys.stderr, flush=True)
            with anyio.fail_after(DEADLINE_SECONDS):
                result = await client.call_tool(tool, arguments)
            report["result"] = result.structured_content
            report["is_error"] = result.is_error
            report["text"] = result.content[0].text if result.content else None
    except BaseException as e:  # noqa: BLE001 - what the client saw is the report
        report["error"] = describe(e)
    return report


def describe(error: BaseException) -> str:
    """The leaf exceptions of an exception group, which is how anyio reports a task's failure."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


def main() -> None:
    command, mode, *rest = sys.argv[1:]
    if command == "tour":
        report = anyio.run(tour, mode, *rest)
    elif command == "call":
        url, tool, arguments = rest
        report = anyio.run(call, mode, url, tool, json.loads(arguments))
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(report))


main()
