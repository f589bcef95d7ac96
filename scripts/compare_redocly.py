#!/usr/bin/env python3
"""Helper of scripts/compare-redocly: the traffic both tools read, and the score.

  compare_redocly.py gen OUT [--per-spec N] [--seed S]
      writes OUT/channels.har and OUT/petstore.har (HAR 1.2, read by both driftwatch and
      `redocly drift`) and OUT/truth.json: for every entry of each file, `conformant` or the
      kind of drift injected into it.
  compare_redocly.py score OUT
      reads OUT/dw-SPEC.jsonl (driftwatch check --format jsonl), OUT/redocly-SPEC.csv (redocly
      drift --format csv) and OUT/time-TOOL-SPEC.txt (/usr/bin/time -v), prints the table.

Two real specs, because no single one the repo carries has both a rich request surface and
`security`: examples/channels.openapi.yaml (query parameters, a 30-property replace body; no
security) and ../shared/specs/readme/petstore-3.0.json (npm @readme/oas-examples; an apiKey in
a header and oauth2, whose token travels as `Authorization: Bearer`; required query parameters).
Every exchange carries a response that conforms to its operation (or none, where the spec
declares no response a server would send to it), so that a report on a conformant exchange is
a false alarm.
"""

import csv
import json
import random
import re
import sys

CHANNELS = "https://channels.example.com"
PETSTORE = "https://petstore.swagger.io/v2"

# Kinds of drift, in the order the table prints them.
KINDS = [
    "renamed_query_param",
    "wrong_type",
    "undeclared_body_field",
    "missing_required_param",
    "no_credential",
    "apikey_in_query",
    "basic_for_bearer",
]


