//! Loads a module directory and the local modules it calls: which files
//! count, the Terraform and OpenTofu file sets, override files, nested calls
//! and the paths that leave the module.

use super::expr::Const;
use super::ir::{self, Attr, Block, ParseError};
use crate::report::{Finding, Severity};
use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Read access to a file tree: the disk, or an image's reconstructed files.
pub trait Fs {
    fn list(&self, dir: &Path) -> io::Result<Vec<Entry>>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The path with every symlink resolved; an error when it does not exist.
    fn canonical(&self, path: &Path) -> io::Result<PathBuf>;
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// Kind after following symlinks.
    pub is_file: bool,
    pub is_symlink: bool,
}

/// The real file system.
pub struct DiskFs;

impl Fs for DiskFs {
    fn list(&self, dir: &Path) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let is_symlink = e.file_type()?.is_symlink();
            let is_file = std::fs::metadata(e.path()).map(|m| m.is_file()).unwrap_or(
                // A dangling link to a module file still counts as one.
                is_symlink,
            );
            out.push(Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_file,
                is_symlink,
            });
        }
        Ok(out)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn canonical(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: String,
    /// Path relative to the linted root.
    pub rel: String,
    pub blocks: Vec<Block>,
}

impl SourceFile {
    pub fn is_tofu(&self) -> bool {
        self.name.ends_with(".tofu") || self.name.ends_with(".tofu.json")
    }
}

/// One module directory of the local tree.
#[derive(Debug, Clone)]
pub struct ModuleDir {
    /// Directory relative to the root, `""` for the root itself.
    pub rel_dir: String,
    pub files: Vec<SourceFile>,
    /// Declarations Terraform sees, overrides applied.
    pub terraform: Vec<Block>,
    /// Declarations OpenTofu sees, overrides applied.
    pub opentofu: Vec<Block>,
    pub has_tf: bool,
    pub has_tofu: bool,
    /// Local module calls: call name and the index of the called module.
    pub calls: Vec<(String, usize)>,
}

impl ModuleDir {
    /// What the contract checks read.
    pub fn contract_config(&self) -> &[Block] {
        if self.has_tf {
            &self.terraform
        } else {
            &self.opentofu
        }
    }

    /// What the expression checks read.
    pub fn model(&self) -> &[Block] {
        if self.has_tofu {
            &self.opentofu
        } else {
            &self.terraform
        }
    }
}

/// The root module (index 0) and every local module reachable from it.
#[derive(Debug, Clone)]
pub struct Tree {
    pub modules: Vec<ModuleDir>,
    /// `module/source-escape` findings recorded while loading.
    pub findings: Vec<Finding>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{0}")]
    Parse(ParseError),
    #[error("{0}: no .tf, .tf.json, .tofu or .tofu.json file in the module directory")]
    Empty(String),
}

pub const SOURCE_ESCAPE: &str = "module/source-escape";

