//! Where the test assets are: the binaries built by `hack/test-assets.sh`
//! (or a user's own, through `KUBEBUILDER_ASSETS` and `TOFU`) and the Cluster
//! API CRDs. A missing asset is an error that says how to get it: tests never
//! skip for want of one.

use std::path::{Path, PathBuf};

/// The pinned versions, shared with `hack/test-assets.sh`.
const VERSIONS_ENV: &str = include_str!("../../../hack/versions.env");

#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    #[error(
        "test asset {name} not found at {path}: run hack/test-assets.sh to build it, or point {var} at your own"
    )]
    Missing {
        name: &'static str,
        path: PathBuf,
        var: &'static str,
    },
    #[error(
        "{0} is not on PATH: the real node needs Debian's containerd, runc, containernetworking-plugins, iptables and busybox-static (.ci/run installs them)"
    )]
    MissingTool(&'static str),
    #[error("hack/versions.env has no {0}")]
    NoVersion(&'static str),
    #[error("cannot find the home directory (HOME is unset) to locate the asset cache")]
    NoHome,
}

/// A pinned version from `hack/versions.env`, e.g. `version("KUBERNETES_VERSION")`.
pub fn version(key: &'static str) -> Result<&'static str, AssetError> {
    VERSIONS_ENV
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .ok_or(AssetError::NoVersion(key))
}

fn cache_dir() -> Result<PathBuf, AssetError> {
    if let Some(dir) = std::env::var_os("CAPTF_ASSETS_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").ok_or(AssetError::NoHome)?;
    Ok(Path::new(&home).join(".cache/captf-test-assets"))
}

/// The folder holding `kube-apiserver`, `etcd` and `kube-controller-manager`.
fn kubernetes_dir() -> Result<(PathBuf, &'static str), AssetError> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") {
        return Ok((PathBuf::from(dir), "KUBEBUILDER_ASSETS"));
    }
    let v = version("KUBERNETES_VERSION")?;
    Ok((
        cache_dir()?.join(format!("kubernetes-v{v}")),
        "KUBEBUILDER_ASSETS",
    ))
}

fn existing(name: &'static str, path: PathBuf, var: &'static str) -> Result<PathBuf, AssetError> {
    if path.exists() {
        Ok(path)
    } else {
        Err(AssetError::Missing { name, path, var })
    }
}

/// Path of a control-plane binary (`kube-apiserver`, `etcd`, `kube-controller-manager`).
pub fn control_plane_binary(name: &'static str) -> Result<PathBuf, AssetError> {
    let (dir, var) = kubernetes_dir()?;
    existing(name, dir.join(name), var)
}

/// Path of a real node's binary (`kubelet`, `kube-proxy`, `kube-scheduler`):
/// under `NODE_ASSETS`, else the cached build of the pinned version.
pub fn node_binary(name: &'static str) -> Result<PathBuf, AssetError> {
    let dir = match std::env::var_os("NODE_ASSETS") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let v = version("KUBERNETES_VERSION")?;
            cache_dir()?.join(format!("kubernetes-node-v{v}"))
        }
    };
    existing(name, dir.join(name), "NODE_ASSETS")
}

/// A host tool the real node needs (`containerd`, `ctr`, `runc`,
/// `iptables`), found on `PATH`; `.ci/run` installs Debian's.
pub fn host_tool(name: &'static str) -> Result<PathBuf, AssetError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(AssetError::MissingTool(name))
}

/// Path of the OpenTofu binary: `TOFU`, else the cached build.
pub fn tofu() -> Result<PathBuf, AssetError> {
    if let Some(path) = std::env::var_os("TOFU") {
        return existing("tofu", PathBuf::from(path), "TOFU");
    }
    let v = version("OPENTOFU_VERSION")?;
    existing(
        "tofu",
        cache_dir()?.join(format!("opentofu-v{v}/tofu")),
        "TOFU",
    )
}

/// Folder of the Cluster API CRDs: `CAPI_CRDS`, else the cached copy.
pub fn capi_crds() -> Result<PathBuf, AssetError> {
    if let Some(path) = std::env::var_os("CAPI_CRDS") {
        return existing("Cluster API CRDs", PathBuf::from(path), "CAPI_CRDS");
    }
    let v = version("CLUSTER_API_VERSION")?;
    let dir = cache_dir()?.join(format!("cluster-api-v{v}/crd"));
    existing("Cluster API CRDs", dir, "CAPI_CRDS")
}

