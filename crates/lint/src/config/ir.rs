//! One syntax-neutral view of a configuration file: blocks with labels,
//! attributes with expressions, each with its line. Native HCL files and
//! HCL JSON files both decode into it, so the checks are written once.

use super::expr::Expr;
use super::json::{self, JNode, JValue};
use hcl_edit::Span;
use hcl_edit::structure::{Body as EditBody, Structure};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Loc {
    /// Path relative to the linted root, `/`-separated.
    pub file: String,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Block {
    pub kind: String,
    pub labels: Vec<String>,
    pub body: Body,
    pub loc: Loc,
}

#[derive(Debug, Clone, Default)]
pub struct Body {
    pub attrs: Vec<Attr>,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone)]
pub struct Attr {
    pub name: String,
    pub expr: Expr,
    pub loc: Loc,
}

impl Body {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.name == name)
    }

    pub fn blocks_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
        self.blocks.iter().filter(move |b| b.kind == kind)
    }
}

/// A parse failure, positioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// Maps byte offsets to 1-based lines and columns.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub fn new(src: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    pub fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    pub fn column(&self, offset: usize) -> usize {
        let line = self.line(offset);
        offset - self.starts[line - 1] + 1
    }
}

/// Parses a native-syntax file.
pub fn parse_native(file: &str, src: &str) -> Result<Vec<Block>, ParseError> {
    let lines = Lines::new(src);
    let body = hcl_edit::parser::parse_body(src).map_err(|e| ParseError {
        file: file.to_string(),
        line: e.location().line(),
        column: e.location().column(),
        message: e.message().to_string(),
    })?;
    let conv = NativeConv {
        file,
        src,
        shared: std::sync::Arc::from(src),
        lines,
    };
    let body = conv.body(&body)?;
    if let Some(a) = body.attrs.first() {
        return Err(ParseError {
            file: file.to_string(),
            line: a.loc.line,
            column: 1,
            message: format!("unsupported argument {:?} at the top level", a.name),
        });
    }
    Ok(body.blocks)
}

struct NativeConv<'a> {
    file: &'a str,
    src: &'a str,
    shared: std::sync::Arc<str>,
    lines: Lines,
}

impl NativeConv<'_> {
    fn loc(&self, span: Option<std::ops::Range<usize>>) -> Loc {
        Loc {
            file: self.file.to_string(),
            line: span.map(|s| self.lines.line(s.start)).unwrap_or(0),
        }
    }

    fn body(&self, body: &EditBody) -> Result<Body, ParseError> {
        let mut out = Body::default();
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str().to_string();
                    let loc = self.loc(a.span());
                    // HCL refuses an argument given twice in one body.
                    if out.attrs.iter().any(|x| x.name == name) {
                        let off = a.span().map(|s| s.start).unwrap_or(0);
                        return Err(ParseError {
                            file: self.file.to_string(),
                            line: loc.line,
                            column: self.lines.column(off),
                            message: format!("attribute {name:?} redefined"),
                        });
                    }
                    out.attrs.push(Attr {
                        name,
                        expr: Expr::native(a.value.clone(), self.shared.clone()),
                        loc,
                    });
                }
                Structure::Block(b) => {
                    self.check_single_line(b)?;
                    out.blocks.push(Block {
                        kind: b.ident.as_str().to_string(),
                        labels: b.labels.iter().map(|l| l.as_str().to_string()).collect(),
                        body: self.body(&b.body)?,
                        loc: self.loc(b.span()),
                    });
                }
            }
        }
        Ok(out)
    }

    /// HCL allows a block on one line only when it holds at most one
    /// argument and no nested block.
    fn check_single_line(&self, b: &hcl_edit::structure::Block) -> Result<(), ParseError> {
        let Some(span) = b.span() else { return Ok(()) };
        let text = &self.src[span.clone()];
        let Some(open) = text.find('{') else {
            return Ok(());
        };
        if text[open..].contains('\n') {
            return Ok(());
        }
        let mut items = b.body.iter();
        match (items.next(), items.next()) {
            (None, _) | (Some(Structure::Attribute(_)), None) => Ok(()),
            _ => Err(self.single_line_error(span.start)),
        }
    }

    fn single_line_error(&self, off: usize) -> ParseError {
        ParseError {
            file: self.file.to_string(),
            line: self.lines.line(off),
            column: self.lines.column(off),
            message: "invalid single-argument block definition: a block on one line may hold only one argument".into(),
        }
    }
}

/// Parses an HCL JSON file, decoding the block structure Terraform gives
/// each top-level key.
pub fn parse_json(file: &str, src: &str) -> Result<Vec<Block>, ParseError> {
    let lines = Lines::new(src);
    let root = json::parse(src).map_err(|e| ParseError {
        file: file.to_string(),
        line: lines.line(e.offset),
        column: lines.column(e.offset),
        message: e.message,
    })?;
    let conv = JsonConv { file, lines };
    let JValue::Object(members) = &root.value else {
        return Err(conv.err(
            root.offset,
            "the root of a JSON configuration must be an object",
        ));
    };
    let mut out = Vec::new();
    for (key, key_off, value) in members {
        let shape = match key.as_str() {
            "//" => continue,
            "variable" | "output" | "module" | "provider" => Shape::labels(1, key),
            "resource" | "data" => Shape::labels(2, key),
            "terraform" | "locals" => Shape::labels(0, key),
            _ => Shape::labels(0, key),
        };
        conv.blocks(key, &shape, value, *key_off, Vec::new(), &mut out)?;
    }
    Ok(out)
}

