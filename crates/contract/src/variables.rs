//! User variables: module variables that are not part of the contract, set
//! through `spec.variables` / `spec.variablesFrom`. The root passes them
//! untyped next to the contract inputs.

use std::collections::BTreeMap;

use crate::Role;
use crate::json_text::JsonText;
use crate::names::{VariableNameError, check_user_variable_name};

/// One merged user variable.
#[derive(Clone, PartialEq)]
pub struct UserVariable {
    /// The value as written in its source, passed to the module and hashed
    /// with its number literals unchanged.
    pub value: JsonText,
    /// True when the winning value came from a Secret; the root then declares
    /// the variable `sensitive`.
    pub sensitive: bool,
}

impl std::fmt::Debug for UserVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be secrets: show only the shape.
        f.debug_struct("UserVariable")
            .field("value", &"<omitted>")
            .field("sensitive", &self.sensitive)
            .finish()
    }
}

/// A user variable that cannot be used. Messages name the variable, never the
/// value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariableError {
    #[error(transparent)]
    Name(#[from] VariableNameError),
    #[error("variable {name:?}: value is not valid JSON")]
    Value { name: String },
}

/// The merged user variables of one object, sorted by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserVariables(BTreeMap<String, UserVariable>);

impl UserVariables {
    /// No variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` (a later call for the same name wins, matching the merge
    /// order of `spec.variablesFrom` then `spec.variables`).
    pub fn insert(
        &mut self,
        role: Role,
        name: &str,
        value: JsonText,
        sensitive: bool,
    ) -> Result<(), VariableError> {
        check_user_variable_name(role, name)?;
        self.0
            .insert(name.to_owned(), UserVariable { value, sensitive });
        Ok(())
    }

    /// Sets `name` from JSON text (a `JSON`-format ConfigMap or Secret key).
    pub fn insert_json(
        &mut self,
        role: Role,
        name: &str,
        json: &str,
        sensitive: bool,
    ) -> Result<(), VariableError> {
        check_user_variable_name(role, name)?;
        let value = JsonText::parse(json).map_err(|_| VariableError::Value {
            name: name.to_owned(),
        })?;
        self.insert(role, name, value, sensitive)
    }

    /// Checks every name against the rules of `role` (for variables built
    /// without [`UserVariables::insert`], e.g. read back from a record).
    pub fn check(&self, role: Role) -> Result<(), VariableError> {
        for name in self.0.keys() {
            check_user_variable_name(role, name)?;
        }
        Ok(())
    }

    /// True when no variable is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The variables by name, in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &UserVariable)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// One variable.
    pub fn get(&self, name: &str) -> Option<&UserVariable> {
        self.0.get(name)
    }

    /// Builds the set without checking names; [`UserVariables::check`] does.
    pub fn from_map_unchecked(map: BTreeMap<String, UserVariable>) -> Self {
        UserVariables(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_json_names_the_variable_but_not_the_value() {
        let mut vars = UserVariables::new();
        let err = vars
            .insert_json(Role::Machine, "db_password", "hunter2-not-json", true)
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("db_password"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }

    #[test]
    fn later_insert_wins_and_debug_hides_values() {
        let mut vars = UserVariables::new();
        vars.insert(Role::Cluster, "size", JsonText::parse("1").unwrap(), false)
            .unwrap();
        vars.insert_json(Role::Cluster, "size", "\"s3cr3t\"", true)
            .unwrap();
        assert_eq!(vars.len(), 1);
        assert!(vars.get("size").unwrap().sensitive);
        assert!(!format!("{vars:?}").contains("s3cr3t"));
    }

    #[test]
    fn reserved_names_are_refused() {
        let mut vars = UserVariables::new();
        let err = vars
            .insert(Role::MachinePool, "node_labels", JsonText::null(), false)
            .unwrap_err();
        assert!(matches!(
            err,
            VariableError::Name(VariableNameError::ContractInput { .. })
        ));
    }
}
