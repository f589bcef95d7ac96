# Issue 64 item 5 (round 3's r01, r03, r07), measured on loopback against wrap's MCP front
# (docs/reliability.md). A mock MCP server over streamable HTTP (sessions, a 5 MiB answer, a
# tools/call that makes an API request through the sidecar, a tools/list answer it can hold)
# and a mock API run here; wrap runs between them.
#   r01 N       a lone call's API request after one 5 MiB answer: N lone calls, their attribution
#   r03 N [h2]  N request bodies of 4 MiB announced, 64 KiB sent, then stalled, over HTTP/1.1
#               or (h2) HTTP/2 with prior knowledge, one connection each: when wrap closes each
#               connection, and its RSS before, at its peak and after (bounded: 120 s)
#   r07 RUNS    per run a fresh wrap: a real session's tools/list answer held 1 s while 1,100
#               made-up session ids POST; whether /tools/check then has the real catalog
# Usage: python3 scripts/hostile-front.py DRIFTWATCH r01|r03|r07 N [h2]
# (MIMALLOC_* variables reach wrap: MIMALLOC_PURGE_DELAY=0 shows what RSS is memory held,
# rather than freed pages mimalloc keeps for reuse.)
import json, os, socket, struct, subprocess, sys, threading, time, urllib.request, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

dw, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "channels.openapi.yaml")

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

class Quiet(ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, *a): pass

class Api(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", "2"); self.end_headers(); self.wfile.write(b"[]")
    def log_message(self, *a): pass

sessions, hold_lists = set(), threading.Event()
class Mcp(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
        sid, method = self.headers.get("mcp-session-id"), msg.get("method")
        headers = {}
        if method == "initialize":
            sid = str(uuid.uuid4()); sessions.add(sid); headers["mcp-session-id"] = sid
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "mock", "version": "1"}}
        elif sid not in sessions:
            return self.answer(404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}})
        elif "id" not in msg:
            return self.answer(202, None)
        elif method == "tools/list":
            if mode == "r07": hold_lists.wait(5)
            result = {"tools": [{"name": "lone", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call" and msg["params"]["name"] == "big":
            result = {"content": [{"type": "text", "text": "x" * (5 << 20)}]}
        elif method == "tools/call":
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_p}/api/v1/channels").read()
            result = {"content": [{"type": "text", "text": "ok"}]}
        else:
            result = {}
        # The id after the result, as the TypeScript SDK writes an answer.
        self.answer(200, {"result": result, "jsonrpc": "2.0", "id": msg["id"]}, headers)
    def answer(self, status, body, headers={}):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status); self.send_header("content-type", "application/json")
        for k, v in headers.items(): self.send_header(k, v)
        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def log_message(self, *a): pass

mcp_p, api_p, proxy_p = free(), free(), free()
threading.Thread(target=Quiet(("127.0.0.1", mcp_p), Mcp).serve_forever, daemon=True).start()
threading.Thread(target=Quiet(("127.0.0.1", api_p), Api).serve_forever, daemon=True).start()

def start_wrap():
    front_p, admin_p = free(), free()
    wrap = subprocess.Popen([dw, "wrap", "--spec", spec, "--upstream", f"http://127.0.0.1:{api_p}",
        "--listen", f"127.0.0.1:{proxy_p}",
        "--admin-listen", f"127.0.0.1:{admin_p}", "--mcp-upstream", f"http://127.0.0.1:{mcp_p}/mcp",
        "--mcp-listen", f"127.0.0.1:{front_p}"], stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k.startswith("MIMALLOC_")}})
    for _ in range(600):
        try: urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/readyz"); break
        except Exception: time.sleep(0.1)
    for _ in range(100):
        try: socket.create_connection(("127.0.0.1", front_p)).close(); break
        except OSError: time.sleep(0.05)
    return wrap, front_p, admin_p

def post(front_p, msg, sid=None):
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sid: headers["mcp-session-id"] = sid
    r = urllib.request.Request(f"http://127.0.0.1:{front_p}/mcp", data=json.dumps(msg).encode(), headers=headers)
    try:
        with urllib.request.urlopen(r, timeout=30) as a: return a.status, a.headers.get("mcp-session-id"), a.read()
    except urllib.error.HTTPError as e: return e.code, None, e.read()

