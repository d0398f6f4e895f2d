//! Event routing: which watch events wake which objects. A watch event wakes
//! only the objects that depend on the changed object, and only when the
//! part they consume changed. Pure functions over the watched objects, plus
//! the index of what each object's last pass read (no client here).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use captf_api::TerraformCluster;
use captf_api::names::annotations;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::{Value, json};

/// A digest of the parts of an object a consumer acts on.
pub type Fingerprint = u64;

fn digest(v: &impl Serialize) -> Fingerprint {
    let mut h = DefaultHasher::new();
    serde_json::to_string(v)
        .expect("watched objects serialize")
        .hash(&mut h);
    h.finish()
}

/// The metadata a pass acts on, without what only the manager itself
/// writes there (the block-move annotation) and without `resourceVersion`
/// and `managedFields`, which change with every write.
fn acted_on_metadata(meta: &ObjectMeta) -> Value {
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    annotations.remove(annotations::BLOCK_MOVE);
    json!({
        "generation": meta.generation,
        "labels": meta.labels,
        "annotations": annotations,
        "finalizers": meta.finalizers,
        "deletion": meta.deletion_timestamp,
        "owners": meta.owner_references,
    })
}

/// An object's own events that call for its pass: its spec (through the
/// generation), labels, annotations, finalizers, owners and deletion. Its
/// status is written by its own pass only, so a status write wakes nobody.
pub fn own_object(meta: &ObjectMeta) -> Fingerprint {
    digest(&acted_on_metadata(meta))
}

/// What a TerraformCluster's pools (and machines) consume of it: its spec,
/// labels and annotations (paused, externally managed), its exports,
/// failure domains and provisioned flag, and its deletion. Its conditions,
/// Job bookkeeping and timestamps churn without concerning them.
pub fn terraform_cluster_consumed(tc: &TerraformCluster) -> Fingerprint {
    let status = tc.status.as_ref();
    digest(&json!({
        "meta": acted_on_metadata(&tc.metadata),
        "spec": tc.spec,
        "exports": status.and_then(|s| s.exports.as_ref()),
        "failureDomains": status.and_then(|s| s.failure_domains.as_ref()),
        "provisioned": status
            .and_then(|s| s.workspace.initialization.as_ref())
            .and_then(|i| i.provisioned),
    }))
}

/// What the infrastructure object of a Cluster API `Cluster` or
/// `MachinePool` consumes: its metadata, spec and the initialization flags
/// of its status (the control plane being initialized feeds the cluster
/// inputs); the rest of its status is Cluster API's own bookkeeping.
pub fn capi_owner_consumed(o: &DynamicObject) -> Fingerprint {
    // A control plane of stand-alone Machines is initialized by condition
    // only; the other conditions churn without concerning anyone here.
    let initialized = o
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == crate::capi::CONTROL_PLANE_INITIALIZED_CONDITION)
        .map(|c| c["status"].clone());
    digest(&json!({
        "meta": acted_on_metadata(&o.metadata),
        "spec": o.data.get("spec"),
        "initialization": o.data.pointer("/status/initialization"),
        "controlPlaneInitialized": initialized,
    }))
}

/// Any change of an object the pass reads whole (variables sources,
/// bootstrap data, state and records): its resource version.
pub fn any_write(meta: &ObjectMeta) -> Fingerprint {
    digest(&meta.resource_version)
}

/// A Job's fingerprint: whether it finished.
pub fn job_finished(job: &Job) -> Fingerprint {
    u64::from(crate::jobs::observe::job_finished(job))
}

/// Whether a change from `before` to `after` (`None`: unseen, or deleted)
/// wakes the object's dependents: any change of the fingerprint.
pub fn changed(before: Option<Fingerprint>, after: Option<Fingerprint>) -> bool {
    before != after
}

/// Whether a Job event wakes its owner: only when the Job finishes, or
/// disappears while running. A Job first seen running was started by the
/// pass itself (or before a restart, when every object is reconciled
/// anyway); a finished Job's deletion is the owner's own history pruning.
pub fn job_event_wakes(before: Option<Fingerprint>, after: Option<Fingerprint>) -> bool {
    const FINISHED: Fingerprint = 1;
    match (before, after) {
        (None, Some(f)) => f == FINISHED,
        (Some(b), Some(a)) => b != a,
        (Some(b), None) => b != FINISHED,
        (None, None) => false,
    }
}

/// Wakes only when a seen object is deleted (a dependent's deletion that
/// unblocks its owner's).
pub fn deleted_only(before: Option<Fingerprint>, after: Option<Fingerprint>) -> bool {
    before.is_some() && after.is_none()
}

