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

/// A time as the status stores it: whole seconds. A value a pass sets is
/// the one the next pass reads back from the object, so the run inputs a
/// tick names come out the same from either.
fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}

/// The status fields the later stages of a pass read again, kept typed
/// until the patch serializes them (nothing is parsed back out of JSON).
/// `None`: this pass did not set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamps {
    /// `initialization.provisioned`.
    pub provisioned: Option<bool>,
    /// `lastRefresh` (`Some(None)`: cleared).
    pub last_refresh: Option<Option<SystemTime>>,
    /// `lastDriftCheck` (`Some(None)`: cleared).
    pub last_drift_check: Option<Option<SystemTime>>,
    /// `lastRestoredSerial`.
    pub last_restored_serial: Option<u64>,
    /// A TerraformMachine's `unhealthySamples` (`Some(None)`: cleared).
    pub unhealthy_samples: Option<Option<u32>>,
}

impl Stamps {
    /// The fields as the patch writes them.
    fn write(&self, status: &mut Map<String, Value>) {
        let t =
            |v: &Option<SystemTime>| serde_json::to_value(v.map(time)).expect("times serialize");
        if let Some(p) = self.provisioned {
            status.insert(
                "initialization".into(),
                serde_json::json!({"provisioned": p}),
            );
        }
        if let Some(v) = &self.last_refresh {
            status.insert("lastRefresh".into(), t(v));
        }
        if let Some(v) = &self.last_drift_check {
            status.insert("lastDriftCheck".into(), t(v));
        }
        if let Some(s) = self.last_restored_serial {
            status.insert("lastRestoredSerial".into(), s.into());
        }
        if let Some(n) = self.unhealthy_samples {
            status.insert("unhealthySamples".into(), n.into());
        }
    }
}

/// The status a pass is building.
#[derive(Debug, Clone)]
pub struct Draft {
    conditions: BTreeMap<String, Condition>,
    /// Top-level status fields to write (`Null` clears one) that no later
    /// stage reads.
    fields: Map<String, Value>,
    /// The fields later stages read, typed.
    stamps: Stamps,
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
            stamps: Stamps::default(),
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

    /// A field as the patch writes it (tests only: the pass reads the
    /// typed [`Stamps`]).
    #[cfg(test)]
    pub fn field_value(&self, key: &str) -> Option<Value> {
        self.patch()["status"].get(key).cloned()
    }

    /// The fields this pass set that later stages read.
    pub fn stamps(&self) -> &Stamps {
        &self.stamps
    }

    pub fn set_provisioned(&mut self, provisioned: bool) {
        self.stamps.provisioned = Some(provisioned);
    }

    pub fn set_last_refresh(&mut self, t: Option<SystemTime>) {
        self.stamps.last_refresh = Some(t.map(whole_seconds));
    }

    pub fn set_last_drift_check(&mut self, t: Option<SystemTime>) {
        self.stamps.last_drift_check = Some(t.map(whole_seconds));
    }

    pub fn set_last_restored_serial(&mut self, serial: u64) {
        self.stamps.last_restored_serial = Some(serial);
    }

    pub fn set_unhealthy_samples(&mut self, samples: Option<u32>) {
        self.stamps.unhealthy_samples = Some(samples);
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
        self.stamps.write(&mut status);
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

    #[test]
    fn stamps_are_read_typed_and_written_as_the_object_stores_them() {
        let mut d = Draft::new(&[], 1, SystemTime::UNIX_EPOCH);
        let finished = SystemTime::UNIX_EPOCH + Duration::from_millis(90_750);
        d.set_provisioned(true);
        d.set_last_refresh(Some(finished));
        d.set_last_drift_check(None);
        d.set_last_restored_serial(4);
        d.set_unhealthy_samples(None);
        // The time the next pass reads back from the object: whole seconds.
        let stored = SystemTime::UNIX_EPOCH + Duration::from_secs(90);
        let want = Stamps {
            provisioned: Some(true),
            last_refresh: Some(Some(stored)),
            last_drift_check: Some(None),
            last_restored_serial: Some(4),
            unhealthy_samples: Some(None),
        };
        assert_eq!(d.stamps(), &want);
        let status = &d.patch()["status"];
        assert_eq!(
            status["initialization"],
            serde_json::json!({"provisioned": true})
        );
        assert_eq!(status["lastRefresh"], "1970-01-01T00:01:30Z");
        assert!(status["lastDriftCheck"].is_null());
        assert_eq!(status["lastRestoredSerial"], 4);
        assert!(status["unhealthySamples"].is_null());
        // Fields the pass did not set stay out of the patch.
        let untouched = Draft::new(&[], 1, SystemTime::UNIX_EPOCH).patch();
        for key in ["initialization", "lastRefresh", "unhealthySamples"] {
            assert!(untouched["status"].get(key).is_none(), "{key}");
        }
    }
}
