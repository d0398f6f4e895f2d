//! Reading the example objects: every `*.yaml` file of a folder, in file-name
//! order, each possibly holding several documents.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The objects of `dir`, in order. Each must name its `apiVersion`, `kind`
/// and `metadata.name`; the error names the file and the missing field.
pub fn read_dir(dir: &Path) -> Result<Vec<Value>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        objects.extend(parse(&text).map_err(|e| format!("{}: {e}", file.display()))?);
    }
    if objects.is_empty() {
        return Err(format!("{} holds no objects", dir.display()));
    }
    Ok(objects)
}

/// The objects of one multi-document YAML text (empty documents skipped).
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| format!("document {}: {e}", i + 1))?;
        if value.is_null() {
            continue;
        }
        for field in ["/apiVersion", "/kind", "/metadata/name"] {
            if value
                .pointer(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(format!(
                    "document {}: {} is missing",
                    i + 1,
                    &field[1..].replace('/', ".")
                ));
            }
        }
        objects.push(value);
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_read_in_order_and_checked() {
        let objs = parse("# c\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n").unwrap();
        let names: Vec<&str> = objs
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            parse("apiVersion: v1\nkind: Secret\nmetadata: {}\n").unwrap_err(),
            "document 1: metadata.name is missing"
        );
        assert_eq!(
            parse("apiVersion: v1\nmetadata: {name: x}\n").unwrap_err(),
            "document 1: kind is missing"
        );
    }

    #[test]
    fn the_shipped_examples_are_complete() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo");
        let objs = read_dir(&dir).unwrap();
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "Secret",
                "Cluster",
                "TerraformCluster",
                "Secret",
                "MachinePool",
                "TerraformMachinePool",
                "Secret",
                "TerraformMachine",
                "Machine",
                "TerraformMachineTemplate",
                "MachineDeployment",
            ]
        );
        let md = &objs[11];
        assert_eq!(md["spec"]["replicas"], 2);
        assert_eq!(
            md["spec"]["template"]["spec"]["infrastructureRef"]["name"],
            objs[10]["metadata"]["name"]
        );
        assert_eq!(
            objs[9]["metadata"]["labels"]["cluster.x-k8s.io/control-plane"],
            ""
        );
        let pool = &objs[5];
        assert_eq!(pool["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert_eq!(pool["spec"]["replicas"], 3);
        assert_eq!(
            pool["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"],
            objs[4]["metadata"]["name"]
        );
        // Every module image the examples use is one the demo provides.
        for o in &objs {
            if let Some(image) = o.pointer("/spec/source/image").and_then(Value::as_str) {
                assert!(
                    crate::images::MODULE_IMAGES
                        .iter()
                        .any(|m| m.reference == image),
                    "{image} is not a demo image"
                );
            }
        }
    }
}
