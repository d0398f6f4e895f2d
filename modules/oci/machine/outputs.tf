locals {
  instance_state = local.instance == null ? null : upper(coalesce(local.instance.state, "-"))
  instance_health = {
    PROVISIONING   = { state = "pending", healthy = false, reasons = ["InstanceProvisioning"] }
    STARTING       = { state = "pending", healthy = false, reasons = ["InstanceStarting"] }
    RUNNING        = { state = "running", healthy = true, reasons = [] }
    MOVING         = { state = "running", healthy = true, reasons = [] }
    CREATING_IMAGE = { state = "unknown", healthy = false, reasons = ["InstanceCreatingImage"] }
    STOPPING       = { state = "stopped", healthy = false, reasons = ["InstanceStopping"] }
    STOPPED        = { state = "stopped", healthy = false, reasons = ["InstanceStopped"] }
    TERMINATING    = { state = "terminated", healthy = false, reasons = ["InstanceNotFound"] }
    TERMINATED     = { state = "terminated", healthy = false, reasons = ["InstanceNotFound"] }
  }
  health = local.instance_state == null ? {
    state   = "terminated"
    healthy = false
    message = "instance not found"
    reasons = tolist(["InstanceNotFound"])
    } : merge(
    lookup(local.instance_health, local.instance_state, { state = "unknown", healthy = false, reasons = ["UnknownState"] }),
    { message = "instance is ${local.instance_state}" },
  )
}

output "provider_id" {
  description = "oci://<instance OCID>, the format the OCI cloud controller manager writes on the Node; null once the instance is gone."
  value       = local.instance == null ? null : "oci://${local.instance.id}"
}

output "addresses" {
  description = "InternalIP (the primary private IP) and ExternalIP (the public IP, when there is one), as the OCI cloud controller manager reports them."
  value = local.instance == null ? [] : concat(
    try(local.instance.private_ip, "") == "" ? [] : [{ type = "InternalIP", address = local.instance.private_ip }],
    try(local.instance.public_ip, "") == "" ? [] : [{ type = "ExternalIP", address = local.instance.public_ip }],
  )
}

output "failure_domain" {
  description = "The requested failure domain, or the one picked from machine_name."
  value       = local.failure_domain
}

output "interruptible" {
  description = "true for a preemptible instance."
  value       = var.preemptible
}

output "health" {
  description = "From the instance's lifecycle state."
  value       = local.health
}
