//! Image checks over a rebuilt image file system and the image config.

use super::fs::{ImageFs, Kind, MODULE_DIR, Node, PROVIDERS_DIR};
use crate::config::model::ProviderRequirement;
use crate::contract::Role;
use crate::report::{Finding, Severity};
use std::collections::BTreeMap;

/// The parts of an image config the checks read.
#[derive(Debug, Clone, Default)]
pub struct ImageConfig {
    pub user: String,
    pub entrypoint: bool,
    pub cmd: bool,
    pub labels: BTreeMap<String, String>,
    pub os: String,
    pub architecture: String,
    pub variant: String,
}

impl ImageConfig {
    pub fn from_json(v: &serde_json::Value) -> Self {
        let c = &v["config"];
        let non_empty = |x: &serde_json::Value| x.as_array().is_some_and(|a| !a.is_empty());
        ImageConfig {
            user: c["User"].as_str().unwrap_or_default().to_string(),
            entrypoint: non_empty(&c["Entrypoint"]),
            cmd: non_empty(&c["Cmd"]),
            labels: c["Labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            os: v["os"].as_str().unwrap_or_default().to_string(),
            architecture: v["architecture"].as_str().unwrap_or_default().to_string(),
            variant: v["variant"].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// Who the image runs as, as far as can be told without `/etc/passwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    Root,
    Numeric { uid: u64, gid: Option<u64> },
    Named(String),
}

impl User {
    pub fn parse(s: &str) -> User {
        let (u, g) = match s.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (s, None),
        };
        match u {
            "" | "root" | "0" => User::Root,
            _ => match u.parse::<u64>() {
                Ok(uid) => User::Numeric {
                    uid,
                    gid: g.and_then(|g| g.parse().ok()),
                },
                Err(_) => User::Named(u.to_string()),
            },
        }
    }

    /// Whether the user has permission `bit` (4 read, 2 write, 1 execute)
    /// on a node. Root and names that cannot be resolved are approximated
    /// as "anyone holding the bit".
    pub fn may(&self, node: &Node, bit: u32) -> bool {
        match self {
            User::Root | User::Named(_) => {
                if bit == 1 {
                    node.mode & 0o111 != 0
                } else {
                    true
                }
            }
            User::Numeric { uid, gid } => {
                let shift = if *uid == node.uid {
                    6
                } else if *gid == Some(node.gid) {
                    3
                } else {
                    0
                };
                (node.mode >> shift) & bit != 0
            }
        }
    }
}

pub struct Input<'a> {
    pub fs: &'a ImageFs,
    pub config: &'a ImageConfig,
    pub role: Role,
    pub contract: &'a str,
    /// `os_arch` of the platform checked, e.g. `linux_amd64`.
    pub target: String,
    /// Providers the module tree needs (empty without a module).
    pub providers: &'a [ProviderRequirement],
}

pub fn check(i: &Input) -> Vec<Finding> {
    let mut f = Vec::new();
    module_present(i, &mut f);
    module_link(i, &mut f);
    let user = User::parse(&i.config.user);
    module_readable(i, &user, &mut f);
    runtime(i, &user, &mut f);
    reserved_paths(i, &mut f);
    if i.config.entrypoint || i.config.cmd {
        f.push(Finding::new(
            "image/entrypoint",
            Severity::Info,
            "the image sets ENTRYPOINT or CMD: the runner replaces both",
        ));
    }
    providers(i, &mut f);
    labels(i, &mut f);
    match &user {
        User::Root => f.push(Finding::new(
            "image/user-root",
            Severity::Warning,
            "the image runs as root: use a numeric non-root USER (for example 65532) so it fits Pod Security restricted",
        )),
        User::Named(name) => f.push(Finding::new(
            "image/user-unresolved",
            Severity::Warning,
            format!(
                "USER {name:?} is a name: without reading /etc/passwd its uid is unknown and permission checks are approximate; prefer a numeric uid"
            ),
        )),
        User::Numeric { .. } => {}
    }
    f
}

fn module_present(i: &Input, f: &mut Vec<Finding>) {
    let found = i.fs.children(MODULE_DIR).into_iter().any(|(k, n)| {
        let name = k.rsplit('/').next().unwrap_or_default();
        crate::config::load::is_config_file(name)
            && n.is_some_and(|n| n.kind == Kind::File || matches!(n.kind, Kind::Hardlink(_)))
    });
    if !found {
        f.push(
            Finding::new(
                "image/module-present",
                Severity::Error,
                "no .tf, .tf.json, .tofu or .tofu.json file directly in /captf/module",
            )
            .at(MODULE_DIR, 0),
        );
    }
}

fn module_link(i: &Input, f: &mut Vec<Finding>) {
    let inside = format!("{MODULE_DIR}/");
    for (path, node) in i.fs.under(MODULE_DIR) {
        let target = match &node.kind {
            Kind::Symlink(_) => i.fs.resolve(path, true),
            Kind::Hardlink(t) => i.fs.resolve(t, true),
            _ => continue,
        };
        let ok = target.is_some_and(|t| {
            t.starts_with(&inside)
                && i.fs
                    .get(&t)
                    .is_some_and(|n| n.kind == Kind::File || matches!(n.kind, Kind::Hardlink(_)))
        });
        if !ok {
            f.push(
                Finding::new(
                    "image/module-link",
                    Severity::Error,
                    format!(
                        "{path} is a link that does not end at a regular file inside /captf/module"
                    ),
                )
                .at(path, 0),
            );
        }
    }
}

fn module_readable(i: &Input, user: &User, f: &mut Vec<Finding>) {
    let User::Numeric { uid, .. } = user else {
        return;
    };
    if *uid == 0 {
        return;
    }
    let mut denied = Vec::new();
    let check_path = |path: &str, node: &Node, denied: &mut Vec<String>| {
        let ok = match node.kind {
            Kind::Dir => user.may(node, 4) && user.may(node, 1),
            Kind::File => user.may(node, 4),
            _ => true,
        };
        if !ok {
            denied.push(path.to_string());
        }
    };
    // The directories leading to the module must be traversable.
    for anc in ["/captf"] {
        if let Some(n) = i.fs.get(anc)
            && n.kind == Kind::Dir
            && !user.may(n, 1)
        {
            denied.push(anc.to_string());
        }
    }
    for root in [MODULE_DIR, PROVIDERS_DIR] {
        if let Some(n) = i.fs.get(root) {
            check_path(root, n, &mut denied);
        }
        for (path, node) in i.fs.under(root) {
            check_path(path, node, &mut denied);
        }
    }
    if denied.is_empty() {
        return;
    }
    let shown: Vec<&str> = denied.iter().take(5).map(String::as_str).collect();
    let more = if denied.len() > 5 {
        format!(" (and {} more)", denied.len() - 5)
    } else {
        String::new()
    };
    f.push(Finding::new(
        "image/module-readable",
        Severity::Warning,
        format!(
            "user {} cannot read or traverse {}{more}",
            i.config.user,
            shown.join(", ")
        ),
    ));
}

const RUNTIME: &str = "/captf/runtime";

fn runtime(i: &Input, user: &User, f: &mut Vec<Finding>) {
    let err =
        |msg: String| Finding::new("image/runtime-present", Severity::Error, msg).at(RUNTIME, 0);
    let Some(node) = i.fs.get(RUNTIME) else {
        f.push(err(
            "/captf/runtime is missing: it must be the tofu or terraform binary".into(),
        ));
        return;
    };
    let resolved = match i.fs.resolve(RUNTIME, true) {
        Some(r) => r,
        None => {
            f.push(err(
                "/captf/runtime is a symlink whose target does not exist".into(),
            ));
            return;
        }
    };
    let Some(file) = i.fs.file_node(&resolved) else {
        f.push(err(format!(
            "/captf/runtime resolves to {resolved}, which is not a regular file"
        )));
        return;
    };
    // A hardlink carries its own header mode; a symlink uses its target's.
    let mode_node = if matches!(node.kind, Kind::Hardlink(_)) {
        node
    } else {
        file
    };
    if !user.may(mode_node, 1) {
        f.push(err(format!(
            "/captf/runtime ({resolved}) is not executable by the image user {:?}",
            i.config.user
        )));
    }
    if let Some(label) = i.config.labels.get("io.captf.runtime") {
        let name = match &node.kind {
            Kind::Symlink(t) => t.clone(),
            _ => "runtime".to_string(),
        };
        let base = name
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let contradicts = (label == "terraform" && base.contains("tofu"))
            || (label == "tofu" && base.contains("terraform"));
        if contradicts {
            f.push(
                Finding::new(
                    "image/runtime-version",
                    Severity::Warning,
                    format!(
                        "label io.captf.runtime says {label}, but /captf/runtime points at {name}"
                    ),
                )
                .at(RUNTIME, 0),
            );
        }
    }
}

const RESERVED: &[&str] = &[
    "/captf/work",
    "/var/run/captf/credentials",
    "/captf/bin",
    "/captf/config",
];

fn reserved_paths(i: &Input, f: &mut Vec<Finding>) {
    for dir in RESERVED {
        let mut dirs = vec![dir.to_string()];
        if let Some(r) = i.fs.resolve(dir, true)
            && r != *dir
        {
            dirs.push(r);
        }
        let count: usize = dirs
            .iter()
            .map(|d| i.fs.under(d).filter(|(_, n)| n.kind != Kind::Dir).count())
            .sum();
        if count > 0 {
            f.push(
                Finding::new(
                    "image/reserved-paths",
                    Severity::Error,
                    format!(
                        "{dir} holds {count} file(s) or link(s): the Job mounts over this path, so the image must leave it empty"
                    ),
                )
                .at(dir, 0),
            );
        }
    }
}

fn is_target(s: &str) -> bool {
    match s.split_once('_') {
        Some((os, arch)) => {
            let ok = |p: &str| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            };
            ok(os) && ok(arch)
        }
        None => false,
    }
}

