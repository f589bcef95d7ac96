//! `driftwatch tools`: the fixture catalog (written as the stories describe) reports exactly its
//! four defects, fixing any one turns that one off, generated catalogs of every real spec check
//! clean, and what cannot be compared honestly is an error, never a pass.

use driftwatch::catalog::{CatalogError, DefectKind, Mapping, check, generate, read_tools};
use driftwatch::contract::Contract;
use driftwatch::finding::Severity;
use serde_json::{Value, json};

use super::real_specs::SPECS;
use super::util::{contract, example, shared_spec};

fn fixture() -> Value {
    serde_json::from_str(&std::fs::read_to_string(example("channels.tools.json")).unwrap()).unwrap()
}

fn mapping() -> Mapping {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tools.toml");
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn defects(c: &Contract, catalog: &Value) -> Vec<(String, DefectKind, String)> {
    check(c, &read_tools(catalog).unwrap(), &mapping())
        .unwrap()
        .defects
        .into_iter()
        .map(|d| (d.tool, d.kind, d.field))
        .collect()
}

fn d(tool: &str, kind: DefectKind, field: &str) -> (String, DefectKind, String) {
    (tool.into(), kind, field.into())
}

/// A change to the fixture catalog that repairs one defect.
type Fix = fn(&mut Value);

#[test]
fn the_fixture_catalog_reports_exactly_its_defects_and_each_fix_turns_one_off() {
    let channels = contract(&example("channels.openapi.yaml"));
    let all = vec![
        d(
            "update_channel",
            DefectKind::SilentClear,
            "graphicsElementIds",
        ),
        d(
            "update_schedule",
            DefectKind::SilentClear,
            "padToNearestMinute",
        ),
        // Worst first: a type the API refuses (error) before an optional filter no argument
        // reaches (info).
        d("list_playouts", DefectKind::TypeMismatch, "pageSize"),
        d("list_playouts", DefectKind::MissingParam, "query"),
    ];
    assert_eq!(defects(&channels, &fixture()), all);
    let report = check(&channels, &read_tools(&fixture()).unwrap(), &mapping()).unwrap();
    let severities: Vec<Severity> = report.defects.iter().map(|d| d.severity).collect();
    use Severity::{Critical, Error, Info};
    assert_eq!(severities, [Critical, Critical, Error, Info]);
    let summary: Vec<(&str, Severity, usize, usize)> = (report.summary.iter())
        .map(|s| (s.tool.as_str(), s.worst, s.error, s.info))
        .collect();
    assert_eq!(
        summary,
        [
            ("update_channel", Critical, 0, 0),
            ("update_schedule", Critical, 0, 0),
            ("list_playouts", Error, 1, 1),
        ]
    );
    let layouts: Vec<(String, String, &str)> = report
        .tools
        .iter()
        .map(|t| (t.tool.clone(), format!("{:?}", t.layout), t.by))
        .collect();
    assert_eq!(
        layouts,
        [
            ("update_channel".into(), "Flat".into(), "map"),
            ("update_schedule".into(), "Nested".into(), "map"),
            ("list_playouts".into(), "Grouped".into(), "meta"),
            ("get_playout_items".into(), "Flat".into(), "map"),
            ("getChannel".into(), "Flat".into(), "inferred"),
        ]
    );
    assert_eq!(report.unexposed.len(), 5, "{:?}", report.unexposed);

    // Each fix, alone, removes its own defect and nothing else.
    let fixes: [(usize, Fix); 4] = [
        (0, |c| {
            c["tools"][0]["inputSchema"]["properties"]["graphicsElementIds"] =
                json!({"type": "array", "items": {"type": "integer"}})
        }),
        (1, |c| {
            c["tools"][1]["inputSchema"]["properties"]["requestBody"]["properties"]["padToNearestMinute"] =
                json!({"type": ["integer", "null"]})
        }),
        (3, |c| {
            c["tools"][2]["inputSchema"]["properties"]["queryParameters"]["properties"]["query"] =
                json!({"type": "string"})
        }),
        (2, |c| {
            c["tools"][2]["inputSchema"]["properties"]["queryParameters"]["properties"]["pageSize"] =
                json!({"type": "integer"})
        }),
    ];
    for (fixed, fix) in fixes {
        let mut catalog = fixture();
        fix(&mut catalog);
        let mut expected = all.clone();
        expected.remove(fixed);
        assert_eq!(
            defects(&channels, &catalog),
            expected,
            "fixing {:?}",
            all[fixed]
        );
    }
}

#[test]
fn a_catalog_generated_from_every_real_spec_checks_clean() {
    let mut total = 0;
    for (rel, operations) in SPECS {
        let c = contract(&shared_spec(rel));
        let catalog = generate(&c, None).unwrap();
        let tools = read_tools(&catalog).unwrap();
        assert_eq!(tools.len(), *operations, "{rel}: one tool per operation");
        let report =
            check(&c, &tools, &Mapping::default()).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(
            report.defects.is_empty(),
            "{rel}: {:#?}",
            &report.defects[..report.defects.len().min(5)]
        );
        assert!(report.unexposed.is_empty(), "{rel}");
        assert_eq!(report.tools.len(), *operations);
        total += tools.len();
    }
    assert_eq!(total, 3371);
    // Only what is enabled is generated, and an unknown name is refused.
    let channels = contract(&example("channels.openapi.yaml"));
    let some = generate(
        &channels,
        Some(&["updateChannel".into(), "GET /api/v1/playouts".into()]),
    )
    .unwrap();
    assert_eq!(some["tools"].as_array().unwrap().len(), 2);
    assert!(
        generate(&channels, Some(&["nope".into()]))
            .unwrap_err()
            .to_string()
            .contains("nope")
    );
}

#[test]
fn what_cannot_be_compared_is_a_defect_and_the_rest_of_the_catalog_is_still_checked() {
    let channels = contract(&example("channels.openapi.yaml"));
    let tools = |list: Vec<Value>| read_tools(&json!({ "tools": list })).unwrap();
    // A tool nothing maps, beside one that is checked: an `unmapped` defect naming candidates.
    let mystery = json!({"name": "update_channel_title", "description": "Update a channel",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}}});
    let known = json!({"name": "getChannel", "inputSchema": {"type": "object", "properties": {
        "id": {"type": "string"}}}});
    let report = check(&channels, &tools(vec![mystery, known]), &Mapping::default()).unwrap();
    let kinds: Vec<(&str, DefectKind)> = report
        .defects
        .iter()
        .map(|d| (d.tool.as_str(), d.kind))
        .collect();
    // Both errors: nothing of the unmapped tool was compared.
    assert_eq!(
        kinds,
        [
            ("update_channel_title", DefectKind::Unmapped),
            ("getChannel", DefectKind::TypeMismatch),
        ]
    );
    let first = &report.defects[0].candidates[0];
    assert_eq!(
        (first.method.as_str(), first.template.as_str()),
        ("PUT", "/api/v1/channels/{id}"),
        "{:?}",
        report.defects[0].candidates
    );
    // A type outside the vocabulary: `untaught`, naming it; a union that carries the spec's type
    // fits, one that does not is a mismatch showing both branches.
    let arg = |schema: Value| {
        let tool = json!({"name": "getChannel", "inputSchema": {"type": "object", "properties": {"id": schema}}});
        let report = check(&channels, &tools(vec![tool]), &Mapping::default()).unwrap();
        report
            .defects
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d.kind.as_str(),
                    d.declared.as_deref().unwrap_or("-")
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        arg(json!({"type": "file"})),
        ["untaught type `file` is not in the vocabulary"]
    );
    assert!(arg(json!({"type": ["integer", "string"]})).is_empty());
    assert!(arg(json!({"anyOf": [{"type": "integer"}, {"type": "null"}]})).is_empty());
    assert_eq!(
        arg(json!({"anyOf": [{"type": "boolean"}, {"type": "string"}]})),
        ["type_mismatch boolean|string"]
    );
    // A JSON body that is a list, not an object of properties: a flat tool cannot be compared.
    let doc = json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/tags": {"put": {
        "operationId": "putTags", "requestBody": {"content": {"application/json": {"schema": {
            "type": "array", "items": {"type": "string"}}}}}, "responses": {"200": {"description": "ok"}}}}}});
    let spec =
        driftwatch::spec::Spec::from_document(std::path::Path::new("tags.json"), doc).unwrap();
    let tags = Contract::compile(&spec, &Default::default()).unwrap();
    let flat = json!({"name": "putTags", "inputSchema": {"type": "object", "properties": {"tag": {"type": "string"}}}});
    let report = check(&tags, &tools(vec![flat]), &Mapping::default()).unwrap();
    assert_eq!(report.defects[0].kind, DefectKind::Untaught);
    assert!(
        report.defects[0]
            .declared
            .as_deref()
            .unwrap()
            .contains("requestBody"),
        "{:?}",
        report.defects
    );
    // Declared as one `requestBody` argument, it is compared by type.
    let nested = json!({"name": "putTags", "inputSchema": {"type": "object", "properties": {
        "requestBody": {"type": "array", "items": {"type": "integer"}}}}});
    let report = check(&tags, &tools(vec![nested]), &Mapping::default()).unwrap();
    assert_eq!(report.defects[0].kind, DefectKind::TypeMismatch);
    assert_eq!(report.defects[0].expected.as_deref(), Some("array<string>"));
    // A map naming an operation the spec lacks is the map's error, never a pass.
    let map: Mapping = toml::from_str("[tools]\ngetChannel = \"noSuchOperation\"").unwrap();
    let known = json!({"name": "getChannel", "inputSchema": {}});
    assert!(matches!(
        check(&channels, &tools(vec![known]), &map),
        Err(CatalogError::UnknownOperation { .. })
    ));
}

