//! Moving a management cluster from the reference implementation to this
//! one: a TerraformCluster with variables (one of them sensitive, from a
//! `variablesFrom` Secret) whose state and inputs records were written as
//! the reference writes them is adopted without a re-apply.
//!
//! The object, its Cluster and its variables Secret are those of the
//! reference vector `cluster/vars_sensitive`
//! (`crates/contract/tests/golden/reference/vectors.json`), in its
//! namespace `team-a`. The state is made as the reference's runner makes
//! it: OpenTofu's `kubernetes` backend applying the vector's own rendered
//! `main.tf.json` and `terraform.tfvars.json`, the reference's bytes, on
//! the noop cluster module. The reference's controller then annotates the
//! base state Secret with the vector's inputs hash and keeps both files in
//! the attempt and applied records. The manager starts only after all of
//! that exists.
//!
//! The namespace also holds the shared `captf-runner` account the
//! reference made; the apply that follows a changed variable runs under the
//! object's own runner identity instead, over the reference's state.
//!
//! Cost: beside the pass's usual reads, one list of Jobs per check.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use captf_api::TerraformCluster;
use captf_api::names::{annotations, labels};
use captf_manager::capi;
use captf_manager::names::{WorkloadKind, state_secret, state_suffix};
use captf_manager::records::{applied_record_name, attempt_record_name, record_labels};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const VECTOR: &str = "cluster/vars_sensitive";
/// The reference's image of the vector; the real node holds the noop
/// cluster module under it.
const IMAGE: &str = "ghcr.io/example/machine-module:v1.2.3";
/// The module's declarations of the vector's two user variables.
const VECTOR_VARIABLES: &str = r#"
variable "db_password" {
  type      = string
  sensitive = true
}

variable "instance_type" {
  type = string
}
"#;
/// The Job name the reference's records name.
const REFERENCE_JOB: &str = "captf-prod-apply-reference";

/// The vector's expected hash and rendered files, and its Kubernetes
/// objects (the TerraformCluster first).
struct Vector {
    inputs_hash: String,
    main_tf_json: String,
    terraform_tfvars_json: String,
    objects: Vec<Value>,
}

fn vector() -> Vector {
    let path = support::workspace().join("crates/contract/tests/golden/reference/vectors.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = all["inputs_vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == VECTOR)
        .expect("the vector is in the file")
        .clone();
    assert_eq!(v["image"], IMAGE);
    Vector {
        inputs_hash: v["inputs_hash"].as_str().unwrap().to_owned(),
        main_tf_json: v["main_tf_json"].as_str().unwrap().to_owned(),
        terraform_tfvars_json: v["terraform_tfvars_json"].as_str().unwrap().to_owned(),
        objects: v["kubernetes_objects"].as_array().unwrap().clone(),
    }
}

/// The Cluster the vector's contract inputs come from: endpoint, topology
/// version and pod network, control plane not initialized; returns its uid.
/// Its class does not exist, so Cluster API's topology controller changes
/// nothing, and its webhook refuses the Cluster controller's own writes
/// (the finalizer, then the owner reference on the TerraformCluster), which
/// the test therefore makes itself.
async fn create_cluster(ns: &TestNamespace) -> String {
    let cluster_api = TestEnv::get().await.cluster_api().await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource());
    let cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod"},
        "spec": {
            "controlPlaneEndpoint": {"host": "api.prod.example.com", "port": 6443},
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
            "topology": {"classRef": {"name": "reference-class"}, "version": "v1.36.2"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                  "kind": "TerraformCluster", "name": "prod"},
        },
    }))
    .unwrap();
    let cluster = clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let uid = cluster.metadata.uid.unwrap();
    ns.api::<Secret>()
        .create(
            &PostParams::default(),
            &cluster_api.kubeconfig_secret("prod", &uid),
        )
        .await
        .unwrap();
    uid
}

