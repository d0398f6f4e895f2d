//! Running one container: its own mount namespace, a root folder made of the
//! image's files, the host's system folders and the pod's volumes, then
//! `chroot` and `exec`. Root on the host stays root in the container: the
//! executor does not emulate user ids.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MsFlags, mount};

/// Host folders every container sees, bound read-only-in-spirit from the host
/// (they stand in for a base image's userland).
const SYSTEM_DIRS: &[&str] = &["usr", "etc", "opt", "proc", "sys"];
/// Device nodes a process expects.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One bind mount into the container's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub source: PathBuf,
    /// Absolute path inside the container.
    pub target: String,
    pub read_only: bool,
    pub recursive: bool,
}

/// A container path as a relative path below the root, refusing `..`.
pub fn inside(rootfs: &Path, container_path: &str) -> Result<PathBuf, String> {
    let rel = Path::new(container_path);
    if !rel.is_absolute() {
        return Err(format!("mount path {container_path:?} is not absolute"));
    }
    let mut out = rootfs.to_path_buf();
    for c in rel.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => out.push(p),
            _ => {
                return Err(format!(
                    "mount path {container_path:?} leaves the container"
                ));
            }
        }
    }
    Ok(out)
}

/// The mounts that give a container its system folders and devices; creates
/// their mount points (and the host's top-level symlinks such as
/// `bin -> usr/bin`) in `rootfs` unless the image has its own.
pub fn system_mounts(rootfs: &Path) -> Result<Vec<BindMount>, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut mounts = Vec::new();
    for entry in std::fs::read_dir("/").map_err(|e| io(Path::new("/"), e))? {
        let entry = entry.map_err(|e| io(Path::new("/"), e))?;
        let name = entry.file_name();
        let target = rootfs.join(&name);
        if target.symlink_metadata().is_ok() {
            continue; // the image provides it
        }
        let kind = entry.file_type().map_err(|e| io(&target, e))?;
        if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).map_err(|e| io(&target, e))?;
            std::os::unix::fs::symlink(link, &target).map_err(|e| io(&target, e))?;
        } else if SYSTEM_DIRS.iter().any(|d| name.as_bytes() == d.as_bytes()) {
            std::fs::create_dir_all(&target).map_err(|e| io(&target, e))?;
            mounts.push(BindMount {
                source: entry.path(),
                target: format!("/{}", name.to_string_lossy()),
                read_only: false,
                recursive: true,
            });
        }
    }
    let dev = rootfs.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| io(&dev, e))?;
    for d in DEVICES {
        let target = dev.join(d);
        std::fs::write(&target, b"").map_err(|e| io(&target, e))?;
        mounts.push(BindMount {
            source: Path::new("/dev").join(d),
            target: format!("/dev/{d}"),
            read_only: false,
            recursive: false,
        });
    }
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
        .map_err(|e| io(&tmp, e))?;
    Ok(mounts)
}

/// Checks a volume mount and creates its mount point.
pub fn volume_mount(rootfs: &Path, mount: BindMount) -> Result<BindMount, String> {
    let first = mount
        .target
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    if SYSTEM_DIRS.contains(&first) {
        return Err(format!(
            "mount path {} is inside the host's /{first}, which the local executor shares",
            mount.target
        ));
    }
    let point = inside(rootfs, &mount.target)?;
    let made = if mount.source.is_dir() {
        std::fs::create_dir_all(&point)
    } else {
        point
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&point, b""))
    };
    made.map_err(|e| format!("{}: {e}", point.display()))?;
    Ok(mount)
}

/// Everything the child needs, as C strings made before `fork`.
struct Prepared {
    root: CString,
    hostname: Vec<u8>,
    workdir: CString,
    mounts: Vec<(CString, CString, MsFlags, bool)>,
}

fn cstring(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} contains NUL", p.display()))
}

