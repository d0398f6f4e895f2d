//! Short texts the runner derives from the runtime's output: the failure
//! summary, the apply/destroy counts, the blocked-plan summary.

use crate::result::{Changes, MAX_TAIL_BYTES, truncate_keep_start};

/// Lines longer than this are never summary lines.
const MAX_SUMMARY_LINE: usize = 512;

/// `s` without ANSI escape sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                // CSI: parameters and intermediates, then one final byte.
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                // OSC: up to BEL or ST.
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            Some(_) => {
                chars.next();
            }
            None => {}
        }
    }
    out
}

/// The counts of the last apply/destroy summary line in `stdout`.
pub fn parse_changes(stdout: &str) -> Option<Changes> {
    let mut found = None;
    for raw in stdout.lines() {
        if raw.len() > MAX_SUMMARY_LINE {
            continue;
        }
        let line = strip_ansi(raw);
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Apply complete! Resources: ") {
            let mut c = Changes::default();
            let mut ok = false;
            for part in rest.split(',') {
                let mut words = part.split_whitespace();
                let (Some(n), Some(what)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                let what = what.trim_end_matches('.');
                match what {
                    "imported" => c.import = n,
                    "added" => c.add = n,
                    "changed" => c.change = n,
                    "destroyed" => {
                        c.destroy = n;
                        ok = true;
                    }
                    _ => {}
                }
            }
            if ok {
                found = Some(c);
            }
        } else if let Some(rest) = line.strip_prefix("Destroy complete! Resources: ") {
            let mut words = rest.split_whitespace();
            if let (Some(n), Some(w)) = (words.next(), words.next())
                && w.trim_end_matches('.') == "destroyed"
                && let Ok(n) = n.parse::<u64>()
            {
                found = Some(Changes {
                    destroy: n,
                    ..Changes::default()
                });
            }
        }
    }
    found
}

/// Error lines of a `validate -json` output: `Error: <summary>[: <detail line>]`.
pub fn validate_errors(stdout: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout) else {
        return Vec::new();
    };
    v.get("diagnostics")
        .and_then(|d| d.as_array())
        .into_iter()
        .flatten()
        .filter(|d| d.get("severity").and_then(|s| s.as_str()) == Some("error"))
        .map(|d| {
            let summary = d.get("summary").and_then(|s| s.as_str()).unwrap_or("");
            let detail = d
                .get("detail")
                .and_then(|s| s.as_str())
                .and_then(|s| s.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("");
            if detail.is_empty() {
                format!("Error: {summary}")
            } else {
                format!("Error: {summary}: {}", detail.trim())
            }
        })
        .collect()
}

/// Lines of `stderr` that start with `Error: ` once colours are stripped.
/// The runtime frames diagnostics with box-drawing characters (`│ Error: …`),
/// so that frame is ignored too.
pub fn stderr_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .map(strip_ansi)
        .map(|l| {
            l.trim_start_matches(|c: char| c == '│' || c == '╷' || c.is_whitespace())
                .trim_end()
                .to_owned()
        })
        .filter(|l| l.starts_with("Error: "))
        .collect()
}

/// What a failed step reports in `error.tail`. The inputs must already be
/// redacted.
pub fn failure_summary(
    step: &str,
    exit: i32,
    stdout: &str,
    stderr: &str,
    exec_error: Option<&str>,
) -> String {
    let mut lines = if step == "validate" {
        validate_errors(stdout)
    } else {
        Vec::new()
    };
    if lines.is_empty() {
        lines = stderr_errors(stderr);
    }
    let text = if lines.is_empty() {
        match exec_error {
            Some(e) => format!("step {step} exited {exit}: {e}"),
            None => format!("step {step} exited {exit}; see the Job's logs"),
        }
    } else {
        lines.join("\n")
    };
    truncate_keep_start(&text, MAX_TAIL_BYTES).to_owned()
}

/// `the plan deletes or replaces N resource(s): a (delete), b (replace) and
/// K more`, fitted into the tail's size.
pub fn blocked_summary(destructive: &[(String, &str)]) -> String {
    let head = format!(
        "the plan deletes or replaces {} resource(s): ",
        destructive.len()
    );
    let mut text = head.clone();
    for (i, (addr, label)) in destructive.iter().enumerate() {
        let item = format!("{}{addr} ({label})", if i == 0 { "" } else { ", " });
        let rest = destructive.len() - i - 1;
        let more = if rest > 0 {
            format!(" and {rest} more")
        } else {
            String::new()
        };
        // Keep room to say how many were left out.
        let left_out = format!(" and {} more", destructive.len() - i);
        if text.len() + item.len() + more.len() > MAX_TAIL_BYTES {
            if text.len() + left_out.len() <= MAX_TAIL_BYTES {
                text.push_str(&left_out);
            }
            return truncate_keep_start(&text, MAX_TAIL_BYTES).to_owned();
        }
        text.push_str(&item);
    }
    text
}
