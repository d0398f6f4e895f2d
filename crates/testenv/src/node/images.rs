//! Images for the real node: written by the project's image writer as OCI
//! layouts, packed, imported into the node's containerd and tagged also
//! by digest (`name@sha256:…`), so the kubelet reports an `imageID` with a
//! repository digest as a registry pull would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use captf_images::layout::{Content, Entry, ImageSpec, write_archive, write_layout};

use super::config::PAUSE_IMAGE;

/// A static busybox (Debian's `busybox-static`): the shell of the pause
/// image and of test images.
pub const BUSYBOX: &str = "/bin/busybox";
/// A shell-only image for tests that look at a container from inside.
pub const SHELL_IMAGE: &str = "captf.test/shell:v1";

/// An image of busybox alone (`/bin/sh` linked to it), run as 65532:65532.
fn busybox_image(entrypoint: Vec<String>) -> ImageSpec {
    let dir = |path: &str| Entry {
        path: path.into(),
        content: Content::Dir,
        mode: 0o755,
        owner: 0,
    };
    ImageSpec {
        entries: vec![
            dir("/bin"),
            dir("/tmp"),
            Entry {
                path: "/bin/busybox".into(),
                content: Content::HostFile(PathBuf::from(BUSYBOX)),
                mode: 0o755,
                owner: 0,
            },
            Entry {
                path: "/bin/sh".into(),
                content: Content::Symlink("busybox".into()),
                mode: 0o777,
                owner: 0,
            },
        ],
        user: "65532:65532".into(),
        working_dir: None,
        labels: BTreeMap::new(),
        env: vec![],
        entrypoint,
    }
}

/// The pod sandbox's pause image: a shell that sleeps until SIGTERM or
/// SIGINT (as PID 1 a signal with no handler would be ignored).
pub fn pause_image() -> ImageSpec {
    busybox_image(vec![
        "/bin/sh".into(),
        "-c".into(),
        "trap 'exit 0' TERM INT; while :; do sleep 1; done".into(),
    ])
}

pub fn shell_image() -> ImageSpec {
    busybox_image(vec!["/bin/sh".into()])
}

/// Writes `spec` under `work` and imports it into the node's containerd as
/// `reference` and as `<repository>@<digest>`; returns the digest.
pub fn import(
    ctr: &Path,
    socket: &Path,
    work: &Path,
    spec: &ImageSpec,
    reference: &str,
) -> Result<String, String> {
    let name = reference.replace(['/', ':'], "_");
    let layout = work.join(&name);
    let written = write_layout(&layout, spec, Some(reference)).map_err(|e| format!("{e:#}"))?;
    let archive = work.join(format!("{name}.tar"));
    write_archive(&layout, &archive).map_err(|e| format!("{e:#}"))?;
    let address = socket.display().to_string();
    let ctr_run = |args: &[&str]| -> Result<(), String> {
        let out = Command::new(ctr)
            .args(["--address", &address, "--namespace", "k8s.io"])
            .args(args)
            .output()
            .map_err(|e| format!("running ctr: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ctr {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    ctr_run(&["images", "import", &archive.display().to_string()])?;
    let repository = reference.rsplit_once(':').map_or(reference, |(r, _)| r);
    let by_digest = format!("{repository}@{}", written.manifest_digest);
    ctr_run(&["images", "tag", "--force", reference, &by_digest])?;
    Ok(written.manifest_digest)
}

/// The images every node has: the pause image and the shell image.
pub fn import_base(ctr: &Path, socket: &Path, work: &Path) -> Result<(), String> {
    import(ctr, socket, work, &pause_image(), PAUSE_IMAGE)?;
    import(ctr, socket, work, &shell_image(), SHELL_IMAGE)?;
    Ok(())
}
