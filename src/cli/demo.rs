//! `driftwatch demo`: runs the embedded Channels API, driftwatch in front of it and the stale
//! agent, and narrates what happens: first in observe mode (the silent clear happens, and is
//! reported), then in enforce mode (the harmful requests are refused), then in repair mode (the
//! stale rename is completed from a fresh read: the edit lands and nothing is erased), then
//! with a stale spec (the API's answers carry a field the spec lacks: the next silent clear).
//! Loopback only.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

mod mcp_act;
mod restart_act;

use clap::Args;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::config::Config;
use crate::demo::agent::{Agent, Call};
use crate::demo::{SPEC, SPEC_NAME, api};
use crate::policy::Mode;
use crate::proxy::Sidecar;
use crate::settings::Settings;

#[derive(Args, Debug, Default)]
pub struct DemoArgs {
    /// Leave the API and driftwatch running afterwards, and print curl commands to try.
    #[arg(long)]
    keep_running: bool,
    /// Serve only the embedded Channels API on this address (for `driftwatch serve
    /// --upstream`, and for the Prometheus end-to-end test), until interrupted.
    #[arg(long, value_name = "ADDR", conflicts_with = "keep_running")]
    api: Option<std::net::SocketAddr>,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(addr) = args.api {
        return runtime.block_on(async {
            let listener = TcpListener::bind(addr).await?;
            println!("Channels API on http://{}", listener.local_addr()?);
            tokio::select! {
                () = api::serve(listener) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            Ok(ExitCode::SUCCESS)
        });
    }
    let ok = runtime.block_on(story(&mut std::io::stdout(), args.keep_running))?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A running API and driftwatch in front of it.
struct Stage {
    api: SocketAddr,
    proxy: SocketAddr,
    admin: SocketAddr,
    sidecar: Arc<Sidecar>,
    stop: Option<oneshot::Sender<()>>,
    api_task: tokio::task::JoinHandle<()>,
}

impl Drop for Stage {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.api_task.abort();
    }
}

async fn stage(mode: Mode) -> anyhow::Result<Stage> {
    stage_with(mode, SPEC, |_| {}).await
}

async fn stage_with(
    mode: Mode,
    spec: &str,
    edit: impl FnOnce(&mut Config),
) -> anyhow::Result<Stage> {
    let api_listener = TcpListener::bind("127.0.0.1:0").await?;
    let api = api_listener.local_addr()?;
    let api_task = tokio::spawn(api::serve(api_listener));
    let mut config = Config::default();
    config.proxy.upstream = Some(format!("http://{api}"));
    config.proxy.mode = mode;
    config.events.output = "none".into();
    edit(&mut config);
    let settings = Settings::from_config(&config)?;
    let embedded = Some((Path::new(SPEC_NAME), spec.as_bytes()));
    let sidecar =
        Arc::new(crate::start::build(settings, embedded, crate::proxy::ToolSource::Header).await?);
    let proxy_listener = TcpListener::bind("127.0.0.1:0").await?;
    let admin_listener = TcpListener::bind("127.0.0.1:0").await?;
    let (proxy, admin) = (proxy_listener.local_addr()?, admin_listener.local_addr()?);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(crate::start::serve(
        proxy_listener,
        admin_listener,
        sidecar.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    Ok(Stage {
        api,
        proxy,
        admin,
        sidecar,
        stop: Some(stop),
        api_task,
    })
}

/// Narrates to `out`; `Ok(false)` when the story did not unfold as it should.
pub async fn story(out: &mut (dyn Write + Send), keep_running: bool) -> anyhow::Result<bool> {
    let mut ok = true;
    // Incidents keep values only behind the admin token: a random one, for this run alone.
    let token = demo_token()?;
    let observe = stage_with(Mode::Observe, SPEC, |c| {
        c.incidents.keep_values = true;
        c.admin.token_file = Some(token.clone());
    })
    .await?;
    let revision = observe.sidecar.revision();
    let spec = &revision.spec;
    writeln!(
        out,
        "driftwatch demo: a stale agent, its API, and driftwatch between them (all on 127.0.0.1)"
    )?;
    writeln!(
        out,
        "  API         http://{}  (embedded Channels API; PUT replaces the whole channel)",
        observe.api
    )?;
    writeln!(
        out,
        "  driftwatch  http://{}  admin http://{}",
        observe.proxy, observe.admin
    )?;
    writeln!(
        out,
        "  spec        {} (OpenAPI {}, revision {}, {} operations)\n",
        SPEC_NAME, spec.openapi, spec.revision, spec.operations
    )?;

    writeln!(
        out,
        "== Observe mode: every request is forwarded; drift is reported ==\n"
    )?;
    let mut agent = Agent::new(format!("http://{}", observe.proxy));
    let mut n = Narrator {
        out,
        stage: &observe,
        before: scrape(observe.admin).await?,
    };

    n.title("1. list_playouts: the tool still sends `page_size`; the spec renamed it `pageSize`")?;
    let call = agent.list_playouts().await?;
    let items = call.body["items"].as_array().map_or(0, Vec::len);
    n.call(
        &call,
        &format!("{items} items: the API ignored `page_size` and returned its default page"),
    )?;
    ok &= n.findings(&call, &["unknown_query_param"]).await?;

    n.title(
        "2. update_schedule: the tool sends padToNearestMinute as \"30\"; the spec says integer",
    )?;
    let call = agent.update_schedule().await?;
    n.call(&call, "the API refused it; the agent sees only a 400")?;
    ok &= n
        .findings(&call, &["body_type_mismatch", "upstream_rejected"])
        .await?;

    n.title("3. update_channel: GET channel 7, rename it, PUT it back through a tool schema without graphicsElementIds")?;
    let before = agent.get_channel().await?;
    let note = format!(
        "graphicsElementIds {}  (driftwatch remembers: non-empty)",
        before.body["graphicsElementIds"]
    );
    n.call(&before, &note)?;
    n.armed().await;
    let (put, fields) = agent.rename_channel(&before.body, "Retro TV HD").await?;
    n.call(
        &put,
        &format!("{fields} of the spec's 30 properties sent; the API accepted the replace"),
    )?;
    ok &= n
        .findings(&put, &["silent_clear_risk", "silent_clear"])
        .await?;
    let after = agent.get_channel().await?;
    n.call(
        &after,
        &format!(
            "graphicsElementIds {}  <- silently cleared by the PUT",
            after.body["graphicsElementIds"]
        ),
    )?;
    ok &= expect(
        n.out,
        after.body["graphicsElementIds"] == serde_json::json!([]),
        "observe mode lets the PUT clear graphicsElementIds",
    )?;
    ok &= incident_act(&mut n, &mut agent, &put).await?;
    drop(n);
    drop(observe);
    let _ = std::fs::remove_file(&token);

    let enforce = stage(Mode::Enforce).await?;
    writeln!(
        out,
        "\n== Enforce mode: the same agent against a fresh API; harmful requests are refused =="
    )?;
    writeln!(
        out,
        "   (by default, findings of severity error and critical block)\n"
    )?;
    let mut agent = Agent::new(format!("http://{}", enforce.proxy));
    let mut n = Narrator {
        out,
        stage: &enforce,
        before: scrape(enforce.admin).await?,
    };
    n.title("1. list_playouts with `page_size`")?;
    let call = agent.list_playouts().await?;
    ok &= n.refused(&call, 422)?;
    n.title("2. update_schedule with padToNearestMinute \"30\"")?;
    let call = agent.update_schedule().await?;
    ok &= n.refused(&call, 422)?;
    n.title("3. update_channel without graphicsElementIds")?;
    let before = agent.get_channel().await?;
    n.armed().await;
    let (put, _) = agent.rename_channel(&before.body, "Retro TV HD").await?;
    ok &= n.refused(&put, 409)?;
    let after = agent.get_channel().await?;
    n.call(
        &after,
        &format!(
            "graphicsElementIds {}  <- intact",
            after.body["graphicsElementIds"]
        ),
    )?;
    ok &= expect(
        n.out,
        after.body["graphicsElementIds"] == serde_json::json!([3, 7]),
        "enforce mode keeps graphicsElementIds",
    )?;
    n.metrics().await?;
    drop(n);
    drop(enforce);
    ok &= restart_act::restart_act(out).await?;

    ok &= repair_act(out).await?;
    ok &= stale_spec_act(out).await?;
    ok &= mcp_act::mcp_act(out).await?;

    writeln!(
        out,
        "\nWhat an operator has now: /metrics for Prometheus, /findings for the last findings,"
    )?;
    writeln!(
        out,
        "/incidents (and `driftwatch incident`) for each silent clear's story and its restore,"
    )?;
    writeln!(
        out,
        "and one JSON audit event per drifted request naming request id, tool, operation and field."
    )?;
    if keep_running {
        let live = stage(Mode::Observe).await?;
        writeln!(out, "\nStill running (observe mode). Try:")?;
        writeln!(
            out,
            "  curl -s 'http://{}/api/v1/playouts?page_size=2'",
            live.proxy
        )?;
        writeln!(out, "  curl -s http://{}/api/v1/channels/7", live.proxy)?;
        writeln!(
            out,
            "  curl -s http://{}/findings | head -c 1500; echo",
            live.admin
        )?;
        writeln!(
            out,
            "  curl -s http://{}/metrics | grep '^driftwatch_findings'",
            live.admin
        )?;
        writeln!(out, "Press Ctrl-C to stop.")?;
        out.flush()?;
        tokio::signal::ctrl_c().await?;
    }
    Ok(ok)
}

/// The responder's part: the clear as one incident (`driftwatch incident` prints the same),
/// and its restore sent through driftwatch: the value is back and the rename stays.
async fn incident_act(
    n: &mut Narrator<'_>,
    agent: &mut Agent,
    put: &crate::demo::agent::Call,
) -> anyhow::Result<bool> {
    use crate::incident::{Format, Query, View, render};
    writeln!(n.out)?;
    n.title("4. the incident: the page leads to one story, with the value the PUT erased")?;
    let q = Query {
        id: Some(put.request_id.clone()),
        ..Query::default()
    };
    let incidents = n.stage.sidecar.query(q).await;
    let api = format!("http://{}", n.stage.proxy);
    for line in render(&incidents, Format::Text, &api).lines() {
        writeln!(n.out, "   {line}")?;
    }
    let Some(restore) = incidents
        .first()
        .and_then(|i| i.kept.as_ref()?.restore.clone())
    else {
        return expect(n.out, false, "the incident holds the restore");
    };
    let sent = agent.restore(&restore).await?;
    n.call(&sent, "the restore, sent through driftwatch")?;
    let back = agent.get_channel().await?;
    let note = format!(
        "graphicsElementIds {}, name {}  <- restored, the rename kept",
        back.body["graphicsElementIds"], back.body["name"]
    );
    n.call(&back, &note)?;
    let restored = back.body["graphicsElementIds"] == serde_json::json!([3, 7])
        && back.body["name"] == "Retro TV HD";
    expect(
        n.out,
        restored,
        "the incident's restore gives graphicsElementIds back",
    )
}

/// A file holding a random admin token, for the demo's sidecar alone.
fn demo_token() -> anyhow::Result<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("driftwatch-demo-token-{}", uuid::Uuid::new_v4()));
    std::fs::write(&path, uuid::Uuid::new_v4().simple().to_string())?;
    Ok(path)
}

/// Repair: the stale rename again, with `silent_clear_risk = "repair"`. driftwatch reads the
/// channel itself, fills what the tool left out and sends the PUT guarded by the read's ETag:
/// the rename lands and the list stays.
async fn repair_act(out: &mut (dyn Write + Send)) -> anyhow::Result<bool> {
    let repair = stage_with(Mode::Enforce, SPEC, |c| {
        let repair = crate::policy::Action::Repair;
        c.enforce
            .kinds
            .insert(crate::finding::Kind::SilentClearRisk, repair);
    })
    .await?;
    writeln!(
        out,
        "\n== Repair mode: the same rename, completed from a fresh read instead of refused =="
    )?;
    writeln!(out, "   ([enforce.kinds] silent_clear_risk = \"repair\")\n")?;
    let mut agent = Agent::new(format!("http://{}", repair.proxy));
    let mut n = Narrator {
        out,
        stage: &repair,
        before: scrape(repair.admin).await?,
    };
    n.title("1. update_channel without graphicsElementIds")?;
    let before = agent.get_channel().await?;
    n.armed().await;
    let (put, _) = agent.rename_channel(&before.body, "Retro TV HD").await?;
    let events = repair.sidecar.sinks.recent.query(&Default::default());
    let done = events.iter().find(|e| e.request_id == put.request_id);
    let filled = done.and_then(|e| e.repair.as_ref());
    let note = filled.map_or("no repair was made".into(), |r| {
        let read = r.read_request_id.as_deref().unwrap_or("-");
        let guard = if r.if_match {
            ", sent with If-Match"
        } else {
            ""
        };
        format!(
            "driftwatch read channel 7 [{read}], filled {}{guard}",
            r.fields.join(", ")
        )
    });
    n.call(&put, &note)?;
    let mut ok = n.findings(&put, &["silent_clear_risk"]).await?;
    let after = agent.get_channel().await?;
    let (name, ids) = (&after.body["name"], &after.body["graphicsElementIds"]);
    n.call(
        &after,
        &format!("name {name}, graphicsElementIds {ids}  <- renamed, and kept"),
    )?;
    let kept = *name == "Retro TV HD" && *ids == serde_json::json!([3, 7]);
    ok &= expect(
        n.out,
        kept,
        "repair applies the rename and keeps graphicsElementIds",
    )?;
    Ok(ok)
}

/// The third act: the API moved on and the spec did not. The agent's requests are fine; the
/// API's answers carry a field the spec has never heard of, on a resource with a full replace.
async fn stale_spec_act(out: &mut (dyn Write + Send)) -> anyhow::Result<bool> {
    let Some(spec) = crate::demo::stale_spec() else {
        return expect(out, false, "the embedded spec declares graphicsElementIds");
    };
    let stale = stage_with(Mode::Observe, &spec, |_| {}).await?;
    writeln!(
        out,
        "\n== A stale spec: generated before the API grew graphicsElementIds (revision {}) ==\n",
        stale.sidecar.revision().spec.revision
    )?;
    let mut agent = Agent::new(format!("http://{}", stale.proxy));
    let mut n = Narrator {
        out,
        stage: &stale,
        before: scrape(stale.admin).await?,
    };
    n.title("1. get_channel: a clean request; the answer carries a field the spec does not know")?;
    let call = agent.get_channel().await?;
    n.call(
        &call,
        &format!(
            "graphicsElementIds {}  (every client built from this spec drops it)",
            call.body["graphicsElementIds"]
        ),
    )?;
    n.findings(
        &call,
        &["undeclared_response_field", "replace_will_drop_field"],
    )
    .await
}

struct Narrator<'a> {
    out: &'a mut (dyn Write + Send),
    stage: &'a Stage,
    before: BTreeMap<String, f64>,
}

