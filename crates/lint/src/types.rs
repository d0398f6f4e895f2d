//! Terraform type constraints as the linter understands them: a small parser
//! over the constraint's source text and the compatibility relation used by
//! `input/type`.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    String,
    Number,
    Bool,
    Any,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Tuple(Vec<Type>),
    Object(BTreeMap<String, Attr>),
}

/// One object attribute: its type and whether `optional(...)` wraps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ty: Type,
    pub optional: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Punct(char),
    Quoted(String),
    Word(String),
}

fn tokenize(src: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = src.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "(){}[]=,:".contains(c) {
            out.push(Token::Punct(c));
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    None => return Err("unterminated string".into()),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(other) => s.push(other),
                        None => return Err("unterminated string".into()),
                    },
                    Some(other) => s.push(other),
                }
            }
            out.push(Token::Quoted(s));
        } else {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || "(){}[]=,:\"".contains(c) {
                    break;
                }
                w.push(c);
                chars.next();
            }
            out.push(Token::Word(w));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.next() {
            Some(Token::Punct(p)) if p == c => Ok(()),
            other => Err(format!(
                "expected {c:?}, found {}",
                describe(other.as_ref())
            )),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Token::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn ty(&mut self) -> Result<Type, String> {
        let word = match self.next() {
            Some(Token::Word(w)) => w,
            other => {
                return Err(format!(
                    "expected a type, found {}",
                    describe(other.as_ref())
                ));
            }
        };
        match word.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "any" => Ok(Type::Any),
            "list" | "set" | "map" => {
                self.expect('(')?;
                let elem = Box::new(self.ty()?);
                self.expect(')')?;
                Ok(match word.as_str() {
                    "list" => Type::List(elem),
                    "set" => Type::Set(elem),
                    _ => Type::Map(elem),
                })
            }
            "tuple" => {
                self.expect('(')?;
                self.expect('[')?;
                let mut elems = Vec::new();
                while !self.eat(']') {
                    elems.push(self.ty()?);
                    if !self.eat(',') && self.peek() != Some(&Token::Punct(']')) {
                        return Err("expected , or ] in tuple".into());
                    }
                }
                self.expect(')')?;
                Ok(Type::Tuple(elems))
            }
            "object" => {
                self.expect('(')?;
                self.expect('{')?;
                let mut attrs = BTreeMap::new();
                while !self.eat('}') {
                    let key = match self.next() {
                        Some(Token::Word(w)) | Some(Token::Quoted(w)) => w,
                        other => {
                            return Err(format!(
                                "expected an attribute name, found {}",
                                describe(other.as_ref())
                            ));
                        }
                    };
                    if !(self.eat('=') || self.eat(':')) {
                        return Err(format!("expected = after attribute {key}"));
                    }
                    let attr = self.attr()?;
                    attrs.insert(key, attr);
                    self.eat(',');
                }
                self.expect(')')?;
                Ok(Type::Object(attrs))
            }
            other => Err(format!("unknown type {other:?}")),
        }
    }

    fn attr(&mut self) -> Result<Attr, String> {
        if self.peek() == Some(&Token::Word("optional".into())) {
            self.pos += 1;
            self.expect('(')?;
            let ty = self.ty()?;
            if self.eat(',') {
                self.skip_default()?;
            }
            self.expect(')')?;
            return Ok(Attr { ty, optional: true });
        }
        Ok(Attr {
            ty: self.ty()?,
            optional: false,
        })
    }

    /// Skips an `optional(T, default)` default: any tokens up to the `)`
    /// that closes the `optional(`.
    fn skip_default(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                None => return Err("unterminated optional(...)".into()),
                Some(Token::Punct(c)) if "({[".contains(*c) => depth += 1,
                Some(Token::Punct(c)) if ")}]".contains(*c) => {
                    if depth == 0 {
                        return Ok(());
                    }
                    depth -= 1;
                }
                _ => {}
            }
            self.pos += 1;
        }
    }
}

fn describe(t: Option<&Token>) -> String {
    match t {
        None => "end of input".into(),
        Some(Token::Punct(c)) => format!("{c:?}"),
        Some(Token::Quoted(s)) => format!("string {s:?}"),
        Some(Token::Word(w)) => format!("{w:?}"),
    }
}

