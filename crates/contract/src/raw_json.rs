//! A walker over JSON text that keeps what `serde_json::Value` loses: the
//! literal text of every number and the order (and repetition) of object
//! keys. Each node is read as serde_json's raw value and split one level at a
//! time, so the walker never holds more than the path it is on.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One level of a JSON value.
pub(crate) enum Node<'a> {
    /// `null`, `true` or `false`, as written.
    Literal(&'a str),
    /// A number's literal text, e.g. `0.50`, `1E+3`, `-0`.
    Number(&'a str),
    /// A string, escapes decoded.
    String(String),
    Array(Vec<&'a RawValue>),
    /// Members in the order written, repeated keys included.
    Object(Vec<(String, &'a RawValue)>),
}

/// A string escape that JSON allows but Unicode does not (a lone surrogate
/// such as `"\ud800"`); such a string has no single spelling.
#[derive(Debug)]
pub(crate) struct Undecodable;

/// Splits `raw` one level.
pub(crate) fn node(raw: &RawValue) -> Result<Node<'_>, Undecodable> {
    let text = raw.get();
    let node = match text.as_bytes().first() {
        Some(b'{') => Node::Object(
            serde_json::from_str::<Members<'_>>(text)
                .map_err(|_| Undecodable)?
                .0,
        ),
        Some(b'[') => Node::Array(serde_json::from_str(text).map_err(|_| Undecodable)?),
        Some(b'"') => Node::String(serde_json::from_str(text).map_err(|_| Undecodable)?),
        Some(b'n' | b't' | b'f') => Node::Literal(text),
        _ => Node::Number(text),
    };
    Ok(node)
}

/// An object's members in order; serde_json's own maps sort or drop repeated
/// keys.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;

        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }

        deserializer.deserialize_map(MembersVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn numbers_keep_their_text_and_objects_their_order() {
        let value = raw(r#"{"b": 1E+3, "a": [0.50, "x\u003c"], "b": null}"#);
        let Node::Object(members) = node(value).unwrap() else {
            panic!("an object")
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert!(matches!(node(members[0].1).unwrap(), Node::Number("1E+3")));
        let Node::Array(items) = node(members[1].1).unwrap() else {
            panic!("an array")
        };
        assert!(matches!(node(items[0]).unwrap(), Node::Number("0.50")));
        assert!(matches!(node(items[1]).unwrap(), Node::String(s) if s == "x<"));
        assert!(matches!(node(members[2].1).unwrap(), Node::Literal("null")));
    }

    #[test]
    fn a_lone_surrogate_is_undecodable() {
        assert!(node(raw(r#""\ud800""#)).is_err());
    }
}
