use std::time::Duration;

use serde::Deserialize;

use super::*;

fn parse(extra: &[&str]) -> Result<Flags, clap::Error> {
    let mut argv = vec!["manager", "--runner-image=r.example/runner"];
    argv.extend_from_slice(extra);
    parse_from(argv)
}

fn logged_value(flags: &Flags, name: &str) -> String {
    flags
        .logged
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("--{name} is not logged"))
}

/// Every flag of spec §18 and its default, as the FLAG line prints it.
const SPEC_DEFAULTS: &[(&str, &str)] = &[
    ("namespace", ""),
    ("watch-filter", ""),
    ("sync-period", "10m"),
    ("terraformcluster-concurrency", "10"),
    ("terraformmachine-concurrency", "10"),
    ("terraformmachinetemplate-concurrency", "10"),
    ("terraformmachinepool-concurrency", "10"),
    ("terraformclusteridentity-concurrency", "4"),
    ("health-addr", ":9440"),
    ("profiler-address", ""),
    ("kubeconfig", ""),
    ("leader-elect", "false"),
    ("leader-elect-lease-duration", "15s"),
    ("leader-elect-renew-deadline", "10s"),
    ("leader-elect-retry-period", "2s"),
    ("webhook-port", "9443"),
    ("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/"),
    ("webhook-cert-name", "tls.crt"),
    ("webhook-key-name", "tls.key"),
    // Given on the command line by `parse`.
    ("runner-image", "r.example/runner"),
    ("runner-events", "true"),
    ("drift-default-interval", "30m"),
    ("cluster-operation-gate", "true"),
    ("max-active-jobs", "200"),
    ("cluster-max-active-jobs", "20"),
    ("state-backups", "5"),
    ("image-inspect-allow-private-registries", "false"),
    ("image-inspect-allowed-registries", ""),
    ("diagnostics-address", ":8443"),
    ("insecure-diagnostics", "false"),
    ("tls-cipher-suites", ""),
    ("tls-curve-preferences", ""),
    ("tls-min-version", "VersionTLS12"),
    ("feature-gates", ""),
    ("log-flush-frequency", "5s"),
    ("log-json-info-buffer-size", "0"),
    ("log-json-split-stream", "false"),
    ("log-text-info-buffer-size", "0"),
    ("log-text-split-stream", "false"),
    ("logging-format", "text"),
    ("v", "2"),
    ("vmodule", ""),
    ("help", "false"),
    ("version", "false"),
];

#[test]
fn every_spec_flag_parses_with_its_default() {
    let f = parse(&[]).unwrap();
    for (name, default) in SPEC_DEFAULTS {
        assert_eq!(logged_value(&f, name), *default, "--{name}");
    }
    assert_eq!(f.sync_period, Duration::from_secs(600));
    assert_eq!(f.drift_default_interval, Duration::from_secs(1800));
    assert_eq!(f.logging.log_flush_frequency, Duration::from_secs(5));
    assert_eq!(f.logging.verbosity, 2);
    assert_eq!(f.tls_options(), TlsOptions::default());
    assert_eq!(f.kubeconfig(), None);
    assert_eq!((f.namespace(), f.watch_filter()), (None, None));
    assert_eq!(f.version, VersionFlag::False);
    assert_eq!(f.version_output(), None);
    let gates: Vec<(&str, bool)> = f.feature_gates().into_iter().collect();
    assert_eq!(
        gates,
        [
            ("AllAlpha", false),
            ("AllBeta", false),
            ("ContextualLogging", true),
            ("LoggingAlphaOptions", false),
            ("LoggingBetaOptions", true)
        ]
    );
    assert!(f.warnings().is_empty());
}

#[test]
fn the_flag_lines_cover_every_argument_of_the_command() {
    let f = parse(&[]).unwrap();
    let mut cmd = Flags::command();
    cmd.build();
    let mut arguments: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_long().expect("every flag has a long name").to_owned())
        .collect();
    arguments.sort();
    let logged: Vec<String> = f.logged.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(logged, arguments);
    // The spec's list is served in full; the two client limits are extra.
    for (name, _) in SPEC_DEFAULTS {
        assert!(arguments.contains(&name.to_string()), "--{name} missing");
    }
    assert_eq!(arguments.len(), SPEC_DEFAULTS.len() + 2, "{arguments:?}");
}

