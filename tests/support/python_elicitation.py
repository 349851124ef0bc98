"""A real MCP client (the Python `mcp` package) answering an `ask` node's elicitation over stdio:
accept once (the file is written), then decline (it is not). Prints "ok" on success."""
import asyncio
import os
import sys

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ANSWERS = [
    types.ElicitResult(action="accept", content={"ok": True}),
    types.ElicitResult(action="decline"),
]
ASKED = []


async def on_elicit(context, params):
    ASKED.append(params.message)
    return ANSWERS[len(ASKED) - 1]


def field(obj, snake, camel):
    """mcp 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main(binary: str, graph: str, path: str) -> None:
    # The client passes only a safe default environment unless told: FS_ROOT must reach the graph.
    params = StdioServerParameters(command=binary, args=["serve", graph], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            yes = await session.call_tool("overwrite_file", {"path": path, "content": "first"})
            assert not field(yes, "is_error", "isError"), yes
            assert field(yes, "structured_content", "structuredContent") == {"written": True}, yes
            with open(path) as f:
                assert f.read() == "first"
            no = await session.call_tool("overwrite_file", {"path": path, "content": "second"})
            assert field(no, "structured_content", "structuredContent") == {
                "written": False, "reason": "declined"}, no
            with open(path) as f:
                assert f.read() == "first"
            assert ASKED == [f"Overwrite {path} with 5 characters?",
                             f"Overwrite {path} with 6 characters?"], ASKED
    print("ok")


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
