//! Incidents as `driftwatch incident` prints them: text for a terminal, Markdown for a
//! postmortem, JSON for a program. The restore is a `curl` command ready to paste: the API's
//! base URL is `$API` unless given, and the credentials are the responder's to add (driftwatch
//! never keeps them).

use std::fmt::Write;

use super::{Incident, Restore, State};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

/// `incidents` in `format`; `api` is the base URL the restore's `curl` is sent to.
pub fn render(incidents: &[Incident], format: Format, api: &str) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(incidents).unwrap_or_default() + "\n",
        Format::Text if incidents.is_empty() => "no incidents\n".into(),
        Format::Markdown if incidents.is_empty() => "No incidents.\n".into(),
        Format::Text => incidents
            .iter()
            .map(|i| text(i, api))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Markdown => (incidents.iter())
            .map(|i| markdown(i, api))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn state(i: &Incident) -> &'static str {
    match i.state {
        State::Cleared => "CLEARED",
        State::AtRisk => "AT RISK (forwarded, not yet seen empty)",
        State::Survived => "SURVIVED (a later read shows the fields kept: nothing lost)",
    }
}

fn at(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

fn text(i: &Incident, api: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "incident {}: {} {}",
        i.id,
        i.fields.join(", "),
        state(i)
    );
    let _ = writeln!(
        out,
        "  {} {}  ({}, {} mode, spec {})",
        i.method, i.path, i.operation, i.mode, i.spec_revision
    );
    if let Some(api) = &i.api {
        let _ = writeln!(out, "  api: {api}");
    }
    let _ = writeln!(out, "  tool: {}", i.tool.as_deref().unwrap_or("(none)"));
    if let Some(trace) = &i.trace_id {
        let _ = writeln!(out, "  trace: {trace}");
    }
    let _ = writeln!(out, "  timeline:");
    for s in &i.timeline {
        let _ = writeln!(
            out,
            "    {}  {:<36} {}  {}{}{}",
            at(s.at),
            s.what.says(),
            s.request_id,
            s.operation.as_deref().unwrap_or(""),
            s.tool
                .as_ref()
                .map(|t| format!("  tool {t}"))
                .unwrap_or_default(),
            s.status.map(|c| format!("  {c}")).unwrap_or_default(),
        );
    }
    match &i.kept {
        None => {
            let _ = writeln!(out, "  values: not kept (incidents.keep_values is off)");
        }
        Some(kept) => {
            let _ = writeln!(out, "  held before the write:");
            for l in &kept.lost {
                let _ = writeln!(out, "    {} = {}{}", l.field, l.value, read_name(l));
            }
            if let Some(r) = &kept.restore {
                let _ = writeln!(out, "  restore (add the API's credentials):");
                for line in curl(r, api).lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    out
}

fn markdown(i: &Incident, api: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Silent clear `{}`: {}\n", i.id, i.fields.join(", "));
    let _ = writeln!(out, "- **State:** {}", state(i));
    let _ = writeln!(
        out,
        "- **Write:** `{} {}` ({}), {} mode, spec revision `{}`",
        i.method, i.path, i.operation, i.mode, i.spec_revision
    );
    let _ = writeln!(
        out,
        "- **Tool:** {}",
        i.tool
            .as_deref()
            .map_or("(none)".into(), |t| format!("`{t}`"))
    );
    if let Some(trace) = &i.trace_id {
        let _ = writeln!(out, "- **Trace:** `{trace}`");
    }
    let _ = writeln!(
        out,
        "\n| When | What | Request | Operation | Tool | Status |\n|---|---|---|---|---|---|"
    );
    for s in &i.timeline {
        let _ = writeln!(
            out,
            "| {} | {} | `{}` | {} | {} | {} |",
            at(s.at),
            s.what.says(),
            s.request_id,
            s.operation.as_deref().unwrap_or(""),
            s.tool.as_deref().unwrap_or(""),
            s.status.map(|c| c.to_string()).unwrap_or_default(),
        );
    }
    if let Some(kept) = &i.kept {
        let _ = writeln!(out, "\n**Held before the write:**\n");
        for l in &kept.lost {
            let _ = writeln!(out, "- `{}` = `{}`{}", l.field, l.value, read_name(l));
        }
        if let Some(r) = &kept.restore {
            let _ = writeln!(
                out,
                "\n**Restore** (add the API's credentials):\n\n```sh\n{}```",
                curl(r, api)
            );
        }
    }
    out
}

/// What a field the read model names otherwise says: its value is the read's shape, not in
/// the restore.
fn read_name(l: &super::Lost) -> String {
    match &l.read_field {
        Some(read) => {
            format!("  (as the read's `{read}`; not in the restore: write it in the write's shape)")
        }
        None => String::new(),
    }
}

/// The restore as a `curl` command: the body on stdin from a quoted here-document, so no
/// byte of it is read by the shell.
pub fn curl(r: &Restore, api: &str) -> String {
    let url = match api {
        "$API" => format!("\"$API\"{}", quote(&r.path)),
        base => quote(&format!("{}{}", base.trim_end_matches('/'), r.path)),
    };
    let body = serde_json::to_string(&r.body).unwrap_or_default();
    format!(
        "curl -X {} {url} -H {} --data-binary @- <<'DRIFTWATCH_RESTORE'\n{body}\nDRIFTWATCH_RESTORE\n",
        r.method,
        quote(&format!("content-type: {}", r.content_type)),
    )
}

/// `text` in single quotes for a POSIX shell (a `'` inside closes, escapes and reopens).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_curl_quotes_the_path_and_reads_the_body_unexpanded() {
        let r = Restore {
            method: "PUT".into(),
            path: "/c/it's $(rm)".into(),
            content_type: "application/json".into(),
            body: json!({"a": "$HOME `x`"}),
        };
        let c = curl(&r, "http://api:8080/");
        assert!(
            c.starts_with("curl -X PUT 'http://api:8080/c/it'\\''s $(rm)' "),
            "{c}"
        );
        assert!(
            c.contains("<<'DRIFTWATCH_RESTORE'\n{\"a\":\"$HOME `x`\"}\nDRIFTWATCH_RESTORE\n"),
            "{c}"
        );
        let c = curl(&r, "$API");
        assert!(
            c.starts_with("curl -X PUT \"$API\"'/c/it'\\''s $(rm)' "),
            "{c}"
        );
    }
}
