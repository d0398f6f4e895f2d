//! Property tests of number literals and layout: the hashes see every
//! number exactly as written, and nothing else about the text.
//!
//! Values are generated as trees whose numbers are literal text, then written
//! out with a chosen key order and spacing, so two texts of one value and two
//! values that differ only in a literal's spelling can be compared.

use crate::common;

use std::collections::BTreeMap;

use captf_contract::{JsonText, Role, RoleInputs, UserVariables, exports_hash, inputs_hash};
use proptest::prelude::*;

/// A JSON value whose numbers are kept as literal text.
#[derive(Debug, Clone)]
enum Doc {
    Null,
    Bool(bool),
    Number(String),
    Text(String),
    List(Vec<Doc>),
    Object(BTreeMap<String, Doc>),
}

/// How a [`Doc`] is written out.
#[derive(Debug, Clone, Copy)]
struct Layout {
    reverse_keys: bool,
    /// Whitespace put around every token.
    space: &'static str,
}

const COMPACT: Layout = Layout {
    reverse_keys: false,
    space: "",
};

fn write(doc: &Doc, layout: Layout, out: &mut String) {
    let s = layout.space;
    match doc {
        Doc::Null => out.push_str("null"),
        Doc::Bool(b) => out.push_str(&b.to_string()),
        Doc::Number(literal) => out.push_str(literal),
        Doc::Text(t) => out.push_str(&serde_json::to_string(t).unwrap()),
        Doc::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i > 0 { "," } else { "" });
                out.push_str(s);
                write(item, layout, out);
                out.push_str(s);
            }
            out.push(']');
        }
        Doc::Object(members) => {
            let mut members: Vec<_> = members.iter().collect();
            if layout.reverse_keys {
                members.reverse();
            }
            out.push('{');
            for (i, (key, value)) in members.into_iter().enumerate() {
                out.push_str(if i > 0 { "," } else { "" });
                out.push_str(s);
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push_str(s);
                out.push(':');
                out.push_str(s);
                write(value, layout, out);
                out.push_str(s);
            }
            out.push('}');
        }
    }
}

fn text(doc: &Doc, layout: Layout) -> String {
    let mut out = String::new();
    write(doc, layout, &mut out);
    out
}

/// Any JSON number literal: signs, fractions with trailing zeros, exponents
/// in every spelling, integers far beyond 64 bits.
fn literal() -> impl Strategy<Value = String> {
    "-?(0|[1-9][0-9]{0,40})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?"
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        literal().prop_map(Doc::Number),
        "[ -~\u{e9}\u{2028}<>&]{0,6}".prop_map(Doc::Text),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Doc::List),
            prop::collection::btree_map("[a-zA-Z<>&_]{1,4}", inner, 0..4).prop_map(Doc::Object),
        ]
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        any::<bool>(),
        prop::sample::select(vec!["", " ", "\n  ", "\t\r\n"]),
    )
        .prop_map(|(reverse_keys, space)| Layout {
            reverse_keys,
            space,
        })
}

/// Two different spellings of a number, most of them of the same value.
fn respelled() -> impl Strategy<Value = (String, String)> {
    let digits = "[1-9][0-9]{0,5}";
    prop_oneof![
        // A trailing zero in the fraction: 0.5 and 0.50.
        (digits, "[0-9]{1,4}").prop_map(|(i, f)| (format!("{i}.{f}"), format!("{i}.{f}0"))),
        // An integer beyond 64 bits and its neighbour in the last digit.
        "[1-9][0-9]{20,40}".prop_map(|n| {
            let last = n.as_bytes()[n.len() - 1] - b'0';
            let other = format!("{}{}", &n[..n.len() - 1], (last + 1) % 10);
            (n, other)
        }),
        // An exponent and the integer it stands for: 1e3 and 1000.
        (digits, 1..6usize)
            .prop_map(|(m, e)| (format!("{m}e{e}"), format!("{m}{}", "0".repeat(e)))),
        // Other spellings of one exponent: 1e3, 1E3, 1e+3.
        (digits, 1..6usize).prop_map(|(m, e)| (format!("{m}e{e}"), format!("{m}E{e}"))),
        (digits, 1..6usize).prop_map(|(m, e)| (format!("{m}e{e}"), format!("{m}e+{e}"))),
        // A sign on zero: 0 and -0.
        Just(("0".to_owned(), "-0".to_owned())),
    ]
}

