//! The Jobs of a namespace in the order they appeared, as a watch saw
//! them: the order of a run of operations, whatever history pruning or
//! owner collection later removes.

use std::sync::{Arc, Mutex};

use captf_testenv::TestNamespace;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::watcher;

use super::job_op;

/// Every Job of the namespace in the order it appeared, with its op, as a
/// watch saw it (Jobs collected with their owner are still counted).
pub struct JobLog {
    seen: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobLog {
    pub fn start(ns: &TestNamespace) -> JobLog {
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let log = seen.clone();
        let stream = watcher(ns.api::<Job>(), watcher::Config::default());
        let task = tokio::spawn(async move {
            let mut stream = stream.boxed();
            while let Some(event) = stream.next().await {
                let (Ok(watcher::Event::Apply(job)) | Ok(watcher::Event::InitApply(job))) = event
                else {
                    continue;
                };
                let name = job.metadata.name.clone().unwrap_or_default();
                let mut seen = log.lock().unwrap();
                if !seen.iter().any(|(n, _)| *n == name) {
                    seen.push((name, job_op(&job)));
                }
            }
        });
        JobLog { seen, task }
    }

    pub fn of_op(&self, op: &str) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(_, o)| o == op)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

impl Drop for JobLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JobLog {
    /// The ops of every Job seen whose name starts with `prefix` (one
    /// object's: `captf-mp-pool-a-`), in order.
    #[allow(dead_code)]
    pub fn ops_of(&self, prefix: &str) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(_, o)| o.clone())
            .collect()
    }
}

impl JobLog {
    /// The names of the Jobs of `op` whose name starts with `prefix` (one
    /// object's), in the order they appeared.
    #[allow(dead_code)]
    pub fn of_object_op(&self, prefix: &str, op: &str) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(n, o)| n.starts_with(prefix) && o == op)
            .map(|(n, _)| n.clone())
            .collect()
    }
}
