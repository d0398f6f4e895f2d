//! Whether an identity lets a namespace use it: the explicit list, the
//! namespace label selector, or both (a union). Unset allows nobody.

use std::collections::BTreeMap;

use captf_api::identity::AllowedNamespaces;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// The answer for one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Allowed,
    /// Not allowed; the text says why, without naming the identity.
    Denied(String),
}

/// A selector that selects everything (`selector: {}`): no labels and no
/// expressions. It allows every namespace, even one that cannot be read.
fn selects_all(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// Whether answering for `namespace` needs its labels: only when the list
/// does not already allow it and a selector actually filters.
pub fn needs_namespace_labels(allowed: Option<&AllowedNamespaces>, namespace: &str) -> bool {
    allowed.is_some_and(|a| {
        !a.list.iter().flatten().any(|n| n == namespace)
            && a.selector.as_ref().is_some_and(|s| !selects_all(s))
    })
}

/// Whether `allowed` lets `namespace` use the identity. `labels` are the
/// namespace's labels, `None` when the namespace does not exist (or was not
/// read because [`needs_namespace_labels`] said so).
pub fn namespace_access(
    allowed: Option<&AllowedNamespaces>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Access {
    let Some(allowed) = allowed else {
        return Access::Denied("spec.allowedNamespaces is not set".to_owned());
    };
    if allowed.list.iter().flatten().any(|n| n == namespace) {
        return Access::Allowed;
    }
    let Some(selector) = &allowed.selector else {
        return Access::Denied(format!(
            "namespace {namespace} is not in spec.allowedNamespaces.list"
        ));
    };
    if selects_all(selector) {
        return Access::Allowed;
    }
    let requirements = match requirements(selector) {
        Ok(r) => r,
        Err(why) => {
            return Access::Denied(format!("spec.allowedNamespaces.selector is invalid: {why}"));
        }
    };
    let Some(labels) = labels else {
        return Access::Denied(format!("namespace {namespace} does not exist"));
    };
    if requirements.iter().all(|r| r.matches(labels)) {
        Access::Allowed
    } else {
        Access::Denied(format!(
            "namespace {namespace} is not in spec.allowedNamespaces.list and its labels do not match spec.allowedNamespaces.selector"
        ))
    }
}

/// One parsed selector term.
enum Requirement<'a> {
    Equals(&'a str, &'a str),
    In(&'a str, &'a [String]),
    NotIn(&'a str, &'a [String]),
    Exists(&'a str),
    DoesNotExist(&'a str),
}

impl Requirement<'_> {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match *self {
            Requirement::Equals(k, v) => labels.get(k).is_some_and(|l| l == v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            // Like Kubernetes: a missing key is "not in" any set.
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// Parses a selector the way Kubernetes does: set operators need values,
/// existence operators take none, and no other operator exists.
fn requirements(selector: &LabelSelector) -> Result<Vec<Requirement<'_>>, String> {
    let mut out: Vec<Requirement<'_>> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| Requirement::Equals(k, v))
        .collect();
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        out.push(requirement(expr).map_err(|why| format!("matchExpressions[{i}]: {why}"))?);
    }
    Ok(out)
}

fn requirement(expr: &LabelSelectorRequirement) -> Result<Requirement<'_>, String> {
    let values = expr.values.as_deref().unwrap_or_default();
    let key = expr.key.as_str();
    if key.is_empty() {
        return Err("key is empty".to_owned());
    }
    match expr.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            Err(format!("operator {} needs values", expr.operator))
        }
        "In" => Ok(Requirement::In(key, values)),
        "NotIn" => Ok(Requirement::NotIn(key, values)),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Err(format!("operator {} takes no values", expr.operator))
        }
        "Exists" => Ok(Requirement::Exists(key)),
        "DoesNotExist" => Ok(Requirement::DoesNotExist(key)),
        other => Err(format!("unknown operator {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: values.map(|vs| vs.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        exprs: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    fn allowed(list: Option<&[&str]>, selector: Option<LabelSelector>) -> AllowedNamespaces {
        AllowedNamespaces {
            list: list.map(|l| l.iter().map(|n| (*n).to_owned()).collect()),
            selector,
        }
    }

    /// Name, allowed namespaces, namespace, its labels, whether allowed.
    type Case<'a> = (
        &'a str,
        Option<AllowedNamespaces>,
        &'a str,
        Option<&'a BTreeMap<String, String>>,
        bool,
    );

    #[test]
    fn access_table() {
        let team = labels(&[("team", "a"), ("env", "prod")]);
        let other = labels(&[("team", "b")]);
        let team_sel = selector(&[("team", "a")], vec![]);
        let cases: Vec<Case<'_>> = vec![
            ("unset allows nobody", None, "ns", Some(&team), false),
            (
                "list hit",
                Some(allowed(Some(&["x", "ns"]), None)),
                "ns",
                None,
                true,
            ),
            (
                "list miss",
                Some(allowed(Some(&["x"]), None)),
                "ns",
                Some(&team),
                false,
            ),
            (
                "selector match",
                Some(allowed(None, Some(team_sel.clone()))),
                "ns",
                Some(&team),
                true,
            ),
            (
                "selector miss",
                Some(allowed(None, Some(team_sel.clone()))),
                "ns",
                Some(&other),
                false,
            ),
            (
                "selector on a missing namespace",
                Some(allowed(None, Some(team_sel.clone()))),
                "ns",
                None,
                false,
            ),
            (
                "union: list hit, selector miss",
                Some(allowed(Some(&["ns"]), Some(team_sel.clone()))),
                "ns",
                Some(&other),
                true,
            ),
            (
                "union: list miss, selector hit",
                Some(allowed(Some(&["x"]), Some(team_sel.clone()))),
                "ns",
                Some(&team),
                true,
            ),
            (
                "selector {} allows all, even unread",
                Some(allowed(None, Some(LabelSelector::default()))),
                "ns",
                None,
                true,
            ),
            (
                "empty maps count as {}",
                Some(allowed(
                    None,
                    Some(LabelSelector {
                        match_labels: Some(BTreeMap::new()),
                        match_expressions: Some(vec![]),
                    }),
                )),
                "ns",
                None,
                true,
            ),
            (
                "In",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "In", Some(&["a", "c"]))])),
                )),
                "ns",
                Some(&team),
                true,
            ),
            (
                "In miss",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "In", Some(&["c"]))])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "NotIn with key absent",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("env", "NotIn", Some(&["prod"]))])),
                )),
                "ns",
                Some(&other),
                true,
            ),
            (
                "NotIn hit",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("env", "NotIn", Some(&["prod"]))])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "Exists",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("env", "Exists", None)])),
                )),
                "ns",
                Some(&team),
                true,
            ),
            (
                "DoesNotExist",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("env", "DoesNotExist", None)])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "labels and expressions are ANDed",
                Some(allowed(
                    None,
                    Some(selector(
                        &[("team", "a")],
                        vec![expr("env", "In", Some(&["dev"]))],
                    )),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "NotIn without values is invalid",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "NotIn", Some(&[]))])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "In without values is invalid",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "In", None)])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "Exists with values is invalid",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "Exists", Some(&["a"]))])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "unknown operator is invalid",
                Some(allowed(
                    None,
                    Some(selector(&[], vec![expr("team", "Gt", Some(&["1"]))])),
                )),
                "ns",
                Some(&team),
                false,
            ),
            (
                "an invalid selector still lets the list allow",
                Some(allowed(
                    Some(&["ns"]),
                    Some(selector(&[], vec![expr("team", "Gt", None)])),
                )),
                "ns",
                Some(&team),
                true,
            ),
        ];
        for (name, allowed, ns, labels, want) in cases {
            let got = namespace_access(allowed.as_ref(), ns, labels);
            assert_eq!(got == Access::Allowed, want, "{name}: {got:?}");
        }
    }

    #[test]
    fn denials_say_why() {
        let bad = allowed(None, Some(selector(&[], vec![expr("team", "Gt", None)])));
        let Access::Denied(why) = namespace_access(Some(&bad), "ns", Some(&BTreeMap::new())) else {
            panic!("an invalid selector allowed");
        };
        assert!(
            why.contains("matchExpressions[0]") && why.contains("Gt"),
            "{why}"
        );
        let sel = allowed(None, Some(selector(&[("team", "a")], vec![])));
        assert_eq!(
            namespace_access(Some(&sel), "gone", None),
            Access::Denied("namespace gone does not exist".to_owned())
        );
        assert_eq!(
            namespace_access(None, "ns", None),
            Access::Denied("spec.allowedNamespaces is not set".to_owned())
        );
    }

    #[test]
    fn only_a_filtering_selector_needs_labels() {
        let filtering = allowed(Some(&["a"]), Some(selector(&[("team", "a")], vec![])));
        assert!(!needs_namespace_labels(None, "b"));
        assert!(!needs_namespace_labels(
            Some(&allowed(Some(&["a"]), None)),
            "b"
        ));
        assert!(!needs_namespace_labels(
            Some(&allowed(None, Some(LabelSelector::default()))),
            "b"
        ));
        assert!(needs_namespace_labels(Some(&filtering), "b"));
        // Listed: the selector need not be consulted.
        assert!(!needs_namespace_labels(Some(&filtering), "a"));
    }
}
