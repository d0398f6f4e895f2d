//! AdmissionReview v1 in and out: decode the request, run the kind's pure
//! admission rules, and encode one answer listing every violation.

use captf_api::admission::{self, Operation, Request, Verdict};
use captf_api::names::{annotations, kinds};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Why a body is not an AdmissionReview this server can answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("not an admission.k8s.io/v1 AdmissionReview with a request")]
    NotAReview,
}

/// The parts of an AdmissionRequest the rules need.
#[derive(Clone, Debug)]
pub struct Incoming {
    pub uid: String,
    pub name: String,
    pub namespace: Option<String>,
    pub operation: Operation,
    pub user: UserInfo,
    pub dry_run: bool,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// Who sent the request, as the apiserver authenticated them.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    #[serde(default)]
    pub extra: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

impl Incoming {
    /// The object under review: the new one, or the stored one on DELETE.
    pub fn subject(&self) -> Option<&Value> {
        self.object.as_ref().or(self.old_object.as_ref())
    }
}

/// Reads the request out of an AdmissionReview body.
pub fn decode(body: &Value) -> Result<Incoming, ReviewError> {
    let request = body.get("request").ok_or(ReviewError::NotAReview)?;
    fn text(v: Option<&Value>) -> &str {
        v.and_then(Value::as_str).unwrap_or("")
    }
    let operation = match text(request.get("operation")) {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        _ => return Err(ReviewError::NotAReview),
    };
    let present = |key| request.get(key).filter(|v| !v.is_null()).cloned();
    Ok(Incoming {
        uid: request
            .get("uid")
            .and_then(Value::as_str)
            .ok_or(ReviewError::NotAReview)?
            .to_string(),
        name: text(request.get("name")).to_string(),
        namespace: request
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_string),
        operation,
        user: request
            .get("userInfo")
            .cloned()
            .and_then(|u| serde_json::from_value(u).ok())
            .unwrap_or_default(),
        dry_run: request
            .get("dryRun")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        object: present("object"),
        old_object: present("oldObject"),
    })
}

/// The request facts the pure rules take.
pub fn request(input: &Incoming, manager_username: Option<&str>) -> Request {
    let topology_dry_run = input.dry_run
        && input
            .object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/annotations"))
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(annotations::TOPOLOGY_DRY_RUN));
    Request {
        operation: input.operation,
        username: input.user.username.clone(),
        manager_username: manager_username.map(str::to_string),
        topology_dry_run,
    }
}

/// The verdict of `kind`'s pure rules; `Err` when the request cannot be
/// judged (no object, or one that does not decode).
pub fn verdict(
    kind: &str,
    input: &Incoming,
    manager_username: Option<&str>,
) -> Result<Verdict, String> {
    let request = request(input, manager_username);
    match kind {
        kinds::TERRAFORM_CLUSTER => run(&request, input, admission::terraform_cluster),
        kinds::TERRAFORM_CLUSTER_TEMPLATE => {
            run(&request, input, admission::terraform_cluster_template)
        }
        kinds::TERRAFORM_MACHINE => run(&request, input, admission::terraform_machine),
        kinds::TERRAFORM_MACHINE_TEMPLATE => {
            run(&request, input, admission::terraform_machine_template)
        }
        kinds::TERRAFORM_MACHINE_POOL => run(&request, input, admission::terraform_machine_pool),
        kinds::TERRAFORM_MACHINE_POOL_TEMPLATE => {
            run(&request, input, admission::terraform_machine_pool_template)
        }
        kinds::TERRAFORM_CLUSTER_IDENTITY => {
            run(&request, input, admission::terraform_cluster_identity)
        }
        kinds::TERRAFORM_PLAN => run(&request, input, admission::terraform_plan),
        _ => Err(format!("no admission rules for kind {kind}")),
    }
}

