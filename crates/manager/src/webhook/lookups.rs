//! The facts some rules need from the API, read uncached at admission time:
//! Machines pointing at a TerraformMachine, the users of an identity, and
//! whether the requester may read an identity's Secret.

use std::collections::BTreeMap;

use captf_api::admission::{self, MachineReference, Operation, Verdict};
use captf_api::identity::TerraformClusterIdentity;
use captf_api::names::{annotations, kinds, labels};
use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Client, ResourceExt};

use super::review::{Incoming, decode_object, request};

const CAPI_GROUP: &str = "cluster.x-k8s.io";
const CAPI_VERSION: &str = "v1beta2";

fn capi(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(CAPI_GROUP, CAPI_VERSION, kind),
        plural,
    )
}

/// Adds the verdicts of the rules that need lookups to `verdict`.
/// `Err` is a failed read: the request is answered with an internal error.
pub async fn extend(
    client: &Client,
    kind: &str,
    input: &Incoming,
    manager_username: Option<&str>,
    mut verdict: Verdict,
) -> Result<Verdict, String> {
    let more = match (kind, input.operation) {
        (kinds::TERRAFORM_MACHINE, Operation::Delete) => machine_delete(client, input).await?,
        (kinds::TERRAFORM_CLUSTER_IDENTITY, Operation::Delete) => {
            identity_delete(client, input).await?
        }
        (kinds::TERRAFORM_CLUSTER_IDENTITY, _) => {
            identity_access(client, input, manager_username).await?
        }
        _ => Verdict::default(),
    };
    verdict.violations.extend(more.violations);
    verdict.warnings.extend(more.warnings);
    Ok(verdict)
}

fn read_error(what: &str, e: kube::Error) -> String {
    format!("reading {what}: {e}")
}

fn machine_reference(machine: &DynamicObject) -> Option<MachineReference> {
    let r = machine.data.pointer("/spec/infrastructureRef")?;
    let text = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    // v1beta2 names the group; v1beta1 an apiVersion.
    let group = match r.get("apiGroup").and_then(|v| v.as_str()) {
        Some(g) => g.to_string(),
        None => text("apiVersion")
            .split('/')
            .next()
            .unwrap_or("")
            .to_string(),
    };
    Some(MachineReference {
        machine: machine.name_any(),
        deleting: machine.metadata.deletion_timestamp.is_some(),
        group,
        kind: text("kind"),
        name: text("name"),
    })
}

async fn machine_delete(client: &Client, input: &Incoming) -> Result<Verdict, String> {
    let Some(stored) = input.subject() else {
        return Ok(Verdict::default());
    };
    let machine: TerraformMachine = decode_object(stored)?;
    let ns = input.namespace.clone().unwrap_or_default();
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &capi("Machine", "machines"));
    let refs: Vec<MachineReference> = machines
        .list(&ListParams::default())
        .await
        .map_err(|e| read_error("Machines", e))?
        .items
        .iter()
        .filter_map(machine_reference)
        .collect();
    let moving = machine
        .annotations()
        .contains_key(annotations::DELETE_FOR_MOVE);
    let cluster_paused = match machine.labels().get(labels::CLUSTER_NAME) {
        Some(cluster) if moving => {
            let clusters: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &capi("Cluster", "clusters"));
            clusters
                .get_opt(cluster)
                .await
                .map_err(|e| read_error("the Cluster", e))?
                .map(|c| {
                    c.data
                        .pointer("/spec/paused")
                        .and_then(|p| p.as_bool())
                        .unwrap_or(false)
                })
        }
        _ => None,
    };
    Ok(admission::terraform_machine_delete(
        &machine,
        &refs,
        cluster_paused,
    ))
}

