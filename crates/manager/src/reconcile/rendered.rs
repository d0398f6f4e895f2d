//! A role's inputs rendered into the root module's two files and hashed.

use captf_api::names::reasons;

use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

/// Current inputs, rendered.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub files: (String, String),
    pub hash: String,
    pub image: String,
}

impl Rendered {
    /// `main.tf.json` and `terraform.tfvars.json` together, in bytes.
    pub fn bytes(&self) -> u64 {
        (self.files.0.len() + self.files.1.len()) as u64
    }
}

/// Renders a role's inputs with the user variables; `Err` is the
/// `DependenciesReady` to report (too large, exports with fractions, or
/// variables the hash refuses).
pub fn render_inputs(
    inputs: &captf_contract::RoleInputs,
    vars: &captf_contract::UserVariables,
    image: &str,
) -> Result<Rendered, ConditionValue> {
    match (
        captf_contract::render_root(inputs, vars),
        captf_contract::inputs_hash(image, inputs, vars),
    ) {
        (Ok(root), Ok(hash)) => Ok(Rendered {
            files: (root.main_tf_json, root.tfvars_json),
            hash,
            image: image.to_owned(),
        }),
        (Err(e), _) => Err(ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::INPUTS_TOO_LARGE,
            message: e.to_string(),
        }),
        // Exports may hold any number, but the inputs passed on may not: the
        // object waits for the cluster's module to export integers.
        (_, Err(captf_contract::hash::HashError::NonIntegerNumber { path, .. }))
            if path.starts_with("/captf_cluster_outputs/") =>
        {
            Err(ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::WAITING_FOR_CLUSTER_EXPORTS,
                message: format!(
                    "the TerraformCluster's exports hold a non-integer number at {}, which cannot be passed on; export integers or strings",
                    path.trim_start_matches("/captf_cluster_outputs")
                ),
            })
        }
        (_, Err(e)) => Err(ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::VARIABLES_INVALID,
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use captf_contract::inputs::{
        BootstrapData, BootstrapFormat, ClusterRef, CommonInputs, MachineInputs,
    };
    use captf_contract::{JsonText, Role, RoleInputs, UserVariables};

    use super::*;

    fn machine(exports: &str) -> RoleInputs {
        let cluster = ClusterRef {
            name: "prod".into(),
            namespace: "ns".into(),
        };
        RoleInputs::Machine(MachineInputs {
            common: CommonInputs::new(Role::Machine, cluster, "m-0", "ns", None),
            captf_cluster_outputs: JsonText::parse(exports).unwrap(),
            machine_name: "m-0".into(),
            bootstrap_data: BootstrapData::from_bytes(b"#cloud-config"),
            bootstrap_format: BootstrapFormat::CloudConfig,
            failure_domain: None,
            kubernetes_version: None,
            control_plane: false,
        })
    }

    #[test]
    fn fractional_exports_wait_for_the_cluster_without_naming_the_value() {
        let vars = UserVariables::new();
        let e = render_inputs(&machine(r#"{"lb": {"w": 0.25}}"#), &vars, "img").unwrap_err();
        assert_eq!(e.reason, reasons::WAITING_FOR_CLUSTER_EXPORTS);
        assert!(e.message.contains("at /lb/w"), "{}", e.message);
        assert!(!e.message.contains("0.25"), "{}", e.message);
        // Long integers and -0 are integers and pass as written.
        let ok = render_inputs(
            &machine(r#"{"n": 123456789012345678901234567890, "z": -0}"#),
            &vars,
            "img",
        )
        .unwrap();
        assert!(ok.files.1.contains("123456789012345678901234567890"));
    }
}
