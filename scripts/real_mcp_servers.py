"""Real MCP servers through driftwatch, for scripts/real-mcp-servers. For each server: a mock of
its API made from the spec (scripts/spec-mock.py), driftwatch in front of the mock (observe,
then enforce), and the server started by the official Python SDK (PyPI `mcp`), which lists its
tools and calls every one with plausible arguments made from its input schema. Each call's
requests are the mock's count before and after it; its findings are driftwatch's events in
between. Prints one JSON report per server and mode, then a summary; exits 1 when an error or
critical finding is not in the triage (docs/real-mcp-servers.md, TRIAGED below).

A server whose HTTP client honours HTTPS_PROXY (Notion's, through axios) runs a third time,
unchanged but for its environment (HTTPS_PROXY, NODE_EXTRA_CA_CERTS): driftwatch as a forward
proxy (`proxy.kind = "forward"`) intercepting the API's real host, the mock serving TLS with a
certificate of its own CA (made with openssl); that run's findings must be the observe run's.

Usage: python real_mcp_servers.py DRIFTWATCH NODE_MODULES SHARED_SPECS DIRECTORY OUT_DIR
"""

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))

# Real drift, triaged by hand (docs/real-mcp-servers.md): (server, tool, kind, field). Any other
# error or critical finding fails the run.
TRIAGED = {
    ("github", "create_repository", "undeclared_body_field", "/autoInit"),
    ("github", "fork_repository", "unknown_query_param", "organization"),
    # GET git/refs/heads/{branch}: GitHub documents GET git/ref/{ref}; the branch holds a `/`.
    ("github", "create_branch", "method_not_allowed", "/repos/*/*/git/refs/*/*"),
    ("github", "create_branch", "upstream_rejected", "/repos/*/*/git/refs/*/*"),
    ("github", "push_files", "method_not_allowed", "/repos/*/*/git/refs/*/*/*"),
    ("github", "push_files", "upstream_rejected", "/repos/*/*/git/refs/*/*/*"),
    # The spec the Notion server ships says `children` items are strings; the API and the
    # server's own tool take block objects.
    ("notion", "API-post-page", "body_type_mismatch", "/children/0"),
    # The directory's Slack spec (2020) lacks `team_id` on these lists, and declares only form
    # bodies where the API also takes JSON with a bearer token.
    ("slack", "slack_list_channels", "unknown_query_param", "team_id"),
    ("slack", "slack_get_users", "unknown_query_param", "team_id"),
    ("slack", "slack_post_message", "unsupported_media_type", "content-type"),
    ("slack", "slack_reply_to_thread", "unsupported_media_type", "content-type"),
    ("slack", "slack_add_reaction", "unsupported_media_type", "content-type"),
}

# Plausible values by argument name, before the schema's type decides.
BY_NAME = {
    "owner": "octo-org",
    "repo": "hello-world",
    "path": "docs/README.md",
    "branch": "feature/login",
    "from_branch": "main",
    "base": "main",
    "head": "feature/login",
    "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
    "commit_id": "3d21ec53a331a6f037a91c368710b99387d012c1",
    "message": "Update the docs",
    "content": "aGVsbG8=",
    "title": "Drift in the docs",
    "body": "Found by driftwatch",
    "name": "hello-world",
    "description": "A test",
    "username": "octocat",
    "organization": "octo-org",
    "q": "drift in:title",
    "query": "drift",
    "email": "ada@example.com",
    "channel_id": "C0123456789",
    "user_id": "U0123456789",
    "thread_ts": "1712345678.000100",
    "timestamp": "1712345678.000100",
    "reaction": "thumbsup",
    "text": "hello",
    "event": "COMMENT",
    "merge_method": "squash",
    "state": "open",
}

UUID = "59833787-2cf9-4fdf-8782-e53db20768a5"


def resolve(schema, root):
    """A schema with its local `$ref` (`#/$defs/x`) followed, a few in a row at most."""
    for _ in range(8):
        ref = (schema or {}).get("$ref", "")
        if not ref.startswith("#/"):
            break
        node = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = node
    return schema or {}


