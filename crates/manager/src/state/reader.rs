//! Reading Terraform state from the Secrets the `kubernetes` backend writes:
//! the base Secret and its `-part-N` chunks, gzip-compressed state JSON under
//! `tfstate`. Pure over the Secrets' names and bytes; the caller lists them.
//! Only what the controller needs is parsed, and outputs are never logged.

use std::collections::BTreeMap;

use captf_contract::JsonText;
use captf_contract::state_content;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// Most Secrets a state is read from, the base one included (the backend
/// writes 1 MiB chunks; this is 32 MiB of compressed state).
pub const MAX_CHUNKS: usize = 32;
pub use captf_contract::state_content::MAX_STATE_BYTES;

/// One state Secret as listed by the backend's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSecret {
    pub name: String,
    /// The `tfstate` data key.
    pub tfstate: Option<Vec<u8>>,
    /// `captf.io/inputs-hash` (set on the base Secret after an apply).
    pub inputs_hash: Option<String>,
}

/// A root module output as stored in state.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StateOutput {
    /// The value as the state writes it: exports are passed on and hashed
    /// with their number literals unchanged.
    pub value: JsonText,
    #[serde(rename = "type", default)]
    pub type_: serde_json::Value,
    #[serde(default)]
    pub sensitive: bool,
}

/// What the controller reads from a state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSummary {
    pub serial: u64,
    pub lineage: String,
    pub runtime_version: String,
    pub outputs: BTreeMap<String, StateOutput>,
    /// Managed resources (one per resource block, whatever its instances).
    pub managed_resources: usize,
    pub compressed_bytes: usize,
    pub inputs_hash: Option<String>,
}

impl StateSummary {
    /// No managed resource and no output: what the backend writes when it
    /// first creates a workspace (at `init`), before any apply saved one.
    pub fn records_nothing(&self) -> bool {
        self.managed_resources == 0 && self.outputs.is_empty()
    }
}

/// Why a state cannot be used. Messages never include state content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("no state Secret exists")]
    NotFound,
    #[error("state Secrets are inconsistent: {0}")]
    Inconsistent(String),
    #[error("state is corrupt: {0}")]
    Corrupt(String),
    #[error(
        "state is encrypted by OpenTofu client-side encryption, which the controller cannot read"
    )]
    Encrypted,
    #[error("state format version {0} is not supported (expected 4)")]
    UnsupportedVersion(String),
}

impl StateError {
    /// The `StateReadable` reason (`NotFound` is `StateNotFound` or
    /// `StateLost` depending on whether the object ever applied).
    pub fn reason(&self) -> &'static str {
        match self {
            StateError::NotFound => "StateNotFound",
            StateError::Inconsistent(_) => "StateInconsistent",
            StateError::Corrupt(_) | StateError::UnsupportedVersion(_) => "StateCorrupt",
            StateError::Encrypted => "StateEncrypted",
        }
    }
}

/// The chunk index of `name`: 0 for the base Secret, N for `-part-N`.
pub fn chunk_index(base: &str, name: &str) -> Option<usize> {
    if name == base {
        return Some(0);
    }
    let n = name.strip_prefix(base)?.strip_prefix("-part-")?;
    if n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|n| *n >= 1)
}

#[derive(Deserialize)]
struct RawState {
    /// Set by OpenTofu's client-side encryption.
    encryption_version: Option<IgnoredAny>,
    version: Option<serde_json::Value>,
    #[serde(default)]
    serial: u64,
    #[serde(default)]
    lineage: String,
    #[serde(default)]
    terraform_version: String,
    #[serde(default)]
    outputs: BTreeMap<String, StateOutput>,
    #[serde(default)]
    resources: Vec<RawResource>,
}

#[derive(Deserialize)]
struct RawResource {
    #[serde(default)]
    mode: String,
}

