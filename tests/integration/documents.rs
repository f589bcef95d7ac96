//! Several documents as one API (issue 54): a product that serves APIs with specs of their own
//! on one host. ErsatzTV does: its v1 API and its scripted-schedule API, two real documents;
//! beside them, the Channels example under a base path of its own. One sidecar, one API, every
//! request routed to its own document's operation, and enforce mode refusing only real drift.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::{example, shared_spec};
use driftwatch::config::{ApiConfig, DocumentConfig};
use driftwatch::policy::Mode;

/// The three documents: ErsatzTV's v1 at the root; its scripted-schedule API with the
/// `/api/scripted` its paths start with taken off and given back as its base path (so it is
/// routed under the base path exactly as the vendor's file routes); the Channels example under
/// `/tv`.
fn documents() -> Vec<DocumentConfig> {
    let dir = std::env::temp_dir().join(format!("driftwatch-documents-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(shared_spec("ersatztv/scripted-schedule.json")).unwrap();
    let mut scripted: Value = serde_json::from_str(&text).unwrap();
    let paths = scripted["paths"].as_object().unwrap().clone();
    let stripped = paths
        .into_iter()
        .map(|(p, item)| (p.strip_prefix("/api/scripted").unwrap().to_string(), item));
    scripted["paths"] = Value::Object(stripped.collect());
    let scripted_path = dir.join("scripted-schedule.json");
    std::fs::write(&scripted_path, scripted.to_string()).unwrap();
    let doc = |spec: PathBuf, base: &str| DocumentConfig {
        spec,
        base_path: base.into(),
    };
    vec![
        doc(shared_spec("ersatztv/v1.json"), "/"),
        doc(scripted_path, "/api/scripted"),
        doc(example("channels.openapi.yaml"), "/tv"),
    ]
}

const BUILD: &str = "3fa85f64-5717-4562-b3fc-2c963f66afa6";

/// A correct request to each document, with the operation it must route to.
fn correct() -> Vec<(String, &'static str)> {
    vec![
        ("GET /api/version".into(), "GetVersion"),
        (
            format!("GET /api/scripted/playout/build/{BUILD}/context"),
            "GetContext",
        ),
        ("GET /tv/api/v1/channels/7".into(), "getChannel"),
        (
            "GET /tv/api/v1/playouts?pageNum=0&pageSize=25".into(),
            "listPlayouts",
        ),
    ]
}

fn request(line: &str) -> Vec<u8> {
    format!("{line} HTTP/1.1\r\nhost: tv.example\r\n\r\n").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_documents_on_one_host_route_as_one_api_and_enforce_refuses_only_drift() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    // One `[[api]]`, as the issue tracker's host would be configured.
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = None;
        c.proxy.upstream = None;
        c.api = vec![ApiConfig {
            name: "ersatztv".into(),
            documents: documents(),
            upstream: Some(format!("http://{}", up.addr)),
            mode: Some(Mode::Enforce),
            ..ApiConfig::default()
        }];
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    for (line, operation) in correct() {
        let answer = raw(dw.addr, &request(&line)).await;
        assert_eq!(
            answer.status,
            200,
            "{line}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        let series = format!(
            "driftwatch_requests_total{{operation=\"{operation}\",outcome=\"forwarded\",code=\"200\",api=\"ersatztv\"}}"
        );
        assert_eq!(
            sample(&scrape(dw.admin).await, &series),
            1.0,
            "{line} routed to {operation}"
        );
    }
    // Real drift is still refused: a renamed parameter, and a path no document has.
    let drift = [
        (
            "GET /tv/api/v1/playouts?page_size=25",
            "unknown_query_param",
        ),
        ("GET /api/v1/channels/7", "unknown_operation"),
    ];
    for (line, kind) in drift {
        let answer = raw(dw.addr, &request(line)).await;
        let body = String::from_utf8_lossy(&answer.body);
        assert!(
            answer.status >= 400 && body.contains(kind),
            "{line} refused as {kind}: {body}"
        );
    }
    let listed = admin_get(dw.admin, "/spec").await.json();
    let docs = listed["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 3, "{listed}");
    let bases: Vec<&str> = docs
        .iter()
        .map(|d| d["base_path"].as_str().unwrap())
        .collect();
    assert_eq!(bases, ["/", "/api/scripted", "/tv"]);
    let revisions: std::collections::HashSet<&str> = docs
        .iter()
        .map(|d| d["revision"].as_str().unwrap())
        .collect();
    assert_eq!(
        revisions.len(),
        3,
        "each document its own revision: {listed}"
    );
    assert!(revisions.iter().all(|r| r.len() == 12));
    assert!(
        !revisions.contains(listed["revision"].as_str().unwrap()),
        "and the API one of all"
    );
    dw.stop().await;

    // The same traffic against the first document alone, as one `[[api]]` per host allowed
    // before: the other documents' correct requests are refused as unknown operations.
    let alone = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(shared_spec("ersatztv/v1.json"));
        c.proxy.mode = Mode::Enforce;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let mut refused = 0;
    for (line, _) in correct() {
        refused += usize::from(raw(alone.addr, &request(&line)).await.status != 200);
    }
    assert_eq!(
        refused, 3,
        "one document alone refuses the others' correct calls"
    );
    alone.stop().await;
}

#[test]
fn the_same_method_and_path_in_two_documents_is_refused_naming_both() {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-documents-clash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = shared_spec("ersatztv/v1.json");
    let text = |base: &str| {
        format!(
            "[spec]\ndocuments = [{{spec = {v1:?}, base_path = \"/\"}}, {{spec = {:?}, base_path = {base:?}}}]\n[proxy]\nupstream = \"http://127.0.0.1:9\"\n",
            example("channels.openapi.yaml")
        )
    };
    let clash = dir.join("clash.toml");
    let copy = dir.join("v1-again.json");
    std::fs::copy(&v1, &copy).unwrap();
    std::fs::write(
        &clash,
        format!(
            "[spec]\ndocuments = [{{spec = {v1:?}, base_path = \"/\"}}, {{spec = {copy:?}, base_path = \"/\"}}]\n[proxy]\nupstream = \"http://127.0.0.1:9\"\n"
        ),
    )
    .unwrap();
    let check = |config: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["serve", "--check", "--config", config.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = check(&clash);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is in two documents of this API"), "{err}");
    assert!(
        err.contains(&v1.display().to_string()) && err.contains(&copy.display().to_string()),
        "{err}"
    );

    let fine = dir.join("fine.toml");
    std::fs::write(&fine, text("/tv")).unwrap();
    let out = check(&fine);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("  document  ") && said.contains(" under /tv, revision "),
        "{said}"
    );
}

/// `svc{n}/api.yaml`: one `POST /items` whose body is the component `Item`, each document's
/// `Item` of another shape (one required property, nothing else allowed).
fn alike(dir: &std::path::Path, n: usize, field: &str, kind: &str) -> PathBuf {
    let sub = dir.join(format!("svc{n}"));
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("api.yaml");
    let text = format!(
        "openapi: 3.0.3\ninfo: {{title: svc{n}, version: '1'}}\npaths:\n  /items:\n    post:\n      operationId: createItem{n}\n      requestBody:\n        required: true\n        content:\n          application/json:\n            schema: {{$ref: '#/components/schemas/Item'}}\n      responses: {{'200': {{description: ok}}}}\ncomponents:\n  schemas:\n    Item:\n      type: object\n      additionalProperties: false\n      required: [{field}]\n      properties: {{{field}: {{type: {kind}}}}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue 64: three documents named `api.yaml` in three directories, each with its own `Item`.
/// The second's was renamed `api.Item`, and the third's renamed `api.Item` too, over it: the
/// second API's correct call was refused (422) and a call shaped for the third forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_with_one_file_name_keep_their_components_apart() {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-documents-alike-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let shapes = [
        ("name", "string", "\"a\""),
        ("count", "integer", "1"),
        ("flag", "boolean", "true"),
    ];
    let documents = (1..=3)
        .map(|n| {
            let (field, kind, _) = shapes[n - 1];
            DocumentConfig {
                spec: alike(&dir, n, field, kind),
                base_path: format!("/svc{n}"),
            }
        })
        .collect();
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = None;
        c.proxy.upstream = None;
        c.api = vec![ApiConfig {
            name: "alike".into(),
            documents,
            upstream: Some(format!("http://{}", up.addr)),
            mode: Some(Mode::Enforce),
            ..ApiConfig::default()
        }];
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    // Every API's own body to every API: forwarded where it is that API's, refused elsewhere.
    let mut wrong = Vec::new();
    for n in 1..=3 {
        for (m, (field, _, value)) in shapes.iter().enumerate() {
            let body = format!("{{\"{field}\": {value}}}");
            let request = format!(
                "POST /svc{n}/items HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let answer = raw(dw.addr, request.as_bytes()).await;
            let forwarded = answer.status == 200;
            if forwarded != (m + 1 == n) {
                wrong.push(format!(
                    "{body} to svc{n}: {} {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    dw.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 64: `GET /items/{id}` in one document and `GET /items/{itemId}` in another are one
/// route to the router; they were accepted with an `ambiguous_route` warning.
#[test]
fn one_route_under_other_parameter_names_in_two_documents_is_refused_naming_both() {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-documents-route-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let doc = |name: &str, method: &str, param: &str| {
        let path = dir.join(name);
        let text = format!(
            "openapi: 3.0.3\ninfo: {{title: {name}, version: '1'}}\npaths:\n  /items/{{{param}}}:\n    {method}:\n      parameters: [{{name: {param}, in: path, required: true, schema: {{type: string}}}}]\n      responses: {{'200': {{description: ok}}}}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let (a, b) = (doc("a.yaml", "get", "id"), doc("b.yaml", "get", "itemId"));
    let put = doc("put.yaml", "put", "itemId");
    let check = |second: &std::path::Path| {
        let config = dir.join("documents.toml");
        std::fs::write(
            &config,
            format!(
                "[spec]\ndocuments = [{{spec = {a:?}, base_path = \"/\"}}, {{spec = {second:?}, base_path = \"/\"}}]\n[proxy]\nupstream = \"http://127.0.0.1:9\"\n"
            ),
        )
        .unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["serve", "--check", "--config", config.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = check(&b);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GET /items/{itemId} is in two documents of this API"),
        "{err}"
    );
    assert!(
        err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()),
        "{err}"
    );
    // Another method on the same route is no clash.
    let out = check(&put);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