class Har:
    def __init__(self):
        self.entries = []
        self.truth = []

    def add(self, kind, what, method, url, headers=None, body=None, mime=None, status=None,
            response=None, response_mime="application/json"):
        headers = dict(headers or {})
        req_headers = [{"name": k, "value": v} for k, v in headers.items()]
        query = []
        if "?" in url:
            for pair in url.split("?", 1)[1].split("&"):
                k, _, v = pair.partition("=")
                query.append({"name": k, "value": v})
        req = {
            "method": method,
            "url": url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": req_headers,
            "queryString": query,
            "headersSize": -1,
            "bodySize": 0,
        }
        if body is not None:
            text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
            mime = mime or "application/json"
            req["headers"].append({"name": "Content-Type", "value": mime})
            req["postData"] = {"mimeType": mime, "text": text}
            req["bodySize"] = len(text.encode())
        if status is None:
            # No response recorded (a HAR's aborted request): only the request is audited.
            resp = {"status": 0, "statusText": "", "httpVersion": "", "cookies": [],
                    "headers": [], "content": {"size": 0, "mimeType": "x-unknown"},
                    "redirectURL": "", "headersSize": -1, "bodySize": -1}
        else:
            text = "" if response is None else json.dumps(response, separators=(",", ":"))
            resp = {"status": status, "statusText": "OK" if status < 300 else "",
                    "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
                    "content": {"size": len(text.encode()), "mimeType": response_mime if text else "x-unknown"},
                    "redirectURL": "", "headersSize": -1, "bodySize": len(text.encode())}
            if text:
                resp["headers"].append({"name": "Content-Type", "value": response_mime})
                resp["content"]["text"] = text
        n = len(self.entries)
        self.entries.append({
            "startedDateTime": "2026-12-08T10:%02d:%02d.%03dZ" % (n // 60000 % 60, n // 1000 % 60, n % 1000),
            "time": 1,
            "request": req,
            "response": resp,
            "cache": {},
            "timings": {"send": 0, "wait": 1, "receive": 0},
        })
        self.truth.append({"kind": kind, "what": what})

    def write(self, path):
        with open(path, "w") as f:
            json.dump({"log": {"version": "1.2", "creator": {"name": "compare-redocly", "version": "1"},
                               "entries": self.entries}}, f)


# ---------------------------------------------------------------- channels
WORDS = ["Retro", "News", "Kids", "Movies", "Sports", "Music", "Docs", "Classics", "Late", "Weather"]


def channel_update(r):
    """A ChannelUpdate with every one of its 30 properties (a replace that clears nothing)."""
    return {
        "number": str(r.randint(1, 999)),
        "name": "%s TV %d" % (r.choice(WORDS), r.randint(1, 99)),
        "group": r.choice(WORDS),
        "categories": r.choice([None, "news,weather"]),
        "ffmpegProfileId": r.randint(1, 40),
        "streamingMode": r.choice(["TransportStream", "TransportStreamHybrid", "HttpLiveStreamingDirect"]),
        "watermarkId": r.choice([None, r.randint(1, 9)]),
        "fallbackFillerId": r.choice([None, r.randint(1, 9)]),
        "preferredAudioLanguageCode": r.choice([None, "eng", "deu"]),
        "preferredAudioTitle": None,
        "preferredSubtitleLanguageCode": r.choice([None, "eng"]),
        "subtitleMode": r.choice(["None", "Forced", "Default", "Any"]),
        "musicVideoCreditsMode": "None",
        "musicVideoCreditsTemplate": None,
        "songVideoMode": r.choice(["Default", "WithProgress"]),
        "transcodeMode": r.choice(["OnDemand", "Always"]),
        "idleBehavior": r.choice(["StopOnDisconnect", "KeepRunning"]),
        "isEnabled": r.choice([True, False]),
        "showInEpg": r.choice([True, False]),
        "playoutSource": "Generated",
        "playoutMode": r.choice(["Continuous", "OnDemand"]),
        "mirrorSourceChannelId": None,
        "playoutOffset": None,
        "slugSeconds": r.choice([None, 2.5]),
        "streamSelectorMode": "Default",
        "streamSelector": None,
        "graphicsElementIds": r.sample(range(1, 20), r.randint(0, 3)),
        "sortNumber": r.randint(1, 999),
        "logo": None,
        "epgTimeShiftMinutes": r.randint(-60, 60),
    }


def schedule(r):
    return {
        "name": "%s nights" % r.choice(WORDS),
        "keepMultiPartEpisodesTogether": r.choice([True, False]),
        "treatCollectionsAsShows": r.choice([True, False]),
        "shuffleScheduleItems": r.choice([True, False]),
        "randomStartPoint": r.choice([True, False]),
        "fixedStartTimeBehavior": r.choice(["Strict", "Flexible"]),
        "padToNearestMinute": r.choice([None, 15, 30]),
    }


def channels_traffic(har, r, conformant, drifted):
    def playouts_page(r):
        return {"pageSize": 2, "items": [{"id": r.randint(1, 99), "channelId": r.randint(1, 99), "name": "p"}]}

    def channel(r, id_):
        c = channel_update(r)
        c["id"] = id_
        c["uniqueId"] = "3f2b8c1e-6d1a-4c33-9a57-%012d" % id_
        return c

    def ok(r):
        i = r.randint(1, 500)
        pick = r.randrange(7)
        if pick == 0:
            q = "pageNum=%d&pageSize=%d" % (r.randint(0, 9), r.randint(1, 500))
            if r.random() < 0.5:
                q = "query=%s&" % r.choice(WORDS).lower() + q
            if r.random() < 0.5:
                q += "&sort=" + r.choice(["name", "number", "start"])
            if r.random() < 0.3:
                q += "&channelIds=%d,%d" % (r.randint(1, 9), r.randint(10, 99))
            har.add("conformant", "listPlayouts", "GET", "%s/api/v1/playouts?%s" % (CHANNELS, q),
                    status=200, response=playouts_page(r))
        elif pick == 1:
            q = "showFiller=%s" % r.choice(["true", "false"])
            if r.random() < 0.4:
                q += "&start=2026-12-0%dT20:00:00Z" % r.randint(1, 9)
            har.add("conformant", "getPlayoutItems", "GET", "%s/api/v1/playouts/%d/items?%s" % (CHANNELS, i, q),
                    status=200, response={"items": [{"title": "t"}]})
        elif pick == 2:
            har.add("conformant", "getChannel", "GET", "%s/api/v1/channels/%d" % (CHANNELS, i),
                    status=200, response=channel(r, i))
        elif pick == 3:
            har.add("conformant", "updateChannel", "PUT", "%s/api/v1/channels/%d" % (CHANNELS, i),
                    body=channel_update(r), status=204)
        elif pick == 4:
            har.add("conformant", "updateSchedule", "PUT", "%s/api/v1/schedules/%d" % (CHANNELS, i),
                    body=schedule(r), status=200, response=dict(schedule(r), id=i))
        elif pick == 5:
            har.add("conformant", "getSchedule", "GET", "%s/api/v1/schedules/%d" % (CHANNELS, i),
                    status=200, response=dict(schedule(r), id=i))
        else:
            har.add("conformant", "createChannel", "POST", "%s/api/v1/channels" % CHANNELS,
                    body=channel_update(r), status=201, response=channel(r, i))

    def drift(r, kind):
        i = r.randint(1, 500)
        if kind == "renamed_query_param":
            old, new = r.choice([("page_size", "pageSize"), ("page_num", "pageNum"),
                                 ("pagesize", "pageSize"), ("q", "query"), ("order", "sort")])
            v = {"page_size": "25", "page_num": "1", "pagesize": "10", "q": "news", "order": "name"}[old]
            if r.random() < 0.5:
                har.add(kind, "listPlayouts ?%s (spec: %s)" % (old, new), "GET",
                        "%s/api/v1/playouts?%s=%s&pageNum=0" % (CHANNELS, old, v) if new != "pageNum"
                        else "%s/api/v1/playouts?%s=%s" % (CHANNELS, old, v),
                        status=200, response=playouts_page(r))
            else:
                har.add(kind, "getPlayoutItems ?show_filler (spec: showFiller)", "GET",
                        "%s/api/v1/playouts/%d/items?show_filler=true" % (CHANNELS, i),
                        status=200, response={"items": []})
        elif kind == "wrong_type":
            pick = r.randrange(5)
            if pick == 0:
                har.add(kind, "listPlayouts ?pageSize=ten", "GET",
                        "%s/api/v1/playouts?pageSize=%s" % (CHANNELS, r.choice(["ten", "25x", "all"])),
                        status=200, response=playouts_page(r))
            elif pick == 1:
                har.add(kind, "getPlayoutItems ?showFiller=yes", "GET",
                        "%s/api/v1/playouts/%d/items?showFiller=%s" % (CHANNELS, i, r.choice(["yes", "1", "on"])),
                        status=200, response={"items": []})
            elif pick == 2:
                b = channel_update(r)
                b["ffmpegProfileId"] = str(b["ffmpegProfileId"])
                har.add(kind, "updateChannel body ffmpegProfileId as string", "PUT",
                        "%s/api/v1/channels/%d" % (CHANNELS, i), body=b, status=204)
            elif pick == 3:
                b = schedule(r)
                b["padToNearestMinute"] = str(r.choice([15, 30]))
                har.add(kind, "updateSchedule body padToNearestMinute as string", "PUT",
                        "%s/api/v1/schedules/%d" % (CHANNELS, i), body=b, status=200, response=dict(schedule(r), id=i))
            else:
                b = channel_update(r)
                b["isEnabled"] = r.choice(["true", "false"])
                har.add(kind, "createChannel body isEnabled as string", "POST",
                        "%s/api/v1/channels" % CHANNELS, body=b, status=201, response=channel(r, i))
        elif kind == "undeclared_body_field":
            if r.random() < 0.5:
                b = channel_update(r)
                b[r.choice(["channelColour", "epgTimeShift", "graphicsElements"])] = r.choice([[1, 2], 30, "blue"])
                har.add(kind, "updateChannel body with a field the spec lacks", "PUT",
                        "%s/api/v1/channels/%d" % (CHANNELS, i), body=b, status=204)
            else:
                b = schedule(r)
                b[r.choice(["timezone", "padToNearestMinutes", "shuffle"])] = r.choice(["UTC", 30, True])
                har.add(kind, "updateSchedule body with a field the spec lacks", "PUT",
                        "%s/api/v1/schedules/%d" % (CHANNELS, i), body=b, status=200, response=dict(schedule(r), id=i))
        else:
            raise ValueError(kind)

    return ok, drift


# ---------------------------------------------------------------- petstore
def pet(r, with_id):
    p = {
        "category": {"id": r.randint(1, 9), "name": r.choice(["dogs", "cats", "birds"])},
        "name": r.choice(["doggie", "rex", "tom", "tweety"]),
        "photoUrls": ["https://example.com/photo%d.png" % r.randint(1, 99)],
        "tags": [{"id": r.randint(1, 9), "name": r.choice(["new", "old"])}],
        "status": r.choice(["available", "pending", "sold"]),
    }
    if with_id:
        p["id"] = r.randint(1, 10**6)
    return p


def order(r, with_id=True):
    o = {"petId": r.randint(1, 10**6), "quantity": r.randint(1, 5),
         "shipDate": "2026-12-0%dT10:00:00Z" % r.randint(1, 9),
         "status": r.choice(["placed", "approved", "delivered"]), "complete": r.choice([True, False])}
    if with_id:
        o["id"] = r.randint(1, 10**6)
    return o


def user(r):
    n = r.choice(["ann", "bob", "cyd", "dee"]) + str(r.randint(1, 99))
    return {"id": r.randint(1, 10**6), "username": n, "firstName": "A", "lastName": "B",
            "email": n + "@example.com", "password": "pw%d" % r.randint(1, 99),
            "phone": "555-01%02d" % r.randint(0, 99), "userStatus": r.randint(0, 3)}


def petstore_traffic(har, r, conformant, drifted):
    def key():
        return {"api_key": "k-%08x" % r.getrandbits(32)}

    def bearer():
        return {"Authorization": "Bearer t-%016x" % r.getrandbits(64)}

    def basic():
        return {"Authorization": "Basic dXNlcjpwYXNz"}

    # Operations that take the oauth2 `petstore_auth` (a Bearer token), each as a function
    # (headers) -> add; responses only where the spec declares one a server sends on success.
    def oauth_ops(r):
        i = r.randint(1, 10**6)
        return [
            ("addPet", lambda kind, what, h: har.add(kind, what, "POST", PETSTORE + "/pet", headers=h, body=pet(r, False))),
            ("updatePet", lambda kind, what, h: har.add(kind, what, "PUT", PETSTORE + "/pet", headers=h, body=pet(r, False))),
            ("findPetsByStatus", lambda kind, what, h: har.add(
                kind, what, "GET", PETSTORE + "/pet/findByStatus?status=" + r.choice(["available", "pending", "sold"]),
                headers=h, status=200, response=[pet(r, True)])),
            ("deletePet", lambda kind, what, h: har.add(kind, what, "DELETE", PETSTORE + "/pet/%d" % i, headers=h)),
            ("updatePetWithForm", lambda kind, what, h: har.add(
                kind, what, "POST", PETSTORE + "/pet/%d" % i, headers=h,
                body="name=%s&status=sold" % r.choice(["rex", "tom"]), mime="application/x-www-form-urlencoded")),
        ]

    def key_ops(r):
        i = r.randint(1, 10**6)
        return [
            ("getPetById", lambda kind, what, h, q="": har.add(
                kind, what, "GET", PETSTORE + "/pet/%d%s" % (i, q), headers=h, status=200, response=pet(r, True))),
            ("getInventory", lambda kind, what, h, q="": har.add(
                kind, what, "GET", PETSTORE + "/store/inventory" + q, headers=h, status=200,
                response={"available": r.randint(0, 9), "sold": r.randint(0, 9)})),
        ]

    def ok(r):
        pick = r.randrange(9)
        if pick <= 1:
            name, add = r.choice(oauth_ops(r))
            add("conformant", name, bearer())
        elif pick <= 3:
            name, add = r.choice(key_ops(r))
            add("conformant", name, key())
        elif pick == 4:
            har.add("conformant", "loginUser", "GET", PETSTORE + "/user/login?username=ann&password=pw%d" % r.randint(1, 99),
                    status=200, response="token-%d" % r.randint(1, 999))
        elif pick == 5:
            har.add("conformant", "getOrderById", "GET", PETSTORE + "/store/order/%d" % r.randint(1, 10),
                    status=200, response=order(r))
        elif pick == 6:
            har.add("conformant", "placeOrder", "POST", PETSTORE + "/store/order", body=order(r),
                    status=200, response=order(r))
        elif pick == 7:
            u = user(r)
            har.add("conformant", "getUserByName", "GET", PETSTORE + "/user/" + u["username"],
                    status=200, response=u)
        else:
            har.add("conformant", "createUser", "POST", PETSTORE + "/user", body=user(r))

    def drift(r, kind):
        # updatePetWithForm's form body is one driftwatch does not audit (an info `unaudited` on
        # every such request): it is in the conformant traffic, not among the drifted.
        def oauth_drift_ops(r):
            return [op for op in oauth_ops(r) if op[0] != "updatePetWithForm"]

        if kind == "wrong_type":
            pick = r.randrange(3)
            if pick == 0:
                har.add(kind, "getPetById petId not an integer", "GET",
                        PETSTORE + "/pet/%s" % r.choice(["rex", "12ab", "first"]), headers=key())
            elif pick == 1:
                o = order(r)
                o["quantity"] = str(o["quantity"])
                har.add(kind, "placeOrder body quantity as string", "POST", PETSTORE + "/store/order",
                        body=o, status=200, response=order(r))
            else:
                u = user(r)
                u["userStatus"] = r.choice(["active", "1"])
                har.add(kind, "createUser body userStatus as string", "POST", PETSTORE + "/user", body=u)
        elif kind == "undeclared_body_field":
            if r.random() < 0.5:
                p = pet(r, False)
                p[r.choice(["colour", "ownerId", "photoUrl"])] = r.choice(["brown", 7, "https://example.com/p.png"])
                har.add(kind, "addPet body with a field the spec lacks", "POST", PETSTORE + "/pet",
                        headers=bearer(), body=p)
            else:
                o = order(r)
                o[r.choice(["quantityOrdered", "shippingDate", "note"])] = r.choice([2, "2026-12-01", "x"])
                har.add(kind, "placeOrder body with a field the spec lacks", "POST", PETSTORE + "/store/order",
                        body=o, status=200, response=order(r))
        elif kind == "missing_required_param":
            pick = r.randrange(3)
            if pick == 0:
                har.add(kind, "loginUser without password", "GET", PETSTORE + "/user/login?username=ann",
                        status=200, response="token")
            elif pick == 1:
                har.add(kind, "findPetsByStatus without status", "GET", PETSTORE + "/pet/findByStatus",
                        headers=bearer(), status=200, response=[])
            else:
                har.add(kind, "placeOrder without its required body", "POST", PETSTORE + "/store/order",
                        status=200, response=order(r))
        elif kind == "renamed_query_param":
            har.add(kind, "loginUser ?user_name (spec: username)", "GET",
                    PETSTORE + "/user/login?user_name=ann&password=pw1", status=200, response="token")
        elif kind == "no_credential":
            if r.random() < 0.5:
                name, add = r.choice(oauth_drift_ops(r))
                add(kind, name + " without a credential (spec: oauth2 bearer)", {})
            else:
                name, add = r.choice(key_ops(r))
                add(kind, name + " without a credential (spec: api_key header)", {})
        elif kind == "apikey_in_query":
            name, add = r.choice(key_ops(r))
            add(kind, name + " ?api_key= (spec: api_key header)", {}, "?api_key=k-%08x" % r.getrandbits(32))
        elif kind == "basic_for_bearer":
            name, add = r.choice(oauth_drift_ops(r))
            add(kind, name + " with Basic (spec: oauth2 bearer)", basic())
        else:
            raise ValueError(kind)

    return ok, drift


SPECS = {
    # spec -> (traffic builder, the drift kinds it can carry)
    "channels": (channels_traffic, ["renamed_query_param", "wrong_type", "undeclared_body_field"]),
    "petstore": (petstore_traffic, ["renamed_query_param", "wrong_type", "undeclared_body_field",
                                    "missing_required_param", "no_credential", "apikey_in_query",
                                    "basic_for_bearer"]),
}


def gen(out, per_spec, seed):
    truth = {}
    for spec, (builder, kinds) in SPECS.items():
        r = random.Random("%s-%s" % (seed, spec))
        har = Har()
        ok, drift = builder(har, r, None, None)
        # Half conformant, half drifted, interleaved; drifts spread evenly over the kinds.
        plan = ["ok"] * (per_spec // 2) + [kinds[i % len(kinds)] for i in range(per_spec - per_spec // 2)]
        r.shuffle(plan)
        for p in plan:
            ok(r) if p == "ok" else drift(r, p)
        har.write("%s/%s.har" % (out, spec))
        truth[spec] = har.truth
    with open(out + "/truth.json", "w") as f:
        json.dump(truth, f)


# ---------------------------------------------------------------- score
def read_time(path):
    t = open(path).read()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
    h, m, s = wall.groups()
    secs = int(h or 0) * 3600 + int(m) * 60 + float(s)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    return secs, rss


def reports(out, tool, spec):
    """exchange index -> list of (severity, rule) the tool reported on it."""
    got = {}
    if tool == "driftwatch":
        for line in open("%s/dw-%s.jsonl" % (out, spec)):
            line = line.strip()
            if not line:
                continue
            f = json.loads(line)
            if "exchange" not in f or f["exchange"] is None:
                continue
            sev = "error" if f["severity"] in ("error", "critical") else f["severity"]
            got.setdefault(int(f["exchange"]), []).append((sev, f["kind"]))
    else:
        # --format csv: one row a finding (--format json groups them into problems, each with
        # its first exchange only).
        with open("%s/redocly-%s.csv" % (out, spec), newline="") as f:
            for row in csv.DictReader(f):
                if row["exchange_index"] == "":
                    continue
                got.setdefault(int(row["exchange_index"]), []).append(
                    (row["severity"], "%s: %s" % (row["rule_id"], row["message"][:60])))
    return got


def score(out, tools):
    truth = json.load(open(out + "/truth.json"))
    rows = {}
    detail = {}
    for tool in tools:
        wall, rss = 0.0, 0
        st = {"found": 0, "found_err": 0, "drifts": 0, "ok": 0, "fa_err": 0, "fa_any": 0,
              "per_kind": {k: [0, 0] for k in KINDS}, "fa_rules": {}}
        for spec, entries in truth.items():
            got = reports(out, tool, spec)
            s, m = read_time("%s/time-%s-%s.txt" % (out, tool, spec))
            wall += s
            rss = max(rss, m)
            for i, e in enumerate(entries):
                g = got.get(i, [])
                if e["kind"] == "conformant":
                    st["ok"] += 1
                    if g:
                        st["fa_any"] += 1
                        for sev, rule in g:
                            key = "%s %s (%s)" % (rule, sev, e["what"])
                            st["fa_rules"][key] = st["fa_rules"].get(key, 0) + 1
                    if any(sev == "error" for sev, _ in g):
                        st["fa_err"] += 1
                else:
                    st["drifts"] += 1
                    pk = st["per_kind"][e["kind"]]
                    pk[1] += 1
                    if g:
                        st["found"] += 1
                        pk[0] += 1
                    if any(sev == "error" for sev, _ in g):
                        st["found_err"] += 1
        st["wall"], st["rss"] = wall, rss
        rows[tool] = st
        detail[tool] = st["fa_rules"]
    t0 = tools[0]
    n_ok, n_dr = rows[t0]["ok"], rows[t0]["drifts"]
    print("%d exchanges: %d conformant, %d with one injected drift" % (n_ok + n_dr, n_ok, n_dr))
    print()
    head = "| | " + " | ".join(tools) + " |"
    print(head)
    print("|---" * (len(tools) + 1) + "|")

    def row(label, f):
        print("| %s | %s |" % (label, " | ".join(f(rows[t]) for t in tools)))

    row("drifts found (any report on the request)", lambda s: "%d of %d" % (s["found"], s["drifts"]))
    row("drifts found at error level", lambda s: "%d" % s["found_err"])
    for k in KINDS:
        if rows[t0]["per_kind"][k][1]:
            row("&nbsp;&nbsp;%s" % k, lambda s, k=k: "%d of %d" % tuple(s["per_kind"][k]))
    row("false alarms at error level (conformant requests)", lambda s: "%d of %d" % (s["fa_err"], s["ok"]))
    row("false alarms, any level", lambda s: "%d of %d" % (s["fa_any"], s["ok"]))
    row("wall time, both files (s)", lambda s: "%.2f" % s["wall"])
    row("max RSS (MB)", lambda s: "%.0f" % (s["rss"] / 1024))
    if len(tools) == 2:
        a, b = rows[tools[0]], rows[tools[1]]
        print()
        print("%s / %s: wall time %.1f x, max RSS %.2f x" % (
            tools[1], tools[0], b["wall"] / a["wall"], b["rss"] / a["rss"]))
    for tool in tools:
        if detail[tool]:
            print()
            print("%s's reports on conformant requests (rule, level, operation: requests):" % tool)
            for k, v in sorted(detail[tool].items(), key=lambda kv: -kv[1]):
                print("  %5d  %s" % (v, k))


def main(argv):
    if len(argv) >= 2 and argv[0] == "gen":
        out = argv[1]
        per_spec, seed = 1000, 69
        rest = argv[2:]
        while rest:
            if rest[0] == "--per-spec":
                per_spec = int(rest[1])
            elif rest[0] == "--seed":
                seed = rest[1]
            else:
                sys.exit("unknown option " + rest[0])
            rest = rest[2:]
        gen(out, per_spec, seed)
    elif len(argv) >= 2 and argv[0] == "score":
        score(argv[1], argv[2:] or ["driftwatch", "redocly"])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
