//! Issue 66, which requests are which operation's: OpenAPI's concrete path beats its templated
//! sibling whatever the query carries. Against real specs, through the audit core.

use driftwatch::audit::audit;
use driftwatch::contract::Contract;
use driftwatch::request::RequestView;

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
