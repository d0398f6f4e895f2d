//! The Job builder and the runner agree on the runner's arguments: every
//! Job the builder makes is read back by the runner's own parser, with the
//! same meaning.

use std::collections::BTreeMap;
use std::time::Duration;

use captf_manager::engine::decide::Op;
use captf_manager::jobs::args::{Guard, RunnerArgs};

fn args(op: Op) -> RunnerArgs {
    RunnerArgs {
        op,
        image: "ghcr.io/captf-io/noop-machinepool:v1-tofu".into(),
        namespace: "team-a".into(),
        state_suffix: "0123456789abcdef-mp".into(),
        state_labels: BTreeMap::from([
            ("captf.io/managed".to_owned(), "true".to_owned()),
            (
                "cluster.x-k8s.io/cluster-name".to_owned(),
                "prod".to_owned(),
            ),
        ]),
        lock_timeout: Duration::from_secs(300),
        stop_timeout: Duration::from_secs(570),
        force_unlock: None,
        guard: None,
        guard_deletes: false,
        restore: None,
        plan_key: false,
        event_object: None,
        quiet_events: false,
    }
}

#[test]
fn every_operation_parses_with_the_runner_parser() {
    for op in Op::ALL {
        let built = args(op).to_args();
        let parsed = captf_runner::parse_run_args(&built)
            .unwrap_or_else(|e| panic!("{op:?}: {e}\n{built:?}"));
        assert_eq!(parsed.op.to_string(), op.as_str());
        assert_eq!(parsed.image, "ghcr.io/captf-io/noop-machinepool:v1-tofu");
        assert_eq!(parsed.bin, ["/captf/runtime"]);
        assert_eq!(
            (
                parsed.module.as_str(),
                parsed.providers.as_str(),
                parsed.workdir.as_str(),
                parsed.config.as_str()
            ),
            (
                "/captf/module",
                "/captf/providers",
                "/captf/work",
                "/captf/config"
            )
        );
        assert_eq!(parsed.lock_timeout, Duration::from_secs(300));
        assert_eq!(parsed.stop_timeout, Duration::from_secs(570));
        assert_eq!(
            parsed.backend_config,
            [
                "secret_suffix=0123456789abcdef-mp",
                "namespace=team-a",
                "in_cluster_config=true",
                "labels={\"captf.io/managed\"=\"true\",\"cluster.x-k8s.io/cluster-name\"=\"prod\"}",
            ]
        );
        assert!(!parsed.guard_deletes);
    }
}

#[test]
fn guarded_restore_and_event_flags_keep_their_meaning() {
    let mut a = args(Op::Apply);
    a.force_unlock = Some("7d2c-lock".into());
    a.guard_deletes = true;
    a.guard = Some(Guard {
        inputs_hash: "h2:aa".into(),
        allow_deletes_hash: Some("h2:aa".into()),
        expect_plan: Some("p2:bb".into()),
    });
    a.plan_key = true;
    a.event_object = Some((
        "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/team-a/prod/uid-1".into(),
        "captf-c-prod-apply-a1-abcdef".into(),
    ));
    let p = captf_runner::parse_run_args(a.to_args()).unwrap();
    assert_eq!(p.force_unlock, "7d2c-lock");
    assert!(p.guard_deletes);
    assert_eq!(
        (
            p.inputs_hash.as_str(),
            p.allow_deletes_hash.as_str(),
            p.expect_plan.as_str()
        ),
        ("h2:aa", "h2:aa", "p2:bb")
    );
    assert_eq!(p.plan_key_file, "/captf/plan-key/key");
    assert_eq!(
        p.event_object,
        "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/team-a/prod/uid-1"
    );
    assert_eq!(p.job_name, "captf-c-prod-apply-a1-abcdef");
    assert!(!p.quiet_events);
    a.quiet_events = true;
    assert!(
        captf_runner::parse_run_args(a.to_args())
            .unwrap()
            .quiet_events
    );

    let mut r = args(Op::Restore);
    r.restore = Some((3, 12));
    let p = captf_runner::parse_run_args(r.to_args()).unwrap();
    assert_eq!((p.restore_chunks, p.restore_resources), (3, 12));
}