#[test]
fn bad_values_are_refused_naming_the_flag() {
    let cases: &[(&str, &str)] = &[
        ("--sync-period=0s", "--sync-period"),
        ("--sync-period=10", "--sync-period"),
        ("--drift-default-interval=-5m", "--drift-default-interval"),
        (
            "--leader-elect-retry-period=0s",
            "--leader-elect-retry-period",
        ),
        ("--log-flush-frequency=0", "--log-flush-frequency"),
        (
            "--terraformmachinepool-concurrency=0",
            "--terraformmachinepool-concurrency",
        ),
        (
            "--terraformclusteridentity-concurrency=0",
            "--terraformclusteridentity-concurrency",
        ),
        ("--kube-api-qps=-1", "--kube-api-qps"),
        ("--kube-api-burst=0", "--kube-api-burst"),
        ("--state-backups=-1", "--state-backups"),
        ("--max-active-jobs=-1", "--max-active-jobs"),
        ("--cluster-max-active-jobs=-1", "--cluster-max-active-jobs"),
        ("--webhook-port=70000", "--webhook-port"),
        ("--webhook-cert-name=", "--webhook-cert-name"),
        ("--webhook-key-name=", "--webhook-key-name"),
        ("--watch-filter=not a label", "--watch-filter"),
        ("--runner-image=no-slash", "--runner-image"),
        (
            "--image-inspect-allowed-registries=a/b",
            "--image-inspect-allowed-registries",
        ),
        ("--leader-elect=maybe", "--leader-elect"),
        ("--runner-events=yes", "--runner-events"),
        ("--tls-min-version=VersionTLS14", "--tls-min-version"),
        ("--tls-cipher-suites=TLS_FOO", "TLS_FOO"),
        (
            "--tls-cipher-suites=TLS_RSA_WITH_AES_128_GCM_SHA256",
            "RSA key exchange",
        ),
        (
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
            "CBC",
        ),
        ("--tls-curve-preferences=25", "P-521"),
        (
            "--tls-curve-preferences=29,X25519",
            "--tls-curve-preferences",
        ),
        ("--tls-curve-preferences=4588", "X25519MLKEM768"),
        ("--feature-gates=MachinePool=true", "MachinePool"),
        ("--feature-gates=AllAlpha=sure", "AllAlpha"),
        (
            "--log-json-info-buffer-size=1KB",
            "--log-json-info-buffer-size",
        ),
        (
            "--log-text-info-buffer-size=-1",
            "--log-text-info-buffer-size",
        ),
        ("--log-json-split-stream=2", "--log-json-split-stream"),
        ("--logging-format=yaml", "--logging-format"),
        ("-v=-1", "--v"),
        ("--v=high", "--v"),
        ("--vmodule=pass.rs", "--vmodule"),
        ("--version=v1.2", "--version"),
        ("--no-such-flag", "--no-such-flag"),
    ];
    for (arg, named) in cases {
        let err = parse(&[arg])
            .err()
            .unwrap_or_else(|| panic!("{arg} parsed"));
        let text = err.to_string();
        assert!(text.contains(named), "{arg}: {text}");
    }
}

#[test]
fn vmodule_is_refused_with_the_json_format() {
    let f = parse(&["--vmodule=reconcile*=4"]).unwrap();
    assert_eq!(f.logging.vmodule, "reconcile*=4");
    let err = parse(&["--logging-format=json", "--vmodule=reconcile*=4"]).unwrap_err();
    assert!(err.to_string().contains("--vmodule"), "{err}");
    assert!(parse(&["--logging-format=json", "--vmodule="]).is_ok());
}

