# Issue 49 defect 2, measured (docs/reliability.md): 20 tool calls with 4 MB names through wrap's MCP front, each
# making one API request through wrap's proxy; then the size of /metrics and /tools/map and
# wrap's RSS. Usage: python3 scripts/hostile-labels.py DRIFTWATCH SPEC
import json, os, socket, subprocess, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

dw, spec = sys.argv[1], sys.argv[2]
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
api_p, mcp_p, proxy_p, front_p, admin_p = (free() for _ in range(5))

class Api(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"id":7,"name":"x"}'
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass

class Mcp(BaseHTTPRequestHandler):
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if msg.get("method") == "tools/call":
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_p}/api/v1/channels/7").read()
        body = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {"content": []}}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass

for cls, port in ((Api, api_p), (Mcp, mcp_p)):
    threading.Thread(target=ThreadingHTTPServer(("127.0.0.1", port), cls).serve_forever, daemon=True).start()
wrap = subprocess.Popen([dw, "wrap", "--spec", spec, "--upstream", f"http://127.0.0.1:{api_p}",
    "--listen", f"127.0.0.1:{proxy_p}", "--admin-listen", f"127.0.0.1:{admin_p}",
    "--mcp-upstream", f"http://127.0.0.1:{mcp_p}/mcp", "--mcp-listen", f"127.0.0.1:{front_p}"],
    stderr=subprocess.DEVNULL)
for _ in range(100):
    try: urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/readyz"); break
    except Exception: time.sleep(0.1)
def rss():
    for l in open(f"/proc/{wrap.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
print("rss before MiB", rss())
for i in range(20):
    name = f"{i:02d}" + "t" * 4_000_000
    call = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {}}}).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{front_p}/mcp", data=call, headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    urllib.request.urlopen(r).read()
metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/metrics").read()
tmap = urllib.request.urlopen(f"http://127.0.0.1:{admin_p}/tools/map").read()
print("metrics bytes", len(metrics), "tools/map bytes", len(tmap), "rss after MiB", rss())
print([l for l in metrics.decode().splitlines() if l.startswith("driftwatch_tool_requests_total")][:3])
wrap.terminate(); wrap.wait()
