//! Plan fingerprint, summary, guard and drift, from `show -json` documents.

use captf_runner::plan::{EMPTY_PLAN_HASH, PlanKey, parse};
use serde_json::{Value, json};

fn key(b: u8) -> PlanKey {
    PlanKey::new(vec![b; 32]).unwrap()
}

fn rc(address: &str, actions: &[&str], before: Value, after: Value) -> Value {
    json!({"address": address, "mode": "managed", "change": {
        "actions": actions, "before": before, "after": after,
        "after_unknown": {}, "before_sensitive": {}, "after_sensitive": {}
    }})
}

fn plan_of(changes: Vec<Value>) -> captf_runner::plan::Plan {
    parse(json!({"resource_changes": changes}).to_string().as_bytes()).unwrap()
}

#[test]
fn the_empty_plan_hash() {
    assert_eq!(
        EMPTY_PLAN_HASH,
        "p2:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let p = plan_of(vec![rc("a.b", &["no-op"], json!({"x":1}), json!({"x":1}))]);
    assert_eq!(p.fingerprint(&key(1)), EMPTY_PLAN_HASH);
    assert_eq!(plan_of(vec![]).fingerprint(&key(1)), EMPTY_PLAN_HASH);
}

#[test]
fn short_keys_are_refused() {
    assert!(PlanKey::new(vec![0; 31]).is_err());
    assert!(PlanKey::new(vec![0; 32]).is_ok());
}

#[test]
fn the_fingerprint_binds_values_keys_and_order() {
    let base = plan_of(vec![rc(
        "t.a",
        &["update"],
        json!({"x":1,"y":"same"}),
        json!({"x":2,"y":"same"}),
    )]);
    let h = base.fingerprint(&key(1));
    assert!(h.starts_with("p2:") && h.len() == 3 + 64);
    // Same plan, same key: same hash.
    assert_eq!(h, base.fingerprint(&key(1)));
    // Another key: another hash.
    assert_ne!(h, base.fingerprint(&key(2)));
    // Another new value: another hash.
    let other = plan_of(vec![rc(
        "t.a",
        &["update"],
        json!({"x":1,"y":"same"}),
        json!({"x":3,"y":"same"}),
    )]);
    assert_ne!(h, other.fingerprint(&key(1)));
    // An untouched attribute may differ without changing the hash.
    let untouched = plan_of(vec![rc(
        "t.a",
        &["update"],
        json!({"x":1,"y":"other"}),
        json!({"x":2,"y":"other"}),
    )]);
    assert_eq!(h, untouched.fingerprint(&key(1)));
    // Replace orders are different plans.
    let r1 = plan_of(vec![rc(
        "t.a",
        &["delete", "create"],
        json!({"x":1}),
        json!({"x":2}),
    )]);
    let r2 = plan_of(vec![rc(
        "t.a",
        &["create", "delete"],
        json!({"x":1}),
        json!({"x":2}),
    )]);
    assert_ne!(r1.fingerprint(&key(1)), r2.fingerprint(&key(1)));
    // Order of changes in the document does not matter.
    let ab = plan_of(vec![
        rc("t.a", &["delete"], json!({}), Value::Null),
        rc("t.b", &["create"], Value::Null, json!({"v":1})),
    ]);
    let ba = plan_of(vec![
        rc("t.b", &["create"], Value::Null, json!({"v":1})),
        rc("t.a", &["delete"], json!({}), Value::Null),
    ]);
    assert_eq!(ab.fingerprint(&key(1)), ba.fingerprint(&key(1)));
    // Null and absent differ.
    let null = plan_of(vec![rc(
        "t.a",
        &["update"],
        json!({"x":1}),
        json!({"x":1,"z":null}),
    )]);
    let absent = plan_of(vec![rc("t.a", &["update"], json!({"x":1}), json!({"x":1}))]);
    assert_ne!(null.fingerprint(&key(1)), absent.fingerprint(&key(1)));
}

#[test]
fn imports_moves_and_outputs_count() {
    let doc = json!({
        "resource_changes": [
            {"address": "t.moved", "previous_address": "t.old", "change": {"actions": ["no-op"], "before": {}, "after": {}}},
            {"address": "t.imp", "change": {"actions": ["no-op"], "importing": {"id": "i-1"}, "before": {}, "after": {}}},
            {"address": "t.r", "change": {"actions": ["create", "delete"], "before": {"a": 1}, "after": {"a": 2}}},
            {"address": "t.f", "change": {"actions": ["forget"], "before": {"a": 1}, "after": null}},
            {"address": "data.d", "mode": "data", "change": {"actions": ["read"], "before": null, "after": {}}},
            {"address": "t.same", "change": {"actions": ["no-op"], "before": {}, "after": {}}}
        ],
        "output_changes": {
            "o": {"actions": ["update"], "before": 1, "after": 2},
            "same": {"actions": ["no-op"], "before": 1, "after": 1}
        }
    });
    let p = parse(doc.to_string().as_bytes()).unwrap();
    let s = p.summary(Some(&key(7)));
    assert_eq!(
        (
            s.counts.replace,
            s.counts.forget,
            s.counts.import,
            s.counts.moves
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(
        (s.counts.create, s.counts.update, s.counts.delete),
        (0, 0, 0)
    );
    assert_eq!(s.counts.output_changes, 1);
    assert_eq!(
        s.resources,
        vec![
            "data.d (read)",
            "t.f (forget)",
            "t.imp (import)",
            "t.moved (move)",
            "t.r (replace)"
        ]
    );
    assert_ne!(s.hash, EMPTY_PLAN_HASH);
    assert_eq!(s.hash, p.fingerprint(&key(7)));
    let mut d = p.destructive_changes();
    d.sort();
    assert_eq!(d, vec![("t.r".to_owned(), "replace")]);
    assert!(p.summary(None).hash.is_empty());
}

#[test]
fn resources_are_sorted_and_capped() {
    let changes = (0..60)
        .rev()
        .map(|i| rc(&format!("t.r{i:02}"), &["create"], Value::Null, json!({})))
        .collect();
    let s = plan_of(changes).summary(Some(&key(1)));
    assert_eq!(s.resources.len(), 50);
    assert!(s.truncated);
    assert_eq!(s.resources[0], "t.r00 (create)");
    assert_eq!(s.counts.create, 60);
}

#[test]
fn destructive_changes_are_deletes_and_replaces() {
    let p = plan_of(vec![
        rc("t.del", &["delete"], json!({}), Value::Null),
        rc("t.rep", &["delete", "create"], json!({}), json!({})),
        rc("t.cbd", &["create", "delete"], json!({}), json!({})),
        rc("t.upd", &["update"], json!({"a":1}), json!({"a":2})),
        rc("t.new", &["create"], Value::Null, json!({})),
    ]);
    assert_eq!(
        p.destructive_changes(),
        vec![
            ("t.del".to_owned(), "delete"),
            ("t.rep".to_owned(), "replace"),
            ("t.cbd".to_owned(), "replace")
        ]
    );
}

#[test]
fn drift_counts_and_addresses() {
    let p = plan_of(vec![
        rc("t.c", &["create"], Value::Null, json!({})),
        rc("t.u", &["update"], json!({"a":1}), json!({"a":2})),
        rc("t.r", &["delete", "create"], json!({}), json!({})),
        rc("t.d", &["delete"], json!({}), Value::Null),
        rc("t.n", &["no-op"], json!({}), json!({})),
    ]);
    let d = p.drift();
    assert!(d.detected);
    assert_eq!((d.create, d.update, d.replace, d.delete), (1, 1, 1, 1));
    assert_eq!(d.resources, vec!["t.c", "t.d", "t.r", "t.u"]);
    let none = plan_of(vec![rc("t.n", &["no-op"], json!({}), json!({}))]).drift();
    assert!(!none.detected && none.resources.is_empty());
}

#[test]
fn sensitive_values_of_changes_and_prior_data_sources() {
    let doc = json!({
        "resource_changes": [{"address": "t.a", "change": {
            "actions": ["update"],
            "before": {"pw": "old-secret", "name": "n", "nested": {"k": ["s1", "visible"]}},
            "after": {"pw": "new-secret", "name": "n", "nested": {"k": ["s1", "visible"]}},
            "before_sensitive": {"pw": true, "nested": {"k": [true, false]}},
            "after_sensitive": {"pw": true}
        }}],
        "prior_state": {"values": {"root_module": {"child_modules": [{"resources": [
            {"address": "data.x.y", "mode": "data", "values": {"token": "data-secret", "id": "1"}, "sensitive_values": {"token": true}}
        ]}]}}}
    });
    let p = parse(doc.to_string().as_bytes()).unwrap();
    assert_eq!(
        p.sensitive_strings(),
        vec!["data-secret", "new-secret", "old-secret", "s1"]
    );
}

/// The documented construction, rebuilt by hand: one line per change,
/// `<address>|<actions>|<hex HMAC-SHA256(key, canonical effect)>`, sorted,
/// joined by newlines, SHA-256, `p2:` prefix.
#[test]
fn the_fingerprint_construction_is_frozen() {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};
    let k = [7u8; 32];
    let mac = |data: &str| {
        let mut m = Hmac::<Sha256>::new_from_slice(&k).unwrap();
        m.update(data.as_bytes());
        hex::encode(m.finalize().into_bytes())
    };
    let doc = json!({"resource_changes": [
        {"address": "t.new", "change": {"actions": ["create"], "before": null,
            "after": {"b": 1, "a": "x"}, "after_unknown": {"id": true}, "after_sensitive": {}}},
        {"address": "t.old", "change": {"actions": ["delete"], "before": {"a": 1}, "after": null}},
        {"address": "t.upd", "change": {"actions": ["update"], "before": {"a": 1, "keep": 2},
            "after": {"a": null, "keep": 2}, "after_unknown": {}, "before_sensitive": {}, "after_sensitive": {}}}
    ], "output_changes": {"ip": {"actions": ["create"], "before": null, "after": "10.0.0.1", "after_unknown": false}}});
    let mut lines = [
        format!(
            "t.new|create|{}",
            mac(r#"{"after":{"a":"x","b":1},"afterUnknown":{"id":true}}"#)
        ),
        format!("t.old|delete|{}", mac("{}")),
        format!(
            "t.upd|update|{}",
            mac(r#"{"paths":[{"after":null,"before":1,"path":[{"key":"a"}]}]}"#)
        ),
        format!("output.ip|create|{}", mac(r#"{"after":"10.0.0.1"}"#)),
    ];
    lines.sort();
    let want = format!(
        "p2:{}",
        hex::encode(Sha256::digest(lines.join("\n").as_bytes()))
    );
    let p = parse(doc.to_string().as_bytes()).unwrap();
    assert_eq!(p.fingerprint(&PlanKey::new(k.to_vec()).unwrap()), want);
}
