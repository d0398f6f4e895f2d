//! The command line, parsed with the same function the manager's Job
//! builder uses to check the arguments it renders.

use std::time::Duration;

use captf_runner::cli::{Command, VersionFlag, parse, parse_go_duration, result_path_of_bad_args};
use captf_runner::{Op, parse_run_args};

/// The arguments of a guarded TerraformCluster apply, in the Job's order.
fn job_args() -> Vec<String> {
    [
        "--op=apply",
        "--bin=/captf/runtime",
        "--image=ghcr.io/captf-io/noop-cluster:v1.0.0-opentofu",
        "--module=/captf/module",
        "--providers=/captf/providers",
        "--workdir=/captf/work",
        "--config=/captf/config",
        "--lock-timeout=300s",
        "--stop-timeout=570s",
        "--backend-config=secret_suffix=0123456789abcdef-c",
        "--backend-config=namespace=team-a",
        "--backend-config=in_cluster_config=true",
        r#"--backend-config=labels={"captf.io/managed"="true","cluster.x-k8s.io/cluster-name"="prod,eu"}"#,
        "--force-unlock=7c1e5a0c-1111-2222-3333-444455556666",
        "--guard-deletes",
        "--inputs-hash=h2:abc",
        "--allow-deletes-hash=h2:abc",
        "--expect-plan=p2:def",
        "--plan-key-file=/captf/plan-key/key",
        "--event-object=infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/team-a/prod/uid-1",
        "--job-name=captf-c-prod-apply-a1-abcdef",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

#[test]
fn parses_the_arguments_a_job_carries() {
    let a = parse_run_args(job_args()).expect("job args parse");
    assert_eq!(a.op, Op::Apply);
    assert_eq!(a.bin, vec!["/captf/runtime"]);
    assert_eq!(a.image, "ghcr.io/captf-io/noop-cluster:v1.0.0-opentofu");
    assert_eq!(a.lock_timeout, Duration::from_secs(300));
    assert_eq!(a.lock_timeout_secs(), 300);
    assert_eq!(a.stop_timeout, Duration::from_secs(570));
    assert_eq!(a.backend_config.len(), 4);
    // Values keep their commas: one flag, one -backend-config.
    assert!(a.backend_config[3].ends_with(r#""prod,eu"}"#));
    assert_eq!(a.force_unlock, "7c1e5a0c-1111-2222-3333-444455556666");
    assert!(a.guard_deletes);
    assert_eq!(a.inputs_hash, "h2:abc");
    assert_eq!(a.allow_deletes_hash, "h2:abc");
    assert_eq!(a.expect_plan, "p2:def");
    assert_eq!(a.plan_key_file, "/captf/plan-key/key");
    assert_eq!(a.job_name, "captf-c-prod-apply-a1-abcdef");
    assert_eq!(a.result, "/dev/termination-log");
    assert!(a.plans_before_apply());
}

#[test]
fn defaults_match_the_spec() {
    let a = parse_run_args(["--op=refresh"]).unwrap();
    assert_eq!(a.bin, vec!["/captf/runtime"]);
    assert_eq!(a.module, "/captf/module");
    assert_eq!(a.providers, "/captf/providers");
    assert_eq!(a.workdir, "/captf/work");
    assert_eq!(a.config, "/captf/config");
    assert_eq!(a.lock_timeout, Duration::from_secs(300));
    assert_eq!(a.stop_timeout, Duration::from_secs(60));
    assert_eq!(a.plan_key_file, "/captf/plan-key/key");
    assert_eq!(a.result, "/dev/termination-log");
    assert!(!a.guard_deletes);
    assert_eq!((a.restore_chunks, a.restore_resources), (0, 0));
    assert!(a.backend_config.is_empty() && a.event_object.is_empty());
}

#[test]
fn repeated_bin_flags_build_the_command() {
    let a = parse_run_args(["--op=plan", "--bin=/usr/bin/env", "--bin=tofu"]).unwrap();
    assert_eq!(a.bin, vec!["/usr/bin/env", "tofu"]);
}

#[test]
fn restore_counts_and_space_separated_values() {
    let a = parse_run_args([
        "--op",
        "restore",
        "--restore-chunks",
        "3",
        "--restore-resources=7",
    ])
    .unwrap();
    assert_eq!(a.op, Op::Restore);
    assert_eq!((a.restore_chunks, a.restore_resources), (3, 7));
}

#[test]
fn guard_deletes_takes_go_booleans() {
    assert!(
        !parse_run_args(["--op=apply", "--guard-deletes=false"])
            .unwrap()
            .guard_deletes
    );
    assert!(
        parse_run_args(["--op=apply", "--guard-deletes=true"])
            .unwrap()
            .guard_deletes
    );
    assert!(parse_run_args(["--op=apply", "--guard-deletes=maybe"]).is_err());
}

#[test]
fn usage_errors() {
    for bad in [
        vec!["--op=upgrade"],
        vec![],
        vec!["--op=apply", "extra"],
        vec!["--op=apply", "--no-such-flag"],
        vec!["--op=apply", "--lock-timeout=5 minutes"],
        vec!["--op=apply", "--restore-chunks=x"],
    ] {
        assert!(
            parse_run_args(bad.clone()).is_err(),
            "{bad:?} must be refused"
        );
    }
}

#[test]
fn subcommands_and_globals() {
    let c = parse(["runner", "copy", "/captf/bin/runner"]).unwrap();
    assert!(matches!(c.command, Some(Command::Copy { dest }) if dest == ["/captf/bin/runner"]));
    let c = parse(["runner", "-v", "4", "--logging-format=json", "version"]).unwrap();
    assert!(matches!(c.command, Some(Command::Version)));
    assert_eq!(c.global.verbosity, 4);
    let c = parse(["runner", "--version"]).unwrap();
    assert_eq!(c.global.version, Some(VersionFlag::True));
    let c = parse(["runner", "--version=raw"]).unwrap();
    assert_eq!(c.global.version, Some(VersionFlag::Raw));
    let c = parse(["runner", "--version=v1.2.3"]).unwrap();
    assert_eq!(
        c.global.version,
        Some(VersionFlag::Literal("v1.2.3".into()))
    );
    let c = parse([
        "runner",
        "--feature-gates=ContextualLogging=true",
        "run",
        "--op=drift",
    ])
    .unwrap();
    assert!(matches!(c.command, Some(Command::Run(r)) if r.op == Op::Drift));
    assert!(parse(["runner", "--feature-gates=NoSuchGate=true", "version"]).is_err());
    assert!(parse(["runner", "--logging-format=xml", "version"]).is_err());
    assert!(parse(["runner", "--vmodule=bad", "version"]).is_err());
}

#[test]
fn go_durations() {
    for (s, secs) in [
        ("0", 0.0),
        ("300s", 300.0),
        ("5m0s", 300.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("570s", 570.0),
    ] {
        assert_eq!(parse_go_duration(s).unwrap().as_secs_f64(), secs, "{s}");
    }
    for s in ["", "5", "s", "-1s", "1d", "1.2.3s"] {
        assert!(parse_go_duration(s).is_err(), "{s:?} must be refused");
    }
}

#[test]
fn result_path_is_found_in_bad_run_args() {
    let args: Vec<String> = ["runner", "run", "--op=nope", "--result=/tmp/r.json"]
        .map(String::from)
        .into();
    assert_eq!(
        result_path_of_bad_args(&args).as_deref(),
        Some("/tmp/r.json")
    );
    let args: Vec<String> = ["runner", "run", "--result", "/tmp/x"]
        .map(String::from)
        .into();
    assert_eq!(result_path_of_bad_args(&args).as_deref(), Some("/tmp/x"));
    let args: Vec<String> = ["runner", "run"].map(String::from).into();
    assert_eq!(
        result_path_of_bad_args(&args).as_deref(),
        Some("/dev/termination-log")
    );
    let args: Vec<String> = ["runner", "copy"].map(String::from).into();
    assert_eq!(result_path_of_bad_args(&args), None);
}

#[test]
fn a_repeated_flag_keeps_its_last_value() {
    let a = parse_run_args(["--op=apply", "--module=/a", "--module=/b", "--op=plan"]).unwrap();
    assert_eq!(a.module, "/b");
    assert_eq!(a.op, Op::Plan);
}
