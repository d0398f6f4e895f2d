//! The result document: fields, exit codes and the 4096-byte bound.

use captf_runner::result::{
    Changes, Drift, ErrorKind, MAX_RESULT_BYTES, PlanCounts, PlanSummary, ResultDoc, StepRecord,
};
use proptest::prelude::*;
use serde_json::Value;

fn sample() -> ResultDoc {
    let mut d = ResultDoc::new("apply", "reg/img:v1", &["/captf/runtime".to_owned()]);
    d.steps.push(StepRecord::new(
        "init",
        0,
        std::time::Duration::from_millis(1234),
    ));
    d
}

#[test]
fn a_successful_document_has_every_field() {
    let mut d = sample();
    d.changes = Some(Changes {
        add: 1,
        change: 2,
        destroy: 3,
        import: 0,
    });
    let v: Value = serde_json::from_slice(&d.encode()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["op"], "apply");
    assert_eq!(v["image"]["ref"], "reg/img:v1");
    assert_eq!(v["image"]["providersMirror"], false);
    assert_eq!(v["runtime"]["command"][0], "/captf/runtime");
    assert_eq!(v["runtime"]["version"], "");
    assert_eq!(v["steps"][0]["name"], "init");
    assert_eq!(v["steps"][0]["exit"], 0);
    assert_eq!(v["steps"][0]["seconds"], 1.2);
    assert!(v["drift"].is_null() && v.get("drift").is_some());
    assert!(v["error"].is_null() && v.get("error").is_some());
    assert_eq!(
        v["changes"],
        serde_json::json!({"add":1,"change":2,"destroy":3})
    );
    assert!(v.get("plan").is_none());
    assert_eq!(d.exit_code(), 0);
}

#[test]
fn errors_and_exit_codes() {
    for (kind, text) in [
        (ErrorKind::ImageLayout, "image-layout"),
        (ErrorKind::Step, "step"),
        (ErrorKind::Interrupted, "interrupted"),
        (ErrorKind::Blocked, "blocked"),
        (ErrorKind::PlanChanged, "plan-changed"),
    ] {
        let mut d = sample();
        d.fail(kind, None, "boom");
        let v: Value = serde_json::from_slice(&d.encode()).unwrap();
        assert_eq!(v["error"]["kind"], text);
        assert!(v["error"]["step"].is_null());
        assert_eq!(v["error"]["tail"], "boom");
        assert_eq!(d.exit_code(), 1, "{text}");
    }
    let d = ResultDoc::flag_error("unknown --op");
    let v: Value = serde_json::from_slice(&d.encode()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["steps"], serde_json::json!([]));
    assert_eq!(v["error"]["step"], "flags");
    assert_eq!(v["error"]["kind"], "step");
    assert_eq!(d.exit_code(), 2);
}

#[test]
fn the_tail_is_capped_at_512_bytes() {
    let mut d = sample();
    d.fail(ErrorKind::Step, Some("apply"), &"é".repeat(600));
    let tail = d.error.as_ref().unwrap().tail.clone();
    assert!(tail.len() <= 512 && tail.len() >= 510);
}

#[test]
fn shrinking_follows_the_order() {
    let mut d = sample();
    d.changes = Some(Changes {
        add: 1,
        ..Changes::default()
    });
    d.fail(ErrorKind::Blocked, None, &"x".repeat(512));
    d.plan = Some(PlanSummary {
        hash: "p2:".to_owned() + &"a".repeat(64),
        counts: PlanCounts { delete: 50, ..PlanCounts::default() },
        resources: (0..50).map(|i| format!("module.role.terraform_data.a_rather_long_resource_name_{i:03}_with_some_padding_here (delete)")).collect(),
        truncated: false,
    });
    let v: Value = serde_json::from_slice(&d.encode()).unwrap();
    assert!(v.get("changes").is_none(), "changes go first");
    let res = v["plan"]["resources"].as_array().unwrap();
    assert!(res.len() < 50 && !res.is_empty());
    assert_eq!(v["plan"]["truncated"], true);
    assert_eq!(
        v["error"]["tail"], "",
        "the tail is halved away before resources"
    );
    assert_eq!(v["plan"]["delete"], 50);
}

#[test]
fn the_minimal_document_keeps_kind_hash_and_counts() {
    let mut d = sample();
    for i in 0..200 {
        d.steps.push(StepRecord::new(
            &format!("step-{i}-{}", "n".repeat(40)),
            0,
            Default::default(),
        ));
    }
    d.image.as_mut().unwrap().reference = "r".repeat(5000);
    d.fail(ErrorKind::PlanChanged, None, "changed");
    d.plan = Some(PlanSummary {
        hash: "p2:abc".into(),
        counts: PlanCounts {
            create: 3,
            ..Default::default()
        },
        ..Default::default()
    });
    let bytes = d.encode();
    assert!(bytes.len() <= MAX_RESULT_BYTES);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["kind"], "plan-changed");
    assert_eq!(v["plan"]["hash"], "p2:abc");
    assert_eq!(v["plan"]["create"], 3);
    assert!(v.get("image").is_none());
}

