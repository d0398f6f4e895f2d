//! The event reasons are one list, and the documented one: every constant
//! of `names::events` is in `MANAGER` or `RUNNER` (once), and every listed
//! reason has a row in an events table of `docs/` with its type, and no
//! table documents a reason the code cannot emit. The manager refuses to
//! publish a reason outside `MANAGER`; the runner's reasons are a type.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use captf_api::names::events::{MANAGER, RUNNER};

/// The string values of the `pub const`s of `pub mod events` in names.rs.
fn declared() -> BTreeSet<String> {
    let text = include_str!("../../src/names.rs");
    let start = text.find("pub mod events {").expect("the events module");
    let end = start + text[start..].find("pub const MANAGER").expect("the lists");
    text[start..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_owned)
        .collect()
}

/// Reason → types of every events-table row (`| \`Reason\` | Normal … |`)
/// in the documentation.
fn documented() -> BTreeMap<String, String> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut files = vec![];
    for dir in [docs.clone(), docs.join("kinds")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let mut rows = BTreeMap::new();
    for file in files {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [_, reason, kind, ..] = cells.as_slice() else {
                continue;
            };
            let Some(reason) = reason.strip_prefix('`').and_then(|r| r.strip_suffix('`')) else {
                continue;
            };
            let camel = reason.starts_with(|c: char| c.is_ascii_uppercase())
                && reason.chars().all(|c| c.is_ascii_alphanumeric());
            let typed = ["Normal", "Warning"].iter().any(|t| kind.starts_with(t));
            if camel && typed {
                rows.insert(reason.to_owned(), (*kind).to_owned());
            }
        }
    }
    rows
}

#[test]
fn every_event_reason_is_listed_once_and_documented_with_its_type() {
    let listed: Vec<&str> = MANAGER.iter().chain(RUNNER).copied().collect();
    let unique: BTreeSet<&str> = listed.iter().copied().collect();
    assert_eq!(unique.len(), listed.len(), "a reason listed twice");
    let listed: BTreeSet<String> = unique.iter().map(|r| (*r).to_owned()).collect();
    assert_eq!(declared(), listed, "the constants and the lists");
    let docs = documented();
    let documented: BTreeSet<String> = docs.keys().cloned().collect();
    let missing: Vec<&String> = listed.difference(&documented).collect();
    let extra: Vec<&String> = documented.difference(&listed).collect();
    assert!(missing.is_empty(), "listed but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but never emitted: {extra:?}");
}
