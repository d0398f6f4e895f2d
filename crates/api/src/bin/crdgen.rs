//! Writes the CRD of every kind to `config/crd/bases` (or the folder given
//! as the only argument), one file per kind.

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases")
        });
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: creating {}: {e}", dir.display());
        return std::process::ExitCode::FAILURE;
    }
    for crd in captf_api::crds::all() {
        let path = dir.join(captf_api::crds::file_name(&crd));
        if let Err(e) = std::fs::write(&path, captf_api::crds::to_yaml(&crd)) {
            eprintln!("crdgen: writing {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    std::process::ExitCode::SUCCESS
}
