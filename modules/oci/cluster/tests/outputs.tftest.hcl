# The outputs: the exports machines and pools are built from (the keys the
# machine-pool module reads among them), the node identity, and health from
# the load balancer's lifecycle state.

# The operator's network as the listings report it (every attribute of the
# provider's schema, as a mock requires). Subnets: cp, workers and lb are
# regional in VCN v; ad2, ad2-workers and ad3 are confined to one
# availability domain; elsewhere is in another VCN; terminating is not
# AVAILABLE. The region has three availability domains; the tenancy's home
# region is us-phoenix-1.
mock_provider "oci" {
  mock_data "oci_core_subnets" {
    defaults = {
      subnets = [
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "cp", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..cp", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "workers", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..workers", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "lb", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..lb", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-2", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad2", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad2", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-2", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad2-workers", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad2-workers", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-3", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad3", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad3", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "elsewhere", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..elsewhere", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..other", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "terminating", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..terminating", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "TERMINATING", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
      ]
    }
  }
  mock_data "oci_core_vcns" {
    defaults = {
      virtual_networks = [
        { byoipv6cidr_blocks = [], byoipv6cidr_details = [], cidr_block = "10.0.0.0/16", cidr_blocks = ["10.0.0.0/16", "10.1.0.0/16"], compartment_id = "ocid1.compartment.oc1..net", default_dhcp_options_id = "", default_route_table_id = "", default_security_list_id = "", defined_tags = {}, display_name = "", dns_label = "", freeform_tags = {}, id = "ocid1.vcn.oc1..v", ipv6cidr_blocks = [], ipv6private_cidr_blocks = [], is_ipv6enabled = false, is_oracle_gua_allocation_enabled = false, security_attributes = {}, state = "AVAILABLE", time_created = "", vcn_domain_name = "" },
        { byoipv6cidr_blocks = [], byoipv6cidr_details = [], cidr_block = "192.168.0.0/16", cidr_blocks = ["192.168.0.0/16"], compartment_id = "ocid1.compartment.oc1..net", default_dhcp_options_id = "", default_route_table_id = "", default_security_list_id = "", defined_tags = {}, display_name = "", dns_label = "", freeform_tags = {}, id = "ocid1.vcn.oc1..other", ipv6cidr_blocks = [], ipv6private_cidr_blocks = [], is_ipv6enabled = false, is_oracle_gua_allocation_enabled = false, security_attributes = {}, state = "AVAILABLE", time_created = "", vcn_domain_name = "" },
      ]
    }
  }
  mock_data "oci_identity_availability_domains" {
    defaults = {
      availability_domains = [
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad1", name = "Uocm:IAD-AD-1" },
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad2", name = "Uocm:IAD-AD-2" },
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad3", name = "Uocm:IAD-AD-3" },
      ]
    }
  }
  mock_data "oci_identity_fault_domains" {
    defaults = {
      fault_domains = [
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd1", name = "FAULT-DOMAIN-1" },
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd2", name = "FAULT-DOMAIN-2" },
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd3", name = "FAULT-DOMAIN-3" },
      ]
    }
  }
  mock_data "oci_identity_region_subscriptions" {
    defaults = {
      region_subscriptions = [
        { is_home_region = false, region_key = "IAD", region_name = "us-ashburn-1", state = "READY", tenancy_id = "ocid1.tenancy.oc1..t" },
        { is_home_region = true, region_key = "PHX", region_name = "us-phoenix-1", state = "READY", tenancy_id = "ocid1.tenancy.oc1..t" },
      ]
    }
  }
}

mock_provider "oci" {
  alias = "home"
}

variables {
  captf_contract            = "v1alpha1"
  captf_cluster             = { name = "prod", namespace = "team-a" }
  captf_object              = { kind = "TerraformCluster", name = "prod", namespace = "team-a" }
  captf_tags                = { "captf.io/cluster" = "prod", "captf.io/kind" = "TerraformCluster" }
  control_plane_endpoint    = null
  kubernetes_version        = null
  control_plane_initialized = false
  cluster_network           = null
  compartment_id            = "ocid1.compartment.oc1..c"
  network_compartment_id    = "ocid1.compartment.oc1..net"
  region                    = "us-ashburn-1"
  control_plane_subnet_id   = "ocid1.subnet.oc1..cp"
  worker_subnet_id          = "ocid1.subnet.oc1..workers"
  tenancy_id                = "ocid1.tenancy.oc1..t"
  node_identity             = { defined_tag = { namespace = "captf", key = "cluster" } }
}

