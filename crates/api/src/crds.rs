//! The CustomResourceDefinitions of every kind, as the apiserver gets them.
//!
//! The derive produces most of each CRD; this module adds what belongs to
//! the kind rather than to a shared type (CEL rules that compare a whole
//! object with its previous version) and removes every schema default,
//! since defaults are resolved by the controller and never stored.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    ValidationRule,
};
use kube::CustomResourceExt;

use crate::{
    TerraformCluster, TerraformClusterIdentity, TerraformClusterTemplate, TerraformMachine,
    TerraformMachinePool, TerraformMachinePoolTemplate, TerraformMachineTemplate, TerraformPlan,
};

fn rule(rule: &str, message: &str, field_path: Option<&str>) -> ValidationRule {
    ValidationRule {
        rule: rule.to_string(),
        message: Some(message.to_string()),
        field_path: field_path.map(str::to_string),
        ..ValidationRule::default()
    }
}

fn cluster_rules() -> Vec<ValidationRule> {
    vec![
        rule(
            "!has(oldSelf.spec.controlPlaneEndpoint) || !has(oldSelf.spec.controlPlaneEndpoint.host) || !has(oldSelf.spec.controlPlaneEndpoint.port) || (has(self.spec.controlPlaneEndpoint) && self.spec.controlPlaneEndpoint == oldSelf.spec.controlPlaneEndpoint)",
            "spec.controlPlaneEndpoint is immutable once host and port are set",
            Some(".spec.controlPlaneEndpoint"),
        ),
        rule(
            "has(self.spec.identityRef)",
            "spec.identityRef is required; spec.defaults.identityRef applies only to machines and pools",
            Some(".spec.identityRef"),
        ),
    ]
}

fn immutable(path: &str, kind: &str) -> ValidationRule {
    let field = path.trim_start_matches("spec.");
    rule(
        &format!(
            "has(self.spec.{field}) == has(oldSelf.spec.{field}) && (!has(self.spec.{field}) || self.{path} == oldSelf.{path})"
        ),
        &format!("{kind} {path} is immutable; create a new {kind} instead"),
        Some(&format!(".{path}")),
    )
}

fn machine_rules() -> Vec<ValidationRule> {
    let mut rules: Vec<_> = [
        "spec.source",
        "spec.identityRef",
        "spec.variables",
        "spec.variablesFrom",
    ]
    .into_iter()
    .map(|p| immutable(p, "TerraformMachine"))
    .collect();
    rules.push(rule(
        "!has(oldSelf.spec.providerID) || (has(self.spec.providerID) && self.spec.providerID == oldSelf.spec.providerID)",
        "spec.providerID can only be set once, from empty to non-empty",
        Some(".spec.providerID"),
    ));
    rules
}

fn plan_rules() -> Vec<ValidationRule> {
    let mut rules: Vec<_> = [
        "spec.targetRef",
        "spec.planHash",
        "spec.inputsHash",
        "spec.reason",
        "spec.summary",
    ]
    .into_iter()
    .map(|p| immutable(p, "TerraformPlan"))
    .collect();
    rules.push(rule(
        "!(has(oldSelf.spec.approved) && oldSelf.spec.approved) || (has(self.spec.approved) && self.spec.approved && self.spec.approvedBy == oldSelf.spec.approvedBy)",
        "an approval can be neither withdrawn nor changed",
        Some(".spec.approved"),
    ));
    rules
}

/// Every CRD of the API, in kind order.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        with_rules(TerraformCluster::crd(), cluster_rules()),
        TerraformClusterTemplate::crd(),
        with_rules(TerraformMachine::crd(), machine_rules()),
        TerraformMachineTemplate::crd(),
        TerraformMachinePool::crd(),
        TerraformMachinePoolTemplate::crd(),
        TerraformClusterIdentity::crd(),
        with_rules(TerraformPlan::crd(), plan_rules()),
    ];
    for crd in &mut crds {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                normalise(schema);
            }
        }
    }
    crds
}

fn with_rules(
    mut crd: CustomResourceDefinition,
    rules: Vec<ValidationRule>,
) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .extend(rules.iter().cloned());
        }
    }
    crd
}

