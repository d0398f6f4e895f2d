//! The arguments of `runner run` in a Job's `source` container. Pure; the
//! runner's own parser reads them back in a test, so the two never drift.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::decide::Op;

/// Paths of the image and runtime contract inside the Job's pod.
pub const RUNTIME: &str = "/captf/runtime";
pub const MODULE_DIR: &str = "/captf/module";
pub const PROVIDERS_DIR: &str = "/captf/providers";
pub const WORK_DIR: &str = "/captf/work";
pub const CONFIG_DIR: &str = "/captf/config";
pub const PLAN_KEY_FILE: &str = "/captf/plan-key/key";

/// How an apply is guarded against destructive plans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The hash an approval must name: the inputs hash, or a pool's
    /// approval hash.
    pub inputs_hash: String,
    /// Deletes approved for this hash (pools).
    pub allow_deletes_hash: Option<String>,
    /// The exact plan an approval bound (clusters, Manual plans).
    pub expect_plan: Option<String>,
}

/// Everything `runner run` is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerArgs {
    pub op: Op,
    pub image: String,
    pub namespace: String,
    pub state_suffix: String,
    /// Labels the backend puts on state Secrets (immutable identity only).
    pub state_labels: BTreeMap<String, String>,
    pub lock_timeout: Duration,
    pub stop_timeout: Duration,
    pub force_unlock: Option<String>,
    /// `--guard-deletes` and its hashes; an `expect_plan` alone (Manual
    /// approval) also fits here with `guard_deletes` false.
    pub guard: Option<Guard>,
    pub guard_deletes: bool,
    /// Restore: chunk count and the backup's managed-resource count.
    pub restore: Option<(u32, u32)>,
    /// Mount the plan key (plan Jobs and cluster applies).
    pub plan_key: bool,
    /// `<apiVersion>/<kind>/<namespace>/<name>/<uid>` of the object, and the
    /// Job's name, for progress events.
    pub event_object: Option<(String, String)>,
    /// The runner posts only failures, findings and changes.
    pub quiet_events: bool,
}

/// Which runs post events on their object (`--runner-events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunnerEvents {
    /// No run posts any (`false`).
    Off,
    /// Every run posts its events, except that a routine refresh or drift
    /// check posts only a failure, a finding or a change (`true`, the
    /// default), and its Job's creation is not announced.
    #[default]
    Notable,
    /// Every run posts every event, routine ones included (`all`).
    All,
}

impl RunnerEvents {
    /// A refresh or drift check: scheduled work that usually changes
    /// nothing, run as often as every minute per pool.
    pub fn is_routine(op: Op) -> bool {
        matches!(op, Op::Refresh | Op::Drift)
    }

    /// For a Job of `op`: `None` when its runner posts no event, else
    /// whether it posts only failures, findings and changes.
    pub fn quiet_for(self, op: Op) -> Option<bool> {
        match self {
            RunnerEvents::Off => None,
            RunnerEvents::Notable => Some(Self::is_routine(op)),
            RunnerEvents::All => Some(false),
        }
    }

    /// Whether the manager announces the creation of a Job of `op`
    /// (`JobCreated`).
    pub fn announces_creation(self, op: Op) -> bool {
        self == RunnerEvents::All || !Self::is_routine(op)
    }
}

/// Go's duration syntax for whole seconds, as the runner's flags read it.
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// The backend's `labels` argument: an HCL map with sorted, quoted keys.
pub fn hcl_map(labels: &BTreeMap<String, String>) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let items: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
        .collect();
    format!("{{{}}}", items.join(","))
}

