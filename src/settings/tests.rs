//! Layering, precedence and validation of the settings, each error naming key and source.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::SECTIONS;
use crate::policy::Mode;

fn write(name: &str, text: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("driftwatch-config-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn text(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

fn load(
    file: Option<&Path>,
    env: Vec<(String, String)>,
    flags: Vec<crate::config::Flag>,
) -> Result<Settings, ConfigError> {
    Settings::load(Layers { file, env, flags })
}

#[test]
fn flags_beat_env_and_env_beats_file() {
    let file = write(
        "a.toml",
        "[proxy]\nlisten = \"127.0.0.1:1000\"\nupstream = \"http://a\"\nmode = \"enforce\"\n[audit]\nmax_body = 10\n",
    );
    let vars = env(&[
        ("DRIFTWATCH_PROXY_LISTEN", "127.0.0.1:3000"),
        ("DRIFTWATCH_AUDIT_MAX_BODY", "20"),
        ("HOME", "/root"),
    ]);
    let flag = || vec![("proxy.listen", "--listen", text("127.0.0.1:2000"))];
    let s = load(Some(&file), vars.clone(), flag()).unwrap();
    assert_eq!(
        s.proxy.listen,
        "127.0.0.1:2000".parse().unwrap(),
        "the flag wins"
    );
    assert_eq!(s.audit.max_body, 20, "env over file");
    assert_eq!(
        s.apis[0].policy.mode,
        Mode::Enforce,
        "the file where nothing else is set"
    );
    assert_eq!(s.upstream().unwrap().authority.as_str(), "a");
    let s = load(Some(&file), vars, Vec::new()).unwrap();
    assert_eq!(
        s.proxy.listen,
        "127.0.0.1:3000".parse().unwrap(),
        "env over file"
    );
    let s = load(Some(&file), Vec::new(), Vec::new()).unwrap();
    assert_eq!(s.proxy.listen, "127.0.0.1:1000".parse().unwrap());
}

#[test]
fn the_spec_source_is_one_choice_across_layers() {
    // The image sets DRIFTWATCH_SPEC_PATH; a config file naming a URL must still load, and
    // `--spec` beats both.
    let file = write("u.toml", "[spec]\nurl = \"http://api:5000/openapi.json\"\n");
    let image = env(&[("DRIFTWATCH_SPEC_PATH", "/etc/driftwatch/openapi.yaml")]);
    let s = load(Some(&file), image.clone(), Vec::new()).unwrap();
    assert_eq!(
        s.apis[0].spec.source,
        SpecSource::File("/etc/driftwatch/openapi.yaml".into())
    );
    let flag = vec![("spec.path", "--spec", text("mine.yaml"))];
    let s = load(Some(&file), image, flag).unwrap();
    assert_eq!(s.apis[0].spec.source, SpecSource::File("mine.yaml".into()));
    let s = load(Some(&file), Vec::new(), Vec::new()).unwrap();
    assert!(
        matches!(s.apis[0].spec.source, SpecSource::Url(ref u) if u.uri.path() == "/openapi.json")
    );
    let both = write(
        "b.toml",
        "[spec]\npath = \"a.yaml\"\nurl = \"http://api/openapi.json\"\n",
    );
    let e = load(Some(&both), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("set spec.path or spec.url, not both"), "{e}");
}

#[test]
fn an_invalid_value_is_refused_naming_its_key_and_source() {
    let file = write(
        "h.toml",
        "[events]\n\nrequest_id_header = \"x request id\"\n",
    );
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "events.request_id_header (set by {} line 3): `x request id` is not a valid header name",
            file.display()
        )
    );
    let vars = env(&[("DRIFTWATCH_MEMORY_SCOPE_HEADER", "bad:header")]);
    let e = load(None, vars, Vec::new()).unwrap_err().to_string();
    assert_eq!(
        e,
        "memory.scope_header (set by environment variable DRIFTWATCH_MEMORY_SCOPE_HEADER): `bad:header` is not a valid header name"
    );
    let flag = vec![("proxy.upstream", "--upstream", text("ftp://api"))];
    let e = load(None, Vec::new(), flag).unwrap_err().to_string();
    assert_eq!(
        e,
        "proxy.upstream (set by flag --upstream): `ftp://api` must start with http:// or https://"
    );
    let vars = env(&[("DRIFTWATCH_PROXY_CONNECT_TIMEOUT_MS", "soon")]);
    let e = load(None, vars, Vec::new()).unwrap_err().to_string();
    assert!(
        e.starts_with("proxy.connect_timeout_ms (set by environment variable DRIFTWATCH_PROXY_CONNECT_TIMEOUT_MS): "),
        "{e}"
    );
    let vars = env(&[("DRIFTWATCH_PROXY_REQUEST_TIMEOUT_MS", "0")]);
    let e = load(None, vars, Vec::new()).unwrap_err().to_string();
    assert_eq!(
        e,
        "proxy.request_timeout_ms (set by environment variable DRIFTWATCH_PROXY_REQUEST_TIMEOUT_MS): must be positive (no request could wait for the API)"
    );
    let e = Settings::default().upstream().unwrap_err().to_string();
    assert!(
        e.starts_with("proxy.upstream is not set: pass --upstream"),
        "{e}"
    );
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let file = write("b.toml", "[proxy]\nlisten_addr = \"127.0.0.1:1\"\n");
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `listen_addr`"), "{e}");
    let vars = env(&[("DRIFTWATCH_PROXI_LISTEN", "x")]);
    let e = load(None, vars, Vec::new()).unwrap_err().to_string();
    assert!(
        e.starts_with("DRIFTWATCH_PROXI_LISTEN (set by environment variable DRIFTWATCH_PROXI_LISTEN): unknown setting"),
        "{e}"
    );
    let file = write(
        "c.toml",
        "[enforce.kinds]\nunknown_query_parameter = \"block\"\n",
    );
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown variant `unknown_query_parameter`"),
        "{e}"
    );
    let file = write(
        "d.toml",
        "[enforce.kinds]\nunknown_query_param = \"stop\"\n",
    );
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `stop`"), "{e}");
    let file = write(
        "e.toml",
        "[enforce.kinds]\nresponse_schema_violation = \"block\"\n",
    );
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "enforce.kinds (set by {} line 1): `response_schema_violation` is found on responses",
            file.display()
        )),
        "{e}"
    );
    let file = write(
        "r.toml",
        "[enforce.operations.listChannels]\nunknown_query_param = \"repair\"\n",
    );
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`repair` fills the fields a replace write omits"),
        "{e}"
    );
    assert!(e.contains("not `unknown_query_param`"), "{e}");
    let file = write("f.toml", "[spec.write]\n\"PUT /a\" = \"overwrite\"\n");
    let e = load(Some(&file), Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `overwrite`"), "{e}");
}

