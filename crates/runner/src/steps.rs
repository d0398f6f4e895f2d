//! The runtime commands each operation runs, in order.

use crate::cli::RunArgs;
use crate::op::Op;

/// How a step's standard output is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdout {
    /// Streamed to the log only.
    Log,
    /// Kept for parsing and also logged.
    CaptureAndLog,
    /// Kept for parsing and never logged (plans hold secret values).
    CaptureOnly,
}

/// One runtime invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: &'static str,
    /// Arguments after the runtime command.
    pub args: Vec<String>,
    /// Exit codes that count as success.
    pub ok_exits: &'static [i32],
    /// Stderr fragments that make a failing exit acceptable.
    pub ok_if_stderr: &'static [&'static str],
    pub stdout: Stdout,
    /// Run only when the previous step exited 2 (plan had changes).
    pub only_after_changes: bool,
}

impl Step {
    fn new(name: &'static str, args: Vec<String>) -> Step {
        Step {
            name,
            args,
            ok_exits: &[0],
            ok_if_stderr: &[],
            stdout: Stdout::Log,
            only_after_changes: false,
        }
    }
}

/// Plan files live in the work directory.
pub const APPLY_PLAN_FILE: &str = "apply.tfplan";
pub const PLAN_FILE: &str = "plan.tfplan";
pub const RESTORE_STATE_FILE: &str = "restore.tfstate";
const TFVARS: &str = "-var-file=terraform.tfvars.json";

/// The steps of `args.op`.
pub fn steps_for(args: &RunArgs) -> Vec<Step> {
    let secs = args.lock_timeout_secs();
    let common = || {
        vec![
            "-input=false".to_owned(),
            "-no-color".to_owned(),
            format!("-lock-timeout={secs}s"),
        ]
    };
    let with = |head: &[&str], mid: Vec<String>, tail: &[&str]| -> Vec<String> {
        head.iter()
            .map(|s| s.to_string())
            .chain(mid)
            .chain(tail.iter().map(|s| s.to_string()))
            .collect()
    };
    let work = args.workdir.trim_end_matches('/');
    let mut steps = Vec::new();

    let mut init = common();
    init.extend(
        args.backend_config
            .iter()
            .map(|v| format!("-backend-config={v}")),
    );
    steps.push(Step::new("init", with(&["init"], init, &[])));
    if !args.force_unlock.is_empty() {
        let mut s = Step::new(
            "force-unlock",
            vec![
                "force-unlock".into(),
                "-force".into(),
                args.force_unlock.clone(),
            ],
        );
        s.ok_if_stderr = &["state is already unlocked", "does not match existing lock"];
        steps.push(s);
    }
    let validate = || {
        let mut s = Step::new(
            "validate",
            vec!["validate".into(), "-json".into(), "-no-color".into()],
        );
        s.stdout = Stdout::CaptureAndLog;
        s
    };
    let plan = |file: &str, extra: &[&str]| {
        let mut a = common();
        a.push("-detailed-exitcode".into());
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(TFVARS.into());
        a.push(format!("-out={work}/{file}"));
        let mut s = Step::new("plan", with(&["plan"], a, &[]));
        s.ok_exits = &[0, 2];
        s
    };
    let show = |file: &str| {
        let mut s = Step::new(
            "show-json",
            vec![
                "show".into(),
                "-json".into(),
                "-no-color".into(),
                format!("{work}/{file}"),
            ],
        );
        s.stdout = Stdout::CaptureOnly;
        s.only_after_changes = true;
        s
    };
    let refresh_only = || {
        let mut s = Step::new(
            "apply-refresh-only",
            with(
                &["apply"],
                common(),
                &["-refresh-only", "-auto-approve", TFVARS],
            ),
        );
        s.stdout = Stdout::CaptureAndLog;
        s
    };

    match args.op {
        Op::Apply if args.plans_before_apply() => {
            steps.push(validate());
            steps.push(plan(APPLY_PLAN_FILE, &[]));
            steps.push(show(APPLY_PLAN_FILE));
            let mut a = Step::new(
                "apply",
                with(
                    &["apply"],
                    common(),
                    &[&format!("{work}/{APPLY_PLAN_FILE}")],
                ),
            );
            a.stdout = Stdout::CaptureAndLog;
            steps.push(a);
        }
        Op::Apply => {
            steps.push(validate());
            let mut a = Step::new(
                "apply",
                with(&["apply"], common(), &["-auto-approve", TFVARS]),
            );
            a.stdout = Stdout::CaptureAndLog;
            steps.push(a);
        }
        Op::Destroy => {
            let mut d = Step::new(
                "destroy",
                with(&["destroy"], common(), &["-auto-approve", TFVARS]),
            );
            d.stdout = Stdout::CaptureAndLog;
            steps.push(d);
        }
        Op::Refresh => steps.push(refresh_only()),
        Op::Drift => {
            steps.push(refresh_only());
            steps.push(plan(PLAN_FILE, &["-refresh=false"]));
            steps.push(show(PLAN_FILE));
        }
        Op::Plan => {
            steps.push(validate());
            steps.push(plan(PLAN_FILE, &[]));
            steps.push(show(PLAN_FILE));
        }
        Op::Restore => {
            steps.push(Step::new(
                "state-push",
                vec![
                    "state".into(),
                    "push".into(),
                    "-force".into(),
                    format!("-lock-timeout={secs}s"),
                    format!("{work}/{RESTORE_STATE_FILE}"),
                ],
            ));
            let mut l = Step::new("state-list", vec!["state".into(), "list".into()]);
            l.stdout = Stdout::CaptureAndLog;
            steps.push(l);
        }
    }
    steps
}

/// The name a step is reported under in metrics.
pub fn metric_step_label(name: &str) -> &'static str {
    const KNOWN: [&str; 12] = [
        "init",
        "force-unlock",
        "validate",
        "apply",
        "destroy",
        "apply-refresh-only",
        "plan",
        "show-json",
        "state-push",
        "state-list",
        "prepare",
        "flags",
    ];
    KNOWN.into_iter().find(|k| *k == name).unwrap_or("other")
}

/// Managed resource addresses in `state list` output: data sources, also
/// inside modules, are not counted.
pub fn count_managed(state_list: &str) -> usize {
    state_list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| !strip_module_prefixes(l).starts_with("data."))
        .count()
}

fn strip_module_prefixes(mut addr: &str) -> &str {
    while let Some(rest) = addr.strip_prefix("module.") {
        // module.<name>[<key>]. — the key may contain dots inside quotes.
        let mut depth = 0usize;
        let mut in_quote = false;
        let mut cut = None;
        for (i, c) in rest.char_indices() {
            match c {
                '"' => in_quote = !in_quote,
                '[' if !in_quote => depth += 1,
                ']' if !in_quote => depth = depth.saturating_sub(1),
                '.' if !in_quote && depth == 0 => {
                    cut = Some(i);
                    break;
                }
                _ => {}
            }
        }
        match cut {
            Some(i) => addr = &rest[i + 1..],
            None => return rest,
        }
    }
    addr
}
