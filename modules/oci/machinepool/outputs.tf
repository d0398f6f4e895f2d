output "provider_id" {
  description = "OCID of the instance pool; null when there is none. Changes when a version roll replaces the pool."
  value       = local.pool == null ? null : local.pool.id
}

output "provider_id_list" {
  description = "oci://<instance OCID> of every member whatever its health, sorted; terminating and terminated instances are not members."
  value       = sort(module.logic.provider_id_list)
}

output "replicas" {
  description = "The pool's size as OCI reports it (actual_size): replicas, or what the autoscaler decided; not the running count."
  value       = module.logic.replicas
}

output "instances" {
  description = "Per member: provider_id, instance_id, failure_domain, state and addresses = []."
  value       = module.logic.instances
}

output "health" {
  description = "Pool health: state, healthy, message and reasons."
  value       = module.logic.health
}

output "dropped_node_labels" {
  description = "node_labels keys left out because NodeRestriction forbids a kubelet to set them."
  value       = module.logic.dropped_node_labels
}
