//! Names derived from an object: the short kind code, the state suffix and
//! the Job name. They are compatibility facts: state and Jobs written by any
//! CAPTF controller are found under the same names.

use captf_api::names::kinds;
use sha2::{Digest, Sha256};

use crate::engine::decide::Op;

/// The three Job-running kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    Cluster,
    Machine,
    MachinePool,
}

impl WorkloadKind {
    pub fn kind(self) -> &'static str {
        match self {
            WorkloadKind::Cluster => kinds::TERRAFORM_CLUSTER,
            WorkloadKind::Machine => kinds::TERRAFORM_MACHINE,
            WorkloadKind::MachinePool => kinds::TERRAFORM_MACHINE_POOL,
        }
    }

    /// Short code used in state suffixes, Job and record names.
    pub fn short(self) -> &'static str {
        match self {
            WorkloadKind::Cluster => "c",
            WorkloadKind::Machine => "m",
            WorkloadKind::MachinePool => "mp",
        }
    }
}

/// Most characters of an annotation value a condition message quotes back.
pub const QUOTED_VALUE_MAX: usize = 100;

/// An annotation value as a condition message names it: quoted, at most
/// [`QUOTED_VALUE_MAX`] characters, an ellipsis after a cut one.
pub fn quoted_value(value: &str) -> String {
    let kept: String = value.chars().take(QUOTED_VALUE_MAX).collect();
    let cut = if kept.len() < value.len() { "…" } else { "" };
    format!("{kept:?}{cut}")
}

/// Lower-case hex of the SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The state Secret suffix: 16 hex characters of a hash of the object's
/// namespace, kind and name, then the short kind. It never uses the UID, so
/// it survives `clusterctl move`, and never ends in `-<digits>`, so it cannot
/// be mistaken for a chunk.
pub fn state_suffix(kind: WorkloadKind, namespace: &str, name: &str) -> String {
    let digest = sha256_hex(format!("{namespace}/{}/{name}", kind.kind()).as_bytes());
    format!("{}-{}", &digest[..16], kind.short())
}

/// Name of the base state Secret the `kubernetes` backend writes.
pub fn state_secret(suffix: &str) -> String {
    captf_contract::state_names::state_secret(suffix)
}

/// Name of the state lock Lease the backend holds.
pub fn state_lock_lease(suffix: &str) -> String {
    captf_contract::state_names::state_lock_lease(suffix)
}

/// Longest Job name: its pods add `-` and five characters and must stay
/// within 63, so the pod hostname recorded as lock holder is never cut.
pub const JOB_NAME_MAX: usize = 57;

/// `captf-<ks>-<name>-<op>-a<attempt>-<hash6>`; `hash6` binds the inputs
/// hash, op, attempt and tick, and `<name>` becomes 16 hex characters of its
/// hash when the whole would exceed [`JOB_NAME_MAX`].
pub fn job_name(
    kind: WorkloadKind,
    name: &str,
    op: Op,
    attempt: u32,
    inputs_hash: &str,
    tick: &str,
) -> String {
    let op = op.as_str();
    let hash6 = &sha256_hex(format!("{inputs_hash}\0{op}\0{attempt}\0{tick}").as_bytes())[..6];
    let ks = kind.short();
    let full = format!("captf-{ks}-{name}-{op}-a{attempt}-{hash6}");
    if full.len() <= JOB_NAME_MAX {
        return full;
    }
    let short = &sha256_hex(name.as_bytes())[..16];
    format!("captf-{ks}-{short}-{op}-a{attempt}-{hash6}")
}

/// A label value for a name: the name itself, or 16 hex characters of its
/// hash when it exceeds the 63-character label limit.
pub fn name_label(name: &str) -> String {
    if name.len() <= 63 {
        name.to_owned()
    } else {
        sha256_hex(name.as_bytes())[..16].to_owned()
    }
}

