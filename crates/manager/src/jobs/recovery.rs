//! Getting a Job that cannot run out of the way: a stuck Job (its per-run
//! Secret never came and its pods never started) is deleted and restarted,
//! and a non-apply Job whose image cannot be pulled falls back to the next
//! image that may have written the state.

use std::time::Duration;

use crate::engine::decide::Op;

/// A Job this old with no per-run Secret and only pending pods is stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);
/// A pull failure this old with no ready pod triggers a fallback.
pub const PULL_FALLBACK_AFTER: Duration = Duration::from_secs(120);
/// Most images remembered as unpullable.
pub const MAX_UNPULLABLE: usize = 3;

/// Whether an active Job is stuck and should be deleted.
pub fn is_stuck(age: Duration, run_secret_exists: bool, pod_phases: &[&str]) -> bool {
    age >= STUCK_AFTER && !run_secret_exists && pod_phases.iter().all(|p| *p == "Pending")
}

/// The images a non-apply op may run, in order: the pinned digest, the
/// recorded tag, the spec's reference; without repeats.
pub fn candidates(pinned: Option<&str>, recorded: Option<&str>, spec: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in [pinned, recorded, Some(spec)].into_iter().flatten() {
        if !c.is_empty() && !out.iter().any(|o| o == c) {
            out.push(c.to_owned());
        }
    }
    out
}

/// What to do about a Job whose `source` container cannot pull its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullFailure {
    /// Not (yet) a fallback case.
    Wait,
    /// Remember `failed` as unpullable, delete the Job, restart on `next`.
    FallBack { failed: String, next: String },
    /// Nothing left to try: let the Job run to its deadline and report
    /// `ImagePullFailed` now.
    Exhausted,
}

/// Decides about a pull failure of a Job running `image` for `op`.
/// `has_record` tells whether an attempt record exists to remember the
/// failed image in.
pub fn pull_failure(
    op: Op,
    image: &str,
    candidates: &[String],
    unpullable: &[String],
    failing_for: Duration,
    has_record: bool,
) -> PullFailure {
    // Apply and plan run the spec's image as written: no fallback.
    if matches!(op, Op::Apply | Op::Plan) || failing_for < PULL_FALLBACK_AFTER {
        return PullFailure::Wait;
    }
    let next = candidates
        .iter()
        .skip_while(|c| *c != image)
        .skip(1)
        .find(|c| !unpullable.contains(c));
    match next {
        Some(next) if has_record => PullFailure::FallBack {
            failed: image.to_owned(),
            next: next.clone(),
        },
        _ => PullFailure::Exhausted,
    }
}

/// The unpullable list after `failed` is added (newest last, at most three).
pub fn remember_unpullable(list: &[String], failed: &str) -> Vec<String> {
    let mut out: Vec<String> = list.iter().filter(|i| *i != failed).cloned().collect();
    out.push(failed.to_owned());
    let excess = out.len().saturating_sub(MAX_UNPULLABLE);
    out.drain(..excess);
    out
}

/// The image to start a non-apply op on: the first candidate not known to
/// be unpullable (the last one when all are).
pub fn first_pullable(candidates: &[String], unpullable: &[String]) -> Option<String> {
    candidates
        .iter()
        .find(|c| !unpullable.contains(c))
        .or(candidates.last())
        .cloned()
}

/// Whether a Job's pods are stuck on their image: none is ready, and the
/// `source` container of one waits on a pull failure.
pub fn pull_stuck(pods: &[k8s_openapi::api::core::v1::Pod]) -> bool {
    let ready = |pod: &k8s_openapi::api::core::v1::Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    !pods.iter().any(ready) && pods.iter().any(|p| super::observe::source_container(p).1)
}

/// The `source` container's image of a Job, and the images its
/// `captf.io/image-fallbacks` leaves to try after it.
pub fn job_images(job: &k8s_openapi::api::batch::v1::Job) -> Option<(String, Vec<String>)> {
    let image = job
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "source")?
        .image
        .clone()?;
    let fallbacks = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(captf_api::names::annotations::IMAGE_FALLBACKS))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    Some((image, fallbacks))
}

