//! The CI formats `check`, `diff` and `tools` share: SARIF 2.1.0 (GitHub code scanning,
//! GitLab), JUnit XML (every CI's test tab) and GitHub workflow commands (annotations on the
//! pull request). Each command turns what it found into [`Annotation`]s, one per distinct
//! thing (for `check`, a group of findings, never one per exchange: CI shows a few dozen lines,
//! and GitHub keeps only the first ten annotations of each level per step), tied to a line of
//! the file a reviewer would open: the spec's operation, or the catalog's tool.

use std::io::Write;

use serde_json::{Value, json};

/// Which of the three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CiFormat {
    Sarif,
    Junit,
    Github,
}

/// How loud: `Error` when it fails the job (`--fail-on`), else by its own weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
    Note,
}

impl Level {
    /// A severity's own weight: critical and error are errors, info a note.
    pub fn weight(severity: crate::finding::Severity) -> Level {
        use crate::finding::Severity;
        match severity {
            Severity::Critical | Severity::Error => Level::Error,
            Severity::Warning => Level::Warning,
            Severity::Info => Level::Note,
        }
    }

    /// The level of something that fails the job, or else of its own weight (never an error:
    /// an error annotation on a green job misleads).
    pub fn of(fails: bool, weight: Level) -> Level {
        match (fails, weight) {
            (true, _) => Level::Error,
            (false, Level::Error) => Level::Warning,
            (false, weight) => weight,
        }
    }

    fn sarif(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
        }
    }

    fn github(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "notice",
        }
    }
}

/// One thing found, where to show it.
#[derive(Clone, Debug)]
pub struct Annotation {
    /// A stable rule id: the finding, change or defect kind (`silent_clear_risk`).
    pub rule: String,
    pub level: Level,
    /// True when it reaches `--fail-on`: a JUnit failure.
    pub fails: bool,
    /// One short line: what and where (`updateChannel body /graphicsElementIds`).
    pub title: String,
    pub message: String,
    /// The file to open, relative to where the command ran (as given on its command line).
    pub file: String,
    /// 1-based; 1 when the thing has no line of its own.
    pub line: usize,
    /// The operation, for SARIF's logical location and JUnit's class name.
    pub operation: Option<String>,
    /// Extra facts for SARIF's property bag (counts, first exchanges).
    pub properties: serde_json::Map<String, Value>,
}

/// What ran, for the headers of each format.
pub struct Run<'a> {
    /// `check`, `diff` or `tools`.
    pub command: &'static str,
    /// The name of the one passing JUnit test when nothing was found.
    pub clean: String,
    /// The last line of the GitHub output (a plain log line, not an annotation).
    pub summary: String,
    pub annotations: &'a [Annotation],
}

pub fn write(out: &mut dyn Write, format: CiFormat, run: &Run) -> std::io::Result<()> {
    match format {
        CiFormat::Sarif => {
            serde_json::to_writer_pretty(&mut *out, &sarif(run))?;
            writeln!(out)
        }
        CiFormat::Junit => junit(out, run),
        CiFormat::Github => github(out, run),
    }
}

/// A SARIF 2.1.0 log with one run: the rules used, then one result per annotation.
fn sarif(run: &Run) -> Value {
    let mut rules: Vec<&str> = run.annotations.iter().map(|a| a.rule.as_str()).collect();
    rules.sort_unstable();
    rules.dedup();
    let results: Vec<Value> = run
        .annotations
        .iter()
        .map(|a| {
            let index = rules.binary_search(&a.rule.as_str()).unwrap_or_default();
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": { "uri": uri(&a.file) },
                    "region": { "startLine": a.line.max(1) },
                },
            });
            if let Some(op) = &a.operation {
                location["logicalLocations"] =
                    json!([{ "fullyQualifiedName": op, "kind": "function" }]);
            }
            json!({
                "ruleId": a.rule,
                "ruleIndex": index,
                "level": a.level.sarif(),
                "message": { "text": a.message },
                "locations": [location],
                "partialFingerprints": { "driftwatch/v1": fingerprint(run.command, a) },
                "properties": a.properties,
            })
        })
        .collect();
    let rules: Vec<Value> = rules
        .iter()
        .map(|id| json!({ "id": id, "name": id, "shortDescription": { "text": id.replace('_', " ") } }))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "driftwatch",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "automationDetails": { "id": format!("driftwatch/{}/", run.command) },
            "results": results,
        }],
    })
}

