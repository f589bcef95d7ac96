//! Where an API is served on its host: the paths of the spec's `servers` URLs (or the one the
//! config sets), taken off a request's path before routing. They also say which requests are
//! the API's at all: on a host that serves more than the spec (Keycloak's admin API under
//! `/admin/realms` beside its OAuth token endpoint under `/realms`), a path under no base path
//! that no template fits whole is another endpoint's, not an unknown operation of this API.

use serde_json::Value;

use crate::template::trim_trailing_slash;

#[derive(Debug, Default)]
pub(crate) struct BasePaths {
    /// Longest first: a request made from the spec starts with one.
    paths: Vec<String>,
    /// A server (or the configured base path) is the host's root (`https://api.example.com`
    /// beside `https://api.example.com/v1`): every path is under a base path.
    root: bool,
}

impl BasePaths {
    /// The configured base path (`spec.base_path`) if any, else the `servers` URLs' paths with
    /// variables at their defaults.
    pub fn new(doc: &Value, configured: Option<&str>) -> BasePaths {
        match configured {
            Some(base) => {
                let base = trim_trailing_slash(base);
                BasePaths {
                    paths: vec![base.to_string()],
                    root: base.is_empty() || base == "/",
                }
            }
            None => of_servers(doc),
        }
    }

    pub fn as_slice(&self) -> &[String] {
        &self.paths
    }

    /// `path` after the first base path it starts with, if any.
    pub fn strip<'p>(&self, path: &'p str) -> Option<&'p str> {
        self.paths.iter().find_map(|base| {
            let rest = path.strip_prefix(base.as_str())?;
            (rest.is_empty() || rest.starts_with('/')).then_some(if rest.is_empty() {
                "/"
            } else {
                rest
            })
        })
    }

    /// Whether a path can be outside the API: it has base paths and none is the host's root.
    /// Then a path [`BasePaths::strip`] finds under none is outside.
    pub fn bound(&self) -> bool {
        !self.root && !self.paths.is_empty()
    }
}

/// The paths of the `servers` URLs, with variables at their defaults; whether one is the root.
fn of_servers(doc: &Value) -> BasePaths {
    let mut bases = BasePaths::default();
    for server in doc
        .get("servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(url) = server.get("url").and_then(Value::as_str) else {
            continue;
        };
        let mut url = url.to_string();
        for (name, var) in server
            .get("variables")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let default = var.get("default").and_then(Value::as_str).unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), default);
        }
        let path = match url.split_once("://") {
            Some((_, rest)) => rest.find('/').map(|i| &rest[i..]).unwrap_or(""),
            None => url.as_str(),
        };
        let path = trim_trailing_slash(path);
        bases.root |= path.is_empty() || path == "/";
        if path.starts_with('/') && path != "/" && !bases.paths.iter().any(|b| b == path) {
            bases.paths.push(path.to_string());
        }
    }
    bases.paths.sort_by_key(|b| std::cmp::Reverse(b.len()));
    bases
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    impl BasePaths {
        fn outside(&self, path: &str) -> bool {
            self.bound() && self.strip(path).is_none()
        }
    }

    #[test]
    fn a_path_is_outside_only_where_every_base_path_has_one() {
        let keycloak = json!({"servers": [{"url": "https://kc.example/admin/realms"}]});
        let bases = BasePaths::new(&keycloak, None);
        assert_eq!(
            bases.strip("/admin/realms/master/users"),
            Some("/master/users")
        );
        assert!(!bases.outside("/admin/realms/master/users"));
        assert!(!bases.outside("/admin/realms"));
        assert!(bases.outside("/realms/master/protocol/openid-connect/token"));
        assert!(
            bases.outside("/admin/realmsx/master"),
            "a base path ends at a `/`"
        );
        // The near twins: a server at the host's root, no servers, a configured `/`.
        let rooted = json!({"servers": [{"url": "https://kc.example/admin/realms"},
            {"url": "http://localhost:8080/"}]});
        assert!(!BasePaths::new(&rooted, None).outside("/realms/master"));
        assert!(!BasePaths::new(&json!({}), None).outside("/realms/master"));
        assert!(!BasePaths::new(&keycloak, Some("/")).outside("/realms/master"));
        let configured = BasePaths::new(&json!({}), Some("/admin/realms/"));
        assert_eq!(configured.as_slice(), ["/admin/realms"]);
        assert!(configured.outside("/realms/master"));
    }
}
