//! Images for the real node: written by the project's image writer as OCI
//! layouts, packed (kept by content between runs), imported into the node's
//! containerd once per content and tagged with each reference a test gives
//! and by digest (`name@sha256:…`), so the kubelet reports an `imageID`
//! with a repository digest as a registry pull would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use captf_images::layout::{
    Content, Entry, ImageSpec, REF_NAME, sha256, write_archive, write_layout,
};

use super::config::PAUSE_IMAGE;
use super::runtime::Runtime;

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

/// `spec` with a shell at `/bin/sh` and the tools a module's `local-exec`
/// provisioner may call (busybox), for test modules that sleep.
pub fn with_shell(mut spec: ImageSpec) -> ImageSpec {
    let shell = busybox_image(vec![]);
    let have: std::collections::BTreeSet<String> =
        spec.entries.iter().map(|e| e.path.clone()).collect();
    spec.entries.extend(
        shell
            .entries
            .into_iter()
            .filter(|e| !have.contains(&e.path) && e.path != "/tmp"),
    );
    for applet in ["sleep", "cat", "echo"] {
        spec.entries.push(Entry {
            path: format!("/bin/{applet}"),
            content: Content::Symlink("busybox".into()),
            mode: 0o777,
            owner: 0,
        });
    }
    spec
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

/// Where packed images are kept between runs, by content: a test process
/// imports an image it has built before without packing it again.
fn archive_cache() -> PathBuf {
    std::env::temp_dir().join("captf-image-archives")
}

/// Files above this size are known by path, size and modification time
/// (binaries of the asset cache and the build); smaller ones by content, so
/// a module copied into each test's folder is one image.
const HASHED_UP_TO: u64 = 4 << 20;

/// A name for what `spec` holds: its entries, its config and its labels.
fn content_key(spec: &ImageSpec) -> Result<String, String> {
    let mut described = format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}\n",
        spec.user, spec.working_dir, spec.labels, spec.env, spec.entrypoint
    );
    for e in &spec.entries {
        let content = match &e.content {
            Content::HostFile(from) => host_file_key(from)
                .map_err(|err| format!("reading {} for {}: {err}", from.display(), e.path))?,
            Content::Bytes(bytes) => format!("bytes {}", sha256(bytes)),
            other => format!("{other:?}"),
        };
        described.push_str(&format!("{} {:o} {} {content}\n", e.path, e.mode, e.owner));
    }
    let hash = sha256(described.as_bytes());
    Ok(hash["sha256:".len()..][..32].to_owned())
}

fn host_file_key(from: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(from)?;
    if meta.len() <= HASHED_UP_TO {
        return Ok(format!("bytes {}", sha256(&std::fs::read(from)?)));
    }
    let modified = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(format!(
        "file {} {} {}",
        from.display(),
        meta.len(),
        modified.as_nanos()
    ))
}

/// The packed image of `spec` (named `captf.test/cache:<key>` in its
/// index) and its digest, packed now unless an earlier run left it.
fn packed(spec: &ImageSpec, key: &str, work: &Path) -> Result<(PathBuf, String), String> {
    let cache = archive_cache();
    let archive = cache.join(format!("{key}.tar"));
    let digest_file = cache.join(format!("{key}.digest"));
    if let (true, Ok(digest)) = (archive.is_file(), std::fs::read_to_string(&digest_file)) {
        // Used now: the prune keeps it.
        let _ = std::fs::File::options()
            .append(true)
            .open(&archive)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return Ok((archive, digest));
    }
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let layout = work.join(key);
    let written =
        write_layout(&layout, spec, Some(&cached_name(key))).map_err(|e| format!("{e:#}"))?;
    // Written aside and renamed: a process that dies mid-way, or another
    // packing the same image, never leaves half an archive under the name.
    let partial = cache.join(format!("{key}.{}.partial", std::process::id()));
    write_archive(&layout, &partial).map_err(|e| format!("{e:#}"))?;
    let _ = std::fs::remove_dir_all(&layout);
    std::fs::write(&digest_file, &written.manifest_digest)
        .map_err(|e| format!("writing {}: {e}", digest_file.display()))?;
    std::fs::rename(&partial, &archive)
        .map_err(|e| format!("keeping {}: {e}", archive.display()))?;
    Ok((archive, written.manifest_digest))
}

