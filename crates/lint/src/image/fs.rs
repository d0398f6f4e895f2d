//! An image's file system rebuilt from its layers (whiteouts, opaque
//! directories, links), keeping metadata for every path and content only for
//! module files and provider-mirror indexes.

use super::ImageError;
use crate::config::load::{Entry, Fs, is_config_file};
use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub const MODULE_DIR: &str = "/captf/module";
pub const PROVIDERS_DIR: &str = "/captf/providers";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// The link target as written.
    Symlink(String),
    /// The absolute path of the linked file.
    Hardlink(String),
    Other,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub content: Option<Vec<u8>>,
}

/// Caps on what reading an image may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Content kept in memory, plus 512 bytes per tar header.
    pub kept: u64,
    /// Uncompressed bytes read over all layers.
    pub scanned: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            kept: 512 << 20,
            scanned: 32 * (512 << 20),
        }
    }
}

#[derive(Debug, Default)]
pub struct ImageFs {
    nodes: BTreeMap<String, Node>,
    kept: u64,
    scanned: u64,
}

/// Normalizes a path from a tar header or a link to `/a/b` form.
pub fn normalize(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|s| !s.is_empty()).collect()
    };
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn keeps_content(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    (path.starts_with(&format!("{MODULE_DIR}/")) && is_config_file(name))
        || (path.starts_with(&format!("{PROVIDERS_DIR}/")) && name.ends_with(".json"))
}

/// Counts the bytes read through it; the count stays readable while a tar
/// reader borrows it.
struct Counting<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

