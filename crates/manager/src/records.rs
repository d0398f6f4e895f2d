//! The inputs records: the rendered root and values an apply ran with, kept
//! in Secrets so destroy, refresh and drift can render exactly what the
//! state was made from. The attempt record (`captf-inputs-*`) is rewritten
//! by every apply Job; the applied record (`captf-applied-*`) is promoted
//! from a successful one and carries the image digest; the per-run Secret
//! (`captf-run-<job>`) is what one Job mounts.
//!
//! Records hold bootstrap data and variable values in clear text: their
//! contents are never logged.

use std::collections::BTreeMap;

use captf_api::admission::repository;
use captf_api::names::{annotations, labels};
use k8s_openapi::ByteString;

use crate::names::{WorkloadKind, name_label, sha256_hex};

/// The two files every record holds.
pub const MAIN_FILE: &str = "main.tf.json";
pub const VALUES_FILE: &str = "terraform.tfvars.json";
/// A pool's exports of its last successful apply (attempt record only).
pub const APPLIED_EXPORTS_FILE: &str = "applied-cluster-outputs.json";
/// Most bytes of data an attempt record holds; the applied exports are left
/// out (their hash stays) when they would not fit.
pub const RECORD_BUDGET: usize = 1_000_000;
/// Longest Secret name.
const NAME_MAX: usize = 253;

fn bounded(prefix: &str, name: &str) -> String {
    let full = format!("{prefix}{name}");
    if full.len() <= NAME_MAX {
        return full;
    }
    let digest = &sha256_hex(name.as_bytes())[..16];
    format!("{prefix}{digest}")
}

/// `captf-inputs-<ks>-<name>`.
pub fn attempt_record_name(kind: WorkloadKind, name: &str) -> String {
    bounded(&format!("captf-inputs-{}-", kind.short()), name)
}

/// `captf-applied-<ks>-<name>`.
pub fn applied_record_name(kind: WorkloadKind, name: &str) -> String {
    bounded(&format!("captf-applied-{}-", kind.short()), name)
}

/// `captf-run-<job>` (Job names are at most 57 characters).
pub fn run_secret_name(job: &str) -> String {
    format!("captf-run-{job}")
}

/// What an inputs record says besides its files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordMeta {
    pub inputs_hash: String,
    /// The image reference as written in the spec.
    pub image: String,
    /// `sha256:...` the kubelet ran (applied record only).
    pub image_digest: Option<String>,
    pub identity: Option<String>,
    /// `Secret` for a namespace-local Secret identity.
    pub identity_kind: Option<String>,
    /// The Job these inputs belong to.
    pub job: Option<String>,
    /// `captf.io/unconfirmed-apply` (attempt record only): an apply Job whose
    /// outcome is unknown, because it vanished while running or ended
    /// without a result after its runner started. It may have changed
    /// infrastructure that no state records.
    pub unconfirmed_apply: Option<String>,
    /// `captf.io/unpullable-images` (attempt record only): images a
    /// destroy, refresh, drift or restore Job could not pull, oldest first
    /// (at most three); the next such Job starts on the next candidate.
    pub unpullable_images: Vec<String>,
}

/// What a pool's attempt record keeps about the cluster's exports (the
/// exports guard); empty for every other kind and on applied records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportsRecord {
    /// JSON of the exports the last successful apply rendered.
    pub applied: Option<String>,
    /// `captf.io/applied-cluster-outputs-hash`.
    pub applied_hash: Option<String>,
    /// `captf.io/pending-cluster-outputs`: JSON of a change waiting for
    /// approval.
    pub pending: Option<String>,
    /// `captf.io/partial-cluster-outputs`: JSON of a change whose apply
    /// failed part-way.
    pub partial: Option<String>,
}

/// A record: the rendered files and what produced them.
#[derive(Clone, PartialEq, Eq)]
pub struct InputsRecord {
    pub main_tf_json: String,
    pub tfvars_json: String,
    pub meta: RecordMeta,
    pub exports: ExportsRecord,
}

