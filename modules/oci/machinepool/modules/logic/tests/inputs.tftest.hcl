# What the pool is launched with: exports, placement, names and tags, and the
# checks that refuse an apply. A refusal shows here as `violations`; the
# parent's instance configuration turns it into a failed precondition (see
# ../../../tests/refusals.tftest.hcl), except unusable exports, which the
# `region` output refuses before the provider is configured.

variables {
  namespace       = "team-a"
  cluster_name    = "prod"
  pool_name       = "workers"
  captf_tags      = { "captf.io/cluster" = "prod", "captf.io/kind" = "TerraformMachinePool" }
  additional_tags = {}
  cluster_outputs = {
    schema           = "captf.io/oci-cluster/v1"
    region           = "us-ashburn-1"
    compartment_id   = "ocid1.compartment.oc1..c"
    worker_subnet_id = "ocid1.subnet.oc1..s"
    worker_nsg_id    = "ocid1.nsg.oc1..n"
    failure_domains = {
      ad1     = { availability_domain = "Uocm:IAD-AD-1" }
      ad2-fd1 = { availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-1" }
      ad2-fd2 = { availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-2" }
      ad3-fd1 = { availability_domain = "Uocm:IAD-AD-3", fault_domain = "FAULT-DOMAIN-1" }
    }
    node_defined_tags = {}
  }
  external_cluster_exports = null
  autoscaling_enabled      = false
  autoscaled               = false
  autoscaling_min          = 0
  scale_in_cpu_percent     = 30
  scale_out_cpu_percent    = 70
  failure_domains          = []
  cluster_failure_domains  = []
  bootstrap_data           = "I2Nsb3VkLWNvbmZpZwo="
  bootstrap_format         = "cloud-config"
  node_labels              = {}
  ssh_authorized_keys      = []
  pool                     = null
  members                  = []
}

run "valid_inputs_have_no_violations" {
  command = plan
  assert {
    condition     = length(output.violations) == 0
    error_message = "got ${jsonencode(output.violations)}"
  }
  assert {
    condition     = output.launch.compartment_id == "ocid1.compartment.oc1..c" && output.launch.worker_subnet_id == "ocid1.subnet.oc1..s"
    error_message = "launch carries the exports' ids"
  }
  assert {
    condition     = output.defined_tags == null
    error_message = "empty node_defined_tags become null"
  }
}

run "without_requested_domains_the_pool_spreads_over_every_exported_one" {
  command = plan
  assert {
    condition     = output.failure_domains == tolist(["ad1", "ad2-fd1", "ad2-fd2", "ad3-fd1"])
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
  assert {
    condition = output.placements == [
      { availability_domain = "Uocm:IAD-AD-1", fault_domains = null },
      { availability_domain = "Uocm:IAD-AD-2", fault_domains = tolist(["FAULT-DOMAIN-1", "FAULT-DOMAIN-2"]) },
      { availability_domain = "Uocm:IAD-AD-3", fault_domains = tolist(["FAULT-DOMAIN-1"]) },
    ]
    error_message = "got ${jsonencode(output.placements)}"
  }
}

run "cluster_failure_domains_come_before_the_exported_list" {
  command = plan
  variables {
    cluster_failure_domains = ["ad3-fd1", "ad1"]
  }
  assert {
    condition     = output.failure_domains == tolist(["ad1", "ad3-fd1"])
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
}

run "the_cluster_zones_to_record_are_its_failure_domains_with_their_placement" {
  command = plan
  variables {
    cluster_failure_domains = ["ad3-fd1", "ad1", "zone-x"]
  }
  assert {
    condition = output.current_cluster_zones == {
      ad1     = { availability_domain = "Uocm:IAD-AD-1", fault_domain = null }
      ad3-fd1 = { availability_domain = "Uocm:IAD-AD-3", fault_domain = "FAULT-DOMAIN-1" }
    }
    error_message = "got ${jsonencode(output.current_cluster_zones)}"
  }
}

run "kept_zones_outlive_the_clusters_current_ones" {
  command = plan
  variables {
    # Recorded at the first apply; ad9 is no longer exported at all.
    kept_cluster_zones      = { ad1 = { availability_domain = "Uocm:IAD-AD-1" }, ad9 = { availability_domain = "Uocm:IAD-AD-9", fault_domain = "FAULT-DOMAIN-2" } }
    cluster_failure_domains = ["ad2-fd1"]
  }
  assert {
    condition     = output.failure_domains == tolist(["ad1", "ad9"]) && length(output.violations) == 0
    error_message = "got ${jsonencode(output.failure_domains)} ${jsonencode(output.violations)}"
  }
  assert {
    condition = output.placements == [
      { availability_domain = "Uocm:IAD-AD-1", fault_domains = null },
      { availability_domain = "Uocm:IAD-AD-9", fault_domains = tolist(["FAULT-DOMAIN-2"]) },
    ]
    error_message = "got ${jsonencode(output.placements)}"
  }
}

run "own_failure_domains_ignore_the_kept_zones" {
  command = plan
  variables {
    kept_cluster_zones = { ad1 = { availability_domain = "Uocm:IAD-AD-1" } }
    failure_domains    = ["ad2-fd2"]
  }
  assert {
    condition     = output.failure_domains == tolist(["ad2-fd2"])
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
}

run "the_machinepools_failure_domains_win_sorted_and_distinct" {
  command = plan
  variables {
    failure_domains         = ["ad2-fd2", "ad2-fd1", "ad2-fd2"]
    cluster_failure_domains = ["ad1"]
  }
  assert {
    condition     = output.failure_domains == tolist(["ad2-fd1", "ad2-fd2"])
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
  assert {
    condition     = output.placements == [{ availability_domain = "Uocm:IAD-AD-2", fault_domains = tolist(["FAULT-DOMAIN-1", "FAULT-DOMAIN-2"]) }]
    error_message = "got ${jsonencode(output.placements)}"
  }
}

run "unknown_failure_domains_are_refused_by_name" {
  command = plan
  variables {
    failure_domains = ["ad1", "zone-x", "ad9"]
  }
  assert {
    condition     = output.unknown_failure_domains == tolist(["ad9", "zone-x"])
    error_message = "got ${jsonencode(output.unknown_failure_domains)}"
  }
  assert {
    condition     = output.violations == tolist(["unknown failure domains ad9, zone-x; the cluster exports ad1, ad2-fd1, ad2-fd2, ad3-fd1"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "external_cluster_exports_stand_in_for_an_externally_managed_cluster" {
  command = plan
  variables {
    cluster_outputs = {}
    external_cluster_exports = {
      schema            = "captf.io/oci-cluster/v1"
      region            = "eu-frankfurt-1"
      compartment_id    = "ocid1.compartment.oc1..ext"
      worker_subnet_id  = "ocid1.subnet.oc1..ext"
      worker_nsg_id     = "ocid1.nsg.oc1..ext"
      failure_domains   = { fra1 = { availability_domain = "X:FRA-AD-1", fault_domain = "" } }
      node_defined_tags = { "Ops.CostCenter" = "42" }
    }
  }
  assert {
    condition     = length(output.violations) == 0 && output.launch.region == "eu-frankfurt-1"
    error_message = "got ${jsonencode(output.violations)}"
  }
  assert {
    condition     = output.placements == [{ availability_domain = "X:FRA-AD-1", fault_domains = null }]
    error_message = "an empty fault domain means the whole availability domain: ${jsonencode(output.placements)}"
  }
  assert {
    condition     = output.defined_tags == { "Ops.CostCenter" = "42" }
    error_message = "got ${jsonencode(output.defined_tags)}"
  }
}

run "no_exports_at_all_is_refused" {
  command = plan
  variables {
    cluster_outputs = {}
  }
  expect_failures = [output.region]
  assert {
    condition     = contains(output.violations, "the cluster's exports are empty (an externally managed TerraformCluster?): set external_cluster_exports")
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "external_exports_need_the_schema_and_the_ids" {
  command = plan
  variables {
    cluster_outputs          = null
    external_cluster_exports = { region = "eu-frankfurt-1", failure_domains = { a = { availability_domain = "AD" } } }
  }
  expect_failures = [output.region]
  assert {
    condition = output.violations == tolist([
      "external_cluster_exports must carry schema \"captf.io/oci-cluster/v1\"",
      "external_cluster_exports lacks compartment_id, worker_nsg_id, worker_subnet_id",
    ])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "autoscaled_must_match_the_annotations" {
  command = plan
  variables {
    autoscaling_enabled = true
    autoscaling_min     = 2
    autoscaled          = false
  }
  assert {
    condition     = output.violations == tolist(["autoscaled is false but the MachinePool's autoscaling is on: set autoscaled = true to switch modes, which replaces the pool and every instance"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "autoscaled_without_annotations_is_refused_too" {
  command = plan
  variables {
    autoscaled = true
  }
  assert {
    condition     = length(output.violations) == 1 && startswith(output.violations[0], "autoscaled is true but the MachinePool's autoscaling is off")
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "autoscaling_minimum_zero_is_refused" {
  command = plan
  variables {
    autoscaling_enabled = true
    autoscaled          = true
    autoscaling_min     = 0
  }
  assert {
    condition     = output.violations == tolist(["the autoscaler's minimum must be at least 1: scaling an OCI pool to 0 is not supported by this module"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "scale_in_must_stay_below_scale_out" {
  command = plan
  variables {
    autoscaling_enabled   = true
    autoscaled            = true
    autoscaling_min       = 1
    scale_in_cpu_percent  = 70
    scale_out_cpu_percent = 70
  }
  assert {
    condition     = output.violations == tolist(["autoscaling_scale_in_cpu_percent (70) must be below autoscaling_scale_out_cpu_percent (70)"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "autoscaled_pool_with_valid_bounds_is_accepted" {
  command = plan
  variables {
    autoscaling_enabled = true
    autoscaled          = true
    autoscaling_min     = 1
  }
  assert {
    condition     = length(output.violations) == 0
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "contract_tags_are_mapped_and_win_over_user_tags" {
  command = plan
  variables {
    additional_tags = { "captf_io/cluster" = "spoofed", team = "blue" }
  }
  assert {
    condition     = output.freeform_tags == { "captf_io/cluster" = "prod", "captf_io/kind" = "TerraformMachinePool", team = "blue" }
    error_message = "got ${jsonencode(output.freeform_tags)}"
  }
}

run "more_than_ten_tags_are_refused" {
  command = plan
  variables {
    captf_tags = {
      "captf.io/cluster"    = "prod"
      "captf.io/namespace"  = "team-a"
      "captf.io/kind"       = "TerraformMachinePool"
      "captf.io/name"       = "workers"
      "captf.io/managed-by" = "captf"
      "captf.io/template"   = ""
      "captf.io/extra 1"    = "x"
    }
    additional_tags = { a = "1", b = "2", c = "3", d = "4" }
  }
  assert {
    condition     = output.violations == tolist(["11 free-form tags, over OCI's 10 per resource"])
    error_message = "got ${jsonencode(output.violations)}"
  }
  assert {
    condition     = contains(keys(output.freeform_tags), "captf_io/extra_1")
    error_message = "spaces map to underscores: ${jsonencode(keys(output.freeform_tags))}"
  }
}

run "name_prefix_is_lowercase_and_hashed" {
  command = plan
  variables {
    namespace    = "Team-A"
    cluster_name = "Prod"
  }
  assert {
    condition     = output.name_prefix == "captf-team-a-prod-workers-${substr(sha256("Team-A/Prod/workers"), 0, 8)}"
    error_message = "got ${output.name_prefix}"
  }
}

run "long_names_are_cut_to_63_characters_without_a_dangling_dash" {
  command = plan
  variables {
    namespace    = "a-very-long-namespace-name"
    cluster_name = "a-cluster-name-thats-long"
    pool_name    = "pool"
  }
  assert {
    # Cut at 54 characters ("...-thats-"), the trailing dash dropped, then
    # the hash appended.
    condition     = output.name_prefix == "captf-a-very-long-namespace-name-a-cluster-name-thats-${substr(sha256("a-very-long-namespace-name/a-cluster-name-thats-long/pool"), 0, 8)}" && length(output.name_prefix) <= 63
    error_message = "got ${output.name_prefix} (${length(output.name_prefix)})"
  }
}

run "unknown_bootstrap_format_is_refused" {
  command = plan
  variables {
    bootstrap_format = "shell"
  }
  assert {
    condition     = output.violations == tolist(["bootstrap_format must be cloud-config or ignition"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}
