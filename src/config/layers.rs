//! Layering the config's three sources, each key remembering where it came from: the file, then
//! `DRIFTWATCH_<SECTION>_<KEY>` environment variables, then command-line flags, each overriding
//! the one before (flags > env > file, as 12-factor tools and clap's own `env` do). Each layer's
//! values are checked on their own, so an error names the key and the source that set it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Config, SECTIONS};

/// Where a setting's value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Nobody set it: the documented default (or a value built in code, as the demo does).
    Default,
    File {
        path: PathBuf,
        line: Option<usize>,
    },
    Env(String),
    Flag(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "the default"),
            Origin::File { path, line: None } => write!(f, "{}", path.display()),
            Origin::File {
                path,
                line: Some(n),
            } => write!(f, "{} line {n}", path.display()),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// The origin of every key that was set, by `section.key`, the variables that carry the
/// prefix but were left out as Kubernetes service links (see [`service_link`]), and what the
/// `OTEL_*` layer left out.
#[derive(Debug, Clone, Default)]
pub struct Origins(HashMap<String, Origin>, Vec<String>, super::otel::Notes);

impl Origins {
    pub fn of(&self, key: &str) -> Origin {
        self.0.get(key).cloned().unwrap_or(Origin::Default)
    }

    /// The `DRIFTWATCH_` variables left out as Kubernetes service links, by name.
    pub fn service_links(&self) -> &[String] {
        &self.1
    }

    /// What the `OTEL_*` layer left out, for the start to say once.
    pub fn otel(&self) -> &super::otel::Notes {
        &self.2
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The file is not TOML, or not in the config's shape (toml's message gives line and column).
    #[error("{}: {reason}", file.display())]
    File { file: PathBuf, reason: String },
    /// One value is wrong; `key` is `section.key` (or the variable's name when it maps to none).
    #[error("{key} (set by {origin}): {reason}")]
    Invalid {
        key: String,
        origin: Origin,
        reason: String,
    },
    /// A value this command needs was set nowhere; `how` says where it can be.
    #[error("{key} is not set: {how}")]
    Missing { key: String, how: String },
}

/// A flag's override: the key it sets, the flag's own spelling, the value.
pub type Flag = (&'static str, &'static str, toml::Value);

/// The raw sources of one config, before they are merged.
#[derive(Default)]
pub struct Layers<'a> {
    pub file: Option<&'a Path>,
    pub env: Vec<(String, String)>,
    pub flags: Vec<Flag>,
}

impl Layers<'_> {
    /// Merge file, env, flags (in rising precedence) into one `Config` and the origin of each key.
    pub fn merge(self) -> Result<(Config, Origins), ConfigError> {
        let mut merged = Merged::default();
        if let Some(path) = self.file {
            merged.file(path)?;
        }
        let otel = super::otel::read(&self.env);
        for (var, key, value) in otel.keys {
            merged.set("telemetry", key, value, Origin::Env(var.into()))?;
        }
        merged.origins.2 = otel.notes;
        for (name, value) in self.env {
            if service_link(&name, &value) {
                merged.origins.1.push(name);
                continue;
            }
            let Some((section, key)) = env_key(&name)? else {
                continue;
            };
            merged.set(section, &key, scalar(&value), Origin::Env(name))?;
        }
        for (key, flag, value) in self.flags {
            let (section, name) = key.split_once('.').unwrap_or(("proxy", key));
            merged.set(section, name, value, Origin::Flag(flag))?;
        }
        let config = Config::deserialize(toml::Value::Table(merged.table)).map_err(|e| {
            ConfigError::Invalid {
                key: "config".into(),
                origin: Origin::Default,
                reason: e.to_string(),
            }
        })?;
        Ok((config, merged.origins))
    }
}

#[derive(Default)]
struct Merged {
    table: toml::Table,
    origins: Origins,
}

impl Merged {
    fn file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            file: path.into(),
            source,
        })?;
        let shape = |e: toml::de::Error| ConfigError::File {
            file: path.into(),
            reason: e.to_string(),
        };
        self.table = toml::from_str(&text).map_err(shape)?;
        if let Some(toml::Value::Table(proxy)) = self.table.get_mut("proxy")
            && let Some(mode) = proxy.remove("mode")
        {
            proxy.insert(kind_alias("proxy", "mode", &mode).into(), mode);
        }
        if let Err(e) = Config::deserialize(toml::Value::Table(self.table.clone())) {
            // toml's own reading of the text says where (line and column), when it fails too.
            toml::from_str::<Config>(&text).map_err(shape)?;
            return Err(ConfigError::File {
                file: path.into(),
                reason: e.to_string(),
            });
        }
        let lines = key_lines(&text);
        for (section, value) in &self.table {
            // `[[api]]` is an array of tables: each key of each is the file's, though its line
            // is not kept (before, an `[[api]]` error said "set by the default").
            if let Some(tables) = value.as_array() {
                let keys = tables
                    .iter()
                    .filter_map(toml::Value::as_table)
                    .flat_map(|t| t.keys());
                for key in keys {
                    let origin = Origin::File {
                        path: path.into(),
                        line: None,
                    };
                    self.origins
                        .0
                        .entry(format!("{section}.{key}"))
                        .or_insert(origin);
                }
                continue;
            }
            let Some(keys) = value.as_table() else {
                continue;
            };
            for key in keys.keys() {
                let name = format!("{section}.{key}");
                let line = lines.get(&name).copied();
                let origin = Origin::File {
                    path: path.into(),
                    line,
                };
                self.origins.0.insert(name, origin);
            }
        }
        Ok(())
    }

    /// Set one key over the layers below, after checking the value alone in the config's shape.
    fn set(
        &mut self,
        section: &str,
        key: &str,
        value: toml::Value,
        origin: Origin,
    ) -> Result<(), ConfigError> {
        let key = kind_alias(section, key, &value);
        let name = format!("{section}.{key}");
        let mut alone = toml::Table::new();
        alone.insert(section.into(), one(key, value.clone()));
        if let Err(e) = Config::deserialize(toml::Value::Table(alone)) {
            return Err(ConfigError::Invalid {
                key: name,
                origin,
                reason: e.to_string(),
            });
        }
        let entry = self
            .table
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(t) = entry {
            // Where the spec comes from is one choice: a path set here replaces a url set
            // below, and the other way round.
            let other = match key {
                "path" if section == "spec" => Some("url"),
                "url" if section == "spec" => Some("path"),
                _ => None,
            };
            if let Some(other) = other {
                t.remove(other);
                self.origins.0.remove(&format!("spec.{other}"));
            }
            t.insert(key.to_string(), value);
        }
        self.origins.0.insert(name, origin);
        Ok(())
    }
}

