//! The shape of `reconcile/`, checked from its source: no import circle
//! between its files, no file over 600 lines, no function over 80 lines but
//! those listed below. A pass that is hard to follow grows back one
//! shortcut at a time; these fail on the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;

/// Files over the limit today. The list only shrinks: a file listed here
/// that fits fails the test too.
const LONG_FILES: &[&str] = &[];

/// The files of `reconcile/` that only decide: no request and no `.await`.
/// Every request of the client is a future, so code that neither awaits
/// nor spawns one makes none, whatever types it imports.
const PURE_FILES: &[&str] = &[
    "announcements.rs",
    "bookkeeping.rs",
    "effect.rs",
    "inputs_applied.rs",
    "job_report.rs",
    "leaving.rs",
    "machine/outputs.rs",
    "next_op.rs",
    "open_pass.rs",
    "opening_plan.rs",
    "pass_conditions.rs",
    "pool/outputs.rs",
    "rendered.rs",
    "routing.rs",
    "settings.rs",
    "status.rs",
    "workload.rs",
];

/// Functions over the limit today (`file::function`). The list only
/// shrinks: a function listed here that fits fails the test too.
const LONG_FUNCTIONS: &[&str] = &[
    // The wiring of every shared watch: one stream per source, fanned out
    // to the three controllers, read as one table.
    "shared_sources::open",
];

fn reconcile_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/reconcile")
}

/// Every source file of `reconcile/` but the tests and the test doubles,
/// by its path relative to `reconcile/`.
fn sources() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![reconcile_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(reconcile_dir()).unwrap();
            let rel = rel.to_string_lossy().into_owned();
            if path.is_dir() {
                if !rel.ends_with("tests") {
                    dirs.push(path);
                }
            } else if rel.ends_with(".rs") && !is_test_file(&rel) {
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}

fn is_test_file(rel: &str) -> bool {
    let stem = rel.trim_end_matches(".rs");
    stem.ends_with("_tests")
        || stem.ends_with("/tests")
        || ["mock_api", "fake_apiserver"].contains(&stem)
}

/// The file's code without its trailing `#[cfg(test)] mod ...` block.
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod ") || next.starts_with("#[path"))
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// The module path of a file: `pool/plan.rs` -> `pool::plan`, `pool/mod.rs`
/// -> `pool`, `mod.rs` -> `` (the root).
fn module_of(rel: &str) -> String {
    let stem = rel.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "mod" {
        String::new()
    } else {
        stem.replace('/', "::")
    }
}

/// The modules of `reconcile/` a file names, resolved to files: `super::x`,
/// `self::x` and `crate::reconcile::x` paths, and a module's own children
/// by their names.
fn imports(rel: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let me = module_of(rel);
    let parent = |m: &str| {
        m.rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_owned())
    };
    let mut out = BTreeSet::new();
    for word in paths(code) {
        let parts: Vec<&str> = word.split("::").filter(|p| !p.is_empty()).collect();
        let (mut base, rest) = match parts.as_slice() {
            ["crate", "reconcile", rest @ ..] => (String::new(), rest),
            ["super", "super", rest @ ..] => (parent(&parent(&me)), rest),
            ["super", rest @ ..] => (parent(&me), rest),
            ["self", rest @ ..] => (me.clone(), rest),
            [first, ..] if modules.contains(&join(&me, first)) => (me.clone(), &parts[..]),
            _ => continue,
        };
        // The deepest module the path names (`super::Context` names the
        // parent itself).
        let mut target = Some(base.clone());
        for p in rest {
            let next = join(&base, p);
            if !modules.contains(&next) {
                break;
            }
            target = Some(next.clone());
            base = next;
        }
        if let Some(t) = target.filter(|t| *t != me) {
            out.insert(t);
        }
    }
    out
}

