# The lifecycle table, change by change, from a pool in state. The asserts
# here check the planned values; the actions of each plan (in place, new
# before old, no-op) are read from `tofu test -json -verbose` by
# crates/lint/tests/oci_module.rs. A mock cannot know which attributes OCI
# replaces a resource on: that test also plans the same changes with the real
# provider.

mock_provider "oci" {}

variables {
  captf_contract = "v1alpha1"
  captf_cluster  = { name = "prod", namespace = "team-a" }
  captf_object   = { kind = "TerraformMachinePool", name = "workers", namespace = "team-a" }
  captf_tags     = { "captf.io/cluster" = "prod", "captf.io/kind" = "TerraformMachinePool" }
  captf_cluster_outputs = {
    schema           = "captf.io/oci-cluster/v1"
    region           = "us-ashburn-1"
    compartment_id   = "ocid1.compartment.oc1..c"
    worker_subnet_id = "ocid1.subnet.oc1..workers"
    worker_nsg_id    = "ocid1.nsg.oc1..workers"
    failure_domains = {
      ad1     = { availability_domain = "Uocm:IAD-AD-1" }
      ad2-fd1 = { availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-1" }
      ad2-fd2 = { availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-2" }
      ad3-fd1 = { availability_domain = "Uocm:IAD-AD-3", fault_domain = "FAULT-DOMAIN-1" }
    }
    node_defined_tags = { "Ops.CostCenter" = "42" }
  }
  machinepool_name        = "workers"
  replicas                = 3
  bootstrap_data          = "I2Nsb3VkLWNvbmZpZwo="
  bootstrap_format        = "cloud-config"
  failure_domains         = []
  cluster_failure_domains = []
  kubernetes_version      = "v1.33.1"
  node_labels             = {}
  autoscaling             = { enabled = false, min = 0, max = 0 }
  image_id                = "ocid1.image.oc1.iad.node"
}

run "fixed_pool_created" {
  assert {
    condition     = length(oci_core_instance_pool.fixed_instance_pool) == 1
    error_message = "a fixed pool to change"
  }
}

run "replicas_resize_the_fixed_pool" {
  command = plan

  variables {
    replicas = 5
  }

  assert {
    condition     = oci_core_instance_pool.fixed_instance_pool[0].size == 5
    error_message = "got ${oci_core_instance_pool.fixed_instance_pool[0].size}"
  }
}

run "a_version_roll_replaces_the_pool" {
  command = plan

  variables {
    kubernetes_version = "v1.33.1+rke2r1"
  }

  assert {
    condition     = terraform_data.kubernetes_version_roll.triggers_replace == "v1.33.1+rke2r1"
    error_message = "the version is compared verbatim, build metadata included"
  }
}

run "a_bootstrap_rotation_changes_the_instance_configuration" {
  command = plan

  variables {
    bootstrap_data = "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtyb3RhdGVkXQo="
  }

  assert {
    condition     = strcontains(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtyb3RhdGVkXQo=")
    error_message = "the new payload goes into the instance configuration"
  }
  assert {
    condition     = oci_core_instance_pool.fixed_instance_pool[0].instance_configuration_id == oci_core_instance_configuration.pool_instance_configuration.id
    error_message = "the pool follows the instance configuration"
  }
}

run "new_failure_domains_move_the_placement" {
  command = plan

  variables {
    failure_domains = ["ad1", "ad2-fd2"]
  }

  assert {
    condition     = [for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations : p.availability_domain] == ["Uocm:IAD-AD-1", "Uocm:IAD-AD-2"]
    error_message = "got ${jsonencode(oci_core_instance_pool.fixed_instance_pool[0].placement_configurations)}"
  }
}

run "a_mode_switch_is_refused_while_autoscaled_disagrees" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 1, max = 6 }
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]
}

run "a_mode_switch_with_autoscaled_replaces_the_pool" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 1, max = 6 }
    autoscaled  = true
  }

  assert {
    condition     = length(oci_core_instance_pool.fixed_instance_pool) == 0 && oci_core_instance_pool.autoscaled_instance_pool[0].size == 3
    error_message = "the autoscaled pool takes over at the current size"
  }
}

run "autoscaled_pool_created" {
  variables {
    autoscaling = { enabled = true, min = 1, max = 6 }
    autoscaled  = true
  }

  assert {
    condition     = length(oci_core_instance_pool.autoscaled_instance_pool) == 1 && length(oci_core_instance_pool.fixed_instance_pool) == 0
    error_message = "the switch applied"
  }
}

run "replicas_leave_the_autoscaled_pool_alone" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 1, max = 6 }
    autoscaled  = true
    replicas    = 6
  }

  assert {
    condition     = oci_core_instance_pool.autoscaled_instance_pool[0].size == 3
    error_message = "the autoscaler owns the size: ${oci_core_instance_pool.autoscaled_instance_pool[0].size}"
  }
  assert {
    condition     = oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].initial == 3
    error_message = "the initial capacity stays what it was at creation"
  }
}

run "new_bounds_change_the_autoscaling_configuration" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 2, max = 9 }
    autoscaled  = true
  }

  assert {
    condition = (
      oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].min == 2
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].max == 9
    )
    error_message = "the new bounds"
  }
}
