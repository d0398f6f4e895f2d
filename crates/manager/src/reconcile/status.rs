//! The end-of-pass status: conditions kept with their transition times,
//! the fields a pass changes, and the single merge patch that writes them.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value};

use crate::engine::job_conditions::ConditionValue;
use crate::engine::ready::ConditionView;

pub fn time(t: SystemTime) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::try_from(t)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

pub fn system_time(t: &Time) -> SystemTime {
    SystemTime::from(t.0)
}

/// The status a pass is building.
#[derive(Debug, Clone)]
pub struct Draft {
    conditions: BTreeMap<String, Condition>,
    /// Top-level status fields to write (`Null` clears one).
    fields: Map<String, Value>,
    generation: i64,
    now: SystemTime,
}

impl Draft {
    pub fn new(current: &[Condition], generation: i64, now: SystemTime) -> Self {
        Draft {
            conditions: current
                .iter()
                .map(|c| (c.type_.clone(), c.clone()))
                .collect(),
            fields: Map::new(),
            generation,
            now,
        }
    }

    /// Sets a condition, keeping its transition time while its status holds.
    pub fn set(&mut self, type_: &str, v: &ConditionValue) {
        let transition = match self.conditions.get(type_) {
            Some(c) if c.status == v.status => c.last_transition_time.clone(),
            _ => time(self.now),
        };
        self.conditions.insert(
            type_.to_owned(),
            Condition {
                type_: type_.to_owned(),
                status: v.status.as_str().to_owned(),
                reason: v.reason.to_owned(),
                message: v.message.clone(),
                last_transition_time: transition,
                observed_generation: Some(self.generation),
            },
        );
    }

    pub fn remove(&mut self, type_: &str) {
        self.conditions.remove(type_);
    }

    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.conditions.get(type_)
    }

    /// Every condition the status will hold.
    pub fn conditions(&self) -> Vec<&Condition> {
        self.conditions.values().collect()
    }

    pub fn is_true(&self, type_: &str) -> bool {
        self.get(type_).is_some_and(|c| c.status == "True")
    }

    /// Views for the `Ready` summary.
    pub fn views(&self) -> Vec<ConditionView<'_>> {
        self.conditions
            .values()
            .map(|c| ConditionView {
                type_: &c.type_,
                status: &c.status,
                reason: &c.reason,
            })
            .collect()
    }

    /// Sets a status field (`Value::Null` clears it).
    pub fn field(&mut self, key: &str, value: impl serde::Serialize) {
        self.fields.insert(
            key.to_owned(),
            serde_json::to_value(value).expect("status fields serialize"),
        );
    }

    pub fn field_value(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// Whether the patch would leave `current` (the object's status as
    /// read) as it is: every field it writes already holds that value
    /// (`Null` for an absent one).
    pub fn unchanged_from(&self, current: &Value) -> bool {
        let patch = self.patch();
        let Some(fields) = patch.get("status").and_then(Value::as_object) else {
            return false;
        };
        fields
            .iter()
            .all(|(k, v)| current.get(k).unwrap_or(&Value::Null) == v)
    }

    /// The merge patch of the status subresource.
    pub fn patch(&self) -> Value {
        let mut status = self.fields.clone();
        status.insert(
            "conditions".into(),
            serde_json::to_value(self.conditions.values().collect::<Vec<_>>())
                .expect("conditions serialize"),
        );
        status.insert("observedGeneration".into(), self.generation.into());
        serde_json::json!({ "status": status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cv(status: &'static str, reason: &'static str) -> ConditionValue {
        ConditionValue {
            status: status.parse().unwrap(),
            reason,
            message: String::new(),
        }
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut d = Draft::new(&[], 1, t0);
        d.set("Ready", &cv("False", "A"));
        let first = d.get("Ready").unwrap().last_transition_time.clone();
        let kept: Vec<Condition> = vec![d.get("Ready").unwrap().clone()];
        let t1 = t0 + Duration::from_secs(60);
        let mut d = Draft::new(&kept, 2, t1);
        d.set("Ready", &cv("False", "B"));
        assert_eq!(d.get("Ready").unwrap().last_transition_time, first);
        assert_eq!(d.get("Ready").unwrap().reason, "B");
        d.set("Ready", &cv("True", "C"));
        assert_eq!(d.get("Ready").unwrap().last_transition_time, time(t1));
        assert_eq!(d.get("Ready").unwrap().observed_generation, Some(2));
    }

    #[test]
    fn a_draft_that_restates_the_status_changes_nothing() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut d = Draft::new(&[], 3, t0);
        d.set("Ready", &cv("True", "Ready"));
        d.field("replicas", 2);
        d.field("activeJob", Value::Null);
        let written = d.patch()["status"].clone();
        let conditions: Vec<Condition> =
            serde_json::from_value(written["conditions"].clone()).unwrap();
        // The next pass, a minute later, finds the same.
        let mut again = Draft::new(&conditions, 3, t0 + Duration::from_secs(60));
        again.set("Ready", &cv("True", "Ready"));
        again.field("replicas", 2);
        again.field("activeJob", Value::Null);
        let mut current = written.clone();
        current.as_object_mut().unwrap().remove("activeJob");
        assert!(again.unchanged_from(&current));
        type Change = fn(&mut Draft);
        let cases: [(&str, Change); 4] = [
            ("a field", |d| d.field("replicas", 3)),
            ("a set field cleared", |d| d.field("replicas", Value::Null)),
            ("a reason", |d| d.set("Ready", &cv("True", "Other"))),
            ("a new condition", |d| {
                d.set("Paused", &cv("False", "NotPaused"))
            }),
        ];
        for (what, change) in cases {
            let mut d = again.clone();
            change(&mut d);
            assert!(!d.unchanged_from(&current), "{what}");
        }
        let mut newer = Draft::new(&conditions, 4, t0);
        newer.set("Ready", &cv("True", "Ready"));
        assert!(!newer.unchanged_from(&current), "a new generation");
    }

    #[test]
    fn the_patch_carries_fields_conditions_and_generation() {
        let mut d = Draft::new(&[], 7, SystemTime::UNIX_EPOCH);
        d.field("lastRefresh", Value::Null);
        d.set("Ready", &cv("True", "Ready"));
        let p = d.patch();
        assert!(p["status"]["lastRefresh"].is_null());
        assert_eq!(p["status"]["observedGeneration"], 7);
        assert_eq!(p["status"]["conditions"][0]["type"], "Ready");
    }
}
