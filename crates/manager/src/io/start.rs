//! Creating a Job and its per-run Secret, safe to repeat after a crash: an
//! existing Job of the same name is adopted only when this object controls
//! it and it still runs; the per-run Secret belongs to the Job and is
//! recreated when a namesake belongs to something else.

use std::collections::BTreeMap;

use captf_api::names::labels;
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};

use crate::jobs::observe::job_finished;
use crate::records::run_secret_name;

/// How a start went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Created now; `uid` is the new Job's.
    Created { uid: String },
    /// Our own running Job of that name already existed (a retry after a
    /// crash): it is the Job of this start.
    Adopted { uid: String },
    /// A Job of that name exists that is not ours to adopt; it was deleted
    /// when it had finished and belonged to another object. Start again on
    /// a later pass.
    Deferred { reason: String },
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Deletes the object `name` only while it is the one of `uid`: one gone
/// or replaced meanwhile is left as it is.
async fn delete_exactly<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<String>,
    params: DeleteParams,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..params
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `job` (controlled by the object with `owner_uid`), or adopts it.
pub async fn create_job(
    client: &kube::Client,
    job: &Job,
    owner_uid: &str,
) -> Result<Started, kube::Error> {
    let namespace = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
    match jobs.create(&PostParams::default(), job).await {
        Ok(created) => {
            return Ok(Started::Created {
                uid: created.metadata.uid.unwrap_or_default(),
            });
        }
        Err(e) if already_exists(&e) => {}
        Err(e) => return Err(e),
    }
    let Some(existing) = jobs.get_opt(&name).await? else {
        return Ok(Started::Deferred {
            reason: format!("Job {name} existed a moment ago and is being deleted"),
        });
    };
    if existing.metadata.deletion_timestamp.is_some() {
        // A Job on its way out (a fallback or a stuck-Job delete) is never
        // the Job of a new start.
        return Ok(Started::Deferred {
            reason: format!("Job {name} is being deleted"),
        });
    }
    let ours = controller_uid(&existing.metadata) == Some(owner_uid);
    match (ours, job_finished(&existing)) {
        (true, false) => Ok(Started::Adopted {
            uid: existing.metadata.uid.clone().unwrap_or_default(),
        }),
        (true, true) => Ok(Started::Deferred {
            reason: format!("Job {name} already ran; bookkeeping counts it first"),
        }),
        (false, false) => Ok(Started::Deferred {
            reason: format!("Job {name} belongs to another object and still runs"),
        }),
        (false, true) => {
            // A finished namesake of an earlier object: remove exactly it.
            let uid = existing.metadata.uid.clone();
            delete_exactly(&jobs, &name, uid, DeleteParams::background()).await?;
            Ok(Started::Deferred {
                reason: format!("Job {name} of an earlier object was deleted"),
            })
        }
    }
}

/// Writes the per-run Secret of the Job `job_name` (whose UID is
/// `job_uid`) with `files`, owned by the Job (so it goes with it). The
/// create comes first: after a fresh Job it is the only request. A namesake
/// owned by the Job is kept as it is (a running Job never sees its inputs
/// change); one owned by anything else (an earlier Job of the same name)
/// is replaced.
pub async fn ensure_run_secret(
    client: &kube::Client,
    namespace: &str,
    job_name: &str,
    job_uid: &str,
    files: &[(&str, &str)],
    annotations: BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = run_secret(namespace, job_name, job_uid, files, annotations);
    let name = run_secret_name(job_name);
    if created(&secrets, &secret).await? {
        return Ok(());
    }
    let Some(existing) = secrets.get_opt(&name).await? else {
        // Deleted between the two requests (its Job went): start over.
        return created(&secrets, &secret).await.map(drop);
    };
    let owned = existing
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|rs| rs.iter().any(|r| r.uid == job_uid));
    if owned {
        return Ok(());
    }
    let uid = existing.metadata.uid.clone();
    delete_exactly(&secrets, &name, uid, DeleteParams::default()).await?;
    created(&secrets, &secret).await.map(drop)
}

/// Creates `secret`: true when this call created it, false when one of its
/// name exists.
async fn created(secrets: &Api<Secret>, secret: &Secret) -> Result<bool, kube::Error> {
    match secrets.create(&PostParams::default(), secret).await {
        Ok(_) => Ok(true),
        Err(e) if already_exists(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The per-run Secret of the Job `job_name`, controlled by it.
fn run_secret(
    namespace: &str,
    job_name: &str,
    job_uid: &str,
    files: &[(&str, &str)],
    annotations: BTreeMap<String, String>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(run_secret_name(job_name)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                labels::MANAGED.to_owned(),
                "true".to_owned(),
            )])),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".to_owned(),
                kind: "Job".to_owned(),
                name: job_name.to_owned(),
                uid: job_uid.to_owned(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        data: Some(
            files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}