/// Whether a directory entry is a configuration file.
pub fn is_config_file(name: &str) -> bool {
    if name.starts_with('.')
        || name.ends_with('~')
        || (name.starts_with('#') && name.ends_with('#'))
    {
        return false;
    }
    [".tf", ".tf.json", ".tofu", ".tofu.json"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn stem(name: &str) -> &str {
    for ext in [".tofu.json", ".tf.json", ".tofu", ".tf"] {
        if let Some(s) = name.strip_suffix(ext) {
            return s;
        }
    }
    name
}

fn is_override(name: &str) -> bool {
    let s = stem(name);
    s == "override" || s.ends_with("_override")
}

/// Loads the module at `root` and its local tree.
pub fn load(fs: &dyn Fs, root: &Path) -> Result<Tree, LoadError> {
    let canonical_root = fs.canonical(root).map_err(|e| LoadError::Io {
        path: root.display().to_string(),
        message: e.to_string(),
    })?;
    let mut loader = Loader {
        fs,
        root,
        canonical_root,
        tree: Tree {
            modules: Vec::new(),
            findings: Vec::new(),
        },
        by_dir: HashMap::new(),
        stack: Vec::new(),
    };
    loader.load_dir(PathBuf::new())?;
    if loader.tree.modules[0].files.is_empty() {
        return Err(LoadError::Empty(root.display().to_string()));
    }
    Ok(loader.tree)
}

struct Loader<'a> {
    fs: &'a dyn Fs,
    root: &'a Path,
    canonical_root: PathBuf,
    tree: Tree,
    by_dir: HashMap<PathBuf, usize>,
    stack: Vec<PathBuf>,
}

fn rel_string(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn join_rel(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl Loader<'_> {
    fn load_dir(&mut self, rel: PathBuf) -> Result<usize, LoadError> {
        let idx = self.tree.modules.len();
        let rel_dir = rel_string(&rel);
        let dir = self.root.join(&rel);
        let canonical = self.fs.canonical(&dir).unwrap_or_else(|_| dir.clone());
        self.by_dir.insert(canonical.clone(), idx);
        self.stack.push(canonical);
        let mut entries = self.fs.list(&dir).map_err(|e| LoadError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
        entries.retain(|e| e.is_file && is_config_file(&e.name));
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut files = Vec::new();
        for e in &entries {
            let path = dir.join(&e.name);
            let rel_file = join_rel(&rel_dir, &e.name);
            if e.is_symlink {
                let inside = self
                    .fs
                    .canonical(&path)
                    .map(|c| c.starts_with(&self.canonical_root))
                    .unwrap_or(false);
                if !inside {
                    self.tree.findings.push(
                        Finding::new(
                            SOURCE_ESCAPE,
                            Severity::Error,
                            format!(
                                "file {} is a symlink that resolves outside the module directory (or nowhere)",
                                e.name
                            ),
                        )
                        .at(&rel_file, 0),
                    );
                }
            }
            let bytes = match self.fs.read(&path) {
                Ok(b) => b,
                Err(err) if e.is_symlink && err.kind() == io::ErrorKind::NotFound => continue,
                // An image file linked from outside the module: the image
                // checks report the link; its content was never kept.
                Err(err) if err.kind() == io::ErrorKind::Unsupported => continue,
                Err(err) => {
                    return Err(LoadError::Io {
                        path: rel_file,
                        message: err.to_string(),
                    });
                }
            };
            let src = String::from_utf8(bytes).map_err(|_| {
                LoadError::Parse(ParseError {
                    file: rel_file.clone(),
                    line: 1,
                    column: 1,
                    message: "file is not valid UTF-8".into(),
                })
            })?;
            let blocks = if e.name.ends_with(".json") {
                ir::parse_json(&rel_file, &src)
            } else {
                ir::parse_native(&rel_file, &src)
            }
            .map_err(LoadError::Parse)?;
            files.push(SourceFile {
                name: e.name.clone(),
                rel: rel_file,
                blocks,
            });
        }
        let has_tofu = files.iter().any(|f| f.is_tofu());
        let has_tf = files.iter().any(|f| !f.is_tofu());
        let tf_set: Vec<&SourceFile> = files.iter().filter(|f| !f.is_tofu()).collect();
        let tofu_set: Vec<&SourceFile> = files
            .iter()
            .filter(|f| {
                f.is_tofu()
                    || !files
                        .iter()
                        .any(|t| t.is_tofu() && t.name == tofu_twin(&f.name))
            })
            .collect();
        let terraform = merge_set(&tf_set).map_err(LoadError::Parse)?;
        let opentofu = merge_set(&tofu_set).map_err(LoadError::Parse)?;
        self.tree.modules.push(ModuleDir {
            rel_dir: rel_dir.clone(),
            files,
            terraform,
            opentofu,
            has_tf,
            has_tofu,
            calls: Vec::new(),
        });
        let calls: Vec<(String, String, ir::Loc)> = self.tree.modules[idx]
            .model()
            .iter()
            .filter(|b| b.kind == "module")
            .filter_map(|b| {
                let name = b.labels.first()?.clone();
                let source = match b.body.attr("source")?.expr.constant()? {
                    Const::String(s) => s,
                    _ => return None,
                };
                Some((name, source, b.loc.clone()))
            })
            .collect();
        for (name, source, loc) in calls {
            let is_local = source == "."
                || source == ".."
                || source.starts_with("./")
                || source.starts_with("../");
            if !is_local {
                continue;
            }
            if let Some(child) = self.resolve_call(&rel, &name, &source, &loc)? {
                self.tree.modules[idx].calls.push((name, child));
            }
        }
        self.stack.pop();
        Ok(idx)
    }

    fn escape(&mut self, loc: &ir::Loc, message: String) {
        self.tree
            .findings
            .push(Finding::new(SOURCE_ESCAPE, Severity::Error, message).at(&loc.file, loc.line));
    }

    fn resolve_call(
        &mut self,
        rel: &Path,
        name: &str,
        source: &str,
        loc: &ir::Loc,
    ) -> Result<Option<usize>, LoadError> {
        // Lexically, within the root.
        let mut parts: Vec<String> = rel_string(rel)
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        for c in Path::new(source).components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        self.escape(
                            loc,
                            format!(
                                "module {name} has source {source:?}, which leaves the module directory"
                            ),
                        );
                        return Ok(None);
                    }
                }
                Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
                _ => {
                    self.escape(
                        loc,
                        format!(
                            "module {name} has source {source:?}, which leaves the module directory"
                        ),
                    );
                    return Ok(None);
                }
            }
        }
        let child_rel: PathBuf = parts.iter().collect();
        let Ok(canonical) = self.fs.canonical(&self.root.join(&child_rel)) else {
            self.escape(
                loc,
                format!("module {name} has source {source:?}, which cannot be resolved"),
            );
            return Ok(None);
        };
        if !canonical.starts_with(&self.canonical_root) {
            self.escape(
                loc,
                format!(
                    "module {name} has source {source:?}, which resolves outside the module directory through a symlink"
                ),
            );
            return Ok(None);
        }
        if self.stack.contains(&canonical) {
            return Ok(None);
        }
        if let Some(&i) = self.by_dir.get(&canonical) {
            return Ok(Some(i));
        }
        Ok(Some(self.load_dir(child_rel)?))
    }
}

