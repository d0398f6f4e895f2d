//! The manager image as `make images` lays it out: a static `/manager`
//! and a static `/runner` that run with no libc from the image (the image
//! has none), built by the release recipe (debug profile here).

use captf_images::layout::{read_layer_files, write_archive, write_layout};
use captf_images::recipes::{Provenance, manager_image};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn the_manager_image_holds_two_static_binaries_that_run() {
    let runner = captf_testenv::binaries::static_linked("runner");
    let manager = captf_testenv::binaries::static_linked("manager");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("captf-manager");
    let provenance = Provenance {
        version: "v0.1.0".into(),
        revision: "abc".into(),
        source: String::new(),
    };
    let spec = manager_image(&manager, &runner, &provenance);
    write_layout(&layout, &spec, Some("v0.1.0")).unwrap();
    write_archive(&layout, &dir.path().join("captf-manager.tar")).unwrap();

    let files = read_layer_files(&layout).unwrap();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["manager", "runner"],
        "nothing but the two binaries: no shell, no libc"
    );
    assert_eq!(files["manager"], std::fs::read(&manager).unwrap());

    // Each binary as a container would see it: extracted, executable,
    // static, and running.
    for (name, arg, starts) in [
        ("runner", "version", "runner v"),
        ("manager", "--help", "CAPTF"),
    ] {
        let extracted = dir.path().join(name);
        std::fs::write(&extracted, &files[name]).unwrap();
        std::fs::set_permissions(&extracted, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            captf_testenv::binaries::is_static(&extracted),
            "/{name} is not static"
        );
        let out = Command::new(&extracted).arg(arg).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(starts),
            "{out:?}"
        );
    }

    // A non-root numeric user and the release's labels.
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let blob = |d: &serde_json::Value| {
        let d = d.as_str().unwrap();
        serde_json::from_slice::<serde_json::Value>(
            &std::fs::read(layout.join("blobs/sha256").join(&d[7..])).unwrap(),
        )
        .unwrap()
    };
    let manifest = blob(&index["manifests"][0]["digest"]);
    let config = blob(&manifest["config"]["digest"]);
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        "v0.1.0"
    );
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        "v0.1.0"
    );
}