#[test]
fn every_section_of_the_documented_config_is_reachable_from_the_environment() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/driftwatch.toml");
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut sections: Vec<&str> = table.keys().map(String::as_str).collect();
    sections.sort();
    let mut known = SECTIONS.to_vec();
    known.sort();
    assert_eq!(sections, known);
    let vars = env(&[("DRIFTWATCH_MEMORY_MAX_ENTRIES", "5")]);
    assert_eq!(load(None, vars, Vec::new()).unwrap().memory.max_entries, 5);
}

#[test]
fn the_documented_example_config_is_valid_and_equals_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/driftwatch.toml");
    let c = load(Some(&path), Vec::new(), Vec::new()).unwrap();
    let d = Settings::default();
    assert_eq!(format!("{:?}", c.proxy), format!("{:?}", d.proxy));
    assert_eq!(format!("{:?}", c.audit), format!("{:?}", d.audit));
    assert_eq!(format!("{:?}", c.admin), format!("{:?}", d.admin));
    assert_eq!(format!("{:?}", c.events), format!("{:?}", d.events));
    assert_eq!(format!("{:?}", c.memory), format!("{:?}", d.memory));
    assert_eq!(
        format!("{:?}", c.apis[0].spec),
        format!("{:?}", d.apis[0].spec)
    );
}

