# Sourced by the bench scripts (bench-proxy, bench-cpu, bench-parts, count-allocs): one copy of
# the static API they run against, of nginx as a plain reverse proxy, of the request mix, and
# of the two measures they share.
# Run from the project root (they cd there first).

# The 30-property full-replace PUT body, on one line, as the benches send it.
BENCH_BODY="$(tr -d '\n' < examples/channel.json)"
# The channel as stored (the body with its id), and a page of 3 playouts: what the Channels spec
# declares, so the response audit does its full work (parse, validate, walk the fields) and
# finds nothing.
BENCH_CHANNEL="{\"id\":7,${BENCH_BODY:1}"
BENCH_PAGE='{"pageSize":25,"items":[{"id":1,"channelId":7,"name":"Playout 1"},{"id":2,"channelId":7,"name":"Playout 2"},{"id":3,"channelId":7,"name":"Playout 3"}]}'
# The realistic mix: 3 GETs with query and path parameters, 1 full-replace PUT of 30 fields.
BENCH_GET1='/api/v1/playouts?query=news&pageNum=2&pageSize=25&sort=name&channelIds=1,2,3'
BENCH_GET2='/api/v1/channels/7'
BENCH_GET3='/api/v1/playouts/3/items?showFiller=true&start=2026-12-01T00%3A00%3A00Z'

# nginx_head DIR: the start of an nginx config for one worker in the foreground, its files in
# DIR, up to the opening of its http block.
nginx_head() {
  cat <<NGINX
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
NGINX
}

# static_api DIR PORT: write DIR/nginx.conf, nginx (one worker) answering the mix's requests on
# 127.0.0.1:PORT as the Channels spec declares.
static_api() {
  mkdir -p "$1"
  { nginx_head "$1"; cat; } > "$1/nginx.conf" <<NGINX
  server {
    listen 127.0.0.1:$2 reuseport backlog=4096;
    keepalive_requests 1000000;
    client_max_body_size 2m;
    default_type application/json;
    location / { return 200 '{"ok":true}'; }
    location = /api/v1/channels/7 { return 200 '$BENCH_CHANNEL'; }
    location = /api/v1/playouts { return 200 '$BENCH_PAGE'; }
    location /api/v1/playouts/ { return 200 '{"items":[]}'; }
    # Any other channel: a GET answered with its own id (a read before a write checks that the
    # read is the resource the write names), a PUT with 204 as the spec allows (an answer that
    # showed a field the write left out would teach the sidecar that the field survives
    # omission, and it would stop asking about it).
    location ~ ^/api/v1/channels/(?<channel>[0-9]+)$ {
      if (\$request_method = PUT) { return 204; }
      return 200 '{"id":\$channel,${BENCH_BODY:1}';
    }
  }
}
NGINX
}

# nginx_proxy DIR PORT UPSTREAM_PORT: write DIR/nginx.conf, nginx as a plain keepalive reverse
# proxy (no audit) in a process and worker of its own, as driftwatch is: the bare forwarder
# to compare with. /readyz answers from the proxy itself.
nginx_proxy() {
  mkdir -p "$1"
  { nginx_head "$1"; cat; } > "$1/nginx.conf" <<NGINX
  upstream static { server 127.0.0.1:$3; keepalive 64; }
  server {
    listen 127.0.0.1:$2 backlog=4096;
    keepalive_requests 1000000;
    client_max_body_size 2m;
    location / { proxy_pass http://static; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location = /readyz { return 200; }
  }
}
NGINX
}

# mix_lua DIR: write DIR/mix.lua (and DIR/body.json), the wrk script that sends the mix in turn.
mix_lua() {
  printf '%s' "$BENCH_BODY" > "$1/body.json"
  cat > "$1/mix.lua" <<LUA
-- Built in init(): wrk.format only has the Host header once the thread is set up.
local requests
init = function(args)
  local body = io.open("$1/body.json"):read("*a")
  requests = {
    wrk.format("GET", "$BENCH_GET1"),
    wrk.format("GET", "$BENCH_GET2"),
    wrk.format("GET", "$BENCH_GET3"),
    wrk.format("PUT", "/api/v1/channels/7", {["Content-Type"] = "application/json"}, body),
  }
end
local i = 0
request = function() i = i % #requests + 1; return requests[i] end
LUA
}

# median N...: the median of numbers.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# ticks PID: the CPU time (user + system, in clock ticks) process PID has spent so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# The CPU time, in ns, every thread of process $1 has run (schedstat: finer than ticks).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'; }
