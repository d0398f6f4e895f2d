//! `captf-probe`: what a third-party module could do from inside its
//! runner pod. Run by a test module's `local-exec` step, it asks the
//! apiserver, with the pod's own ServiceAccount token, for the namespace's
//! Secret list and for each Secret it is given, tries to create the Secrets
//! and Leases it is given (empty, unlabeled), and writes the HTTP code of
//! each answer into a Secret. Built static with the runner and the manager
//! (`captf_testenv::binaries::static_linked`), so it runs in a module image
//! that has no libc.
//!
//! Usage: `captf-probe <namespace> <result-secret> <secret-creates>
//! <lease-creates> <name>,<name>,...`, each list comma-separated and
//! possibly empty (the last argument is one word: `local-exec` appends its
//! `command` to the `interpreter` list as one argument). Codes are keyed by
//! the Secret's name for reads, `list` for the list, and `create secret
//! <name>` or `create lease <name>` for creates. Exits non-zero, failing
//! the apply, when it cannot write its result.

use std::collections::BTreeMap;
use std::process::ExitCode;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};

/// The HTTP code of an answer: 200 for a success, the status an error
/// carried, 0 when no answer came.
fn code<T>(answer: Result<T, kube::Error>, success: u16) -> u16 {
    match answer {
        Ok(_) => success,
        Err(kube::Error::Api(status)) => status.code,
        Err(_) => 0,
    }
}

fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|n| !n.is_empty())
}

fn named<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("a named object")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [namespace, result, secret_creates, lease_creates, reads] = args.as_slice() else {
        eprintln!(
            "usage: captf-probe <namespace> <result-secret> <secret-creates> <lease-creates> <name>,<name>,..."
        );
        return ExitCode::from(2);
    };
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("captf-probe: no in-cluster client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let leases: Api<Lease> = Api::namespaced(client, namespace);
    let post = PostParams::default();
    let mut codes = BTreeMap::new();
    codes.insert(
        "list".to_owned(),
        code(secrets.list(&ListParams::default()).await, 200),
    );
    for name in names(reads) {
        codes.insert(name.to_owned(), code(secrets.get(name).await, 200));
    }
    for name in names(secret_creates) {
        let answer = secrets.create(&post, &named(name)).await;
        codes.insert(format!("create secret {name}"), code(answer, 201));
    }
    for name in names(lease_creates) {
        let answer = leases.create(&post, &named(name)).await;
        codes.insert(format!("create lease {name}"), code(answer, 201));
    }
    let document: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": result},
        "stringData": {"codes": serde_json::to_string(&codes).unwrap_or_default()},
    }))
    .expect("a static Secret");
    let written = code(secrets.create(&post, &document).await, 201);
    if written != 201 {
        eprintln!("captf-probe: writing {result}: HTTP {written}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
