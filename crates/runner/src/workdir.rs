//! Checks and preparation on the file system before the first command:
//! the image layout, the work directory, the restore backup, the plan key.

use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use captf_contract::state_content;

use crate::plan::{PlanError, PlanKey};

/// Suffixes that make a file a module file.
const MODULE_SUFFIXES: [&str; 4] = [".tf", ".tf.json", ".tofu", ".tofu.json"];
/// Most chunks a backup may have.
pub const MAX_RESTORE_CHUNKS: i64 = 32;
/// Largest decompressed state the runner accepts.
pub use captf_contract::state_content::MAX_STATE_BYTES;

/// Checks that the image has a module and a runnable runtime. Returns what
/// is wrong, in words.
pub fn preflight(module: &Path, bin: &[String]) -> Result<(), String> {
    let entries = fs::read_dir(module)
        .map_err(|e| format!("module directory {} is unreadable: {e}", module.display()))?;
    let mut has_module_file = false;
    for entry in entries {
        let entry = entry
            .map_err(|e| format!("module directory {} is unreadable: {e}", module.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !MODULE_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            continue;
        }
        // Follow symlinks: a linked file counts, a directory never does.
        let is_dir = fs::metadata(entry.path())
            .map(|m| m.is_dir())
            .unwrap_or(true);
        if !is_dir {
            has_module_file = true;
            break;
        }
    }
    if !has_module_file {
        return Err(format!(
            "module directory {} has no .tf, .tf.json, .tofu or .tofu.json file",
            module.display()
        ));
    }
    let cmd = bin.first().map(String::as_str).unwrap_or("");
    if cmd.is_empty() {
        return Err("the runtime command is empty".to_owned());
    }
    if cmd.contains('/') {
        check_executable(Path::new(cmd))
    } else {
        find_on_path(cmd)
            .map(|_| ())
            .ok_or_else(|| format!("runtime {cmd} is not on PATH"))
    }
}

fn check_executable(path: &Path) -> Result<(), String> {
    let meta = fs::metadata(path).map_err(|e| format!("runtime {}: {e}", path.display()))?;
    if meta.is_dir() {
        return Err(format!("runtime {} is a directory", path.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("runtime {} is not executable", path.display()));
    }
    Ok(())
}

fn find_on_path(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| check_executable(p).is_ok())
}

/// Creates `<workdir>/root` and copies the top-level files of the config
/// directory into it (hidden names, such as the kubelet's `..data`, are
/// skipped; links are followed).
pub fn prepare_root(workdir: &Path, config: &Path) -> Result<PathBuf, String> {
    let root = workdir.join("root");
    fs::create_dir_all(&root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("setting the mode of {}: {e}", root.display()))?;
    let entries = fs::read_dir(config).map_err(|e| format!("reading {}: {e}", config.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {}: {e}", config.display()))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let src = entry.path();
        let Ok(meta) = fs::metadata(&src) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let data = fs::read(&src).map_err(|e| format!("reading {}: {e}", src.display()))?;
        write_private(&root.join(&name), &data)?;
    }
    Ok(root)
}

/// Writes `data` to `path` with mode 0600.
pub fn write_private(path: &Path, data: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    f.write_all(data)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RestoreError {
    #[error("--restore-chunks must be between 1 and {MAX_RESTORE_CHUNKS}, got {0}")]
    ChunkCount(i64),
    #[error("the backup is not gzip data: {0}")]
    Gzip(String),
    #[error("the backup decompresses to more than {MAX_STATE_BYTES} bytes")]
    TooLarge,
    #[error("the backup is not valid JSON: {0}")]
    Json(String),
}

/// Joins backup chunks in order and decompresses the first gzip stream
/// (a stale trailing chunk is ignored), refusing more than 64 MiB and
/// anything that is not JSON.
pub fn assemble_restore(chunks: &[Vec<u8>]) -> Result<Vec<u8>, RestoreError> {
    let n = chunks.len() as i64;
    if !(1..=MAX_RESTORE_CHUNKS).contains(&n) {
        return Err(RestoreError::ChunkCount(n));
    }
    let out = state_content::decompress(&chunks.concat()).map_err(|e| match e {
        state_content::DecompressError::Gzip(io) => RestoreError::Gzip(io),
        state_content::DecompressError::TooLarge => RestoreError::TooLarge,
    })?;
    serde_json::from_slice::<serde::de::IgnoredAny>(&out)
        .map_err(|e| RestoreError::Json(e.to_string()))?;
    Ok(out)
}

/// Reads `<config>/restore/0..n-1`.
pub fn read_restore_chunks(config: &Path, count: i64) -> Result<Vec<Vec<u8>>, String> {
    if !(1..=MAX_RESTORE_CHUNKS).contains(&count) {
        return Err(RestoreError::ChunkCount(count).to_string());
    }
    (0..count)
        .map(|i| {
            let p = config.join("restore").join(i.to_string());
            fs::read(&p).map_err(|e| format!("reading backup chunk {}: {e}", p.display()))
        })
        .collect()
}

/// Reads the plan key file.
pub fn read_plan_key(path: &Path) -> Result<PlanKey, String> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    PlanKey::new(bytes).map_err(|e: PlanError| e.to_string())
}
