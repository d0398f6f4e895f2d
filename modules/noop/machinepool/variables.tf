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

variable "noop_missing_members" {
  description = "Leave this many members out of the member list (a group still converging)."
  type        = number
  default     = 0

  validation {
    condition     = var.noop_missing_members >= 0 && floor(var.noop_missing_members) == var.noop_missing_members
    error_message = "noop_missing_members must be a non-negative integer."
  }
}

variable "noop_group_size" {
  description = "While autoscaling, report the group at this size, as if the cloud's own scaling had moved it within the bounds."
  type        = number
  default     = null

  validation {
    condition     = var.noop_group_size == null ? true : var.noop_group_size >= 0 && floor(var.noop_group_size) == var.noop_group_size
    error_message = "noop_group_size must be a non-negative integer."
  }
}

variable "captf_cluster_outputs" {
  description = "The cluster module's exports."
  type        = any
  default     = null
}

variable "machinepool_name" {
  description = "Name of the owning MachinePool."
  type        = string
}

variable "replicas" {
  description = "Desired capacity."
  type        = number

  validation {
    condition     = var.replicas >= 0 && floor(var.replicas) == var.replicas
    error_message = "replicas must be a non-negative integer."
  }
}

variable "bootstrap_data" {
  description = "Base64 of the bootstrap payload."
  type        = string
  sensitive   = true
}

variable "bootstrap_format" {
  description = "cloud-config or ignition."
  type        = string
}

variable "failure_domains" {
  description = "Failure domains to spread over; [] lets the module choose."
  type        = list(string)
}

variable "cluster_failure_domains" {
  description = "Failure domains the cluster reports."
  type        = list(string)
}

variable "node_labels" {
  description = "Labels for the pool's Nodes."
  type        = map(string)
}

variable "autoscaling" {
  description = "Autoscaling bounds; when enabled the group keeps its size within them."
  type = object({
    enabled = bool
    min     = number
    max     = number
  })

  validation {
    condition     = !var.autoscaling.enabled || (var.autoscaling.min >= 0 && var.autoscaling.min <= var.autoscaling.max)
    error_message = "autoscaling needs 0 <= min <= max when enabled."
  }
}

variable "noop_instance_state" {
  description = "State every member reports; the group health is derived from it."
  type        = string
  default     = "running"

  validation {
    condition     = contains(["pending", "running", "degraded", "stopped", "unknown"], var.noop_instance_state)
    error_message = "noop_instance_state must be one of pending, running, degraded, stopped, unknown."
  }
}
