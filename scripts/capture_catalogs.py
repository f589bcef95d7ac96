"""Capture the `tools/list` result of real MCP servers, for `driftwatch tools` tests (issue 36).
Each server (pinned npm package, installed by scripts/capture-catalogs) is started over stdio by
the official Python SDK (PyPI `mcp`), which lists its tools; the list is written as the server
sent it (`{"tools": [...]}` with `inputSchema` keys) to OUT_DIR/SERVER.tools.json. No server is
asked to reach its API: placeholder credentials are enough to list tools.

Usage: python capture_catalogs.py NODE_MODULES OUT_DIR [server ...]
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def servers(nm):
    pkg = lambda *p: os.path.join(nm, *p)
    return {
        "github": (["node", pkg("@modelcontextprotocol/server-github/dist/index.js")],
                   {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_placeholder"}),
        "slack": (["node", pkg("@modelcontextprotocol/server-slack/dist/index.js")],
                  {"SLACK_BOT_TOKEN": "xoxb-placeholder", "SLACK_TEAM_ID": "T0123456789"}),
        "notion": (["node", pkg("@notionhq/notion-mcp-server/bin/cli.mjs")],
                   {"OPENAPI_MCP_HEADERS": json.dumps({"Authorization": "Bearer ntn_placeholder",
                                                       "Notion-Version": "2025-09-03"})}),
        "gitlab": (["node", pkg("@modelcontextprotocol/server-gitlab/dist/index.js")],
                   {"GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-placeholder"}),
        "stripe": (["node", pkg("@stripe/mcp/dist/index.js"), "--tools=all",
                    "--api-key=sk_test_placeholder"], {}),
    }


async def capture(command, env):
    params = StdioServerParameters(command=command[0], args=command[1:],
                                   env=dict(os.environ, **env))
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
    return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                      for t in listed.tools]}


def main():
    nm, out = sys.argv[1], sys.argv[2]
    chosen = sys.argv[3:] or list(servers(nm))
    for name in chosen:
        command, env = servers(nm)[name]
        doc = asyncio.run(capture(command, env))
        path = os.path.join(out, f"{name}.tools.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: {len(doc['tools'])} tools -> {path}")


if __name__ == "__main__":
    main()
