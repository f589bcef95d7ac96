"""A streamable HTTP MCP server built on the official Python SDK (PyPI `mcp` 2.x, its
MCPServer), standing in for the many servers that pass on only an API error's status: its
one tool, rename_channel, does what a stale tool does to the demo's Channels API (GET the
channel, PUT it back renamed without the fields its schema lacks) and answers a failed
request with "Request failed with status code N", the way axios-based servers do, dropping
the body. For the `driftwatch wrap` front test (tests/integration/wrap.rs).
Usage: python status-only-mcp.py PORT BASE_URL
"""

import json
import sys
import urllib.error
import urllib.request

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PORT, BASE = int(sys.argv[1]), sys.argv[2].rstrip("/")
server = MCPServer("status-only")


def send(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        raise ToolError(f"Request failed with status code {e.code}") from None


@server.tool()
def rename_channel(channel_id: int, name: str) -> str:
    """Rename a channel (its tool schema knows no graphicsElementIds)."""
    channel = send("GET", f"/api/v1/channels/{channel_id}")
    for field in ("id", "uniqueId", "graphicsElementIds"):
        channel.pop(field, None)
    channel["name"] = name
    send("PUT", f"/api/v1/channels/{channel_id}", channel)
    return f"renamed channel {channel_id} to {name}"


server.run("streamable-http", host="127.0.0.1", port=PORT)
