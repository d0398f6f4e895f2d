# A cluster that provisions nothing: its only "resource" is a terraform_data
# recording the inputs, so plans, state and outputs are real.

resource "terraform_data" "load_balancer" {
  input = {
    cluster                   = var.captf_cluster
    object                    = var.captf_object
    tags                      = var.captf_tags
    control_plane_endpoint    = var.control_plane_endpoint
    kubernetes_version        = var.kubernetes_version
    control_plane_initialized = var.control_plane_initialized
    cluster_network           = var.cluster_network
  }

  lifecycle {
    # Unknown at plan time when the hook is on, so it fails after create.
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
