//! The runner: the small static binary that runs one Terraform/OpenTofu
//! operation inside a Job and reports its result document. Its commands are
//! built by the runner issue; this crate holds nothing that runs yet.