impl ImageFs {
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Paths strictly under `dir`, at any depth, in order.
    pub fn under<'a>(&'a self, dir: &str) -> impl Iterator<Item = (&'a String, &'a Node)> + 'a {
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        self.nodes
            .range(prefix.clone()..)
            .take_while(move |(k, _)| k.starts_with(&prefix))
    }

    /// Direct children of `dir`, including directories that exist only
    /// because something lies under them (`None` node).
    pub fn children(&self, dir: &str) -> Vec<(String, Option<&Node>)> {
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        let mut out: Vec<(String, Option<&Node>)> = Vec::new();
        for (k, _) in self.under(dir) {
            let first = k[prefix.len()..].split('/').next().unwrap_or_default();
            let child = format!("{prefix}{first}");
            if out.last().is_some_and(|(c, _)| *c == child) {
                continue;
            }
            let node = self.nodes.get(&child);
            out.push((child, node));
        }
        out
    }

    /// Adds one layer (a tar stream, gzip-compressed or not).
    pub fn apply_layer(&mut self, reader: impl Read, limits: &Limits) -> Result<(), ImageError> {
        let mut buffered = BufReader::new(reader);
        let head = buffered
            .fill_buf()
            .map_err(|e| ImageError::Fetch(format!("layer: {e}")))?
            .to_vec();
        let stream: Box<dyn Read + '_> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::GzDecoder::new(buffered))
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            return Err(ImageError::Fetch(
                "zstd-compressed layers are not supported".into(),
            ));
        } else {
            Box::new(buffered)
        };
        let count = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut counting = Counting {
            inner: stream,
            count: count.clone(),
        };
        let result = self.read_tar(&mut counting, &count, limits);
        // Drain the rest so a digest check at the end of the blob runs.
        let drained = match result {
            Ok(()) => io::copy(&mut counting, &mut io::sink()).map(|_| ()),
            Err(_) => Ok(()),
        };
        self.scanned += count.get();
        result?;
        drained.map_err(|e| ImageError::Fetch(format!("layer: {e}")))?;
        if self.scanned > limits.scanned {
            return Err(ImageError::TooLarge(format!(
                "the image's layers hold more than {} bytes",
                limits.scanned
            )));
        }
        Ok(())
    }

    fn read_tar<R: Read>(
        &mut self,
        r: &mut Counting<R>,
        count: &std::cell::Cell<u64>,
        limits: &Limits,
    ) -> Result<(), ImageError> {
        let bad = |e: io::Error| ImageError::Fetch(format!("layer: {e}"));
        let mut opaque = Vec::new();
        let mut whiteouts = Vec::new();
        let mut adds: Vec<(String, Node)> = Vec::new();
        let mut archive = tar::Archive::new(r);
        for entry in archive.entries().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            self.kept += 512;
            let raw = entry.path_bytes().into_owned();
            let path = normalize("/", &String::from_utf8_lossy(&raw));
            let name = path.rsplit('/').next().unwrap_or_default().to_string();
            if name == ".wh..wh..opq" {
                opaque.push(parent(&path).to_string());
                continue;
            }
            if let Some(hidden) = name.strip_prefix(".wh.") {
                whiteouts.push(normalize(parent(&path), hidden));
                continue;
            }
            if path == "/" {
                continue;
            }
            let h = entry.header();
            let mode = h.mode().unwrap_or(0);
            let uid = h.uid().unwrap_or(0);
            let gid = h.gid().unwrap_or(0);
            let link = || {
                entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            };
            let kind = match h.entry_type() {
                tar::EntryType::Regular | tar::EntryType::Continuous => Kind::File,
                tar::EntryType::Directory => Kind::Dir,
                tar::EntryType::Symlink => Kind::Symlink(link()),
                tar::EntryType::Link => Kind::Hardlink(normalize("/", &link())),
                _ => Kind::Other,
            };
            let content = if kind == Kind::File && keeps_content(&path) {
                let mut buf = Vec::new();
                entry.read_to_end(&mut buf).map_err(bad)?;
                self.kept += buf.len() as u64;
                Some(buf)
            } else {
                None
            };
            if self.kept > limits.kept {
                return Err(ImageError::TooLarge(format!(
                    "the image's module and mirror content exceeds {} bytes",
                    limits.kept
                )));
            }
            if self.scanned + count.get() > limits.scanned {
                return Err(ImageError::TooLarge(format!(
                    "the image's layers hold more than {} bytes",
                    limits.scanned
                )));
            }
            adds.push((
                path,
                Node {
                    kind,
                    mode,
                    uid,
                    gid,
                    content,
                },
            ));
        }
        for dir in opaque {
            let doomed: Vec<String> = self.under(&dir).map(|(k, _)| k.clone()).collect();
            doomed.iter().for_each(|k| {
                self.nodes.remove(k);
            });
        }
        for path in whiteouts {
            self.remove_tree(&path);
        }
        for (path, node) in adds {
            let is_dir = node.kind == Kind::Dir;
            if !is_dir || self.nodes.get(&path).is_some_and(|n| n.kind != Kind::Dir) {
                self.remove_tree(&path);
            }
            self.nodes.insert(path, node);
        }
        Ok(())
    }

    fn remove_tree(&mut self, path: &str) {
        let doomed: Vec<String> = self.under(path).map(|(k, _)| k.clone()).collect();
        for k in doomed {
            self.nodes.remove(&k);
        }
        self.nodes.remove(path);
    }

    /// Resolves every symlink along `path` (the last one too when
    /// `follow_last`); `None` when some part does not exist.
    pub fn resolve(&self, path: &str, follow_last: bool) -> Option<String> {
        let mut pending: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut current = "/".to_string();
        let mut hops = 0;
        while let Some(c) = pending.pop() {
            if c == "." {
                continue;
            }
            if c == ".." {
                current = parent(&current).to_string();
                continue;
            }
            let candidate = normalize(&current, &c);
            let Some(node) = self.nodes.get(&candidate) else {
                // Layers may omit parent directories: a path with
                // something under it is a directory.
                if self.under(&candidate).next().is_some() {
                    current = candidate;
                    continue;
                }
                return None;
            };
            match &node.kind {
                Kind::Symlink(target) if follow_last || !pending.is_empty() => {
                    hops += 1;
                    if hops > 40 {
                        return None;
                    }
                    if target.starts_with('/') {
                        current = "/".to_string();
                    }
                    for part in target.split('/').filter(|s| !s.is_empty()).rev() {
                        pending.push(part.to_string());
                    }
                }
                _ => {
                    if !pending.is_empty() && node.kind != Kind::Dir {
                        return None;
                    }
                    current = candidate;
                }
            }
        }
        Some(current)
    }

    /// The node at a resolved path, with hardlinks followed to their file.
    pub fn file_node(&self, resolved: &str) -> Option<&Node> {
        let node = self.nodes.get(resolved)?;
        match &node.kind {
            Kind::Hardlink(target) => {
                let t = self.resolve(target, true)?;
                let n = self.nodes.get(&t)?;
                (n.kind == Kind::File).then_some(n)
            }
            Kind::File => Some(node),
            _ => None,
        }
    }

    pub fn is_dir(&self, resolved: &str) -> bool {
        resolved == "/"
            || match self.nodes.get(resolved) {
                Some(n) => n.kind == Kind::Dir,
                None => self.under(resolved).next().is_some(),
            }
    }
}

