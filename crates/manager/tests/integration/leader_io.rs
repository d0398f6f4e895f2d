//! Leader election against the real apiserver: one replica leads, a clean
//! stop hands over at once, a silent leader is replaced once its claim
//! expires, and a leader whose Lease was taken stops holding.

use std::time::Duration;

use captf_manager::leader::{Elector, LEASE_NAME, Timing};
use captf_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams};

fn fast() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

async fn holder(api: &kube::Api<Lease>) -> String {
    api.get(LEASE_NAME)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap_or_default()
}

#[tokio::test]
async fn one_replica_leads_and_hands_over() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let a = Elector::new(ns.client(), ns.name(), "a".into(), fast());
    let b = Elector::new(ns.client(), ns.name(), "b".into(), fast());
    let leases = ns.api::<Lease>();

    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "the first one leads"
    );
    assert!(!b.try_acquire_or_renew().await.unwrap(), "the second waits");
    assert!(a.try_acquire_or_renew().await.unwrap(), "the leader renews");
    assert_eq!(holder(&leases).await, "a");

    // A clean stop gives the Lease up: the other takes over at once.
    a.release().await.unwrap();
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "taken over after release"
    );
    let lease = leases.get(LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.lease_transitions, Some(1));
    // Releasing what it no longer holds changes nothing.
    a.release().await.unwrap();
    assert_eq!(holder(&leases).await, "b");

    // A leader that goes silent is replaced once its claim expires.
    assert!(!a.try_acquire_or_renew().await.unwrap());
    tokio::time::timeout(Duration::from_secs(10), a.acquire())
        .await
        .expect("the silent leader's claim expires");
    assert_eq!(holder(&leases).await, "a");

    // `hold` returns once someone else holds the Lease.
    leases
        .patch(
            LEASE_NAME,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"holderIdentity": "c", "leaseDurationSeconds": 60}}),
            ),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), a.hold())
        .await
        .expect("a leader that lost the Lease stops holding");
}
