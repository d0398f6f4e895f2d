# The instance: what it is launched with by role, its bootstrap data, its
# registration with the API load balancer, and the inputs it refuses.

mock_provider "oci" {}

variables {
  captf_contract = "v1alpha1"
  captf_cluster  = { name = "prod", namespace = "team-a" }
  captf_object   = { kind = "TerraformMachine", name = "prod-md-0-7xk2p", namespace = "team-a" }
  captf_tags     = { "captf.io/cluster" = "prod", "captf.io/kind" = "TerraformMachine" }
  captf_cluster_outputs = {
    schema                     = "captf.io/oci-cluster/v1"
    region                     = "us-ashburn-1"
    compartment_id             = "ocid1.compartment.oc1..c"
    vcn_id                     = "ocid1.vcn.oc1..v"
    control_plane_subnet_id    = "ocid1.subnet.oc1..cp"
    worker_subnet_id           = "ocid1.subnet.oc1..workers"
    control_plane_nsg_id       = "ocid1.networksecuritygroup.oc1..cp"
    worker_nsg_id              = "ocid1.networksecuritygroup.oc1..workers"
    node_defined_tags          = { "captf.cluster" = "team-a/prod" }
    control_plane_defined_tags = { "captf.cluster" = "team-a/prod/control-plane" }
    failure_domains = {
      FAULT-DOMAIN-1 = { availability_domain = "Uocm:PHX-AD-1", fault_domain = "FAULT-DOMAIN-1" }
      FAULT-DOMAIN-2 = { availability_domain = "Uocm:PHX-AD-1", fault_domain = "FAULT-DOMAIN-2" }
      FAULT-DOMAIN-3 = { availability_domain = "Uocm:PHX-AD-1", fault_domain = "FAULT-DOMAIN-3" }
    }
    api = {
      host                     = "10.0.0.10"
      port                     = 6443
      network_load_balancer_id = "ocid1.networkloadbalancer.oc1..api"
      kube_apiserver           = { backend_set_name = "kube-apiserver", port = 6443 }
    }
  }
  machine_name       = "prod-md-0-7xk2p"
  bootstrap_data     = "I2Nsb3VkLWNvbmZpZwo="
  bootstrap_format   = "cloud-config"
  failure_domain     = null
  kubernetes_version = "v1.33.1"
  control_plane      = false
  image_id           = "ocid1.image.oc1.phx.node"
}

