//! The fake answers as the apiserver does for what the passes rely on:
//! each rule checked through a kube client, as a pass would meet it.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::*;
use crate::reconcile::mock_api::MockApi;

const SECRETS: &str = "/api/v1/secrets";

fn secret(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns", "labels": labels}})
}

fn client(fake: &FakeApiserver) -> kube::Client {
    MockApi::new(fake.responder()).client()
}

fn names(list: kube::core::ObjectList<Secret>) -> Vec<String> {
    list.items
        .into_iter()
        .map(|s| s.metadata.name.unwrap())
        .collect()
}

#[tokio::test]
async fn a_list_selects_by_label_and_namespace() {
    let fake = FakeApiserver::new();
    fake.insert(SECRETS, secret("a", json!({"app": "x", "tier": "1"})));
    fake.insert(SECRETS, secret("b", json!({"app": "y"})));
    fake.insert(SECRETS, secret("c", json!({})));
    let mut other = secret("d", json!({"app": "x"}));
    other["metadata"]["namespace"] = json!("other");
    fake.insert(SECRETS, other);
    let api: Api<Secret> = Api::namespaced(client(&fake), "ns");
    let cases = [
        ("", vec!["a", "b", "c"]),
        ("app=x", vec!["a"]),
        ("app==x", vec!["a"]),
        ("app!=x", vec!["b", "c"]),
        ("app", vec!["a", "b"]),
        ("!app", vec!["c"]),
        ("app in (x,y)", vec!["a", "b"]),
        ("app notin (x)", vec!["b", "c"]),
        ("app=x,tier=1", vec!["a"]),
        ("app=x,tier=2", vec![]),
    ];
    for (selector, want) in cases {
        let got = names(
            api.list(&ListParams::default().labels(selector))
                .await
                .unwrap(),
        );
        assert_eq!(got, want, "{selector:?}");
    }
    let all: Api<Secret> = Api::all(client(&fake));
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("app=x"))
                .await
                .unwrap()
        ),
        vec!["a", "d"],
        "a list across namespaces"
    );
    let by_name = ListParams::default().fields("metadata.name=b");
    assert_eq!(names(api.list(&by_name).await.unwrap()), vec!["b"]);
    let unknown = ListParams::default().fields("spec.nodeName=n");
    assert!(
        api.list(&unknown).await.is_err(),
        "an unknown field selector"
    );
}

#[tokio::test]
async fn a_create_of_an_existing_name_is_already_exists_and_status_is_dropped() {
    let fake = FakeApiserver::new();
    let api: Api<ConfigMap> = Api::namespaced(client(&fake), "ns");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "v"}})).unwrap();
    let made = api.create(&PostParams::default(), &cm).await.unwrap();
    assert!(made.metadata.uid.is_some() && made.metadata.resource_version.is_some());
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j"}, "spec": {}, "status": {"succeeded": 1}});
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client(&fake), "ns");
    let made = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(job).unwrap(),
        )
        .await
        .unwrap();
    assert!(made.status.is_none(), "a create sets no status");
}

#[tokio::test]
async fn a_patch_naming_an_old_resource_version_conflicts() {
    let fake = FakeApiserver::new();
    let stored = fake.insert(SECRETS, secret("a", json!({"app": "x"})));
    let rv = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let api: Api<Secret> = Api::namespaced(client(&fake), "ns");
    let pp = PatchParams::default();
    let patch = |rv: &str, v: &str| {
        Patch::Merge(
            json!({"metadata": {"resourceVersion": rv, "labels": {"app": v, "tier": null}}}),
        )
    };
    let after = api.patch("a", &pp, &patch(&rv, "y")).await.unwrap();
    assert_eq!(after.metadata.labels.unwrap()["app"], "y");
    let err = api.patch("a", &pp, &patch(&rv, "z")).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409),
        "{err:?}"
    );
    let err = api
        .patch("missing", &pp, &patch(&rv, "z"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn status_and_spec_are_written_apart_and_a_spec_change_bumps_generation() {
    let fake = FakeApiserver::new();
    let path = "/apis/batch/v1/jobs";
    fake.insert(
        path,
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"parallelism": 1}, "status": {"active": 1}}),
    );
    let api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client(&fake), "ns");
    let pp = PatchParams::default();
    let both = json!({"spec": {"parallelism": 2}, "status": {"active": 0}});
    api.patch("j", &pp, &Patch::Merge(&both)).await.unwrap();
    let stored = fake.get(path, "ns", "j").unwrap();
    assert_eq!(stored["spec"]["parallelism"], 2);
    assert_eq!(
        stored["status"]["active"], 1,
        "the main resource leaves status"
    );
    assert_eq!(stored["metadata"]["generation"], 2);
    api.patch_status(
        "j",
        &pp,
        &Patch::Merge(&json!({"spec": {"parallelism": 3}, "status": {"active": 0}})),
    )
    .await
    .unwrap();
    let stored = fake.get(path, "ns", "j").unwrap();
    assert_eq!(stored["spec"]["parallelism"], 2, "status leaves the spec");
    assert_eq!(stored["status"]["active"], 0);
    assert_eq!(stored["metadata"]["generation"], 2);
}

#[tokio::test]
async fn apply_creates_or_merges() {
    let fake = FakeApiserver::new();
    let api: Api<ConfigMap> = Api::namespaced(client(&fake), "ns");
    let pp = PatchParams::apply("test").force();
    let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": v}});
    api.patch("c", &pp, &Patch::Apply(cm("1"))).await.unwrap();
    api.patch("c", &pp, &Patch::Apply(cm("2"))).await.unwrap();
    let stored = fake.get("/api/v1/configmaps", "ns", "c").unwrap();
    assert_eq!(stored["data"]["k"], "2");
    assert_eq!(stored["metadata"]["namespace"], "ns");
}

#[tokio::test]
async fn finalizers_hold_a_deletion_until_the_last_goes() {
    let fake = FakeApiserver::new();
    let mut held = secret("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/f"]);
    fake.insert(SECRETS, held);
    fake.insert(SECRETS, secret("free", json!({})));
    let api: Api<Secret> = Api::namespaced(client(&fake), "ns");
    api.delete("free", &DeleteParams::default()).await.unwrap();
    assert!(fake.get(SECRETS, "ns", "free").is_none());
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let stored = fake
        .get(SECRETS, "ns", "held")
        .expect("held by its finalizer");
    assert!(stored["metadata"]["deletionTimestamp"].is_string());
    let release = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch("held", &PatchParams::default(), &release)
        .await
        .unwrap();
    assert!(
        fake.get(SECRETS, "ns", "held").is_none(),
        "gone with its last finalizer"
    );
    let err = api
        .delete("held", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404),
        "{err:?}"
    );
}

#[test]
fn merge_patch_follows_rfc_7386() {
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": [1]}), json!({"a": [2]}), json!({"a": [2]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (json!(["a"]), json!({"a": "b"}), json!({"a": "b"})),
    ];
    for (mut target, patch, want) in cases {
        merge_patch(&mut target, &patch);
        assert_eq!(target, want, "{patch}");
    }
}
