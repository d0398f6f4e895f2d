//! The JSON spelling the contract's files and hashes use, which is the one
//! Go's `encoding/json` encoder writes with HTML escaping switched off:
//!
//! - strings escape `"`, `\` and control characters (`\b`, `\f`, `\n`, `\r`,
//!   `\t`, else `\u00XX` in lowercase hex) and the line and paragraph
//!   separators U+2028 and U+2029; `<`, `>`, `&`, `/` and DEL stay as they are;
//! - indented output puts every element on its own line, two spaces per level,
//!   `": "` after a key, and writes empty objects and arrays as `{}` and `[]`.
//!
//! serde_json's compact writer differs only in leaving U+2028 and U+2029
//! raw, so [`GoFormatter`] wraps it and escapes those two.
//!
//! Some values are rendered as Go's `json.Marshal` writes them instead, which
//! also escapes `<`, `>` and `&`, in raw values it copies as well as in
//! strings; [`html_escape`] gives that spelling.

use std::io;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::Formatter;

/// serde_json's compact formatter, with U+2028 and U+2029 escaped in strings.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(['\u{2028}', '\u{2029}']) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let separator = &rest[at..];
            let escape: &[u8] = if separator.starts_with('\u{2028}') {
                b"\\u2028"
            } else {
                b"\\u2029"
            };
            writer.write_all(escape)?;
            // Both separators are three bytes in UTF-8.
            rest = &separator[3..];
        }
        writer.write_all(rest.as_bytes())
    }
}

/// Compact JSON of `value`, strings spelled as Go writes them. Struct fields
/// keep their declaration order; maps keep their own order.
pub(crate) fn to_go_string<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    // Writing into a Vec cannot fail, and the contract's types have string
    // keys only.
    value
        .serialize(&mut serializer)
        .expect("serialising to JSON");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Appends `s` as a JSON string spelled as Go writes it.
pub(crate) fn push_go_string(out: &mut String, s: &str) {
    out.push_str(&to_go_string(s));
}

/// Valid JSON text with `<`, `>`, `&`, U+2028 and U+2029 escaped
/// (`\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`), as Go's `json.Marshal`
/// leaves every string it writes and every raw value it copies. Outside
/// strings JSON holds none of these characters, so replacing them anywhere
/// keeps the value; text already escaped is left as it is.
pub(crate) fn html_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as Go's `json.Marshal` writes the same value decoded into Go's
/// generic types: object keys sorted by their bytes, strings as
/// [`html_escape`] spells them, integers as digits and other numbers as Go
/// writes a float64 ([`push_go_float`]).
pub(crate) fn push_go_marshaled(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_f64() => push_go_float(out, n.as_f64().expect("an f64")),
        // A u64 or i64: its digits, as Go writes an int64.
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => out.push_str(&html_escape(&to_go_string(s))),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_go_marshaled(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            // Sorted here too, whatever order the map keeps.
            let mut members: Vec<_> = members.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&html_escape(&to_go_string(key)));
                out.push(':');
                push_go_marshaled(out, item);
            }
            out.push('}');
        }
    }
}

