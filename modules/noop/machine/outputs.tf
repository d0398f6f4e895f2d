output "provider_id" {
  description = "Stable per Machine; no Node ever carries it."
  value       = "noop:///${var.captf_object.namespace}/${var.machine_name}"
}

output "addresses" {
  description = "One fixed internal address."
  value       = [{ type = "InternalIP", address = "10.0.0.1" }]
}

output "failure_domain" {
  description = "The requested failure domain, echoed."
  value       = var.failure_domain
}

output "interruptible" {
  description = "Never a spot instance."
  value       = false
}

output "health" {
  description = "Machine health."
  value       = local.health
}
