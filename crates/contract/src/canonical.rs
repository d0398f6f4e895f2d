//! Canonical JSON: the byte form that hashes are computed over. Object keys are
//! sorted byte-wise at every depth, the output is compact UTF-8, and `<`, `>`,
//! `&` are left as they are. Values the controller builds may only hold integer
//! numbers, because a fraction or exponent has no single spelling.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// Which numbers a value may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberPolicy {
    /// Only integers (what the controller builds, including cluster exports).
    IntegersOnly,
    /// Any number; fractions are written in serde_json's shortest form (user
    /// variable values, which are hashed as given).
    Any,
}

/// A value that cannot be written canonically.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("non-integer number at {path}: only integers can be hashed")]
pub struct NotCanonical {
    /// JSON pointer to the offending number, e.g. `/exports/weight`.
    pub path: String,
}

/// Returns the JSON pointer of the first non-integer number in `value`, if any.
pub fn find_non_integer(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut String) -> bool {
        match value {
            Value::Number(n) => !(n.is_i64() || n.is_u64()),
            Value::Array(items) => items.iter().enumerate().any(|(i, v)| {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                let found = walk(v, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                keys.into_iter().any(|k| {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    let found = walk(&map[k], path);
                    if !found {
                        path.truncate(len);
                    }
                    found
                })
            }
            _ => false,
        }
    }
    let mut path = String::new();
    walk(value, &mut path).then_some(path)
}

/// Writes `value` canonically.
pub fn to_canonical_vec(value: &Value, policy: NumberPolicy) -> Result<Vec<u8>, NotCanonical> {
    if policy == NumberPolicy::IntegersOnly
        && let Some(path) = find_non_integer(value)
    {
        return Err(NotCanonical { path });
    }
    // Writing into a Vec cannot fail and every key is a string.
    Ok(serde_json::to_vec(&Sorted(value)).expect("serialising a JSON value"))
}

/// Writes `value` canonically as a string.
pub fn to_canonical_string(value: &Value, policy: NumberPolicy) -> Result<String, NotCanonical> {
    to_canonical_vec(value, policy)
        .map(|bytes| String::from_utf8(bytes).expect("serde_json writes UTF-8"))
}

/// Serialises a JSON value with object keys sorted at every depth, whatever
/// order the underlying map keeps (serde_json's `preserve_order` feature may be
/// switched on by another crate in the build).
#[derive(Debug, Clone, Copy)]
pub struct Sorted<'a>(pub &'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Sorted(item))?;
                }
                seq.end()
            }
            Value::Object(object) => {
                let mut entries: Vec<(&String, &Value)> = object.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &Sorted(v))?;
                }
                map.end()
            }
            scalar => scalar.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_depth_and_keeps_html_characters() {
        let v = json!({"b": {"z": 1, "a": [ {"y": "<&>", "x": null} ]}, "a": true});
        assert_eq!(
            to_canonical_string(&v, NumberPolicy::IntegersOnly).unwrap(),
            r#"{"a":true,"b":{"a":[{"x":null,"y":"<&>"}],"z":1}}"#
        );
    }

    #[test]
    fn refuses_fractions_when_integers_only_and_names_the_path() {
        let v = json!({"ok": 1, "lb": {"weights": [1, 0.5]}});
        let err = to_canonical_string(&v, NumberPolicy::IntegersOnly).unwrap_err();
        assert_eq!(err.path, "/lb/weights/1");
        assert_eq!(
            to_canonical_string(&v, NumberPolicy::Any).unwrap(),
            r#"{"lb":{"weights":[1,0.5]},"ok":1}"#
        );
    }

    #[test]
    fn exponent_numbers_are_not_integers() {
        let v: Value = serde_json::from_str(r#"{"n": 1e3}"#).unwrap();
        assert!(to_canonical_vec(&v, NumberPolicy::IntegersOnly).is_err());
        let big: Value =
            serde_json::from_str(r#"[18446744073709551615, -9223372036854775808]"#).unwrap();
        assert!(to_canonical_vec(&big, NumberPolicy::IntegersOnly).is_ok());
    }
}
