//! Builds OCI image layouts on disk for the image tests, deterministically
//! (fixed mtimes), so their digests and reports are stable.

#![allow(dead_code)]

use sha2::{Digest, Sha256};
use std::path::Path;

#[derive(Clone)]
pub enum Item {
    Dir(&'static str, u32),
    File(String, Vec<u8>, u32),
    Symlink(&'static str, &'static str),
    Hardlink(&'static str, &'static str),
}

pub fn file(path: &str, data: &str, mode: u32) -> Item {
    Item::File(path.to_string(), data.as_bytes().to_vec(), mode)
}

#[derive(Clone)]
pub struct Layer {
    pub items: Vec<Item>,
    pub uid: u64,
    pub gzip: bool,
}

pub fn layer(items: Vec<Item>) -> Layer {
    Layer {
        items,
        uid: 0,
        gzip: true,
    }
}

pub fn tar(layer: &Layer) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for item in &layer.items {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(layer.uid);
        h.set_gid(layer.uid);
        match item {
            Item::Dir(p, mode) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_size(0);
                b.append_data(&mut h, p, &[][..]).unwrap();
            }
            Item::File(p, data, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, p, &data[..]).unwrap();
            }
            Item::Symlink(p, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, p, target).unwrap();
            }
            Item::Hardlink(p, target) => {
                h.set_entry_type(tar::EntryType::Link);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_link(&mut h, p, target).unwrap();
            }
        }
    }
    let raw = b.into_inner().unwrap();
    if layer.gzip {
        use std::io::Write;
        let mut gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).unwrap();
        gz.finish().unwrap()
    } else {
        raw
    }
}

pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn put(dir: &Path, bytes: &[u8]) -> serde_json::Value {
    let d = digest(bytes);
    let p = dir.join("blobs/sha256").join(&d[7..]);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
    serde_json::json!({ "digest": d, "size": bytes.len() })
}

#[derive(Clone)]
pub struct Image {
    pub layers: Vec<Layer>,
    pub user: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub entrypoint: Option<Vec<&'static str>>,
    pub os: &'static str,
    pub arch: &'static str,
}

/// Writes one image's config, layers and manifest; returns the manifest
/// descriptor (with its platform).
pub fn write_image(dir: &Path, img: &Image) -> serde_json::Value {
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    for l in &img.layers {
        let raw = tar(&Layer {
            gzip: false,
            ..l.clone()
        });
        diff_ids.push(digest(&raw));
        let blob = tar(l);
        let mut d = put(dir, &blob);
        d["mediaType"] = if l.gzip {
            "application/vnd.oci.image.layer.v1.tar+gzip".into()
        } else {
            "application/vnd.oci.image.layer.v1.tar".into()
        };
        layers.push(d);
    }
    let labels: serde_json::Map<String, serde_json::Value> = img
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    let mut config = serde_json::json!({
        "architecture": img.arch,
        "os": img.os,
        "config": { "User": img.user, "Labels": labels },
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    if let Some(e) = &img.entrypoint {
        config["config"]["Entrypoint"] = serde_json::json!(e);
    }
    let config_bytes = serde_json::to_vec(&config).unwrap();
    let mut config_desc = put(dir, &config_bytes);
    config_desc["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": layers,
    });
    let mut desc = put(dir, &serde_json::to_vec(&manifest).unwrap());
    desc["mediaType"] = "application/vnd.oci.image.manifest.v1+json".into();
    desc["platform"] = serde_json::json!({ "os": img.os, "architecture": img.arch });
    desc
}

/// Writes a layout whose `index.json` names one image (no platform, like
/// a single-platform build) or an index of several.
pub fn write_layout(dir: &Path, images: &[Image], tag: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let descs: Vec<serde_json::Value> = images.iter().map(|i| write_image(dir, i)).collect();
    let top = if descs.len() == 1 {
        let mut d = descs[0].clone();
        d.as_object_mut().unwrap().remove("platform");
        d
    } else {
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": descs,
        });
        let mut d = put(dir, &serde_json::to_vec(&index).unwrap());
        d["mediaType"] = "application/vnd.oci.image.index.v1+json".into();
        d
    };
    let mut top = top;
    top["annotations"] = serde_json::json!({ "org.opencontainers.image.ref.name": tag });
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [top],
    });
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec_pretty(&index).unwrap(),
    )
    .unwrap();
}

/// Runs the linter's command line in-process: its exit code, stdout and
/// stderr.
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = std::iter::once("tfcapi-lint")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = captf_lint::cli::run(&args, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}