/// The vector's TerraformCluster (drift checks off, so the only Job a pass
/// could start is an apply) and its variables Secret. The identity, which
/// no hash covers and the admission requires, is a Secret of its own. The
/// object is owned by the Cluster `cluster_uid`, as Cluster API owns it.
async fn create_vector_objects(
    ns: &TestNamespace,
    v: &Vector,
    cluster_uid: &str,
) -> TerraformCluster {
    let mut tc = v.objects[0].clone();
    assert_eq!(tc["kind"], "TerraformCluster");
    tc["metadata"]["namespace"] = json!(null);
    tc["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod",
        "uid": cluster_uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    tc["spec"]["drift"] = json!({"intervalSeconds": 0});
    tc["spec"]["identityRef"] = json!({"kind": "Secret", "name": "prod-creds"});
    let creds: Secret = serde_json::from_value(json!({
        "metadata": {"name": "prod-creds"}, "stringData": {"token": "x"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await
        .unwrap();
    let tc: TerraformCluster = serde_json::from_value(tc).unwrap();
    for o in &v.objects[1..] {
        assert_eq!(o["kind"], "Secret");
        let s: Secret = serde_json::from_value(o.clone()).unwrap();
        ns.api::<Secret>()
            .create(&PostParams::default(), &s)
            .await
            .unwrap();
    }
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap()
}

/// Applies the vector's rendered files with OpenTofu's `kubernetes`
/// backend into the object's state Secret, as the reference's runner does.
fn apply_as_the_reference(env: &TestEnv, root: &Path, v: &Vector, suffix: &str) {
    let module = root.join("module");
    copy_dir(&workspace().join("modules/noop/cluster"), &module);
    std::fs::write(module.join("vector_variables.tf"), VECTOR_VARIABLES).unwrap();
    // The rendered root names its module `../../module`.
    let work = root.join("work/root");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("main.tf.json"), &v.main_tf_json).unwrap();
    std::fs::write(work.join("terraform.tfvars.json"), &v.terraform_tfvars_json).unwrap();
    let kubeconfig = env.kubeconfig().expect("a local control plane");
    std::fs::write(
        work.join("backend.tfbackend"),
        format!(
            "secret_suffix = \"{suffix}\"\nnamespace = \"team-a\"\nconfig_path = \"{}\"\n\
             labels = {{\"{}\" = \"true\", \"{}\" = \"prod\"}}\n",
            kubeconfig.display(),
            labels::MANAGED,
            labels::CLUSTER_NAME,
        ),
    )
    .unwrap();
    let tofu = captf_testenv::assets::tofu().expect("the OpenTofu test asset");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&tofu)
            .args(args)
            .current_dir(&work)
            .env("TF_IN_AUTOMATION", "1")
            .env("HOME", root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tofu {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "init",
        "-input=false",
        "-no-color",
        "-backend-config=backend.tfbackend",
    ]);
    run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
}

/// The reference controller's bookkeeping after that apply: the inputs
/// hash on the base state Secret, the attempt and applied records.
async fn record_as_the_reference(
    ns: &TestNamespace,
    tc: &TerraformCluster,
    v: &Vector,
    digest: &str,
) {
    let secrets = ns.api::<Secret>();
    let suffix = state_suffix(WorkloadKind::Cluster, ns.name(), "prod");
    secrets
        .patch(
            &state_secret(&suffix),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                annotations::INPUTS_HASH: v.inputs_hash,
            }}})),
        )
        .await
        .unwrap();
    let owner = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "name": "prod", "uid": tc.metadata.uid, "controller": true,
    });
    let files = BTreeMap::from([
        (
            "main.tf.json".to_owned(),
            ByteString(v.main_tf_json.clone().into_bytes()),
        ),
        (
            "terraform.tfvars.json".to_owned(),
            ByteString(v.terraform_tfvars_json.clone().into_bytes()),
        ),
    ]);
    let mut common = BTreeMap::from([
        (annotations::IMAGE.to_owned(), IMAGE.to_owned()),
        (annotations::INPUTS_HASH.to_owned(), v.inputs_hash.clone()),
        (annotations::JOB.to_owned(), REFERENCE_JOB.to_owned()),
    ]);
    let mut labels = record_labels(WorkloadKind::Cluster, "prod");
    labels.insert(
        captf_api::names::labels::CLUSTER_NAME.to_owned(),
        "prod".to_owned(),
    );
    let record = |name: String, annotations: BTreeMap<String, String>| -> Secret {
        let mut s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [owner.clone()]},
        }))
        .unwrap();
        s.metadata.labels = Some(labels.clone());
        s.metadata.annotations = Some(annotations);
        s.data = Some(files.clone());
        s
    };
    let mut attempt = common.clone();
    attempt.insert(annotations::APPLIED.to_owned(), "true".to_owned());
    secrets
        .create(
            &PostParams::default(),
            &record(attempt_record_name(WorkloadKind::Cluster, "prod"), attempt),
        )
        .await
        .unwrap();
    common.insert(annotations::IMAGE_DIGEST.to_owned(), digest.to_owned());
    secrets
        .create(
            &PostParams::default(),
            &record(applied_record_name(WorkloadKind::Cluster, "prod"), common),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_and_records_written_by_the_reference_are_adopted_without_a_re_apply() {
    let env = TestEnv::get().await;
    let ns = env.namespace_named("team-a").await;
    let tmp = tempfile::tempdir().unwrap();
    let v = vector();
    insert_manager(env, ns.name()).await;
    let module = module_image(
        tmp.path(),
        "cluster",
        "reference",
        &[("vector_variables.tf", VECTOR_VARIABLES)],
    );
    let digest = insert_module(env, IMAGE, module).await;
    install_runner_role(&ns.client()).await;
    // The shared runner account the reference (and earlier releases) made
    // in each namespace, bound to the namespace-wide role.
    namespace_wide_runner(&ns, "captf-runner").await;

    let cluster_uid = create_cluster(&ns).await;
    let tc = create_vector_objects(&ns, &v, &cluster_uid).await;
    let suffix = state_suffix(WorkloadKind::Cluster, ns.name(), "prod");
    apply_as_the_reference(env, &tmp.path().join("reference"), &v, &suffix);
    record_as_the_reference(&ns, &tc, &v, &digest).await;

    let manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    eventually("the adopted cluster Ready", 120, || async {
        let tc = tcs.get("prod").await.ok()?;
        support::clusters::is_ready(&tc).then_some(())
    })
    .await;
    // Ready came from the adopted state: no apply ran (nor starts in a
    // pass woken now), the state and the applied record are still the
    // reference's.
    support::touch::touch_cluster_state(&ns, &manager, "prod").await;

    assert_eq!(apply_job_names(&ns).await, Vec::<String>::new());
    let secrets = ns.api::<Secret>();
    let state = secrets.get(&state_secret(&suffix)).await.unwrap();
    assert_eq!(
        state.metadata.annotations.as_ref().unwrap()[annotations::INPUTS_HASH],
        v.inputs_hash
    );
    let applied = secrets
        .get(&applied_record_name(WorkloadKind::Cluster, "prod"))
        .await
        .unwrap();
    assert_eq!(
        applied.metadata.annotations.as_ref().unwrap()[annotations::JOB],
        REFERENCE_JOB
    );

    // The same manager does apply when the inputs do change, so the quiet
    // above is the hashes agreeing, not a pass that never looks.
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"instance_type": "t3.xlarge"}}})),
    )
    .await
    .unwrap();
    eventually("an apply for the changed variable", 60, || async {
        (!apply_job_names(&ns).await.is_empty()).then_some(())
    })
    .await;
    // It runs under the object's own identity, not the shared account, and
    // applies over the reference's state with it.
    let jobs = ns.api::<Job>().list(&ListParams::default()).await.unwrap();
    let accounts: Vec<String> = jobs
        .items
        .iter()
        .filter(|j| job_op(j) == "apply")
        .filter_map(|j| {
            j.spec
                .as_ref()?
                .template
                .spec
                .as_ref()?
                .service_account_name
                .clone()
        })
        .collect();
    assert_eq!(accounts, vec![format!("captf-runner-{suffix}")]);
    eventually("the changed variable applied", 120, || async {
        let tc = tcs.get("prod").await.ok()?;
        let applied = tc.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
            c.type_ == "ApplyJobSucceeded"
                && c.status == "True"
                && c.observed_generation == tc.metadata.generation
        });
        (applied && support::clusters::is_ready(&tc)).then_some(())
    })
    .await;
}
