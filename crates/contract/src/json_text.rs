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

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::go_json::{compact, html_escape, push_go_marshaled, to_go_string};
use crate::raw_json::{Node, node};

/// One valid JSON value, kept as written (without surrounding whitespace).
/// Every string in it is text: an escaped lone surrogate (`"\ud800"`), which
/// JSON's grammar allows, is refused, so the value always parses.
///
/// Two texts are equal when their bytes are; `{"a":1}` and `{ "a": 1 }` are
/// different texts of the same value (their hashes agree).
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

const LONE_SURROGATE: &str = "a string escapes a lone surrogate, which is no character";

/// Text that is not one JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid JSON: {0}")]
pub struct InvalidJson(String);

impl JsonText {
    /// Checks that `text` is one JSON value and keeps it.
    pub fn parse(text: &str) -> Result<JsonText, InvalidJson> {
        let invalid = |e: serde_json::Error| InvalidJson(describe_without_text(&e));
        let raw: &RawValue = serde_json::from_str(text).map_err(invalid)?;
        if !surrogates_paired(raw.get()) {
            return Err(InvalidJson(LONE_SURROGATE.to_owned()));
        }
        Ok(JsonText(raw.to_owned()))
    }

    /// The text of a parsed value. Numbers are written as `Value` holds them,
    /// so prefer [`JsonText::parse`] on the original text when there is one.
    pub fn from_value(value: &Value) -> JsonText {
        JsonText::parse(&value.to_string()).expect("serde_json writes valid JSON")
    }

    /// The text Kubernetes' apiserver serves for `value`, a value read from
    /// it (an inline `spec.variables` entry), which is what other
    /// implementations of the contract hold. The apiserver keeps no literal:
    /// it decodes a number as an int64 when it fits and as a float64
    /// otherwise, and serves what Go's `json.Marshal` writes for the decoded
    /// value, so `100000000000000000000` comes back with every digit and
    /// `0.50` as `0.5`. Writing `value` the same way gives those bytes back:
    /// integers as digits, other numbers in Go's float64 spelling, strings
    /// with `<`, `>` and `&` escaped, object keys sorted.
    pub fn from_served_value(value: &Value) -> JsonText {
        let mut text = String::new();
        push_go_marshaled(&mut text, value);
        JsonText::parse(&text).expect("Go's spelling of a value is valid JSON")
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
        JsonText::parse(&html_escape(&to_go_string(text))).expect("an escaped string is valid JSON")
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
    /// fractions and integers beyond 64 bits lose their spelling, and a
    /// number beyond `f64`'s range reads as the largest finite `f64` of its
    /// sign. Hashes and rendered files use the text, never this view.
    pub fn to_value(&self) -> Value {
        // serde_json refuses valid text only for a number it cannot hold.
        serde_json::from_str(self.as_str()).unwrap_or_else(|_| clamped_value(self.as_raw()))
    }
}

/// True when every `\u` escape in `text` (valid JSON) stands for a character:
/// a leading surrogate (`\ud800`-`\udbff`) must be followed by a trailing
/// one, and a trailing one must follow a leading one. serde_json's raw values
/// skip over string escapes without decoding them.
fn surrogates_paired(text: &str) -> bool {
    let bytes = text.as_bytes();
    // The code unit of the `\u` escape at `at`, if there is one.
    let escape_at = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?.strip_prefix(b"\\u")?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match escape_at(i) {
            Some(0xD800..=0xDBFF) => match escape_at(i + 6) {
                Some(0xDC00..=0xDFFF) => i += 12,
                _ => return false,
            },
            Some(0xDC00..=0xDFFF) => return false,
            Some(_) => i += 6,
            // Any other escape is two bytes (`\\` included, which must not
            // be read as the start of another escape).
            None => i += 2,
        }
    }
    true
}