/// `terraform-provider-<type>_<version>_<os>_<arch>.zip` → (version, target).
fn packed_name(name: &str, ty: &str) -> Option<(String, String)> {
    let rest = name
        .strip_prefix(&format!("terraform-provider-{ty}_"))?
        .strip_suffix(".zip")?;
    let mut parts = rest.rsplitn(3, '_');
    let arch = parts.next()?;
    let os = parts.next()?;
    let version = parts.next()?;
    let target = format!("{os}_{arch}");
    (!version.is_empty() && is_target(&target)).then(|| (version.to_string(), target))
}

fn providers(i: &Input, f: &mut Vec<Finding>) {
    let Some(root) = i.fs.resolve(PROVIDERS_DIR, true).filter(|r| i.fs.is_dir(r)) else {
        f.push(Finding::new(
            "image/providers-absent",
            Severity::Info,
            "no provider mirror at /captf/providers: init downloads providers at run time and needs registry egress",
        ));
        return;
    };
    let layout_err = |path: &str| {
        Finding::new(
            "image/providers-layout",
            Severity::Error,
            format!("{path} is neither a packed nor an unpacked provider mirror entry"),
        )
        .at(path, 0)
    };
    // Packages found: (host/ns/type lowercased, target).
    let mut packages: Vec<(String, String)> = Vec::new();
    let mut broken = Vec::new();
    for (path, node) in i.fs.under(&root) {
        if matches!(node.kind, Kind::Symlink(_)) && i.fs.resolve(path, true).is_none() {
            broken.push(path.clone());
            f.push(
                Finding::new(
                    "image/providers-complete",
                    Severity::Error,
                    format!("{path} is a broken link in the provider mirror"),
                )
                .at(path, 0),
            );
        }
    }
    // Broken links are reported above, not again as layout errors.
    let dir_children = |d: &str| -> Vec<(String, bool)> {
        i.fs.children(d)
            .into_iter()
            .filter(|(k, _)| !broken.contains(k))
            .map(|(k, _)| {
                let is_dir = i.fs.resolve(&k, true).is_some_and(|r| i.fs.is_dir(&r));
                (k, is_dir)
            })
            .collect()
    };
    let name_of = |p: &str| p.rsplit('/').next().unwrap_or_default().to_string();
    for (host, host_dir) in dir_children(&root) {
        if !host_dir {
            f.push(layout_err(&host));
            continue;
        }
        for (ns, ns_dir) in dir_children(&host) {
            if !ns_dir {
                f.push(layout_err(&ns));
                continue;
            }
            for (ty, ty_dir) in dir_children(&ns) {
                if !ty_dir {
                    f.push(layout_err(&ty));
                    continue;
                }
                let key = format!("{}/{}/{}", name_of(&host), name_of(&ns), name_of(&ty))
                    .to_ascii_lowercase();
                let ty_name = name_of(&ty);
                for (entry, is_dir) in dir_children(&ty) {
                    let name = name_of(&entry);
                    if !is_dir {
                        if let Some((_, target)) = packed_name(&name, &ty_name) {
                            packages.push((key.clone(), target));
                        } else if !name.ends_with(".json") {
                            f.push(layout_err(&entry));
                        }
                        continue;
                    }
                    for (target, target_dir) in dir_children(&entry) {
                        if target_dir && is_target(&name_of(&target)) {
                            packages.push((key.clone(), name_of(&target)));
                        } else {
                            f.push(layout_err(&target));
                        }
                    }
                }
            }
        }
    }
    let runtime_label = i.config.labels.get("io.captf.runtime").map(String::as_str);
    for req in i.providers {
        let source = req
            .source
            .clone()
            .unwrap_or_else(|| format!("hashicorp/{}", req.local_name));
        if source.contains("/builtin/") || (req.local_name == "terraform" && req.source.is_none()) {
            continue;
        }
        let parts: Vec<&str> = source.split('/').collect();
        let candidates: Vec<String> = match parts.as_slice() {
            [ns, ty] => {
                let hosts: &[&str] = match runtime_label {
                    Some("terraform") => &["registry.terraform.io"],
                    Some("tofu") => &["registry.opentofu.org"],
                    _ => &["registry.terraform.io", "registry.opentofu.org"],
                };
                hosts.iter().map(|h| format!("{h}/{ns}/{ty}")).collect()
            }
            [host, ns, ty] => vec![format!("{host}/{ns}/{ty}")],
            _ => continue,
        };
        let found = candidates.iter().any(|c| {
            let c = c.to_ascii_lowercase();
            packages.iter().any(|(k, t)| *k == c && *t == i.target)
        });
        if !found {
            f.push(Finding::new(
                "image/providers-complete",
                Severity::Error,
                format!(
                    "provider {} (required as {}) has no package for {} in /captf/providers",
                    candidates.join(" or "),
                    req.local_name,
                    i.target
                ),
            ));
        }
    }
}

