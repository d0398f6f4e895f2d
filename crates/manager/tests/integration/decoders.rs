//! Arbitrary input at every decoder the manager feeds from outside its own
//! process: the state reader (Secrets the backend, or anyone with write
//! access to the namespace, wrote), the result-document parser (a
//! termination message a module image controls), the admission endpoint
//! (bytes from the network) and the outputs decoder (outputs a module
//! chose). Each must answer with a reason and never panic, never grow its
//! memory with what it is fed (the gzip guard), and never quote a value it
//! read: every string these tests plant starts with `VALUE-` and none may
//! come back in an error, a problem or a response. Pure; no cluster.

use std::io::Write;

use captf_contract::Role;
use captf_contract::outputs::RoleOutputs;
use captf_manager::jobs::observe::{ResultError, parse_result};
use captf_manager::reconcile::pass::decode_outputs;
use captf_manager::state::reader::{MAX_STATE_BYTES, StateError, StateSecret, StateSummary, read};
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;
use serde_json::{Value, json};

const BASE: &str = "tfstate-default-0123456789abcdef-c";
const MARK: &str = "VALUE-";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Any JSON, its strings marked as values.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(|s| Value::from(format!("{MARK}{s}"))),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A state document: the keys the reader looks at, each present or not,
/// holding the right type or any other.
fn state_doc() -> impl Strategy<Value = Value> {
    let marked = || "[ -~]{0,8}".prop_map(|s| Value::from(format!("{MARK}{s}")));
    let version = prop_oneof![
        2 => Just(json!(4)),
        1 => Just(json!(3)),
        1 => marked(),
        1 => json_value(),
    ];
    let outputs = prop_oneof![
        3 => prop::collection::btree_map("[a-z_]{1,24}", json_value(), 0..8).prop_map(|m| {
            Value::Object(
                m.into_iter()
                    .map(|(k, v)| (k, json!({"value": v, "type": "dynamic"})))
                    .collect(),
            )
        }),
        1 => json_value(),
    ];
    let resources = prop_oneof![
        3 => prop::collection::vec(
            prop_oneof![3 => Just(json!({"mode": "managed"})), 1 => json_value()],
            0..4
        )
        .prop_map(Value::Array),
        1 => json_value(),
    ];
    (
        prop::option::of(version),
        prop::option::of(prop_oneof![3 => any::<u32>().prop_map(Value::from), 1 => json_value()]),
        prop::option::of(outputs),
        prop::option::of(resources),
        prop::option::of(prop_oneof![3 => marked(), 1 => json_value()]),
        any::<bool>(),
    )
        .prop_map(
            |(version, serial, outputs, resources, lineage, encrypted)| {
                let mut doc = serde_json::Map::new();
                for (k, v) in [
                    ("version", version),
                    ("serial", serial),
                    ("outputs", outputs),
                    ("resources", resources),
                    ("lineage", lineage),
                ] {
                    if let Some(v) = v {
                        doc.insert(k.to_owned(), v);
                    }
                }
                if encrypted {
                    doc.insert("encryption_version".to_owned(), json!(format!("{MARK}x")));
                }
                Value::Object(doc)
            },
        )
}

/// `bytes` cut into consecutive chunks under the backend's names.
fn chunked(bytes: &[u8], cuts: &[usize]) -> Vec<StateSecret> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    at.dedup();
    let mut bounds = vec![0];
    bounds.extend(at.into_iter().filter(|c| *c > 0 && *c < bytes.len()));
    bounds.push(bytes.len());
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| StateSecret {
            name: if i == 0 {
                BASE.to_owned()
            } else {
                format!("{BASE}-part-{i}")
            },
            tfstate: Some(bytes[w[0]..w[1]].to_vec()),
            inputs_hash: None,
        })
        .collect()
}

/// What every answer of the reader must satisfy.
fn check_read(result: &Result<StateSummary, StateError>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        let message = e.to_string();
        prop_assert!(!message.contains(MARK), "{message}");
        prop_assert!(message.len() < 200, "{message}");
        prop_assert!(!e.reason().is_empty());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_state_reader_answers_any_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        check_read(&read(BASE, &chunked(&bytes, &cuts)))?;
        // The same bytes past the gzip layer reach the JSON parser.
        let result = read(BASE, &chunked(&gzip(&bytes), &cuts));
        check_read(&result)?;
        prop_assert!(result.is_err(), "random bytes are not a state");
    }

    #[test]
    fn the_state_reader_answers_any_document(
        doc in state_doc(),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let text = serde_json::to_vec(&doc).unwrap();
        let result = read(BASE, &chunked(&gzip(&text), &cuts));
        check_read(&result)?;
        if let Ok(summary) = &result {
            prop_assert_eq!(&doc["version"], &json!(4));
            prop_assert!(doc.get("encryption_version").is_none());
            // The outputs decoder takes what the reader let through.
            for role in [Role::Cluster, Role::Machine, Role::MachinePool] {
                check_outputs(&decode_outputs(role, summary))?;
            }
        }
    }

    #[test]
    fn the_state_reader_names_foreign_secrets_without_reading_them(
        names in prop::collection::vec("[a-z0-9-]{1,40}", 1..40),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let secrets: Vec<StateSecret> = names
            .iter()
            .map(|n| StateSecret { name: n.clone(), tfstate: Some(bytes.clone()), inputs_hash: None })
            .collect();
        let result = read(BASE, &secrets);
        check_read(&result)?;
        prop_assert!(result.is_err());
    }

    #[test]
    fn the_result_parser_answers_any_message(text in "\\PC{0,5000}") {
        match parse_result(Some(&text)) {
            Ok(doc) => prop_assert_eq!(doc.version, 1),
            Err(e) => {
                prop_assert!(!e.to_string().contains(MARK));
                if e == ResultError::NoResult {
                    prop_assert!(text.trim().is_empty());
                }
            }
        }
    }

    #[test]
    fn the_result_parser_answers_any_document(
        doc in json_value(),
        version in prop_oneof![Just(json!(1)), json_value()],
        cut in any::<usize>(),
    ) {
        let mut doc = doc;
        if let Value::Object(m) = &mut doc {
            m.insert("version".to_owned(), version);
        }
        let text = serde_json::to_string(&doc).unwrap();
        for candidate in [text.as_str(), &text[..floor_char_boundary(&text, cut % (text.len() + 1))]] {
            if let Err(e) = parse_result(Some(candidate)) {
                prop_assert!(!e.to_string().contains(MARK));
            }
        }
    }

    #[test]
    fn the_outputs_decoder_answers_any_outputs(
        values in prop::collection::btree_map(output_name(), json_value(), 0..12),
    ) {
        let summary = StateSummary {
            serial: 1,
            lineage: String::new(),
            runtime_version: String::new(),
            outputs: values
                .into_iter()
                .map(|(k, v)| {
                    let o = serde_json::from_value(json!({"value": v, "sensitive": true})).unwrap();
                    (k, o)
                })
                .collect(),
            managed_resources: 0,
            compressed_bytes: 0,
            inputs_hash: None,
        };
        for role in [Role::Cluster, Role::Machine, Role::MachinePool] {
            check_outputs(&decode_outputs(role, &summary))?;
        }
    }
}

