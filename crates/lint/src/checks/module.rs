//! Module checks: a module tree and a role in, findings out.

use super::{shadow, shape};
use crate::config::expr::{Const, Expr};
use crate::config::ir::Block;
use crate::config::load::Tree;
use crate::config::model::{self, Variable};
use crate::contract::{self, CLUSTER_OUTPUTS_INPUT, RESERVED_PREFIX, Role, TAGS_INPUT};
use crate::report::{Finding, Severity};
use crate::types;

/// Runs every module check of the role over the tree.
pub fn check(tree: &Tree, role: Role) -> Vec<Finding> {
    let root = &tree.modules[0];
    let config = root.contract_config();
    let vars = model::variables(config);
    let outputs = model::outputs(config);
    let mut f = Vec::new();
    input_required(role, &vars, &mut f);
    input_user_variable_default(role, &vars, &mut f);
    input_type(role, &vars, &mut f);
    if role != Role::Cluster {
        input_sensitive(&vars, &mut f);
    }
    input_default(role, &vars, &mut f);
    input_reserved(role, &vars, &mut f);
    input_tags_declared(&vars, &mut f);
    output_required(role, &outputs, &mut f);
    output_reserved(&outputs, &mut f);
    if !outputs.iter().any(|o| o.name == "health") {
        f.push(Finding::new(
            "output/health",
            Severity::Error,
            "output health is not declared: every module must report the health of what it manages",
        ));
    }
    if !model::has_required_version(config) {
        f.push(Finding::new(
            "module/version",
            Severity::Info,
            "no required_version constraint: the module does not say which runtime versions it supports",
        ));
    }
    backend_and_cloud(tree, &mut f);
    f.extend(tree.findings.iter().cloned());
    for m in &tree.modules {
        provider_config(m.model(), &mut f);
    }
    if root.has_tofu && root.has_tf {
        f.extend(shadow::check(&root.terraform, &root.opentofu));
    }
    if let Some(tags) = declared(&vars, TAGS_INPUT)
        && !module_uses_var(tree, 0, TAGS_INPUT, &mut Vec::new())
    {
        f.push(
                Finding::new(
                    "input/tags-unused",
                    Severity::Warning,
                    "variable captf_tags is never referenced: nothing shows the contract's tags reach the module's resources",
                )
                .at(&tags.loc.file, tags.loc.line),
        );
    }
    match role {
        Role::Cluster => endpoint_never_set(root.model(), &mut f),
        Role::MachinePool => {
            if !outputs.iter().any(|o| o.name == "provider_id_list") {
                f.push(Finding::new(
                    shape::ID,
                    Severity::Error,
                    "output provider_id_list is not declared: a pool reports every non-terminated member",
                ));
            }
            f.extend(shape::check(root.model()));
            for m in &tree.modules {
                autoscaling_ignore_changes(m.model(), &mut f);
            }
        }
        Role::Machine => {}
    }
    f
}

fn declared<'a>(vars: &'a [Variable<'a>], name: &str) -> Option<&'a Variable<'a>> {
    vars.iter().find(|v| v.name == name)
}

fn input_required(role: Role, vars: &[Variable], f: &mut Vec<Finding>) {
    let mut names: Vec<&str> = contract::inputs(role).iter().map(|i| i.name).collect();
    names.sort();
    for name in names {
        if name != TAGS_INPUT && declared(vars, name).is_none() {
            f.push(Finding::new(
                "input/required",
                Severity::Error,
                format!("contract input {name} is not declared as a variable"),
            ));
        }
    }
}

fn input_tags_declared(vars: &[Variable], f: &mut Vec<Finding>) {
    if declared(vars, TAGS_INPUT).is_none() {
        f.push(Finding::new(
            "input/tags-declared",
            Severity::Error,
            "variable captf_tags is not declared: every module must accept the contract's tags",
        ));
    }
}

