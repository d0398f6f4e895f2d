//! Which state writes the state proxy leaves out. OpenTofu writes the check
//! results of a run in no fixed order and writes the state again whenever
//! its bytes differ, so a refresh or a drift check that found nothing new
//! rewrites the whole state Secret under a new serial. Such a write changes
//! nothing a reader can use; leaving it out saves the write, the watch
//! events it causes and the manager's look at a new serial.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use captf_contract::state_content::same_state;
use serde_json::Value;

/// True when `written` (the backend's update of a state Secret) holds what
/// `stored` (that Secret as the backend last read it) holds: the same
/// labels, annotations and data keys, every key but `tfstate` byte for
/// byte, and a `tfstate` that differs at most in the serial and the order
/// of check results. Anything unreadable is a change.
pub fn renumbered_only(stored: &Value, written: &Value) -> bool {
    let meta = |s: &Value, k: &str| {
        let m = &s["metadata"][k];
        if m.is_null() {
            Value::Object(Default::default())
        } else {
            m.clone()
        }
    };
    if meta(stored, "labels") != meta(written, "labels")
        || meta(stored, "annotations") != meta(written, "annotations")
    {
        return false;
    }
    let (Some(before), Some(after)) = (stored["data"].as_object(), written["data"].as_object())
    else {
        return false;
    };
    if before.len() != after.len() || before.keys().ne(after.keys()) {
        return false;
    }
    before.iter().all(|(key, was)| {
        let now = &after[key];
        if key != "tfstate" {
            return was == now;
        }
        match (decoded(was), decoded(now)) {
            (Some(was), Some(now)) => same_state(&[was], &[now]),
            _ => false,
        }
    })
}

fn decoded(v: &Value) -> Option<Vec<u8>> {
    STANDARD.decode(v.as_str()?).ok()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::json;

    use super::*;

    fn tfstate(serial: u64, id: &str, checks: &[&str]) -> String {
        let checks: Vec<Value> = checks
            .iter()
            .map(|a| json!({"config_addr": a, "status": "pass"}))
            .collect();
        let doc = json!({"version": 4, "serial": serial, "lineage": "l",
            "resources": [{"mode": "managed", "instances": [{"attributes": {"id": id}}]}],
            "check_results": checks});
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(doc.to_string().as_bytes()).unwrap();
        STANDARD.encode(gz.finish().unwrap())
    }

    fn secret(tfstate: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": "tfstate-default-x", "resourceVersion": "7",
            "labels": {"app.kubernetes.io/managed-by": "terraform", "tfstate": "true"},
            "annotations": annotations},
            "data": {"tfstate": tfstate}})
    }

    #[test]
    fn only_a_renumbering_is_left_out() {
        let ann = json!({"encoding": "gzip", "captf.io/inputs-hash": "h2:aa"});
        let stored = secret(&tfstate(4, "x", &["var.a", "var.b"]), ann.clone());
        let cases = [
            (
                "serial and check order",
                secret(&tfstate(5, "x", &["var.b", "var.a"]), ann.clone()),
                true,
            ),
            (
                "a resource changed",
                secret(&tfstate(5, "y", &["var.a", "var.b"]), ann.clone()),
                false,
            ),
            (
                "an annotation changed",
                secret(
                    &tfstate(5, "x", &["var.a", "var.b"]),
                    json!({"encoding": "gzip"}),
                ),
                false,
            ),
            (
                "not gzip",
                secret(&STANDARD.encode(b"plain"), ann.clone()),
                false,
            ),
            (
                "no data",
                json!({"metadata": stored["metadata"].clone()}),
                false,
            ),
        ];
        for (what, written, left_out) in cases {
            assert_eq!(renumbered_only(&stored, &written), left_out, "{what}");
        }
        let mut extra = secret(&tfstate(5, "x", &["var.a", "var.b"]), ann);
        extra["data"]["other"] = json!("eA==");
        assert!(!renumbered_only(&stored, &extra), "another key");
    }
}
