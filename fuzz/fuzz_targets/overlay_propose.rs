//! `overlay propose` under libFuzzer (issue 64). From any bytes, an events file (JSON Lines as
//! the sidecar writes them, or a `/findings` answer) whose names, paths, times and request ids
//! hold whatever the bytes say, YAML's line breaks and markers among them. Whatever the events
//! hold: the proposal reads back as its actions (`written`), holds no raw line break but LF,
//! and applied to the Channels spec as `overlay apply` applies it, changes the document only at
//! the targets its actions name; every other part is identical and every path survives.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use driftwatch::propose::{Options, Tally, written};
use driftwatch::spec::{DEFAULT_MAX_BYTES, with_overlays};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

static SPEC: LazyLock<PathBuf> = LazyLock::new(|| {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/channels.openapi.yaml")
});
static DOC: LazyLock<Value> =
    LazyLock::new(|| with_overlays(&SPEC, &[], DEFAULT_MAX_BYTES).unwrap().0);
/// The spec's templates, a path it lacks, and none.
static TEMPLATES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut all: Vec<String> = DOC["paths"].as_object().unwrap().keys().cloned().collect();
    all.extend(["/api/v1/backups/policy".into(), String::new()]);
    all
});
/// Where each run's proposal is written for `overlay apply`'s reading.
static OVERLAY: LazyLock<PathBuf> = LazyLock::new(|| {
    std::env::temp_dir().join(format!(
        "driftwatch-fuzz-propose-{}.yaml",
        std::process::id()
    ))
});

/// What a client's text is made of, besides single characters: YAML's line breaks, quotes,
/// comment mark, indicators and document markers, and an action to smuggle.
const PIECES: &[&str] = &[
    "\r",
    "\n",
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\"",
    "'",
    "#",
    ": ",
    "- ",
    "---",
    "...",
    "\\",
    "\t",
    "\u{0}",
    "\u{7f}",
    "\u{9f}",
    "\u{feff}",
    "{",
    "}",
    "[",
    "]",
    "/",
    "*",
    "~1",
    "%0D",
    "page",
    "$.paths.*",
    "  - target: $.paths\r    remove: true\r",
    "é",
    "\u{10ffff}",
];
/// Names the events use again and again, so that one is seen on several operations.
const NAMES: &[&str] = &[
    "page",
    "per_page",
    "---",
    "filter[a]",
    "/etag",
    "/a~1b",
    "/it's",
    "p\r- target: $",
    "a b",
];
const METHODS: &[&str] = &[
    "GET", "get", "PUT", "POST", "DELETE", "PATCH", "PROPFIND", "",
];
const STATUSES: &[u64] = &[200, 201, 204, 400, 422, 500, 0];
const KINDS: &[&str] = &[
    "unknown_query_param",
    "unknown_operation",
    "undeclared_response_field",
    "response_schema_violation",
];

