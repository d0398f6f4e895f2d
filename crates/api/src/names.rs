//! Well-known names: kinds, labels, annotations, finalizers, condition
//! types and reasons, event reasons and webhook names. Each string is
//! defined here once; everything else refers to it by name.

/// Kind names.
/// Cluster API's own kinds, as CAPTF reads them.
pub mod capi {
    /// Cluster API's core group.
    pub const GROUP: &str = "cluster.x-k8s.io";
    /// The contract version CAPTF implements.
    pub const VERSION: &str = "v1beta2";
    pub const CLUSTER: &str = "Cluster";
    pub const MACHINE: &str = "Machine";
    pub const MACHINE_POOL: &str = "MachinePool";
}

pub mod kinds {
    pub const TERRAFORM_CLUSTER: &str = "TerraformCluster";
    pub const TERRAFORM_CLUSTER_TEMPLATE: &str = "TerraformClusterTemplate";
    pub const TERRAFORM_MACHINE: &str = "TerraformMachine";
    pub const TERRAFORM_MACHINE_TEMPLATE: &str = "TerraformMachineTemplate";
    pub const TERRAFORM_MACHINE_POOL: &str = "TerraformMachinePool";
    pub const TERRAFORM_MACHINE_POOL_TEMPLATE: &str = "TerraformMachinePoolTemplate";
    pub const TERRAFORM_CLUSTER_IDENTITY: &str = "TerraformClusterIdentity";
    pub const TERRAFORM_PLAN: &str = "TerraformPlan";
}

/// Labels CAPTF sets or reads.
pub mod labels {
    /// Owning Cluster API cluster.
    pub const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
    /// Opt-in of a ConfigMap/Secret as a `variablesFrom` source.
    pub const VARIABLES: &str = "captf.io/variables";
    /// Opt-in of a ServiceAccount as a custom runner.
    pub const RUNNER: &str = "captf.io/runner";
    /// Cluster API watch filter.
    pub const WATCH_FILTER: &str = "cluster.x-k8s.io/watch-filter";
    /// Everything CAPTF owns.
    pub const MANAGED: &str = "captf.io/managed";
    pub const OWNER_KIND: &str = "captf.infrastructure.cluster.x-k8s.io/owner-kind";
    pub const OWNER_NAME: &str = "captf.infrastructure.cluster.x-k8s.io/owner-name";
    pub const STATE_BACKUP: &str = "captf.io/state-backup";
    pub const STATE_BACKUP_SUFFIX: &str = "captf.io/state-backup-suffix";
    pub const RETAINED_FROM_UID: &str = "captf.io/retained-from-uid";
    pub const LEASE: &str = "captf.io/lease";
    pub const MIRRORED: &str = "captf.io/mirrored";
    /// Makes `clusterctl move` copy an object.
    pub const CLUSTERCTL_MOVE: &str = "clusterctl.cluster.x-k8s.io/move";
    /// On the identity CRD: move identities with their users.
    pub const CLUSTERCTL_MOVE_HIERARCHY: &str = "clusterctl.cluster.x-k8s.io/move-hierarchy";
    /// Run Job operation and attempt.
    pub const JOB_OP: &str = "captf.infrastructure.cluster.x-k8s.io/op";
    pub const JOB_ATTEMPT: &str = "captf.infrastructure.cluster.x-k8s.io/attempt";
    /// TerraformPlan labels.
    pub const DESTRUCTIVE: &str = "captf.io/destructive";
    pub const PLAN_PHASE: &str = "captf.io/plan-phase";
    pub const PLAN_REASON: &str = "captf.io/plan-reason";
    /// Label Cluster API puts on control-plane Machines.
    pub const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";
    /// Label Cluster API puts on Nodes of interruptible instances.
    pub const INTERRUPTIBLE: &str = "cluster.x-k8s.io/interruptible";
}

