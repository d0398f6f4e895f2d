//! A pass past its opening stages: the status draft, the object's Jobs and
//! what bookkeeping made of them, and what the opening stages learned.

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

/// A pass past the preamble: its status draft, the object's Jobs and what
/// bookkeeping made of them, and what the opening stages learned.
pub struct OpenPass {
    pub draft: Draft,
    pub loaded: Loaded,
    pub booked: Bookkept,
    pub active: Option<JobRecord>,
    pub shared: PassSettings,
    pub credentials_secret: Option<String>,
    /// The credentials verdict of the pass; `None` when it checked none.
    pub credentials: Option<super::credentials::CredentialsVerdict>,
    /// The state as read at the opening of a deleting object's pass.
    pub(super) early_state: Option<Result<StateSummary, StateError>>,
    /// The applied and attempt records as read at that opening.
    pub(super) early_records: Option<Records>,
    /// Whether the object carries the block-move annotation now.
    pub block_move: bool,
    /// A write of this pass's fetch stage failed and is tried again by a
    /// pass this soon (whatever the plan's own requeue).
    pub retry_after: Option<Duration>,
    /// What this pass measured of the state and the inputs, exported with
    /// the per-object gauges.
    pub measured: Measured,
    pub(super) deleting: bool,
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
    pub fn for_plan_tests(
        draft: Draft,
        loaded: Loaded,
        shared: PassSettings,
        deleting: bool,
    ) -> Self {
        OpenPass {
            draft,
            loaded,
            booked: Bookkept::default(),
            active: None,
            shared,
            credentials_secret: None,
            credentials: Some(super::credentials::CredentialsVerdict::Ready(None)),
            early_state: None,
            early_records: None,
            block_move: false,
            retry_after: None,
            measured: Measured::default(),
            deleting,
        }
    }
}

/// How the opening stages ended: the pass is done (an early exit of the
/// preamble), or it continues with what they read and decided.
pub enum Opening {
    Done(Action),
    Continue(Box<OpenPass>),
}
