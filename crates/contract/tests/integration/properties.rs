//! Property tests of canonical JSON and the hashes.

use crate::common;

use std::collections::BTreeMap;

use captf_contract::canonical::{NumberPolicy, to_canonical_string};
use captf_contract::inputs::{
    Autoscaling, BootstrapData, BootstrapFormat, ClusterInputs, ClusterNetwork, ClusterRef,
    CommonInputs, Endpoint, MachineInputs, MachinePoolInputs, RoleInputs,
};
use captf_contract::{JsonText, Role, UserVariables, approval_hash, inputs_hash};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

// ---------- strategies ----------

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}"
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z<>&]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn common(role: Role) -> impl Strategy<Value = CommonInputs> {
    (name(), name(), name(), prop::option::of(name())).prop_map(move |(c, ns, n, t)| {
        CommonInputs::new(
            role,
            ClusterRef {
                name: c,
                namespace: ns.clone(),
            },
            n,
            ns,
            t,
        )
    })
}

fn cluster() -> impl Strategy<Value = ClusterInputs> {
    let endpoint =
        prop::option::of((name(), 1..65535i32).prop_map(|(host, port)| Endpoint { host, port }));
    let network = prop::option::of(
        (
            prop::collection::vec(name(), 0..3),
            prop::collection::vec(name(), 0..3),
            prop::option::of(name()),
            prop::option::of(1..65535i32),
        )
            .prop_map(
                |(pods, services, service_domain, api_server_port)| ClusterNetwork {
                    pods,
                    services,
                    service_domain,
                    api_server_port,
                },
            ),
    );
    (
        common(Role::Cluster),
        endpoint,
        prop::option::of(name()),
        any::<bool>(),
        network,
    )
        .prop_map(
            |(
                common,
                control_plane_endpoint,
                kubernetes_version,
                control_plane_initialized,
                cluster_network,
            )| {
                ClusterInputs {
                    common,
                    control_plane_endpoint,
                    kubernetes_version,
                    control_plane_initialized,
                    cluster_network,
                }
            },
        )
}

fn bootstrap() -> impl Strategy<Value = BootstrapData> {
    prop::collection::vec(any::<u8>(), 0..16).prop_map(|b| BootstrapData::from_bytes(&b))
}

fn format() -> impl Strategy<Value = BootstrapFormat> {
    prop_oneof![
        Just(BootstrapFormat::CloudConfig),
        Just(BootstrapFormat::Ignition)
    ]
}

fn machine() -> impl Strategy<Value = MachineInputs> {
    (
        common(Role::Machine),
        json_value().prop_map(JsonText::from),
        name(),
        bootstrap(),
        format(),
        prop::option::of(name()),
        prop::option::of(name()),
        any::<bool>(),
    )
        .prop_map(
            |(common, exports, machine_name, bootstrap_data, bootstrap_format, fd, kv, cp)| {
                MachineInputs {
                    common,
                    captf_cluster_outputs: exports,
                    machine_name,
                    bootstrap_data,
                    bootstrap_format,
                    failure_domain: fd,
                    kubernetes_version: kv,
                    control_plane: cp,
                }
            },
        )
}

fn pool() -> impl Strategy<Value = MachinePoolInputs> {
    let autoscaling = (any::<bool>(), 0..5i32, 0..5i32).prop_map(|(enabled, a, b)| {
        if enabled {
            Autoscaling {
                enabled,
                min: a.min(b),
                max: a.max(b),
            }
        } else {
            Autoscaling::default()
        }
    });
    (
        (
            common(Role::MachinePool),
            json_value().prop_map(JsonText::from),
            name(),
            0..20i32,
            bootstrap(),
            format(),
        ),
        (
            prop::collection::vec(name(), 0..3),
            prop::collection::vec(name(), 0..3),
            prop::option::of(name()),
            prop::collection::btree_map(name(), name(), 0..3),
            autoscaling,
        ),
    )
        .prop_map(
            |(
                (common, exports, machinepool_name, replicas, bootstrap_data, bootstrap_format),
                (
                    failure_domains,
                    cluster_failure_domains,
                    kubernetes_version,
                    node_labels,
                    autoscaling,
                ),
            )| {
                MachinePoolInputs {
                    common,
                    captf_cluster_outputs: exports,
                    machinepool_name,
                    replicas,
                    bootstrap_data,
                    bootstrap_format,
                    failure_domains,
                    cluster_failure_domains,
                    kubernetes_version,
                    node_labels,
                    autoscaling,
                }
            },
        )
}

fn any_inputs() -> impl Strategy<Value = RoleInputs> {
    prop_oneof![
        cluster().prop_map(RoleInputs::from),
        machine().prop_map(RoleInputs::from),
        pool().prop_map(RoleInputs::from),
    ]
}

