use serde_json::{Value, json};

use super::*;

/// The document serde_json's `Value` is, member order included, or the same error text.
fn same(text: &[u8]) {
    let ours = parse(text).map(|d| d.root().to_value());
    let theirs = serde_json::from_slice::<Value>(text);
    let (ours, theirs) = (
        ours.map_err(|e| e.to_string()),
        theirs.map_err(|e| e.to_string()),
    );
    assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(text));
    if let (Ok(Value::Object(a)), Ok(Value::Object(b))) = (&ours, &theirs) {
        assert!(a.keys().eq(b.keys()), "member order");
    }
}

#[test]
fn values_and_errors_are_serde_jsons() {
    let cases: [&[u8]; 24] = [
        br#"{"b": 1, "a": [1, -2, 3.5, 1e3, 18446744073709551615, -9223372036854775808], "c": {"d": null, "e": true}}"#,
        br#""caf\u00e9 \ud83d\ude00 \n""#,
        "\"é and 日本\"".as_bytes(),
        br#"{"k\"ey": "v\\al", "plain": "x", "n": {"deep\u0041": ["\t", "", {}]}}"#,
        b"[]",
        b"{}",
        b"[[], {}, [[]], {\"a\": {}}]",
        b"  7  ",
        b"1e400",
        b"-0",
        b"0.1",
        b"[1, 2",
        b"{\"a\" 1}",
        b"{\"a\": 1} x",
        b"",
        b"nul",
        b"\"\xff\"",
        b"{\"\xc3\x28\": 1}",
        b"\"\\ud800\"",
        b"[1,]",
        b"{\"a\":1,}",
        b"true",
        b"null",
        b"[false, null, \"\", 0]",
    ];
    for case in cases {
        same(case);
    }
    same(&[b'['; 200]);
    let deep = format!("{}1{}", "[".repeat(127), "]".repeat(127));
    same(deep.as_bytes());
}

#[test]
fn a_repeated_name_keeps_its_last_value_once() {
    let body = br#"{"a": 1, "b": {"x": 1, "x": [2]}, "a": 3, "c": 4, "a": {"d": 5}}"#;
    let doc = parse(body).unwrap();
    let object = doc.root().as_object().unwrap();
    assert_eq!(object.len(), 3);
    let names: Vec<&str> = object.members().map(|(k, _)| k).collect();
    assert_eq!(names, ["b", "c", "a"]);
    assert_eq!(object.get("a").unwrap().to_value(), json!({"d": 5}));
    let inner = object.get("b").unwrap().as_object().unwrap();
    assert_eq!((inner.len(), inner.members().count()), (1, 1));
    // The same map as serde_json's, whose order differs: it keeps the first place.
    assert_eq!(
        doc.root().to_value(),
        serde_json::from_slice::<Value>(body).unwrap()
    );
    // Names that only look alike to the sketch (same length, first and last byte) are kept.
    let alike = parse(br#"{"ab1b": 1, "ab2b": 2, "ab1b": 3}"#).unwrap();
    let alike = alike.root().as_object().unwrap();
    let kept: Vec<(&str, Value)> = alike.members().map(|(k, v)| (k, v.to_value())).collect();
    assert_eq!(kept, [("ab2b", json!(2)), ("ab1b", json!(3))]);
}

#[test]
fn nodes_answer_as_values_do() {
    let doc = parse(br#"{"s": "a\nb", "e": "", "n": null, "i": -3, "f": 2.5, "l": [1, [2], {"k": 3}], "o": {}}"#).unwrap();
    let root = doc.root();
    let get = |name| root.as_object().unwrap().get(name).unwrap();
    assert_eq!(get("s").as_str(), Some("a\nb"));
    assert!(get("e").is_empty() && get("n").is_empty() && get("o").is_empty());
    assert!(!get("i").is_empty() && !get("l").is_empty());
    assert_eq!(get("i").as_number(), Some((-3).into()));
    assert_eq!(
        [get("i"), get("f"), get("l"), get("o"), get("n"), get("s")].map(Node::type_name),
        ["integer", "number", "array", "object", "null", "string"]
    );
    // The vocabulary `FieldType::of_value` gives a `Value` (parameters are typed through it).
    for (_, node) in root.as_object().unwrap().members() {
        let value = node.to_value();
        assert_eq!(
            node.type_name(),
            crate::contract::FieldType::of_value(&value),
            "{value}"
        );
    }
    let items: Vec<Value> = get("l")
        .as_array()
        .unwrap()
        .items()
        .map(Node::to_value)
        .collect();
    assert_eq!(items, [json!(1), json!([2]), json!({"k": 3})]);
    assert_eq!(root.pointer("/l/2/k").map(Node::to_value), Some(json!(3)));
    assert_eq!(root.pointer("").map(Node::to_value), Some(root.to_value()));
    assert!(root.pointer("/l/3").is_none() && root.pointer("/s/0").is_none());
    assert!(!root.as_object().unwrap().contains_key("absent"));
}

#[test]
fn the_representation_keeps_jsonschemas_contract() {
    let text = jsonschema::json::conformance::document().to_string();
    let doc = parse(text.as_bytes()).unwrap();
    jsonschema::json::conformance::assert_conformance::<Tape>(&doc.root());
}

/// Each instance is valid or not, with the same errors in the same places (their messages with
/// values masked, and the type of their instance), for a validator compiled for the document as
/// for one compiled for `Value`.
#[test]
fn validators_read_a_document_as_they_read_a_value() {
    let schema = json!({
        "type": "object",
        "required": ["id", "name", "must"],
        "additionalProperties": false,
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "minLength": 2, "maxLength": 5},
            "kind": {"enum": ["tv", "radio", 7, null, {"x": [1]}]},
            "ratio": {"type": "number", "multipleOf": 0.5},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "meta": {
                "type": "object",
                "propertyNames": {"pattern": "^[a-z]+$"},
                "additionalProperties": {"type": ["string", "null"]}
            },
            "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "fixed": {"const": {"a": [1, 2.0]}},
            "pair": {"prefixItems": [{"type": "integer"}], "items": false},
            "label": {"type": "string"}
        }
    });
    let theirs = jsonschema::validator_for(&schema).unwrap();
    let ours = jsonschema::options_for::<Tape>().build(&schema).unwrap();
    let instances = [
        r#"{"id": 1, "name": "ab"}"#,
        r#"{"id": 0, "name": "a", "extra": true}"#,
        r#"{"id": "7", "name": "abcdef", "kind": "tv"}"#,
        r#"{"id": 2, "name": "éééé", "kind": 7.0, "ratio": 1.5}"#,
        r#"{"id": 2, "name": "ééééé\u00e9", "kind": {"x": [1.0]}, "ratio": 1.2}"#,
        r#"{"id": 3, "name": "ok", "tags": ["a", "b", "a"], "kind": "tv2"}"#,
        r#"{"id": 3, "name": "ok", "tags": ["a", 1], "meta": {"ok": null, "Bad": "x", "n": 1}}"#,
        r#"{"id": 3, "name": "ok", "pick": 1.5, "fixed": {"a": [1.0, 2]}}"#,
        r#"{"id": 3, "name": "ok", "pick": true, "fixed": {"a": [1]}}"#,
        r#"{"id": 3, "id": -1, "name": "ok"}"#,
        r#"{"id": 3, "name": "ok", "must": 1, "pair": [1, 2, 3], "label": {"a": [1]}}"#,
        r#"{"id": 3, "name": "ok", "must": 1, "pair": ["x"], "label": [1, 2]}"#,
        r#"[1, 2]"#,
        r#"null"#,
    ];
    for text in instances {
        let value: Value = serde_json::from_str(text).unwrap();
        let doc = parse(text.as_bytes()).unwrap();
        assert_eq!(ours.is_valid(doc.root()), theirs.is_valid(&value), "{text}");
        let errors = |e: jsonschema::ValidationError| {
            (
                e.instance_path().to_string(),
                e.masked().to_string(),
                crate::contract::FieldType::of_value(e.instance()),
            )
        };
        let mut a: Vec<_> = ours.iter_errors(doc.root()).map(errors).collect();
        let mut b: Vec<_> = theirs.iter_errors(&value).map(errors).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{text}");
    }
}

