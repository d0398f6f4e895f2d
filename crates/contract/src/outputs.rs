//! Decoding and validation of the root outputs of each role, and the
//! `OutputsValid` verdict they give.
//!
//! Outputs carry no type in HCL: the decoder reads the shape the contract
//! expects, applies the contract's defaults, normalises `""` identifiers to
//! null, and reports every problem at once.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::Role;
use crate::canonical::{NumberPolicy, to_canonical_string};
use crate::hash::exports_hash;
use crate::health::{ConditionStatus, Health, HealthState};
use crate::inputs::Endpoint;
use crate::json_text::JsonText;
use crate::names::required_outputs;

/// Most pool instances written to status; the rest are dropped.
pub const MAX_POOL_INSTANCES: usize = 1000;
/// Most provider IDs in a pool's `provider_id_list`.
pub const MAX_PROVIDER_IDS: usize = 10_000;
/// Most failure domains a cluster may report.
pub const MAX_FAILURE_DOMAINS: usize = 100;
/// Most addresses a machine (or pool instance) may report.
pub const MAX_ADDRESSES: usize = 256;
/// Largest compact `exports` published to `TerraformCluster.status.exports`.
pub const MAX_PUBLISHED_EXPORTS_BYTES: usize = 65_536;

/// Reasons of the `OutputsValid` condition, in precedence order: when several
/// apply, the first one wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputsReason {
    OutputsMissing,
    OutputsInvalid,
    FailureDomainMismatch,
    ProviderIDChanged,
    OutputsPending,
    InstancesTruncated,
    OutputsValid,
}

impl OutputsReason {
    /// The reason string of the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputsReason::OutputsMissing => "OutputsMissing",
            OutputsReason::OutputsInvalid => "OutputsInvalid",
            OutputsReason::FailureDomainMismatch => "FailureDomainMismatch",
            OutputsReason::ProviderIDChanged => "ProviderIDChanged",
            OutputsReason::OutputsPending => "OutputsPending",
            OutputsReason::InstancesTruncated => "InstancesTruncated",
            OutputsReason::OutputsValid => "OutputsValid",
        }
    }

    /// The condition status this reason carries.
    pub fn status(self) -> ConditionStatus {
        match self {
            OutputsReason::OutputsValid | OutputsReason::InstancesTruncated => {
                ConditionStatus::True
            }
            OutputsReason::OutputsPending => ConditionStatus::Unknown,
            _ => ConditionStatus::False,
        }
    }
}

/// One problem found in the outputs. `detail` names the output and the rule,
/// never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub reason: OutputsReason,
    pub output: &'static str,
    pub detail: String,
}

/// Everything found while decoding one set of outputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputsVerdict {
    pub problems: Vec<Problem>,
}

impl OutputsVerdict {
    /// The verdict when there is no state (or no successful apply) yet.
    pub fn no_state() -> Self {
        OutputsVerdict {
            problems: vec![Problem {
                reason: OutputsReason::OutputsPending,
                output: "",
                detail: "no outputs recorded yet".into(),
            }],
        }
    }

    /// The winning reason.
    pub fn reason(&self) -> OutputsReason {
        self.problems
            .iter()
            .map(|p| p.reason)
            .min()
            .unwrap_or(OutputsReason::OutputsValid)
    }

    /// The condition status.
    pub fn status(&self) -> ConditionStatus {
        self.reason().status()
    }

