# ---------------------------------------------------------------------------
# Contract inputs (cluster role, contract v1alpha1)
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
  description = "The owning Cluster API Cluster: names every resource and the node defined-tag values."
  type = object({
    name      = string
    namespace = string
  })
}

variable "captf_object" {
  description = "The TerraformCluster this module runs for (declared by the contract, not used here)."
  type = object({
    kind      = string
    name      = string
    namespace = string
  })
}

variable "captf_tags" {
  description = "Contract tags, put on every taggable resource as free-form tags ('.' and spaces become '_')."
  type        = map(string)
}

variable "control_plane_endpoint" {
  description = "An endpoint the module does not own; when set, no load balancer is created and this endpoint is published unchanged."
  type = object({
    host = string
    port = number
  })
  default = null
}

variable "kubernetes_version" {
  description = "Kubernetes version from the ClusterClass topology (declared by the contract, not used here)."
  type        = string
  default     = null
}

variable "control_plane_initialized" {
  description = "Whether the control plane has come up (declared by the contract, not used here)."
  type        = bool
}

variable "cluster_network" {
  description = "Cluster API cluster network; api_server_port sets the API port (6443 when unset)."
  type = object({
    pods            = optional(list(string), [])
    services        = optional(list(string), [])
    service_domain  = optional(string)
    api_server_port = optional(number)
  })
  default = null

  validation {
    condition = (
      try(var.cluster_network.api_server_port, null) == null
      || try(var.cluster_network.api_server_port >= 1 && var.cluster_network.api_server_port <= 65535 && floor(var.cluster_network.api_server_port) == var.cluster_network.api_server_port, false)
    )
    error_message = "cluster_network.api_server_port must be a whole number from 1 to 65535."
  }
}

# ---------------------------------------------------------------------------
# User variables (spec.variables / variablesFrom)
# ---------------------------------------------------------------------------

variable "compartment_id" {
  description = "Required. Compartment of every cluster resource; machines and pools inherit it."
  type        = string
  default     = null

  validation {
    condition     = can(regex("^ocid1\\.(compartment|tenancy)\\.", var.compartment_id))
    error_message = "compartment_id is required: set it to a compartment OCID (ocid1.compartment.…) in spec.variables."
  }
}

variable "region" {
  description = "Required. Region identifier, such as us-ashburn-1; machines and pools inherit it."
  type        = string
  default     = null

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+-[0-9]+$", var.region))
    error_message = "region is required: set it to a region identifier such as us-ashburn-1."
  }
}

variable "control_plane_subnet_id" {
  description = "Required. Subnet of the control-plane nodes; its VCN is the cluster's."
  type        = string
  default     = null

  validation {
    condition     = can(regex("^ocid1\\.subnet\\.", var.control_plane_subnet_id))
    error_message = "control_plane_subnet_id is required: set it to a subnet OCID (ocid1.subnet.…)."
  }
}

variable "worker_subnet_id" {
  description = "Subnet of the workers, in the same VCN; null uses control_plane_subnet_id."
  type        = string
  default     = null

  validation {
    condition     = var.worker_subnet_id == null || can(regex("^ocid1\\.subnet\\.", var.worker_subnet_id))
    error_message = "worker_subnet_id must be a subnet OCID (ocid1.subnet.…) or null."
  }
}

variable "api_load_balancer_subnet_id" {
  description = "Subnet of the API load balancer; null uses control_plane_subnet_id. A public load balancer needs a public subnet."
  type        = string
  default     = null

  validation {
    condition     = var.api_load_balancer_subnet_id == null || can(regex("^ocid1\\.subnet\\.", var.api_load_balancer_subnet_id))
    error_message = "api_load_balancer_subnet_id must be a subnet OCID (ocid1.subnet.…) or null."
  }
}

variable "network_compartment_id" {
  description = "Compartment of the VCN and its subnets; null uses compartment_id."
  type        = string
  default     = null

  validation {
    condition     = var.network_compartment_id == null || can(regex("^ocid1\\.(compartment|tenancy)\\.", var.network_compartment_id))
    error_message = "network_compartment_id must be a compartment OCID or null."
  }
}

variable "api_load_balancer_public" {
  description = "Give the API load balancer a public IP; requires api_allowed_cidrs."
  type        = bool
  default     = false
  nullable    = false
}

variable "api_allowed_cidrs" {
  description = "IPv4 CIDRs that may reach the API endpoint besides the VCN's own; required with a public load balancer."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for cidr in var.api_allowed_cidrs : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "api_allowed_cidrs entries must be IPv4 CIDR blocks such as 203.0.113.0/24."
  }
}

