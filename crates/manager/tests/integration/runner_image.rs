//! The runner image of a manager started without `--runner-image`: read
//! from its own pod on the real apiserver (one GET), so an image override
//! of the Deployment reaches the Jobs' runner. A pod that is not there is
//! a clear start-up error.

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;

#[tokio::test(flavor = "current_thread")]
async fn the_runner_image_is_read_from_the_managers_own_pod() {
    let ns = captf_testenv::TestEnv::get().await.namespace().await;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "captf-controller-manager-7d9f-x2" },
        "spec": { "containers": [
            { "name": "kube-rbac-proxy", "image": "mirror.example/proxy:v1" },
            { "name": "manager", "image": "mirror.example/captf/captf-manager:v0.1.0" },
        ] },
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let own = Some((
        ns.name().to_owned(),
        "captf-controller-manager-7d9f-x2".to_owned(),
    ));

    let image = captf_manager::runner_image::resolve(None, own.clone(), &ns.client()).await;
    assert_eq!(
        image.as_deref(),
        Ok("mirror.example/captf/captf-manager:v0.1.0")
    );

    // A flag wins without a read; no pod and no flag is refused by name.
    let flagged =
        captf_manager::runner_image::resolve(Some("reg.example/runner:v2"), own, &ns.client())
            .await;
    assert_eq!(flagged.as_deref(), Ok("reg.example/runner:v2"));
    let missing = Some((ns.name().to_owned(), "gone".to_owned()));
    let err = captf_manager::runner_image::resolve(None, missing, &ns.client())
        .await
        .unwrap_err();
    assert!(
        err.contains("reading the manager's pod") && err.contains("/gone"),
        "{err}"
    );
    let err = captf_manager::runner_image::resolve(None, None, &ns.client())
        .await
        .unwrap_err();
    assert!(err.contains("--runner-image"), "{err}");
}
