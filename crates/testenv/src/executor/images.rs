//! The executor's images: a map from image reference to a folder laid out
//! like the image's filesystem, and the copy of that folder each container
//! runs in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// One local "image".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    /// Folder holding the image's files, e.g. `captf/module/main.tf`.
    pub root: PathBuf,
    /// `sha256:<hex>`, reported in the pod status as a runtime would.
    pub digest: String,
}

impl LocalImage {
    /// `spec` written by the image writer and unpacked into `dir`, as a
    /// runtime would before a container starts: the same files and digest
    /// a real node runs.
    pub fn unpacked(spec: &captf_images::layout::ImageSpec, dir: &Path) -> Result<Self, String> {
        let layout = dir.with_extension("layout");
        let written = captf_images::layout::write_layout(&layout, spec, None)
            .map_err(|e| format!("writing {}: {e:#}", layout.display()))?;
        captf_images::layout::unpack(&layout, dir)
            .map_err(|e| format!("unpacking into {}: {e:#}", dir.display()))?;
        let _ = std::fs::remove_dir_all(&layout);
        Ok(LocalImage {
            root: dir.to_path_buf(),
            digest: written.manifest_digest,
        })
    }

    /// The names a registry serves it under: `reference`, and its
    /// repository with the digest (what the manager pins).
    pub fn references(&self, reference: &str) -> [String; 2] {
        [reference.to_owned(), image_id(reference, &self.digest)]
    }
}

/// Image references the executor can "pull". Shared: tests register images
/// while the executor runs.
#[derive(Debug, Clone, Default)]
pub struct ImageMap(Arc<RwLock<HashMap<String, LocalImage>>>);

impl ImageMap {
    pub fn insert(&self, reference: impl Into<String>, image: LocalImage) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(reference.into(), image);
    }

    /// Forgets `reference`, as a registry that collected it would: pods
    /// that ask for it from now on wait in `ErrImagePull`.
    pub fn remove(&self, reference: &str) -> Option<LocalImage> {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(reference)
    }

    pub fn get(&self, reference: &str) -> Option<LocalImage> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(reference)
            .cloned()
    }
}

/// The `imageID` a runtime reports: the repository joined to the digest.
pub fn image_id(reference: &str, digest: &str) -> String {
    format!("{}@{digest}", captf_api::admission::repository(reference))
}

/// Copies `src` into `dst` as hard links (copies across file systems).
/// Relative symlinks stay symlinks; a symlink pointing outside the image
/// (an absolute path on the host) is replaced by what it points to, since
/// the host path will not exist inside the container.
pub fn materialize(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&from)?;
            if target.is_absolute() {
                link_or_copy(&std::fs::canonicalize(&from)?, &to)?;
            } else {
                std::os::unix::fs::symlink(target, &to)?;
            }
        } else if kind.is_dir() {
            materialize(&from, &to)?;
        } else {
            link_or_copy(&from, &to)?;
        }
    }
    Ok(())
}

fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    if from.is_dir() {
        return materialize(from, to);
    }
    std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_id_joins_repository_and_digest() {
        assert_eq!(image_id("r.io/a:v1", "sha256:00"), "r.io/a@sha256:00");
        assert_eq!(
            image_id("localhost:5000/a:v1", "sha256:00"),
            "localhost:5000/a@sha256:00"
        );
    }

    #[test]
    fn materialize_links_files_and_resolves_outside_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("tofu");
        std::fs::write(&outside, "binary").unwrap();
        let src = tmp.path().join("image");
        std::fs::create_dir_all(src.join("captf/module")).unwrap();
        std::fs::write(src.join("captf/module/main.tf"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, src.join("captf/runtime")).unwrap();
        std::os::unix::fs::symlink("module/main.tf", src.join("captf/rel")).unwrap();

        let dst = tmp.path().join("rootfs");
        materialize(&src, &dst).unwrap();
        assert_eq!(
            std::fs::read_to_string(dst.join("captf/module/main.tf")).unwrap(),
            "x"
        );
        let runtime = dst.join("captf/runtime");
        assert!(!runtime.symlink_metadata().unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&runtime).unwrap(), "binary");
        assert_eq!(
            std::fs::read_link(dst.join("captf/rel")).unwrap(),
            PathBuf::from("module/main.tf")
        );
    }
}
