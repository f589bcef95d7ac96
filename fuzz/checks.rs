//! What each fuzz target asserts, shared by the fuzz targets (`fuzz/fuzz_targets/`) and by
//! `cargo test`, which replays every input in `fuzz/regressions/<target>/` (inputs that once
//! failed, kept) through the same checks: a bug the fuzzer found stays found.

use std::path::Path;

use driftwatch::audit::audit;
use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::finding::Kind;
use driftwatch::request::RequestView;
use driftwatch::spec::{LoadOptions, RefRoot, Spec};
use driftwatch::traffic::{Format, Item, Stream};
use serde_json::Value;

/// Findings listed per request in the Channels contract the targets use.
pub const MAX_FINDINGS: usize = 20;

/// The Channels contract, with a small findings bound so that the bound is reached.
pub fn channels(root: &Path) -> Contract {
    let spec = Spec::load(&root.join("examples/channels.openapi.yaml")).unwrap();
    let options = ContractOptions {
        max_findings: MAX_FINDINGS,
        ..ContractOptions::default()
    };
    Contract::compile(&spec, &options).unwrap()
}

/// GitHub's REST spec: 1,100 operations and every parameter style it uses, with the default
/// findings bound (100, as the sidecar and `check` set it).
pub fn github(root: &Path) -> Contract {
    let path = root.join("../shared/specs/github/api.github.com.json.gz");
    let spec = Spec::load(&path).unwrap();
    Contract::compile(&spec, &ContractOptions::default()).unwrap()
}

/// Any bytes as a spec fetched from a URL (JSON when they start with `{`, else YAML): loading
/// and compiling never panic, read no file, and what loads is self-contained: every `$ref` of
/// the bundled document is local and resolves.
pub fn spec_load(data: &[u8]) {
    let options = LoadOptions {
        max_bytes: 1 << 20,
        refs: RefRoot::Refused,
        overlays: Vec::new(),
    };
    let name = if data.first() == Some(&b'{') {
        "fuzz.json"
    } else {
        "fuzz.yaml"
    };
    let Ok(spec) = Spec::parse_with(Path::new(name), data, &options) else {
        return;
    };
    every_ref_resolves(&spec.doc, &spec.doc, false);
    let _ = Contract::compile(&spec, &ContractOptions::default());
}

