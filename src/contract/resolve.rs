//! Following local `$ref`s. The bundled document has only local refs, all checked to resolve,
//! so resolution cannot fail; a ref cycle without content (`A: {$ref: B}`, `B: {$ref: A}`)
//! stops at a fixed depth.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use serde_json::Value;

const MAX_HOPS: usize = 32;

/// The value `value` stands for, following `$ref` hops within `doc`.
pub fn deref<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    deref_at(doc, Cow::Borrowed(""), value).1
}

/// Like [`deref`], also tracking the JSON pointer of the result (starting from `pointer`, the
/// location of `value`), which validators and findings need.
pub fn deref_at<'a, 'p>(
    doc: &'a Value,
    pointer: Cow<'p, str>,
    value: &'a Value,
) -> (Cow<'p, str>, &'a Value) {
    let mut pointer = pointer;
    let mut value = value;
    for _ in 0..MAX_HOPS {
        let Some(Value::String(target)) = value.get("$ref") else {
            break;
        };
        let Some(fragment) = target.strip_prefix('#') else {
            break;
        };
        let decoded = percent_decode_str(fragment).decode_utf8_lossy();
        match doc.pointer(&decoded) {
            Some(next) => {
                pointer = Cow::Owned(decoded.into_owned());
                value = next;
            }
            None => break,
        }
    }
    (pointer, value)
}