/// The paths a file's code names, with one level of `a::{b, c::D}` groups
/// spread out (`a::b`, `a::c::D`).
fn paths(code: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("::{") {
        let start = rest[..at]
            .rfind(|c: char| !is_path_char(c))
            .map_or(0, |i| i + 1);
        let prefix = &rest[start..at];
        let close = rest[at..].find('}').map_or(rest.len(), |i| at + i);
        for item in rest[at + 3..close].split(',') {
            out.push(format!("{prefix}::{}", item.trim()));
        }
        out.extend(words(&rest[..start]));
        rest = &rest[close..];
    }
    out.extend(words(rest));
    out
}

fn words(code: &str) -> Vec<String> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.contains("::"))
        .map(str::to_owned)
        .collect()
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}::{name}")
    }
}

/// The circles of the import graph: each strongly connected set of two or
/// more modules, by Tarjan's algorithm.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    set.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let modules: BTreeSet<String> = files.keys().map(|f| module_of(f)).collect();
    files
        .iter()
        .map(|(rel, text)| (module_of(rel), imports(rel, without_tests(text), &modules)))
        .collect()
}

/// The functions of a file with their text, from the `fn` line to the
/// closing brace at the same indent (the layout `cargo fmt` keeps).
fn functions(code: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let Some(name) = fn_name(trimmed) else {
            continue;
        };
        let close = " ".repeat(indent) + "}";
        let end = lines[i..].iter().position(|l| *l == close).map(|n| i + n);
        // A declaration without a body (a trait's) ends with `;`.
        if let Some(end) = end.filter(|_| !trimmed.trim_end().ends_with(';')) {
            out.push((name, lines[i..=end].join("\n")));
        }
    }
    out
}

/// Functions of a file longer than `MAX_FN_LINES`.
fn long_functions(code: &str) -> Vec<(String, usize)> {
    functions(code)
        .into_iter()
        .map(|(name, text)| (name, text.lines().count()))
        .filter(|(_, len)| *len > MAX_FN_LINES)
        .collect()
}

/// What only a stage that talks to the apiserver may hold.
const API_MARKS: &[&str] = &[
    ".await",
    "async ",
    ".client",
    "Client",
    "Api::",
    "Api<",
    "crate::io",
    "spawn(",
];

fn api_marks(code: &str) -> Vec<&'static str> {
    API_MARKS
        .iter()
        .copied()
        .filter(|m| code.contains(m))
        .collect()
}

fn fn_name(trimmed: &str) -> Option<String> {
    let mut rest = trimmed;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(rest[..end].to_owned())
}

#[test]
fn no_import_circle_between_the_files_of_reconcile() {
    let found = circles(&import_graph());
    assert!(found.is_empty(), "import circles in reconcile/: {found:#?}");
}

