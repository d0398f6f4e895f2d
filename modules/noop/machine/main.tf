# A machine that provisions nothing: a terraform_data records the inputs.

resource "terraform_data" "instance" {
  input = {
    cluster            = var.captf_cluster
    object             = var.captf_object
    machine_name       = var.machine_name
    tags               = var.captf_tags
    backend_id         = try(var.captf_cluster_outputs.backend_id, null)
    bootstrap_sha256   = sha256(var.bootstrap_data)
    bootstrap_format   = var.bootstrap_format
    failure_domain     = var.failure_domain
    kubernetes_version = var.kubernetes_version
    control_plane      = var.control_plane
  }

  lifecycle {
    postcondition {
      condition     = !var.noop_fail_apply || self.id == ""
      error_message = "noop_fail_apply is set: failing the apply on purpose."
    }
  }
}

locals {
  # Health is running/healthy unless a test forces another state.
  health = var.noop_health_state == null ? {
    state   = "running"
    healthy = true
    message = null
    reasons = tolist([])
    } : {
    state   = var.noop_health_state
    healthy = var.noop_health_state == "running"
    message = "health forced by noop_health_state"
    reasons = tolist(["Forced"])
  }
}