impl RunnerArgs {
    /// The `args` of the container whose command is `runner run`.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            format!("--op={}", self.op.as_str()),
            format!("--bin={RUNTIME}"),
            format!("--image={}", self.image),
            format!("--module={MODULE_DIR}"),
            format!("--providers={PROVIDERS_DIR}"),
            format!("--workdir={WORK_DIR}"),
            format!("--config={CONFIG_DIR}"),
            format!("--lock-timeout={}", seconds(self.lock_timeout)),
            format!("--stop-timeout={}", seconds(self.stop_timeout)),
            format!("--backend-config=secret_suffix={}", self.state_suffix),
            format!("--backend-config=namespace={}", self.namespace),
            "--backend-config=in_cluster_config=true".to_owned(),
            format!("--backend-config=labels={}", hcl_map(&self.state_labels)),
        ];
        if let Some(id) = &self.force_unlock {
            a.push(format!("--force-unlock={id}"));
        }
        if self.guard_deletes {
            a.push("--guard-deletes".to_owned());
        }
        if let Some(g) = &self.guard {
            a.push(format!("--inputs-hash={}", g.inputs_hash));
            if let Some(h) = &g.allow_deletes_hash {
                a.push(format!("--allow-deletes-hash={h}"));
            }
            if let Some(p) = &g.expect_plan {
                a.push(format!("--expect-plan={p}"));
            }
        }
        if let Some((chunks, resources)) = self.restore {
            a.push(format!("--restore-chunks={chunks}"));
            a.push(format!("--restore-resources={resources}"));
        }
        if self.plan_key {
            a.push(format!("--plan-key-file={PLAN_KEY_FILE}"));
        }
        if let Some((object, job)) = &self.event_object {
            a.push(format!("--event-object={object}"));
            a.push(format!("--job-name={job}"));
            if self.quiet_events {
                a.push("--quiet-events".to_owned());
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RunnerArgs {
        RunnerArgs {
            op: Op::Apply,
            image: "ghcr.io/captf-io/noop-machinepool:v1-tofu".into(),
            namespace: "team-a".into(),
            state_suffix: "0123456789abcdef-mp".into(),
            state_labels: [
                ("captf.io/managed", "true"),
                ("cluster.x-k8s.io/cluster-name", "prod"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            lock_timeout: Duration::from_secs(300),
            stop_timeout: Duration::from_secs(570),
            force_unlock: None,
            guard: None,
            guard_deletes: false,
            restore: None,
            plan_key: false,
            event_object: None,
            quiet_events: false,
        }
    }

    #[test]
    fn an_unguarded_apply() {
        assert_eq!(
            base().to_args(),
            [
                "--op=apply",
                "--bin=/captf/runtime",
                "--image=ghcr.io/captf-io/noop-machinepool:v1-tofu",
                "--module=/captf/module",
                "--providers=/captf/providers",
                "--workdir=/captf/work",
                "--config=/captf/config",
                "--lock-timeout=300s",
                "--stop-timeout=570s",
                "--backend-config=secret_suffix=0123456789abcdef-mp",
                "--backend-config=namespace=team-a",
                "--backend-config=in_cluster_config=true",
                "--backend-config=labels={\"captf.io/managed\"=\"true\",\"cluster.x-k8s.io/cluster-name\"=\"prod\"}",
            ]
        );
    }

    #[test]
    fn optional_flags_come_in_a_fixed_order() {
        let mut a = base();
        a.force_unlock = Some("lock-1".into());
        a.guard_deletes = true;
        a.guard = Some(Guard {
            inputs_hash: "h2:i".into(),
            allow_deletes_hash: Some("h2:i".into()),
            expect_plan: Some("p2:x".into()),
        });
        a.plan_key = true;
        a.quiet_events = true;
        a.event_object = Some((
            "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/team-a/prod/uid-1".into(),
            "captf-c-prod-apply-a1-abcdef".into(),
        ));
        let args = a.to_args();
        assert_eq!(
            &args[13..],
            [
                "--force-unlock=lock-1",
                "--guard-deletes",
                "--inputs-hash=h2:i",
                "--allow-deletes-hash=h2:i",
                "--expect-plan=p2:x",
                "--plan-key-file=/captf/plan-key/key",
                "--event-object=infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/team-a/prod/uid-1",
                "--job-name=captf-c-prod-apply-a1-abcdef",
                "--quiet-events",
            ]
        );
        let mut r = base();
        r.op = Op::Restore;
        r.restore = Some((2, 5));
        assert_eq!(
            &r.to_args()[13..],
            ["--restore-chunks=2", "--restore-resources=5"]
        );
    }

    #[test]
    fn routine_runs_are_quiet_unless_all_events_are_asked_for() {
        use RunnerEvents::*;
        // (setting, op, quiet_for, announces_creation)
        let table = [
            (Notable, Op::Refresh, Some(true), false),
            (Notable, Op::Drift, Some(true), false),
            (Notable, Op::Apply, Some(false), true),
            (Notable, Op::Destroy, Some(false), true),
            (Notable, Op::Restore, Some(false), true),
            (Notable, Op::Plan, Some(false), true),
            (All, Op::Refresh, Some(false), true),
            (All, Op::Apply, Some(false), true),
            (Off, Op::Refresh, None, false),
            (Off, Op::Apply, None, true),
        ];
        for (setting, op, quiet, announced) in table {
            assert_eq!(setting.quiet_for(op), quiet, "{setting:?} {op:?}");
            assert_eq!(
                setting.announces_creation(op),
                announced,
                "{setting:?} {op:?}"
            );
        }
        // Without an event object the quiet flag is not passed.
        let mut a = base();
        a.quiet_events = true;
        assert!(!a.to_args().iter().any(|x| x == "--quiet-events"));
    }

    #[test]
    fn hcl_map_quotes_and_sorts() {
        let m: BTreeMap<String, String> = [("b", "2"), ("a", "x\"y")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(hcl_map(&m), r#"{"a"="x\"y","b"="2"}"#);
        assert_eq!(hcl_map(&BTreeMap::new()), "{}");
    }
}
