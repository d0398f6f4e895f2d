//! `module/tofu-shadow`: where Terraform's and OpenTofu's views of the same
//! module disagree.

use super::module::collapse_ws;
use crate::config::expr::Const;
use crate::config::ir::{Block, Body, Loc};
use crate::report::{Finding, Severity};
use std::collections::BTreeMap;

pub const ID: &str = "module/tofu-shadow";

/// Declarations by key, each with a signature and where it is declared.
fn declarations(blocks: &[Block]) -> BTreeMap<String, (String, Loc)> {
    let mut out = BTreeMap::new();
    let mut put = |key: String, sig: String, loc: &Loc| {
        out.entry(key).or_insert((sig, loc.clone()));
    };
    for b in blocks {
        let labels = b.labels.join(".");
        match b.kind.as_str() {
            "variable" | "output" | "module" | "resource" | "data" => {
                put(format!("{}.{labels}", b.kind), signature(&b.body), &b.loc)
            }
            "provider" => {
                let alias = b.body.attr("alias").and_then(|a| match a.expr.constant() {
                    Some(Const::String(s)) => Some(s),
                    _ => None,
                });
                let key = match alias {
                    Some(a) => format!("provider.{labels}.{a}"),
                    None => format!("provider.{labels}"),
                };
                put(key, signature(&b.body), &b.loc)
            }
            "locals" => {
                for a in &b.body.attrs {
                    put(
                        format!("local.{}", a.name),
                        collapse_ws(&a.expr.source()),
                        &a.loc,
                    );
                }
            }
            "terraform" => {
                if let Some(a) = b.body.attr("required_version") {
                    put(
                        "required_version".into(),
                        collapse_ws(&a.expr.source()),
                        &a.loc,
                    );
                }
                for n in &b.body.blocks {
                    match n.kind.as_str() {
                        "backend" => put(
                            format!("backend.{}", n.labels.join(".")),
                            signature(&n.body),
                            &n.loc,
                        ),
                        "cloud" => put("cloud".into(), signature(&n.body), &n.loc),
                        "required_providers" => {
                            for a in &n.body.attrs {
                                put(
                                    format!("required_providers.{}", a.name),
                                    collapse_ws(&a.expr.source()),
                                    &a.loc,
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Attributes as `name=source` with whitespace collapsed, and nested blocks
/// recursively, sorted.
fn signature(body: &Body) -> String {
    let mut parts: Vec<String> = body
        .attrs
        .iter()
        .map(|a| format!("{}={}", a.name, collapse_ws(&a.expr.source())))
        .collect();
    parts.extend(body.blocks.iter().map(|b| {
        format!(
            "{}[{}]{{{}}}",
            b.kind,
            b.labels.join(","),
            signature(&b.body)
        )
    }));
    parts.sort();
    parts.join(";")
}

const TAIL: &str = "; the contract checks read Terraform's files";

pub fn check(terraform: &[Block], opentofu: &[Block]) -> Vec<Finding> {
    let tf = declarations(terraform);
    let tofu = declarations(opentofu);
    let mut out = Vec::new();
    for (key, (sig, loc)) in &tf {
        let message = match tofu.get(key) {
            None => format!(
                "{key} is declared for Terraform, but a .tofu file shadows it and OpenTofu does not see it{TAIL}"
            ),
            Some((other, _)) if other != sig => {
                format!("{key} differs between OpenTofu's files and Terraform's{TAIL}")
            }
            Some(_) => continue,
        };
        out.push(Finding::new(ID, Severity::Warning, message).at(&loc.file, loc.line));
    }
    for (key, (_, loc)) in tofu.iter().filter(|(k, _)| !tf.contains_key(*k)) {
        out.push(
            Finding::new(
                ID,
                Severity::Warning,
                format!("{key} is declared only in a .tofu file: Terraform does not see it{TAIL}"),
            )
            .at(&loc.file, loc.line),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ir::parse_native;

    #[test]
    fn reports_each_kind_of_disagreement() {
        let tf = parse_native(
            "main.tf",
            "variable \"same\" {\n  type = string\n}\n\nvariable \"changed\" {\n  type    = string\n}\n\noutput \"tf_only\" {\n  value = 1\n}\n\nterraform {\n  required_version = \">= 1.6\"\n}\n",
        )
        .unwrap();
        let tofu = parse_native(
            "main.tofu",
            "variable \"same\" {\n  type   =   string\n}\n\nvariable \"changed\" {\n  type = number\n}\n\nlocals {\n  tofu_only = 1\n}\n\nterraform {\n  required_version = \">= 1.6\"\n}\n",
        )
        .unwrap();
        let mut found: Vec<(String, usize, String)> = check(&tf, &tofu)
            .into_iter()
            .map(|f| (f.file, f.line, f.message))
            .collect();
        found.sort();
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_eq!((found[0].0.as_str(), found[0].1), ("main.tf", 5));
        assert!(found[0].2.starts_with("variable.changed differs"));
        assert_eq!((found[1].0.as_str(), found[1].1), ("main.tf", 9));
        assert!(
            found[1]
                .2
                .starts_with("output.tf_only is declared for Terraform")
        );
        assert_eq!((found[2].0.as_str(), found[2].1), ("main.tofu", 10));
        assert!(
            found[2]
                .2
                .starts_with("local.tofu_only is declared only in a .tofu file")
        );
        assert!(found.iter().all(|f| f.2.ends_with(TAIL)));
    }
}
