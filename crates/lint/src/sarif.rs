//! The SARIF 2.1.0 rendering of a report (`--format sarif`), for code
//! scanning tools: one run, one rule per check ID that has a finding, one
//! result per finding.
//!
//! Finding files relative to the module become `uri`s relative to the base
//! `MODULEROOT`, which the run's `originalUriBaseIds` resolves (the module
//! directory on disk; `/captf/module` inside an image). Absolute image paths
//! (`/captf/runtime`) become absolute `file:` URIs.

use crate::image::fs::MODULE_DIR;
use crate::report::{Finding, Report, Severity, Subject};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
pub const SARIF_VERSION: &str = "2.1.0";
pub const TOOL_NAME: &str = "tfcapi-lint";
/// The `uriBaseId` of every module-relative location.
pub const MODULE_ROOT: &str = "MODULEROOT";

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: [Run<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool<'a>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    original_uri_base_ids: BTreeMap<&'static str, ArtifactLocation>,
    results: Vec<SarifResult<'a>>,
}

#[derive(Serialize)]
struct Tool<'a> {
    driver: Driver<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver<'a> {
    name: &'static str,
    version: &'static str,
    rules: Vec<Rule<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule<'a> {
    id: &'a str,
    short_description: Message<'a>,
}

#[derive(Serialize)]
struct Message<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: &'a str,
    level: &'static str,
    message: Message<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<Location>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    physical_location: PhysicalLocation,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactLocation {
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri_base_id: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
}

/// SARIF's `level` for a severity: info is a `note`.
pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// What a check looks for, as the rule's `shortDescription`.
pub fn describe(id: &str) -> &'static str {
    match id {
        "input/required" => "A contract input of the role is not declared as a variable",
        "input/user-variable-default" => "A user variable has no default",
        "input/type" => "A contract input's declared type does not accept the contract's type",
        "input/sensitive" => "bootstrap_data is not declared sensitive",
        "input/default" => "A contract input has a default the contract does not allow",
        "input/reserved" => {
            "A variable uses the reserved captf_ prefix without being a contract input"
        }
        "input/tags-declared" => "captf_tags is not declared",
        "input/tags-unused" => "captf_tags is never referenced",
        "output/required" => "A contract output of the role is not declared",
        "output/reserved" => "An output uses the reserved captf_ prefix",
        "output/health" => "The health output is not declared",
        "output/endpoint-never-set" => "control_plane_endpoint is always null",
        "output/provider-id-list-shape" => "provider_id_list is missing, filtered or unsorted",
        "pool/autoscaling-ignore-changes" => {
            "The scaling group does not ignore changes to its desired size under autoscaling"
        }
        "module/version" => "No required_version constraint",
        "module/backend" => "A backend block: the controller owns the state backend",
        "module/cloud" => "A cloud block: the controller owns the state backend",
        "module/source-escape" => "A local module or file resolves outside the module directory",
        "module/provider-config" => "A provider block holds a literal credential",
        "module/tofu-shadow" => "OpenTofu's and Terraform's files declare different things",
        "image/platform" => "The image is not built for the requested platform",
        "image/module-present" => "No module file in /captf/module",
        "image/module-link" => "A link in /captf/module does not end at a file inside it",
        "image/module-readable" => "The image's user cannot read the module or the provider mirror",
        "image/runtime-present" => "/captf/runtime is missing or not executable",
        "image/runtime-version" => "io.captf.runtime contradicts the runtime's name",
        "image/reserved-paths" => "The image ships files under a path the runner reserves",
        "image/entrypoint" => "ENTRYPOINT or CMD is set; the runner replaces both",
        "image/providers-absent" => "No provider mirror at /captf/providers",
        "image/providers-layout" => "A provider mirror entry is neither packed nor unpacked layout",
        "image/providers-complete" => "A provider the module needs is not in the mirror",
        "image/label-role" => "io.captf.role is unset or differs from --role",
        "image/label-contract" => "io.captf.contract is unset or differs from --contract",
        "image/label-capacity" => "A capacity label is absent, unreadable or on the wrong role",
        "image/user-root" => "The image runs as root",
        "image/user-unresolved" => "The image's user is a name, not a numeric id",
        _ => "A tfcapi-lint check",
    }
}

