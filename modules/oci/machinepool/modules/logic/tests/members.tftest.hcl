# The member list: who counts as a member, in which order, and where each
# one is, as the module reports it to the controller.

variables {
  namespace       = "team-a"
  cluster_name    = "prod"
  pool_name       = "workers"
  captf_tags      = {}
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
    }
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
  pool                     = { state = "RUNNING", actual_size = 4 }
}

run "membership_excludes_terminating_and_terminated" {
  command = plan
  variables {
    members = [
      { id = "ocid1.instance.d", state = "Terminating" },
      { id = "ocid1.instance.c", state = "Running" },
      { id = "ocid1.instance.b", state = "TERMINATED" },
      { id = "ocid1.instance.a", state = "Running" },
    ]
  }
  assert {
    condition     = output.provider_id_list == tolist(["oci://ocid1.instance.a", "oci://ocid1.instance.c"])
    error_message = "got ${jsonencode(output.provider_id_list)}"
  }
  assert {
    condition     = [for i in output.instances : i.instance_id] == ["ocid1.instance.a", "ocid1.instance.c"]
    error_message = "instances: ${jsonencode(output.instances)}"
  }
}

run "membership_keeps_unhealthy_members" {
  command = plan
  variables {
    members = [
      { id = "ocid1.instance.c", state = "Stopped" },
      { id = "ocid1.instance.b", state = "Provisioning" },
      { id = "ocid1.instance.a", state = "Rebooting" },
      { id = "ocid1.instance.e", state = "CreatingImage" },
    ]
  }
  assert {
    condition = output.provider_id_list == tolist([
      "oci://ocid1.instance.a", "oci://ocid1.instance.b", "oci://ocid1.instance.c", "oci://ocid1.instance.e",
    ])
    error_message = "every non-departed member is listed whatever its health, got ${jsonencode(output.provider_id_list)}"
  }
  assert {
    condition     = [for i in output.instances : i.state] == ["unknown", "pending", "stopped", "unknown"]
    error_message = "member states: ${jsonencode(output.instances)}"
  }
}

run "members_are_sorted_and_listed_once" {
  command = plan
  variables {
    members = [
      { id = "ocid1.instance.oc1.iad.bbb", state = "Running" },
      { id = "ocid1.instance.oc1.iad.aaa", state = "Running" },
      { id = "ocid1.instance.oc1.iad.bbb", state = "Running" },
      { id = "ocid1.instance.oc1.iad.ab", state = "Running" },
    ]
  }
  assert {
    condition = output.provider_id_list == tolist([
      "oci://ocid1.instance.oc1.iad.aaa", "oci://ocid1.instance.oc1.iad.ab", "oci://ocid1.instance.oc1.iad.bbb",
    ])
    error_message = "got ${jsonencode(output.provider_id_list)}"
  }
  assert {
    condition     = tolist([for i in output.instances : i.provider_id]) == output.provider_id_list
    error_message = "instances follow the same order"
  }
}

run "instances_carry_ids_state_and_no_addresses" {
  command = plan
  variables {
    members = [{ id = "ocid1.instance.a", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-3", state = "Running" }]
  }
  assert {
    condition = output.instances == [{
      provider_id    = "oci://ocid1.instance.a"
      instance_id    = "ocid1.instance.a"
      failure_domain = "ad1"
      state          = "running"
      addresses      = []
    }]
    error_message = "got ${jsonencode(output.instances)}"
  }
}

run "failure_domain_is_mapped_back_from_availability_and_fault_domain" {
  command = plan
  variables {
    members = [
      { id = "ocid1.instance.a", availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-2", state = "Running" },
      { id = "ocid1.instance.b", availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-1", state = "Running" },
      { id = "ocid1.instance.c", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-2", state = "Running" },
      # A location no exported failure domain describes maps to nothing.
      { id = "ocid1.instance.d", availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-3", state = "Running" },
      { id = "ocid1.instance.e", state = "Running" },
    ]
  }
  assert {
    condition     = [for i in output.instances : i.failure_domain] == ["ad2-fd2", "ad2-fd1", "ad1", null, null]
    error_message = "got ${jsonencode([for i in output.instances : i.failure_domain])}"
  }
}

run "exact_fault_domain_wins_over_a_whole_availability_domain" {
  command = plan
  variables {
    cluster_outputs = {
      schema           = "captf.io/oci-cluster/v1"
      region           = "us-ashburn-1"
      compartment_id   = "ocid1.compartment.oc1..c"
      worker_subnet_id = "ocid1.subnet.oc1..s"
      worker_nsg_id    = "ocid1.nsg.oc1..n"
      failure_domains = {
        a-whole = { availability_domain = "AD-1" }
        z-fd2   = { availability_domain = "AD-1", fault_domain = "FAULT-DOMAIN-2" }
      }
    }
    members = [
      { id = "ocid1.instance.a", availability_domain = "AD-1", fault_domain = "FAULT-DOMAIN-2", state = "Running" },
      { id = "ocid1.instance.b", availability_domain = "AD-1", fault_domain = "FAULT-DOMAIN-1", state = "Running" },
    ]
  }
  assert {
    condition     = [for i in output.instances : i.failure_domain] == ["z-fd2", "a-whole"]
    error_message = "got ${jsonencode([for i in output.instances : i.failure_domain])}"
  }
}

run "replicas_is_the_pools_actual_size_not_the_running_count" {
  command = plan
  variables {
    pool = { state = "SCALING", actual_size = 5, size = 3 }
    members = [
      { id = "ocid1.instance.a", state = "Running" },
      { id = "ocid1.instance.b", state = "Provisioning" },
    ]
  }
  assert {
    condition     = output.replicas == 5
    error_message = "got ${output.replicas}"
  }
}

run "replicas_falls_back_to_the_configured_size_before_oci_reports_one" {
  command = plan
  variables {
    pool    = { state = "PROVISIONING", size = 3 }
    members = []
  }
  assert {
    condition     = output.replicas == 3
    error_message = "got ${output.replicas}"
  }
}