/// The Secrets that make up the state stored under `base_name`, in chunk
/// order: the base Secret and the chunks that follow it without a gap, at
/// most [`MAX_CHUNKS`]. The backend writes chunks `1..n` contiguously, so a
/// Secret with another name, or a chunk after a gap, was not written for
/// this state (a stale one left by a failed shrink, or one planted by
/// another subject with the state's labels) and is left out: it can neither
/// hold the object nor change what is read. Empty when there is no base.
pub fn state_chunks<'a, T>(
    base_name: &str,
    secrets: &'a [T],
    name_of: impl Fn(&T) -> &str,
) -> Vec<&'a T> {
    let mut by_index: BTreeMap<usize, &'a T> = BTreeMap::new();
    for s in secrets {
        if let Some(i) = chunk_index(base_name, name_of(s)).filter(|i| *i < MAX_CHUNKS) {
            by_index.entry(i).or_insert(s);
        }
    }
    (0..MAX_CHUNKS)
        .map_while(|i| by_index.get(&i).copied())
        .collect()
}

/// Reads the state stored under `base_name` from `secrets` (those listed by
/// the state's labels; see [`state_chunks`] for which of them count).
pub fn read(base_name: &str, secrets: &[StateSecret]) -> Result<StateSummary, StateError> {
    let ordered = state_chunks(base_name, secrets, |s| s.name.as_str());
    let Some(base) = ordered.first() else {
        return Err(StateError::NotFound);
    };
    let mut compressed = Vec::new();
    for s in &ordered {
        match &s.tfstate {
            Some(data) => compressed.extend_from_slice(data),
            None if s.name == base.name => {
                return Err(StateError::Inconsistent(format!(
                    "Secret {} has no tfstate key",
                    s.name
                )));
            }
            // A chunk with no payload ends the data: if the state needed
            // it, decompressing fails below.
            None => break,
        }
    }

    let json = decompress(&compressed)?;
    // Read straight from the text, so output values keep their literals.
    let raw: RawState = match serde_json::from_slice(&json) {
        Ok(raw) => raw,
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            return Err(if encrypted(&json) {
                StateError::Encrypted
            } else {
                StateError::Corrupt("the state document has an unexpected shape".to_owned())
            });
        }
        Err(e) => {
            return Err(StateError::Corrupt(format!(
                "not JSON: {}",
                e.classify_name()
            )));
        }
    };
    if raw.encryption_version.is_some() {
        return Err(StateError::Encrypted);
    }
    match raw.version.as_ref().and_then(|v| v.as_u64()) {
        Some(4) => {}
        _ => {
            // Only a number is named: any other value is state content.
            let v = match raw.version {
                None => "missing".to_owned(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                Some(_) => "not a number".to_owned(),
            };
            return Err(StateError::UnsupportedVersion(v));
        }
    }
    Ok(StateSummary {
        serial: raw.serial,
        lineage: raw.lineage,
        runtime_version: raw.terraform_version,
        outputs: raw.outputs,
        managed_resources: raw.resources.iter().filter(|r| r.mode == "managed").count(),
        compressed_bytes: compressed.len(),
        inputs_hash: base.inputs_hash.clone(),
    })
}

/// The state document of the concatenated chunk payloads `compressed`.
fn decompress(compressed: &[u8]) -> Result<Vec<u8>, StateError> {
    state_content::decompress(compressed).map_err(|e| {
        StateError::Corrupt(match e {
            state_content::DecompressError::Gzip(io) => format!("decompressing: {io}"),
            too_large => too_large.to_string(),
        })
    })
}

/// True when the JSON document `json` is an object with
/// `encryption_version` (an encrypted state has no usable shape otherwise).
fn encrypted(json: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Envelope {
        encryption_version: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Envelope>(json).is_ok_and(|e| e.encryption_version.is_some())
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "I/O error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Eof => "truncated",
        }
    }
}