    /// Every problem, joined with `; `; the reason when there is none.
    pub fn message(&self) -> String {
        if self.problems.is_empty() {
            return OutputsReason::OutputsValid.as_str().to_owned();
        }
        self.problems
            .iter()
            .map(|p| p.detail.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// True when the outputs may be written to the object (valid, possibly
    /// truncated).
    pub fn writable(&self) -> bool {
        self.status() == ConditionStatus::True
    }
}

/// The root outputs of one state, by name.
///
/// OpenTofu and Terraform do not keep root outputs whose value is null in the
/// state, and `output -json` leaves them out too. Outputs read from there
/// therefore treat an absent name as null (a module lacking a required output
/// already fails `validate`, since the root refers to it). Outputs built with
/// [`RootOutputs::declared`] treat an absent name as not declared.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RootOutputs {
    values: BTreeMap<String, Value>,
    /// `exports` as written, when present: the one output passed on to other
    /// modules and hashed, so its number literals and key order must survive.
    exports: Option<JsonText>,
    absent_is_null: bool,
}

impl RootOutputs {
    /// Reads the `{"<name>": {"value": …, "type": …, "sensitive": …}}` shape
    /// shared by `tofu output -json` and the `outputs` of a state file. The
    /// value is already parsed, so numbers in `exports` are written as
    /// serde_json holds them; [`RootOutputs::from_state_values`] keeps them.
    pub fn from_output_json(json: &Value) -> Result<RootOutputs, String> {
        let Value::Object(map) = json else {
            return Err("outputs must be a JSON object".into());
        };
        let mut values = BTreeMap::new();
        for (name, entry) in map {
            let value = entry
                .get("value")
                .ok_or_else(|| format!("output {name:?} has no value"))?;
            values.insert(name.clone(), value.clone());
        }
        Ok(RootOutputs::with_exports_text(values, true))
    }

    /// Outputs read from a state, `name → value` with each value as written
    /// there (absent names read as null, as in
    /// [`RootOutputs::from_output_json`]).
    pub fn from_state_values(values: impl IntoIterator<Item = (String, JsonText)>) -> Self {
        let mut exports = None;
        let values = values
            .into_iter()
            .map(|(name, text)| {
                if name == "exports" {
                    // States are pretty-printed; the exports are passed on
                    // and recorded without the indentation.
                    exports = Some(text.compacted());
                }
                let value = text.to_value();
                (name, value)
            })
            .collect();
        RootOutputs {
            values,
            exports,
            absent_is_null: true,
        }
    }

    /// Outputs from `name → value` pairs that list every declared output, so
    /// an absent required output is reported as missing.
    pub fn declared(values: impl IntoIterator<Item = (String, Value)>) -> Self {
        RootOutputs::with_exports_text(values.into_iter().collect(), false)
    }

    /// Outputs whose `exports` text is written from the parsed value.
    fn with_exports_text(values: BTreeMap<String, Value>, absent_is_null: bool) -> Self {
        RootOutputs {
            exports: values.get("exports").map(JsonText::from_value),
            values,
            absent_is_null,
        }
    }

    /// The value of `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Every output present, by name.
    pub fn values(&self) -> &BTreeMap<String, Value> {
        &self.values
    }

    /// The outputs as one JSON object in the shape the output schemas
    /// describe: required outputs that read as null are written as null.
    pub fn to_document(&self, role: Role) -> Value {
        let mut doc: serde_json::Map<String, Value> = self
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if self.absent_is_null {
            for name in required_outputs(role) {
                doc.entry(name.to_string()).or_insert(Value::Null);
            }
        }
        Value::Object(doc)
    }
}

/// A decoded set of outputs. `outputs` is set only when the verdict lets them
/// be written; `health` is read on its own so a pending object still shows
/// its health.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<T> {
    pub outputs: Option<T>,
    pub health: Option<Health>,
    pub verdict: OutputsVerdict,
}

/// A failure domain reported by a cluster, with the contract's defaults
/// applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureDomain {
    pub name: String,
    pub control_plane: bool,
    pub attributes: BTreeMap<String, String>,
}

/// Valid cluster outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOutputs {
    pub control_plane_endpoint: Option<Endpoint>,
    pub failure_domains: Vec<FailureDomain>,
    /// `exports` as written, null read as `{}`.
    pub exports: JsonText,
    /// [`exports_hash`] of `exports`.
    pub exports_hash: String,
    /// Canonical JSON (numbers as written) of `exports` for `status.exports`, or `None`
    /// when it exceeds [`MAX_PUBLISHED_EXPORTS_BYTES`] (not published, a
    /// Warning event is due).
    pub published_exports: Option<String>,
    pub health: Health,
}

/// Kind of a node address (Cluster API `MachineAddressType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressType {
    // Declared in the order addresses are sorted.
    InternalIP,
    InternalDNS,
    ExternalIP,
    ExternalDNS,
    Hostname,
}

