//! A faithful in-memory stand-in for the apiserver's object store, for the
//! whole-pass request-sequence tests that run without a control plane (the
//! real apiserver runs in the integration tests; here a pass must run in
//! milliseconds and show every request it sends). Test-only.
//!
//! It keeps what a pass relies on: reads and lists (label selectors),
//! creates (AlreadyExists), merge patches with a `resourceVersion`
//! precondition (Conflict), server-side apply (create or merge), the
//! `status` subresource (a main-resource write leaves status alone, a status
//! write leaves the rest alone), `generation` bumped by a spec change, and
//! deletion held by finalizers until the last one goes. It does not run
//! controllers: a Job gets no pod unless a test makes one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::mock_api::{Call, status};

/// Where an object lives: the API prefix (`/api/v1`,
/// `/apis/batch/v1`), the plural resource, and its namespace ("" when
/// cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Collection {
    prefix: String,
    resource: String,
}

/// A parsed request path.
#[derive(Debug)]
struct Target {
    collection: Collection,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match segments.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(name.to_string()), None),
        [resource, name, sub] => (*resource, Some(name.to_string()), Some(*sub)),
        _ => return None,
    };
    Some(Target {
        collection: Collection {
            prefix,
            resource: resource.to_owned(),
        },
        namespace,
        name,
        status: sub == Some("status"),
    })
}

/// One term of a label selector.
fn term_matches(term: &str, labels: &serde_json::Map<String, Value>) -> bool {
    let value = |k: &str| labels.get(k.trim()).and_then(Value::as_str);
    let set = |list: &str| -> Vec<String> {
        list.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect()
    };
    if let Some((k, list)) = term.split_once(" notin ") {
        return !value(k).is_some_and(|v| set(list).iter().any(|s| s == v));
    }
    if let Some((k, list)) = term.split_once(" in ") {
        return value(k).is_some_and(|v| set(list).iter().any(|s| s == v));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return value(k) != Some(v.trim());
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return value(k) == Some(v.trim());
    }
    match term.strip_prefix('!') {
        Some(k) => value(k).is_none(),
        None => value(term).is_some(),
    }
}

/// Splits a selector at the commas outside parentheses.
fn selector_terms(selector: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

fn selects(selector: &str, obj: &Value) -> bool {
    let empty = serde_json::Map::new();
    let labels = obj["metadata"]["labels"].as_object().unwrap_or(&empty);
    selector_terms(selector)
        .iter()
        .all(|t| term_matches(t, labels))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query parameter `key`, decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| percent_decode(v))
}

