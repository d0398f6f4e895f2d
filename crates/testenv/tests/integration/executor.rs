//! The local Job executor runs Job pods as a node would: the real job
//! controller creates the Pod, the executor runs it with its volumes, env and
//! service-account token, and the Job completes or fails on what happened.

use std::path::Path;

use captf_testenv::executor::LocalImage;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// An "image" whose only file is `/app/run.sh`.
fn script_image(dir: &Path, script: &str) -> LocalImage {
    std::fs::create_dir_all(dir.join("app")).unwrap();
    std::fs::write(dir.join("app/run.sh"), script).unwrap();
    LocalImage {
        root: dir.to_owned(),
        digest: "sha256:0123456789abcdef".to_owned(),
    }
}

fn job(name: &str, image: &str, extra_spec: serde_json::Value) -> Job {
    let mut spec = json!({
        "backoffLimit": 0,
        "template": {
            "metadata": {"labels": {"captf.io/managed": "true"}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "source", "image": image,
                    "command": ["/bin/sh", "/app/run.sh"],
                    "env": [{"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
                    "volumeMounts": [{"name": "config", "mountPath": "/captf/config", "readOnly": true},
                                     {"name": "work", "mountPath": "/captf/work"}]
                }],
                "volumes": [{"name": "config", "secret": {"secretName": "creds", "defaultMode": 288}},
                            {"name": "work", "emptyDir": {}}]
            }
        }
    });
    let extra = extra_spec.as_object().unwrap();
    for (k, v) in extra {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn job_condition(jobs: &Api<Job>, name: &str) -> Option<(String, Option<String>)> {
    let j = jobs.get(name).await.unwrap();
    j.status?
        .conditions?
        .into_iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| (c.type_, c.reason))
}

async fn make_secret(ns: &captf_testenv::TestNamespace) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_job_runs_to_completion_with_its_volumes_env_and_service_account() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    make_secret(&ns).await;
    let tmp = tempfile::tempdir().unwrap();
    // The script proves each part: the mounted Secret, env from a Secret, a
    // writable emptyDir, a read-only config mount, and a service-account
    // token the apiserver accepts (a 403 naming the account proves who we are).
    let script = r#"
set -e
cd /captf/work && echo hi > file && test "$(cat file)" = hi
test "$(cat /captf/config/token)" = s3cr3t
test "$FROM_SECRET" = s3cr3t
if touch /captf/config/x 2>/dev/null; then echo config-writable; exit 3; fi
sa=/var/run/secrets/kubernetes.io/serviceaccount
who=$(curl -s --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" \
  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$(cat $sa/namespace)/secrets" \
  | grep -o 'system:serviceaccount:[a-z0-9:-]*' | head -n1)
printf '{"who":"%s"}' "$who" > /dev/termination-log
"#;
    env.executor().insert(
        "local.test/ok:v1",
        script_image(&tmp.path().join("ok"), script),
    );
    let jobs: Api<Job> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job("ok", "local.test/ok:v1", json!({})),
    )
    .await
    .unwrap();

    let (cond, _) = eventually("the Job to finish", 60, || job_condition(&jobs, "ok")).await;
    let pods: Api<Pod> = ns.api();
    let pod = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=ok"))
        .await
        .unwrap()
        .items
        .remove(0);
    let status = pod.status.unwrap();
    let cs = &status.container_statuses.unwrap()[0];
    let term = cs.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        cond, "Complete",
        "exit {} message {:?}",
        term.exit_code, term.message
    );
    assert_eq!(term.exit_code, 0);
    assert_eq!(
        term.message.as_deref(),
        Some(format!(r#"{{"who":"system:serviceaccount:{}:default"}}"#, ns.name()).as_str())
    );
    assert_eq!(cs.image_id, "local.test/ok@sha256:0123456789abcdef");
    assert_eq!(
        pod.spec.unwrap().node_name.as_deref(),
        Some("captf-local-executor")
    );
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
}

#[tokio::test]
async fn a_secret_created_after_the_pod_lets_it_run_to_completion() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    env.executor().insert(
        "local.test/late:v1",
        script_image(&tmp.path().join("late"), "test \"$FROM_SECRET\" = s3cr3t\n"),
    );
    let jobs: Api<Job> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job("late", "local.test/late:v1", json!({})),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = ns.api();
    let selector = ListParams::default().labels("batch.kubernetes.io/job-name=late");
    // Like a kubelet, the executor waits for the missing Secret...
    eventually("the pod to wait for its Secret", 60, || async {
        let pod = pods.list(&selector).await.unwrap().items.pop()?;
        let waiting = pod
            .status?
            .container_statuses?
            .first()?
            .state
            .clone()?
            .waiting?;
        (waiting.reason.as_deref() == Some("CreateContainerConfigError")).then_some(())
    })
    .await;
    // ...and runs the pod once it exists, reporting each container once.
    make_secret(&ns).await;
    let (cond, _) = eventually("the Job to finish", 60, || job_condition(&jobs, "late")).await;
    assert_eq!(cond, "Complete");
    let status = pods
        .list(&selector)
        .await
        .unwrap()
        .items
        .remove(0)
        .status
        .unwrap();
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    let names: Vec<String> = status
        .container_statuses
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["source"]);
}

