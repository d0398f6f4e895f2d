//! How an object leaves: each way a pass lets go of the finalizer, and the
//! writes it makes, in the order they are safe. Pure; `effects.rs` makes
//! them.

use captf_api::names::events;

use super::effect::Effect;

/// A way an object lets go of its finalizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leaving {
    /// Externally managed: our finalizer goes and nothing else is touched.
    ExternallyManaged,
    /// Deleted before it made anything: whatever it may have made goes
    /// (a crashed first pass can leave a lease or a record), then the
    /// finalizer.
    NothingMade,
    /// Deleted while an earlier object's retained Secrets are here: those
    /// stay untouched.
    ForeignRetained { uid: String },
    /// `deletionPolicy: Retain`: nothing is destroyed, the state stays.
    Retained,
    /// The destroy succeeded; `by` is the Job that destroyed, when listed.
    Destroyed { by: Option<String> },
}

/// The writes of `leaving`. What the object made goes (or is kept) before
/// the finalizer, so a crash between them leaves an object that is still
/// there to clean up again; forgetting it comes last.
pub fn leaving_effects(leaving: &Leaving) -> Vec<Effect> {
    match leaving {
        Leaving::ExternallyManaged => vec![
            Effect::RemoveFinalizer,
            deleted(
                events::EXTERNALLY_MANAGED_RELEASED,
                "externally managed: finalizer removed, nothing destroyed".into(),
            ),
        ],
        Leaving::NothingMade => vec![Effect::DeleteLeftovers, Effect::RemoveFinalizer],
        Leaving::ForeignRetained { uid } => vec![
            Effect::LeaveForeignRetained,
            Effect::RemoveFinalizer,
            deleted(
                events::FINALIZER_REMOVED,
                format!(
                    "finalizer removed without a Job; the Secrets retained by object {uid} are untouched"
                ),
            ),
        ],
        Leaving::Retained => vec![
            Effect::RetainLeftovers,
            Effect::RemoveFinalizer,
            Effect::ForgetObject,
        ],
        Leaving::Destroyed { by } => {
            let mut effects = vec![Effect::DeleteLeftovers];
            if let Some(job) = by {
                effects.push(deleted(
                    events::DESTROYED,
                    format!("Job {job} destroyed the infrastructure; its state, records and leases are gone"),
                ));
            }
            effects.push(deleted(
                events::FINALIZER_REMOVED,
                "infrastructure destroyed; finalizer removed".into(),
            ));
            effects.extend([Effect::RemoveFinalizer, Effect::ForgetObject]);
            effects
        }
    }
}

/// A normal event of the deletion.
fn deleted(reason: &'static str, note: String) -> Effect {
    Effect::Event {
        warning: false,
        reason,
        action: "Delete",
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The effects without their event notes, for the order tables.
    fn shape(leaving: Leaving) -> Vec<String> {
        leaving_effects(&leaving)
            .into_iter()
            .map(|e| match e {
                Effect::Event { reason, .. } => format!("Event {reason}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn each_way_of_leaving_writes_in_its_safe_order() {
        let table: Vec<(Leaving, Vec<&str>)> = vec![
            (
                Leaving::ExternallyManaged,
                vec!["RemoveFinalizer", "Event ExternallyManagedReleased"],
            ),
            (
                Leaving::NothingMade,
                vec!["DeleteLeftovers", "RemoveFinalizer"],
            ),
            (
                Leaving::ForeignRetained { uid: "u-1".into() },
                vec![
                    "LeaveForeignRetained",
                    "RemoveFinalizer",
                    "Event FinalizerRemoved",
                ],
            ),
            (
                Leaving::Retained,
                vec!["RetainLeftovers", "RemoveFinalizer", "ForgetObject"],
            ),
            (
                Leaving::Destroyed {
                    by: Some("destroy-1".into()),
                },
                vec![
                    "DeleteLeftovers",
                    "Event Destroyed",
                    "Event FinalizerRemoved",
                    "RemoveFinalizer",
                    "ForgetObject",
                ],
            ),
            (
                Leaving::Destroyed { by: None },
                vec![
                    "DeleteLeftovers",
                    "Event FinalizerRemoved",
                    "RemoveFinalizer",
                    "ForgetObject",
                ],
            ),
        ];
        for (leaving, want) in table {
            assert_eq!(shape(leaving.clone()), want, "{leaving:?}");
        }
    }

    #[test]
    fn the_events_name_the_job_and_the_retaining_object() {
        let notes = |l: Leaving| -> Vec<String> {
            leaving_effects(&l)
                .into_iter()
                .filter_map(|e| match e {
                    Effect::Event { note, .. } => Some(note),
                    _ => None,
                })
                .collect()
        };
        let destroyed = notes(Leaving::Destroyed {
            by: Some("destroy-7".into()),
        });
        assert!(
            destroyed[0].starts_with("Job destroy-7 destroyed"),
            "{destroyed:?}"
        );
        let foreign = notes(Leaving::ForeignRetained { uid: "u-9".into() });
        assert!(
            foreign[0].contains("retained by object u-9 are untouched"),
            "{foreign:?}"
        );
    }
}