/// RFC 7386: a JSON merge patch of `target` by `patch`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().expect("an object");
    for (k, v) in fields {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Everything but `metadata` and `status`: what bumps `generation`.
fn spec_of(obj: &Value) -> Value {
    let mut rest = obj.clone();
    if let Some(map) = rest.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    rest
}

/// The apiserver's clock, as its timestamps write it: to the second.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The store and its resourceVersion counter.
#[derive(Default)]
struct Store {
    objects: BTreeMap<(Collection, String, String), Value>,
    version: u64,
}

/// The fake apiserver; clones share one store.
#[derive(Clone, Default)]
pub struct FakeApiserver {
    store: Arc<Mutex<Store>>,
}

type Answer = (u16, Value);

fn not_found(t: &Target) -> Answer {
    let (code, mut body) = status(404, "NotFound");
    body["message"] = json!(format!(
        "{} \"{}\" not found",
        t.collection.resource,
        t.name.as_deref().unwrap_or_default()
    ));
    (code, body)
}

impl FakeApiserver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `obj` as a test's setup would find it (status included) at
    /// the collection `path` (`/api/v1/secrets`, `/apis/batch/v1/jobs`),
    /// with a fresh resourceVersion; returns it as stored.
    pub fn insert(&self, path: &str, mut obj: Value) -> Value {
        let t = parse_path(path).expect("a collection path");
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let name = obj["metadata"]["name"]
            .as_str()
            .expect("a named object")
            .to_owned();
        let mut store = self.store.lock().expect("the fake's store");
        store.version += 1;
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(store.version.to_string());
        if meta["uid"].is_null() {
            meta["uid"] = json!(format!("uid-{name}"));
        }
        if meta["generation"].is_null() {
            meta["generation"] = json!(1);
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = json!(now());
        }
        store.objects.insert((t.collection, ns, name), obj.clone());
        obj
    }

    /// The stored object at `path`'s collection, `namespace` and `name`.
    pub fn get(&self, path: &str, namespace: &str, name: &str) -> Option<Value> {
        let t = parse_path(path).expect("a collection path");
        let store = self.store.lock().expect("the fake's store");
        store
            .objects
            .get(&(t.collection, namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every stored object of `path`'s collection in `namespace`, by name.
    pub fn list(&self, path: &str, namespace: &str) -> Vec<Value> {
        let t = parse_path(path).expect("a collection path");
        let store = self.store.lock().expect("the fake's store");
        store
            .objects
            .iter()
            .filter(|((c, ns, _), _)| *c == t.collection && ns == namespace)
            .map(|(_, obj)| obj.clone())
            .collect()
    }

    /// Changes the stored object in place (a controller's or the runner's
    /// doing), with a fresh resourceVersion.
    pub fn update(&self, path: &str, namespace: &str, name: &str, change: impl FnOnce(&mut Value)) {
        let t = parse_path(path).expect("a collection path");
        let mut store = self.store.lock().expect("the fake's store");
        store.version += 1;
        let version = store.version.to_string();
        let key = (t.collection, namespace.to_owned(), name.to_owned());
        let obj = store.objects.get_mut(&key).expect("a stored object");
        change(obj);
        obj["metadata"]["resourceVersion"] = json!(version);
    }

    /// Deletes the object as a client's DELETE would (held by its
    /// finalizers).
    pub fn delete(&self, path: &str, namespace: &str, name: &str) {
        let t = parse_path(&format!(
            "{}/namespaces/{namespace}/{}/{name}",
            prefix_of(path),
            resource_of(path)
        ))
        .expect("an object path");
        let mut store = self.store.lock().expect("the fake's store");
        store.delete(&t, &Value::Null);
    }

    /// The responder for [`super::mock_api::MockApi::new`].
    pub fn responder(&self) -> impl Fn(&Call) -> Answer + Send + Sync + 'static {
        let fake = self.clone();
        move |call| fake.answer(call)
    }

    fn answer(&self, call: &Call) -> Answer {
        let Some(t) = parse_path(&call.path) else {
            return status(404, "NotFound");
        };
        let mut store = self.store.lock().expect("the fake's store");
        match (call.method.as_str(), &t.name) {
            ("GET", Some(_)) => store.read(&t),
            ("GET", None) => store.list(&t, &call.query),
            ("POST", None) => store.create(&t, &call.body),
            ("PUT", Some(_)) => store.replace(&t, &call.body),
            ("PATCH", Some(_)) => store.patch(&t, call),
            ("DELETE", Some(_)) => store.delete(&t, &call.body),
            ("DELETE", None) => store.delete_collection(&t, &call.query),
            _ => status(405, "MethodNotAllowed"),
        }
    }
}

impl Store {
    fn key(t: &Target, name: &str) -> (Collection, String, String) {
        (
            t.collection.clone(),
            t.namespace.clone().unwrap_or_default(),
            name.to_owned(),
        )
    }

    fn bump(&mut self, obj: &mut Value) {
        self.version += 1;
        obj["metadata"]["resourceVersion"] = json!(self.version.to_string());
    }

    fn read(&self, t: &Target) -> Answer {
        let name = t.name.as_deref().unwrap_or_default();
        match self.objects.get(&Self::key(t, name)) {
            Some(obj) => (200, obj.clone()),
            None => not_found(t),
        }
    }

    fn selected<'a>(&'a self, t: &'a Target, query: &str) -> impl Iterator<Item = &'a Value> {
        let labels = query_param(query, "labelSelector").unwrap_or_default();
        let fields = query_param(query, "fieldSelector").unwrap_or_default();
        self.objects
            .iter()
            .filter(move |((c, ns, name), obj)| {
                *c == t.collection
                    && t.namespace.as_ref().is_none_or(|want| want == ns)
                    && selects(&labels, obj)
                    && fields_select(&fields, ns, name)
            })
            .map(|(_, obj)| obj)
    }

    fn list(&self, t: &Target, query: &str) -> Answer {
        let fields = query_param(query, "fieldSelector").unwrap_or_default();
        if !selector_terms(&fields).iter().all(|f| known_field(f)) {
            return status(400, "BadRequest");
        }
        let items: Vec<Value> = self.selected(t, query).cloned().collect();
        (
            200,
            json!({"kind": "List", "apiVersion": "v1",
                "metadata": {"resourceVersion": self.version.to_string()},
                "items": items}),
        )
    }

    fn create(&mut self, t: &Target, body: &Value) -> Answer {
        let mut obj = body.clone();
        let name = match obj["metadata"]["name"].as_str() {
            Some(n) => n.to_owned(),
            None => {
                let base = obj["metadata"]["generateName"].as_str().unwrap_or("x");
                format!("{base}{:05}", self.version + 1)
            }
        };
        let key = Self::key(t, &name);
        if self.objects.contains_key(&key) {
            return status(409, "AlreadyExists");
        }
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
        let meta = &mut obj["metadata"];
        meta["name"] = json!(name);
        if let Some(ns) = &t.namespace {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(format!("uid-{name}"));
        meta["generation"] = json!(1);
        meta["creationTimestamp"] = json!(now());
        self.bump(&mut obj);
        self.objects.insert(key, obj.clone());
        (201, obj)
    }

    /// Stores `next` in place of `old` under the rules of the status
    /// subresource; drops the object when its deletion has no finalizer
    /// left.
    fn store(&mut self, t: &Target, old: &Value, mut next: Value) -> Answer {
        let name = t.name.clone().unwrap_or_default();
        if t.status {
            let status = next["status"].take();
            next = old.clone();
            next["status"] = status;
        } else {
            next["status"] = old["status"].clone();
            for kept in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "generation",
            ] {
                next["metadata"][kept] = old["metadata"][kept].clone();
            }
            if spec_of(&next) != spec_of(old) {
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
                next["metadata"]["generation"] = json!(generation + 1);
            }
        }
        if next["status"].is_null() {
            next.as_object_mut().map(|m| m.remove("status"));
        }
        if next["metadata"]["deletionTimestamp"].is_string() && no_finalizers(&next) {
            self.objects.remove(&Self::key(t, &name));
            return (200, next);
        }
        self.bump(&mut next);
        self.objects.insert(Self::key(t, &name), next.clone());
        (200, next)
    }

    fn replace(&mut self, t: &Target, body: &Value) -> Answer {
        let name = t.name.clone().unwrap_or_default();
        let Some(old) = self.objects.get(&Self::key(t, &name)).cloned() else {
            return not_found(t);
        };
        if let Some(conflict) = precondition(&old, body) {
            return conflict;
        }
        self.store(t, &old, body.clone())
    }

    fn patch(&mut self, t: &Target, call: &Call) -> Answer {
        let name = t.name.clone().unwrap_or_default();
        let apply = call.content_type.starts_with("application/apply-patch");
        let old = match self.objects.get(&Self::key(t, &name)).cloned() {
            Some(old) => old,
            None if apply => {
                let collection = Target {
                    name: None,
                    status: false,
                    ..clone_target(t)
                };
                return self.create(&collection, &call.body);
            }
            None => return not_found(t),
        };
        if let Some(conflict) = precondition(&old, &call.body) {
            return conflict;
        }
        let mut next = old.clone();
        merge_patch(&mut next, &call.body);
        self.store(t, &old, next)
    }

    fn delete(&mut self, t: &Target, body: &Value) -> Answer {
        let name = t.name.clone().unwrap_or_default();
        let key = Self::key(t, &name);
        let Some(mut obj) = self.objects.get(&key).cloned() else {
            return not_found(t);
        };
        let wanted = &body["preconditions"];
        for field in ["uid", "resourceVersion"] {
            if wanted[field].is_string() && wanted[field] != obj["metadata"][field] {
                return status(409, "Conflict");
            }
        }
        if no_finalizers(&obj) {
            self.objects.remove(&key);
            return (200, obj);
        }
        if obj["metadata"]["deletionTimestamp"].is_null() {
            obj["metadata"]["deletionTimestamp"] = json!(now());
            self.bump(&mut obj);
            self.objects.insert(key, obj.clone());
        }
        (200, obj)
    }

    fn delete_collection(&mut self, t: &Target, query: &str) -> Answer {
        let names: Vec<String> = self
            .selected(t, query)
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        for name in names {
            let one = Target {
                name: Some(name),
                ..clone_target(t)
            };
            self.delete(&one, &Value::Null);
        }
        (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        )
    }
}

/// The API prefix of a collection path (`/apis/batch/v1/jobs` →
/// `/apis/batch/v1`).
fn prefix_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(prefix, _)| prefix)
}

