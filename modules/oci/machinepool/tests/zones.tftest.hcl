# The zones rule: a pool that names no failure domains of its own takes the
# cluster's zones at its first apply and keeps them, so a later change of
# the cluster's zones never moves its instances.

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
      A = { availability_domain = "Uocm:IAD-AD-1" }
      B = { availability_domain = "Uocm:IAD-AD-2" }
    }
    node_defined_tags = {}
  }
  machinepool_name        = "workers"
  replicas                = 3
  bootstrap_data          = "I2Nsb3VkLWNvbmZpZwo="
  bootstrap_format        = "cloud-config"
  failure_domains         = []
  cluster_failure_domains = ["A", "B"]
  kubernetes_version      = "v1.33.1"
  node_labels             = {}
  autoscaling             = { enabled = false, min = 0, max = 0 }
  image_id                = "ocid1.image.oc1.iad.node"
}

run "the_first_apply_takes_the_clusters_zones_a_and_b" {
  assert {
    condition     = module.logic.failure_domains == tolist(["A", "B"])
    error_message = "got ${jsonencode(module.logic.failure_domains)}"
  }
  assert {
    condition     = [for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations : p.availability_domain] == ["Uocm:IAD-AD-1", "Uocm:IAD-AD-2"]
    error_message = "the pool spreads over A and B"
  }
  assert {
    condition     = module.logic.placements[0].fault_domains == null
    error_message = "a whole availability domain leaves fault_domains unset, not []"
  }
}

run "the_pool_keeps_a_and_b_when_the_clusters_zones_become_b_and_c" {
  variables {
    # The cluster no longer offers A at all.
    captf_cluster_outputs = {
      schema           = "captf.io/oci-cluster/v1"
      region           = "us-ashburn-1"
      compartment_id   = "ocid1.compartment.oc1..c"
      worker_subnet_id = "ocid1.subnet.oc1..workers"
      worker_nsg_id    = "ocid1.nsg.oc1..workers"
      failure_domains = {
        B = { availability_domain = "Uocm:IAD-AD-2" }
        C = { availability_domain = "Uocm:IAD-AD-3" }
      }
      node_defined_tags = {}
    }
    cluster_failure_domains = ["B", "C"]
  }

  assert {
    condition     = module.logic.failure_domains == tolist(["A", "B"])
    error_message = "the zones of the first apply stay; got ${jsonencode(module.logic.failure_domains)}"
  }
  assert {
    condition     = [for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations : p.availability_domain] == ["Uocm:IAD-AD-1", "Uocm:IAD-AD-2"]
    error_message = "the pool's placement did not move"
  }
  assert {
    condition     = jsonencode(terraform_data.cluster_zones_at_first_apply.output) == jsonencode({ A = { availability_domain = "Uocm:IAD-AD-1", fault_domain = null }, B = { availability_domain = "Uocm:IAD-AD-2", fault_domain = null } })
    error_message = "the record is the first apply's; got ${jsonencode(terraform_data.cluster_zones_at_first_apply.output)}"
  }
}

run "failure_domains_of_its_own_still_move_the_pool" {
  variables {
    captf_cluster_outputs = {
      schema           = "captf.io/oci-cluster/v1"
      region           = "us-ashburn-1"
      compartment_id   = "ocid1.compartment.oc1..c"
      worker_subnet_id = "ocid1.subnet.oc1..workers"
      worker_nsg_id    = "ocid1.nsg.oc1..workers"
      failure_domains = {
        B = { availability_domain = "Uocm:IAD-AD-2" }
        C = { availability_domain = "Uocm:IAD-AD-3" }
      }
      node_defined_tags = {}
    }
    cluster_failure_domains = ["B", "C"]
    failure_domains         = ["C"]
  }

  assert {
    condition     = [for p in oci_core_instance_pool.fixed_instance_pool[0].placement_configurations : p.availability_domain] == ["Uocm:IAD-AD-3"]
    error_message = "the MachinePool's own failure domains win"
  }
}
