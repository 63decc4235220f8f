"""Calls hane's MCP server with the MCP Python SDK's client, as any MCP
client would, and prints what it got as one JSON object on stdout.

Usage: mcp_client.py SPEC, where SPEC is JSON:

  {"transport": "http" | "stdio",
   "url": "http://127.0.0.1:PORT/mcp",    # http
   "token": "...",                         # http: sent as Authorization: Bearer
   "command": "/path/to/hane",             # stdio: the server to spawn,
   "args": ["mcp", "--url", "..."],        #   its arguments
   "env": {"HANE_RUN_TOKEN": "..."},       #   and environment
   "steps": [{"list": true},
             {"call": "data-find_record", "arguments": {...}},
             {"ping": true}]}

It initializes (the handshake, as the coding CLIs do), then runs the steps
in order and prints

  {"protocolVersion", "serverInfo", "instructions",
   "steps": [{"tools": [...]} | {"result": {...}} | {"pong": true}
             | {"raised": TYPE, "message": ...}]}

where a tool is as listed (name, description, inputSchema, outputSchema,
annotations) and a result as the server sent it (content, structuredContent,
isError, _meta), after the client validated its structured content against
the tool's output schema. When the connection itself fails (a refused
token), it prints {"failed": {"type", "message", "status"}} instead.
"""

import asyncio
import json
import sys


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def leaves(error):
    """The exceptions inside nested exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def describe(error):
    found = list(leaves(error))
    first = found[0] if found else error
    status = None
    for e in found:
        response = getattr(e, "response", None)
        if response is not None and getattr(response, "status_code", None):
            status = response.status_code
    return {
        "type": type(first).__name__,
        "message": "; ".join(str(e) for e in found) or str(error),
        "status": status,
    }


async def steps(session, spec):
    init = await session.initialize()
    out = {
        "protocolVersion": init.protocol_version,
        "serverInfo": dump(init.server_info),
        "instructions": init.instructions,
        "steps": [],
    }
    for step in spec.get("steps", []):
        try:
            if step.get("list"):
                listed = await session.list_tools()
                out["steps"].append({"tools": [dump(t) for t in listed.tools]})
            elif "call" in step:
                result = await session.call_tool(
                    step["call"], step.get("arguments", {}), read_timeout_seconds=step.get("timeout", 60)
                )
                out["steps"].append({"result": dump(result)})
            elif step.get("ping"):
                await session.send_ping()
                out["steps"].append({"pong": True})
        except Exception as e:  # noqa: BLE001 - reported, for the test to judge
            out["steps"].append({"raised": type(e).__name__, "message": str(e)})
    return out


async def over_http(spec):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        async with streamable_http_client(spec["url"], http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                return await steps(session, spec)


async def over_stdio(spec):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(command=spec["command"], args=spec.get("args", []), env=spec.get("env"))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            return await steps(session, spec)


async def main(spec):
    run = over_http if spec["transport"] == "http" else over_stdio
    try:
        return await asyncio.wait_for(run(spec), timeout=spec.get("deadline", 120))
    except BaseException as e:  # noqa: BLE001 - a refused connection is what some tests expect
        if isinstance(e, KeyboardInterrupt):
            raise
        return {"failed": describe(e)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]))), ensure_ascii=False))