/// A float64 as Go's encoding/json writes it: the shortest digits that read
/// back as `f`, in plain notation when `1e-6 <= |f| < 1e21` and otherwise as
/// `<d>[.<digits>]e<sign><exponent>` (`1e+21`, `1.5e-7`). serde_json also
/// writes the shortest digits (ties to even, as Go), but lays them out
/// differently (`1e+20`, `1e21`), so only its digits are used.
fn push_go_float(out: &mut String, f: f64) {
    let (negative, digits, point) = shortest_digits(
        &serde_json::Number::from_f64(f)
            .expect("a float read from JSON is finite")
            .to_string(),
    );
    if negative {
        out.push('-');
    }
    if digits.is_empty() {
        out.push('0');
        return;
    }
    if (1e-6..1e21).contains(&f.abs()) {
        // `point` is where the decimal point goes, counted in digits.
        match usize::try_from(point) {
            Ok(0) | Err(_) => {
                out.push_str("0.");
                out.push_str(&"0".repeat(point.unsigned_abs() as usize));
                out.push_str(&digits);
            }
            Ok(p) if p >= digits.len() => {
                out.push_str(&digits);
                out.push_str(&"0".repeat(p - digits.len()));
            }
            Ok(p) => {
                out.push_str(&digits[..p]);
                out.push('.');
                out.push_str(&digits[p..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let exponent = point - 1;
        out.push_str(if exponent < 0 { "e-" } else { "e+" });
        out.push_str(&exponent.unsigned_abs().to_string());
    }
}

/// The sign, the significant digits (no leading or trailing zeros) and the
/// place of the decimal point after the first `point` digits, of a number
/// written as serde_json writes a float (`-12.5`, `1e+20`, `5e-324`, `-0.0`).
fn shortest_digits(text: &str) -> (bool, String, i32) {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (
            m,
            e.parse::<i32>()
                .expect("serde_json writes an integer exponent"),
        ),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{whole}{fraction}");
    let significant = all.trim_start_matches('0');
    let leading = i32::try_from(all.len() - significant.len()).expect("a short number");
    let whole_len = i32::try_from(whole.len()).expect("a short number");
    let digits = significant.trim_end_matches('0').to_owned();
    (negative, digits, whole_len - leading + exponent)
}

/// Re-indents valid JSON text as Go's `json.Indent` with an indent of two
/// spaces does: whitespace between tokens is dropped, every element and
/// member goes on its own line, and the bytes of strings and numbers are
/// copied unchanged.
pub(crate) fn indent(json: &str) -> String {
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    // After `{` or `[`: the line break waits for the next token, so an empty
    // object or array stays on one line.
    let mut pending_open = false;
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        let closing = matches!(c, '}' | ']');
        if pending_open && !closing {
            pending_open = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            '{' | '[' => {
                pending_open = true;
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            '}' | ']' => {
                if pending_open {
                    pending_open = false;
                } else {
                    depth -= 1;
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            '"' => {
                in_string = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Drops the whitespace between the tokens of valid JSON text, as Go's
/// `json.Compact` does; strings and numbers are copied unchanged.
pub(crate) fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        let s = "a\u{2028}b\u{2029}c\u{1}\u{8}\u{c}\n\r\t\u{7f}/<&>\"\\é";
        assert_eq!(
            to_go_string(s),
            "\"a\\u2028b\\u2029c\\u0001\\b\\f\\n\\r\\t\u{7f}/<&>\\\"\\\\é\""
        );
    }

    #[test]
    fn html_escape_spells_text_as_go_s_marshal_does() {
        let table = [
            // Raw characters in strings and keys.
            (
                "{\"a<b\":\"x>y & z\"}",
                "{\"a\\u003cb\":\"x\\u003ey \\u0026 z\"}",
            ),
            ("[\"a\u{2028}b\u{2029}c\"]", "[\"a\\u2028b\\u2029c\"]"),
            // Already escaped text, other escapes, numbers and DEL stay.
            (
                "{\"s\":\"\\u003c\\\"\\n\u{7f}/\",\"n\":1e3}",
                "{\"s\":\"\\u003c\\\"\\n\u{7f}/\",\"n\":1e3}",
            ),
            ("null", "null"),
        ];
        for (text, want) in table {
            assert_eq!(html_escape(text), want, "{text}");
            assert_eq!(html_escape(want), want, "idempotent on {want}");
        }
    }

    #[test]
    fn compact_drops_whitespace_between_tokens_only() {
        let text = "{ \"a b\" : [ 1e3 ,\n\t\"x \\\" y\" ] }";
        assert_eq!(compact(text), "{\"a b\":[1e3,\"x \\\" y\"]}");
        assert_eq!(compact(&indent(text)), compact(text));
    }

    #[test]
    fn indent_keeps_tokens_and_formats_empty_containers_on_one_line() {
        let text = r#" { "a" : [ ] , "b":{ },"c":[1e3 , "x, {y}: \"z\""],"d":{"e":-0.50}} "#;
        assert_eq!(
            indent(text),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1e3,\n    \"x, {y}: \\\"z\\\"\"\n  ],\n  \"d\": {\n    \"e\": -0.50\n  }\n}"
        );
    }
}
