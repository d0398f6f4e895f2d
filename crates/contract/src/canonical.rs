//! Canonical JSON: the byte form that hashes are computed over.
//!
//! - Object keys are sorted byte-wise at every depth; of a repeated key the
//!   last member counts, as in any JSON decoder that fills a map.
//! - The output is compact UTF-8.
//! - Every number is written exactly as its literal text: `0.5` and `0.50`,
//!   `1e3` and `1000` are different numbers to a hash, and integers keep every
//!   digit however long they are.
//! - Strings are decoded, then written as Go's JSON encoder writes them with
//!   HTML escaping off (see `go_json`): `"\u003c"` and `"<"` are one string.
//!
//! Values the controller builds may only hold integer literals
//! ([`NumberPolicy::IntegersOnly`]); user variable values and exports may
//! hold any number ([`NumberPolicy::Any`]).

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::go_json::push_go_string;
use crate::json_text::JsonText;
use crate::raw_json::{Node, node};

/// Which numbers a value may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberPolicy {
    /// Only literals matching `-?(0|[1-9][0-9]*)`: what the controller builds,
    /// including the cluster exports it passes on to machines and pools.
    IntegersOnly,
    /// Any number, written as given (user variable values, exports hashes).
    Any,
}

/// A value that cannot be written canonically.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCanonical {
    /// A number that is not an integer literal, under
    /// [`NumberPolicy::IntegersOnly`].
    #[error("non-integer number {literal} at {path}: only integers can be hashed")]
    NonInteger {
        /// JSON pointer to the number, e.g. `/exports/weight`.
        path: String,
        /// The number as written, e.g. `0.5` or `1e3`.
        literal: String,
    },
    /// A string holding an escaped lone surrogate (`"\ud800"`).
    #[error("string at {path} escapes a lone surrogate, which is not a character")]
    Undecodable { path: String },
}

impl NotCanonical {
    /// JSON pointer to the offending value.
    pub fn path(&self) -> &str {
        match self {
            NotCanonical::NonInteger { path, .. } | NotCanonical::Undecodable { path } => path,
        }
    }
}

/// True when `literal` is an integer as the canonical form accepts one: no
/// fraction, no exponent, no leading zero (`-0` is accepted).
pub fn is_integer_literal(literal: &str) -> bool {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    match digits.as_bytes() {
        [b'0'] => true,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Returns the JSON pointer and literal of the first number in `value`
/// (keys visited in canonical order) that is not an integer literal.
pub fn find_non_integer(value: &JsonText) -> Option<(String, String)> {
    match to_canonical_vec(value, NumberPolicy::IntegersOnly) {
        Err(NotCanonical::NonInteger { path, literal }) => Some((path, literal)),
        _ => None,
    }
}

/// Writes `value` canonically.
pub fn to_canonical_vec(value: &JsonText, policy: NumberPolicy) -> Result<Vec<u8>, NotCanonical> {
    to_canonical_string(value, policy).map(String::into_bytes)
}

/// Writes `value` canonically as a string.
pub fn to_canonical_string(value: &JsonText, policy: NumberPolicy) -> Result<String, NotCanonical> {
    let mut writer = Writer {
        policy,
        out: String::with_capacity(value.as_str().len()),
        path: String::new(),
    };
    writer.value(value.as_raw())?;
    Ok(writer.out)
}

struct Writer {
    policy: NumberPolicy,
    out: String,
    /// JSON pointer of the value being written, for errors.
    path: String,
}

impl Writer {
    fn value(&mut self, raw: &RawValue) -> Result<(), NotCanonical> {
        let node = node(raw).map_err(|_| NotCanonical::Undecodable {
            path: self.path.clone(),
        })?;
        match node {
            Node::Literal(text) => self.out.push_str(text),
            Node::Number(literal) => {
                if self.policy == NumberPolicy::IntegersOnly && !is_integer_literal(literal) {
                    return Err(NotCanonical::NonInteger {
                        path: self.path.clone(),
                        literal: literal.to_owned(),
                    });
                }
                self.out.push_str(literal);
            }
            Node::String(s) => push_go_string(&mut self.out, &s),
            Node::Array(items) => {
                self.out.push('[');
                for (i, item) in items.into_iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.nested(&i.to_string(), item)?;
                }
                self.out.push(']');
            }
            Node::Object(members) => {
                // Sorted by bytes; a later repeated key replaces an earlier one.
                let sorted: BTreeMap<String, &RawValue> = members.into_iter().collect();
                self.out.push('{');
                for (i, (key, item)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    push_go_string(&mut self.out, &key);
                    self.out.push(':');
                    self.nested(&key.replace('~', "~0").replace('/', "~1"), item)?;
                }
                self.out.push('}');
            }
        }
        Ok(())
    }

    /// Writes `raw`, a member or element named `token` in the JSON pointer.
    fn nested(&mut self, token: &str, raw: &RawValue) -> Result<(), NotCanonical> {
        let len = self.path.len();
        self.path.push('/');
        self.path.push_str(token);
        self.value(raw)?;
        self.path.truncate(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str, policy: NumberPolicy) -> Result<String, NotCanonical> {
        to_canonical_string(&JsonText::parse(text).unwrap(), policy)
    }

    #[test]
    fn sorts_keys_at_every_depth_and_keeps_html_characters() {
        let v = r#"{"b": {"z": 1, "a": [ {"y": "<&>", "x": null} ]}, "a": true}"#;
        assert_eq!(
            canonical(v, NumberPolicy::IntegersOnly).unwrap(),
            r#"{"a":true,"b":{"a":[{"x":null,"y":"<&>"}],"z":1}}"#
        );
    }

    #[test]
    fn refuses_fractions_when_integers_only_and_names_the_path_and_literal() {
        let v = r#"{"ok": 1, "lb": {"weights": [1, 0.50]}}"#;
        let err = canonical(v, NumberPolicy::IntegersOnly).unwrap_err();
        assert_eq!(
            err,
            NotCanonical::NonInteger {
                path: "/lb/weights/1".into(),
                literal: "0.50".into()
            }
        );
        assert_eq!(
            canonical(v, NumberPolicy::Any).unwrap(),
            r#"{"lb":{"weights":[1,0.50]},"ok":1}"#
        );
    }

    #[test]
    fn integer_literals_are_those_without_fraction_exponent_or_leading_zero() {
        for ok in ["0", "-0", "7", "-12", "123456789012345678901234567890"] {
            assert!(is_integer_literal(ok), "{ok}");
        }
        for not in ["1e3", "1E+3", "2.0", "0.5", "01", "-", "", "+1"] {
            assert!(!is_integer_literal(not), "{not}");
        }
        let big = r#"[18446744073709551616, -9223372036854775809, -0]"#;
        assert_eq!(
            canonical(big, NumberPolicy::IntegersOnly).unwrap(),
            big.replace(' ', "")
        );
    }

    #[test]
    fn strings_are_decoded_then_written_as_go_writes_them() {
        let v = "{\"s\":\"a\u{2028}b\u{2029}c\\u0001\\b\\f\\u007f\\/\",\"t\":\"\\u003cb\\u003e \\u0026\"}";
        assert_eq!(
            canonical(v, NumberPolicy::Any).unwrap(),
            "{\"s\":\"a\\u2028b\\u2029c\\u0001\\b\\f\u{7f}/\",\"t\":\"<b> &\"}"
        );
    }

    #[test]
    fn the_last_of_repeated_keys_counts() {
        let v = r#"{"a": 1, "b": 2, "a": 3}"#;
        assert_eq!(canonical(v, NumberPolicy::Any).unwrap(), r#"{"a":3,"b":2}"#);
    }
}