/// Any request against `contract` (Channels): the audit never panics, is deterministic, and
/// keeps its bounds: `MAX_FINDINGS`, then one finding that says the rest were left out; a
/// finding's peer-chosen text cut to 256 bytes, its message to 1 KiB. Input: a method byte,
/// the target up to `\n`, header lines up to an empty line, then the body.
pub fn request_audit(contract: &Contract, data: &[u8]) {
    const METHODS: [&str; 8] = [
        "GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS", "get",
    ];
    let Some((&method, rest)) = data.split_first() else {
        return;
    };
    let method = METHODS[method as usize % METHODS.len()];
    // The audit's own parse gives what serde_json gives, value and error alike, on the body's
    // raw bytes (UTF-8 or not). (Member order differs only where a name repeats.)
    let raw_body = rest
        .windows(2)
        .position(|w| w == b"\n\n")
        .map_or(rest, |i| &rest[i + 2..]);
    let ours = driftwatch::json::parse(raw_body)
        .map(|doc| doc.root().to_value())
        .map_err(|e| e.to_string());
    let theirs = serde_json::from_slice::<Value>(raw_body).map_err(|e| e.to_string());
    assert_eq!(ours, theirs, "json::parse against serde_json");
    let text = String::from_utf8_lossy(rest);
    let (target, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let (head, body) = rest.split_once("\n\n").unwrap_or((rest, ""));
    let headers: Vec<(String, String)> = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = (!body.is_empty()).then_some(body.as_bytes());
    let request = RequestView::new(method, target, &headers, body);
    let first = audit(contract, &request);
    let again = audit(contract, &request);
    assert_eq!(first.findings, again.findings, "deterministic");
    assert!(first.findings.len() <= MAX_FINDINGS + 1);
    if first.truncated {
        let last = first.findings.last().expect("a truncated audit says so");
        assert_eq!(last.kind, Kind::Unaudited);
        assert_eq!(last.observed.as_deref(), Some("findings left out"));
    }
    for f in &first.findings {
        assert!(f.field.len() <= 256, "field of {} bytes", f.field.len());
        let observed = f.observed.as_ref().map_or(0, |o| o.len());
        assert!(observed <= 256, "observed of {observed} bytes");
        assert!(
            f.message.len() <= 1024,
            "message of {} bytes",
            f.message.len()
        );
    }
}

/// Any request target against `contract` (GitHub): routing and query and path parsing never
/// panic, a fragment changes nothing, an absolute URL audits like its path, and the audit is
/// deterministic and bounded.
pub fn query_path(contract: &Contract, data: &[u8]) {
    let Some((&method, target)) = data.split_first() else {
        return;
    };
    let method = ["GET", "POST", "PUT", "PATCH", "DELETE"][method as usize % 5];
    let Ok(target) = std::str::from_utf8(target) else {
        return;
    };
    if target.contains('#') || target.contains("://") {
        return;
    }
    let headers: Vec<(String, String)> = Vec::new();
    let audited =
        |target: &str| audit(contract, &RequestView::new(method, target, &headers, None)).findings;
    let plain = audited(target);
    assert_eq!(plain, audited(target), "deterministic");
    assert!(plain.len() <= 101);
    let fragment = format!("{target}#frag");
    assert_eq!(plain, audited(&fragment), "a fragment changes nothing");
    if target.starts_with('/') {
        let absolute = format!("https://api.github.com{target}");
        assert_eq!(
            plain,
            audited(&absolute),
            "an absolute URL audits like its path"
        );
    }
}

/// Any bytes as recorded traffic (HAR or JSON Lines): reading never panics, every non-blank
/// JSON Lines line is an exchange or a problem with its own line number (nothing is lost
/// silently), and every exchange audits against `contract` without panicking.
pub fn traffic(contract: &Contract, data: &[u8]) {
    let source = Box::new(std::io::Cursor::new(data.to_vec()));
    let Ok(stream) = Stream::from_reader(source, None) else {
        return;
    };
    let format = stream.format;
    let (mut exchanges, mut problems) = (Vec::new(), Vec::new());
    for item in stream.flatten() {
        match item {
            Item::Exchange(e) => exchanges.push(e),
            Item::Problem(p) => problems.push(p),
        }
    }
    if format == Format::Jsonl {
        let lines = data
            .split(|b| *b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
            .count();
        assert_eq!(exchanges.len() + problems.len(), lines);
        let mut indices: Vec<usize> = exchanges.iter().map(|e| e.index).collect();
        indices.extend(problems.iter().map(|p| p.index));
        indices.sort_unstable();
        indices.dedup();
        assert_eq!(indices.len(), lines, "one line, one index");
    }
    for e in &exchanges {
        let request = RequestView::new(&e.method, &e.url, &e.headers, e.body.as_deref());
        let _ = audit(contract, &request);
    }
}

/// Maps from names to objects in OpenAPI and JSON Schema: inside one, a key is a name, so a
/// media type or property called `$ref` is not a reference (OpenAPI 3.1, 4.8 and JSON Schema).
const NAME_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "schemas",
    "paths",
    "responses",
    "headers",
    "content",
    "parameters",
    "requestBodies",
    "examples",
    "encoding",
    "callbacks",
    "pathItems",
    "webhooks",
    "links",
    "securitySchemes",
    "variables",
];

/// Every `$ref` outside literal values and name maps is local and resolves (`Spec::doc`'s
/// promise).
fn every_ref_resolves(doc: &Value, at: &Value, in_names: bool) {
    match at {
        Value::Object(map) => {
            if !in_names && let Some(Value::String(r)) = map.get("$ref") {
                let pointer = r
                    .strip_prefix('#')
                    .unwrap_or_else(|| panic!("not local: {r}"));
                let decoded = percent_decode(pointer);
                assert!(doc.pointer(&decoded).is_some(), "dangling: {r}");
            }
            for (key, v) in map {
                let literal = matches!(key.as_str(), "example" | "default" | "const" | "enum")
                    || key.starts_with("x-");
                if in_names || !literal {
                    let names = !in_names && NAME_MAPS.contains(&key.as_str()) && v.is_object();
                    every_ref_resolves(doc, v, names);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| every_ref_resolves(doc, v, false)),
        _ => {}
    }
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A tool call against GitHub's contract (the first two bytes pick the operation; the rest is
/// the arguments, as JSON when it parses as an object, else as `name=value` lines): the
/// arguments make only a request the spec describes. Deterministic; the target is the
/// template's own segments with each path value in exactly one segment that is neither empty,
/// `.` nor `..` (so no server reads another path) and decodes back to the value; no header is
/// one `Reserved` refuses, and each is a valid header value; a body is JSON.
pub fn mcp_request(contract: &Contract, data: &[u8]) {
    use driftwatch::mcp::{Reserved, request};
    let ops = contract.operations();
    if data.len() < 2 || ops.is_empty() {
        return;
    }
    let op = &ops[usize::from(u16::from_le_bytes([data[0], data[1]])) % ops.len()];
    let rest = &data[2..];
    let args = match serde_json::from_slice::<Value>(rest) {
        Ok(Value::Object(map)) => map,
        _ => String::from_utf8_lossy(rest)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| {
                let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into()));
                (k.to_string(), value)
            })
            .collect(),
    };
    let reserved = Reserved::new(contract.secrets.headers.iter().map(String::as_str));
    let made = request(op, "/base", &args, &reserved);
    assert_eq!(
        made,
        request(op, "/base", &args, &reserved),
        "deterministic"
    );
    let Ok(call) = made else {
        return;
    };
    assert_eq!(call.method, op.method);
    let path = call.target.split('?').next().unwrap();
    let sent: Vec<&str> = path.split('/').collect();
    let full = format!("/base{}", op.template);
    let template: Vec<&str> = full.split('/').collect();
    assert_eq!(
        sent.len(),
        template.len(),
        "{} for {}",
        call.target,
        op.template
    );
    for (segment, shape) in sent.iter().zip(&template) {
        let Some(name) = shape.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            assert_eq!(segment, shape, "a literal segment stays: {}", call.target);
            continue;
        };
        let decoded = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .unwrap();
        assert!(
            !matches!(&*decoded, "" | "." | ".."),
            "{name}: {:?} in {}",
            decoded,
            call.target
        );
        assert!(!segment.contains(['?', '#']), "{segment}");
    }
    for (name, value) in &call.headers {
        assert!(reserved.why(name).is_none(), "{name} went out");
        assert!(
            http::HeaderValue::from_str(value).is_ok(),
            "{name}: {value:?}"
        );
    }
    if let Some((_, body)) = &call.body {
        serde_json::from_slice::<Value>(body).expect("a JSON body");
    }
}