run "a_worker_instance" {
  command = plan

  assert {
    condition = (
      oci_core_instance.node_instance[0].display_name == "prod-md-0-7xk2p"
      && oci_core_instance.node_instance[0].compartment_id == "ocid1.compartment.oc1..c"
      && oci_core_instance.node_instance[0].shape == "VM.Standard.E5.Flex"
      && oci_core_instance.node_instance[0].shape_config[0].ocpus == 2
      && oci_core_instance.node_instance[0].shape_config[0].memory_in_gbs == 16
    )
    error_message = "named after the Machine, in the cluster's compartment, the default shape"
  }
  assert {
    condition = (
      oci_core_instance.node_instance[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..workers"
      && oci_core_instance.node_instance[0].create_vnic_details[0].nsg_ids == toset(["ocid1.networksecuritygroup.oc1..workers"])
      && oci_core_instance.node_instance[0].create_vnic_details[0].assign_public_ip == "false"
    )
    error_message = "the worker subnet and NSG, no public IP"
  }
  assert {
    condition     = oci_core_instance.node_instance[0].defined_tags == tomap({ "captf.cluster" = "team-a/prod" }) && oci_core_instance.node_instance[0].freeform_tags == tomap({ "captf_io/cluster" = "prod", "captf_io/kind" = "TerraformMachine" })
    error_message = "the worker's defined tag, the contract's tags mapped"
  }
  assert {
    condition = (
      oci_core_instance.node_instance[0].source_details[0].source_id == "ocid1.image.oc1.phx.node"
      && oci_core_instance.node_instance[0].source_details[0].boot_volume_size_in_gbs == "100"
      && oci_core_instance.node_instance[0].is_pv_encryption_in_transit_enabled
      && oci_core_instance.node_instance[0].preserve_boot_volume == false
      && oci_core_instance.node_instance[0].instance_options[0].are_legacy_imds_endpoints_disabled
    )
    error_message = "the image on a 100 GiB boot volume that goes with the instance; metadata v1 off"
  }
  assert {
    condition     = nonsensitive(oci_core_instance.node_instance[0].metadata) == tomap({ user_data = "I2Nsb3VkLWNvbmZpZwo=" })
    error_message = "the bootstrap data unchanged as user data, no SSH key"
  }
  assert {
    condition     = length(oci_network_load_balancer_backend.api_backends) == 0
    error_message = "a worker registers in no backend set"
  }
}

run "a_control_plane_instance_registers_with_the_load_balancer" {
  variables {
    machine_name  = "prod-control-plane-abcde"
    control_plane = true
  }

  # What OCI reports for the instance once it runs.
  override_resource {
    target = oci_core_instance.node_instance
    values = { id = "ocid1.instance.oc1..node", state = "RUNNING", private_ip = "10.0.0.5", public_ip = "" }
  }

  assert {
    condition = (
      oci_core_instance.node_instance[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..cp"
      && oci_core_instance.node_instance[0].create_vnic_details[0].nsg_ids == toset(["ocid1.networksecuritygroup.oc1..cp"])
      && oci_core_instance.node_instance[0].defined_tags == tomap({ "captf.cluster" = "team-a/prod/control-plane" })
    )
    error_message = "the control-plane subnet, NSG and the tag the dynamic group matches"
  }
  assert {
    condition = {
      for k, b in oci_network_load_balancer_backend.api_backends : k => [b.network_load_balancer_id, b.backend_set_name, b.port, b.target_id]
    } == { kube_apiserver = ["ocid1.networkloadbalancer.oc1..api", "kube-apiserver", 6443, "ocid1.instance.oc1..node"] }
    error_message = "the instance in the kube-apiserver backend set"
  }
  assert {
    condition     = output.provider_id == "oci://ocid1.instance.oc1..node"
    error_message = "got ${output.provider_id}"
  }
}

run "rke2_registers_in_both_backend_sets" {
  command = plan

  variables {
    control_plane = true
    captf_cluster_outputs = {
      schema                  = "captf.io/oci-cluster/v1"
      region                  = "us-ashburn-1"
      compartment_id          = "ocid1.compartment.oc1..c"
      control_plane_subnet_id = "ocid1.subnet.oc1..cp"
      control_plane_nsg_id    = "ocid1.networksecuritygroup.oc1..cp"
      failure_domains         = { IAD-AD-1 = { availability_domain = "Uocm:IAD-AD-1" } }
      api = {
        host                     = "10.0.0.10"
        port                     = 6443
        network_load_balancer_id = "ocid1.networkloadbalancer.oc1..api"
        kube_apiserver           = { backend_set_name = "kube-apiserver", port = 6443 }
        rke2_supervisor          = { backend_set_name = "rke2-supervisor", port = 9345 }
      }
    }
  }

  assert {
    condition     = { for k, b in oci_network_load_balancer_backend.api_backends : k => [b.backend_set_name, b.port] } == { kube_apiserver = ["kube-apiserver", 6443], rke2_supervisor = ["rke2-supervisor", 9345] }
    error_message = "one backend per backend set"
  }
  assert {
    condition     = local.defined_tags == null
    error_message = "no defined tag exported, none set"
  }
}

run "a_user_endpoint_has_nothing_to_register_in" {
  command = plan

  variables {
    control_plane = true
    captf_cluster_outputs = {
      schema                  = "captf.io/oci-cluster/v1"
      region                  = "us-ashburn-1"
      compartment_id          = "ocid1.compartment.oc1..c"
      control_plane_subnet_id = "ocid1.subnet.oc1..cp"
      control_plane_nsg_id    = "ocid1.networksecuritygroup.oc1..cp"
      failure_domains         = { IAD-AD-1 = { availability_domain = "Uocm:IAD-AD-1" } }
      api                     = null
    }
  }

  assert {
    condition     = length(oci_network_load_balancer_backend.api_backends) == 0
    error_message = "no load balancer, no backend"
  }
}

run "user_settings" {
  command = plan

  variables {
    shape                  = "VM.Standard2.4"
    public_ip              = true
    subnet_id              = "ocid1.subnet.oc1..own"
    additional_nsg_ids     = ["ocid1.networksecuritygroup.oc1..extra"]
    ssh_authorized_keys    = ["ssh-ed25519 AAAA one", "ssh-ed25519 AAAA two"]
    boot_volume_kms_key_id = "ocid1.key.oc1..k"
    preemptible            = true
  }

  assert {
    condition     = length(oci_core_instance.node_instance[0].shape_config) == 0
    error_message = "OCPUs and memory are only for .Flex shapes"
  }
  assert {
    condition = (
      oci_core_instance.node_instance[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..own"
      && oci_core_instance.node_instance[0].create_vnic_details[0].assign_public_ip == "true"
      && oci_core_instance.node_instance[0].create_vnic_details[0].nsg_ids == toset(["ocid1.networksecuritygroup.oc1..workers", "ocid1.networksecuritygroup.oc1..extra"])
    )
    error_message = "the user's subnet, a public IP, the role's NSG then the extra ones"
  }
  assert {
    condition     = nonsensitive(oci_core_instance.node_instance[0].metadata.ssh_authorized_keys) == "ssh-ed25519 AAAA one\nssh-ed25519 AAAA two"
    error_message = "the SSH keys, one per line"
  }
  assert {
    condition     = oci_core_instance.node_instance[0].source_details[0].kms_key_id == "ocid1.key.oc1..k" && oci_core_instance.node_instance[0].preemptible_instance_config[0].preemption_action[0].type == "TERMINATE"
    error_message = "the vault key; preemptible capacity terminates"
  }
  assert {
    condition     = output.interruptible
    error_message = "a preemptible machine is interruptible"
  }
}

run "ignition_and_gzip_pass_through" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "eyJpZ25pdGlvbiI6e319"
  }

  assert {
    condition     = nonsensitive(oci_core_instance.node_instance[0].metadata.user_data) == "eyJpZ25pdGlvbiI6e319"
    error_message = "Ignition unchanged"
  }
}

run "a_gzipped_ignition_payload_is_refused" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "H4sIAAAAAAAAA6tWKkktLlGyqlYqSy0qzszPU7IyNDLQUcpPS1OyUqoFAHv3Dv4cAAAA"
  }

  expect_failures = [oci_core_instance.node_instance]
}