/// Annotations CAPTF sets or reads.
pub mod annotations {
    // Set by users.
    pub const RESTORE_STATE: &str = "captf.io/restore-state";
    /// Approval of a pool's destructive exports change (value: approval hash).
    pub const APPROVE_DESTRUCTIVE_PLAN: &str = "captf.io/approve-destructive-plan";
    pub const PAUSED: &str = "cluster.x-k8s.io/paused";
    /// The autoscaler bounds; the contract crate owns the keys because it
    /// reads them into the pool's inputs.
    pub const AUTOSCALER_MIN_SIZE: &str = captf_contract::inputs::AUTOSCALER_MIN_SIZE_ANNOTATION;
    pub const AUTOSCALER_MAX_SIZE: &str = captf_contract::inputs::AUTOSCALER_MAX_SIZE_ANNOTATION;
    /// Legacy: ignored, but mentioned in the condition message when present.
    pub const ABANDON_INFRASTRUCTURE: &str = "captf.io/abandon-infrastructure";
    pub const CONFIRM_NO_RESOURCES: &str = "captf.io/confirm-no-resources";

    // Set by CAPTF on user objects.
    pub const ENDPOINT_SOURCE: &str = "captf.io/endpoint-source";
    /// `ENDPOINT_SOURCE` values: the endpoint was set by a user, or written
    /// from the module's output.
    pub const ENDPOINT_SOURCE_USER: &str = "user";
    pub const ENDPOINT_SOURCE_MODULE: &str = "module";
    pub const REMEDIATION_REQUESTED: &str = "captf.io/remediation-requested";
    pub const BLOCK_MOVE: &str = "clusterctl.cluster.x-k8s.io/block-move";
    /// Cluster autoscaler: a pod that must not be evicted (Jobs that change
    /// infrastructure).
    pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
    pub const REMEDIATE_MACHINE: &str = "cluster.x-k8s.io/remediate-machine";
    pub const REPLICAS_MANAGED_BY: &str = "cluster.x-k8s.io/replicas-managed-by";
    /// The `REPLICAS_MANAGED_BY` value CAPTF claims in autoscaling mode.
    pub const REPLICAS_MANAGER: &str = "captf";

    // Cluster API / clusterctl keys honoured.
    pub const CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
    pub const DELETE_FOR_MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";
    pub const MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";
    /// Marks the objects of a ClusterClass topology dry-run request.
    pub const TOPOLOGY_DRY_RUN: &str = "topology.cluster.x-k8s.io/dry-run";

    // State, backup, lease, mirror and inputs Secrets.
    pub const INPUTS_HASH: &str = "captf.io/inputs-hash";
    pub const STATE_BACKUP_SERIAL: &str = "captf.io/state-backup-serial";
    pub const STATE_BACKUP_LINEAGE: &str = "captf.io/state-backup-lineage";
    pub const STATE_BACKUP_TAKEN_AT: &str = "captf.io/state-backup-taken-at";
    pub const STATE_BACKUP_SOURCE_JOB: &str = "captf.io/state-backup-source-job";
    pub const STATE_BACKUP_DIGEST: &str = "captf.io/state-backup-digest";
    pub const STATE_BACKUP_RESOURCES: &str = "captf.io/state-backup-resources";
    pub const STATE_BACKUP_SET: &str = "captf.io/state-backup-set";
    pub const STATE_BACKUP_CHUNK: &str = "captf.io/state-backup-chunk";
    pub const STATE_BACKUP_CHUNKS: &str = "captf.io/state-backup-chunks";
    /// On an apply Job: the state lock Lease's resourceVersion when the Job
    /// was created, or `absent` (lock evidence: an unchanged lock proves
    /// the runtime never ran).
    pub const STATE_LOCK_VERSION: &str = "captf.io/state-lock-version";
    /// On every Job: the run lease's resourceVersion once its start took
    /// it, so bookkeeping gives the lease back with one conditioned delete
    /// (a lease written since, by a retry or a takeover, is read first).
    pub const RUN_LEASE_VERSION: &str = "captf.io/run-lease-version";
    pub const LEASE_OP: &str = "captf.io/lease-op";
    pub const LEASE_ACQUIRED_AT: &str = "captf.io/lease-acquired-at";
    pub const SOURCE_HASH: &str = "captf.io/source-hash";
    pub const IDENTITY: &str = "captf.io/identity";
    /// `Secret` for a namespace-local Secret identity.
    pub const IDENTITY_KIND: &str = "captf.io/identity-kind";
    /// The Job whose inputs an inputs record holds.
    pub const JOB: &str = "captf.io/job";
    /// The newest apply failed after its apply step may have run.
    pub const MAY_HAVE_APPLIED: &str = "captf.io/may-have-applied";
    /// Images that could not be pulled (JSON list, at most 3).
    pub const UNPULLABLE_IMAGES: &str = "captf.io/unpullable-images";
    /// Images still to try after a pull fallback (JSON list), on a Job.
    pub const IMAGE_FALLBACKS: &str = "captf.io/image-fallbacks";
    pub const IMAGE: &str = "captf.io/image";
    pub const IMAGE_DIGEST: &str = "captf.io/image-digest";
    pub const APPLIED: &str = "captf.io/applied";
    /// Unconfirmed apply marker; the legacy key below reads the same.
    pub const UNCONFIRMED_APPLY: &str = "captf.io/unconfirmed-apply";
    pub const INTERRUPTED_APPLY: &str = "captf.io/interrupted-apply";
    pub const PENDING_CLUSTER_OUTPUTS: &str = "captf.io/pending-cluster-outputs";
    pub const PARTIAL_CLUSTER_OUTPUTS: &str = "captf.io/partial-cluster-outputs";
    pub const APPLIED_CLUSTER_OUTPUTS_HASH: &str = "captf.io/applied-cluster-outputs-hash";

