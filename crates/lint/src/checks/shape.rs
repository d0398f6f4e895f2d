//! `output/provider-id-list-shape` (warning half): a pool's member list must
//! not filter on health or state, and must be sorted.

use crate::config::ir::Block;
use crate::config::model;
use crate::report::{Finding, Severity};
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::visit::{self, Visit};

pub const ID: &str = "output/provider-id-list-shape";

const STATUS_WORDS: &[&str] = &["running", "healthy"];

fn is_status_word(s: &str) -> bool {
    STATUS_WORDS.iter().any(|w| s.eq_ignore_ascii_case(w))
}

/// Finds status words in a `for` condition: string literals, attribute
/// names, string indexes.
#[derive(Default)]
struct StatusWords {
    found: bool,
}

impl Visit for StatusWords {
    fn visit_expr(&mut self, expr: &Expression) {
        match expr {
            Expression::String(s) if is_status_word(s.as_str()) => self.found = true,
            Expression::Traversal(t) => {
                for op in &t.operators {
                    match op.value() {
                        TraversalOperator::GetAttr(a) if is_status_word(a.as_str()) => {
                            self.found = true
                        }
                        TraversalOperator::Index(Expression::String(s))
                            if is_status_word(s.as_str()) =>
                        {
                            self.found = true
                        }
                        _ => {}
                    }
                }
                visit::visit_expr(self, expr);
            }
            _ => visit::visit_expr(self, expr),
        }
    }

    fn visit_string_template(&mut self, t: &hcl_edit::template::StringTemplate) {
        // A template made only of literal text is a plain string literal.
        let mut text = String::new();
        let mut literal = true;
        for e in t.iter() {
            match e {
                hcl_edit::template::Element::Literal(l) => text.push_str(l.as_str()),
                _ => literal = false,
            }
        }
        if literal && is_status_word(&text) {
            self.found = true;
        }
        visit::visit_string_template(self, t);
    }
}

/// Finds `for` expressions whose condition mentions a status word.
#[derive(Default)]
struct FilteringFor {
    found: bool,
}

impl Visit for FilteringFor {
    fn visit_for_expr(&mut self, f: &hcl_edit::expr::ForExpr) {
        if let Some(c) = &f.cond {
            let mut w = StatusWords::default();
            w.visit_expr(&c.expr);
            self.found |= w.found;
        }
        visit::visit_for_expr(self, f);
    }
}

fn func_name(f: &hcl_edit::expr::FuncCall) -> Option<&str> {
    if f.name.is_namespaced() {
        None
    } else {
        Some(f.name.name.as_str())
    }
}

/// Whether the expression is known to produce a sorted list.
pub fn is_sorted(e: &Expression) -> bool {
    match e {
        Expression::Parenthesis(p) => is_sorted(p.inner()),
        Expression::FuncCall(f) => match func_name(f) {
            Some("sort") => true,
            Some("tolist" | "distinct") if f.args.len() == 1 => {
                f.args.get(0).is_some_and(is_sorted)
            }
            Some("concat") => !f.args.is_empty() && f.args.iter().all(is_sorted),
            _ => false,
        },
        Expression::Conditional(c) => is_sorted(&c.true_expr) && is_sorted(&c.false_expr),
        _ => false,
    }
}

pub fn check(blocks: &[Block]) -> Vec<Finding> {
    let mut out = Vec::new();
    for o in model::outputs(blocks)
        .iter()
        .filter(|o| o.name == "provider_id_list")
    {
        let Some(value) = o.value.and_then(|v| v.as_native()) else {
            continue;
        };
        let mut filtering = FilteringFor::default();
        filtering.visit_expr(value);
        if filtering.found {
            out.push(
                Finding::new(
                    ID,
                    Severity::Warning,
                    "output provider_id_list filters on health or state: it must list every non-terminated member, whatever its health",
                )
                .at(&o.loc.file, o.loc.line),
            );
        }
        if !is_sorted(value) {
            out.push(
                Finding::new(
                    ID,
                    Severity::Warning,
                    "output provider_id_list is not sorted: wrap it in sort() so the list stays stable between runs",
                )
                .at(&o.loc.file, o.loc.line),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(s: &str) -> Expression {
        hcl_edit::parser::parse_expr(s).unwrap()
    }

    #[test]
    fn sortedness() {
        for (src, want) in [
            ("sort(x)", true),
            ("(sort(x))", true),
            ("tolist(sort(x))", true),
            ("distinct(sort(x))", true),
            ("distinct(x)", false),
            ("concat(sort(a), sort(b))", true),
            ("concat(sort(a), b)", false),
            ("concat()", false),
            ("c ? sort(a) : sort(b)", true),
            ("c ? sort(a) : []", false),
            ("local.x", false),
            ("[for i in x : i.id]", false),
        ] {
            assert_eq!(is_sorted(&expr(src)), want, "{src}");
        }
    }

    #[test]
    fn status_filters() {
        for (src, want) in [
            ("[for i in x : i.id if i.state == \"RUNNING\"]", true),
            ("[for i in x : i.id if i.healthy]", true),
            ("[for i in x : i.id if i[\"running\"]]", true),
            ("[for i in x : i.id if i.state != \"TERMINATED\"]", false),
            ("[for i in x : i.id if i.state == \"running-ish\"]", false),
            ("[for i in x : i.id]", false),
            (
                "sort([for i in x : i.id if i.lifecycle_state == \"Running\"])",
                true,
            ),
        ] {
            let mut f = FilteringFor::default();
            f.visit_expr(&expr(src));
            assert_eq!(f.found, want, "{src}");
        }
    }
}