/// The same thing found again (another run, another line number) keeps its fingerprint, so
/// code scanning tracks it instead of opening a new alert.
fn fingerprint(command: &str, a: &Annotation) -> String {
    use std::hash::Hasher;
    let mut h = siphasher::sip128::SipHasher13::new();
    for part in [
        command,
        &a.rule,
        a.operation.as_deref().unwrap_or(""),
        &a.title,
    ] {
        h.write(part.as_bytes());
        h.write_u8(0);
    }
    format!(
        "{:032x}",
        siphasher::sip128::Hasher128::finish128(&h).as_u128()
    )
}

/// A relative path as a URI reference (SARIF's `uri`): what a path may hold that a URI may not
/// is percent-encoded; an absolute path becomes a `file://` URI.
fn uri(path: &str) -> String {
    use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
    const KEEP: &AsciiSet = &CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'[')
        .add(b'\\')
        .add(b']')
        .add(b'^')
        .add(b'`')
        .add(b'{')
        .add(b'|')
        .add(b'}');
    let encoded = utf8_percent_encode(path, KEEP).to_string();
    match encoded.starts_with('/') {
        true => format!("file://{encoded}"),
        false => encoded,
    }
}

/// One test suite; a test case per annotation (classed by operation), failed when it reaches
/// `--fail-on`; one passing case when nothing was found.
fn junit(out: &mut dyn Write, run: &Run) -> std::io::Result<()> {
    let tests = run.annotations.len().max(1);
    let failures = run.annotations.iter().filter(|a| a.fails).count();
    let name = format!("driftwatch {}", run.command);
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="{n}" tests="{tests}" failures="{failures}" errors="0">"#,
        n = xml(&name)
    )?;
    writeln!(
        out,
        r#"  <testsuite name="{n}" tests="{tests}" failures="{failures}" errors="0" skipped="0">"#,
        n = xml(&name)
    )?;
    if run.annotations.is_empty() {
        writeln!(
            out,
            r#"    <testcase classname="{n}" name="{c}"/>"#,
            n = xml(&name),
            c = xml(&run.clean)
        )?;
    }
    for a in run.annotations {
        let class = a.operation.as_deref().unwrap_or(&name);
        writeln!(
            out,
            r#"    <testcase classname="{}" name="{}" file="{}" line="{}">"#,
            xml(class),
            xml(&format!("{} {}", a.rule, a.title)),
            xml(&a.file),
            a.line
        )?;
        let body = xml(&format!("{}\n{}:{}", a.message, a.file, a.line));
        match a.fails {
            true => writeln!(
                out,
                r#"      <failure type="{}" message="{}">{body}</failure>"#,
                xml(&a.rule),
                xml(&a.message)
            )?,
            false => writeln!(out, "      <system-out>{body}</system-out>")?,
        }
        writeln!(out, "    </testcase>")?;
    }
    writeln!(out, "  </testsuite>\n</testsuites>")
}

/// Text for an XML attribute or element: the five entities, and the characters XML 1.0 does
/// not allow at all dropped (a finding's message quotes names from the network).
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// `::error file=F,line=L,title=T::message`, one a line, then the summary as a plain line.
fn github(out: &mut dyn Write, run: &Run) -> std::io::Result<()> {
    for a in run.annotations {
        writeln!(
            out,
            "::{} file={},line={},title={}::{}",
            a.level.github(),
            property(&a.file),
            a.line,
            property(&format!("{} {}", a.rule, a.title)),
            data(&a.message)
        )?;
    }
    writeln!(out, "{}", data(&run.summary))
}

/// A workflow command's message: `%`, CR and LF escaped, so a name from the network cannot
/// end the line and start a command of its own.
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as [`data`], and `:` and `,`.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Lines of a file a reviewer opens, to point an annotation at.
pub struct Lines {
    text: String,
}

impl Lines {
    pub fn new(text: String) -> Lines {
        Lines { text }
    }

    /// A spec file's text, read as the spec is read (gunzipped, bounded); a file that cannot
    /// be read again points everything at line 1.
    pub fn of_spec(path: &std::path::Path) -> Lines {
        Lines::new(crate::spec::read_text(path).unwrap_or_default())
    }

    /// The line of an operation: its `operationId`, or for an operation without one
    /// (`"PUT /channels/{id}"`) its method under its path; else the `paths` line; else 1. Also
    /// takes the `"PUT /channels/{id} (updateChannel)"` form.
    pub fn operation(&self, operation: &str) -> usize {
        let (route, id) = match operation
            .strip_suffix(')')
            .and_then(|o| o.rsplit_once(" ("))
        {
            Some((route, id)) => (route, id),
            None => (operation, operation),
        };
        let by_id = self.find(0, |l| l.contains("operationId") && value_is(l, id));
        let by_path = || {
            let (method, path) = route.split_once(' ')?;
            let at = self.find(0, |l| key_is(l, path))?;
            self.find(at, |l| key_is(l, &method.to_ascii_lowercase()))
                .or(Some(at))
        };
        by_id
            .or_else(by_path)
            .or_else(|| self.find(0, |l| key_is(l, "paths")))
            .unwrap_or(1)
    }

