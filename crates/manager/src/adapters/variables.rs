//! The user variables an object's module gets: its `spec.variablesFrom`
//! sources in list order (a later source wins), then `spec.variables`,
//! which win over every source. Secret-sourced variables are declared
//! sensitive. Errors name the source and key, never a value. Pure.
//!
//! Values reach the module and the inputs hash as written: a `JSON`-format
//! source's bytes are kept as they are (number literals, key order), and a
//! `String`-format value becomes a JSON string with `<`, `>` and `&`
//! escaped, as other implementations of the contract write it. Inline
//! `spec.variables` arrive decoded, and are written back as the apiserver
//! served them (`JsonText::from_served_value`), which is the text other
//! implementations hold: an integer beyond 64 bits keeps its digits.

use std::collections::BTreeMap;

use captf_api::common::{VariablesFormat, VariablesSource};
use captf_api::names::reasons;
use captf_contract::{JsonText, Role, UserVariables};
use serde_json::Value;

use super::condition;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

/// A source as read: its data, or `None` when it does not exist or lacks
/// the `captf.io/variables=true` label (both count as missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceData(pub BTreeMap<String, Vec<u8>>);

/// How a source is named in messages: `ConfigMap x` / `Secret y`.
pub fn source_label(s: &VariablesSource) -> String {
    match (&s.config_map_ref, &s.secret_ref) {
        (Some(c), _) => format!("ConfigMap {}", c.name),
        (None, Some(r)) => format!("Secret {}", r.name),
        (None, None) => "a source naming neither configMapRef nor secretRef".to_owned(),
    }
}

