//! Writing an image as an OCI image layout directory (and a tarball of it)
//! without a container engine. One layer, every header fixed (mtime 0,
//! sorted paths, numeric owners, no user or group names), so the same
//! inputs always give the same digests.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What one path of the image holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Dir,
    /// A file copied from the build machine.
    HostFile(PathBuf),
    Bytes(Vec<u8>),
    Symlink(String),
}

/// One path of the image's file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Absolute path inside the image, e.g. `/captf/module/main.tf`.
    pub path: String,
    pub content: Content,
    pub mode: u32,
    /// Numeric uid and gid of the owner.
    pub owner: u64,
}

/// Everything an image is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    pub entries: Vec<Entry>,
    /// The config's `User`, e.g. `65532:65532`.
    pub user: String,
    pub working_dir: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    /// The config's `Entrypoint` (none when empty): the provider's images
    /// have none (the Job names its command); a test's pause image does.
    pub entrypoint: Vec<String>,
}

/// What a layout holds once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `sha256:<hex>` of the manifest: the image's digest.
    pub manifest_digest: String,
    pub layer_bytes: u64,
}

pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The index annotation tools (skopeo `oci:<dir>:<tag>`) find a tag by.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The tag part of an image reference (`repo:tag` → `tag`); `None` for a
/// digest reference or one without a tag.
pub fn tag_of(reference: &str) -> Option<&str> {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    if last.contains('@') {
        return None;
    }
    last.rsplit_once(':').map(|(_, tag)| tag)
}

/// The entries sorted by path with every missing parent directory added
/// (root-owned, 0755), so a tar reader never meets a child first.
fn complete_tree(entries: &[Entry]) -> Result<Vec<Entry>> {
    let mut by_path: BTreeMap<String, Entry> = BTreeMap::new();
    for e in entries {
        let path = e.path.trim_matches('/').to_string();
        if path.is_empty()
            || path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
        {
            bail!("image path {:?} is not a clean absolute path", e.path);
        }
        if by_path
            .insert(path.clone(), Entry { path, ..e.clone() })
            .is_some()
        {
            bail!("image path {:?} is listed twice", e.path);
        }
    }
    let parents: Vec<String> = by_path
        .keys()
        .flat_map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            (1..parts.len())
                .map(|n| parts[..n].join("/"))
                .collect::<Vec<_>>()
        })
        .collect();
    for parent in parents {
        by_path.entry(parent.clone()).or_insert(Entry {
            path: parent,
            content: Content::Dir,
            mode: 0o755,
            owner: 0,
        });
    }
    Ok(by_path.into_values().collect())
}

/// The uncompressed layer tarball.
pub fn layer_tar(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in complete_tree(entries)? {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(e.owner);
        header.set_gid(e.owner);
        header.set_mode(e.mode);
        match &e.content {
            Content::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder.append_data(&mut header, format!("{}/", e.path), std::io::empty())?;
            }
            Content::HostFile(from) => {
                let bytes = std::fs::read(from)
                    .with_context(|| format!("reading {} for /{}", from.display(), e.path))?;
                append_file(&mut builder, &mut header, &e.path, &bytes)?;
            }
            Content::Bytes(bytes) => append_file(&mut builder, &mut header, &e.path, bytes)?,
            Content::Symlink(target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                builder.append_link(&mut header, &e.path, target)?;
            }
        }
    }
    Ok(builder.into_inner()?)
}

fn append_file(
    builder: &mut tar::Builder<Vec<u8>>,
    header: &mut tar::Header,
    path: &str,
    bytes: &[u8],
) -> Result<()> {
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(bytes.len() as u64);
    builder.append_data(header, path, bytes)?;
    Ok(())
}

fn gzip(raw: &[u8]) -> Result<Vec<u8>> {
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    gz.write_all(raw)?;
    Ok(gz.finish()?)
}

fn put_blob(dir: &Path, media_type: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    let digest = sha256(bytes);
    let path = dir.join("blobs/sha256").join(&digest["sha256:".len()..]);
    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(serde_json::json!({ "mediaType": media_type, "digest": digest, "size": bytes.len() }))
}

/// The image config document (linux/amd64: the only platform built here).
fn config_json(spec: &ImageSpec, diff_id: &str) -> serde_json::Value {
    let mut config = serde_json::json!({
        "User": spec.user,
        "Labels": spec.labels,
    });
    if !spec.env.is_empty() {
        config["Env"] = serde_json::json!(spec.env);
    }
    if let Some(dir) = &spec.working_dir {
        config["WorkingDir"] = serde_json::json!(dir);
    }
    if !spec.entrypoint.is_empty() {
        config["Entrypoint"] = serde_json::json!(spec.entrypoint);
    }
    serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
    })
}

/// Writes `spec` as an OCI image layout at `dir` (replacing what was
/// there), tagged `tag` in its index.
pub fn write_layout(dir: &Path, spec: &ImageSpec, tag: Option<&str>) -> Result<Written> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("blobs/sha256"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let raw = layer_tar(&spec.entries)?;
    let layer = put_blob(dir, LAYER_MEDIA_TYPE, &gzip(&raw)?)?;
    let config = serde_json::to_vec(&config_json(spec, &sha256(&raw)))?;
    let config = put_blob(dir, CONFIG_MEDIA_TYPE, &config)?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config,
        "layers": [layer],
    });
    let mut descriptor = put_blob(dir, MANIFEST_MEDIA_TYPE, &serde_json::to_vec(&manifest)?)?;
    descriptor["platform"] = serde_json::json!({ "architecture": "amd64", "os": "linux" });
    if let Some(tag) = tag {
        descriptor["annotations"] = serde_json::json!({ REF_NAME: tag });
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [descriptor],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index)?)?;
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(Written {
        manifest_digest: descriptor["digest"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        layer_bytes: layer["size"].as_u64().unwrap_or_default(),
    })
}

