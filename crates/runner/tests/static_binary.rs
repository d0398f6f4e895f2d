//! The runner is copied into arbitrary module images, so it must not need
//! a dynamic loader or shared libraries. The release recipe (see the
//! crate's README) builds it with `+crt-static` for the GNU target; this
//! test runs that recipe and inspects the result with `file` and `ldd`.

use std::path::PathBuf;
use std::process::Command;

const TARGET: &str = "x86_64-unknown-linux-gnu";

#[test]
fn the_release_recipe_builds_a_static_executable() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target_dir = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let status = Command::new(&cargo)
        .args([
            "build",
            "-p",
            "captf-runner",
            "--bin",
            "runner",
            "--target",
            TARGET,
        ])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("running cargo");
    assert!(status.success(), "the static build failed");
    let bin = target_dir.join(TARGET).join("debug/runner");

    let file = Command::new("file")
        .arg(&bin)
        .output()
        .expect("running file");
    let file = String::from_utf8_lossy(&file.stdout);
    assert!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "{file}"
    );

    let ldd = Command::new("ldd").arg(&bin).output().expect("running ldd");
    let text =
        String::from_utf8_lossy(&ldd.stdout).into_owned() + &String::from_utf8_lossy(&ldd.stderr);
    assert!(
        text.contains("not a dynamic executable") || text.contains("statically linked"),
        "{text}"
    );

    // And it runs.
    let out = Command::new(&bin)
        .arg("version")
        .output()
        .expect("running the static runner");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("runner v"));
}
