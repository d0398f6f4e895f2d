//! `captf_jobs_active`: the unfinished run Jobs by kind and operation,
//! followed from the manager's one Job watch (no request of its own). A
//! relist replaces what it knew, so a missed event heals at the next one.

use std::collections::{BTreeMap, HashMap};

use captf_api::names::labels as names;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::{KindOpLabels, labels, to_gauge};

/// Unfinished Jobs by `namespace/name`, with their kind and op.
#[derive(Default)]
pub(super) struct ActiveJobs {
    running: HashMap<String, (&'static str, &'static str)>,
    relist: Option<HashMap<String, (&'static str, &'static str)>>,
}

fn key(job: &Job) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

/// The kind and op a Job of ours is labeled with; `None` for any other.
fn kind_op(job: &Job) -> Option<(&'static str, &'static str)> {
    let l = job.labels();
    let kind = labels::kind(l.get(names::OWNER_KIND)?).ok()?;
    let op = labels::op(l.get(names::JOB_OP)?).ok()?;
    Some((kind, op))
}

fn finished(job: &Job) -> bool {
    crate::jobs::observe::job_finished(job)
}

impl ActiveJobs {
    /// Applies one watch event; `true` when the counts may have changed.
    fn apply(&mut self, event: &Event<Job>) -> bool {
        match event {
            Event::Init => {
                self.relist = Some(HashMap::new());
                false
            }
            Event::InitApply(job) => {
                if let (false, Some(ko)) = (finished(job), kind_op(job)) {
                    self.relist
                        .get_or_insert_with(HashMap::new)
                        .insert(key(job), ko);
                }
                false
            }
            Event::InitDone => match self.relist.take() {
                Some(listed) => {
                    self.running = listed;
                    true
                }
                None => false,
            },
            Event::Apply(job) => match (finished(job), kind_op(job)) {
                (false, Some(ko)) => self.running.insert(key(job), ko) != Some(ko),
                _ => self.running.remove(&key(job)).is_some(),
            },
            Event::Delete(job) => self.running.remove(&key(job)).is_some(),
        }
    }

    fn counts(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        let mut out = BTreeMap::new();
        for ko in self.running.values() {
            *out.entry(*ko).or_insert(0) += 1;
        }
        out
    }
}

impl super::Metrics {
    /// Follows the Job watch into `captf_jobs_active`. A kind and op whose
    /// Jobs all finished reads 0 (a series that ever existed stays).
    pub fn observe_job(&self, event: &Event<Job>) {
        let mut active = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
        if !active.apply(event) {
            return;
        }
        let counts = active.counts();
        drop(active);
        let family = &self.f().jobs_active;
        for kind in labels::KINDS {
            let kind = labels::kind(kind).expect("a documented kind");
            for op in super::labels_ops() {
                let n = counts.get(&(kind, op)).copied().unwrap_or(0);
                let l = KindOpLabels { kind, op };
                if n > 0 {
                    family.get_or_create(&l).set(to_gauge(n));
                } else if let Some(g) = family.get(&l) {
                    g.set(0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, kind: &str, op: &str, done: bool) -> Job {
        let conditions = if done {
            json!([{"type": "Complete", "status": "True"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {
                names::OWNER_KIND: kind, names::JOB_OP: op,
            }},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn active(m: &super::super::Metrics, kind: &str, op: &str) -> Option<String> {
        let want = format!("captf_jobs_active{{kind=\"{kind}\",op=\"{op}\"}} ");
        m.encode()
            .lines()
            .find_map(|l| l.strip_prefix(&want).map(str::to_owned))
    }

    #[test]
    fn running_jobs_are_counted_until_they_finish_or_go() {
        let m = super::super::Metrics::new();
        m.observe_job(&Event::Apply(job(
            "a",
            "TerraformMachinePool",
            "apply",
            false,
        )));
        m.observe_job(&Event::Apply(job(
            "b",
            "TerraformMachinePool",
            "apply",
            false,
        )));
        m.observe_job(&Event::Apply(job("c", "TerraformCluster", "drift", false)));
        m.observe_job(&Event::Apply(job("x", "Widget", "apply", false)));
        assert_eq!(
            active(&m, "TerraformMachinePool", "apply").as_deref(),
            Some("2")
        );
        assert_eq!(
            active(&m, "TerraformCluster", "drift").as_deref(),
            Some("1")
        );
        m.observe_job(&Event::Apply(job(
            "a",
            "TerraformMachinePool",
            "apply",
            true,
        )));
        m.observe_job(&Event::Delete(job("c", "TerraformCluster", "drift", false)));
        assert_eq!(
            active(&m, "TerraformMachinePool", "apply").as_deref(),
            Some("1")
        );
        assert_eq!(
            active(&m, "TerraformCluster", "drift").as_deref(),
            Some("0")
        );
        // A relist replaces everything known.
        m.observe_job(&Event::Init);
        m.observe_job(&Event::InitApply(job(
            "d",
            "TerraformMachine",
            "destroy",
            false,
        )));
        assert_eq!(
            active(&m, "TerraformMachinePool", "apply").as_deref(),
            Some("1")
        );
        m.observe_job(&Event::InitDone);
        assert_eq!(
            active(&m, "TerraformMachinePool", "apply").as_deref(),
            Some("0")
        );
        assert_eq!(
            active(&m, "TerraformMachine", "destroy").as_deref(),
            Some("1")
        );
        assert!(
            active(&m, "TerraformMachine", "apply").is_none(),
            "no series never needed"
        );
    }
}