struct Shape {
    labels: usize,
    /// Nested keys decoded as blocks, with their label counts.
    nested: &'static [(&'static str, usize)],
}

impl Shape {
    fn labels(n: usize, kind: &str) -> Shape {
        let nested: &'static [(&'static str, usize)] = match kind {
            "terraform" => &[("backend", 1), ("cloud", 0), ("required_providers", 0)],
            "resource" | "data" => &[
                ("lifecycle", 0),
                ("provisioner", 1),
                ("connection", 0),
                ("dynamic", 1),
            ],
            "variable" => &[("validation", 0)],
            "output" => &[("precondition", 0)],
            _ => &[],
        };
        Shape { labels: n, nested }
    }
}

struct JsonConv<'a> {
    file: &'a str,
    lines: Lines,
}

impl JsonConv<'_> {
    fn err(&self, off: usize, msg: &str) -> ParseError {
        ParseError {
            file: self.file.to_string(),
            line: self.lines.line(off),
            column: self.lines.column(off),
            message: msg.to_string(),
        }
    }

    fn loc(&self, off: usize) -> Loc {
        Loc {
            file: self.file.to_string(),
            line: self.lines.line(off),
        }
    }

    fn blocks(
        &self,
        kind: &str,
        shape: &Shape,
        value: &JNode,
        off: usize,
        labels: Vec<String>,
        out: &mut Vec<Block>,
    ) -> Result<(), ParseError> {
        if labels.len() < shape.labels {
            let JValue::Object(members) = &value.value else {
                if let JValue::Array(items) = &value.value {
                    for item in items {
                        self.blocks(kind, shape, item, item.offset, labels.clone(), out)?;
                    }
                    return Ok(());
                }
                return Err(self.err(
                    value.offset,
                    &format!("expected an object of {kind} blocks"),
                ));
            };
            for (k, k_off, v) in members {
                if k == "//" {
                    continue;
                }
                let mut l = labels.clone();
                l.push(k.clone());
                self.blocks(kind, shape, v, *k_off, l, out)?;
            }
            return Ok(());
        }
        match &value.value {
            JValue::Array(items) => {
                for item in items {
                    self.blocks(kind, shape, item, off, labels.clone(), out)?;
                }
                Ok(())
            }
            JValue::Object(_) => {
                out.push(Block {
                    kind: kind.to_string(),
                    labels,
                    body: self.body(shape, value)?,
                    loc: self.loc(off),
                });
                Ok(())
            }
            _ => Err(self.err(
                value.offset,
                &format!("expected an object for the {kind} block body"),
            )),
        }
    }

    fn body(&self, shape: &Shape, value: &JNode) -> Result<Body, ParseError> {
        let JValue::Object(members) = &value.value else {
            return Err(self.err(value.offset, "expected an object"));
        };
        let mut body = Body::default();
        for (k, k_off, v) in members {
            if k == "//" {
                continue;
            }
            if let Some((_, n)) = shape.nested.iter().find(|(name, _)| name == k) {
                let nested = Shape {
                    labels: *n,
                    nested: &[],
                };
                self.blocks(k, &nested, v, *k_off, Vec::new(), &mut body.blocks)?;
            } else {
                body.attrs.push(Attr {
                    name: k.clone(),
                    expr: Expr::Json(v.clone()),
                    loc: self.loc(*k_off),
                });
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_blocks_have_lines() {
        let src = "\nvariable \"a\" {\n  type = string\n}\n\nresource \"x\" \"y\" {\n  lifecycle {\n    ignore_changes = all\n  }\n}\n";
        let blocks = parse_native("m.tf", src).unwrap();
        assert_eq!(blocks[0].loc.line, 2);
        assert_eq!(blocks[0].body.attr("type").unwrap().expr.source(), "string");
        assert_eq!(blocks[1].labels, vec!["x", "y"]);
        assert_eq!(blocks[1].body.blocks[0].loc.line, 7);
    }

    #[test]
    fn native_errors_have_position() {
        let e = parse_native("m.tf", "variable \"a\" {\n  type = \n}\n").unwrap_err();
        assert_eq!(e.file, "m.tf");
        assert!(e.line >= 2, "{e:?}");
        let e =
            parse_native("m.tf", "variable \"a\" { type = string default = null }\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_native("m.tf", "locals {\n  a = 1\n  a = 2\n}\n").unwrap_err();
        assert_eq!(e.line, 3);
    }

    #[test]
    fn json_decodes_block_shapes() {
        let src = r#"{
  "variable": {"a": {"type": "string", "default": null}},
  "resource": {"t": {"n": [{"count": 1, "lifecycle": {"ignore_changes": "all"}}]}},
  "terraform": [{"backend": {"s3": {}}}]
}"#;
        let blocks = parse_json("m.tf.json", src).unwrap();
        assert_eq!(blocks[0].kind, "variable");
        assert_eq!(blocks[0].labels, vec!["a"]);
        assert_eq!(blocks[0].loc.line, 2);
        assert_eq!(blocks[1].labels, vec!["t", "n"]);
        assert_eq!(blocks[1].body.blocks[0].kind, "lifecycle");
        assert_eq!(blocks[2].body.blocks[0].labels, vec!["s3"]);
        assert_eq!(blocks[2].body.blocks[0].loc.line, 4);
        let e = parse_json("m.tf.json", "{\n  \"variable\": 3\n}").unwrap_err();
        assert_eq!(e.line, 2);
    }
}