fn path_str(p: &Path) -> io::Result<String> {
    p.to_str()
        .map(|s| normalize("/", s))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "non-UTF-8 path"))
}

impl Fs for ImageFs {
    fn list(&self, dir: &Path) -> io::Result<Vec<Entry>> {
        let dir = path_str(dir)?;
        let resolved = self
            .resolve(&dir, true)
            .filter(|d| self.is_dir(d))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, dir.clone()))?;
        Ok(self
            .children(&resolved)
            .into_iter()
            .map(|(k, n)| {
                let name = k.rsplit('/').next().unwrap_or_default().to_string();
                let is_symlink = n.is_some_and(|n| matches!(n.kind, Kind::Symlink(_)));
                let target = self.resolve(&k, true);
                let is_file = match &target {
                    Some(r) => self.file_node(r).is_some(),
                    // A dangling link to a module file still counts as one.
                    None => is_symlink,
                };
                Entry {
                    name,
                    is_file,
                    is_symlink,
                }
            })
            .collect())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let p = path_str(path)?;
        let resolved = self
            .resolve(&p, true)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, p.clone()))?;
        let node = self.file_node(&resolved).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{p} is not a regular file"),
            )
        })?;
        node.content.clone().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{p}: content outside the module is not kept"),
            )
        })
    }

    fn canonical(&self, path: &Path) -> io::Result<PathBuf> {
        let p = path_str(path)?;
        self.resolve(&p, true)
            .map(PathBuf::from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn layer(entries: &[(&str, tar::EntryType, &str, u32)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data, mode) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(*mode);
            h.set_mtime(0);
            match kind {
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    h.set_size(0);
                    b.append_link(&mut h, path, data).unwrap();
                }
                _ => {
                    h.set_size(data.len() as u64);
                    b.append_data(&mut h, path, data.as_bytes()).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    use tar::EntryType::{Directory as D, Link as H, Regular as F, Symlink as S};

    #[test]
    fn layers_whiteouts_and_links() {
        let mut fs = ImageFs::default();
        let l1 = layer(&[
            ("captf/", D, "", 0o755),
            ("captf/module/", D, "", 0o755),
            ("captf/module/main.tf", F, "locals {}\n", 0o644),
            ("captf/module/old.tf", F, "", 0o644),
            ("captf/work/", D, "", 0o755),
            ("captf/work/x", F, "x", 0o644),
            ("usr/bin/tofu", F, "bin", 0o755),
        ]);
        let l2 = layer(&[
            ("captf/module/.wh.old.tf", F, "", 0),
            ("captf/work/.wh..wh..opq", F, "", 0),
            ("captf/runtime", S, "/usr/bin/tofu", 0o777),
            ("captf/module/link.tf", H, "captf/module/main.tf", 0o644),
        ]);
        let limits = Limits::default();
        fs.apply_layer(&l1[..], &limits).unwrap();
        fs.apply_layer(&l2[..], &limits).unwrap();
        assert!(fs.get("/captf/module/old.tf").is_none());
        assert!(fs.get("/captf/work/x").is_none());
        assert!(fs.get("/captf/work").is_some());
        assert_eq!(fs.resolve("/captf/runtime", true).unwrap(), "/usr/bin/tofu");
        let names: Vec<_> = fs
            .list(Path::new(MODULE_DIR))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["link.tf", "main.tf"]);
        assert_eq!(
            fs.read(Path::new("/captf/module/link.tf")).unwrap(),
            b"locals {}\n"
        );
    }

    #[test]
    fn gzip_layers_and_caps() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let raw = layer(&[("captf/module/main.tf", F, "locals {}\n", 0o644)]);
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).unwrap();
        let gz = gz.finish().unwrap();
        let mut fs = ImageFs::default();
        fs.apply_layer(&gz[..], &Limits::default()).unwrap();
        assert!(fs.get("/captf/module/main.tf").is_some());
        let tiny = Limits {
            kept: 100,
            scanned: u64::MAX,
        };
        assert!(matches!(
            ImageFs::default().apply_layer(&raw[..], &tiny),
            Err(ImageError::TooLarge(_))
        ));
        let tiny = Limits {
            kept: u64::MAX,
            scanned: 100,
        };
        assert!(matches!(
            ImageFs::default().apply_layer(&raw[..], &tiny),
            Err(ImageError::TooLarge(_))
        ));
    }
}