impl AddressType {
    pub const ALL: [AddressType; 5] = [
        AddressType::InternalIP,
        AddressType::InternalDNS,
        AddressType::ExternalIP,
        AddressType::ExternalDNS,
        AddressType::Hostname,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AddressType::InternalIP => "InternalIP",
            AddressType::InternalDNS => "InternalDNS",
            AddressType::ExternalIP => "ExternalIP",
            AddressType::ExternalDNS => "ExternalDNS",
            AddressType::Hostname => "Hostname",
        }
    }
}

/// A node address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Address {
    pub kind: AddressType,
    pub address: String,
}

/// Valid machine outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineOutputs {
    pub provider_id: String,
    /// Sorted by type precedence, then address.
    pub addresses: Vec<Address>,
    pub failure_domain: Option<String>,
    pub interruptible: bool,
    pub health: Health,
}

/// What the controller knows about a machine when reading its outputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineContext {
    /// The `failure_domain` input of the apply (the Machine's request).
    pub requested_failure_domain: Option<String>,
    /// `spec.providerID` already written, if any.
    pub recorded_provider_id: Option<String>,
}

/// One member of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInstance {
    pub provider_id: String,
    pub instance_id: Option<String>,
    pub addresses: Vec<Address>,
    pub failure_domain: Option<String>,
    pub state: Option<HealthState>,
}

/// Valid machine-pool outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct MachinePoolOutputs {
    pub provider_id: Option<String>,
    /// Sorted and de-duplicated.
    pub provider_id_list: Vec<String>,
    pub replicas: i32,
    /// At most [`MAX_POOL_INSTANCES`] entries.
    pub instances: Vec<PoolInstance>,
    pub health: Health,
}

/// Decoded outputs of any role.
#[derive(Debug, Clone, PartialEq)]
pub enum RoleOutputs {
    Cluster(Decoded<ClusterOutputs>),
    Machine(Decoded<MachineOutputs>),
    MachinePool(Decoded<MachinePoolOutputs>),
}

impl RoleOutputs {
    /// The verdict, whatever the role.
    pub fn verdict(&self) -> &OutputsVerdict {
        match self {
            RoleOutputs::Cluster(d) => &d.verdict,
            RoleOutputs::Machine(d) => &d.verdict,
            RoleOutputs::MachinePool(d) => &d.verdict,
        }
    }
}

/// Decodes the outputs of `role` (machines with an empty context).
pub fn decode(role: Role, outputs: &RootOutputs) -> RoleOutputs {
    match role {
        Role::Cluster => RoleOutputs::Cluster(decode_cluster(outputs)),
        Role::Machine => RoleOutputs::Machine(decode_machine(outputs, &MachineContext::default())),
        Role::MachinePool => RoleOutputs::MachinePool(decode_machinepool(outputs)),
    }
}

/// Collects problems while reading one set of outputs.
struct Reader<'a> {
    outputs: &'a RootOutputs,
    problems: Vec<Problem>,
}

/// The value of one required output.
enum Slot<'a> {
    Absent,
    Null,
    Set(&'a Value),
}

impl<'a> Reader<'a> {
    fn new(role: Role, outputs: &'a RootOutputs) -> Self {
        let mut reader = Reader {
            outputs,
            problems: Vec::new(),
        };
        for name in required_outputs(role) {
            if !outputs.absent_is_null && outputs.get(name).is_none() {
                reader.push(
                    OutputsReason::OutputsMissing,
                    name,
                    "required output is not declared",
                );
            }
        }
        reader
    }

    fn push(&mut self, reason: OutputsReason, output: &'static str, what: impl AsRef<str>) {
        self.problems.push(Problem {
            reason,
            output,
            detail: format!("{output}: {}", what.as_ref()),
        });
    }

    fn invalid(&mut self, output: &'static str, what: impl AsRef<str>) {
        self.push(OutputsReason::OutputsInvalid, output, what);
    }

    fn pending(&mut self, output: &'static str) {
        self.push(
            OutputsReason::OutputsPending,
            output,
            "not known yet (null)",
        );
    }

    fn slot(&self, name: &'static str) -> Slot<'a> {
        match self.outputs.get(name) {
            None if self.outputs.absent_is_null => Slot::Null,
            None => Slot::Absent,
            Some(Value::Null) => Slot::Null,
            Some(v) => Slot::Set(v),
        }
    }

    fn verdict(self) -> OutputsVerdict {
        OutputsVerdict {
            problems: self.problems,
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// An integer, also from a float with no fractional part.
fn as_integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }),
        _ => None,
    }
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// A string field of an object output; `""` reads as absent when `empty_is_null`.
fn opt_string(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    empty_is_null: bool,
) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() && empty_is_null => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key} must be a string, not {}", type_name(other))),
    }
}

