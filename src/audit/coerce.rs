//! Query strings, paths and headers carry text; the spec types them. Coercion turns `"30"`
//! into `30` where the spec says integer, before validation, so `?limit=30` is clean. JSON
//! bodies are never coerced: there `"30"` for an integer is a real mismatch.

use serde_json::{Number, Value};

use crate::contract::FieldType;

/// `raw` as the JSON value of type `ty`, or as a string when it does not parse as one.
pub fn scalar(raw: &str, ty: &FieldType) -> Value {
    let typed = match ty {
        FieldType::Integer => integer(raw),
        FieldType::Number => number(raw),
        FieldType::Boolean => boolean(raw),
        FieldType::Any => return guess(raw),
        // OpenAPI leaves an object inside a query array unserialized; JSON text is one reading.
        FieldType::Object | FieldType::Array(_) => serde_json::from_str(raw)
            .ok()
            .filter(|v: &Value| v.is_object() || v.is_array()),
        _ => None,
    };
    typed.unwrap_or_else(|| Value::String(raw.to_string()))
}

/// The most specific JSON value `raw` spells (integer, number, boolean), else a string.
pub fn guess(raw: &str) -> Value {
    integer(raw)
        .or_else(|| number(raw))
        .or_else(|| boolean(raw))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}

/// The type a raw text value looks like, for the `observed` side of a finding.
pub fn observed_type(raw: &str) -> &'static str {
    FieldType::of_value(&guess(raw))
}

/// An integer of any size and spelling JSON Schema calls an integer: beyond 64 bits
/// (`-66281360155520106496`) or with a zero fraction (`35.0`), kept as a float with no
/// fraction, which JSON Schema's `integer` accepts.
fn integer(raw: &str) -> Option<Value> {
    if let Ok(n) = raw.parse::<i64>() {
        return Some(Value::from(n));
    }
    if let Ok(n) = raw.parse::<u64>() {
        return Some(Value::from(n));
    }
    let n: f64 = raw.parse().ok()?;
    (n.is_finite() && n.fract() == 0.0)
        .then(|| Number::from_f64(n).map(Value::Number))
        .flatten()
}

fn number(raw: &str) -> Option<Value> {
    let n: f64 = raw.parse().ok()?;
    Number::from_f64(n).map(Value::Number)
}

fn boolean(raw: &str) -> Option<Value> {
    match raw {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_becomes_the_declared_type_or_stays_text() {
        assert_eq!(scalar("30", &FieldType::Integer), json!(30));
        assert_eq!(scalar("thirty", &FieldType::Integer), json!("thirty"));
        assert_eq!(scalar("1.5", &FieldType::Number), json!(1.5));
        assert_eq!(scalar("true", &FieldType::Boolean), json!(true));
        assert_eq!(scalar("30", &FieldType::String), json!("30"));
        assert_eq!(observed_type("abc"), "string");
        assert_eq!(observed_type("-3"), "integer");
        let big = scalar("-66281360155520106496", &FieldType::Integer);
        assert!(big.is_number(), "{big}");
        assert!(jsonschema::is_valid(&json!({"type": "integer"}), &big));
        assert_eq!(scalar("1e3x", &FieldType::Integer), json!("1e3x"));
        assert!(jsonschema::is_valid(
            &json!({"type": "integer"}),
            &scalar("35.0", &FieldType::Integer)
        ));
        assert_eq!(scalar("35.5", &FieldType::Integer), json!("35.5"));
    }
}
