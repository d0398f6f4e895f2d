//! A stored state's document, and whether two stored states say the same
//! thing. OpenTofu writes the `check_results` of a run in no fixed order
//! and counts every write whose bytes differ as a new serial, so a refresh
//! that found nothing new still writes one. The runner's state proxy uses
//! this to leave such a write out, and the manager to take no backup of a
//! serial that only renumbers the newest one.

use std::io::Read;

use flate2::read::GzDecoder;
use serde_json::Value;

/// Decompressed size cap of a state (a gzip bomb guard).
pub const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a state's payload could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    #[error("not gzip data: {0}")]
    Gzip(String),
    #[error("decompressed state exceeds {} MiB", MAX_STATE_BYTES / (1024 * 1024))]
    TooLarge,
}

/// The state document of the concatenated chunk payloads `compressed`. A
/// single gzip member: a stale trailing chunk left by a failed shrink is
/// ignored, as the runtimes do.
pub fn decompress(compressed: &[u8]) -> Result<Vec<u8>, DecompressError> {
    let mut json = Vec::new();
    GzDecoder::new(compressed)
        .take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| DecompressError::Gzip(e.to_string()))?;
    if json.len() as u64 > MAX_STATE_BYTES {
        return Err(DecompressError::TooLarge);
    }
    Ok(json)
}

/// True when the states in `a` and `b` (each its chunks' compressed
/// payloads, in chunk order) are the same document but for the serial and
/// the order of the check results. Unreadable states are never the same.
pub fn same_state(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    match (canonical(a), canonical(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The state document without its serial, its check results (and the
/// objects of each) in a fixed order.
fn canonical(payloads: &[Vec<u8>]) -> Option<Value> {
    let json = decompress(&payloads.concat()).ok()?;
    let mut doc: Value = serde_json::from_slice(&json).ok()?;
    let fields = doc.as_object_mut()?;
    fields.remove("serial");
    if let Some(Value::Array(results)) = fields.get_mut("check_results") {
        for result in results.iter_mut() {
            if let Some(Value::Array(objects)) = result.get_mut("objects") {
                sort_by_text(objects);
            }
        }
        sort_by_text(results);
    }
    Some(doc)
}

fn sort_by_text(values: &mut [Value]) {
    values.sort_by_cached_key(|v| v.to_string());
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::json;

    use super::*;

    fn stored(doc: &Value) -> Vec<Vec<u8>> {
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(doc.to_string().as_bytes()).unwrap();
        vec![gz.finish().unwrap()]
    }

    fn check(addr: &str, objects: &[&str]) -> Value {
        json!({"object_kind": "var", "config_addr": addr, "status": "pass",
            "objects": objects.iter().map(|o| json!({"object_addr": o, "status": "pass"})).collect::<Vec<_>>()})
    }

    fn state(serial: u64, lineage: &str, id: &str, checks: Vec<Value>) -> Value {
        json!({"version": 4, "terraform_version": "1.10.10", "serial": serial, "lineage": lineage,
            "outputs": {"replicas": {"value": 2, "type": "number"}},
            "resources": [{"mode": "managed", "type": "terraform_data", "name": "group",
                "instances": [{"attributes": {"id": id}}]}],
            "check_results": checks})
    }

    #[test]
    fn states_compare_without_their_serial_or_the_order_of_check_results() {
        let a = check("var.a", &["var.a"]);
        let b = check("var.b", &["var.b[0]", "var.b[1]"]);
        let b_reordered = check("var.b", &["var.b[1]", "var.b[0]"]);
        let failing = json!({"object_kind": "var", "config_addr": "var.a", "status": "fail",
            "objects": [{"object_addr": "var.a", "status": "fail"}]});
        let base = state(4, "l1", "x", vec![a.clone(), b.clone()]);
        let cases = [
            (
                "the same document",
                state(4, "l1", "x", vec![a.clone(), b.clone()]),
                true,
            ),
            (
                "the next serial",
                state(5, "l1", "x", vec![a.clone(), b.clone()]),
                true,
            ),
            (
                "check results reordered",
                state(5, "l1", "x", vec![b.clone(), a.clone()]),
                true,
            ),
            (
                "a check's objects reordered",
                state(5, "l1", "x", vec![a.clone(), b_reordered]),
                true,
            ),
            (
                "a resource changed",
                state(5, "l1", "y", vec![a.clone(), b.clone()]),
                false,
            ),
            (
                "another lineage",
                state(5, "l2", "x", vec![a.clone(), b.clone()]),
                false,
            ),
            (
                "a check now fails",
                state(5, "l1", "x", vec![failing, b.clone()]),
                false,
            ),
            ("a check fewer", state(5, "l1", "x", vec![a.clone()]), false),
        ];
        for (what, other, same) in cases {
            assert_eq!(same_state(&stored(&base), &stored(&other)), same, "{what}");
        }
    }

    #[test]
    fn unreadable_states_are_never_the_same() {
        let good = stored(&state(1, "l1", "x", vec![]));
        let garbage = vec![b"not gzip".to_vec()];
        assert!(!same_state(&garbage, &garbage));
        assert!(!same_state(&good, &garbage));
        assert!(same_state(&good, &good));
        // Chunks are read as one stream, as the reader reads them.
        let whole = good[0].clone();
        let (head, tail) = whole.split_at(whole.len() / 2);
        assert!(same_state(&good, &[head.to_vec(), tail.to_vec()]));
    }
}