async fn identity_access(
    client: &Client,
    input: &Incoming,
    manager_username: Option<&str>,
) -> Result<Verdict, String> {
    let req = request(input, manager_username);
    let Some(object) = input.object.as_ref() else {
        return Ok(Verdict::default());
    };
    let new: TerraformClusterIdentity = decode_object(object)?;
    let old: Option<TerraformClusterIdentity> = match input.operation {
        Operation::Update => input.old_object.as_ref().map(decode_object).transpose()?,
        _ => None,
    };
    if !admission::identity_access_review_due(&req, &new, old.as_ref()) {
        return Ok(Verdict::default());
    }
    let Some(secret) = &new.spec.secret_ref else {
        return Ok(Verdict::default());
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(input.user.username.clone()),
            uid: input.user.uid.clone(),
            groups: input.user.groups.clone(),
            extra: input.user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("get".into()),
                resource: Some("secrets".into()),
                namespace: Some(secret.namespace.clone()),
                name: Some(secret.name.clone()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| read_error("a SubjectAccessReview", e))?;
    if answer.status.is_some_and(|s| s.allowed) {
        Ok(Verdict::default())
    } else {
        Ok(admission::identity_access_denied(
            &input.user.username,
            &new,
        ))
    }
}

/// Every object resolving to the identity, as `Kind namespace/name`.
async fn identity_delete(client: &Client, input: &Incoming) -> Result<Verdict, String> {
    let Some(stored) = input.subject() else {
        return Ok(Verdict::default());
    };
    let identity: TerraformClusterIdentity = decode_object(stored)?;
    let name = identity.name_any();
    let lp = ListParams::default();
    let clusters = Api::<TerraformCluster>::all(client.clone())
        .list(&lp)
        .await
        .map_err(|e| read_error("TerraformClusters", e))?
        .items;
    // Children fall back to the TerraformCluster of their cluster-name
    // label, used only when exactly one matches.
    let mut by_cluster: BTreeMap<(String, String), Vec<&TerraformCluster>> = BTreeMap::new();
    for c in &clusters {
        if let Some(cluster) = c.labels().get(labels::CLUSTER_NAME) {
            by_cluster
                .entry((c.namespace().unwrap_or_default(), cluster.clone()))
                .or_default()
                .push(c);
        }
    }
    let cluster_of = |ns: Option<String>, labels_: &BTreeMap<String, String>| {
        let key = (
            ns.unwrap_or_default(),
            labels_.get(labels::CLUSTER_NAME)?.clone(),
        );
        match by_cluster.get(&key).map(Vec::as_slice) {
            Some([one]) => Some(&one.spec),
            _ => None,
        }
    };
    let uses = |r: Option<captf_api::common::IdentityReference>| {
        r.is_some_and(|r| r.name == name && r.kind != Some(captf_api::common::IdentityKind::Secret))
    };

    let mut users = Vec::new();
    for c in &clusters {
        if uses(c.spec.workspace.identity_ref.clone()) {
            users.push(format!(
                "{} {}/{}",
                kinds::TERRAFORM_CLUSTER,
                c.namespace().unwrap_or_default(),
                c.name_any()
            ));
        }
    }
    for m in Api::<TerraformMachine>::all(client.clone())
        .list(&lp)
        .await
        .map_err(|e| read_error("TerraformMachines", e))?
        .items
    {
        let cluster = cluster_of(m.namespace(), m.labels());
        if uses(captf_api::effective::identity(
            m.spec.workspace.identity_ref.as_ref(),
            cluster,
        )) {
            users.push(format!(
                "{} {}/{}",
                kinds::TERRAFORM_MACHINE,
                m.namespace().unwrap_or_default(),
                m.name_any()
            ));
        }
    }
    for p in Api::<TerraformMachinePool>::all(client.clone())
        .list(&lp)
        .await
        .map_err(|e| read_error("TerraformMachinePools", e))?
        .items
    {
        let cluster = cluster_of(p.namespace(), p.labels());
        if uses(captf_api::effective::identity(
            p.spec.workspace.identity_ref.as_ref(),
            cluster,
        )) {
            users.push(format!(
                "{} {}/{}",
                kinds::TERRAFORM_MACHINE_POOL,
                p.namespace().unwrap_or_default(),
                p.name_any()
            ));
        }
    }
    Ok(admission::terraform_cluster_identity_delete(
        &identity, &users,
    ))
}