/// The five labels the backend puts on every state chunk (its `labels`
/// argument) and a backup carries too: managed, owner kind and name, the
/// cluster's name, and the move label, so `clusterctl move` takes them along.
pub fn state_labels(
    kind: WorkloadKind,
    name: &str,
    cluster: &str,
) -> std::collections::BTreeMap<String, String> {
    use captf_api::names::labels;
    std::collections::BTreeMap::from([
        (labels::MANAGED.to_owned(), "true".to_owned()),
        (labels::OWNER_KIND.to_owned(), kind.kind().to_owned()),
        (labels::OWNER_NAME.to_owned(), name_label(name)),
        (labels::CLUSTER_NAME.to_owned(), name_label(cluster)),
        (labels::CLUSTERCTL_MOVE.to_owned(), String::new()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_suffix_is_stable_kind_coded_and_never_numeric_tailed() {
        let s = state_suffix(WorkloadKind::Cluster, "default", "prod");
        assert_eq!(s.len(), 18);
        assert!(s.ends_with("-c"));
        assert_eq!(s[..16], sha256_hex(b"default/TerraformCluster/prod")[..16]);
        assert_eq!(s, state_suffix(WorkloadKind::Cluster, "default", "prod"));
        assert_ne!(s, state_suffix(WorkloadKind::Cluster, "other", "prod"));
        let p = state_suffix(WorkloadKind::MachinePool, "default", "prod");
        assert!(p.ends_with("-mp") && p.len() == 19);
        assert_eq!(state_secret(&p), format!("tfstate-default-{p}"));
        assert_eq!(state_lock_lease(&p), format!("lock-tfstate-default-{p}"));
    }

    #[test]
    fn job_names_bind_inputs_op_attempt_and_tick() {
        let n = job_name(
            WorkloadKind::MachinePool,
            "pool-a",
            Op::Apply,
            1,
            "h2:x",
            "",
        );
        let hash6 = &sha256_hex(b"h2:x\0apply\x001\0")[..6];
        assert_eq!(n, format!("captf-mp-pool-a-apply-a1-{hash6}"));
        let variants = [
            job_name(
                WorkloadKind::MachinePool,
                "pool-a",
                Op::Apply,
                2,
                "h2:x",
                "",
            ),
            job_name(
                WorkloadKind::MachinePool,
                "pool-a",
                Op::Apply,
                1,
                "h2:y",
                "",
            ),
            job_name(
                WorkloadKind::MachinePool,
                "pool-a",
                Op::Apply,
                1,
                "h2:x",
                "t",
            ),
        ];
        for v in variants {
            assert_ne!(v, n);
        }
    }

    #[test]
    fn long_names_are_hashed_to_fit_a_pod_hostname() {
        let long = "a-very-long-machine-pool-name-that-goes-on";
        let n = job_name(
            WorkloadKind::MachinePool,
            long,
            Op::Refresh,
            12,
            "h2:x",
            "2026-01-01T00:00:00Z",
        );
        assert!(n.len() <= JOB_NAME_MAX, "{n} ({})", n.len());
        assert!(n.starts_with(&format!(
            "captf-mp-{}-refresh-a12-",
            &sha256_hex(long.as_bytes())[..16]
        )));
        // Exactly at the limit the name is kept.
        let name = "x".repeat(JOB_NAME_MAX - "captf-c--apply-a1-123456".len());
        assert_eq!(
            job_name(WorkloadKind::Cluster, &name, Op::Apply, 1, "", "").len(),
            JOB_NAME_MAX
        );
        assert!(job_name(WorkloadKind::Cluster, &name, Op::Apply, 1, "", "").contains(&name));
    }

    #[test]
    fn label_values_fit_the_label_limit() {
        assert_eq!(name_label("short"), "short");
        let long = "n".repeat(64);
        assert_eq!(name_label(&long).len(), 16);
        assert_eq!(name_label(&"n".repeat(63)), "n".repeat(63));
    }

    #[test]
    fn a_quoted_value_is_cut_at_its_bound_and_says_so() {
        assert_eq!(quoted_value("h2:0ld"), "\"h2:0ld\"");
        let at = "x".repeat(QUOTED_VALUE_MAX);
        assert_eq!(quoted_value(&at), format!("{at:?}"));
        let past = "é".repeat(QUOTED_VALUE_MAX + 1);
        assert_eq!(
            quoted_value(&past),
            format!("{:?}…", "é".repeat(QUOTED_VALUE_MAX))
        );
        assert_eq!(quoted_value("a\"b"), "\"a\\\"b\"");
    }
}