fn cached_name(key: &str) -> String {
    format!("captf.test/cache:{key}")
}

/// What each node's runtime already holds, by its socket and the content
/// key: the digest.
static IMPORTED: Mutex<BTreeMap<(PathBuf, String), String>> = Mutex::new(BTreeMap::new());

/// Puts `spec` in the node's runtime as `reference` and as
/// `<repository>@<digest>` (so the kubelet reports an `imageID` with a
/// repository digest, as after a registry pull); returns the digest. The
/// same content is packed and imported once: another reference is a tag.
pub fn import(
    runtime: &Runtime,
    work: &Path,
    spec: &ImageSpec,
    reference: &str,
) -> Result<String, String> {
    let key = content_key(spec)?;
    let mut imported = IMPORTED.lock().unwrap_or_else(|p| p.into_inner());
    let held = (runtime.socket.clone(), key.clone());
    let digest = match imported.get(&held) {
        Some(digest) => digest.clone(),
        None => {
            let (archive, digest) = packed(spec, &key, work)?;
            runtime.import_archive(&archive)?;
            imported.insert(held, digest.clone());
            digest
        }
    };
    drop(imported);
    runtime.tag(&cached_name(&key), reference)?;
    let repository = reference.rsplit_once(':').map_or(reference, |(r, _)| r);
    runtime.tag(&cached_name(&key), &format!("{repository}@{digest}"))?;
    Ok(digest)
}

/// Puts the image of the OCI layout at `layout` in the node's runtime as
/// `reference` and as `<repository>@<digest>`; returns the digest.
pub fn import_layout(
    runtime: &Runtime,
    work: &Path,
    layout: &Path,
    reference: &str,
) -> Result<String, String> {
    let name = reference.replace(['/', ':', '@'], "_");
    let named = work.join(format!("{name}.layout"));
    let digest = named_layout(layout, &named, reference)?;
    let archive = work.join(format!("{name}.tar"));
    write_archive(&named, &archive).map_err(|e| format!("{e:#}"))?;
    let _ = std::fs::remove_dir_all(&named);
    let imported = runtime.import_archive(&archive);
    let _ = std::fs::remove_file(&archive);
    imported?;
    let repository = reference.rsplit_once(':').map_or(reference, |(r, _)| r);
    runtime.tag(reference, &format!("{repository}@{digest}"))?;
    Ok(digest)
}

/// A copy of `layout` at `to` (blobs hard-linked) whose index names its
/// image `reference` in full: the runtime's import names an image by that
/// annotation, and a bare tag (`v0.1.0`) would become a made-up name the
/// kubelet's runtime cannot resolve. Returns the image's digest.
fn named_layout(layout: &Path, to: &Path, reference: &str) -> Result<String, String> {
    fn io(what: &Path) -> impl Fn(std::io::Error) -> String + '_ {
        move |e| format!("{}: {e}", what.display())
    }
    let blobs = layout.join("blobs/sha256");
    let to_blobs = to.join("blobs/sha256");
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(&to_blobs).map_err(io(&to_blobs))?;
    for entry in std::fs::read_dir(&blobs).map_err(io(&blobs))? {
        let from = entry.map_err(io(&blobs))?.path();
        let target = to_blobs.join(from.file_name().unwrap_or_default());
        if std::fs::hard_link(&from, &target).is_err() {
            std::fs::copy(&from, &target).map_err(io(&from))?;
        }
    }
    let index_path = layout.join("index.json");
    let text = std::fs::read_to_string(&index_path).map_err(io(&index_path))?;
    let mut index: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", index_path.display()))?;
    let manifest = index["manifests"]
        .get_mut(0)
        .ok_or_else(|| format!("{} names no manifest", index_path.display()))?;
    let digest = manifest["digest"]
        .as_str()
        .ok_or_else(|| format!("{} names no digest", index_path.display()))?
        .to_owned();
    manifest["annotations"][REF_NAME] = reference.into();
    let written = serde_json::to_vec(&index).map_err(|e| e.to_string())?;
    std::fs::write(to.join("index.json"), written).map_err(io(to))?;
    std::fs::copy(layout.join("oci-layout"), to.join("oci-layout")).map_err(io(layout))?;
    Ok(digest)
}