/// A tool that finds a record by a query parameter and writes it back whole: the argument the
/// GET's query takes is the PUT body's field too, so that field is filled, no silent clear.
#[test]
fn an_argument_one_operation_takes_in_its_query_fills_another_operations_field_too() {
    let user = json!({"type": "object", "properties": {"id": {"type": "integer"},
        "email": {"type": "string"}, "name": {"type": "string"}}});
    let ok = |schema: &Value| {
        json!({"200": {"description": "ok",
        "content": {"application/json": {"schema": schema}}}})
    };
    let doc = json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
        "/users": {"get": {"operationId": "findUser", "parameters": [{"name": "email",
            "in": "query", "required": true, "schema": {"type": "string"}}],
            "responses": ok(&json!({"type": "array", "items": user}))}},
        "/users/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
            "get": {"operationId": "getUser", "responses": ok(&user)},
            "put": {"operationId": "updateUser", "requestBody": {"content": {"application/json": {
                "schema": {"type": "object", "properties": {"email": {"type": "string"},
                    "name": {"type": "string"}}}}}}, "responses": ok(&user)}}}});
    let spec =
        driftwatch::spec::Spec::from_document(std::path::Path::new("users.json"), doc).unwrap();
    let users = Contract::compile(&spec, &Default::default()).unwrap();
    let tool = json!({"name": "rename_user", "inputSchema": {"type": "object", "properties": {
        "email": {"type": "string"}, "name": {"type": "string"}}}});
    let map: Mapping = toml::from_str(
        "[tools]\nrename_user = { operations = [\"findUser\", \"updateUser\"], supplied = [\"id\"] }",
    )
    .unwrap();
    let report = check(
        &users,
        &read_tools(&json!({"tools": [tool]})).unwrap(),
        &map,
    )
    .unwrap();
    assert!(report.defects.is_empty(), "{:#?}", report.defects);
    // Without `name`, the PUT erases it: still said.
    let tool = json!({"name": "rename_user", "inputSchema": {"type": "object", "properties": {
        "email": {"type": "string"}}}});
    let report = check(
        &users,
        &read_tools(&json!({"tools": [tool]})).unwrap(),
        &map,
    )
    .unwrap();
    let found: Vec<(DefectKind, &str)> = (report.defects.iter())
        .map(|d| (d.kind, d.field.as_str()))
        .collect();
    assert_eq!(found, [(DefectKind::SilentClear, "name")]);
}

