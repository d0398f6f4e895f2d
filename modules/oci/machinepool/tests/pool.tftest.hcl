# The whole module against a mocked oracle/oci provider (its real schema, no
# cloud): which pool exists in each mode, what it and its instance
# configuration are built from, the autoscaling configuration, and where the
# pool places its instances.

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

run "fixed_pool_at_replicas" {
  command = plan

  assert {
    condition     = length(oci_core_instance_pool.fixed_instance_pool) == 1 && length(oci_core_instance_pool.autoscaled_instance_pool) == 0
    error_message = "autoscaling off: the fixed pool and only it"
  }
  assert {
    condition     = length(oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration) == 0
    error_message = "autoscaling off: no autoscaling configuration"
  }
  assert {
    condition     = oci_core_instance_pool.fixed_instance_pool[0].size == 3
    error_message = "the fixed pool is sized to replicas, got ${oci_core_instance_pool.fixed_instance_pool[0].size}"
  }
  assert {
    condition     = oci_core_instance_pool.fixed_instance_pool[0].instance_configuration_id == oci_core_instance_configuration.pool_instance_configuration.id
    error_message = "the pool launches from the module's instance configuration"
  }
  assert {
    condition = alltrue([for tags in [
      oci_core_instance_pool.fixed_instance_pool[0].freeform_tags,
      oci_core_instance_configuration.pool_instance_configuration.freeform_tags,
      oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].freeform_tags,
      oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].create_vnic_details[0].freeform_tags,
    ] : tags == tomap({ "captf_io/cluster" = "prod", "captf_io/kind" = "TerraformMachinePool" })])
    error_message = "the pool, the configuration, the instances and their VNICs carry the contract tags, keys mapped"
  }
  assert {
    condition     = oci_core_instance_pool.fixed_instance_pool[0].defined_tags == tomap({ "Ops.CostCenter" = "42" }) && oci_core_instance_pool.fixed_instance_pool[0].compartment_id == "ocid1.compartment.oc1..c"
    error_message = "the pool lives in the exported compartment with the exported defined tags"
  }
  assert {
    condition     = startswith(oci_core_instance_pool.fixed_instance_pool[0].display_name, "captf-team-a-prod-workers-") && oci_core_instance_pool.fixed_instance_pool[0].display_name == oci_core_instance_configuration.pool_instance_configuration.display_name
    error_message = "got ${oci_core_instance_pool.fixed_instance_pool[0].display_name}"
  }
  assert {
    condition     = output.provider_id == oci_core_instance_pool.fixed_instance_pool[0].id
    error_message = "provider_id is the pool's OCID"
  }
  assert {
    condition     = terraform_data.kubernetes_version_roll.input == "v1.33.1" && terraform_data.kubernetes_version_roll.triggers_replace == "v1.33.1"
    error_message = "the version roll holds the version verbatim"
  }
}

run "instances_launch_as_workers" {
  command = plan

  variables {
    additional_nsg_ids  = ["ocid1.nsg.oc1..extra"]
    ssh_authorized_keys = ["ssh-ed25519 AAAA one", "ssh-ed25519 AAAA two"]
    preemptible         = true
  }

  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].shape == "VM.Standard.E5.Flex"
    error_message = "default shape"
  }
  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].shape_config[0].ocpus == 2 && oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].shape_config[0].memory_in_gbs == 16
    error_message = "a flexible shape gets its OCPUs and memory"
  }
  assert {
    condition = (
      oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].source_details[0].image_id == "ocid1.image.oc1.iad.node"
      && oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].source_details[0].boot_volume_size_in_gbs == "100"
    )
    error_message = "the image and the boot volume size"
  }
  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].create_vnic_details[0].nsg_ids == toset(["ocid1.nsg.oc1..workers", "ocid1.nsg.oc1..extra"])
    error_message = "the worker NSG, then the additional ones"
  }
  assert {
    condition = (
      oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..workers"
      && oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].create_vnic_details[0].assign_public_ip == false
    )
    error_message = "the worker subnet, no public IP"
  }
  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].instance_options[0].are_legacy_imds_endpoints_disabled
    error_message = "legacy IMDS endpoints are off"
  }
  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].preemptible_instance_config[0].preemption_action[0].type == "TERMINATE"
    error_message = "preemptible capacity terminates on preemption"
  }
  assert {
    condition     = nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.ssh_authorized_keys) == "ssh-ed25519 AAAA one\nssh-ed25519 AAAA two"
    error_message = "the SSH keys, one per line"
  }
}