/// The Deployment's `args`, as shipped in `config/manager/manager.yaml`.
fn shipped_args() -> Vec<String> {
    let text = include_str!("../../../../config/manager/manager.yaml");
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = serde_yaml::Value::deserialize(doc).unwrap();
        if v["kind"] == "Deployment" {
            let args = &v["spec"]["template"]["spec"]["containers"][0]["args"];
            return serde_yaml::from_value(args.clone()).unwrap();
        }
    }
    panic!("no Deployment in config/manager/manager.yaml");
}

#[test]
fn the_shipped_manifest_args_parse() {
    let mut argv = vec!["manager".to_owned()];
    argv.extend(shipped_args());
    argv.push("--runner-image=ghcr.io/captf-io/captf-manager:dev".to_owned());
    let f = parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(f.leader_elect);
    assert_eq!(f.diagnostics_address, ":8443");
    assert!(!f.insecure_diagnostics);
    assert_eq!(f.webhook_port, 9443);
}

#[test]
fn underscores_stand_for_dashes_in_names_only() {
    let f = parse(&[
        "--leader_elect=true",
        "--sync_period",
        "1h",
        "--watch_filter=team_a",
        "--namespace",
        "my_ns",
    ])
    .unwrap();
    assert!(f.leader_elect);
    assert_eq!(f.namespace(), Some("my_ns".to_owned()));
    assert_eq!(f.sync_period, Duration::from_secs(3600));
    assert_eq!(f.watch_filter(), Some("team_a".to_owned()));
    assert_eq!(
        normalize(["manager", "--log_json_split_stream", "--", "--a_b"]),
        ["manager", "--log-json-split-stream", "--", "--a_b"].map(std::ffi::OsString::from)
    );
}

#[test]
fn durations_take_go_forms() {
    let cases = [
        ("--sync-period=1h30m", 5400.0),
        ("--sync-period=1.5h", 5400.0),
        ("--sync-period=90s", 90.0),
        ("--sync-period=500ms", 0.5),
        ("--sync-period=10m0s", 600.0),
    ];
    for (arg, secs) in cases {
        let f = parse(&[arg]).unwrap();
        assert_eq!(f.sync_period, Duration::from_secs_f64(secs), "{arg}");
    }
}

#[test]
fn bool_flags_take_go_forms() {
    assert!(!parse(&[]).unwrap().leader_elect);
    assert!(parse(&["--leader-elect"]).unwrap().leader_elect);
    assert!(parse(&["--leader-elect=true"]).unwrap().leader_elect);
    assert!(parse(&["--leader-elect=T"]).unwrap().leader_elect);
    assert!(!parse(&["--leader-elect=false"]).unwrap().leader_elect);
    assert!(!parse(&["--leader-elect=0"]).unwrap().leader_elect);
    assert!(
        parse(&["--insecure-diagnostics"])
            .unwrap()
            .insecure_diagnostics
    );
    for (given, want) in [
        ("--runner-events=false", RunnerEvents::Off),
        ("--runner-events=true", RunnerEvents::Notable),
        ("--runner-events", RunnerEvents::Notable),
        ("--runner-events=all", RunnerEvents::All),
    ] {
        assert_eq!(parse(&[given]).unwrap().runner_events, want, "{given}");
    }
    assert!(
        parse(&["--log-text-split-stream"])
            .unwrap()
            .logging
            .log_text_split_stream
    );
    // Go reads `--leader-elect false` as the flag and an argument.
    assert!(parse(&["--leader-elect", "false"]).is_err());
}

#[test]
fn a_repeated_flag_keeps_its_last_value_and_lists_add_up() {
    let f = parse(&["--namespace=a", "--namespace=b", "-v=4", "--v=6"]).unwrap();
    assert_eq!(f.namespace(), Some("b".to_owned()));
    assert_eq!(f.logging.verbosity, 6);
    let f = parse(&[
        "--feature-gates=AllAlpha=true,ContextualLogging=false",
        "--feature-gates=AllAlpha=false,AllBeta=true",
        "--image-inspect-allowed-registries=a.example,b.example:5000",
        "--image-inspect-allowed-registries=c.example",
    ])
    .unwrap();
    let gates = f.feature_gates();
    assert_eq!(
        (
            gates["AllAlpha"],
            gates["AllBeta"],
            gates["ContextualLogging"]
        ),
        (false, true, false)
    );
    assert_eq!(
        f.image_inspect_allowed_registries,
        ["a.example", "b.example:5000", "c.example"]
    );
    assert_eq!(
        logged_value(&f, "feature-gates"),
        "AllAlpha=true,ContextualLogging=false,AllAlpha=false,AllBeta=true"
    );
}

