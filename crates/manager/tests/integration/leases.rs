//! Run leases against the real apiserver: one holder at a time, a live
//! holder keeps it, a finished or vanished one loses it, a concurrent taker
//! loses the race, and only the holder gives it back.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_manager::engine::decide::Op;
use captf_manager::io::leases::{Acquire, LeaseKind, LeaseRequest, acquire, release_if_held};
use captf_testenv::TestEnv;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn request(namespace: &str, name: &str, job: &str) -> LeaseRequest {
    LeaseRequest {
        kind: LeaseKind::Run,
        name: name.into(),
        namespace: namespace.into(),
        job: job.into(),
        op: Op::Apply,
        labels: BTreeMap::from([(
            "captf.infrastructure.cluster.x-k8s.io/owner-name".into(),
            "prod".into(),
        )]),
        duration: Duration::from_secs(4500),
    }
}

async fn make_job(jobs: &Api<Job>, name: &str) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "example.invalid/x:1"}]}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
}

#[tokio::test]
async fn one_holder_at_a_time() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let jobs: Api<Job> = ns.api();
    let leases: Api<Lease> = ns.api();
    let now = SystemTime::now();
    let name = "captf-run-0123456789abcdef-c";

    make_job(&jobs, "job-a").await;
    let a = request(ns.name(), name, "job-a");
    let b = request(ns.name(), name, "job-b");
    let Acquire::Acquired { version: first } = acquire(&client, &a, now).await.unwrap() else {
        panic!("a free lease is taken");
    };
    let lease = leases.get(name).await.unwrap();
    assert_eq!(
        lease.metadata.resource_version.as_deref(),
        Some(first.as_str())
    );
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("job-a")
    );
    let meta = lease.metadata;
    assert_eq!(meta.labels.unwrap()["captf.io/lease"], "run");
    assert_eq!(meta.annotations.unwrap()["captf.io/lease-op"], "apply");

    // The holder's Job runs: the other waits; re-acquiring refreshes.
    assert_eq!(
        acquire(&client, &b, now).await.unwrap(),
        Acquire::Held {
            holder: "job-a".into()
        }
    );
    assert!(matches!(
        acquire(&client, &a, now).await.unwrap(),
        Acquire::Acquired { .. }
    ));

    // Only the holder gives it back.
    assert!(
        !release_if_held(&client, ns.name(), name, "job-b", None)
            .await
            .unwrap()
    );
    assert!(leases.get_opt(name).await.unwrap().is_some());

    // The holder Job vanishes: the lease stays held for the grace, then frees.
    jobs.delete("job-a", &DeleteParams::background())
        .await
        .unwrap();
    let gone = async || jobs.get_opt("job-a").await.unwrap().is_none();
    for _ in 0..100 {
        if gone().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        acquire(&client, &b, now + Duration::from_secs(30))
            .await
            .unwrap(),
        Acquire::Held {
            holder: "job-a".into()
        }
    );
    assert!(matches!(
        acquire(&client, &b, now + Duration::from_secs(61))
            .await
            .unwrap(),
        Acquire::Acquired { .. }
    ));
    assert_eq!(
        leases
            .get(name)
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("job-b")
    );

    // The first holder's bookkeeping, with the version its start took:
    // the lease was taken over since, and stays.
    assert!(
        !release_if_held(&client, ns.name(), name, "job-a", Some(&first))
            .await
            .unwrap()
    );
    let taken_over = leases.get(name).await.unwrap();
    assert_eq!(
        taken_over.spec.unwrap().holder_identity.as_deref(),
        Some("job-b")
    );
    // The holder's, with its own version: given back.
    let version = taken_over.metadata.resource_version.unwrap();
    assert!(
        release_if_held(&client, ns.name(), name, "job-b", Some(&version))
            .await
            .unwrap()
    );
    assert!(leases.get_opt(name).await.unwrap().is_none());
    assert!(
        !release_if_held(&client, ns.name(), name, "job-b", Some(&version))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn concurrent_takers_get_one_winner() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let now = SystemTime::now();
    for round in 0..5 {
        let name = format!("captf-run-race-{round}");
        let a = request(ns.name(), &name, "job-a");
        let b = request(ns.name(), &name, "job-b");
        let (ra, rb) = tokio::join!(acquire(&client, &a, now), acquire(&client, &b, now));
        let results = [ra.unwrap(), rb.unwrap()];
        let winners = results
            .iter()
            .filter(|r| matches!(r, Acquire::Acquired { .. }))
            .count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        assert!(results.iter().all(|r| matches!(
            r,
            Acquire::Acquired { .. } | Acquire::LostRace | Acquire::Held { .. }
        )));
    }
}