    // Run Jobs.
    pub const BOOKKEPT: &str = "captf.io/bookkept";
    pub const INTERRUPTED: &str = "captf.io/interrupted";
    pub const DRIFT_REMEDIATION: &str = "captf.io/drift-remediation";
    pub const DESTRUCTIVE_PLAN_BLOCKED: &str = "captf.io/destructive-plan-blocked";
    pub const PLAN_CHANGED: &str = "captf.io/plan-changed";
    pub const PLAN: &str = "captf.io/plan";
    pub const PLAN_HASH: &str = "captf.io/plan-hash";
    pub const PLAN_UNREADABLE: &str = "captf.io/plan-unreadable";
    pub const APPROVED_PLAN: &str = "captf.io/approved-plan";
    pub const AFTER_FAILED_APPLY: &str = "captf.io/after-failed-apply";
    pub const AFTER_INTERRUPTED_APPLY: &str = "captf.io/after-interrupted-apply";
    pub const RESTORE_SERIAL: &str = "captf.io/restore-serial";
    pub const APPROVAL_HASH: &str = "captf.io/approval-hash";
    pub const CLUSTER_OUTPUTS_HASH: &str = "captf.io/cluster-outputs-hash";
    pub const HELD_CLUSTER_OUTPUTS: &str = "captf.io/held-cluster-outputs";
}

/// Finalizers of the three module kinds.
pub mod finalizers {
    pub const TERRAFORM_CLUSTER: &str = "terraformcluster.infrastructure.cluster.x-k8s.io";
    pub const TERRAFORM_MACHINE: &str = "terraformmachine.infrastructure.cluster.x-k8s.io";
    pub const TERRAFORM_MACHINE_POOL: &str = "terraformmachinepool.infrastructure.cluster.x-k8s.io";
}

/// Condition types.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const DEPENDENCIES_READY: &str = "DependenciesReady";
    pub const IDENTITY_ALLOWED: &str = "IdentityAllowed";
    pub const CREDENTIALS_MIRRORED: &str = "CredentialsMirrored";
    pub const RUNNER_RBAC_READY: &str = "RunnerRBACReady";
    pub const APPLY_JOB_SUCCEEDED: &str = "ApplyJobSucceeded";
    pub const STATE_READABLE: &str = "StateReadable";
    pub const RESTORE_JOB_SUCCEEDED: &str = "RestoreJobSucceeded";
    pub const OUTPUTS_VALID: &str = "OutputsValid";
    pub const INFRASTRUCTURE_HEALTHY: &str = "InfrastructureHealthy";
    pub const INPUTS_APPLIED: &str = "InputsApplied";
    pub const DRIFT_JOB_SUCCEEDED: &str = "DriftJobSucceeded";
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    pub const ENDPOINT_AVAILABLE: &str = "EndpointAvailable";
    pub const AUTOSCALING_ACTIVE: &str = "AutoscalingActive";
    pub const CAPACITY_RESOLVED: &str = "CapacityResolved";
    pub const VARIABLES_VALID: &str = "VariablesValid";
    pub const PAUSED: &str = "Paused";
    pub const DELETING: &str = "Deleting";
    pub const APPROVED: &str = "Approved";
}

