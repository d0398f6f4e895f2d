//! What RBAC cannot say about a runner: which names it may create. A Role
//! scopes `get`, `update` and `delete` by name, but `create` only by
//! resource, so an object's runner could create any Secret or Lease of its
//! namespace: another object's state chunk (holding that object's state
//! reads), a lock Lease for a state not its own, a future cluster's
//! `<cluster>-kubeconfig`. This ValidatingAdmissionPolicy closes that: a
//! request from an object's runner ServiceAccount (`captf-runner-<suffix>`,
//! `rbac::object_runner_name`) may create only the Secrets of its own state
//! (`state_names::state_secrets`) and its own lock Lease, and only in its
//! own namespace. Every other subject (the manager, operators, an
//! operator's own runner account bound to the namespace-wide role) is not
//! matched and keeps what RBAC grants it.

use captf_api::names::labels;
use captf_contract::state_names;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::json;

use crate::rbac::RUNNER;

/// Name of the policy and of its binding.
pub const RUNNER_CREATES: &str = "captf-runner-creates";

/// The CEL list of what follows the base state Secret's name in the name
/// of each Secret of the state: `''` for the base, `'-part-N'` for chunks.
fn state_name_tails() -> String {
    // Any suffix gives the same tails; they are the backend's naming rule.
    let base = state_names::state_secret("s");
    let tails: Vec<String> = state_names::state_secrets("s")
        .iter()
        .map(|n| format!("'{}'", &n[base.len()..]))
        .collect();
    format!("[{}]", tails.join(", "))
}

/// What the backend puts before the base state Secret's name to name the
/// state's lock Lease (`lock-`).
fn lock_prefix() -> String {
    let (suffix, lock) = ("s", state_names::state_lock_lease("s"));
    lock.strip_suffix(&state_names::state_secret(suffix))
        .expect("the lock's name ends with the state's")
        .to_owned()
}

/// The policy. Requests from a subject that is not an object's runner are
/// not matched (`matchConditions`), so they cost one CEL match and nothing
/// else.
pub fn runner_create_policy() -> ValidatingAdmissionPolicy {
    let runner_user = format!("^system:serviceaccount:[^:]+:{RUNNER}-[^:]+$");
    let own_lock = format!(
        "request.resource.resource != 'leases' || object.metadata.name == '{}' + variables.state",
        lock_prefix()
    );
    let own_state = format!(
        "request.resource.resource != 'secrets' || (object.metadata.name.startsWith(variables.state) \
         && object.metadata.name.substring(size(variables.state)) in {})",
        state_name_tails()
    );
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": RUNNER_CREATES, "labels": {labels::MANAGED: "true"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["secrets"]},
                {"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                 "operations": ["CREATE"], "resources": ["leases"]},
            ]},
            "matchConditions": [{
                "name": "an-object-runner",
                "expression": format!("request.userInfo.username.matches('{runner_user}')"),
            }],
            "variables": [
                {"name": "own",
                 "expression": format!("'system:serviceaccount:' + request.namespace + ':{RUNNER}-'")},
                {"name": "suffix",
                 "expression": "request.userInfo.username.startsWith(variables.own) ? \
                                request.userInfo.username.substring(size(variables.own)) : ''"},
                {"name": "state",
                 "expression": format!("'{}' + variables.suffix", state_names::state_secret(""))},
            ],
            "validations": [
                {"expression": "variables.suffix != ''",
                 "message": "a runner creates only in its own namespace",
                 "reason": "Forbidden"},
                {"expression": own_state,
                 "message": "a runner may create only the Secrets of its own state",
                 "messageExpression": "'a runner may create only the Secrets of its own state, not ' + object.metadata.name",
                 "reason": "Forbidden"},
                {"expression": own_lock,
                 "message": "a runner may create only its own state's lock Lease",
                 "messageExpression": "'a runner may create only its own state\\'s lock Lease, not ' + object.metadata.name",
                 "reason": "Forbidden"},
            ],
        },
    }))
    .expect("a static policy")
}

/// Binds the policy to every namespace, denying what it refuses.
pub fn runner_create_policy_binding() -> ValidatingAdmissionPolicyBinding {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": RUNNER_CREATES, "labels": {labels::MANAGED: "true"}},
        "spec": {"policyName": RUNNER_CREATES, "validationActions": ["Deny"]},
    }))
    .expect("a static binding")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_exactly_the_states_secrets_and_lock() {
        assert_eq!(
            state_name_tails(),
            "['', '-part-1', '-part-2', '-part-3', '-part-4', '-part-5', '-part-6', '-part-7']"
        );
        let policy = runner_create_policy();
        let spec = policy.spec.unwrap();
        let vars = spec.variables.unwrap();
        assert_eq!(vars[2].expression, "'tfstate-default-' + variables.suffix");
        // The lease rule, its `variables.state` read as one state's base
        // Secret name, names exactly that state's lock Lease.
        let lease_rule = &spec.validations.unwrap()[2].expression;
        let state = format!("'{}'", state_names::state_secret("x"));
        let named = lease_rule
            .replace("variables.state", &state)
            .split_once("object.metadata.name == ")
            .expect("the rule compares the Lease's name")
            .1
            .split(" + ")
            .map(|literal| literal.trim_matches('\'').to_owned())
            .collect::<String>();
        assert_eq!(named, state_names::state_lock_lease("x"));
        let condition = &spec.match_conditions.unwrap()[0].expression;
        assert!(condition.contains(":captf-runner-[^:]+$"), "{condition}");
        assert_eq!(
            runner_create_policy_binding().spec.unwrap().policy_name,
            policy.metadata.name
        );
    }
}