/// How long a packed image unused stays: a rebuilt binary makes a new
/// archive, and the old ones must not pile up.
const KEPT_UNUSED: std::time::Duration = std::time::Duration::from_secs(2 * 24 * 3600);

/// Removes the packed images no run has used for [`KEPT_UNUSED`].
fn prune_archives() {
    prune_archives_in(&archive_cache(), std::time::SystemTime::now());
}

/// [`prune_archives`] of the cache `dir` as of `now`.
fn prune_archives_in(dir: &Path, now: std::time::SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let age = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if extension == "tar" && age > KEPT_UNUSED {
            let _ = std::fs::remove_file(path.with_extension("digest"));
            let _ = std::fs::remove_file(&path);
        } else if extension == "partial" && age > std::time::Duration::from_secs(3600) {
            // Left by a process that died while packing.
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The images every node has: the pause image and the shell image (and
/// the cache of packed images pruned).
pub fn import_base(runtime: &Runtime, work: &Path) -> Result<(), String> {
    prune_archives();
    import(runtime, work, &pause_image(), PAUSE_IMAGE)?;
    import(runtime, work, &shell_image(), SHELL_IMAGE)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_images::layout::Entry;
    use std::time::{Duration, SystemTime};

    fn file_image(path: &Path) -> ImageSpec {
        ImageSpec {
            entries: vec![Entry {
                path: "/captf/module/main.tf".into(),
                content: Content::HostFile(path.to_path_buf()),
                mode: 0o644,
                owner: 65532,
            }],
            user: "65532:65532".into(),
            working_dir: None,
            labels: Default::default(),
            env: vec![],
            entrypoint: vec![],
        }
    }

    #[test]
    fn small_files_are_known_by_content_and_large_ones_by_path_size_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.tf"), dir.path().join("b.tf"));
        std::fs::write(&a, "resource x {}").unwrap();
        std::fs::write(&b, "resource x {}").unwrap();
        let key = |p: &Path| content_key(&file_image(p)).unwrap();
        assert_eq!(
            key(&a),
            key(&b),
            "the same module copied twice is one image"
        );
        std::fs::write(&b, "resource y {}").unwrap();
        assert_ne!(key(&a), key(&b));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; HASHED_UP_TO as usize + 1]).unwrap();
        let before = key(&big);
        let file = std::fs::File::options().write(true).open(&big).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1))
            .unwrap();
        assert_ne!(key(&big), before, "a rebuilt binary is a new image");
    }

    #[test]
    fn archives_unused_for_two_days_and_stale_partials_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let aged = |name: &str, age: Duration| {
            let path = dir.path().join(name);
            std::fs::write(&path, "x").unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(now - age).unwrap();
            path
        };
        let hour = Duration::from_secs(3600);
        let old = aged("old.tar", KEPT_UNUSED + hour);
        let old_digest = aged("old.digest", KEPT_UNUSED + hour);
        let fresh = aged("fresh.tar", hour);
        let stale_partial = aged("dead.partial", 2 * hour);
        let live_partial = aged("live.partial", Duration::from_secs(60));
        prune_archives_in(dir.path(), now);
        assert!(
            !old.exists() && !old_digest.exists(),
            "an unused archive goes with its digest"
        );
        assert!(fresh.exists());
        assert!(!stale_partial.exists(), "a dead packer's leftover goes");
        assert!(live_partial.exists(), "a packer at work keeps its file");
    }
}