/// A wide object is looked up through its sorted names: every member is found with its last
/// value, and a name it lacks is not, whether the object is the body or inside it.
#[test]
fn wide_objects_are_looked_up_by_name() {
    let members: Vec<String> = (0..200).map(|i| format!("\"k{i}\": {i}")).collect();
    let wide = format!("{{{}, \"k7\": \"last\"}}", members.join(", "));
    let text = format!("{{\"inner\": {wide}, \"small\": {{\"a\": 1}}, \"list\": [{wide}]}}");
    let doc = parse(text.as_bytes()).unwrap();
    let root = doc.root().as_object().unwrap();
    let inner = root.get("inner").unwrap().as_object().unwrap();
    let listed = doc.root().pointer("/list/0").unwrap().as_object().unwrap();
    for object in [inner, listed] {
        assert_eq!(object.len(), 200);
        for i in (0..200).filter(|i| *i != 7) {
            let found = object.get(&format!("k{i}")).map(Node::to_value);
            assert_eq!(found, Some(json!(i)));
        }
        assert_eq!(object.get("k7").map(Node::to_value), Some(json!("last")));
        assert!(object.get("k200").is_none() && object.get("").is_none());
    }
    assert_eq!(
        root.get("small").unwrap().pointer("/a").map(Node::to_value),
        Some(json!(1))
    );
}

/// An element of a wide array is reached by its index, as of a short one.
#[test]
fn array_elements_are_reached_by_index() {
    for n in [3usize, 33, 1000] {
        let items: Vec<String> = (0..n).map(|i| format!("{{\"i\": {i}}}")).collect();
        let text = format!("[{}]", items.join(","));
        let doc = parse(text.as_bytes()).unwrap();
        let list = doc.root().as_array().unwrap();
        for i in [0, n / 2, n - 1] {
            assert_eq!(
                list.get(i).map(Node::to_value),
                Some(json!({"i": i})),
                "{n}"
            );
            let pointer = format!("/{i}/i");
            assert_eq!(
                doc.root().pointer(&pointer).map(Node::to_value),
                Some(json!(i))
            );
        }
        assert!(list.get(n).is_none());
    }
}