fn input_type(role: Role, vars: &[Variable], f: &mut Vec<Finding>) {
    for v in vars {
        let Some(spec) = contract::input(role, v.name) else {
            continue;
        };
        let at = |x: Finding| x.at(&v.loc.file, v.loc.line);
        let Some(src) = &v.type_src else {
            f.push(at(Finding::new(
                "input/type",
                Severity::Warning,
                format!(
                    "variable {} has no type; the contract passes {}",
                    v.name, spec.type_expr
                ),
            )));
            continue;
        };
        let declared = match types::parse(src) {
            Ok(t) => t,
            Err(e) => {
                f.push(at(Finding::new(
                    "input/type",
                    Severity::Warning,
                    format!("cannot check type of variable {}: {e}", v.name),
                )));
                continue;
            }
        };
        let want = types::parse(spec.type_expr).expect("contract types parse");
        if !types::compatible(&declared, &want) {
            f.push(at(Finding::new(
                "input/type",
                Severity::Error,
                format!(
                    "variable {} is declared as {}, which does not accept the contract's {}",
                    v.name,
                    collapse_ws(src),
                    spec.type_expr
                ),
            )));
        }
    }
}

pub fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn input_sensitive(vars: &[Variable], f: &mut Vec<Finding>) {
    if let Some(v) = declared(vars, "bootstrap_data")
        && !v.sensitive
    {
        f.push(
                Finding::new(
                    "input/sensitive",
                    Severity::Warning,
                    "variable bootstrap_data is not marked sensitive = true: it carries the node's bootstrap secrets",
                )
                .at(&v.loc.file, v.loc.line),
            );
    }
}

fn input_default(role: Role, vars: &[Variable], f: &mut Vec<Finding>) {
    for v in vars {
        let Some(spec) = contract::input(role, v.name) else {
            continue;
        };
        if v.default.is_some() && !spec.nullable && v.name != CLUSTER_OUTPUTS_INPUT {
            f.push(
                Finding::new(
                    "input/default",
                    Severity::Warning,
                    format!(
                        "variable {} has a default, but the contract always passes a value: the default is never used",
                        v.name
                    ),
                )
                .at(&v.loc.file, v.loc.line),
            );
        }
    }
}

fn input_reserved(role: Role, vars: &[Variable], f: &mut Vec<Finding>) {
    for v in vars {
        if !v.name.starts_with(RESERVED_PREFIX) || contract::input(role, v.name).is_some() {
            continue;
        }
        if v.name == CLUSTER_OUTPUTS_INPUT && v.default.is_some() {
            continue;
        }
        f.push(
            Finding::new(
                "input/reserved",
                Severity::Error,
                format!(
                    "variable {} uses the reserved captf_ prefix but is not a contract input",
                    v.name
                ),
            )
            .at(&v.loc.file, v.loc.line),
        );
    }
}

fn input_user_variable_default(role: Role, vars: &[Variable], f: &mut Vec<Finding>) {
    for v in vars {
        if v.name.starts_with(RESERVED_PREFIX)
            || contract::input(role, v.name).is_some()
            || v.default.is_some()
        {
            continue;
        }
        f.push(
            Finding::new(
                "input/user-variable-default",
                Severity::Warning,
                format!(
                    "variable {} is not a contract input and has no default: an object that does not set it in spec.variables or variablesFrom fails to apply",
                    v.name
                ),
            )
            .at(&v.loc.file, v.loc.line),
        );
    }
}

fn output_required(role: Role, outputs: &[model::Output], f: &mut Vec<Finding>) {
    let mut names: Vec<&str> = contract::required_outputs(role).to_vec();
    names.sort();
    for name in names {
        if name == "health" || name == "provider_id_list" {
            continue;
        }
        if !outputs.iter().any(|o| o.name == name) {
            f.push(Finding::new(
                "output/required",
                Severity::Error,
                format!("contract output {name} is not declared"),
            ));
        }
    }
}