// ---------- helpers ----------

/// Writes `v` as JSON text with every object's keys in reverse order.
fn reversed_text(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.reverse();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), reversed_text(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            format!(
                "[{}]",
                items
                    .iter()
                    .map(reversed_text)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        scalar => scalar.to_string(),
    }
}

/// Every place in an inputs document a single edit can change: leaves,
/// lists, and maps below the top level.
fn edit_points(v: &Value, path: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if !path.is_empty() {
                out.push(path.clone());
            }
            for (k, child) in m {
                edit_points(
                    child,
                    format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            out.push(path.clone());
            for (i, child) in items.iter().enumerate() {
                edit_points(child, format!("{path}/{i}"), out);
            }
        }
        _ => out.push(path),
    }
}

/// Candidate replacements for the value at one edit point.
fn edits(v: &Value) -> Vec<Value> {
    match v {
        Value::String(s) => vec![Value::from(format!("{s}x"))],
        Value::Bool(b) => vec![Value::from(!b)],
        Value::Number(n) => vec![Value::from(n.as_i64().unwrap_or(0).wrapping_add(1))],
        Value::Null => vec![
            json!("x"),
            json!({"host": "h", "port": 1}),
            json!({"pods": [], "services": [], "service_domain": null, "api_server_port": null}),
        ],
        Value::Array(items) => {
            let mut longer = items.clone();
            longer.push(json!("added"));
            vec![Value::Array(longer)]
        }
        Value::Object(m) => {
            let mut wider = m.clone();
            let mut key = "added".to_owned();
            while wider.contains_key(&key) {
                key.push('x');
            }
            wider.insert(key, json!("v"));
            vec![Value::Object(wider)]
        }
    }
}

/// Applies the edit at `index` of `inputs`, if one yields other valid inputs.
fn edited(inputs: &RoleInputs, index: Index) -> Option<(String, RoleInputs)> {
    let doc = inputs.to_value();
    let mut points = Vec::new();
    edit_points(&doc, String::new(), &mut points);
    let path = index.get(&points).clone();
    for replacement in edits(doc.pointer(&path).unwrap()) {
        let mut changed = doc.clone();
        *changed.pointer_mut(&path).unwrap() = replacement;
        if let Ok(other) = RoleInputs::from_value(inputs.role(), changed)
            && &other != inputs
        {
            return Some((path, other));
        }
    }
    None
}

fn hash(inputs: &RoleInputs) -> String {
    inputs_hash(common::IMAGE, inputs, &UserVariables::new()).unwrap()
}

fn approval(inputs: &RoleInputs) -> String {
    let RoleInputs::MachinePool(p) = inputs else {
        unreachable!()
    };
    approval_hash(common::IMAGE, p, &UserVariables::new()).unwrap()
}

fn integers_only(text: &JsonText) -> bool {
    captf_contract::canonical::find_non_integer(text).is_none()
}

