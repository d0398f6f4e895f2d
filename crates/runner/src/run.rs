//! `runner run`: one operation from preflight to result document.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cli::RunArgs;
use crate::env::{mirror_cli_config, rewrite_env};
use crate::events::{EventType, Reason, Recorder};
use crate::exec::{self, Invocation, StopSignal};
use crate::op::Op;
use crate::plan::{self, EMPTY_PLAN_HASH, PlanKey};
use crate::redact::{Redactor, env_secrets, variable_secrets};
use crate::result::{Changes, ErrorKind, PlanSummary, ResultDoc, StepRecord};
use crate::steps::{RESTORE_STATE_FILE, Stdout, Step, count_managed, steps_for};
use crate::summary::{blocked_summary, failure_summary, parse_changes};
use crate::workdir::{
    assemble_restore, preflight, prepare_root, read_plan_key, read_restore_chunks, write_private,
};

/// Everything a run needs from outside.
pub struct Runner<'a> {
    pub args: &'a RunArgs,
    /// The runner's own environment (the container's).
    pub env: Vec<(String, String)>,
    pub stop: StopSignal,
    pub events: &'a mut Recorder,
    /// `<runtime> version`, run beside the first steps (its own start-up
    /// would otherwise add to every run's time); joined when the run ends.
    pub version: Option<tokio::task::JoinHandle<String>>,
}

/// Prepared state of a run once the preflight and preparation passed.
struct Prepared {
    root: PathBuf,
    env: Vec<(String, String)>,
    key: Option<PlanKey>,
    redactor: Redactor,
}