fn tofu_twin(name: &str) -> String {
    if let Some(s) = name.strip_suffix(".tf.json") {
        format!("{s}.tofu.json")
    } else if let Some(s) = name.strip_suffix(".tf") {
        format!("{s}.tofu")
    } else {
        String::new()
    }
}

/// Concatenates a file set's primary files, then applies its override files
/// in name order.
fn merge_set(files: &[&SourceFile]) -> Result<Vec<Block>, ParseError> {
    let mut blocks: Vec<Block> = files
        .iter()
        .filter(|f| !is_override(&f.name))
        .flat_map(|f| f.blocks.iter().cloned())
        .collect();
    for f in files.iter().filter(|f| is_override(&f.name)) {
        for ob in &f.blocks {
            apply_override(&mut blocks, ob)?;
        }
    }
    Ok(blocks)
}

fn provider_key(b: &Block) -> (Vec<String>, Option<String>) {
    let alias = b.body.attr("alias").and_then(|a| match a.expr.constant() {
        Some(Const::String(s)) => Some(s),
        _ => None,
    });
    (b.labels.clone(), alias)
}

fn missing_base(ob: &Block, what: &str) -> ParseError {
    ParseError {
        file: ob.loc.file.clone(),
        line: ob.loc.line,
        column: 1,
        message: format!("missing base {what} to override"),
    }
}

fn set_attr(attrs: &mut Vec<Attr>, a: &Attr) {
    match attrs.iter_mut().find(|x| x.name == a.name) {
        Some(x) => *x = a.clone(),
        None => attrs.push(a.clone()),
    }
}