// ---------- properties ----------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn canonical_json_ignores_key_order(v in json_value()) {
        let canonical = to_canonical_string(&JsonText::from(&v), NumberPolicy::IntegersOnly).unwrap();
        let reordered = JsonText::parse(&reversed_text(&v)).unwrap();
        prop_assert_eq!(&to_canonical_string(&reordered, NumberPolicy::IntegersOnly).unwrap(), &canonical);
        // Canonical text is a fixed point.
        let again = JsonText::parse(&canonical).unwrap();
        prop_assert_eq!(to_canonical_string(&again, NumberPolicy::IntegersOnly).unwrap(), canonical);
    }

    #[test]
    fn hashes_are_stable_across_copies_and_stored_records(inputs in any_inputs()) {
        prop_assume!(integers_only(&inputs.to_json_text()));
        let h = hash(&inputs);
        prop_assert_eq!(&hash(&inputs.clone()), &h);
        // Read back from the stored values (as a durable record is), the
        // inputs hash the same.
        let rendered = captf_contract::render_root(&inputs, &UserVariables::new());
        if let Ok(rendered) = rendered {
            let back = RoleInputs::from_json(inputs.role(), &rendered.tfvars_json).unwrap();
            prop_assert_eq!(hash(&back), h);
        }
    }

    #[test]
    fn inputs_hash_changes_when_any_input_changes(inputs in any_inputs(), at in any::<Index>()) {
        prop_assume!(integers_only(&inputs.to_json_text()));
        let Some((path, other)) = edited(&inputs, at) else {
            return Err(TestCaseError::reject("no valid edit at that point"));
        };
        let replicas_owned_by_module = matches!(&inputs, RoleInputs::MachinePool(p) if p.autoscaling.enabled)
            && path == "/replicas";
        if replicas_owned_by_module {
            prop_assert_eq!(hash(&other), hash(&inputs), "replicas are excluded while autoscaling");
        } else {
            prop_assert_ne!(hash(&other), hash(&inputs), "edit at {} did not change the hash", path);
        }
    }

    #[test]
    fn image_and_variables_are_covered(inputs in any_inputs(), value in json_value(), sensitive in any::<bool>()) {
        prop_assume!(integers_only(&inputs.to_json_text()));
        let none = UserVariables::new();
        let base = inputs_hash(common::IMAGE, &inputs, &none).unwrap();
        prop_assert_ne!(inputs_hash("registry.example/other:v2", &inputs, &none).unwrap(), base.clone());
        let mut vars = UserVariables::new();
        vars.insert(inputs.role(), "extra", JsonText::from(&value), sensitive).unwrap();
        let with_var = inputs_hash(common::IMAGE, &inputs, &vars).unwrap();
        prop_assert_ne!(&with_var, &base);
        let mut flipped = UserVariables::new();
        flipped.insert(inputs.role(), "extra", JsonText::from(&value), !sensitive).unwrap();
        prop_assert_ne!(&inputs_hash(common::IMAGE, &inputs, &flipped).unwrap(), &with_var);
        let mut changed = UserVariables::new();
        changed.insert(inputs.role(), "extra", json!({"wrapped": value}).into(), sensitive).unwrap();
        prop_assert_ne!(&inputs_hash(common::IMAGE, &inputs, &changed).unwrap(), &with_var);
    }

    #[test]
    fn approval_hash_ignores_bootstrap_data_and_nothing_else(p in pool(), at in any::<Index>()) {
        prop_assume!(integers_only(&p.captf_cluster_outputs));
        let inputs = RoleInputs::from(p);
        let Some((path, other)) = edited(&inputs, at) else {
            return Err(TestCaseError::reject("no valid edit at that point"));
        };
        if path == "/bootstrap_data" {
            prop_assert_eq!(approval(&other), approval(&inputs));
            prop_assert_ne!(hash(&other), hash(&inputs));
        } else {
            // Exactly what the inputs hash sees, the approval hash sees.
            prop_assert_eq!(
                approval(&other) == approval(&inputs),
                hash(&other) == hash(&inputs),
                "edit at {}", path
            );
            if !(path == "/replicas" && matches!(&inputs, RoleInputs::MachinePool(p) if p.autoscaling.enabled)) {
                prop_assert_ne!(approval(&other), approval(&inputs), "edit at {}", path);
            }
        }
    }

    #[test]
    fn approval_hash_survives_any_bootstrap_rotation(p in pool(), rotated in bootstrap()) {
        prop_assume!(integers_only(&p.captf_cluster_outputs));
        let mut q = p.clone();
        q.bootstrap_data = rotated;
        let vars = UserVariables::new();
        prop_assert_eq!(
            approval_hash(common::IMAGE, &p, &vars).unwrap(),
            approval_hash(common::IMAGE, &q, &vars).unwrap()
        );
    }
}

#[test]
fn non_integer_exports_cannot_be_hashed() {
    let mut m = common::machine_full();
    m.captf_cluster_outputs = JsonText::parse(r#"{"lb": {"weight": 0.5}}"#).unwrap();
    let err = inputs_hash(common::IMAGE, &m.into(), &UserVariables::new()).unwrap_err();
    assert!(
        err.to_string().contains("/captf_cluster_outputs/lb/weight"),
        "{err}"
    );
    // User variables are hashed as given, fractions included.
    let mut vars = UserVariables::new();
    vars.insert(
        Role::Cluster,
        "ratio",
        JsonText::parse("0.5").unwrap(),
        false,
    )
    .unwrap();
    let cluster: RoleInputs = common::cluster_full().into();
    assert!(inputs_hash(common::IMAGE, &cluster, &vars).is_ok());
}

#[test]
fn objects_without_variables_hash_as_before_variables_existed() {
    // The envelope gains variable keys only when variables are set.
    let inputs: RoleInputs = common::cluster_minimal().into();
    let payload =
        captf_contract::hash::inputs_hash_payload(common::IMAGE, &inputs, &UserVariables::new())
            .unwrap();
    let doc: BTreeMap<String, Value> = serde_json::from_slice(&payload).unwrap();
    assert_eq!(
        doc.keys().map(String::as_str).collect::<Vec<_>>(),
        ["contract", "image", "inputs", "role", "scheme"]
    );
    assert_eq!(doc["scheme"], "h2");
    assert!(hash(&inputs).starts_with("h2:"));
    assert_eq!(hash(&inputs).len(), 3 + 64);
}