/// The resource of a collection path.
fn resource_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

fn clone_target(t: &Target) -> Target {
    Target {
        collection: t.collection.clone(),
        namespace: t.namespace.clone(),
        name: t.name.clone(),
        status: t.status,
    }
}

fn no_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty)
}

/// A Conflict when the write names a resourceVersion other than the
/// stored one.
fn precondition(old: &Value, body: &Value) -> Option<Answer> {
    let wanted = body["metadata"]["resourceVersion"].as_str()?;
    (old["metadata"]["resourceVersion"].as_str() != Some(wanted)).then(|| status(409, "Conflict"))
}

/// The field selectors the fake answers (a list naming another field is a
/// BadRequest, not a silent match).
fn known_field(term: &str) -> bool {
    term.starts_with("metadata.name=") || term.starts_with("metadata.namespace=")
}

/// `metadata.name=` and `metadata.namespace=` field selectors.
fn fields_select(selector: &str, ns: &str, name: &str) -> bool {
    selector_terms(selector)
        .iter()
        .all(|term| match term.split_once('=') {
            Some(("metadata.name", v)) => v.trim_start_matches('=') == name,
            Some(("metadata.namespace", v)) => v.trim_start_matches('=') == ns,
            _ => false,
        })
}

#[cfg(test)]
#[path = "fake_apiserver_tests.rs"]
mod tests;