/// Whether an object belongs to the Cluster API cluster `cluster`: by its
/// cluster-name label or by a `Cluster` owner of that name.
pub fn names_cluster(meta: &ObjectMeta, cluster: &str) -> bool {
    let labeled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(captf_api::names::labels::CLUSTER_NAME))
        .is_some_and(|c| c == cluster);
    labeled
        || meta
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.kind == "Cluster" && r.name == cluster)
}

/// Remembers each watched object's last fingerprint and decides, event by
/// event, whether its dependents wake.
#[derive(Debug)]
pub struct ChangeFilter {
    seen: HashMap<String, Fingerprint>,
    wakes: fn(Option<Fingerprint>, Option<Fingerprint>) -> bool,
}

impl ChangeFilter {
    pub fn new(wakes: fn(Option<Fingerprint>, Option<Fingerprint>) -> bool) -> Self {
        ChangeFilter {
            seen: HashMap::new(),
            wakes,
        }
    }

    /// An object was seen (created, changed, or listed again).
    pub fn applied(&mut self, key: String, fingerprint: Fingerprint) -> bool {
        let before = self.seen.insert(key, fingerprint);
        (self.wakes)(before, Some(fingerprint))
    }

    /// An object was deleted.
    pub fn deleted(&mut self, key: &str) -> bool {
        let before = self.seen.remove(key);
        (self.wakes)(before, None)
    }
}

/// What a pass depends on, besides its owners (which name it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dependency {
    /// A Secret read whole (bootstrap data, a variables source).
    Secret { namespace: String, name: String },
    /// A ConfigMap variables source.
    ConfigMap { namespace: String, name: String },
    /// The state Secrets of a state suffix (the backend's label).
    State { namespace: String, suffix: String },
    /// The Cluster API `Cluster` the object belongs to (its cluster-name
    /// label): its pause reaches the object.
    Cluster { namespace: String, name: String },
    /// A TerraformCluster whose exports and status the object consumes.
    TerraformCluster { namespace: String, name: String },
    /// A TerraformClusterIdentity (cluster-scoped).
    Identity { name: String },
}

/// A dependent object: its kind (`TerraformCluster`, ...), namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dependent {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Default)]
struct Index {
    by_dependency: HashMap<Dependency, BTreeSet<Dependent>>,
    by_dependent: HashMap<Dependent, BTreeSet<Dependency>>,
}

/// The index from each dependency to the objects whose last pass read it:
/// an event on a dependency wakes exactly those objects, without a scan.
/// A pass records what it will read before it reads, so a change that
/// lands during the pass still wakes it.
#[derive(Debug, Clone, Default)]
pub struct Dependents {
    index: Arc<Mutex<Index>>,
}

impl Dependents {
    /// Replaces what `dependent` depends on.
    pub fn record(&self, dependent: Dependent, deps: BTreeSet<Dependency>) {
        let mut ix = self.index.lock().expect("the dependents index");
        let old = ix.by_dependent.remove(&dependent).unwrap_or_default();
        for d in old.difference(&deps) {
            if let Some(set) = ix.by_dependency.get_mut(d) {
                set.remove(&dependent);
                if set.is_empty() {
                    ix.by_dependency.remove(d);
                }
            }
        }
        for d in &deps {
            ix.by_dependency
                .entry(d.clone())
                .or_default()
                .insert(dependent.clone());
        }
        if !deps.is_empty() {
            ix.by_dependent.insert(dependent, deps);
        }
    }

    /// The object is gone: it depends on nothing.
    pub fn forget(&self, dependent: &Dependent) {
        self.record(dependent.clone(), BTreeSet::new());
    }

    /// The objects of `kind` that depend on `dep`.
    pub fn of(&self, dep: &Dependency, kind: &str) -> Vec<Dependent> {
        let ix = self.index.lock().expect("the dependents index");
        ix.by_dependency
            .get(dep)
            .into_iter()
            .flatten()
            .filter(|d| d.kind == kind)
            .cloned()
            .collect()
    }