#[test]
fn every_kind_reads_by_its_stable_name() {
    for kind in crate::finding::Kind::ALL {
        let parsed: crate::finding::Kind = toml::Value::String(kind.as_str().into())
            .try_into()
            .unwrap();
        assert_eq!(parsed, kind);
    }
}

#[test]
fn replicas_given_one_hash_key_file_agree_and_a_short_secret_is_refused() {
    let secret = write("hash-key", "0123456789abcdef-shared\n");
    let config = write(
        "hash-key.toml",
        &format!(
            "[memory]\nhash_key_file = {:?}\n",
            secret.display().to_string()
        ),
    );
    let a = load(Some(&config), vec![], vec![]).unwrap();
    let b = load(Some(&config), vec![], vec![]).unwrap();
    assert_eq!(a.memory.hash_key, b.memory.hash_key);
    let unset = Settings::default();
    assert_ne!(unset.memory.hash_key, Settings::default().memory.hash_key);
    let short = write("hash-key-short", "tiny");
    let config = write(
        "hash-key-short.toml",
        &format!(
            "[memory]\nhash_key_file = {:?}\n",
            short.display().to_string()
        ),
    );
    let e = load(Some(&config), vec![], vec![]).unwrap_err().to_string();
    assert!(e.starts_with("memory.hash_key_file (set by"), "{e}");
    assert!(e.contains("at least 16 bytes"), "{e}");
}

/// Kubernetes injects `DRIFTWATCH_SERVICE_HOST` and the like for a Service named `driftwatch`:
/// left out (and listed, for `serve` to say once), where a misspelt setting, or a setting-like
/// name whose value is not a service link's, is still an error naming the variable.
#[test]
fn kubernetes_service_links_are_left_out_and_misspelt_settings_are_still_errors() {
    let links = [
        ("DRIFTWATCH_SERVICE_HOST", "10.0.0.1"),
        ("DRIFTWATCH_SERVICE_PORT", "9090"),
        ("DRIFTWATCH_SERVICE_PORT_ADMIN", "9090"),
        ("DRIFTWATCH_PORT", "tcp://10.0.0.1:9090"),
        ("DRIFTWATCH_PORT_9090_TCP", "tcp://10.0.0.1:9090"),
        ("DRIFTWATCH_PORT_9090_TCP_PROTO", "tcp"),
        ("DRIFTWATCH_PORT_9090_TCP_PORT", "9090"),
        ("DRIFTWATCH_PORT_9090_TCP_ADDR", "10.0.0.1"),
        ("DRIFTWATCH_ADMIN_SERVICE_HOST", "fd00::1"),
        ("DRIFTWATCH_ADMIN_PORT_53_UDP", "udp://[fd00::1]:53"),
    ];
    let mut vars = env(&links);
    vars.push(("DRIFTWATCH_PROXY_UPSTREAM".into(), "http://api".into()));
    let settings = load(None, vars, Vec::new()).unwrap();
    let names: Vec<&str> = links.iter().map(|(name, _)| *name).collect();
    assert_eq!(settings.service_links, names);
    for (name, value) in [
        ("DRIFTWATCH_SERVICE_HOSTS", "10.0.0.1"),
        ("DRIFTWATCH_PROXY_LISTEN_PORT", "8080"),
        ("DRIFTWATCH_SERVICE_HOST", "api.internal"),
        ("DRIFTWATCH_PORT_9090_TCP", "9090"),
        ("DRIFTWATCH_ADMIN_PORT_X_TCP_PORT", "9090"),
    ] {
        let e = load(None, env(&[(name, value)]), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains(name), "{name}={value}: {e}");
    }
}