#[test]
fn the_circle_finder_finds_a_circle_and_only_a_circle() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry((*a).into()).or_default().insert((*b).into());
            g.entry((*b).into()).or_default();
        }
        g
    };
    assert!(circles(&g(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(
        circles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        vec![vec!["a".to_owned(), "b".into(), "c".into()]]
    );
}

#[test]
fn imports_resolve_super_self_and_children() {
    let modules: BTreeSet<String> = ["", "pool", "pool::plan", "pool::deps", "common"]
        .into_iter()
        .map(String::from)
        .collect();
    let code = "use super::stored;
use super::common::Stored; use super::{Context, Error}; fn f() { deps::read() }";
    assert_eq!(
        imports("pool/plan.rs", code, &modules),
        BTreeSet::from(["pool".to_owned()]),
        "a sibling's `super::` names the folder's module, not a sibling"
    );
    let code = "use super::super::{common::Stored, pool}; use super::deps::Deps;";
    assert_eq!(
        imports("pool/plan.rs", code, &modules),
        BTreeSet::from(["common".to_owned(), "pool".into(), "pool::deps".into()])
    );
    let code = "use super::common; mod plan; fn r() { plan::run(); self::deps::x(); }";
    assert_eq!(
        imports("pool/mod.rs", code, &modules),
        BTreeSet::from([
            "common".to_owned(),
            "pool::plan".into(),
            "pool::deps".into()
        ])
    );
}

#[test]
fn no_file_of_reconcile_over_600_lines_but_those_listed() {
    let mut over = Vec::new();
    for (rel, text) in sources() {
        let n = text.lines().count();
        let listed = LONG_FILES.contains(&rel.as_str());
        if (n > MAX_FILE_LINES) != listed {
            over.push(format!("{rel}: {n} lines (listed: {listed})"));
        }
    }
    assert!(
        over.is_empty(),
        "files against the {MAX_FILE_LINES}-line limit: {over:#?}"
    );
}

#[test]
fn no_function_of_reconcile_over_80_lines_but_those_listed() {
    let mut long = BTreeSet::new();
    for (rel, text) in sources() {
        for (name, _) in long_functions(without_tests(&text)) {
            long.insert(format!("{}::{name}", rel.trim_end_matches(".rs")));
        }
    }
    let listed: BTreeSet<String> = LONG_FUNCTIONS.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = long.difference(&listed).collect();
    let fixed: Vec<_> = listed.difference(&long).collect();
    assert!(
        new.is_empty() && fixed.is_empty(),
        "over {MAX_FN_LINES} lines and not listed: {new:#?}\nlisted but now short (take them off): {fixed:#?}"
    );
}

#[test]
fn function_lengths_count_from_the_signature_to_the_closing_brace() {
    let body = "    x();\n".repeat(MAX_FN_LINES);
    let code = format!("pub async fn long() {{\n{body}}}\nfn short() {{\n}}\n");
    assert_eq!(
        long_functions(&code),
        vec![("long".to_owned(), MAX_FN_LINES + 2)]
    );
    let code = format!("impl A {{\n    fn m(&self) {{\n{body}    }}\n}}\n");
    assert_eq!(
        long_functions(&code),
        vec![("m".to_owned(), MAX_FN_LINES + 2)]
    );
}

#[test]
fn no_api_call_in_a_plan_stage() {
    let mut found = Vec::new();
    for (rel, text) in &sources() {
        let code = without_tests(text);
        if PURE_FILES.contains(&rel.as_str()) {
            for m in api_marks(code) {
                found.push(format!("{rel} holds `{m}`"));
            }
        }
        // Every plan function, wherever it lives, is a pure function.
        for (name, body) in functions(code) {
            if name == "plan" || name.starts_with("plan_") {
                for m in api_marks(&body) {
                    found.push(format!("{rel}: {name} holds `{m}`"));
                }
            }
        }
    }
    assert!(found.is_empty(), "requests in planning: {found:#?}");
}

#[test]
fn api_marks_find_a_request_and_nothing_in_plain_code() {
    let request = "fn plan(ctx: &Context) { let api: Api<Job> = x; api.get(\"a\").await }";
    assert_eq!(api_marks(request), vec![".await", "Api<"]);
    let plain = "fn plan(s: &Snapshot) -> Plan { Plan { close: s.requeue } }";
    assert!(api_marks(plain).is_empty());
    let code = "fn plan_start() -> u8 {\n    1\n}\nasync fn execute() {\n    go().await;\n}\n";
    let names: Vec<String> = functions(code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["plan_start", "execute"]);
}

/// What a branch on the kind looks like in code generic over `Workload`.
fn kind_branches(code: &str) -> Vec<&'static str> {
    ["KIND ==", "KIND !=", "match K::KIND", "matches!(K::KIND"]
        .into_iter()
        .filter(|m| code.contains(m))
        .collect()
}

#[test]
fn no_branch_on_the_kind_in_shared_code() {
    // A kind's difference is a `Workload` constant or function, declared
    // with the kind; shared code that compares kinds grows a case per kind.
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|(rel, text)| {
            kind_branches(without_tests(text))
                .into_iter()
                .map(move |m| format!("{rel} holds `{m}`"))
        })
        .collect();
    assert!(found.is_empty(), "kind branches: {found:#?}");
    let branch = "if K::KIND == WorkloadKind::Cluster { release().await; }";
    assert_eq!(kind_branches(branch), vec!["KIND =="]);
    assert!(kind_branches("let s = state_suffix(K::KIND, ns, name);").is_empty());
}