    /// How many dependencies are indexed (for tests and the benchmark).
    pub fn len(&self) -> usize {
        self.index
            .lock()
            .expect("the dependents index")
            .by_dependency
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The variables sources an object's `spec.variablesFrom` names.
pub fn variables_sources(
    namespace: &str,
    workspace: &captf_api::common::WorkspaceSpec,
) -> Vec<Dependency> {
    workspace
        .variables_from
        .iter()
        .flatten()
        .filter_map(|v| {
            if let Some(r) = &v.config_map_ref {
                Some(Dependency::ConfigMap {
                    namespace: namespace.to_owned(),
                    name: r.name.clone(),
                })
            } else {
                v.secret_ref.as_ref().map(|r| Dependency::Secret {
                    namespace: namespace.to_owned(),
                    name: r.name.clone(),
                })
            }
        })
        .collect()
}

/// The objects of `kind` a managed Secret names as owners (inputs records,
/// adopted state chunks, backups). State chunks the backend wrote before
/// adoption have no owner and route through [`state_suffix_of`].
pub fn owners_of_kind<'a>(meta: &'a ObjectMeta, kind: &str) -> Vec<&'a str> {
    meta.owner_references
        .iter()
        .flatten()
        .filter(|r| r.kind == kind)
        .map(|r| r.name.as_str())
        .collect()
}

