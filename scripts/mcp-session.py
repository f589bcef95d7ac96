"""Drive a stdio MCP server through the official Python SDK (PyPI `mcp`) by a plan, for the
`driftwatch wrap` tests and scripts/bench-wrap. The plan (JSON, a file) is a list of steps:
`{"call": [TOOL, ARGS]}` makes one call; `{"together": [[TOOL, ARGS], ...]}` makes the calls at
once (all in flight together); `{"hold": FILE}` keeps the session open until FILE exists;
`{"repeat": N, "call": [TOOL, ARGS]}` times N calls one after
another. Writes OUT (JSON): the server's `tools/list` result, each call's result text and
isError, and each repeated call's latency in seconds.
Usage: python mcp-session.py PLAN OUT -- COMMAND ARGS...  (the server runs with this process's
environment), or PLAN OUT -- http://HOST:PORT/PATH for a streamable HTTP endpoint.
With MCP_SESSION_OTLP set (an OTLP/HTTP traces URL), the OpenTelemetry SDK (PyPI
`opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http`) is the client's tracer provider,
as service `agent`: the SDK then opens a span per call and puts its `traceparent` in
`params._meta` (SEP-414), and each span is exported as it ends.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def call(session, name, args):
    """One call's result text and isError; a JSON-RPC error answer as `error`."""
    try:
        result = await session.call_tool(name, args)
    except MCPError as e:
        return {"error": str(e)}
    return {
        "text": " ".join(getattr(c, "text", "") for c in result.content),
        "is_error": bool(getattr(result, "is_error", None) or getattr(result, "isError", False)),
    }


def transport(command):
    """A streamable HTTP endpoint (`http://...`), or a command to start and speak stdio to."""
    if command[0].startswith("http://"):
        return streamable_http_client(command[0])
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    return stdio_client(params)


async def run(plan, command):
    out = {"results": [], "latencies": []}
    async with transport(command) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["tools"] = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
            for step in plan:
                if "hold" in step:
                    # Keep the session open until the file exists (the test has read what it
                    # needed of the server's side).
                    while not os.path.exists(step["hold"]):
                        await asyncio.sleep(0.05)
                elif "together" in step:
                    calls = [call(session, name, args) for name, args in step["together"]]
                    out["results"].append(list(await asyncio.gather(*calls)))
                elif "repeat" in step:
                    name, args = step["call"]
                    for _ in range(step["repeat"]):
                        started = time.perf_counter()
                        await call(session, name, args)
                        out["latencies"].append(time.perf_counter() - started)
                else:
                    name, args = step["call"]
                    out["results"].append(await call(session, name, args))
    return out


def traced():
    """The OpenTelemetry SDK as the tracer provider, when MCP_SESSION_OTLP names a receiver."""
    endpoint = os.environ.get("MCP_SESSION_OTLP")
    if not endpoint:
        return None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    return provider


def main():
    provider = traced()
    plan_path, out_path, sep, *command = sys.argv[1:]
    assert sep == "--", "usage: mcp-session.py PLAN OUT -- COMMAND ARGS..."
    with open(plan_path) as f:
        plan = json.load(f)
    out = asyncio.run(run(plan, command))
    if provider is not None:
        provider.shutdown()
    with open(out_path, "w") as f:
        json.dump(out, f)


main()