impl std::fmt::Debug for InputsRecord {
    // The files carry bootstrap data and variable values: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputsRecord")
            .field(
                "main_tf_json",
                &format_args!("<{} bytes>", self.main_tf_json.len()),
            )
            .field(
                "tfvars_json",
                &format_args!("<{} bytes>", self.tfvars_json.len()),
            )
            .field("meta", &self.meta)
            .field(
                "exports",
                &format_args!(
                    "applied {:?}, pending {}, partial {}",
                    self.exports.applied_hash,
                    self.exports.pending.is_some(),
                    self.exports.partial.is_some()
                ),
            )
            .finish()
    }
}

/// Why a Secret is not a usable record. Never includes file contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("inputs record lacks {0}")]
    MissingFile(&'static str),
    #[error("inputs record file {0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error("inputs record lacks the {0} annotation")]
    MissingAnnotation(&'static str),
}

/// The labels of records owned by an object.
pub fn record_labels(kind: WorkloadKind, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::MANAGED.to_owned(), "true".to_owned()),
        (labels::OWNER_KIND.to_owned(), kind.kind().to_owned()),
        (labels::OWNER_NAME.to_owned(), name_label(name)),
    ])
}

impl InputsRecord {
    /// Data and annotations of the Secret that stores this record.
    pub fn to_secret_parts(&self) -> (BTreeMap<String, ByteString>, BTreeMap<String, String>) {
        (self.secret_data(), self.secret_annotations())
    }