run "preemptible_control_planes_are_refused" {
  command = plan

  variables {
    control_plane = true
    preemptible   = true
  }

  expect_failures = [oci_core_instance.node_instance]
}

run "payloads" {
  module {
    source = "./tests/fixtures"
  }
}

run "metadata_of_exactly_32000_bytes_is_accepted" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = run.payloads.metadata_32000
  }

  assert {
    condition     = local.metadata_bytes == 32000
    error_message = "got ${local.metadata_bytes}"
  }
}

run "metadata_over_32000_bytes_is_refused" {
  command = plan

  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = run.payloads.metadata_32004
  }

  expect_failures = [oci_core_instance.node_instance]
}

run "exports_of_another_cloud_are_refused" {
  command = plan

  variables {
    captf_cluster_outputs = { schema = "captf.io/aws-cluster/v1", region = "us-east-1" }
  }

  expect_failures = [var.captf_cluster_outputs]
}

run "empty_exports_without_external_ones_are_refused_before_the_provider" {
  command = plan

  module {
    source = "./modules/exports"
  }

  variables {
    cluster_outputs          = {}
    external_cluster_exports = null
    required_keys            = ["region"]
  }

  expect_failures = [output.region]
}

run "external_exports_stand_in_for_an_externally_managed_cluster" {
  command = plan

  variables {
    captf_cluster_outputs = {}
    external_cluster_exports = {
      schema           = "captf.io/oci-cluster/v1"
      region           = "eu-frankfurt-1"
      compartment_id   = "ocid1.compartment.oc1..ext"
      worker_subnet_id = "ocid1.subnet.oc1..ext"
      worker_nsg_id    = "ocid1.networksecuritygroup.oc1..ext"
      failure_domains  = { FRA-AD-1 = { availability_domain = "Uocm:FRA-AD-1" } }
    }
  }

  assert {
    condition     = oci_core_instance.node_instance[0].compartment_id == "ocid1.compartment.oc1..ext" && module.exports.region == "eu-frankfurt-1"
    error_message = "the user's exports"
  }
}

run "external_exports_missing_the_roles_keys_are_refused" {
  command = plan

  module {
    source = "./modules/exports"
  }

  variables {
    cluster_outputs          = {}
    external_cluster_exports = { schema = "captf.io/oci-cluster/v1", region = "eu-frankfurt-1" }
    required_keys            = ["region", "worker_subnet_id"]
  }

  expect_failures = [output.region]
}