#[cfg(test)]
impl StateSummary {
    /// A state of serial 3 whose outputs are `outputs` (name → value, none
    /// sensitive), applied from `inputs_hash` when given.
    pub fn with_outputs(outputs: serde_json::Value, inputs_hash: Option<&str>) -> StateSummary {
        let outputs = outputs
            .as_object()
            .expect("outputs by name")
            .iter()
            .map(|(k, v)| {
                let out = StateOutput {
                    value: v.into(),
                    type_: serde_json::Value::Null,
                    sensitive: false,
                };
                (k.clone(), out)
            })
            .collect();
        StateSummary {
            serial: 3,
            lineage: "l".into(),
            runtime_version: "1.10.10".into(),
            outputs,
            managed_resources: 1,
            compressed_bytes: 100,
            inputs_hash: inputs_hash.map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::json;

    use super::*;

    const BASE: &str = "tfstate-default-0123456789abcdef-c";

    fn gz(doc: &serde_json::Value) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(doc.to_string().as_bytes()).unwrap();
        e.finish().unwrap()
    }

    fn state() -> serde_json::Value {
        json!({
            "version": 4, "serial": 7, "lineage": "l-1", "terraform_version": "1.10.10",
            "outputs": {"endpoint": {"value": {"host": "h", "port": 6443}, "type": ["object", {}], "sensitive": true}},
            "resources": [
                {"mode": "managed", "type": "terraform_data", "name": "a", "instances": [{}, {}]},
                {"mode": "data", "type": "x", "name": "b", "instances": []},
                {"mode": "managed", "type": "terraform_data", "name": "c", "instances": []}
            ]
        })
    }

    fn secret(name: &str, data: &[u8]) -> StateSecret {
        StateSecret {
            name: name.into(),
            tfstate: Some(data.to_vec()),
            inputs_hash: None,
        }
    }

    /// The compressed state cut into `n` chunks, base first.
    fn chunked(doc: &serde_json::Value, n: usize) -> Vec<StateSecret> {
        let bytes = gz(doc);
        let size = bytes.len().div_ceil(n);
        bytes
            .chunks(size)
            .enumerate()
            .map(|(i, c)| {
                let name = if i == 0 {
                    BASE.to_owned()
                } else {
                    format!("{BASE}-part-{i}")
                };
                secret(&name, c)
            })
            .collect()
    }

    #[test]
    fn reads_a_single_secret_state() {
        let mut secrets = chunked(&state(), 1);
        secrets[0].inputs_hash = Some("h2:abc".into());
        let s = read(BASE, &secrets).unwrap();
        assert_eq!(
            (s.serial, s.lineage.as_str(), s.runtime_version.as_str()),
            (7, "l-1", "1.10.10")
        );
        assert_eq!(s.managed_resources, 2);
        assert_eq!(s.inputs_hash.as_deref(), Some("h2:abc"));
        assert_eq!(
            s.outputs["endpoint"].value.to_value(),
            json!({"host": "h", "port": 6443})
        );
        assert!(s.outputs["endpoint"].sensitive);
        assert_eq!(s.compressed_bytes, gz(&state()).len());
    }

    #[test]
    fn reassembles_chunks_in_any_listing_order() {
        let mut secrets = chunked(&state(), 3);
        secrets.reverse();
        assert_eq!(read(BASE, &secrets).unwrap().serial, 7);
    }

    #[test]
    fn ignores_a_stale_trailing_chunk_after_a_shrink() {
        let mut secrets = chunked(&state(), 1);
        secrets.push(secret(
            &format!("{BASE}-part-1"),
            &gz(&json!({"version": 4, "serial": 1}))[5..],
        ));
        assert_eq!(read(BASE, &secrets).unwrap().serial, 7);
    }

    #[test]
    fn only_the_base_and_the_chunks_after_it_without_a_gap_count() {
        // What another subject could plant with the state's labels, or a
        // failed shrink could leave: none of it changes what is read.
        let garbage = |name: &str| secret(name, b"not state");
        let planted: Vec<(&str, StateSecret)> = vec![
            ("a chunk after a gap", garbage(&format!("{BASE}-part-3"))),
            (
                "the next chunk, garbage",
                garbage(&format!("{BASE}-part-1")),
            ),
            ("a zero-padded part", garbage(&format!("{BASE}-part-01"))),
            ("another name", garbage("tfstate-default-other-c")),
            (
                "a part with no payload",
                StateSecret {
                    tfstate: None,
                    ..garbage(&format!("{BASE}-part-1"))
                },
            ),
        ];
        for (what, extra) in planted {
            let mut secrets = chunked(&state(), 1);
            secrets.insert(0, extra);
            let s = read(BASE, &secrets).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(s.serial, 7, "{what}");
        }
        let past_limit: Vec<StateSecret> = chunked(&state(), 1)
            .into_iter()
            .chain((1..40).map(|i| garbage(&format!("{BASE}-part-{i}"))))
            .collect();
        assert_eq!(read(BASE, &past_limit).unwrap().serial, 7);
        let names = |secrets: &[StateSecret]| -> Vec<String> {
            state_chunks(BASE, secrets, |s| s.name.as_str())
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        let mut three = chunked(&state(), 3);
        three.push(garbage(&format!("{BASE}-part-4")));
        three.reverse();
        assert_eq!(
            names(&three),
            [
                BASE.to_owned(),
                format!("{BASE}-part-1"),
                format!("{BASE}-part-2")
            ]
        );
        assert_eq!(names(&past_limit).len(), MAX_CHUNKS);
    }

    #[test]
    fn classifies_every_unreadable_state() {
        let good = chunked(&state(), 2);
        let mut gap = good.clone();
        gap[1].name = format!("{BASE}-part-2");
        let only_parts = vec![good[1].clone()];
        let mut no_key = good.clone();
        no_key[0].tfstate = None;
        let mut part_no_key = good.clone();
        part_no_key[1].tfstate = None;
        let too_many: Vec<StateSecret> = (0..33)
            .map(|i| {
                secret(
                    &if i == 0 {
                        BASE.to_owned()
                    } else {
                        format!("{BASE}-part-{i}")
                    },
                    b"x",
                )
            })
            .collect();
        let encrypted = vec![secret(
            BASE,
            &gz(&json!({"encryption_version": "v0", "meta": {}})),
        )];
        let v3 = vec![secret(BASE, &gz(&json!({"version": 3, "serial": 1})))];
        let no_version = vec![secret(BASE, &gz(&json!({"serial": 1})))];
        let not_gzip = vec![secret(BASE, b"{\"version\":4}")];
        let not_json = vec![secret(BASE, &{
            let mut e = GzEncoder::new(Vec::new(), Compression::default());
            e.write_all(b"{oops").unwrap();
            e.finish().unwrap()
        })];

        let cases: Vec<(&str, Vec<StateSecret>, &str)> = vec![
            ("none", vec![], "StateNotFound"),
            ("chunks but no base", only_parts, "StateNotFound"),
            ("a needed chunk missing", gap, "StateCorrupt"),
            (
                "a needed chunk without payload",
                part_no_key,
                "StateCorrupt",
            ),
            ("base without payload", no_key, "StateInconsistent"),
            ("too many chunks", too_many, "StateCorrupt"),
            ("encrypted", encrypted, "StateEncrypted"),
            ("version 3", v3, "StateCorrupt"),
            ("no version", no_version, "StateCorrupt"),
            ("not gzip", not_gzip, "StateCorrupt"),
            ("not JSON", not_json, "StateCorrupt"),
        ];
        for (name, secrets, reason) in cases {
            let err = read(BASE, &secrets).unwrap_err();
            assert_eq!(err.reason(), reason, "{name}: {err}");
        }
    }

    #[test]
    fn a_gzip_bomb_is_corrupt_not_a_memory_blowup() {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        let zeros = vec![b' '; 1024 * 1024];
        e.write_all(b"{\"version\":4,\"x\":\"").unwrap();
        for _ in 0..65 {
            e.write_all(&zeros).unwrap();
        }
        e.write_all(b"\"}").unwrap();
        let bomb = e.finish().unwrap();
        assert!(bomb.len() < 1024 * 1024);
        let err = read(BASE, &[secret(BASE, &bomb)]).unwrap_err();
        assert_eq!(
            err,
            StateError::Corrupt("decompressed state exceeds 64 MiB".into())
        );
    }

    #[test]
    fn output_values_keep_their_number_literals() {
        let text = r#"{"version":4,"outputs":{"exports":{"value":{"w":0.50,"n":123456789012345678901234567890,"e":1e3},"type":"dynamic"}}}"#;
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        let s = read(BASE, &[secret(BASE, &e.finish().unwrap())]).unwrap();
        assert_eq!(
            s.outputs["exports"].value.as_str(),
            r#"{"w":0.50,"n":123456789012345678901234567890,"e":1e3}"#
        );
    }

    #[test]
    fn errors_never_carry_state_content() {
        let doc = json!({"version": 4, "outputs": {"password": "hunter2-secret"}});
        let err = read(BASE, &[secret(BASE, &gz(&doc))]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
