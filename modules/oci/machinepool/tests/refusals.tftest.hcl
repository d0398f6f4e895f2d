# Every input the module cannot honour stops the plan at the instance
# configuration's precondition, before any pool is touched, all of them named
# at once. Unusable exports are refused earlier, by the logic module's region
# output, before the provider is configured: that refusal is a module check
# `expect_failures` cannot name, so crates/lint/tests/oci_module.rs plans it
# with the real provider.

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

run "autoscaling_on_while_autoscaled_is_false" {
  command = plan

  variables {
    autoscaling = { enabled = true, min = 2, max = 5 }
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["autoscaled is false but the MachinePool's autoscaling is on: set autoscaled = true to switch modes, which replaces the pool and every instance"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "autoscaled_while_autoscaling_is_off" {
  command = plan

  variables {
    autoscaled = true
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["autoscaled is true but the MachinePool's autoscaling is off: set autoscaled = false to switch modes, which replaces the pool and every instance"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "autoscaling_down_to_zero_or_with_crossed_thresholds" {
  command = plan

  variables {
    autoscaling                       = { enabled = true, min = 0, max = 4 }
    autoscaled                        = true
    autoscaling_scale_in_cpu_percent  = 80
    autoscaling_scale_out_cpu_percent = 60
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition = module.logic.violations == tolist([
      "the autoscaler's minimum must be at least 1: scaling an OCI pool to 0 is not supported by this module",
      "autoscaling_scale_in_cpu_percent (80) must be below autoscaling_scale_out_cpu_percent (60)",
    ])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "an_unknown_failure_domain" {
  command = plan

  variables {
    failure_domains = ["ad1", "ad7"]
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["unknown failure domains ad7; the cluster exports ad1, ad2-fd1, ad2-fd2, ad3-fd1"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "ignition_with_node_labels" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    node_labels      = { tier = "batch", "node-role.kubernetes.io/worker" = "" }
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["node labels need a cloud-config bootstrap: Ignition cannot carry them (tier)"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "gzipped_ignition" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "H4sIAAAAAAACA6tWKkpNzi9KUbJSKs8vyklRqgUAXq4WvBYAAAA="
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["a gzipped Ignition payload cannot be delivered"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}
