"""A real MCP client (the Python `mcp` package) against `mcpgraph serve g.yaml --watch` (tests/serve/watch.rs).

Usage: watch_client.py MCPGRAPH DIR MODE

DIR holds g.yaml (the served graph), mcp.json (the mock server), and the versions to save over
g.yaml: v2.yaml (adds the tool `added`), broken.yaml (does not check). Each save is atomic, as an
editor makes it: a temporary file renamed over g.yaml. The server's stderr goes to DIR/stderr.log.

MODE `swap`: a call in flight finishes on the old version while new calls run on the new one; a
broken save keeps the last good version serving and is reported once.
MODE `broken-start`: a graph that does not check at start serves no tool until a good version is
saved.
MODE `listen`: a client of protocol 2026-07-28 hears of a new version through `subscriptions/listen`.

Every wait is for something the client observes (a notification, a result, a line on stderr),
bounded by a deadline. Prints "ok" on success.
"""
import os
import shutil
import sys
import time

import anyio

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

WAIT = 10  # seconds: the most any one awaited event may take


def field(obj, snake, camel):
    """mcp 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def save(directory: str, version: str) -> None:
    """Saves DIR/VERSION as DIR/g.yaml the way editors do: a new file renamed over the old one."""
    temp = os.path.join(directory, ".g.yaml.swp")
    shutil.copyfile(os.path.join(directory, version), temp)
    os.replace(temp, os.path.join(directory, "g.yaml"))


def structured(result):
    assert not field(result, "is_error", "isError"), result
    return field(result, "structured_content", "structuredContent")


async def names(session):
    return [t.name for t in (await session.list_tools()).tools]


def stderr_text(directory: str) -> str:
    with open(os.path.join(directory, "stderr.log"), encoding="utf-8", errors="replace") as f:
        return f.read()


async def stderr_shows(directory: str, text: str) -> str:
    """Waits until the server's stderr contains `text`; returns all of it."""
    deadline = time.monotonic() + WAIT
    while True:
        log = stderr_text(directory)
        if text in log:
            return log
        assert time.monotonic() < deadline, f"stderr never showed {text!r}:\n{log}"
        await anyio.sleep(0.05)


def children(pid: int) -> list[int]:
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def mock_servers() -> int:
    """How many mock servers the mcpgraph process this client started is running."""
    count = 0
    for server in children(os.getpid()):
        for child in children(server):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if b"mock-mcp-server.py" in f.read():
                        count += 1
            except FileNotFoundError:
                pass
    return count


async def mock_servers_become(n: int) -> None:
    deadline = time.monotonic() + WAIT
    while mock_servers() != n:
        assert time.monotonic() < deadline, f"{mock_servers()} mock servers, not {n}"
        await anyio.sleep(0.05)


class ListChanged:
    """Counts `notifications/tools/list_changed` and lets the test wait for the next one."""

    def __init__(self):
        self.count = 0
        self.event = anyio.Event()

    async def handler(self, message):
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self.event.set()

    async def next(self, seen: int) -> None:
        """Waits until more than `seen` notifications have arrived."""
        with anyio.fail_after(WAIT):
            while self.count <= seen:
                await self.event.wait()
                self.event = anyio.Event()


async def swap(session, changes: ListChanged, directory: str) -> None:
    assert await names(session) == ["slow"]
    assert structured(await session.call_tool("slow", {"ms": 0}))["version"] == 1

    # A call held open by the mock server's nap: its progress for the entry node says it runs.
    running = anyio.Event()
    in_flight = {}

    async def progress(_progress, _total, _message):
        running.set()

    async def slow_call():
        in_flight["result"] = await session.call_tool("slow", {"ms": 4000}, progress_callback=progress)

    async with anyio.create_task_group() as group:
        group.start_soon(slow_call)
        with anyio.fail_after(WAIT):
            await running.wait()

        save(directory, "v2.yaml")
        await changes.next(0)
        assert "result" not in in_flight, "the slow call ended before the new version was served"
        assert mock_servers() == 1, "version 1's server was closed during its call"
        assert await names(session) == ["slow", "added"]
        assert structured(await session.call_tool("added", {})) == {"hello": "from version 2"}
        assert structured(await session.call_tool("slow", {"ms": 0}))["version"] == 2
    # Begun on version 1, it finished there: its downstream server lived until it had answered,
    # and is closed now that version 1 has no call left; version 2's is the only one.
    assert structured(in_flight["result"])["version"] == 1, in_flight["result"]
    await mock_servers_become(1)

    save(directory, "broken.yaml")
    log = await stderr_shows(directory, "the previous version keeps serving")
    assert "error[E0205]" in log and "no node `exi`" in log, log
    assert await names(session) == ["slow", "added"]
    assert structured(await session.call_tool("added", {})) == {"hello": "from version 2"}

    # Fixed again: served, announced; the broken version was reported once, not on every poll.
    shutil.copyfile(os.path.join(directory, "v2.yaml"), os.path.join(directory, "v2-again.yaml"))
    with open(os.path.join(directory, "v2-again.yaml"), "a") as f:
        f.write("# saved again\n")
    save(directory, "v2-again.yaml")
    await changes.next(1)
    assert changes.count == 2, changes.count
    log = stderr_text(directory)
    assert log.count("the previous version keeps serving") == 1, log
    assert structured(await session.call_tool("added", {})) == {"hello": "from version 2"}


async def broken_start(session, changes: ListChanged, directory: str) -> None:
    assert await names(session) == []
    refused = await session.call_tool("slow", {"ms": 0})
    assert field(refused, "is_error", "isError"), refused
    save(directory, "v2.yaml")
    await changes.next(0)
    assert await names(session) == ["slow", "added"]
    assert structured(await session.call_tool("added", {})) == {"hello": "from version 2"}
    assert structured(await session.call_tool("slow", {"ms": 0}))["version"] == 2


async def listen(binary: str, directory: str) -> None:
    """A client of protocol 2026-07-28: it hears of the new version through `subscriptions/listen`."""
    from mcp import Client

    params = StdioServerParameters(
        command=binary, args=["serve", "g.yaml", "-m", "mcp.json", "--watch"], cwd=directory
    )
    with open(os.path.join(directory, "stderr.log"), "w") as errlog:
        # stdio_client is a Transport: Client drives it with the version pinned, no handshake.
        async with Client(stdio_client(params, errlog=errlog), mode="2026-07-28") as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["slow"]
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed, subscription.honored
                save(directory, "v2.yaml")
                with anyio.fail_after(WAIT):
                    event = await subscription.__anext__()
                assert "tool" in type(event).__name__.lower(), event
            assert [t.name for t in (await client.list_tools()).tools] == ["slow", "added"]
            result = await client.call_tool("added", {})
            assert structured(result) == {"hello": "from version 2"}, result
    print("ok")


async def main(binary: str, directory: str, mode: str) -> None:
    if mode == "listen":
        return await listen(binary, directory)
    params = StdioServerParameters(
        command=binary, args=["serve", "g.yaml", "-m", "mcp.json", "--watch"], cwd=directory
    )
    changes = ListChanged()
    with open(os.path.join(directory, "stderr.log"), "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=changes.handler) as session:
                init = await session.initialize()
                tools = field(init, "capabilities", "capabilities").tools
                assert tools is not None and field(tools, "list_changed", "listChanged") is True, init
                if mode == "swap":
                    await swap(session, changes, directory)
                else:
                    await broken_start(session, changes, directory)
    print("ok")


anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
