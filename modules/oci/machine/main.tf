# One OCI compute instance per TerraformMachine, placed in the Machine's
# failure domain on the cluster's subnet and NSG for its role, and, for a
# control-plane machine, registered in every backend set of the cluster's
# API load balancer. A machine never updates in place: Cluster API rolls
# Machines through a new template instead.

provider "oci" {
  # Refused by the exports module when the exports are unusable, so the
  # provider never starts without a region.
  region = module.exports.region
  # Tag defaults stamped by OCI would otherwise show as drift on every plan.
  ignore_defined_tags = concat(["Oracle-Tags.CreatedBy", "Oracle-Tags.CreatedOn"], var.ignore_defined_tags)
}

module "exports" {
  source = "./modules/exports"

  cluster_outputs          = var.captf_cluster_outputs
  external_cluster_exports = var.external_cluster_exports
  required_keys = concat(
    ["region", "compartment_id", "failure_domains"],
    var.control_plane ? ["control_plane_subnet_id", "control_plane_nsg_id"] : ["worker_subnet_id", "worker_nsg_id"],
  )
}

locals {
  exports = module.exports.exports
  role    = var.control_plane ? "control_plane" : "worker"

  # OCI free-form tag keys may not hold '.' or spaces; the contract's tags
  # win over the user's.
  freeform_tags     = merge(var.additional_tags, { for key, value in var.captf_tags : replace(replace(key, ".", "_"), " ", "_") => value })
  max_freeform_tags = 10
  # The control-plane value is the one the cluster's dynamic group matches.
  role_defined_tags = try(var.control_plane ? local.exports.control_plane_defined_tags : local.exports.node_defined_tags, {})
  defined_tags      = try(length(local.role_defined_tags) > 0, false) ? local.role_defined_tags : null

  subnet_id = var.subnet_id != null ? var.subnet_id : try(local.exports["${local.role}_subnet_id"], null)
  nsg_id    = try(local.exports["${local.role}_nsg_id"], null)
  flexible  = endswith(var.shape, ".Flex")
}

# ---------------------------------------------------------------------------
# Placement: the requested failure domain, or one picked from the machine's
# name, so that every plan of this machine picks the same one.
# ---------------------------------------------------------------------------

locals {
  # name => {availability_domain, fault_domain or null}
  exported_failure_domains = try({
    for name, fd in local.exports.failure_domains : name => {
      availability_domain = try(fd.availability_domain, null)
      fault_domain        = try(fd.fault_domain, "") == "" ? null : fd.fault_domain
    }
  }, {})
  failure_domain_names = sort(keys(local.exported_failure_domains))
  # The first 32 bits of sha256(machine_name), modulo the number of names.
  picked_failure_domain = (
    length(local.failure_domain_names) == 0 ? null :
    local.failure_domain_names[parseint(substr(sha256(var.machine_name), 0, 8), 16) % length(local.failure_domain_names)]
  )
  failure_domain = var.failure_domain != null ? var.failure_domain : local.picked_failure_domain
  placement      = try(local.exported_failure_domains[local.failure_domain], null)
}

# ---------------------------------------------------------------------------
# Bootstrap: OCI takes user data base64-encoded, so the payload goes in as
# it came, cloud-config (with CABPK's Jinja header), Ignition and gzipped
# cloud-config alike; cloud-init decompresses gzip itself.
# ---------------------------------------------------------------------------

locals {
  # Base64 of a gzip stream always starts with these four characters.
  bootstrap_gzipped = nonsensitive(substr(var.bootstrap_data, 0, 4) == "H4sI")
  ssh_metadata = {
    for key in(length(var.ssh_authorized_keys) > 0 ? ["ssh_authorized_keys"] : []) :
    key => join("\n", var.ssh_authorized_keys)
  }
  metadata           = merge({ user_data = var.bootstrap_data }, local.ssh_metadata)
  metadata_bytes     = nonsensitive(length(jsonencode(local.metadata)))
  max_metadata_bytes = 32000
}

# ---------------------------------------------------------------------------
# What refuses an apply (unusable exports are refused earlier, by the
# region the provider is configured with).
# ---------------------------------------------------------------------------

