output "provider_id" {
  description = "The group's ID."
  value       = "noop-group:///${var.captf_object.namespace}/${var.captf_object.name}"
}

output "provider_id_list" {
  description = "Every member, sorted (lexically: /10 sorts before /2)."
  value       = sort(local.raw_ids)
}

output "replicas" {
  description = "Desired capacity of the group."
  value       = local.desired
}

output "instances" {
  description = "One entry per member."
  value       = [for id in local.member_ids : { provider_id = id, state = local.member_state }]
}

output "health" {
  description = "Group health."
  value       = local.health
}
