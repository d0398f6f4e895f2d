# The outputs the controller reads, from what OCI reports: the pool's
# members (the data source, overridden) and its size and state (the pool's
# computed attributes, overridden). A member list carries every attribute
# of the provider's schema, as a real read would.

mock_provider "oci" {
  # The pool as OCI reports it unless a run says otherwise.
  mock_resource "oci_core_instance_pool" {
    defaults = {
      id          = "ocid1.instancepool.oc1..pool"
      state       = "RUNNING"
      actual_size = 3
    }
  }
}

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

run "members_sorted_without_departed_instances" {
  override_data {
    target = data.oci_core_instance_pool_instances.pool_members
    values = {
      instances = [
        { id = "ocid1.instance.oc1..c", instance_id = "ocid1.instance.oc1..c", availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-1", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..t1", instance_id = "ocid1.instance.oc1..t1", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-1", state = "Terminating", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..a", instance_id = "ocid1.instance.oc1..a", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-3", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..t2", instance_id = "ocid1.instance.oc1..t2", availability_domain = "Uocm:IAD-AD-2", fault_domain = "FAULT-DOMAIN-2", state = "TERMINATED", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..b", instance_id = "ocid1.instance.oc1..b", availability_domain = "Uocm:IAD-AD-3", fault_domain = "FAULT-DOMAIN-1", state = "Provisioning", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
      ]
    }
  }

  assert {
    condition     = output.provider_id == "ocid1.instancepool.oc1..pool"
    error_message = "got ${jsonencode(output.provider_id)}"
  }
  assert {
    condition     = output.provider_id_list == tolist(["oci://ocid1.instance.oc1..a", "oci://ocid1.instance.oc1..b", "oci://ocid1.instance.oc1..c"])
    error_message = "sorted, whatever the health, without TERMINATING or TERMINATED members: ${jsonencode(output.provider_id_list)}"
  }
  assert {
    condition     = output.replicas == 3
    error_message = "replicas is the pool's actual_size, got ${output.replicas}"
  }
  assert {
    condition = jsonencode(output.instances) == jsonencode([
      { provider_id = "oci://ocid1.instance.oc1..a", instance_id = "ocid1.instance.oc1..a", failure_domain = "ad1", state = "running", addresses = [] },
      { provider_id = "oci://ocid1.instance.oc1..b", instance_id = "ocid1.instance.oc1..b", failure_domain = "ad3-fd1", state = "pending", addresses = [] },
      { provider_id = "oci://ocid1.instance.oc1..c", instance_id = "ocid1.instance.oc1..c", failure_domain = "ad2-fd1", state = "running", addresses = [] },
    ])
    error_message = "got ${jsonencode(output.instances)}"
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy && output.health.reasons == tolist(["InstanceProvisioning:ocid1.instance.oc1..b"])
    error_message = "a member still provisioning keeps the pool running but not healthy: ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.message == "instance pool is RUNNING; 2 of 3 instances running"
    error_message = "got ${output.health.message}"
  }
}

run "the_autoscaler_decides_the_size" {
  variables {
    autoscaling = { enabled = true, min = 2, max = 8 }
    autoscaled  = true
    replicas    = 2
  }

  override_resource {
    target = oci_core_instance_pool.autoscaled_instance_pool
    values = { id = "ocid1.instancepool.oc1..auto", state = "SCALING", actual_size = 5 }
  }
  override_data {
    target = data.oci_core_instance_pool_instances.pool_members
    values = {
      instances = [
        { id = "ocid1.instance.oc1..a", instance_id = "ocid1.instance.oc1..a", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-1", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..b", instance_id = "ocid1.instance.oc1..b", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-2", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..c", instance_id = "ocid1.instance.oc1..c", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-3", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
      ]
    }
  }

  assert {
    condition     = output.provider_id == "ocid1.instancepool.oc1..auto" && output.replicas == 5
    error_message = "the autoscaled pool, at the size OCI reports (not replicas, not the member count): ${jsonencode([output.provider_id, output.replicas])}"
  }
  assert {
    condition     = output.health.state == "running" && !output.health.healthy && output.health.reasons == tolist(["ScalingInProgress"])
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.message == "instance pool is SCALING; 3 of 5 instances running"
    error_message = "got ${output.health.message}"
  }
}

run "a_stopped_member_stops_the_pool" {
  override_data {
    target = data.oci_core_instance_pool_instances.pool_members
    values = {
      instances = [
        { id = "ocid1.instance.oc1..e", instance_id = "ocid1.instance.oc1..e", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-1", state = "CreatingImage", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..g", instance_id = "ocid1.instance.oc1..g", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-2", state = "Running", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
        { id = "ocid1.instance.oc1..f", instance_id = "ocid1.instance.oc1..f", availability_domain = "Uocm:IAD-AD-1", fault_domain = "FAULT-DOMAIN-3", state = "Stopped", display_name = "", compartment_id = "ocid1.compartment.oc1..c", instance_configuration_id = "ocid1.instanceconfiguration.oc1..ic", instance_pool_id = "ocid1.instancepool.oc1..pool", region = "iad", shape = "VM.Standard.E5.Flex", time_created = "", auto_terminate_instance_on_delete = false, decrement_size_on_delete = true, load_balancer_backends = [] },
      ]
    }
  }

  assert {
    condition     = output.health.state == "stopped" && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.health.reasons == tolist(["InstanceCreatingImage:ocid1.instance.oc1..e", "InstanceStopped:ocid1.instance.oc1..f"])
    error_message = "got ${jsonencode(output.health.reasons)}"
  }
  assert {
    condition     = [for i in output.instances : i.state] == ["unknown", "stopped", "running"]
    error_message = "got ${jsonencode(output.instances)}"
  }
}

run "a_pool_without_members_yet" {
  override_data {
    target = data.oci_core_instance_pool_instances.pool_members
    values = { instances = [] }
  }

  assert {
    condition     = output.health.state == "pending" && output.health.reasons == tolist(["NoMembers"]) && length(output.provider_id_list) == 0
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "a_terminated_pool_is_not_found" {
  override_resource {
    target = oci_core_instance_pool.fixed_instance_pool
    values = { id = "ocid1.instancepool.oc1..gone", state = "TERMINATED", actual_size = 0 }
  }
  override_data {
    target = data.oci_core_instance_pool_instances.pool_members
    values = { instances = [] }
  }

  assert {
    condition     = output.health.state == "terminated" && output.health.reasons == tolist(["PoolNotFound"]) && output.health.message == "instance pool not found"
    error_message = "got ${jsonencode(output.health)}"
  }
}
