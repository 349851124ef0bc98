"""A real MCP client (the Python `mcp` package, protocol 2026-07-28 over streamable HTTP) answering
an `ask` node through input_required rounds (MRTR): accept once (the file is written), then
decline (it is not). Each round may reach another replica. Prints "ok" on success."""
import asyncio
import sys

import mcp
import mcp.types as types

ANSWERS = [
    types.ElicitResult(action="accept", content={"ok": True}),
    types.ElicitResult(action="decline"),
]
ASKED = []


async def on_elicit(context, params):
    ASKED.append(params.message)
    return ANSWERS[len(ASKED) - 1]


async def main(url: str, path: str) -> None:
    async with mcp.Client(url, mode="2026-07-28", elicitation_callback=on_elicit) as client:
        yes = await client.call_tool("overwrite_file", {"path": path, "content": "first"})
        assert not yes.is_error, yes
        assert yes.structured_content == {"written": True}, yes
        with open(path) as f:
            assert f.read() == "first"
        no = await client.call_tool("overwrite_file", {"path": path, "content": "second"})
        assert no.structured_content == {"written": False, "reason": "declined"}, no
        with open(path) as f:
            assert f.read() == "first"
        assert ASKED == [f"Overwrite {path} with 5 characters?",
                         f"Overwrite {path} with 6 characters?"], ASKED
    print("ok")


asyncio.run(main(sys.argv[1], sys.argv[2]))
