//! A small JSON reader that keeps the byte offset of every value and key, so
//! findings in `.tf.json` files can name a line. Errors carry line and column.

#[derive(Debug, Clone, PartialEq)]
pub enum JValue {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<JNode>),
    /// Members in source order: key, the key's offset, value.
    Object(Vec<(String, usize, JNode)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct JNode {
    pub value: JValue,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub offset: usize,
    pub message: String,
}

pub fn parse(src: &str) -> Result<JNode, JsonError> {
    let mut p = Reader {
        src: src.as_bytes(),
        text: src,
        pos: 0,
        depth: 0,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.pos < p.src.len() {
        return Err(p.err("extra data after the JSON value"));
    }
    Ok(v)
}

const MAX_DEPTH: usize = 512;

struct Reader<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn err(&self, message: &str) -> JsonError {
        JsonError {
            offset: self.pos,
            message: message.to_string(),
        }
    }

    fn ws(&mut self) {
        while self.pos < self.src.len()
            && matches!(self.src[self.pos], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<JNode, JsonError> {
        let offset = self.pos;
        let value = match self.src.get(self.pos) {
            None => return Err(self.err("unexpected end of input")),
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => JValue::String(self.string()?),
            Some(b't') => self.word("true", JValue::Bool(true))?,
            Some(b'f') => self.word("false", JValue::Bool(false))?,
            Some(b'n') => self.word("null", JValue::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.err("invalid character")),
        };
        Ok(JNode { value, offset })
    }

    fn word(&mut self, w: &str, v: JValue) -> Result<JValue, JsonError> {
        if self.text[self.pos..].starts_with(w) {
            self.pos += w.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn number(&mut self) -> Result<JValue, JsonError> {
        let start = self.pos;
        if self.src[self.pos] == b'-' {
            self.pos += 1;
        }
        let digits = |r: &mut Self| {
            let s = r.pos;
            while r.pos < r.src.len() && r.src[r.pos].is_ascii_digit() {
                r.pos += 1;
            }
            r.pos > s
        };
        if !digits(self) {
            return Err(self.err("invalid number"));
        }
        if self.src.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        if matches!(self.src.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.src.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        Ok(JValue::Number(self.text[start..self.pos].to_string()))
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(&c) = self.src.get(self.pos) else {
                return Err(self.err("unterminated string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(&e) = self.src.get(self.pos) else {
                        return Err(self.err("unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let cp = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&cp)
                                && self.text[self.pos..].starts_with("\\u")
                            {
                                self.pos += 2;
                                let lo = self.hex4()?;
                                0x10000 + ((cp - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)
                            } else {
                                cp
                            };
                            out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                c if c < 0x20 => return Err(self.err("control character in string")),
                _ => {
                    // Copy one UTF-8 character.
                    let ch = self.text[self.pos..].chars().next().unwrap_or('\u{FFFD}');
                    out.push(ch);
                    self.pos += ch.len_utf8();
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let h = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("invalid unicode escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("invalid unicode escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        Ok(())
    }

    fn array(&mut self) -> Result<JValue, JsonError> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.src.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(JValue::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            match self.src.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(JValue::Array(items));
                }
                _ => return Err(self.err("expected , or ]")),
            }
        }
    }

    fn object(&mut self) -> Result<JValue, JsonError> {
        self.enter()?;
        self.pos += 1;
        let mut members = Vec::new();
        self.ws();
        if self.src.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(JValue::Object(members));
        }
        loop {
            self.ws();
            if self.src.get(self.pos) != Some(&b'"') {
                return Err(self.err("expected a property name"));
            }
            let key_offset = self.pos;
            let key = self.string()?;
            self.ws();
            if self.src.get(self.pos) != Some(&b':') {
                return Err(self.err("expected :"));
            }
            self.pos += 1;
            self.ws();
            let v = self.value()?;
            members.push((key, key_offset, v));
            self.ws();
            match self.src.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(JValue::Object(members));
                }
                _ => return Err(self.err("expected , or }")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_offsets() {
        let v = parse("{\n  \"a\": [1, \"x\"],\n  \"b\": null\n}").unwrap();
        let JValue::Object(m) = v.value else { panic!() };
        assert_eq!(m[0].0, "a");
        assert_eq!(m[0].1, 4);
        assert_eq!(m[1].2.value, JValue::Null);
    }

    #[test]
    fn rejects_malformed() {
        for src in [
            "{",
            "{\"a\" 1}",
            "[1,]",
            "{\"a\":1,}",
            "tru",
            "1 2",
            "\"\\q\"",
        ] {
            assert!(parse(src).is_err(), "{src}");
        }
        assert_eq!(
            parse("\"\\u00e9\"").unwrap().value,
            JValue::String("é".into())
        );
    }
}
