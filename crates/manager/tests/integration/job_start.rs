//! Starting a Job is safe to repeat: created once, adopted on retry, never
//! confused with another object's Job of the same name; the per-run Secret
//! belongs to its Job.

use std::collections::BTreeMap;
use std::time::Duration;

use captf_manager::io::start::{Started, create_job, ensure_run_secret};
use captf_testenv::TestEnv;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

async fn owner(ns: &captf_testenv::TestNamespace, name: &str) -> String {
    let cm = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    cm.metadata.uid.unwrap()
}

fn job(namespace: &str, name: &str, owner: &str, owner_uid: &str) -> Job {
    job_with_deadline(namespace, name, owner, owner_uid, 3600)
}

fn job_with_deadline(
    namespace: &str,
    name: &str,
    owner: &str,
    owner_uid: &str,
    deadline: i64,
) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": owner_uid, "controller": true}
        ]},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": deadline, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "source", "image": "example.invalid/m:1"}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn starts_are_idempotent_and_never_adopt_a_stranger() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let jobs: Api<Job> = ns.api();
    let a = owner(&ns, "a").await;
    let b = owner(&ns, "b").await;

    let mine = job(ns.name(), "captf-c-prod-apply-a1-abcdef", "a", &a);
    let Started::Created { uid } = create_job(&client, &mine, &a).await.unwrap() else {
        panic!("a first start creates its Job");
    };
    let live = jobs.get("captf-c-prod-apply-a1-abcdef").await.unwrap();
    assert_eq!(live.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        create_job(&client, &mine, &a).await.unwrap(),
        Started::Adopted { uid }
    );

    // Another object asking for the same name while ours runs waits.
    let theirs = job(ns.name(), "captf-c-prod-apply-a1-abcdef", "b", &b);
    assert!(matches!(
        create_job(&client, &theirs, &b).await.unwrap(),
        Started::Deferred { .. }
    ));

    // Once ours has finished (here: the real job controller fails it at its
    // one-second deadline), the other object's start removes it and defers.
    let name = "captf-c-prod-apply-a2-fedcba";
    let short = job_with_deadline(ns.name(), name, "a", &a, 1);
    assert!(matches!(
        create_job(&client, &short, &a).await.unwrap(),
        Started::Created { .. }
    ));
    let mut failed = false;
    for _ in 0..300 {
        let j = jobs.get(name).await.unwrap();
        failed = j
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True");
        if failed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(failed, "the job controller failed the Job at its deadline");
    assert!(matches!(
        create_job(&client, &short, &a).await.unwrap(),
        Started::Deferred { .. }
    ));
    let theirs = job(ns.name(), name, "b", &b);
    assert!(matches!(
        create_job(&client, &theirs, &b).await.unwrap(),
        Started::Deferred { .. }
    ));
    for _ in 0..100 {
        if jobs.get_opt(name).await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(
        create_job(&client, &theirs, &b).await.unwrap(),
        Started::Created { .. }
    ));
}

#[tokio::test]
async fn the_run_secret_belongs_to_its_job_and_never_changes_under_it() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let a = owner(&ns, "a").await;
    let secrets: Api<Secret> = ns.api();
    let j = job(ns.name(), "captf-m-w1-apply-a1-123456", "a", &a);

    // A namesake left by something else is replaced.
    let stale = Secret {
        metadata: ObjectMeta {
            name: Some("captf-run-captf-m-w1-apply-a1-123456".into()),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([("main.tf.json".into(), "stale".into())])),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &stale)
        .await
        .unwrap();
    let Started::Created { uid: job_uid } = create_job(&client, &j, &a).await.unwrap() else {
        panic!("a first start creates its Job");
    };
    let job_name = "captf-m-w1-apply-a1-123456";
    let files = [("main.tf.json", "{}\n"), ("terraform.tfvars.json", "{}\n")];
    ensure_run_secret(
        &client,
        ns.name(),
        job_name,
        &job_uid,
        &files,
        BTreeMap::new(),
    )
    .await
    .unwrap();
    let s = secrets
        .get("captf-run-captf-m-w1-apply-a1-123456")
        .await
        .unwrap();
    assert_eq!(s.metadata.owner_references.unwrap()[0].uid, job_uid);
    assert_eq!(s.data.as_ref().unwrap()["main.tf.json"].0, b"{}\n");

    // A retry with other files keeps what the Job already mounts.
    let other = [
        ("main.tf.json", "{\"x\":1}\n"),
        ("terraform.tfvars.json", "{}\n"),
    ];
    ensure_run_secret(
        &client,
        ns.name(),
        job_name,
        &job_uid,
        &other,
        BTreeMap::new(),
    )
    .await
    .unwrap();
    let s = secrets
        .get("captf-run-captf-m-w1-apply-a1-123456")
        .await
        .unwrap();
    assert_eq!(s.data.unwrap()["main.tf.json"].0, b"{}\n");
}