variable "api_load_balancer_private_ip" {
  description = "Private IPv4 address of the load balancer in its subnet; null lets OCI pick."
  type        = string
  default     = null

  validation {
    condition     = var.api_load_balancer_private_ip == null || can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}$", var.api_load_balancer_private_ip))
    error_message = "api_load_balancer_private_ip must be an IPv4 address or null."
  }
}

variable "api_load_balancer_reserved_public_ip_id" {
  description = "OCID of a reserved public IP for a public load balancer; null lets OCI assign an ephemeral one."
  type        = string
  default     = null

  validation {
    condition     = var.api_load_balancer_reserved_public_ip_id == null || can(regex("^ocid1\\.publicip\\.", var.api_load_balancer_reserved_public_ip_id))
    error_message = "api_load_balancer_reserved_public_ip_id must be a public IP OCID (ocid1.publicip.…) or null."
  }
}

variable "distribution" {
  description = "kubeadm or rke2: RKE2 adds the supervisor listener on 9345 and keeps the kube-apiserver backends on 6443."
  type        = string
  default     = "kubeadm"
  nullable    = false

  validation {
    condition     = contains(["kubeadm", "rke2"], var.distribution)
    error_message = "distribution must be kubeadm or rke2."
  }
}

variable "ssh_allowed_cidrs" {
  description = "IPv4 CIDRs that may reach the nodes on SSH; none by default."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for cidr in var.ssh_allowed_cidrs : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "ssh_allowed_cidrs entries must be IPv4 CIDR blocks."
  }
}

variable "nodeport_allowed_cidrs" {
  description = "IPv4 CIDRs that may reach worker NodePorts 30000-32767 (TCP and UDP)."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for cidr in var.nodeport_allowed_cidrs : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "nodeport_allowed_cidrs entries must be IPv4 CIDR blocks."
  }
}

variable "failure_domain_mode" {
  description = "availability_domain, fault_domain (of one availability domain) or auto."
  type        = string
  default     = "auto"
  nullable    = false

  validation {
    condition     = contains(["auto", "availability_domain", "fault_domain"], var.failure_domain_mode)
    error_message = "failure_domain_mode must be auto, availability_domain or fault_domain."
  }
}

variable "node_identity" {
  description = "Instance-principal identity of the control-plane nodes: a dynamic group matched by defined_tag (required unless enabled = false or allow_compartment_wide = true) and its policy."
  type = object({
    enabled = optional(bool, true)
    defined_tag = optional(object({
      namespace = string
      key       = string
    }))
    allow_compartment_wide = optional(bool, false)
  })
  default  = {}
  nullable = false

  validation {
    condition = (
      !var.node_identity.enabled || var.node_identity.allow_compartment_wide || var.node_identity.defined_tag != null
    )
    error_message = "node_identity needs defined_tag (a tag namespace and key of yours) to scope the dynamic group to this cluster's control-plane instances; set allow_compartment_wide = true to accept a group of every instance in the compartment, or enabled = false."
  }

  validation {
    condition = var.node_identity.defined_tag == null || try(
      can(regex("^[A-Za-z0-9_-]{1,100}$", var.node_identity.defined_tag.namespace))
      && can(regex("^[A-Za-z0-9_-]{1,100}$", var.node_identity.defined_tag.key)),
      false,
    )
    error_message = "node_identity.defined_tag namespace and key must be 1 to 100 letters, digits, '_' or '-'."
  }
}

variable "node_policy_compartment_id" {
  description = "Where the node policy is attached; null uses compartment_id. Use an ancestor of both when the VCN is in another compartment."
  type        = string
  default     = null

  validation {
    condition     = var.node_policy_compartment_id == null || can(regex("^ocid1\\.(compartment|tenancy)\\.", var.node_policy_compartment_id))
    error_message = "node_policy_compartment_id must be a compartment OCID or null."
  }
}

variable "tenancy_id" {
  description = "Tenancy of the dynamic group; null reads the identity's OCI_TENANCY_OCID credential file."
  type        = string
  default     = null

  validation {
    condition     = var.tenancy_id == null || can(regex("^ocid1\\.tenancy\\.", var.tenancy_id))
    error_message = "tenancy_id must be a tenancy OCID (ocid1.tenancy.…) or null."
  }
}

variable "home_region" {
  description = "The tenancy's home region, where IAM writes go; null looks it up."
  type        = string
  default     = null

  validation {
    condition     = var.home_region == null || can(regex("^[a-z]+-[a-z]+-[0-9]+$", var.home_region))
    error_message = "home_region must be a region identifier such as us-ashburn-1, or null."
  }
}

variable "ignore_defined_tags" {
  description = "Tag-default keys (<namespace>.<key>) to leave alone, besides Oracle-Tags.CreatedBy and Oracle-Tags.CreatedOn."
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

variable "additional_tags" {
  description = "Extra free-form tags for every taggable resource; at most 4."
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
