"""The same steps as scripts/mcp-client.py, from another client nobody here wrote: FastMCP's
Client (PyPI fastmcp), over streamable HTTP. Usage: python mcp-client-fastmcp.py URL STEPS_JSON

FastMCP speaks protocol 2026-07-28, which has no session for the server to notify on: a client
that wants `tools/list_changed` opens a `subscriptions/listen` stream for it (the SDK's
`mcp.client.subscriptions.listen`, on FastMCP's session); an older version's notifications come
through the message handler.
"""

import asyncio
import contextlib
import json
import sys

from fastmcp import Client
from fastmcp.client.messages import MessageHandler
from mcp import types
from mcp.client.subscriptions import ListenNotSupportedError, listen


def out(obj):
    print(json.dumps(obj), flush=True)


class Heard(MessageHandler):
    def __init__(self):
        self.changed = asyncio.Event()

    async def on_tool_list_changed(self, message):
        self.changed.set()


async def main(url, steps):
    heard = Heard()
    async with Client(url, message_handler=heard) as client, contextlib.AsyncExitStack() as stack:
        try:
            subscription = await stack.enter_async_context(listen(client.session, tools_list_changed=True))

            async def follow():
                async for event in subscription:
                    if isinstance(getattr(event, "root", event), types.ToolListChangedNotification):
                        heard.changed.set()

            follower = asyncio.create_task(follow())
            stack.callback(follower.cancel)
        except ListenNotSupportedError:
            pass
        for step in steps:
            if "list" in step:
                tools = await client.list_tools()
                out({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]})
            elif "call" in step:
                result = await client.call_tool(step["call"], step.get("args", {}), raise_on_error=False)
                text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                out({"isError": bool(result.is_error), "text": text, "structured": result.structured_content})
            elif "say" in step:
                out({"said": step["say"]})
            elif "wait_list_changed" in step:
                try:
                    await asyncio.wait_for(heard.changed.wait(), step["wait_list_changed"])
                    out({"list_changed": True})
                except asyncio.TimeoutError:
                    out({"list_changed": False})
                heard.changed.clear()


asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
