//! Vectors computed by running the reference implementation's own hash and
//! render code (`tests/golden/reference/vectors.json`, with the commit and
//! files it was run from): for each role, objects without variables, with
//! plain and sensitive variables, with large integers, fractions and
//! exponents, with `<`, `>`, `&` and line separators in a pool's inputs and
//! a cluster's network, with an inline integer beyond 64 bits, and exports
//! hashes of `null`, fractions and odd strings.
//!
//! Every vector must agree byte for byte: the hashed payloads and hashes,
//! the rendered `main.tf.json` and `terraform.tfvars.json`, the exports
//! hashes and their canonical text, and the two refusals.

use captf_contract::canonical::{NumberPolicy, to_canonical_string};
use captf_contract::hash::{HashError, approval_hash, inputs_hash_payload};
use captf_contract::inputs::MachinePoolInputs;
use captf_contract::{
    JsonText, Role, RoleInputs, UserVariables, exports_hash, inputs_hash, render_root,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Vectors<'a> {
    golden_reference_test: Value,
    #[serde(borrow)]
    inputs_vectors: Vec<InputsVector<'a>>,
    exports_vectors: Vec<ExportsVector>,
    error_vectors: Vec<ErrorVector>,
}

#[derive(Deserialize)]
struct InputsVector<'a> {
    id: String,
    role: String,
    image: String,
    /// Kept as written: the exports inside keep their key order.
    #[serde(borrow)]
    contract_inputs: &'a RawValue,
    variables: Vec<VectorVariable>,
    /// Read as a Kubernetes client reads them: numbers decoded.
    kubernetes_objects: Vec<Value>,
    hashed_payload: String,
    inputs_hash: String,
    /// Pools only; cluster and machine approvals are their inputs hash.
    approval_payload: Option<String>,
    approval_hash: String,
    main_tf_json: String,
    terraform_tfvars_json: String,
}

#[derive(Deserialize)]
struct VectorVariable {
    name: String,
    /// The exact bytes the variable holds.
    value_json: String,
    sensitive: bool,
}

#[derive(Deserialize)]
struct ExportsVector {
    id: String,
    raw: String,
    canonical: String,
    hash: String,
}

#[derive(Deserialize)]
struct ErrorVector {
    id: String,
    description: String,
}

fn with_vectors(check: impl FnOnce(Vectors<'_>)) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/reference/vectors.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    check(serde_json::from_str(&text).unwrap());
}

fn inputs_of(v: &InputsVector<'_>) -> (RoleInputs, UserVariables) {
    let role: Role = v.role.parse().unwrap();
    let inputs = RoleInputs::from_json(role, v.contract_inputs.get()).unwrap();
    let mut vars = UserVariables::new();
    for var in &v.variables {
        vars.insert_json(role, &var.name, &var.value_json, var.sensitive)
            .unwrap();
    }
    (inputs, vars)
}

fn machine_base<'v>(vectors: &'v Vectors<'_>) -> &'v InputsVector<'v> {
    vectors
        .inputs_vectors
        .iter()
        .find(|v| v.id == "machine/base")
        .expect("machine/base is a vector")
}

#[test]
fn the_reference_s_own_golden_machine_hash_is_among_the_vectors() {
    with_vectors(|all| {
        let golden = &all.golden_reference_test;
        assert_eq!(
            golden["computed_here"], golden["expected_in_reference_test"],
            "the generator reproduced the reference's own test"
        );
        let base = machine_base(&all);
        assert_eq!(base.inputs_hash, golden["expected_in_reference_test"]);
        let (inputs, vars) = inputs_of(base);
        assert_eq!(
            inputs_hash(&base.image, &inputs, &vars).unwrap(),
            golden["expected_in_reference_test"]
        );
    });
}

#[test]
fn every_inputs_vector_hashes_and_renders_as_the_reference() {
    with_vectors(|all| {
        assert!(
            all.inputs_vectors.len() >= 27,
            "{} vectors",
            all.inputs_vectors.len()
        );
        for v in &all.inputs_vectors {
            let id = &v.id;
            let (inputs, vars) = inputs_of(v);
            let payload = inputs_hash_payload(&v.image, &inputs, &vars).unwrap();
            assert_eq!(
                String::from_utf8(payload).unwrap(),
                v.hashed_payload,
                "{id}: hashed payload"
            );
            let hash = inputs_hash(&v.image, &inputs, &vars).unwrap();
            assert_eq!(hash, v.inputs_hash, "{id}: inputs hash");
            let approval = match &inputs {
                RoleInputs::MachinePool(p) => {
                    check_approval_payload(v, p, &vars);
                    approval_hash(&v.image, p, &vars).unwrap()
                }
                _ => hash,
            };
            assert_eq!(approval, v.approval_hash, "{id}: approval hash");

            let rendered = render_root(&inputs, &vars).unwrap();
            assert_eq!(rendered.main_tf_json, v.main_tf_json, "{id}: main.tf.json");
            assert_eq!(
                rendered.tfvars_json, v.terraform_tfvars_json,
                "{id}: terraform.tfvars.json"
            );
        }
    });
}

