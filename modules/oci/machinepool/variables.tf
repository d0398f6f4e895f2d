# ---------------------------------------------------------------------------
# Contract inputs (machinepool role, contract v1alpha1)
# ---------------------------------------------------------------------------

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
  description = "The TerraformMachinePool this module runs for (declared by the contract, not used here)."
  type = object({
    kind      = string
    name      = string
    namespace = string
  })
}

variable "captf_tags" {
  description = "Contract tags, put on every pool resource as free-form tags ('.' and spaces become '_')."
  type        = map(string)
}

variable "captf_cluster_outputs" {
  description = "The OCI cluster module's exports; {} when the TerraformCluster is externally managed."
  type        = any

  validation {
    condition = (
      var.captf_cluster_outputs == null
      || try(length(var.captf_cluster_outputs) == 0, false)
      || try(var.captf_cluster_outputs.schema == "captf.io/oci-cluster/v1", false)
    )
    error_message = "captf_cluster_outputs must come from an OCI cluster module (schema \"captf.io/oci-cluster/v1\")."
  }
}

variable "machinepool_name" {
  description = "Name of the owning MachinePool."
  type        = string
}

variable "replicas" {
  description = "Desired size; with autoscaling, the observed size the pool is created at."
  type        = number

  validation {
    condition     = var.replicas >= 0 && floor(var.replicas) == var.replicas
    error_message = "replicas must be a whole number, 0 or more."
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

  validation {
    condition     = contains(["cloud-config", "ignition"], var.bootstrap_format)
    error_message = "bootstrap_format must be cloud-config or ignition."
  }
}

variable "failure_domains" {
  description = "Failure domains the MachinePool asks for; [] spreads over the cluster's."
  type        = list(string)
}

variable "cluster_failure_domains" {
  description = "Failure domains the cluster reports."
  type        = list(string)
}

variable "kubernetes_version" {
  description = "Kubernetes version, verbatim; any change replaces the pool."
  type        = string
  default     = null
}

variable "node_labels" {
  description = "Labels the pool's Nodes register with (delivered by a boot script)."
  type        = map(string)
}

variable "autoscaling" {
  description = "Autoscaler bounds from the MachinePool's annotations."
  type = object({
    enabled = bool
    min     = number
    max     = number
  })
}

# ---------------------------------------------------------------------------
# User variables (spec.variables / variablesFrom)
# ---------------------------------------------------------------------------

variable "additional_nsg_ids" {
  description = "Extra network security groups for the VNICs, after the cluster's worker NSG; at most 4."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = length(var.additional_nsg_ids) <= 4
    error_message = "additional_nsg_ids takes at most 4 NSGs (OCI allows 5 per VNIC, one is the worker NSG)."
  }
}

variable "additional_tags" {
  description = "Extra free-form tags for every pool resource; at most 4."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition     = length(var.additional_tags) <= 4
    error_message = "additional_tags takes at most 4 tags: the contract's tags use the rest of OCI's 10."
  }

  validation {
    condition = alltrue([
      for key in keys(var.additional_tags) :
      can(regex("^[!-~]{1,100}$", key)) && !strcontains(key, ".") && !startswith(lower(key), "captf_io/")
    ])
    error_message = "additional_tags keys must be 1 to 100 printable ASCII characters without '.' or spaces, and must not start with captf_io/."
  }

  validation {
    condition     = alltrue([for value in values(var.additional_tags) : length(value) <= 256])
    error_message = "additional_tags values must be at most 256 characters."
  }
}

variable "autoscaled" {
  description = "Must equal autoscaling.enabled: the deliberate second switch for a mode change, which replaces the pool."
  type        = bool
  default     = false
  nullable    = false
}

variable "autoscaling_cool_down_seconds" {
  description = "Minimum time between two scaling actions; 300 is OCI's minimum."
  type        = number
  default     = 300
  nullable    = false

  validation {
    condition     = var.autoscaling_cool_down_seconds >= 300 && floor(var.autoscaling_cool_down_seconds) == var.autoscaling_cool_down_seconds
    error_message = "autoscaling_cool_down_seconds must be a whole number of at least 300."
  }
}

