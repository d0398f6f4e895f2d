//! The demo's images, as `make images` builds them (the image writer's
//! recipes): the manager image and one image per no-op module, which the
//! real node's runtime holds under the references the Jobs use.

use std::path::Path;

use captf_images::layout::ImageSpec;
use captf_images::recipes::{self, Provenance};

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

/// The manager image (`/manager`, `/runner`, both static) and one image per
/// no-op module (the module at `/captf/module`, OpenTofu of
/// `tofu_version` at `/captf/runtime`), by reference.
pub fn prepare(
    manager: &Path,
    runner: &Path,
    modules: &Path,
    tofu: &Path,
    tofu_version: &str,
) -> Result<Vec<(String, ImageSpec)>, String> {
    let provenance = Provenance {
        version: "dev".to_owned(),
        ..Provenance::default()
    };
    let mut images = vec![(
        MANAGER_IMAGE.to_owned(),
        recipes::manager_image(manager, runner, &provenance),
    )];
    for m in MODULE_IMAGES {
        let source = modules.join(m.role);
        let spec = recipes::module_image(m.role, &source, tofu, tofu_version, &provenance)
            .map_err(|e| {
                format!(
                    "the {} module image from {}: {e:#}",
                    m.role,
                    source.display()
                )
            })?;
        images.push((m.reference.to_owned(), spec));
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_images::layout::Content;

    fn paths(spec: &ImageSpec) -> Vec<&str> {
        spec.entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn images_follow_the_image_contract() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["runner", "manager", "tofu"] {
            std::fs::write(bin.join(name), name).unwrap();
        }
        let modules = tmp.path().join("modules");
        for role in ["cluster", "machine", "machinepool"] {
            std::fs::create_dir_all(modules.join(role).join(".terraform")).unwrap();
            std::fs::write(modules.join(role).join("main.tf"), role).unwrap();
        }
        let images = prepare(
            &bin.join("manager"),
            &bin.join("runner"),
            &modules,
            &bin.join("tofu"),
            "1.10.10",
        )
        .unwrap();
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
        let manager = &images[0].1;
        assert_eq!(paths(manager), ["/manager", "/runner"]);
        assert_eq!(manager.user, "65532:65532");
        let pool = &images[3].1;
        let pool_paths = paths(pool);
        assert!(
            pool_paths.contains(&"/captf/module/main.tf"),
            "{pool_paths:?}"
        );
        assert!(pool_paths.contains(&"/captf/runtime"), "{pool_paths:?}");
        assert!(
            !pool_paths.iter().any(|p| p.contains(".terraform")),
            "{pool_paths:?}"
        );
        let runtime = pool
            .entries
            .iter()
            .find(|e| e.path == "/captf/runtime")
            .unwrap();
        assert_eq!(runtime.content, Content::HostFile(bin.join("tofu")));
        assert_eq!(pool.labels["io.captf.role"], "machinepool");
        assert_eq!(pool.labels["io.captf.runtime.version"], "1.10.10");
        // A module folder that is not there is named.
        let err = prepare(
            &bin.join("manager"),
            &bin.join("runner"),
            &tmp.path().join("nowhere"),
            &bin.join("tofu"),
            "1.10.10",
        )
        .unwrap_err();
        assert!(err.contains("the cluster module image"), "{err}");
    }
}