/// Condition reasons, grouped by the condition that uses them. A reason
/// several conditions share is defined once, in the first group using it.
pub mod reasons {
    // Ready.
    pub const READY: &str = "Ready";
    pub const NOT_READY: &str = "NotReady";
    pub const READY_UNKNOWN: &str = "ReadyUnknown";
    pub const SECRET_FOUND: &str = "SecretFound";
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    pub const CREDENTIALS_INCOMPLETE: &str = "CredentialsIncomplete";

    // DependenciesReady.
    pub const DEPENDENCIES_READY: &str = "DependenciesReady";
    pub const CLUSTER_NOT_TERRAFORM: &str = "ClusterNotTerraform";
    pub const OWNER_MISMATCH: &str = "OwnerMismatch";
    pub const OWNER_NOT_FOUND: &str = "OwnerNotFound";
    pub const VARIABLES_INVALID: &str = "VariablesInvalid";
    pub const VARIABLES_SOURCE_NOT_FOUND: &str = "VariablesSourceNotFound";
    pub const WAITING_FOR_OWNER_MACHINE: &str = "WaitingForOwnerMachine";
    pub const WAITING_FOR_OWNER_MACHINE_POOL: &str = "WaitingForOwnerMachinePool";
    pub const WAITING_FOR_OWNER: &str = "WaitingForOwner";
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructure";
    pub const WAITING_FOR_CLUSTER_EXPORTS: &str = "WaitingForClusterExports";
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";

    // IdentityAllowed.
    pub const IDENTITY_ALLOWED: &str = "IdentityAllowed";
    pub const LOCAL_SECRET: &str = "LocalSecret";
    pub const IDENTITY_NOT_FOUND: &str = "IdentityNotFound";
    pub const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
    pub const IDENTITY_CHECK_FAILED: &str = "IdentityCheckFailed";

    // CredentialsMirrored.
    pub const MIRRORED: &str = "Mirrored";
    pub const MIRROR_FAILED: &str = "MirrorFailed";
    pub const MIRROR_PENDING: &str = "MirrorPending";

    // RunnerRBACReady.
    pub const RBAC_READY: &str = "RBACReady";
    pub const RBAC_FAILED: &str = "RBACFailed";
    pub const SERVICE_ACCOUNT_NOT_OPTED_IN: &str = "ServiceAccountNotOptedIn";

    // ApplyJobSucceeded.
    pub const APPLY_SUCCEEDED: &str = "ApplySucceeded";
    pub const DESTROY_SUCCEEDED: &str = "DestroySucceeded";
    pub const APPLY_FAILED: &str = "ApplyFailed";
    pub const DESTROY_FAILED: &str = "DestroyFailed";
    pub const DESTRUCTIVE_PLAN_BLOCKED: &str = "DestructivePlanBlocked";
    pub const IDENTITY_NOT_ALLOWED: &str = "IdentityNotAllowed";
    pub const IMAGE_INVALID: &str = "ImageInvalid";
    pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
    pub const INPUTS_TOO_LARGE: &str = "InputsTooLarge";
    pub const JOB_DEADLINE_EXCEEDED: &str = "JobDeadlineExceeded";
    pub const JOB_POLICY_INVALID: &str = "JobPolicyInvalid";
    pub const NO_APPLY_YET: &str = "NoApplyYet";
    pub const PLAN_AWAITING_APPROVAL: &str = "PlanAwaitingApproval";
    pub const PLAN_CHANGED: &str = "PlanChanged";
    pub const WAITING_FOR_CLUSTER_OPERATION: &str = "WaitingForClusterOperation";
    pub const WAITING_FOR_MACHINE_OPERATIONS: &str = "WaitingForMachineOperations";
    pub const WAITING_FOR_RUN_LEASE: &str = "WaitingForRunLease";
    pub const WAITING_FOR_JOB_SLOT: &str = "WaitingForJobSlot";