#[test]
fn an_admin_token_file_is_read_at_start_and_a_short_or_missing_one_is_refused() {
    let upstream = ("DRIFTWATCH_PROXY_UPSTREAM", "http://api");
    let good = write("token-good", "0123456789abcdef\n");
    let good = good.to_str().unwrap();
    let settings = load(
        None,
        env(&[upstream, ("DRIFTWATCH_ADMIN_TOKEN_FILE", good)]),
        Vec::new(),
    );
    assert!(settings.unwrap().admin_token.is_some());
    let short = write("token-short", "0123456789abcde\n");
    for (file, reason) in [
        (
            short.to_str().unwrap(),
            "the secret must be at least 16 bytes",
        ),
        ("/nonexistent/token", "No such file"),
    ] {
        let vars = env(&[upstream, ("DRIFTWATCH_ADMIN_TOKEN_FILE", file)]);
        let e = load(None, vars, Vec::new()).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "admin.token_file (set by environment variable DRIFTWATCH_ADMIN_TOKEN_FILE)"
            ),
            "{e}"
        );
        assert!(e.contains(reason), "{e}");
    }
}

#[test]
fn a_shared_memory_store_needs_its_url_and_a_shared_hash_key_and_never_shows_a_password() {
    let secret = write("store-hash-key", "0123456789abcdef-shared\n");
    let key = secret.display().to_string();
    let error = |pairs: &[(&str, &str)]| load(None, env(pairs), vec![]).unwrap_err().to_string();
    let e = error(&[("DRIFTWATCH_MEMORY_BACKEND", "redis")]);
    assert!(e.starts_with("memory.redis_url"), "{e}");
    let e = error(&[
        ("DRIFTWATCH_MEMORY_BACKEND", "redis"),
        ("DRIFTWATCH_MEMORY_REDIS_URL", "redis://127.0.0.1:6379"),
    ]);
    assert!(
        e.starts_with("memory.hash_key_file") && e.contains("share"),
        "{e}"
    );
    let e = error(&[
        ("DRIFTWATCH_MEMORY_BACKEND", "redis"),
        ("DRIFTWATCH_MEMORY_REDIS_URL", "http://127.0.0.1:6379"),
        ("DRIFTWATCH_MEMORY_HASH_KEY_FILE", &key),
    ]);
    assert!(e.starts_with("memory.redis_url"), "{e}");
    let e = error(&[("DRIFTWATCH_MEMORY_BACKEND", "memcached")]);
    assert!(e.contains("DRIFTWATCH_MEMORY_BACKEND"), "{e}");

    let password = write("store-password", "s3cret-password-of-the-store\n");
    let s = load(
        None,
        env(&[
            ("DRIFTWATCH_MEMORY_BACKEND", "redis"),
            (
                "DRIFTWATCH_MEMORY_REDIS_URL",
                "rediss://app:urlpass@cache:6380/2",
            ),
            ("DRIFTWATCH_MEMORY_HASH_KEY_FILE", &key),
            (
                "DRIFTWATCH_MEMORY_REDIS_PASSWORD_FILE",
                &password.display().to_string(),
            ),
        ]),
        vec![],
    )
    .unwrap();
    let shared = s.memory.shared.as_ref().unwrap();
    assert_eq!(shared.shown, "rediss://app:****@cache:6380/2");
    assert_eq!(shared.deadline, Duration::from_millis(5));
    assert_eq!(
        shared.url.redis_settings().password(),
        Some("s3cret-password-of-the-store"),
        "the file's password wins over the URL's"
    );
    let shown = format!("{:?}", s.memory);
    assert!(
        !shown.contains("urlpass") && !shown.contains("s3cret"),
        "{shown}"
    );
    assert!(
        Settings::default().memory.shared.is_none(),
        "local by default"
    );
}