/// The image a non-apply op starts on and the candidates left after it
/// (the Job's `captf.io/image-fallbacks`): the first of `candidates` not
/// known to be unpullable, and the pullable ones that follow it.
pub fn image_choice(candidates: &[String], unpullable: &[String]) -> Option<(String, Vec<String>)> {
    let image = first_pullable(candidates, unpullable)?;
    let rest = candidates
        .iter()
        .skip_while(|c| **c != image)
        .skip(1)
        .filter(|c| !unpullable.contains(c))
        .cloned()
        .collect();
    Some((image, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn stuck_jobs() {
        assert!(is_stuck(MIN, false, &["Pending"]));
        assert!(is_stuck(MIN, false, &[]));
        assert!(!is_stuck(MIN - Duration::from_secs(1), false, &["Pending"]));
        assert!(!is_stuck(MIN, true, &["Pending"]));
        assert!(!is_stuck(MIN, false, &["Pending", "Running"]));
    }

    fn c() -> Vec<String> {
        candidates(Some("r.io/m@sha256:aa"), Some("r.io/m:v1"), "r.io/m:v2")
    }

    #[test]
    fn candidates_in_order_without_repeats() {
        assert_eq!(c(), ["r.io/m@sha256:aa", "r.io/m:v1", "r.io/m:v2"]);
        assert_eq!(
            candidates(None, Some("r.io/m:v1"), "r.io/m:v1"),
            ["r.io/m:v1"]
        );
    }

    #[test]
    fn pull_failures_fall_back_along_the_candidates() {
        let late = PULL_FALLBACK_AFTER;
        assert_eq!(
            pull_failure(
                Op::Destroy,
                "r.io/m@sha256:aa",
                &c(),
                &[],
                late - Duration::from_secs(1),
                true
            ),
            PullFailure::Wait
        );
        assert_eq!(
            pull_failure(Op::Apply, "r.io/m:v2", &c(), &[], late, true),
            PullFailure::Wait
        );
        assert_eq!(
            pull_failure(Op::Destroy, "r.io/m@sha256:aa", &c(), &[], late, true),
            PullFailure::FallBack {
                failed: "r.io/m@sha256:aa".into(),
                next: "r.io/m:v1".into()
            }
        );
        assert_eq!(
            pull_failure(
                Op::Drift,
                "r.io/m@sha256:aa",
                &c(),
                &["r.io/m:v1".into()],
                late,
                true
            ),
            PullFailure::FallBack {
                failed: "r.io/m@sha256:aa".into(),
                next: "r.io/m:v2".into()
            }
        );
        assert_eq!(
            pull_failure(Op::Refresh, "r.io/m:v2", &c(), &[], late, true),
            PullFailure::Exhausted
        );
        assert_eq!(
            pull_failure(Op::Restore, "r.io/m@sha256:aa", &c(), &[], late, false),
            PullFailure::Exhausted
        );
    }

    #[test]
    fn unpullable_list_is_bounded_and_skipped() {
        let l = remember_unpullable(&["a".into(), "b".into(), "c".into()], "d");
        assert_eq!(l, ["b", "c", "d"]);
        assert_eq!(remember_unpullable(&["a".into()], "a"), ["a"]);
        assert_eq!(
            first_pullable(&c(), &["r.io/m@sha256:aa".into()]).as_deref(),
            Some("r.io/m:v1")
        );
        assert_eq!(first_pullable(&c(), &c()).as_deref(), Some("r.io/m:v2"));
    }

    #[test]
    fn the_chosen_image_carries_what_is_left_to_try() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // (unpullable, chosen image and what is left after it)
        type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a [&'a str])>);
        let cases: &[Case] = &[
            (&[], Some(("r.io/m@sha256:aa", &["r.io/m:v1", "r.io/m:v2"]))),
            (&["r.io/m@sha256:aa"], Some(("r.io/m:v1", &["r.io/m:v2"]))),
            // The tag failed before the digest did: only the spec is left.
            (&["r.io/m:v1", "r.io/m@sha256:aa"], Some(("r.io/m:v2", &[]))),
            // Everything failed: the last one again, nothing after it.
            (
                &["r.io/m@sha256:aa", "r.io/m:v1", "r.io/m:v2"],
                Some(("r.io/m:v2", &[])),
            ),
        ];
        for (unpullable, want) in cases {
            let got = image_choice(&c(), &s(unpullable));
            let want = want.map(|(i, rest)| (i.to_owned(), s(rest)));
            assert_eq!(got, want, "{unpullable:?}");
        }
        assert_eq!(image_choice(&[], &[]), None);
    }
}