/// Parses a type constraint's source text.
pub fn parse(src: &str) -> Result<Type, String> {
    let mut p = Parser {
        tokens: tokenize(src)?,
        pos: 0,
    };
    let ty = p.ty()?;
    if let Some(t) = p.peek() {
        return Err(format!("unexpected {} after the type", describe(Some(t))));
    }
    Ok(ty)
}

/// Whether a variable declared with type `declared` accepts every value the
/// contract passes as type `contract`.
pub fn compatible(declared: &Type, contract: &Type) -> bool {
    use Type::*;
    match (declared, contract) {
        (Any, _) | (_, Any) => true,
        (Tuple(d), Tuple(c)) => {
            d.len() == c.len() && d.iter().zip(c).all(|(d, c)| compatible(d, c))
        }
        (Tuple(_), List(_) | Set(_)) => false,
        (List(d) | Set(d), Tuple(c)) => c.iter().all(|c| compatible(d, c)),
        (List(d) | Set(d), List(c) | Set(c)) => compatible(d, c),
        (Map(d), Map(c)) => compatible(d, c),
        (Object(d), Object(c)) => d.iter().all(|(name, attr)| match c.get(name) {
            Some(ca) => compatible(&attr.ty, &ca.ty),
            None => attr.optional,
        }),
        (String, String) | (Number, Number) | (Bool, Bool) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_grammar() {
        let ok = [
            "string",
            "list(string)",
            "set(number)",
            "map(any)",
            "tuple([string, number])",
            "tuple([])",
            "object({host=string, port=number})",
            "object({ \"quoted key\" : string })",
            "object({\n a = string\n b = optional(number, 3)\n})",
            "object({a = optional(object({x = list(string)}), { x = [\"(\"] })})",
        ];
        for src in ok {
            assert!(parse(src).is_ok(), "{src}: {:?}", parse(src));
        }
        let bad = [
            "",
            "strin",
            "list(string",
            "string string",
            "object({a})",
            "list()",
            "\"unterminated",
        ];
        for src in bad {
            assert!(parse(src).is_err(), "{src} parsed");
        }
    }

    #[test]
    fn compatibility_table() {
        let cases = [
            // (declared, contract, compatible)
            ("any", "string", true),
            ("string", "any", true),
            ("string", "string", true),
            ("string", "number", false),
            ("number", "string", false),
            ("string", "bool", false),
            ("list(string)", "list(string)", true),
            ("set(string)", "list(string)", true),
            ("list(string)", "set(string)", true),
            ("list(number)", "list(string)", false),
            ("list(string)", "tuple([string, string])", true),
            ("list(string)", "tuple([string, number])", false),
            ("tuple([string])", "list(string)", false),
            ("tuple([string, number])", "tuple([string, number])", true),
            ("tuple([string])", "tuple([string, number])", false),
            ("map(string)", "map(string)", true),
            ("map(number)", "map(string)", false),
            ("map(string)", "object({a=string})", false),
            ("list(string)", "map(string)", false),
            (
                "object({host=string, port=number})",
                "object({host=string, port=number})",
                true,
            ),
            (
                "object({host=string})",
                "object({host=string, port=number})",
                true,
            ),
            (
                "object({host=string, extra=string})",
                "object({host=string, port=number})",
                false,
            ),
            (
                "object({host=string, extra=optional(string)})",
                "object({host=string, port=number})",
                true,
            ),
            (
                "object({port=string})",
                "object({host=string, port=number})",
                false,
            ),
            (
                "object({pods=optional(list(string)), services=optional(list(string)), service_domain=optional(string), api_server_port=optional(number)})",
                "object({pods=list(string), services=list(string), service_domain=string, api_server_port=number})",
                true,
            ),
            ("object({a=optional(number)})", "object({a=string})", false),
        ];
        for (d, c, want) in cases {
            let got = compatible(&parse(d).unwrap(), &parse(c).unwrap());
            assert_eq!(got, want, "compatible({d}, {c})");
        }
    }
}
