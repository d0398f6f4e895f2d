# Plain data in, plain data out: the parent module passes contract inputs,
# user variables and what the OCI provider read; nothing here talks to a cloud.

variable "namespace" {
  description = "Namespace of the owning Cluster."
  type        = string
}

variable "cluster_name" {
  description = "Name of the owning Cluster."
  type        = string
}

variable "pool_name" {
  description = "Name of the MachinePool."
  type        = string
}

variable "captf_tags" {
  description = "The contract's tags, keys as the controller sends them."
  type        = map(string)
}

variable "additional_tags" {
  description = "User free-form tags, already validated by the parent."
  type        = map(string)
}

variable "cluster_outputs" {
  description = "The cluster's exports as the controller passes them ({} or null for an externally managed cluster)."
  type        = any
}

variable "external_cluster_exports" {
  description = "Exports supplied by the user for an externally managed cluster."
  type        = any
}

variable "autoscaling_enabled" {
  description = "Whether the MachinePool's autoscaler annotations are in force."
  type        = bool
}

variable "autoscaled" {
  description = "The user's deliberate mode switch; must match autoscaling_enabled."
  type        = bool
}

variable "failure_domains" {
  description = "Failure domains the MachinePool asks for."
  type        = list(string)
}

variable "cluster_failure_domains" {
  description = "Failure domains the cluster reports."
  type        = list(string)
}

variable "kept_cluster_zones" {
  description = "The cluster's zones (name => {availability_domain, fault_domain}) recorded at the pool's first apply; null before it."
  type        = any
  default     = null
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

variable "node_labels" {
  description = "Labels the pool's Nodes should register with."
  type        = map(string)
}

variable "ssh_authorized_keys" {
  description = "Public keys for the image's default user."
  type        = list(string)
}

variable "pool" {
  description = "The instance pool as the provider reports it, or null when it is not in state."
  type = object({
    state       = optional(string)
    actual_size = optional(number)
    size        = optional(number)
  })
  default = null
}

variable "members" {
  description = "The pool's instances as the provider lists them."
  type = list(object({
    id                  = string
    availability_domain = optional(string)
    fault_domain        = optional(string)
    state               = optional(string)
  }))
  default = []
}

variable "autoscaling_min" {
  description = "Lower bound from the MachinePool's autoscaler annotations."
  type        = number
}

variable "scale_in_cpu_percent" {
  description = "CPU utilization below which the autoscaler removes an instance."
  type        = number
}

variable "scale_out_cpu_percent" {
  description = "CPU utilization above which the autoscaler adds an instance."
  type        = number
}
