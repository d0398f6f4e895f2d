//! Whole passes against the fake apiserver, each kind's request sequence
//! pinned: a converged pass (reads only), a pass that starts a refresh
//! (block-move before the Job, status last), a pass that bookkeeps a
//! finished Job and starts the next, and a deleting pass. The safety net of
//! the trunk's reshaping: the sequences must hold before and after.

mod cluster;
mod harness;
mod machine;
mod pool;
