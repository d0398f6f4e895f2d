//! Expressions of either syntax and the questions the checks ask of them:
//! which variables they reference, whether they are constant, their source.

use super::json::{JNode, JValue};
use hcl_edit::Span;
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::visit::{self, Visit};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum Expr {
    /// A native-syntax expression and the text of the file it came from
    /// (its spans index into that text).
    Native {
        expr: Box<Expression>,
        file_src: Arc<str>,
    },
    Json(JNode),
}

/// A value known without any context.
#[derive(Debug, Clone, PartialEq)]
pub enum Const {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    /// A list, object or anything else known but not needed in detail.
    Other,
}

impl Expr {
    pub fn native(expr: Expression, file_src: Arc<str>) -> Self {
        Expr::Native {
            expr: Box::new(expr),
            file_src,
        }
    }

    /// The expression's text: the source slice for native syntax; for JSON,
    /// a string's content or the value written compactly.
    pub fn source(&self) -> String {
        match self {
            Expr::Native { expr, file_src } => expr
                .span()
                .and_then(|r| file_src.get(r))
                .unwrap_or_default()
                .to_string(),
            Expr::Json(n) => match &n.value {
                JValue::String(s) => s.clone(),
                _ => json_text(n),
            },
        }
    }

    pub fn as_native(&self) -> Option<&Expression> {
        match self {
            Expr::Native { expr, .. } => Some(expr),
            Expr::Json(_) => None,
        }
    }

    /// Every reference the expression makes, as the names of its root and
    /// its attribute steps (`var.x.y` → `["var", "x", "y"]`).
    pub fn traversals(&self) -> Vec<Vec<String>> {
        let mut c = Collector::default();
        match self {
            Expr::Native { expr, .. } => c.visit_expr(expr),
            Expr::Json(n) => json_traversals(n, &mut c),
        }
        c.found
    }

    /// Names of the input variables referenced (`var.<name>`).
    pub fn var_names(&self) -> Vec<String> {
        self.traversals()
            .into_iter()
            .filter(|t| t.len() >= 2 && t[0] == "var")
            .map(|t| t[1].clone())
            .collect()
    }

    pub fn refs_var(&self, name: &str) -> bool {
        self.var_names().iter().any(|n| n == name)
    }

    /// The value when it can be known with no variables and no functions.
    pub fn constant(&self) -> Option<Const> {
        if !self.traversals().is_empty() {
            return None;
        }
        match self {
            Expr::Native { expr, .. } => {
                use hcl::eval::{Context, Evaluate};
                let e: hcl::Expression = (**expr).clone().into();
                let v = e.evaluate(&Context::new()).ok()?;
                Some(match v {
                    hcl::Value::Null => Const::Null,
                    hcl::Value::Bool(b) => Const::Bool(b),
                    hcl::Value::Number(n) => Const::Number(n.to_string()),
                    hcl::Value::String(s) => Const::String(s),
                    _ => Const::Other,
                })
            }
            Expr::Json(n) => Some(match &n.value {
                JValue::Null => Const::Null,
                JValue::Bool(b) => Const::Bool(*b),
                JValue::Number(s) => Const::Number(s.clone()),
                JValue::String(s) => {
                    if s.contains("${") || s.contains("%{") {
                        return None;
                    }
                    Const::String(s.clone())
                }
                _ => Const::Other,
            }),
        }
    }

    /// Members of an object value (`{ k = v }` or a JSON object), keyed by
    /// their literal names; empty for anything else.
    pub fn object_members(&self) -> Vec<(String, Expr)> {
        match self {
            Expr::Native { expr, file_src } => match &**expr {
                Expression::Object(o) => o
                    .iter()
                    .filter_map(|(k, v)| {
                        let key = match k {
                            hcl_edit::expr::ObjectKey::Ident(i) => i.as_str().to_string(),
                            hcl_edit::expr::ObjectKey::Expression(Expression::String(s)) => {
                                s.as_str().to_string()
                            }
                            _ => return None,
                        };
                        Some((key, Expr::native(v.expr().clone(), file_src.clone())))
                    })
                    .collect(),
                Expression::Parenthesis(p) => {
                    Expr::native(p.inner().clone(), file_src.clone()).object_members()
                }
                _ => Vec::new(),
            },
            Expr::Json(n) => match &n.value {
                JValue::Object(m) => m
                    .iter()
                    .map(|(k, _, v)| (k.clone(), Expr::Json(v.clone())))
                    .collect(),
                _ => Vec::new(),
            },
        }
    }