/// The names the decoders look for, and a few they do not.
fn output_name() -> impl Strategy<Value = String> {
    let known = [Role::Cluster, Role::Machine, Role::MachinePool]
        .into_iter()
        .flat_map(|r| captf_contract::names::required_outputs(r).iter().copied())
        .map(str::to_owned)
        .collect::<Vec<_>>();
    prop_oneof![
        4 => prop::sample::select(known),
        1 => "[a-z_]{1,16}",
    ]
}

/// No problem the decoder reports quotes a value.
fn check_outputs(decoded: &RoleOutputs) -> Result<(), TestCaseError> {
    let verdict = match decoded {
        RoleOutputs::Cluster(d) => &d.verdict,
        RoleOutputs::Machine(d) => &d.verdict,
        RoleOutputs::MachinePool(d) => &d.verdict,
    };
    let text = format!("{verdict:?}");
    prop_assert!(!text.contains(MARK), "{text}");
    Ok(())
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A body too large for memory to hold twice is cut by the guard, not read
/// whole: 1 GiB of zeros compresses to about 1 MiB and is refused.
#[test]
fn a_gzip_bomb_is_refused_at_the_size_cap() {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..((MAX_STATE_BYTES >> 20) + 2) {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let err = read(BASE, &chunked(&bomb, &[])).unwrap_err();
    assert_eq!(err.reason(), "StateCorrupt");
    assert!(err.to_string().contains("exceeds"), "{err}");
}

mod admission {
    use super::*;
    use axum::body::Body;
    use captf_api::names::webhooks::VALIDATING;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// An AdmissionReview around `object`, for any of the kinds.
    fn review() -> impl Strategy<Value = (usize, Value)> {
        let operation = prop_oneof![
            Just(json!("CREATE")),
            Just(json!("UPDATE")),
            Just(json!("DELETE")),
            json_value(),
        ];
        let object = || {
            (json_value(), json_value()).prop_map(|(spec, status)| {
                json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                       "metadata": {"name": "x", "namespace": "ns"},
                       "spec": spec, "status": status})
            })
        };
        (
            0..VALIDATING.len(),
            operation,
            prop::option::of(object()),
            prop::option::of(object()),
            any::<bool>(),
        )
            .prop_map(|(hook, operation, object, old, with_uid)| {
                let mut request = json!({"operation": operation, "name": "x", "namespace": "ns",
                                         "object": object, "oldObject": old,
                                         "userInfo": {"username": "someone"}});
                if with_uid {
                    request["uid"] = json!("0f1e2d3c");
                }
                (
                    hook,
                    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "request": request}),
                )
            })
    }

    async fn post(hook: usize, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        let router = captf_manager::webhook::router(None, None);
        let request = Request::post(VALIDATING[hook].path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, bytes.to_vec())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_webhook_answers_any_bytes(
            hook in 0..VALIDATING.len(),
            body in prop::collection::vec(any::<u8>(), 0..2048),
        ) {
            let (status, answer) = block_on(post(hook, body));
            prop_assert_eq!(status, StatusCode::BAD_REQUEST);
            prop_assert!(answer.len() < 200);
        }

        #[test]
        fn the_webhook_answers_any_review((hook, review) in review()) {
            let (status, answer) = block_on(post(hook, serde_json::to_vec(&review).unwrap()));
            let text = String::from_utf8_lossy(&answer).into_owned();
            prop_assert!(!text.contains(MARK), "{text}");
            let request = &review["request"];
            let well_formed = request.get("uid").is_some()
                && ["CREATE", "UPDATE", "DELETE"].iter().any(|o| request["operation"] == json!(o));
            if well_formed {
                prop_assert_eq!(status, StatusCode::OK, "{}", text);
                let v: Value = serde_json::from_slice(&answer).unwrap();
                prop_assert_eq!(&v["response"]["uid"], &json!("0f1e2d3c"));
                prop_assert!(v["response"]["allowed"].is_boolean());
            } else {
                prop_assert_eq!(status, StatusCode::BAD_REQUEST, "{}", text);
            }
        }
    }
}
