//! The manager: the reconcile engine, one adapter per kind, the Job builder,
//! the webhooks and the manager binary. Built by the engine issues; this crate
//! holds nothing that runs yet.
