//! Finding the binaries the demo runs, and reading its duration flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The binaries the demo needs from the workspace build.
pub const NEEDED: [&str; 2] = ["runner", "manager"];

/// The folder holding `runner` and `manager`: `explicit` (`--bin-dir`), else
/// the folder of the demo's own executable (the same cargo target dir).
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match explicit {
        Some(d) => d.to_owned(),
        None => std::env::current_exe()
            .map_err(|e| format!("finding the demo's own executable: {e}"))?
            .parent()
            .map(Path::to_owned)
            .ok_or("the demo's executable has no parent folder")?,
    };
    let missing: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    if missing.is_empty() {
        Ok(dir)
    } else {
        Err(format!(
            "{} not found in {} (build them with `cargo build -p captf-runner -p captf-manager --bins`, or point --bin-dir at them)",
            missing.join(" and "),
            dir.display()
        ))
    }
}

/// Refuses binaries the real node cannot run from the manager image: the
/// image has no libc, so the runner and the manager must be static.
pub fn check_static(dir: &Path) -> Result<(), String> {
    let dynamic: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|b| !captf_testenv::binaries::is_static(&dir.join(b)))
        .collect();
    if dynamic.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} in {} not static: the manager image the node runs has no libc \
         (`make demo` builds them; or RUSTFLAGS=\"-C target-feature=+crt-static\" \
         cargo build -p captf-runner -p captf-manager --bins --target x86_64-unknown-linux-gnu, \
         and --bin-dir pointing at target/x86_64-unknown-linux-gnu/debug)",
        dynamic.join(" and "),
        dir.display()
    ))
}

/// A free loopback address (`127.0.0.1:<port>`) for a server to listen on.
pub fn free_loopback_addr() -> Result<String, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("finding a free port: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("finding a free port: {e}"))?;
    Ok(addr.to_string())
}

/// A duration written as `90`, `90s`, `10m` or `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 90s, 10m or 1h"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?}: unit must be s, m or h")),
    };
    if secs == 0 {
        return Err("the duration must be above zero".to_owned());
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("90", Ok(90)),
            ("90s", Ok(90)),
            ("10m", Ok(600)),
            ("1h", Ok(3600)),
            ("0s", Err("the duration must be above zero")),
            ("", Err("\"\" is not a duration like 90s, 10m or 1h")),
            ("5d", Err("\"5d\": unit must be s, m or h")),
            ("m", Err("\"m\" is not a duration like 90s, 10m or 1h")),
        ];
        for (text, want) in cases {
            let got = parse_duration(text).map(|d| d.as_secs());
            assert_eq!(got, want.map_err(str::to_owned), "{text:?}");
        }
    }

    #[test]
    fn binaries_are_looked_for_in_the_given_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let err = locate(Some(tmp.path())).unwrap_err();
        assert!(err.starts_with("runner and manager not found in"), "{err}");
        std::fs::write(tmp.path().join("runner"), "").unwrap();
        let err = locate(Some(tmp.path())).unwrap_err();
        assert!(err.starts_with("manager not found in"), "{err}");
        std::fs::write(tmp.path().join("manager"), "").unwrap();
        assert_eq!(locate(Some(tmp.path())).unwrap(), tmp.path());
    }
}