/// Answers `body` for `kind` with the pure rules only.
pub fn review(
    kind: &str,
    body: &Value,
    manager_username: Option<&str>,
) -> Result<Value, ReviewError> {
    let input = decode(body)?;
    let outcome = verdict(kind, &input, manager_username).map_err(Problem::BadRequest);
    Ok(respond(kind, &input, outcome))
}

/// Why no verdict could be reached.
#[derive(Clone, Debug)]
pub enum Problem {
    /// The request itself is unusable.
    BadRequest(String),
    /// A lookup the rules need failed.
    Internal(String),
}

type Rule<K> = fn(&Request, &K, Option<&K>) -> Verdict;

/// Decodes an object of kind `K`; decoding errors can quote the input, so
/// they are not passed on.
pub fn decode_object<K: DeserializeOwned>(v: &Value) -> Result<K, String> {
    K::deserialize(v).map_err(|_| "the object does not match its kind's schema".to_string())
}

fn run<K: DeserializeOwned>(
    request: &Request,
    input: &Incoming,
    rule: Rule<K>,
) -> Result<Verdict, String> {
    let Some(object) = input.subject() else {
        return Err("the request carries no object".into());
    };
    let new = decode_object(object)?;
    let old = match request.operation {
        Operation::Update => input.old_object.as_ref().map(decode_object).transpose()?,
        _ => None,
    };
    Ok(rule(request, &new, old.as_ref()))
}

