//! Render-time checks: what is refused before any file is written, and the
//! size limit.

use crate::common;

use captf_contract::inputs::{BootstrapData, InputsError, RoleInputs};
use captf_contract::render::MAX_RENDERED_BYTES;
use captf_contract::variables::VariableError;
use captf_contract::{RenderError, Role, UserVariables, render_root};
use serde_json::{Value, json};

#[test]
fn refuses_bootstrap_data_that_is_not_strict_padded_base64() {
    for bad in [
        "I2Nsb3VkLWNvbmZpZw",
        "I2Nsb3VkLWNvbmZpZw=",
        "I2Nsb3VkL_WNvbmZpZw==",
        "not base64!",
    ] {
        let mut m = common::machine_full();
        m.bootstrap_data = BootstrapData::from_base64(bad);
        let err = render_root(&m.into(), &UserVariables::new()).unwrap_err();
        assert_eq!(
            err,
            RenderError::Inputs(InputsError::BootstrapDataEncoding),
            "{bad}"
        );
        assert!(!err.to_string().contains(bad));
    }
}

#[test]
fn refuses_inputs_of_another_role_or_contract() {
    let mut c = common::cluster_full();
    c.common.captf_object.kind = "TerraformMachine".into();
    assert!(matches!(
        render_root(&c.into(), &UserVariables::new()),
        Err(RenderError::Inputs(InputsError::KindMismatch {
            role: Role::Cluster,
            ..
        }))
    ));
    let mut p = common::pool_minimal();
    p.common.captf_contract = "v1alpha2".into();
    assert_eq!(
        render_root(&p.into(), &UserVariables::new()),
        Err(RenderError::Inputs(InputsError::ContractVersion))
    );
}

#[test]
fn refuses_reserved_variable_names_without_echoing_values() {
    let mut vars = std::collections::BTreeMap::new();
    vars.insert(
        "machine_name".to_owned(),
        captf_contract::variables::UserVariable {
            value: json!("hunter2").into(),
            sensitive: true,
        },
    );
    let vars = UserVariables::from_map_unchecked(vars);
    let err = render_root(&common::machine_full().into(), &vars).unwrap_err();
    assert!(matches!(err, RenderError::Variable(VariableError::Name(_))));
    let msg = err.to_string();
    assert!(
        msg.contains("machine_name") && !msg.contains("hunter2"),
        "{msg}"
    );
}

#[test]
fn size_limit_counts_both_files() {
    let inputs: RoleInputs = common::cluster_minimal().into();
    let base = render_root(&inputs, &UserVariables::new()).unwrap();
    // A string variable that takes the total exactly to the limit, then one
    // byte over. Adding it costs its value plus fixed overhead in both files.
    let probe = |len: usize| {
        let mut vars = UserVariables::new();
        vars.insert(
            Role::Cluster,
            "blob",
            Value::from("a".repeat(len)).into(),
            false,
        )
        .unwrap();
        render_root(&inputs, &vars)
    };
    let overhead = probe(0).unwrap().size();
    assert!(overhead > base.size());
    let fits = MAX_RENDERED_BYTES - overhead;
    assert_eq!(probe(fits).unwrap().size(), MAX_RENDERED_BYTES);
    match probe(fits + 1) {
        Err(RenderError::InputsTooLarge { size, limit }) => {
            assert_eq!((size, limit), (MAX_RENDERED_BYTES + 1, MAX_RENDERED_BYTES));
        }
        other => panic!("expected InputsTooLarge, got {other:?}"),
    }
}

#[test]
fn variables_sort_every_tfvars_key_and_mark_secret_ones_sensitive() {
    let rendered = render_root(
        &common::inputs(Role::Machine, "full"),
        &common::variables(Role::Machine, "full"),
    )
    .unwrap();
    let keys: Vec<String> = rendered
        .tfvars_json
        .lines()
        .filter(|l| l.starts_with("  \""))
        .map(|l| l.trim().split('"').nth(1).unwrap().to_owned())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(keys.contains(&"noop_fail_apply".to_owned()));
    let main: Value = serde_json::from_str(&rendered.main_tf_json).unwrap();
    assert_eq!(
        main["variable"]["noop_fail_apply"],
        json!({"sensitive": true})
    );
    assert_eq!(main["variable"]["noop_health_state"], json!({}));
    assert_eq!(
        main["module"]["role"]["noop_fail_apply"],
        "${var.noop_fail_apply}"
    );
    // Without variables the contract's order is kept.
    let plain = render_root(
        &common::inputs(Role::Machine, "full"),
        &UserVariables::new(),
    )
    .unwrap();
    assert!(
        plain
            .tfvars_json
            .starts_with("{\n  \"captf_contract\": \"v1alpha1\",\n  \"captf_cluster\"")
    );
    // Module-authored bytes are not HTML-escaped.
    assert!(plain.tfvars_json.contains("noop-backend-<lb>&1"));
}