/// The state suffix a state chunk belongs to (`tfstateSecretSuffix`).
pub fn state_suffix_of(meta: &ObjectMeta) -> Option<&str> {
    let l: &BTreeMap<String, String> = meta.labels.as_ref()?;
    (l.get("tfstate").map(String::as_str) == Some("true"))
        .then(|| l.get("tfstateSecretSuffix").map(String::as_str))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_api::names::labels;

    fn meta(v: Value) -> ObjectMeta {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn own_object_ignores_status_versions_and_block_move() {
        let base = meta(
            json!({"name": "a", "generation": 3, "resourceVersion": "10",
            "annotations": {"x": "1"}}),
        );
        let mut later = base.clone();
        later.resource_version = Some("11".into());
        later
            .annotations
            .as_mut()
            .unwrap()
            .insert(annotations::BLOCK_MOVE.into(), "true".into());
        assert_eq!(own_object(&base), own_object(&later), "our own writes");
        let cases = [
            ("spec", json!({"generation": 4})),
            ("label", json!({"labels": {"l": "v"}})),
            ("annotation", json!({"annotations": {"x": "2"}})),
            ("finalizer", json!({"finalizers": ["f"]})),
            (
                "deletion",
                json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
            ),
            (
                "owner",
                json!({"ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u"}]}),
            ),
        ];
        for (what, change) in cases {
            let mut v = serde_json::to_value(&base).unwrap();
            for (k, x) in change.as_object().unwrap() {
                v[k] = x.clone();
            }
            assert_ne!(own_object(&base), own_object(&meta(v)), "{what}");
        }
    }

    #[test]
    fn a_terraform_cluster_wakes_its_pools_only_for_what_they_consume() {
        let tc: TerraformCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
            "metadata": {"name": "c", "generation": 1, "resourceVersion": "5"},
            "spec": {"source": {"image": "m:1"}},
            "status": {"initialization": {"provisioned": true}, "exports": {"a": 1},
                "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "lastRefresh": "2026-01-01T00:00:00Z"},
        }))
        .unwrap();
        let base = terraform_cluster_consumed(&tc);
        let mut churn = tc.clone();
        let s = churn.status.as_mut().unwrap();
        s.conditions.as_mut().unwrap()[0].reason = "Other".into();
        s.workspace.last_refresh = None;
        churn.metadata.resource_version = Some("6".into());
        assert_eq!(base, terraform_cluster_consumed(&churn), "status churn");
        let mut exports = tc.clone();
        exports.status.as_mut().unwrap().exports = Some(json!({"a": 2}));
        assert_ne!(base, terraform_cluster_consumed(&exports), "exports");
        let mut unprovisioned = tc.clone();
        unprovisioned
            .status
            .as_mut()
            .unwrap()
            .workspace
            .initialization = None;
        assert_ne!(
            base,
            terraform_cluster_consumed(&unprovisioned),
            "provisioned"
        );
        let mut paused = tc.clone();
        paused.metadata.annotations =
            Some([(annotations::PAUSED.to_owned(), String::new())].into());
        assert_ne!(base, terraform_cluster_consumed(&paused), "paused");
    }

    #[test]
    fn a_capi_owner_wakes_its_infrastructure_for_spec_and_initialization_only() {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "p", "generation": 1},
            "spec": {"replicas": 2},
            "status": {"phase": "Running", "readyReplicas": 1},
        }))
        .unwrap();
        let base = capi_owner_consumed(&o);
        let mut churn = o.clone();
        churn.data["status"]["readyReplicas"] = json!(2);
        assert_eq!(base, capi_owner_consumed(&churn));
        let mut init = o.clone();
        init.data["status"]["initialization"] = json!({"controlPlaneInitialized": true});
        assert_ne!(base, capi_owner_consumed(&init));
        let mut spec = o.clone();
        spec.data["spec"]["replicas"] = json!(3);
        assert_ne!(base, capi_owner_consumed(&spec));
    }

    #[test]
    fn job_events_wake_on_finish_and_on_loss_of_a_running_job() {
        let (run, fin) = (Some(0), Some(1));
        let cases = [
            ("created running (our own start)", None, run, false),
            ("first seen finished", None, fin, true),
            ("finishes", run, fin, true),
            ("status churn while running", run, run, false),
            ("bookkept annotation", fin, fin, false),
            ("running Job deleted", run, None, true),
            ("finished Job pruned", fin, None, false),
        ];
        for (what, before, after, want) in cases {
            assert_eq!(job_event_wakes(before, after), want, "{what}");
        }
    }

    #[test]
    fn deletions_only_and_cluster_membership() {
        assert!(!deleted_only(None, Some(0)), "created");
        assert!(!deleted_only(Some(0), Some(0)), "changed");
        assert!(deleted_only(Some(0), None), "deleted");
        let labeled = meta(json!({"labels": {labels::CLUSTER_NAME: "prod"}}));
        let owned = meta(
            json!({"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster", "name": "prod", "uid": "u"}]}),
        );
        assert!(names_cluster(&labeled, "prod") && names_cluster(&owned, "prod"));
        assert!(!names_cluster(&labeled, "dev") && !names_cluster(&meta(json!({})), "prod"));
    }

    #[test]
    fn the_change_filter_passes_changes_once() {
        let mut f = ChangeFilter::new(changed);
        assert!(f.applied("a".into(), 1), "first sight");
        assert!(!f.applied("a".into(), 1), "same again");
        assert!(f.applied("a".into(), 2), "changed");
        assert!(f.deleted("a"), "deleted");
        assert!(!f.deleted("a"), "deleted twice");
    }

    fn dependent(name: &str) -> Dependent {
        Dependent {
            kind: "TerraformMachinePool",
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn secret(name: &str) -> Dependency {
        Dependency::Secret {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_index_maps_a_dependency_to_its_current_users_only() {
        let ix = Dependents::default();
        ix.record(dependent("a"), [secret("boot-1")].into());
        ix.record(dependent("b"), [secret("boot-1"), secret("vars")].into());
        assert_eq!(
            ix.of(&secret("boot-1"), "TerraformMachinePool"),
            vec![dependent("a"), dependent("b")]
        );
        assert!(ix.of(&secret("boot-1"), "TerraformCluster").is_empty());
        // a's MachinePool now names another Secret.
        ix.record(dependent("a"), [secret("boot-2")].into());
        assert_eq!(
            ix.of(&secret("boot-1"), "TerraformMachinePool"),
            vec![dependent("b")]
        );
        ix.record(dependent("a"), [secret("boot-2"), secret("vars")].into());
        assert_eq!(ix.of(&secret("vars"), "TerraformMachinePool").len(), 2);
        ix.forget(&dependent("b"));
        ix.forget(&dependent("a"));
        assert!(ix.is_empty());
    }

    #[test]
    fn managed_secrets_name_their_owner_or_state() {
        let record = meta(
            json!({"labels": {labels::MANAGED: "true"}, "ownerReferences": [
            {"apiVersion": "v1", "kind": "TerraformMachinePool", "name": "pool-a", "uid": "u"},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "v"}]}),
        );
        assert_eq!(
            owners_of_kind(&record, "TerraformMachinePool"),
            vec!["pool-a"]
        );
        assert!(owners_of_kind(&record, "TerraformCluster").is_empty());
        let chunk = meta(json!({"labels": {"tfstate": "true", "tfstateSecretSuffix": "abc-mp"}}));
        assert_eq!(state_suffix_of(&chunk), Some("abc-mp"));
        assert!(owners_of_kind(&chunk, "TerraformMachinePool").is_empty());
        let run = meta(json!({"labels": {labels::MANAGED: "true"}}));
        assert_eq!(state_suffix_of(&run), None);
    }

    #[test]
    fn a_backup_chunk_is_told_from_the_state_it_copies() {
        let backup = meta(
            json!({"labels": {"captf.io/state-backup": "true", "captf.io/state-backup-suffix": "abc-mp"}}),
        );
        let chunk = meta(json!({"labels": {"tfstate": "true", "tfstateSecretSuffix": "abc-mp"}}));
        assert_eq!(state_suffix_of(&backup), None, "a backup is no state chunk");
        assert_eq!(state_suffix_of(&chunk), Some("abc-mp"));
    }
}