fn check_len(what: &str, s: &str, max: usize) -> Result<(), String> {
    let n = char_len(s);
    if n == 0 || n > max {
        Err(format!("{what} must be 1 to {max} characters (got {n})"))
    } else {
        Ok(())
    }
}

fn decode_health(r: &mut Reader) -> Option<Health> {
    const NAME: &str = "health";
    let v = match r.slot(NAME) {
        Slot::Absent => return None,
        Slot::Null => {
            r.pending(NAME);
            return None;
        }
        Slot::Set(v) => v,
    };
    let Value::Object(obj) = v else {
        r.invalid(NAME, format!("must be an object, not {}", type_name(v)));
        return None;
    };
    let mut problems = Vec::new();
    let state = match obj.get("state") {
        Some(Value::String(s)) => match s.parse::<HealthState>() {
            Ok(state) => Some(state),
            Err(()) => {
                problems.push(
                    "state is not one of pending, running, degraded, stopped, terminated, unknown"
                        .to_owned(),
                );
                None
            }
        },
        None | Some(Value::Null) => {
            problems.push("state is required".to_owned());
            None
        }
        Some(other) => {
            problems.push(format!("state must be a string, not {}", type_name(other)));
            None
        }
    };
    let healthy = match obj.get("healthy") {
        Some(Value::Bool(b)) => Some(*b),
        None | Some(Value::Null) => {
            problems.push("healthy is required".to_owned());
            None
        }
        Some(other) => {
            problems.push(format!("healthy must be a bool, not {}", type_name(other)));
            None
        }
    };
    let message = opt_string(obj, "message", false).unwrap_or_else(|e| {
        problems.push(e);
        None
    });
    let reasons = match obj.get("reasons") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            strings.unwrap_or_else(|| {
                problems.push("reasons must be a list of strings".to_owned());
                Vec::new()
            })
        }
        Some(other) => {
            problems.push(format!("reasons must be a list, not {}", type_name(other)));
            Vec::new()
        }
    };
    for p in &problems {
        r.invalid(NAME, p);
    }
    match (state, healthy, problems.is_empty()) {
        (Some(state), Some(healthy), true) => Some(Health {
            state,
            healthy,
            message,
            reasons,
        }),
        _ => None,
    }
}

