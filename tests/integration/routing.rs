//! Issue 66, which requests are which operation's: OpenAPI's concrete path beats its templated
//! sibling whatever the query carries, and an API's requests are those under its base path.
//! Against real specs: the audit core for the first, the sidecar in enforce mode for the
//! second.

use std::time::Duration;

use driftwatch::audit::audit;
use driftwatch::contract::Contract;
use driftwatch::policy::Mode;
use driftwatch::request::RequestView;

use super::sidecar::{config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::{contract, shared_spec};

/// The operation a request was audited against, and its findings as `operation kind field`.
fn audited(c: &Contract, method: &str, target: &str) -> (String, Vec<String>) {
    let headers: Vec<(String, String)> = Vec::new();
    let a = audit(c, &RequestView::new(method, target, &headers, None));
    let findings = a.findings.iter().map(|f| {
        let op = f.operation.as_deref().unwrap_or("-");
        format!("{op} {} {}", f.kind.as_str(), f.field)
    });
    let op = a.operation.map_or("-", |o| o.id.as_str());
    (op.to_string(), findings.collect())
}

/// Real specs declare a concrete path beside a template it fits: Petstore's `GET /user/login`
/// (required `username` and `password`) beside `GET /user/{username}`, GitHub's
/// `GET /user/packages` (required `package_type`) beside `GET /user/{account_id}`. A request
/// the concrete one refuses was audited against the template where that one took it with
/// fewer findings (Petstore's login without its credentials passed clean as
/// `getUserByName`); it is the concrete operation's, and its findings name it. Then every
/// operation of a template without parameters, sent a query key no spec declares (so each
/// refuses it), is audited as itself: counts pinned per spec.
#[test]
fn a_request_the_concrete_path_refuses_is_audited_against_it_never_its_templated_sibling() {
    let petstore = contract(&shared_spec("readme/petstore-3.0.json"));
    let github = contract(&shared_spec("github/api.github.com.json.gz"));
    let cases: [(&Contract, &str, &str, &[&str]); 5] = [
        (
            &petstore,
            "/v2/user/login",
            "loginUser",
            &[
                "loginUser missing_required_param username",
                "loginUser missing_required_param password",
            ],
        ),
        (
            &petstore,
            "/v2/user/login?user=a&pass=b",
            "loginUser",
            &[
                "loginUser unknown_query_param user",
                "loginUser unknown_query_param pass",
                "loginUser missing_required_param username",
                "loginUser missing_required_param password",
            ],
        ),
        (
            &github,
            "/user/packages",
            "packages/list-packages-for-authenticated-user",
            &["packages/list-packages-for-authenticated-user missing_required_param package_type"],
        ),
        (
            &github,
            "/user/packages?package_type[]=npm",
            "packages/list-packages-for-authenticated-user",
            &[
                "packages/list-packages-for-authenticated-user unknown_query_param package_type[]",
                "packages/list-packages-for-authenticated-user missing_required_param package_type",
            ],
        ),
        (
            &github,
            "/user/packages?package_type=pypi",
            "packages/list-packages-for-authenticated-user",
            &["packages/list-packages-for-authenticated-user param_type_mismatch package_type"],
        ),
    ];
    let mut problems = Vec::new();
    for (c, target, want_op, want) in cases {
        let (op, findings) = audited(c, "GET", target);
        if op != want_op || findings != want {
            problems.push(format!("GET {target}: {op} {findings:?}"));
        }
    }
    for (rel, literal) in [
        ("readme/petstore-3.0.json", 11),
        ("github/api.github.com.json.gz", 87),
    ] {
        let c = contract(&shared_spec(rel));
        let base = c.base_paths().first().map_or("", String::as_str);
        let mut checked = 0;
        for op in c
            .operations()
            .iter()
            .filter(|op| !op.template.contains('{'))
        {
            checked += 1;
            let target = format!("{base}{}?zz_not_declared=1", op.template);
            let (got, findings) = audited(&c, &op.method, &target);
            if got != op.id {
                problems.push(format!("{rel}: {} {target}: {got} {findings:?}", op.method));
            }
        }
        if checked != literal {
            problems.push(format!(
                "{rel}: {checked} literal operations, pinned {literal}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Petstore's spec is based at `/v2`, and names its own OAuth dialog on the same host outside
/// it (`http://petstore.swagger.io/oauth/dialog`), as Keycloak's admin API under
/// `/admin/realms` sits beside its token endpoint: every call of a server starts with a
/// token, and enforce refused each as `unknown_operation`. Now such a request is forwarded and
/// counted as routed nowhere, while a path under `/v2` that no template fits is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_base_path_enforce_forwards_and_under_it_still_refuses() {
    let spec = shared_spec("readme/petstore-3.0.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let dialog = doc["components"]["securitySchemes"]["petstore_auth"]["flows"]["implicit"]
        ["authorizationUrl"]
        .as_str()
        .unwrap()
        .strip_prefix("http://petstore.swagger.io")
        .unwrap()
        .to_string();
    assert_eq!(doc["servers"][0]["url"], "http://petstore.swagger.io/v2");
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.proxy.mode = Mode::Enforce;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let get = |target: &str| {
        format!(
            "GET {target} HTTP/1.1\r\nhost: petstore.swagger.io\r\napi_key: k\r\nconnection: close\r\n\r\n"
        )
    };
    let unknown = raw(dw.addr, get("/v2/pets/7").as_bytes()).await;
    let body = String::from_utf8_lossy(&unknown.body).into_owned();
    assert_eq!(unknown.status, 422, "{body}");
    assert!(body.contains("unknown_operation"), "{body}");
    let token = format!("{dialog}?response_type=token&client_id=agent");
    for _ in 0..9 {
        let answer = raw(dw.addr, get(&token).as_bytes()).await;
        let body = String::from_utf8_lossy(&answer.body);
        assert_eq!((answer.status, body.as_ref()), (200, "{\"ok\":true}"));
    }
    for _ in 0..10 {
        let answer = raw(dw.addr, get("/v2/store/inventory").as_bytes()).await;
        assert_eq!(answer.status, 200);
    }
    let targets: Vec<String> = up.recorded().iter().map(|r| r.target.clone()).collect();
    assert_eq!(targets.len(), 19, "{targets:?}");
    assert!(targets.iter().all(|t| t != "/v2/pets/7"), "{targets:?}");
    let metrics = scrape(dw.admin).await;
    // The 20th request's report: the unknown path and the 9 outside it routed nowhere.
    assert_eq!(
        sample(&metrics, "driftwatch_unrouted_share"),
        0.5,
        "{metrics}"
    );
    let series =
        "driftwatch_requests_total{operation=\"_unknown\",outcome=\"forwarded\",code=\"200\"}";
    assert_eq!(sample(&metrics, series), 9.0, "{metrics}");
    dw.stop().await;
}

/// Box declares alternatives of one operation as paths with a fragment, each with its own body
/// (`PUT /folders/{folder_id}#add_shared_link` takes `shared_link` alone and requires
/// `?fields=shared_link`, beside the folder's own PUT). A request is audited against the
/// alternative it fits; a body that fits none is told against the one whose fields it sends:
/// a retyped `name` was audited against `#add_shared_link` (its `name` undeclared, its type
/// unsaid).
#[test]
fn a_paths_alternatives_by_fragment_each_audit_the_body_they_declare() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs/box.com.json.gz");
    let c = contract(&path);
    let put = |target: &str, body: &str| {
        let headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("authorization".to_string(), "Bearer t".to_string()),
        ];
        let a = audit(
            &c,
            &RequestView::new("PUT", target, &headers, Some(body.as_bytes())),
        );
        let findings: Vec<String> = (a.findings.iter())
            .filter(|f| f.kind.as_str() != "omitted_on_replace")
            .map(|f| format!("{} {}", f.kind.as_str(), f.field))
            .collect();
        (
            a.operation.map_or("-", |o| o.id.as_str()).to_string(),
            findings,
        )
    };
    assert_eq!(
        put("/2.0/folders/7", r#"{"name": "Reports", "tags": ["q3"]}"#),
        ("put_folders_id".to_string(), vec![])
    );
    assert_eq!(
        put("/2.0/folders/7", r#"{"name": 7}"#),
        (
            "put_folders_id".to_string(),
            vec!["body_type_mismatch /name".to_string()]
        )
    );
    let (op, findings) = put(
        "/2.0/folders/7?fields=shared_link",
        r#"{"shared_link": {"access": "open"}}"#,
    );
    assert!(
        op.starts_with("put_folders_id#") && op.ends_with("_shared_link"),
        "{op}"
    );
    assert_eq!(findings, Vec::<String>::new());
}