/// Bytes read back from the memory store, as a snapshot and as a pending clear: decoding
/// never panics; what decodes encodes to bytes that decode to the same; and a snapshot that
/// decodes, offered to the memory and compared with a replace write of the Channels contract
/// that omits every field, makes findings (with their times) without a panic.
pub fn store_entry(contract: &Contract, data: &[u8]) {
    use driftwatch::memory::{HashKey, Key, Memory, Pending, Snapshot};
    if let Some(pending) = Pending::decode(data) {
        let again = Pending::decode(&pending.encode()).expect("a pending clear encodes");
        assert_eq!(again.encode(), pending.encode());
        for (_, _, evidence) in &pending.fields {
            let _ = humantime::format_rfc3339_millis(evidence.read_at).to_string();
        }
    }
    let Some(snapshot) = Snapshot::decode(data) else {
        return;
    };
    let again = Snapshot::decode(&snapshot.encode()).expect("a snapshot encodes");
    assert_eq!(again.encode(), snapshot.encode());
    let op = contract.operation("updateChannel").unwrap();
    let memory = Memory::new(4, std::time::Duration::from_secs(60), HashKey::random());
    let key = Key {
        path: "getChannel:7".into(),
        scope: 0,
    };
    memory.offer(key.clone(), snapshot);
    let body = br#"{}"#;
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let view = RequestView::new("PUT", "/api/v1/channels/7", &headers, Some(body));
    let mut findings = audit(contract, &view).findings;
    let tracker = driftwatch::silent::Tracker {
        memory: &memory,
        field_maps: &Default::default(),
        api: "",
        tool: None,
    };
    let _ = tracker.before_write(op, &key, std::time::SystemTime::now(), &mut findings);
    let _ = serde_json::to_string(&findings).unwrap();
}

