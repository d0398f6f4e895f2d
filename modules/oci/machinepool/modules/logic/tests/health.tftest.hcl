# Pool health, one run per situation of the module's health table, in the
# shared precedence: gone pool, empty pool, no members, problem members,
# then running (healthy only at full size with nothing starting).

variables {
  namespace                = "team-a"
  cluster_name             = "prod"
  pool_name                = "workers"
  captf_tags               = {}
  additional_tags          = {}
  cluster_outputs          = { schema = "captf.io/oci-cluster/v1", region = "us-ashburn-1", compartment_id = "ocid1.compartment.oc1..c", worker_subnet_id = "ocid1.subnet.oc1..s", worker_nsg_id = "ocid1.nsg.oc1..n", failure_domains = { fd1 = { availability_domain = "AD-1" } } }
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
}

run "pool_absent_from_state_is_terminated" {
  command = plan
  variables {
    pool    = null
    members = []
  }
  assert {
    condition     = output.health.state == "terminated" && output.health.healthy == false
    error_message = "a pool missing from state must read terminated, got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["PoolNotFound"]) && output.health.message == "instance pool not found"
    error_message = "reasons/message: ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.replicas == 0 && length(output.provider_id_list) == 0
    error_message = "no pool has no size and no members"
  }
}

run "pool_terminating_is_terminated_even_with_members" {
  command = plan
  variables {
    pool    = { state = "TERMINATING", actual_size = 2 }
    members = [{ id = "ocid1.instance.a", state = "Running" }, { id = "ocid1.instance.b", state = "Running" }]
  }
  assert {
    condition     = output.health.state == "terminated" && output.health.reasons == tolist(["PoolNotFound"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "pool_terminated_is_terminated" {
  command = plan
  variables {
    pool    = { state = "Terminated", actual_size = 0 }
    members = []
  }
  assert {
    condition     = output.health.state == "terminated" && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "size_zero_is_running_and_healthy" {
  command = plan
  variables {
    pool    = { state = "RUNNING", actual_size = 0 }
    members = []
  }
  assert {
    condition     = output.health.state == "running" && output.health.healthy && length(output.health.reasons) == 0
    error_message = "an empty pool by design is healthy, got ${jsonencode(output.health)}"
  }
}

run "no_members_is_pending" {
  command = plan
  variables {
    pool    = { state = "SCALING", actual_size = 3 }
    members = [{ id = "ocid1.instance.gone", state = "TERMINATED" }]
  }
  assert {
    condition     = output.health.state == "pending" && !output.health.healthy && output.health.reasons == tolist(["NoMembers"])
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.message == "instance pool is SCALING; 0 of 3 instances running"
    error_message = "message: ${output.health.message}"
  }
}

run "provisioning_member_among_running_ones_keeps_the_pool_running" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.b", state = "Provisioning" },
      { id = "ocid1.instance.a", state = "Running" },
    ]
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceProvisioning:ocid1.instance.b"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
  assert {
    condition     = output.health.message == "instance pool is RUNNING; 1 of 2 instances running"
    error_message = "message: ${output.health.message}"
  }
}

run "only_starting_members_read_running_not_pending" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.a", state = "Starting" },
      { id = "ocid1.instance.b", state = "PROVISIONING" },
    ]
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy
    error_message = "starting members never make the pool pending, got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceStarting:ocid1.instance.a", "InstanceProvisioning:ocid1.instance.b"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
}

run "creating_image_member_in_member_list_spelling_is_unknown" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.a", state = "Running" },
      { id = "ocid1.instance.b", state = "CreatingImage" },
    ]
  }
  assert {
    condition     = output.health.state == "unknown" && output.health.reasons == tolist(["InstanceCreatingImage:ocid1.instance.b"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "creating_image_member_in_oci_spelling_is_unknown" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.a", state = "Running" },
      { id = "ocid1.instance.b", state = "CREATING_IMAGE" },
    ]
  }
  assert {
    condition     = output.health.state == "unknown" && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceCreatingImage:ocid1.instance.b"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
}

run "stopping_and_stopped_members_are_stopped" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 3 }
    members = [
      { id = "ocid1.instance.c", state = "Stopped" },
      { id = "ocid1.instance.a", state = "Running" },
      { id = "ocid1.instance.b", state = "Stopping" },
    ]
  }
  assert {
    condition     = output.health.state == "stopped" && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceStopping:ocid1.instance.b", "InstanceStopped:ocid1.instance.c"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
}

run "any_other_member_state_is_unknown" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.a", state = "Running" },
      { id = "ocid1.instance.b", state = "Rebooting" },
    ]
  }
  assert {
    condition     = output.health.state == "unknown" && output.health.reasons == tolist(["UnknownState:ocid1.instance.b"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "member_without_state_is_unknown" {
  command = plan
  variables {
    pool    = { state = "RUNNING", actual_size = 1 }
    members = [{ id = "ocid1.instance.a" }]
  }
  assert {
    condition     = output.health.state == "unknown" && output.health.reasons == tolist(["UnknownState:ocid1.instance.a"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "stopped_outranks_unknown_and_every_problem_member_is_named" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 4 }
    members = [
      { id = "ocid1.instance.d", state = "Provisioning" },
      { id = "ocid1.instance.c", state = "Stopped" },
      { id = "ocid1.instance.b", state = "CREATING_IMAGE" },
      { id = "ocid1.instance.a", state = "Running" },
    ]
  }
  assert {
    condition     = output.health.state == "stopped"
    error_message = "stopped is worse than unknown, got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceCreatingImage:ocid1.instance.b", "InstanceStopped:ocid1.instance.c"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
}

run "fewer_members_than_the_size_is_scaling" {
  command = plan
  variables {
    pool = { state = "SCALING", actual_size = 3 }
    members = [
      { id = "ocid1.instance.b", state = "Running" },
      { id = "ocid1.instance.a", state = "Moving" },
    ]
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy && output.health.reasons == tolist(["ScalingInProgress"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "scaling_reason_comes_before_starting_members" {
  command = plan
  variables {
    pool = { state = "SCALING", actual_size = 3 }
    members = [
      { id = "ocid1.instance.b", state = "Starting" },
      { id = "ocid1.instance.a", state = "Running" },
    ]
  }
  assert {
    condition     = output.health.reasons == tolist(["ScalingInProgress", "InstanceStarting:ocid1.instance.b"])
    error_message = "reasons: ${jsonencode(output.health.reasons)}"
  }
}

run "more_members_than_the_size_is_scaling_too" {
  command = plan
  variables {
    pool = { state = "SCALING", actual_size = 1 }
    members = [
      { id = "ocid1.instance.b", state = "Running" },
      { id = "ocid1.instance.a", state = "Running" },
    ]
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy && output.health.reasons == tolist(["ScalingInProgress"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "running_and_moving_members_at_full_size_are_healthy" {
  command = plan
  variables {
    pool = { state = "RUNNING", actual_size = 2 }
    members = [
      { id = "ocid1.instance.b", state = "Moving" },
      { id = "ocid1.instance.a", state = "running" },
    ]
  }
  assert {
    condition     = output.health.state == "running" && output.health.healthy && length(output.health.reasons) == 0
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.message == "instance pool is RUNNING; 2 of 2 instances running"
    error_message = "message: ${output.health.message}"
  }
}