#[test]
fn middle_steps_go_before_the_minimal_document() {
    let mut d = sample();
    for i in 0..120 {
        d.steps
            .push(StepRecord::new(&format!("step-{i}"), 0, Default::default()));
    }
    d.drift = Some(Drift {
        detected: true,
        update: 1,
        resources: vec!["a".into()],
        ..Drift::default()
    });
    let v: Value = serde_json::from_slice(&d.encode()).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["name"], "init");
    assert_eq!(steps[1]["name"], "step-119");
    assert_eq!(v["drift"]["detected"], true);
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,50}", ".{0,2000}", "[a-z\"\\\\\u{1}\u{7f}é€😀]{0,1500}"]
}

prop_compose! {
    fn arb_doc()(
        op in "[a-z-]{0,20}",
        image in arb_text(),
        steps in prop::collection::vec(("[a-z-]{1,30}", -1i32..300, 0u64..100_000), 0..40),
        tail in proptest::option::of((arb_text(), any::<bool>())),
        drift in proptest::option::of(prop::collection::vec("[a-z_.\\[\\]\"0-9]{1,120}", 0..60)),
        plan in proptest::option::of((prop::collection::vec(arb_text(), 0..120), any::<u64>())),
        changes in any::<bool>(),
    ) -> ResultDoc {
        let mut d = ResultDoc::new(&op, &image, &["/captf/runtime".to_owned(), image.clone()]);
        for (name, exit, ms) in steps {
            d.steps.push(StepRecord::new(&name, exit, std::time::Duration::from_millis(ms)));
        }
        if let Some((t, blocked)) = tail {
            d.fail(if blocked { ErrorKind::Blocked } else { ErrorKind::Step }, Some("apply"), &t);
        }
        d.drift = drift.map(|r| Drift { detected: !r.is_empty(), update: r.len() as u64, resources: r, ..Drift::default() });
        d.plan = plan.map(|(r, n)| PlanSummary {
            hash: format!("p2:{n:064x}"),
            counts: PlanCounts { create: n, replace: r.len() as u64, ..PlanCounts::default() },
            resources: r,
            truncated: false,
        });
        if changes {
            d.changes = Some(Changes { add: 1, change: 2, destroy: 3, import: 4 });
        }
        d
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn never_exceeds_4096_bytes_and_keeps_the_plan_hash(d in arb_doc()) {
        let bytes = d.encode();
        prop_assert!(bytes.len() <= MAX_RESULT_BYTES, "{} bytes", bytes.len());
        let v: Value = serde_json::from_slice(&bytes).expect("valid JSON");
        prop_assert_eq!(&v["version"], 1);
        if let Some(p) = &d.plan {
            prop_assert_eq!(v["plan"]["hash"].as_str(), Some(p.hash.as_str()));
            prop_assert_eq!(v["plan"]["create"].as_u64(), Some(p.counts.create));
            prop_assert_eq!(v["plan"]["replace"].as_u64(), Some(p.counts.replace));
        }
        if let Some(e) = &d.error {
            let kind = serde_json::to_value(e.kind).unwrap();
            prop_assert_eq!(&v["error"]["kind"], &kind);
        }
    }
}

#[test]
fn documents_round_trip_and_older_names_are_read() {
    let mut d = sample();
    d.drift = Some(Drift {
        detected: true,
        update: 2,
        resources: vec!["a.b".into()],
        ..Drift::default()
    });
    d.plan = Some(PlanSummary {
        hash: "p2:x".into(),
        counts: PlanCounts {
            replace: 1,
            output_changes: 2,
            ..Default::default()
        },
        resources: vec!["a.b (replace)".into()],
        truncated: false,
    });
    let back: ResultDoc = serde_json::from_slice(&d.encode()).unwrap();
    assert_eq!(back, d);

    let old = r#"{"version":1,"op":"drift","steps":[],"drift":{"detected":true,"add":1,"change":2,"destroy":3,"resources":[]},"error":null,
        "plan":{"hash":"p1:abc","add":4,"change":5,"destroy":6,"outputs":7,"import":0,"move":0,"truncated":false}}"#;
    let doc: ResultDoc = serde_json::from_str(old).unwrap();
    let drift = doc.drift.unwrap();
    assert_eq!((drift.create, drift.update, drift.delete), (1, 2, 3));
    let plan = doc.plan.unwrap();
    assert_eq!(
        (
            plan.counts.create,
            plan.counts.update,
            plan.counts.delete,
            plan.counts.output_changes
        ),
        (4, 5, 6, 7)
    );
}