#[test]
fn new_flags_reach_their_values() {
    let f = parse(&[
        "--watch-filter=captf-test",
        "--webhook-cert-name=serving.pem",
        "--webhook-key-name=serving-key.pem",
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "--tls-curve-preferences=29,23",
        "--v=4",
        "--log-flush-frequency=1s",
        "--log-json-info-buffer-size=64Ki",
        "--log-text-info-buffer-size=1M",
    ])
    .unwrap();
    assert_eq!(f.watch_filter(), Some("captf-test".to_owned()));
    assert_eq!(
        (f.webhook_cert_name.as_str(), f.webhook_key_name.as_str()),
        ("serving.pem", "serving-key.pem")
    );
    let tls = f.tls_options();
    assert_eq!(tls.min_version, MinVersion::Tls13);
    assert_eq!(tls.cipher_suites.len(), 2);
    assert_eq!(tls.curve_preferences, [29, 23]);
    assert_eq!(f.logging.verbosity, 4);
    assert_eq!(logged_value(&f, "tls-curve-preferences"), "29,23");
    assert_eq!(logged_value(&f, "log-json-info-buffer-size"), "64Ki");
    assert_eq!(parse(&["-v", "5"]).unwrap().logging.verbosity, 5);
}

#[test]
fn accepted_but_different_values_are_warned_about() {
    let f = parse(&["--profiler-address=:6060", "--tls-min-version=VersionTLS10"]).unwrap();
    let warnings = f.warnings().join("\n");
    assert!(warnings.contains("--profiler-address=:6060"), "{warnings}");
    assert!(
        warnings.contains("--tls-min-version=VersionTLS10"),
        "{warnings}"
    );
}

#[test]
fn version_forms() {
    let output = |args: &[&str]| parse(args).unwrap().version_output();
    let plain = format!("manager {VERSION}");
    assert_eq!(output(&["--version"]), Some(plain.clone()));
    assert_eq!(output(&["--version=true"]), Some(plain.clone()));
    assert_eq!(output(&["version"]), Some(plain));
    assert_eq!(output(&["--version=false"]), None);
    assert_eq!(
        output(&["--version=v9.8.7"]).as_deref(),
        Some("manager v9.8.7")
    );
    let raw: serde_json::Value =
        serde_json::from_str(&output(&["--version=raw"]).unwrap()).unwrap();
    assert_eq!(raw["gitVersion"], VERSION);
    assert_eq!(raw["compiler"], "rustc");
}

#[test]
fn concurrency_and_client_limits_have_the_spec_defaults_and_bounds() {
    let f = parse(&[]).unwrap();
    assert_eq!(f.concurrency(), Concurrency::default());
    assert_eq!(
        (f.concurrency().machine_pools, f.concurrency().identities),
        (10, 4)
    );
    assert_eq!((f.kube_api_qps, f.kube_api_burst), (20.0, 30));
    let f = parse(&[
        "--terraformmachinepool-concurrency=50",
        "--terraformcluster-concurrency=3",
        "--kube-api-qps=0",
    ])
    .unwrap();
    assert_eq!(f.concurrency().machine_pools, 50);
    assert_eq!(f.concurrency().clusters, 3);
    assert_eq!(f.kube_api_qps, 0.0);
}

#[test]
fn backups_and_the_operation_gate_have_the_spec_defaults() {
    let f = parse(&[]).unwrap();
    assert_eq!((f.state_backups, f.cluster_operation_gate), (5, true));
    let f = parse(&["--state-backups=0", "--cluster-operation-gate=false"]).unwrap();
    assert_eq!((f.state_backups, f.cluster_operation_gate), (0, false));
}