fn output_reserved(outputs: &[model::Output], f: &mut Vec<Finding>) {
    for o in outputs
        .iter()
        .filter(|o| o.name.starts_with(RESERVED_PREFIX))
    {
        f.push(
            Finding::new(
                "output/reserved",
                Severity::Warning,
                format!("output {} uses the reserved captf_ prefix", o.name),
            )
            .at(&o.loc.file, o.loc.line),
        );
    }
}

/// Backend and cloud blocks in any file of the tree, whichever runtime
/// would read that file.
fn backend_and_cloud(tree: &Tree, f: &mut Vec<Finding>) {
    for m in &tree.modules {
        for file in &m.files {
            for b in file.blocks.iter().filter(|b| b.kind == "terraform") {
                for n in &b.body.blocks {
                    match n.kind.as_str() {
                        "backend" => f.push(
                            Finding::new(
                                "module/backend",
                                Severity::Error,
                                format!(
                                    "backend {:?} block: the controller generates the root module and owns the state backend",
                                    n.labels.first().map(String::as_str).unwrap_or_default()
                                ),
                            )
                            .at(&n.loc.file, n.loc.line),
                        ),
                        "cloud" => f.push(
                            Finding::new(
                                "module/cloud",
                                Severity::Error,
                                "cloud block: the controller generates the root module and owns the state backend",
                            )
                            .at(&n.loc.file, n.loc.line),
                        ),
                        _ => {}
                    }
                }
            }
        }
    }
}

const CREDENTIAL_NAMES: &[&str] = &[
    "access_key",
    "secret_key",
    "secret_access_key",
    "session_token",
    "token",
    "access_token",
    "auth_token",
    "bearer_token",
    "api_token",
    "api_key",
    "apikey",
    "password",
    "passphrase",
    "client_secret",
    "client_certificate",
    "client_certificate_password",
    "client_key",
    "private_key",
    "private_key_password",
    "ssh_private_key",
    "secret",
];

fn provider_config(blocks: &[Block], f: &mut Vec<Finding>) {
    for b in blocks.iter().filter(|b| b.kind == "provider") {
        let provider = b.labels.first().cloned().unwrap_or_default();
        let mut hits = Vec::new();
        walk_provider_body(&b.body, &mut hits);
        for (name, loc) in hits {
            f.push(
                Finding::new(
                    "module/provider-config",
                    Severity::Warning,
                    format!(
                        "provider {provider} sets {name} to a literal value: credentials belong to the identity, never to the module"
                    ),
                )
                .at(&loc.file, loc.line),
            );
        }
    }
}

fn walk_provider_body(
    body: &crate::config::ir::Body,
    hits: &mut Vec<(String, crate::config::ir::Loc)>,
) {
    for a in &body.attrs {
        walk_value(&a.name, &a.expr, &a.loc, hits);
    }
    for n in &body.blocks {
        walk_provider_body(&n.body, hits);
    }
}

fn walk_value(
    name: &str,
    e: &Expr,
    loc: &crate::config::ir::Loc,
    hits: &mut Vec<(String, crate::config::ir::Loc)>,
) {
    if CREDENTIAL_NAMES.contains(&name.to_ascii_lowercase().as_str())
        && e.traversals().is_empty()
        && let Some(Const::String(s)) = e.constant()
        && !s.is_empty()
    {
        hits.push((name.to_string(), loc.clone()));
    }
    for (k, v) in e.object_members() {
        walk_value(&k, &v, loc, hits);
    }
    for v in e.array_items() {
        walk_value("", &v, loc, hits);
    }
}