/// Removes schema defaults, and the `nullable` markers and `null` enum
/// members the derive adds for optional fields: an unset field is simply
/// absent, as with Go's `omitempty`.
fn normalise(schema: &mut JSONSchemaProps) {
    schema.default = None;
    schema.nullable = None;
    if let Some(values) = schema.enum_.as_mut() {
        values.retain(|v| !v.0.is_null());
    }
    if let Some(props) = schema.properties.as_mut() {
        props.values_mut().for_each(normalise);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        normalise(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        normalise(extra);
    }
    for list in [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of]
        .into_iter()
        .flatten()
    {
        list.iter_mut().for_each(normalise);
    }
}

/// File name the generator writes a CRD to, as controller-gen names them.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The YAML document written for a CRD.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let yaml = serde_yaml::to_string(crd).expect("a CRD serialises to YAML");
    format!("---\n{yaml}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_key(value: &serde_json::Value, key: &str) -> bool {
        match value {
            serde_json::Value::Object(map) => {
                map.contains_key(key) || map.values().any(|v| has_key(v, key))
            }
            serde_json::Value::Array(items) => items.iter().any(|v| has_key(v, key)),
            _ => false,
        }
    }

    #[test]
    fn no_schema_declares_a_default() {
        for crd in all() {
            let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
            assert!(!has_key(&schema, "default"), "{}", crd.spec.names.kind);
            assert!(!has_key(&schema, "nullable"), "{}", crd.spec.names.kind);
        }
    }

    #[test]
    fn committed_files_are_what_the_generator_writes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases");
        for crd in all() {
            let path = dir.join(file_name(&crd));
            let committed = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}; run crdgen", path.display()));
            assert_eq!(
                committed,
                to_yaml(&crd),
                "{} is stale; run crdgen",
                path.display()
            );
        }
    }

    #[test]
    fn names_scope_status_and_columns() {
        let crds = all();
        let by_kind = |kind: &str| {
            crds.iter()
                .find(|c| c.spec.names.kind == kind)
                .unwrap_or_else(|| panic!("{kind}"))
        };
        let expect: &[(&str, Option<&str>, bool, &[&str])] = &[
            (
                "TerraformCluster",
                Some("tfc"),
                true,
                &[
                    "Cluster",
                    "Ready",
                    "Provisioned",
                    "Endpoint",
                    "Image",
                    "InputsApplied",
                    "Age",
                ],
            ),
            (
                "TerraformClusterTemplate",
                Some("tfct"),
                false,
                &["Image", "Age"],
            ),
            (
                "TerraformMachine",
                Some("tfm"),
                true,
                &[
                    "Cluster",
                    "Machine",
                    "Ready",
                    "Provisioned",
                    "ProviderID",
                    "Image",
                    "InputsApplied",
                    "Age",
                ],
            ),
            (
                "TerraformMachineTemplate",
                Some("tfmt"),
                true,
                &["Image", "Age"],
            ),
            (
                "TerraformMachinePool",
                Some("tfmp"),
                true,
                &[
                    "Cluster",
                    "MachinePool",
                    "Replicas",
                    "Ready",
                    "InputsApplied",
                    "Age",
                ],
            ),
            (
                "TerraformMachinePoolTemplate",
                Some("tfmpt"),
                false,
                &["Image", "Age"],
            ),
            (
                "TerraformClusterIdentity",
                None,
                true,
                &["Secret", "Namespace", "Ready", "Age"],
            ),
            (
                "TerraformPlan",
                Some("tfplan"),
                true,
                &[
                    "Target", "Reason", "Phase", "Create", "Update", "Replace", "Delete",
                    "Approved", "Age",
                ],
            ),
        ];
        for &(kind, short, status, columns) in expect {
            let crd = by_kind(kind);
            let version = &crd.spec.versions[0];
            assert_eq!(
                crd.spec.names.short_names.clone().unwrap_or_default(),
                short.map(|s| vec![s.to_string()]).unwrap_or_default(),
                "{kind}"
            );
            assert_eq!(
                version
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some(),
                status,
                "{kind}"
            );
            let got: Vec<_> = version
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(got, columns, "{kind}");
            let scope = if kind == "TerraformClusterIdentity" {
                "Cluster"
            } else {
                "Namespaced"
            };
            assert_eq!(crd.spec.scope, scope, "{kind}");
            assert!(version.served && version.storage);
        }
    }
}