/// The reference holds an inline `spec.variables` value as the bytes the
/// apiserver serves; decoded by a client and written back with
/// [`JsonText::from_served_value`], each is the vector's `value_json`, the
/// integer beyond 64 bits included.
#[test]
fn inline_variables_read_back_from_the_apiserver_are_the_reference_s_bytes() {
    with_vectors(|all| {
        let mut checked = Vec::new();
        for v in &all.inputs_vectors {
            let inline = v.kubernetes_objects[0]["spec"]["variables"].as_object();
            for (name, value) in inline.into_iter().flatten() {
                let held = v.variables.iter().find(|x| &x.name == name).unwrap();
                assert_eq!(
                    JsonText::from_served_value(value).as_str(),
                    held.value_json,
                    "{}: {name}",
                    v.id
                );
                checked.push(format!("{}/{name}", v.id));
            }
        }
        assert!(
            checked.contains(&"cluster/inline_big_integer/big".to_owned()),
            "{checked:?}"
        );
    });
}

fn check_approval_payload(v: &InputsVector<'_>, p: &MachinePoolInputs, vars: &UserVariables) {
    let expected = v.approval_payload.as_deref().expect("pools carry one");
    let view = RoleInputs::MachinePool(p.approval_view());
    let payload = inputs_hash_payload(&v.image, &view, vars).unwrap();
    assert_eq!(
        String::from_utf8(payload).unwrap(),
        expected,
        "{}: approval payload",
        v.id
    );
}

#[test]
fn every_exports_vector_hashes_as_the_reference() {
    with_vectors(|all| {
        assert!(all.exports_vectors.len() >= 14);
        for v in &all.exports_vectors {
            assert_eq!(exports_hash(&v.raw).unwrap(), v.hash, "{}", v.id);
            let text = match v.raw.trim() {
                "" | "null" => JsonText::empty_object(),
                _ => JsonText::parse(&v.raw).unwrap(),
            };
            assert_eq!(
                to_canonical_string(&text, NumberPolicy::Any).unwrap(),
                v.canonical,
                "{}: canonical text",
                v.id
            );
        }
    });
}

/// The machine/base vector with other exports.
fn machine_with_exports(all: &Vectors<'_>, exports: &str) -> (String, RoleInputs, UserVariables) {
    let base = machine_base(all);
    let (inputs, vars) = inputs_of(base);
    let RoleInputs::Machine(mut m) = inputs else {
        panic!("machine/base is a machine")
    };
    m.captf_cluster_outputs = JsonText::parse(exports).unwrap();
    (base.image.clone(), m.into(), vars)
}

fn error_vector<'v>(all: &'v Vectors<'_>, id: &str) -> &'v ErrorVector {
    all.error_vectors
        .iter()
        .find(|v| v.id == id)
        .unwrap_or_else(|| panic!("{id} is a vector"))
}

#[test]
fn fractional_exports_hash_but_make_the_consuming_inputs_unhashable() {
    with_vectors(|all| {
        let v = error_vector(&all, "machine/exports_fraction");
        assert!(v.description.contains("refused"), "{}", v.description);
        let exports = r#"{"network_id":"net-1","ratio":0.5}"#;
        assert!(v.description.contains(exports), "{}", v.description);
        let (image, inputs, vars) = machine_with_exports(&all, exports);
        assert_eq!(
            inputs_hash(&image, &inputs, &vars),
            Err(HashError::NonIntegerNumber {
                path: "/captf_cluster_outputs/ratio".into(),
                literal: "0.5".into()
            })
        );
        assert!(exports_hash(exports).is_ok());
    });
}

#[test]
fn null_exports_are_hashed_as_null_in_the_inputs() {
    with_vectors(|all| {
        let v = error_vector(&all, "machine/exports_null_literal");
        let (_, expected) = v
            .description
            .split_once("hash=")
            .expect("the description names the hash");
        let expected: String = expected.chars().take(3 + 64).collect();
        let (image, inputs, vars) = machine_with_exports(&all, "null");
        assert_eq!(inputs_hash(&image, &inputs, &vars).unwrap(), expected);
        // The exports hash reads the same null as `{}`.
        assert_eq!(exports_hash("null").unwrap(), exports_hash("{}").unwrap());
    });
}