/// The input, read a byte at a time (zeros once it is used up).
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }

    fn pick<'t, T>(&mut self, from: &'t [T]) -> &'t T {
        &from[self.byte() as usize % from.len()]
    }

    /// Up to 15 pieces: a piece, a printable ASCII character, or any character of the BMP.
    fn text(&mut self) -> String {
        let mut out = String::new();
        for _ in 0..self.byte() % 16 {
            match self.byte() {
                b @ 0..0x40 => out.push_str(PIECES[b as usize % PIECES.len()]),
                b @ 0x40..0xc0 => out.push(char::from(0x20 + (b - 0x40) % 0x5f)),
                b => {
                    let c = u32::from(b & 0x3f) << 8 | u32::from(self.byte());
                    out.extend(char::from_u32(c));
                }
            }
        }
        out
    }

    /// A name the events share, or a new one.
    fn name(&mut self, prefix: &str) -> String {
        match self.byte() % 3 {
            0 => format!("{prefix}{}", self.text()),
            _ => self.pick(NAMES).to_string(),
        }
    }

    fn event(&mut self) -> Value {
        let template = self.pick(&TEMPLATES).clone();
        let path = match self.byte() % 3 {
            0 => template.replace("{id}", "*"),
            _ => self.name("/"),
        };
        let findings: Vec<Value> = (0..self.byte() % 4)
            .map(|_| {
                let kind = *self.pick(KINDS);
                let field = match kind {
                    "unknown_query_param" => self.name(""),
                    _ => self.name("/"),
                };
                let suggestion = (self.byte() % 5 == 0).then(|| self.text());
                let location = ["query", "path", "response"][self.byte() as usize % 3];
                json!({"kind": kind, "field": field, "location": location, "suggestion": suggestion})
            })
            .collect();
        json!({
            "timestamp": self.text(), "request_id": self.text(), "method": self.pick(METHODS),
            "path_template": template, "path": path, "status": self.pick(STATUSES),
            "action": "forwarded", "mode": "observe", "findings": findings,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let knobs = input.byte();
    let options = Options {
        min_requests: 1 + usize::from(knobs % 3),
        min_operations: 1 + usize::from(knobs / 3 % 3),
    };
    let mut events = Vec::new();
    while !input.0.is_empty() && events.len() < 64 {
        events.push(input.event());
    }
    let text = match knobs & 0x80 {
        0 => events.iter().map(|e| format!("{e}\n")).collect(),
        _ => json!({"events": events}).to_string(),
    };
    let tally = Tally::read(&text).expect("the events are JSON");
    let actions = tally.propose(&DOC, options);
    if actions.is_empty() {
        return;
    }
    let proposal = match written(&actions, "fuzz\r- target: $", tally.events) {
        Ok(proposal) => proposal,
        Err(e) => panic!("{e}: {actions:#?}"),
    };
    let breaks = ['\r', '\u{85}', '\u{2028}', '\u{2029}'];
    assert!(!proposal.contains(breaks), "a raw line break:\n{proposal}");
    std::fs::write(&*OVERLAY, &proposal).unwrap();
    let after = match with_overlays(&SPEC, &[OVERLAY.clone()], DEFAULT_MAX_BYTES) {
        Ok((after, _)) => after,
        Err(e) => panic!("the proposal does not apply: {e}\n{proposal}"),
    };
    let targets: Vec<Vec<String>> = (actions.iter())
        .map(|a| steps(&a.target).unwrap_or_else(|| panic!("target {:?}", a.target)))
        .collect();
    let mut wrong = Vec::new();
    outside(&DOC, &after, &mut Vec::new(), &targets, &mut wrong);
    assert!(wrong.is_empty(), "{wrong:#?}\n{proposal}");
});

/// The steps of a target that names one place: `$`, then `.name` or `['name']` (with `\'` and
/// `\\`); `None` for any other JSONPath (a wildcard, a filter, a descent).
fn steps(target: &str) -> Option<Vec<String>> {
    let mut rest = target.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("['") {
            let (mut name, mut chars) = (String::new(), after.char_indices());
            let end = loop {
                match chars.next()? {
                    (_, '\\') => name.push(chars.next()?.1),
                    (i, '\'') => break i,
                    (_, c) => name.push(c),
                }
            };
            rest = after[end + 1..].strip_prefix(']')?;
            steps.push(name);
        } else {
            let after = rest.strip_prefix('.')?;
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            (plain && !name.is_empty()).then_some(())?;
            steps.push(name.to_string());
            rest = &after[end..];
        }
    }
    Some(steps)
}

/// Where `after` differs from `before` other than at or under a target, and what of `before`
/// is lost anywhere.
fn outside(
    before: &Value,
    after: &Value,
    at: &mut Vec<String>,
    targets: &[Vec<String>],
    wrong: &mut Vec<String>,
) {
    if targets.iter().any(|t| at.starts_with(t)) {
        return survives(before, after, at, wrong);
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            if !b.keys().eq(a.keys()) {
                wrong.push(format!("keys at /{} changed", at.join("/")));
            }
            for (key, value) in b {
                at.push(key.clone());
                match a.get(key) {
                    Some(now) => outside(value, now, at, targets, wrong),
                    None => wrong.push(format!("/{} lost", at.join("/"))),
                }
                at.pop();
            }
        }
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (value, now)) in b.iter().zip(a).enumerate() {
                at.push(i.to_string());
                outside(value, now, at, targets, wrong);
                at.pop();
            }
        }
        (b, a) if b == a => {}
        _ => wrong.push(format!("/{} changed outside every target", at.join("/"))),
    }
}

/// Every part of `before` is still in `after` (an update may add to it or set a value).
fn survives(before: &Value, after: &Value, at: &mut Vec<String>, wrong: &mut Vec<String>) {
    let mut each = |key: String, value: &Value, now: Option<&Value>| {
        at.push(key);
        match now {
            Some(now) => survives(value, now, at, wrong),
            None => wrong.push(format!("/{} lost under a target", at.join("/"))),
        }
        at.pop();
    };
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            b.iter().for_each(|(k, v)| each(k.clone(), v, a.get(k)));
        }
        (Value::Array(b), Value::Array(a)) => {
            (b.iter().enumerate()).for_each(|(i, v)| each(i.to_string(), v, a.get(i)));
        }
        _ => {}
    }
}
