"""A full authoring session with the real Python `mcp` client against `mcpgraph toolkit`:
discover the servers, try expressions and a call, add an invalid tool (refused, the file's bytes
unchanged), add a valid one, run it and read its history, stop it at a breakpoint, update it,
add two tools at once, delete one, lock the servers the graph calls (a lock that cannot be
written fails with what was found). Failures fit their tool's outputSchema as successes do (the
client validates only successes, so the session validates failures itself). Prints "ok" on
success.

argv: mcpgraph binary, graph file (a copy with comments, whose own server is `own`), MCP file
(whose server is `mock`)."""
import asyncio
import json
import os
import sys

import jsonschema

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(obj, snake, camel):
    """mcp 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


class Toolkit:
    def __init__(self, session):
        self.session = session

    async def ok(self, tool, args=None):
        result = await self.session.call_tool(tool, args or {})
        assert not field(result, "is_error", "isError"), (tool, result)
        structured = field(result, "structured_content", "structuredContent")
        assert json.loads(result.content[0].text) == structured, (tool, result)
        return structured

    async def fails(self, tool, args=None):
        result = await self.session.call_tool(tool, args or {})
        assert field(result, "is_error", "isError"), (tool, result)
        structured = field(result, "structured_content", "structuredContent")
        assert structured["error"]["message"] in result.content[0].text, (tool, result)
        return structured


def tool(name, nodes, description="a tool of the session"):
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number"}}},
        "nodes": nodes,
    }


def echo_tool(name, factor):
    return tool(name, [
        {"id": "entry", "type": "entry", "next": "call"},
        {"id": "call", "type": "mcp", "server": "mock", "tool": "echo",
         "args": {"v": {"expr": "$.entry.n"}}, "next": "scale"},
        {"id": "scale", "type": "transform",
         "transform": {"expr": '{ "scaled": $.call.received.v * %d }' % factor}, "next": "exit"},
        {"id": "exit", "type": "exit"},
    ])


async def main(binary, graph, mcp_file):
    def file_bytes():
        with open(graph, "rb") as f:
            return f.read()

    params = StdioServerParameters(command=binary, args=["toolkit", graph, "-m", mcp_file])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert field(init, "server_info", "serverInfo").name == "mcpgraphtoolkit", init
            advertised = (await session.list_tools()).tools
            listed = [t.name for t in advertised]
            schemas = {t.name: field(t, "output_schema", "outputSchema") for t in advertised}
            for name in ["getGraphServer", "listGraphTools", "getGraphTool", "listMcpServers",
                         "listMcpServerTools", "getMcpServerTool", "addGraphTool", "updateGraphTool",
                         "deleteGraphTool", "runGraphTool", "testJSONata", "testJSONLogic",
                         "testMcpTool", "checkGraph", "drawGraph", "buildGraph", "lockGraph"]:
                assert name in listed, (name, listed)
            tk = Toolkit(session)

            # Discovery: the graph's server and the -m file's alike.
            servers = (await tk.ok("listMcpServers"))["items"]
            assert {s["name"] for s in servers} == {"own", "mock"}, servers
            assert all(s.get("version") == "0.0.1" for s in servers), servers
            tools = (await tk.ok("listMcpServerTools", {"serverName": "mock"}))["items"]
            assert {"name": "echo", "description": "echo", "server": "mock"} in tools, tools
            echo = await tk.ok("getMcpServerTool", {"serverName": "mock", "toolName": "echo"})
            assert echo["name"] == "echo" and "inputSchema" in echo, echo
            missing = await tk.fails("getMcpServerTool", {})
            assert missing["error"]["message"] == "serverName and toolName are required", missing
            nope = await tk.fails("getMcpServerTool", {"serverName": "mock", "toolName": "nope"})
            assert nope["error"]["message"] == 'Tool "nope" not found in server "mock"', nope

            # Trying things out.
            assert await tk.ok("testJSONata", {"expression": "$.a + 1", "context": {"a": 1}}) == {"result": 2}
            with_history = await tk.ok("testJSONata", {
                "expression": '$previousNode().v + $executionCount("x")',
                "context": {},
                "history": [{"nodeId": "x", "output": {"v": 40}}, {"nodeId": "x", "output": {"v": 41}}],
            })
            assert with_history == {"result": 43}, with_history
            bad = await tk.ok("testJSONata", {"expression": "$.a +", "context": {}})
            assert bad["result"] is None, bad
            assert bad["error"]["message"] == "Invalid JSONata syntax: Unexpected end of expression", bad
            logic = await tk.ok("testJSONLogic", {"expression": {">": [{"var": "a"}, 1]}, "context": {"a": 2}})
            assert logic == {"result": True}, logic
            called = await tk.ok("testMcpTool", {
                "server": "mock", "tool": "echo", "args": {"v": {"expr": "$.x"}}, "context": {"x": 3},
            })
            assert called["output"] == {"received": {"v": 3}}, called
            assert called["evaluatedArgs"] == {"v": 3}, called

            # An invalid tool is refused with diagnostics inside it; the file is untouched.
            before = file_bytes()
            broken = echo_tool("broken", 2)
            broken["nodes"][2]["next"] = "exitt"
            refused = await tk.fails("addGraphTool", {"tool": broken})
            diagnostics = refused["diagnostics"]
            assert diagnostics, refused
            wrong_next = [d for d in diagnostics if "exitt" in d["message"]]
            assert wrong_next and wrong_next[0]["inTool"], diagnostics
            # The `next: exitt` line of the tool as rendered, counted from the tool's first line.
            tool_lines = refused["toolText"].splitlines()
            assert "exitt" in tool_lines[wrong_next[0]["line"] - 1], (wrong_next, tool_lines)
            assert file_bytes() == before, "a refused edit changed the file"
            jsonschema.validate(refused, schemas["addGraphTool"])

            # A valid tool: added, listed, run, its history read.
            added = await tk.ok("addGraphTool", {"tool": echo_tool("scaled", 2)})
            assert added == {"success": True, "message": 'Tool "scaled" added successfully'}, added
            names = [t["name"] for t in (await tk.ok("listGraphTools"))["items"]]
            assert names == ["hello", "scaled"], names
            stored = await tk.ok("getGraphTool", {"toolName": "scaled"})
            assert stored == echo_tool("scaled", 2), stored
            ran = await tk.ok("runGraphTool", {"toolName": "scaled", "arguments": {"n": 4}})
            assert ran["result"] == {"scaled": 8}, ran
            history = ran["executionHistory"]
            assert [r["nodeId"] for r in history] == ["entry", "call", "scale", "exit"], history
            assert [r["executionIndex"] for r in history] == [0, 1, 2, 3], history
            assert [r["nodeType"] for r in history] == ["entry", "mcp", "transform", "exit"], history
            scale = history[2]
            assert scale["output"] == {"scaled": 8}, scale
            assert scale["context"] == {"call": {"received": {"v": 4}}, "entry": {"n": 4}}, scale
            assert list(scale["context"]) == ["call", "entry"], "the context is newest first"
            assert history[0]["context"] == {}, history[0]
            assert all(r["endTime"] >= r["startTime"] for r in history), history

            # A breakpoint stops the run before its node, with the history so far.
            stopped = await tk.ok("runGraphTool", {"toolName": "scaled", "arguments": {"n": 4}, "breakpoints": ["scale"]})
            assert stopped["result"] is None and stopped["stoppedAt"] == "scale", stopped
            assert [r["nodeId"] for r in stopped["executionHistory"]] == ["entry", "call"], stopped

            # A run-time failure: isError, its kind, and the history up to the failing node.
            failing = tool("failing", [
                {"id": "entry", "type": "entry", "next": "boom"},
                {"id": "boom", "type": "mcp", "server": "mock", "tool": "fail", "args": {"message": "no"}, "next": "exit"},
                {"id": "exit", "type": "exit"},
            ])
            failed = await tk.fails("runGraphTool", {"toolDefinition": failing, "arguments": {}})
            assert failed["error"]["kind"] == "tool" and failed["error"]["nodeId"] == "boom", failed
            assert [r["nodeId"] for r in failed["executionHistory"]] == ["entry", "boom"], failed
            assert failed["executionHistory"][1]["output"] is None, failed
            jsonschema.validate(failed, schemas["runGraphTool"])
            assert (await tk.ok("listGraphTools"))["items"][-1]["name"] == "scaled", "an inline run wrote the file"
            both = await tk.fails("runGraphTool", {"toolName": "scaled", "toolDefinition": failing, "arguments": {}})
            assert both["error"]["message"] == "Cannot specify both toolName and toolDefinition", both

            # Fixed: updated, and the new version runs.
            updated = await tk.ok("updateGraphTool", {"toolName": "scaled", "tool": echo_tool("scaled", 3)})
            assert updated["message"] == 'Tool "scaled" updated successfully', updated
            rerun = await tk.ok("runGraphTool", {"toolName": "scaled", "arguments": {"n": 4}})
            assert rerun["result"] == {"scaled": 12}, rerun
            check = await tk.ok("checkGraph")
            assert check["errors"] == 0, check
            drawn = await tk.ok("drawGraph", {"toolName": "scaled"})
            assert "flowchart TD" in drawn["mermaid"], drawn

            # Two edits at once: both land.
            first, second = await asyncio.gather(
                tk.ok("addGraphTool", {"tool": echo_tool("first", 5)}),
                tk.ok("addGraphTool", {"tool": echo_tool("second", 6)}),
            )
            assert first["success"] and second["success"], (first, second)
            names = [t["name"] for t in (await tk.ok("listGraphTools"))["items"]]
            assert sorted(names) == ["first", "hello", "scaled", "second"], names

            deleted = await tk.ok("deleteGraphTool", {"toolName": "scaled"})
            assert deleted["message"] == 'Tool "scaled" deleted successfully', deleted
            gone = await tk.fails("getGraphTool", {"toolName": "scaled"})
            assert gone["error"]["message"] == 'Tool "scaled" not found', gone
            assert (await tk.fails("getGraphTool", {}))["error"]["message"] == "toolName is required"

            # Locking: the servers the graph calls (`mock`, through `first` and `second`; `own` is
            # called by no tool) read and locked beside the graph. A directory where the lock goes
            # makes the write fail: an isError result with what was found, which fits lockGraph's
            # outputSchema as a success does (the client checks only successes).
            lock_path = os.path.join(os.path.dirname(graph), "graph.lock.json")
            os.mkdir(lock_path)
            blocked = await tk.fails("lockGraph")
            os.rmdir(lock_path)
            assert "cannot write" in blocked["error"]["message"], blocked
            assert blocked["written"] is False, blocked
            assert blocked["servers"]["mock"]["status"] == "locked", blocked
            jsonschema.validate(blocked, schemas["lockGraph"])
            locked = await tk.ok("lockGraph")
            assert os.path.samefile(locked["lockFile"], lock_path), locked
            assert locked["written"] is True and locked["upToDate"] is False, locked
            assert set(locked["servers"]) == {"mock"}, locked
            mock = locked["servers"]["mock"]
            assert mock["status"] == "locked" and "echo" in mock["tools"], mock
            assert mock["serverInfo"]["name"] == "mock", mock
            assert "drift" not in mock, "the first lock has no previous entry to differ from"
            assert locked["errors"] == 0, locked
            again = await tk.ok("lockGraph")
            assert again["upToDate"] is True and again["written"] is False, again
            assert again["servers"]["mock"]["drift"] == {"tools": []}, again
            assert (await tk.ok("checkGraph"))["errors"] == 0

    text = file_bytes().decode()
    for comment in ["# The authoring session's graph", "# The graph's own copy", "# A tool that was here",
                    "# the entry", "# The end of the file."]:
        assert comment in text, (comment, text)
    print("ok")


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