/// A path parameter the server fills in every request (Keycloak's servers put their configured
/// realm in each path): supplied, it is no `missing_param`, and no argument is bound to it.
#[test]
fn a_path_parameter_the_server_fills_is_no_defect_and_takes_no_argument() {
    let doc = json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
        "/admin/realms/{realm}/users/{id}": {"get": {"operationId": "getUser", "parameters": [
            {"name": "realm", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}}});
    let spec = driftwatch::spec::Spec::from_document(std::path::Path::new("kc.json"), doc).unwrap();
    let kc = Contract::compile(&spec, &Default::default()).unwrap();
    let tool = json!({"name": "get_user", "inputSchema": {"type": "object", "properties": {
        "handle": {"type": "string"}}, "required": ["handle"]}});
    let tools = read_tools(&json!({"tools": [tool]})).unwrap();
    let map = |extra: &str| -> Mapping {
        toml::from_str(&format!(
            "[tools]\nget_user = {{ operation = \"getUser\"{extra} }}"
        ))
        .unwrap()
    };
    let report = check(&kc, &tools, &map(", supplied = [\"realm\"]")).unwrap();
    assert!(report.defects.is_empty(), "{:#?}", report.defects);
    let bound: Vec<(&str, &str)> = (report.tools[0].bindings.iter())
        .map(|b| (b.argument.as_str(), b.parameter.as_str()))
        .collect();
    assert_eq!(bound, [("handle", "id")]);
    // Not known to be the server's: two parameters open for one argument, no guess, and the
    // three defects a new user met on every tool of such a server.
    let report = check(&kc, &tools, &map("")).unwrap();
    let found: Vec<(DefectKind, &str)> = (report.defects.iter())
        .map(|d| (d.kind, d.field.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (DefectKind::MissingParam, "realm"),
            (DefectKind::MissingParam, "id"),
            (DefectKind::UnreachableArgument, "handle"),
        ]
    );
}