override_resource {
  target = oci_core_network_security_group.control_plane_nsg
  values = { id = "ocid1.networksecuritygroup.oc1..cp" }
}

override_resource {
  target = oci_core_network_security_group.worker_nsg
  values = { id = "ocid1.networksecuritygroup.oc1..workers" }
}

run "the_exports" {
  override_resource {
    target = oci_network_load_balancer_network_load_balancer.api_load_balancer
    values = {
      id    = "ocid1.networkloadbalancer.oc1..api"
      state = "ACTIVE"
      ip_addresses = [
        { ip_address = "10.0.0.10", ip_version = "IPV4", is_public = false, reserved_ip = [] },
        { ip_address = "203.0.113.7", ip_version = "IPV4", is_public = true, reserved_ip = [] },
      ]
    }
  }

  assert {
    condition = jsonencode(output.exports) == jsonencode({
      api = {
        host                     = "10.0.0.10"
        kube_apiserver           = { backend_set_name = "kube-apiserver", port = 6443 }
        network_load_balancer_id = "ocid1.networkloadbalancer.oc1..api"
        port                     = 6443
      }
      compartment_id             = "ocid1.compartment.oc1..c"
      control_plane_defined_tags = { "captf.cluster" = "team-a/prod/control-plane" }
      control_plane_nsg_id       = "ocid1.networksecuritygroup.oc1..cp"
      control_plane_subnet_id    = "ocid1.subnet.oc1..cp"
      failure_domains = {
        "IAD-AD-1" = { availability_domain = "Uocm:IAD-AD-1" }
        "IAD-AD-2" = { availability_domain = "Uocm:IAD-AD-2" }
        "IAD-AD-3" = { availability_domain = "Uocm:IAD-AD-3" }
      }
      node_defined_tags = { "captf.cluster" = "team-a/prod" }
      region            = "us-ashburn-1"
      schema            = "captf.io/oci-cluster/v1"
      vcn_id            = "ocid1.vcn.oc1..v"
      worker_nsg_id     = "ocid1.networksecuritygroup.oc1..workers"
      worker_subnet_id  = "ocid1.subnet.oc1..workers"
    })
    error_message = "got ${jsonencode(output.exports)}"
  }
  assert {
    # What modules/oci/machinepool requires of the exports.
    condition     = alltrue([for key in ["schema", "region", "compartment_id", "worker_subnet_id", "worker_nsg_id", "failure_domains", "node_defined_tags"] : contains(keys(output.exports), key)])
    error_message = "the pool's keys are exported"
  }
  assert {
    condition     = jsonencode(output.health) == jsonencode({ healthy = true, message = "API load balancer is ACTIVE", reasons = [], state = "running" })
    error_message = "got ${jsonencode(output.health)}"
  }
  assert {
    condition     = output.api_load_balancer_id == "ocid1.networkloadbalancer.oc1..api"
    error_message = "the load balancer's OCID, as an extra output"
  }
}

run "the_node_identity" {
  command = plan

  assert {
    condition = (
      oci_identity_dynamic_group.node_dynamic_group[0].compartment_id == "ocid1.tenancy.oc1..t"
      && oci_identity_dynamic_group.node_dynamic_group[0].matching_rule == "ALL {instance.compartment.id = 'ocid1.compartment.oc1..c', tag.captf.cluster.value = 'team-a/prod/control-plane'}"
    )
    error_message = "a group in the tenancy of the cluster's control-plane instances; got ${oci_identity_dynamic_group.node_dynamic_group[0].matching_rule}"
  }
  assert {
    condition = oci_identity_policy.node_policy[0].statements == tolist([
      "Allow dynamic-group ${local.dynamic_group_name} to read instance-family in compartment id ocid1.compartment.oc1..c",
      "Allow dynamic-group ${local.dynamic_group_name} to manage load-balancers in compartment id ocid1.compartment.oc1..c",
      "Allow dynamic-group ${local.dynamic_group_name} to manage network-load-balancers in compartment id ocid1.compartment.oc1..c",
      "Allow dynamic-group ${local.dynamic_group_name} to manage volume-family in compartment id ocid1.compartment.oc1..c",
      "Allow dynamic-group ${local.dynamic_group_name} to use virtual-network-family in compartment id ocid1.compartment.oc1..net",
    ]) && oci_identity_policy.node_policy[0].compartment_id == "ocid1.compartment.oc1..c"
    error_message = "got ${jsonencode(oci_identity_policy.node_policy[0].statements)}"
  }
  assert {
    condition     = local.home_region == "us-phoenix-1"
    error_message = "IAM writes go to the home region found among the subscriptions; got ${local.home_region}"
  }
}

