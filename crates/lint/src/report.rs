//! Findings, the report that collects them, its two renderings and the exit
//! code it maps to.

use serde::Serialize;
use std::fmt::Write as _;

/// How bad a finding is. `Info` never fails a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One problem found. `file` is relative to the module (or image) root and
/// empty when the finding concerns the whole thing; `line` 0 means none.
/// The field order here is the JSON field order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub id: &'static str,
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl Finding {
    pub fn new(id: &'static str, severity: Severity, message: impl Into<String>) -> Self {
        Finding {
            id,
            severity,
            file: String::new(),
            line: 0,
            message: message.into(),
        }
    }

    pub fn at(mut self, file: &str, line: usize) -> Self {
        self.file = file.to_string();
        self.line = line;
        self
    }
}

/// Which set of files the module checks read: printed in the summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSet {
    Terraform,
    OpenTofu,
    NoModule,
}

impl FileSet {
    fn as_str(self) -> &'static str {
        match self {
            FileSet::Terraform => "terraform",
            FileSet::OpenTofu => "opentofu",
            FileSet::NoModule => "no module",
        }
    }
}

/// Process exit codes of the linter.
pub mod exit {
    pub const OK: i32 = 0;
    pub const FINDINGS: i32 = 1;
    pub const UNPARSABLE: i32 = 2;
    pub const USAGE: i32 = 3;
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub error: usize,
    pub warning: usize,
    pub info: usize,
}

/// What the report is about: a module directory (as given on the command
/// line) or an image (described by an info object).
#[derive(Debug, Clone)]
pub enum Subject {
    Module(String),
    Image(ImageInfo),
}

/// The JSON `image` object, fields in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    /// The reference as given on the command line.
    pub reference: String,
    /// Digest of what the reference names (an index or a manifest).
    pub digest: String,
    /// The platforms checked, `os/arch[/variant]`.
    pub platforms: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub subject: Subject,
    pub contract: String,
    pub role: String,
    pub findings: Vec<Finding>,
    pub file_set: FileSet,
}

/// Suffix appended to a warning turned into info by `--allow-warning`.
const ALLOWED_SUFFIX: &str = " (allowed by --allow-warning)";

impl Report {
    /// Sorts findings (file, line, id, message) and applies `--allow-warning`.
    pub fn finish(&mut self, allowed_warnings: &[String]) {
        for f in &mut self.findings {
            if f.severity == Severity::Warning && allowed_warnings.iter().any(|a| a == f.id) {
                f.severity = Severity::Info;
                f.message.push_str(ALLOWED_SUFFIX);
            }
        }
        self.findings.sort_by(|a, b| {
            (&a.file, a.line, a.id, &a.message).cmp(&(&b.file, b.line, b.id, &b.message))
        });
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for f in &self.findings {
            match f.severity {
                Severity::Error => s.error += 1,
                Severity::Warning => s.warning += 1,
                Severity::Info => s.info += 1,
            }
        }
        s
    }

    pub fn exit_code(&self, strict: bool) -> i32 {
        let s = self.summary();
        if s.error > 0 || (strict && s.warning > 0) {
            exit::FINDINGS
        } else {
            exit::OK
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let file = if f.file.is_empty() { "-" } else { &f.file };
            let _ = writeln!(
                out,
                "{} {} {}:{} {}",
                f.severity.as_str(),
                f.id,
                file,
                f.line,
                f.message
            );
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "{} error(s), {} warning(s), {} info (read {} files)",
            s.error,
            s.warning,
            s.info,
            self.file_set.as_str()
        );
        out
    }

    /// The JSON document: keys `module`|`image`, `contract`, `role`,
    /// `findings`, `summary`, in that order, indented by two spaces.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        #[derive(Serialize)]
        struct ModuleDoc<'a> {
            module: &'a str,
            contract: &'a str,
            role: &'a str,
            findings: &'a [Finding],
            summary: Summary,
        }
        #[derive(Serialize)]
        struct ImageDoc<'a> {
            image: &'a ImageInfo,
            contract: &'a str,
            role: &'a str,
            findings: &'a [Finding],
            summary: Summary,
        }
        let mut s = match &self.subject {
            Subject::Module(dir) => serde_json::to_string_pretty(&ModuleDoc {
                module: dir,
                contract: &self.contract,
                role: &self.role,
                findings: &self.findings,
                summary: self.summary(),
            })?,
            Subject::Image(info) => serde_json::to_string_pretty(&ImageDoc {
                image: info,
                contract: &self.contract,
                role: &self.role,
                findings: &self.findings,
                summary: self.summary(),
            })?,
        };
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(findings: Vec<Finding>) -> Report {
        Report {
            subject: Subject::Module("m".into()),
            contract: "v1alpha1".into(),
            role: "machine".into(),
            findings,
            file_set: FileSet::Terraform,
        }
    }

    #[test]
    fn sorts_by_file_line_id_message() {
        let mut r = report(vec![
            Finding::new("b/x", Severity::Error, "z").at("b.tf", 1),
            Finding::new("a/x", Severity::Error, "z").at("b.tf", 1),
            Finding::new("a/x", Severity::Warning, "y").at("a.tf", 9),
            Finding::new("a/x", Severity::Info, "x"),
        ]);
        r.finish(&[]);
        let order: Vec<_> = r.findings.iter().map(|f| (f.file.as_str(), f.id)).collect();
        assert_eq!(
            order,
            vec![
                ("", "a/x"),
                ("a.tf", "a/x"),
                ("b.tf", "a/x"),
                ("b.tf", "b/x")
            ]
        );
    }

    #[test]
    fn allow_warning_downgrades_only_warnings_of_that_id() {
        let mut r = report(vec![
            Finding::new("input/default", Severity::Warning, "w"),
            Finding::new("input/default", Severity::Error, "e"),
            Finding::new("input/sensitive", Severity::Warning, "s"),
        ]);
        r.finish(&["input/default".to_string()]);
        let s = r.summary();
        assert_eq!((s.error, s.warning, s.info), (1, 1, 1));
        assert!(
            r.findings
                .iter()
                .any(|f| f.message == "w (allowed by --allow-warning)")
        );
        assert_eq!(r.exit_code(false), exit::FINDINGS);
    }

    #[test]
    fn strict_fails_on_warnings_and_info_never_fails() {
        let r = report(vec![Finding::new("x/y", Severity::Warning, "w")]);
        assert_eq!(r.exit_code(false), exit::OK);
        assert_eq!(r.exit_code(true), exit::FINDINGS);
        let r = report(vec![Finding::new("x/y", Severity::Info, "i")]);
        assert_eq!(r.exit_code(true), exit::OK);
    }

    #[test]
    fn text_uses_dash_for_whole_module() {
        let r = report(vec![Finding::new("output/health", Severity::Error, "m")]);
        assert_eq!(
            r.to_text(),
            "error output/health -:0 m\n1 error(s), 0 warning(s), 0 info (read terraform files)\n"
        );
    }
}
