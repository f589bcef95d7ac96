"""Call one tool of a stdio MCP server through the official Python SDK (PyPI `mcp`) and print
the text of its result: the forward proxy's Go client test starts github-mcp-server with it.
Usage: python call-tool.py SERVER_BINARY TOOL  (the server runs as `SERVER_BINARY stdio`, with
this process's environment)
"""

import asyncio
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["stdio"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(sys.argv[2], {})
            print(" ".join(getattr(c, "text", "") for c in result.content)[:300])


asyncio.run(main())