/// `raw` parsed with numbers beyond `f64`'s range clamped to its limits.
fn clamped_value(raw: &RawValue) -> Value {
    match node(raw) {
        Ok(Node::Literal("true")) => Value::Bool(true),
        Ok(Node::Literal("false")) => Value::Bool(false),
        Ok(Node::Number(literal)) => serde_json::from_str(literal).unwrap_or_else(|_| {
            Value::from(if literal.starts_with('-') {
                f64::MIN
            } else {
                f64::MAX
            })
        }),
        Ok(Node::String(s)) => Value::String(s),
        Ok(Node::Array(items)) => Value::Array(items.into_iter().map(clamped_value).collect()),
        Ok(Node::Object(members)) => Value::Object(
            members
                .into_iter()
                .map(|(key, value)| (key, clamped_value(value)))
                .collect(),
        ),
        // `null`, and strings, which construction checked to decode.
        Ok(Node::Literal(_)) | Err(_) => Value::Null,
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
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if !surrogates_paired(raw.get()) {
            return Err(D::Error::custom(LONE_SURROGATE));
        }
        Ok(JsonText(raw))
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

    /// Each text is what Go's `json.Marshal` writes for a value the apiserver
    /// decoded (an int64 or a float64 for numbers): reading it into a `Value`,
    /// as a Kubernetes client does, and writing it back gives the same bytes.
    /// The floats include ties, where two shortest spellings are equally near
    /// and Go takes the even one.
    #[test]
    fn served_values_are_written_back_as_the_apiserver_served_them() {
        let served = [
            "100000000000000000000",
            "18446744073709552000",
            "9223372036854775808",
            "-9223372036854775808",
            "1e+21",
            "999999999999999900000",
            "1.2345678901234568e+29",
            "1.7976931348623157e+308",
            "0.000001",
            "1e-7",
            "1.5e-7",
            "5e-324",
            // serde_json's default float parser reads these one bit off.
            "1.331993865736232e-34",
            "1.2450673563822113e-76",
            "0.5",
            "-0",
            "0",
            "-895413446982392.2",
            "248592631056.51562",
            r#""a\u003cb\u003e \u0026 \u2028 \"q\"""#,
            r#"{"a":[1,0.5,null,true],"b\u0026":{"x":[],"y":"z"},"c":{}}"#,
        ];
        for text in served {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(JsonText::from_served_value(&value).as_str(), text);
        }
        // Keys are sorted whatever order the value holds them in.
        let value = serde_json::json!({"b": 1, "a": "<"});
        assert_eq!(
            JsonText::from_served_value(&value).as_str(),
            r#"{"a":"\u003c","b":1}"#
        );
    }

    #[test]
    fn html_characters_are_escaped_in_strings_from_text() {
        let text = JsonText::html_escaped_string("a<b> & \"c\"\n\u{2028}");
        assert_eq!(text.as_str(), r#""a\u003cb\u003e \u0026 \"c\"\n\u2028""#);
        assert_eq!(text.to_value(), Value::from("a<b> & \"c\"\n\u{2028}"));
    }

    #[test]
    fn numbers_beyond_f64_read_as_its_limits_in_the_parsed_view() {
        let text = JsonText::parse(r#"{"big": [1e400, -1E+999], "n": 0.50, "s": "x"}"#).unwrap();
        assert_eq!(
            text.to_value(),
            serde_json::json!({"big": [f64::MAX, f64::MIN], "n": 0.5, "s": "x"})
        );
        assert_eq!(text.compacted().as_str(), text.as_str().replace(' ', ""));
    }

    #[test]
    fn invalid_text_is_refused_without_quoting_it() {
        let err = JsonText::parse("{\"password\": hunter2}").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(JsonText::parse("").is_err());
        assert!(JsonText::parse("1 2").is_err());
        // JSON's grammar allows a lone surrogate, but it is no character.
        assert!(JsonText::parse(r#"{"s": "\ud800"}"#).is_err());
        assert!(serde_json::from_str::<Vec<JsonText>>(r#"["\udc00"]"#).is_err());
        assert!(JsonText::parse(r#""\ud83d\ude00""#).is_ok());
        assert!(JsonText::parse(r#""\ud83d\u0041""#).is_err());
        // An escaped backslash followed by `ud800` is plain text.
        assert!(JsonText::parse(r#""\\ud800""#).is_ok());
        assert!(JsonText::parse("1e400").is_ok());
    }
}
