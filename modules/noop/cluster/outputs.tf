output "control_plane_endpoint" {
  description = "The given endpoint, else a stable name that never resolves."
  value = var.control_plane_endpoint != null ? var.control_plane_endpoint : {
    host = "noop-${var.captf_object.name}.invalid"
    port = 6443
  }
}

output "failure_domains" {
  description = "One control-plane failure domain."
  value       = [{ name = "fd1", control_plane = true }]
}

output "exports" {
  description = "Handed to machines and pools; known only after apply."
  value       = merge({ backend_id = "noop-backend-${terraform_data.load_balancer.id}" }, var.noop_exports_extra)
}

output "health" {
  description = "Cluster health."
  value       = local.health
}
