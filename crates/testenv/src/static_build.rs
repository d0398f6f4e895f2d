//! Static builds of the workspace's binaries, as the release recipe makes
//! them (`make images`): glibc linked in with `+crt-static`, so a binary
//! runs in an image without a libc (the manager image, or a module image
//! the runner is copied into). Debug profile: the tests want the recipe,
//! not the optimiser.

use std::path::PathBuf;
use std::process::Command;

/// The target the images are built for.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Builds `bin` of `package` statically into the workspace's target folder
/// and returns its path. Panics when the build fails.
pub fn build(package: &str, bin: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target_dir = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace.join("target"));
    let status = Command::new(&cargo)
        .args(["build", "-p", package, "--bin", bin, "--target", TARGET])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(&workspace)
        .status()
        .expect("running cargo");
    assert!(
        status.success(),
        "the static build of {package}/{bin} failed"
    );
    target_dir.join(TARGET).join("debug").join(bin)
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