/// Merges the sources (each with what was read of it) and the inline
/// variables. `Err` is the `DependenciesReady` to report.
pub fn merge(
    role: Role,
    inline: Option<&serde_json::Map<String, Value>>,
    sources: &[(VariablesSource, Option<SourceData>)],
) -> Result<UserVariables, ConditionValue> {
    let invalid = |m: String| condition(ConditionStatus::False, reasons::VARIABLES_INVALID, m);
    let mut vars = UserVariables::new();
    for (i, (source, data)) in sources.iter().enumerate() {
        let label = source_label(source);
        let Some(SourceData(data)) = data else {
            if source.optional == Some(true) {
                continue;
            }
            return Err(condition(
                ConditionStatus::False,
                reasons::VARIABLES_SOURCE_NOT_FOUND,
                format!(
                    "spec.variablesFrom[{i}]: {label} does not exist or lacks the label captf.io/variables=true"
                ),
            ));
        };
        let sensitive = source.secret_ref.is_some() && source.config_map_ref.is_none();
        let json = source.format == Some(VariablesFormat::Json);
        for (key, bytes) in data {
            let at = || format!("spec.variablesFrom[{i}] ({label}) key {key}");
            let text = std::str::from_utf8(bytes)
                .map_err(|_| invalid(format!("{}: the value is not UTF-8", at())))?;
            let value = if json {
                JsonText::parse(text)
                    .map_err(|_| invalid(format!("{}: the value is not valid JSON", at())))?
            } else {
                JsonText::html_escaped_string(text)
            };
            vars.insert(role, key, value, sensitive)
                .map_err(|e| invalid(format!("{}: {e}", at())))?;
        }
    }
    for (k, v) in inline.into_iter().flatten() {
        vars.insert(role, k, JsonText::from_served_value(v), false)
            .map_err(|e| invalid(format!("spec.variables.{k}: {e}")))?;
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use captf_api::common::LocalNameReference;
    use serde_json::json;

    use super::*;

    fn cm(name: &str, optional: bool, format: Option<VariablesFormat>) -> VariablesSource {
        VariablesSource {
            config_map_ref: Some(LocalNameReference { name: name.into() }),
            secret_ref: None,
            optional: Some(optional),
            format,
        }
    }

    fn secret(name: &str) -> VariablesSource {
        VariablesSource {
            config_map_ref: None,
            secret_ref: Some(LocalNameReference { name: name.into() }),
            optional: None,
            format: None,
        }
    }

    fn data(pairs: &[(&str, &str)]) -> Option<SourceData> {
        Some(SourceData(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
        ))
    }

    fn value(vars: &UserVariables, key: &str) -> Option<(Value, bool)> {
        vars.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (v.value.to_value(), v.sensitive))
    }

    #[test]
    fn later_sources_win_and_inline_wins_over_all() {
        let inline = serde_json::Map::from_iter([("size".to_owned(), json!(5))]);
        let sources = vec![
            (cm("a", false, None), data(&[("size", "1"), ("zone", "a")])),
            (cm("b", false, None), data(&[("zone", "b")])),
            (secret("s"), data(&[("token", "t0ken")])),
        ];
        let vars = merge(Role::Cluster, Some(&inline), &sources).unwrap();
        assert_eq!(value(&vars, "size"), Some((json!(5), false)));
        assert_eq!(value(&vars, "zone"), Some((json!("b"), false)));
        assert_eq!(
            value(&vars, "token"),
            Some((json!("t0ken"), true)),
            "Secret values are sensitive"
        );
    }

    #[test]
    fn json_sources_parse_and_string_sources_stay_strings() {
        let sources = vec![
            (
                cm("j", false, Some(VariablesFormat::Json)),
                data(&[("tags", "{\"team\":\"a\"}"), ("n", "3")]),
            ),
            (
                cm("s", false, Some(VariablesFormat::String)),
                data(&[("m", "3")]),
            ),
        ];
        let vars = merge(Role::Cluster, None, &sources).unwrap();
        assert_eq!(value(&vars, "tags").unwrap().0, json!({"team": "a"}));
        assert_eq!(value(&vars, "n").unwrap().0, json!(3));
        assert_eq!(value(&vars, "m").unwrap().0, json!("3"));
    }

    #[test]
    fn values_keep_their_bytes_and_strings_escape_html_characters() {
        let sources = vec![
            (
                cm("j", false, Some(VariablesFormat::Json)),
                data(&[
                    ("n", "1e3"),
                    (
                        "o",
                        "{ \"b\": 0.50, \"a\": 123456789012345678901234567890 }",
                    ),
                ]),
            ),
            (secret("s"), data(&[("pw", "a<b> & \"c\"")])),
        ];
        let vars = merge(Role::Cluster, None, &sources).unwrap();
        let text = |k: &str| vars.get(k).unwrap().value.as_str().to_owned();
        assert_eq!(text("n"), "1e3");
        assert_eq!(
            text("o"),
            "{ \"b\": 0.50, \"a\": 123456789012345678901234567890 }"
        );
        assert_eq!(text("pw"), r#""a\u003cb\u003e \u0026 \"c\"""#);
    }

    /// Inline values come through the typed object as a Kubernetes client
    /// reads it (numbers decoded, the spec's fields buffered by serde's
    /// flatten) and are written as the apiserver served them.
    #[test]
    fn inline_values_are_written_back_as_the_apiserver_served_them() {
        use captf_api::cluster::TerraformCluster;
        let served = r#"{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformCluster",
            "metadata":{"name":"prod","namespace":"team-a"},
            "spec":{"source":{"image":"ghcr.io/example/m:v1"},
            "variables":{"big":100000000000000000000,"huge":1.2345678901234568e+29,"note":"\u003ca\u0026b\u003e","ratio":0.5}}}"#;
        let tc: TerraformCluster = serde_json::from_str(served).unwrap();
        let vars = merge(Role::Cluster, tc.spec.workspace.variables.as_ref(), &[]).unwrap();
        let text = |k: &str| vars.get(k).unwrap().value.as_str().to_owned();
        assert_eq!(text("big"), "100000000000000000000");
        assert_eq!(text("huge"), "1.2345678901234568e+29");
        assert_eq!(text("note"), r#""\u003ca\u0026b\u003e""#);
        assert_eq!(text("ratio"), "0.5");
    }

    #[test]
    fn missing_invalid_and_reserved_name_the_source_and_key_never_the_value() {
        type Sources = Vec<(VariablesSource, Option<SourceData>)>;
        let rows: Vec<(&str, Sources, &str, &str)> = vec![
            (
                "missing required",
                vec![(cm("gone", false, None), None)],
                "VariablesSourceNotFound",
                "spec.variablesFrom[0]: ConfigMap gone",
            ),
            (
                "bad JSON",
                vec![(
                    cm("j", false, Some(VariablesFormat::Json)),
                    data(&[("k", "{secret-ish")]),
                )],
                "VariablesInvalid",
                "ConfigMap j) key k: the value is not valid JSON",
            ),
            (
                "reserved name",
                vec![(secret("s"), data(&[("captf_cluster", "hunter2")]))],
                "VariablesInvalid",
                "Secret s) key captf_cluster",
            ),
        ];
        for (name, sources, reason, needle) in rows {
            let e = merge(Role::Cluster, None, &sources).unwrap_err();
            assert_eq!(e.reason, reason, "{name}");
            assert!(e.message.contains(needle), "{name}: {}", e.message);
            assert!(
                !e.message.contains("hunter2") && !e.message.contains("secret-ish"),
                "{name}: {}",
                e.message
            );
        }
        let not_utf8 = vec![(
            cm("b", false, None),
            Some(SourceData(BTreeMap::from([("k".to_owned(), vec![0xff])]))),
        )];
        assert!(
            merge(Role::Cluster, None, &not_utf8)
                .unwrap_err()
                .message
                .contains("not UTF-8")
        );
        // An optional source that is missing contributes nothing.
        let optional = vec![(cm("gone", true, None), None)];
        assert!(
            merge(Role::Cluster, None, &optional)
                .unwrap()
                .iter()
                .next()
                .is_none()
        );
    }
}