    // StateReadable.
    pub const STATE_READ: &str = "StateRead";
    pub const STATE_CORRUPT: &str = "StateCorrupt";
    pub const STATE_ENCRYPTED: &str = "StateEncrypted";
    pub const STATE_INCONSISTENT: &str = "StateInconsistent";
    pub const STATE_LOCKED: &str = "StateLocked";
    pub const STATE_LOST: &str = "StateLost";
    pub const RETAINED_STATE_FOUND: &str = "RetainedStateFound";
    pub const APPLY_OUTCOME_UNKNOWN: &str = "ApplyOutcomeUnknown";
    pub const STATE_NOT_FOUND: &str = "StateNotFound";

    // RestoreJobSucceeded.
    pub const STATE_RESTORED: &str = "StateRestored";
    pub const RESTORE_BACKUP_NOT_FOUND: &str = "RestoreBackupNotFound";
    pub const RESTORE_FAILED: &str = "RestoreFailed";

    // OutputsValid.
    pub const OUTPUTS_VALID: &str = "OutputsValid";
    pub const INSTANCES_TRUNCATED: &str = "InstancesTruncated";
    pub const FAILURE_DOMAIN_MISMATCH: &str = "FailureDomainMismatch";
    pub const OUTPUTS_INVALID: &str = "OutputsInvalid";
    pub const OUTPUTS_MISSING: &str = "OutputsMissing";
    pub const PROVIDER_ID_CHANGED: &str = "ProviderIDChanged";
    pub const OUTPUTS_PENDING: &str = "OutputsPending";

    // InfrastructureHealthy.
    pub const HEALTHY: &str = "Healthy";
    pub const INSTANCE_DEGRADED: &str = "InstanceDegraded";
    pub const INSTANCE_PENDING: &str = "InstancePending";
    pub const INSTANCE_STOPPED: &str = "InstanceStopped";
    pub const INSTANCE_TERMINATED: &str = "InstanceTerminated";
    pub const INSTANCE_UNHEALTHY: &str = "InstanceUnhealthy";
    pub const PROVISIONING: &str = "Provisioning";
    pub const HEALTH_UNKNOWN: &str = "HealthUnknown";
    pub const PROVIDER_ID_MISSING: &str = "ProviderIDMissing";
    pub const WAITING_FOR_PROVISIONING: &str = "WaitingForProvisioning";

    // InputsApplied.
    pub const INPUTS_APPLIED: &str = "InputsApplied";
    pub const APPLY_PENDING: &str = "ApplyPending";
    pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
    pub const APPLY_RUNNING: &str = "ApplyRunning";
    pub const INPUTS_APPLY_FAILED: &str = "InputsApplyFailed";
    pub const INPUTS_UNAVAILABLE: &str = "InputsUnavailable";

    // DriftJobSucceeded.
    pub const DRIFT_CHECKED: &str = "DriftChecked";
    pub const DRIFT_JOB_DEADLINE_EXCEEDED: &str = "DriftJobDeadlineExceeded";
    pub const DRIFT_JOB_FAILED: &str = "DriftJobFailed";
    pub const DRIFT_JOB_RUNNING: &str = "DriftJobRunning";
    pub const DRIFT_NOT_CHECKED: &str = "DriftNotChecked";
    pub const DURABLE_INPUTS_MISSING: &str = "DurableInputsMissing";

    // DriftDetected.
    pub const DRIFT_PENDING: &str = "DriftPending";
    pub const DRIFT_REMEDIATING: &str = "DriftRemediating";
    pub const DRIFT_REPORTED: &str = "DriftReported";
    pub const NO_DRIFT: &str = "NoDrift";

    // DeletionBlocked.
    pub const DEPENDENTS_EXIST: &str = "DependentsExist";
    pub const NOT_BLOCKED: &str = "NotBlocked";

    // EndpointAvailable.
    pub const ENDPOINT_AVAILABLE: &str = "EndpointAvailable";
    pub const WAITING_FOR_ENDPOINT: &str = "WaitingForEndpoint";

    // AutoscalingActive.
    pub const REPLICAS_MANAGED_BY_MODULE: &str = "ReplicasManagedByModule";
    pub const AUTOSCALING_ANNOTATIONS_INVALID: &str = "AutoscalingAnnotationsInvalid";
    pub const AUTOSCALING_DISABLED: &str = "AutoscalingDisabled";
    pub const REPLICAS_MANAGED_EXTERNALLY: &str = "ReplicasManagedExternally";

