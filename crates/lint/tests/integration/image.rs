//! Image checks over OCI layouts built on the fly, with golden reports in
//! `tests/fixtures/images/<case>/` (`UPDATE_GOLDEN=1` rewrites them), and
//! the registry path tested against a layout served on loopback.

use crate::support;

use captf_lint::contract::Role;
use captf_lint::image::{self, ImageError, Options, fetch};
use captf_lint::report::Report;
use std::path::Path;
use support::{Image, Item, file, layer, write_layout};

fn module_files(fixture: &str) -> Vec<Item> {
    let dir = Path::new("tests/fixtures").join(fixture);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| {
            n.ends_with(".tf")
                || n.ends_with(".tofu")
                || n.ends_with(".json") && n != "expected.json"
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            Item::File(
                format!("captf/module/{n}"),
                std::fs::read(dir.join(n)).unwrap(),
                0o644,
            )
        })
        .collect()
}

/// A machine image that passes every check.
fn good() -> Image {
    let mut base = vec![
        Item::Dir("captf/", 0o755),
        Item::Dir("captf/module/", 0o755),
        Item::Dir("usr/local/bin/", 0o755),
        file("usr/local/bin/tofu", "#!tofu\n", 0o755),
        Item::Symlink("captf/runtime", "/usr/local/bin/tofu"),
        Item::Dir("captf/providers/", 0o755),
        Item::Dir(
            "captf/providers/registry.opentofu.org/hashicorp/aws/",
            0o755,
        ),
        file(
            "captf/providers/registry.opentofu.org/hashicorp/aws/terraform-provider-aws_5.0.0_linux_amd64.zip",
            "zip",
            0o644,
        ),
        file(
            "captf/providers/registry.opentofu.org/hashicorp/aws/index.json",
            "{\"versions\":{\"5.0.0\":{}}}",
            0o644,
        ),
        file(
            "captf/module/stale.tf",
            "this file is deleted by the next layer",
            0o644,
        ),
    ];
    base.extend(module_files("good/machine"));
    Image {
        layers: vec![
            layer(base),
            layer(vec![file("captf/module/.wh.stale.tf", "", 0o644)]),
        ],
        user: "65532:65532",
        labels: vec![
            ("io.captf.role", "machine".into()),
            ("io.captf.contract", "v1alpha1".into()),
            ("io.captf.runtime", "tofu".into()),
            ("io.captf.capacity", r#"{"cpu":"4","memory":"16Gi"}"#.into()),
            ("io.captf.node-info", r#"{"architecture":"amd64"}"#.into()),
        ],
        entrypoint: None,
        os: "linux",
        arch: "amd64",
    }
}

fn with_layer(mut img: Image, items: Vec<Item>) -> Image {
    img.layers.push(layer(items));
    img
}

fn label(mut img: Image, key: &'static str, value: Option<&str>) -> Image {
    img.labels.retain(|(k, _)| *k != key);
    if let Some(v) = value {
        img.labels.push((key, v.to_string()));
    }
    img
}

struct Case {
    name: &'static str,
    role: Role,
    images: Vec<Image>,
    platform: Option<&'static str>,
    all_platforms: bool,
}

fn case(name: &'static str, images: Vec<Image>) -> Case {
    Case {
        name,
        role: Role::Machine,
        images,
        platform: None,
        all_platforms: false,
    }
}

fn cases() -> Vec<Case> {
    let arm = Image {
        arch: "arm64",
        ..good()
    };
    let no_module = {
        let mut img = good();
        img.layers.push(layer(vec![Item::File(
            "captf/module/.wh..wh..opq".into(),
            Vec::new(),
            0o644,
        )]));
        img
    };
    vec![
        case("good", vec![good()]),
        case("module-present", vec![no_module]),
        case(
            "module-link",
            vec![with_layer(
                good(),
                vec![
                    Item::Symlink("captf/module/hosts.tf", "/etc/hosts"),
                    file("etc/hosts", "127.0.0.1 localhost\n", 0o644),
                    Item::Hardlink("captf/module/copy.tf", "etc/hosts"),
                ],
            )],
        ),
        case(
            "module-readable",
            vec![with_layer(
                good(),
                vec![
                    file("captf/module/secret.tf", "locals {}\n", 0o600),
                    Item::Dir("captf/providers/private/", 0o700),
                ],
            )],
        ),
        case(
            "runtime-present",
            vec![with_layer(
                good(),
                vec![file("captf/.wh.runtime", "", 0o644)],
            )],
        ),
        case(
            "runtime-not-executable",
            vec![with_layer(
                good(),
                vec![file("usr/local/bin/tofu", "#!tofu\n", 0o644)],
            )],
        ),
        case(
            "runtime-version",
            vec![label(good(), "io.captf.runtime", Some("terraform"))],
        ),
        case(
            "reserved-paths",
            vec![with_layer(
                good(),
                vec![
                    file("captf/work/leftover", "x", 0o644),
                    file("captf/bin/tool", "x", 0o755),
                    file("captf/bin/other", "x", 0o755),
                    Item::Symlink("var/run", "/run"),
                    file("run/captf/credentials/key", "x", 0o644),
                ],
            )],
        ),
        case(
            "entrypoint",
            vec![Image {
                entrypoint: Some(vec!["/captf/runtime"]),
                ..good()
            }],
        ),
        Case {
            platform: Some("linux/s390x"),
            ..case("platform-missing-in-index", vec![good(), arm.clone()])
        },
        Case {
            platform: Some("linux/arm64"),
            ..case("platform-mismatch", vec![good()])
        },
        Case {
            all_platforms: true,
            ..case(
                "all-platforms",
                vec![good(), label(arm, "io.captf.role", Some("cluster"))],
            )
        },
        case(
            "providers-absent",
            vec![with_layer(
                good(),
                vec![file("captf/.wh.providers", "", 0o644)],
            )],
        ),
        case(
            "providers-layout",
            vec![with_layer(
                good(),
                vec![
                    file(
                        "captf/providers/registry.opentofu.org/hashicorp/aws/notes.txt",
                        "x",
                        0o644,
                    ),
                    file("captf/providers/registry.opentofu.org/stray", "x", 0o644),
                    Item::Dir(
                        "captf/providers/registry.opentofu.org/hashicorp/null/3.2.0/windows/",
                        0o755,
                    ),
                ],
            )],
        ),
        case(
            "providers-complete",
            vec![with_layer(
                good(),
                vec![
                    file(
                        "captf/module/providers.tf",
                        "terraform {\n  required_providers {\n    aws = {\n      source = \"hashicorp/aws\"\n    }\n    oci = {\n      source = \"oracle/oci\"\n    }\n  }\n}\n\ndata \"random_id\" \"x\" {\n  byte_length = 4\n}\n",
                        0o644,
                    ),
                    Item::Symlink(
                        "captf/providers/registry.opentofu.org/hashicorp/aws/5.1.0",
                        "/nowhere",
                    ),
                ],
            )],
        ),
        case(
            "label-role-unset",
            vec![label(good(), "io.captf.role", None)],
        ),
        case(
            "label-role-differs",
            vec![label(good(), "io.captf.role", Some("cluster"))],
        ),
        case(
            "label-contract-unset",
            vec![label(good(), "io.captf.contract", None)],
        ),
        case(
            "label-contract-differs",
            vec![label(good(), "io.captf.contract", Some("v1beta1"))],
        ),
        case(
            "label-capacity-unset",
            vec![label(
                label(good(), "io.captf.capacity", None),
                "io.captf.node-info",
                None,
            )],
        ),
        case(
            "label-capacity-invalid",
            vec![label(
                label(good(), "io.captf.capacity", Some(r#"{"cpu":"lots"}"#)),
                "io.captf.node-info",
                Some(r#"{"architecture":"x86"}"#),
            )],
        ),
        Case {
            role: Role::Cluster,
            ..case(
                "label-capacity-other-role",
                vec![label(
                    with_layer(good(), vec![file("captf/module/.wh..wh..opq", "", 0o644)]),
                    "io.captf.role",
                    Some("cluster"),
                )],
            )
        },
        case("user-root", vec![Image { user: "", ..good() }]),
        case(
            "user-unresolved",
            vec![Image {
                user: "captf",
                ..good()
            }],
        ),
        case(
            "module-findings",
            vec![with_layer(
                good(),
                vec![file(
                    "captf/module/backend.tf",
                    "terraform {\n  backend \"s3\" {}\n}\n",
                    0o644,
                )],
            )],
        ),
    ]
}

fn options(c: &Case) -> Options {
    Options {
        role: c.role,
        contract: "v1alpha1".into(),
        platform: c.platform.map(str::to_string),
        all_platforms: c.all_platforms,
        insecure: true,
        limits: Default::default(),
    }
}

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some() || std::env::var_os("UPDATE_SNAPSHOTS").is_some()
}

fn golden(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if update() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, actual).unwrap();
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(want) if want == actual => {}
        Ok(want) => failures.push(format!(
            "{} differs:\n--- want\n{want}\n--- got\n{actual}",
            path.display()
        )),
        Err(e) => failures.push(format!(
            "{}: {e} (run with UPDATE_GOLDEN=1)",
            path.display()
        )),
    }
}

fn lint_layout(dir: &Path, name: &str, opts: &Options) -> Result<Report, ImageError> {
    let mut r = image::lint_blobs(
        &fetch::Layout {
            dir: dir.to_path_buf(),
            tag: None,
        },
        &format!("oci:images/{name}"),
        opts,
    )?;
    r.finish(&[]);
    Ok(r)
}

#[test]
fn image_cases_match_their_golden_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for c in cases() {
        let dir = tmp.path().join(c.name);
        write_layout(&dir, &c.images, "v1");
        let report =
            lint_layout(&dir, c.name, &options(&c)).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        if c.name == "good" {
            assert!(report.findings.is_empty(), "{:?}", report.findings);
        } else {
            assert!(!report.findings.is_empty(), "{} found nothing", c.name);
        }
        ids.extend(report.findings.iter().map(|f| f.id));
        let out = Path::new("tests/fixtures/images").join(c.name);
        golden(
            &out.join("expected.json"),
            &report.to_json().unwrap(),
            &mut failures,
        );
        golden(&out.join("expected.txt"), &report.to_text(), &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let all = [
        "image/module-present",
        "image/module-link",
        "image/module-readable",
        "image/runtime-present",
        "image/runtime-version",
        "image/reserved-paths",
        "image/entrypoint",
        "image/platform",
        "image/providers-absent",
        "image/providers-layout",
        "image/providers-complete",
        "image/label-role",
        "image/label-contract",
        "image/label-capacity",
        "image/user-root",
        "image/user-unresolved",
        "module/backend",
    ];
    let missing: Vec<_> = all.iter().filter(|id| !ids.contains(*id)).collect();
    assert!(missing.is_empty(), "no image case triggers {missing:?}");
}

#[test]
fn unparsable_module_and_oversized_images_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = with_layer(
        good(),
        vec![file("captf/module/broken.tf", "locals {\n", 0o644)],
    );
    write_layout(&tmp.path().join("broken"), &[broken], "v1");
    let c = case("x", vec![]);
    let err = lint_layout(&tmp.path().join("broken"), "broken", &options(&c)).unwrap_err();
    assert!(
        matches!(err, ImageError::Module(ref m) if m.contains("broken.tf:")),
        "{err}"
    );

    write_layout(&tmp.path().join("big"), &[good()], "v1");
    let mut opts = options(&c);
    opts.limits.kept = 4096;
    let err = lint_layout(&tmp.path().join("big"), "big", &opts).unwrap_err();
    assert!(matches!(err, ImageError::TooLarge(_)), "{err}");
    let mut opts = options(&c);
    opts.limits.scanned = 4096;
    let err = lint_layout(&tmp.path().join("big"), "big", &opts).unwrap_err();
    assert!(matches!(err, ImageError::TooLarge(_)), "{err}");

    // A blob altered after the fact fails its digest check.
    let dir = tmp.path().join("tampered");
    write_layout(&dir, &[good()], "v1");
    let layers: Vec<_> = std::fs::read_dir(dir.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for p in layers {
        let mut b = std::fs::read(&p).unwrap();
        if b.starts_with(&[0x1f, 0x8b]) {
            let n = b.len();
            b[n - 5] ^= 0xff;
            std::fs::write(&p, b).unwrap();
        }
    }
    assert!(lint_layout(&dir, "tampered", &options(&c)).is_err());
}

use crate::support::run_cli as cli;

#[test]
fn cli_reads_oci_layouts_and_rejects_bad_references() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    write_layout(&dir, &[good()], "v1");
    let target = format!("oci:{}", dir.display());
    let (code, out, err) = cli(&["image", "--role", "machine", "--strict", &target]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.ends_with("0 error(s), 0 warning(s), 0 info (read terraform files)\n"),
        "{out}"
    );
    let (code, _, _) = cli(&["image", "--role", "cluster", &target]);
    assert_eq!(code, 1);
    let (code, _, err) = cli(&["image", "--role", "machine", &format!("{target}:v1")]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["image", "--role", "machine", &format!("{target}:v2")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no image tagged \"v2\""), "{err}");
    let (code, _, err) = cli(&["image", "--role", "machine", "Not A Ref"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = cli(&["image", "--role", "machine", "oci:/nonexistent/layout"]);
    assert_eq!(code, 2, "{err}");
}

mod registry {
    //! A minimal distribution-API server over an OCI layout, with an
    //! optional bearer-token challenge.

    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::path::PathBuf;

    pub fn serve(layout: PathBuf, require_token: bool) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let layout = layout.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    loop {
                        let mut request_line = String::new();
                        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut authorized = false;
                        loop {
                            let mut h = String::new();
                            reader.read_line(&mut h).unwrap();
                            if h.trim().is_empty() {
                                break;
                            }
                            if h.to_ascii_lowercase()
                                .starts_with("authorization: bearer good-token")
                            {
                                authorized = true;
                            }
                        }
                        let path = request_line
                            .split_whitespace()
                            .nth(1)
                            .unwrap_or("/")
                            .to_string();
                        let (status, ctype, body, extra) =
                            respond(&layout, &path, port, require_token && !authorized);
                        let head = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}\r\n",
                            body.len()
                        );
                        if stream.write_all(head.as_bytes()).is_err()
                            || stream.write_all(&body).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        port
    }

    fn respond(
        layout: &std::path::Path,
        path: &str,
        port: u16,
        challenge: bool,
    ) -> (&'static str, String, Vec<u8>, String) {
        if path.starts_with("/token") {
            return (
                "200 OK",
                "application/json".into(),
                br#"{"token":"good-token"}"#.to_vec(),
                String::new(),
            );
        }
        if challenge {
            return (
                "401 Unauthorized",
                "application/json".into(),
                b"{}".to_vec(),
                format!(
                    "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"test\",scope=\"repository:captf/noop-machine:pull\"\r\n"
                ),
            );
        }
        let not_found = (
            "404 Not Found",
            "text/plain".to_string(),
            b"no".to_vec(),
            String::new(),
        );
        let Some(rest) = path.strip_prefix("/v2/captf/noop-machine/") else {
            return not_found;
        };
        let blob = |digest: &str| {
            std::fs::read(
                layout
                    .join("blobs/sha256")
                    .join(digest.trim_start_matches("sha256:")),
            )
        };
        if let Some(reference) = rest.strip_prefix("manifests/") {
            let index: serde_json::Value =
                serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
            let digest =
                if reference.starts_with("sha256:") {
                    reference.to_string()
                } else {
                    match index["manifests"].as_array().unwrap().iter().find(|m| {
                        m["annotations"]["org.opencontainers.image.ref.name"] == reference
                    }) {
                        Some(m) => m["digest"].as_str().unwrap().to_string(),
                        None => return not_found,
                    }
                };
            let Ok(bytes) = blob(&digest) else {
                return not_found;
            };
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let ctype = v["mediaType"].as_str().unwrap_or_default().to_string();
            return (
                "200 OK",
                ctype,
                bytes,
                format!("Docker-Content-Digest: {digest}\r\n"),
            );
        }
        if let Some(digest) = rest.strip_prefix("blobs/") {
            return match blob(digest) {
                Ok(b) => (
                    "200 OK",
                    "application/octet-stream".into(),
                    b,
                    String::new(),
                ),
                Err(_) => not_found,
            };
        }
        not_found
    }
}

#[test]
fn registry_reference_matches_the_layout_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    let img = label(good(), "io.captf.contract", None);
    write_layout(
        &dir,
        &[
            img.clone(),
            Image {
                arch: "arm64",
                ..img
            },
        ],
        "v1",
    );
    let layout = format!("oci:{}", dir.display());
    let (code_l, out_l, err_l) = cli(&["image", "--role", "machine", "--json", &layout]);
    assert_eq!(code_l, 0, "{err_l}");
    for token in [false, true] {
        let port = registry::serve(dir.clone(), token);
        let reference = format!("127.0.0.1:{port}/captf/noop-machine:v1");
        let (code, out, err) = cli(&[
            "image",
            "--role",
            "machine",
            "--json",
            "--insecure",
            &reference,
        ]);
        assert_eq!(code, code_l, "{out}{err}");
        let l: serde_json::Value = serde_json::from_str(&out_l).unwrap();
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(l["findings"], r["findings"]);
        assert_eq!(l["image"]["digest"], r["image"]["digest"]);
        assert_eq!(r["image"]["platforms"], serde_json::json!(["linux/amd64"]));
        // The arm64 manifest by --platform, and a tag that does not exist.
        let (code, out, _) = cli(&[
            "image",
            "--role",
            "machine",
            "--json",
            "--insecure",
            "--platform",
            "linux/arm64",
            &reference,
        ]);
        assert_eq!(code, 0);
        assert!(out.contains("linux/arm64"));
        let missing = format!("127.0.0.1:{port}/captf/noop-machine:nope");
        let (code, _, err) = cli(&["image", "--role", "machine", "--insecure", &missing]);
        assert_eq!(code, 2, "{err}");
    }
}