impl Narrator<'_> {
    fn title(&mut self, title: &str) -> std::io::Result<()> {
        writeln!(self.out, "{title}")
    }

    fn call(&mut self, call: &Call, note: &str) -> std::io::Result<()> {
        writeln!(
            self.out,
            "   agent       {} {}  [{}]",
            call.method, call.target, call.request_id
        )?;
        writeln!(self.out, "   API         {} {}", call.status, note)
    }

    /// Wait (bounded) until driftwatch has read the GET response it just forwarded: it reads
    /// copies after the last byte went to the agent, off the response path.
    async fn armed(&self) {
        for _ in 0..400 {
            if !self.stage.sidecar.memory.is_empty() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Print driftwatch's findings for the call (waiting, bounded, for the last expected kind:
    /// a confirmation arrives after the response) and the metric lines that moved.
    async fn findings(&mut self, call: &Call, expected: &[&str]) -> anyhow::Result<bool> {
        let mut found = Vec::new();
        for _ in 0..400 {
            let events = self.stage.sidecar.sinks.recent.query(&Default::default());
            found = events
                .iter()
                .rev()
                .filter(|e| e.request_id == call.request_id)
                .flat_map(|e| e.findings.iter().map(|f| f.finding.clone()))
                .collect::<Vec<_>>();
            if found.last().map(|f| f.kind.as_str()) == expected.last().copied() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let mut kinds = Vec::new();
        for f in &found {
            let line = format!(
                "   driftwatch  {:<8} {} {} {}: {}",
                f.severity.as_str(),
                f.kind,
                f.location,
                f.field,
                f.message
            );
            writeln!(self.out, "{line}")?;
            kinds.push(f.kind.as_str());
        }
        self.metrics().await?;
        writeln!(self.out)?;
        expect(
            self.out,
            kinds == expected,
            &format!("driftwatch reports {expected:?}"),
        )
    }

    fn refused(&mut self, call: &Call, status: u16) -> anyhow::Result<bool> {
        writeln!(
            self.out,
            "   agent       {} {}  [{}]",
            call.method, call.target, call.request_id
        )?;
        writeln!(
            self.out,
            "   driftwatch  {} refused, never sent to the API",
            call.status
        )?;
        writeln!(
            self.out,
            "               detail: {}\n",
            call.body["detail"].as_str().unwrap_or("")
        )?;
        expect(
            self.out,
            call.status == status,
            &format!("the request is refused with {status}"),
        )
    }

    async fn metrics(&mut self) -> anyhow::Result<()> {
        let now = scrape(self.stage.admin).await?;
        for (series, value) in &now {
            let was = self.before.get(series).copied().unwrap_or(0.0);
            let shown = [
                "driftwatch_findings_total",
                "driftwatch_unknown_query_params_total",
                "driftwatch_blocked_total",
                "driftwatch_silent_clears_total",
                "driftwatch_repairs_total",
                "driftwatch_reads_before_write_total",
            ];
            if *value != was && shown.iter().any(|s| series.starts_with(s)) {
                writeln!(self.out, "   metric      {series} {was} -> {value}")?;
            }
        }
        self.before = now;
        Ok(())
    }
}

fn expect(out: &mut (dyn Write + Send), held: bool, what: &str) -> anyhow::Result<bool> {
    if !held {
        writeln!(out, "   UNEXPECTED: the demo expected that {what}")?;
    }
    Ok(held)
}

/// `/metrics` as series to value, fetched over HTTP like Prometheus would.
async fn scrape(admin: SocketAddr) -> anyhow::Result<BTreeMap<String, f64>> {
    let client: hyper_util::client::legacy::Client<_, http_body_util::Empty<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let resp = client
        .get(format!("http://{admin}/metrics").parse()?)
        .await?;
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await?
        .to_bytes();
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect())
}