locals {
  violations = concat(
    var.failure_domain != null && local.placement == null ? [
      "unknown failure domain ${var.failure_domain}; the cluster exports ${length(local.failure_domain_names) > 0 ? join(", ", local.failure_domain_names) : "none"}",
    ] : [],
    var.failure_domain == null && length(local.failure_domain_names) == 0 ? ["no failure domain to place the machine in: the cluster exports none"] : [],
    local.placement != null && try(local.placement.availability_domain, null) == null ? ["failure domain ${local.failure_domain} names no availability domain"] : [],
    var.bootstrap_format == "ignition" && local.bootstrap_gzipped ? ["a gzipped Ignition payload cannot be delivered"] : [],
    local.metadata_bytes > local.max_metadata_bytes ? ["instance metadata is ${local.metadata_bytes} bytes, over OCI's ${local.max_metadata_bytes}"] : [],
    var.control_plane && var.preemptible ? ["preemptible capacity is refused for control-plane machines: a preemption would take a control-plane member away without warning"] : [],
    length(local.freeform_tags) > local.max_freeform_tags ? ["${length(local.freeform_tags)} free-form tags, over OCI's ${local.max_freeform_tags} per resource"] : [],
  )
}

# Counted, so an instance the provider drops from state on a refresh (it
# does for a TERMINATED one) reads as gone instead of failing the outputs.
resource "oci_core_instance" "node_instance" {
  count = 1

  compartment_id      = try(local.exports.compartment_id, null)
  availability_domain = try(local.placement.availability_domain, null)
  fault_domain        = try(local.placement.fault_domain, null)
  display_name        = var.machine_name
  shape               = var.shape
  metadata            = local.metadata
  freeform_tags       = local.freeform_tags
  defined_tags        = local.defined_tags

  is_pv_encryption_in_transit_enabled = var.pv_encryption_in_transit
  # The boot volume goes with the instance.
  preserve_boot_volume = false

  create_vnic_details {
    subnet_id        = local.subnet_id
    nsg_ids          = concat(compact([local.nsg_id]), var.additional_nsg_ids)
    assign_public_ip = var.public_ip ? "true" : "false"
    freeform_tags    = local.freeform_tags
    defined_tags     = local.defined_tags
  }

  instance_options {
    are_legacy_imds_endpoints_disabled = true
  }

  source_details {
    source_type             = "image"
    source_id               = var.image_id
    boot_volume_size_in_gbs = var.boot_volume_size_gib
    kms_key_id              = var.boot_volume_kms_key_id
  }

  dynamic "shape_config" {
    for_each = local.flexible ? [1] : []
    content {
      ocpus         = var.ocpus
      memory_in_gbs = var.memory_gib
    }
  }

  dynamic "preemptible_instance_config" {
    for_each = var.preemptible ? [1] : []
    content {
      preemption_action {
        type                 = "TERMINATE"
        preserve_boot_volume = false
      }
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.violations) == 0
      error_message = "The OCI machine refuses these inputs: ${join("; ", local.violations)}."
    }
  }
}

locals {
  # Attribute by attribute: a function over the whole instance would carry
  # the metadata's sensitivity to every output.
  instance_gone = length(oci_core_instance.node_instance) == 0
  instance = local.instance_gone ? null : {
    id         = oci_core_instance.node_instance[0].id
    state      = oci_core_instance.node_instance[0].state
    private_ip = oci_core_instance.node_instance[0].private_ip
    public_ip  = oci_core_instance.node_instance[0].public_ip
  }
  api = try(local.exports.api, null)
  # listener => {backend_set_name, port}: every backend set of the cluster's
  # load balancer; none with a user endpoint or for a worker.
  api_backends = var.control_plane && local.api != null ? {
    for key in ["kube_apiserver", "rke2_supervisor"] : key => {
      backend_set_name = local.api[key].backend_set_name
      port             = local.api[key].port
    } if try(local.api[key].backend_set_name, null) != null
  } : {}
}

# In the machine's own state, so destroying the machine deregisters it. The
# provider creates the instance once it is RUNNING, so the backend follows
# within the load balancer's work request, before kubeadm finishes.
resource "oci_network_load_balancer_backend" "api_backends" {
  for_each = local.api_backends

  network_load_balancer_id = local.api.network_load_balancer_id
  backend_set_name         = each.value.backend_set_name
  port                     = each.value.port
  target_id                = oci_core_instance.node_instance[0].id
  is_backup                = false
  is_drain                 = false
  is_offline               = false
  weight                   = 1
}