#[test]
fn debug_output_hides_secrets() {
    let m = common::machine_full();
    let shown = format!("{m:?}");
    assert!(!shown.contains(m.bootstrap_data.as_base64()), "{shown}");
    let rendered = render_root(&m.into(), &UserVariables::new()).unwrap();
    assert!(!format!("{rendered:?}").contains("I2Nsb3VkLWNvbmZpZw"));
}

#[test]
fn recorded_roots_read_back_to_the_same_inputs_variables_and_hash() {
    use captf_contract::{inputs_hash, parse_rendered_root};
    for role in Role::ALL {
        for variant in common::VARIANTS {
            let inputs = common::inputs(role, variant);
            let vars = common::variables(role, variant);
            let rendered = render_root(&inputs, &vars).unwrap();
            let (back_inputs, back_vars) = parse_rendered_root(role, &rendered).unwrap();
            assert_eq!(back_inputs, inputs, "{role}-{variant}");
            assert_eq!(back_vars, vars, "{role}-{variant}");
            assert_eq!(render_root(&back_inputs, &back_vars).unwrap(), rendered);
            assert_eq!(
                inputs_hash(common::IMAGE, &back_inputs, &back_vars).unwrap(),
                inputs_hash(common::IMAGE, &inputs, &vars).unwrap()
            );
        }
    }
}

#[test]
fn reading_back_refuses_broken_records_without_echoing_values() {
    use captf_contract::parse_rendered_root;
    use captf_contract::render::ParseRootError;
    let rendered = render_root(&common::machine_full().into(), &UserVariables::new()).unwrap();
    // Wrong role: pool inputs are missing.
    assert!(matches!(
        parse_rendered_root(Role::MachinePool, &rendered),
        Err(ParseRootError::MissingInput {
            name: "machinepool_name",
            ..
        })
    ));
    // A bootstrap value of the wrong type: the error does not quote it.
    let mut broken = rendered.clone();
    broken.tfvars_json = broken
        .tfvars_json
        .replace("\"control_plane\": true", "\"control_plane\": \"s3cr3t\"");
    let err = parse_rendered_root(Role::Machine, &broken).unwrap_err();
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    // A value without a declaration.
    let mut undeclared = rendered.clone();
    undeclared.tfvars_json = undeclared
        .tfvars_json
        .replacen('{', "{\n  \"stray\": 1,", 1);
    assert_eq!(
        parse_rendered_root(Role::Machine, &undeclared),
        Err(ParseRootError::UndeclaredVariable {
            name: "stray".into()
        })
    );
}

/// `<`, `>`, `&` and the line and paragraph separators are written as
/// `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029` exactly where the
/// reference implementation's `json.Marshal` writes them: in every input of
/// a pool (its exports included) and in a cluster's `cluster_network`. A
/// machine's inputs, the other cluster inputs and every user variable keep
/// them as they are.
#[test]
fn html_characters_are_escaped_where_the_reference_marshals_them() {
    use captf_contract::JsonText;
    let exports =
        JsonText::parse("{\"rule\":\"a<b && c>d\",\"sep\":\"x\u{2028}y\u{2029}\"}").unwrap();
    let mut pool = common::pool_full();
    pool.captf_cluster_outputs = exports.clone();
    pool.node_labels.insert("note".into(), "<p>".into());
    let mut machine = common::machine_full();
    machine.captf_cluster_outputs = exports;
    let mut cluster = common::cluster_full();
    cluster.control_plane_endpoint.as_mut().unwrap().host = "api<&>".into();
    cluster.cluster_network.as_mut().unwrap().service_domain = Some("a<b>&c".into());
    let escaped_exports = [
        r#""rule": "a\u003cb \u0026\u0026 c\u003ed""#,
        r#""sep": "x\u2028y\u2029""#,
    ];
    let raw_exports = [
        "\"rule\": \"a<b && c>d\"",
        "\"sep\": \"x\u{2028}y\u{2029}\"",
    ];
    let table: [(RoleInputs, Vec<&str>); 3] = [
        (
            pool.into(),
            [&escaped_exports[..], &[r#""note": "\u003cp\u003e""#]].concat(),
        ),
        (machine.into(), raw_exports.to_vec()),
        (
            cluster.into(),
            vec![
                r#""host": "api<&>""#,
                r#""service_domain": "a\u003cb\u003e\u0026c""#,
            ],
        ),
    ];
    for (inputs, want) in table {
        let role = inputs.role();
        let mut vars = UserVariables::new();
        vars.insert_json(role, "note_var", "\"v<w>&x\u{2028}\"", false)
            .unwrap();
        for vars in [UserVariables::new(), vars] {
            let tfvars = render_root(&inputs, &vars).unwrap().tfvars_json;
            for part in &want {
                assert!(tfvars.contains(part), "{role}: {part} in {tfvars}");
            }
            if !vars.is_empty() {
                let raw = "\"note_var\": \"v<w>&x\u{2028}\"";
                assert!(tfvars.contains(raw), "{role}: {tfvars}");
            }
        }
    }
}
