//! What changed since the last look: one line per condition that appeared
//! or changed status or reason, and one per Job that started or finished.
//! Pure over the objects' JSON, so the polling loop only fetches and prints.

use std::collections::BTreeMap;

use serde_json::Value;

/// Longest condition message shown on a progress line.
const MESSAGE_LIMIT: usize = 120;

/// A condition as far as progress goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub status: String,
    pub reason: String,
}

/// Everything seen so far, by `Kind/name` and then condition type (Jobs use
/// the pseudo-type `Job`).
#[derive(Debug, Default)]
pub struct Tracker {
    seen: BTreeMap<String, BTreeMap<String, Seen>>,
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn shorten(message: &str) -> String {
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MESSAGE_LIMIT {
        one_line
    } else {
        let cut: String = one_line.chars().take(MESSAGE_LIMIT).collect();
        format!("{cut}...")
    }
}

/// The `(type, status)` pairs of an object's conditions.
pub fn conditions(object: &Value) -> Vec<&Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().collect())
        .unwrap_or_default()
}

/// The status of condition `type_` (`None` when absent).
pub fn condition_status<'a>(object: &'a Value, type_: &str) -> Option<&'a str> {
    conditions(object)
        .into_iter()
        .find(|c| text(c, "type") == type_)
        .map(|c| text(c, "status"))
}

/// Where a Job is: `Complete`/`Failed` once finished, else `Running`.
pub fn job_state(job: &Value) -> &'static str {
    for c in conditions(job) {
        if text(c, "status") == "True" {
            match text(c, "type") {
                "Complete" => return "Complete",
                "Failed" => return "Failed",
                _ => {}
            }
        }
    }
    "Running"
}

impl Tracker {
    /// Lines for the conditions of `object` (shown as `Kind/name`) that are
    /// new or changed status or reason since the last call. Ready comes
    /// first, then the rest by type.
    pub fn conditions(&mut self, kind: &str, object: &Value) -> Vec<String> {
        let key = format!("{kind}/{}", text(&object["metadata"], "name"));
        let seen = self.seen.entry(key.clone()).or_default();
        let mut current = conditions(object);
        current.sort_by_key(|c| (text(c, "type") != "Ready", text(c, "type").to_owned()));
        let mut lines = Vec::new();
        for c in current {
            let now = Seen {
                status: text(c, "status").to_owned(),
                reason: text(c, "reason").to_owned(),
            };
            let type_ = text(c, "type");
            if seen.get(type_) == Some(&now) {
                continue;
            }
            let message = shorten(text(c, "message"));
            let mut line = format!("{key} {type_}={} {}", now.status, now.reason);
            if !message.is_empty() && now.status != "True" {
                line.push_str(&format!(" ({message})"));
            }
            lines.push(line);
            seen.insert(type_.to_owned(), now);
        }
        lines
    }

    /// A line when a Job is first seen or its state changed.
    pub fn job(&mut self, job: &Value) -> Option<String> {
        let key = format!("Job/{}", text(&job["metadata"], "name"));
        let state = job_state(job);
        let seen = self.seen.entry(key.clone()).or_default();
        let now = Seen {
            status: state.to_owned(),
            reason: String::new(),
        };
        if seen.get("Job") == Some(&now) {
            return None;
        }
        seen.insert("Job".to_owned(), now);
        Some(format!("{key} {state}"))
    }
}

/// Every condition of `object`, one per line, for a failure report.
pub fn describe(kind: &str, object: &Value) -> String {
    let mut out = format!("{kind}/{}:\n", text(&object["metadata"], "name"));
    let all = conditions(object);
    if all.is_empty() {
        out.push_str("  (no conditions yet)\n");
    }
    for c in all {
        out.push_str(&format!(
            "  {}={} {}: {}\n",
            text(c, "type"),
            text(c, "status"),
            text(c, "reason"),
            shorten(text(c, "message"))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(conditions: Value) -> Value {
        json!({"metadata": {"name": "demo"}, "status": {"conditions": conditions}})
    }

    #[test]
    fn only_new_or_changed_conditions_make_lines() {
        let mut t = Tracker::default();
        let first = object(json!([
            {"type": "DependenciesReady", "status": "Unknown", "reason": "WaitingForOwner",
             "message": "no Cluster references\n this TerraformCluster yet"},
            {"type": "Ready", "status": "False", "reason": "NotReady", "message": "x"},
        ]));
        assert_eq!(
            t.conditions("TerraformCluster", &first),
            [
                "TerraformCluster/demo Ready=False NotReady (x)",
                "TerraformCluster/demo DependenciesReady=Unknown WaitingForOwner (no Cluster references this TerraformCluster yet)",
            ]
        );
        assert!(t.conditions("TerraformCluster", &first).is_empty());

        // A new message alone is no change; a new reason or status is.
        let second = object(json!([
            {"type": "DependenciesReady", "status": "True", "reason": "DependenciesReady", "message": "ok"},
            {"type": "Ready", "status": "False", "reason": "NotReady", "message": "y"},
        ]));
        assert_eq!(
            t.conditions("TerraformCluster", &second),
            ["TerraformCluster/demo DependenciesReady=True DependenciesReady"]
        );
        // The same names under another kind are tracked apart.
        assert_eq!(t.conditions("TerraformMachinePool", &second).len(), 2);
    }

    #[test]
    fn long_messages_are_shortened() {
        let mut t = Tracker::default();
        let long = "m".repeat(200);
        let o =
            object(json!([{"type": "Ready", "status": "False", "reason": "R", "message": long}]));
        let line = &t.conditions("K", &o)[0];
        assert!(line.ends_with("...)"), "{line}");
        assert_eq!(
            line.len(),
            "K/demo Ready=False R (".len() + MESSAGE_LIMIT + 4
        );
    }

    #[test]
    fn jobs_report_start_and_end_once() {
        let mut t = Tracker::default();
        let running = json!({"metadata": {"name": "demo-apply-a1"}, "status": {}});
        let done = json!({"metadata": {"name": "demo-apply-a1"}, "status": {"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}]}});
        let failed = json!({"metadata": {"name": "x"}, "status": {"conditions": [
            {"type": "Failed", "status": "True"}]}});
        assert_eq!(
            t.job(&running).as_deref(),
            Some("Job/demo-apply-a1 Running")
        );
        assert_eq!(t.job(&running), None);
        assert_eq!(t.job(&done).as_deref(), Some("Job/demo-apply-a1 Complete"));
        assert_eq!(t.job(&done), None);
        assert_eq!(t.job(&failed).as_deref(), Some("Job/x Failed"));
    }

    #[test]
    fn condition_status_and_describe() {
        let o = object(
            json!([{"type": "Ready", "status": "True", "reason": "Ready", "message": "fine"}]),
        );
        assert_eq!(condition_status(&o, "Ready"), Some("True"));
        assert_eq!(condition_status(&o, "Deleting"), None);
        assert_eq!(describe("K", &o), "K/demo:\n  Ready=True Ready: fine\n");
        assert_eq!(
            describe("K", &json!({"metadata": {"name": "n"}})),
            "K/n:\n  (no conditions yet)\n"
        );
    }
}
