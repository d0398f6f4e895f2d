//! Building the Jobs that run the runner.

pub mod args;
pub mod build;
pub mod observe;
pub mod recovery;
