//! A pass past its opening stages: what they learned (`OpenPass`, read
//! only from there on), the status they began (`Draft`, handed on to the
//! plan, which returns it), and what a deleting object's opening read
//! (`EarlyReads`, handed to the fetch so nothing is read twice). The
//! execute stage keeps its own `Closing`.

use std::time::Duration;

use kube::runtime::controller::Action;

use super::bookkeeping::Bookkept;
use super::pass::Loaded;
use super::settings::PassSettings;
use super::status::Draft;
use crate::engine::history::JobRecord;
use crate::records::InputsRecord;
use crate::state::reader::{StateError, StateSummary};

/// The object's two inputs records, read together.
pub struct Records {
    pub applied: Option<InputsRecord>,
    pub attempt: Option<InputsRecord>,
}

/// What the opening stages learned: the object's Jobs and what bookkeeping
/// made of them, the settings, the credentials verdict. No stage after the
/// opening changes it; the execute stage's `Closing` owns it at the end.
pub struct OpenPass {
    pub loaded: Loaded,
    pub booked: Bookkept,
    pub active: Option<JobRecord>,
    pub shared: PassSettings,
    pub credentials_secret: Option<String>,
    /// The credentials verdict of the pass; `None` when it checked none.
    pub credentials: Option<super::credentials::CredentialsVerdict>,
    /// Whether the object carries the block-move annotation now.
    pub block_move: bool,
    pub(super) deleting: bool,
}

/// What a deleting object's opening read, still current (bookkeeping that
/// adopted a state or wrote the records drops the part it made stale).
#[derive(Default)]
pub struct EarlyReads {
    /// The state.
    pub(super) state: Option<Result<StateSummary, StateError>>,
    /// The applied and attempt records.
    pub(super) records: Option<Records>,
}

/// The opening's hand-off: what it learned, the status it began, and its
/// early reads.
pub struct Opened {
    pub pass: OpenPass,
    pub status: Draft,
    pub early: EarlyReads,
}

/// The execute stage's own: the pass, the status it finishes, what the
/// pass measured and how soon a failed best-effort write is tried again.
pub struct Closing {
    pub pass: OpenPass,
    pub status: Draft,
    /// What this pass measured of the state and the inputs, exported with
    /// the per-object gauges.
    pub measured: Measured,
    /// A best-effort write of this pass failed and is tried again by a
    /// pass this soon (whatever the plan's own requeue).
    pub retry_after: Option<Duration>,
}

impl Closing {
    /// The execute stage of a pass the plan finished.
    pub fn new(pass: OpenPass, status: Draft, measured: Measured) -> Self {
        Closing {
            pass,
            status,
            measured,
            retry_after: None,
        }
    }

    /// The execute stage of a pass that ends right after its opening.
    pub fn opened(opened: Opened) -> Self {
        Closing::new(opened.pass, opened.status, Measured::default())
    }
}

/// Sizes a pass measured (unread ones keep their gauges as they were).
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    pub state: crate::metrics::Observed<crate::metrics::StateSize>,
    pub inputs_bytes: crate::metrics::Observed<u64>,
}

impl Measured {
    /// The sizes of a state read; an unusable state is left unmeasured.
    pub fn state_read(&mut self, read: &Result<StateSummary, StateError>) {
        use crate::metrics::{Observed, StateSize};
        self.state = match read {
            Ok(s) => Observed::Value(StateSize {
                resources: s.managed_resources as u64,
                bytes: s.compressed_bytes as u64,
            }),
            Err(StateError::NotFound) => Observed::Absent,
            Err(_) => Observed::Unread,
        };
    }
}

impl OpenPass {
    pub fn deleting(&self) -> bool {
        self.deleting
    }
}

#[cfg(test)]
impl OpenPass {
    /// A pass past its opening stages, for tests of the stages after them.
    pub fn for_plan_tests(loaded: Loaded, shared: PassSettings, deleting: bool) -> Self {
        OpenPass {
            loaded,
            booked: Bookkept::default(),
            active: None,
            shared,
            credentials_secret: None,
            credentials: Some(super::credentials::CredentialsVerdict::Ready(None)),
            block_move: false,
            deleting,
        }
    }
}

/// How the opening stages ended: the pass is done (an early exit of the
/// preamble), or it continues with what they read and decided.
pub enum Opening {
    Done(Action),
    Continue(Box<Opened>),
}
