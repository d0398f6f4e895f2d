# One OCI instance pool per TerraformMachinePool. Every decision that needs no
# cloud (names, tags, placement, bootstrap delivery, membership, health, the
# checks that refuse an apply) lives in ./modules/logic, tested offline.

provider "oci" {
  # Refused by the logic module when the exports are unusable, so the
  # provider never starts without a region.
  region = module.logic.region
  # Tag defaults stamped by OCI would otherwise show as drift on every plan.
  ignore_defined_tags = concat(["Oracle-Tags.CreatedBy", "Oracle-Tags.CreatedOn"], var.ignore_defined_tags)
}

module "logic" {
  source = "./modules/logic"

  namespace                = var.captf_cluster.namespace
  cluster_name             = var.captf_cluster.name
  pool_name                = var.machinepool_name
  captf_tags               = var.captf_tags
  additional_tags          = var.additional_tags
  cluster_outputs          = var.captf_cluster_outputs
  external_cluster_exports = var.external_cluster_exports
  autoscaling_enabled      = var.autoscaling.enabled
  autoscaled               = var.autoscaled
  autoscaling_min          = var.autoscaling.min
  scale_in_cpu_percent     = var.autoscaling_scale_in_cpu_percent
  scale_out_cpu_percent    = var.autoscaling_scale_out_cpu_percent
  failure_domains          = var.failure_domains
  cluster_failure_domains  = var.cluster_failure_domains
  kept_cluster_zones       = terraform_data.cluster_zones_at_first_apply.input
  bootstrap_data           = var.bootstrap_data
  bootstrap_format         = var.bootstrap_format
  node_labels              = var.node_labels
  ssh_authorized_keys      = var.ssh_authorized_keys

  pool = local.pool == null ? null : {
    state       = local.pool.state
    actual_size = local.pool.actual_size
    size        = local.pool.size
  }
  members = [
    for m in try(data.oci_core_instance_pool_instances.pool_members[0].instances, []) : {
      id                  = m.id
      availability_domain = m.availability_domain
      fault_domain        = m.fault_domain
      state               = m.state
    }
  ]
}

locals {
  launch    = module.logic.launch
  subnet_id = var.subnet_id != null ? var.subnet_id : local.launch.worker_subnet_id
  flexible  = endswith(var.shape, ".Flex")

  # At most one of the two pools exists; which one follows the mode.
  pools = concat(oci_core_instance_pool.fixed_instance_pool, oci_core_instance_pool.autoscaled_instance_pool)
  pool  = one(local.pools)
}

# Immutable in OCI: every change (a bootstrap rotation, node labels, the
# image, a shape setting) makes a new one, created before the old one goes,
# and the pool switches to it in place. Running instances are not touched.
# It carries the module's precondition: every input the module cannot honour
# stops the plan here, all of them named at once (unusable exports are
# refused earlier, by the region the provider is configured with).
resource "oci_core_instance_configuration" "pool_instance_configuration" {
  compartment_id = local.launch.compartment_id
  display_name   = local.launch.name_prefix
  freeform_tags  = local.launch.freeform_tags
  defined_tags   = local.launch.defined_tags

  instance_details {
    instance_type = "compute"

    launch_details {
      compartment_id                      = local.launch.compartment_id
      shape                               = var.shape
      metadata                            = module.logic.metadata
      freeform_tags                       = local.launch.freeform_tags
      defined_tags                        = local.launch.defined_tags
      is_pv_encryption_in_transit_enabled = var.pv_encryption_in_transit

      create_vnic_details {
        assign_public_ip = var.public_ip
        subnet_id        = local.subnet_id
        nsg_ids          = concat([local.launch.worker_nsg_id], var.additional_nsg_ids)
        freeform_tags    = local.launch.freeform_tags
        defined_tags     = local.launch.defined_tags
      }

      instance_options {
        are_legacy_imds_endpoints_disabled = true
      }

      source_details {
        source_type             = "image"
        image_id                = var.image_id
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
    }
  }

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = length(module.logic.violations) == 0
      error_message = "The OCI machine pool refuses these inputs: ${join("; ", module.logic.violations)}."
    }
  }
}

# The cluster's zones (name => placement) as they were at the pool's first
# apply. A pool that names no failure domains of its own keeps spreading over
# these, so a later change of the cluster's zones never moves its
# instances; ignore_changes keeps the first record.
resource "terraform_data" "cluster_zones_at_first_apply" {
  input = module.logic.current_cluster_zones

  lifecycle {
    ignore_changes = [input]
  }
}