fn labels(i: &Input, f: &mut Vec<Finding>) {
    let l = &i.config.labels;
    match l.get("io.captf.role") {
        None => f.push(Finding::new(
            "image/label-role",
            Severity::Info,
            "label io.captf.role is not set",
        )),
        Some(r) if r != i.role.as_str() => f.push(Finding::new(
            "image/label-role",
            Severity::Error,
            format!(
                "label io.captf.role is {r:?}, but the image is checked as role {}",
                i.role
            ),
        )),
        _ => {}
    }
    match l.get("io.captf.contract") {
        None => f.push(Finding::new(
            "image/label-contract",
            Severity::Info,
            "label io.captf.contract is not set",
        )),
        Some(c) if c != i.contract => f.push(Finding::new(
            "image/label-contract",
            Severity::Warning,
            format!(
                "label io.captf.contract is {c:?}, but the image is checked against {}",
                i.contract
            ),
        )),
        _ => {}
    }
    let capacity = l.get("io.captf.capacity");
    let node_info = l.get("io.captf.node-info");
    if i.role != Role::Machine {
        if capacity.is_some() || node_info.is_some() {
            f.push(Finding::new(
                "image/label-capacity",
                Severity::Info,
                format!(
                    "capacity labels are read only for machine images, not for role {}",
                    i.role
                ),
            ));
        }
        return;
    }
    if capacity.is_none() && node_info.is_none() {
        f.push(Finding::new(
            "image/label-capacity",
            Severity::Info,
            "no io.captf.capacity or io.captf.node-info label: autoscaling from zero cannot size nodes of this image",
        ));
    }
    if let Some(c) = capacity
        && let Err(e) = super::labels::capacity(c)
    {
        f.push(Finding::new(
            "image/label-capacity",
            Severity::Error,
            format!("label io.captf.capacity is invalid: {e}"),
        ));
    }
    if let Some(n) = node_info
        && let Err(e) = super::labels::node_info(n)
    {
        f.push(Finding::new(
            "image/label-capacity",
            Severity::Error,
            format!("label io.captf.node-info is invalid: {e}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_permissions() {
        let node = |mode, uid, gid| Node {
            kind: Kind::File,
            mode,
            uid,
            gid,
            content: None,
        };
        assert_eq!(User::parse(""), User::Root);
        assert_eq!(User::parse("0:0"), User::Root);
        assert_eq!(
            User::parse("65532:65532"),
            User::Numeric {
                uid: 65532,
                gid: Some(65532)
            }
        );
        assert_eq!(User::parse("captf"), User::Named("captf".into()));
        let u = User::parse("1000:1000");
        assert!(u.may(&node(0o700, 1000, 0), 1));
        assert!(!u.may(&node(0o700, 0, 1000), 1));
        assert!(u.may(&node(0o070, 0, 1000), 4));
        assert!(!u.may(&node(0o770, 0, 0), 4));
        assert!(u.may(&node(0o004, 0, 0), 4));
        assert!(User::Root.may(&node(0o100, 5, 5), 1));
        assert!(!User::Root.may(&node(0o644, 0, 0), 1));
    }

    #[test]
    fn mirror_names() {
        assert_eq!(
            packed_name("terraform-provider-aws_5.1.0_linux_amd64.zip", "aws"),
            Some(("5.1.0".into(), "linux_amd64".into()))
        );
        assert_eq!(packed_name("terraform-provider-aws_5.1.0.zip", "aws"), None);
        assert_eq!(
            packed_name("terraform-provider-oci_5.1.0_linux_amd64.zip", "aws"),
            None
        );
        assert!(is_target("linux_arm64"));
        assert!(!is_target("linux"));
        assert!(!is_target("Linux_amd64"));
    }
}