variable "autoscaling_scale_in_cpu_percent" {
  description = "Remove an instance below this CPU utilization."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = var.autoscaling_scale_in_cpu_percent >= 1 && var.autoscaling_scale_in_cpu_percent <= 99 && floor(var.autoscaling_scale_in_cpu_percent) == var.autoscaling_scale_in_cpu_percent
    error_message = "autoscaling_scale_in_cpu_percent must be a whole number from 1 to 99."
  }
}

variable "autoscaling_scale_out_cpu_percent" {
  description = "Add an instance above this CPU utilization."
  type        = number
  default     = 70
  nullable    = false

  validation {
    condition     = var.autoscaling_scale_out_cpu_percent >= 2 && var.autoscaling_scale_out_cpu_percent <= 100 && floor(var.autoscaling_scale_out_cpu_percent) == var.autoscaling_scale_out_cpu_percent
    error_message = "autoscaling_scale_out_cpu_percent must be a whole number from 2 to 100."
  }
}

variable "boot_volume_kms_key_id" {
  description = "Vault key for the boot volumes; null uses Oracle-managed keys."
  type        = string
  default     = null
}

variable "boot_volume_size_gib" {
  description = "Boot volume size, 50 to 32768 GiB."
  type        = number
  default     = 100
  nullable    = false

  validation {
    condition     = var.boot_volume_size_gib >= 50 && var.boot_volume_size_gib <= 32768 && floor(var.boot_volume_size_gib) == var.boot_volume_size_gib
    error_message = "boot_volume_size_gib must be a whole number from 50 to 32768."
  }
}

variable "external_cluster_exports" {
  description = "The cluster's exports when the TerraformCluster is externally managed."
  type        = any
  default     = null
}

variable "ignore_defined_tags" {
  description = "Tag-default keys (<namespace>.<key>) to leave alone."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = length(var.ignore_defined_tags) <= 98
    error_message = "ignore_defined_tags takes at most 98 keys (the provider allows 100 and always ignores Oracle-Tags.CreatedBy and Oracle-Tags.CreatedOn)."
  }

  validation {
    condition     = alltrue([for key in var.ignore_defined_tags : can(regex("^[^.]+\\.[^.]+$", key))])
    error_message = "ignore_defined_tags entries must read <namespace>.<key>."
  }
}

variable "image_id" {
  description = "Required. Node image OCID in the cluster's region; a new image reaches new instances only."
  type        = string
  default     = null

  validation {
    condition     = var.image_id != null && try(length(trimspace(var.image_id)) > 0, false)
    error_message = "image_id is required: set it to the node image's OCID in spec.variables."
  }
}

variable "memory_gib" {
  description = "Memory of a flexible shape; ignored for fixed shapes."
  type        = number
  default     = 16
  nullable    = false

  validation {
    condition     = var.memory_gib >= 1
    error_message = "memory_gib must be at least 1."
  }
}

variable "ocpus" {
  description = "OCPUs of a flexible shape; ignored for fixed shapes."
  type        = number
  default     = 2
  nullable    = false

  validation {
    condition     = var.ocpus > 0
    error_message = "ocpus must be more than 0."
  }
}

variable "preemptible" {
  description = "Preemptible capacity (terminated on preemption, boot volume not kept)."
  type        = bool
  default     = false
  nullable    = false
}

variable "public_ip" {
  description = "A public IP on every instance; needs a public subnet."
  type        = bool
  default     = false
  nullable    = false
}

variable "pv_encryption_in_transit" {
  description = "Encrypt boot volume traffic in transit."
  type        = bool
  default     = true
  nullable    = false
}

variable "shape" {
  description = "Compute shape."
  type        = string
  default     = "VM.Standard.E5.Flex"
  nullable    = false

  validation {
    condition     = length(trimspace(var.shape)) > 0
    error_message = "shape must not be empty."
  }
}

variable "ssh_authorized_keys" {
  description = "SSH public keys for the image's default user."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "subnet_id" {
  description = "Subnet of the instances; null uses the cluster's worker subnet."
  type        = string
  default     = null
}
