locals {
  # Health comes from the load balancer, never from its backends, which are
  # unhealthy during every normal control-plane bring-up.
  lb_state = local.api_load_balancer == null ? null : upper(coalesce(local.api_load_balancer.state, "-"))
  lb_health = {
    ACTIVE   = { state = "running", healthy = true, reasons = [] }
    UPDATING = { state = "running", healthy = true, reasons = [] }
    CREATING = { state = "pending", healthy = false, reasons = ["LoadBalancerCreating"] }
    FAILED   = { state = "degraded", healthy = false, reasons = ["LoadBalancerFailed"] }
    DELETING = { state = "terminated", healthy = false, reasons = ["LoadBalancerNotFound"] }
    DELETED  = { state = "terminated", healthy = false, reasons = ["LoadBalancerNotFound"] }
  }
  health = (
    !local.owns_endpoint ? { state = "running", healthy = true, message = "the control-plane endpoint is the user's; no load balancer to observe", reasons = tolist([]) } :
    # Gone from state: the provider drops a deleted load balancer on read.
    local.lb_state == null ? { state = "terminated", healthy = false, message = "API load balancer not found", reasons = tolist(["LoadBalancerNotFound"]) } :
    merge(
      lookup(local.lb_health, local.lb_state, { state = "unknown", healthy = false, reasons = ["UnknownState"] }),
      { message = "API load balancer is ${local.lb_state}" },
    )
  )

  exports = {
    schema                     = "captf.io/oci-cluster/v1"
    region                     = var.region
    compartment_id             = var.compartment_id
    vcn_id                     = local.vcn_id
    control_plane_subnet_id    = var.control_plane_subnet_id
    worker_subnet_id           = local.worker_subnet_id
    control_plane_nsg_id       = oci_core_network_security_group.control_plane_nsg.id
    worker_nsg_id              = oci_core_network_security_group.worker_nsg.id
    failure_domains            = local.failure_domains
    node_defined_tags          = local.node_defined_tags
    control_plane_defined_tags = local.control_plane_defined_tags
    # Where the endpoint is and where control-plane machines register, one
    # entry per listener; null with a user endpoint (nothing to register in).
    api = !local.owns_endpoint ? null : merge(
      {
        host                     = local.api_host
        port                     = local.api_port
        network_load_balancer_id = local.api_load_balancer.id
      },
      { for key, l in local.listeners : key => { backend_set_name = l.name, port = l.backend_port } },
    )
  }
}

output "control_plane_endpoint" {
  description = "The control_plane_endpoint input when given; else the load balancer's address (public when api_load_balancer_public) and the API port. Fixed for the cluster's life by the endpoint guard."
  value = !local.owns_endpoint ? var.control_plane_endpoint : {
    host = local.api_host
    port = local.api_port
  }
}

output "failure_domains" {
  description = "One entry per availability domain, or per fault domain of the one availability domain; all accept control-plane machines."
  value       = [for name in sort(keys(local.failure_domains)) : { name = name, control_plane = true }]
}

output "exports" {
  description = "Schema captf.io/oci-cluster/v1: what machines and pools are built from (no secret: it is published on the TerraformCluster's status)."
  value       = local.exports
}

output "health" {
  description = "From the API load balancer's lifecycle state; running with a user endpoint."
  value       = local.health
}

output "api_load_balancer_id" {
  description = "OCID of the API network load balancer; null with a user endpoint."
  value       = try(local.api_load_balancer.id, null)
}

output "node_dynamic_group_id" {
  description = "OCID of the control-plane dynamic group, for the operator's own policies; null without node identity."
  value       = try(oci_identity_dynamic_group.node_dynamic_group[0].id, null)
}

output "node_policy_id" {
  description = "OCID of the node policy; null without node identity."
  value       = try(oci_identity_policy.node_policy[0].id, null)
}
