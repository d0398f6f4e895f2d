//! [`JsonText`]: a JSON value kept as the text it was written in.
//!
//! User variable values and a cluster's exports come from outside the
//! controller and reach the module, the inputs hash and the exports hash as
//! written: `0.50` stays `0.50`, `1e3` stays `1e3`, an integer longer than 64
//! bits keeps every digit, and objects keep their key order. Parsing into
//! `serde_json::Value` would change all of that (numbers go through `f64`,
//! maps are sorted), so these values travel as validated text instead.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::go_json::{compact, to_go_string};

/// One valid JSON value, kept as written (without surrounding whitespace).
///
/// Two texts are equal when their bytes are; `{"a":1}` and `{ "a": 1 }` are
/// different texts of the same value (their hashes agree).
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

/// Text that is not one JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid JSON: {0}")]
pub struct InvalidJson(String);

impl JsonText {
    /// Checks that `text` is one JSON value and keeps it.
    pub fn parse(text: &str) -> Result<JsonText, InvalidJson> {
        let raw: &RawValue =
            serde_json::from_str(text).map_err(|e| InvalidJson(describe_without_text(&e)))?;
        Ok(JsonText(raw.to_owned()))
    }

    /// The text of a parsed value. Numbers are written as `Value` holds them,
    /// so prefer [`JsonText::parse`] on the original text when there is one.
    pub fn from_value(value: &Value) -> JsonText {
        JsonText::parse(&value.to_string()).expect("serde_json writes valid JSON")
    }

    /// `{}`.
    pub fn empty_object() -> JsonText {
        JsonText::parse("{}").expect("valid JSON")
    }

    /// `null`.
    pub fn null() -> JsonText {
        JsonText::parse("null").expect("valid JSON")
    }

    /// `text` as a JSON string, spelled as Go's `json.Marshal` spells it:
    /// besides the usual escapes, `<`, `>` and `&` become `\u003c`, `\u003e`
    /// and `\u0026`. This is how a `String`-format variable source's value is
    /// written, so the rendered values are the same bytes whichever
    /// implementation of the contract wrote them.
    pub fn html_escaped_string(text: &str) -> JsonText {
        let mut out = String::with_capacity(text.len() + 2);
        // Outside escapes, these three characters can only be string content.
        for c in to_go_string(text).chars() {
            match c {
                '<' => out.push_str("\\u003c"),
                '>' => out.push_str("\\u003e"),
                '&' => out.push_str("\\u0026"),
                c => out.push(c),
            }
        }
        JsonText::parse(&out).expect("an escaped string is valid JSON")
    }

    /// The same text without whitespace between tokens; strings, numbers and
    /// key order are unchanged.
    pub fn compacted(&self) -> JsonText {
        JsonText::parse(&compact(self.as_str())).expect("compact JSON is valid JSON")
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The text as serde_json's raw value.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// True for the literal `null`.
    pub fn is_null(&self) -> bool {
        self.as_str() == "null"
    }

    /// The value parsed; numbers go through serde_json's `Number`, so
    /// fractions and integers beyond 64 bits lose their spelling.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.as_str()).expect("JsonText holds valid JSON")
    }
}

/// serde_json's messages may quote the offending text, which may be a
/// secret; keep only the kind of error and its position.
fn describe_without_text(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let kind = match e.classify() {
        Category::Io => "I/O error",
        Category::Syntax => "syntax error",
        Category::Data => "unexpected data",
        Category::Eof => "unexpected end",
    };
    format!("{kind} at line {} column {}", e.line(), e.column())
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for JsonText {}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonText({})", self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JsonText {
    type Err = InvalidJson;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JsonText::parse(s)
    }
}

impl From<&Value> for JsonText {
    fn from(value: &Value) -> Self {
        JsonText::from_value(value)
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        JsonText::from_value(&value)
    }
}

/// Written verbatim by serde_json.
impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Read verbatim from serde_json text (`serde_json::from_str`); from a
/// `Value` it is the value's text.
impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(JsonText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_literals_and_order_and_trims_outer_whitespace() {
        let text =
            JsonText::parse(" {\"z\": 0.50, \"a\": 123456789012345678901234567890} ").unwrap();
        assert_eq!(
            text.as_str(),
            "{\"z\": 0.50, \"a\": 123456789012345678901234567890}"
        );
        let inside: Vec<JsonText> = serde_json::from_str("[1e3, -0]").unwrap();
        assert_eq!(inside[0].as_str(), "1e3");
        assert_eq!(inside[1].as_str(), "-0");
        assert_eq!(serde_json::to_string(&inside).unwrap(), "[1e3,-0]");
        assert_eq!(
            text.compacted().as_str(),
            "{\"z\":0.50,\"a\":123456789012345678901234567890}"
        );
    }

    #[test]
    fn html_characters_are_escaped_in_strings_from_text() {
        let text = JsonText::html_escaped_string("a<b> & \"c\"\n\u{2028}");
        assert_eq!(text.as_str(), r#""a\u003cb\u003e \u0026 \"c\"\n\u2028""#);
        assert_eq!(text.to_value(), Value::from("a<b> & \"c\"\n\u{2028}"));
    }

    #[test]
    fn invalid_text_is_refused_without_quoting_it() {
        let err = JsonText::parse("{\"password\": hunter2}").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(JsonText::parse("").is_err());
        assert!(JsonText::parse("1 2").is_err());
    }
}