#[tokio::test]
async fn a_failing_container_fails_the_job_with_its_exit_code_and_message() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    make_secret(&ns).await;
    let tmp = tempfile::tempdir().unwrap();
    env.executor().insert(
        "local.test/fail:v1",
        script_image(
            &tmp.path().join("fail"),
            "echo -n broken > /dev/termination-log; exit 7\n",
        ),
    );
    let jobs: Api<Job> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job("fail", "local.test/fail:v1", json!({})),
    )
    .await
    .unwrap();
    let (cond, _) = eventually("the Job to fail", 60, || job_condition(&jobs, "fail")).await;
    assert_eq!(cond, "Failed");
    let pods: Api<Pod> = ns.api();
    let pod = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=fail"))
        .await
        .unwrap()
        .items
        .remove(0);
    let cs = pod.status.unwrap().container_statuses.unwrap().remove(0);
    let term = cs.state.unwrap().terminated.unwrap();
    assert_eq!(
        (term.exit_code, term.message.as_deref()),
        (7, Some("broken"))
    );
}

#[tokio::test]
async fn an_exceeded_deadline_terminates_the_container_gracefully() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    make_secret(&ns).await;
    let tmp = tempfile::tempdir().unwrap();
    // The script runs until told to stop; only the deadline ends it.
    let script = "trap 'exit 42' TERM\nwhile true; do sleep 0.1; done\n";
    env.executor().insert(
        "local.test/slow:v1",
        script_image(&tmp.path().join("slow"), script),
    );
    let jobs: Api<Job> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job(
            "slow",
            "local.test/slow:v1",
            json!({"activeDeadlineSeconds": 2}),
        ),
    )
    .await
    .unwrap();
    let (cond, reason) = eventually("the Job to fail", 60, || job_condition(&jobs, "slow")).await;
    assert_eq!(
        (cond.as_str(), reason.as_deref()),
        ("Failed", Some("DeadlineExceeded"))
    );
    // The job controller deletes the pod; the executor confirms the deletion
    // once the container has stopped.
    let pods: Api<Pod> = ns.api();
    eventually("the pod to be gone", 60, || async {
        let lp = ListParams::default().labels("batch.kubernetes.io/job-name=slow");
        pods.list(&lp).await.unwrap().items.is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_unknown_image_leaves_the_pod_waiting_in_err_image_pull() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    make_secret(&ns).await;
    let _ = env.executor();
    let jobs: Api<Job> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job("nope", "local.test/missing:v1", json!({})),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = ns.api();
    let reason = eventually("the pod to report ErrImagePull", 60, || async {
        let lp = ListParams::default().labels("batch.kubernetes.io/job-name=nope");
        let pod = pods.list(&lp).await.unwrap().items.into_iter().next()?;
        let cs = pod.status?.container_statuses?.into_iter().next()?;
        cs.state?.waiting?.reason
    })
    .await;
    assert_eq!(reason, "ErrImagePull");
}
