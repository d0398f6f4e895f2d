//! Log set-up: `-v` mapped onto tracing levels (`RUST_LOG` replaces it when
//! set), and `--logging-format=json` written the way Kubernetes
//! component-base writes JSON, so tools that read Cluster API managers'
//! logs read this one's:
//!
//! ```text
//! {"ts":1733225400123.456,"caller":"reconcile/pass.rs:88","msg":"starting apply","v":0,"controller":"terraformcluster","namespace":"ns","name":"c1","Cluster":{"name":"c1","namespace":"ns"},"op":"apply"}
//! ```
//!
//! `ts` is Unix time in milliseconds as a float (component-base's encoder),
//! `v` the verbosity an info or debug line needs (absent on errors, as
//! logr's `Error` writes none), `err` the event's `error` field. Every field
//! of the event and of its enclosing spans is a key of its own; a span's
//! `cluster` field becomes the `Cluster` object Cluster API writes.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// `--logging-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown logging format {s:?}: want text or json")),
        }
    }
}

/// The workspace's own log targets, whose levels `-v` raises first: their
/// debug lines are the manager's, a library's debug lines are noise unless
/// asked for with a higher `-v`.
const OWN_TARGETS: [&str; 5] = [
    "manager",
    "captf_manager",
    "captf_api",
    "captf_contract",
    "captf_lint",
];

/// Lowest `-v` showing the manager's debug lines, and its trace lines.
pub const DEBUG_FROM: u32 = 4;
pub const TRACE_FROM: u32 = 6;

/// The filter directives `-v` stands for: errors, warnings and info always;
/// from 4 the manager's debug; from 6 its trace and the libraries' debug.
pub fn directives(verbosity: u32) -> String {
    let (default, own) = match verbosity {
        v if v >= TRACE_FROM => ("debug", "trace"),
        v if v >= DEBUG_FROM => ("info", "debug"),
        _ => return "info".to_owned(),
    };
    let mut out = default.to_owned();
    for target in OWN_TARGETS {
        out.push_str(&format!(",{target}={own}"));
    }
    out
}

/// The `v` a JSON line of `level` carries: 0 for info and warnings (klog
/// writes warnings as info), the `-v` that shows debug and trace, none for
/// errors.
pub fn verbosity_of(level: Level) -> Option<u32> {
    match level {
        Level::ERROR => None,
        Level::DEBUG => Some(DEBUG_FROM),
        Level::TRACE => Some(TRACE_FROM),
        _ => Some(0),
    }
}

/// The filter in effect: `RUST_LOG` when set (non-empty), else `-v`. An
/// unreadable `RUST_LOG` falls back to `-v`, with a warning to log.
pub fn filter(verbosity: u32, rust_log: Option<&str>) -> (EnvFilter, Option<String>) {
    let from_v = || EnvFilter::new(directives(verbosity));
    match rust_log.filter(|r| !r.trim().is_empty()) {
        None => (from_v(), None),
        Some(r) => match EnvFilter::try_new(r) {
            Ok(f) => (f, None),
            Err(e) => (
                from_v(),
                Some(format!(
                    "RUST_LOG={r:?} is not a log filter ({e}); using -v={verbosity}"
                )),
            ),
        },
    }
}

/// A subscriber writing `format` lines to `writer`.
pub fn subscriber<W>(
    format: Format,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        Format::Text => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(writer),
            ),
        ),
        Format::Json => Box::new(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .fmt_fields(JsonFields::new())
                    .event_format(ComponentJson)
                    .with_writer(writer),
            ),
        ),
    }
}

/// Installs the process' subscriber, writing to stderr. Returns warnings
/// to log once logging works.
pub fn init(format: Format, verbosity: u32) -> Vec<String> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, warning) = filter(verbosity, rust_log.as_deref());
    let ansi = format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut warnings: Vec<String> = warning.into_iter().collect();
    if let Err(e) = subscriber(format, filter, std::io::stderr, ansi).try_init() {
        warnings.push(format!("logging was set up already: {e}"));
    }
    warnings
}

/// The component-base JSON line format.
pub struct ComponentJson;

/// Keys the line itself writes; fields of these names are written with a
/// `field.` prefix instead of replacing them.
const RESERVED: [&str; 5] = ["ts", "caller", "msg", "v", "err"];

impl<S> FormatEvent<S, JsonFields> for ComponentJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = EventFields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let mut line = Line::default();
        line.put("ts", json!(unix_millis(SystemTime::now())));
        let caller = match (&fields.log_file, fields.log_line) {
            (Some(file), Some(number)) => Some(short_caller(file, number)),
            _ => meta
                .file()
                .zip(meta.line())
                .map(|(file, number)| short_caller(file, number as u64)),
        };
        if let Some(caller) = caller {
            line.put("caller", Value::String(caller));
        }
        line.put(
            "msg",
            Value::String(fields.message.take().unwrap_or_default()),
        );
        if let Some(v) = verbosity_of(*meta.level()) {
            line.put("v", json!(v));
        }
        if let Some(err) = fields.error.take() {
            line.put("err", Value::String(err));
        }
        for (key, value) in span_fields(ctx).into_iter().chain(fields.values) {
            line.put_field(key, value);
        }
        writeln!(writer, "{}", line.render())
    }
}

