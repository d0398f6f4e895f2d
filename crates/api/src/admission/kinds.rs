//! The rules of each kind, as one pure function per kind taking the request,
//! the new object and (on update) the stored one.

use kube::ResourceExt;

use super::{Operation, Request, Verdict, ViolationKind, Violations, image, jobs, meta, variables};
use crate::cluster::TerraformClusterSpec;
use crate::common::{TemplateMeta, WorkspaceSpec};
use crate::identity::TerraformClusterIdentity;
use crate::machine::TerraformMachineSpec;
use crate::machinepool::TerraformMachinePoolSpec;
use crate::names::labels;
use crate::plan::{PlanPhase, TerraformPlan};
use crate::{
    TerraformCluster, TerraformClusterTemplate, TerraformMachine, TerraformMachinePool,
    TerraformMachinePoolTemplate, TerraformMachineTemplate,
};
use captf_contract::Role;

/// Whether Job policy rules apply: on create, and on update only when the
/// policy changed; never on an object being deleted, so a stored policy
/// cannot block the removal of a finalizer.
fn policy_due<T: PartialEq>(
    req: &Request,
    deleting: bool,
    new: &Option<T>,
    old: Option<&Option<T>>,
) -> bool {
    !deleting
        && new.is_some()
        && match req.operation {
            Operation::Create => true,
            Operation::Update => old != Some(new),
            Operation::Delete => false,
        }
}

/// Rules shared by every spec embedding the workspace fields.
fn workspace(
    v: &mut Violations,
    req: &Request,
    field: &str,
    new: &WorkspaceSpec,
    old: Option<&WorkspaceSpec>,
    deleting: bool,
    role: Role,
) {
    image::check(v, &format!("{field}.source.image"), &new.source.image);
    if policy_due(req, deleting, &new.jobs, old.map(|o| &o.jobs))
        && let Some(policy) = &new.jobs
    {
        jobs::check(v, &format!("{field}.jobs"), policy);
    }
    variables::check(
        v,
        &format!("{field}.variables"),
        new.variables.as_ref(),
        role,
    );
    variables::check_sources(
        v,
        &format!("{field}.variablesFrom"),
        new.variables_from.as_deref(),
    );
    if let Some(identity) = &new.identity_ref
        && identity.name.is_empty()
    {
        v.push(
            format!("{field}.identityRef.name"),
            ViolationKind::Required,
            "must be set",
        );
    }
}

fn cluster_spec(
    v: &mut Violations,
    req: &Request,
    field: &str,
    new: &TerraformClusterSpec,
    old: Option<&TerraformClusterSpec>,
    deleting: bool,
) {
    workspace(
        v,
        req,
        field,
        &new.workspace,
        old.map(|o| &o.workspace),
        deleting,
        Role::Cluster,
    );
    let new_defaults_jobs = new.defaults.as_ref().and_then(|d| d.jobs.clone());
    let old_defaults_jobs = old.map(|o| o.defaults.as_ref().and_then(|d| d.jobs.clone()));
    if policy_due(
        req,
        deleting,
        &new_defaults_jobs,
        old_defaults_jobs.as_ref(),
    ) && let Some(policy) = &new_defaults_jobs
    {
        jobs::check(v, &format!("{field}.defaults.jobs"), policy);
    }
    if let Some(endpoint) = &new.control_plane_endpoint
        && endpoint.host.is_some() != endpoint.port.is_some()
    {
        v.push(
            format!("{field}.controlPlaneEndpoint"),
            ViolationKind::Invalid,
            "host and port must be set together",
        );
    }
}

fn deleting<K: kube::Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

/// `validation.terraformcluster…`
pub fn terraform_cluster(
    req: &Request,
    new: &TerraformCluster,
    old: Option<&TerraformCluster>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    cluster_spec(
        &mut v,
        req,
        "spec",
        &new.spec,
        old.map(|o| &o.spec),
        deleting(new),
    );
    if new
        .spec
        .workspace
        .identity_ref
        .as_ref()
        .is_none_or(|i| i.name.is_empty())
    {
        v.push(
            "spec.identityRef",
            ViolationKind::Required,
            "a TerraformCluster needs its own identity; spec.defaults.identityRef applies only to machines and pools",
        );
    }
    if let Some(old) = old {
        let was = old.spec.control_plane_endpoint.as_ref();
        if was.is_some_and(|e| e.is_complete()) && new.spec.control_plane_endpoint.as_ref() != was {
            v.push(
                "spec.controlPlaneEndpoint",
                ViolationKind::Forbidden,
                "is immutable once host and port are set",
            );
        }
    }
    v.into_verdict(vec![])
}

