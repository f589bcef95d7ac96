//! The map file (`driftwatch tools --map`): which operation each tool calls, and what its MCP
//! server does in code that no `tools/list` shows: an argument sent under another name, a value
//! the server fills itself, several calls behind one tool. Each says exactly one thing, so a user
//! silences one false alarm without hiding a real drift next to it.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use crate::contract::WriteSemantics;

/// Tool name to what it calls. Read from TOML: `[tools] name = "operationId"`, or a table.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    #[serde(default, deserialize_with = "tools")]
    pub tools: HashMap<String, MappedTool>,
}

/// One tool's entry. Exactly one of `operation`, `operations` and `elsewhere`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappedTool {
    /// The operation: an operationId or `"METHOD /path/{template}"`.
    #[serde(default)]
    pub operation: Option<String>,
    /// A composite tool: the operations it calls, its arguments checked against their union.
    #[serde(default)]
    pub operations: Vec<String>,
    /// The tool calls no operation of this spec (another host, local work): why.
    #[serde(default)]
    pub elsewhere: Option<String>,
    /// Arguments the server sends as request headers.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Argument to the path parameter it fills (`project_id = "id"`).
    #[serde(default)]
    pub bind: BTreeMap<String, String>,
    /// Argument to the name the server sends it under (`perPage = "per_page"`).
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Parameters and body fields of the spec the server fills itself: a credential, a pinned
    /// value, a value read from an earlier call.
    #[serde(default)]
    pub supplied: Vec<String>,
    /// Arguments the server uses itself and sends under no name.
    #[serde(default)]
    pub local: Vec<String>,
    /// Arguments the server places inside a body field it builds (Stripe's payment link:
    /// `price = "line_items"`): reachable, and that field filled.
    #[serde(default)]
    pub nests: BTreeMap<String, String>,
    /// Array arguments the server joins into the spec's one string (`labels.join(",")`).
    #[serde(default)]
    pub joins: Vec<String>,
    /// How the tool's write treats what it leaves out, over the spec's reading.
    #[serde(default)]
    pub write: Option<WriteSemantics>,
}

impl MappedTool {
    /// The operations the entry names (none for `elsewhere`).
    pub fn references(&self) -> impl Iterator<Item = &str> {
        self.operation
            .iter()
            .chain(&self.operations)
            .map(String::as_str)
    }

    fn operation(reference: String) -> MappedTool {
        MappedTool {
            operation: Some(reference),
            ..MappedTool::default()
        }
    }
}

/// `[tools]` values: a string (the operation) or a table, each table checked for its fields so a
/// typo names the tool and the field.
fn tools<'de, D: serde::Deserializer<'de>>(de: D) -> Result<HashMap<String, MappedTool>, D::Error> {
    use serde::de::Error;
    let raw = HashMap::<String, toml::Value>::deserialize(de)?;
    raw.into_iter()
        .map(|(name, value)| {
            let entry = match value {
                toml::Value::String(reference) => MappedTool::operation(reference),
                other => MappedTool::deserialize(other)
                    .map_err(|e| D::Error::custom(format!("tool `{name}`: {}", e.message())))?,
            };
            let named = [
                entry.operation.is_some(),
                !entry.operations.is_empty(),
                entry.elsewhere.is_some(),
            ];
            if named.iter().filter(|n| **n).count() != 1 {
                return Err(D::Error::custom(format!(
                    "tool `{name}`: give exactly one of `operation`, `operations` (a composite \
                     tool) and `elsewhere` (it calls no operation of this spec)"
                )));
            }
            Ok((name, entry))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_or_a_table_and_a_typo_names_its_tool() {
        let map: Mapping = toml::from_str(
            r#"[tools]
a = "getA"
b = { operations = ["GET /x", "PUT /x"], rename = { perPage = "per_page" } }
c = { elsewhere = "another host" }
"#,
        )
        .unwrap();
        assert_eq!(map.tools["a"].references().collect::<Vec<_>>(), ["getA"]);
        assert_eq!(map.tools["b"].references().count(), 2);
        assert_eq!(map.tools["b"].rename["perPage"], "per_page");
        assert_eq!(map.tools["c"].references().count(), 0);
        let typo = toml::from_str::<Mapping>("[tools]\nd = { operation = \"x\", bnd = {} }")
            .unwrap_err()
            .to_string();
        assert!(typo.contains("tool `d`") && typo.contains("bnd"), "{typo}");
        let both =
            toml::from_str::<Mapping>("[tools]\ne = { operation = \"x\", elsewhere = \"y\" }")
                .unwrap_err()
                .to_string();
        assert!(both.contains("exactly one"), "{both}");
    }
}