fn apply_override(blocks: &mut Vec<Block>, ob: &Block) -> Result<(), ParseError> {
    match ob.kind.as_str() {
        "locals" => {
            for a in &ob.body.attrs {
                let target = blocks
                    .iter_mut()
                    .filter(|b| b.kind == "locals")
                    .find(|b| b.body.attr(&a.name).is_some())
                    .ok_or_else(|| missing_base(ob, &format!("local value {}", a.name)))?;
                set_attr(&mut target.body.attrs, a);
            }
        }
        "terraform" => {
            if !blocks.iter().any(|b| b.kind == "terraform") {
                blocks.push(Block {
                    body: Default::default(),
                    ..ob.clone()
                });
            }
            let replaces_backend = ob
                .body
                .blocks
                .iter()
                .any(|n| n.kind == "backend" || n.kind == "cloud");
            if replaces_backend {
                for b in blocks.iter_mut().filter(|b| b.kind == "terraform") {
                    b.body
                        .blocks
                        .retain(|n| n.kind != "backend" && n.kind != "cloud");
                }
            }
            let first = blocks
                .iter()
                .position(|b| b.kind == "terraform")
                .unwrap_or_default();
            for a in &ob.body.attrs {
                let holder = blocks
                    .iter()
                    .position(|b| b.kind == "terraform" && b.body.attr(&a.name).is_some())
                    .unwrap_or(first);
                set_attr(&mut blocks[holder].body.attrs, a);
            }
            for n in &ob.body.blocks {
                if n.kind == "required_providers" {
                    for a in &n.body.attrs {
                        let holder = blocks
                            .iter_mut()
                            .filter(|b| b.kind == "terraform")
                            .find_map(|b| {
                                b.body.blocks.iter_mut().find(|r| {
                                    r.kind == "required_providers" && r.body.attr(&a.name).is_some()
                                })
                            });
                        match holder {
                            Some(r) => set_attr(&mut r.body.attrs, a),
                            None => blocks[first].body.blocks.push(Block {
                                body: ir::Body {
                                    attrs: vec![a.clone()],
                                    blocks: Vec::new(),
                                },
                                ..n.clone()
                            }),
                        }
                    }
                } else {
                    blocks[first].body.blocks.push(n.clone());
                }
            }
        }
        "variable" | "output" | "module" | "resource" | "data" | "provider" => {
            let key = provider_key(ob);
            let target = blocks
                .iter_mut()
                .find(|b| {
                    b.kind == ob.kind
                        && if ob.kind == "provider" {
                            provider_key(b) == key
                        } else {
                            b.labels == ob.labels
                        }
                })
                .ok_or_else(|| missing_base(ob, &format!("{} {}", ob.kind, ob.labels.join("."))))?;
            for a in &ob.body.attrs {
                set_attr(&mut target.body.attrs, a);
            }
            let mut kinds: Vec<&str> = ob.body.blocks.iter().map(|n| n.kind.as_str()).collect();
            kinds.dedup();
            for kind in kinds {
                if kind == "lifecycle" {
                    for n in ob.body.blocks_of("lifecycle") {
                        match target
                            .body
                            .blocks
                            .iter_mut()
                            .find(|t| t.kind == "lifecycle")
                        {
                            Some(t) => n
                                .body
                                .attrs
                                .iter()
                                .for_each(|a| set_attr(&mut t.body.attrs, a)),
                            None => target.body.blocks.push(n.clone()),
                        }
                    }
                } else {
                    target.body.blocks.retain(|t| t.kind != kind);
                    target.body.blocks.extend(ob.body.blocks_of(kind).cloned());
                }
            }
        }
        _ => blocks.push(ob.clone()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        for (n, want) in [
            ("main.tf", true),
            ("main.tf.json", true),
            ("main.tofu", true),
            ("main.tofu.json", true),
            (".hidden.tf", false),
            ("main.tf~", false),
            ("#main.tf#", false),
            ("main.json", false),
            ("main.tfvars", false),
        ] {
            assert_eq!(is_config_file(n), want, "{n}");
        }
        assert!(is_override("override.tf"));
        assert!(is_override("x_override.tf.json"));
        assert!(!is_override("overrides.tf"));
        assert_eq!(tofu_twin("main.tf.json"), "main.tofu.json");
    }

    fn file(name: &str, src: &str) -> SourceFile {
        SourceFile {
            name: name.into(),
            rel: name.into(),
            blocks: ir::parse_native(name, src).unwrap(),
        }
    }

    #[test]
    fn overrides_merge_per_terraform_rules() {
        let main = file(
            "main.tf",
            "variable \"a\" {\n  type = string\n  default = \"x\"\n}\nterraform {\n  backend \"s3\" {}\n  required_version = \">= 1.5\"\n}\nlocals {\n  l = 1\n}\nresource \"t\" \"n\" {\n  lifecycle {\n    create_before_destroy = true\n  }\n}\n",
        );
        let over = file(
            "main_override.tf",
            "variable \"a\" {\n  type = number\n}\nterraform {\n  backend \"local\" {}\n}\nlocals {\n  l = 2\n}\nresource \"t\" \"n\" {\n  lifecycle {\n    ignore_changes = all\n  }\n}\n",
        );
        let merged = merge_set(&[&main, &over]).unwrap();
        let var = merged.iter().find(|b| b.kind == "variable").unwrap();
        assert_eq!(var.body.attr("type").unwrap().expr.source(), "number");
        assert!(var.body.attr("default").is_some());
        assert_eq!(var.loc.file, "main.tf");
        let tf = merged.iter().find(|b| b.kind == "terraform").unwrap();
        let backends: Vec<_> = tf
            .body
            .blocks_of("backend")
            .map(|b| b.labels[0].clone())
            .collect();
        assert_eq!(backends, vec!["local"]);
        assert!(tf.body.attr("required_version").is_some());
        let res = merged.iter().find(|b| b.kind == "resource").unwrap();
        let lc = res.body.blocks_of("lifecycle").next().unwrap();
        assert_eq!(lc.body.attrs.len(), 2);
        let bad = file("x_override.tf", "output \"nope\" {\n  value = 1\n}\n");
        assert!(merge_set(&[&main, &bad]).is_err());
    }
}