fn template_meta(v: &mut Violations, field: &str, meta: Option<&TemplateMeta>) {
    if let Some(meta) = meta {
        meta::check_labels(v, &format!("{field}.labels"), meta.labels.as_ref());
        meta::check_annotations(
            v,
            &format!("{field}.annotations"),
            meta.annotations.as_ref(),
        );
    }
}

fn template_immutable<S: PartialEq>(
    v: &mut Violations,
    req: &Request,
    new: &S,
    old: Option<&S>,
    kind: &str,
) {
    if let Some(old) = old
        && !req.topology_dry_run
        && old != new
    {
        v.push(
            "spec.template.spec",
            ViolationKind::Forbidden,
            format!("{kind} spec.template.spec is immutable; create a new {kind} instead"),
        );
    }
}

/// `validation.terraformclustertemplate…`
pub fn terraform_cluster_template(
    req: &Request,
    new: &TerraformClusterTemplate,
    old: Option<&TerraformClusterTemplate>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    let spec = &new.spec.template.spec;
    let old_spec = old.map(|o| &o.spec.template.spec);
    template_meta(
        &mut v,
        "spec.template.metadata",
        new.spec.template.metadata.as_ref(),
    );
    cluster_spec(
        &mut v,
        req,
        "spec.template.spec",
        spec,
        old_spec,
        deleting(new),
    );
    template_immutable(&mut v, req, spec, old_spec, "TerraformClusterTemplate");
    let mut warnings = vec![];
    if spec.workspace.identity_ref.is_none() {
        warnings.push(
            "spec.template.spec.identityRef is unset: clusters created from this template are refused unless a ClusterClass patch sets it".to_string(),
        );
    }
    v.into_verdict(warnings)
}

fn machine_spec(
    v: &mut Violations,
    req: &Request,
    field: &str,
    new: &TerraformMachineSpec,
    old: Option<&TerraformMachineSpec>,
    deleting: bool,
) {
    workspace(
        v,
        req,
        field,
        &new.workspace,
        old.map(|o| &o.workspace),
        deleting,
        Role::Machine,
    );
}

/// `validation.terraformmachine…` (create and update)
pub fn terraform_machine(
    req: &Request,
    new: &TerraformMachine,
    old: Option<&TerraformMachine>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    // Label and annotation syncs, and the move annotation before a delete,
    // must always pass.
    if old.is_some_and(|o| o.spec == new.spec) {
        return v.into_verdict(vec![]);
    }
    machine_spec(
        &mut v,
        req,
        "spec",
        &new.spec,
        old.map(|o| &o.spec),
        deleting(new),
    );
    if let Some(old) = old {
        let (n, o) = (&new.spec.workspace, &old.spec.workspace);
        let immutable = |v: &mut Violations, field: &str, changed: bool| {
            if changed {
                v.push(
                    field,
                    ViolationKind::Forbidden,
                    format!("TerraformMachine {field} is immutable; create a new TerraformMachine instead"),
                );
            }
        };
        immutable(&mut v, "spec.source", n.source != o.source);
        immutable(&mut v, "spec.identityRef", n.identity_ref != o.identity_ref);
        immutable(&mut v, "spec.variables", n.variables != o.variables);
        immutable(
            &mut v,
            "spec.variablesFrom",
            n.variables_from != o.variables_from,
        );

        let was = old.spec.provider_id.as_deref().unwrap_or("");
        let now = new.spec.provider_id.as_deref().unwrap_or("");
        if !was.is_empty() && was != now {
            v.push(
                "spec.providerID",
                ViolationKind::Forbidden,
                "can only be set once, from empty to non-empty",
            );
        } else if was.is_empty() && !now.is_empty() && !req.by_manager() {
            v.push(
                "spec.providerID",
                ViolationKind::Forbidden,
                "only the CAPTF manager may set it",
            );
        }
    }
    v.into_verdict(vec![])
}

