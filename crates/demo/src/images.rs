//! The demo's "images": folders laid out like the container images the
//! local executor runs, registered under the references the Jobs use.

use std::path::{Path, PathBuf};

use captf_testenv::executor::LocalImage;
use sha2::{Digest, Sha256};

/// The manager image: the Job's runner init container copies `/runner` out of it.
pub const MANAGER_IMAGE: &str = "local.demo/captf-manager:dev";

/// A module image built from one of the no-op modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleImage {
    pub reference: &'static str,
    /// The folder under `modules/noop`.
    pub role: &'static str,
}

pub const MODULE_IMAGES: [ModuleImage; 3] = [
    ModuleImage {
        reference: "local.demo/noop-cluster:dev",
        role: "cluster",
    },
    ModuleImage {
        reference: "local.demo/noop-machine:dev",
        role: "machine",
    },
    ModuleImage {
        reference: "local.demo/noop-machinepool:dev",
        role: "machinepool",
    },
];

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        // A local `tofu init` leaves these behind; an image would not hold them.
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(".terraform")
        {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// A stable stand-in for an image digest: the reference, and every file's
/// path with its content, or for a linked binary its target, size and
/// modification time (hashing a large binary on every start buys nothing).
fn folder_digest(reference: &str, root: &Path) -> std::io::Result<String> {
    fn walk(dir: &Path, root: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for path in entries {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            hasher.update(relative.to_string_lossy().as_bytes());
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_dir() {
                walk(&path, root, hasher)?;
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path)?;
                let target_meta = std::fs::metadata(&path)?;
                let modified = target_meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .unwrap_or_default();
                hasher.update(target.to_string_lossy().as_bytes());
                hasher.update(target_meta.len().to_le_bytes());
                hasher.update(modified.as_nanos().to_le_bytes());
            } else {
                hasher.update(std::fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut hasher = Sha256::new();
    hasher.update(reference.as_bytes());
    walk(root, root, &mut hasher)?;
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("sha256:{hex}"))
}

/// Lays out the manager image and one image per no-op module under `dir`
/// and returns them by reference: the manager image holds `/runner`; a
/// module image holds `/captf/module` and `/captf/runtime` (OpenTofu), as
/// the image contract says.
pub fn prepare(
    dir: &Path,
    runner: &Path,
    modules: &Path,
    tofu: &Path,
) -> Result<Vec<(String, LocalImage)>, String> {
    let io = |what: String| move |e: std::io::Error| format!("{what}: {e}");
    let mut images = Vec::new();
    let manager = dir.join("captf-manager");
    std::fs::create_dir_all(&manager).map_err(io(format!("creating {}", manager.display())))?;
    std::os::unix::fs::symlink(runner, manager.join("runner"))
        .map_err(io(format!("linking the runner into {}", manager.display())))?;
    images.push((MANAGER_IMAGE.to_owned(), manager));
    for m in MODULE_IMAGES {
        let root = dir.join(format!("noop-{}", m.role));
        let source = modules.join(m.role);
        copy_dir(&source, &root.join("captf/module"))
            .map_err(io(format!("copying module {}", source.display())))?;
        std::os::unix::fs::symlink(tofu, root.join("captf/runtime"))
            .map_err(io(format!("linking OpenTofu into {}", root.display())))?;
        images.push((m.reference.to_owned(), root));
    }
    images
        .into_iter()
        .map(|(reference, root)| {
            let digest = folder_digest(&reference, &root)
                .map_err(io(format!("hashing {}", root.display())))?;
            Ok((reference, LocalImage { root, digest }))
        })
        .collect()
}

/// The references a registry would serve `image` under: its tag, and its
/// repository with the digest (the form the manager pins once it has seen
/// the digest).
pub fn references(reference: &str, image: &LocalImage) -> [String; 2] {
    [
        reference.to_owned(),
        captf_testenv::executor::images::image_id(reference, &image.digest),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_follow_the_image_contract() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("runner"), "runner").unwrap();
        std::fs::write(bin.join("tofu"), "tofu").unwrap();
        let modules = tmp.path().join("modules");
        for role in ["cluster", "machine", "machinepool"] {
            std::fs::create_dir_all(modules.join(role).join(".terraform")).unwrap();
            std::fs::write(modules.join(role).join("main.tf"), role).unwrap();
        }
        let out = tmp.path().join("images");
        let images = prepare(&out, &bin.join("runner"), &modules, &bin.join("tofu")).unwrap();
        let refs: Vec<&str> = images.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(
            refs,
            [
                MANAGER_IMAGE,
                "local.demo/noop-cluster:dev",
                "local.demo/noop-machine:dev",
                "local.demo/noop-machinepool:dev"
            ]
        );
        let manager = &images[0].1.root;
        assert_eq!(
            std::fs::read_to_string(manager.join("runner")).unwrap(),
            "runner"
        );
        let pool = &images[3].1.root;
        assert_eq!(
            std::fs::read_to_string(pool.join("captf/module/main.tf")).unwrap(),
            "machinepool"
        );
        assert!(!pool.join("captf/module/.terraform").exists());
        assert_eq!(
            std::fs::read_to_string(pool.join("captf/runtime")).unwrap(),
            "tofu"
        );

        let digests: Vec<&str> = images.iter().map(|(_, i)| i.digest.as_str()).collect();
        assert!(
            digests
                .iter()
                .all(|d| d.len() == 71 && d.starts_with("sha256:"))
        );
        assert_ne!(digests[1], digests[3]);
        assert_ne!(digests[2], digests[3]);
        assert_eq!(
            references(refs[3], &images[3].1),
            [
                "local.demo/noop-machinepool:dev".to_owned(),
                format!("local.demo/noop-machinepool@{}", digests[3])
            ]
        );
        // Stable while nothing changes; a module edit changes it.
        assert_eq!(folder_digest(refs[3], pool).unwrap(), digests[3]);
        std::fs::write(pool.join("captf/module/main.tf"), "edited").unwrap();
        assert_ne!(folder_digest(refs[3], pool).unwrap(), digests[3]);
    }
}