run "a_fixed_shape_gets_no_shape_config" {
  command = plan

  variables {
    shape = "VM.Standard2.4"
  }

  assert {
    condition     = length(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].shape_config) == 0
    error_message = "OCPUs and memory are only for .Flex shapes"
  }
}

run "autoscaled_pool_inside_the_annotation_bounds" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 2, max = 10 }
    autoscaled  = true
    replicas    = 4
  }

  assert {
    condition     = length(oci_core_instance_pool.autoscaled_instance_pool) == 1 && length(oci_core_instance_pool.fixed_instance_pool) == 0
    error_message = "autoscaling on: the autoscaled pool and only it"
  }
  assert {
    condition     = oci_core_instance_pool.autoscaled_instance_pool[0].size == 4
    error_message = "the autoscaled pool is created at replicas, the observed size"
  }
  assert {
    condition = (
      oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].auto_scaling_resources[0].id == oci_core_instance_pool.autoscaled_instance_pool[0].id
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].auto_scaling_resources[0].type == "instancePool"
    )
    error_message = "the autoscaling configuration scales the autoscaled pool"
  }
  assert {
    condition = (
      oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].min == 2
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].max == 10
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].capacity[0].initial == 4
    )
    error_message = "capacity is the annotations' bounds, starting at replicas"
  }
  assert {
    condition = (
      oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].policy_type == "threshold"
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].cool_down_in_seconds == 300
      && oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].is_enabled
    )
    error_message = "a CPU threshold policy with OCI's minimum cool-down"
  }
  assert {
    condition = {
      for rule in oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0].policies[0].rules :
      rule.display_name => [rule.action[0].value, rule.metric[0].threshold[0].operator, rule.metric[0].threshold[0].value, rule.metric[0].pending_duration]
      } == {
      scale-out = [1, "GT", 70, "PT3M"]
      scale-in  = [-1, "LT", 30, "PT3M"]
    }
    error_message = "one instance out above 70% CPU, one in below 30%"
  }
}

run "failure_domains_become_one_placement_per_availability_domain" {
  command = plan

  variables {
    failure_domains = ["ad2-fd2", "ad1", "ad2-fd1"]
  }

  assert {
    condition = jsonencode([
      for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations :
      [p.availability_domain, p.fault_domains, p.primary_vnic_subnets[0].subnet_id]
      ]) == jsonencode([
      ["Uocm:IAD-AD-1", [], "ocid1.subnet.oc1..workers"],
      ["Uocm:IAD-AD-2", ["FAULT-DOMAIN-1", "FAULT-DOMAIN-2"], "ocid1.subnet.oc1..workers"],
    ])
    error_message = "AD-1 spread over its fault domains, AD-2 on the two named ones"
  }
  assert {
    # Unset in the configuration; the mock reports an unset computed list
    # as [] above.
    condition     = module.logic.placements[0].fault_domains == null
    error_message = "a whole availability domain leaves fault_domains unset"
  }
}

run "without_pool_domains_the_cluster_ones_then_every_exported_one" {
  command = plan

  variables {
    cluster_failure_domains = ["ad3-fd1"]
    subnet_id               = "ocid1.subnet.oc1..own"
  }

  assert {
    condition = jsonencode([
      for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations :
      [p.availability_domain, p.fault_domains, p.primary_vnic_subnets[0].subnet_id]
    ]) == jsonencode([["Uocm:IAD-AD-3", ["FAULT-DOMAIN-1"], "ocid1.subnet.oc1..own"]])
    error_message = "the cluster's failure domains, on the pool's own subnet"
  }
  assert {
    condition     = oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..own"
    error_message = "the VNICs use subnet_id too"
  }
}