/// `validation.terraformmachinetemplate…`
pub fn terraform_machine_template(
    req: &Request,
    new: &TerraformMachineTemplate,
    old: Option<&TerraformMachineTemplate>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    let spec = &new.spec.template.spec;
    let old_spec = old.map(|o| &o.spec.template.spec);
    template_meta(
        &mut v,
        "spec.template.metadata",
        new.spec.template.metadata.as_ref(),
    );
    machine_spec(
        &mut v,
        req,
        "spec.template.spec",
        spec,
        old_spec,
        deleting(new),
    );
    if spec.provider_id.as_deref().is_some_and(|p| !p.is_empty()) {
        v.push(
            "spec.template.spec.providerID",
            ViolationKind::Forbidden,
            "must be empty: the controller sets it on each machine",
        );
    }
    template_immutable(&mut v, req, spec, old_spec, "TerraformMachineTemplate");
    v.into_verdict(vec![])
}

fn pool_spec(
    v: &mut Violations,
    req: &Request,
    field: &str,
    new: &TerraformMachinePoolSpec,
    old: Option<&TerraformMachinePoolSpec>,
    deleting: bool,
) {
    workspace(
        v,
        req,
        field,
        &new.workspace,
        old.map(|o| &o.workspace),
        deleting,
        Role::MachinePool,
    );
    if new.drift.as_ref().and_then(|d| d.interval_seconds) == Some(0) {
        v.push(
            format!("{field}.drift.intervalSeconds"),
            ViolationKind::Invalid,
            "must be at least 1: a pool's drift checks cannot be turned off",
        );
    }
}

/// `validation.terraformmachinepool…`
pub fn terraform_machine_pool(
    req: &Request,
    new: &TerraformMachinePool,
    old: Option<&TerraformMachinePool>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    pool_spec(
        &mut v,
        req,
        "spec",
        &new.spec,
        old.map(|o| &o.spec),
        deleting(new),
    );
    v.into_verdict(vec![])
}

/// `validation.terraformmachinepooltemplate…`
pub fn terraform_machine_pool_template(
    req: &Request,
    new: &TerraformMachinePoolTemplate,
    old: Option<&TerraformMachinePoolTemplate>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    let spec = &new.spec.template.spec;
    let old_spec = old.map(|o| &o.spec.template.spec);
    template_meta(
        &mut v,
        "spec.template.metadata",
        new.spec.template.metadata.as_ref(),
    );
    pool_spec(
        &mut v,
        req,
        "spec.template.spec",
        spec,
        old_spec,
        deleting(new),
    );
    template_immutable(&mut v, req, spec, old_spec, "TerraformMachinePoolTemplate");
    v.into_verdict(vec![])
}

/// `validation.terraformclusteridentity…` for create and update. The
/// access review and the delete checks need the API and live with the
/// webhook server.
pub fn terraform_cluster_identity(
    req: &Request,
    new: &TerraformClusterIdentity,
    _old: Option<&TerraformClusterIdentity>,
) -> Verdict {
    let mut v = Violations::default();
    if req.operation == Operation::Delete {
        return v.into_verdict(vec![]);
    }
    let spec = &new.spec;
    match &spec.secret_ref {
        None if spec.type_.is_none()
            || spec.type_ == Some(crate::identity::IdentityType::Secret) =>
        {
            v.push(
                "spec.secretRef",
                ViolationKind::Required,
                "must be set when type is Secret",
            )
        }
        None => {}
        Some(secret) => {
            if secret.name.is_empty() {
                v.push(
                    "spec.secretRef.name",
                    ViolationKind::Required,
                    "must be set",
                );
            }
            if secret.namespace.is_empty() {
                v.push(
                    "spec.secretRef.namespace",
                    ViolationKind::Required,
                    "must be set",
                );
            }
        }
    }
    if let Some(allowed) = &spec.allowed_namespaces {
        if allowed.list.is_none() && allowed.selector.is_none() {
            v.push(
                "spec.allowedNamespaces",
                ViolationKind::Invalid,
                "{} is ambiguous: set list, or write selector: {} to allow every namespace",
            );
        }
        for (i, ns) in allowed.list.iter().flatten().enumerate() {
            if !meta::is_dns_label(ns) {
                v.push(
                    format!("spec.allowedNamespaces.list[{i}]"),
                    ViolationKind::Invalid,
                    "must be a namespace name (DNS label)",
                );
            }
        }
        if let Some(selector) = &allowed.selector {
            meta::check_selector(&mut v, "spec.allowedNamespaces.selector", selector);
        }
    }
    v.into_verdict(vec![])
}

