//! The manager's integration tests, one binary: one control plane (and, when
//! a test asks, one set of Cluster API managers) shared by every test, each
//! in a namespace of its own. Three binaries apart: `by_hand` (tests that
//! play Cluster API's part, where its managers must not run), `identities`
//! (tests of the identity code, where no manager may run) and `quiet_logs`
//! (it installs the process's log subscriber).

mod apply_step_failed;
mod backups_e2e;
mod capi_e2e;
mod cluster_e2e;
mod cluster_gate;
mod crash_windows;
mod decoders;
mod delete_midway;
mod finalizer_io;
mod first_apply_killed;
mod job_args;
mod job_e2e;
mod job_slots;
mod job_start;
mod kill_matrix;
mod kill_matrix_members;
mod leader_io;
mod leases;
mod lock_evidence;
mod machine_e2e;
mod metrics_e2e;
mod metrics_io;
mod move_e2e;
mod pause_handshake;
mod pool_e2e;
mod pull_fallback;
mod racing_start;
mod records_io;
mod reference_upgrade;
mod runner_creates;
mod runner_image;
mod runner_killed;
mod scale;
mod schema_limits;
mod stale_status;
mod state_io;
mod state_lock;
mod support;
mod template_capacity;
mod unconfirmed_apply;
mod watch_filter;
mod webhook;
