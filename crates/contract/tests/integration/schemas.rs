//! The embedded JSON Schemas accept their valid examples, refuse their
//! invalid ones at the expected places, and accept what the renderer writes.

use crate::common;

use captf_contract::schemas::{Direction, example};
use captf_contract::{Role, UserVariables, render_root};
use serde_json::Value;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn valid_examples_pass() {
    for role in Role::ALL {
        for d in Direction::ALL {
            let v = common::validator(role, d);
            let ex = example(role, d, true);
            let errors = common::schema_errors(&v, &parse(ex.text));
            assert!(errors.is_empty(), "{}: {errors:?}", ex.name);
        }
    }
}

#[test]
fn invalid_examples_fail_where_expected() {
    // Every deliberate violation of each invalid example must be reported.
    let expected: [(Role, Direction, &[&str]); 6] = [
        (
            Role::Cluster,
            Direction::Inputs,
            &[
                "/captf_contract",
                "/captf_object/kind",
                "/control_plane_endpoint",
                "/cluster_network",
                "",
            ],
        ),
        (
            Role::Cluster,
            Direction::Outputs,
            &["/control_plane_endpoint", "/failure_domains", "/health"],
        ),
        (
            Role::Machine,
            Direction::Inputs,
            &["/bootstrap_data", "/bootstrap_format", "/machine_name", ""],
        ),
        (
            Role::Machine,
            Direction::Outputs,
            &["/provider_id", "/addresses", "/interruptible"],
        ),
        (
            Role::MachinePool,
            Direction::Inputs,
            &[
                "/replicas",
                "/autoscaling",
                "/node_labels/tier",
                "/captf_tags/captf.io~1managed-by",
            ],
        ),
        (
            Role::MachinePool,
            Direction::Outputs,
            &["/provider_id", "", "/instances/0/state"],
        ),
    ];
    for (role, d, paths) in expected {
        let ex = example(role, d, false);
        let errors = common::schema_errors(&common::validator(role, d), &parse(ex.text));
        assert!(!errors.is_empty(), "{} passed the schema", ex.name);
        for path in paths {
            assert!(
                errors.iter().any(|e| e == path),
                "{}: no error at {path:?}; got {errors:?}",
                ex.name
            );
        }
    }
}

#[test]
fn rendered_inputs_satisfy_the_input_schemas() {
    for role in Role::ALL {
        let v = common::validator(role, Direction::Inputs);
        for variant in common::VARIANTS {
            // Contract inputs only: user variables are outside the schema.
            let rendered =
                render_root(&common::inputs(role, variant), &UserVariables::new()).unwrap();
            let tfvars = parse(&rendered.tfvars_json);
            let errors = common::schema_errors(&v, &tfvars);
            assert!(errors.is_empty(), "{role}-{variant}: {errors:?}");
        }
    }
}

#[test]
fn cluster_inputs_schema_refuses_exports_other_than_null() {
    let v = common::validator(Role::Cluster, Direction::Inputs);
    let mut doc = parse(example(Role::Cluster, Direction::Inputs, true).text);
    doc["captf_cluster_outputs"] = Value::Null;
    assert!(common::schema_errors(&v, &doc).is_empty());
    doc["captf_cluster_outputs"] = serde_json::json!({});
    assert_eq!(common::schema_errors(&v, &doc), ["/captf_cluster_outputs"]);
}