fn plan_phase_label(plan: &TerraformPlan) -> Option<&str> {
    plan.labels().get(labels::PLAN_PHASE).map(String::as_str)
}

fn approved(plan: &TerraformPlan) -> bool {
    plan.spec.approved == Some(true)
}

/// `validation.terraformplan…`
pub fn terraform_plan(req: &Request, new: &TerraformPlan, old: Option<&TerraformPlan>) -> Verdict {
    let mut v = Violations::default();
    let manager = req.by_manager();
    let approved_by = new.spec.approved_by.as_deref().unwrap_or("");
    match (req.operation, old) {
        (Operation::Delete, _) => {}
        (Operation::Create, _) | (Operation::Update, None) => {
            let phase = plan_phase_label(new);
            let terminal = phase
                .and_then(PlanPhase::parse)
                .is_some_and(PlanPhase::is_terminal);
            if approved(new) {
                if approved_by.is_empty() {
                    v.push(
                        "spec.approvedBy",
                        ViolationKind::Required,
                        "must be set when approved is true",
                    );
                } else if !manager && !terminal && approved_by != req.username {
                    v.push(
                        "spec.approvedBy",
                        ViolationKind::Forbidden,
                        "must be the username of the user creating the approved plan",
                    );
                }
            } else if !approved_by.is_empty() {
                v.push(
                    "spec.approvedBy",
                    ViolationKind::Forbidden,
                    "may be set only when approved is true",
                );
            }
            if !manager {
                let allowed = match phase.map(PlanPhase::parse) {
                    None => true,
                    Some(Some(PlanPhase::Pending)) => true,
                    Some(Some(PlanPhase::Approved)) => approved(new),
                    // Finished plans are recreated by clusterctl move.
                    Some(Some(p)) => p.is_terminal(),
                    Some(None) => false,
                };
                if !allowed {
                    v.push(
                        format!("metadata.labels[{}]", labels::PLAN_PHASE),
                        ViolationKind::Forbidden,
                        "may be Pending, Approved on an approved plan, or a finished phase",
                    );
                }
            }
        }
        (Operation::Update, Some(old)) => {
            let (n, o) = (&new.spec, &old.spec);
            for (field, changed) in [
                ("spec.targetRef", n.target_ref != o.target_ref),
                ("spec.planHash", n.plan_hash != o.plan_hash),
                ("spec.inputsHash", n.inputs_hash != o.inputs_hash),
                ("spec.reason", n.reason != o.reason),
                ("spec.summary", n.summary != o.summary),
            ] {
                if changed {
                    v.push(field, ViolationKind::Forbidden, "is immutable");
                }
            }
            if approved(old) {
                if !approved(new) || n.approved_by != o.approved_by {
                    v.push(
                        "spec.approved",
                        ViolationKind::Forbidden,
                        "an approval can be neither withdrawn nor changed",
                    );
                }
            } else if approved(new) {
                let stored_phase = plan_phase_label(old).and_then(PlanPhase::parse);
                if stored_phase.is_some_and(PlanPhase::is_terminal) {
                    v.push(
                        "spec.approved",
                        ViolationKind::Forbidden,
                        "the plan is finished and can no longer be approved",
                    );
                }
                if approved_by.is_empty() {
                    v.push(
                        "spec.approvedBy",
                        ViolationKind::Required,
                        "must be set when approved is true",
                    );
                } else if approved_by != req.username {
                    v.push(
                        "spec.approvedBy",
                        ViolationKind::Forbidden,
                        "must be your own username",
                    );
                }
            } else if !approved_by.is_empty() {
                v.push(
                    "spec.approvedBy",
                    ViolationKind::Forbidden,
                    "may be set only when approved is true",
                );
            }
            if !manager && plan_phase_label(new) != plan_phase_label(old) {
                v.push(
                    format!("metadata.labels[{}]", labels::PLAN_PHASE),
                    ViolationKind::Forbidden,
                    "only the CAPTF manager may change it",
                );
            }
        }
    }
    v.into_verdict(vec![])
}
