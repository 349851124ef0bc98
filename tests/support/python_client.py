"""A real MCP client (the Python `mcp` package) against `mcpgraph serve`: connect over stdio,
list the tools, call one, check structuredContent. Prints "ok" on success."""
import asyncio
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(obj, snake, camel):
    """mcp 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main(binary: str, graph: str) -> None:
    params = StdioServerParameters(command=binary, args=["serve", graph])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert field(init, "server_info", "serverInfo").name == "greeter", init
            tools = await session.list_tools()
            names = [t.name for t in tools.tools]
            assert names == ["greet"], names
            assert field(tools.tools[0], "output_schema", "outputSchema")["required"] == ["greeting"], tools.tools[0]
            result = await session.call_tool("greet", {"name": "Ada", "formal": True})
            assert not field(result, "is_error", "isError"), result
            assert field(result, "structured_content", "structuredContent") == {"greeting": "Good day, Ada."}, result
            casual = await session.call_tool("greet", {"name": "Bob"})
            assert field(casual, "structured_content", "structuredContent") == {"greeting": "Hi Bob!"}, casual
            bad = await session.call_tool("greet", {"formal": True})
            assert field(bad, "is_error", "isError"), bad
            assert "name" in bad.content[0].text, bad.content[0].text
    print("ok")


asyncio.run(main(sys.argv[1], sys.argv[2]))
