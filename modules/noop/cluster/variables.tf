variable "captf_contract" {
  description = "Contract version the controller speaks."
  type        = string

  validation {
    condition     = var.captf_contract == "v1alpha1"
    error_message = "This module implements module contract v1alpha1."
  }
}

variable "captf_cluster" {
  description = "The owning Cluster API Cluster."
  type = object({
    name      = string
    namespace = string
  })
}

variable "captf_object" {
  description = "The Terraform* object this module runs for."
  type = object({
    kind      = string
    name      = string
    namespace = string
  })
}

variable "captf_tags" {
  description = "Tags to put on every taggable resource (recorded only: nothing here is taggable)."
  type        = map(string)
}

variable "kubernetes_version" {
  description = "Kubernetes version, verbatim, or null."
  type        = string
  default     = null
}

# Test hooks. They are ordinary user variables with defaults, so the
# controller never sets them unless an object asks for it.

variable "noop_health_state" {
  description = "Report this health state instead of the derived one (running/healthy)."
  type        = string
  default     = null

  validation {
    condition     = var.noop_health_state == null ? true : contains(["pending", "running", "degraded", "stopped", "terminated", "unknown"], var.noop_health_state)
    error_message = "noop_health_state must be one of pending, running, degraded, stopped, terminated, unknown."
  }
}

variable "noop_fail_apply" {
  description = "Make the apply fail after the resource is created (a real, partial apply failure)."
  type        = bool
  default     = false
}

variable "noop_exports_extra" {
  description = "Extra keys merged into the exports (changes the exports without replacing anything)."
  type        = map(string)
  default     = {}
}

variable "control_plane_endpoint" {
  description = "An endpoint the module does not own, or null."
  type = object({
    host = string
    port = number
  })
  default = null
}

variable "control_plane_initialized" {
  description = "Whether the control plane has come up (latched)."
  type        = bool
}

variable "cluster_network" {
  description = "Cluster API cluster network, or null."
  type = object({
    pods            = optional(list(string), [])
    services        = optional(list(string), [])
    service_domain  = optional(string)
    api_server_port = optional(number)
  })
  default = null
}
