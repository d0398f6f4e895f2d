//! Reading `show -json` plans: the keyed plan fingerprint, the counts and
//! labels of the plan summary, drift, the destructive-change guard and the
//! sensitive values a plan reveals.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::result::{Drift, MAX_DRIFT_RESOURCES, MAX_PLAN_RESOURCES, PlanCounts, PlanSummary};

/// Prefix of the current plan-hash scheme (keyed HMAC per change).
pub const PLAN_HASH_PREFIX: &str = "p2:";
/// The hash of a plan without changes: the prefix and the SHA-256 of "".
pub const EMPTY_PLAN_HASH: &str =
    "p2:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// A plan key shorter than this is refused.
pub const MIN_PLAN_KEY_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the plan key has {0} bytes; at least {MIN_PLAN_KEY_BYTES} are required")]
    ShortKey(usize),
}

/// The plan key, checked for length.
#[derive(Clone)]
pub struct PlanKey(Vec<u8>);

impl std::fmt::Debug for PlanKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlanKey({} bytes)", self.0.len())
    }
}

impl PlanKey {
    pub fn new(bytes: Vec<u8>) -> Result<PlanKey, PlanError> {
        if bytes.len() < MIN_PLAN_KEY_BYTES {
            return Err(PlanError::ShortKey(bytes.len()));
        }
        Ok(PlanKey(bytes))
    }

