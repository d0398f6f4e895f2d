# Bootstrap delivery as the instances receive it: the instance
# configuration's metadata for a cloud-config and an Ignition payload, and the
# 32,000-byte limit OCI puts on instance metadata.

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

run "cloud_config_reaches_the_instances_as_mime_with_the_labels_boothook" {
  command = plan

  variables {
    node_labels = { tier = "batch", "node-role.kubernetes.io/worker" = "", "node.kubernetes.io/pool" = "workers" }
  }

  assert {
    condition     = startswith(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "Content-Type: multipart/mixed; boundary=\"==CAPTF-BOUNDARY==\"\n")
    error_message = "the user data is a MIME multipart message"
  }
  assert {
    condition     = strcontains(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "Content-Type: text/cloud-boothook; charset=\"utf-8\"")
    error_message = "its first part is the boothook"
  }
  assert {
    condition     = strcontains(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "labels='node.kubernetes.io/pool=workers,tier=batch'")
    error_message = "the boothook sets the kept labels, sorted"
  }
  assert {
    condition     = strcontains(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "Content-Type: text/plain; charset=\"utf-8\"\nContent-Disposition: attachment; filename=\"bootstrap\"\nContent-Transfer-Encoding: base64\n\nI2Nsb3VkLWNvbmZpZwo=\n")
    error_message = "the payload is the second part, its base64 untouched"
  }
  assert {
    condition     = output.dropped_node_labels == tolist(["node-role.kubernetes.io/worker"])
    error_message = "got ${jsonencode(output.dropped_node_labels)}"
  }
  assert {
    condition     = nonsensitive(keys(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata)) == tolist(["user_data"])
    error_message = "without SSH keys the metadata holds the user data only"
  }
}

run "a_gzipped_cloud_config_is_sent_as_gzip" {
  command = plan

  variables {
    bootstrap_data = "H4sIAAAAAAAAA1NOzskvTdFNzs9Ly0znAgAFVrO4DgAAAA=="
  }

  assert {
    condition     = strcontains(base64decode(nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data)), "Content-Type: application/x-gzip\nContent-Disposition: attachment; filename=\"bootstrap\"\nContent-Transfer-Encoding: base64\n\nH4sI")
    error_message = "a gzip payload is marked application/x-gzip"
  }
}

run "ignition_reaches_the_instances_unchanged" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    node_labels      = { "node-role.kubernetes.io/worker" = "" }
  }

  assert {
    condition     = nonsensitive(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata.user_data) == "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    error_message = "Ignition is passed through as it came"
  }
  assert {
    condition     = output.dropped_node_labels == tolist(["node-role.kubernetes.io/worker"])
    error_message = "a label NodeRestriction forbids is only reported, so it does not refuse Ignition"
  }
}

run "payloads" {
  # Payloads too long to write out here (run blocks may not call functions);
  # an apply makes the fixture's outputs readable to the runs below.
  command = apply
  module {
    source = "./tests/fixtures"
  }
}

run "metadata_of_exactly_32000_bytes_is_accepted" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = run.payloads.ignition_metadata_32000
  }

  assert {
    condition     = length(nonsensitive(jsonencode(oci_core_instance_configuration.pool_instance_configuration.instance_details[0].launch_details[0].metadata))) == 32000
    error_message = "the instance configuration carries the whole 32,000 bytes"
  }
}

run "metadata_over_32000_bytes_is_refused" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = run.payloads.ignition_metadata_32004
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = module.logic.violations == tolist(["instance metadata is 32004 bytes, over OCI's 32000"])
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}

run "the_boothook_counts_toward_the_limit" {
  command = plan

  variables {
    # 31,984 characters of base64 would fit alone; wrapped with the boothook
    # they do not.
    bootstrap_data = run.payloads.cloud_config_31984
  }

  expect_failures = [oci_core_instance_configuration.pool_instance_configuration]

  assert {
    condition     = length(module.logic.violations) == 1 && startswith(module.logic.violations[0], "instance metadata is ")
    error_message = "got ${jsonencode(module.logic.violations)}"
  }
}