    // CapacityResolved.
    pub const CAPACITY_RESOLVED: &str = "CapacityResolved";
    pub const CAPACITY_NOT_DECLARED: &str = "CapacityNotDeclared";
    pub const CAPACITY_LABEL_INVALID: &str = "CapacityLabelInvalid";
    pub const IMAGE_INSPECT_FAILED: &str = "ImageInspectFailed";

    // VariablesValid.
    pub const VARIABLES_VALID: &str = "VariablesValid";
    pub const VARIABLES_SCHEMA_NOT_DECLARED: &str = "VariablesSchemaNotDeclared";
    pub const VARIABLES_REJECTED: &str = "VariablesRejected";
    pub const VARIABLES_SOURCE_PENDING: &str = "VariablesSourcePending";
    pub const VARIABLES_SCHEMA_UNAVAILABLE: &str = "VariablesSchemaUnavailable";

    // Paused.
    pub const PAUSED: &str = "Paused";
    pub const NOT_PAUSED: &str = "NotPaused";

    // Deleting.
    pub const DELETING: &str = "Deleting";
    pub const DELETION_POLICY_UNRESOLVED: &str = "DeletionPolicyUnresolved";
    pub const NOT_DELETING: &str = "NotDeleting";

    // TerraformPlan Ready and Approved.
    pub const PENDING: &str = "Pending";
    pub const APPROVED: &str = "Approved";
    pub const APPLIED: &str = "Applied";
    pub const SUPERSEDED: &str = "Superseded";
    pub const FAILED: &str = "Failed";
    pub const NOT_APPROVED: &str = "NotApproved";
    pub const APPROVAL_IGNORED: &str = "ApprovalIgnored";
}

/// Event reasons.
pub mod events {
    // Manager events.
    pub const JOB_CREATED: &str = "JobCreated";
    pub const JOB_SUCCEEDED: &str = "JobSucceeded";
    pub const JOB_FAILED: &str = "JobFailed";
    pub const JOB_INTERRUPTED: &str = "JobInterrupted";
    pub const JOB_DEADLINE_EXCEEDED: &str = "JobDeadlineExceeded";
    pub const STUCK_JOB_DELETED: &str = "StuckJobDeleted";
    pub const IMAGE_PULL_FALLBACK: &str = "ImagePullFallback";
    pub const WAITING_FOR_RUN_LEASE: &str = "WaitingForRunLease";
    pub const WAITING_FOR_JOB_SLOT: &str = "WaitingForJobSlot";
    pub const WAITING_FOR_CLUSTER_OPERATION: &str = "WaitingForClusterOperation";
    pub const WAITING_FOR_MACHINE_OPERATIONS: &str = "WaitingForMachineOperations";
    pub const DESTRUCTIVE_PLAN_BLOCKED: &str = "DestructivePlanBlocked";
    pub const PLAN_READY: &str = "PlanReady";
    pub const PLAN_APPROVED: &str = "PlanApproved";
    pub const PLAN_APPLIED: &str = "PlanApplied";
    pub const PLAN_CHANGED: &str = "PlanChanged";
    pub const PLAN_SUPERSEDED: &str = "PlanSuperseded";
    pub const DELETION_STARTED: &str = "DeletionStarted";
    pub const DESTROYED: &str = "Destroyed";
    pub const FINALIZER_REMOVED: &str = "FinalizerRemoved";
    pub const INFRASTRUCTURE_RETAINED: &str = "InfrastructureRetained";
    pub const RETAINED_STATE_FOUND: &str = "RetainedStateFound";
    pub const RETAINED_STATE_ADOPTED: &str = "RetainedStateAdopted";
    pub const EXTERNALLY_MANAGED_RELEASED: &str = "ExternallyManagedReleased";
    pub const PAUSED: &str = "Paused";
    pub const RESUMED: &str = "Resumed";
    pub const PROVISIONED: &str = "Provisioned";
    pub const PROVIDER_ID_SET: &str = "ProviderIDSet";
    pub const CONTROL_PLANE_ENDPOINT_SET: &str = "ControlPlaneEndpointSet";
    pub const FAILURE_DOMAINS_CHANGED: &str = "FailureDomainsChanged";
    pub const EXPORTS_NOT_PUBLISHED: &str = "ExportsNotPublished";
    pub const INPUTS_CHANGED: &str = "InputsChanged";
    pub const DIGEST_PINNED: &str = "DigestPinned";
    pub const DIGEST_UNKNOWN: &str = "DigestUnknown";
    pub const APPLIED_INPUTS_UNKNOWN: &str = "AppliedInputsUnknown";
    pub const DESTROY_INPUTS_MISMATCH: &str = "DestroyInputsMismatch";
    pub const FORCE_UNLOCKED: &str = "ForceUnlocked";
    pub const STATE_ADOPTED: &str = "StateAdopted";
    pub const STATE_LOST: &str = "StateLost";
    pub const STATE_LOCKED: &str = "StateLocked";
    pub const STATE_UNREADABLE: &str = "StateUnreadable";
    pub const OUTPUTS_INVALID: &str = "OutputsInvalid";
    pub const STATE_BACKED_UP: &str = "StateBackedUp";
    pub const STATE_RESTORED: &str = "StateRestored";
    pub const STATE_RESTORE_FAILED: &str = "StateRestoreFailed";
    pub const OWNER_REFERENCES_REPAIRED: &str = "OwnerReferencesRepaired";
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    pub const DRIFT_RESOLVED: &str = "DriftResolved";
    pub const DRIFT_REMEDIATION_STARTED: &str = "DriftRemediationStarted";
    pub const INSTANCE_HEALTHY: &str = "InstanceHealthy";
    pub const INSTANCE_UNHEALTHY: &str = "InstanceUnhealthy";
    pub const REMEDIATION_REQUESTED: &str = "RemediationRequested";
    pub const REMEDIATION_WITHDRAWN: &str = "RemediationWithdrawn";
    pub const REPLICAS_WRITTEN_BACK: &str = "ReplicasWrittenBack";
    pub const REPLICAS_MANAGED_EXTERNALLY: &str = "ReplicasManagedExternally";
    pub const IDENTITY_NOT_ALLOWED: &str = "IdentityNotAllowed";
    pub const IDENTITY_SECRET_FOUND: &str = "IdentitySecretFound";
    pub const IDENTITY_SECRET_NOT_FOUND: &str = "IdentitySecretNotFound";
    pub const MIRROR_CREATED: &str = "MirrorCreated";
    pub const MIRROR_REMOVED: &str = "MirrorRemoved";
    pub const CAPACITY_RESOLVED: &str = "CapacityResolved";
    pub const IMAGE_INSPECT_FAILED: &str = "ImageInspectFailed";
    pub const CONDITION_CHANGED: &str = "ConditionChanged";
    /// Reported when reserved env entries are dropped from a stored policy.
    pub const RESERVED_ENV_DROPPED: &str = "ReservedEnvDropped";