# Compared verbatim: any change, a "+rke2rN" bump included, replaces the pool.
resource "terraform_data" "kubernetes_version_roll" {
  input            = var.kubernetes_version
  triggers_replace = var.kubernetes_version
}

# The pool at the MachinePool's replicas.
resource "oci_core_instance_pool" "fixed_instance_pool" {
  count = var.autoscaling.enabled ? 0 : 1

  compartment_id            = local.launch.compartment_id
  display_name              = local.launch.name_prefix
  instance_configuration_id = oci_core_instance_configuration.pool_instance_configuration.id
  size                      = var.replicas
  freeform_tags             = local.launch.freeform_tags
  defined_tags              = local.launch.defined_tags

  dynamic "placement_configurations" {
    for_each = local.launch.placements
    content {
      availability_domain = placement_configurations.value.availability_domain
      fault_domains       = placement_configurations.value.fault_domains
      primary_vnic_subnets {
        subnet_id = local.subnet_id
      }
    }
  }

  lifecycle {
    # A version roll brings the new pool up before the old one goes.
    create_before_destroy = true
    replace_triggered_by  = [terraform_data.kubernetes_version_roll]
  }
}

# The pool sized by OCI autoscaling: created at replicas (the observed size),
# then the autoscaler owns `size`.
resource "oci_core_instance_pool" "autoscaled_instance_pool" {
  count = var.autoscaling.enabled ? 1 : 0

  compartment_id            = local.launch.compartment_id
  display_name              = local.launch.name_prefix
  instance_configuration_id = oci_core_instance_configuration.pool_instance_configuration.id
  size                      = var.replicas
  freeform_tags             = local.launch.freeform_tags
  defined_tags              = local.launch.defined_tags

  dynamic "placement_configurations" {
    for_each = local.launch.placements
    content {
      availability_domain = placement_configurations.value.availability_domain
      fault_domains       = placement_configurations.value.fault_domains
      primary_vnic_subnets {
        subnet_id = local.subnet_id
      }
    }
  }

  lifecycle {
    create_before_destroy = true
    replace_triggered_by  = [terraform_data.kubernetes_version_roll]
    ignore_changes        = [size]
  }
}

# CPU threshold scaling within the annotations' bounds. Every policy field
# forces a new configuration; a pool holds one at a time, so the old one goes
# first.
resource "oci_autoscaling_auto_scaling_configuration" "pool_autoscaling_configuration" {
  count = var.autoscaling.enabled ? 1 : 0

  compartment_id       = local.launch.compartment_id
  display_name         = local.launch.name_prefix
  cool_down_in_seconds = var.autoscaling_cool_down_seconds
  is_enabled           = true
  freeform_tags        = local.launch.freeform_tags
  defined_tags         = local.launch.defined_tags

  auto_scaling_resources {
    id   = oci_core_instance_pool.autoscaled_instance_pool[0].id
    type = "instancePool"
  }

  policies {
    display_name = "cpu-threshold"
    policy_type  = "threshold"

    capacity {
      initial = var.replicas
      min     = var.autoscaling.min
      max     = var.autoscaling.max
    }

    rules {
      display_name = "scale-out"
      action {
        type  = "CHANGE_COUNT_BY"
        value = 1
      }
      metric {
        metric_type   = "CPU_UTILIZATION"
        metric_source = "COMPUTE_AGENT"
        # Written out: the service fills it in otherwise and every plan
        # would replace the configuration.
        pending_duration = "PT3M"
        threshold {
          operator = "GT"
          value    = var.autoscaling_scale_out_cpu_percent
        }
      }
    }

    rules {
      display_name = "scale-in"
      action {
        type  = "CHANGE_COUNT_BY"
        value = -1
      }
      metric {
        metric_type      = "CPU_UTILIZATION"
        metric_source    = "COMPUTE_AGENT"
        pending_duration = "PT3M"
        threshold {
          operator = "LT"
          value    = var.autoscaling_scale_in_cpu_percent
        }
      }
    }
  }

  lifecycle {
    # The observed size at creation only; a later one must not replace the
    # configuration.
    ignore_changes = [policies[0].capacity[0].initial]
  }
}

# The pool's members, re-read on every refresh. Counted by the pools in the
# configuration so a destroy or a vanished pool never reads a missing pool.
data "oci_core_instance_pool_instances" "pool_members" {
  count = length(local.pools)

  compartment_id   = local.launch.compartment_id
  instance_pool_id = local.pools[0].id
}