def value(name, schema, depth=0, root=None):
    """A plausible value for an argument, from its name and JSON schema."""
    schema = resolve(schema, root)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            branches = [resolve(b, root) for b in schema[union]]
            typed = [b for b in branches if b.get("type") not in ("string", "null")]
            return value(name, (typed or branches)[0], depth, root)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in (None, "string") and name in BY_NAME:
        return BY_NAME[name]
    if kind == "string" or kind is None:
        if schema.get("format") == "uuid" or name.endswith("_id"):
            return UUID
        if schema.get("format") == "date-time":
            return "2026-12-04T10:00:00Z"
        if schema.get("format") == "email":
            return "ada@example.com"
        return "x1"
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if kind == "array":
        return [value(name.rstrip("s"), schema.get("items"), depth + 1, root)]
    if kind == "object" or "properties" in schema:
        return fill(schema, depth + 1, root)
    return "x1"


def fill(schema, depth=0, root=None):
    """Every property at the top two levels, the required ones deeper."""
    root = root if root is not None else schema
    schema = resolve(schema, root)
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return {
        k: value(k, s, depth, root)
        for k, s in props.items()
        if depth < 2 or k in required
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def mock_count(port, ca=None):
    scheme = "https" if ca else "http"
    context = ssl.create_default_context(cafile=ca) if ca else None
    with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/__count", context=context) as r:
        return json.load(r)["requests"]


def mock_pki(out_dir):
    """A CA and a certificate it signed for 127.0.0.1, for the mock to serve TLS with."""
    d = os.path.join(out_dir, "mock-pki")
    os.makedirs(d, exist_ok=True)
    ca, ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    cert, key, csr = (os.path.join(d, n) for n in ("mock.pem", "mock.key", "mock.csr"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    subprocess.run(["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
                    "-subj", "/CN=mock API CA", "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign"], **quiet)
    subprocess.run(["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"], **quiet)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext], **quiet)
    return ca, cert, key


def start_mock(name, spec, port_file, pki=None, extra=None):
    """scripts/spec-mock.py for `spec` (serving TLS with the certificate `pki` holds), once it
    listens: the process and its port. `extra` is what it answers that the spec lacks."""
    tls = list(pki[1:]) if pki else []
    env = dict(os.environ, SPEC_MOCK_EXTRA=json.dumps(extra or {}))
    mock = subprocess.Popen([sys.executable, os.path.join(HERE, "spec-mock.py"), spec, port_file, *tls], env=env)
    deadline = time.time() + 30
    while not os.path.exists(port_file) or not open(port_file).read():
        if time.time() > deadline or mock.poll() is not None:
            raise SystemExit(f"{name}: the mock did not start")
        time.sleep(0.05)
    return mock, int(open(port_file).read())


def forward_config(path, api, spec, hosts, cas, mock_port, listen=None):
    """Write a config for driftwatch as a forward proxy ending the CONNECTs to `hosts` (the API
    `api` of `spec`) with the CA it keeps in `cas[0]`, upstream the TLS mock on `mock_port`
    trusted by `cas[1]`; on `listen`, else wherever its runner puts it. Returns `path`."""
    ca_dir, upstream_ca = cas
    with open(path, "w") as f:
        f.write(
            '[proxy]\nkind = "forward"\n'
            + (f'listen = "127.0.0.1:{listen}"\n' if listen else "")
            + f'[forward]\nca_dir = {json.dumps(ca_dir)}\nupstream_ca_file = {json.dumps(upstream_ca)}\n'
            f'[[api]]\nname = "{api}"\nspec = {json.dumps(spec)}\n'
            f'hosts = {json.dumps(hosts)}\n'
            f'upstream = "https://127.0.0.1:{mock_port}"\n'
        )
    return path


def events_since(path, offset):
    with open(path) as f:
        f.seek(offset)
        text = f.read()
        return [json.loads(l) for l in text.splitlines() if l.strip()], f.tell()


def servers(node_modules, shared, directory):
    gh = os.path.join(node_modules, "@modelcontextprotocol/server-github/dist/index.js")
    slack = os.path.join(node_modules, "@modelcontextprotocol/server-slack/dist/index.js")
    notion = os.path.join(node_modules, "@notionhq/notion-mcp-server")
    preload = os.path.join(HERE, "rewrite-fetch.cjs")
    return [
        {
            "name": "github",
            "package": "@modelcontextprotocol/server-github@2025.4.8",
            "spec": os.path.join(shared, "github/api.github.com.json.gz"),
            "command": ["node", "--require", preload, gh],
            "env": lambda dw: {
                "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_placeholder",
                "DW_REWRITE_FROM": "https://api.github.com",
                "DW_REWRITE_TO": dw,
            },
            "how": "preload rewriting https://api.github.com (hard-coded)",
        },
        {
            "name": "notion",
            "package": "@notionhq/notion-mcp-server@2.5.2",
            "spec": os.path.join(notion, "scripts/notion-openapi.json"),
            "command": ["node", os.path.join(notion, "bin/cli.mjs")],
            "env": lambda dw: {
                "BASE_URL": dw,
                "OPENAPI_MCP_HEADERS": json.dumps(
                    {"Authorization": "Bearer ntn_placeholder", "Notion-Version": "2025-09-03"}
                ),
            },
            "how": "BASE_URL",
            # Unchanged but for its environment: axios opens a CONNECT tunnel to the real host.
            "forward": {
                "hosts": ["api.notion.com:443"],
                "env": lambda proxy, ca: {
                    "HTTPS_PROXY": proxy,
                    "NODE_EXTRA_CA_CERTS": ca,
                    "OPENAPI_MCP_HEADERS": json.dumps(
                        {"Authorization": "Bearer ntn_placeholder", "Notion-Version": "2025-09-03"}
                    ),
                },
                "how": "HTTPS_PROXY (axios), NODE_EXTRA_CA_CERTS",
            },
        },
        {
            "name": "slack",
            "package": "@modelcontextprotocol/server-slack@2025.4.25",
            "spec": os.path.join(directory, "slack.com.json"),
            "command": ["node", "--require", preload, slack],
            "env": lambda dw: {
                "SLACK_BOT_TOKEN": "xoxb-placeholder",
                "SLACK_TEAM_ID": "T0123456789",
                "DW_REWRITE_FROM": "https://slack.com/api",
                "DW_REWRITE_TO": dw + "/api",
            },
            "how": "preload rewriting https://slack.com/api (hard-coded)",
        },
    ]


async def call_all(server_env, command, mock_count_now, events_path):
    env = {k: v for k, v in os.environ.items() if k.upper() not in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY")}
    env.update(server_env)
    server = {"command": command}
    params = StdioServerParameters(command=server["command"][0], args=server["command"][1:], env=env)
    calls = []
    offset = 0
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            for tool in tools:
                schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
                args = fill(schema or {})
                before = mock_count_now()
                try:
                    result = await asyncio.wait_for(session.call_tool(tool.name, args), 30)
                    error = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
                    text = " ".join(getattr(c, "text", "") for c in result.content)[:300]
                except Exception as e:  # a server that crashes on a call is reported, not fatal
                    error, text = True, f"{type(e).__name__}: {e}"[:300]
                await asyncio.sleep(0.15)  # the event writer thread
                events, offset = events_since(events_path, offset)
                findings = [
                    {
                        "kind": f["kind"],
                        "severity": f["severity"],
                        "field": f["field"],
                        "operation": e.get("operation"),
                        "action": f.get("action"),
                        "message": f.get("message", "")[:240],
                    }
                    for e in events
                    for f in e["findings"]
                ]
                calls.append(
                    {
                        "tool": tool.name,
                        "args": args,
                        "requests": mock_count_now() - before,
                        "blocked": sum(1 for e in events if e["action"] == "blocked"),
                        "error": error,
                        "text": text if error else "",
                        "findings": findings,
                    }
                )
    return calls


def run(server, mode, driftwatch, out_dir):
    name = f"{server['name']}-{mode}"
    port_file = os.path.join(out_dir, f"{name}.mock-port")
    if os.path.exists(port_file):
        os.remove(port_file)
    pki = mock_pki(out_dir) if mode == "forward" else None
    mock, mock_port = start_mock(name, server["spec"], port_file, pki)
    listen, admin = free_port(), free_port()
    events = os.path.join(out_dir, f"{name}.events.jsonl")
    open(events, "w").close()
    proxy = f"http://127.0.0.1:{listen}"
    common = ["--admin-listen", f"127.0.0.1:{admin}", "--log-format", "text"]
    if mode == "forward":
        ca_dir = os.path.join(out_dir, f"{name}-ca")
        config = forward_config(os.path.join(out_dir, f"{name}.toml"), server["name"], server["spec"],
                                server["forward"]["hosts"], (ca_dir, pki[0]), mock_port, listen)
        argv = [driftwatch, "serve", "--config", config, *common]
        server_env = server["forward"]["env"](proxy, os.path.join(ca_dir, "ca.pem"))
    else:
        argv = [driftwatch, "serve", "--spec", server["spec"], "--upstream", f"http://127.0.0.1:{mock_port}",
                "--listen", f"127.0.0.1:{listen}", "--mode", mode, *common]
        server_env = server["env"](proxy)
    dw = subprocess.Popen(
        argv,
        env=dict(os.environ, DRIFTWATCH_EVENTS_OUTPUT=events),
        stderr=open(os.path.join(out_dir, f"{name}.driftwatch.log"), "w"),
    )
    try:
        wait_port(listen)
        count = lambda: mock_count(mock_port, pki[0] if pki else None)
        calls = asyncio.run(call_all(server_env, server["command"], count, events))
    finally:
        dw.terminate()
        mock.terminate()
        dw.wait()
        mock.wait()
    return calls


def seen(calls):
    """Each call's findings, as (tool, kind, field, severity)."""
    return sorted({(c["tool"], f["kind"], f["field"], f["severity"]) for c in calls for f in c["findings"]})


def summary(server, mode, calls):
    kinds = {}
    for c in calls:
        for f in c["findings"]:
            key = f"{f['kind']} ({f['severity']})"
            kinds[key] = kinds.get(key, 0) + 1
    return {
        "server": server["name"],
        "package": server["package"],
        "reached_by": server["forward"]["how"] if mode == "forward" else server["how"],
        "mode": mode,
        "tools": len(calls),
        "tools_failed": sum(1 for c in calls if c["error"]),
        "requests": sum(c["requests"] for c in calls),
        "blocked": sum(c["blocked"] for c in calls),
        "findings": dict(sorted(kinds.items())),
    }


def main():
    driftwatch, node_modules, shared, directory, out_dir = sys.argv[1:6]
    only = sys.argv[6:] or None
    os.makedirs(out_dir, exist_ok=True)
    untriaged = []
    for server in servers(node_modules, shared, directory):
        if only and server["name"] not in only:
            continue
        found = {}
        for mode in ("observe", "enforce") + (("forward",) if "forward" in server else ()):
            calls = run(server, mode, driftwatch, out_dir)
            found[mode] = seen(calls)
            if mode == "forward" and found["forward"] != found["observe"]:
                print(f"{server['name']}: the forward proxy found {found['forward']}, the reverse proxy {found['observe']}")
                untriaged.append((server["name"], "forward", "differs", "from observe"))
            with open(os.path.join(out_dir, f"{server['name']}-{mode}.json"), "w") as f:
                json.dump(calls, f, indent=1)
            print(json.dumps(summary(server, mode, calls)), flush=True)
            for c in calls:
                for f in c["findings"]:
                    key = (server["name"], c["tool"], f["kind"], f["field"])
                    serious = f["severity"] in ("error", "critical")
                    if serious and key not in TRIAGED and key not in untriaged:
                        untriaged.append(key)
    for key in untriaged:
        print("untriaged: " + " ".join(key))
    sys.exit(1 if untriaged else 0)


if __name__ == "__main__":
    main()
