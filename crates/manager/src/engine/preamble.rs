//! The fixed opening of every reconcile pass: externally managed objects,
//! the owner, the finalizer and pause, decided before anything else is
//! read or written.

/// How the owner lookup went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerLookup {
    Found,
    /// No ownerRef of the expected kind yet.
    Missing,
    /// An owner exists but may not be used (e.g. `ClusterNotTerraform`,
    /// `OwnerMismatch`); the reason of `DependenciesReady`.
    Gated(&'static str),
}

/// What the preamble sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreambleInput {
    /// `cluster.x-k8s.io/managed-by` is set (any value).
    pub externally_managed: bool,
    pub deleting: bool,
    pub has_finalizer: bool,
    pub owner: OwnerLookup,
    /// The object or its Cluster is paused.
    pub paused: bool,
    /// Nothing can exist yet (`leftovers::Leftovers::nothing_to_clean_up`):
    /// no state, no Job, never applied, no apply of unknown outcome.
    pub nothing_to_clean_up: bool,
}

/// How the pass goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preamble {
    /// Nothing to do for this object in this pass.
    Skip,
    /// Externally managed and deleting: remove our finalizer and say so.
    ReleaseExternallyManaged,
    /// No owner yet: report it and look again later.
    WaitForOwner,
    /// The owner cannot be used: report the reason, start nothing.
    OwnerGated(&'static str),
    /// Deleting an object that never made anything: just let it go.
    DropFinalizer,
    /// Add the finalizer and end the pass (the update triggers the next).
    AddFinalizer,
    /// Paused: bookkeeping only, never a new Job.
    Paused,
    /// The full flow.
    Proceed,
}

/// Decides the preamble.
pub fn preamble(i: &PreambleInput) -> Preamble {
    if i.externally_managed {
        return if i.deleting && i.has_finalizer {
            Preamble::ReleaseExternallyManaged
        } else {
            Preamble::Skip
        };
    }
    if i.deleting && !i.has_finalizer {
        return Preamble::Skip;
    }
    match (i.owner, i.deleting) {
        (OwnerLookup::Missing, false) => return Preamble::WaitForOwner,
        (OwnerLookup::Missing, true) if i.nothing_to_clean_up => return Preamble::DropFinalizer,
        // A gate stops the pass only while not deleting: destroy still runs
        // from the durable inputs.
        (OwnerLookup::Gated(reason), false) => return Preamble::OwnerGated(reason),
        _ => {}
    }
    if !i.has_finalizer {
        return Preamble::AddFinalizer;
    }
    if i.paused {
        return Preamble::Paused;
    }
    Preamble::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> PreambleInput {
        PreambleInput {
            externally_managed: false,
            deleting: false,
            has_finalizer: true,
            owner: OwnerLookup::Found,
            paused: false,
            nothing_to_clean_up: false,
        }
    }

    #[test]
    fn preamble_table() {
        type Case = (&'static str, fn(&mut PreambleInput), Preamble);
        let cases: Vec<Case> = vec![
            ("normal", |_| {}, Preamble::Proceed),
            (
                "externally managed",
                |i| i.externally_managed = true,
                Preamble::Skip,
            ),
            (
                "externally managed, deleting",
                |i| {
                    i.externally_managed = true;
                    i.deleting = true;
                },
                Preamble::ReleaseExternallyManaged,
            ),
            (
                "externally managed, deleting, released",
                |i| {
                    i.externally_managed = true;
                    i.deleting = true;
                    i.has_finalizer = false;
                },
                Preamble::Skip,
            ),
            (
                "deleting without our finalizer",
                |i| {
                    i.deleting = true;
                    i.has_finalizer = false;
                },
                Preamble::Skip,
            ),
            (
                "no owner yet",
                |i| i.owner = OwnerLookup::Missing,
                Preamble::WaitForOwner,
            ),
            (
                "no owner yet, before the finalizer",
                |i| {
                    i.owner = OwnerLookup::Missing;
                    i.has_finalizer = false;
                },
                Preamble::WaitForOwner,
            ),
            (
                "deleting without owner, nothing made",
                |i| {
                    i.owner = OwnerLookup::Missing;
                    i.deleting = true;
                    i.nothing_to_clean_up = true;
                },
                Preamble::DropFinalizer,
            ),
            (
                "deleting without owner, something made",
                |i| {
                    i.owner = OwnerLookup::Missing;
                    i.deleting = true;
                },
                Preamble::Proceed,
            ),
            (
                "owner gated",
                |i| i.owner = OwnerLookup::Gated("OwnerMismatch"),
                Preamble::OwnerGated("OwnerMismatch"),
            ),
            (
                "owner gated while deleting",
                |i| {
                    i.owner = OwnerLookup::Gated("ClusterNotTerraform");
                    i.deleting = true;
                },
                Preamble::Proceed,
            ),
            (
                "finalizer first",
                |i| i.has_finalizer = false,
                Preamble::AddFinalizer,
            ),
            ("paused", |i| i.paused = true, Preamble::Paused),
            (
                "paused while deleting",
                |i| {
                    i.paused = true;
                    i.deleting = true;
                },
                Preamble::Paused,
            ),
            (
                "paused without finalizer adds it first",
                |i| {
                    i.paused = true;
                    i.has_finalizer = false;
                },
                Preamble::AddFinalizer,
            ),
        ];
        for (name, edit, want) in cases {
            let mut i = base();
            edit(&mut i);
            assert_eq!(preamble(&i), want, "{name}");
        }
    }
}