#[test]
fn the_tools_command_exits_1_on_defects_and_2_on_errors() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let spec = "examples/channels.openapi.yaml";
    let (code, json_out, _) = run(&[
        "tools",
        "--spec",
        spec,
        "--tools",
        "examples/channels.tools.json",
        "--map",
        "config/tools.toml",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(1));
    let doc: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(
        doc["defects"][0],
        json!({"tool": "update_channel", "operation": "updateChannel", "kind": "silent_clear",
               "severity": "critical", "field": "graphicsElementIds",
               "expected": "array<integer>", "declared": "absent"})
    );
    assert_eq!(
        doc["summary"][2],
        json!({"tool": "list_playouts", "worst": "error", "critical": 0, "error": 1,
               "warning": 0, "info": 1})
    );
    assert_eq!(doc["unexposed"].as_array().unwrap().len(), 5);
    // Without the mapping, update_channel is unmapped: a defect naming its best candidates,
    // and the rest of the catalog is still checked (exit 1, not 2).
    let (code, text, stderr) = run(&[
        "tools",
        "--spec",
        spec,
        "--tools",
        "examples/channels.tools.json",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        text.contains(
            "  error    unmapped             update_channel       expected an operation: updateChannel ("
        ),
        "{text}"
    );
    assert!(
        text.contains("  error    type_mismatch        list_playouts"),
        "{text}"
    );
    // The report leads with the tools, worst first.
    assert!(
        text.starts_with("error    list_playouts                1 error, 1 info\nerror    update_channel               1 error\n"),
        "{text}"
    );
    // --fail-on sets the severity that fails: nothing here erases data.
    let fail_on = |severity| {
        let catalog = "examples/channels.tools.json";
        let args = [
            "tools",
            "--spec",
            spec,
            "--tools",
            catalog,
            "--fail-on",
            severity,
        ];
        run(&args).0
    };
    assert_eq!(fail_on("critical"), Some(0));
    assert_eq!(fail_on("error"), Some(1));
    assert_eq!(fail_on("never"), Some(0));
    // --suggest-map writes a map the check reads back, its best guess first.
    let (code, suggested, _) = run(&[
        "tools",
        "--spec",
        spec,
        "--tools",
        "examples/channels.tools.json",
        "--suggest-map",
    ]);
    assert_eq!(code, Some(0));
    let map: Mapping = toml::from_str(&suggested).unwrap();
    let best: Vec<String> = map.tools["update_channel"]
        .references()
        .map(String::from)
        .collect();
    assert_eq!(best, ["updateChannel"], "{suggested}");
    let (code, _, stderr) = run(&[
        "tools",
        "--spec",
        "no-such.yaml",
        "--tools",
        "examples/channels.tools.json",
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no-such.yaml"), "{stderr}");
    // Generated, then checked: clean.
    let (code, generated, _) = run(&["tools", "--generate", "--all", "--spec", spec]);
    assert_eq!(code, Some(0));
    let path = std::env::temp_dir().join(format!("driftwatch-tools-{}.json", std::process::id()));
    std::fs::write(&path, generated).unwrap();
    let (code, text, _) = run(&["tools", "--spec", spec, "--tools", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.ends_with(
            "10 tools, 0 defects (0 critical, 0 error, 0 warning, 0 info), 0 operations no tool reaches\n"
        ),
        "{text}"
    );
    let (code, _, stderr) = run(&["tools", "--generate", "--spec", spec]);
    assert_eq!(code, Some(2), "operations are off until enabled: {stderr}");
}

/// A spec that gives two operations one operationId (invalid, found in real specs): each
/// generated tool names its own operation by method and template, so that `driftwatch tools`
/// checks it against that operation and `driftwatch mcp` calls that one.
#[test]
fn tools_of_two_operations_that_share_an_id_name_their_own() {
    let get = |param: &str, ty: &str| {
        json!({"get": {"operationId": "getThing", "parameters": [
            {"name": param, "in": "query", "required": true, "schema": {"type": ty}}],
            "responses": {"200": {"description": "ok"}}}})
    };
    let doc = json!({"openapi": "3.1.0", "info": {"title": "dup", "version": "1"},
        "paths": {"/a": get("x", "integer"), "/b": get("y", "string"), "/c": {"get":
            {"operationId": "getC", "responses": {"200": {"description": "ok"}}}}}});
    let spec =
        driftwatch::spec::Spec::from_document(std::path::Path::new("dup.json"), doc).unwrap();
    let c = Contract::compile(&spec, &Default::default()).unwrap();
    let catalog = generate(&c, None).unwrap();
    let tools = read_tools(&catalog).unwrap();
    let named: Vec<(&str, Option<&str>)> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.meta_operation.as_deref()))
        .collect();
    assert_eq!(
        named,
        [
            ("getThing", Some("GET /a")),
            ("getThing_2", Some("GET /b")),
            ("getC", Some("getC"))
        ]
    );
    for tool in &tools {
        let op = driftwatch::catalog::find_operation(&c, tool.meta_operation.as_deref().unwrap());
        let params: Vec<&str> = op.unwrap().params.iter().map(|p| p.name.as_str()).collect();
        let args: Vec<&str> = tool.input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(params, args, "{}", tool.name);
    }
    let report = check(&c, &tools, &Mapping::default()).unwrap();
    assert!(report.defects.is_empty(), "{:#?}", report.defects);
}

/// What the map says of the server's code, each entry silencing exactly its own defect: a write
/// the map calls a merge omits without clearing, a `local` argument is not sent, a rename sends
/// an argument under the spec's name, a supplied field is not missing.
#[test]
fn the_map_says_what_the_server_does_in_code() {
    let channels = contract(&example("channels.openapi.yaml"));
    let catalog = fixture();
    let tools = read_tools(&catalog).unwrap();
    let update = |extra: &str| -> Vec<(String, DefectKind, String)> {
        let map: Mapping = toml::from_str(&format!(
            "[tools.update_channel]\noperation = \"updateChannel\"\nheaders = [\"If-Match\"]\n{extra}"
        ))
        .unwrap();
        check(&channels, &tools[..1], &map)
            .unwrap()
            .defects
            .into_iter()
            .map(|d| (d.tool, d.kind, d.field))
            .collect()
    };
    let clear = d(
        "update_channel",
        DefectKind::SilentClear,
        "graphicsElementIds",
    );
    assert_eq!(update(""), std::slice::from_ref(&clear));
    assert_eq!(
        update("write = \"merge\""),
        [d(
            "update_channel",
            DefectKind::MissingField,
            "graphicsElementIds"
        )]
    );
    assert_eq!(update("supplied = [\"graphicsElementIds\"]"), []);
    // `name` kept local: the spec's `name` goes missing, on a replace a silent clear.
    assert_eq!(
        update("local = [\"name\"]"),
        [
            d("update_channel", DefectKind::SilentClear, "name"),
            clear.clone()
        ]
    );
    // Renamed to a field the spec lacks: unreachable (named as the tool declares it), and the
    // spec's `name` missing.
    let renamed = update("rename = { name = \"title\" }");
    assert!(
        renamed.contains(&d(
            "update_channel",
            DefectKind::UnreachableArgument,
            "name"
        )) && renamed.contains(&d("update_channel", DefectKind::SilentClear, "name")),
        "{renamed:?}"
    );
}

/// Issue 50: a field the resource's GET marks `readOnly` (the API computes it) is no silent
/// clear when a tool for the replace write leaves it out, though the write's own body schema
/// declares it plainly; a field the API does not compute still is.
#[test]
fn a_field_the_get_marks_read_only_is_no_silent_clear_for_a_tool_that_omits_it() {
    let doc = json!({"openapi": "3.1.0", "paths": {"/c/{id}": {
        "get": {"operationId": "getC", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"},
            "created": {"type": "string", "readOnly": true}}}}}}}},
        "put": {"operationId": "putC", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "requestBody": {"content": {"application/json": {"schema": {
            "type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"},
            "created": {"type": "string"}}}}}}, "responses": {"200": {"description": "ok"}}}}}});
    let spec = driftwatch::spec::Spec::from_document(std::path::Path::new("c.json"), doc).unwrap();
    let c = Contract::compile(&spec, &Default::default()).unwrap();
    let catalog = json!({"tools": [{"name": "putC", "inputSchema": {"type": "object",
        "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}}]});
    let found = check(&c, &read_tools(&catalog).unwrap(), &Mapping::default())
        .unwrap()
        .defects
        .into_iter()
        .map(|d| (d.tool, d.kind, d.field))
        .collect::<Vec<_>>();
    assert_eq!(found, [d("putC", DefectKind::SilentClear, "tags")]);
}

/// Issue 66: a tool for GitHub's issue lock (a PUT no GET shows, answering 204, whose path ends
/// in the action) that leaves out `lock_reason` is missing an argument, not clearing a field:
/// PUT's default replace called it a silent clear.
#[test]
fn a_tool_for_a_put_whose_path_ends_in_an_action_clears_nothing() {
    let github = contract(&shared_spec("github/api.github.com.json.gz"));
    let catalog = json!({"tools": [{"name": "lock_issue", "inputSchema": {"type": "object",
        "properties": {"owner": {"type": "string"}, "repo": {"type": "string"},
        "issue_number": {"type": "integer"}}}}]});
    let map: Mapping = toml::from_str("[tools]\nlock_issue = \"issues/lock\"").unwrap();
    let found: Vec<_> = check(&github, &read_tools(&catalog).unwrap(), &map)
        .unwrap()
        .defects
        .into_iter()
        .map(|d| (d.tool, d.kind, d.field))
        .collect();
    assert_eq!(
        found,
        [d("lock_issue", DefectKind::MissingField, "lock_reason")]
    );
}

/// Issue 50: what the server does with an argument (learned by `wrap`, or written by hand) is
/// the map's vocabulary; with it, the rename is no defect, and a value the tool offers that the
/// spec's enum does not take (`merge-commit` where the API takes `merge_commit`) is one.
#[test]
fn a_renamed_argument_is_compared_with_its_field_and_enum_drift_is_a_defect() {
    let doc = json!({"openapi": "3.1.0", "paths": {"/pulls/{pull_id}/merge": {"post": {
        "operationId": "merge", "parameters": [{"name": "pull_id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {
            "merge_strategy": {"type": "string", "enum": ["merge_commit", "squash", "fast_forward"]},
            "message": {"type": "string"}}}}}},
        "responses": {"200": {"description": "ok"}}}}}});
    let spec = driftwatch::spec::Spec::from_document(std::path::Path::new("m.json"), doc).unwrap();
    let c = Contract::compile(&spec, &Default::default()).unwrap();
    let catalog = json!({"tools": [{"name": "merge_pull", "inputSchema": {"type": "object",
        "properties": {"pull": {"type": "integer"}, "message": {"type": "string"},
            "strategy": {"type": "string", "enum": ["merge-commit", "squash", "fast-forward"]}}}}]});
    let found = |map: &str| -> Vec<(String, DefectKind, String)> {
        let map: Mapping = toml::from_str(map).unwrap();
        check(&c, &read_tools(&catalog).unwrap(), &map)
            .unwrap()
            .defects
            .into_iter()
            .map(|d| (d.tool, d.kind, d.field))
            .collect()
    };
    // Only the operation known: the rename reads as two defects.
    assert_eq!(
        found("[tools]\nmerge_pull = \"merge\"\n"),
        [
            d("merge_pull", DefectKind::UnreachableArgument, "strategy"),
            d("merge_pull", DefectKind::MissingField, "merge_strategy"),
        ]
    );
    // As `wrap` learns it from the server's request: the real drift is left.
    let learned = "[tools]\nmerge_pull = { operation = \"merge\", bind = { \"pull\" = \"pull_id\" }, rename = { \"strategy\" = \"merge_strategy\" } }\n";
    let report = check(
        &c,
        &read_tools(&catalog).unwrap(),
        &toml::from_str(learned).unwrap(),
    )
    .unwrap();
    let drift = &report.defects;
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(
        (
            drift[0].kind,
            drift[0].field.as_str(),
            drift[0].declared.as_deref()
        ),
        (
            DefectKind::EnumMismatch,
            "merge_strategy",
            Some("merge-commit, fast-forward")
        )
    );
}

/// Issue 50: Speakeasy's generated servers (LaunchDarkly's) take every argument inside one
/// object, `request`, and the body as an object named after its schema (`PatchWithComment`):
/// the arguments are that object's members, and the body is the member that holds its fields.
#[test]
fn arguments_wrapped_in_one_object_and_a_body_named_after_its_schema_are_read_as_such() {
    let doc = json!({"openapi": "3.1.0", "paths": {"/flags/{projectKey}/{featureFlagKey}": {"patch": {
        "operationId": "patchFeatureFlag",
        "parameters": [{"name": "projectKey", "in": "path", "required": true, "schema": {"type": "string"}},
                       {"name": "featureFlagKey", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
            "required": ["patch"], "properties": {"patch": {"type": "array"}, "comment": {"type": "string"}}}}}},
        "responses": {"200": {"description": "ok"}}}}}});
    let spec = driftwatch::spec::Spec::from_document(std::path::Path::new("ld.json"), doc).unwrap();
    let c = Contract::compile(&spec, &Default::default()).unwrap();
    let tool = |extra: Value| {
        let mut request = json!({"type": "object", "properties": {
            "projectKey": {"type": "string"}, "featureFlagKey": {"type": "string"},
            "PatchWithComment": {"type": "object", "properties": {"patch": {"type": "array"}, "comment": {"type": "string"}}}}});
        for (k, v) in extra.as_object().unwrap() {
            request["properties"][k] = v.clone();
        }
        json!({"tools": [{"name": "update-feature-flag", "inputSchema": {"type": "object",
            "properties": {"request": request}, "required": ["request"]}}]})
    };
    let found = |catalog: &Value| -> Vec<(String, DefectKind, String)> {
        let map: Mapping =
            toml::from_str("[tools]\n\"update-feature-flag\" = \"patchFeatureFlag\"\n").unwrap();
        check(&c, &read_tools(catalog).unwrap(), &map)
            .unwrap()
            .defects
            .into_iter()
            .map(|d| (d.tool, d.kind, d.field))
            .collect()
    };
    assert_eq!(found(&tool(json!({}))), []);
    // What the wrapper holds is compared as any tool's arguments are.
    assert_eq!(
        found(&tool(json!({"dryRun": {"type": "boolean"}}))),
        [d(
            "update-feature-flag",
            DefectKind::UnreachableArgument,
            "dryRun"
        )]
    );
}
