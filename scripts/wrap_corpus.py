"""Real MCP servers new to driftwatch, each under `driftwatch wrap` (issue 50), for
scripts/wrap-corpus: a mock of the API from its spec (scripts/spec-mock.py), the server run by
`driftwatch wrap` in front of the mock (by a base URL in the server's arguments, or as its
forward proxy with a CA), and every tool called through the official Python SDK with arguments
made from its input schema (scripts/real_mcp_servers.py's). After the calls, the live catalog
check (`/tools/check`) and the learned map (`/tools/map`) are read from wrap's admin port.

What counts is compared with the triage (tests/data/wrap-corpus/SERVER.triage.tsv: every error
and critical finding and every live-check defect, real / false / unclear, with its cause):
anything found that is not triaged, or triaged and no longer found, fails the run; a `false`
row may not be critical. Prints one JSON summary per server; exits 1 on a difference.

Usage: python wrap_corpus.py DRIFTWATCH NODE_MODULES DIRECTORY OUT_DIR [SERVER ...]
"""

import asyncio
import csv
import json
import os
import sys
import time
import urllib.request

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import real_mcp_servers as rms  # noqa: E402

TRIAGE = os.path.join(HERE, "..", "tests", "data", "wrap-corpus")


def servers(node_modules, directory):
    nm = lambda p: os.path.join(node_modules, p)
    return [
        {
            "name": "launchdarkly",
            "package": "@launchdarkly/mcp-server@0.6.2",
            "spec": os.path.join(directory, "launchdarkly.com.json"),
            # Speakeasy's server takes its API's URL as an argument: wrap fills `{url}`.
            "command": ["node", nm("@launchdarkly/mcp-server/bin/mcp-server.js"), "start",
                        "--api-key", "api-placeholder", "--server-url", "{url}"],
            "how": "--server-url {url}",
        },
        {
            "name": "discourse",
            "package": "@discourse/mcp@0.3.1",
            "spec": os.path.join(directory, "discourse.local.json"),
            "command": ["node", nm("@discourse/mcp/dist/index.js"), "--site", "{url}",
                        "--allow_writes", "--auth_pairs",
                        '[{"site":"{url}","api_key":"key-placeholder","api_username":"system"}]'],
            "how": "--site {url}",
            # It checks the site at start with GET /about.json, which the spec does not declare.
            "mock_extra": {"GET /about.json": {"about": {"title": "Mock", "version": "3.5.0"}}},
        },
        {
            "name": "trello",
            "package": "@delorenj/mcp-server-trello@1.8.1",
            "spec": os.path.join(directory, "trello.com.json"),
            # Hard-codes https://api.trello.com/1; its axios honours HTTPS_PROXY.
            "command": ["node", nm("@delorenj/mcp-server-trello/build/index.js")],
            "env": {"TRELLO_API_KEY": "key-placeholder", "TRELLO_TOKEN": "token-placeholder",
                    "TRELLO_BOARD_ID": "5f0000000000000000000001"},
            "forward": ["api.trello.com:443"],
            "how": "forward proxy (HTTPS_PROXY, NODE_EXTRA_CA_CERTS, set by wrap)",
        },
    ]


