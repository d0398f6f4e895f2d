# Failure domains: availability domains where the cluster may use several,
# else the fault domains of its one availability domain; names as the OCI
# cloud controller manager reports zones.

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

run "a_multi_ad_region_spreads_over_its_availability_domains" {
  command = plan

  assert {
    condition     = local.failure_domain_mode == "availability_domain"
    error_message = "auto picks availability domains when there are several"
  }
  assert {
    condition = output.failure_domains == [
      { name = "IAD-AD-1", control_plane = true },
      { name = "IAD-AD-2", control_plane = true },
      { name = "IAD-AD-3", control_plane = true },
    ]
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
  assert {
    condition     = jsonencode(output.exports.failure_domains) == jsonencode({ "IAD-AD-1" = { availability_domain = "Uocm:IAD-AD-1" }, "IAD-AD-2" = { availability_domain = "Uocm:IAD-AD-2" }, "IAD-AD-3" = { availability_domain = "Uocm:IAD-AD-3" } })
    error_message = "got ${jsonencode(output.exports.failure_domains)}"
  }
}

run "a_single_ad_region_spreads_over_its_fault_domains" {
  command = plan

  override_data {
    target = data.oci_identity_availability_domains.region_ads
    values = {
      availability_domains = [{ compartment_id = "ocid1.tenancy.oc1..t", id = "ad1", name = "Uocm:PHX-AD-1" }]
    }
  }

  assert {
    condition     = local.failure_domain_mode == "fault_domain" && data.oci_identity_fault_domains.cluster_fault_domains[0].availability_domain == "Uocm:PHX-AD-1"
    error_message = "auto picks the fault domains of the one availability domain"
  }
  assert {
    condition     = [for fd in output.failure_domains : fd.name] == ["FAULT-DOMAIN-1", "FAULT-DOMAIN-2", "FAULT-DOMAIN-3"]
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
  assert {
    condition     = jsonencode(output.exports.failure_domains["FAULT-DOMAIN-2"]) == jsonencode({ availability_domain = "Uocm:PHX-AD-1", fault_domain = "FAULT-DOMAIN-2" })
    error_message = "a fault domain is placed by its availability and fault domain"
  }
}

run "an_ad_specific_control_plane_subnet_confines_the_cluster_to_its_ad" {
  command = plan

  variables {
    control_plane_subnet_id = "ocid1.subnet.oc1..ad2"
    worker_subnet_id        = "ocid1.subnet.oc1..ad2-workers"
  }

  assert {
    condition     = local.failure_domain_mode == "fault_domain" && data.oci_identity_fault_domains.cluster_fault_domains[0].availability_domain == "Uocm:IAD-AD-2"
    error_message = "the fault domains of the subnet's availability domain"
  }
  assert {
    condition     = alltrue([for fd in values(output.exports.failure_domains) : fd.availability_domain == "Uocm:IAD-AD-2"])
    error_message = "got ${jsonencode(output.exports.failure_domains)}"
  }
}

run "fault_domain_mode_in_a_multi_ad_region_takes_the_first_ad" {
  command = plan

  variables {
    failure_domain_mode = "fault_domain"
  }

  assert {
    condition     = data.oci_identity_fault_domains.cluster_fault_domains[0].availability_domain == "Uocm:IAD-AD-1" && length(output.failure_domains) == 3
    error_message = "got ${jsonencode(output.exports.failure_domains)}"
  }
}

run "availability_domain_mode_with_an_ad_subnet_has_one_domain" {
  command = plan

  variables {
    failure_domain_mode     = "availability_domain"
    control_plane_subnet_id = "ocid1.subnet.oc1..ad3"
    worker_subnet_id        = null
  }

  assert {
    condition     = output.failure_domains == [{ name = "IAD-AD-3", control_plane = true }] && length(data.oci_identity_fault_domains.cluster_fault_domains) == 0
    error_message = "got ${jsonencode(output.failure_domains)}"
  }
}