/// The inputs hash of the cluster fixture with one user variable `value`.
fn hash_with_variable(value: &str) -> String {
    let inputs: RoleInputs = common::cluster_full().into();
    let mut vars = UserVariables::new();
    vars.insert(
        Role::Cluster,
        "settings",
        JsonText::parse(value).unwrap(),
        false,
    )
    .unwrap();
    inputs_hash(common::IMAGE, &inputs, &vars).unwrap()
}

/// `{"n": [<literal>], "pad": <pad>}`, written compactly: the literal sits
/// next to arbitrary other content.
fn with_number(pad: &Doc, literal: &str) -> String {
    let doc = Doc::Object(BTreeMap::from([
        ("pad".to_owned(), pad.clone()),
        (
            "n".to_owned(),
            Doc::List(vec![Doc::Number(literal.to_owned())]),
        ),
    ]));
    text(&doc, COMPACT)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_number_spelled_differently_changes_every_hash(pad in doc(), (a, b) in respelled()) {
        prop_assert_ne!(&a, &b);
        let (text_a, text_b) = (with_number(&pad, &a), with_number(&pad, &b));
        prop_assert_ne!(hash_with_variable(&text_a), hash_with_variable(&text_b), "{} vs {}", a, b);
        prop_assert_ne!(exports_hash(&text_a).unwrap(), exports_hash(&text_b).unwrap(), "{} vs {}", a, b);
        // The module receives the number as written.
        let mut m = common::machine_full();
        m.captf_cluster_outputs = JsonText::parse(&text_a).unwrap();
        let rendered = captf_contract::render_root(&m.into(), &UserVariables::new()).unwrap();
        prop_assert!(rendered.tfvars_json.contains(&format!("\n      {a}\n")), "{}", rendered.tfvars_json);
    }

    #[test]
    fn layout_and_key_order_do_not_change_any_hash(value in doc(), a in layout(), b in layout()) {
        let (text_a, text_b) = (text(&value, a), text(&value, b));
        prop_assert_eq!(hash_with_variable(&text_a), hash_with_variable(&text_b));
        prop_assert_eq!(exports_hash(&text_a).unwrap(), exports_hash(&text_b).unwrap());
    }

    #[test]
    fn recorded_roots_hash_as_the_inputs_they_were_rendered_from(
        exports in doc(),
        variable in doc(),
        sensitive in any::<bool>(),
    ) {
        // Integer literals only in the exports: anything else is refused.
        let exports = text(&exports, COMPACT);
        let mut m = common::machine_full();
        m.captf_cluster_outputs = JsonText::parse(&exports).unwrap();
        let inputs: RoleInputs = m.into();
        let mut vars = UserVariables::new();
        vars.insert(Role::Machine, "settings", JsonText::parse(&text(&variable, COMPACT)).unwrap(), sensitive)
            .unwrap();
        let hashed = inputs_hash(common::IMAGE, &inputs, &vars);
        let rendered = captf_contract::render_root(&inputs, &vars).unwrap();
        let (back_inputs, back_vars) =
            captf_contract::parse_rendered_root(Role::Machine, &rendered).unwrap();
        prop_assert_eq!(inputs_hash(common::IMAGE, &back_inputs, &back_vars), hashed);
        prop_assert_eq!(captf_contract::render_root(&back_inputs, &back_vars).unwrap(), rendered);
    }
}