    /// Elements of a list/tuple value; empty for anything else.
    pub fn array_items(&self) -> Vec<Expr> {
        match self {
            Expr::Native { expr, file_src } => match &**expr {
                Expression::Array(a) => a
                    .iter()
                    .map(|e| Expr::native(e.clone(), file_src.clone()))
                    .collect(),
                _ => Vec::new(),
            },
            Expr::Json(n) => match &n.value {
                JValue::Array(items) => items.iter().map(|v| Expr::Json(v.clone())).collect(),
                _ => Vec::new(),
            },
        }
    }
}

fn json_text(n: &JNode) -> String {
    match &n.value {
        JValue::Null => "null".into(),
        JValue::Bool(b) => b.to_string(),
        JValue::Number(s) => s.clone(),
        JValue::String(s) => serde_json::to_string(s).unwrap_or_default(),
        JValue::Array(items) => format!(
            "[{}]",
            items.iter().map(json_text).collect::<Vec<_>>().join(",")
        ),
        JValue::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, _, v)| format!(
                    "{}:{}",
                    serde_json::to_string(k).unwrap_or_default(),
                    json_text(v)
                ))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// JSON strings are templates: interpolations inside them are references.
fn json_traversals(n: &JNode, c: &mut Collector) {
    match &n.value {
        JValue::String(s) if s.contains("${") || s.contains("%{") => {
            if let Ok(t) = hcl_edit::parser::parse_template(s) {
                c.visit_template(&t);
            }
        }
        JValue::Array(items) => items.iter().for_each(|i| json_traversals(i, c)),
        JValue::Object(m) => m.iter().for_each(|(_, _, v)| json_traversals(v, c)),
        _ => {}
    }
}

#[derive(Default)]
struct Collector {
    found: Vec<Vec<String>>,
    /// Names bound by enclosing `for` expressions: not references.
    bound: Vec<String>,
}

impl Visit for Collector {
    fn visit_expr(&mut self, expr: &Expression) {
        match expr {
            Expression::Variable(v) => {
                if !self.bound.iter().any(|b| b == v.as_str()) {
                    self.found.push(vec![v.as_str().to_string()]);
                }
            }
            Expression::Traversal(t) => {
                if let Expression::Variable(v) = &t.expr {
                    if !self.bound.iter().any(|b| b == v.as_str()) {
                        let mut path = vec![v.as_str().to_string()];
                        for op in &t.operators {
                            match op.value() {
                                TraversalOperator::GetAttr(a) => path.push(a.as_str().to_string()),
                                _ => break,
                            }
                        }
                        self.found.push(path);
                    }
                    for op in &t.operators {
                        if let TraversalOperator::Index(e) = op.value() {
                            self.visit_expr(e);
                        }
                    }
                } else {
                    visit::visit_expr(self, expr);
                }
            }
            Expression::ForExpr(f) => {
                self.visit_expr(&f.intro.collection_expr);
                let n = self.bound.len();
                self.bound.push(f.intro.value_var.as_str().to_string());
                if let Some(k) = &f.intro.key_var {
                    self.bound.push(k.as_str().to_string());
                }
                if let Some(k) = &f.key_expr {
                    self.visit_expr(k);
                }
                self.visit_expr(&f.value_expr);
                if let Some(c) = &f.cond {
                    self.visit_expr(&c.expr);
                }
                self.bound.truncate(n);
            }
            _ => visit::visit_expr(self, expr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(src: &str) -> Expr {
        let e = hcl_edit::parser::parse_expr(src).unwrap();
        Expr::native(e, Arc::from(src))
    }

    #[test]
    fn finds_references() {
        let e = native("merge(var.captf_tags, { a = local.x[0].y }, [for t in var.l : t.name])");
        let t = e.traversals();
        assert!(t.contains(&vec!["var".into(), "captf_tags".into()]));
        assert!(t.contains(&vec!["local".into(), "x".into()]));
        assert!(t.contains(&vec!["var".into(), "l".into()]));
        assert!(!t.iter().any(|p| p[0] == "t"));
        assert!(native("\"${var.a}-x\"").refs_var("a"));
        let j = Expr::Json(super::super::json::parse("{\"a\": [\"${var.b}\"]}").unwrap());
        assert!(j.refs_var("b"));
    }

    #[test]
    fn constants() {
        assert_eq!(native("null").constant(), Some(Const::Null));
        assert_eq!(
            native("\"a${\"b\"}\"").constant(),
            Some(Const::String("ab".into()))
        );
        assert_eq!(native("var.x").constant(), None);
        assert_eq!(native("true ? null : null").constant(), Some(Const::Null));
        assert_eq!(native("upper(\"a\")").constant(), None);
        assert_eq!(native("string").source(), "string");
    }
}