/// Folder of the Cluster API assets (`bin/`, `crd/`, `webhook/`):
/// `CAPI_ASSETS`, else the cached build.
pub fn capi_dir() -> Result<PathBuf, AssetError> {
    if let Some(path) = std::env::var_os("CAPI_ASSETS") {
        return existing("Cluster API assets", PathBuf::from(path), "CAPI_ASSETS");
    }
    let v = version("CLUSTER_API_VERSION")?;
    existing(
        "Cluster API assets",
        cache_dir()?.join(format!("cluster-api-v{v}")),
        "CAPI_ASSETS",
    )
}

/// Path of a Cluster API binary (`cluster-api-manager`,
/// `kubeadm-bootstrap-manager`, `kubeadm-control-plane-manager`, `clusterctl`).
pub fn capi_binary(name: &'static str) -> Result<PathBuf, AssetError> {
    existing(name, capi_dir()?.join("bin").join(name), "CAPI_ASSETS")
}

/// Path of kustomize: `KUSTOMIZE`, else the cached build.
pub fn kustomize() -> Result<PathBuf, AssetError> {
    if let Some(path) = std::env::var_os("KUSTOMIZE") {
        return existing("kustomize", PathBuf::from(path), "KUSTOMIZE");
    }
    let v = version("KUSTOMIZE_VERSION")?;
    existing(
        "kustomize",
        cache_dir()?.join(format!("kustomize-v{v}/kustomize")),
        "KUSTOMIZE",
    )
}

/// Folder of cert-manager's Certificate and Issuer CRDs:
/// `CERT_MANAGER_CRDS`, else the cached copy.
pub fn cert_manager_crds() -> Result<PathBuf, AssetError> {
    if let Some(path) = std::env::var_os("CERT_MANAGER_CRDS") {
        return existing(
            "cert-manager CRDs",
            PathBuf::from(path),
            "CERT_MANAGER_CRDS",
        );
    }
    let v = version("CERT_MANAGER_VERSION")?;
    existing(
        "cert-manager CRDs",
        cache_dir()?.join(format!("cert-manager-v{v}/crd")),
        "CERT_MANAGER_CRDS",
    )
}

/// The filesystem mirror holding the `oracle/oci` provider build
/// (`OCI_PROVIDER_MIRROR`, set from `hack/test-assets.sh`'s output). Panics
/// when it is unset or holds no `registry.opentofu.org/oracle/oci`: the OCI
/// module tests need the real provider and never skip without it.
pub fn oci_provider_mirror() -> PathBuf {
    const HOW: &str = "run `bash hack/test-assets.sh > /tmp/assets.env; set -a; . /tmp/assets.env; set +a` \
                       (it installs the provider from ../shared/providers/oci)";
    let Some(dir) = std::env::var_os("OCI_PROVIDER_MIRROR") else {
        panic!("OCI_PROVIDER_MIRROR is not set: {HOW}");
    };
    let dir = PathBuf::from(dir);
    let provider = dir.join("registry.opentofu.org/oracle/oci");
    assert!(
        provider.is_dir(),
        "OCI_PROVIDER_MIRROR={} holds no {}: {HOW}",
        dir.display(),
        provider.display()
    );
    dir
}

/// The sums the OCI provider build is checked against (`OCI_PROVIDER_SUMS`,
/// else the `SHA256SUMS` beside [`oci_provider_mirror`]'s folder, where
/// `hack/test-assets.sh` puts it). Panics when there is none.
pub fn oci_provider_sums() -> PathBuf {
    let sums = match std::env::var_os("OCI_PROVIDER_SUMS") {
        Some(path) => PathBuf::from(path),
        None => oci_provider_mirror()
            .parent()
            .map(|d| d.join("SHA256SUMS"))
            .unwrap_or_default(),
    };
    assert!(
        sums.is_file(),
        "no OCI provider sums at {} (OCI_PROVIDER_SUMS): run hack/test-assets.sh",
        sums.display()
    );
    sums
}

/// Folder of this project's generated CRDs (`config/crd/bases`).
pub fn project_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pinned_version_is_present_and_dotted() {
        for key in [
            "KUBERNETES_VERSION",
            "ETCD_VERSION",
            "OPENTOFU_VERSION",
            "CLUSTER_API_VERSION",
            "KUSTOMIZE_VERSION",
        ] {
            let v = version(key).unwrap();
            assert_eq!(v.split('.').count(), 3, "{key}={v}");
            assert!(v.split('.').all(|p| p.parse::<u32>().is_ok()), "{key}={v}");
        }
        assert!(matches!(
            version("NOPE"),
            Err(AssetError::NoVersion("NOPE"))
        ));
    }
}