/// Whether module `idx` uses variable `var` outside module calls, or hands
/// it to a local module that uses what it receives.
fn module_uses_var(tree: &Tree, idx: usize, var: &str, seen: &mut Vec<(usize, String)>) -> bool {
    if seen.iter().any(|(i, v)| *i == idx && v == var) {
        return false;
    }
    seen.push((idx, var.to_string()));
    let m = &tree.modules[idx];
    for b in m.model() {
        if b.kind == "module" {
            let Some(call) = b.labels.first() else {
                continue;
            };
            let Some(&(_, child)) = m.calls.iter().find(|(n, _)| n == call) else {
                continue;
            };
            for a in b.body.attrs.iter().filter(|a| a.expr.refs_var(var)) {
                if module_uses_var(tree, child, &a.name, seen) {
                    return true;
                }
            }
        } else if model::block_refs_var(b, var) {
            return true;
        }
    }
    false
}

fn endpoint_never_set(blocks: &[Block], f: &mut Vec<Finding>) {
    for o in model::outputs(blocks)
        .iter()
        .filter(|o| o.name == "control_plane_endpoint")
    {
        let Some(v) = o.value else { continue };
        if v.traversals().is_empty() && v.constant() == Some(Const::Null) {
            f.push(
                Finding::new(
                    "output/endpoint-never-set",
                    Severity::Warning,
                    "output control_plane_endpoint is always null: unless the user supplies an endpoint, the cluster never gets one",
                )
                .at(&o.loc.file, o.loc.line),
            );
        }
    }
}

const CAPACITY_WORDS: &[&str] = &[
    "desired_capacity",
    "desired_size",
    "target_size",
    "instance_count",
];

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `text` with no word character on either side.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

/// `sku.capacity` or `sku[N].capacity`, whitespace ignored.
fn has_sku_capacity(text: &str) -> bool {
    let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    t.match_indices("sku").any(|(i, _)| {
        if t[..i].chars().next_back().is_some_and(is_word_char) {
            return false;
        }
        let mut rest = &t[i + 3..];
        if let Some(r) = rest.strip_prefix('[') {
            let digits = r.chars().take_while(char::is_ascii_digit).count();
            if digits == 0 || !r[digits..].starts_with(']') {
                return false;
            }
            rest = &r[digits + 1..];
        }
        rest.strip_prefix(".capacity")
            .is_some_and(|r| !r.chars().next().is_some_and(is_word_char))
    })
}

pub fn ignores_capacity(source: &str) -> bool {
    source.trim() == "all"
        || CAPACITY_WORDS.iter().any(|w| has_word(source, w))
        || has_sku_capacity(source)
}

fn autoscaling_ignore_changes(blocks: &[Block], f: &mut Vec<Finding>) {
    let Some(first) = blocks
        .iter()
        .find(|b| model::block_refs_var(b, "autoscaling"))
    else {
        return;
    };
    let ok = blocks.iter().filter(|b| b.kind == "resource").any(|b| {
        let ignores = b.body.blocks_of("lifecycle").any(|l| {
            l.body
                .attr("ignore_changes")
                .is_some_and(|a| ignores_capacity(&a.expr.source()))
        });
        ignores && (b.loc.file.ends_with(".json") || model::block_refs_var(b, "autoscaling"))
    });
    if !ok {
        f.push(
            Finding::new(
                "pool/autoscaling-ignore-changes",
                Severity::Warning,
                "the module reads var.autoscaling, but no resource that reads it ignores changes to its desired capacity: each apply would reset what the autoscaler chose",
            )
            .at(&first.loc.file, first.loc.line),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_names() {
        for (src, want) in [
            ("all", true),
            ("[desired_capacity]", true),
            ("[ desired_size, tags ]", true),
            ("[target_size]", true),
            ("[instance_count]", true),
            ("[sku.capacity]", true),
            ("[sku[0].capacity]", true),
            ("[sku [ 0 ] . capacity]", true),
            ("[max_desired_capacity]", false),
            ("[size]", false),
            ("[tags]", false),
            ("[mysku.capacity]", false),
            ("[sku.capacity_x]", false),
        ] {
            assert_eq!(ignores_capacity(src), want, "{src}");
        }
    }
}
