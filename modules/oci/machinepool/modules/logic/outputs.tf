output "violations" {
  description = "Every reason the module refuses to apply; empty when the inputs are fine. The parent's instance configuration turns a non-empty list into a failed precondition."
  value       = local.violations
}

output "region" {
  description = "The region the parent configures the provider with. Its precondition refuses unusable exports before the provider starts, which it cannot do without a region."
  value       = try(local.exports.region, null)

  precondition {
    condition     = length(local.export_violations) == 0
    error_message = "The OCI machine pool refuses these inputs: ${join("; ", local.export_violations)}."
  }
}

output "launch" {
  description = "What the pool resources are built from (the metadata is its own, sensitive output)."
  value = {
    name_prefix       = local.name_prefix
    freeform_tags     = local.freeform_tags
    defined_tags      = local.node_defined_tags
    compartment_id    = try(local.exports.compartment_id, null)
    region            = try(local.exports.region, null)
    worker_subnet_id  = try(local.exports.worker_subnet_id, null)
    worker_nsg_id     = try(local.exports.worker_nsg_id, null)
    placements        = local.placements
    failure_domains   = local.selected_failure_domains
    metadata_bytes    = local.metadata_bytes
    bootstrap_gzipped = local.bootstrap_gzipped
  }
}

output "name_prefix" {
  description = "Prefix of every OCI display name of this pool."
  value       = local.name_prefix
}

output "freeform_tags" {
  description = "Free-form tags for every pool resource."
  value       = local.freeform_tags
}

output "defined_tags" {
  description = "Defined tags the cluster asks nodes to carry, or null."
  value       = local.node_defined_tags
}

output "placements" {
  description = "One placement per availability domain, with its fault domains (null lets OCI spread)."
  value       = local.placements
}

output "failure_domains" {
  description = "The failure domains the pool spreads over, sorted."
  value       = local.selected_failure_domains
}

output "current_cluster_zones" {
  description = "The cluster's zones as it reports them now, name => placement: what the parent records at the first apply."
  value       = local.current_cluster_zones
}

output "unknown_failure_domains" {
  description = "Requested failure domains the cluster does not export."
  value       = sort(local.unknown_failure_domains)
}

output "dropped_node_labels" {
  description = "node_labels keys left out because NodeRestriction forbids a kubelet to set them."
  value       = local.dropped_node_labels
}

output "node_labels" {
  description = "The labels delivered to kubelet, as sorted key=value strings."
  value       = local.node_label_list
}

output "boothook" {
  description = "The node-labels boot script (part 1 of the MIME message)."
  value       = local.boothook
}

output "mime_message" {
  description = "The MIME multipart message before base64 (cloud-config only)."
  sensitive   = true
  value       = local.cloud_config ? local.mime_message : null
}

output "user_data" {
  description = "Base64 user data for the instance metadata."
  sensitive   = true
  value       = local.user_data
}

output "metadata" {
  description = "Instance metadata: user_data, plus ssh_authorized_keys when any."
  sensitive   = true
  value       = local.metadata
}

output "metadata_bytes" {
  description = "Size of the instance metadata as JSON."
  value       = local.metadata_bytes
}

output "bootstrap_content_type" {
  description = "Content type of the payload part, or null for Ignition."
  value       = local.cloud_config ? local.payload_content_type : null
}

output "provider_id_list" {
  description = "oci://<instance OCID> of every member, sorted."
  value       = sort([for m in local.classified_members : m.provider_id])
}

output "instances" {
  description = "One entry per member."
  value = [
    for m in local.classified_members : {
      provider_id    = m.provider_id
      instance_id    = m.id
      failure_domain = m.failure_domain
      state          = m.state
      addresses      = []
    }
  ]
}

output "replicas" {
  description = "The pool's size as OCI reports it; 0 without a pool."
  value       = local.actual_size
}

output "health" {
  description = "Pool health in the contract's shape."
  value       = local.health
}
