"""An MCP client nobody here wrote (the official Python SDK, PyPI `mcp`) against `driftwatch
mcp`, for tests/integration/mcp.rs. Usage: python mcp-client.py SERVER STEPS_JSON

SERVER is the streamable HTTP endpoint (http://host:port/mcp), or `stdio:` and a JSON list of
the command and arguments the client starts and speaks to over stdin and stdout.

STEPS_JSON is a list of steps, each answered by one line of JSON on stdout:
  {"list": true}                      -> {"tools": [each tool as the SDK read it]}
  {"call": NAME, "args": {...}}       -> {"isError", "text", "structured"}
  {"say": TEXT}                       -> {"said": TEXT} (the test acts on it, e.g. edits the spec)
  {"wait_list_changed": SECONDS}      -> {"list_changed": true|false}
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def out(obj):
    print(json.dumps(obj), flush=True)


def transport(server):
    if server.startswith("stdio:"):
        command, *args = json.loads(server[len("stdio:"):])
        return stdio_client(StdioServerParameters(command=command, args=args))
    return streamable_http_client(server)


async def main(server, steps):
    changed = asyncio.Event()

    async def on_message(message):
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            changed.set()

    async with transport(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            for step in steps:
                if "list" in step:
                    listed = await session.list_tools()
                    # As the wire has them (inputSchema, _meta), from the SDK's own models.
                    out({"tools": [
                        t.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for t in listed.tools
                    ]})
                elif "call" in step:
                    result = await session.call_tool(step["call"], step.get("args", {}))
                    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                    out({"isError": bool(result.is_error), "text": text,
                         "structured": result.structured_content})
                elif "say" in step:
                    out({"said": step["say"]})
                elif "wait_list_changed" in step:
                    try:
                        await asyncio.wait_for(changed.wait(), step["wait_list_changed"])
                        out({"list_changed": True})
                    except asyncio.TimeoutError:
                        out({"list_changed": False})
                    changed.clear()


asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