/// Packs a layout directory into one tarball (`oci-archive:` for skopeo,
/// `crane push` of the unpacked layout works too), entries sorted.
pub fn write_archive(layout: &Path, archive: &Path) -> Result<()> {
    let mut files = Vec::new();
    collect_files(layout, layout, &mut files)?;
    files.sort();
    let mut builder = tar::Builder::new(std::fs::File::create(archive)?);
    for relative in files {
        let bytes = std::fs::read(layout.join(&relative))?;
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        builder.append_data(&mut header, &relative, &bytes[..])?;
    }
    builder.into_inner()?.flush()?;
    Ok(())
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(root, &path, out)?;
        } else {
            out.push(path.strip_prefix(root)?.to_path_buf());
        }
    }
    Ok(())
}

/// The manifest of the layout's (first) image and its digest.
fn first_manifest(layout: &Path) -> Result<(String, serde_json::Value)> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .context("index without a manifest")?
        .to_string();
    let manifest = serde_json::from_slice(&std::fs::read(blob_path(layout, &digest))?)?;
    Ok((digest, manifest))
}

fn blob_path(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

/// Unpacks the layers of the layout's image into `dest` (as a container
/// runtime would before starting it, modes kept) and returns the image's
/// digest.
pub fn unpack(layout: &Path, dest: &Path) -> Result<String> {
    let (digest, manifest) = first_manifest(layout)?;
    std::fs::create_dir_all(dest)?;
    for layer in manifest["layers"]
        .as_array()
        .context("manifest without layers")?
    {
        let blob = layer["digest"].as_str().context("layer without a digest")?;
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(blob_path(layout, blob))?);
        let mut archive = tar::Archive::new(gz);
        archive.set_preserve_permissions(true);
        archive
            .unpack(dest)
            .with_context(|| format!("unpacking layer {blob} into {}", dest.display()))?;
    }
    Ok(digest)
}

/// The files of the image's single layer, read back from a layout: path
/// (without the leading `/`) to content. For tests and checks.
pub fn read_layer_files(layout: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let blob = |digest: &str| blob_path(layout, digest);
    let (_, manifest) = first_manifest(layout)?;
    let mut files = BTreeMap::new();
    for layer in manifest["layers"]
        .as_array()
        .context("manifest without layers")?
    {
        let digest = layer["digest"].as_str().context("layer without a digest")?;
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(blob(digest))?);
        let mut archive = tar::Archive::new(gz);
        for entry in archive.entries()? {
            let mut entry = entry?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let path = entry.path()?.to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes)?;
            files.insert(path, bytes);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entries: Vec<Entry>) -> ImageSpec {
        ImageSpec {
            entries,
            user: "65532:65532".into(),
            working_dir: None,
            labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            env: vec![],
            entrypoint: vec![],
        }
    }

    fn file(path: &str, bytes: &str) -> Entry {
        Entry {
            path: path.into(),
            content: Content::Bytes(bytes.as_bytes().to_vec()),
            mode: 0o644,
            owner: 65532,
        }
    }

    #[test]
    fn the_same_inputs_give_the_same_digest_and_a_changed_byte_another() {
        let dir = tempfile::tempdir().unwrap();
        let one = write_layout(
            &dir.path().join("1"),
            &spec(vec![file("/x/y", "1")]),
            Some("v1"),
        )
        .unwrap();
        let two = write_layout(
            &dir.path().join("2"),
            &spec(vec![file("/x/y", "1")]),
            Some("v1"),
        )
        .unwrap();
        let other = write_layout(
            &dir.path().join("3"),
            &spec(vec![file("/x/y", "2")]),
            Some("v1"),
        )
        .unwrap();
        assert_eq!(one, two);
        assert_ne!(one.manifest_digest, other.manifest_digest);
    }

    #[test]
    fn parents_come_first_and_paths_must_be_clean() {
        let tree = complete_tree(&[file("/a/b/c", "x"), file("/a-b", "y")]).unwrap();
        let paths: Vec<&str> = tree.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a", "a-b", "a/b", "a/b/c"]);
        assert!(complete_tree(&[file("/a/../b", "x")]).is_err());
        assert!(complete_tree(&[file("/a", "x"), file("a/", "y")]).is_err());
    }

    #[test]
    fn tags_are_read_from_references() {
        assert_eq!(tag_of("ghcr.io/o/r:v1"), Some("v1"));
        assert_eq!(tag_of("localhost:5000/o/r"), None);
        assert_eq!(tag_of("r@sha256:00"), None);
    }

    #[test]
    fn a_written_layout_reads_back_with_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("img");
        write_layout(
            &layout,
            &spec(vec![file("/captf/module/main.tf", "{}")]),
            None,
        )
        .unwrap();
        let files = read_layer_files(&layout).unwrap();
        assert_eq!(files["captf/module/main.tf"], b"{}");
        write_archive(&layout, &dir.path().join("img.tar")).unwrap();
        let names: Vec<String> =
            tar::Archive::new(std::fs::File::open(dir.path().join("img.tar")).unwrap())
                .entries()
                .unwrap()
                .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
                .collect();
        assert!(
            names.contains(&"index.json".to_string()) && names.contains(&"oci-layout".to_string())
        );
    }
}
