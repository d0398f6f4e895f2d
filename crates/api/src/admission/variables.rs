//! Rules for inline module variables and their sources.

use captf_contract::Role;
use captf_contract::names::{self as contract_names, RESERVED_PREFIX, VariableNameError};

use super::{ViolationKind, Violations};
use crate::common::{Variables, VariablesSource};

pub use captf_contract::names::is_identifier;

/// Why `key` cannot be a variable of a `role` module, or `None`. The rules
/// are the contract's; the wording is admission's.
pub(crate) fn key_problem(key: &str, role: Role) -> Option<String> {
    let err = contract_names::check_user_variable_name(role, key).err()?;
    Some(match err {
        VariableNameError::Syntax { .. } => {
            "must be a Terraform identifier: a letter or underscore, then letters, digits, underscores or hyphens".into()
        }
        VariableNameError::ReservedPrefix { .. } => {
            format!("names starting with {RESERVED_PREFIX} are reserved for inputs the controller sets")
        }
        VariableNameError::ContractInput { .. } => {
            format!("is an input the controller sets for the {} role", role.as_str())
        }
        VariableNameError::MetaArgument { .. } => "is a module meta-argument".into(),
    })
}

/// The key rules, applied to every key of `variables`.
pub(crate) fn check(v: &mut Violations, field: &str, variables: Option<&Variables>, role: Role) {
    let Some(variables) = variables else { return };
    if variables.is_empty() {
        v.push(
            field,
            ViolationKind::Required,
            "must hold at least one variable when set",
        );
    }
    if variables.len() > contract_names::MAX_VARIABLES {
        v.push(
            field,
            ViolationKind::TooMany,
            format!(
                "must have at most {} variables",
                contract_names::MAX_VARIABLES
            ),
        );
    }
    for key in variables.keys() {
        if let Some(detail) = key_problem(key, role) {
            // Keys are names, not values: naming them is what lets a user
            // find the offending entry.
            v.push(format!("{field}[{key}]"), ViolationKind::Invalid, detail);
        }
    }
}

/// Each source names exactly one of a ConfigMap and a Secret.
pub(crate) fn check_sources(v: &mut Violations, field: &str, sources: Option<&[VariablesSource]>) {
    for (i, source) in sources.unwrap_or_default().iter().enumerate() {
        if source.config_map_ref.is_some() == source.secret_ref.is_some() {
            v.push(
                format!("{field}[{i}]"),
                ViolationKind::Invalid,
                "set exactly one of configMapRef and secretRef",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::LocalNameReference;
    use serde_json::json;

    fn vars(value: serde_json::Value) -> Variables {
        value.as_object().unwrap().clone()
    }

    fn fields(v: Violations) -> Vec<String> {
        v.0.into_iter().map(|x| x.field).collect()
    }

    #[test]
    fn key_rules_per_role() {
        let cases: &[(&str, Role, bool)] = &[
            ("instance_type", Role::MachinePool, true),
            ("_private-name", Role::Machine, true),
            ("machine_name", Role::MachinePool, true),
            ("machine_name", Role::Machine, false),
            ("replicas", Role::MachinePool, false),
            ("replicas", Role::Machine, true),
            ("control_plane_initialized", Role::Cluster, false),
            ("captf_anything", Role::Cluster, false),
            ("count", Role::MachinePool, false),
            ("for_each", Role::Cluster, false),
            ("1abc", Role::Machine, false),
            ("has space", Role::Machine, false),
            ("", Role::Machine, false),
        ];
        for &(key, role, ok) in cases {
            assert_eq!(key_problem(key, role).is_none(), ok, "{key} for {role:?}");
        }
    }

    #[test]
    fn every_bad_key_is_reported_at_once() {
        let mut v = Violations::default();
        let variables = vars(json!({"ok": 1, "captf_x": 2, "replicas": 3, "count": 4, "9": 5}));
        check(
            &mut v,
            "spec.variables",
            Some(&variables),
            Role::MachinePool,
        );
        let mut got = fields(v);
        got.sort();
        assert_eq!(
            got,
            [
                "spec.variables[9]",
                "spec.variables[captf_x]",
                "spec.variables[count]",
                "spec.variables[replicas]"
            ]
        );
    }

    #[test]
    fn count_limits() {
        let mut v = Violations::default();
        check(
            &mut v,
            "spec.variables",
            Some(&Variables::new()),
            Role::Machine,
        );
        assert_eq!(fields(v), ["spec.variables"]);
        let many: Variables = (0..257).map(|i| (format!("v{i}"), json!(i))).collect();
        let mut v = Violations::default();
        check(&mut v, "spec.variables", Some(&many), Role::Machine);
        assert_eq!(v.0[0].kind, ViolationKind::TooMany);
        let mut v = Violations::default();
        check(&mut v, "spec.variables", None, Role::Machine);
        assert!(v.0.is_empty());
    }

    #[test]
    fn sources_set_exactly_one_ref() {
        let r = || Some(LocalNameReference { name: "n".into() });
        let source = |cm, s| VariablesSource {
            config_map_ref: cm,
            secret_ref: s,
            optional: None,
            format: None,
        };
        let sources = [
            source(r(), None),
            source(r(), r()),
            source(None, None),
            source(None, r()),
        ];
        let mut v = Violations::default();
        check_sources(&mut v, "spec.variablesFrom", Some(&sources));
        assert_eq!(
            fields(v),
            ["spec.variablesFrom[1]", "spec.variablesFrom[2]"]
        );
    }
}
