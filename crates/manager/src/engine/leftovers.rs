//! What a deleting object may have left behind, and whether its finalizer
//! may go before the full pass (`internals.md` §4 scenario 17).

/// What a deleting object's opening read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// A Job of the object is listed.
    pub jobs: bool,
    /// Some state Secret exists (readable or not).
    pub state: bool,
    pub provisioned: bool,
    pub applied_record: bool,
    /// An apply of unknown outcome is marked and not superseded.
    pub unconfirmed_apply: bool,
    /// `status.activeJob` names an apply that is no longer listed.
    pub vanished_apply: bool,
}

impl Leftovers {
    /// No state and nothing ever applied: the deletion runs no Job (and
    /// needs no credentials), whatever the hold decides.
    pub fn nothing_to_destroy(&self) -> bool {
        !(self.jobs || self.state || self.provisioned || self.applied_record)
    }

    /// Nothing can exist: the finalizer may go before the full pass. An
    /// apply of unknown outcome, marked or vanished and not yet recorded,
    /// may have created resources, so the object stays for the hold.
    pub fn nothing_to_clean_up(&self) -> bool {
        self.nothing_to_destroy() && !self.unconfirmed_apply && !self.vanished_apply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_table() {
        type Case = (&'static str, fn(&mut Leftovers), bool, bool);
        // (case, change, nothing to destroy, nothing to clean up)
        let cases: Vec<Case> = vec![
            ("never made anything", |_| {}, true, true),
            ("a Job listed", |l| l.jobs = true, false, false),
            ("a state Secret", |l| l.state = true, false, false),
            ("provisioned", |l| l.provisioned = true, false, false),
            (
                "an applied record",
                |l| l.applied_record = true,
                false,
                false,
            ),
            (
                "an unconfirmed apply, no state",
                |l| l.unconfirmed_apply = true,
                true,
                false,
            ),
            (
                "a vanished apply not yet recorded",
                |l| l.vanished_apply = true,
                true,
                false,
            ),
            (
                "an unconfirmed apply with state",
                |l| {
                    l.unconfirmed_apply = true;
                    l.state = true;
                },
                false,
                false,
            ),
        ];
        for (name, change, destroy, clean) in cases {
            let mut l = Leftovers::default();
            change(&mut l);
            assert_eq!(
                l.nothing_to_destroy(),
                destroy,
                "{name}: nothing to destroy"
            );
            assert_eq!(
                l.nothing_to_clean_up(),
                clean,
                "{name}: nothing to clean up"
            );
        }
    }
}