#[test]
fn api_tables_become_one_api_each_and_every_request_can_find_one() {
    let ok = write(
        "apis.toml",
        "[proxy]\nmode = \"forward\"\n[[api]]\nname = \"github\"\nspec = \"gh.json\"\nhosts = [\"api.github.com\", \"uploads.github.com:443\"]\nmode = \"enforce\"\n[[api]]\nname = \"slack\"\nspec = \"https://example.test/slack.json\"\nhosts = [\"slack.com\"]\nupstream = \"https://slack.com/api\"\n",
    );
    let s = load(Some(&ok), Vec::new(), Vec::new()).unwrap();
    assert_eq!(
        s.proxy.kind,
        crate::config::ProxyKind::Forward,
        "`mode = \"forward\"` is the kind"
    );
    assert_eq!(s.apis.len(), 2);
    let (gh, slack) = (&s.apis[0], &s.apis[1]);
    assert_eq!(gh.name.as_deref(), Some("github"));
    assert_eq!(gh.policy.mode, Mode::Enforce, "the API's own mode");
    assert_eq!(slack.policy.mode, Mode::Observe);
    assert_eq!(
        gh.upstream.as_ref().unwrap().authority.as_str(),
        "api.github.com"
    );
    assert_eq!(slack.upstream.as_ref().unwrap().prefix, "/api");
    assert!(matches!(slack.spec.source, SpecSource::Url(_)));
    assert_eq!(
        s.apis[0].spec.source,
        SpecSource::File("gh.json".into()),
        "the first API is `spec`"
    );
    let refused = |name: &str, text: &str, expected: &str| {
        let e = load(Some(&write(name, text)), Vec::new(), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{name}: {e}");
    };
    let table = |name: &str, extra: &str| {
        format!("[[api]]\nname = \"{name}\"\nspec = \"a.json\"\nupstream = \"http://a\"\n{extra}")
    };
    refused(
        "dup.toml",
        &(table("a", "prefix = \"/a\"\n") + &table("a", "prefix = \"/b\"\n")),
        "`a` names two APIs",
    );
    refused(
        "none.toml",
        &(table("a", "") + &table("b", "")),
        "several APIs have neither a prefix nor hosts",
    );
    refused("label.toml", &table("a b", ""), "1 to 64 letters");
    refused(
        "prefix.toml",
        &table("a", "prefix = \"a\"\n"),
        "must start with `/`",
    );
    refused(
        "fwd.toml",
        &format!("[proxy]\nkind = \"forward\"\n{}", table("a", "")),
        "names no hosts",
    );
    refused(
        "host.toml",
        &(table("a", "hosts = [\"x.test\"]\n") + &table("b", "hosts = [\"x.test:443\"]\n")),
        "served by two APIs",
    );
    refused(
        "twice.toml",
        &format!("[spec]\npath = \"b.json\"\n{}", table("a", "")),
        "set both here and in [[api]]",
    );
    refused(
        "overlays.toml",
        &format!(
            "[spec]\noverlays = [\"o.yaml\"]\n{}",
            table("a", "overlays = [\"p.yaml\"]\n")
        ),
        "spec.overlays",
    );
}

#[test]
fn an_api_of_several_documents_names_each_with_its_base_path() {
    let file = write(
        "documents.toml",
        "[[api]]\nname = \"jira\"\nupstream = \"http://a\"\ndocuments = [{spec = \"platform.json\", base_path = \"/rest/api/3\"}, {spec = \"agile.json\", base_path = \"/rest/agile/1.0\"}]\n",
    );
    let s = load(Some(&file), env(&[]), Vec::new()).unwrap();
    let expected = vec![
        (PathBuf::from("platform.json"), "/rest/api/3".to_string()),
        ("agile.json".into(), "/rest/agile/1.0".into()),
    ];
    assert_eq!(s.apis[0].spec.source, SpecSource::Documents(expected));
    let refused = |name: &str, text: &str, expected: &str| {
        let e = load(Some(&write(name, text)), env(&[]), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{name}: {e}");
    };
    let api = "[[api]]\nname = \"a\"\nupstream = \"http://a\"\n";
    refused(
        "both.toml",
        &format!(
            "{api}spec = \"a.json\"\ndocuments = [{{spec = \"b.json\", base_path = \"/b\"}}]\n"
        ),
        "both set",
    );
    refused(
        "base.toml",
        &format!("{api}documents = [{{spec = \"b.json\", base_path = \"b\"}}]\n"),
        "must start with `/`",
    );
    refused("neither.toml", api, "(or `documents`)");
    refused(
        "spec-base.toml",
        "[spec]\nbase_path = \"/x\"\ndocuments = [{spec = \"b.json\", base_path = \"/b\"}]\n[proxy]\nupstream = \"http://a\"\n",
        "instead of spec.path, spec.url and spec.base_path",
    );
}

#[test]
fn overlays_come_from_the_file_each_api_and_the_flag_in_order() {
    let file = write(
        "overlays.toml",
        "[[api]]\nname = \"a\"\nspec = \"a.json\"\nprefix = \"/a\"\nupstream = \"http://a\"\noverlays = [\"paging.yaml\", \"tasks.yaml\"]\n[[api]]\nname = \"b\"\nspec = \"b.json\"\nprefix = \"/b\"\nupstream = \"http://b\"\n",
    );
    let s = load(Some(&file), env(&[]), Vec::new()).unwrap();
    let overlays = |i: usize| s.apis[i].spec.load.overlays.clone();
    assert_eq!(
        overlays(0),
        [PathBuf::from("paging.yaml"), "tasks.yaml".into()]
    );
    assert!(overlays(1).is_empty(), "each API its own");
    let one = an_api("overlay-flag.toml");
    let flag = toml::Value::Array(vec![text("x.yaml"), text("y.yaml")]);
    let vars = env(&[("DRIFTWATCH_SPEC_OVERLAYS", "[\"e.yaml\"]")]);
    let from_env = load(Some(&one), vars.clone(), Vec::new()).unwrap();
    assert_eq!(
        from_env.apis[0].spec.load.overlays,
        [PathBuf::from("e.yaml")]
    );
    let flags = vec![("spec.overlays", "--overlay", flag)];
    let s = load(Some(&one), vars, flags).unwrap();
    assert_eq!(
        s.apis[0].spec.load.overlays,
        [PathBuf::from("x.yaml"), "y.yaml".into()]
    );
}

/// A config file `name` of one API, its spec an empty one, and nothing else.
fn an_api(name: &str) -> PathBuf {
    let spec = write(
        &format!("{name}.yaml"),
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n",
    );
    let text = format!(
        "[spec]\npath = \"{}\"\n[proxy]\nupstream = \"http://a\"\n",
        spec.display()
    );
    write(name, &text)
}

#[test]
fn telemetry_is_off_until_an_endpoint_is_named_and_otel_variables_name_one() {
    let file = an_api("telemetry.toml");
    let off = load(Some(&file), env(&[]), Vec::new()).unwrap();
    assert!(off.telemetry.export.is_none());
    let vars = env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cr%20t"),
        ("OTEL_SERVICE_NAME", "agent-proxy"),
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
    ]);
    let on = load(Some(&file), vars.clone(), Vec::new()).unwrap();
    let export = on.telemetry.export.unwrap();
    assert_eq!(export.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(export.headers[0].1, "s3cr t");
    assert!(
        !format!("{export:?}").contains("s3cr"),
        "Debug hides header values"
    );
    assert_eq!(export.service_name, "agent-proxy");
    assert_eq!(export.sampler, Sampler::ParentBased(Root::Ratio(0.25)));
    assert_eq!(export.propagation, Propagation::WhenAbsent);
    // driftwatch's own variable wins over the SDK's; a signal's endpoint is taken whole.
    let mut mine = vars.clone();
    mine.push(("DRIFTWATCH_TELEMETRY_SERVICE_NAME".into(), "dw".into()));
    mine.push((
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".into(),
        "https://c/x/traces".into(),
    ));
    let export = load(Some(&file), mine, Vec::new())
        .unwrap()
        .telemetry
        .export
        .unwrap();
    assert_eq!(export.service_name, "dw");
    assert_eq!(export.endpoint, "https://c/x/traces");
    // ... but not over driftwatch's own endpoint, set by a layer above it.
    let mut mine_too = vars.clone();
    mine_too.push((
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".into(),
        "https://c/x/traces".into(),
    ));
    mine_too.push((
        "DRIFTWATCH_TELEMETRY_ENDPOINT".into(),
        "http://mine:4318".into(),
    ));
    let export = load(Some(&file), mine_too, Vec::new())
        .unwrap()
        .telemetry
        .export
        .unwrap();
    assert_eq!(export.endpoint, "http://mine:4318/v1/traces");
}

#[test]
fn a_bad_telemetry_setting_is_refused_naming_its_key_or_variable() {
    let file = an_api("telemetry-bad.toml");
    let refused = |pairs: &[(&str, &str)]| {
        load(Some(&file), env(pairs), Vec::new())
            .unwrap_err()
            .to_string()
    };
    // driftwatch's own keys: a pod's OTEL_* values are read leniently (tests/otel_env.rs).
    let endpoint = ("DRIFTWATCH_TELEMETRY_ENDPOINT", "http://c:4318");
    let sampler = refused(&[endpoint, ("DRIFTWATCH_TELEMETRY_SAMPLER", "sometimes")]);
    assert!(
        sampler.contains("telemetry.sampler") && sampler.contains("DRIFTWATCH_TELEMETRY_SAMPLER"),
        "{sampler}"
    );
    let ratio = refused(&[
        endpoint,
        ("DRIFTWATCH_TELEMETRY_SAMPLER", "traceidratio"),
        ("DRIFTWATCH_TELEMETRY_SAMPLER_ARG", "2"),
    ]);
    assert!(ratio.contains("telemetry.sampler_arg"), "{ratio}");
    let userinfo = refused(&[("DRIFTWATCH_TELEMETRY_ENDPOINT", "http://u:p@c:4318")]);
    assert!(
        userinfo.contains("credentials") && !userinfo.contains("u:p"),
        "{userinfo}"
    );
    // Another scheme, a token as the user or in the query: none of it said.
    for url in [
        "grpc://u:tok3n@c:4317",
        "ftp://tok3n@c/x",
        "grpc://c/x?key=tok3n",
    ] {
        let e = refused(&[("DRIFTWATCH_TELEMETRY_ENDPOINT", url)]);
        assert!(!e.contains("tok3n"), "{e}");
    }
    for (var, value) in [
        ("DRIFTWATCH_TELEMETRY_EXPORTER", "jaeger"),
        ("DRIFTWATCH_TELEMETRY_COMPRESSION", "br"),
        ("DRIFTWATCH_TELEMETRY_CERTIFICATE", "/nonexistent/ca.pem"),
        ("DRIFTWATCH_TELEMETRY_CLIENT_KEY", "/nonexistent/key.pem"),
    ] {
        let e = refused(&[endpoint, (var, value)]);
        assert!(e.contains(var), "{var}: {e}");
    }
    let propagation = refused(&[endpoint, ("DRIFTWATCH_TELEMETRY_PROPAGATION", "sometimes")]);
    assert!(
        propagation.contains("telemetry.propagation"),
        "{propagation}"
    );
    assert!(SECTIONS.contains(&"telemetry"));
}

mod otel_env;
