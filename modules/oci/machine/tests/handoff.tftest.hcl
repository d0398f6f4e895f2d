# The handoff: the OCI cluster module's own exports (from a run of
# ../cluster over the same mocked provider) build a control-plane machine
# that registers in the cluster's load balancer.

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

run "cluster" {
  module {
    source = "../cluster"
  }

  variables {
    captf_contract            = "v1alpha1"
    captf_cluster             = { name = "prod", namespace = "team-a" }
    captf_object              = { kind = "TerraformCluster", name = "prod", namespace = "team-a" }
    captf_tags                = { "captf.io/cluster" = "prod" }
    control_plane_initialized = false
    compartment_id            = "ocid1.compartment.oc1..c"
    network_compartment_id    = "ocid1.compartment.oc1..net"
    region                    = "us-ashburn-1"
    control_plane_subnet_id   = "ocid1.subnet.oc1..cp"
    worker_subnet_id          = "ocid1.subnet.oc1..workers"
    tenancy_id                = "ocid1.tenancy.oc1..t"
    node_identity             = { defined_tag = { namespace = "captf", key = "cluster" } }
    distribution              = "rke2"
  }
}

run "a_control_plane_machine_on_the_clusters_exports" {
  variables {
    captf_contract        = "v1alpha1"
    captf_cluster         = { name = "prod", namespace = "team-a" }
    captf_object          = { kind = "TerraformMachine", name = "prod-control-plane-abcde", namespace = "team-a" }
    captf_tags            = { "captf.io/cluster" = "prod" }
    captf_cluster_outputs = run.cluster.exports
    machine_name          = "prod-control-plane-abcde"
    bootstrap_data        = "I2Nsb3VkLWNvbmZpZwo="
    bootstrap_format      = "cloud-config"
    failure_domain        = "IAD-AD-3"
    control_plane         = true
    image_id              = "ocid1.image.oc1.iad.node"
  }

  assert {
    condition = (
      oci_core_instance.node_instance[0].availability_domain == "Uocm:IAD-AD-3"
      && oci_core_instance.node_instance[0].create_vnic_details[0].subnet_id == "ocid1.subnet.oc1..cp"
      && oci_core_instance.node_instance[0].create_vnic_details[0].nsg_ids == toset([var.captf_cluster_outputs.control_plane_nsg_id])
      && oci_core_instance.node_instance[0].defined_tags == tomap({ "captf.cluster" = "team-a/prod/control-plane" })
    )
    error_message = "placed, networked and tagged from the cluster's exports"
  }
  assert {
    condition = {
      for k, b in oci_network_load_balancer_backend.api_backends : k => [b.network_load_balancer_id, b.backend_set_name, b.port]
      } == {
      kube_apiserver  = [var.captf_cluster_outputs.api.network_load_balancer_id, "kube-apiserver", 6443]
      rke2_supervisor = [var.captf_cluster_outputs.api.network_load_balancer_id, "rke2-supervisor", 9345]
    }
    error_message = "registered in both of the cluster's backend sets"
  }
}
