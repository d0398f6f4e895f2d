//! Label, annotation and label-selector syntax.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use regex::Regex;

use super::{ViolationKind, Violations};

static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("valid regex")
});
static DNS_SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(crate::common::DNS_SUBDOMAIN_PATTERN).expect("valid regex"));
static DNS_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(crate::common::DNS_LABEL_PATTERN).expect("valid regex"));

/// Most bytes all annotations of an object may hold together.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Why `key` is not a qualified label/annotation key, or `None`.
pub fn label_key_problem(key: &str) -> Option<&'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty() || prefix.len() > 253 || !DNS_SUBDOMAIN.is_match(prefix))
    {
        return Some("prefix must be a DNS subdomain of at most 253 characters");
    }
    if name.is_empty() || name.len() > 63 || !NAME.is_match(name) {
        return Some(
            "name part must be 1 to 63 alphanumeric characters, '-', '_' or '.', starting and ending alphanumerically",
        );
    }
    None
}

/// Why `value` is not a label value, or `None`.
pub fn label_value_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() || (value.len() <= 63 && NAME.is_match(value)) {
        None
    } else {
        Some(
            "must be at most 63 alphanumeric characters, '-', '_' or '.', starting and ending alphanumerically",
        )
    }
}

pub(crate) fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && DNS_LABEL.is_match(s)
}

pub(crate) fn check_labels(
    v: &mut Violations,
    field: &str,
    labels: Option<&BTreeMap<String, String>>,
) {
    for (key, value) in labels.into_iter().flatten() {
        if let Some(detail) = label_key_problem(key) {
            v.push(field, ViolationKind::Invalid, format!("key {detail}"));
        } else if let Some(detail) = label_value_problem(value) {
            v.push(format!("{field}[{key}]"), ViolationKind::Invalid, detail);
        }
    }
}

pub(crate) fn check_annotations(
    v: &mut Violations,
    field: &str,
    annotations: Option<&BTreeMap<String, String>>,
) {
    let mut total = 0;
    for (key, value) in annotations.into_iter().flatten() {
        total += key.len() + value.len();
        if let Some(detail) = label_key_problem(key) {
            v.push(field, ViolationKind::Invalid, format!("key {detail}"));
        }
    }
    if total > MAX_ANNOTATIONS_BYTES {
        v.push(
            field,
            ViolationKind::TooMany,
            "annotations may hold at most 256 KiB in total",
        );
    }
}

/// A selector parses when every key and value is well formed and each
/// expression's operator fits its values.
pub(crate) fn check_selector(v: &mut Violations, field: &str, selector: &LabelSelector) {
    check_labels(
        v,
        &format!("{field}.matchLabels"),
        selector.match_labels.as_ref(),
    );
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        if label_key_problem(&expr.key).is_some() {
            v.push(
                format!("{at}.key"),
                ViolationKind::Invalid,
                "must be a valid label key",
            );
        }
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    v.push(
                        format!("{at}.values"),
                        ViolationKind::Required,
                        "must be non-empty for In and NotIn",
                    );
                }
                if values.iter().any(|x| label_value_problem(x).is_some()) {
                    v.push(
                        format!("{at}.values"),
                        ViolationKind::Invalid,
                        "must be valid label values",
                    );
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    v.push(
                        format!("{at}.values"),
                        ViolationKind::Forbidden,
                        "must be empty for Exists and DoesNotExist",
                    );
                }
            }
            _ => v.push(
                format!("{at}.operator"),
                ViolationKind::NotSupported,
                "must be In, NotIn, Exists or DoesNotExist",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn label_keys_and_values() {
        for ok in ["app", "cluster.x-k8s.io/cluster-name", "a_b.c-d", "x/y"] {
            assert_eq!(label_key_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "/x",
            "-a",
            "a/",
            "Bad_Prefix/x",
            "a/b/c",
            &"x".repeat(64),
        ] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(label_value_problem(""), None);
        assert_eq!(label_value_problem("v1.2"), None);
        assert!(label_value_problem("has space").is_some());
        assert!(label_value_problem(&"v".repeat(64)).is_some());
    }

    #[test]
    fn selectors() {
        let expr = |op: &str, values: Option<Vec<&str>>| LabelSelectorRequirement {
            key: "team".into(),
            operator: op.into(),
            values: values.map(|v| v.into_iter().map(String::from).collect()),
        };
        let selector = |exprs| LabelSelector {
            match_expressions: Some(exprs),
            match_labels: None,
        };
        let mut v = Violations::default();
        check_selector(
            &mut v,
            "s",
            &selector(vec![expr("In", Some(vec!["a"])), expr("Exists", None)]),
        );
        check_selector(&mut v, "s", &LabelSelector::default());
        assert!(v.0.is_empty());
        check_selector(
            &mut v,
            "s",
            &selector(vec![
                expr("In", None),
                expr("Exists", Some(vec!["a"])),
                expr("Near", None),
            ]),
        );
        let got: Vec<_> = v.0.iter().map(|x| x.field.as_str()).collect();
        assert_eq!(
            got,
            [
                "s.matchExpressions[0].values",
                "s.matchExpressions[1].values",
                "s.matchExpressions[2].operator"
            ]
        );
    }
}