    // Runner events.
    pub const RUN_STARTED: &str = "RunStarted";
    pub const STEP_STARTED: &str = "StepStarted";
    pub const STEP_SUCCEEDED: &str = "StepSucceeded";
    pub const STEP_FAILED: &str = "StepFailed";
    pub const PLAN_SUMMARY: &str = "PlanSummary";
    pub const RESOURCES_CHANGED: &str = "ResourcesChanged";
    pub const RUN_FINISHED: &str = "RunFinished";

    /// Every reason the manager may publish: its recorder refuses any other
    /// (`recorder::listed`), and each is documented with its type in `docs/`.
    pub const MANAGER: &[&str] = &[
        JOB_CREATED,
        JOB_SUCCEEDED,
        JOB_FAILED,
        JOB_INTERRUPTED,
        JOB_DEADLINE_EXCEEDED,
        STUCK_JOB_DELETED,
        IMAGE_PULL_FALLBACK,
        WAITING_FOR_RUN_LEASE,
        WAITING_FOR_JOB_SLOT,
        WAITING_FOR_CLUSTER_OPERATION,
        WAITING_FOR_MACHINE_OPERATIONS,
        DESTRUCTIVE_PLAN_BLOCKED,
        PLAN_READY,
        PLAN_APPROVED,
        PLAN_APPLIED,
        PLAN_CHANGED,
        PLAN_SUPERSEDED,
        DELETION_STARTED,
        DESTROYED,
        FINALIZER_REMOVED,
        INFRASTRUCTURE_RETAINED,
        RETAINED_STATE_FOUND,
        RETAINED_STATE_ADOPTED,
        EXTERNALLY_MANAGED_RELEASED,
        PAUSED,
        RESUMED,
        PROVISIONED,
        PROVIDER_ID_SET,
        CONTROL_PLANE_ENDPOINT_SET,
        FAILURE_DOMAINS_CHANGED,
        EXPORTS_NOT_PUBLISHED,
        INPUTS_CHANGED,
        DIGEST_PINNED,
        DIGEST_UNKNOWN,
        APPLIED_INPUTS_UNKNOWN,
        DESTROY_INPUTS_MISMATCH,
        FORCE_UNLOCKED,
        STATE_ADOPTED,
        STATE_LOST,
        STATE_LOCKED,
        STATE_UNREADABLE,
        OUTPUTS_INVALID,
        STATE_BACKED_UP,
        STATE_RESTORED,
        STATE_RESTORE_FAILED,
        OWNER_REFERENCES_REPAIRED,
        DRIFT_DETECTED,
        DRIFT_RESOLVED,
        DRIFT_REMEDIATION_STARTED,
        INSTANCE_HEALTHY,
        INSTANCE_UNHEALTHY,
        REMEDIATION_REQUESTED,
        REMEDIATION_WITHDRAWN,
        REPLICAS_WRITTEN_BACK,
        REPLICAS_MANAGED_EXTERNALLY,
        IDENTITY_NOT_ALLOWED,
        IDENTITY_SECRET_FOUND,
        IDENTITY_SECRET_NOT_FOUND,
        MIRROR_CREATED,
        MIRROR_REMOVED,
        CAPACITY_RESOLVED,
        IMAGE_INSPECT_FAILED,
        CONDITION_CHANGED,
        RESERVED_ENV_DROPPED,
    ];