run "a_compartment_wide_identity_when_accepted" {
  command = plan

  variables {
    node_identity              = { allow_compartment_wide = true }
    home_region                = "eu-frankfurt-1"
    node_policy_compartment_id = "ocid1.tenancy.oc1..t"
    compartment_id             = "ocid1.tenancy.oc1..t"
  }

  assert {
    condition     = oci_identity_dynamic_group.node_dynamic_group[0].matching_rule == "ALL {instance.compartment.id = 'ocid1.tenancy.oc1..t'}"
    error_message = "got ${oci_identity_dynamic_group.node_dynamic_group[0].matching_rule}"
  }
  assert {
    condition     = endswith(oci_identity_policy.node_policy[0].statements[0], "read instance-family in tenancy") && oci_identity_policy.node_policy[0].compartment_id == "ocid1.tenancy.oc1..t"
    error_message = "a statement about the root compartment says tenancy"
  }
  assert {
    condition     = local.home_region == "eu-frankfurt-1" && length(data.oci_identity_region_subscriptions.tenancy_regions) == 0
    error_message = "a given home region is not looked up"
  }
  assert {
    condition     = output.exports.node_defined_tags == {} && output.exports.control_plane_defined_tags == {}
    error_message = "no defined tag, no node tags"
  }
}

run "no_node_identity_when_disabled" {
  command = plan

  variables {
    node_identity = { enabled = false }
    tenancy_id    = null
  }

  assert {
    condition     = length(oci_identity_dynamic_group.node_dynamic_group) == 0 && length(oci_identity_policy.node_policy) == 0 && output.node_dynamic_group_id == null
    error_message = "no group, no policy"
  }
}

run "node_identity_without_a_tenancy_is_refused" {
  command = plan

  variables {
    tenancy_id = null
  }

  expect_failures = [oci_identity_dynamic_group.node_dynamic_group]
}

run "health_while_the_load_balancer_is_created" {
  plan_options {
    replace = [oci_network_load_balancer_network_load_balancer.api_load_balancer[0]]
  }

  override_resource {
    target = oci_network_load_balancer_network_load_balancer.api_load_balancer
    values = { state = "CREATING" }
  }

  assert {
    condition     = jsonencode(output.health) == jsonencode({ healthy = false, message = "API load balancer is CREATING", reasons = ["LoadBalancerCreating"], state = "pending" })
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "health_of_a_failed_load_balancer" {
  plan_options {
    replace = [oci_network_load_balancer_network_load_balancer.api_load_balancer[0]]
  }

  override_resource {
    target = oci_network_load_balancer_network_load_balancer.api_load_balancer
    values = { state = "FAILED" }
  }

  assert {
    condition     = output.health.state == "degraded" && output.health.reasons == tolist(["LoadBalancerFailed"]) && !output.health.healthy
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "health_of_a_deleting_load_balancer" {
  plan_options {
    replace = [oci_network_load_balancer_network_load_balancer.api_load_balancer[0]]
  }

  override_resource {
    target = oci_network_load_balancer_network_load_balancer.api_load_balancer
    values = { state = "DELETING" }
  }

  assert {
    condition     = output.health.state == "terminated" && output.health.reasons == tolist(["LoadBalancerNotFound"])
    error_message = "got ${jsonencode(output.health)}"
  }
}

run "health_of_an_unknown_state" {
  plan_options {
    replace = [oci_network_load_balancer_network_load_balancer.api_load_balancer[0]]
  }

  override_resource {
    target = oci_network_load_balancer_network_load_balancer.api_load_balancer
    values = { state = "MIGRATING" }
  }

  assert {
    condition     = output.health.state == "unknown" && output.health.reasons == tolist(["UnknownState"])
    error_message = "got ${jsonencode(output.health)}"
  }
}