def initialize(front_p):
    _, sid, _ = post(front_p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
    post(front_p, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    return sid

def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) // 1024

def attributions(admin_p):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/metrics").read().decode()
    return {l.split("attribution=\"")[1].split("\"")[0]: float(l.rsplit(" ", 1)[1])
            for l in text.splitlines() if l.startswith("driftwatch_tool_requests_total{") and "attribution=" in l}

if mode == "r01":
    wrap, front_p, admin_p = start_wrap()
    sid = initialize(front_p)
    call = lambda i, name: post(front_p, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {}}}, sid)
    call(1, "lone")
    print("after 1 lone call:", attributions(admin_p))
    status, _, body = call(2, "big")
    print(f"the 5 MiB answer: {status}, {len(body)} bytes")
    for i in range(n): call(10 + i, "lone")
    print(f"after {n} more lone calls:", attributions(admin_p))
elif mode == "r03":
    wrap, front_p, admin_p = start_wrap()
    time.sleep(1); base = rss(wrap.pid)
    socks, cut, status = [], {}, {}
    h2 = sys.argv[4:] == ["h2"]
    # HTTP/2 frames by hand: HPACK literals (RFC 7541 6.2.2), :method POST and :scheme http indexed.
    frame = lambda kind, flags, payload: struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", int(kind != 4)) + payload
    literal = lambda name, value: bytes([0, len(name)]) + name + bytes([len(value)]) + value
    fields = b"\x83\x86" + literal(b":path", b"/mcp") + literal(b":authority", b"x") + literal(b"content-type", b"application/json")
    head = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, b"") + frame(1, 4, fields) if h2 else
            f"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {4 << 20}\r\n\r\n".encode())
    started = time.time()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", front_p)); s.sendall(head); socks.append(s)
    for _ in range(4):
        for s in socks: s.sendall(frame(0, 0, b" " * 16000) if h2 else b" " * (16 << 10))
        time.sleep(0.25)
    stalled = time.time(); peak = base
    for s in socks: s.setblocking(False)
    while len(cut) < n and time.time() - stalled < 120:
        peak = max(peak, rss(wrap.pid))
        for i, s in enumerate(socks):
            if i in cut: continue
            try:
                data = s.recv(65536)
                if data and i not in status and not h2: status[i] = data.split(b" ", 2)[1].decode()
                if b"the request body" in data: status[i] = "408"
                if not data: cut[i] = time.time() - stalled
            except BlockingIOError: pass
            except OSError: cut[i] = time.time() - stalled
        time.sleep(0.5)
    after = rss(wrap.pid)
    times = sorted(cut.values())
    print(f"{n} bodies stalled: {len(cut)} closed by wrap within 120 s", end="")
    if times: print(f", first at {times[0]:.1f} s, last at {times[-1]:.1f} s", end="")
    print(f"; answers {sorted(set(status.values()))} ({len(status)}); still open: {n - len(cut)}")
    print(f"RSS MiB: {base} before, {peak} at most, {after} after")
    for s in socks: s.close()
    for pause, since in ((2, 2), (28, 30)):
        time.sleep(pause); print(f"RSS MiB {since} s after the client closed them: {rss(wrap.pid)}")
elif mode == "r07":
    blind = 0
    for run in range(n):
        hold_lists.clear()
        wrap, front_p, admin_p = start_wrap()
        sid = initialize(front_p)
        listed = threading.Thread(target=post, args=(front_p, {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}, sid))
        listed.start(); time.sleep(0.2)
        def flood(k):
            for i in range(k, 1100, 8): post(front_p, {"jsonrpc": "2.0", "id": i, "method": "ping"}, f"made-up-{i}")
        floods = [threading.Thread(target=flood, args=(k,)) for k in range(8)]
        for t in floods: t.start()
        for t in floods: t.join()
        hold_lists.set(); listed.join()
        seen = None
        for _ in range(50):
            try: urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/tools/check"); seen = True; break
            except urllib.error.HTTPError: time.sleep(0.1)
        blind += not seen
        print(f"run {run + 1}: the live check {'has the catalog' if seen else 'is blind'}")
        wrap.terminate(); wrap.wait()
    print(f"blind in {blind} of {n} runs")
    sys.exit(0)
wrap.terminate(); wrap.wait()
