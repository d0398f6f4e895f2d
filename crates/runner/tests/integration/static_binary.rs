//! The runner is copied into arbitrary module images, so it must not need
//! a dynamic loader or shared libraries. The release recipe (`make images`)
//! builds it with `+crt-static` for the GNU target; this test runs that
//! recipe and inspects the result with `file` and `ldd`.

use std::process::Command;

#[test]
fn the_release_recipe_builds_a_static_executable() {
    let bin = captf_testenv::binaries::static_linked("runner");
    assert!(
        captf_testenv::binaries::is_static(&bin),
        "{} is not static",
        bin.display()
    );
    // And it runs.
    let out = Command::new(&bin)
        .arg("version")
        .output()
        .expect("running the static runner");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("runner v"));
}
