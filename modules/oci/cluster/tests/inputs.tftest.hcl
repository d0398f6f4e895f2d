# Inputs the cluster accepts and refuses: variable validation, and the
# checks of the operator's network, which stop the plan at the control-plane
# network security group (a destroy skips them).

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

run "the_operators_network_is_accepted" {
  command = plan

  assert {
    condition     = length(local.network_violations) == 0
    error_message = "got ${jsonencode(local.network_violations)}"
  }
  assert {
    condition = alltrue([
      for nsg in [oci_core_network_security_group.control_plane_nsg, oci_core_network_security_group.worker_nsg, oci_core_network_security_group.api_load_balancer_nsg[0]] :
      nsg.vcn_id == "ocid1.vcn.oc1..v" && nsg.compartment_id == "ocid1.compartment.oc1..c"
    ])
    error_message = "the three NSGs go in the control-plane subnet's VCN, in the cluster's compartment"
  }
  assert {
    condition     = oci_core_network_security_group.control_plane_nsg.freeform_tags == tomap({ "captf_io/cluster" = "prod", "captf_io/kind" = "TerraformCluster" })
    error_message = "the contract's tags, '.' mapped to '_'"
  }
  assert {
    condition     = startswith(oci_core_network_security_group.worker_nsg.display_name, "captf-team-a-prod-") && endswith(oci_core_network_security_group.worker_nsg.display_name, "-workers")
    error_message = "got ${oci_core_network_security_group.worker_nsg.display_name}"
  }
}

run "the_worker_and_load_balancer_subnets_default_to_the_control_planes" {
  command = plan

  variables {
    worker_subnet_id = null
  }

  assert {
    condition     = local.subnet_ids == { control_plane = "ocid1.subnet.oc1..cp", worker = "ocid1.subnet.oc1..cp", api_load_balancer = "ocid1.subnet.oc1..cp" }
    error_message = "got ${jsonencode(local.subnet_ids)}"
  }
  assert {
    condition     = oci_network_load_balancer_network_load_balancer.api_load_balancer[0].subnet_id == "ocid1.subnet.oc1..cp"
    error_message = "the load balancer on the control-plane subnet"
  }
}

run "a_missing_subnet_is_refused" {
  command = plan

  variables {
    worker_subnet_id = "ocid1.subnet.oc1..gone"
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}

run "a_subnet_that_is_not_available_is_refused" {
  command = plan

  variables {
    api_load_balancer_subnet_id = "ocid1.subnet.oc1..terminating"
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}

run "a_subnet_of_another_vcn_is_refused" {
  command = plan

  variables {
    worker_subnet_id = "ocid1.subnet.oc1..elsewhere"
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}

run "an_ad_subnet_outside_the_control_planes_ad_is_refused" {
  command = plan

  variables {
    control_plane_subnet_id = "ocid1.subnet.oc1..ad2"
    worker_subnet_id        = "ocid1.subnet.oc1..ad3"
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}

run "an_ad_subnet_beside_a_regional_control_plane_is_refused" {
  command = plan

  variables {
    worker_subnet_id = "ocid1.subnet.oc1..ad2-workers"
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}

run "ad_subnets_in_the_same_ad_are_accepted" {
  command = plan

  variables {
    control_plane_subnet_id = "ocid1.subnet.oc1..ad2"
    worker_subnet_id        = "ocid1.subnet.oc1..ad2-workers"
  }

  assert {
    condition     = length(local.network_violations) == 0
    error_message = "got ${jsonencode(local.network_violations)}"
  }
}

run "required_variables_are_refused_when_missing" {
  command = plan

  variables {
    compartment_id          = null
    region                  = null
    control_plane_subnet_id = null
  }

  expect_failures = [var.compartment_id, var.region, var.control_plane_subnet_id]
}

run "malformed_variables_are_refused" {
  command = plan

  variables {
    distribution        = "k3s"
    failure_domain_mode = "zone"
    api_allowed_cidrs   = ["not-a-cidr"]
    additional_tags     = { "captf_io/cluster" = "x", a = "1", b = "2", c = "3", d = "4" }
  }

  expect_failures = [var.distribution, var.failure_domain_mode, var.api_allowed_cidrs, var.additional_tags]
}

run "node_identity_without_a_defined_tag_is_refused" {
  command = plan

  variables {
    node_identity = {}
  }

  expect_failures = [var.node_identity]
}

run "more_than_ten_free_form_tags_are_refused" {
  command = plan

  variables {
    captf_tags      = { "captf.io/cluster" = "prod", "captf.io/namespace" = "team-a", "captf.io/kind" = "TerraformCluster", "captf.io/name" = "prod", "captf.io/managed-by" = "captf", "captf.io/template" = "", "extra.one" = "1" }
    additional_tags = { a = "1", b = "2", c = "3", d = "4" }
  }

  expect_failures = [oci_core_network_security_group.control_plane_nsg]
}