/// Percent-encodes what a URI path may not hold as is (spaces, `%`, `#`,
/// `?`, non-ASCII...); keeps `/` so the path's segments stay segments.
fn encode_path(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `file:` URI of the directory the report's relative paths start at,
/// ending in `/` as SARIF wants of a base; `None` when it has none (a path
/// that is not absolute in the Unix sense).
pub fn module_root_uri(subject: &Subject) -> Option<String> {
    let root = match subject {
        Subject::Image(_) => MODULE_DIR.to_string(),
        Subject::Module(dir) => std::fs::canonicalize(Path::new(dir))
            .ok()?
            .to_str()?
            .to_string(),
    };
    if !root.starts_with('/') {
        return None;
    }
    Some(format!(
        "file://{}/",
        encode_path(root.trim_end_matches('/'))
    ))
}

fn location(f: &Finding) -> Option<Location> {
    if f.file.is_empty() {
        return None;
    }
    let artifact_location = if f.file.starts_with('/') {
        ArtifactLocation {
            uri: format!("file://{}", encode_path(&f.file)),
            uri_base_id: None,
        }
    } else {
        ArtifactLocation {
            uri: encode_path(&f.file),
            uri_base_id: Some(MODULE_ROOT),
        }
    };
    Some(Location {
        physical_location: PhysicalLocation {
            artifact_location,
            region: (f.line > 0).then_some(Region { start_line: f.line }),
        },
    })
}

/// The SARIF log of a finished report (findings sorted, `--allow-warning`
/// applied), 2-space indented. `root_uri` resolves `MODULEROOT`.
pub fn to_sarif(report: &Report, root_uri: Option<&str>) -> Result<String, serde_json::Error> {
    let mut ids: Vec<&str> = report.findings.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    ids.dedup();
    let rules = ids
        .into_iter()
        .map(|id| Rule {
            id,
            short_description: Message { text: describe(id) },
        })
        .collect();
    let results = report
        .findings
        .iter()
        .map(|f| SarifResult {
            rule_id: f.id,
            level: level(f.severity),
            message: Message { text: &f.message },
            locations: location(f).into_iter().collect(),
        })
        .collect();
    let original_uri_base_ids = root_uri
        .map(|uri| {
            let base = ArtifactLocation {
                uri: uri.to_string(),
                uri_base_id: None,
            };
            BTreeMap::from([(MODULE_ROOT, base)])
        })
        .unwrap_or_default();
    let log = Log {
        schema: SCHEMA_URI,
        version: SARIF_VERSION,
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: TOOL_NAME,
                    version: crate::cli::VERSION,
                    rules,
                },
            },
            original_uri_base_ids,
            results,
        }],
    };
    let mut s = serde_json::to_string_pretty(&log)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FileSet, ImageInfo};
    use serde_json::{Value, json};

    fn report(subject: Subject, findings: Vec<Finding>) -> Report {
        Report {
            subject,
            contract: "v1alpha1".into(),
            role: "machine".into(),
            findings,
            file_set: FileSet::Terraform,
        }
    }

    fn sarif(r: &Report, root: Option<&str>) -> Value {
        serde_json::from_str(&to_sarif(r, root).unwrap()).unwrap()
    }

    #[test]
    fn results_rules_levels_and_locations() {
        let r = report(
            Subject::Module("m".into()),
            vec![
                Finding::new("module/version", Severity::Info, "i"),
                Finding::new("input/type", Severity::Error, "e").at("sub dir/a#1.tf", 7),
                Finding::new("input/type", Severity::Warning, "w").at("b.tf", 0),
            ],
        );
        let doc = sarif(&r, Some("file:///work/m/"));
        assert_eq!(doc["$schema"], SCHEMA_URI);
        assert_eq!(doc["version"], "2.1.0");
        let run = &doc["runs"][0];
        let driver = &run["tool"]["driver"];
        assert_eq!(driver["name"], "tfcapi-lint");
        assert_eq!(driver["version"], crate::cli::VERSION);
        let rule_ids: Vec<&str> = driver["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(rule_ids, ["input/type", "module/version"]);
        assert_eq!(
            run["originalUriBaseIds"],
            json!({"MODULEROOT": {"uri": "file:///work/m/"}})
        );
        let results = run["results"].as_array().unwrap();
        assert_eq!(results[0]["level"], "note");
        assert!(results[0].get("locations").is_none());
        assert_eq!(results[1]["level"], "error");
        assert_eq!(
            results[1]["locations"][0]["physicalLocation"],
            json!({
                "artifactLocation": {"uri": "sub%20dir/a%231.tf", "uriBaseId": "MODULEROOT"},
                "region": {"startLine": 7}
            })
        );
        assert_eq!(results[2]["level"], "warning");
        assert!(
            results[2]["locations"][0]["physicalLocation"]
                .get("region")
                .is_none()
        );
    }

    #[test]
    fn image_paths_are_absolute_and_the_base_is_the_image_module_dir() {
        let subject = Subject::Image(ImageInfo {
            reference: "oci:x".into(),
            digest: "sha256:0".into(),
            platforms: vec!["linux/amd64".into()],
        });
        assert_eq!(
            module_root_uri(&subject).as_deref(),
            Some("file:///captf/module/")
        );
        let r = report(
            subject,
            vec![
                Finding::new("image/runtime-present", Severity::Error, "x").at("/captf/runtime", 0),
            ],
        );
        let doc = sarif(&r, None);
        assert!(doc["runs"][0].get("originalUriBaseIds").is_none());
        assert_eq!(
            doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"],
            json!({"uri": "file:///captf/runtime"})
        );
    }

    #[test]
    fn no_findings_is_a_run_with_no_rules_and_no_results() {
        let doc = sarif(&report(Subject::Module("m".into()), vec![]), None);
        assert_eq!(doc["runs"][0]["tool"]["driver"]["rules"], json!([]));
        assert_eq!(doc["runs"][0]["results"], json!([]));
    }

    #[test]
    fn encodes_what_a_uri_path_cannot_hold() {
        assert_eq!(encode_path("a/b-c_d.e~f.tf"), "a/b-c_d.e~f.tf");
        assert_eq!(encode_path("a b%?é"), "a%20b%25%3F%C3%A9");
    }
}
