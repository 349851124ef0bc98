#!/usr/bin/env python3
"""A stdio MCP server whose contract comes from a JSON file, for the lock tests (tests/cli/lock.rs).

$LOCK_TEST_CONTRACT names the file, read at every request so a test can change the server
between runs:
  {"serverInfo": {...}, "tools": [...], "pageSize": N, "failList": false}
tools/list answers pageSize tools per page (default: all), with nextCursor to the next page;
failList answers tools/list with a JSON-RPC error instead. tools/call answers any listed tool with
structuredContent {"called": name, "arguments": args}.
"""
import json
import os
import sys


def contract():
    with open(os.environ["LOCK_TEST_CONTRACT"]) as f:
        return json.load(f)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        if mid is None:
            continue  # a notification
        c = contract()
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": c.get("serverInfo", {"name": "lock-test", "version": "1"})}})
        elif method == "tools/list":
            if c.get("failList"):
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32603, "message": "no list today"}})
                continue
            tools = c["tools"]
            size = c.get("pageSize") or max(len(tools), 1)
            start = int((msg.get("params") or {}).get("cursor") or 0)
            result = {"tools": tools[start:start + size]}
            if start + size < len(tools):
                result["nextCursor"] = str(start + size)
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            if any(t["name"] == name for t in c["tools"]):
                out = {"called": name, "arguments": args}
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": json.dumps(out)}], "structuredContent": out}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
