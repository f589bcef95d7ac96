# Issue 49 defect 10, measured (docs/reliability.md): wrap's MCP front, a server whose tools/list holds N tools (1 MB
# of catalog), checked live against SPEC; /healthz asked every 50 ms meanwhile: its slowest
# answer, and how long until /tools/check has the report. Usage: python3 scripts/hostile-live-check.py DRIFTWATCH SPEC N
import json, socket, subprocess, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

dw, spec, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
mcp_p, front_p, admin_p = free(), free(), free()
tools = [{"name": f"get_thing_{i}", "description": "Get a thing",
          "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}, "n": {"type": "integer"}}}}
         for i in range(n)]
class Mcp(BaseHTTPRequestHandler):
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
        result = {"tools": tools} if msg.get("method") == "tools/list" else {}
        body = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": result}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
threading.Thread(target=ThreadingHTTPServer(("127.0.0.1", mcp_p), Mcp).serve_forever, daemon=True).start()
wrap = subprocess.Popen([dw, "wrap", "--spec", spec, "--upstream", "http://127.0.0.1:9",
    "--admin-listen", f"127.0.0.1:{admin_p}", "--mcp-upstream", f"http://127.0.0.1:{mcp_p}/mcp",
    "--mcp-listen", f"127.0.0.1:{front_p}"], stderr=subprocess.DEVNULL, env={"DRIFTWATCH_MCP_MAX_MESSAGE_BYTES": "8388608", "DRIFTWATCH_MCP_MAX_MESSAGE_VALUES": "1000000", "PATH": "/usr/bin:/bin"})
for _ in range(600):
    try: urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/readyz"); break
    except Exception: time.sleep(0.1)
call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
r = urllib.request.Request(f"http://127.0.0.1:{front_p}/mcp", data=call, headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
print("catalog bytes", len(urllib.request.urlopen(r).read()))
start, slowest, checked = time.time(), 0.0, None
while time.time() - start < 120:
    t = time.time()
    urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/healthz", timeout=60).read()
    slowest = max(slowest, time.time() - t)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/tools/check").read()
        checked = time.time() - start; break
    except Exception: pass
    time.sleep(0.05)
print(f"report after {checked:.1f} s; slowest /healthz {slowest*1000:.0f} ms")
wrap.terminate(); wrap.wait()