    fn mac_hex(&self, data: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(data);
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The parts of `show -json` output the runner reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Plan {
    #[serde(default)]
    pub resource_changes: Vec<ResourceChange>,
    #[serde(default)]
    pub output_changes: BTreeMap<String, Change>,
    #[serde(default)]
    pub prior_state: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceChange {
    pub address: String,
    #[serde(default)]
    pub previous_address: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub change: Change,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Change {
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default = "absent")]
    pub before: Value,
    #[serde(default = "absent")]
    pub after: Value,
    #[serde(default = "absent")]
    pub after_unknown: Value,
    #[serde(default = "absent")]
    pub before_sensitive: Value,
    #[serde(default = "absent")]
    pub after_sensitive: Value,
    #[serde(default)]
    pub importing: Option<Value>,
}

fn absent() -> Value {
    Value::Null
}

impl Change {
    fn acts(&self) -> Vec<&str> {
        self.actions.iter().map(String::as_str).collect()
    }

    fn is_noop(&self) -> bool {
        let a = self.acts();
        a.is_empty() || a == ["no-op"]
    }

    fn is_replace(&self) -> bool {
        let a = self.acts();
        a == ["delete", "create"] || a == ["create", "delete"]
    }

    /// The label of the action alone, `None` for a no-op.
    fn action_label(&self) -> Option<String> {
        if self.is_noop() {
            return None;
        }
        if self.is_replace() {
            return Some("replace".to_owned());
        }
        Some(self.actions.join(","))
    }
}

impl ResourceChange {
    fn is_moved(&self) -> bool {
        self.previous_address
            .as_deref()
            .is_some_and(|p| !p.is_empty() && p != self.address)
    }

    /// Whether this change takes part in the fingerprint and the summary.
    fn counts(&self) -> bool {
        !self.change.is_noop() || self.change.importing.is_some() || self.is_moved()
    }

    /// `address (labels)` as listed in `plan.resources`.
    fn labelled(&self) -> String {
        let mut labels: Vec<String> = self.change.action_label().into_iter().collect();
        if self.change.importing.is_some() {
            labels.push("import".to_owned());
        }
        if self.is_moved() {
            labels.push("move".to_owned());
        }
        format!("{} ({})", self.address, labels.join(", "))
    }
}

pub fn parse(json: &[u8]) -> Result<Plan, PlanError> {
    Ok(serde_json::from_slice(json)?)
}

impl Plan {
    /// The keyed fingerprint of this plan.
    pub fn fingerprint(&self, key: &PlanKey) -> String {
        let mut lines = Vec::new();
        for rc in self.resource_changes.iter().filter(|rc| rc.counts()) {
            let mut effect = effect_of(&rc.change);
            if let Some(imp) = &rc.change.importing {
                effect.insert("importing".into(), imp.clone());
            }
            if rc.is_moved() {
                effect.insert(
                    "previousAddress".into(),
                    Value::String(rc.previous_address.clone().unwrap_or_default()),
                );
            }
            lines.push(line(key, &rc.address, &rc.change.actions, &effect));
        }
        for (name, change) in self.output_changes.iter().filter(|(_, c)| !c.is_noop()) {
            let effect = effect_of(change);
            lines.push(line(
                key,
                &format!("output.{name}"),
                &change.actions,
                &effect,
            ));
        }
        if lines.is_empty() {
            return EMPTY_PLAN_HASH.to_owned();
        }
        lines.sort();
        let digest = Sha256::digest(lines.join("\n").as_bytes());
        format!("{PLAN_HASH_PREFIX}{}", hex::encode(digest))
    }

    /// Counts and labelled resources (sorted by address, at most 50), with
    /// the fingerprint when a key is given.
    pub fn summary(&self, key: Option<&PlanKey>) -> PlanSummary {
        let mut counts = PlanCounts::default();
        let mut resources = Vec::new();
        for rc in self.resource_changes.iter().filter(|rc| rc.counts()) {
            let acts = rc.change.acts();
            if rc.change.is_replace() {
                counts.replace += 1;
            } else {
                match acts.as_slice() {
                    ["create"] => counts.create += 1,
                    ["update"] => counts.update += 1,
                    ["delete"] => counts.delete += 1,
                    ["forget"] => counts.forget += 1,
                    _ => {}
                }
            }
            if rc.change.importing.is_some() {
                counts.import += 1;
            }
            if rc.is_moved() {
                counts.moves += 1;
            }
            resources.push((rc.address.clone(), rc.labelled()));
        }
        counts.output_changes = self
            .output_changes
            .values()
            .filter(|c| !c.is_noop())
            .count() as u64;
        resources.sort();
        let truncated = resources.len() > MAX_PLAN_RESOURCES;
        PlanSummary {
            hash: key.map(|k| self.fingerprint(k)).unwrap_or_default(),
            counts,
            resources: resources
                .into_iter()
                .take(MAX_PLAN_RESOURCES)
                .map(|(_, l)| l)
                .collect(),
            truncated,
        }
    }

    /// Changes that delete or replace a resource: `(address, "delete"|"replace")`.
    pub fn destructive_changes(&self) -> Vec<(String, &'static str)> {
        self.resource_changes
            .iter()
            .filter(|rc| rc.change.actions.iter().any(|a| a == "delete"))
            .map(|rc| {
                let label = if rc.change.actions.iter().any(|a| a == "create") {
                    "replace"
                } else {
                    "delete"
                };
                (rc.address.clone(), label)
            })
            .collect()
    }

    /// What a plan made without refreshing, right after a refresh-only
    /// apply, says about drift between the configuration and reality.
    pub fn drift(&self) -> Drift {
        let mut d = Drift::default();
        let mut addresses = Vec::new();
        for rc in &self.resource_changes {
            let acts = rc.change.acts();
            if rc.change.is_replace() {
                d.replace += 1;
            } else {
                match acts.as_slice() {
                    ["create"] => d.create += 1,
                    ["update"] => d.update += 1,
                    ["delete"] => d.delete += 1,
                    _ => continue,
                }
            }
            addresses.push(rc.address.clone());
        }
        addresses.sort();
        addresses.truncate(MAX_DRIFT_RESOURCES);
        d.detected = d.create + d.update + d.replace + d.delete > 0;
        d.resources = addresses;
        d
    }

    /// Every non-empty sensitive string of the resource changes and of the
    /// data sources in the prior state.
    pub fn sensitive_strings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for rc in &self.resource_changes {
            let c = &rc.change;
            sensitive_leaves(&c.before, &c.before_sensitive, &mut out);
            sensitive_leaves(&c.after, &c.after_sensitive, &mut out);
        }
        for c in self.output_changes.values() {
            sensitive_leaves(&c.before, &c.before_sensitive, &mut out);
            sensitive_leaves(&c.after, &c.after_sensitive, &mut out);
        }
        if let Some(prior) = &self.prior_state {
            collect_prior_data_sources(prior, &mut out);
        }
        out.sort();
        out.dedup();
        out
    }
}

fn line(key: &PlanKey, name: &str, actions: &[String], effect: &Map<String, Value>) -> String {
    let canonical = canonical_json(&Value::Object(effect.clone()));
    format!(
        "{name}|{}|{}",
        actions.join(","),
        key.mac_hex(canonical.as_bytes())
    )
}

/// What a change does, as an object the MAC binds.
fn effect_of(c: &Change) -> Map<String, Value> {
    let mut effect = Map::new();
    let acts = c.acts();
    let is_update = acts == ["update"] || c.is_replace();
    if is_update {
        let mut paths = Vec::new();
        diff_paths(
            &mut Vec::new(),
            Some(&c.before),
            Some(&c.after),
            &c.after_unknown,
            &c.before_sensitive,
            &c.after_sensitive,
            &mut paths,
        );
        if !paths.is_empty() {
            effect.insert("paths".into(), Value::Array(paths));
        }
    } else if acts.contains(&"create") || acts.contains(&"read") {
        for (k, v) in [
            ("after", &c.after),
            ("afterUnknown", &c.after_unknown),
            ("afterSensitive", &c.after_sensitive),
        ] {
            if !is_empty_marker(v) || (k == "after" && !v.is_null()) {
                effect.insert(k.into(), v.clone());
            }
        }
    }
    effect
}

fn is_empty_marker(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Object(m) => m.values().all(is_empty_marker),
        Value::Array(a) => a.iter().all(is_empty_marker),
        _ => false,
    }
}

