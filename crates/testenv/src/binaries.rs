//! The workspace's binaries that tests run as processes or pack into
//! images, each kind built once per test process by one cargo invocation:
//!
//! - [`debug`]: the runner, the manager and the demo as `cargo test
//!   --workspace` builds them (the same packages, targets and features, so
//!   after `cargo test --workspace --no-run`, as `.ci/run` does first, the
//!   invocation finds every unit fresh and builds nothing);
//! - [`static_linked`]: the runner and the manager as the release recipe
//!   makes them (`make images`): glibc linked in with `+crt-static`, so a
//!   binary runs in an image without a libc (the images the real node runs);
//!   with them the test-only `captf-probe` a module image of a test carries.
//!   Debug profile: the tests want the recipe, not the optimiser.
//!
//! One invocation per kind, whatever a test asks for: each distinct package
//! selection would resolve features anew and compile the dependencies again.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The target the images are built for.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The cargo arguments of the static build, which `.ci/run` repeats before
/// the tests (with `RUSTFLAGS` from [`STATIC_RUSTFLAGS`]).
pub const STATIC_ARGS: &[&str] = &[
    "build",
    "-p",
    "captf-runner",
    "-p",
    "captf-manager",
    "-p",
    "captf-testenv",
    "--bins",
    "--target",
    TARGET,
];

/// What makes the static build static.
pub const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static";

/// The cargo arguments of the debug build: the workspace's binaries with
/// its test targets, so features resolve as under `cargo test --workspace`.
pub const DEBUG_ARGS: &[&str] = &["build", "--workspace", "--bins", "--tests"];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("target"))
}

/// Runs cargo with `args` (and `rustflags`) in the workspace; the reason it
/// failed otherwise.
fn cargo(args: &[&str], rustflags: Option<&str>) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(&cargo);
    // hack/timed-test.sh sets RUSTC_BOOTSTRAP for the test process only:
    // build scripts that probe for nightly features read it, and would
    // build these binaries differently from the ones `.ci/run` built.
    cmd.args(args)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("RUSTC_BOOTSTRAP")
        .current_dir(workspace());
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for name in set_for_a_test_process(names.iter().map(String::as_str)) {
        cmd.env_remove(name);
    }
    if let Some(flags) = rustflags {
        cmd.env("RUSTFLAGS", flags);
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`cargo {}` failed: {s}", args.join(" "))),
        Err(e) => Err(format!("running {cargo}: {e}")),
    }
}

/// The names among `names` that cargo sets for a test process it runs (the
/// package's manifest folder, name and version, `OUT_DIR`, ...). A cargo
/// started from a test inherits them, and build scripts that watch them
/// (`ring` watches `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`) would then see
/// them changed: the dependencies would compile again, once per test binary
/// and once more when the next `cargo test` restores them.
fn set_for_a_test_process<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    const EXACT: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    const PREFIXES: &[&str] = &["CARGO_PKG_", "CARGO_BIN_EXE_"];
    names
        .filter(|n| EXACT.contains(n) || PREFIXES.iter().any(|p| n.starts_with(p)))
        .collect()
}

/// The debug build of `bin` (`runner`, `manager` or `captf-demo`). Panics
/// when the build fails.
pub fn debug(bin: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(e) = BUILT.get_or_init(|| cargo(DEBUG_ARGS, None)) {
        panic!("building the workspace's binaries: {e}");
    }
    target_dir().join("debug").join(bin)
}

/// The static build of `bin` (`runner`, `manager` or `captf-probe`). Panics when the build
/// fails.
pub fn static_linked(bin: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(e) = BUILT.get_or_init(|| cargo(STATIC_ARGS, Some(STATIC_RUSTFLAGS))) {
        panic!("the static build of the runner and the manager: {e}");
    }
    target_dir().join(TARGET).join("debug").join(bin)
}

/// True when `file(1)` and `ldd` both call `bin` static.
pub fn is_static(bin: &std::path::Path) -> bool {
    let file = Command::new("file")
        .arg(bin)
        .output()
        .expect("running file");
    let file = String::from_utf8_lossy(&file.stdout);
    let ldd = Command::new("ldd").arg(bin).output().expect("running ldd");
    let ldd =
        String::from_utf8_lossy(&ldd.stdout).into_owned() + &String::from_utf8_lossy(&ldd.stderr);
    (file.contains("statically linked") || file.contains("static-pie linked"))
        && (ldd.contains("not a dynamic executable") || ldd.contains("statically linked"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_build_drops_what_cargo_set_for_the_test_and_keeps_the_rest() {
        let cases: &[(&str, bool)] = &[
            ("CARGO_MANIFEST_DIR", true),
            ("CARGO_PKG_NAME", true),
            ("CARGO_PKG_VERSION_MAJOR", true),
            ("CARGO_BIN_EXE_runner", true),
            ("CARGO_CRATE_NAME", true),
            ("OUT_DIR", true),
            ("CARGO_TARGET_TMPDIR", true),
            // The run's own settings reach the helper build unchanged.
            ("CARGO_HOME", false),
            ("CARGO_INCREMENTAL", false),
            ("CARGO_TARGET_DIR", false),
            ("KUBEBUILDER_ASSETS", false),
            ("PATH", false),
        ];
        for (name, dropped) in cases {
            let got = !set_for_a_test_process([*name].into_iter()).is_empty();
            assert_eq!(got, *dropped, "{name}");
        }
    }

    /// `.ci/run` builds the helpers before the tests with the very
    /// invocations the harness makes; if they drifted apart, every test
    /// binary would build them again under another feature set.
    #[test]
    fn ci_builds_the_helpers_as_the_harness_does() {
        let ci = std::fs::read_to_string(workspace().join(".ci/run")).unwrap();
        let debug = format!("cargo {} --locked", DEBUG_ARGS.join(" "));
        let static_ = format!(
            "RUSTFLAGS=\"{STATIC_RUSTFLAGS}\" cargo {} --locked",
            STATIC_ARGS.join(" ")
        );
        for line in [debug, static_] {
            assert!(
                ci.lines().any(|l| l.trim() == line),
                ".ci/run lacks `{line}`"
            );
        }
    }
}
