//! The reconcile engine shared by every Job-running kind. Its decisions are
//! pure functions over plain data; the reconcilers do the I/O around them.

pub mod backoff;
pub mod decide;
pub mod history;
pub mod job_conditions;
pub mod leftovers;
pub mod preamble;
pub mod ready;
pub mod slots;
pub mod transitions;
