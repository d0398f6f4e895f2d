//! Module loading on disk: file sets, ignored names, nested calls, cycles
//! and paths that leave the module (symlinks are made at test time).

use captf_lint::config::load::{self, DiskFs, LoadError};
use captf_lint::config::model;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

fn write(dir: &Path, name: &str, content: &str) {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

#[test]
fn file_sets_and_ignored_names() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "main.tf", "variable \"a\" {\n  type = string\n}\n");
    write(d, "main.tofu", "variable \"b\" {\n  type = string\n}\n");
    write(d, "extra.tf.json", "{\"variable\": {\"c\": {}}}");
    write(d, "extra.tofu.json", "{\"variable\": {\"d\": {}}}");
    write(d, "only.tf", "variable \"e\" {}\n");
    // Broken, but ignored by name.
    write(d, ".hidden.tf", "{{{");
    write(d, "backup.tf~", "{{{");
    write(d, "#autosave.tf#", "{{{");
    write(d, "notes.json", "{{{");
    write(d, "sub/broken.tf", "{{{");
    let tree = load::load(&DiskFs, d).unwrap();
    let root = &tree.modules[0];
    let names = |blocks| {
        let mut v: Vec<String> = model::variables(blocks)
            .iter()
            .map(|v| v.name.to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&root.terraform), vec!["a", "c", "e"]);
    assert_eq!(names(&root.opentofu), vec!["b", "d", "e"]);
    assert_eq!(names(root.contract_config()), vec!["a", "c", "e"]);
    assert_eq!(names(root.model()), vec!["b", "d", "e"]);
}

#[test]
fn tofu_only_modules_use_opentofu_declarations() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "main.tofu", "variable \"x\" {}\n");
    let tree = load::load(&DiskFs, tmp.path()).unwrap();
    assert_eq!(model::variables(tree.modules[0].contract_config()).len(), 1);
}

#[test]
fn empty_and_broken_modules_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(
        load::load(&DiskFs, tmp.path()),
        Err(LoadError::Empty(_))
    ));
    write(
        tmp.path(),
        "main.tf",
        "module \"n\" {\n  source = \"./n\"\n}\n",
    );
    write(tmp.path(), "n/main.tf", "output \"x\" {\n  value = [\n}\n");
    match load::load(&DiskFs, tmp.path()) {
        Err(LoadError::Parse(e)) => {
            assert_eq!(e.file, "n/main.tf");
            assert_eq!(e.line, 3);
        }
        other => panic!("{other:?}"),
    }
    assert!(load::load(&DiskFs, &tmp.path().join("missing")).is_err());
}

#[test]
fn nested_calls_cycles_and_escapes() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    write(&outside, "x.tf", "variable \"outside\" {}\n");
    let d = tmp.path().join("root");
    write(
        &d,
        "main.tf",
        "module \"a\" {\n  source = \"./a\"\n}\n\nmodule \"again\" {\n  source = \"./a/\"\n}\n\nmodule \"self\" {\n  source = \".\"\n}\n\nmodule \"up\" {\n  source = \"../outside\"\n}\n\nmodule \"link\" {\n  source = \"./link\"\n}\n\nmodule \"gone\" {\n  source = \"./gone\"\n}\n\nmodule \"remote\" {\n  source = \"hashicorp/consul/aws\"\n}\n",
    );
    write(
        &d,
        "a/main.tf",
        "module \"back\" {\n  source = \"..\"\n}\n\nmodule \"b\" {\n  source = \"../b\"\n}\n",
    );
    write(&d, "b/main.tf", "variable \"b\" {}\n");
    symlink(&outside, d.join("link")).unwrap();
    symlink(outside.join("x.tf"), d.join("ext.tf")).unwrap();
    symlink(d.join("nowhere.tf"), d.join("dangling.tf")).unwrap();
    let tree = load::load(&DiskFs, &d).unwrap();
    let dirs: Vec<&str> = tree.modules.iter().map(|m| m.rel_dir.as_str()).collect();
    assert_eq!(dirs, vec!["", "a", "b"]);
    // Both calls of ./a share one loaded module.
    let calls: Vec<(&str, usize)> = tree.modules[0]
        .calls
        .iter()
        .map(|(n, i)| (n.as_str(), *i))
        .collect();
    assert_eq!(calls, vec![("a", 1), ("again", 1)]);
    let mut escapes: Vec<(String, usize, String)> = tree
        .findings
        .iter()
        .map(|f| (f.file.clone(), f.line, f.message.clone()))
        .collect();
    escapes.sort();
    let summary: Vec<(&str, usize)> = escapes.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(
        summary,
        vec![
            ("dangling.tf", 0),
            ("ext.tf", 0),
            ("main.tf", 13),
            ("main.tf", 17),
            ("main.tf", 21)
        ],
        "{escapes:#?}"
    );
    assert!(escapes[2].2.contains("leaves the module directory"));
    assert!(escapes[3].2.contains("through a symlink"));
    assert!(escapes[4].2.contains("cannot be resolved"));
    // The symlinked file is still read.
    assert!(
        model::variables(&tree.modules[0].terraform)
            .iter()
            .any(|v| v.name == "outside")
    );
}
