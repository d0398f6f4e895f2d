//! Step plans, environment rewriting, summaries, restore assembly, preflight.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use captf_runner::env::{mirror_cli_config, rewrite_env};
use captf_runner::steps::{count_managed, metric_step_label, steps_for};
use captf_runner::summary::{blocked_summary, failure_summary, parse_changes, strip_ansi};
use captf_runner::workdir::{RestoreError, assemble_restore, preflight, prepare_root};
use captf_runner::{Op, parse_run_args};

fn argv(op: &str, extra: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut a = vec![
        format!("--op={op}"),
        "--lock-timeout=2m".into(),
        "--workdir=/w".into(),
        "--backend-config=namespace=ns".into(),
        "--backend-config=labels={a=\"b,c\"}".into(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    let args = parse_run_args(a).unwrap();
    steps_for(&args)
        .into_iter()
        .map(|s| (s.name.to_owned(), s.args))
        .collect()
}

fn joined(steps: &[(String, Vec<String>)]) -> Vec<String> {
    steps
        .iter()
        .map(|(n, a)| format!("{n}: {}", a.join(" ")))
        .collect()
}

const C: &str = "-input=false -no-color -lock-timeout=120s";

#[test]
fn step_table() {
    let init =
        format!("init: init {C} -backend-config=namespace=ns -backend-config=labels={{a=\"b,c\"}}");
    let v = "validate: validate -json -no-color".to_owned();
    let tf = "-var-file=terraform.tfvars.json";
    assert_eq!(
        joined(&argv("apply", &[])),
        vec![
            init.clone(),
            v.clone(),
            format!("apply: apply {C} -auto-approve {tf}")
        ]
    );
    let guarded = vec![
        init.clone(),
        v.clone(),
        format!("plan: plan {C} -detailed-exitcode {tf} -out=/w/apply.tfplan"),
        "show-json: show -json -no-color /w/apply.tfplan".to_owned(),
        format!("apply: apply {C} /w/apply.tfplan"),
    ];
    assert_eq!(joined(&argv("apply", &["--guard-deletes"])), guarded);
    assert_eq!(joined(&argv("apply", &["--expect-plan=p2:x"])), guarded);
    assert_eq!(
        joined(&argv("destroy", &[])),
        vec![
            init.clone(),
            format!("destroy: destroy {C} -auto-approve {tf}")
        ]
    );
    let refresh = format!("apply-refresh-only: apply {C} -refresh-only -auto-approve {tf}");
    assert_eq!(
        joined(&argv("refresh", &[])),
        vec![init.clone(), refresh.clone()]
    );
    assert_eq!(
        joined(&argv("drift", &[])),
        vec![
            init.clone(),
            refresh,
            format!("plan: plan {C} -detailed-exitcode -refresh=false {tf} -out=/w/plan.tfplan"),
            "show-json: show -json -no-color /w/plan.tfplan".to_owned(),
        ]
    );
    assert_eq!(
        joined(&argv("plan", &[])),
        vec![
            init.clone(),
            v,
            format!("plan: plan {C} -detailed-exitcode {tf} -out=/w/plan.tfplan"),
            "show-json: show -json -no-color /w/plan.tfplan".to_owned(),
        ]
    );
    assert_eq!(
        joined(&argv("restore", &["--force-unlock=L1"])),
        vec![
            init,
            "force-unlock: force-unlock -force L1".to_owned(),
            "state-push: state push -force -lock-timeout=120s /w/restore.tfstate".to_owned(),
            "state-list: state list".to_owned(),
        ]
    );
}

#[test]
fn accepted_exits_and_stderr() {
    let args = parse_run_args(["--op=drift", "--force-unlock=x"]).unwrap();
    let steps = steps_for(&args);
    let fu = steps.iter().find(|s| s.name == "force-unlock").unwrap();
    assert!(fu.ok_if_stderr.contains(&"state is already unlocked"));
    assert!(fu.ok_if_stderr.contains(&"does not match existing lock"));
    let plan = steps.iter().find(|s| s.name == "plan").unwrap();
    assert_eq!(plan.ok_exits, &[0, 2]);
    assert!(
        steps
            .iter()
            .find(|s| s.name == "show-json")
            .unwrap()
            .only_after_changes
    );
    assert_eq!(args.op, Op::Drift);
}

#[test]
fn metric_labels() {
    assert_eq!(metric_step_label("state-push"), "state-push");
    assert_eq!(metric_step_label("prepare"), "prepare");
    assert_eq!(metric_step_label("weird"), "other");
}

#[test]
fn managed_addresses() {
    let list = "terraform_data.a\ndata.external.x\nmodule.role.terraform_data.b\nmodule.role[\"k.v\"].data.x.y\nmodule.a.module.b[0].terraform_data.c\n\n";
    assert_eq!(count_managed(list), 3);
    assert_eq!(count_managed(""), 0);
}

#[test]
fn environment_rewrite() {
    let env = [
        ("TF_VAR_password", "x"),
        ("TF_LOG", "DEBUG"),
        ("TF_IN_AUTOMATION", "1"),
        ("TF_INPUT", "0"),
        ("KUBE_NAMESPACE", "ns"),
        ("KUBE_CONFIG_PATH", "/k"),
        ("KUBECONFIG", "/kc"),
        ("HOME", "/root"),
        ("TMPDIR", "/tmp"),
        ("AWS_REGION", "eu"),
        ("TF_CLI_ARGS", "-x"),
        ("TF_PLUGIN_CACHE_DIR", "/c"),
    ]
    .map(|(a, b)| (a.to_owned(), b.to_owned()));
    let r = rewrite_env(env.clone(), "/captf/work", false);
    assert_eq!(
        r.dropped,
        vec![
            "KUBE_CONFIG_PATH",
            "TF_CLI_ARGS",
            "TF_LOG",
            "TF_PLUGIN_CACHE_DIR",
            "TF_VAR_password"
        ]
    );
    assert_eq!(r.get("HOME"), Some("/captf/work"));
    assert_eq!(r.get("TF_DATA_DIR"), Some("/captf/work/.terraform"));
    assert_eq!(r.get("TMPDIR"), Some("/tmp"));
    assert_eq!(r.get("TF_IN_AUTOMATION"), Some("1"));
    assert_eq!(r.get("KUBE_NAMESPACE"), Some("ns"));
    assert_eq!(r.get("KUBECONFIG"), Some("/kc"));
    assert_eq!(r.get("TF_CLI_CONFIG_FILE"), None);
    assert_eq!(r.get("TF_PLUGIN_CACHE_DIR"), None);
    assert_eq!(r.created_tmpdir, None);
    assert_eq!(r.vars.iter().filter(|(k, _)| k == "HOME").count(), 1);
    let no_tmp: Vec<_> = env.into_iter().filter(|(k, _)| k != "TMPDIR").collect();
    let r = rewrite_env(no_tmp, "/captf/work/", true);
    assert_eq!(r.get("TMPDIR"), Some("/captf/work/tmp"));
    assert_eq!(r.created_tmpdir.as_deref(), Some("/captf/work/tmp"));
    assert_eq!(r.get("TF_CLI_CONFIG_FILE"), Some("/captf/work/cli.tfrc"));
}

#[test]
fn mirror_configuration() {
    let c = mirror_cli_config(Path::new("/captf/providers"));
    assert!(c.contains(
        "filesystem_mirror {\n    path    = \"/captf/providers\"\n    include = [\"*/*/*\"]"
    ));
    assert!(c.contains("direct {\n    exclude = [\"*/*/*\"]"));
}

#[test]
fn apply_summary_lines() {
    let out = "x\n\u{1b}[0m\u{1b}[1m\u{1b}[32mApply complete! Resources: 2 imported, 3 added, 1 changed, 0 destroyed.\u{1b}[0m\nOutputs:\n";
    let c = parse_changes(out).unwrap();
    assert_eq!((c.import, c.add, c.change, c.destroy), (2, 3, 1, 0));
    let c = parse_changes("Apply complete! Resources: 1 added, 0 changed, 0 destroyed.\nApply complete! Resources: 0 added, 4 changed, 0 destroyed.\n").unwrap();
    assert_eq!((c.add, c.change), (0, 4), "last match wins");
    let c = parse_changes("Destroy complete! Resources: 5 destroyed.\n").unwrap();
    assert_eq!(c.destroy, 5);
    assert!(parse_changes("No changes.\n").is_none());
    let long = format!(
        "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.{}\n",
        " ".repeat(600)
    );
    assert!(parse_changes(&long).is_none());
}

#[test]
fn failure_summaries() {
    let validate = r#"{"valid":false,"error_count":1,"diagnostics":[{"severity":"error","summary":"Unsupported attribute","detail":"This object does not have an attribute named \"x\".\nmore"},{"severity":"warning","summary":"w"}]}"#;
    assert_eq!(
        failure_summary("validate", 1, validate, "", None),
        "Error: Unsupported attribute: This object does not have an attribute named \"x\"."
    );
    let stderr = "\u{1b}[31m╷\u{1b}[0m\n\u{1b}[31m│\u{1b}[0m \u{1b}[1m\u{1b}[31mError: \u{1b}[0mboom one\nnoise\nError: boom two\n";
    assert_eq!(
        failure_summary("apply", 1, "", stderr, None),
        "Error: boom one\nError: boom two"
    );
    assert_eq!(
        failure_summary("init", 3, "", "nothing", None),
        "step init exited 3; see the Job's logs"
    );
    assert_eq!(
        failure_summary("init", 1, "", "", Some("could not start x")),
        "step init exited 1: could not start x"
    );
    let many = "Error: ".to_owned() + &"y".repeat(600);
    assert_eq!(failure_summary("apply", 1, "", &many, None).len(), 512);
    assert_eq!(
        strip_ansi("\u{1b}[1;31mred\u{1b}[0m \u{1b}]0;title\u{7}t"),
        "red t"
    );
}

#[test]
fn blocked_summaries_fit() {
    let one = vec![("t.a".to_owned(), "delete"), ("t.b".to_owned(), "replace")];
    assert_eq!(
        blocked_summary(&one),
        "the plan deletes or replaces 2 resource(s): t.a (delete), t.b (replace)"
    );
    let many: Vec<(String, &str)> = (0..100)
        .map(|i| {
            (
                format!("module.role.terraform_data.resource_{i:03}"),
                "replace",
            )
        })
        .collect();
    let s = blocked_summary(&many);
    assert!(s.len() <= 512, "{}", s.len());
    assert!(s.starts_with("the plan deletes or replaces 100 resource(s): module.role.terraform_data.resource_000 (replace)"));
    let listed = s.matches("(replace)").count();
    assert!(s.ends_with(&format!(" and {} more", 100 - listed)), "{s}");
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn restore_assembly() {
    let state = br#"{"version":4,"serial":3,"lineage":"l","resources":[]}"#;
    let z = gz(state);
    let (a, b) = z.split_at(z.len() / 2);
    assert_eq!(assemble_restore(&[a.to_vec(), b.to_vec()]).unwrap(), state);
    // A stale trailing chunk (a second gzip stream) is ignored.
    let stale = gz(b"garbage");
    assert_eq!(assemble_restore(&[z.clone(), stale]).unwrap(), state);
    assert_eq!(assemble_restore(&[]), Err(RestoreError::ChunkCount(0)));
    assert_eq!(
        assemble_restore(&vec![z.clone(); 33]),
        Err(RestoreError::ChunkCount(33))
    );
    assert!(matches!(
        assemble_restore(&[b"not gzip".to_vec()]),
        Err(RestoreError::Gzip(_))
    ));
    assert!(matches!(
        assemble_restore(&[gz(b"{not json")]),
        Err(RestoreError::Json(_))
    ));
    let bomb = gz(&vec![b' '; 64 * 1024 * 1024 + 1]);
    assert_eq!(assemble_restore(&[bomb]), Err(RestoreError::TooLarge));
}

#[test]
fn preflight_checks_the_image_layout() {
    let d = tempfile::tempdir().unwrap();
    let module = d.path().join("module");
    std::fs::create_dir(&module).unwrap();
    let rt = d.path().join("runtime");
    std::fs::write(&rt, "#!/bin/true\n").unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = vec![rt.to_string_lossy().into_owned()];
    assert!(preflight(&module, &bin).unwrap_err().contains("no .tf"));
    std::fs::create_dir(module.join("sub.tf")).unwrap();
    assert!(
        preflight(&module, &bin).is_err(),
        "a directory is not a module file"
    );
    std::fs::write(module.join("main.tofu.json"), "{}").unwrap();
    assert_eq!(preflight(&module, &bin), Ok(()));
    assert!(
        preflight(&d.path().join("missing"), &bin)
            .unwrap_err()
            .contains("unreadable")
    );
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(
        preflight(&module, &bin)
            .unwrap_err()
            .contains("not executable")
    );
    assert!(preflight(&module, &[String::new()]).is_err());
    assert!(
        preflight(&module, &[d.path().to_string_lossy().into_owned()])
            .unwrap_err()
            .contains("directory")
    );
    assert_eq!(preflight(&module, &["sh".to_owned()]), Ok(()));
    assert!(preflight(&module, &["no-such-runtime-xyz".to_owned()]).is_err());
}

#[test]
fn prepare_copies_visible_top_level_files() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("config");
    std::fs::create_dir_all(config.join("..data")).unwrap();
    std::fs::create_dir_all(config.join("restore")).unwrap();
    std::fs::write(config.join("..data/main.tf.json"), "{}").unwrap();
    std::os::unix::fs::symlink("..data/main.tf.json", config.join("main.tf.json")).unwrap();
    std::fs::write(config.join(".hidden"), "x").unwrap();
    std::fs::write(config.join("terraform.tfvars.json"), "{\"a\":1}").unwrap();
    let root = prepare_root(&d.path().join("work"), &config).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["main.tf.json", "terraform.tfvars.json"]);
    let mode = std::fs::metadata(root.join("main.tf.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::metadata(&root).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

proptest::proptest! {
    #[test]
    fn restore_assembly_ignores_where_chunks_are_cut(
        state in proptest::collection::vec(0u8..=255, 0..3000),
        cuts in proptest::collection::vec(0usize..10_000, 0..6),
    ) {
        let state = serde_json::to_vec(&serde_json::json!({"version": 4, "blob": state})).unwrap();
        let z = gz(&state);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (z.len() + 1)).collect();
        cuts.sort();
        let mut chunks = Vec::new();
        let mut start = 0;
        for c in cuts {
            chunks.push(z[start..c].to_vec());
            start = c;
        }
        chunks.push(z[start..].to_vec());
        proptest::prop_assert_eq!(assemble_restore(&chunks).unwrap(), state);
    }
}