/// `proxy.mode = "forward"` (or `"reverse"`) as `proxy.kind`: the mode is observe or enforce,
/// but "forward mode" is what proxies (mitmproxy's `--mode`) and our users call the other.
fn kind_alias<'k>(section: &str, key: &'k str, value: &toml::Value) -> &'k str {
    let listener = matches!(value.as_str(), Some("forward" | "reverse"));
    match (section, key) {
        ("proxy", "mode") if listener => "kind",
        _ => key,
    }
}

fn one(key: &str, value: toml::Value) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert(key.into(), value);
    toml::Value::Table(t)
}

/// `DRIFTWATCH_PROXY_LISTEN` as `("proxy", "listen")`; `None` for other variables.
fn env_key(name: &str) -> Result<Option<(&'static str, String)>, ConfigError> {
    let Some(rest) = name.strip_prefix("DRIFTWATCH_") else {
        return Ok(None);
    };
    let rest = rest.to_ascii_lowercase();
    let section = SECTIONS.iter().find(|s| rest.starts_with(&format!("{s}_")));
    match section {
        Some(section) => Ok(Some((section, rest[section.len() + 1..].to_string()))),
        None => Err(ConfigError::Invalid {
            key: name.into(),
            origin: Origin::Env(name.into()),
            reason: "unknown setting: expected DRIFTWATCH_<SECTION>_<KEY>, e.g. DRIFTWATCH_PROXY_UPSTREAM".into(),
        }),
    }
}

/// Whether a variable is one Kubernetes injects for a Service named `driftwatch` (or
/// `driftwatch-…`) in the namespace, by name and value: `<NAME>_SERVICE_HOST` (an address),
/// `<NAME>_SERVICE_PORT[_<PORT>]` (a number), `<NAME>_PORT` and `<NAME>_PORT_<N>_<PROTOCOL>`
/// (`tcp://address:port`), and the latter's `_PROTO`, `_PORT` and `_ADDR`. They share the
/// settings' prefix but are not settings (no setting's key has these shapes), so they are left
/// out, and said once, instead of stopping the sidecar; a misspelt setting is still an error.
pub fn service_link(name: &str, value: &str) -> bool {
    let Some(rest) = name.strip_prefix("DRIFTWATCH_") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('_').collect();
    let protocol = |p: &str| matches!(p, "TCP" | "UDP" | "SCTP");
    let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let address = || value.parse::<std::net::IpAddr>().is_ok();
    let url = || {
        ["tcp://", "udp://", "sctp://"].iter().any(|scheme| {
            value
                .strip_prefix(scheme)
                .is_some_and(|a| a.parse::<std::net::SocketAddr>().is_ok())
        })
    };
    (0..parts.len()).any(|i| match &parts[i..] {
        ["SERVICE", "HOST"] => address(),
        ["SERVICE", "PORT", named @ ..] => named.iter().all(|p| !p.is_empty()) && number(value),
        ["PORT"] => url(),
        ["PORT", n, p] => number(n) && protocol(p) && url(),
        ["PORT", n, p, "PROTO"] => number(n) && protocol(p) && value.eq_ignore_ascii_case(p),
        ["PORT", n, p, "PORT"] => number(n) && protocol(p) && number(value),
        ["PORT", n, p, "ADDR"] => number(n) && protocol(p) && address(),
        _ => false,
    })
}

/// An environment value as TOML (`true`, `5`, `["a"]`), else as a plain string.
fn scalar(value: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()))
}

/// The line of each `section.key` in the file (a `[section.key]` header counts as its line).
fn key_lines(text: &str) -> HashMap<String, usize> {
    let mut lines = HashMap::new();
    let Ok(root) = toml::de::DeTable::parse(text) else {
        return lines;
    };
    let line_at = |offset: usize| text[..offset].matches('\n').count() + 1;
    for (section, value) in root.get_ref() {
        let toml::de::DeValue::Table(keys) = value.get_ref() else {
            continue;
        };
        for (key, _) in keys {
            let name = format!("{}.{}", section.get_ref(), key.get_ref());
            lines.insert(name, line_at(key.span().start));
        }
    }
    lines
}