    /// Every reason the runner posts (its `events::Reason`).
    pub const RUNNER: &[&str] = &[
        RUN_STARTED,
        STEP_STARTED,
        STEP_SUCCEEDED,
        STEP_FAILED,
        PLAN_SUMMARY,
        RESOURCES_CHANGED,
        RUN_FINISHED,
    ];
}

/// Validating webhook names and the path each is served at.
pub mod webhooks {
    use super::kinds;

    /// One validating webhook entry of the manager.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ValidatingWebhook {
        pub name: &'static str,
        pub path: &'static str,
        pub kind: &'static str,
        pub plural: &'static str,
    }

    const fn entry(
        name: &'static str,
        path: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> ValidatingWebhook {
        ValidatingWebhook {
            name,
            path,
            kind,
            plural,
        }
    }

    /// The CREATE/UPDATE entry of each kind.
    pub const VALIDATING: &[ValidatingWebhook] = &[
        entry(
            "validation.terraformcluster.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformcluster",
            kinds::TERRAFORM_CLUSTER,
            "terraformclusters",
        ),
        entry(
            "validation.terraformclustertemplate.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformclustertemplate",
            kinds::TERRAFORM_CLUSTER_TEMPLATE,
            "terraformclustertemplates",
        ),
        entry(
            "validation.terraformmachine.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine",
            kinds::TERRAFORM_MACHINE,
            "terraformmachines",
        ),
        entry(
            "validation.terraformmachinetemplate.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinetemplate",
            kinds::TERRAFORM_MACHINE_TEMPLATE,
            "terraformmachinetemplates",
        ),
        entry(
            "validation.terraformmachinepool.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool",
            kinds::TERRAFORM_MACHINE_POOL,
            "terraformmachinepools",
        ),
        entry(
            "validation.terraformmachinepooltemplate.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepooltemplate",
            kinds::TERRAFORM_MACHINE_POOL_TEMPLATE,
            "terraformmachinepooltemplates",
        ),
        entry(
            "validation.terraformclusteridentity.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformclusteridentity",
            kinds::TERRAFORM_CLUSTER_IDENTITY,
            "terraformclusteridentities",
        ),
        entry(
            "validation.terraformplan.infrastructure.cluster.x-k8s.io",
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformplan",
            kinds::TERRAFORM_PLAN,
            "terraformplans",
        ),
    ];

    /// Name of the DELETE entry of TerraformMachine (fails open).
    pub const MACHINE_DELETE: &str =
        "delete.validation.terraformmachine.infrastructure.cluster.x-k8s.io";
}
