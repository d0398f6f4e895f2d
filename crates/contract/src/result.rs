//! The result document the runner leaves in the termination-message file,
//! and its size-bounded encoding: written by the runner, read by the
//! manager's bookkeeping.

use serde::{Deserialize, Serialize};

/// The kubelet keeps at most this many bytes of a termination message.
pub const MAX_RESULT_BYTES: usize = 4096;
/// Cap of `error.tail`.
pub const MAX_TAIL_BYTES: usize = 512;
/// Cap of `plan.resources`.
pub const MAX_PLAN_RESOURCES: usize = 50;
/// Cap of `drift.resources`.
pub const MAX_DRIFT_RESOURCES: usize = 20;
/// Below this size a halved tail says nothing useful and is cleared.
const MIN_TAIL_BYTES: usize = 16;

/// Process exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    pub version: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeInfo>,
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    #[serde(default)]
    pub drift: Option<Drift>,
    #[serde(default)]
    pub error: Option<RunError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Changes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    #[serde(rename = "ref")]
    pub reference: String,
    pub providers_mirror: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    pub command: Vec<String>,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub exit: i32,
    pub seconds: f64,
}

impl StepRecord {
    /// Seconds are reported to a tenth.
    pub fn new(name: &str, exit: i32, elapsed: std::time::Duration) -> StepRecord {
        StepRecord {
            name: name.to_owned(),
            exit,
            seconds: (elapsed.as_secs_f64() * 10.0).round() / 10.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    ImageLayout,
    Step,
    Interrupted,
    Blocked,
    PlanChanged,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub kind: ErrorKind,
    pub step: Option<String>,
    #[serde(default)]
    pub tail: String,
}

/// Counts from the runtime's final apply/destroy summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    pub add: u64,
    pub change: u64,
    pub destroy: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub import: u64,
}

/// What a drift check found. Reading also accepts the older count names
/// (`add`, `change`, `destroy`) of runners from other builds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Drift {
    pub detected: bool,
    #[serde(alias = "add")]
    pub create: u64,
    #[serde(alias = "change")]
    pub update: u64,
    pub replace: u64,
    #[serde(alias = "destroy")]
    pub delete: u64,
    #[serde(default)]
    pub resources: Vec<String>,
}

/// Counts of a plan, by the newer field names (reading also accepts the
/// older `add`, `change`, `destroy`, `outputs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlanCounts {
    #[serde(alias = "add")]
    pub create: u64,
    #[serde(alias = "change")]
    pub update: u64,
    pub replace: u64,
    #[serde(alias = "destroy")]
    pub delete: u64,
    pub import: u64,
    #[serde(rename = "move")]
    pub moves: u64,
    pub forget: u64,
    #[serde(alias = "outputs")]
    pub output_changes: u64,
}

/// A parsed plan: its fingerprint, counts and labelled resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanSummary {
    #[serde(default)]
    pub hash: String,
    #[serde(flatten)]
    pub counts: PlanCounts,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The last-resort document: what the manager needs to decide, nothing else.
#[derive(Serialize)]
struct MinimalDoc<'a> {
    version: u32,
    op: &'a str,
    error: Option<MinimalError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<MinimalPlan<'a>>,
}

#[derive(Serialize)]
struct MinimalError {
    kind: ErrorKind,
}

#[derive(Serialize)]
struct MinimalPlan<'a> {
    hash: &'a str,
    #[serde(flatten)]
    counts: PlanCounts,
    truncated: bool,
}

impl ResultDoc {
    /// A fresh document for `op`.
    pub fn new(op: &str, image: &str, command: &[String]) -> ResultDoc {
        ResultDoc {
            version: 1,
            op: op.to_owned(),
            image: Some(ImageInfo {
                reference: image.to_owned(),
                providers_mirror: false,
            }),
            runtime: Some(RuntimeInfo {
                command: command.to_vec(),
                version: String::new(),
            }),
            steps: Vec::new(),
            drift: None,
            error: None,
            changes: None,
            plan: None,
        }
    }