/// A command that runs `argv` in a container made of `rootfs` and `mounts`,
/// named `hostname` (as a kubelet names a pod's containers after the pod:
/// a runtime's lock records read `<user>@<hostname>`).
pub fn command(
    rootfs: &Path,
    hostname: &str,
    mut mounts: Vec<BindMount>,
    argv: &[String],
    env: &[(String, String)],
    workdir: &str,
) -> Result<std::process::Command, String> {
    let (program, args) = argv
        .split_first()
        .ok_or("the container has no command (the local executor knows no image entrypoints)")?;
    // Parents before children, so a mount inside another lands on top of it.
    mounts.sort_by_key(|m| m.target.matches('/').count());
    let prepared = Prepared {
        root: cstring(rootfs)?,
        hostname: hostname.as_bytes().to_vec(),
        workdir: CString::new(workdir).map_err(|_| "working directory contains NUL")?,
        mounts: mounts
            .iter()
            .map(|m| {
                let mut flags = MsFlags::MS_BIND;
                if m.recursive {
                    flags |= MsFlags::MS_REC;
                }
                Ok((
                    cstring(&m.source)?,
                    cstring(&inside(rootfs, &m.target)?)?,
                    flags,
                    m.read_only,
                ))
            })
            .collect::<Result<_, String>>()?,
    };

    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env_clear();
    if !env.iter().any(|(k, _)| k == "PATH") {
        cmd.env("PATH", DEFAULT_PATH);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // Its own process group: the executor kills the whole container at once.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    enter_container(&mut cmd, prepared);
    Ok(cmd)
}

#[allow(unsafe_code)]
fn enter_container(cmd: &mut std::process::Command, p: Prepared) {
    use nix::sched::{CloneFlags, unshare};
    use std::os::unix::process::CommandExt;
    let none: Option<&str> = None;
    // SAFETY: between fork and exec the closure only makes system calls
    // (prctl, unshare, sethostname, mount, chroot, chdir) on strings
    // allocated before fork.
    unsafe {
        cmd.pre_exec(move || {
            let err = |e: nix::errno::Errno| std::io::Error::from(e);
            // A container never outlives the test process that runs it.
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(err)?;
            unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS).map_err(err)?;
            nix::unistd::sethostname(std::ffi::OsStr::from_bytes(&p.hostname)).map_err(err)?;
            mount(
                none,
                c"/",
                none,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                none,
            )
            .map_err(err)?;
            for (source, target, flags, read_only) in &p.mounts {
                mount(
                    Some(source.as_c_str()),
                    target.as_c_str(),
                    none,
                    *flags,
                    none,
                )
                .map_err(err)?;
                if *read_only {
                    let ro = *flags | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
                    mount(none, target.as_c_str(), none, ro, none).map_err(err)?;
                }
            }
            nix::unistd::chroot(p.root.as_c_str()).map_err(err)?;
            nix::unistd::chdir(p.workdir.as_c_str()).map_err(err)?;
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_paths_stay_inside_the_root() {
        let root = Path::new("/r");
        assert_eq!(
            inside(root, "/captf/work").unwrap(),
            Path::new("/r/captf/work")
        );
        assert_eq!(inside(root, "/a/./b").unwrap(), Path::new("/r/a/b"));
        assert!(inside(root, "/a/../../etc").is_err());
        assert!(inside(root, "relative").is_err());
    }

    #[test]
    fn a_volume_inside_a_shared_system_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let m = BindMount {
            source: tmp.path().to_owned(),
            target: "/etc/app".into(),
            read_only: false,
            recursive: false,
        };
        let err = volume_mount(tmp.path(), m).unwrap_err();
        assert!(err.contains("/etc"), "{err}");
    }

    #[test]
    fn a_container_sees_its_image_volumes_and_system_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let rootfs = tmp.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("captf/module")).unwrap();
        std::fs::write(rootfs.join("captf/module/main.tf"), "module").unwrap();
        let vol = tmp.path().join("vol");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::write(vol.join("key"), "secret").unwrap();

        let mut mounts = system_mounts(&rootfs).unwrap();
        mounts.push(
            volume_mount(
                &rootfs,
                BindMount {
                    source: vol.clone(),
                    target: "/captf/config".into(),
                    read_only: true,
                    recursive: false,
                },
            )
            .unwrap(),
        );
        let script = "cat /captf/module/main.tf /captf/config/key; echo; \
                      pwd; test -e /work && echo host-visible; \
                      touch /captf/config/new 2>/dev/null && echo writable; echo $CUSTOM; \
                      cat /proc/sys/kernel/hostname";
        let argv = ["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()];
        let env = [("CUSTOM".to_owned(), "value".to_owned())];
        let out = command(&rootfs, "pod-a", mounts, &argv, &env, "/captf")
            .unwrap()
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout, "modulesecret\n/captf\nvalue\npod-a\n");
        assert!(!vol.join("new").exists());
    }
}
