//! Redaction of secret values from every text the runner reports.
//!
//! A secret is hidden in each form it can take in the runtime's output: as
//! written, JSON-escaped (with and without Go's HTML escaping), and line by
//! line when it spans several lines.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine;

/// What replaces a secret.
pub const MASK: &str = "[REDACTED]";
/// A line of a multi-line secret shorter than this is too common a string
/// (a brace, a PEM armour line) to be hidden on its own.
pub const MIN_LINE_SECRET: usize = 16;
/// Values at least this long are hidden whatever their variable is called.
pub const MIN_ANONYMOUS_SECRET: usize = 16;

/// Environment variables whose values are never secrets (the runner or the
/// Job sets them).
const NEVER_SECRET_ENV: [&str; 8] = [
    "TF_DATA_DIR",
    "HOME",
    "TMPDIR",
    "TF_CLI_CONFIG_FILE",
    "TF_IN_AUTOMATION",
    "TF_INPUT",
    "KUBE_NAMESPACE",
    "PATH",
];
const SECRET_NAME_PARTS: [&str; 9] = [
    "KEY",
    "SECRET",
    "TOKEN",
    "PASS",
    "CREDENTIAL",
    "PRIVATE",
    "AUTH",
    "CERT",
    "SESSION",
];

/// The secrets of a run and the matcher that hides them.
#[derive(Debug, Clone)]
pub struct Redactor {
    patterns: Vec<String>,
    matcher: Option<AhoCorasick>,
    /// [`MASK`] unless a secret hides inside it; never contains a secret.
    mask: &'static str,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(std::iter::empty::<String>())
    }
}

impl Redactor {
    /// A redactor for these secret values (empty ones are ignored).
    pub fn new<I, S>(secrets: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut r = Redactor {
            patterns: Vec::new(),
            matcher: None,
            mask: MASK,
        };
        r.extend(secrets);
        r
    }

    /// Adds more secrets (for example the sensitive values of a parsed plan).
    pub fn extend<I, S>(&mut self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for secret in secrets {
            for form in forms_of(secret.as_ref()) {
                if !self.patterns.contains(&form) {
                    self.patterns.push(form);
                }
            }
        }
        self.mask = [MASK, "***", "#", ""]
            .into_iter()
            .find(|m| !self.patterns.iter().any(|p| m.contains(p.as_str())))
            .unwrap_or("");
        self.matcher = if self.patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&self.patterns)
                    .expect("literal patterns build"),
            )
        };
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// `text` with every form of every secret masked.
    pub fn redact(&self, text: &str) -> String {
        let Some(m) = &self.matcher else {
            return text.to_owned();
        };
        let mut out = text.to_owned();
        // A mask next to leftover characters could, in contrived cases,
        // spell another secret again: repeat until nothing matches.
        for _ in 0..8 {
            if !m.is_match(&out) {
                return out;
            }
            out = m.replace_all(&out, &vec![self.mask; self.patterns.len()]);
        }
        if m.is_match(&out) {
            self.mask.to_owned()
        } else {
            out
        }
    }
}

/// Every form in which `secret` may show up in output.
fn forms_of(secret: &str) -> Vec<String> {
    let mut forms = Vec::new();
    if secret.is_empty() {
        return forms;
    }
    let mut push = |s: String| {
        if !s.is_empty() && !forms.contains(&s) {
            forms.push(s);
        }
    };
    push(secret.to_owned());
    let json = json_escaped(secret);
    push(html_escaped(&json));
    push(json);
    if secret.contains('\n') || secret.contains('\r') {
        for line in secret.lines() {
            let line = line.trim_end_matches('\r');
            if line.trim().len() >= MIN_LINE_SECRET {
                let json = json_escaped(line);
                push(line.to_owned());
                push(html_escaped(&json));
                push(json);
            }
        }
    }
    forms
}

/// The JSON string body of `s` (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).expect("strings serialize");
    quoted[1..quoted.len() - 1].to_owned()
}

/// Go's `encoding/json` also escapes `<`, `>`, `&` (and U+2028/2029).
fn html_escaped(json_body: &str) -> String {
    json_body
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Environment values that may be credentials.
pub fn env_secrets<'a, I>(env: I) -> Vec<String>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    env.into_iter()
        .filter(|(name, value)| {
            !value.is_empty()
                && !name.starts_with("KUBERNETES_")
                && !NEVER_SECRET_ENV.contains(name)
        })
        .filter(|(name, value)| {
            let upper = name.to_ascii_uppercase();
            SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
                || value.len() >= MIN_ANONYMOUS_SECRET
        })
        .map(|(_, value)| value.to_owned())
        .collect()
}

/// Secrets from the rendered root and tfvars: every string leaf of each
/// variable the root declares sensitive, and `bootstrap_data` both as given
/// and decoded.
pub fn variable_secrets(main_tf: &serde_json::Value, tfvars: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(vars) = main_tf.get("variable").and_then(|v| v.as_object()) else {
        return out;
    };
    for (name, decl) in vars {
        let sensitive = decl.get("sensitive").and_then(|s| s.as_bool()) == Some(true);
        let Some(value) = tfvars.get(name) else {
            continue;
        };
        if name == "bootstrap_data" {
            if let Some(data) = value.as_str() {
                out.push(data.to_owned());
                if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data)
                    && let Ok(text) = String::from_utf8(bytes)
                {
                    out.push(text);
                }
            }
        } else if sensitive {
            string_leaves(value, &mut out);
        }
    }
    out
}

/// Every non-empty string inside `value`.
pub fn string_leaves(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| string_leaves(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| string_leaves(v, out)),
        _ => {}
    }
}