    /// The document of a command line that could not be parsed.
    pub fn flag_error(message: &str) -> ResultDoc {
        ResultDoc {
            version: 1,
            op: String::new(),
            image: None,
            runtime: None,
            steps: Vec::new(),
            drift: None,
            error: Some(RunError {
                kind: ErrorKind::Step,
                step: Some("flags".to_owned()),
                tail: truncate_keep_start(message, MAX_TAIL_BYTES).to_owned(),
            }),
            changes: None,
            plan: None,
        }
    }

    pub fn fail(&mut self, kind: ErrorKind, step: Option<&str>, tail: &str) {
        self.error = Some(RunError {
            kind,
            step: step.map(str::to_owned),
            tail: truncate_keep_start(tail, MAX_TAIL_BYTES).to_owned(),
        });
    }

    /// The process exit code this document stands for.
    pub fn exit_code(&self) -> i32 {
        match &self.error {
            None => EXIT_OK,
            Some(e) if e.step.as_deref() == Some("flags") => EXIT_USAGE,
            Some(_) => EXIT_FAILURE,
        }
    }

    /// Compact JSON of at most [`MAX_RESULT_BYTES`], dropping detail in a
    /// fixed order until it fits; the error kind, plan hash and counts
    /// survive every step.
    pub fn encode(&self) -> Vec<u8> {
        let mut doc = self.clone();
        // Caps that hold regardless of size.
        if let Some(e) = &mut doc.error {
            e.tail = truncate_keep_start(&e.tail, MAX_TAIL_BYTES).to_owned();
        }
        if let Some(p) = &mut doc.plan
            && p.resources.len() > MAX_PLAN_RESOURCES
        {
            p.resources.truncate(MAX_PLAN_RESOURCES);
            p.truncated = true;
        }
        if let Some(d) = &mut doc.drift {
            d.resources.truncate(MAX_DRIFT_RESOURCES);
        }
        let fits = |d: &ResultDoc| to_json(d).len() <= MAX_RESULT_BYTES;
        if fits(&doc) {
            return to_json(&doc);
        }
        doc.changes = None;
        while !fits(&doc) {
            let Some(e) = doc.error.as_mut().filter(|e| !e.tail.is_empty()) else {
                break;
            };
            let half = truncate_keep_end(&e.tail, e.tail.len() / 2).to_owned();
            e.tail = if half.len() < MIN_TAIL_BYTES {
                String::new()
            } else {
                half
            };
        }
        while !fits(&doc) {
            let Some(p) = doc.plan.as_mut().filter(|p| !p.resources.is_empty()) else {
                break;
            };
            let keep = p.resources.len() / 2;
            p.resources.truncate(keep);
            p.truncated = true;
        }
        if !fits(&doc)
            && let Some(d) = &mut doc.drift
        {
            d.resources.clear();
        }
        if !fits(&doc) && doc.steps.len() > 2 {
            let last = doc.steps.pop().expect("more than two steps");
            doc.steps.truncate(1);
            doc.steps.push(last);
        }
        if fits(&doc) {
            return to_json(&doc);
        }
        let minimal = MinimalDoc {
            version: doc.version,
            op: &doc.op,
            error: doc.error.as_ref().map(|e| MinimalError { kind: e.kind }),
            plan: doc.plan.as_ref().map(|p| MinimalPlan {
                hash: &p.hash,
                counts: p.counts,
                truncated: p.truncated,
            }),
        };
        let bytes = serde_json::to_vec(&minimal).expect("plain data serializes");
        if bytes.len() <= MAX_RESULT_BYTES {
            return bytes;
        }
        // Only an absurd op or hash string can get here; keep kind and counts.
        let minimal = MinimalDoc {
            op: truncate_keep_start(&doc.op, 64),
            plan: minimal.plan.map(|p| MinimalPlan {
                hash: truncate_keep_start(p.hash, 128),
                ..p
            }),
            ..minimal
        };
        serde_json::to_vec(&minimal).expect("plain data serializes")
    }
}

fn to_json(doc: &ResultDoc) -> Vec<u8> {
    serde_json::to_vec(doc).expect("plain data serializes")
}

/// The first at most `max` bytes of `s`, cut on a character boundary.
pub fn truncate_keep_start(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The last at most `max` bytes of `s`, cut on a character boundary.
pub fn truncate_keep_end(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