/// The fields of the spans enclosing the event, outermost first so an inner
/// span's value wins; `cluster` turned into Cluster API's `Cluster` object
/// (a Cluster lives in the namespace of the objects that name it).
fn span_fields<S>(ctx: &FmtContext<'_, S, JsonFields>) -> Vec<(String, Value)>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut merged = Map::new();
    if let Some(scope) = ctx.event_scope() {
        for span in scope.from_root() {
            let extensions = span.extensions();
            let Some(stored) = extensions.get::<FormattedFields<JsonFields>>() else {
                continue;
            };
            if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&stored.fields) {
                merged.extend(map);
            }
        }
    }
    let mut out: Vec<(String, Value)> = Vec::new();
    let cluster = merged.remove("cluster");
    let namespace = merged.get("namespace").cloned();
    out.extend(merged);
    if let Some(name) = cluster {
        let mut object = Map::new();
        object.insert("name".into(), name);
        if let Some(namespace) = namespace {
            object.insert("namespace".into(), namespace);
        }
        out.push(("Cluster".into(), Value::Object(object)));
    }
    out
}

fn unix_millis(now: SystemTime) -> f64 {
    now.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or_default()
}

/// `dir/file.rs:line`, as zap's short caller encoder writes it.
fn short_caller(file: &str, line: u64) -> String {
    let mut parts = file.rsplit(['/', '\\']);
    let name = parts.next().unwrap_or(file);
    match parts.next() {
        Some(dir) if !dir.is_empty() => format!("{dir}/{name}:{line}"),
        _ => format!("{name}:{line}"),
    }
}

/// One JSON object, keys in the order written, no key twice.
#[derive(Default)]
struct Line(Vec<(String, Value)>);

impl Line {
    fn put(&mut self, key: &str, value: Value) {
        self.0.push((key.to_owned(), value));
    }

    /// A span or event field: replaces an earlier field of the same name,
    /// never one of the line's own keys.
    fn put_field(&mut self, key: String, value: Value) {
        let key = if RESERVED.contains(&key.as_str()) {
            format!("field.{key}")
        } else {
            key
        };
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    fn render(&self) -> String {
        let entries: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
            .collect();
        format!("{{{}}}", entries.join(","))
    }
}

/// An event's fields: the message, the error, where a `log` record came
/// from, and the rest as JSON values in order.
#[derive(Default)]
struct EventFields {
    message: Option<String>,
    error: Option<String>,
    log_file: Option<String>,
    log_line: Option<u64>,
    values: Vec<(String, Value)>,
}

impl EventFields {
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(s)) => self.message = Some(s),
            ("error", Value::String(s)) => self.error = Some(s),
            ("error", other) => self.error = Some(other.to_string()),
            ("log.file", Value::String(s)) => self.log_file = Some(s),
            ("log.line", Value::Number(n)) => self.log_line = n.as_u64(),
            // The rest of a `log` record's bookkeeping says nothing a line needs.
            (name, _) if name.starts_with("log.") => {}
            (name, value) => self.values.push((name.to_owned(), value)),
        }
    }
}

