# ---------------------------------------------------------------------------
# Contract inputs (machine role, contract v1alpha1)
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
  description = "The owning Cluster API Cluster (declared by the contract, not used here)."
  type = object({
    name      = string
    namespace = string
  })
}

variable "captf_object" {
  description = "The TerraformMachine this module runs for (declared by the contract, not used here)."
  type = object({
    kind      = string
    name      = string
    namespace = string
  })
}

variable "captf_tags" {
  description = "Contract tags, put on the instance and its VNIC as free-form tags ('.' and spaces become '_')."
  type        = map(string)
}

variable "captf_cluster_outputs" {
  description = "The OCI cluster module's exports; {} when the TerraformCluster is externally managed."
  type        = any
  default     = null

  validation {
    condition = (
      var.captf_cluster_outputs == null
      || try(length(var.captf_cluster_outputs) == 0, false)
      || try(var.captf_cluster_outputs.schema == "captf.io/oci-cluster/v1", false)
    )
    error_message = "captf_cluster_outputs must come from an OCI cluster module (schema \"captf.io/oci-cluster/v1\")."
  }
}

variable "machine_name" {
  description = "Name of the owning Machine: the instance's display name, which the OCI cloud controller manager looks nodes up by."
  type        = string

  validation {
    condition     = length(var.machine_name) >= 1 && length(var.machine_name) <= 255
    error_message = "machine_name must be 1 to 255 characters."
  }
}

variable "bootstrap_data" {
  description = "Base64 of the bootstrap payload, handed to the instance unchanged as its user data."
  type        = string
  sensitive   = true
}

variable "bootstrap_format" {
  description = "cloud-config or ignition; both pass through."
  type        = string

  validation {
    condition     = contains(["cloud-config", "ignition"], var.bootstrap_format)
    error_message = "bootstrap_format must be cloud-config or ignition."
  }
}

variable "failure_domain" {
  description = "The Machine's failure domain, one of the cluster's; null picks one stably from machine_name."
  type        = string
  default     = null
}

variable "kubernetes_version" {
  description = "The Machine's version (declared by the contract, not used here: the image carries it)."
  type        = string
  default     = null
}

variable "control_plane" {
  description = "Whether the Machine is a control-plane machine: its subnet, NSG and defined tag, and registration with the API load balancer."
  type        = bool
}

# ---------------------------------------------------------------------------
# User variables (spec.variables / variablesFrom)
# ---------------------------------------------------------------------------

variable "additional_nsg_ids" {
  description = "Extra network security groups for the VNIC, after the cluster's NSG for the role; at most 4."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = length(var.additional_nsg_ids) <= 4
    error_message = "additional_nsg_ids takes at most 4 NSGs (OCI allows 5 per VNIC, one is the cluster's)."
  }
}

variable "additional_tags" {
  description = "Extra free-form tags for the instance and its VNIC; at most 4."
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

variable "boot_volume_kms_key_id" {
  description = "Vault key for the boot volume; null uses Oracle-managed keys."
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
  description = "Required. Node image OCID in the cluster's region."
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
  description = "Preemptible capacity (terminated on preemption, boot volume not kept); refused for control-plane machines."
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
  description = "Subnet of the VNIC; null uses the cluster's control-plane or worker subnet, by role."
  type        = string
  default     = null
}