/// Reads a list of addresses; `what` prefixes messages.
fn decode_addresses(items: &[Value], what: &str) -> Result<Vec<Address>, String> {
    if items.len() > MAX_ADDRESSES {
        return Err(format!(
            "{what} has {} entries, more than {MAX_ADDRESSES}",
            items.len()
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(obj) = item else {
            return Err(format!(
                "{what}[{i}] must be an object, not {}",
                type_name(item)
            ));
        };
        let kind = match obj.get("type") {
            Some(Value::String(t)) => AddressType::ALL
                .into_iter()
                .find(|a| a.as_str() == t)
                .ok_or_else(|| {
                    format!(
                        "{what}[{i}].type is not one of Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS"
                    )
                })?,
            _ => return Err(format!("{what}[{i}].type is required and must be a string")),
        };
        let address = match obj.get("address") {
            Some(Value::String(a)) => {
                check_len(&format!("{what}[{i}].address"), a, 256)?;
                a.clone()
            }
            _ => {
                return Err(format!(
                    "{what}[{i}].address is required and must be a string"
                ));
            }
        };
        out.push(Address { kind, address });
    }
    out.sort();
    Ok(out)
}

/// Decodes and validates the outputs of a cluster module.
pub fn decode_cluster(outputs: &RootOutputs) -> Decoded<ClusterOutputs> {
    let mut r = Reader::new(Role::Cluster, outputs);

    let endpoint = match r.slot("control_plane_endpoint") {
        Slot::Absent => None,
        // May stay null for the object's whole life.
        Slot::Null => Some(None),
        Slot::Set(v) => match decode_endpoint(v) {
            Ok(e) => Some(Some(e)),
            Err(e) => {
                r.invalid("control_plane_endpoint", e);
                None
            }
        },
    };

    let failure_domains = match r.slot("failure_domains") {
        Slot::Absent => None,
        Slot::Null => Some(Vec::new()),
        Slot::Set(v) => match decode_failure_domains(v) {
            Ok(fds) => Some(fds),
            Err(e) => {
                r.invalid("failure_domains", e);
                None
            }
        },
    };

    // Any number is accepted here; only the inputs hash of a machine or pool
    // consuming a fraction refuses it.
    let exports = match r.slot("exports") {
        Slot::Absent => None,
        Slot::Null => Some(JsonText::empty_object()),
        Slot::Set(_) => outputs.exports.clone(),
    };
    let exports = exports.and_then(|e| match hashed_exports(&e) {
        Ok((hash, compact)) => Some((e, hash, compact)),
        Err(why) => {
            r.invalid("exports", why);
            None
        }
    });

    let health = decode_health(&mut r);
    let verdict = r.verdict();
    let outputs = match (endpoint, failure_domains, exports, &health) {
        (Some(endpoint), Some(failure_domains), Some((exports, hash, compact)), Some(health))
            if verdict.writable() =>
        {
            Some(ClusterOutputs {
                control_plane_endpoint: endpoint,
                failure_domains,
                exports_hash: hash,
                published_exports: (compact.len() <= MAX_PUBLISHED_EXPORTS_BYTES)
                    .then_some(compact),
                exports,
                health: health.clone(),
            })
        }
        _ => None,
    };
    Decoded {
        outputs,
        health,
        verdict,
    }
}

/// The exports hash and canonical text of `exports`, or why they have none.
fn hashed_exports(exports: &JsonText) -> Result<(String, String), String> {
    let unhashable = |e: &dyn std::fmt::Display| format!("cannot be hashed: {e}");
    let hash = exports_hash(exports.as_str()).map_err(|e| unhashable(&e))?;
    let compact = to_canonical_string(exports, NumberPolicy::Any).map_err(|e| unhashable(&e))?;
    Ok((hash, compact))
}

fn decode_endpoint(v: &Value) -> Result<Endpoint, String> {
    let Value::Object(obj) = v else {
        return Err(format!("must be an object, not {}", type_name(v)));
    };
    let host = obj.get("host").filter(|h| !h.is_null());
    let port = obj.get("port").filter(|p| !p.is_null());
    let (host, port) = match (host, port) {
        (Some(h), Some(p)) => (h, p),
        (None, None) => return Err("host and port are required".into()),
        _ => return Err("half-set endpoint: host and port must both be set".into()),
    };
    let Value::String(host) = host else {
        return Err("host must be a string".into());
    };
    check_len("host", host, 512)?;
    let port = as_integer(port)
        .filter(|p| (1..=65535).contains(p))
        .ok_or("port must be an integer from 1 to 65535")?;
    Ok(Endpoint {
        host: host.clone(),
        port: port as i32,
    })
}

fn decode_failure_domains(v: &Value) -> Result<Vec<FailureDomain>, String> {
    let Value::Array(items) = v else {
        return Err(format!("must be a list, not {}", type_name(v)));
    };
    if items.len() > MAX_FAILURE_DOMAINS {
        return Err(format!(
            "has {} entries, more than {MAX_FAILURE_DOMAINS}",
            items.len()
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(obj) = item else {
            return Err(format!("[{i}] must be an object, not {}", type_name(item)));
        };
        let name = match obj.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => return Err(format!("[{i}].name is required and must be a string")),
        };
        check_len(&format!("[{i}].name"), &name, 256)?;
        if !seen.insert(name.clone()) {
            return Err(format!("[{i}].name repeats an earlier failure domain name"));
        }
        let control_plane = match obj.get("control_plane") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(format!("[{i}].control_plane must be a bool")),
        };
        let attributes = match obj.get("attributes") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(attrs)) => attrs
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(format!("[{i}].attributes must map to strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(format!("[{i}].attributes must be a map of strings")),
        };
        out.push(FailureDomain {
            name,
            control_plane,
            attributes,
        });
    }
    Ok(out)
}

/// Decodes and validates the outputs of a machine module.
pub fn decode_machine(outputs: &RootOutputs, ctx: &MachineContext) -> Decoded<MachineOutputs> {
    let mut r = Reader::new(Role::Machine, outputs);

    let provider_id = match r.slot("provider_id") {
        Slot::Absent => None,
        Slot::Null => {
            r.pending("provider_id");
            None
        }
        Slot::Set(Value::String(s)) if s.is_empty() => {
            r.pending("provider_id");
            None
        }
        Slot::Set(Value::String(s)) => match check_len("value", s, 512) {
            Err(e) => {
                r.invalid("provider_id", e);
                None
            }
            Ok(()) => {
                if let Some(recorded) = &ctx.recorded_provider_id
                    && recorded != s
                {
                    r.push(
                        OutputsReason::ProviderIDChanged,
                        "provider_id",
                        "differs from the provider ID already recorded in spec.providerID",
                    );
                }
                Some(s.clone())
            }
        },
        Slot::Set(v) => {
            r.invalid(
                "provider_id",
                format!("must be a string, not {}", type_name(v)),
            );
            None
        }
    };

    let addresses = match r.slot("addresses") {
        Slot::Absent => None,
        Slot::Null => {
            r.pending("addresses");
            None
        }
        Slot::Set(Value::Array(items)) => match decode_addresses(items, "list") {
            Ok(a) => Some(a),
            Err(e) => {
                r.invalid("addresses", e);
                None
            }
        },
        Slot::Set(v) => {
            r.invalid("addresses", format!("must be a list, not {}", type_name(v)));
            None
        }
    };

    let failure_domain = match r.slot("failure_domain") {
        Slot::Absent => None,
        Slot::Null => Some(None),
        Slot::Set(Value::String(s)) if s.is_empty() => Some(None),
        Slot::Set(Value::String(s)) => match check_len("value", s, 256) {
            Ok(()) => Some(Some(s.clone())),
            Err(e) => {
                r.invalid("failure_domain", e);
                None
            }
        },
        Slot::Set(v) => {
            r.invalid(
                "failure_domain",
                format!("must be a string, not {}", type_name(v)),
            );
            None
        }
    };
    if let (Some(requested), Some(got)) = (&ctx.requested_failure_domain, &failure_domain)
        && got.as_ref() != Some(requested)
    {
        r.push(
            OutputsReason::FailureDomainMismatch,
            "failure_domain",
            "does not equal the requested failure domain",
        );
    }

    let interruptible = match r.slot("interruptible") {
        Slot::Absent => None,
        Slot::Null => Some(false),
        Slot::Set(Value::Bool(b)) => Some(*b),
        Slot::Set(v) => {
            r.invalid(
                "interruptible",
                format!("must be a bool, not {}", type_name(v)),
            );
            None
        }
    };

    let health = decode_health(&mut r);
    let verdict = r.verdict();
    let outputs = match (
        provider_id,
        addresses,
        failure_domain,
        interruptible,
        &health,
    ) {
        (
            Some(provider_id),
            Some(addresses),
            Some(failure_domain),
            Some(interruptible),
            Some(h),
        ) if verdict.writable() => Some(MachineOutputs {
            provider_id,
            addresses,
            failure_domain,
            interruptible,
            health: h.clone(),
        }),
        _ => None,
    };
    Decoded {
        outputs,
        health,
        verdict,
    }
}

/// Decodes and validates the outputs of a machine-pool module.
pub fn decode_machinepool(outputs: &RootOutputs) -> Decoded<MachinePoolOutputs> {
    let mut r = Reader::new(Role::MachinePool, outputs);

    let provider_id = match r.slot("provider_id") {
        Slot::Absent => None,
        // A pool's group ID may stay unknown.
        Slot::Null => Some(None),
        Slot::Set(Value::String(s)) if s.is_empty() => Some(None),
        Slot::Set(Value::String(s)) => match check_len("value", s, 512) {
            Ok(()) => Some(Some(s.clone())),
            Err(e) => {
                r.invalid("provider_id", e);
                None
            }
        },
        Slot::Set(v) => {
            r.invalid(
                "provider_id",
                format!("must be a string, not {}", type_name(v)),
            );
            None
        }
    };

    let provider_id_list = match r.slot("provider_id_list") {
        Slot::Absent => None,
        Slot::Null => {
            r.pending("provider_id_list");
            None
        }
        Slot::Set(v) => match decode_provider_id_list(v) {
            Ok(list) => Some(list),
            Err(e) => {
                r.invalid("provider_id_list", e);
                None
            }
        },
    };

    let replicas = match r.slot("replicas") {
        Slot::Absent => None,
        Slot::Null => {
            r.pending("replicas");
            None
        }
        Slot::Set(v) => match as_integer(v).filter(|n| (0..=i64::from(i32::MAX)).contains(n)) {
            Some(n) => Some(n as i32),
            None => {
                r.invalid("replicas", "must be a non-negative integer");
                None
            }
        },
    };

    let instances = match r.slot("instances") {
        Slot::Absent => None,
        Slot::Null => {
            r.pending("instances");
            None
        }
        Slot::Set(Value::Array(items)) => {
            let kept = &items[..items.len().min(MAX_POOL_INSTANCES)];
            if items.len() > MAX_POOL_INSTANCES {
                r.push(
                    OutputsReason::InstancesTruncated,
                    "instances",
                    format!(
                        "{} entries reported, only the first {MAX_POOL_INSTANCES} are kept",
                        items.len()
                    ),
                );
            }
            match kept.iter().enumerate().map(decode_instance).collect() {
                Ok(list) => Some(list),
                Err(e) => {
                    r.invalid("instances", e);
                    None
                }
            }
        }
        Slot::Set(v) => {
            r.invalid("instances", format!("must be a list, not {}", type_name(v)));
            None
        }
    };

    let health = decode_health(&mut r);
    let verdict = r.verdict();
    let outputs = match (provider_id, provider_id_list, replicas, instances, &health) {
        (Some(provider_id), Some(provider_id_list), Some(replicas), Some(instances), Some(h))
            if verdict.writable() =>
        {
            Some(MachinePoolOutputs {
                provider_id,
                provider_id_list,
                replicas,
                instances,
                health: h.clone(),
            })
        }
        _ => None,
    };
    Decoded {
        outputs,
        health,
        verdict,
    }
}

fn decode_provider_id_list(v: &Value) -> Result<Vec<String>, String> {
    let Value::Array(items) = v else {
        return Err(format!("must be a list, not {}", type_name(v)));
    };
    if items.len() > MAX_PROVIDER_IDS {
        return Err(format!(
            "has {} entries, more than {MAX_PROVIDER_IDS}",
            items.len()
        ));
    }
    let mut ids = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::String(s) = item else {
            return Err(format!("[{i}] must be a string, not {}", type_name(item)));
        };
        check_len(&format!("[{i}]"), s, 512)?;
        ids.push(s.clone());
    }
    // Written sorted and without duplicates, whatever order the module used.
    ids.sort();
    ids.dedup();
    Ok(ids)
}

fn decode_instance((i, item): (usize, &Value)) -> Result<PoolInstance, String> {
    let Value::Object(obj) = item else {
        return Err(format!("[{i}] must be an object, not {}", type_name(item)));
    };
    let field = |key: &str, max: usize| -> Result<Option<String>, String> {
        let v = opt_string(obj, key, true).map_err(|e| format!("[{i}].{e}"))?;
        if let Some(s) = &v {
            check_len(&format!("[{i}].{key}"), s, max)?;
        }
        Ok(v)
    };
    let provider_id =
        field("provider_id", 512)?.ok_or_else(|| format!("[{i}].provider_id is required"))?;
    let instance_id = opt_string(obj, "instance_id", true).map_err(|e| format!("[{i}].{e}"))?;
    let failure_domain = field("failure_domain", 256)?;
    let state = match opt_string(obj, "state", true).map_err(|e| format!("[{i}].{e}"))? {
        None => None,
        Some(s) => Some(s.parse::<HealthState>().map_err(|()| {
            format!(
                "[{i}].state is not one of pending, running, degraded, stopped, terminated, unknown"
            )
        })?),
    };
    let addresses = match obj.get("addresses") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => decode_addresses(items, &format!("[{i}].addresses"))?,
        Some(_) => return Err(format!("[{i}].addresses must be a list")),
    };
    Ok(PoolInstance {
        provider_id,
        instance_id,
        addresses,
        failure_domain,
        state,
    })
}