impl Visit for EventFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, json!(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, json!(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity: those are written as text.
        let number = serde_json::Number::from_f64(value).map(Value::Number);
        self.put(
            field,
            number.unwrap_or_else(|| Value::String(value.to_string())),
        );
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    /// What `emit` logs in JSON at `-v=verbosity`.
    fn json_text(verbosity: u32, emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let (filter, _) = filter(verbosity, None);
        let subscriber = subscriber(Format::Json, filter, buffer.clone(), false);
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    /// The lines `emit` logs at `-v=verbosity`, each parsed as JSON.
    fn json_lines(verbosity: u32, emit: impl FnOnce()) -> Vec<Map<String, Value>> {
        json_text(verbosity, emit)
            .lines()
            .map(|l| match serde_json::from_str(l) {
                Ok(Value::Object(map)) => map,
                other => panic!("not a JSON object: {l:?} ({other:?})"),
            })
            .collect()
    }

    #[test]
    fn info_carries_ts_caller_msg_v_and_every_field() {
        let emit = || tracing::info!(op = "apply", attempt = 3, ready = false, "starting apply");
        let before = unix_millis(SystemTime::now());
        let lines = json_lines(0, emit);
        let after = unix_millis(SystemTime::now());
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!(line.len(), 7, "{line:?}");
        // The line's own keys come first, then the fields in order.
        let text = json_text(0, emit);
        let keys = ["ts", "caller", "msg", "v", "op", "attempt", "ready"];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.is_sorted() && at[0] == 1, "{text}");
        let ts = line["ts"].as_f64().unwrap();
        assert!(before <= ts && ts <= after, "{ts} is milliseconds");
        assert!(
            line["caller"]
                .as_str()
                .unwrap()
                .starts_with("src/logging.rs:")
        );
        assert_eq!(line["msg"], "starting apply");
        assert_eq!(line["v"], 0);
        assert_eq!(
            (&line["op"], &line["attempt"], &line["ready"]),
            (&json!("apply"), &json!(3), &json!(false))
        );
    }

    #[test]
    fn the_reconcile_span_gives_controller_object_and_cluster() {
        let lines = json_lines(2, || {
            let span = tracing::info_span!(
                "reconcile",
                controller = "terraformmachine",
                namespace = "team-a",
                name = "m-1",
                cluster = tracing::field::Empty,
            );
            let _entered = span.enter();
            span.record("cluster", "prod");
            tracing::warn!(job = %"m-1-apply-x7", "waiting for a slot");
            tracing::info_span!("inner", name = "m-2").in_scope(|| tracing::info!("inner"));
        });
        assert_eq!(lines.len(), 2);
        let line = &lines[0];
        assert_eq!(line["msg"], "waiting for a slot");
        assert_eq!(line["v"], 0, "a warning is info to klog");
        assert_eq!(line["controller"], "terraformmachine");
        assert_eq!(line["namespace"], "team-a");
        assert_eq!(line["name"], "m-1");
        assert_eq!(
            line["Cluster"],
            json!({"name": "prod", "namespace": "team-a"})
        );
        assert_eq!(line["job"], "m-1-apply-x7");
        assert!(!line.contains_key("cluster"));
        assert_eq!(lines[1]["name"], "m-2", "the inner span's value wins");
        assert_eq!(lines[1]["controller"], "terraformmachine");
    }

    #[test]
    fn errors_carry_err_and_no_v() {
        let lines = json_lines(2, || {
            let e = io::Error::other("connection refused");
            tracing::error!(error = %e, "listing clusters failed");
            let e: &(dyn std::error::Error + 'static) = &e;
            tracing::warn!(error = e, "retrying");
        });
        assert_eq!(lines[0]["err"], "connection refused");
        assert_eq!(lines[0]["msg"], "listing clusters failed");
        assert!(!lines[0].contains_key("v") && !lines[0].contains_key("error"));
        assert_eq!(lines[1]["err"], "connection refused");
        assert_eq!(lines[1]["v"], 0);
    }

    #[test]
    fn messages_and_values_pass_through_unchanged() {
        let message = "quote \" backslash \\ newline \n tab \t unicode é ✓ {\"a\":1}";
        let lines = json_lines(2, || {
            tracing::info!(token = "s3cr3t", v = 9, msg = "field", "{message}");
        });
        let line = &lines[0];
        assert_eq!(line["msg"], message);
        // Fields are written as given: nothing is masked or dropped.
        assert_eq!(line["token"], "s3cr3t");
        assert_eq!(line["field.v"], 9);
        assert_eq!(line["field.msg"], "field");
        assert_eq!(line["v"], 0);
    }

    #[test]
    fn verbosity_decides_what_is_written_and_its_v() {
        let emit = || {
            tracing::info!("info");
            tracing::debug!("debug");
            tracing::trace!("trace");
        };
        let msgs = |v| -> Vec<(Value, Value)> {
            json_lines(v, emit)
                .into_iter()
                .map(|l| (l["msg"].clone(), l["v"].clone()))
                .collect()
        };
        assert_eq!(msgs(0), [(json!("info"), json!(0))]);
        assert_eq!(msgs(2), [(json!("info"), json!(0))]);
        assert_eq!(
            msgs(4),
            [(json!("info"), json!(0)), (json!("debug"), json!(4))]
        );
        assert_eq!(
            msgs(6),
            [
                (json!("info"), json!(0)),
                (json!("debug"), json!(4)),
                (json!("trace"), json!(6))
            ]
        );
    }

    #[test]
    fn v_maps_to_directives_and_rust_log_replaces_them() {
        assert_eq!(directives(0), "info");
        assert_eq!(directives(3), "info");
        assert!(directives(4).starts_with("info,manager=debug,captf_manager=debug"));
        assert!(directives(5).ends_with("captf_lint=debug"));
        assert!(directives(6).starts_with("debug,manager=trace"));
        assert_eq!(filter(2, Some("warn")).0.to_string(), "warn");
        assert_eq!(filter(2, Some(" ")).0.to_string(), "info");
        let (fallback, warning) = filter(4, Some("captf_manager=loud"));
        assert_eq!(
            fallback.to_string(),
            EnvFilter::new(directives(4)).to_string()
        );
        assert!(warning.unwrap().contains("RUST_LOG"));
    }

    #[test]
    fn text_lines_stay_tracing_text() {
        let buffer = Buffer::default();
        let (filter, _) = filter(2, None);
        let subscriber = subscriber(Format::Text, filter, buffer.clone(), false);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info_span!("reconcile", controller = "terraformcluster")
                .in_scope(|| tracing::info!(op = "apply", "starting"));
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("reconcile{controller=\"terraformcluster\"}"),
            "{text}"
        );
        assert!(text.contains("starting op=\"apply\""), "{text}");
        assert_eq!(Format::parse("json"), Ok(Format::Json));
        assert!(Format::parse("yaml").is_err());
    }
}