    /// The line of a JSON object's `"name": "<name>"` (a tool in a catalog); else 1.
    pub fn named(&self, name: &str) -> usize {
        self.find(0, |l| l.contains("\"name\"") && value_is(l, name))
            .unwrap_or(1)
    }

    /// The first line (1-based) at or after line `from` that `hit` accepts.
    fn find(&self, from: usize, hit: impl Fn(&str) -> bool) -> Option<usize> {
        let from = from.saturating_sub(1);
        (self.text.lines().skip(from).position(hit)).map(|i| from + i + 1)
    }
}

/// The line has `value` as a whole value: quoted, or after `: ` at the end of a YAML line.
fn value_is(line: &str, value: &str) -> bool {
    line.contains(&format!("\"{value}\""))
        || line.contains(&format!("'{value}'"))
        || line.trim_end().ends_with(&format!(": {value}"))
}

/// The line opens the key `key` (YAML `key:` or JSON `"key":`).
fn key_is(line: &str, key: &str) -> bool {
    let t = line.trim_start();
    [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ]
    .iter()
    .any(|k| t.starts_with(k.as_str()))
}

/// Counts and first exchanges, for a group of findings.
pub fn group_properties(count: usize, exchanges: &[usize]) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("count".into(), json!(count));
    map.insert("exchanges".into(), json!(exchanges));
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotation(message: &str, file: &str) -> Annotation {
        Annotation {
            rule: "silent_clear_risk".into(),
            level: Level::Error,
            fails: true,
            title: "updateChannel body /graphicsElementIds".into(),
            message: message.into(),
            file: file.into(),
            line: 7,
            operation: Some("updateChannel".into()),
            properties: Default::default(),
        }
    }

    fn render(format: CiFormat, annotations: &[Annotation]) -> String {
        let run = Run {
            command: "check",
            clean: "no drift".into(),
            summary: "1 finding".into(),
            annotations,
        };
        let mut out = Vec::new();
        write(&mut out, format, &run).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_github_message_cannot_start_a_command_of_its_own() {
        let hostile = annotation("a\n::error::forged 100%", "dir,x/spec:1.yaml");
        let out = render(CiFormat::Github, &[hostile]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "::error file=dir%2Cx/spec%3A1.yaml,line=7,title=silent_clear_risk updateChannel body /graphicsElementIds::a%0A::error::forged 100%25",
                "1 finding"
            ]
        );
    }

    #[test]
    fn junit_escapes_markup_and_drops_what_xml_cannot_hold() {
        let out = render(CiFormat::Junit, &[annotation("<b>&\"\u{1}'", "s.yaml")]);
        assert!(
            out.contains(r#"message="&lt;b&gt;&amp;&quot;&apos;""#),
            "{out}"
        );
        let clean = render(CiFormat::Junit, &[]);
        assert!(clean.contains(r#"tests="1" failures="0""#), "{clean}");
        assert!(clean.contains(r#"name="no drift"/>"#), "{clean}");
    }

    #[test]
    fn sarif_uris_are_uri_references() {
        assert_eq!(uri("specs/my api.yaml"), "specs/my%20api.yaml");
        assert_eq!(uri("/abs/p#1.yaml"), "file:///abs/p%231.yaml");
    }

    #[test]
    fn an_operation_is_found_by_its_id_or_its_method_under_its_path() {
        let yaml = "openapi: 3.0.3\npaths:\n  /a/{id}:\n    get:\n      operationId: getA\n    put:\n      summary: x\n";
        let lines = Lines::new(yaml.into());
        assert_eq!(lines.operation("getA"), 5);
        assert_eq!(lines.operation("PUT /a/{id}"), 6);
        assert_eq!(lines.operation("GET /a/{id} (getA)"), 5);
        assert_eq!(lines.operation("gone"), 2);
        let json = "{\n \"paths\": {\n  \"/a\": {\n   \"get\": {\"operationId\": \"getA\"}}}}";
        assert_eq!(Lines::new(json.into()).operation("getA"), 4);
        assert_eq!(Lines::new(String::new()).operation("getA"), 1);
    }
}
