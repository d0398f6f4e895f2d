//! Declarations read from a module's blocks, as terraform-config-inspect
//! would report them: variables, outputs, providers, calls.

use super::expr::{Const, Expr};
use super::ir::{Block, Body, Loc};

#[derive(Debug, Clone)]
pub struct Variable<'a> {
    pub name: &'a str,
    /// The type constraint's source text, when one is given.
    pub type_src: Option<String>,
    pub default: Option<&'a Expr>,
    pub sensitive: bool,
    /// Terraform's `nullable`: true unless the block says `nullable = false`.
    pub nullable: bool,
    pub loc: &'a Loc,
}

pub fn variables(blocks: &[Block]) -> Vec<Variable<'_>> {
    blocks
        .iter()
        .filter(|b| b.kind == "variable")
        .filter_map(|b| {
            Some(Variable {
                name: b.labels.first()?.as_str(),
                type_src: b.body.attr("type").map(|a| a.expr.source()),
                default: b.body.attr("default").map(|a| &a.expr),
                sensitive: b
                    .body
                    .attr("sensitive")
                    .is_some_and(|a| a.expr.constant() == Some(Const::Bool(true))),
                nullable: b
                    .body
                    .attr("nullable")
                    .is_none_or(|a| a.expr.constant() != Some(Const::Bool(false))),
                loc: &b.loc,
            })
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct Output<'a> {
    pub name: &'a str,
    pub value: Option<&'a Expr>,
    pub loc: &'a Loc,
}

pub fn outputs(blocks: &[Block]) -> Vec<Output<'_>> {
    blocks
        .iter()
        .filter(|b| b.kind == "output")
        .filter_map(|b| {
            Some(Output {
                name: b.labels.first()?.as_str(),
                value: b.body.attr("value").map(|a| &a.expr),
                loc: &b.loc,
            })
        })
        .collect()
}

pub fn has_required_version(blocks: &[Block]) -> bool {
    blocks
        .iter()
        .filter(|b| b.kind == "terraform")
        .any(|b| b.body.attr("required_version").is_some())
}

/// A provider the module needs: its local name and, when declared, the
/// source address as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProviderRequirement {
    pub local_name: String,
    pub source: Option<String>,
}

/// Providers from `required_providers` plus those implied by resources and
/// data sources (the type's prefix, or their `provider` argument).
pub fn required_providers(blocks: &[Block]) -> Vec<ProviderRequirement> {
    let mut out: Vec<ProviderRequirement> = Vec::new();
    for b in blocks.iter().filter(|b| b.kind == "terraform") {
        for r in b.body.blocks_of("required_providers") {
            for a in &r.body.attrs {
                let source = a
                    .expr
                    .object_members()
                    .into_iter()
                    .find(|(k, _)| k == "source")
                    .and_then(|(_, v)| match v.constant() {
                        Some(Const::String(s)) => Some(s),
                        _ => None,
                    });
                out.push(ProviderRequirement {
                    local_name: a.name.clone(),
                    source,
                });
            }
        }
    }
    for b in blocks
        .iter()
        .filter(|b| b.kind == "resource" || b.kind == "data")
    {
        let from_arg = b.body.attr("provider").and_then(|a| {
            let t = a.expr.traversals();
            t.first()
                .map(|p| p[0].clone())
                .or_else(|| match a.expr.constant() {
                    Some(Const::String(s)) => s.split('.').next().map(str::to_string),
                    _ => None,
                })
        });
        let name = from_arg.or_else(|| {
            b.labels
                .first()
                .map(|t| t.split('_').next().unwrap_or(t).to_string())
        });
        if let Some(name) = name
            && !out.iter().any(|p| p.local_name == name)
        {
            out.push(ProviderRequirement {
                local_name: name,
                source: None,
            });
        }
    }
    out
}

/// Every expression in a body, nested blocks included.
pub fn body_exprs<'a>(body: &'a Body, out: &mut Vec<&'a Expr>) {
    out.extend(body.attrs.iter().map(|a| &a.expr));
    for b in &body.blocks {
        body_exprs(&b.body, out);
    }
}

pub fn block_refs_var(b: &Block, name: &str) -> bool {
    let mut exprs = Vec::new();
    body_exprs(&b.body, &mut exprs);
    exprs.iter().any(|e| e.refs_var(name))
}