def telling(value, name=""):
    """The generator's placeholder string (`x1`) made one that tells which argument it is
    (`raw-x1`): wrap learns where an argument went only from a value no other holds."""
    if isinstance(value, dict):
        return {k: telling(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [telling(v, name) for v in value]
    return f"{name}-x1" if value == "x1" and name else value


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


async def call_all(command, env, events_path, admin, count):
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    calls, offset = [], 0
    errlog = open(os.path.join(os.path.dirname(events_path), "wrap.stderr"), "a")
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            listed = {"tools": [t.model_dump(by_alias=True, exclude_none=True) for t in tools]}
            for tool in tools:
                schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
                args = telling(rms.fill(schema or {}))
                try:
                    result = await asyncio.wait_for(session.call_tool(tool.name, args), 30)
                    error = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
                except Exception as e:  # a call that fails is reported, not fatal
                    error = True
                await asyncio.sleep(0.15)  # the event writer
                events, offset = rms.events_since(events_path, offset)
                calls.append({"tool": tool.name, "error": error, "events": events})
            requests = count()
            # The live check runs after the last call taught the map: wait until it settles.
            check, last = None, None
            deadline = time.time() + 20
            while time.time() < deadline:
                await asyncio.sleep(0.5)
                try:
                    check = get(f"http://127.0.0.1:{admin}/tools/check")
                except OSError:
                    continue
                if check == last:
                    break
                last = check
            learned = get(f"http://127.0.0.1:{admin}/tools/map")
    return calls, json.loads(check) if check else {"defects": []}, learned, requests, listed


def run(server, driftwatch, out_dir):
    name = server["name"]
    port_file = os.path.join(out_dir, f"{name}.mock-port")
    if os.path.exists(port_file):
        os.remove(port_file)
    pki = rms.mock_pki(out_dir) if "forward" in server else None
    mock, mock_port = rms.start_mock(name, server["spec"], port_file, pki, server.get("mock_extra"))
    admin = rms.free_port()
    events = os.path.join(out_dir, f"{name}.events.jsonl")
    open(events, "w").close()
    wrap = [driftwatch, "wrap", "--admin-listen", f"127.0.0.1:{admin}"]
    if "forward" in server:
        cas = (os.path.join(out_dir, name + "-ca"), pki[0])
        config = rms.forward_config(os.path.join(out_dir, f"{name}.toml"), name, server["spec"],
                                    server["forward"], cas, mock_port)
        wrap += ["--config", config]
    else:
        wrap += ["--spec", server["spec"], "--upstream", f"http://127.0.0.1:{mock_port}"]
    env = {k: v for k, v in os.environ.items()
           if k.upper() not in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY")}
    env.update(server.get("env", {}))
    env["DRIFTWATCH_EVENTS_OUTPUT"] = events
    try:
        count = lambda: rms.mock_count(mock_port, pki[0] if pki else None)
        done = asyncio.run(call_all([*wrap, "--", *server["command"]], env, events, admin, count))
    finally:
        mock.terminate()
        mock.wait()
    return done


def found(calls, check):
    """Each error or critical finding as (tool, kind, field, severity), and each live-check
    defect as (tool, 'catalog:' kind, field, its severity)."""
    rows = set()
    for c in calls:
        for e in c["events"]:
            for f in e.get("findings", []):
                if f["severity"] in ("error", "critical"):
                    # The tool the event names (attribution is wrap's): a request the server
                    # made with no call in flight (at start) names none.
                    rows.add((e.get("tool") or "(no call)", f["kind"], f["field"], f["severity"]))
    for d in check.get("defects", []):
        if d["kind"] == "unmapped":
            continue
        rows.add((d["tool"], "catalog:" + d["kind"], d["field"], d["severity"]))
    return rows


def triage(name):
    path = os.path.join(TRIAGE, f"{name}.triage.tsv")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in rows}


def main():
    driftwatch, node_modules, directory, out_dir = sys.argv[1:5]
    only = sys.argv[5:] or None
    os.makedirs(out_dir, exist_ok=True)
    failed = False
    for server in servers(node_modules, directory):
        if only and server["name"] not in only:
            continue
        calls, check, learned, requests, listed = run(server, driftwatch, out_dir)
        with open(os.path.join(out_dir, f"{server['name']}.tools.json"), "w") as f:
            json.dump(listed, f)
        got = found(calls, check)
        want = triage(server["name"])
        with open(os.path.join(out_dir, f"{server['name']}.json"), "w") as f:
            json.dump({"calls": calls, "check": check, "map": learned}, f, indent=1)
        verdicts = {}
        for row in sorted(got):
            verdict = want.get(row, ("untriaged", ""))[0]
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        print(json.dumps({
            "server": server["name"], "package": server["package"], "reached_by": server["how"],
            "tools": len(calls), "tools_failed": sum(1 for c in calls if c["error"]),
            "requests": requests,
            "findings_and_defects": len(got), "verdicts": dict(sorted(verdicts.items())),
        }), flush=True)
        for row in sorted(got - set(want)):
            print("untriaged: " + "\t".join(row))
            failed = True
        for row in sorted(set(want) - got):
            print("triaged, no longer found: " + "\t".join(row))
            failed = True
        for row, (verdict, _) in want.items():
            if verdict == "false" and row[3] == "critical":
                print("a false critical: " + "\t".join(row))
                failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