impl Runner<'_> {
    /// Runs the operation and returns its result document.
    pub async fn run(mut self) -> ResultDoc {
        let started = Instant::now();
        let args = self.args;
        let mut doc = ResultDoc::new(args.op.as_str(), &args.image, &args.bin);
        self.execute(&mut doc).await;
        let version = match self.version.take() {
            Some(task) => task.await.unwrap_or_default(),
            None => String::new(),
        };
        if let Some(rt) = &mut doc.runtime {
            rt.version = version.clone();
        }
        let (ty, outcome) = match doc.error.as_ref().map(|e| e.kind) {
            None => (EventType::Normal, "succeeded"),
            Some(ErrorKind::Step) => (EventType::Warning, "failed"),
            Some(ErrorKind::Interrupted) => (EventType::Warning, "was interrupted"),
            Some(ErrorKind::Blocked) => (
                EventType::Warning,
                "was blocked: the plan deletes or replaces resources without approval",
            ),
            Some(ErrorKind::PlanChanged) => (
                EventType::Warning,
                "stopped: the plan differs from the approved plan",
            ),
            Some(ErrorKind::ImageLayout) => (
                EventType::Warning,
                "failed: the image breaks the image contract",
            ),
        };
        let note = format!(
            "{} {outcome} after {:.1}s with runtime version {version}",
            args.op,
            started.elapsed().as_secs_f64()
        );
        self.events
            .emit(ty, Reason::RunFinished, "Run", &note)
            .await;
        doc
    }

    async fn execute(&mut self, doc: &mut ResultDoc) {
        let args = self.args;
        if let Err(e) = preflight(Path::new(&args.module), &args.bin) {
            doc.fail(ErrorKind::ImageLayout, None, &e);
            return;
        }
        let prepared = match self.prepare(doc) {
            Ok(p) => p,
            Err(e) => {
                let redactor = Redactor::new(env_secrets(
                    self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ));
                doc.fail(ErrorKind::Step, Some("prepare"), &redactor.redact(&e));
                return;
            }
        };
        let Prepared {
            root,
            env,
            key,
            mut redactor,
        } = prepared;

        self.version = Some(tokio::spawn(runtime_version(
            args.bin.clone(),
            root.clone(),
            env.clone(),
            args.stop_timeout,
            self.stop.clone(),
        )));
        let note = format!("{} of image {}", args.op, args.image);
        self.events
            .emit(
                EventType::Normal,
                Reason::RunStarted,
                "Run",
                &redactor.redact(&note),
            )
            .await;

        let steps = steps_for(args);
        let mut prev_exit = 0;
        for (i, step) in steps.iter().enumerate() {
            if step.only_after_changes && prev_exit != 2 {
                continue;
            }
            if self.stop.is_stopped() {
                doc.fail(
                    ErrorKind::Interrupted,
                    Some(step.name),
                    &format!("the run was stopped before step {} started", step.name),
                );
                return;
            }
            let out = self.run_step(step, &root, &env, &redactor).await;
            doc.steps
                .push(StepRecord::new(step.name, out.exit, out.elapsed));
            let accepted = step.ok_exits.contains(&out.exit)
                || (out.exec_error.is_none()
                    && step
                        .ok_if_stderr
                        .iter()
                        .any(|s| out.stderr_tail.contains(s)));
            if matches!(step.name, "apply" | "destroy")
                && let Some(c) = parse_changes(&out.stdout)
            {
                doc.changes = Some(c);
                let note = format!(
                    "added {}, changed {}, destroyed {}, imported {}",
                    c.add, c.change, c.destroy, c.import
                );
                self.events
                    .emit(EventType::Normal, Reason::ResourcesChanged, "Step", &note)
                    .await;
            }
            if !accepted {
                let tail = failure_summary(
                    step.name,
                    out.exit,
                    &redactor.redact(&out.stdout),
                    &redactor.redact(&out.stderr_tail),
                    out.exec_error.as_deref(),
                );
                let kind = if out.cancelled || self.stop.is_stopped() {
                    ErrorKind::Interrupted
                } else {
                    ErrorKind::Step
                };
                doc.fail(kind, Some(step.name), &tail);
                let note = format!("step {} exited {}: {tail}", step.name, out.exit);
                self.events
                    .emit(EventType::Warning, Reason::StepFailed, "Step", &note)
                    .await;
                return;
            }
            let note = format!(
                "step {} exited {} after {:.1}s",
                step.name,
                out.exit,
                out.elapsed.as_secs_f64()
            );
            self.events
                .emit(EventType::Normal, Reason::StepSucceeded, "Step", &note)
                .await;
            let is_last = i + 1 == steps.len();
            if out.cancelled && !is_last {
                let next = steps[i + 1].name;
                doc.fail(
                    ErrorKind::Interrupted,
                    Some(next),
                    &format!("the run was stopped before step {next} started"),
                );
                return;
            }
            prev_exit = out.exit;

            match step.name {
                "plan" if out.exit == 0 && self.after_empty_plan(doc) => return,
                "show-json" => {
                    let done = self
                        .after_show(doc, &out.stdout, key.as_ref(), &mut redactor)
                        .await;
                    if done {
                        return;
                    }
                }
                "state-list" => {
                    let managed = count_managed(&out.stdout);
                    if args.restore_resources > 0 && managed == 0 {
                        doc.fail(
                            ErrorKind::Step,
                            Some("state-list"),
                            &format!(
                                "state list shows no managed resource after the push, but the backup has {}",
                                args.restore_resources
                            ),
                        );
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Preflight passed: build the work directory, environment, restore
    /// file, plan key and redactor.
    fn prepare(&self, doc: &mut ResultDoc) -> Result<Prepared, String> {
        let args = self.args;
        let workdir = Path::new(&args.workdir);
        let root = prepare_root(workdir, Path::new(&args.config))?;
        let providers = Path::new(&args.providers);
        let mirror = providers.is_dir();
        let rewritten = rewrite_env(self.env.iter().cloned(), &args.workdir, mirror);
        if !rewritten.dropped.is_empty() {
            eprintln!(
                "runner: Ignoring environment variables the runner owns: {}",
                rewritten.dropped.join(", ")
            );
        }
        if let Some(tmp) = &rewritten.created_tmpdir {
            std::fs::create_dir_all(tmp).map_err(|e| format!("creating {tmp}: {e}"))?;
        }
        if mirror {
            write_private(
                &workdir.join("cli.tfrc"),
                mirror_cli_config(providers).as_bytes(),
            )?;
            if let Some(img) = &mut doc.image {
                img.providers_mirror = true;
            }
        }
        if args.op == Op::Restore {
            let chunks = read_restore_chunks(Path::new(&args.config), args.restore_chunks)?;
            let state = assemble_restore(&chunks).map_err(|e| e.to_string())?;
            write_private(&workdir.join(RESTORE_STATE_FILE), &state)?;
        }
        let needs_key =
            args.op == Op::Plan || (args.op == Op::Apply && !args.expect_plan.is_empty());
        let key = if needs_key {
            Some(
                read_plan_key(Path::new(&args.plan_key_file))
                    .map_err(|e| format!("the plan key could not be read: {e}"))?,
            )
        } else if args.plans_before_apply() {
            // A guarded apply reports its plan's hash when it has the key;
            // without one the blocked plan carries no hash.
            read_plan_key(Path::new(&args.plan_key_file)).ok()
        } else {
            None
        };
        let mut redactor = Redactor::new(env_secrets(
            self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ));
        let read_json = |name: &str| -> serde_json::Value {
            std::fs::read(root.join(name))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        redactor.extend(variable_secrets(
            &read_json("main.tf.json"),
            &read_json("terraform.tfvars.json"),
        ));
        Ok(Prepared {
            root,
            env: rewritten.vars,
            key,
            redactor,
        })
    }

    async fn run_step(
        &mut self,
        step: &Step,
        root: &Path,
        env: &[(String, String)],
        redactor: &Redactor,
    ) -> exec::Outcome {
        self.events
            .emit(
                EventType::Normal,
                Reason::StepStarted,
                "Step",
                &format!("step {} started", step.name),
            )
            .await;
        exec::run(
            Invocation {
                program: &self.args.bin[0],
                args: self.args.bin[1..]
                    .iter()
                    .chain(&step.args)
                    .cloned()
                    .collect(),
                cwd: root,
                env,
                stdout: step.stdout,
                stop_timeout: self.args.stop_timeout,
            },
            redactor,
            self.stop.clone(),
        )
        .await
    }

    /// A plan without changes. Returns whether the run is over.
    fn after_empty_plan(&self, doc: &mut ResultDoc) -> bool {
        let args = self.args;
        let empty = PlanSummary {
            hash: EMPTY_PLAN_HASH.to_owned(),
            ..PlanSummary::default()
        };
        match args.op {
            Op::Drift => {
                doc.drift = Some(crate::result::Drift::default());
                true
            }
            Op::Plan => {
                doc.plan = Some(empty);
                true
            }
            Op::Apply if !args.expect_plan.is_empty() && args.expect_plan != EMPTY_PLAN_HASH => {
                doc.plan = Some(empty);
                doc.fail(
                    ErrorKind::PlanChanged,
                    None,
                    &format!(
                        "the plan has no changes ({EMPTY_PLAN_HASH}), but the approved plan is {}; nothing was applied",
                        args.expect_plan
                    ),
                );
                true
            }
            Op::Apply => {
                doc.changes = Some(Changes::default());
                true
            }
            _ => false,
        }
    }

    /// The plan was shown as JSON. Returns whether the run is over.
    async fn after_show(
        &mut self,
        doc: &mut ResultDoc,
        json: &str,
        key: Option<&PlanKey>,
        redactor: &mut Redactor,
    ) -> bool {
        let args = self.args;
        let parsed = match plan::parse(json.as_bytes()) {
            Ok(p) => p,
            Err(e) => {
                doc.fail(ErrorKind::Step, Some("show-json"), &e.to_string());
                return true;
            }
        };
        redactor.extend(parsed.sensitive_strings());
        let summary = parsed.summary(key);
        let c = &summary.counts;
        let counts = format!(
            "create {}, update {}, replace {}, delete {}, import {}, move {}, forget {}, output changes {}",
            c.create, c.update, c.replace, c.delete, c.import, c.moves, c.forget, c.output_changes
        );
        self.events
            .emit(EventType::Normal, Reason::PlanSummary, "Plan", &counts)
            .await;
        match args.op {
            Op::Plan => {
                doc.plan = Some(summary);
                true
            }
            Op::Drift => {
                doc.drift = Some(parsed.drift());
                true
            }
            Op::Apply if !args.expect_plan.is_empty() => {
                if summary.hash != args.expect_plan {
                    let tail = format!(
                        "the plan is {}, but the approved plan is {}; nothing was applied",
                        summary.hash, args.expect_plan
                    );
                    doc.plan = Some(summary);
                    doc.fail(ErrorKind::PlanChanged, None, &redactor.redact(&tail));
                    return true;
                }
                false
            }
            Op::Apply => {
                let destructive = parsed.destructive_changes();
                let approved = !args.allow_deletes_hash.is_empty()
                    && args.allow_deletes_hash == args.inputs_hash;
                if !destructive.is_empty() && !approved {
                    doc.plan = Some(summary);
                    doc.fail(
                        ErrorKind::Blocked,
                        None,
                        &redactor.redact(&blocked_summary(&destructive)),
                    );
                    return true;
                }
                false
            }
            _ => false,
        }
    }
}

/// The runtime's version, as `<runtime> version -json` reports it (empty
/// when it cannot tell).
async fn runtime_version(
    bin: Vec<String>,
    root: PathBuf,
    env: Vec<(String, String)>,
    stop_timeout: std::time::Duration,
    stop: StopSignal,
) -> String {
    // One thread and no collector: a short process that should take as
    // little as it can from the steps it runs beside.
    let mut env = env;
    env.retain(|(k, _)| k != "GOMAXPROCS" && k != "GOGC");
    env.extend([
        ("GOMAXPROCS".to_owned(), "1".to_owned()),
        ("GOGC".to_owned(), "off".to_owned()),
    ]);
    let out = exec::run(
        Invocation {
            program: &bin[0],
            args: bin[1..]
                .iter()
                .cloned()
                .chain(["version".to_owned(), "-json".to_owned()])
                .collect(),
            cwd: &root,
            env: &env,
            stdout: Stdout::CaptureOnly,
            stop_timeout,
        },
        &Redactor::default(),
        stop,
    )
    .await;
    serde_json::from_str::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v.get("terraform_version")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}
