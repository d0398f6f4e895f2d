# A machine pool that provisions nothing: a terraform_data stands for the
# scaling group and the members are derived from the desired capacity.

locals {
  # With autoscaling the group keeps its size within the bounds, unless a
  # test says the cloud's own scaling moved it (noop_group_size).
  clamped = min(max(var.replicas, var.autoscaling.min), var.autoscaling.max)
  desired = var.autoscaling.enabled ? coalesce(var.noop_group_size, local.clamped) : var.replicas

  # Members that have joined (all of them unless a test holds some back).
  joined = max(local.desired - var.noop_missing_members, 0)
  raw_ids = [
    for i in range(local.joined) : "noop:///${var.captf_object.namespace}/${var.captf_object.name}/${i}"
  ]
  member_ids = sort(local.raw_ids)
}

resource "terraform_data" "group" {
  input = {
    cluster                 = var.captf_cluster
    object                  = var.captf_object
    machinepool_name        = var.machinepool_name
    tags                    = var.captf_tags
    backend_id              = try(var.captf_cluster_outputs.backend_id, null)
    desired                 = local.desired
    bootstrap_sha256        = sha256(var.bootstrap_data)
    bootstrap_format        = var.bootstrap_format
    failure_domains         = var.failure_domains
    cluster_failure_domains = var.cluster_failure_domains
    kubernetes_version      = var.kubernetes_version
    node_labels             = var.node_labels
  }

  # A group is bound to the cluster's exports (its subnets, its backend
  # set): a change of them replaces the group, as it would in a cloud.
  triggers_replace = var.captf_cluster_outputs

  lifecycle {
    postcondition {
      condition     = !var.noop_fail_apply || self.id == ""
      error_message = "noop_fail_apply is set: failing the apply on purpose."
    }
  }
}

locals {
  # Group health from the members, in the reference precedence: an empty
  # group is running; a degraded, stopped or unknown member makes the group
  # that state; starting members leave it running but not healthy.
  member_state = var.noop_instance_state
  member_reason = {
    pending  = "Starting"
    degraded = "Degraded"
    stopped  = "Stopped"
    unknown  = "Unknown"
  }
  all_running = local.desired == 0 || local.member_state == "running"
  derived_health = {
    state   = local.all_running || local.member_state == "pending" ? "running" : local.member_state
    healthy = local.all_running
    message = null
    reasons = local.all_running ? tolist([]) : tolist([for id in local.member_ids : "${local.member_reason[local.member_state]}:${id}"])
  }

  health = var.noop_health_state == null ? local.derived_health : {
    state   = var.noop_health_state
    healthy = var.noop_health_state == "running"
    message = "health forced by noop_health_state"
    reasons = tolist(["Forced"])
  }
}