/// The MCP relay's reading of calls, ids and answers in any order, across sessions (issue
/// 49): `data` is a script, two bytes a step (what, and which). Beside `Calls` runs a model
/// of what is in flight (a reused id holds every call begun under it, an answer or a
/// cancellation ends them all, a session's end ends its calls, a call past the bound of
/// 1,024 is not tracked and makes every later request ambiguous). Asserted at every step:
/// the count in flight is the model's; nothing in flight attributes nothing; one call in
/// flight is named; past the bound nothing is named; and a tool named is a tool in flight, by
/// any attribution (never a call already answered). A request tied to one call is refused
/// every other step: that call's answer, and no other, comes back rewritten, marked isError.
pub fn mcp_relay(data: &[u8]) {
    use driftwatch::mcp::calls::{By, Calls, RequestValues};
    use driftwatch::mcp::message::Limits;
    use driftwatch::mcp::relay::Session;
    use std::collections::BTreeMap;

    const TOOLS: [&str; 4] = ["get_channel", "update_channel", "list_items", "decoy"];
    let limits = Limits {
        depth: 64,
        values: 10_000,
        bytes: 4096,
    };
    let calls = Calls::default();
    let mut sessions: Vec<Session> = (1..=3).map(|id| Session::new(id, limits, true)).collect();
    let mut model: BTreeMap<(u64, String), Vec<&str>> = BTreeMap::new();
    let mut refused: std::collections::BTreeSet<(u64, String)> = Default::default();
    let mut saturated = false;
    for step in data.chunks_exact(2) {
        let (what, which) = (step[0], step[1]);
        let session = &mut sessions[usize::from(what >> 6) % 3];
        let sid = session.id;
        let id = match which & 0x8 {
            0 => serde_json::json!(which % 8),
            _ => serde_json::json!(format!("r{}", which % 8)),
        };
        match what % 6 {
            0 | 1 => {
                let tool = TOOLS[usize::from(which >> 4) % TOOLS.len()];
                let message = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": {"channel": which % 3, "name": format!("n{}", which % 5)}}});
                session.from_client(&calls, message.to_string().as_bytes());
                match model.values().map(Vec::len).sum::<usize>() >= 1024 {
                    true => saturated = true,
                    false => model.entry((sid, id.to_string())).or_default().push(tool),
                }
            }
            2 => {
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}});
                let answered = session.from_server(&calls, answer.to_string().as_bytes());
                let key = (sid, id.to_string());
                let was_refused = refused.remove(&key) && model.remove(&key).is_some();
                model.remove(&key);
                match answered.rewritten {
                    Some(out) => {
                        assert!(was_refused, "only a refused call's answer is rewritten");
                        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
                        assert_eq!(v["result"]["isError"], true);
                    }
                    None => assert!(!was_refused, "a refused call's answer says so"),
                }
            }
            3 => {
                let cancel = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
                session.from_client(&calls, cancel.to_string().as_bytes());
                model.remove(&(sid, id.to_string()));
                refused.remove(&(sid, id.to_string()));
            }
            4 => {
                calls.end_session(sid);
                model.retain(|(s, _), _| *s != sid);
                refused.retain(|(s, _)| *s != sid);
            }
            _ => {
                // An answer past the bound: passed on unread, it ends nothing.
                let big = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":"{}"}}"#,
                    "x".repeat(5000)
                );
                session.from_server(&calls, big.as_bytes());
            }
        }
        let held: usize = model.values().map(Vec::len).sum();
        assert_eq!(calls.in_flight(), held, "in flight, against the model");
        let target = format!("/channels/{}?name=n{}", which % 3, which % 5);
        let got = calls.attribute(|| RequestValues::of(&target, Some("/channels/{id}"), None));
        let tools: Vec<&str> = model.values().flatten().copied().collect();
        match (tools.as_slice(), &got) {
            (_, Some(a)) if saturated => assert_eq!(a.by, By::Ambiguous, "past the bound"),
            ([], None) => {}
            ([only], Some(a)) => assert_eq!((a.tool.as_deref(), a.by), (Some(*only), By::OnlyCall)),
            (_, Some(a)) => {
                if let Some(tool) = a.known() {
                    assert!(tools.contains(&tool), "{tool} named, in flight: {tools:?}");
                }
            }
            (_, None) => panic!("calls in flight ({tools:?}) and no attribution"),
        }
        if let Some(key) = got.and_then(|a| a.call).filter(|_| which & 1 == 1) {
            assert!(
                model.contains_key(&key),
                "a call tied to a request is in flight"
            );
            calls.refused(&key, "driftwatch refused it");
            refused.insert(key);
        }
    }
}