    /// The files of the Secret that stores this record.
    fn secret_data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::from([
            (
                MAIN_FILE.to_owned(),
                ByteString(self.main_tf_json.clone().into_bytes()),
            ),
            (
                VALUES_FILE.to_owned(),
                ByteString(self.tfvars_json.clone().into_bytes()),
            ),
        ]);
        if let Some(applied) = &self.exports.applied {
            let used = self.main_tf_json.len() + self.tfvars_json.len();
            if used + applied.len() <= RECORD_BUDGET {
                data.insert(
                    APPLIED_EXPORTS_FILE.to_owned(),
                    ByteString(applied.clone().into_bytes()),
                );
            }
        }
        data
    }

    /// The annotations of the Secret that stores this record: its meta and
    /// what it keeps of the cluster's exports.
    fn secret_annotations(&self) -> BTreeMap<String, String> {
        let (m, x) = (&self.meta, &self.exports);
        let mut ann = BTreeMap::from([
            (annotations::INPUTS_HASH.to_owned(), m.inputs_hash.clone()),
            (annotations::IMAGE.to_owned(), m.image.clone()),
        ]);
        let optional = [
            (annotations::IMAGE_DIGEST, &m.image_digest),
            (annotations::IDENTITY, &m.identity),
            (annotations::IDENTITY_KIND, &m.identity_kind),
            (annotations::JOB, &m.job),
            (annotations::UNCONFIRMED_APPLY, &m.unconfirmed_apply),
            (annotations::APPLIED_CLUSTER_OUTPUTS_HASH, &x.applied_hash),
            (annotations::PENDING_CLUSTER_OUTPUTS, &x.pending),
            (annotations::PARTIAL_CLUSTER_OUTPUTS, &x.partial),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                ann.insert(key.to_owned(), v.clone());
            }
        }
        if !m.unpullable_images.is_empty() {
            ann.insert(
                annotations::UNPULLABLE_IMAGES.to_owned(),
                serde_json::to_string(&m.unpullable_images).expect("strings serialize"),
            );
        }
        ann
    }

    /// Reads a record back from a Secret's data and annotations.
    pub fn from_secret_parts(
        data: &BTreeMap<String, ByteString>,
        ann: &BTreeMap<String, String>,
    ) -> Result<InputsRecord, RecordError> {
        let file = |key: &'static str| -> Result<String, RecordError> {
            let bytes = data.get(key).ok_or(RecordError::MissingFile(key))?;
            String::from_utf8(bytes.0.clone()).map_err(|_| RecordError::NotUtf8(key))
        };
        let required = |key: &'static str| -> Result<String, RecordError> {
            ann.get(key)
                .cloned()
                .ok_or(RecordError::MissingAnnotation(key))
        };
        let optional = |key: &str| ann.get(key).filter(|v| !v.is_empty()).cloned();
        Ok(InputsRecord {
            main_tf_json: file(MAIN_FILE)?,
            tfvars_json: file(VALUES_FILE)?,
            meta: RecordMeta {
                inputs_hash: required(annotations::INPUTS_HASH)?,
                image: required(annotations::IMAGE)?,
                image_digest: optional(annotations::IMAGE_DIGEST),
                identity: optional(annotations::IDENTITY),
                identity_kind: optional(annotations::IDENTITY_KIND),
                job: optional(annotations::JOB),
                // Earlier releases marked a vanished apply with
                // `captf.io/interrupted-apply`: the same mark, read as such
                // (`write_record` removes the old key once it wrote the new).
                unconfirmed_apply: optional(annotations::UNCONFIRMED_APPLY)
                    .or_else(|| optional(annotations::INTERRUPTED_APPLY)),
                // A list that does not parse is no list: the next Job tries
                // the pinned image again and falls back again if it must.
                unpullable_images: optional(annotations::UNPULLABLE_IMAGES)
                    .and_then(|v| serde_json::from_str(&v).ok())
                    .unwrap_or_default(),
            },
            exports: ExportsRecord {
                applied: data
                    .get(APPLIED_EXPORTS_FILE)
                    .and_then(|b| String::from_utf8(b.0.clone()).ok()),
                applied_hash: optional(annotations::APPLIED_CLUSTER_OUTPUTS_HASH),
                pending: optional(annotations::PENDING_CLUSTER_OUTPUTS),
                partial: optional(annotations::PARTIAL_CLUSTER_OUTPUTS),
            },
        })
    }

    /// The applied record promoted from this one after `job` succeeded with
    /// the image digest the pod reported. Without a reported digest the
    /// previous applied digest is kept when the image is the same.
    pub fn promote(
        &self,
        job: &str,
        reported_digest: Option<&str>,
        previous: Option<&InputsRecord>,
    ) -> InputsRecord {
        let digest = reported_digest.map(str::to_owned).or_else(|| {
            previous
                .filter(|p| p.meta.image == self.meta.image)
                .and_then(|p| p.meta.image_digest.clone())
        });
        InputsRecord {
            main_tf_json: self.main_tf_json.clone(),
            tfvars_json: self.tfvars_json.clone(),
            meta: RecordMeta {
                image_digest: digest,
                job: Some(job.to_owned()),
                unconfirmed_apply: None,
                unpullable_images: Vec::new(),
                ..self.meta.clone()
            },
            exports: ExportsRecord::default(),
        }
    }

    /// The annotations an apply's per-run Secret carries beside its files:
    /// what promotion needs (inputs hash, image, identity, Job) when the
    /// attempt record does not name the Job (a crash between the Job's
    /// create and the record's write), so the per-run Secret alone reads
    /// back as this record.
    pub fn run_annotations(&self) -> BTreeMap<String, String> {
        let mut ann = self.secret_annotations();
        let kept = [
            annotations::INPUTS_HASH,
            annotations::IMAGE,
            annotations::IDENTITY,
            annotations::IDENTITY_KIND,
            annotations::JOB,
        ];
        ann.retain(|k, _| kept.contains(&k.as_str()));
        ann
    }

    /// Whether this record belongs to Job `job`.
    pub fn names_job(&self, job: &str) -> bool {
        self.meta.job.as_deref() == Some(job)
    }

    /// Which record a successful apply `job` is promoted from (concepts
    /// §9.2): the attempt record when it names the Job, else the Job's
    /// per-run Secret, else an attempt record of the same inputs (written
    /// by an earlier release, which named no Job, or for a later apply of
    /// the same inputs: the same files). `None`: no record holds the Job's
    /// inputs any more. `inputs_hash` is the one the Job ran with.
    pub fn promotion_source<'a>(
        job: &str,
        inputs_hash: Option<&str>,
        attempt: Option<&'a InputsRecord>,
        per_run: Option<&'a InputsRecord>,
    ) -> Option<&'a InputsRecord> {
        let same_inputs = |r: &&InputsRecord| inputs_hash.is_none_or(|h| h == r.meta.inputs_hash);
        attempt
            .filter(|r| r.names_job(job) && same_inputs(r))
            .or_else(|| per_run.filter(same_inputs))
            .or_else(|| attempt.filter(same_inputs))
    }

    /// Whether an apply of the object ever succeeded, by its records: an
    /// applied record, or an attempt record carrying an image digest, where
    /// earlier versions pinned it after a successful apply (this manager
    /// keeps digests on the applied record only). Read as applied, never as
    /// the less safe "never applied".
    pub fn ever_applied(applied: Option<&InputsRecord>, attempt: Option<&InputsRecord>) -> bool {
        applied.is_some() || attempt.is_some_and(|a| a.meta.image_digest.is_some())
    }

    /// The apply of the attempt record whose outcome is unknown, while it is
    /// in force: until an apply that started after it (the attempt record
    /// then names that apply and carries the mark on) succeeded, which makes
    /// it the applied record's Job.
    pub fn unconfirmed_in_force(
        attempt: Option<&InputsRecord>,
        applied: Option<&InputsRecord>,
    ) -> Option<String> {
        let attempt = attempt?;
        let job = attempt.meta.unconfirmed_apply.as_deref()?;
        let newer = attempt.meta.job.as_deref().filter(|j| *j != job);
        let superseded =
            newer.is_some_and(|n| applied.and_then(|a| a.meta.job.as_deref()) == Some(n));
        (!superseded).then(|| job.to_owned())
    }

    /// The record that describes the state, which a destroy renders (and a
    /// refresh or drift check that does not render the current inputs), in
    /// the reference's order: an attempt whose apply may have changed
    /// infrastructure (its outcome unknown) when it is not the applied
    /// record's; else the record of the state's inputs hash, applied first;
    /// else the applied record, else the attempt record. A partial apply is
    /// thus undone with its own inputs, and a change that failed before it
    /// touched anything never changes what a destroy renders.
    pub fn describing_state<'a>(
        applied: Option<&'a InputsRecord>,
        attempt: Option<&'a InputsRecord>,
        state_hash: Option<&str>,
    ) -> Option<&'a InputsRecord> {
        let may_have_applied = attempt.filter(|a| {
            a.meta.job.is_some()
                && a.meta.unconfirmed_apply == a.meta.job
                && applied.and_then(|p| p.meta.job.as_ref()) != a.meta.job.as_ref()
        });
        let of_state = state_hash.and_then(|h| {
            [applied, attempt]
                .into_iter()
                .flatten()
                .find(|r| r.meta.inputs_hash == h)
        });
        may_have_applied.or(of_state).or(applied).or(attempt)
    }

    /// The image a non-apply op runs: `repo@digest` when pinned, else the
    /// recorded reference.
    pub fn pinned_image(&self) -> String {
        match &self.meta.image_digest {
            Some(d) => format!("{}@{d}", repository(&self.meta.image)),
            None => self.meta.image.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> InputsRecord {
        InputsRecord {
            main_tf_json: "{\"module\":{}}\n".into(),
            tfvars_json: "{\"bootstrap_data\":\"c2VjcmV0\"}\n".into(),
            meta: RecordMeta {
                inputs_hash: "h2:abc".into(),
                image: "ghcr.io/captf-io/noop-machinepool:v1-tofu".into(),
                image_digest: None,
                identity: Some("oci-prod".into()),
                identity_kind: None,
                job: Some("captf-mp-pool-apply-a1-abcdef".into()),
                unconfirmed_apply: None,
                unpullable_images: Vec::new(),
            },
            exports: ExportsRecord::default(),
        }
    }

    #[test]
    fn a_digest_on_an_older_attempt_record_counts_as_applied() {
        let attempt = record();
        let mut pinned = record();
        pinned.meta.image_digest = Some("sha256:0123".into());
        for (applied, attempt, want) in [
            (None, None, false),
            (None, Some(&attempt), false),
            (None, Some(&pinned), true),
            (Some(&attempt), None, true),
            (Some(&attempt), Some(&attempt), true),
        ] {
            assert_eq!(
                InputsRecord::ever_applied(applied, attempt),
                want,
                "{applied:?} {attempt:?}"
            );
        }
    }

    #[test]
    fn an_applys_per_run_secret_reads_back_as_its_attempt_record() {
        let mut attempt = record();
        attempt.meta.unconfirmed_apply = Some("earlier".into());
        attempt.meta.unpullable_images = vec!["ghcr.io/x:v0".into()];
        let (data, _) = attempt.to_secret_parts();
        let files: BTreeMap<String, ByteString> = data
            .into_iter()
            .filter(|(k, _)| k == MAIN_FILE || k == VALUES_FILE)
            .collect();
        let back = InputsRecord::from_secret_parts(&files, &attempt.run_annotations()).unwrap();
        assert_eq!(back.main_tf_json, attempt.main_tf_json);
        assert_eq!(back.tfvars_json, attempt.tfvars_json);
        // What promotion keeps; the marks of the attempt record stay there.
        assert_eq!(back.meta.inputs_hash, attempt.meta.inputs_hash);
        assert_eq!(back.meta.image, attempt.meta.image);
        assert_eq!(back.meta.identity, attempt.meta.identity);
        assert_eq!(back.meta.job, attempt.meta.job);
        assert_eq!(back.meta.unconfirmed_apply, None);
        assert!(back.meta.unpullable_images.is_empty());
    }

    #[test]
    fn a_promotion_reads_the_jobs_own_inputs_first() {
        let job = "captf-m-m-0-apply-a2-000002";
        let with = |job: Option<&str>, hash: &str, file: &str| {
            let mut r = record();
            r.meta.job = job.map(str::to_owned);
            r.meta.inputs_hash = hash.into();
            r.main_tf_json = file.into();
            r
        };
        let named = with(Some(job), "h2:new", "attempt");
        let per_run = with(Some(job), "h2:new", "per-run");
        let newer_same = with(Some("captf-m-m-0-apply-a3-000003"), "h2:new", "newer");
        let newer_other = with(Some("captf-m-m-0-apply-a3-000003"), "h2:next", "next");
        let legacy = with(None, "h2:new", "legacy");
        let h = Some("h2:new");
        let cases = [
            // (attempt, per-run Secret, hash the Job ran, promoted from)
            (Some(&named), Some(&per_run), h, Some("attempt")),
            // A crash before the attempt record was written: its per-run
            // Secret holds the inputs.
            (None, Some(&per_run), h, Some("per-run")),
            (Some(&newer_other), Some(&per_run), h, Some("per-run")),
            // The per-run Secret gone: an attempt record of the same inputs.
            (Some(&newer_same), None, h, Some("newer")),
            (Some(&legacy), None, h, Some("legacy")),
            (Some(&legacy), None, None, Some("legacy")),
            // Nothing holds them: the applied record stays as it is.
            (Some(&newer_other), None, h, None),
            (None, None, h, None),
            (None, Some(&with(Some(job), "h2:old", "stale")), h, None),
        ];
        for (attempt, per_run, hash, want) in cases {
            let got = InputsRecord::promotion_source(job, hash, attempt, per_run);
            assert_eq!(
                got.map(|r| r.main_tf_json.as_str()),
                want,
                "{attempt:?} {per_run:?} {hash:?}"
            );
        }
    }

    #[test]
    fn an_unknown_apply_holds_until_a_later_apply_succeeds() {
        let with = |job: &str, unconfirmed: Option<&str>| {
            let mut r = record();
            r.meta.job = Some(job.into());
            r.meta.unconfirmed_apply = unconfirmed.map(str::to_owned);
            r
        };
        let x = Some("x");
        let cases = [
            // (attempt, applied, in force)
            (None, None, None),
            (Some(with("x", None)), None, None),
            // x vanished: in force, whatever applied before it.
            (Some(with("x", x)), None, x),
            (Some(with("x", x)), Some(with("old", None)), x),
            // y started after x and carries the mark on: in force until y
            // is the applied record's Job.
            (Some(with("y", x)), Some(with("old", None)), x),
            (Some(with("y", x)), Some(with("y", None)), None),
        ];
        for (attempt, applied, want) in cases {
            assert_eq!(
                InputsRecord::unconfirmed_in_force(attempt.as_ref(), applied.as_ref()).as_deref(),
                want,
                "{attempt:?} {applied:?}"
            );
        }
    }

    #[test]
    fn the_record_describing_the_state() {
        let with = |job: &str, hash: &str, unconfirmed: Option<&str>| {
            let mut r = record();
            r.meta.job = Some(job.into());
            r.meta.inputs_hash = hash.into();
            r.meta.unconfirmed_apply = unconfirmed.map(str::to_owned);
            r
        };
        let applied = with("a1", "h2:old", None);
        let failed_plan = with("a2", "h2:new", None);
        let partial = with("a2", "h2:new", Some("a2"));
        let carried = with("a3", "h2:newer", Some("a2"));
        let promoted = with("a1", "h2:old", Some("a1"));
        type Case<'a> = (
            &'a str,
            Option<&'a InputsRecord>,
            Option<&'a InputsRecord>,
            Option<&'a str>,
            Option<&'a str>,
        );
        // (case, applied, attempt, state hash, the chosen record's Job)
        let cases: [Case; 9] = [
            ("nothing recorded", None, None, Some("h2:old"), None),
            (
                "an apply that may have applied",
                Some(&applied),
                Some(&partial),
                Some("h2:old"),
                Some("a2"),
            ),
            (
                "a change that failed before touching anything",
                Some(&applied),
                Some(&failed_plan),
                Some("h2:old"),
                Some("a1"),
            ),
            (
                "the state's hash names the attempt",
                Some(&applied),
                Some(&failed_plan),
                Some("h2:new"),
                Some("a2"),
            ),
            (
                "a mark carried by a later start is not that start's",
                Some(&applied),
                Some(&carried),
                None,
                Some("a1"),
            ),
            (
                "the mark on the applied record's own Job",
                Some(&promoted),
                Some(&promoted),
                Some("h2:zzz"),
                Some("a1"),
            ),
            (
                "no hash: the applied record",
                Some(&applied),
                Some(&failed_plan),
                None,
                Some("a1"),
            ),
            (
                "only an attempt",
                None,
                Some(&failed_plan),
                None,
                Some("a2"),
            ),
            (
                "a hash neither has: the applied record",
                Some(&applied),
                Some(&failed_plan),
                Some("h2:zzz"),
                Some("a1"),
            ),
        ];
        for (name, applied, attempt, hash, want) in cases {
            let got = InputsRecord::describing_state(applied, attempt, hash);
            assert_eq!(got.and_then(|r| r.meta.job.as_deref()), want, "{name}");
        }
    }

    #[test]
    fn names_are_bounded_and_kind_coded() {
        assert_eq!(
            attempt_record_name(WorkloadKind::MachinePool, "pool-a"),
            "captf-inputs-mp-pool-a"
        );
        assert_eq!(
            applied_record_name(WorkloadKind::Cluster, "prod"),
            "captf-applied-c-prod"
        );
        assert_eq!(
            run_secret_name("captf-c-prod-apply-a1-abcdef"),
            "captf-run-captf-c-prod-apply-a1-abcdef"
        );
        let long = "x".repeat(250);
        let n = attempt_record_name(WorkloadKind::Machine, &long);
        assert_eq!(n.len(), "captf-inputs-m-".len() + 16);
        assert_ne!(
            n,
            attempt_record_name(WorkloadKind::Machine, &"y".repeat(250))
        );
    }

    #[test]
    fn a_record_round_trips_through_its_secret() {
        let r = record();
        let (data, ann) = r.to_secret_parts();
        assert_eq!(
            ann.get("captf.io/inputs-hash").map(String::as_str),
            Some("h2:abc")
        );
        assert!(!ann.contains_key("captf.io/image-digest"));
        assert_eq!(InputsRecord::from_secret_parts(&data, &ann).unwrap(), r);
    }

    #[test]
    fn the_legacy_interrupted_apply_key_reads_as_the_unconfirmed_mark() {
        let (data, ann) = record().to_secret_parts();
        let read = |extra: &[(&str, &str)]| {
            let mut ann = ann.clone();
            ann.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            InputsRecord::from_secret_parts(&data, &ann)
                .unwrap()
                .meta
                .unconfirmed_apply
        };
        type Annotations<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Annotations<'_>, Option<&str>)] = &[
            (&[], None),
            (&[("captf.io/interrupted-apply", "j-old")], Some("j-old")),
            (&[("captf.io/unconfirmed-apply", "j-new")], Some("j-new")),
            (
                &[
                    ("captf.io/interrupted-apply", "j-old"),
                    ("captf.io/unconfirmed-apply", "j-new"),
                ],
                Some("j-new"),
            ),
            (&[("captf.io/interrupted-apply", "")], None),
        ];
        for (extra, wanted) in cases {
            assert_eq!(read(extra).as_deref(), *wanted, "{extra:?}");
        }
        // Written back, only the current key is used.
        let mut marked = record();
        marked.meta.unconfirmed_apply = Some("j-old".into());
        let (_, written) = marked.to_secret_parts();
        assert!(!written.contains_key("captf.io/interrupted-apply"));
        assert_eq!(
            written
                .get("captf.io/unconfirmed-apply")
                .map(String::as_str),
            Some("j-old")
        );
    }

    #[test]
    fn unpullable_images_round_trip_and_leave_with_promotion() {
        let mut r = record();
        r.meta.unpullable_images = vec!["r.io/m@sha256:aa".into(), "r.io/m:v1".into()];
        let (data, mut ann) = r.to_secret_parts();
        assert_eq!(
            ann.get("captf.io/unpullable-images").map(String::as_str),
            Some(r#"["r.io/m@sha256:aa","r.io/m:v1"]"#)
        );
        assert_eq!(InputsRecord::from_secret_parts(&data, &ann).unwrap(), r);
        assert!(r.promote("j", None, None).meta.unpullable_images.is_empty());
        ann.insert("captf.io/unpullable-images".into(), "not json".into());
        let back = InputsRecord::from_secret_parts(&data, &ann).unwrap();
        assert!(back.meta.unpullable_images.is_empty());
    }

    #[test]
    fn a_pool_record_keeps_its_exports_and_drops_the_value_past_the_budget() {
        let mut r = record();
        r.exports = ExportsRecord {
            applied: Some("{\"subnet\":\"a\"}".into()),
            applied_hash: Some("h2:e1".into()),
            pending: Some("{\"subnet\":\"b\"}".into()),
            partial: None,
        };
        let (data, ann) = r.to_secret_parts();
        assert!(data.contains_key(APPLIED_EXPORTS_FILE));
        assert_eq!(
            ann.get("captf.io/applied-cluster-outputs-hash")
                .map(String::as_str),
            Some("h2:e1")
        );
        assert!(!ann.contains_key("captf.io/partial-cluster-outputs"));
        assert_eq!(InputsRecord::from_secret_parts(&data, &ann).unwrap(), r);

        // Too large to fit: the hash stays, the value goes.
        r.exports.applied = Some("x".repeat(RECORD_BUDGET));
        let (data, ann) = r.to_secret_parts();
        assert!(!data.contains_key(APPLIED_EXPORTS_FILE));
        let back = InputsRecord::from_secret_parts(&data, &ann).unwrap();
        assert_eq!(back.exports.applied, None);
        assert_eq!(back.exports.applied_hash.as_deref(), Some("h2:e1"));
        // An applied record carries none of it.
        let promoted = back.promote("j", None, None);
        assert_eq!(promoted.exports, ExportsRecord::default());
    }

    #[test]
    fn unusable_records_name_what_is_missing_and_nothing_else() {
        let (mut data, mut ann) = record().to_secret_parts();
        ann.remove("captf.io/image");
        assert_eq!(
            InputsRecord::from_secret_parts(&data, &ann),
            Err(RecordError::MissingAnnotation("captf.io/image"))
        );
        data.remove(VALUES_FILE);
        assert_eq!(
            InputsRecord::from_secret_parts(&data, &ann),
            Err(RecordError::MissingFile(VALUES_FILE))
        );
        data.insert(VALUES_FILE.into(), ByteString(vec![0xff]));
        assert_eq!(
            InputsRecord::from_secret_parts(&data, &record().to_secret_parts().1),
            Err(RecordError::NotUtf8(VALUES_FILE))
        );
        assert!(!format!("{:?}", record()).contains("c2VjcmV0"));
    }

    #[test]
    fn promotion_pins_the_digest_and_keeps_it_for_the_same_image() {
        let r = record();
        let applied = r.promote("job-2", Some("sha256:11"), None);
        assert_eq!(applied.meta.image_digest.as_deref(), Some("sha256:11"));
        assert_eq!(applied.meta.job.as_deref(), Some("job-2"));
        assert_eq!(
            applied.pinned_image(),
            "ghcr.io/captf-io/noop-machinepool@sha256:11"
        );

        let again = r.promote("job-3", None, Some(&applied));
        assert_eq!(again.meta.image_digest.as_deref(), Some("sha256:11"));

        let mut other = r.clone();
        other.meta.image = "ghcr.io/captf-io/noop-machinepool:v2-tofu".into();
        let moved = other.promote("job-4", None, Some(&applied));
        assert_eq!(moved.meta.image_digest, None);
        assert_eq!(
            moved.pinned_image(),
            "ghcr.io/captf-io/noop-machinepool:v2-tofu"
        );
    }
}