fn child<'a>(v: &'a Value, step: &Value) -> Option<&'a Value> {
    match (v, step) {
        (Value::Object(m), Value::Object(s)) => {
            s.get("key").and_then(Value::as_str).and_then(|k| m.get(k))
        }
        (Value::Array(a), Value::Object(s)) => s
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| a.get(i as usize)),
        _ => None,
    }
}

fn marker_child(v: &Value, step: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::Bool(*b),
        _ => child(v, step).cloned().unwrap_or(Value::Null),
    }
}

/// Walks before and after together and records every leaf that differs,
/// becomes unknown, or changes sensitivity. A missing value and a null are
/// told apart; each path step says whether it is a key or an index.
fn diff_paths(
    path: &mut Vec<Value>,
    before: Option<&Value>,
    after: Option<&Value>,
    unknown: &Value,
    before_sens: &Value,
    after_sens: &Value,
    out: &mut Vec<Value>,
) {
    let unknown_here = unknown == &Value::Bool(true);
    let sens_changed = before_sens.as_bool().unwrap_or(false)
        != after_sens.as_bool().unwrap_or(false)
        && (before_sens.is_boolean() || after_sens.is_boolean());
    let both_containers = matches!(
        (before, after),
        (Some(Value::Object(_)), Some(Value::Object(_)))
            | (Some(Value::Array(_)), Some(Value::Array(_)))
    );
    if !unknown_here && both_containers && !sens_changed {
        let (b, a) = (before.expect("container"), after.expect("container"));
        let mut steps: Vec<Value> = Vec::new();
        match (b, a) {
            (Value::Object(bm), Value::Object(am)) => {
                let mut keys: Vec<&String> = bm.keys().chain(am.keys()).collect();
                keys.sort();
                keys.dedup();
                steps.extend(keys.into_iter().map(|k| json!({ "key": k })));
            }
            (Value::Array(ba), Value::Array(aa)) => {
                steps.extend((0..ba.len().max(aa.len())).map(|i| json!({ "index": i })));
            }
            _ => unreachable!(),
        }
        // Unknown markers may name children the after value lacks.
        if let Value::Object(um) = unknown {
            for k in um.keys() {
                let s = json!({ "key": k });
                if !steps.contains(&s) {
                    steps.push(s);
                }
            }
        }
        for step in steps {
            path.push(step.clone());
            diff_paths(
                path,
                child(b, &step),
                child(a, &step),
                &marker_child(unknown, &step),
                &marker_child(before_sens, &step),
                &marker_child(after_sens, &step),
                out,
            );
            path.pop();
        }
        return;
    }
    if before == after && !unknown_here && !sens_changed {
        return;
    }
    let mut entry = Map::new();
    entry.insert("path".into(), Value::Array(path.clone()));
    match before {
        Some(v) => entry.insert("before".into(), v.clone()),
        None => entry.insert("beforeAbsent".into(), Value::Bool(true)),
    };
    if unknown_here {
        entry.insert("unknown".into(), Value::Bool(true));
    } else {
        match after {
            Some(v) => entry.insert("after".into(), v.clone()),
            None => entry.insert("afterAbsent".into(), Value::Bool(true)),
        };
    }
    if !is_empty_marker(before_sens) {
        entry.insert("beforeSensitive".into(), before_sens.clone());
    }
    if !is_empty_marker(after_sens) {
        entry.insert("afterSensitive".into(), after_sens.clone());
    }
    out.push(Value::Object(entry));
}

/// Compact JSON with object keys sorted at every level.
pub fn canonical_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let b: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(b.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // serde_json's map keeps keys sorted (no preserve_order), so a rebuilt
    // map serializes in key order.
    serde_json::to_string(&sorted(v)).expect("values serialize")
}

/// Strings of `value` whose sensitivity marker is `true`.
fn sensitive_leaves(value: &Value, marker: &Value, out: &mut Vec<String>) {
    match marker {
        Value::Bool(true) => crate::redact::string_leaves(value, out),
        Value::Object(m) => {
            if let Value::Object(vm) = value {
                for (k, mk) in m {
                    if let Some(v) = vm.get(k) {
                        sensitive_leaves(v, mk, out);
                    }
                }
            }
        }
        Value::Array(ma) => {
            if let Value::Array(va) = value {
                for (v, mk) in va.iter().zip(ma) {
                    sensitive_leaves(v, mk, out);
                }
            }
        }
        _ => {}
    }
}

fn collect_prior_data_sources(prior: &Value, out: &mut Vec<String>) {
    fn walk_module(m: &Value, out: &mut Vec<String>) {
        for r in m
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if r.get("mode").and_then(Value::as_str) == Some("data") {
                let values = r.get("values").cloned().unwrap_or(Value::Null);
                let marker = r.get("sensitive_values").cloned().unwrap_or(Value::Null);
                sensitive_leaves(&values, &marker, out);
            }
        }
        for c in m
            .get("child_modules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk_module(c, out);
        }
    }
    if let Some(root) = prior.get("values").and_then(|v| v.get("root_module")) {
        walk_module(root, out);
    }
}