/// The AdmissionReview answering `input`: allowed, or one status naming
/// every violation (`Invalid` on create/update, `Forbidden` on delete).
pub fn respond(kind: &str, input: &Incoming, outcome: Result<Verdict, Problem>) -> Value {
    let response = match outcome {
        Ok(verdict) => {
            if !verdict.allowed() {
                let fields: Vec<&str> = verdict
                    .violations
                    .iter()
                    .map(|v| v.field.as_str())
                    .collect();
                tracing::debug!(user = %input.user.username, kind, name = %input.name, ?fields, "admission denied");
            }
            response(kind, input, &verdict)
        }
        Err(problem) => {
            let (code, reason, message) = match problem {
                Problem::BadRequest(m) => (400, "BadRequest", m),
                Problem::Internal(m) => (500, "InternalError", m),
            };
            json!({
                "uid": input.uid,
                "allowed": false,
                "status": {"status": "Failure", "code": code, "reason": reason, "message": message},
            })
        }
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

fn response(kind: &str, input: &Incoming, verdict: &Verdict) -> Value {
    let warnings = (!verdict.warnings.is_empty()).then(|| verdict.warnings.clone());
    let mut response = if verdict.allowed() {
        json!({"uid": input.uid, "allowed": true})
    } else {
        let listed: Vec<String> = verdict.violations.iter().map(ToString::to_string).collect();
        let causes: Vec<Value> = verdict
            .violations
            .iter()
            .map(|v| json!({"reason": v.kind.cause_reason(), "message": v.message(), "field": v.field}))
            .collect();
        let name = &input.name;
        let (code, reason, message) = if input.operation == Operation::Delete {
            (
                403,
                "Forbidden",
                format!(
                    "{kind}.{} \"{name}\" is forbidden: [{}]",
                    captf_api::GROUP,
                    listed.join(", ")
                ),
            )
        } else {
            (
                422,
                "Invalid",
                format!(
                    "{kind}.{} \"{name}\" is invalid: [{}]",
                    captf_api::GROUP,
                    listed.join(", ")
                ),
            )
        };
        json!({
            "uid": input.uid,
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": code,
                "reason": reason,
                "message": message,
                "details": {"name": name, "group": captf_api::GROUP, "kind": kind, "causes": causes},
            },
        })
    };
    if let Some(w) = warnings {
        response["warnings"] = json!(w);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(operation: &str, object: Value, old: Option<Value>) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": captf_api::GROUP, "version": "v1alpha1", "kind": "TerraformMachinePool"},
                "name": "p",
                "namespace": "ns",
                "operation": operation,
                "userInfo": {"username": "alice"},
                "object": object,
                "oldObject": old,
                "dryRun": false,
            },
        })
    }

    fn pool(spec: Value) -> Value {
        json!({"apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePool", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn allows_a_valid_object() {
        let out = review(
            kinds::TERRAFORM_MACHINE_POOL,
            &body(
                "CREATE",
                pool(json!({"source": {"image": "ghcr.io/a/b:v1"}})),
                None,
            ),
            None,
        )
        .unwrap();
        assert_eq!(out["response"]["uid"], "u-1");
        assert_eq!(out["response"]["allowed"], true);
    }

    #[test]
    fn denies_with_one_invalid_status_listing_every_violation() {
        let bad = pool(
            json!({"source": {"image": "ghcr.io/a/b:"}, "variables": {"captf_x": "secret-value", "count": 1}}),
        );
        let out = review(
            kinds::TERRAFORM_MACHINE_POOL,
            &body("CREATE", bad, None),
            None,
        )
        .unwrap();
        let status = &out["response"]["status"];
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["causes"].as_array().unwrap().len(), 3);
        let message = status["message"].as_str().unwrap();
        for field in [
            "spec.source.image",
            "spec.variables[captf_x]",
            "spec.variables[count]",
        ] {
            assert!(message.contains(field), "{message}");
        }
        assert!(!message.contains("secret-value"));
    }

    #[test]
    fn update_passes_the_old_object_and_delete_is_allowed() {
        let privileged = pool(
            json!({"source": {"image": "ghcr.io/a/b:v1"}, "jobs": {"securityContext": {"privileged": true}}}),
        );
        let out = review(
            kinds::TERRAFORM_MACHINE_POOL,
            &body("UPDATE", privileged.clone(), Some(privileged.clone())),
            None,
        )
        .unwrap();
        assert_eq!(
            out["response"]["allowed"], true,
            "unchanged policy is not re-checked"
        );
        let out = review(
            kinds::TERRAFORM_MACHINE_POOL,
            &body("DELETE", Value::Null, Some(privileged)),
            None,
        )
        .unwrap();
        assert_eq!(out["response"]["allowed"], true);
    }

    #[test]
    fn undecodable_objects_are_refused_without_quoting_them() {
        let weird = pool(json!({"source": {"image": 42, "imagePullPolicy": "Sometimes-secret"}}));
        let out = review(
            kinds::TERRAFORM_MACHINE_POOL,
            &body("CREATE", weird, None),
            None,
        )
        .unwrap();
        assert_eq!(out["response"]["allowed"], false);
        assert!(!out.to_string().contains("Sometimes-secret"));
        assert!(
            review(
                kinds::TERRAFORM_MACHINE_POOL,
                &json!({"kind": "Nope"}),
                None
            )
            .is_err()
        );
    }

    #[test]
    fn topology_dry_runs_skip_template_immutability() {
        let tmpl = |image: &str, dry_run: bool| {
            let mut object = json!({
                "apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePoolTemplate",
                "metadata": {"name": "t", "namespace": "ns"},
                "spec": {"template": {"spec": {"source": {"image": image}}}},
            });
            if dry_run {
                object["metadata"]["annotations"] = json!({annotations::TOPOLOGY_DRY_RUN: ""});
            }
            object
        };
        let request = |dry_run: bool| {
            let mut b = body(
                "UPDATE",
                tmpl("ghcr.io/a/b:v2", dry_run),
                Some(tmpl("ghcr.io/a/b:v1", false)),
            );
            b["request"]["dryRun"] = json!(dry_run);
            b
        };
        let kind = kinds::TERRAFORM_MACHINE_POOL_TEMPLATE;
        assert_eq!(
            review(kind, &request(false), None).unwrap()["response"]["allowed"],
            false
        );
        assert_eq!(
            review(kind, &request(true), None).unwrap()["response"]["allowed"],
            true
        );
    }
}
